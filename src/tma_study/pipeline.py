"""Where the pipeline's files live: the Snakemake rules ask this module, tests can too.

Nothing here runs a job; it maps (config, studies, results label) to paths.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from . import gpu as gpu_mod
from .harness import runs
from .config import ConfigError

TABLE_FORMATS = ("tex", "md")
FIGURE_FORMATS = ("pdf", "png")
RERUN_SUFFIX = "-rerun"
OUTPUTS = "outputs"      # outputs/<label>/: figures and tables of a run other than the committed reference
# config.schema.yaml's rule for results_label and reference_gpu: every results/<label>/ obeys it
LABEL_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]*")
LABEL_RULE = "lower-case letters, digits and dashes, starting with a letter or digit"
# A measurement's label, fixed by the workflow's first parse (common.smk) and inherited by its
# jobs: a cluster job parses the workflow again, maybe on another day.
LABEL_VARIABLE = "TMA_STUDY_RESULTS_LABEL"
TARGETS_VARIABLE = "TMA_STUDY_MEASURE_TARGETS"   # the GPU kinds of a measure_gpus run, for its jobs
DATED_LABEL = re.compile(r".+-[0-9]{4}-[0-9]{2}-[0-9]{2}")


class MissingDataError(FileNotFoundError):
    """Analysis asked for raw data that is neither committed nor measured here."""


class ResultsLabelError(ValueError):
    """A results/<label>/ name that is not allowed, or a measurement that would overwrite committed data."""


def check_label(label: str, where: str) -> str:
    """``label`` when it obeys LABEL_PATTERN; else ResultsLabelError naming ``where`` it came from."""
    if not isinstance(label, str) or not LABEL_PATTERN.fullmatch(label):
        raise ResultsLabelError(f"{where}: {label!r} is not a results label ({LABEL_RULE}); "
                                "rename or remove that folder")
    return label


def committed(root: Path, label: str) -> bool:
    """Does results/<label>/ hold committed data (data this checkout shipped with)?

    In the project's own git repository: files of it are tracked. Elsewhere (an unpacked
    archive): the folder exists and is not a dated label a measurement made here by default.
    """
    from .harness.source import own_repository
    folder = Path(root) / "results" / label
    if own_repository(root):
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "--", f"results/{label}/"],
                                capture_output=True, text=True).stdout
        return bool(listed.strip())
    return folder.is_dir() and not DATED_LABEL.fullmatch(label)


def results_label(config: dict, detect=gpu_mod.detect, majors=(gpu_mod.HOPPER_MAJOR,), root: Path = Path("."),
                  today: dt.date | None = None) -> str:
    """results/<label>/: the reference data, or a new measurement's own folder.

    A measurement goes to ``results_label`` where given, else to the GPU's slug, or where that
    is the reference GPU or holds committed data, to ``<slug>-<UTC date>`` (overwrite_reference:
    the reference folder itself). It never writes into a folder of committed data unless
    ``overwrite_reference`` is true. ``majors``: the compute-capability majors some requested
    study can measure on. Raises GpuRequirementError (before any work) when measure=true cannot
    run here, ResultsLabelError when the label would overwrite committed data.
    """
    if not config["measure"]:
        return check_label(config["reference_gpu"], "config key 'reference_gpu'")
    if config.get("measure_gpus"):       # a cluster's GPU kinds: no GPU needed where Snakemake runs
        return measure_targets(config, root=root, today=today)[0].label
    info = gpu_mod.require_architecture(detect(), tuple(majors))
    return new_label(info.slug, config, root, today, config.get("results_label"))


def new_label(slug: str, config: dict, root: Path, today: dt.date | None = None, label: str | None = None) -> str:
    """Where a measurement on a GPU of this slug goes (results_label's rules); ``label`` where given."""
    overwrite = bool(config.get("overwrite_reference", False))
    if not label:
        label = slug
        if overwrite and label == config["reference_gpu"]:
            pass
        elif label == config["reference_gpu"] or committed(root, label):
            label = f"{slug}-{(today or dt.datetime.now(dt.timezone.utc).date()).isoformat()}"
    check_label(label, "the results label")
    from .harness.provenance_checks import label_gpu
    if label_gpu(label) not in (None, slug.split("-")[0]):
        raise ResultsLabelError(
            f"results/{label}/ names a GPU of model {label_gpu(label).upper()}, but this measurement runs on "
            f"a GPU whose slug is {slug!r}: its provenance would contradict its folder. Choose a label that "
            f"starts with {slug.split('-')[0]!r} or names no GPU model (--config results_label=NAME)")
    if committed(root, label) and not overwrite:
        raise ResultsLabelError(
            f"results/{label}/ holds committed data: a measurement would overwrite it. Choose another "
            "folder (--config results_label=NAME) or allow it (--config overwrite_reference=true)")
    return label


@dataclass(frozen=True)
class MeasureTarget:
    """One GPU kind a measure=true run measures on, and where its data go."""
    label: str                  # results/<label>/
    slug: str | None = None     # the measure job refuses a GPU of another slug (None: any GPU)
    gpu_model: str | None = None  # the scheduler's GPU model the job asks for (None: any GPU)


def measure_targets(config: dict, label: str | None = None, root: Path = Path("."),
                    today: dt.date | None = None) -> list[MeasureTarget]:
    """The GPU kinds a measure=true run measures on: one per ``measure_gpus`` entry (GPU slug ->
    the scheduler's GPU model, each labelled as results_label labels that GPU's measurement),
    else this machine's GPU under ``label`` (results_label's answer)."""
    gpus = config.get("measure_gpus") or {}
    if not gpus:
        return [MeasureTarget(label)] if label is not None else []
    if config.get("results_label"):
        raise ConfigError(f"config keys results_label ({config['results_label']!r}) and measure_gpus "
                          f"({gpus!r}) both set: measure_gpus names each GPU kind's results folder "
                          "(from its slug); leave results_label null")
    return [MeasureTarget(new_label(slug, config, root, today), slug, str(model)) for slug, model in gpus.items()]


def study_config_text(config: dict, name: str) -> str:
    """build/config/<name>.json: the validated config holding study ``name`` alone (a change of
    its section, and only that, reruns the study's compile and measure steps)."""
    alone = {"measure": False, "reference_gpu": config["reference_gpu"], "studies": {name: config["studies"][name]}}
    if "gpu_probe" in config:
        alone["gpu_probe"] = config["gpu_probe"]
    return json.dumps(alone, indent=2, sort_keys=True) + "\n"


def _module_file(module: str) -> str:
    """src/tma_study/... of a module of this package ('tma_study.compile_report' ->
    'src/tma_study/compile_report.py')."""
    return "src/" + module.replace(".", "/") + ".py"


@dataclass(frozen=True)
class Layout:
    studies: dict           # name -> Study, the ones the config asks for
    label: str              # results/<label>/ is read (and, when measuring, written)
    root: Path = Path(".")
    measured_labels: tuple = ()   # other results/<label>/ this run measures (a cluster's GPU kinds)
    # Where figures/, paper/tables/ and paper/generated/ go: the checkout's own for the committed
    # reference, outputs/<label>/ for any other label (own_outputs), so they never overwrite those.
    outputs: str = ""

    def own_outputs(self, committed_reference: str) -> Layout:
        """This layout, its figures and tables under outputs/<label>/ unless ``label`` is the
        committed reference (config/config.yaml's reference_gpu)."""
        return replace(self, outputs="" if self.label == committed_reference else f"{OUTPUTS}/{self.label}/")

    @property
    def figures_dir(self) -> str:
        return f"{self.outputs}figures"

    @property
    def tables_dir(self) -> str:
        return f"{self.outputs}paper/tables"

    @property
    def generated_dir(self) -> str:
        return f"{self.outputs}paper/generated"

    @property
    def report_dir(self) -> str:
        """The HTML report's table pages (workflow/rules/report.smk)."""
        return f"{self.outputs}report" if self.outputs else "build/report"

    @property
    def results(self) -> str:
        return f"results/{self.label}"

    def figure_study(self) -> dict[str, str]:
        return {fig: name for name, study in self.studies.items() for fig in study.figures}

    def raw_files(self, study: str) -> list[str]:
        names = (*self.studies[study].raw_files, "provenance.json")
        return [f"{self.results}/{study}/{name}" for name in names]

    def read_raw_files(self, study: str) -> list[str]:
        """The raw files of the other studies of this run that ``study``'s aggregate step reads."""
        return [f for other in self.studies[study].reads_raw_of if other in self.studies
                for f in self.raw_files(other)]

    def overlay_read_raw_files(self, study: str, label: str) -> list[str]:
        """The raw files of the other studies that ``study``'s aggregate step reads for the run in
        results/<label>/: that run's own where it has them, else this run's (the aggregate falls back
        to a run of the reference GPU, e.g. gemm_cluster.aggregate.multicast_dir)."""
        out = []
        for other in self.studies[study].reads_raw_of:
            if other not in self.studies:
                continue
            names = (*self.studies[other].raw_files, "provenance.json")
            own = [f"results/{label}/{other}/{name}" for name in names]
            out += own if all((self.root / f).is_file() for f in own) else self.raw_files(other)
        return out

    def repeat_files(self, study: str) -> list[str]:
        """Raw data of a second run of the same sweep (results/<label>-rerun/), when present (and
        not the same run as this one: a copy of it is no second run)."""
        label = f"{self.label}{RERUN_SUFFIX}"
        if label not in self.overlay_labels(study):
            return []
        return [f"results/{label}/{study}/{f}" for f in self.studies[study].raw_files]

    def derived_files(self, study: str) -> list[str]:
        return [f"{self.results}/{study}/derived/{f}" for f in self.studies[study].derived_files]

    def code_files(self, study: str) -> list[str]:
        """The study's Python code and raw-data schema, and the shared report code: editing them
        reruns the analysis."""
        files = sorted((self.root / "src/tma_study/studies" / study).glob("*.py"))
        own = files[:]
        files += sorted((self.root / "src/tma_study/studies" / study).glob("*.yaml"))
        files += sorted((self.root / "src/tma_study/report").glob("*.py"))
        # the shared GEMM library, for the studies that import it (their rows, verdicts, tables)
        if any("tma_study.gemm_lib" in path.read_text() for path in own):
            files += sorted((self.root / "src/tma_study/gemm_lib").glob("*.py"))
        return [str(f.relative_to(self.root)) for f in files]

    def kernel_code_files(self, study: str) -> list[str]:
        """The code that decides which kernels the compile step builds and checks for ``study``:
        the shared compile code and the modules of the study's ``kernels``, ``compile`` and
        ``compile_inputs`` entry points."""
        declared = self.studies[study]
        entries = [getattr(declared, which) for which in ("kernels", "compile", "compile_inputs")]
        modules = {entry.partition(":")[0] for entry in entries if entry}
        files = ["src/tma_study/harness/kernel_builds.py", "src/tma_study/compile_report.py"]
        return files + sorted(path for path in map(_module_file, modules) if path not in files)

    def compile_inputs(self, study: str, study_config: dict) -> list[str]:
        """Files the study's compile step reads that its own build rules make first (none for a
        numba study; gemm: the reports and libraries of its per-variant nvcc jobs)."""
        declared = self.studies[study]
        return [] if declared.compile_inputs is None else list(declared.entry("compile_inputs")(study_config))

    def kernel_table_code_files(self, study: str) -> list[str]:
        """The code of the study's ``kernel_table`` entry point."""
        return [_module_file(self.studies[study].kernel_table.partition(":")[0])]

    def table_files(self, study: str) -> list[str]:
        return [f"{self.tables_dir}/{t}.{ext}" for t in self.studies[study].tables for ext in TABLE_FORMATS]

    def kernel_table_files(self, study: str) -> list[str]:
        return [f"{self.tables_dir}/{study}_kernels.{ext}" for ext in TABLE_FORMATS]

    def all_outputs(self) -> list[str]:
        outputs = []
        for name, study in self.studies.items():
            outputs += self.derived_files(name)
            outputs += [f"{self.figures_dir}/{fig}.{ext}" for fig in study.figures for ext in FIGURE_FORMATS]
            outputs += self.table_files(name) + self.kernel_table_files(name)
        return outputs + self.paper_outputs()

    # ------------------------------------------------------------ other runs, claims, paper

    def overlay_labels(self, study: str) -> list[str]:
        """Other results/<label>/ folders with a complete run of ``study``, or that this run
        measures (``measured_labels``): figures overlay them, comparison tables set them side by side.

        Each name must be a valid results label (it goes into file names and commands); a folder
        holding part of a run is named with the files it lacks (MissingDataError); a folder holding
        the same run as this label's or an earlier one's (the same sealed raw files) is left out."""
        declared = self.studies[study]
        on_disk = []
        for folder in sorted(p for p in (self.root / "results").glob(f"*/{study}") if p.is_dir()):
            label = check_label(folder.parent.name, f"folder results/{folder.parent.name}/")
            missing = runs.missing_files(folder, declared)
            if missing:
                raise MissingDataError(
                    f"results/{label}/{study}/ lacks {', '.join(missing)}: a run of study {study} holds "
                    f"{', '.join(runs.run_files(declared))}; restore them (git checkout -- results/{label}/) or "
                    "remove the folder")
            if label != self.label and all((folder / n).is_file() for n in runs.run_files(declared)):
                on_disk.append(folder)
        reference = self.root / "results" / self.label / study
        kept, _ = runs.distinct([reference, *on_disk])
        labels = {folder.parent.name for folder in kept if folder != reference}
        return sorted((labels | set(self.measured_labels)) - {self.label})

    def same_runs(self, study: str) -> list[tuple[str, str]]:
        """(folder left out, the folder holding the same run) for each copy of a run of ``study``."""
        folders = sorted(p for p in (self.root / "results").glob(f"*/{study}")
                         if p.is_dir() and p.parent.name != self.label and runs.identity(p) is not None)
        _, same = runs.distinct([self.root / "results" / self.label / study, *folders])
        return [(str(a.relative_to(self.root)), str(b.relative_to(self.root))) for a, b in same]

    def overlay_derived_files(self, study: str) -> list[str]:
        """The derived files of every other run of ``study`` (made by the overlay aggregate rules)."""
        return [f"results/{label}/{study}/derived/{f}" for label in self.overlay_labels(study)
                for f in self.studies[study].derived_files]

    def comparison_files(self, study: str) -> list[str]:
        """paper/tables/<study>_comparison.*: what moved between runs (studies with ``compare``)."""
        if self.studies[study].compare is None:
            return []
        return [f"{self.tables_dir}/{study}_comparison.{ext}" for ext in TABLE_FORMATS]

    def raw_bytes(self, study: str) -> int:
        """The bytes of raw data the study's analysis job reads (this run's and each other run's
        it overlays, those present): how long the job runs, roughly, to start the longest first."""
        folders = [self.root / self.results / study] + [self.root / "results" / label / study
                                                        for label in self.overlay_labels(study)]
        return sum(path.stat().st_size for folder in folders for path in folder.glob("*.csv") if path.is_file())

    def analysis_steps(self, study: str) -> list[list[str]]:
        """The tma-study commands of ``study``'s analysis job, in order: aggregate this run (with
        its repeat, where there is one) and each other run it overlays, then write its paper and
        kernel tables and, for a study with ``compare``, its comparison of the runs."""
        run, repeat = f"{self.results}/{study}", self.repeat_files(study)
        steps = [["aggregate", study, "--raw", run, "--out", f"{run}/derived"]
                 + (["--repeat", str(Path(repeat[0]).parent)] if repeat else [])]
        steps += [["aggregate", study, "--raw", f"results/{label}/{study}", "--out", f"results/{label}/{study}/derived"]
                  for label in self.overlay_labels(study)]
        steps.append(["tables", study, "--derived", f"{run}/derived", "--provenance", f"{run}/provenance.json",
                      "--kernels", f"{run}/kernels.csv", "--out", self.tables_dir])
        if self.studies[study].compare is not None:
            runs = [f"{label}=results/{label}/{study}/derived" for label in [self.label, *self.overlay_labels(study)]]
            steps.append(["compare", study, "--reference", self.label, *[a for r in runs for a in ("--run", r)],
                          "--out", self.tables_dir])
        return steps

    def claims_files(self) -> list[str]:
        return [f"{self.results}/{name}" for name in ("claims.tsv", "claims.md", "claims_by_run.tsv", "claims_by_gpu.tsv")]

    def paper_outputs(self) -> list[str]:
        """What the paper tier makes without TeX: claims, rules of thumb, macros, comparisons."""
        outputs = self.claims_files()
        outputs += [f"{self.tables_dir}/{name}.{ext}" for name in ("rules_of_thumb", "rules_refuted")
                    for ext in TABLE_FORMATS]
        outputs += [f"{self.generated_dir}/{name}.tex"
                    for name in ("macros", "studies", "studies_appendix", "claims", "projection")]
        return outputs + [f for name in self.studies for f in self.comparison_files(name)]

    def measurable_on(self, major: int) -> tuple[Layout, list[str]]:
        """This layout minus the studies that cannot measure on a GPU of this compute-capability
        major (e.g. the Hopper-only studies on a B200), and their names."""
        skipped = [name for name, study in self.studies.items() if major not in study.architectures]
        kept = {name: study for name, study in self.studies.items() if name not in skipped}
        return replace(self, studies=kept), skipped

    def without_absent_optional_studies(self) -> tuple[Layout, list[str]]:
        """This layout minus the studies that allow it and have no raw data at all, and their names."""
        def absent(name):
            return not any((self.root / f).exists() for f in self.raw_files(name))
        skipped = [name for name, study in self.studies.items()
                   if study.skip_analysis_without_data and absent(name)]
        kept = {name: study for name, study in self.studies.items() if name not in skipped}
        return replace(self, studies=kept), skipped

    def check_raw_data_present(self) -> None:
        """Raise MissingDataError naming every raw file that analysis needs and lacks (the
        kernels the data were measured with included: the kernel tables read them)."""
        needed = [f"{self.results}/{study}/{name}" for study, s in self.studies.items() for name in s.measured_files]
        missing = [f for f in needed if not (self.root / f).exists()]
        if missing:
            raise MissingDataError(
                "analysis needs raw data that is not here: " + ", ".join(missing) + ". Restore the "
                "committed reference data (git checkout -- results/) or measure on a Hopper GPU "
                "with --config measure=true.")
