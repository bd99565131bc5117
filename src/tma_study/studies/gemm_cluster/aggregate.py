"""Derived tables of the gemm_cluster study (results/<gpu>/gemm_cluster/derived/*.csv), from samples.csv.

A *gain* of configuration X over configuration B of the same shape is B's time over X's (X's
TFLOP/s over B's), taken round by round: both ran in the same round, so in the same power state.
The gain is the median of the per-round gains; its *spread* is their interquartile range over
their median. A gain is a ``win`` above 1 + tolerance, a ``loss`` below 1 - tolerance, else a
``tie``, with tolerance = the larger of the gemm study's TIE_TOLERANCE and the spread (as the
gemm study's rule scoring does). A variant's *best order* is its tile order (swizzle, raster
order) with the highest median TFLOP/s over the rounds (ties: smaller swizzle, then config order);
the *default order* is swizzle 1 with the heuristic raster order, CUTLASS's default and the gemm
study's. The best order is chosen on the same rounds its gain is taken from, so a gain from a best
order leans up by about the noise of picking the fastest of a variant's orders; best against best
has that lean on both sides, and the verdict's tolerance is at least the rounds' spread.

- ``configurations.csv`` per (shape, variant, tile order): median time and TFLOP/s over the rounds,
                         quartiles, median SM clock and power, whether it is the variant's best order
- ``tile_order.csv``     per (shape, variant), 1x1 included: its best order's gain over its default
                         order (the tile-order effect)
- ``same_order.csv``     per (shape, cluster variant, tile order): its gain over the 1x1 sibling at
                         the same order (at the default order: the gemm study's comparison)
- ``gains.csv``          per (shape, cluster variant): the gain over the 1x1 sibling at the default
                         order (``default_gain``), the gain of its best order over the 1x1's best
                         order (``fair_gain``: the fair comparison), the 1x1's own tile-order gain
                         (``one_order_gain``), and the share of the default gain that the fair
                         comparison loses (``order_share_of_gain``); beside the default and fair
                         verdicts, the gain's bootstrap interval and its verdict (intervals.py)
- ``summary.csv``        per (dtype, cluster): medians, ranges and win/tie/loss counts of the three gains
- ``rule.csv``           the multicast microbenchmark's verdict that the gemm study scores (gemm.predict:
                         the 2-D pattern's multicast vs own copies at the cluster shape and A tile size, per
                         operand location) against both baselines: how often "not faster" holds
- ``rule_baselines.csv`` that verdict beside the trivial baselines, with bootstrap intervals (baselines.py)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tma_study.harness import raw_data
from tma_study.gemm_lib.verdicts import gemm_verdict as _gemm_verdict
from tma_study.studies.gemm.predict import multicast_verdicts
from tma_study.gemm_lib.rows import BYTES_PER_ELEMENT, MEASURED, NOT_MEASURED_TEXT, TIE_TOLERANCE

from . import STUDY
from .baselines import rule_baselines
from .intervals import with_intervals
from tma_study.gemm_lib.cluster_configs import DEFAULT_ORDER

SHAPE = ["dtype", "size"]
VARIANT = SHAPE + ["family", "mainloop", "tile", "cluster", "variant"]
ORDER = ["swizzle", "raster_order"]
ONE_BY_ONE = "1x1"
BASELINES = {"default_order": "the 1x1 sibling at swizzle 1, heuristic raster order (the gemm study's comparison)",
             "best_order": "each variant at its best tile order (the fair comparison)"}
EVERY_CLUSTER = "every cluster"
RAW_ORDER = {"heuristic": 0, "along_m": 1, "along_n": 2}


def _quartiles(values: pd.Series, prefix: str) -> dict:
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {f"{prefix}_median": median, f"{prefix}_q1": q1, f"{prefix}_q3": q3, f"{prefix}_relative_iqr": (q3 - q1) / median}


def configurations(samples: pd.DataFrame) -> pd.DataFrame:
    """Per (shape, variant, tile order): medians over the rounds, and whether it is the variant's best order."""
    rows = []
    for key, group in samples.groupby(VARIANT + ORDER, sort=False):
        rows.append({**dict(zip(VARIANT + ORDER, key)), "rounds": len(group), "launches": int(group.launches.max()),
                     **_quartiles(group.time_us, "time_us"), "tflops_median": group.tflops.median(),
                     "sm_clock_mhz_median": group.sm_clock_mhz_mean.median(),
                     "power_w_median": group.power_w_mean.median(), "temperature_c_max": group.temperature_c.max(),
                     "power_capped_fraction": float(group.power_capped.astype(bool).mean()),
                     "is_default_order": (int(key[-2]), key[-1]) == DEFAULT_ORDER})
    out = pd.DataFrame(rows)
    out["raster_rank"] = out.raster_order.map(RAW_ORDER)
    out = out.sort_values(SHAPE + ["family", "cluster", "swizzle", "raster_rank"]).reset_index(drop=True)
    best = out.sort_values(["time_us_median", "swizzle", "raster_rank"]).groupby(VARIANT, sort=False).head(1).index
    out["is_best_order"] = out.index.isin(best)
    return out.drop(columns="raster_rank")


