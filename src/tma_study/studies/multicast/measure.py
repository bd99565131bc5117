"""Measure the multicast study on a Hopper GPU.

Writes, atomically into ``out_dir``:
- ``stream.csv``       one row per configuration (grid.py): time, delivered and requested bytes
- ``occupancy.csv``    max active clusters per cluster size and ring (the occupancy API)
- ``traffic.csv``      L2 -> SM bytes of a few configurations, counted by ncu (traffic.py)
- ``compute.csv``      one row per configuration of the compute sweep (grid.ComputeConfig: the
                       consumer churns every word ``work_rounds`` times; tile order spread or shared)
- ``provenance.json``

Before it is timed, every configuration runs once on fresh random operands with poisoned
outputs, and every CTA's checksum must equal the host's for the (churned) tiles that CTA must get.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd

from tma_study import atomic
from tma_study import gpu as gpu_mod
from tma_study.config import REPO_ROOT
from tma_study.harness import cluster_checksums as reference
from tma_study.harness import provenance, timing
from tma_study.harness.kernel_builds import StudyKernels
from tma_study.harness.progress import Progress

from .grid import ROW_BYTES, ClusterConfig, ComputeConfig, cluster_configs, compute_configs
from .traffic import run_under_ncu


def kernel_name(multicast: bool, release: str) -> str:
    """The compile list's name of the ring built with or without multicast, releasing per
    ``release`` (kernels.py)."""
    return f"cluster_stream_{'multicast' if multicast else 'own_copy'}" + ("" if release == "warp" else f"_{release}_release")


COMPUTE = "compute"             # the release slot of the compute builds in compile_kernels' keys


def compile_kernels(releases=("warp", "cta"), study_kernels: StudyKernels | None = None, compute: bool = False) -> dict:
    """{(multicast, release): loaded kernel} for the builds of the ring, from the kernel cache;
    with ``compute``, (multicast, COMPUTE) for the compute-consumer builds too."""
    study_kernels = study_kernels or StudyKernels("multicast", {})
    kernels = {(multicast, release): study_kernels[kernel_name(multicast, release)]
               for multicast in (False, True) for release in releases}
    if compute:
        kernels |= {(multicast, COMPUTE): study_kernels[f"cluster_compute_stream_{'multicast' if multicast else 'own_copy'}"]
                    for multicast in (False, True)}
    return kernels


def requested_bytes(config: ClusterConfig) -> int:
    """Bytes the launch's TMA copies ask of L2: one tile per sharer group under multicast."""
    if config.variant != "multicast":
        return config.steps_total * config.cluster_size * config.stage_bytes
    return config.steps_total * (config.cluster_x * config.tile_bytes + config.cluster_y * config.b_tile_bytes)


