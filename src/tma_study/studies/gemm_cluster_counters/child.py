"""The process ncu profiles for the gemm_cluster_counters study (measure.py runs it under ncu with
profiling off from the start):

    python -m tma_study.studies.gemm_cluster_counters.child SPEC_JSON CHECKS_JSON

For each configuration of the spec, in order: a correctness check as gemm_cluster's (fresh random
inputs, D poisoned with NaN, sampled outputs against a float64 dot product), then one launch
between cudaProfilerStart and cudaProfilerStop, so ncu counts exactly one kernel per
configuration, in spec order. The checks go to CHECKS_JSON; progress to stderr. Needs a Hopper GPU.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tma_study import gpu as gpu_mod
from tma_study.gemm_lib import problem as gemm_measure
from tma_study.gemm_lib.abi import GemmLibrary
from tma_study.gemm_lib.shapes import Shape as GemmShape
from tma_study.gemm_lib import problem as paired_measure


def _launcher(handle, problem, size: int, swizzle: int, raster: str):
    """One launch of ``handle`` at this tile order on the default stream (D = A . B^T into problem.d)."""
    return lambda: handle.run_scheduled(problem.a.data_ptr(), problem.b.data_ptr(), problem.d.data_ptr(), size, size,
                                        size, problem.workspace.data_ptr(), problem.workspace.numel(), 0, swizzle,
                                        raster)


def main(spec_file: str, checks_file: str) -> None:
    spec = json.loads(Path(spec_file).read_text())
    torch = gemm_measure._torch()
    gpu_mod.require_hopper(gpu_mod.detect())
    size = int(spec["size"])
    library = GemmLibrary(Path(spec["library"]))
    handles = {p["variant"]: library.variant(p["variant"]) for p in spec["profiled"]}
    workspace = max(h.workspace_bytes(size, size, size) for h in handles.values())
    problems, checks = {}, {}
    for i, p in enumerate(spec["profiled"]):
        dtype = p["dtype"]
        if dtype not in problems:
            problems[dtype] = gemm_measure.Problem(torch, GemmShape("square", "square", size, size, size), dtype,
                                                   workspace)
        problem = problems[dtype]
        run = _launcher(handles[p["variant"]], problem, size, int(p["swizzle"]), p["raster_order"])
        checks[p["key"]] = paired_measure._check(torch, problem, p["key"], run, spec["correctness"])
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        run()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        print(f"[gemm_cluster_counters] {i + 1}/{len(spec['profiled'])} {p['key']}: checked and counted",
              file=sys.stderr, flush=True)
    Path(checks_file).write_text(json.dumps(checks, indent=1, default=str))


if __name__ == "__main__":
    main(*sys.argv[1:3])
