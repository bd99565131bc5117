"""Measure the dsm study on a Hopper GPU.

Writes, atomically into ``out_dir``:
- ``broadcast.csv``  one row per broadcast configuration (grid.py): time, delivered bytes
- ``latency.csv``    SM-to-SM load latency (clock64 chase) per cluster size and target CTA
- ``bandwidth.csv``  DSM read bandwidth (every CTA streams a partner's shared memory: ring or pair
                     pattern, kernels/dsm/bandwidth.py) and the local baseline
- ``provenance.json``

Every configuration is checked on fresh random data with poisoned outputs before it is
timed; each CTA's checksum must match the host's.
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
from tma_study.harness.kernel_builds import StudyKernels
from tma_study.harness.progress import Progress
from tma_study.harness.stats import summarize
from tma_study.harness import cluster_checksums as reference
from tma_study.harness.cluster_ring import ROW_BYTES

from .grid import BroadcastConfig, broadcast_configs

MULTICAST_RELEASE = "warp"       # as the DSM rings release: once per consumer warp


def compile_kernels(study_kernels: StudyKernels | None = None) -> dict:
    """{broadcast variant: loaded kernel}, the multicast ring included, from the kernel cache."""
    from tma_kernels.dsm import broadcast
    study_kernels = study_kernels or StudyKernels("dsm", {})
    kernels = {v: study_kernels[f"broadcast_{v}"] for v in broadcast.VARIANTS}
    kernels["multicast"] = study_kernels["cluster_stream_multicast"]
    return kernels


class BroadcastCase:
    def __init__(self, config: BroadcastConfig, kernels: dict, operands: dict, sm_count: int, outputs):
        from tma_study.harness.clusters import launcher, persistent_grid
        self.config = c = config
        kernel = kernels[c.variant]
        self.grid = persistent_grid(kernel, c.cluster_size, True, c.threads_per_cta, c.dynamic_shared_bytes,
                                    c.ctas_per_sm, sm_count)
        self.operand = operands[c.working_set]
        self.out = outputs.view(self.grid.ctas * c.threads_per_cta)
        rows = c.tile_bytes // ROW_BYTES
        tiles = self.operand.tiles(c.tile_bytes)
        if c.variant == "multicast":
            args = (self.operand.tensor_map(rows // c.cluster_size), 0, tiles, 1, c.steps_total, c.tile_bytes, 0,
                    c.stages, 1, c.cluster_size, c.consumer_threads, self.out)
        else:
            args = (self.operand.tensor_map(rows), tiles, c.steps_total, c.tile_bytes, c.stages,
                    c.consumer_threads, self.out)
        self.launch = launcher(kernel, self.grid, True, c.threads_per_cta, c.dynamic_shared_bytes, args)

    def check(self) -> None:
        from numba import cuda

        from tma_study.harness.buffers import poison
        c = self.config
        self.operand.ensure_fresh(("broadcast", c.working_set, c.variant))
        poison(self.out)
        self.launch(0)
        cuda.synchronize()
        got = reference.per_cta(self.out.copy_to_host(), self.grid.ctas)
        want = reference.cta_expected(self.operand.checks(c.tile_bytes), None, c.steps_total, self.grid.ctas,
                                      1, c.cluster_size)
        problem = reference.mismatches(got, want, c.cluster_size)
        if problem:
            raise timing.CorrectnessError(f"{c.key}: {problem}")

    def timed_case(self, l2_bytes: int) -> timing.TimedCase:
        warm = self.launch if self.config.working_set_bytes <= l2_bytes // 2 else None
        c = self.config
        return timing.TimedCase(c.key, self.launch, self.check, bytes_read=c.steps_total * c.tile_bytes,
                                bytes_written=self.out.nbytes, label=c.key, warm=warm)

    def columns(self) -> dict:
        c = self.config
        return {**c.columns(), "grid_ctas": self.grid.ctas, "clusters": self.grid.clusters,
                "max_active_clusters": self.grid.max_active_clusters, "busy_cta_share": self.grid.busy_share,
                "bytes_delivered": c.steps_total * c.cluster_size * c.tile_bytes,
                "bytes_from_global": c.steps_total * c.tile_bytes}


READ_KERNELS = {"ring": "dsm_neighbour_read", "pair": "dsm_pair_read", "own": "dsm_own_read"}
LOCAL_PATTERN = "own"            # the local baseline's pattern: every CTA reads its own buffer


def partner_ranks(ranks: np.ndarray, cluster_size: int, pattern: str) -> np.ndarray:
    """The cluster rank whose buffer each CTA rank reads (kernels/dsm/bandwidth.py's partners)."""
    if pattern == "ring":
        return (ranks + 1) % cluster_size
    if pattern == "pair":
        return ranks ^ 1
    return ranks


class NeighbourReadCase:
    """Every CTA reads its partner's (``pattern`` ring or pair) or, local, its own 32 KiB buffer
    ``passes`` times."""

    def __init__(self, kernel, pattern: str, cluster_size: int, ctas_per_sm: int, threads: int, passes: int,
                 sm_count: int):
        from numba import cuda
        from tma_kernels.dsm.bandwidth import BUFFER_BYTES

        from tma_study.harness.clusters import launcher, persistent_grid
        self.pattern, self.remote = pattern, pattern != LOCAL_PATTERN
        self.cluster_size, self.passes, self.threads = cluster_size, passes, threads
        self.ctas_per_sm = ctas_per_sm
        self.grid = persistent_grid(kernel, cluster_size, True, threads, 0, ctas_per_sm, sm_count)
        self.blocks = cuda.device_array(cluster_size * BUFFER_BYTES // 4, np.uint32)
        self.out = cuda.device_array(self.grid.ctas * threads, np.uint64)
        self.launch = launcher(kernel, self.grid, True, threads, 0, (self.blocks, passes, self.out))
        self.bytes_read = self.grid.ctas * passes * BUFFER_BYTES
        self.key = (f"dsm_read/{'remote' if self.remote else 'local'}/{pattern}/n{cluster_size}/c{ctas_per_sm}"
                    f"/t{threads}")

    def check(self) -> None:
        from numba import cuda
        from tma_kernels.dsm.bandwidth import BUFFER_BYTES

        from tma_study.harness.buffers import fresh_rng, poison
        words = fresh_rng().integers(0, 2**32, size=self.blocks.size, dtype=np.uint32)
        self.blocks.copy_to_device(words)
        checks = reference.tile_checks(words, BUFFER_BYTES)
        poison(self.out)
        self.launch(0)
        cuda.synchronize()
        ranks = np.arange(self.grid.ctas) % self.cluster_size
        source = partner_ranks(ranks, self.cluster_size, self.pattern)
        want = (checks[source] * np.uint64(self.passes)).astype(np.uint64)
        problem = reference.mismatches(reference.per_cta(self.out.copy_to_host(), self.grid.ctas), want,
                                       self.cluster_size)
        if problem:
            raise timing.CorrectnessError(f"{self.key}: {problem}")

    def timed_case(self) -> timing.TimedCase:
        return timing.TimedCase(self.key, self.launch, self.check, bytes_read=self.bytes_read, label=self.key)

    def columns(self) -> dict:
        return {"path": "remote" if self.remote else "local", "pattern": self.pattern,
                "cluster_size": self.cluster_size,
                "ctas_per_sm": self.ctas_per_sm, "threads_per_cta": self.threads, "passes": self.passes,
                "grid_ctas": self.grid.ctas, "busy_cta_share": self.grid.busy_share, "bytes_read": self.bytes_read}


def measure_latency(settings: dict, study_kernels: StudyKernels | None = None) -> pd.DataFrame:
    """clock64 chases through CTA ``target``'s shared memory, per cluster size."""
    from numba import cuda
    from tma_kernels import launch
    from tma_kernels.dsm import latency

    from tma_study.harness.buffers import fresh_rng
    from tma_study.harness.pointer_chase import chase_chain, follow
    kernel = (study_kernels or StudyKernels("dsm", {}))["dsm_latency_chase"]
    rng = fresh_rng()
    out = cuda.device_array(2, np.uint64)
    rows = []
    hops = settings["hops"]
    progress = Progress("dsm latency", len(settings["cluster_sizes"]))
    for n in settings["cluster_sizes"]:
        progress.step(f"cluster {n}")
        targets = sorted({latency.LOCAL, 0, 1, n - 1})
        for target in targets:
            cycles = []
            for _ in range(settings["repeats"]):
                successors = [chase_chain(latency.CHAIN_WORDS, rng) for _ in range(n)]
                chains = cuda.to_device(np.concatenate(successors).astype(np.uint32))
                owner = 0 if target == latency.LOCAL else target
                start = int(rng.integers(latency.CHAIN_WORDS))
                out.copy_to_device(np.full(2, 2**63, dtype=np.uint64))
                launch.launch_cluster(kernel, 1, n, latency.THREADS, 0, chains, target, start, hops, out)
                elapsed, final = (int(v) for v in out.copy_to_host())
                want = follow(successors[owner], start, hops)
                if final != want:
                    raise timing.CorrectnessError(
                        f"dsm latency n={n} target={target}: chase ended at {final}, expected {want}")
                cycles.append(elapsed / hops)
            stats = summarize(cycles)
            rows.append({"cluster_size": n, "target": "local_lds" if target == latency.LOCAL else int(target),
                         "path": "ld.shared" if target == latency.LOCAL else "ld.shared::cluster",
                         "hops": hops, "repeats": settings["repeats"], **stats.as_columns("cycles_per_hop")})
    return pd.DataFrame(rows)


def measure(study: dict, gpu_probe: dict, out_dir: Path) -> None:
    """Run the whole dsm study on this GPU and write its raw data into ``out_dir``."""
    from tma_kernels import numpy_compat  # before the first numba compile

    from tma_study.harness.buffers import ChecksumOutputs
    from tma_study.harness.cluster_ring import Operand
    gpu = gpu_mod.require_hopper(gpu_mod.detect())
    started = provenance.utc_now()
    clocks_before = provenance.nvidia_smi_clocks()
    configs = broadcast_configs(study, gpu.smem_per_sm_bytes)
    study_kernels = StudyKernels("dsm", study)
    kernels = compile_kernels(study_kernels)
    operands = {name: Operand(name, ws["bytes"]) for name, ws in study["working_sets"].items()}
    outputs = ChecksumOutputs()
    progress = Progress("dsm setup", len(configs))
    cases = []
    for c in configs:
        progress.step(c.key)
        cases.append(BroadcastCase(c, kernels, operands, gpu.sm_count, outputs))
    reads = study["bandwidth"]
    patterns = reads.get("patterns", ["ring"])
    read_kernels = {p: study_kernels[READ_KERNELS[p]] for p in (*patterns, LOCAL_PATTERN)}
    study_kernels["dsm_latency_chase"]          # loaded before the timing starts, as the others
    timing_started = provenance.utc_now()       # the kernels' compile (or cache lookup) and loading end here
    read_cases = [NeighbourReadCase(read_kernels[p], p, n, ctas, threads, reads["passes"], gpu.sm_count)
                  for n in reads["cluster_sizes"] for p in (patterns if n > 1 else [LOCAL_PATTERN])
                  for ctas in reads["ctas_per_sm"] for threads in reads["threads"]]
    timings = timing.run([case.timed_case(gpu.l2_bytes) for case in cases] + [r.timed_case() for r in read_cases],
                         study="dsm", **study["timing"])
    latency = measure_latency(study["latency"], study_kernels)

    def with_time(columns: dict, key: str, nbytes: int) -> dict:
        t = timings[key].columns()
        return {**columns, **t, "gbps": nbytes / (t["time_us_median"] * 1e3)}

    broadcast = pd.DataFrame([with_time(case.columns(), case.config.key, case.columns()["bytes_delivered"])
                              for case in cases])
    bandwidth_rows = pd.DataFrame([with_time(r.columns(), r.key, r.bytes_read) for r in read_cases])
    record = provenance.build(
        study="dsm", gpu=gpu.as_dict(), study_config=study, repo=REPO_ROOT, started=started,
        extra={"nvidia_smi_before": clocks_before, "nvidia_smi_after": provenance.nvidia_smi_clocks(),
               "timer": "cuda-bench (nvbench) cold samples (L2 flushed before every sample), device events; "
                        "latency: clock64 around a dependent chain in one thread",
               "configurations": len(configs) + len(read_cases), "timing_started_utc": timing_started, **study_kernels.provenance(),
               "numpy_row_stack_shim_applied": numpy_compat.SHIM_APPLIED})
    with atomic.staged_directory(out_dir) as staging:
        study_kernels.table().to_csv(staging / "kernels.csv", index=False)
        broadcast.to_csv(staging / "broadcast.csv", index=False)
        latency.to_csv(staging / "latency.csv", index=False)
        bandwidth_rows.to_csv(staging / "bandwidth.csv", index=False)
        (staging / "provenance.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
