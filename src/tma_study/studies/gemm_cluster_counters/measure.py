"""Measure the gemm_cluster_counters study: Nsight Compute's counters of each variant at its best
and its default tile order, at M = N = K = ``size``.

1. Before any GPU work: ncu must be on PATH, the orders run's samples
   (results/<orders_from>/gemm_cluster/samples.csv) must hold every variant at ``size``
   (configs.profiled), and the compile step's library must exist.
2. ``ncu --query-metrics`` says which of ncu_run.METRICS this ncu has; the others are left out.
3. ncu runs child.py, which checks each configuration and launches it once between
   cudaProfilerStart/Stop; every metric comes from that one launch (ncu replays it, flushing the
   caches before each pass, with the clocks left as they are).

Writes, atomically into ``out_dir``: ``counters.csv`` (one row per configuration), ``kernels.csv``
(the variants' build reports) and ``provenance.json`` (the ncu version, the metrics left out, each
configuration's correctness check).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pandas as pd

from tma_study import atomic
from tma_study import gpu as gpu_mod
from tma_study.config import REPO_ROOT
from tma_study.harness import provenance
from tma_study.harness.kernel_builds import compile_record
from tma_study.harness.ncu import listed_metrics
from tma_study.gemm_lib import variants as gemm_variants
from tma_study.gemm_lib.cluster_configs import family_name

from . import configs as configs_mod
from . import ncu_run

COMPILE_DIR = REPO_ROOT / "build" / "compile" / "gemm_cluster_counters"
NCU_TIMEOUT_S = 1800
TIMER = ("Nsight Compute: one launch per configuration (cudaProfilerStart/Stop), replayed per metric pass with "
         "the caches flushed before each pass and the clocks left as they are (--clock-control none)")


def _ncu() -> str:
    ncu = shutil.which("ncu")
    if ncu is None:
        raise gpu_mod.GpuRequirementError("gemm_cluster_counters counts with Nsight Compute: put its ncu on PATH "
                                          "(it comes with the CUDA toolkit)")
    return ncu


def _run_text(args: list[str]) -> str:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False).stdout


def row(p: configs_mod.Profiled, size: int, counters: dict) -> dict:
    v = gemm_variants.parse_name(p.variant)
    return {"size": size, "dtype": p.dtype, "variant": p.variant,
            "family": family_name(v.mainloop, (v.tile_m, v.tile_n, v.tile_k)), "mainloop": v.mainloop,
            "tile": v.tile, "cluster": v.cluster, "order": p.order, "swizzle": p.swizzle,
            "raster_order": p.raster_order, **counters}


def measure(study: dict, gpu_probe: dict, out_dir: Path, compile_dir: Path = COMPILE_DIR) -> None:
    ncu = _ncu()
    orders = configs_mod.orders_file(study)
    if not orders.is_file():
        raise FileNotFoundError(f"config key '{configs_mod.KEY}.orders_from': {orders} does not exist")
    chosen = configs_mod.profiled(study, pd.read_csv(orders))
    library = configs_mod.library_path(compile_dir)
    if not library.is_file():
        raise FileNotFoundError(f"{library} is not built: snakemake -c16 build/compile/gemm_cluster_counters/"
                                "resources.csv")
    gpu = gpu_mod.require_hopper(gpu_mod.detect())
    started = provenance.utc_now()
    clocks_before = provenance.nvidia_smi_clocks()
    metrics, left_out = ncu_run.usable(listed_metrics(_run_text([ncu, "--query-metrics"])))
    print(f"gemm_cluster_counters: {len(chosen)} configurations at {study['size']}^3 under ncu, {len(metrics)} "
          f"metrics{f' (this ncu lacks {left_out})' if left_out else ''}", flush=True)
    size = int(study["size"])
    with tempfile.TemporaryDirectory(prefix="gemm_cluster_counters_") as tmp:
        spec_file, checks_file = Path(tmp) / "spec.json", Path(tmp) / "checks.json"
        spec_file.write_text(json.dumps({"size": size, "library": str(library), "correctness": study["correctness"],
                                         "profiled": [{**p.__dict__, "key": p.key} for p in chosen]}))
        result = subprocess.run(ncu_run.command(ncu, metrics, str(spec_file), str(checks_file)), stdout=subprocess.PIPE,
                                stderr=None, text=True, timeout=NCU_TIMEOUT_S, check=False)
        if result.returncode != 0:
            tail = "\n".join(result.stdout.splitlines()[-15:])
            raise RuntimeError(f"ncu over the gemm_cluster_counters child failed ({result.returncode}):\n{tail}")
        counted = ncu_run.parse(result.stdout, metrics, len(chosen))
        checks = json.loads(checks_file.read_text())
    frame = pd.DataFrame([row(p, size, c) for p, c in zip(chosen, counted)])
    frame["measured_on"] = gpu.name
    kernels = pd.read_csv(compile_dir / "resources.csv")
    version = _run_text([ncu, "--version"]).strip().splitlines()
    record = provenance.build(
        study="gemm_cluster_counters", gpu=gpu.as_dict(), study_config=study, repo=REPO_ROOT, started=started,
        extra={"nvidia_smi_before": clocks_before, "nvidia_smi_after": provenance.nvidia_smi_clocks(),
               "compile_step": compile_record(compile_dir), "library": str(library), "timer": TIMER,
               "ncu_version": version[-1] if version else "", "metrics": metrics, "metrics_left_out": left_out,
               "orders_from": str(orders.relative_to(REPO_ROOT)) if orders.is_relative_to(REPO_ROOT) else str(orders),
               "correctness": checks, "configurations": len(frame)})
    with atomic.staged_directory(out_dir) as staging:
        frame.to_csv(staging / "counters.csv", index=False)
        kernels.to_csv(staging / "kernels.csv", index=False)
        (staging / "provenance.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"gemm_cluster_counters: wrote {out_dir} ({len(frame)} configurations)", flush=True)
