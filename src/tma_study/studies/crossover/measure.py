"""Measure the crossover study on a Hopper GPU.

Writes, atomically into ``out_dir``:
- ``stream.csv``    one row per (mechanism, knobs, transfer size, working set): time and GB/s
- ``ceilings.csv``  device-to-device copy and pure-read stream, measured in the same run
- ``latency.csv``   one transfer's latency per (chase form, mechanism, size, level), clock64 pointer
                    chase: the full dependent chain at every size, and at the chain sizes the forms
                    that remove one cost at a time down to the issue-to-arrival latency
- ``provenance.json``

Every configuration's checksum is checked against the host reference before it is timed;
the input is fresh random data, regenerated for every (mechanism, working set) group, and
the checksum output is poisoned before each check.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tma_study import atomic
from tma_study import gpu as gpu_mod
from tma_study.config import REPO_ROOT
from tma_study.harness import provenance, timing
from tma_study.harness.buffers import ChecksumOutputs, fresh_rng, poison
from tma_study.harness.chunk_maps import chunk_tensor_map as _chunk_tensor_map
from tma_study.harness.kernel_builds import StudyKernels
from tma_study.harness.stats import summarize

from . import reference
from .grid import ORDER_MULTIPLIERS, StreamConfig, stream_configs

ELEMENT_BYTES = 4
READ_CEILING_CTAS_PER_SM = (2, 4, 8)
READ_CEILING_THREADS = 256
LATENCY_THREADS = {"tma_tile": 32, "bulk_copy": 32, "cp_async": 128, "plain_loads": 128}  # one producer each
L2_FLUSH_FACTOR = 2                # flush by writing this many L2 sizes of scratch


class WorkingSet:
    """A device buffer of random uint32 words plus the host data its checksums need."""

    def __init__(self, name: str, nbytes: int, bytes_per_launch: int, l2_bytes: int):
        from numba import cuda
        self.name, self.nbytes = name, nbytes
        self.l2_resident_limit = l2_bytes // 2     # below this, the set is meant to live in L2
        self.passes = max(1, bytes_per_launch // nbytes)
        self.device = cuda.device_array(nbytes // ELEMENT_BYTES, np.uint32)
        self.address = int(self.device.__cuda_array_interface__["data"][0])
        self.generation = None
        self._expected: dict[int | None, int] = {}
        self._tensor_maps: dict[int, object] = {}

    def ensure_fresh(self, generation) -> None:
        """New random contents whenever a new group of configurations starts."""
        if generation == self.generation:
            return
        words = np.frombuffer(fresh_rng().bytes(self.nbytes), dtype=np.uint32)
        self.device.copy_to_device(words)
        self.sums = reference.vector_sums(words)
        self._expected.clear()
        self.generation = generation

    def expected(self, bytes_per_transfer: int | None) -> int:
        if bytes_per_transfer not in self._expected:
            self._expected[bytes_per_transfer] = reference.expected_checksum(
                self.sums, bytes_per_transfer, self.passes)
        return self._expected[bytes_per_transfer]

    def tensor_map(self, bytes_per_transfer: int) -> int:
        """Address of a tensor map whose box is one chunk (kernels/crossover/tma_tile.py)."""
        if bytes_per_transfer not in self._tensor_maps:
            self._tensor_maps[bytes_per_transfer] = _chunk_tensor_map(self.device, self.nbytes,
                                                                      bytes_per_transfer)
        return self._tensor_maps[bytes_per_transfer].address


def _kernels(study: dict, configs: list[StreamConfig]):
    """(stream kernels by mechanism, chase kernels by name, the read-ceiling kernel, StudyKernels),
    loaded from the kernel cache, each allowed the dynamic shared memory its sweep needs."""
    from tma_kernels import launch
    from tma_kernels.crossover.latency import latency_dynamic_shared_bytes
    from tma_kernels.crossover.ring import dynamic_shared_bytes

    kernels = StudyKernels("crossover", study)
    streams, latencies = {}, {}
    chain_sizes = study.get("latency", {}).get("chain_bytes_per_transfer", [])
    sizes = [*study["bytes_per_transfer"], *chain_sizes]
    for mechanism in study["mechanisms"]:
        streams[mechanism] = kernels[f"stream_{mechanism}"]
        launch.set_max_dynamic_shared_bytes(streams[mechanism], max(
            dynamic_shared_bytes(c.stages, c.stage_bytes) for c in configs if c.mechanism == mechanism))
        for size in sizes:
            for chase in chases([mechanism], size, study["bytes_per_transfer"], chain_sizes):
                if chase.kernel_name not in latencies:
                    latencies[chase.kernel_name] = kernels[chase.kernel_name]
                    launch.set_max_dynamic_shared_bytes(latencies[chase.kernel_name],
                                                        latency_dynamic_shared_bytes(max(sizes)))
    return streams, latencies, kernels["read_stream"], kernels


def _checked(name: str, got: int, want: int) -> None:
    if got != want:
        raise timing.CorrectnessError(f"{name}: checksum {got:#018x}, expected {want:#018x}")


def _stream_case(config: StreamConfig, kernel, ws: WorkingSet, sm_count: int,
                 outputs: ChecksumOutputs | None = None) -> timing.TimedCase:
    from tma_kernels.crossover.ring import dynamic_shared_bytes
    grid = sm_count * config.ctas_per_sm
    chunk_count = ws.nbytes // config.bytes_per_transfer
    multiplier = (ORDER_MULTIPLIERS[config.access_order] & (chunk_count - 1)) | 1
    transfers_total = ws.passes * chunk_count
    shared = dynamic_shared_bytes(config.stages, config.stage_bytes)
    out = (outputs or ChecksumOutputs()).view(grid * config.threads_per_cta)
    tmap = ws.tensor_map(config.bytes_per_transfer) if config.mechanism == "tma_tile" else 0
    args = (ws.address, tmap, config.bytes_per_transfer.bit_length() - 1, transfers_total,
            chunk_count - 1, multiplier, config.stage_bytes, config.stages, config.consumer_threads,
            config.issue_threads)

    def launch(stream):
        kernel[grid, config.threads_per_cta, stream, shared](*args, out)

    def check():
        ws.ensure_fresh((config.mechanism, config.working_set))
        poison(out)
        launch(0)
        from numba import cuda
        cuda.synchronize()
        _checked(config.key, reference.total_of(out.copy_to_host()), ws.expected(config.bytes_per_transfer))

    return timing.TimedCase(config.key, launch, check, bytes_read=ws.passes * ws.nbytes,
                            bytes_written=out.nbytes, label=config.key, warm=_warm_for(ws, launch))


def _warm_for(ws: WorkingSet, launch):
    """An L2-resident working set is read once, untimed, after nvbench's L2 flush."""
    return launch if ws.nbytes < ws.l2_resident_limit else None


