"""Measure the paged_kv study on a Hopper GPU.

Writes, atomically into ``out_dir``:
- ``attention.csv``  one row per configuration (grid.py): time, GB/s of K/V read, TFLOP/s,
                     FA3's rule choice for the same call, the compiled kernel's residency and
                     the split count launched (splits.py: chosen for that kernel's resident
                     slots; ``split_rule``, ``split_reason``, ``grid_ctas``, ``waves``)
- ``ceilings.csv``   device-to-device copy (2 GiB moved: the bar's rate), a copy moving as
                     many bytes as each decode point reads (``d2d_copy_same_bytes``: what a
                     short transfer reaches, timed the same way), and torch
                     ``scaled_dot_product_attention`` on a contiguous (unpaged) KV cache for
                     every decode shape (bf16), same run
- ``provenance.json``

Correct first. Before a configuration is timed, its ``check``:
1. runs the same kernel variant, page size, shape and phase kind on a reduced problem
   (ragged lengths with a partial last page, shuffled pages, NaN poison page behind unused
   page-table entries, fresh random inputs, NaN-poisoned outputs) and compares with the
   float64 reference (problem.reference; tolerance problem.output_tolerance, as in the GPU tests);
2. runs the full-size timed problem with poisoned outputs and requires every output
   finite, and bit-identical to the output of every other kernel (load path, stages,
   producer warps) launched at the same page size and split count (all fill identical
   tiles for one consumer; a different split count combines the KV pieces differently).
The timed problems' pools hold finite random bits (|x| < 2) generated on the device; one
pool per (shape, dtype, phase) is reinterpreted for every page size (same bytes, pages
of different sizes, shuffled page table). K/V are read from HBM: L2 is flushed before
every sample and left holding no dirty line (``timing.l2_after_flush``, harness.l2_state),
and every timed cache is larger than L2.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from tma_study import atomic
from tma_study import gpu as gpu_mod
from tma_study.config import REPO_ROOT
from tma_study.harness import provenance, timing
from tma_study.harness.kernel_builds import StudyKernels, kernel_cache

from .ceilings import copy_case, same_bytes_copy_cases, sdpa_cases
from .device_data import FILL_THREADS, fill_kernel, fresh_seed
from .grid import SweepConfig, sweep_configs
from .kernels import residency_targets, sweep_builds
from .problem import LSE_TOLERANCE, Problem, expected, make_inputs, timed_problem
from .splits import RULE_TEXT, SplitChoice

CHECK_MAX_BATCH = 3
CHECK_DECODE_CONTEXT = 700          # reduced problem: ragged lengths up to this
CHECK_PREFILL_QUERY = 160
CHECK_MAX_SPLITS = 3
CHECK_CELLS_CACHED = 8              # >= page sizes of one (shape, dtype, phase) group (_check_case)
FINITE_MASK = {"bf16": 0xBFFFBFFF, "e4m3": 0xBFBFBFBF}   # clear each exponent's top bit: |x| < 2


def resident_ctas(runner) -> int:
    """CTAs of the runner's compiled kernel that fit on one SM (CUDA's occupancy rule)."""
    from tma_kernels.paged_kv.geometry import resident_ctas_per_sm
    v = runner.variant
    return resident_ctas_per_sm(runner.kernel.get_regs_per_thread(), v.threads,
                                v.dynamic_shared_bytes + runner.kernel.get_shared_mem_per_block())


def fit_residency(runners: dict, variant, min_ctas_per_sm: int):
    """The build of a decode ``variant`` to time, from ``runners`` (variant -> AttentionRunner,
    every launch-bounded build of ``residency_targets`` included, built in parallel). The
    unbounded build unless a bounded one fits more CTAs per SM within its spill allowance,
    as FA3 compiles its kernels with launch bounds (the split count is then chosen for the
    residency of the kept build, splits.py). A bounded build is the same code capped in
    registers: the compile step checks the SASS of the unbounded build,
    tests/cpu/paged_kv/test_paged_kv_occupancy.py that of bounded ones. Measured first on the H200:
    e4m3 cp.async decode at 176 registers fitted one 5-warp CTA per SM."""
    kept = runners[variant]
    for target, allowance in residency_targets(variant, min_ctas_per_sm):
        if resident_ctas(kept) >= target:
            continue
        bounded = runners.get(dataclasses.replace(variant, min_ctas_per_sm=target))
        if bounded is None:             # ptxas refused that register cap (KernelBuild.may_be_refused)
            continue
        spilled = bounded.kernel.get_local_mem_per_thread() - runners[variant].kernel.get_local_mem_per_thread()
        if resident_ctas(bounded) > resident_ctas(kept) and spilled <= allowance:
            kept = bounded
    return kept


def kernel_columns(runner) -> dict:
    """What the compiled kernel is: registers, spills, residency and launch bounds."""
    return {"kernel": runner.variant.name, "registers": runner.kernel.get_regs_per_thread(),
            "local_bytes_per_thread": runner.kernel.get_local_mem_per_thread(),
            "resident_ctas_per_sm": resident_ctas(runner),
            "launch_min_ctas_per_sm": runner.variant.min_ctas_per_sm}


def _check_problem(phase, shape, page_size: int, dtype: str, rng) -> Problem:
    """A reduced problem of a configuration's kind (same shape, dtype, phase kind, page size)."""
    p, s = phase, shape
    seqlen_q = p.seqlen_q if p.name == "decode" else min(p.seqlen_q, CHECK_PREFILL_QUERY)
    batch = min(p.batch, CHECK_MAX_BATCH)
    longest = max(seqlen_q + 1, min(p.context, CHECK_DECODE_CONTEXT if p.name == "decode"
                                    else 2 * seqlen_q + 37))
    lens = [longest] + [int(rng.integers(seqlen_q, longest + 1)) for _ in range(batch - 1)]
    return Problem(batch=batch, seqlen_q=seqlen_q, q_heads=s.q_heads, kv_heads=s.kv_heads,
                   head_dim=s.head_dim, page_size=page_size, seqlens_k=tuple(lens),
                   dtype=dtype, causal=True)


