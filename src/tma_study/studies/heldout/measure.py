"""Measure the heldout study: every case's TMA and pointer kernels, checked, then timed in pairs.

Writes, atomically into ``out_dir``:
- ``cases.csv``    one row per case: its parameters, the operand as the advisor is told it
                   (describe.py), which mechanism the pointer kernel compiled to, both kernels'
                   correctness errors, and the hash of the advisor frozen when it was measured;
- ``samples.csv``  one row per timed sample (harness.paired): case, pair, position, variant, time;
- ``kernels.csv``  each kernel's registers, shared memory and SASS counts (compile.py);
- ``provenance.json``.

The advisor must be a registered version (tma_study.advisor.frozen) before anything runs: its
hash goes into every case. Every kernel is checked against a PyTorch reference on fresh random
inputs with a poisoned output before it is timed; a mismatch stops the run, nothing is written.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pandas as pd

from tma_study import atomic
from tma_study import gpu as gpu_mod
from tma_study.advisor import frozen
from tma_study.config import REPO_ROOT
from tma_study.harness import paired, provenance

from . import builds as builds_mod
from . import compile as compile_mod
from . import describe, grid
from .problems import Problem

WARMUP_LAUNCHES = 3
PROGRESS_EVERY = 10


def alternative(tma: dict, pointer: dict, operand_bytes: float) -> str:
    """What the pointer kernel's loads of the operand became: cp.async where it issues more LDGSTS
    than the TMA kernel (whose own are the index or page-table prefetches) and its shared memory
    holds a transfer of the operand, else plain loads (aggregate.alternatives: the same rule)."""
    more = pointer["sass_ldgsts"] > tma["sass_ldgsts"]
    return "cp_async" if more and pointer["shared_bytes"] >= operand_bytes else "plain_loads"


def _case_row(case, resources: dict, errors: dict, version: dict) -> dict:
    tma, pointer = resources["tma"], resources["pointer"]
    operand = describe.operand(case, tma["shared_bytes"], tma["registers"])
    size = (math.prod(int(v) for v in operand["box_dims"].split("x")) * operand["element_bytes"]
            if operand.get("box_dims") else operand["row_bytes"])
    return {"family": case.family, "case": case.key, **case.params, **operand,
            "alternative": alternative(tma, pointer, size),
            "tma_max_error": errors["tma"], "pointer_max_error": errors["pointer"],
            "advisor_version": version["version"], "advisor_sha256": version["sha256"]}


def _measure_case(case, torch, cleaner, study: dict, sleep_cycles: int, version: dict):
    compiled = {b.variant: (b, builds_mod.compile_build(b)) for b in builds_mod.builds(case)}
    resources = {v: builds_mod.resources(k) for v, (_, k) in compiled.items()}
    problem = Problem(case, torch, compiled)
    errors = {v: problem.check(v) for v in compiled}
    problem.refill()
    launchers = {v: problem.launcher(v) for v in compiled}
    for launch in launchers.values():
        for _ in range(WARMUP_LAUNCHES):
            launch()
    torch.cuda.synchronize()
    samples = paired.time_pairs(torch, launchers, study["timing"]["pairs"], sleep_cycles, cleaner)
    kernels = [{"case": case.key, "variant": v, "kernel": b.kernel, "warps": b.warps, **resources[v]}
               for v, (b, _) in compiled.items()]
    return _case_row(case, resources, errors, version), [{"case": case.key, **s} for s in samples], kernels


def measure(study: dict, gpu_probe: dict, out_dir: Path) -> None:
    import torch
    version = frozen.current_version()          # an unregistered advisor stops the run here
    gpu = gpu_mod.require_hopper(gpu_mod.detect())
    started, clocks_before = provenance.utc_now(), provenance.nvidia_smi_clocks()
    cases = grid.cases(study)
    workers = max(1, min(16, (os.cpu_count() or 2) - 1))
    print(f"heldout: {len(cases)} cases, {2 * len(cases)} kernels; compiling in {workers} processes", flush=True)
    compiled_at = time.monotonic()
    wrong = compile_mod.problems(compile_mod.compile_all(study, workers))
    if wrong:
        raise compile_mod.SassCheckError("heldout kernels that do not load as named: " + "; ".join(wrong))
    print(f"heldout: compiled in {time.monotonic() - compiled_at:.0f} s; advisor version {version['version']} "
          f"({version['sha256'][:12]})", flush=True)
    cleaner = paired.L2Cleaner(torch)
    sleep_cycles = int(study["timing"]["sleep_us"] * gpu.max_sm_clock_khz / 1e3)
    rows, samples, kernels = [], [], []
    timing_started = time.monotonic()
    for i, case in enumerate(cases):
        row, timed, built = _measure_case(case, torch, cleaner, study, sleep_cycles, version)
        rows.append(row)
        samples += timed
        kernels += built
        torch.cuda.empty_cache()
        if (i + 1) % PROGRESS_EVERY == 0 or i + 1 == len(cases):
            print(f"[heldout] {i + 1}/{len(cases)} cases checked and timed, "
                  f"{time.monotonic() - timing_started:.0f} s", flush=True)
    frame = pd.DataFrame(rows)
    frame["measured_on"] = gpu.name
    record = provenance.build(
        study="heldout", gpu=gpu.as_dict(), study_config=study, repo=REPO_ROOT, started=started,
        extra={"nvidia_smi_before": clocks_before, "nvidia_smi_after": provenance.nvidia_smi_clocks(),
               "configurations": len(frame), "timer": "CUDA events (torch.cuda.Event) around one launch per "
               "sample, pairs in alternating order (harness.paired)", "l2_before_each_sample": paired.DESCRIPTION,
               "advisor": version, "triton": _version("triton"), "torch": torch.__version__,
               "timing_seconds": round(time.monotonic() - timing_started, 1)})
    with atomic.staged_directory(out_dir) as staging:
        frame.to_csv(staging / "cases.csv", index=False)
        pd.DataFrame(samples).to_csv(staging / "samples.csv", index=False)
        pd.DataFrame(kernels).to_csv(staging / "kernels.csv", index=False)
        (staging / "provenance.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"heldout: wrote {out_dir} ({len(frame)} cases, {len(samples)} samples)", flush=True)


def _version(package: str) -> str | None:
    import importlib.metadata as md
    try:
        return md.version(package)
    except md.PackageNotFoundError:
        return None
