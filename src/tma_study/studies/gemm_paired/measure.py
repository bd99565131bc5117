"""Measure the gemm_paired study: each bar candidate paired with cuBLAS, in bursts and sustained.

Writes, atomically into ``out_dir``:
- ``samples.csv``   one row per timed sample (schedule.Sample): its state, pair, position, kernel,
                    time per launch, TFLOP/s, and the NVML readings taken while it ran
- ``kernels.csv``   the candidates' build reports (gemm's compile reports) and what each says of itself
- ``provenance.json``

Before any timing, cuBLAS and every candidate are checked as the gemm study checks them (fresh
random inputs, D poisoned with NaN, sampled outputs against a float64 dot product:
gemm.measure.check_sampled); a mismatch stops the run and nothing is written. Samples are timed
with CUDA events around back-to-back launches (runner.py), without an L2 flush: at the bar's
shape each operand is several times the L2 size. Needs PyTorch and the compile step's library
(``snakemake -c16 build/compile/gemm_paired/resources.csv``).
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
from tma_study.gemm_lib import problem as gemm_measure
from tma_study.gemm_lib import protocol as gemm_protocol
from tma_study.gemm_lib.abi import GemmLibrary
from tma_study.gemm_lib.monitor import Monitor
from tma_study.gemm_lib.problem import _check, _pci_bus_id
from tma_study.gemm_lib.runner import SampleRunner
from tma_study.gemm_lib.shapes import Shape
from tma_study.harness import provenance
from tma_study.harness.kernel_builds import compile_record

from . import candidates as candidates_mod
from . import schedule

COMPILE_DIR = REPO_ROOT / "build" / "compile" / "gemm_paired"
ESTIMATE_TFLOPS = 600.0           # for the time estimate only
DEADLINE_FACTOR, DEADLINE_SLACK_S = 5.0, 60.0


def measure(study: dict, gpu_probe: dict, out_dir: Path, compile_dir: Path = COMPILE_DIR) -> None:
    torch = gemm_measure._torch()
    gpu = gpu_mod.require_hopper(gpu_mod.detect())
    started = provenance.utc_now()
    clocks_before = provenance.nvidia_smi_clocks()
    chosen = candidates_mod.candidates(study)
    library = GemmLibrary(candidates_mod.library_path(compile_dir))
    handles = {v.name: library.variant(v.name) for v in chosen}
    size, dtype = study["size"], study["dtype"]
    shape = Shape("square", "square", size, size, size)
    for handle in handles.values():
        handle.require(size, size, size)
    workspace = max(h.workspace_bytes(size, size, size) for h in handles.values())
    problem = gemm_measure.Problem(torch, shape, dtype, workspace)
    names = [v.name for v in chosen]
    plan = schedule.plan(study, names)
    estimate = schedule.estimate_seconds(study, len(names), shape.flop / (ESTIMATE_TFLOPS * 1e12))
    print(f"gemm_paired: {len(names)} candidates x cuBLAS at {size}^3 {dtype}, "
          f"{sum(map(len, plan.values()))} samples; estimated {estimate:.0f} s of GPU time", flush=True)

    checks = {"cublas": _check(torch, problem, "cublas", problem.cublas, study["correctness"])}
    for name, h in handles.items():
        def run(h=h):
            h.run(problem.a.data_ptr(), problem.b.data_ptr(), problem.d.data_ptr(), size, size, size,
                  problem.workspace.data_ptr(), problem.workspace.numel(), 0)
        checks[name] = _check(torch, problem, name, run, study["correctness"])
    print(f"gemm_paired: cuBLAS and {len(handles)} candidates passed their correctness checks", flush=True)

    stream = torch.cuda.Stream()
    raw_stream = int(stream.cuda_stream)

    def cublas():
        with torch.cuda.stream(stream):
            problem.cublas()

    launchers = {schedule.CUBLAS: cublas}
    for name, h in handles.items():
        launchers[name] = (lambda h=h: h.run(problem.a.data_ptr(), problem.b.data_ptr(), problem.d.data_ptr(),
                                             size, size, size, problem.workspace.data_ptr(),
                                             problem.workspace.numel(), raw_stream))
    for launch in launchers.values():        # first launches (module load, cuBLAS heuristics) untimed
        launch()
    stream.synchronize()

    monitor = Monitor(_pci_bus_id(gpu))
    print(f"gemm_paired: clocks from {monitor.describe()}", flush=True)
    if not monitor.available:
        print("gemm_paired: WARNING: no NVML, so no SM clock per sample: the state claims cannot be checked",
              file=sys.stderr, flush=True)
    runner = SampleRunner(torch, stream, monitor, study["clock_poll_s"])
    deadline = DEADLINE_FACTOR * estimate + DEADLINE_SLACK_S
    rows, states = [], {}
    for state in schedule.STATES:
        samples = plan[state]
        state_started = time.monotonic()
        record = {"temperature_c_before": monitor.temperature_c()}
        if state == "burst":
            results = []
            for i in range(0, len(samples), 2):          # one pair at a time, each after its cool-down
                stream.synchronize()
                time.sleep(samples[i].cooldown_s)
                results += runner.run(samples[i:i + 2], launchers, deadline, state_started)
                if (i // 2) % max(1, len(samples) // 20) == 0:
                    print(f"[gemm_paired] burst pair {i // 2 + 1}/{len(samples) // 2}  "
                          f"elapsed {time.monotonic() - state_started:.0f} s", flush=True)
        else:
            with torch.cuda.stream(stream):
                record["warmup"] = gemm_protocol.preheat(problem.cublas, stream.synchronize,
                                                         study["sustained"]["warmup_s"])
            print(f"[gemm_paired] sustained: warmed up {record['warmup']['seconds']:.1f} s, "
                  f"{len(samples)} samples back to back", flush=True)
            results = runner.run(samples, launchers, deadline, state_started)
        record.update({"seconds": round(time.monotonic() - state_started, 3),
                       "temperature_c_after": monitor.temperature_c()})
        states[state] = record
        print(f"[gemm_paired] {state}: {len(samples)} samples in {record['seconds']:.0f} s", flush=True)
        for sample, result in zip(samples, results):
            rows.append({"state": sample.state, "candidate": sample.candidate, "pair": sample.pair,
                         "implementation": sample.implementation, "kernel": f"{sample.kernel}_{dtype}"
                         if sample.kernel == schedule.CUBLAS else sample.kernel,
                         "position": sample.position, "launches": sample.launches, "cooldown_s": sample.cooldown_s,
                         "dtype": dtype, "m": size, "n": size, "k": size, "flop": shape.flop, **result,
                         "tflops": shape.flop / (result["time_us"] * 1e-6) / 1e12})
    frame = pd.DataFrame(rows)
    frame["measured_on"] = gpu.name

    resources = pd.read_csv(compile_dir / "resources.csv")
    described = pd.DataFrame([{"variant": n, **{f"abi_{k}": v for k, v in h.info().items() if k != "name"}}
                              for n, h in handles.items()])
    kernels = resources.merge(described, on="variant", how="left")
    reference = candidates_mod.ranking(pd.read_csv(candidates_mod.reference_csv(study)), size, dtype)
    record = provenance.build(
        study="gemm_paired", gpu=gpu.as_dict(), study_config=study, repo=REPO_ROOT, started=started,
        extra={"nvidia_smi_before": clocks_before, "nvidia_smi_after": provenance.nvidia_smi_clocks(),
               "compile_step": compile_record(compile_dir), "library": str(candidates_mod.library_path(compile_dir)),
               "candidates": reference[reference.variant.isin(names)].to_dict(orient="records"),
               "candidate_rule": candidates_mod.RULE,
               "timer": "CUDA events (torch.cuda.Event) around each sample's back-to-back launches on one stream; "
                        "no L2 flush",
               "monitor": monitor.describe(), "states": states, "correctness": checks,
               "cublas": f"torch {torch.__version__}: matmul (bf16), _scaled_mm (fp8, unit scales, "
                         f"use_fast_accum={gemm_measure.CUBLAS_FP8_FAST_ACCUM})",
               "estimated_gpu_seconds": round(estimate, 1), "configurations": len(frame)})
    with atomic.staged_directory(out_dir) as staging:
        frame.to_csv(staging / "samples.csv", index=False)
        kernels.to_csv(staging / "kernels.csv", index=False)
        (staging / "provenance.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"gemm_paired: wrote {out_dir} ({len(frame)} samples)", flush=True)
