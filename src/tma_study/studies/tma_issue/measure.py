"""Measure the tma_issue study on a Hopper GPU.

Writes, atomically into ``out_dir``:
- ``chase.csv``       per chase form (kernels/tma_issue/chase.py), working set and level: one hop's
                      SM cycles and nanoseconds, a one-thread clock64 pointer chase; ``hbm``: the
                      chase right after an L2 flush, ``l2``: the same chunks again
- ``issue_rate.csv``  per mechanism, transfer size and issuing threads: nvbench cold samples of the
                      issue-rate kernel (issue_rate.py), copies per SM per microsecond
- ``kernels.csv``, ``provenance.json``

Every chase is checked against the host's path (its final chunk) and every issue-rate
configuration against the host's checksums before it is timed.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tma_study import atomic
from tma_study import gpu as gpu_mod
from tma_study.config import REPO_ROOT
from tma_study.harness import pointer_chase, provenance, timing
from tma_study.harness.buffers import fresh_rng
from tma_study.harness.chunk_maps import chunk_tensor_map
from tma_study.harness.kernel_builds import StudyKernels
from tma_study.harness.stats import summarize

from .issue_rate import IssueRateSource, dynamic_shared_bytes, issue_rate_case, issue_rate_configs, issue_rate_row

ELEMENT_BYTES = 4
L2_FLUSH_FACTOR = 2                # flush by writing this many L2 sizes of scratch


def chase_buffer(successor: np.ndarray, nbytes: int, size: int, rng):
    """(device array, host words): word 0 of a chunk its successor's index, words 2-3 its
    successor's address, the rest random."""
    from numba import cuda
    words = rng.integers(0, 2**32, size=nbytes // ELEMENT_BYTES, dtype=np.uint32)
    device = cuda.device_array(words.size, np.uint32)
    base = np.uint64(int(device.__cuda_array_interface__["data"][0]))
    first = np.arange(successor.size) * (size // ELEMENT_BYTES)
    addresses = base + successor.astype(np.uint64) * np.uint64(size)
    words[first] = successor
    words[first + 2] = (addresses & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    words[first + 3] = (addresses >> np.uint64(32)).astype(np.uint32)
    device.copy_to_device(words)
    return device, words


def measure_chases(settings: dict, kernels: dict, gpu: gpu_mod.GpuInfo) -> pd.DataFrame:
    """Every form over every working set: ``repeats`` chases from random starts, each cold then warm."""
    from numba import cuda
    from numba.cuda.cudadrv.driver import device_memset
    from tma_kernels.tma_issue import FORMS, RESULT_WORDS, chase_dynamic_shared_bytes

    from tma_study.harness.progress import Progress
    size, hops = settings["bytes_per_transfer"], settings["hops"]
    scratch = cuda.device_array(L2_FLUSH_FACTOR * gpu.l2_bytes // ELEMENT_BYTES, np.uint32)
    result = cuda.device_array(RESULT_WORDS, np.uint64)
    sentinel = np.full(RESULT_WORDS, 2**63, dtype=np.uint64)
    rng = fresh_rng()
    rows = []
    progress = Progress("tma_issue chase", len(settings["working_set_bytes"]) * len(FORMS))
    for nbytes in settings["working_set_bytes"]:
        chunk_count = nbytes // size
        successor = pointer_chase.chase_chain(chunk_count, rng)
        chain, _ = chase_buffer(successor, nbytes, size, rng)
        tmap = chunk_tensor_map(chain, nbytes, size)
        address = int(chain.__cuda_array_interface__["data"][0])
        for form in FORMS:
            progress.step(f"{form} over {nbytes >> 20} MiB")
            samples = {"hbm": [], "l2": []}
            for _ in range(settings["repeats"]):
                start = int(rng.integers(chunk_count))
                want = int(pointer_chase.follow(successor, start, hops))
                device_memset(scratch, 0, scratch.nbytes)          # evicts the chain from L2
                for level in ("hbm", "l2"):            # the second chase re-reads what the first left in L2
                    result.copy_to_device(sentinel)
                    kernels[f"chase_{form}"][1, 1, 0, chase_dynamic_shared_bytes(size)](
                        address, tmap.address if form == "tma_tile" else 0, size.bit_length() - 1, chunk_count - 1,
                        start, hops, 1, result)
                    cycles, nanoseconds, final, given_up, _ = (int(v) for v in result.copy_to_host())
                    name = f"chase {form} over {nbytes} bytes ({level})"
                    if given_up != 0:
                        raise timing.CorrectnessError(f"{name}: a wait saw no completion and gave up")
                    if final != want:
                        raise timing.CorrectnessError(f"{name}: ended at chunk {final}, expected {want}")
                    samples[level].append((cycles / hops, nanoseconds / hops))
            for level, values in samples.items():
                rows.append({"form": form, "bytes_per_transfer": size, "working_set_bytes": nbytes, "level": level,
                             "hops": hops, **summarize([c for c, _ in values]).as_columns("cycles_per_hop"),
                             "ns_per_hop_median": float(np.median([n for _, n in values]))})
        del chain, tmap
    return pd.DataFrame(rows)


def _issue_rate_cases(configs, study_kernels, gpu):
    from tma_kernels import launch
    source = IssueRateSource(configs[0].working_set_bytes, fresh_rng())
    maps = {size: chunk_tensor_map(source.device, source.nbytes, size) for size in {c.bytes_per_transfer for c in configs}}
    kernels = {m: study_kernels[f"issue_rate_{m}"] for m in {c.mechanism for c in configs}}
    for kernel in kernels.values():
        launch.set_max_dynamic_shared_bytes(kernel, max(dynamic_shared_bytes(c, gpu) for c in configs))
    return [issue_rate_case(c, kernels[c.mechanism], source,
                            maps[c.bytes_per_transfer] if c.mechanism == "tma_tile" else None, gpu) for c in configs]


def measure(study: dict, gpu_probe: dict, out_dir: Path) -> None:
    """Run the whole tma_issue study on this GPU and write its raw data into ``out_dir``."""
    from tma_kernels import launch
    from tma_kernels import numpy_compat  # before the first numba compile
    from tma_kernels.tma_issue import FORMS, chase_dynamic_shared_bytes
    gpu = gpu_mod.require_hopper(gpu_mod.detect())
    started = provenance.utc_now()
    clocks_before = provenance.nvidia_smi_clocks()
    study_kernels = StudyKernels("tma_issue", study)
    chases = {f"chase_{form}": study_kernels[f"chase_{form}"] for form in FORMS}
    for kernel in chases.values():
        launch.set_max_dynamic_shared_bytes(kernel, chase_dynamic_shared_bytes(study["chase"]["bytes_per_transfer"]))
    configs = issue_rate_configs(study)
    cases = _issue_rate_cases(configs, study_kernels, gpu)
    timing_started = provenance.utc_now()       # the kernels' compile (or cache lookup) and loading end here
    timings = timing.run(cases, study="tma_issue", **study["timing"])
    chase = measure_chases(study["chase"], chases, gpu)
    issue_rate = pd.DataFrame([issue_rate_row(c, gpu.sm_count, timings[case.key].columns())
                               for c, case in zip(configs, cases)])
    record = provenance.build(
        study="tma_issue", gpu=gpu.as_dict(), study_config=study, repo=REPO_ROOT, started=started,
        extra={"nvidia_smi_before": clocks_before, "nvidia_smi_after": provenance.nvidia_smi_clocks(),
               "timer": "issue rate: cuda-bench (nvbench) cold samples, device events, the L2-resident source "
                        "read once, untimed, after each flush; chases: clock64 and %globaltimer in the kernel",
               "configurations": len(configs), "timing_started_utc": timing_started, **study_kernels.provenance(),
               "numpy_row_stack_shim_applied": numpy_compat.SHIM_APPLIED})
    with atomic.staged_directory(out_dir) as staging:
        study_kernels.table().to_csv(staging / "kernels.csv", index=False)
        chase.to_csv(staging / "chase.csv", index=False)
        issue_rate.to_csv(staging / "issue_rate.csv", index=False)
        (staging / "provenance.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
