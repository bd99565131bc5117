"""The heldout study's compile step: every case's two Triton kernels for sm_90a, no GPU needed.

Compiles in ``workers`` processes into Triton's cache (``builds.CACHE_DIR``, which the measure
step then reads), and writes ``resources.csv``: each kernel's registers, shared memory and the
count of the SASS instructions that tell the mechanisms apart. A TMA kernel without UTMALDG, or a
pointer kernel with one, fails the step: it would not measure what it is named for. Whether a
pointer kernel's loads became cp.async (LDGSTS) or plain loads is recorded, not required.
"""
from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pandas as pd

from tma_study.atomic import atomic_write_text

from . import builds as builds_mod
from . import grid


class SassCheckError(AssertionError):
    """A kernel of the heldout study compiled without (or with) the TMA instruction."""


def _compile(build) -> dict:
    compiled = builds_mod.compile_build(build)
    return {"case": build.case, "variant": build.variant, "kernel": build.kernel, "warps": build.warps,
            **builds_mod.resources(compiled)}


def problems(frame: pd.DataFrame) -> list[str]:
    wrong = frame[((frame.variant == "tma") & (frame.sass_utmaldg == 0))
                  | ((frame.variant == "pointer") & (frame.sass_utmaldg > 0))]
    return [f"{r.case}/{r.variant}: {r.sass_utmaldg} UTMALDG" for r in wrong.itertuples()]


def compile_all(study_config: dict, workers: int = 1) -> pd.DataFrame:
    every = [b for case in grid.cases(study_config) for b in builds_mod.builds(case)]
    if workers > 1:
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            rows = list(pool.map(_compile, every, chunksize=4))
    else:
        rows = [_compile(b) for b in every]
    return pd.DataFrame(rows)


def compile_step(study, study_config: dict, out_dir: Path, workers: int = 1) -> pd.DataFrame:
    from tma_study.harness.provenance import utc_now
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = utc_now()
    frame = compile_all(study_config, workers)
    wrong = problems(frame)
    if wrong:
        raise SassCheckError("heldout kernels that do not load as named: " + "; ".join(wrong))
    record = {"started_utc": started, "finished_utc": utc_now(), "workers": workers, "builds": len(frame),
              "triton_cache": str(builds_mod.CACHE_DIR)}
    atomic_write_text(out_dir / "compile.json", json.dumps(record, indent=2) + "\n")
    atomic_write_text(out_dir / "resources.csv", frame.to_csv(index=False))
    return frame
