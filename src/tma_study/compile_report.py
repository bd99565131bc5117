"""The compile step: every kernel of a study to PTX, cubin and SASS for sm_90a, no GPU needed.

Builds go through the kernel cache (``harness.kernel_builds``), so the measure step and the
tests find them there. Writes ``<name>.ptx`` and ``<name>.sass`` per kernel and
``resources.csv`` (registers, shared memory, stack, spills, and the count of each instruction
the kernel is expected to contain). A kernel whose SASS lacks an expected instruction fails
the step: the mechanism it claims to measure would not be the one running. The measure step
records the same columns for the kernels it timed (``kernels.csv`` beside the raw data),
which the kernel tables read.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tma_study.atomic import atomic_write_text
from tma_study.harness.kernel_builds import (
    COMPILE_RECORD,
    RESOURCE_COLUMNS,
    compile_study_builds,
    missing_instructions,
    resource_row,
)
from tma_study.report.tables import write_table


class SassCheckError(AssertionError):
    """A kernel compiled without an instruction its study relies on."""


def compile_study(study, study_config: dict, out_dir: Path, workers: int = 1) -> pd.DataFrame:
    """Compile every kernel of ``study``'s compile list for ``study_config`` (``workers``
    processes, through the kernel cache), check its SASS, write the PTX, SASS and
    resources.csv into ``out_dir``."""
    from tma_kernels.cache import CacheStats

    from tma_study.harness.provenance import utc_now
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started, stats = utc_now(), CacheStats()
    rows, problems, refused = [], [], []
    for build, compiled in compile_study_builds(study, study_config, workers, stats=stats):
        if isinstance(compiled, str):
            refused.append(build.name)
            continue
        atomic_write_text(out_dir / f"{build.name}.ptx", compiled.ptx)
        atomic_write_text(out_dir / f"{build.name}.sass", compiled.sass)
        problems += missing_instructions(compiled, build.expected_sass)
        rows.append(resource_row(compiled, build.expected_sass))
    if refused:
        print(f"[{study.name}] {len(refused)} builds refused by ptxas (allowed for them, left out): "
              f"{', '.join(refused)}", flush=True)
    if problems:
        raise SassCheckError("; ".join(problems))
    frame = pd.DataFrame(rows, columns=list(RESOURCE_COLUMNS))
    record = {"started_utc": started, "finished_utc": utc_now(), "workers": workers, "builds": len(rows),
              "refused": len(refused), "cache_hits": stats.hits, "compiled": stats.compiled,
              "not_cacheable": stats.uncacheable}
    atomic_write_text(out_dir / COMPILE_RECORD, json.dumps(record, indent=2) + "\n")
    atomic_write_text(out_dir / "resources.csv", frame.to_csv(index=False))
    return frame


def write_kernel_table(study, kernels_csv: Path, tables_dir: Path) -> None:
    """paper/tables/<study>_kernels.*: the resources of the kernels the study's data were
    measured with (results/<gpu>/<study>/kernels.csv)."""
    frame = pd.read_csv(kernels_csv)
    shown = frame.rename(columns={"registers": "regs/thread", "shared_bytes_static": "static smem B",
                                  "spill_store_bytes": "spill B",
                                  "expected_sass": "key SASS instructions (count)"})
    shown = shown[["kernel", "regs/thread", "static smem B", "spill B", "key SASS instructions (count)"]]
    write_table(shown, tables_dir, f"{study.name}_kernels",
                f"Kernels the {study.name} data were measured with, compiled for sm_90a (ptxas 13.0): "
                "resources and the instructions that show each uses the mechanism it is named for.")
