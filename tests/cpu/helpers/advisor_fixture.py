"""Synthetic microbenchmark tables for the advisor's tests: an Evidence, or the same tables written
as a results folder (results/<label>/{crossover,multicast,dsm}/derived/) the CLI can read."""
import json
import shutil
from pathlib import Path

import pandas as pd

from tma_study.advisor.evidence import Evidence
from tma_study.config import REPO_ROOT

SIZES = (256, 1024, 4096, 16384)
RINGS = (32768, 131072)
# GB/s by (level, mechanism): a function of size and ring; TMA slow at small sizes, cp.async flat
RATE = {
    "tma_tile": lambda size, ring: min(4000.0, size * (2.0 if ring > 32768 else 1.0)),
    "bulk_copy": lambda size, ring: min(4000.0, size * (2.0 if ring > 32768 else 1.0)),
    "cp_async": lambda size, ring: 3000.0,
    "plain_loads": lambda size, ring: 2000.0,
}


def evidence(scale: float = 1.0, label: str = "synthetic") -> Evidence:
    best = pd.DataFrame([{"working_set": level, "mechanism": m, "bytes_per_transfer": s, "ring_bytes_per_sm": r,
                          "gbps": RATE[m](s, r) * (1.5 if level == "l2" else 1.0) * (scale if m == "tma_tile" else 1)}
                         for level in ("hbm", "l2") for m in RATE for s in SIZES for r in RINGS])
    chain = pd.DataFrame([{"chain": "full", "mechanism": m, "bytes_per_transfer": s, "level": level,
                           "cycles_per_transfer_median": {"tma_tile": 1200, "bulk_copy": 1190, "cp_async": 800,
                                                          "plain_loads": 900}[m]}
                          for level in ("hbm", "l2") for m in RATE for s in (16, 256)])
    speedup = pd.DataFrame([{"pattern": "1d", "working_set": level, "cluster_x": 1, "cluster_y": n, "tile_bytes": t,
                             "speedup_over_no_cluster": 0.9} for level in ("hbm", "l2") for n in (2, 4)
                            for t in (4096, 65536)])
    winners = pd.DataFrame([{"working_set": level, "cluster_size": n, "tile_bytes": t, "multicast_gbps": 3000.0,
                             "dsm_pull_gbps": 1000.0, "dsm_push_gbps": 1500.0}
                            for level in ("hbm", "l2") for n in (2, 4) for t in (4096, 65536)])
    tables = {("crossover", "best.csv"): best, ("crossover", "latency_chain.csv"): chain,
              ("multicast", "speedup.csv"): speedup, ("dsm", "winners.csv"): winners}
    gpu = {"name": "synthetic", "sm_count": 100, "max_sm_clock_khz": 2_000_000, "slug": "synthetic"}
    return Evidence(label, tables, {"crossover": label}, gpu, {"bf16": 1000.0, "fp16": 1000.0, "fp8": 2000.0,
                                                              "tf32": 500.0})


def write_results(folder: Path, label: str = "synthetic") -> Path:
    """The synthetic tables as results/<label>/, each study with the reference's provenance.json."""
    ev = evidence(label=label)
    root = Path(folder) / label
    for (study, name), frame in ev.tables.items():
        (root / study / "derived").mkdir(parents=True, exist_ok=True)
        frame.to_csv(root / study / "derived" / name, index=False)
        shutil.copy(REPO_ROOT / "results" / "h200" / study / "provenance.json", root / study / "provenance.json")
    return root