@functools.lru_cache(maxsize=CHECK_CELLS_CACHED)
def _check_case(phase, shape, page_size: int, dtype: str):
    """(seed, inputs, problem.Expected: float64 reference, lse, tolerance) of one reduced problem,
    shared by the configurations of one cell (shape, dtype, phase, page size) that differ only
    in load path, stages, producer warps or decode consumer. Making the inputs and the reference dominated the
    sweep's time on the host (about 1.9 s a configuration for mha_32x128 e4m3 decode on the H200
    machine, 914 configurations in 226 cells). sweep_configs orders a (shape, dtype, phase)
    group's TMA pages before its cp.async pages, so a cell comes back after at most the group's
    other pages: CHECK_CELLS_CACHED covers them (each entry some 10-200 MB of host memory).
    Each cell still gets fresh random inputs."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    inputs = make_inputs(_check_problem(phase, shape, page_size, dtype, rng), rng)
    return seed, inputs, expected(inputs)


def check_against_reference(runner, config: SweepConfig, timed_splits: int) -> None:
    """Step 1 of a configuration's check (raises CorrectnessError): the timed launch's split
    count, capped at CHECK_MAX_SPLITS and at the reduced problem's KV tiles."""
    from numba import cuda
    from tma_kernels.paged_kv.runner import DeviceProblem
    seed, inputs, want = _check_case(config.phase, config.shape, config.page_size, config.dtype)
    problem = inputs.problem
    splits = min(timed_splits, CHECK_MAX_SPLITS,
                 math.ceil(max(problem.seqlens_k) / config.block_n))
    device = DeviceProblem(inputs, max_splits=splits)
    device.poison_outputs()
    runner.launch(device, splits)
    cuda.synchronize()
    out = device.output(splits)
    with np.errstate(invalid="ignore"):
        lse = np.logaddexp2.reduce(device.split_lse(splits), axis=0)
    excess = np.abs(out - want.out) / want.tolerance               # > 1: over tolerance
    out_excess = float(np.max(excess)) if np.isfinite(out).all() else math.inf
    lse_excess = (float(np.max(np.abs(lse - want.lse) / want.lse_tolerance)) if np.isfinite(lse).all()
                  else math.inf)
    if out_excess > 1 or lse_excess > 1:
        raise timing.CorrectnessError(
            f"{config.key}: reduced problem {problem} (seed {seed}, splits {splits}): max |O error| "
            f"{out_excess:.3g} x its tolerance, max |lse error| {lse_excess:.3g} x its tolerance "
            f"(problem.expected: at least {LSE_TOLERANCE} log2 units)")


