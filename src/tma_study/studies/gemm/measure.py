"""Measure the gemm study: every built variant and cuBLAS on every shape, in one run.

Writes, atomically into ``out_dir``:
- ``gemm.csv``       one row per (implementation, dtype, shape): time, TFLOP/s, or why it was not
                     measured (SM100 variants on a Hopper GPU: "not measured: needs an SM100 GPU")
- ``kernels.csv``    each variant's build report (registers, SASS checks, compile seconds) and
                     what the variant says of itself (pipeline stages, shared memory, threads)
- ``provenance.json``

Every (implementation, dtype, shape) is checked before it is timed: fresh random inputs, D
poisoned with NaN, then sampled outputs compared with a float64 dot product of the same
(bf16- or fp8-rounded) inputs, and no NaN left anywhere in D. cuBLAS is torch.matmul (bf16)
and torch._scaled_mm (fp8, unit scales, use_fast_accum=CUBLAS_FP8_FAST_ACCUM) on the same
buffers and stream. Every row says how it accumulates (column ``accumulation``, keys of
``variants.ACCUMULATION``), and provenance.json records the anchor's fp8 setting.

Each (shape, dtype) group is timed under protocol.py's protocol: candidates in a seeded shuffled
order (column ``measure_order``: the row's position in the run), and groups large enough to be
power-limited pre-heated with the shape's cuBLAS GEMM (column ``group_preheat_s``), so the
candidates of a shape are compared in the same power state; provenance.json records both.

Needs PyTorch (the cuBLAS anchor and the buffers) and the libraries of the compile step
(``snakemake -c16 build/compile/gemm/resources.csv``).
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tma_study import atomic
from tma_study import gpu as gpu_mod
from tma_study.config import REPO_ROOT
from tma_study.gemm_lib import protocol
from tma_study.gemm_lib import shapes as shapes_mod
from tma_study.gemm_lib import variants as variants_mod
from tma_study.gemm_lib.abi import GemmLibrary, describe_status
from tma_study.gemm_lib.build import BUILD_DIR, library_path
from tma_study.gemm_lib.problem import (  # noqa: F401  (CUBLAS_FP8_FAST_ACCUM: provenance)
    CUBLAS_FP8_FAST_ACCUM,
    Problem,
    _torch,
    check_sampled,
)
from tma_study.harness import provenance, timing
from tma_study.harness.kernel_builds import compile_record

RESOURCES_CSV = REPO_ROOT / "build" / "compile" / "gemm" / "resources.csv"
ARCH_OF_MAJOR = {9: "sm90", 10: "sm100"}          # compute capability major -> variants it runs
NOT_MEASURED = {"sm90": "not measured: needs an SM90 GPU (Hopper: H100, H200)",
                "sm100": "not measured: needs an SM100 GPU (Blackwell: B200)"}
MEASURED = "measured"
CUBLAS = protocol.CUBLAS
CUBLAS_ACCUMULATION = {"bf16": "fp32", "fp8_e4m3": "fp8_no_promotion" if CUBLAS_FP8_FAST_ACCUM else "fp8_promoted"}
# Budget estimate: nvbench's per-configuration cost in the crossover study (1440 configurations
# in 140 s, checks included) plus the samples themselves at a conservative throughput.
# host and nvbench time per configuration beyond its samples (correctness check, L2 flushes,
# warm-up), fitted to a full run (docs/history.md)
SECONDS_PER_CASE = 0.25
ESTIMATE_TFLOPS = {"bf16": 500.0, "fp8_e4m3": 900.0}


def estimate_seconds(study: dict, arch: str) -> float:
    """GPU seconds the sweep should take on ``arch``: cases x overhead + timed samples + pre-heats."""
    total = protocol.preheat_total_s(study, arch)
    for variant_or_anchor in [*variants_mod.variants(study, arch), *((CUBLAS, d) for d in _dtypes(study, arch))]:
        dtype = variant_or_anchor[1] if isinstance(variant_or_anchor, tuple) else variant_or_anchor.dtype
        for shape in shapes_mod.shapes(study):
            run_s = shape.flop / (ESTIMATE_TFLOPS[dtype] * 1e12)
            total += SECONDS_PER_CASE + (study["timing"]["min_samples"] + 2) * run_s
    return total


def _dtypes(study: dict, arch: str) -> list[str]:
    return protocol.dtypes(study, arch)


class Problems:
    """At most one (shape, dtype) problem alive: cases are timed grouped by shape and dtype."""

    def __init__(self, torch, workspace_bytes: int):
        self.torch, self.workspace_bytes, self.current = torch, workspace_bytes, None

    def get(self, shape: shapes_mod.Shape, dtype: str) -> Problem:
        if self.current is None or (self.current.shape, self.current.dtype) != (shape, dtype):
            if self.current is not None:
                self.current.release()
                self.current = None
                self.torch.cuda.empty_cache()
            self.current = Problem(self.torch, shape, dtype, self.workspace_bytes)
        return self.current


def _stream_context(torch, stream):
    return torch.cuda.stream(torch.cuda.ExternalStream(int(stream))) if int(stream) else torch.cuda.stream(None)


def _variant_case(torch, problems: Problems, variant, shape, dtype, correctness, checks: dict) -> timing.TimedCase:
    key = f"{variant.name}/{shape.key}"

    def launch(stream):
        p = problems.get(shape, dtype)
        variant.run(p.a.data_ptr(), p.b.data_ptr(), p.d.data_ptr(), shape.m, shape.n, shape.k,
                    p.workspace.data_ptr(), p.workspace.numel(), int(stream))

    def check():
        p = problems.get(shape, dtype)
        p.refill()
        launch(0)
        torch.cuda.synchronize()
        checks[key] = check_sampled(torch, p.a, p.b, p.d, correctness, key)

    return timing.TimedCase(key, launch, check, label=key)


def _cublas_case(torch, problems: Problems, shape, dtype, correctness, checks: dict) -> timing.TimedCase:
    key = f"{CUBLAS}_{dtype}/{shape.key}"

    def launch(stream):
        with _stream_context(torch, stream):
            problems.get(shape, dtype).cublas()

    def check():
        p = problems.get(shape, dtype)
        p.refill()
        d = p.cublas()
        torch.cuda.synchronize()
        checks[key] = check_sampled(torch, p.a, p.b, d, correctness, key)

    return timing.TimedCase(key, launch, check, label=key)


def _preheat(torch, problems: Problems, group: protocol.Group, done: dict):
    """The group's pre-heat (TimedCase.prepare of its first timed candidate); records what ran."""
    def prepare():
        p = problems.get(group.shape, group.dtype)
        done[(group.shape.key, group.dtype)] = protocol.preheat(p.cublas, torch.cuda.synchronize, group.preheat_s)
    return prepare