def _per_round(samples: pd.DataFrame) -> pd.Series:
    """time_us indexed by (variant, size, swizzle, raster_order, round)."""
    return samples.set_index(["variant", "size", "swizzle", "raster_order", "round"]).time_us.sort_index()


def gain(times: pd.Series, mine: tuple, base: tuple) -> dict:
    """Round-by-round gain of configuration ``mine`` over ``base`` ((variant, size, swizzle, raster)):
    base time / mine time in each round both ran, its median, quartiles, spread and verdict."""
    ratio = (times.loc[base] / times.loc[mine]).dropna()
    if ratio.empty:
        return {"gain": np.nan, "gain_q1": np.nan, "gain_q3": np.nan, "spread": np.nan, "tolerance": np.nan,
                "verdict": "", "rounds_paired": 0}
    q = _quartiles(ratio, "gain")
    spread = q["gain_relative_iqr"]
    return {"gain": q["gain_median"], "gain_q1": q["gain_q1"], "gain_q3": q["gain_q3"], "spread": spread,
            "tolerance": max(TIE_TOLERANCE, spread),
            "verdict": _gemm_verdict(pd.Series([q["gain_median"]]), pd.Series([spread])).iloc[0],
            "rounds_paired": len(ratio)}


def _prefixed(values: dict, prefix: str) -> dict:
    return {(f"{prefix}_gain" if k == "gain" else f"{prefix}_{k}"): v for k, v in values.items()}