class TimedPools:
    """The full-size inputs of one (shape, dtype, phase) at a time, allocated on first use."""

    def __init__(self):
        self.group = None
        self.fill = fill_kernel()
        self.outputs = {}           # (group, page_size, splits, consumer) -> first kernel's output
        self.devices = {}

    def ensure(self, config: SweepConfig):
        from numba import cuda
        group = (config.shape, config.dtype, config.phase)
        if group == self.group:
            return
        self.group = None
        self.devices, self.outputs, self.raw, self.words = {}, {}, None, None   # free the last group first
        s, p = config.shape, config.phase
        element_bytes = 2 if config.dtype == "bf16" else 1
        token_bytes = s.kv_heads * s.head_dim * element_bytes
        self.kv_bytes = p.batch * p.context * token_bytes
        q_bytes = p.batch * p.seqlen_q * s.q_heads * s.head_dim * element_bytes
        self.words = cuda.device_array((2 * self.kv_bytes + q_bytes) // 4, np.uint32)
        self.fill[-(-self.words.size // FILL_THREADS), FILL_THREADS](
            self.words, np.uint64(fresh_seed() & (2**63 - 1)), np.uint32(FINITE_MASK[config.dtype]))
        self.raw = self.words.view(np.uint8)
        self.group = group

    def device_problem(self, config: SweepConfig, splits: int):
        """A DeviceProblem over the shared pool bytes with a shuffled page table for this page
        size, and split buffers for ``splits`` KV pieces."""
        from numba import cuda
        from tma_kernels.paged_kv.runner import DeviceProblem
        self.ensure(config)
        key = (config.page_size, splits)
        if key in self.devices:
            return self.devices[key]
        s, p = config.shape, config.phase
        pages_per_sequence = p.context // config.page_size
        num_pages = p.batch * pages_per_sequence
        order = np.random.default_rng(fresh_seed()).permutation(num_pages).astype(np.int32)
        problem = timed_problem(config)
        device = DeviceProblem.__new__(DeviceProblem)
        pool_shape = (num_pages, config.page_size, s.kv_heads, s.head_dim * problem.element_bytes)
        device.problem = problem
        device.k_pool = self.raw[:self.kv_bytes].reshape(pool_shape)
        device.v_pool = self.raw[self.kv_bytes:2 * self.kv_bytes].reshape(pool_shape)
        device.q = self.raw[2 * self.kv_bytes:]
        device.page_table = cuda.to_device(order.reshape(p.batch, pages_per_sequence))
        device.seqlens_k = cuda.to_device(np.full(p.batch, p.context, np.int32))
        device.rows = p.batch * p.seqlen_q * s.q_heads
        device.max_splits = key[1]
        device.partial = cuda.device_array(key[1] * device.rows * s.head_dim, np.float32)
        device.lse = cuda.device_array(key[1] * device.rows, np.float32)
        device.final = cuda.device_array(device.rows * s.head_dim, np.float32)
        device._maps = {}
        self.devices[key] = device
        return device


def _attention_case(config: SweepConfig, runner, pools: TimedPools,
                    sm_count: int) -> tuple[SplitChoice, timing.TimedCase]:
    """(split, case): the split count chosen for this runner's compiled kernel (its resident
    CTAs per SM, after fit_residency) and the timed case that launches with it; the row
    records the same SplitChoice."""
    from numba import cuda
    split = config.split(resident_ctas(runner), sm_count)
    splits = split.num_splits
    state = {}

    def launch(stream):
        runner.launch(state["device"], splits, stream)

    def check():
        check_against_reference(runner, config, splits)
        device = state["device"] = pools.device_problem(config, splits)
        device.poison_outputs()
        launch(0)
        cuda.synchronize()
        out = device.output(splits)
        if not np.isfinite(out).all():
            raise timing.CorrectnessError(f"{config.key}: full-size output has "
                                          f"{int((~np.isfinite(out)).sum())} non-finite values")
        # kernels of one consumer sum in one order; two consumers may differ in tile rows and order
        twin = pools.outputs.setdefault((pools.group, config.page_size, splits, config.score_layout), out)
        if twin is not out and not np.array_equal(twin, out):
            raise timing.CorrectnessError(f"{config.key}: output differs from another {config.score_layout} "
                                          f"kernel's at page size {config.page_size} and {splits} splits")

    p, s = config.phase, config.shape
    out_bytes = 4 * p.batch * p.seqlen_q * s.q_heads * s.head_dim
    return split, timing.TimedCase(config.key, launch, check, bytes_read=timed_problem(config).kv_bytes_read(),
                                   bytes_written=out_bytes, label=config.key)


def _load_builds(study: dict, builds: list) -> tuple[dict, StudyKernels]:
    """({variant: AttentionRunner} for every build of the compile list that ptxas built, the
    StudyKernels they came from): taken from the kernel cache (the compile step filled it; what
    is missing compiles here, on every core) and loaded without compiling again."""
    from tma_kernels.paged_kv.runner import AttentionRunner

    from tma_study.harness.progress import Progress
    kernels = StudyKernels("paged_kv", study)
    refused = [v.name for v in builds if isinstance(kernels.compiled(v.name), str)]
    if refused:
        print(f"[paged_kv] {len(refused)} launch-bounded builds do not compile (register cap too low), "
              f"left out: {', '.join(refused)}", flush=True)
    progress = Progress("paged_kv load", len(builds) - len(refused), every=20)
    loaded = {}
    for variant in builds:
        if variant.name not in refused:
            progress.step(variant.name)
            loaded[variant] = AttentionRunner(variant, cache=kernel_cache(), kernel=kernels[variant.name])
    return loaded, kernels


def measure(study: dict, gpu_probe: dict, out_dir: Path) -> None:
    """Run the whole paged_kv study on this GPU and write its raw data into ``out_dir``."""
    from tma_kernels import numpy_compat
    from tma_kernels.paged_kv.runner import TMA_L2_PROMOTION_BYTES


    gpu = gpu_mod.require_hopper(gpu_mod.detect())
    started = provenance.utc_now()
    clocks_before = provenance.nvidia_smi_clocks()
    configs = sweep_configs(study)
    variants, bounded = sweep_builds(study)
    decode_variants = {c.variant() for c in configs if c.phase.name == "decode"}
    min_ctas = study["decode_min_ctas_per_sm"]
    loaded, kernels = _load_builds(study, variants + bounded)
    runners = {v: fit_residency(loaded, v, min_ctas) if v in decode_variants else loaded[v] for v in variants}
    pools = TimedPools()
    split_cases = [_attention_case(c, runners[c.variant()], pools, gpu.sm_count) for c in configs]
    attention_cases = [case for _, case in split_cases]
    ceiling_cases = [copy_case(), *same_bytes_copy_cases(configs), *sdpa_cases(configs)]
    timing_started = provenance.utc_now()       # the kernels' CPU compile and loading end here
    timings = timing.run([case for _, case in ceiling_cases] + attention_cases, study="paged_kv",
                         **study["timing"])

    def timed_columns(case, bytes_moved):
        t = timings[case.key].columns()
        return {**t, "bytes_moved": bytes_moved, "gbps": bytes_moved / (t["time_us_median"] * 1e3)}

    rows = []
    for config, (split, case) in zip(configs, split_cases):
        flops = timed_problem(config).flops()
        row = {**config.columns(), **split.columns(), **kernel_columns(runners[config.variant()]),
               **timed_columns(case, case.bytes_read), "flops": flops}
        row["tflops"] = flops / (row["time_us_median"] * 1e6)
        rows.append(row)
    ceilings = pd.DataFrame([{**columns, **timed_columns(case, columns["bytes_moved"])}
                             for columns, case in ceiling_cases])
    record = provenance.build(
        study="paged_kv", gpu=gpu.as_dict(), study_config=study, repo=REPO_ROOT, started=started,
        extra={"nvidia_smi_before": clocks_before, "nvidia_smi_after": provenance.nvidia_smi_clocks(),
               "timer": "cuda-bench (nvbench) cold samples: L2 flushed before every sample; device events",
               "configurations": len(configs), "kernel_variants": len(variants),
               "timing_started_utc": timing_started, **kernels.provenance(),
               "fa3_source": "Dao-AILab/flash-attention@0251105a2fb19d2957484b7f023cd8c115286ced hopper/",
               "decode_split_rule": RULE_TEXT,
               "tma_page_lookup": "a tile ahead, before the wait on a free stage (producers.make_tma_producer)",
               "tma_l2_promotion_bytes": TMA_L2_PROMOTION_BYTES,
               "torch_sdpa_measured": any(c["ceiling"] == "torch_sdpa_contiguous" for c, _ in ceiling_cases),
               "numpy_row_stack_shim_applied": numpy_compat.SHIM_APPLIED})
    timed = kernels.table(sorted({runner.variant.name for runner in runners.values()}))
    with atomic.staged_directory(out_dir) as staging:
        pd.DataFrame(rows).to_csv(staging / "attention.csv", index=False)
        timed.to_csv(staging / "kernels.csv", index=False)
        ceilings.to_csv(staging / "ceilings.csv", index=False)
        (staging / "provenance.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
