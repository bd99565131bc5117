"""The ncu side of the gemm_cluster_counters study: which metrics, the command, and its output.

``METRICS`` maps each counters.csv column to an ncu metric. A metric this ncu does not list
(``ncu --query-metrics`` on the GPU) is left out of the command and its column left empty, and
provenance.json names it; the duration, the SM clock and the L2 read sectors are required.
"""
from __future__ import annotations

import math
import sys

from tma_study.harness.ncu import base_name, number, raw_page

CHILD_MODULE = __name__.rpartition(".")[0] + ".child"
METRICS = {
    "duration_ns": "gpu__time_duration.sum",
    "sm_clock_hz": "sm__cycles_elapsed.avg.per_second",
    # L2 -> SM: sectors (32 B) and requests the SMs' TEX/TMA path read from L2, and how busy the L2 was
    "l2_read_sectors": "lts__t_sectors_srcunit_tex_op_read.sum",
    "l2_read_requests": "lts__t_requests_srcunit_tex_op_read.sum",
    "l2_read_sectors_pct": "lts__t_sectors_srcunit_tex_op_read.sum.pct_of_peak_sustained_elapsed",
    "l2_sectors_pct": "lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
    "l2_tag_requests_pct": "lts__t_tag_requests.avg.pct_of_peak_sustained_elapsed",
    "l2_throughput_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    # crossbar -> SMs: the bytes the SMs received (a multicast delivers to each CTA of the cluster)
    "xbar_to_sm_bytes": "l1tex__m_xbar2l1tex_read_bytes.sum",
    "xbar_to_sm_pct": "l1tex__m_xbar2l1tex_read_bytes.sum.pct_of_peak_sustained_elapsed",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    # the tensor pipe's busy cycles (wgmma included) as a share of the active cycles
    "tensor_active_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
}
REQUIRED = ("duration_ns", "sm_clock_hz", "l2_read_sectors")
TIME_SCALE_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}


def usable(listed: set[str]) -> tuple[dict[str, str], list[str]]:
    """({column: metric} of METRICS that ncu lists, [metrics it does not]); ValueError when a
    required one is missing."""
    kept = {c: m for c, m in METRICS.items() if base_name(m) in listed}
    missing = [m for c, m in METRICS.items() if c not in kept]
    lost = [c for c in REQUIRED if c not in kept]
    if lost:
        raise ValueError(f"ncu lists none of {[METRICS[c] for c in lost]}: gemm_cluster_counters cannot count "
                         "without them (is this ncu for this GPU?)")
    return kept, missing


def command(ncu: str, metrics: dict[str, str], spec_file: str, checks_file: str) -> list[str]:
    """ncu over the child: only the launches between cudaProfilerStart/Stop (one per configuration),
    clocks left as they are, raw CSV page in base units."""
    return [ncu, "--profile-from-start", "off", "--clock-control", "none", "--target-processes", "all",
            "--metrics", ",".join(metrics.values()), "--page", "raw", "--csv", "--print-units", "base",
            sys.executable, "-m", CHILD_MODULE, spec_file, checks_file]


def parse(ncu_csv: str, metrics: dict[str, str], count: int) -> list[dict]:
    """One {column: value} per profiled kernel, in launch order, with the kernel's function name; ValueError
    unless there are exactly ``count`` and the duration is in a time unit."""
    names, units, values = raw_page(ncu_csv, tuple(metrics.values()))
    if len(values) != count:
        raise ValueError(f"ncu counted {len(values)} kernels, expected one per configuration ({count})")
    duration_unit = units[names.index(metrics["duration_ns"])]
    if duration_unit not in TIME_SCALE_NS:
        raise ValueError(f"ncu gave {metrics['duration_ns']} in {duration_unit!r}, not a time unit")
    out = []
    for row in values:
        record = {c: number(row[names.index(m)]) for c, m in metrics.items()}
        record["duration_ns"] *= TIME_SCALE_NS[duration_unit]
        name = row[names.index("Kernel Name")] if "Kernel Name" in names else ""
        record["kernel"] = name.split("<", 1)[0].strip()         # e.g. 'void cutlass::device_kernel'
        out.append(record)
    for c in METRICS:
        if c not in metrics:
            for record in out:
                record[c] = math.nan
    return out
