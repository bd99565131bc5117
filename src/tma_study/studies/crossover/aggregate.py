"""Aggregate the crossover study's raw data (CPU only).

Writes into ``derived_dir``:
- ``best.csv``       per (working set, order, mechanism, size, ring bytes per SM, plus ring "any"):
                     the configuration with the highest median GB/s, as fractions of the ceilings
- ``crossover.csv``  per (working set, order, ring, alternative): the transfer size from which
                     TMA is at least as fast as the alternative at every larger size, bracketed
- ``peaks.csv``      per (working set, mechanism): best GB/s over everything, vs the ceilings
- ``ceilings.csv``   the best of each ceiling per working set
- ``latency.csv``    one transfer's latency over the full dependent chain, per mechanism, size (those
                     of the stream sweep) and level (as measured)
- ``latency_chain.csv``  at the sizes chased in every form: each form's latency, from the full chain
                     down to the transfer's own issue-to-arrival latency, as a fraction of the full
                     chain's and against cp.async's and plain loads' in the same form
- ``reproducibility.csv``  how far a second run of the same sweep moved the numbers (when one exists)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tma_study.harness import raw_data
from tma_study.atomic import atomic_write_text

from . import STUDY

TMA = "tma_tile"
ANY_RING = 0                   # ring_bytes_per_sm value meaning "best over every ring size"
MIN_TOLERANCE = 0.01           # two medians closer than 1 % (or their spreads) are a tie
GROUP = ["working_set", "access_order", "mechanism", "bytes_per_transfer"]
KNOBS = ["ring_bytes_per_sm", "stages", "ctas_per_sm", "consumer_threads", "producer_threads", "issue_threads",
         "stage_bytes", "bytes_in_flight_per_sm_bound"]


def _write(frame: pd.DataFrame, path: Path) -> None:
    atomic_write_text(path, frame.to_csv(index=False))


def best_ceilings(ceilings: pd.DataFrame) -> pd.DataFrame:
    """Highest GB/s of each ceiling per working set."""
    best = ceilings.loc[ceilings.groupby(["ceiling", "working_set"])["gbps"].idxmax()]
    return best.reset_index(drop=True)


def _ceiling(ceilings: pd.DataFrame, name: str, working_set: str | None = None) -> float:
    """Best GB/s of ceiling ``name`` (on ``working_set``, or wherever it was measured)."""
    row = ceilings[ceilings.ceiling == name]
    if working_set is not None:
        row = row[row.working_set == working_set]
    return float(row.gbps.max()) if len(row) else float("nan")


def best_configurations(stream: pd.DataFrame, ceilings: pd.DataFrame, sm_count: int | None = None) -> pd.DataFrame:
    """The fastest configuration per group, per ring size and over all ring sizes.

    ``sm_cycles_per_transfer``: SM clock cycles per transfer on each SM (time x clock over the
    transfers each SM made), the issue cost that limits small transfers.
    """
    stream = stream.assign(relative_iqr=stream.time_us_iqr / stream.time_us_median)
    if sm_count:
        transfers_per_sm = stream.bytes_moved / stream.bytes_per_transfer / sm_count
        stream = stream.assign(sm_cycles_per_transfer=stream.time_us_median * stream.sm_clock_mhz_mean
                               / transfers_per_sm)
    else:
        stream = stream.assign(sm_cycles_per_transfer=float("nan"))
    per_ring = stream.loc[stream.groupby(GROUP + ["ring_bytes_per_sm"])["gbps"].idxmax()]
    overall = stream.loc[stream.groupby(GROUP)["gbps"].idxmax()].assign(best_ring_bytes_per_sm=lambda f: f.ring_bytes_per_sm)
    overall = overall.assign(ring_bytes_per_sm=ANY_RING)
    best = pd.concat([per_ring.assign(best_ring_bytes_per_sm=per_ring.ring_bytes_per_sm), overall])
    d2d = {ws: _ceiling(ceilings, "d2d_copy") for ws in best.working_set.unique()}  # one copy ceiling
    read = {ws: _ceiling(ceilings, "read_stream", ws) for ws in best.working_set.unique()}
    best["fraction_of_d2d_copy"] = best.gbps / best.working_set.map(d2d)
    best["fraction_of_read_stream"] = best.gbps / best.working_set.map(read)
    columns = GROUP + KNOBS + ["best_ring_bytes_per_sm", "gbps", "time_us_median", "time_us_iqr",
                               "relative_iqr", "samples", "sm_clock_mhz_mean", "sm_cycles_per_transfer",
                               "fraction_of_d2d_copy",
                               "fraction_of_read_stream"]
    return best[columns].sort_values(GROUP[:2] + ["ring_bytes_per_sm", "mechanism", "bytes_per_transfer"]) \
        .reset_index(drop=True)


def _status(ratio: float, tolerance: float) -> str:
    if ratio > 1 + tolerance:
        return "win"
    return "tie" if ratio >= 1 - tolerance else "loss"


def crossovers(best: pd.DataFrame) -> pd.DataFrame:
    """Smallest size from which TMA never loses to each alternative (within the noise)."""
    rows = []
    keys = ["working_set", "access_order", "ring_bytes_per_sm"]
    for key, group in best.groupby(keys):
        tma = group[group.mechanism == TMA].set_index("bytes_per_transfer")
        for alternative in sorted(set(group.mechanism) - {TMA}):
            alt = group[group.mechanism == alternative].set_index("bytes_per_transfer")
            sizes = sorted(set(tma.index) & set(alt.index))
            if not sizes:
                continue
            ratio = tma.gbps[sizes] / alt.gbps[sizes]
            tolerance = np.maximum(MIN_TOLERANCE, tma.relative_iqr[sizes] + alt.relative_iqr[sizes])
            status = [_status(r, t) for r, t in zip(ratio, tolerance)]
            # the crossover: first size after the last loss
            losses = [i for i, s in enumerate(status) if s == "loss"]
            first_ok = losses[-1] + 1 if losses else 0
            crossover = sizes[first_ok] if first_ok < len(sizes) else np.nan
            rows.append({
                **dict(zip(keys, key)), "alternative": alternative,
                "crossover_bytes": crossover,
                "crossover_bracket_low_bytes": sizes[first_ok - 1] if first_ok > 0 else np.nan,
                "tma_never_loses": not losses,
                "tma_never_catches_up": first_ok >= len(sizes),
                "smallest_size_bytes": sizes[0], "largest_size_bytes": sizes[-1],
                "ratio_at_smallest": float(ratio.iloc[0]), "ratio_at_largest": float(ratio.iloc[-1]),
                "status_by_size": " ".join(f"{s}:{st}" for s, st in zip(sizes, status)),
            })
    return pd.DataFrame(rows)


def peaks(best: pd.DataFrame) -> pd.DataFrame:
    """Best over every size and knob, per working set, order and mechanism."""
    overall = best[best.ring_bytes_per_sm == ANY_RING]
    top = overall.loc[overall.groupby(["working_set", "access_order", "mechanism"])["gbps"].idxmax()]
    return top.reset_index(drop=True)


CHAIN_ORDER = ("full", "one_thread", "issue_to_arrival", "issue_to_arrival_hint", "issue_to_arrival_test_wait")
CHASE_KEY = ["mechanism", "bytes_per_transfer", "level"]


def with_chain(latency: pd.DataFrame) -> pd.DataFrame:
    """``latency.csv`` with its ``chain`` column; runs measured before it existed chased the full chain."""
    return latency if "chain" in latency.columns else latency.assign(chain="full")


def full_chain_latency(latency: pd.DataFrame, stream_sizes) -> pd.DataFrame:
    """The full dependent chain's rows at the stream sweep's transfer sizes (the raw columns)."""
    latency = with_chain(latency)
    rows = latency[(latency.chain == "full") & latency.bytes_per_transfer.isin(set(stream_sizes))]
    return rows.drop(columns="chain").reset_index(drop=True)


def chain_decomposition(latency: pd.DataFrame) -> pd.DataFrame:
    """Every chase form at the sizes where more than the full chain was chased; ``step``: the
    form's place in CHAIN_ORDER (each drops one cost of the one before), ``fraction_of_full``:
    its cycles over the full chain's (same mechanism, size, level), ``cycles_minus_cp_async``
    and ``cycles_minus_plain_loads``: its cycles less cp.async's and plain loads' in the same form
    (plain loads have no wait form: their issue_to_arrival stands for all three), and
    ``fraction_of_cp_async_full``: its cycles over cp.async's full chain (the copies spread over the
    CTA's threads, cp.async's best form at sizes of more than one copy)."""
    latency = with_chain(latency)
    sizes = latency[latency.chain != "full"].bytes_per_transfer.unique()
    rows = latency[latency.bytes_per_transfer.isin(sizes)].copy()
    if rows.empty:
        return pd.DataFrame(columns=["chain", "step", *CHASE_KEY, "threads_per_cta", "cycles_per_transfer_median",
                                     "cycles_per_transfer_iqr", "ns_per_transfer_median", "fraction_of_full",
                                     "cycles_minus_cp_async", "cycles_minus_plain_loads", "fraction_of_cp_async_full"])
    rows["step"] = rows.chain.map({c: i for i, c in enumerate(CHAIN_ORDER)})
    cycles = rows.set_index(["chain", *CHASE_KEY]).cycles_per_transfer_median
    full = {key[1:]: value for key, value in cycles.items() if key[0] == "full"}

    def other(row, mechanism):
        chain = row.chain if mechanism != "plain_loads" or not row.chain.startswith("issue_to_arrival") \
            else "issue_to_arrival"
        return cycles.get((chain, mechanism, row.bytes_per_transfer, row.level), float("nan"))

    rows["fraction_of_full"] = [r.cycles_per_transfer_median / full.get((r.mechanism, r.bytes_per_transfer, r.level),
                                                                         float("nan")) for r in rows.itertuples()]
    rows["cycles_minus_cp_async"] = [r.cycles_per_transfer_median - other(r, "cp_async") for r in rows.itertuples()]
    rows["cycles_minus_plain_loads"] = [r.cycles_per_transfer_median - other(r, "plain_loads")
                                        for r in rows.itertuples()]
    rows["fraction_of_cp_async_full"] = [r.cycles_per_transfer_median / full.get(("cp_async", r.bytes_per_transfer, r.level),
                                                                                  float("nan")) for r in rows.itertuples()]
    columns = ["chain", "step", *CHASE_KEY, "threads_per_cta", "cycles_per_transfer_median", "cycles_per_transfer_iqr",
               "ns_per_transfer_median", "fraction_of_full", "cycles_minus_cp_async", "cycles_minus_plain_loads",
               "fraction_of_cp_async_full"]
    return rows[columns].sort_values(["bytes_per_transfer", "level", "mechanism", "step"]).reset_index(drop=True)


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    """Write every derived file; ``repeat_dir`` is a second run of the same sweep, if any."""
    raw_dir, derived_dir = Path(raw_dir), Path(derived_dir)
    raw = raw_data.load(STUDY, raw_dir)           # checked before anything is written
    repeat_raw = raw_data.load(STUDY, Path(repeat_dir)) if repeat_dir is not None else None
    stream = raw_data.ok_rows(raw["stream.csv"])
    ceilings = best_ceilings(raw_data.ok_rows(raw["ceilings.csv"]))
    best = best_configurations(stream, ceilings, raw.provenance["gpu"].get("sm_count"))
    derived_dir.mkdir(parents=True, exist_ok=True)
    _write(best, derived_dir / "best.csv")
    _write(crossovers(best), derived_dir / "crossover.csv")
    _write(peaks(best), derived_dir / "peaks.csv")
    _write(ceilings, derived_dir / "ceilings.csv")
    _write(full_chain_latency(raw["latency.csv"], stream.bytes_per_transfer.unique()), derived_dir / "latency.csv")
    _write(chain_decomposition(raw["latency.csv"]), derived_dir / "latency_chain.csv")
    repeat = (reproducibility(raw, repeat_raw, Path(repeat_dir)) if repeat_raw is not None
              else pd.DataFrame({"compared": ["no second run of this sweep is present"]}))
    _write(repeat, derived_dir / "reproducibility.csv")


CONFIG_KEYS = ["mechanism", "working_set", "access_order", "bytes_per_transfer", "ring_bytes_per_sm", "stages",
               "ctas_per_sm", "consumer_threads", "producer_threads", "issue_threads"]
CEILING_KEYS = ["ceiling", "working_set", "ctas_per_sm"]


def _spread(name: str, a: pd.DataFrame, b: pd.DataFrame, keys: list[str]) -> dict:
    joined = a.merge(b, on=keys, suffixes=("_a", "_b"))
    difference = (joined.gbps_a - joined.gbps_b).abs() / ((joined.gbps_a + joined.gbps_b) / 2)
    return {"compared": name, "configurations": len(joined),
            "median_relative_difference": float(difference.median()),
            "p90_relative_difference": float(difference.quantile(0.9)),
            "max_relative_difference": float(difference.max()),
            "share_within_2_percent": float((difference <= 0.02).mean()),
            "share_within_5_percent": float((difference <= 0.05).mean())}


def reproducibility(raw: raw_data.RawData, repeat: raw_data.RawData, repeat_dir: Path) -> pd.DataFrame:
    """How far a second run of the same sweep on the same GPU (``repeat``, read from
    ``repeat_dir``) moved each number; timed rows only."""
    stream_a, stream_b = raw_data.ok_rows(raw["stream.csv"]), raw_data.ok_rows(repeat["stream.csv"])
    all_ceilings_a, all_ceilings_b = raw_data.ok_rows(raw["ceilings.csv"]), raw_data.ok_rows(repeat["ceilings.csv"])
    ceilings_a, ceilings_b = best_ceilings(all_ceilings_a), best_ceilings(all_ceilings_b)
    best_a = best_configurations(stream_a, ceilings_a)
    best_b = best_configurations(stream_b, ceilings_b)
    group = GROUP + ["ring_bytes_per_sm"]
    rows = [_spread("every configuration (stream.csv)", stream_a, stream_b, CONFIG_KEYS),
            _spread("best per mechanism, size, ring (best.csv)", best_a, best_b, group),
            _spread("ceilings", all_ceilings_a, all_ceilings_b, CEILING_KEYS)]
    cross_a, cross_b = crossovers(best_a), crossovers(best_b)
    keys = ["working_set", "access_order", "ring_bytes_per_sm", "alternative"]
    joined = cross_a.merge(cross_b, on=keys, suffixes=("_a", "_b"))
    same = (joined.crossover_bytes_a.fillna(-1) == joined.crossover_bytes_b.fillna(-1))
    rows.append({"compared": "crossover sizes (crossover.csv)", "configurations": len(joined),
                 "share_identical": float(same.mean())})
    return pd.DataFrame(rows).assign(repeat_run=str(repeat_dir))