def _rows_not_measured(study: dict, arch: str, reason: str) -> list[dict]:
    return [{**v.columns(), "implementation": "cutlass", **s.columns(), "status": reason}
            for v in variants_mod.variants(study, arch) for s in shapes_mod.shapes(study)]


def _cases(torch, problems: Problems, handles: dict, groups, correctness: dict, arch: str, checks: dict,
           preheats: dict) -> tuple[list, list]:
    """(the timed cases in the protocol's order, [(row columns, its case or None)]): per (shape,
    dtype) group its candidates, cuBLAS or a variant (None: the variant cannot run the shape),
    the first case of a pre-heated group running the pre-heat before its samples."""
    cases, rows = [], []
    for group in groups:                          # grouped by (shape, dtype): one problem alive
        shape, dtype = group.shape, group.dtype
        first = len(cases)
        for candidate in group.candidates:        # in the protocol's (shuffled) order
            if candidate == CUBLAS:
                cases.append(_cublas_case(torch, problems, shape, dtype, correctness, checks))
                rows.append(({"variant": f"{CUBLAS}_{dtype}", "arch": arch, "implementation": CUBLAS,
                              "dtype": dtype, "load": CUBLAS, "accumulation": CUBLAS_ACCUMULATION[dtype],
                              **shape.columns()}, cases[-1]))
                continue
            v = candidate
            status = handles[v.name]._can(shape.m, shape.n, shape.k)
            columns = {**v.columns(), "implementation": "cutlass", **shape.columns()}
            if status != 0:
                rows.append(({**columns, "status": f"not run: can_implement: {describe_status(status)}"}, None))
                continue
            cases.append(_variant_case(torch, problems, handles[v.name], shape, dtype, correctness, checks))
            rows.append((columns, cases[-1]))
        if group.preheat_s > 0 and len(cases) > first:
            cases[first].prepare = _preheat(torch, problems, group, preheats)
    return cases, rows


def _records(rows: list, cases: list, timings: dict, checks: dict, preheats: dict) -> list[dict]:
    """gemm.csv's rows of this architecture: each timed row with its timing, check, TFLOP/s, place
    in the run and its group's pre-heat; a row that did not run with its reason."""
    order = {case.key: i for i, case in enumerate(cases)}
    records = []
    for columns, case in rows:
        if case is None:
            records.append(columns)
            continue
        t = timings[case.key].columns()
        status = MEASURED if t["timing_status"] == "ok" else t["timing_status"]
        ran = preheats.get((columns["shape"], columns["dtype"]), {"seconds": 0.0})
        records.append({**columns, "status": status, **t, **checks[case.key],
                        "tflops": columns["flop"] / (t["time_us_median"] * 1e-6) / 1e12,
                        "measure_order": order[case.key], "group_preheat_s": ran["seconds"]})
    return records


