"""What a study declares, so the pipeline can run it without knowing its insides."""
from __future__ import annotations

import importlib
from dataclasses import dataclass

KERNELS_FILE = "kernels.csv"


@dataclass(frozen=True)
class Study:
    """A study's contract with the pipeline.

    Files are relative to ``results/<gpu>/<study>/`` (raw), its ``derived/`` folder
    (aggregates), ``figures/`` and ``paper/tables/``. Entry points are "module:function"
    strings, imported only when run, so analysing data never imports GPU code.
    """

    name: str
    question: str
    raw_files: tuple[str, ...]          # measure writes these (plus provenance.json)
    derived_files: tuple[str, ...]      # aggregate writes these
    figures: tuple[str, ...]            # figures/<figure>.pdf|png, each from notebooks/<figure>.py
    tables: tuple[str, ...]             # paper/tables/<table>.tex|md
    measure: str                        # (study_config, gpu_probe_config, out_dir) -> None; GPU
    aggregate: str                      # (raw_dir, derived_dir, repeat_dir | None) -> None; CPU
    write_tables: str                   # (derived_dir, provenance, tables_dir) -> None; CPU
    # The compile step (CPU, before any GPU time): build/compile/<study>/resources.csv, the
    # resources and SASS checks of every kernel the study times, and compile.json beside it.
    # ``compile``: (study, study_config, out_dir, workers) -> None. The default compiles the numba
    # kernels of the compile list ``kernels`` ((study_config) -> [harness.kernel_builds.KernelBuild])
    # through the kernel cache. A study built by other tools declares its own ``compile`` and, in
    # ``compile_inputs`` ((study_config) -> [paths]), the files its own build rules make first (gemm:
    # one nvcc job per CUTLASS variant, workflow/rules/gemm.smk); the compile rule needs them.
    kernels: str | None = None
    compile: str = "tma_study.compile_report:compile_study"
    compile_inputs: str | None = None
    # paper/tables/<study>_kernels.tex|md from results/<gpu>/<study>/kernels.csv:
    # (study, kernels_csv, tables_dir) -> None
    kernel_table: str = "tma_study.compile_report:write_kernel_table"
    # Optional entry points of the paper tier (None: the study contributes nothing there).
    rules: str | None = None            # (derived_dir, provenance) -> list of rule-of-thumb rows
    macros: str | None = None           # (derived_dir, provenance) -> {LaTeX macro name: text}
    # ({label: derived_dir}, reference label) -> DataFrame (what moved between runs); the default
    # compares the numbers the study's claims stand on (tma_study.report.claim_compare)
    compare: str | None = "tma_study.report.claim_compare:compare_runs"
    # Rules between config keys that the study's config schema cannot state:
    # (study_config, expand=False) -> list of messages naming each key; expand=True (at the
    # measure step's start) may also build the whole sweep.
    check_config: str | None = None
    # True: the analysis-only job leaves the study out (saying so) while results/<label>/<study>/
    # holds no data, instead of failing: for studies whose data may not be committed yet.
    skip_analysis_without_data: bool = False
    # Other studies whose raw data (in the same results folder) the aggregate step reads: the
    # workflow makes them inputs, so a measure run aggregates this study after publishing them.
    reads_raw_of: tuple[str, ...] = ()

    # Compute-capability majors whose GPUs the measure step runs on (9: Hopper, 10: Blackwell).
    architectures: tuple[int, ...] = (9,)
    # Modules the measure step imports beyond the base install (pyproject's "measure" extra):
    # checked when a measurement starts, before any compile or GPU work.
    measure_needs: tuple[str, ...] = ()
    # Rough minutes of the compile step (16 cores, empty kernel cache) and of the measure step
    # (one H200) of the configured sweep. Used only to order a measure run's compile jobs so
    # the GPU waits least (tma_study.schedule); a wrong guess costs time, never correctness.
    cost_minutes: tuple[float, float] = (1.0, 1.0)

    def missing_measure_modules(self) -> list[str]:
        """The modules of ``measure_needs`` this Python cannot import."""
        import importlib.util
        return [m for m in self.measure_needs if importlib.util.find_spec(m) is None]

    @property
    def measured_files(self) -> tuple[str, ...]:
        """What a measure run writes into results/<gpu>/<study>/: the raw files, kernels.csv
        (the resources of the kernels it timed, which the kernel table reads) and provenance.json."""
        kernels = () if KERNELS_FILE in self.raw_files else (KERNELS_FILE,)
        return (*self.raw_files, *kernels, "provenance.json")

    def entry(self, which: str):
        """Import and return the function behind entry point ``which`` (e.g. "measure")."""
        if getattr(self, which) is None:
            raise ValueError(f"study {self.name!r} declares no {which!r} entry point")
        module, _, function = getattr(self, which).partition(":")
        return getattr(importlib.import_module(module), function)
