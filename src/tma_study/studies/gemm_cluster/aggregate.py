"""Derived tables of the gemm_cluster study (results/<gpu>/gemm_cluster/derived/*.csv), from samples.csv.

The gains, their verdicts and the best and default tile orders are gemm_lib.cluster_gains' (shared
with the gemm_cluster_counters study). The best order is chosen on the same rounds its gain is
taken from, so a gain from a best order leans up by about the noise of picking the fastest of a
variant's orders; best against best has that lean on both sides, and the verdict's tolerance is at
least the rounds' spread.

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
from tma_study.studies.gemm.predict import multicast_verdicts
from tma_study.gemm_lib.cluster_configs import DEFAULT_ORDER
from tma_study.gemm_lib.cluster_gains import (SHAPE, VARIANT, best_and_default, configurations, gain, gains,
                                              per_round, prefixed, siblings)
from tma_study.gemm_lib.rows import MEASURED, NOT_MEASURED_TEXT

from . import STUDY
from .baselines import rule_baselines
from .intervals import with_intervals

BASELINES = {"default_order": "the 1x1 sibling at swizzle 1, heuristic raster order (the gemm study's comparison)",
             "best_order": "each variant at its best tile order (the fair comparison)"}
EVERY_CLUSTER = "every cluster"


def tile_order(samples: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    """Per (shape, variant): the best order's gain over the default order."""
    times, (best, default) = per_round(samples), best_and_default(configs)
    rows = []
    for (variant, size), b in best.iterrows():
        row = {**{c: b[c] for c in VARIANT if c not in ("variant", "size")}, "variant": variant, "size": size,
               "best_swizzle": int(b.swizzle), "best_raster_order": b.raster_order, "best_tflops": b.tflops_median,
               "orders": int(((configs.variant == variant) & (configs["size"] == size)).sum())}
        if (variant, size) in default.index:
            d = default.loc[(variant, size)]
            row.update({"default_tflops": d.tflops_median,
                        **prefixed(gain(times, (variant, size, int(b.swizzle), b.raster_order),
                                        (variant, size, *DEFAULT_ORDER)), "order")})
        rows.append(row)
    return pd.DataFrame(rows).sort_values(SHAPE + ["family", "cluster"]).reset_index(drop=True)


def same_order(samples: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    """Per (shape, cluster variant, tile order): the gain over the 1x1 sibling at that order."""
    times = per_round(samples)
    timed = configs.set_index(["variant", "size", "swizzle", "raster_order"]).index
    rows = []
    for p in siblings(configs).itertuples():
        for c in configs[(configs.variant == p.variant) & (configs["size"] == p.size)].itertuples():
            mine, base = (p.variant, p.size, c.swizzle, c.raster_order), (p.sibling, p.size, c.swizzle, c.raster_order)
            if base in timed:
                rows.append({**{k: getattr(p, k) for k in VARIANT}, "sibling": p.sibling, "swizzle": c.swizzle,
                             "raster_order": c.raster_order, "is_default_order": c.is_default_order,
                             **gain(times, mine, base)})
    return pd.DataFrame(rows)


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
    gain_rows = with_intervals(gains(samples, configs), per_round(samples), DEFAULT_ORDER)
    tables = {"configurations.csv": configs, "tile_order.csv": tile_order(samples, configs),
              "same_order.csv": same_order(samples, configs), "gains.csv": gain_rows,
              "summary.csv": summary(gain_rows), "rule.csv": rule(gain_rows, verdicts, multicast_raw),
              "rule_baselines.csv": rule_baselines(gain_rows, verdicts, BASELINES)}
    derived_dir = Path(derived_dir)
    derived_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        table.to_csv(derived_dir / name, index=False)
