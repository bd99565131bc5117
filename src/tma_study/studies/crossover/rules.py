"""The crossover study's rules of thumb (entry point ``rules``): one row per decision, its
wording and numbers computed from the derived data, each naming the figure it rests on."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from tma_study.report.tables import human_bytes

from .facts import BULK, CP_ASYNC, TMA, Facts, crossover_size, describe_crossover

LEVEL_NAMES = {"hbm": "HBM", "l2": "L2"}
# the claims (config/claims/crossover.yaml) each row rests on: a row is a rule only while they PASS
STREAMING_CLAIMS = {"hbm": ("crossover_tma_ties_cp_async_from_1kib_hbm", "crossover_cp_async_wins_small_transfers"),
                    "l2": ("crossover_tma_beats_cp_async_from_2kib_l2", "crossover_tma_ahead_of_cp_async_l2_large")}


def _streaming(facts: Facts, ws: str) -> dict | None:
    row = facts.crossover_row(ws, CP_ASYNC)
    if row is None:
        return None
    crossing = crossover_size(row)
    smallest = human_bytes(row.smallest_size_bytes)
    if math.isnan(crossing):
        rule = f"use cp.async: TMA never catches up with it (up to {human_bytes(row.largest_size_bytes)})"
    elif row.tma_never_loses:
        rule = "use TMA at every size"
    else:
        rule = (f"use TMA (or a 1-D bulk copy) for transfers of {human_bytes(crossing)} and more; "
                f"cp.async below")
    evidence = (f"TMA/cp.async GB/s: {row.ratio_at_smallest:.2f} at {smallest}, "
                f"{row.ratio_at_largest:.2f} at {human_bytes(row.largest_size_bytes)}; TMA not slower "
                f"{describe_crossover(row)}")
    return {"situation": f"streaming tiles from {LEVEL_NAMES[ws]}, each mechanism tuned", "rule": rule,
            "evidence": evidence, "figure": "crossover_bandwidth", "claims": STREAMING_CLAIMS[ws]}


def _bytes_in_flight(facts: Facts) -> dict | None:
    rings = facts.rings()
    peak = facts.peak("hbm", TMA)
    if not rings or peak is None:
        return None
    shallow = [facts.crossover_row(ws, CP_ASYNC, rings[0]) for ws in ("hbm", "l2")]
    shallow = [r for r in shallow if r is not None]
    never = [LEVEL_NAMES[r.working_set] for r in shallow if r.tma_never_catches_up]
    rule = f"keep at least {human_bytes(peak.best_ring_bytes_per_sm)} in flight per SM for TMA"
    if peak.best_ring_bytes_per_sm == rings[-1]:
        rule += " (the deepest ring swept: more may help)"
    evidence = f"TMA peaks from HBM with a {human_bytes(peak.best_ring_bytes_per_sm)} ring"
    if never:
        evidence += (f"; with {human_bytes(rings[0])} TMA never catches up with cp.async "
                     f"({', '.join(never)})")
    return {"situation": "sizing the shared-memory ring (stages x stage bytes x CTAs per SM)", "rule": rule,
            "evidence": evidence, "figure": "crossover_map",
            "claims": ("crossover_tma_peak_needs_deep_ring", "crossover_shallow_ring_never_catches_cp_async")}


def _tensor_vs_bulk(facts: Facts) -> dict | None:
    deviations = [(facts.ratio_to(ws, BULK) - 1).abs().max() for ws in ("hbm", "l2")]
    deviations = [d for d in deviations if not math.isnan(d)]
    if not deviations:
        return None
    worst = max(deviations)
    return {"situation": "TMA tensor tile or 1-D bulk copy",
            "rule": "choose by addressing (tensor map, boxes, OOB fill), not by bandwidth",
            "evidence": f"same bandwidth within {100 * worst:.1f} % at every size, HBM and L2",
            "figure": "crossover_bandwidth", "claims": ("crossover_tma_equals_bulk_copy",)}


def _producer_path_cycles(derived_dir: Path) -> dict | None:
    """From the chase decomposition (latency_chain.csv), TMA's own latency and what the stage
    producer adds to it, at the smallest chased size from L2: None where only the full chain ran."""
    path = Path(derived_dir) / "latency_chain.csv"
    chain = pd.read_csv(path) if path.exists() else pd.DataFrame()
    if chain.empty:
        return None
    rows = chain[(chain.mechanism == "tma_tile") & (chain.level == "l2")]
    size = rows.bytes_per_transfer.min()
    cycles = rows[rows.bytes_per_transfer == size].set_index("chain").cycles_per_transfer_median
    if not {"issue_to_arrival", "one_thread"} <= set(cycles.index):
        return None
    return {"bytes": int(size), "own": float(cycles["issue_to_arrival"]),
            "producer": float(cycles["one_thread"] - cycles["issue_to_arrival"])}


def _latency(facts: Facts, derived_dir: Path) -> dict | None:
    rows = []
    for level in ("hbm", "l2"):
        ratio = facts.latency_ratio(level)
        if len(ratio):
            faster = ratio[ratio < 1]
            rows.append((level, ratio, faster.index[0] if len(faster) else None))
    if not rows:
        return None
    crossing = [f for _, _, f in rows if f is not None]
    below = f"below {human_bytes(min(crossing))}" if crossing else "at every measured size"
    evidence = "; ".join(f"{LEVEL_NAMES[level]}: full-chain TMA/cp.async latency {ratio.iloc[0]:.2f} at "
                         f"{human_bytes(ratio.index[0])}" for level, ratio, _ in rows)
    path = _producer_path_cycles(derived_dir)
    if path is None:
        rule = f"a lone dependent transfer {below}: cp.async (TMA's round trip is longer)"
        claims = ("crossover_tma_latency_higher_small",)
    else:
        rule = (f"a lone dependent transfer: TMA issued on a short path (coordinates ready, no stage loop); "
                f"through a general stage producer, cp.async {below}")
        evidence += (f"; TMA's own issue-to-arrival latency from L2 at {human_bytes(path['bytes'])}: "
                     f"{path['own']:.0f} cycles, the stage producer's instructions add {path['producer']:.0f}")
        claims = ("crossover_tma_latency_higher_small", "crossover_tma_chain_cost_is_the_producer_path",
                  "crossover_lean_tma_beats_every_cp_async_chain")
    return {"situation": "latency-bound loads (one transfer at a time, every consumer thread waiting on it)",
            "rule": rule, "evidence": evidence, "figure": "crossover_latency", "claims": claims}


def rules_of_thumb(derived_dir: Path, provenance: dict) -> list[dict]:
    facts = Facts.load(derived_dir)
    rows = [_streaming(facts, "hbm"), _streaming(facts, "l2"), _bytes_in_flight(facts), _tensor_vs_bulk(facts),
            _latency(facts, derived_dir)]
    return [row for row in rows if row is not None]
