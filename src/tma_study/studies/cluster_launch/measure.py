"""Measure the cluster_launch study on a Hopper GPU.

Writes, atomically into ``out_dir``:
- ``launch.csv``   one row per launch point (grid.py): its time (nvbench cold samples, device
                   events), the occupancy API's resident clusters, and what its recorded
                   launch showed (SMs used, most CTAs on one SM)
- ``ctas.csv``     one row per CTA of one recorded launch per point: SM, cluster id and rank,
                   start and end (``%globaltimer``, ns after the launch's first CTA started)
- ``kernels.csv``, ``provenance.json``

The recorded launch is the correctness check, run once per point before it is timed, on
poisoned records: every CTA must have written its record, on an SM below the SM count, with
the cluster id and rank its block index implies, and have stayed at least ``spin_ns``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tma_study import gpu as gpu_mod
from tma_study.config import REPO_ROOT
from tma_study import atomic
from tma_study.harness import provenance, timing
from tma_study.harness.kernel_builds import StudyKernels

from .grid import LaunchPoint, fits_per_sm, launch_points
from .kernels import KERNEL

POISON_TIME = np.uint64(2**64 - 1)
POISON_INFO = np.uint32(2**32 - 1)
CTA_KEY = ["launch", "cluster_size", "grid_ctas", "ctas_per_sm", "dynamic_shared_bytes", "spin_ns"]
CTA_COLUMNS = ["cta", "smid", "cluster_id", "cluster_rank", "start_ns", "end_ns"]


def cta_records(times: np.ndarray, info: np.ndarray, point: LaunchPoint, sm_count: int) -> pd.DataFrame:
    """The recorded launch's per-CTA rows (start and end relative to its first start), after
    checking every record; raises timing.CorrectnessError naming the first problem."""
    from tma_kernels.cluster_launch import FIELDS, TIMES
    n = point.grid_ctas
    times = times[:TIMES * n].reshape(n, TIMES)
    info = info[:FIELDS * n].reshape(n, FIELDS)
    ctas = np.arange(n)
    problems = []
    unwritten = np.flatnonzero((times == POISON_TIME).any(axis=1) | (info == POISON_INFO).any(axis=1))
    if len(unwritten):
        problems.append(f"{len(unwritten)} CTAs wrote no record (first: {unwritten[:4].tolist()})")
    else:
        smid, cluster_id, rank, block = (info[:, i].astype(np.int64) for i in range(FIELDS))
        if (block != ctas).any():
            problems.append("a record's blockIdx.x is not its slot")
        if (smid >= sm_count).any():
            problems.append(f"%smid {int(smid.max())} is not below the SM count {sm_count}")
        if point.launch == "cluster":
            if (cluster_id != ctas // point.cluster_size).any() or (rank != ctas % point.cluster_size).any():
                problems.append("a CTA's %clusterid.x or %cluster_ctarank does not follow from its blockIdx.x "
                                f"and cluster size {point.cluster_size}")
        elif (rank != 0).any():
            problems.append("a CTA of a cluster-free launch has a %cluster_ctarank other than 0")
        stayed = times[:, 1].astype(np.int64) - times[:, 0].astype(np.int64)
        if (stayed < point.spin_ns).any():
            problems.append(f"a CTA stayed {int(stayed.min())} ns, less than spin_ns {point.spin_ns}")
    if problems:
        raise timing.CorrectnessError(f"{point.key}: " + "; ".join(problems))
    first = times[:, 0].min()
    return pd.DataFrame({"cta": ctas, "smid": info[:, 0].astype(np.int64), "cluster_id": info[:, 1].astype(np.int64),
                         "cluster_rank": info[:, 2].astype(np.int64),
                         "start_ns": (times[:, 0] - first).astype(np.int64),
                         "end_ns": (times[:, 1] - first).astype(np.int64)})


class Records:
    """The device records of the largest grid (every launch writes the first grid_ctas of them)."""

    def __init__(self, max_ctas: int):
        from numba import cuda
        from tma_kernels.cluster_launch import FIELDS, TIMES
        self.times = cuda.device_array(TIMES * max_ctas, np.uint64)
        self.info = cuda.device_array(FIELDS * max_ctas, np.uint32)

    def poison(self) -> None:
        self.times.copy_to_device(np.full(self.times.size, POISON_TIME, np.uint64))
        self.info.copy_to_device(np.full(self.info.size, POISON_INFO, np.uint32))


class Case:
    """One launch point: its launch, its recorded (checked) launch and its columns."""

    def __init__(self, point: LaunchPoint, kernel, records: Records, sm_count: int, resident: int):
        self.point, self.kernel, self.records, self.sm_count = point, kernel, records, sm_count
        self.resident = resident              # max active clusters (cluster-free: CTAs) of this shape
        self.ctas: pd.DataFrame | None = None
        self.args = (point.spin_ns, records.times, records.info)

    def launch(self, stream) -> None:
        from tma_kernels import launch as launch_mod
        p = self.point
        if p.launch == "cluster":
            launch_mod.launch_cluster(self.kernel, p.clusters, p.cluster_size, p.threads_per_cta,
                                      p.dynamic_shared_bytes, *self.args, stream=stream)
        else:
            self.kernel[p.grid_ctas, p.threads_per_cta, stream, p.dynamic_shared_bytes](*self.args)

    def check(self) -> None:
        from numba import cuda
        self.records.poison()
        stream = cuda.default_stream()
        self.launch(stream)
        stream.synchronize()
        self.ctas = cta_records(self.records.times.copy_to_host(), self.records.info.copy_to_host(), self.point,
                                self.sm_count)

    def timed_case(self) -> timing.TimedCase:
        from tma_kernels.cluster_launch import FIELDS, TIMES
        p = self.point
        return timing.TimedCase(p.key, self.launch, self.check, bytes_written=p.grid_ctas * (8 * TIMES + 4 * FIELDS),
                                label=p.key)

    def columns(self) -> dict:
        p = self.point
        hosted = self.ctas.groupby("smid").size()
        return {**p.columns(), "max_active_clusters": self.resident, "max_resident_ctas": self.resident * p.cluster_size,
                "all_resident": bool(p.clusters <= self.resident),
                "ctas_per_sm_fit": fits_per_sm(p.dynamic_shared_bytes, p.threads_per_cta),
                "sms_used": int(hosted.size), "max_ctas_on_one_sm": int(hosted.max())}


def measure(study: dict, gpu_probe: dict, out_dir: Path) -> None:
    """Run the whole cluster_launch study on this GPU and write its raw data into ``out_dir``."""
    from tma_kernels import launch as launch_mod
    from tma_kernels import numpy_compat  # before the first numba compile
    gpu = gpu_mod.require_hopper(gpu_mod.detect())
    started = provenance.utc_now()
    clocks_before = provenance.nvidia_smi_clocks()
    points = launch_points(study, gpu.sm_count)
    study_kernels = StudyKernels("cluster_launch", study)
    kernel = study_kernels[KERNEL]
    # every launch below may use up to the largest setting's shared memory (set once, never lowered)
    launch_mod.set_max_dynamic_shared_bytes(kernel, max(p.dynamic_shared_bytes for p in points))
    timing_started = provenance.utc_now()       # the kernel's compile (or cache lookup) and loading end here
    resident = {}
    for p in points:
        shape = (p.cluster_size, p.threads_per_cta, p.dynamic_shared_bytes)
        if shape not in resident:
            resident[shape] = launch_mod.max_active_clusters(kernel, *shape)
    records = Records(max(p.grid_ctas for p in points))
    cases = [Case(p, kernel, records, gpu.sm_count, resident[(p.cluster_size, p.threads_per_cta,
                                                                p.dynamic_shared_bytes)]) for p in points]
    timings = timing.run([case.timed_case() for case in cases], study="cluster_launch", **study["timing"])

    rows, ctas = [], []
    for case in cases:
        t = timings[case.point.key].columns()
        if t["timing_status"] == "ok" and t["time_us_median"] * 1e3 < case.point.spin_ns:
            raise timing.CorrectnessError(f"{case.point.key}: timed {t['time_us_median']:.1f} us, shorter than "
                                          f"its CTAs' spin of {case.point.spin_ns} ns")
        rows.append({**case.columns(), **t})
        key = {k: v for k, v in case.point.columns().items() if k in CTA_KEY}
        ctas.append(case.ctas.assign(**key)[[*CTA_KEY, *CTA_COLUMNS]])
    record = provenance.build(
        study="cluster_launch", gpu=gpu.as_dict(), study_config=study, repo=REPO_ROOT, started=started,
        extra={"nvidia_smi_before": clocks_before, "nvidia_smi_after": provenance.nvidia_smi_clocks(),
               "timer": "cuda-bench (nvbench) cold samples, device events; per CTA: %globaltimer at entry "
                        "and after the spin, from one launch per point (its correctness check)",
               "configurations": len(points), "timing_started_utc": timing_started, **study_kernels.provenance(),
               "numpy_row_stack_shim_applied": numpy_compat.SHIM_APPLIED})
    with atomic.staged_directory(out_dir) as staging:
        study_kernels.table().to_csv(staging / "kernels.csv", index=False)
        pd.DataFrame(rows).to_csv(staging / "launch.csv", index=False)
        pd.concat(ctas, ignore_index=True).to_csv(staging / "ctas.csv", index=False)
        (staging / "provenance.json").write_text(json.dumps(record, indent=2, default=str) + "\n")