def _ceiling_cases(read_kernel, working_sets: dict, sm_count: int) -> list[tuple[dict, timing.TimedCase]]:
    from numba import cuda
    cases = []
    hbm = working_sets.get("hbm") or next(iter(working_sets.values()))
    copy_dst = cuda.device_array_like(hbm.device)

    def copy(stream):
        copy_dst.copy_to_device(hbm.device, stream=stream)

    def check_copy():
        hbm.ensure_fresh(("ceiling", "copy"))
        copy_dst.copy_to_device(fresh_rng().integers(0, 2**32, size=copy_dst.size, dtype=np.uint32))
        copy(0)
        cuda.synchronize()
        if not np.array_equal(copy_dst.copy_to_host(), hbm.device.copy_to_host()):
            raise timing.CorrectnessError("device-to-device copy: destination differs from source")

    cases.append(({"ceiling": "d2d_copy", "working_set": hbm.name, "working_set_bytes": hbm.nbytes,
                   "bytes_moved": 2 * hbm.nbytes, "ctas_per_sm": 0, "threads_per_cta": 0},
                  timing.TimedCase(f"ceiling/d2d_copy/{hbm.name}", copy, check_copy,
                                   bytes_read=hbm.nbytes, bytes_written=hbm.nbytes)))
    for ws in working_sets.values():
        vectors_total = ws.passes * ws.nbytes // 16
        for ctas in READ_CEILING_CTAS_PER_SM:
            grid = sm_count * ctas
            out = cuda.device_array(grid * READ_CEILING_THREADS, np.uint64)

            def launch(stream, grid=grid, out=out, ws=ws, vectors_total=vectors_total):
                read_kernel[grid, READ_CEILING_THREADS, stream](ws.address, vectors_total, ws.nbytes // 16 - 1, out)

            def check(launch=launch, out=out, ws=ws, ctas=ctas):
                ws.ensure_fresh(("ceiling", ws.name))
                poison(out)
                launch(0)
                cuda.synchronize()
                _checked(f"read_stream/{ws.name}/c{ctas}", reference.total_of(out.copy_to_host()), ws.expected(None))

            cases.append(({"ceiling": "read_stream", "working_set": ws.name, "working_set_bytes": ws.nbytes,
                           "bytes_moved": ws.passes * ws.nbytes, "ctas_per_sm": ctas,
                           "threads_per_cta": READ_CEILING_THREADS},
                          timing.TimedCase(f"ceiling/read_stream/{ws.name}/c{ctas}", launch, check,
                                           bytes_read=ws.passes * ws.nbytes, warm=_warm_for(ws, launch))))
    return cases


@dataclass(frozen=True)
class Chase:
    """One form of the pointer chase (raw column ``chain``): which kernel, with how many threads."""
    chain: str
    mechanism: str
    kernel_name: str
    threads: int

    @property
    def checks_chain_result(self) -> bool:
        """The issue-to-arrival kernels also report waits given up and (plain loads) a checksum."""
        return self.kernel_name.startswith("issue_to_arrival")


def chases(mechanisms, size: int, full_sizes, chain_sizes) -> list[Chase]:
    """The chase forms measured at ``size``, from the full dependent chain down to the transfer's
    own issue-to-arrival latency (each form drops one cost of the one before; docs in
    kernels/crossover/latency.py and latency_chain.py):

    full                        every thread of the CTA runs the producer and waits, one __syncthreads per hop
    one_thread                  the same kernel in a one-thread CTA: no other thread issues, waits or syncs
    issue_to_arrival            one thread, the bare transfer, a try_wait loop (the published chase's form)
    issue_to_arrival_hint       the same waiting with a suspend-time hint (mbarrier mechanisms)
    issue_to_arrival_test_wait  the same polling test_wait, which never suspends (mbarrier mechanisms)
    """
    from .kernels import chain_kernel_name
    forms = []
    for mechanism in mechanisms:
        if size in full_sizes or size in chain_sizes:
            forms.append(Chase("full", mechanism, f"latency_{mechanism}", LATENCY_THREADS[mechanism]))
        if size not in chain_sizes:
            continue
        forms.append(Chase("one_thread", mechanism, f"latency_{mechanism}", 1))
        for chain, wait in CHAIN_WAITS.items():
            if mechanism != "plain_loads" or wait == "try_wait":
                forms.append(Chase(chain, mechanism, chain_kernel_name(mechanism, wait), 1))
    return forms


CHAIN_WAITS = {"issue_to_arrival": "try_wait", "issue_to_arrival_hint": "try_wait_hint",
               "issue_to_arrival_test_wait": "test_wait"}


def _measure_latency(study: dict, kernels: dict, gpu: gpu_mod.GpuInfo) -> pd.DataFrame:
    """Pointer chases: cold (L2 flushed first, data from HBM) then warm (same chunks, from L2),
    for every chase form (:func:`chases`) at every size; ``kernels``: loaded kernels by name."""
    from numba import cuda
    from numba.cuda.cudadrv.driver import device_memset
    from tma_kernels.crossover.latency import latency_dynamic_shared_bytes
    from tma_kernels.crossover.latency_chain import RESULT_WORDS

    from tma_study.harness.progress import Progress
    settings = study["latency"]
    nbytes, hops = settings["hbm_bytes"], settings["hops"]
    full_sizes = study["bytes_per_transfer"]
    chain_sizes = settings.get("chain_bytes_per_transfer", [])
    sizes = sorted(set(full_sizes) | set(chain_sizes))
    scratch = cuda.device_array(L2_FLUSH_FACTOR * gpu.l2_bytes // ELEMENT_BYTES, np.uint32)
    result = cuda.device_array(RESULT_WORDS, np.uint64)
    sentinel = np.full(RESULT_WORDS, 2**63, dtype=np.uint64)
    rng = fresh_rng()
    rows = []
    progress = Progress("crossover latency", sum(len(chases(study["mechanisms"], size, full_sizes, chain_sizes))
                                                 for size in sizes))
    for size in sizes:
        chunk_count = nbytes // size
        words_per_chunk = size // ELEMENT_BYTES
        successor = reference.chase_chain(chunk_count, rng)
        words = rng.integers(0, 2**32, size=nbytes // ELEMENT_BYTES, dtype=np.uint32)
        words[np.arange(chunk_count) * words_per_chunk] = successor
        chain = cuda.to_device(words)
        tmap = _chunk_tensor_map(chain, nbytes, size)
        address = int(chain.__cuda_array_interface__["data"][0])
        for chase in chases(study["mechanisms"], size, full_sizes, chain_sizes):
            progress.step(f"{chase.chain} {chase.mechanism} B={size}")
            kernel = kernels[chase.kernel_name]
            samples = {"hbm": [], "l2": []}
            for _ in range(settings["repeats"]):
                start = int(rng.integers(chunk_count))
                path = reference.chase_path(successor, start, hops)
                want = int(successor[path[-1]])
                device_memset(scratch, 0, scratch.nbytes)      # evicts the chain from L2
                for level in ("hbm", "l2"):        # second chase re-reads the chunks the first left in L2
                    result.copy_to_device(sentinel)
                    kernel[1, chase.threads, 0, latency_dynamic_shared_bytes(size)](
                        address, tmap.address if chase.mechanism == "tma_tile" else 0,
                        size.bit_length() - 1, chunk_count - 1, start, hops, 1, result)
                    cycles, nanoseconds, final, given_up, checksum = (int(v) for v in result.copy_to_host())
                    name = f"latency chase {chase.chain} {chase.mechanism} B={size} ({level})"
                    if chase.checks_chain_result and given_up != 0:
                        raise timing.CorrectnessError(f"{name}: a wait saw no completion and gave up")
                    if final != want:
                        raise timing.CorrectnessError(f"{name}: ended at chunk {final}, expected {want}")
                    if chase.checks_chain_result and chase.mechanism == "plain_loads":
                        expected = reference.chunk_word_sum(words, words_per_chunk, path)
                        if checksum != expected:
                            raise timing.CorrectnessError(f"{name}: checksum {checksum}, expected {expected}")
                    samples[level].append((cycles / hops, nanoseconds / hops))
            for level, values in samples.items():
                cycles = summarize([c for c, _ in values])
                rows.append({"chain": chase.chain, "mechanism": chase.mechanism, "bytes_per_transfer": size,
                             "level": level, "chase_bytes": nbytes, "hops": hops, "threads_per_cta": chase.threads,
                             **cycles.as_columns("cycles_per_transfer"),
                             "ns_per_transfer_median": float(np.median([n for _, n in values]))})
        del chain, tmap
    return pd.DataFrame(rows)


def _max_active_clusters(read_kernel, cluster_sizes) -> dict[str, int | str]:
    from tma_kernels import launch
    out = {}
    for size in cluster_sizes:
        try:
            if launch.needs_nonportable_cluster(size):
                launch.allow_nonportable_cluster_size(read_kernel)
            out[str(size)] = launch.max_active_clusters(read_kernel, size, READ_CEILING_THREADS, 0)
        except Exception as exc:  # recorded, not fatal: provenance only
            out[str(size)] = f"query failed: {type(exc).__name__}: {exc}"
    return out


def measure(study: dict, gpu_probe: dict, out_dir: Path) -> None:
    """Run the whole crossover study on this GPU and write its raw data into ``out_dir``."""
    from tma_kernels import numpy_compat  # before the first numba compile

    gpu = gpu_mod.require_hopper(gpu_mod.detect())
    started = provenance.utc_now()
    clocks_before = provenance.nvidia_smi_clocks()
    configs = stream_configs(study, gpu.smem_per_sm_bytes)
    streams, latencies, read_kernel, kernels = _kernels(study, configs)
    timing_started = provenance.utc_now()       # the kernels' compile (or cache lookup) and loading end here
    working_sets = {name: WorkingSet(name, ws["bytes"], ws["bytes_per_launch"], gpu.l2_bytes)
                    for name, ws in study["working_sets"].items()}
    ceiling_cases = _ceiling_cases(read_kernel, working_sets, gpu.sm_count)
    outputs = ChecksumOutputs()
    outputs.view(max(gpu.sm_count * c.ctas_per_sm * c.threads_per_cta for c in configs))  # size it once
    stream_cases = [_stream_case(c, streams[c.mechanism], working_sets[c.working_set], gpu.sm_count, outputs)
                    for c in configs]
    timings = timing.run([case for _, case in ceiling_cases] + stream_cases, study="crossover",
                         **study["timing"])
    latency = _measure_latency(study, latencies, gpu)

    def row(columns: dict, case: timing.TimedCase, bytes_moved: int) -> dict:
        t = timings[case.key].columns()
        return {**columns, **t, "bytes_moved": bytes_moved,
                "gbps": bytes_moved / (t["time_us_median"] * 1e3)}

    stream = pd.DataFrame([row(c.columns(), case, case.bytes_read) for c, case in zip(configs, stream_cases)])
    ceilings = pd.DataFrame([row(cols, case, cols["bytes_moved"]) for cols, case in ceiling_cases])
    record = provenance.build(
        study="crossover", gpu=gpu.as_dict(), study_config=study, repo=REPO_ROOT,
        started=started,
        extra={"nvidia_smi_before": clocks_before, "nvidia_smi_after": provenance.nvidia_smi_clocks(),
               "max_active_clusters_256_threads": _max_active_clusters(read_kernel, gpu_probe.get("cluster_sizes", [])),
               "timer": "cuda-bench (nvbench) cold samples: L2 flushed before every sample; device "
                        "events; l2 working set made resident by an untimed pass inside each sample",
               "configurations": len(configs), "timing_started_utc": timing_started, **kernels.provenance(),
               "numpy_row_stack_shim_applied": numpy_compat.SHIM_APPLIED})
    with atomic.staged_directory(out_dir) as staging:
        kernels.table().to_csv(staging / "kernels.csv", index=False)
        stream.to_csv(staging / "stream.csv", index=False)
        ceilings.to_csv(staging / "ceilings.csv", index=False)
        latency.to_csv(staging / "latency.csv", index=False)
        (staging / "provenance.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
