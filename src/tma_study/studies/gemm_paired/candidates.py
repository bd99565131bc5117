"""Which GEMM variants the gemm_paired study times, and its compile step.

The candidates are chosen from the gemm study's data by a rule, not by name: in
``results/<reference_label>/gemm/gemm.csv``, the SM90 CUTLASS rows of the configured dtype whose
problem is M = N = K = ``size`` and that were measured; each variant's median TFLOP/s over those
rows (the square sweep and a projection layer can be the same problem: the reference has
8192^3 twice, square and Llama-3-70B q/o at 8192 tokens); the ``tma_candidates`` fastest TMA
variants and the ``cpasync_candidates`` fastest cp.async ones (ties by name).

The compile step builds nothing: the gemm study's per-variant nvcc jobs (workflow/rules/gemm.smk)
make the candidates' objects and reports (``compile_inputs``); ``compile_step`` collects the
reports into resources.csv (failing on any SASS check, as gemm's does) and links the objects into
one library beside it, ``libgemm_paired_<arch>.so``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.config import REPO_ROOT
from tma_study.gemm_lib import build as gemm_build
from tma_study.gemm_lib import variants as gemm_variants

ARCH = "sm90"
MEASURED = "measured"                 # gemm.csv's status of a timed row
LIBRARY_NAME = "libgemm_paired_{arch}.so"
RULE = ("the fastest SM90 CUTLASS variants of each load mechanism by median TFLOP/s over the measured rows "
        "of the reference gemm.csv at M = N = K = size in dtype (ties by name)")


def reference_csv(study: dict, root: Path = REPO_ROOT) -> Path:
    return Path(root) / "results" / study["reference_label"] / "gemm" / "gemm.csv"


def ranking(gemm: pd.DataFrame, size: int, dtype: str) -> pd.DataFrame:
    """Measured SM90 CUTLASS variants at M = N = K = ``size`` in ``dtype``: variant, load, median
    TFLOP/s over its rows and the rows behind it, fastest first within each load (ties by name)."""
    rows = gemm[(gemm.arch == ARCH) & (gemm.implementation == "cutlass") & (gemm.status == MEASURED)
                & (gemm.dtype == dtype) & (gemm.m == size) & (gemm.n == size) & (gemm.k == size)]
    ranked = (rows.groupby(["load", "variant"]).tflops.agg(["median", "size"]).reset_index()
              .rename(columns={"median": "tflops_median", "size": "rows"}))
    return ranked.sort_values(["load", "tflops_median", "variant"], ascending=[True, False, True]).reset_index(drop=True)


def choose(gemm: pd.DataFrame, study: dict) -> list[str]:
    """The candidates' names: the fastest TMA variants, then the fastest cp.async ones."""
    ranked = ranking(gemm, study["size"], study["dtype"])
    chosen = []
    for load, count in (("tma", study["tma_candidates"]), ("cpasync", study["cpasync_candidates"])):
        names = ranked[ranked.load == load].variant.head(count).tolist()
        if len(names) < count:
            raise ValueError(f"gemm_paired: {reference_csv(study)} has {len(names)} measured {load} variants at "
                             f"{study['size']}^3 {study['dtype']}, the config asks for {count}")
        chosen += names
    return chosen


def candidates(study: dict, root: Path = REPO_ROOT) -> list[gemm_variants.Variant]:
    """The candidate variants of the config, from its reference data (ValueError naming the file when
    it is missing)."""
    path = reference_csv(study, root)
    if not path.is_file():
        raise ValueError(f"gemm_paired chooses its candidates from {path}, which does not exist "
                         "(studies.gemm_paired.reference_label names a results folder with gemm data)")
    return [gemm_variants.parse_name(name) for name in choose(pd.read_csv(path), study)]


def compile_inputs(study: dict) -> list[str]:
    """The gemm study's object and report of every candidate (paths relative to the checkout)."""
    return gemm_build.object_inputs(candidates(study))


def library_path(out_dir: Path, arch: str = ARCH) -> Path:
    return Path(out_dir) / LIBRARY_NAME.format(arch=arch)


def compile_step(study, study_config: dict, out_dir: Path, workers: int = 1) -> None:
    """resources.csv of the candidates' reports and the library of their objects in ``out_dir``."""
    gemm_build.link_study_library("gemm_paired", compile_inputs(study_config), out_dir, library_path(out_dir))
