"""Derived tables of the gemm_cluster_counters study (results/<gpu>/gemm_cluster_counters/derived/).

A *k-block* is one CTA tile's step along K (tile_m x tile_k of A and tile_n x tile_k of B: the
operand bytes of one pipeline stage); the problem has (M/tile_m)(N/tile_n)(K/tile_k) of them.

- ``counters.csv`` per configuration (variant x tile order): the raw counters and, from them,
  TFLOP/s of the counted launch, SM cycles per k-block (the kernel's cycles times the SMs over the
  k-blocks: the period of one pipeline stage per SM), L2 -> SM bytes per operand byte (1: each CTA
  reads its own copy; a multicast operand is read once per cluster), L2 -> SM TB/s, bytes per L2
  request, L2 requests per SM cycle, and DRAM bytes read over the two operands' bytes
- ``contrast.csv`` per cluster variant at its best order: the same quantities beside its 1x1
  sibling's at the sibling's best order, their ratios, and the gain and verdict the gemm_cluster
  run timed for the pair at this size (``gemm_cluster_dir``)
- ``rule.csv``     the counters' verdict scored against the GEMM: a family whose 1x1 variant runs
  the L2's tag lookups at ``TAG_BOUND_PCT`` or more of their peak with the tensor pipe busy
  ``TENSOR_IDLE_PCT`` or less of its active cycles is *L2-request bound*, and a cluster is
  predicted to beat its best-ordered 1x1 sibling exactly there; scored per size and over every
  size of the gemm_cluster run against its fair verdicts (the family's counters are this run's,
  at ``size``): agreement, and how many of the GEMM's wins the rule names
- ``rule_baselines.csv`` that rule, and its thresholds chosen by cross-validation across sizes, beside
  the trivial baselines with bootstrap intervals (baselines.py)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tma_study.harness import raw_data
from tma_study.gemm_lib.cluster_gains import configurations, gains
from tma_study.gemm_lib.rows import BYTES_PER_ELEMENT

from . import STUDY
from .baselines import rule_baselines

SECTOR_BYTES = 32
TAG_BOUND_PCT = 90.0        # the 1x1's L2 tag lookups at this share of their peak or more ...
TENSOR_IDLE_PCT = 85.0      # ... with its tensor pipe busy this share of its active cycles or less
EVERY_SIZE = "every size"
PAIR = ["dtype", "size", "family"]
KEPT = ["tflops", "cycles_per_kblock", "l2_reads_per_operand_byte", "l2_read_tbps", "l2_requests_per_sm_cycle",
        "bytes_per_l2_request", "l2_read_sectors_pct", "l2_tag_requests_pct", "l2_throughput_pct", "tensor_active_pct",
        "dram_reads_per_operand_byte"]


def _tile(tile: str) -> tuple[int, int, int]:
    m, n, k = (int(t) for t in tile.split("x"))
    return m, n, k


def derive(counters: pd.DataFrame, sm_count: int) -> pd.DataFrame:
    """The raw counters with the per-k-block and per-byte quantities of the module docstring."""
    out = counters.copy()
    tiles = out.tile.map(_tile)
    size = out["size"].astype(float)
    element = out.dtype.map(BYTES_PER_ELEMENT).astype(float)
    tile_m, tile_n, tile_k = (tiles.map(lambda t, i=i: t[i]).astype(float) for i in range(3))
    out["kblocks"] = (np.ceil(size / tile_m) * np.ceil(size / tile_n) * np.ceil(size / tile_k)).astype(int)
    operand_bytes = out.kblocks * (tile_m + tile_n) * tile_k * element       # every CTA reading its own copy
    seconds = out.duration_ns * 1e-9
    sm_cycles = seconds * out.sm_clock_hz
    out["tflops"] = 2 * size ** 3 / seconds / 1e12
    out["cycles_per_kblock"] = sm_cycles * sm_count / out.kblocks
    l2_bytes = out.l2_read_sectors * SECTOR_BYTES
    out["l2_reads_per_operand_byte"] = l2_bytes / operand_bytes
    out["l2_read_tbps"] = l2_bytes / seconds / 1e12
    out["bytes_per_l2_request"] = l2_bytes / out.l2_read_requests
    out["l2_requests_per_sm_cycle"] = out.l2_read_requests / (sm_cycles * sm_count)
    out["dram_reads_per_operand_byte"] = out.dram_read_bytes / (2 * size * size * element)
    return out


def fair_gains(gemm_cluster: Path) -> pd.DataFrame | None:
    """The fair gain and verdict of gemm_cluster's gains.csv rows (every size), computed from the raw
    samples in ``gemm_cluster`` as that study does (gemm_lib.cluster_gains), or None where it has none."""
    samples_csv = Path(gemm_cluster) / "samples.csv"
    if not samples_csv.is_file():
        return None
    samples = pd.read_csv(samples_csv)
    rows = gains(samples, configurations(samples))
    return rows[["dtype", "size", "family", "cluster", "variant", "fair_gain", "fair_verdict"]].rename(
        columns={"fair_gain": "timed_fair_gain", "fair_verdict": "timed_fair_verdict"})


def scored_comparisons(derived: pd.DataFrame, timed: pd.DataFrame) -> tuple[dict, pd.DataFrame]:
    """({(dtype, family): L2-request bound}, the timed comparisons of those families with the 1x1's tag
    and tensor shares, the rule's predicted win and the GEMM's win)."""
    one = derived[(derived.order == "best") & (derived.cluster == "1x1")]
    bound = {(r.dtype, r.family): bool(r.l2_tag_requests_pct >= TAG_BOUND_PCT and r.tensor_active_pct <= TENSOR_IDLE_PCT)
             for r in one.itertuples()}
    shares = one.set_index(["dtype", "family"])[["l2_tag_requests_pct", "tensor_active_pct"]]
    scored = timed[[(d, f) in bound for d, f in zip(timed.dtype, timed.family)]].copy()
    scored["predicted_win"] = [bound[(d, f)] for d, f in zip(scored.dtype, scored.family)]
    scored["gemm_win"] = scored.timed_fair_verdict == "win"
    keys = list(zip(scored.dtype, scored.family))
    scored["tag_pct"] = [shares.loc[k, "l2_tag_requests_pct"] for k in keys]
    scored["tensor_pct"] = [shares.loc[k, "tensor_active_pct"] for k in keys]
    return bound, scored


def rule(derived: pd.DataFrame, timed: pd.DataFrame | None) -> pd.DataFrame:
    """The L2-request-bound verdict of each family's 1x1 (best order) against the GEMM's fair
    verdicts, per size of the gemm_cluster run and over all of them."""
    if timed is None:
        return pd.DataFrame([{"scope": EVERY_SIZE, "status": "not measured: no gemm_cluster samples beside this run"}])
    bound, scored = scored_comparisons(derived, timed)
    rows = []
    for scope, group in [*((str(size), g) for size, g in scored.groupby("size")), (EVERY_SIZE, scored)]:
        agree = group.predicted_win == group.gemm_win
        rows.append({"scope": scope, "status": "measured", "comparisons": len(group),
                     "predicted_wins": int(group.predicted_win.sum()), "gemm_wins": int(group.gemm_win.sum()),
                     "gemm_wins_predicted": int((group.gemm_win & group.predicted_win).sum()),
                     "fraction_gemm_wins_predicted": (group.gemm_win & group.predicted_win).sum() / max(1, group.gemm_win.sum()),
                     "agree": int(agree.sum()), "fraction_agree": agree.mean(),
                     "tag_bound_pct": TAG_BOUND_PCT, "tensor_idle_pct": TENSOR_IDLE_PCT,
                     "bound_families": " ".join(sorted(f"{d}/{f}" for (d, f), b in bound.items() if b))})
    return pd.DataFrame(rows)


def contrast(derived: pd.DataFrame, timed: pd.DataFrame | None) -> pd.DataFrame:
    """Each cluster variant at its best order beside its 1x1 sibling at the sibling's best order."""
    best = derived[derived.order == "best"]
    one = best[best.cluster == "1x1"].set_index(PAIR)
    rows = []
    for r in best[best.cluster != "1x1"].itertuples():
        key = (r.dtype, r.size, r.family)
        if key not in one.index:
            continue
        base = one.loc[key]
        row = {"dtype": r.dtype, "size": r.size, "family": r.family, "mainloop": r.mainloop, "tile": r.tile,
               "cluster": r.cluster, "variant": r.variant, "sibling": base.variant}
        for column in KEPT:
            row[column] = getattr(r, column)
            row[f"one_{column}"] = base[column]
        row["tflops_ratio"] = r.tflops / base.tflops
        row["cycles_per_kblock_ratio"] = r.cycles_per_kblock / base.cycles_per_kblock
        row["l2_reads_ratio"] = r.l2_reads_per_operand_byte / base.l2_reads_per_operand_byte
        rows.append(row)
    out = pd.DataFrame(rows)
    if timed is not None and len(out):
        out = out.merge(timed[["dtype", "size", "variant", "timed_fair_gain", "timed_fair_verdict"]],
                        on=["dtype", "size", "variant"], how="left")
    return out


def gemm_cluster_dir(raw_dir: Path, study_config: dict) -> Path:
    """The gemm_cluster run the counters are read beside: this results folder's, else the one whose
    best orders were profiled (config orders_from)."""
    beside = Path(raw_dir).parent / "gemm_cluster"
    if (beside / "samples.csv").is_file():
        return beside
    return Path(raw_dir).parent.parent / study_config.get("orders_from", Path(raw_dir).parent.name) / "gemm_cluster"


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    raw_dir = Path(raw_dir)
    raw = raw_data.load(STUDY, raw_dir)                          # checked before anything is written
    sm_count = int(raw.provenance["gpu"]["sm_count"])
    derived = derive(raw["counters.csv"], sm_count)
    timed = fair_gains(gemm_cluster_dir(raw_dir, raw.provenance.get("config", {})))
    tables = {"counters.csv": derived, "contrast.csv": contrast(derived, timed), "rule.csv": rule(derived, timed),
              "rule_baselines.csv": rule_baselines(*scored_comparisons(derived, timed)) if timed is not None
              else rule_baselines({}, None)}
    derived_dir = Path(derived_dir)
    derived_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        table.to_csv(derived_dir / name, index=False)