def _protocol_record(timing_config: dict, groups, preheats: dict) -> dict:
    """The protocol as provenance.json records it: order, pre-heat settings and what ran."""
    return {"order": protocol.ORDER_METHOD, "order_seed": timing_config["order_seed"],
            "preheat": protocol.PREHEAT_METHOD,
            "preheat_s": timing_config["preheat_s"],
            "preheat_min_gflop": timing_config["preheat_min_gflop"],
            "preheat_groups_planned": sum(g.preheat_s > 0 for g in groups),
            "preheat_seconds_total": round(sum(p["seconds"] for p in preheats.values()), 3),
            "preheats": [{"shape": key, "dtype": dtype, **ran} for (key, dtype), ran in preheats.items()]}


def measure(study: dict, gpu_probe: dict, out_dir: Path, build_dir: Path = BUILD_DIR) -> None:
    """Run the gemm sweep on this GPU's architecture; other architectures' rows say why not."""
    torch = _torch()
    gpu = gpu_mod.detect()
    if gpu is None or gpu.compute_capability[0] not in ARCH_OF_MAJOR:
        raise gpu_mod.GpuRequirementError(f"the gemm study needs an SM90 or SM100 GPU; found {gpu}")
    arch = ARCH_OF_MAJOR[gpu.compute_capability[0]]
    started = provenance.utc_now()
    clocks_before = provenance.nvidia_smi_clocks()
    library = GemmLibrary(library_path(arch, build_dir))
    chosen = variants_mod.variants(study, arch)
    handles = {v.name: library.variant(v.name) for v in chosen}
    infos = {name: handle.info() for name, handle in handles.items()}
    shapes = shapes_mod.shapes(study)
    estimate = estimate_seconds(study, arch)
    print(f"gemm: {len(chosen)} {arch} variants + cuBLAS on {len(shapes)} shapes; "
          f"estimated {estimate / 60:.1f} min of GPU time, of it "
          f"{protocol.preheat_total_s(study, arch):.0f} s pre-heating", flush=True)

    workspace = max((h.workspace_bytes(s.m, s.n, s.k) for h in handles.values() for s in shapes), default=0)
    problems = Problems(torch, workspace)
    checks: dict[str, dict] = {}
    preheats: dict[tuple[str, str], dict] = {}    # (shape key, dtype) -> what the pre-heat ran
    groups = protocol.plan(study, arch)
    cases, rows = _cases(torch, problems, handles, groups, study["correctness"], arch, checks, preheats)
    timings = timing.run(cases, study="gemm", **protocol.nvbench_timing(study["timing"]))

    other = [a for a in variants_mod.ARCHES if a != arch]
    records = _records(rows, cases, timings, checks, preheats)
    for a in other:
        records += _rows_not_measured(study, a, NOT_MEASURED[a])
    frame = pd.DataFrame(records)
    frame["measured_on"] = gpu.name

    kernels = pd.read_csv(RESOURCES_CSV) if RESOURCES_CSV.exists() else pd.DataFrame({"variant": []})
    described = pd.DataFrame([{"variant": name, **{f"abi_{k}": v for k, v in info.items() if k != "name"}}
                              for name, info in infos.items()])
    kernels = kernels.merge(described, on="variant", how="left") if len(kernels) else described
    record = provenance.build(
        study="gemm", gpu=gpu.as_dict(), study_config=study, repo=REPO_ROOT, started=started,
        extra={"nvidia_smi_before": clocks_before, "nvidia_smi_after": provenance.nvidia_smi_clocks(),
               "compile_step": compile_record(RESOURCES_CSV.parent),
               "measured_arch": arch, "not_measured_arches": {a: NOT_MEASURED[a] for a in other},
               "timer": "cuda-bench (nvbench) cold samples: L2 flushed before every sample; device events",
               "cublas": f"torch {torch.__version__}: matmul (bf16), _scaled_mm (fp8, unit scales, "
                         f"use_fast_accum={CUBLAS_FP8_FAST_ACCUM})",
               "cublas_fp8_use_fast_accum": CUBLAS_FP8_FAST_ACCUM,
               "estimated_gpu_seconds": round(estimate, 1),
               "protocol": _protocol_record(study["timing"], groups, preheats),
               "configurations": len(cases), "library": str(library.path)})
    with atomic.staged_directory(out_dir) as staging:
        frame.to_csv(staging / "gemm.csv", index=False)
        kernels.to_csv(staging / "kernels.csv", index=False)
        (staging / "provenance.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"gemm: wrote {out_dir} ({len(cases)} timed configurations)", flush=True)