class Case:
    """One configuration: its grid, its launch and its correctness check."""

    def __init__(self, config: ClusterConfig, kernels: dict, operands: dict, sm_count: int, outputs):
        from tma_kernels.multicast import VARIANT_KERNEL

        from tma_study.harness.clusters import launcher, persistent_grid
        self.config = config
        multicast = VARIANT_KERNEL[config.variant]
        clustered = config.variant != "no_cluster"
        computes = isinstance(config, ComputeConfig)
        kernel = kernels[(multicast, COMPUTE if computes else config.release)]
        self.grid = persistent_grid(kernel, config.cluster_size, clustered, config.threads_per_cta,
                                    config.dynamic_shared_bytes, config.ctas_per_sm, sm_count)
        self.a, self.b = operands[(config.working_set, "a")], operands.get((config.working_set, "b"))
        rows = config.tile_bytes // ROW_BYTES
        a_box = rows // config.cluster_y if multicast else rows
        b_box = rows // config.cluster_x if multicast else rows
        has_b = config.pattern == "2d"
        self.out = outputs.view(self.grid.ctas * config.threads_per_cta)
        args = (self.a.tensor_map(a_box), self.b.tensor_map(b_box) if has_b else 0,
                self.a.tiles(config.tile_bytes), self.b.tiles(config.tile_bytes) if has_b else 1,
                config.steps_total, config.tile_bytes, config.b_tile_bytes, config.stages,
                config.cluster_x, config.cluster_y, config.consumer_threads, self.out)
        if computes:
            args += (config.work_rounds, config.same_tiles)
        self.launch = launcher(kernel, self.grid, clustered, config.threads_per_cta,
                               config.dynamic_shared_bytes, args)

    def check(self) -> None:
        from numba import cuda

        from tma_study.harness.buffers import poison
        c = self.config
        computes = isinstance(c, ComputeConfig)
        rounds = c.work_rounds if computes else 0
        generation = ("compute" if computes else c.pattern, c.working_set)
        self.a.ensure_fresh(generation)
        b_checks = None
        if c.pattern == "2d":
            self.b.ensure_fresh(generation)
            b_checks = self.b.checks(c.tile_bytes, c.tile_bytes // reference.VECTOR_BYTES, rounds)
        poison(self.out)
        self.launch(0)
        cuda.synchronize()
        got = reference.per_cta(self.out.copy_to_host(), self.grid.ctas)
        want = reference.cta_expected(self.a.checks(c.tile_bytes, 0, rounds), b_checks, c.steps_total,
                                      self.grid.ctas, c.cluster_x, c.cluster_y, computes and c.same_tiles == 1)
        problem = reference.mismatches(got, want, c.cluster_size)
        if problem:
            raise timing.CorrectnessError(f"{c.key}: {problem}")

    def timed_case(self, warm: bool) -> timing.TimedCase:
        return timing.TimedCase(self.config.key, self.launch, self.check,
                                bytes_read=requested_bytes(self.config),
                                bytes_written=self.out.nbytes, label=self.config.key,
                                warm=self.launch if warm else None)

    def columns(self) -> dict:
        c = self.config
        delivered = c.steps_total * c.cluster_size * c.stage_bytes
        return {**c.columns(), "grid_ctas": self.grid.ctas, "clusters": self.grid.clusters,
                "max_active_clusters": self.grid.max_active_clusters, "busy_cta_share": self.grid.busy_share,
                "bytes_delivered": delivered, "bytes_requested": requested_bytes(c)}


def make_operands(study: dict, patterns) -> dict:
    from tma_study.harness.cluster_ring import Operand
    operands = {}
    for name, ws in study["working_sets"].items():
        operands[(name, "a")] = Operand(f"{name}/a", ws["bytes"])
        if "2d" in patterns:
            operands[(name, "b")] = Operand(f"{name}/b", ws["bytes"])
    return operands


def make_compute_operands(study: dict) -> dict:
    """The compute sweep's A and B operands per working set (its own sizes)."""
    from tma_study.harness.cluster_ring import Operand
    return {(name, part): Operand(f"compute/{name}/{part}", ws["bytes"])
            for name, ws in study.get("compute", {}).get("working_sets", {}).items() for part in ("a", "b")}


def l2_resident(config: ClusterConfig, l2_bytes: int) -> bool:
    """Operands that fit half the L2 are meant to live there: each sample gets an untimed
    warm-up pass after cuda-bench's L2 flush."""
    operands = 2 if config.pattern == "2d" else 1
    return operands * config.working_set_bytes <= l2_bytes // 2


def occupancy_table(kernels: dict, configs: list[ClusterConfig]) -> pd.DataFrame:
    from tma_kernels import launch
    rows, seen = [], set()
    for c in configs:
        key = (c.cluster_size, c.threads_per_cta, c.dynamic_shared_bytes)
        if c.variant == "no_cluster" or key in seen:
            continue
        seen.add(key)
        rows.append({"cluster_size": c.cluster_size, "threads_per_cta": c.threads_per_cta,
                     "dynamic_shared_bytes": c.dynamic_shared_bytes,
                     "max_active_clusters": launch.max_active_clusters(kernels[(False, c.release)], *key)})
    return pd.DataFrame(rows)


def measure(study: dict, gpu_probe: dict, out_dir: Path) -> None:
    """Run the whole multicast study on this GPU and write its raw data into ``out_dir``."""
    from tma_kernels import numpy_compat  # before the first numba compile

    from tma_study.harness.buffers import ChecksumOutputs
    gpu = gpu_mod.require_hopper(gpu_mod.detect())
    started = provenance.utc_now()
    clocks_before = provenance.nvidia_smi_clocks()
    patterns = ("1d", "2d") if study.get("cluster_shapes_2d") else ("1d",)
    configs = cluster_configs(study, gpu.smem_per_sm_bytes, patterns)
    compute = compute_configs(study, gpu.smem_per_sm_bytes)
    study_kernels = StudyKernels("multicast", study)
    kernels = compile_kernels(tuple(study["releases"]), study_kernels, compute=bool(compute))
    timing_started = provenance.utc_now()       # the kernels' compile (or cache lookup) and loading end here
    operands = make_operands(study, patterns)
    outputs = ChecksumOutputs()
    compute_operands = make_compute_operands(study)
    progress = Progress("multicast setup", len(configs) + len(compute))
    cases = []
    for c in configs:
        progress.step(c.key)
        cases.append(Case(c, kernels, operands, gpu.sm_count, outputs))
    for c in compute:
        progress.step(c.key)
        cases.append(Case(c, kernels, compute_operands, gpu.sm_count, outputs))
    timed = [case.timed_case(l2_resident(case.config, gpu.l2_bytes)) for case in cases]
    timings = timing.run(timed, study="multicast", **study["timing"])

    rows = []
    for case in cases:
        t = timings[case.config.key].columns()
        cols = case.columns()
        rows.append({**cols, **t, "delivered_gbps": cols["bytes_delivered"] / (t["time_us_median"] * 1e3),
                     "requested_gbps": cols["bytes_requested"] / (t["time_us_median"] * 1e3)})
    stream = pd.DataFrame(rows[:len(configs)])
    compute_rows = pd.DataFrame(rows[len(configs):])
    with tempfile.TemporaryDirectory() as workdir:
        traffic = pd.DataFrame(run_under_ncu(study, Path(workdir)))
    record = provenance.build(
        study="multicast", gpu=gpu.as_dict(), study_config=study, repo=REPO_ROOT, started=started,
        extra={"nvidia_smi_before": clocks_before, "nvidia_smi_after": provenance.nvidia_smi_clocks(),
               "timer": "cuda-bench (nvbench) cold samples: L2 flushed before every sample; device events; "
                        "an L2-resident working set is made resident by an untimed pass inside each sample",
               "configurations": len(configs) + len(compute), "timing_started_utc": timing_started, **study_kernels.provenance(),
               "numpy_row_stack_shim_applied": numpy_compat.SHIM_APPLIED})
    with atomic.staged_directory(out_dir) as staging:
        study_kernels.table().to_csv(staging / "kernels.csv", index=False)
        stream.to_csv(staging / "stream.csv", index=False)
        if compute:
            compute_rows.to_csv(staging / "compute.csv", index=False)
        occupancy_table(kernels, configs).to_csv(staging / "occupancy.csv", index=False)
        traffic.to_csv(staging / "traffic.csv", index=False)
        (staging / "provenance.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
