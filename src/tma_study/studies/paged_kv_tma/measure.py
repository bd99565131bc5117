"""Measure the paged_kv_tma probe on a Hopper GPU.

Writes, atomically into ``out_dir``:
- ``attention.csv``  one row per configuration (grid.py): the decode point, page size, load path
                     and TMA load shape (``tma_box``), the compiled kernel's registers and
                     residency, the KV split launched (paged_kv's rule over that residency), time,
                     GB/s of K/V read and TFLOP/s
- ``ceilings.csv``   the same run's pure-read stream (crossover's ``read_stream``: 16-byte loads
                     into registers, no writes; over ``read_ceiling_bytes`` and over as many bytes
                     as each point reads, at each of ``read_ceiling_ctas_per_sm``) and the
                     device-to-device copy of paged_kv (1 GiB, read + write)
- ``kernels.csv``, ``provenance.json``

Correct first, as the paged_kv study: each attention configuration runs paged_kv's check (a
reduced ragged problem against the float64 reference, then the full-size problem, whose output
must be bit-identical to every other kernel's of the point, page size and split count: cp.async
and every TMA shape fill the same tiles), and each read stream's checksum must equal the host's
sum of the buffer's words. Every tensor map of every TMA shape is encoded once before any
timing: a shape the driver refuses is left out (printed, and named in provenance.json). L2 is
flushed before every sample (harness.timing).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tma_study import atomic
from tma_study import gpu as gpu_mod
from tma_study.config import REPO_ROOT
from tma_study.harness import provenance, timing
from tma_study.harness.kernel_builds import StudyKernels, kernel_cache
from tma_study.studies.paged_kv.ceilings import copy_case
from tma_study.studies.paged_kv.device_data import FILL_THREADS, fill_kernel, fresh_seed
from tma_study.studies.paged_kv.measure import TimedPools, check_against_reference, kernel_columns, resident_ctas
from tma_study.studies.paged_kv.problem import timed_problem

from .grid import ProbeConfig, probe_configs
from .kernels import READ_STREAM

READ_THREADS = 256                  # per CTA, as the crossover study's read ceiling
VECTOR_BYTES = 16


def _refused_boxes(configs: list[ProbeConfig]) -> dict[str, str]:
    """{tma_box: the driver's refusal} for each TMA shape whose tensor map the driver does not
    encode (each encoded once over a small pool, no kernel): its configurations are left out,
    saying so, and the other shapes are timed."""
    from numba import cuda
    from tma_kernels import tensor_map
    from tma_kernels.paged_kv.runner import _RAW_DTYPE, TMA_L2_PROMOTION_BYTES
    from tma_kernels.paged_kv.tma_boxes import map_geometry
    pool = cuda.device_array(1 << 22, np.uint8)
    seen, refused = set(), {}
    for config in configs:
        variant = config.variant()
        if variant.load_path != "tma":
            continue
        s = config.sweep
        pages = (1 << 22) // (s.page_size * s.shape.kv_heads * variant.head_bytes)
        dims, strides, box = map_geometry(variant, s.page_size, s.shape.kv_heads, max(1, pages))
        if (dims, strides, box, variant.dtype) in seen:
            continue
        seen.add((dims, strides, box, variant.dtype))
        spec = tensor_map.TensorMapSpec(dtype=_RAW_DTYPE[variant.dtype], global_address=int(
            pool.__cuda_array_interface__["data"][0]), global_dims=dims, global_strides_bytes=strides,
            box_dims=box, swizzle=variant.tma_swizzle, l2_promotion_bytes=TMA_L2_PROMOTION_BYTES)
        try:
            tensor_map.encode(spec)
        except Exception as error:      # the driver's own message, whatever its type
            refused[config.tma_box] = f"{spec}: {error}"
            print(f"[paged_kv_tma] tma_box {config.tma_box!r}: the driver refused its tensor map ({refused[config.tma_box]}); "
                  "its configurations are left out", flush=True)
    return refused


def _attention_case(config: ProbeConfig, runner, pools: TimedPools, sm_count: int):
    """(split, case) of one configuration: paged_kv's check and timed launch under this probe's key."""
    from numba import cuda
    split = config.sweep.split(resident_ctas(runner), sm_count)
    splits = split.num_splits
    state = {}

    def launch(stream):
        runner.launch(state["device"], splits, stream)

    def check():
        check_against_reference(runner, config.sweep, splits)
        device = state["device"] = pools.device_problem(config.sweep, splits)
        device.poison_outputs()
        launch(0)
        cuda.synchronize()
        out = device.output(splits)
        if not np.isfinite(out).all():
            raise timing.CorrectnessError(f"{config.key}: full-size output has non-finite values")
        twin = pools.outputs.setdefault((pools.group, config.sweep.page_size, splits, config.sweep.score_layout), out)
        if twin is not out and not np.array_equal(twin, out):
            raise timing.CorrectnessError(f"{config.key}: output differs from another load path's or TMA "
                                          f"shape's at page size {config.sweep.page_size}, {splits} splits")

    p, s = config.sweep.phase, config.sweep.shape
    out_bytes = 4 * p.batch * p.seqlen_q * s.q_heads * s.head_dim
    case = timing.TimedCase(config.key, launch, check, bytes_read=timed_problem(config.sweep).kv_bytes_read(),
                            bytes_written=out_bytes, label=config.key)
    return split, case


def _read_cases(read_kernel, byte_counts: list[int], ctas_per_sm: list[int], sm_count: int):
    """[(columns, case)]: the pure-read stream over a fresh buffer of each byte count (one pass),
    at each CTAs-per-SM count; checked against the host's sum of the buffer's words."""
    from numba import cuda
    cases = []
    for nbytes in byte_counts:
        state = {}
        vectors = nbytes // VECTOR_BYTES
        mask = (1 << (vectors - 1).bit_length()) - 1        # v & mask == v: one pass over the buffer
        for ctas in ctas_per_sm:
            grid = sm_count * ctas
            out = cuda.device_array(grid * READ_THREADS, np.uint64)

            def launch(stream, grid=grid, out=out, state=state, vectors=vectors, mask=mask):
                read_kernel[grid, READ_THREADS, stream](state["address"], vectors, mask, out)

            def check(launch=launch, out=out, state=state, nbytes=nbytes):
                if "words" not in state:
                    state["words"] = cuda.device_array(nbytes // 4, np.uint32)
                    state["address"] = int(state["words"].__cuda_array_interface__["data"][0])
                words = state["words"]
                fill_kernel()[-(-words.size // FILL_THREADS), FILL_THREADS](
                    words, np.uint64(fresh_seed() >> 1), np.uint32(0xFFFFFFFF))
                out.copy_to_device(np.full(out.size, 0xDEADBEEF, np.uint64))
                launch(0)
                cuda.synchronize()
                want = int(words.copy_to_host().sum(dtype=np.uint64))
                got = int(out.copy_to_host().sum(dtype=np.uint64))
                if got != want:
                    raise timing.CorrectnessError(f"read stream of {nbytes} B: checksum {got:#x}, expected {want:#x}")

            columns = {"ceiling": "read_stream", "bytes_moved": vectors * VECTOR_BYTES, "ctas_per_sm": ctas}
            cases.append((columns, timing.TimedCase(f"ceiling/read_stream/{nbytes}/c{ctas}", launch, check,
                                                    bytes_read=vectors * VECTOR_BYTES)))
    return cases


def _runners(configs: list[ProbeConfig], kernels: StudyKernels) -> dict:
    """{variant: AttentionRunner} for every variant ptxas built (a launch-bounded one it refused
    is left out, with its configurations, saying so)."""
    from tma_kernels.paged_kv.runner import AttentionRunner

    from tma_study.harness.progress import Progress
    variants = sorted({c.variant() for c in configs}, key=lambda v: v.name)
    progress = Progress("paged_kv_tma load", len(variants), every=10)
    runners = {}
    for variant in variants:
        compiled = kernels.compiled(variant.name)
        if isinstance(compiled, str):
            print(f"[paged_kv_tma] {variant.name}: ptxas refused its launch bounds, left out", flush=True)
            continue
        progress.step(variant.name)
        runners[variant] = AttentionRunner(variant, cache=kernel_cache(), kernel=kernels[variant.name])
    return runners


def measure(study: dict, gpu_probe: dict, out_dir: Path) -> None:
    """Run the probe on this GPU and write its raw data into ``out_dir``."""
    from tma_kernels.paged_kv.runner import TMA_L2_PROMOTION_BYTES

    gpu = gpu_mod.require_hopper(gpu_mod.detect())
    started = provenance.utc_now()
    clocks_before = provenance.nvidia_smi_clocks()
    refused = _refused_boxes(probe_configs(study))
    configs = [c for c in probe_configs(study) if c.tma_box not in refused]
    kernels = StudyKernels("paged_kv_tma", study)
    runners = _runners(configs, kernels)
    configs = [c for c in configs if c.variant() in runners]
    pools = TimedPools()
    split_cases = [_attention_case(c, runners[c.variant()], pools, gpu.sm_count) for c in configs]
    kv_bytes = sorted({case.bytes_read for _, case in split_cases})
    read_kernel = kernels[READ_STREAM]
    ceiling_cases = [copy_case(), *_read_cases(read_kernel, sorted({study["read_ceiling_bytes"], *kv_bytes}),
                                               study["read_ceiling_ctas_per_sm"], gpu.sm_count)]
    timing_started = provenance.utc_now()
    print(f"[paged_kv_tma] timing {len(configs)} attention configurations and {len(ceiling_cases)} ceilings",
          flush=True)
    timings = timing.run([case for _, case in ceiling_cases] + [case for _, case in split_cases],
                         study="paged_kv_tma", **study["timing"])

    def timed_columns(case, bytes_moved):
        t = timings[case.key].columns()
        return {**t, "bytes_moved": bytes_moved, "gbps": bytes_moved / (t["time_us_median"] * 1e3)}

    rows = []
    for config, (split, case) in zip(configs, split_cases):
        flops = timed_problem(config.sweep).flops()
        row = {**config.columns(), **split.columns(), **kernel_columns(runners[config.variant()]),
               **timed_columns(case, case.bytes_read), "flops": flops}
        row["tflops"] = flops / (row["time_us_median"] * 1e6)
        rows.append(row)
    ceilings = pd.DataFrame([{**columns, **timed_columns(case, columns["bytes_moved"])}
                             for columns, case in ceiling_cases])
    ceilings["ctas_per_sm"] = ceilings.get("ctas_per_sm", pd.Series(dtype=float)).fillna(0).astype(int)
    record = provenance.build(
        study="paged_kv_tma", gpu=gpu.as_dict(), study_config=study, repo=REPO_ROOT, started=started,
        extra={"nvidia_smi_before": clocks_before, "nvidia_smi_after": provenance.nvidia_smi_clocks(),
               "timer": "cuda-bench (nvbench) cold samples: L2 flushed before every sample; device events",
               "configurations": len(configs), "kernel_variants": len(runners),
               "timing_started_utc": timing_started, **kernels.provenance(),
               "fa3_source": "Dao-AILab/flash-attention@0251105a2fb19d2957484b7f023cd8c115286ced hopper/",
               "tma_l2_promotion_bytes": TMA_L2_PROMOTION_BYTES, "tma_boxes_refused_by_driver": refused})
    timed = kernels.table(sorted(runner.variant.name for runner in runners.values()) + [READ_STREAM])
    with atomic.staged_directory(out_dir) as staging:
        pd.DataFrame(rows).to_csv(staging / "attention.csv", index=False)
        timed.to_csv(staging / "kernels.csv", index=False)
        ceilings.to_csv(staging / "ceilings.csv", index=False)
        (staging / "provenance.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
