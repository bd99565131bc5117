"""The gemm_cluster study's compile step: it builds nothing of its own.

The gemm study's per-variant nvcc jobs (workflow/rules/gemm.smk) make the objects and reports of
the variants this study times (``compile_inputs``); ``compile_step`` collects the reports into
resources.csv (failing on any SASS check, as gemm's does) and links the objects into one library
beside it, ``libgemm_cluster_sm90.so``, as gemm_paired's compile step does for its candidates.
Every variant exports ``NAME_run_scheduled`` (kernels/gemm/gemm_abi.cuh), the tile order's entry.
"""
from __future__ import annotations

from pathlib import Path

from tma_study.gemm_lib import build as gemm_build

from tma_study.gemm_lib.cluster_configs import ARCH, variants

LIBRARY_NAME = "libgemm_cluster_{arch}.so"


def compile_inputs(study: dict) -> list[str]:
    """The gemm study's object and report of every variant (paths relative to the checkout)."""
    return gemm_build.object_inputs(variants(study))


def library_path(out_dir: Path, arch: str = ARCH) -> Path:
    return Path(out_dir) / LIBRARY_NAME.format(arch=arch)


def compile_step(study, study_config: dict, out_dir: Path, workers: int = 1) -> None:
    """resources.csv of the variants' reports and the library of their objects in ``out_dir``."""
    gemm_build.link_study_library("gemm_cluster", compile_inputs(study_config), out_dir, library_path(out_dir))
