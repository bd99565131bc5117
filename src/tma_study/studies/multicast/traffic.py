"""L2 -> SM traffic of a few multicast configurations, counted by Nsight Compute (ncu).

``measure`` runs ``traffic_child`` under ncu when ncu is on PATH (``python -m
tma_study.studies.multicast.traffic_child CONFIG_JSON``): it launches each configuration listed
here once (after its correctness check) so ncu's counters show the bytes multicast saves.
Without ncu the table says "not measured: ncu not found". Analysis reads the configurations
from here too (the operand bytes of each profiled launch).
"""
from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

from .grid import ClusterConfig

# L2 -> SM: bytes the L2 slices returned to the SMs' L1TEX/shared-memory path, and the L2
# sectors read by that path; DRAM reads for scale.
METRICS = ("l1tex__m_xbar2l1tex_read_bytes.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
           "dram__bytes_read.sum")
KERNEL_NAME = "cluster_stream"
NOT_MEASURED = "not measured: ncu not found on PATH"
CHILD_MODULE = __name__.rpartition(".")[0] + ".traffic_child"    # the process ncu profiles


def traffic_configs(study: dict) -> list[dict]:
    """1-D broadcast, HBM operand, 16 KiB tiles, 4 stages: baseline and cluster sizes 2, 4, 16."""
    ws = study["working_sets"].get("hbm") or next(iter(study["working_sets"].values()))
    configs = [{"variant": "no_cluster", "n": 1}]
    configs += [{"variant": v, "n": n} for n in (2, 4, 16) if n in study["cluster_sizes"]
                for v in ("no_cluster", "multicast")]
    return [{**c, "tile_bytes": 16384, "stages": 4, "release": study["releases"][0], "bytes": ws["bytes"],
             "unique_bytes_per_launch": ws["unique_bytes_per_launch"]} for c in configs]


def traffic_config(spec: dict) -> ClusterConfig:
    """The sweep's configuration of one entry of ``traffic_configs``."""
    return ClusterConfig("1d", spec["variant"], 1, spec["n"], spec["tile_bytes"], spec["stages"], 1, 256, "hbm",
                         spec["bytes"], spec["unique_bytes_per_launch"], spec["release"])


def run_under_ncu(study: dict, workdir: Path) -> list[dict]:
    """One row per configuration: its key and each metric (or the reason it is missing)."""
    specs = traffic_configs(study)
    ncu = shutil.which("ncu")
    if ncu is None:
        return [{"key": traffic_config(s).key, "status": NOT_MEASURED} for s in specs]
    spec_file = workdir / "traffic_configs.json"
    spec_file.write_text(json.dumps(specs))
    command = [ncu, "--csv", "--metrics", ",".join(METRICS), "--kernel-name-base", "function",
               "--kernel-name", f"regex:{KERNEL_NAME}", "--launch-skip", "0", "--clock-control", "none",
               "--target-processes", "all", sys.executable, "-m", CHILD_MODULE, str(spec_file)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        return [{"key": traffic_config(s).key, "status": f"ncu failed ({result.returncode}): {result.stderr[-300:]}"}
                for s in specs]
    return _parse(result.stdout, specs)


def _parse(stdout: str, specs: list[dict]) -> list[dict]:
    """ncu --csv rows (one per kernel launch and metric) -> one row per configuration.

    The child launches each configuration twice (its check, then the counted launch), so
    launch 2i+1 belongs to configuration i.
    """
    lines = [line for line in stdout.splitlines() if line.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    by_launch: dict[int, dict] = {}
    for row in rows:
        by_launch.setdefault(int(row["ID"]), {})[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    launches = sorted(by_launch)
    out = []
    for i, spec in enumerate(specs):
        key = traffic_config(spec).key
        index = 2 * i + 1
        if index >= len(launches):
            out.append({"key": key, "status": f"not measured: ncu reported {len(launches)} launches"})
            continue
        out.append({"key": key, "status": "measured", **by_launch[launches[index]]})
    return out