def _orders(configs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(best, default) configuration row of each (shape, variant), indexed by (variant, size)."""
    best = configs[configs.is_best_order].set_index(["variant", "size"])
    default = configs[configs.is_default_order].set_index(["variant", "size"])
    return best, default


def tile_order(samples: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    """Per (shape, variant): the best order's gain over the default order."""
    times, (best, default) = _per_round(samples), _orders(configs)
    rows = []
    for (variant, size), b in best.iterrows():
        row = {**{c: b[c] for c in VARIANT if c not in ("variant", "size")}, "variant": variant, "size": size,
               "best_swizzle": int(b.swizzle), "best_raster_order": b.raster_order, "best_tflops": b.tflops_median,
               "orders": int(((configs.variant == variant) & (configs["size"] == size)).sum())}
        if (variant, size) in default.index:
            d = default.loc[(variant, size)]
            row.update({"default_tflops": d.tflops_median,
                        **_prefixed(gain(times, (variant, size, int(b.swizzle), b.raster_order),
                                         (variant, size, *DEFAULT_ORDER)), "order")})
        rows.append(row)
    return pd.DataFrame(rows).sort_values(SHAPE + ["family", "cluster"]).reset_index(drop=True)


def _siblings(configs: pd.DataFrame) -> pd.DataFrame:
    """(cluster variant, its 1x1 sibling, size) of every cluster variant whose sibling was timed."""
    variants = configs.drop_duplicates(["variant", "size"])
    ones = variants[variants.cluster == ONE_BY_ONE].set_index(SHAPE + ["family"]).variant
    pairs = variants[variants.cluster != ONE_BY_ONE].copy()
    pairs["sibling"] = [ones.get((r.dtype, r.size, r.family)) for r in pairs.itertuples()]
    return pairs[pairs.sibling.notna()]


def same_order(samples: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    """Per (shape, cluster variant, tile order): the gain over the 1x1 sibling at that order."""
    times = _per_round(samples)
    timed = configs.set_index(["variant", "size", "swizzle", "raster_order"]).index
    rows = []
    for p in _siblings(configs).itertuples():
        for c in configs[(configs.variant == p.variant) & (configs["size"] == p.size)].itertuples():
            mine, base = (p.variant, p.size, c.swizzle, c.raster_order), (p.sibling, p.size, c.swizzle, c.raster_order)
            if base in timed:
                rows.append({**{k: getattr(p, k) for k in VARIANT}, "sibling": p.sibling, "swizzle": c.swizzle,
                             "raster_order": c.raster_order, "is_default_order": c.is_default_order,
                             **gain(times, mine, base)})
    return pd.DataFrame(rows)


def _cluster_exceeds_tiles(size: int, tile: str, cluster: str) -> bool:
    tile_m, tile_n, _ = map(int, tile.split("x"))
    cluster_m, cluster_n = map(int, cluster.split("x"))
    return bool(np.ceil(size / tile_m) < cluster_m or np.ceil(size / tile_n) < cluster_n)


def gains(samples: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    """Per (shape, cluster variant): default_gain, fair_gain, one_order_gain, cluster_order_gain."""
    times, (best, default) = _per_round(samples), _orders(configs)
    rows = []
    for p in _siblings(configs).itertuples():
        cluster_m, cluster_n = map(int, p.cluster.split("x"))
        tile_m, _, tile_k = map(int, p.tile.split("x"))
        mine_best, one_best = best.loc[(p.variant, p.size)], best.loc[(p.sibling, p.size)]
        mb = (p.variant, p.size, int(mine_best.swizzle), mine_best.raster_order)
        ob = (p.sibling, p.size, int(one_best.swizzle), one_best.raster_order)
        md, od = (p.variant, p.size, *DEFAULT_ORDER), (p.sibling, p.size, *DEFAULT_ORDER)
        have_default = (p.variant, p.size) in default.index and (p.sibling, p.size) in default.index
        row = {**{k: getattr(p, k) for k in VARIANT}, "sibling": p.sibling, "cluster_m": cluster_m,
               "cluster_n": cluster_n, "a_tile_bytes": tile_m * tile_k * BYTES_PER_ELEMENT[p.dtype],
               "cluster_exceeds_tiles": _cluster_exceeds_tiles(p.size, p.tile, p.cluster),
               "best_swizzle": int(mine_best.swizzle), "best_raster_order": mine_best.raster_order,
               "one_best_swizzle": int(one_best.swizzle), "one_best_raster_order": one_best.raster_order,
               "best_tflops": mine_best.tflops_median, "one_best_tflops": one_best.tflops_median,
               "clock_ratio_best": mine_best.sm_clock_mhz_median / one_best.sm_clock_mhz_median,
               **_prefixed(gain(times, mb, ob), "fair")}
        if have_default:
            row.update({"default_tflops": default.loc[(p.variant, p.size)].tflops_median,
                        "one_default_tflops": default.loc[(p.sibling, p.size)].tflops_median,
                        "clock_ratio_default": (default.loc[(p.variant, p.size)].sm_clock_mhz_median
                                                / default.loc[(p.sibling, p.size)].sm_clock_mhz_median),
                        **_prefixed(gain(times, md, od), "default"),
                        **_prefixed(gain(times, ob, od), "one_order"),
                        **_prefixed(gain(times, mb, md), "cluster_order")})
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    if "default_gain" in out:
        # the share of the default comparison's gain that the fair one loses, where there was a gain to lose
        excess = out.default_gain - 1
        share = 1 - (out.fair_gain - 1) / excess
        out["order_share_of_gain"] = share.where(out.default_verdict == "win")
    return out.sort_values(SHAPE + ["family", "cluster"]).reset_index(drop=True)


def _counts(verdicts: pd.Series, prefix: str) -> dict:
    return {f"{prefix}_{v}s": int((verdicts == v).sum()) for v in ("win", "tie", "loss")}


def summary(gain_rows: pd.DataFrame) -> pd.DataFrame:
    """Per (dtype, cluster): the comparisons' gains, medians and ranges, and their verdict counts."""
    rows = []
    for (dtype, cluster), group in gain_rows.groupby(["dtype", "cluster"], sort=True):
        row = {"dtype": dtype, "cluster": cluster, "comparisons": len(group),
               "sizes": " ".join(str(s) for s in sorted(group["size"].unique()))}
        for prefix in ("default", "fair", "one_order", "cluster_order"):
            column = f"{prefix}_gain"
            if column not in group:
                continue
            row.update({f"{column}_median": group[column].median(), f"{column}_min": group[column].min(),
                        f"{column}_max": group[column].max(), **_counts(group[f"{prefix}_verdict"], prefix)})
        if "order_share_of_gain" in group:
            row["order_share_of_gain_median"] = group.order_share_of_gain.median()
        rows.append(row)
    return pd.DataFrame(rows)


def rule(gain_rows: pd.DataFrame, verdicts: pd.DataFrame | None, multicast_raw: Path) -> pd.DataFrame:
    """How often the multicast microbenchmark's verdict holds for the GEMM, per baseline, operand
    location and cluster shape. A prediction of "not faster" (tie or loss) holds where the GEMM's
    cluster variant does not win. Comparisons whose cluster exceeds the tile grid are left out
    (idle CTAs: the pattern has none), as the gemm study does."""
    if verdicts is None or verdicts.empty:
        return pd.DataFrame([{"rule": "multicast", "status": NOT_MEASURED_TEXT + f": the multicast study has no 2-D "
                                                                                 f"data at {multicast_raw}"}])
    busy = gain_rows[~gain_rows.cluster_exceeds_tiles.astype(bool)]
    rows = []
    for baseline in BASELINES:
        column = "default" if baseline == "default_order" else "fair"
        if f"{column}_gain" not in busy:
            continue
        compared = busy[busy[f"{column}_gain"].notna()]
        outcome = compared[f"{column}_verdict"]
        for ws in sorted(verdicts.working_set.unique()):
            table = verdicts[verdicts.working_set == ws].set_index(["cluster_x", "cluster_y", "tile_bytes"])
            predicted = pd.Series([table.status_vs_no_cluster.get((r.cluster_m, r.cluster_n, r.a_tile_bytes), np.nan)
                                   for r in compared.itertuples()], index=compared.index, dtype=object)
            for scope in [EVERY_CLUSTER, *sorted(compared.cluster.unique())]:
                mask = (compared.cluster == scope) if scope != EVERY_CLUSTER else pd.Series(True, index=compared.index)
                known = mask & predicted.notna()
                p, g = predicted[known], outcome[known]
                not_faster = p != "win"
                held = int((not_faster & (g != "win")).sum())
                rows.append({"rule": "multicast", "status": MEASURED, "baseline": baseline,
                             "baseline_is": BASELINES[baseline], "working_set": ws, "scope": scope,
                             "comparisons": int(known.sum()), "predicted_wins": int((p == "win").sum()),
                             "predicted_not_faster": int(not_faster.sum()),
                             "gemm_wins": int((g == "win").sum()), "gemm_ties": int((g == "tie").sum()),
                             "gemm_losses": int((g == "loss").sum()),
                             "not_faster_held": held,
                             "fraction_not_faster_held": held / int(not_faster.sum()) if not_faster.any() else np.nan,
                             "agree": int((p == g).sum()),
                             "fraction_agree": int((p == g).sum()) / int(known.sum()) if known.any() else np.nan,
                             "left_out_idle_ctas": int((gain_rows.cluster_exceeds_tiles.astype(bool)
                                                        & ((gain_rows.cluster == scope) | (scope == EVERY_CLUSTER))).sum()),
                             "left_out_no_verdict_at_tile": int((mask & predicted.isna()).sum())})
    return pd.DataFrame(rows)


DEFAULT_MULTICAST_LABEL = "h200"     # config studies.gemm_cluster.multicast_label, for runs measured before it


def multicast_dir(raw_dir: Path, study_config: dict) -> Path:
    """The multicast study's raw data the rule is scored with: beside this run, or else in
    results/<multicast_label>/ (the microbenchmark's verdicts need not be re-measured with every
    GEMM run: a repeat run of this study alone scores the same verdicts against its own GEMM)."""
    beside = raw_dir.parent / "multicast"
    if (beside / "stream.csv").exists():
        return beside
    return raw_dir.parent.parent / study_config.get("multicast_label", DEFAULT_MULTICAST_LABEL) / "multicast"


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    raw_dir = Path(raw_dir)
    raw = raw_data.load(STUDY, raw_dir)                          # checked before anything is written
    samples = raw["samples.csv"]
    multicast_raw = multicast_dir(raw_dir, raw.provenance.get("config", {}))
    verdicts = multicast_verdicts(multicast_raw)
    configs = configurations(samples)
    gain_rows = with_intervals(gains(samples, configs), _per_round(samples), DEFAULT_ORDER)
    tables = {"configurations.csv": configs, "tile_order.csv": tile_order(samples, configs),
              "same_order.csv": same_order(samples, configs), "gains.csv": gain_rows,
              "summary.csv": summary(gain_rows), "rule.csv": rule(gain_rows, verdicts, multicast_raw),
              "rule_baselines.csv": rule_baselines(gain_rows, verdicts, BASELINES)}
    derived_dir = Path(derived_dir)
    derived_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        table.to_csv(derived_dir / name, index=False)
