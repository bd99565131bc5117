"""Measure the gemm_cluster study: every TMA cluster variant and its 1x1 sibling at every tile
order, round-robin in one power state per shape.

For each shape (M = N = K = size, one dtype; schedule.py), in this order:

1. every configuration (variant x swizzle x raster order) is checked once as the gemm study
   checks a variant (fresh random inputs, D poisoned with NaN, sampled outputs against a float64
   dot product: gemm.measure.check_sampled, through gemm_paired.measure's check), so a tile order
   that skipped or repeated tiles stops the run before any timing;
2. the round's first configuration runs back to back for ``warmup_s`` (gemm.protocol.preheat), so
   the rounds start in the power state they keep;
3. ``rounds`` rounds, each every configuration once in its own seeded order, every sample
   ``launches`` back-to-back launches between CUDA events with NVML polled while it runs
   (gemm_paired.runner / monitor), no idle gap between samples and no L2 flush.

Writes, atomically into ``out_dir``: ``samples.csv`` (one row per sample), ``kernels.csv`` (the
variants' build reports and what each says of itself) and ``provenance.json``. Needs PyTorch and
the compile step's library (``snakemake -c16 build/compile/gemm_cluster/resources.csv``).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd

from tma_study import atomic
from tma_study import gpu as gpu_mod
from tma_study.config import REPO_ROOT
from tma_study.harness import provenance
from tma_study.harness.kernel_builds import compile_record
from tma_study.gemm_lib import problem as gemm_measure
from tma_study.gemm_lib import protocol as gemm_protocol
from tma_study.gemm_lib import variants as gemm_variants
from tma_study.gemm_lib.abi import GemmLibrary
from tma_study.gemm_lib.shapes import Shape as GemmShape
from tma_study.gemm_lib import problem as paired_measure
from tma_study.gemm_lib.monitor import Monitor
from tma_study.gemm_lib.runner import SampleRunner

from tma_study.gemm_lib import cluster_configs as configs_mod
from . import library as library_mod
from . import schedule

COMPILE_DIR = REPO_ROOT / "build" / "compile" / "gemm_cluster"
DEADLINE_FACTOR, DEADLINE_SLACK_S = 5.0, 60.0
TIMER = ("CUDA events (torch.cuda.Event) around each sample's back-to-back launches on one stream; no L2 flush; "
         "the configurations of a shape round-robin in a seeded order per round, back to back after a warm-up")


def sample_row(sample: schedule.Sample, result: dict) -> dict:
    variant = gemm_variants.parse_name(sample.configuration.variant)
    flop = 2 * sample.size ** 3
    return {"size": sample.size, "dtype": sample.dtype, "m": sample.size, "n": sample.size, "k": sample.size,
            "flop": flop, "round": sample.round, "position": sample.position, "variant": variant.name,
            "family": configs_mod.family_name(variant.mainloop, (variant.tile_m, variant.tile_n, variant.tile_k)),
            "mainloop": variant.mainloop, "tile": variant.tile, "cluster": variant.cluster,
            "swizzle": sample.configuration.swizzle, "raster_order": sample.configuration.raster_order,
            "launches": sample.launches, **result, "tflops": flop / (result["time_us"] * 1e-6) / 1e12}


def measure(study: dict, gpu_probe: dict, out_dir: Path, compile_dir: Path = COMPILE_DIR) -> None:
    torch = gemm_measure._torch()
    gpu = gpu_mod.require_hopper(gpu_mod.detect())
    started = provenance.utc_now()
    clocks_before = provenance.nvidia_smi_clocks()
    chosen = configs_mod.variants(study)
    library = GemmLibrary(library_mod.library_path(compile_dir))
    handles = {v.name: library.variant(v.name) for v in chosen}
    shapes = schedule.shapes(study)
    for shape in shapes:
        for v in chosen:
            if v.dtype == shape.dtype:
                handles[v.name].require(shape.size, shape.size, shape.size)
    workspace = max(h.workspace_bytes(s, s, s) for h in handles.values() for s in study["sizes"])
    estimate = schedule.estimate_seconds(study)
    count = sum(len(configs_mod.configurations(study, shape.dtype)) for shape in shapes)
    print(f"gemm_cluster: {len(shapes)} shapes, {len(chosen)} variants, {count} configurations x "
          f"{study['rounds']} rounds = {count * study['rounds']} samples; estimated {estimate:.0f} s of GPU time",
          flush=True)

    stream = torch.cuda.Stream()
    raw_stream = int(stream.cuda_stream)
    monitor = Monitor(paired_measure._pci_bus_id(gpu))
    print(f"gemm_cluster: clocks from {monitor.describe()}", flush=True)
    if not monitor.available:
        print("gemm_cluster: WARNING: no NVML, so no SM clock per sample: equal power states cannot be shown",
              file=sys.stderr, flush=True)
    runner = SampleRunner(torch, stream, monitor, study["clock_poll_s"], study="gemm_cluster")
    deadline_at = time.monotonic() + DEADLINE_FACTOR * estimate + DEADLINE_SLACK_S
    rows, checks, records = [], {}, {}
    for shape in shapes:
        size = shape.size
        shape_started = time.monotonic()
        problem = gemm_measure.Problem(torch, GemmShape("square", "square", size, size, size), shape.dtype, workspace)
        configurations = configs_mod.configurations(study, shape.dtype)

        def launcher(c: configs_mod.Configuration, on_stream: int):
            handle = handles[c.variant]
            return lambda: handle.run_scheduled(problem.a.data_ptr(), problem.b.data_ptr(), problem.d.data_ptr(),
                                                size, size, size, problem.workspace.data_ptr(),
                                                problem.workspace.numel(), on_stream, c.swizzle, c.raster_order)

        for c in configurations:          # on the default stream; each also the configuration's first launch
            checks[f"{size}/{c.key}"] = paired_measure._check(torch, problem, c.key, launcher(c, 0), study["correctness"])
        print(f"[gemm_cluster] {size}^3 {shape.dtype}: {len(configurations)} configurations passed their "
              "correctness checks", flush=True)
        launchers = {c.key: launcher(c, raw_stream) for c in configurations}
        rounds = schedule.plan(study, shape)
        record = {"temperature_c_before": monitor.temperature_c(), "configurations": len(configurations),
                  "launches_per_sample": rounds[0][0].launches, "warmup_configuration": rounds[0][0].kernel}
        with torch.cuda.stream(stream):
            record["warmup"] = gemm_protocol.preheat(launchers[rounds[0][0].kernel], stream.synchronize,
                                                     study["warmup_s"])
        rounds_started = time.monotonic()
        for samples in rounds:
            left = deadline_at - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"gemm_cluster: past the run's deadline ({DEADLINE_FACTOR:.0f} x the estimated "
                                   f"{estimate:.0f} s + {DEADLINE_SLACK_S:.0f} s) at {size}^3 {shape.dtype}")
            results = runner.run(samples, launchers, left, rounds_started)
            rows += [sample_row(s, r) for s, r in zip(samples, results)]
            print(f"[gemm_cluster] {size}^3 {shape.dtype}: round {samples[0].round + 1}/{len(rounds)}  "
                  f"elapsed {time.monotonic() - rounds_started:.1f} s", flush=True)
        record.update({"seconds": round(time.monotonic() - shape_started, 3),
                       "rounds_seconds": round(time.monotonic() - rounds_started, 3),
                       "temperature_c_after": monitor.temperature_c()})
        records[f"{size}/{shape.dtype}"] = record
        problem.release()
        torch.cuda.empty_cache()
    frame = pd.DataFrame(rows)
    frame["measured_on"] = gpu.name

    resources = pd.read_csv(compile_dir / "resources.csv")
    described = pd.DataFrame([{"variant": n, **{f"abi_{k}": v for k, v in h.info().items() if k != "name"}}
                              for n, h in handles.items()])
    kernels = resources.merge(described, on="variant", how="left")
    record = provenance.build(
        study="gemm_cluster", gpu=gpu.as_dict(), study_config=study, repo=REPO_ROOT, started=started,
        extra={"nvidia_smi_before": clocks_before, "nvidia_smi_after": provenance.nvidia_smi_clocks(),
               "compile_step": compile_record(compile_dir), "library": str(library_mod.library_path(compile_dir)),
               "timer": TIMER, "tile_order": "the persistent tile scheduler's max_swizzle_size and raster_order "
                                             "(kernels/gemm/gemm_abi.cuh NAME_run_scheduled); swizzle 1 with the "
                                             "heuristic raster order is CUTLASS's default, the gemm study's",
               "monitor": monitor.describe(), "shapes": records, "correctness": checks,
               "estimated_gpu_seconds": round(estimate, 1), "configurations": len(frame)})
    with atomic.staged_directory(out_dir) as staging:
        frame.to_csv(staging / "samples.csv", index=False)
        kernels.to_csv(staging / "kernels.csv", index=False)
        (staging / "provenance.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"gemm_cluster: wrote {out_dir} ({len(frame)} samples)", flush=True)
