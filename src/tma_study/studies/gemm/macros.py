"""The gemm study's numbers for the paper's text (entry point ``macros``).

Names: ``gemm<What>``, e.g. ``gemmBarPercentCublas``; no digits in names (dtype and cluster
names are spelled: ``Bf`` for bf16, ``Fpeight`` for fp8 e4m3, ``OneByTwo`` for a 1x2 cluster).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study import rule_scores
from tma_study.report.numbers import camel, number, percent, ratio, size

from tma_study.gemm_lib.rows import ACCUMULATION_COLUMN, MEASURED, TimingLimits, short_variant

DTYPE_NAMES = {"bf16": "bf", "fp8_e4m3": "fpeight"}
LOAD_NAMES = {"tma": "tma", "cpasync": "cpasync", "cublas": "cublas"}
# how the text says a variants.ACCUMULATION key of fp8 rows
ACCUMULATION_WORDS = {"fp8_promoted": "with promotion", "fp8_no_promotion": "without promotion"}
CLUSTER_NAMES = {"1x2": "one by two", "2x1": "two by one", "2x2": "two by two"}
SETS = {"hbm": "hbm", "l2": "ltwo"}


def _bar(bar: pd.DataFrame) -> dict[str, str]:
    r = bar.iloc[0]
    out = {"gemmBarRequiredPercent": percent(r.required_fraction, 0), "gemmBarShape": str(r["shape"]).split("^")[0],
           "gemmBarCandidates": number(r.tma_candidates), "gemmBarCandidatesMeasured": number(r.tma_measured),
           "gemmBarCandidatesNotMeasured": number(r.tma_not_measured)}
    if r.status == MEASURED:
        out |= {"gemmBarPercentCublas": percent(r.fraction_of_cublas), "gemmBarVariant": short_variant(r.variant),
                "gemmBarTflops": number(r.tflops), "gemmBarCublasTflops": number(r.cublas_tflops),
                "gemmBarSamples": number(r.samples), "gemmBarClockMhz": number(r.sm_clock_mhz),
                "gemmBarCublasClockMhz": number(r.cublas_sm_clock_mhz),
                # per SM clock cycle: the two rows ran at different power-limited clocks
                "gemmBarPercentCublasPerClock": percent(
                    (r.tflops / r.sm_clock_mhz) / (r.cublas_tflops / r.cublas_sm_clock_mhz))}
    return out


def _status(status: pd.DataFrame, provenance: dict) -> dict[str, str]:
    arch = provenance.get("measured_arch", "sm90")
    here = status[status.arch == arch]
    measured = here[here.status == MEASURED]
    missing = here[here.status != MEASURED]
    limits = TimingLimits.of(provenance)
    out = {"gemmRowsMeasured": number(measured.rows.sum()), "gemmRowsNotMeasured": number(missing.rows.sum()),
           "gemmRowsFewSamples": number(measured.fewer_than_min_samples.sum()),
           "gemmRowsAtThrottleFloor": number(measured.at_throttle_floor.sum()),
           "gemmThrottlePercent": number(limits.throttle_percent)}
    for load in ("tma", "cpasync", "cublas"):
        out[camel("gemm rows not measured", load)] = number(missing[missing.load == load].rows.sum())
    if limits.min_samples:
        out["gemmMinSamples"] = number(limits.min_samples)
    if limits.floor_mhz:
        out |= {"gemmThrottleFloorMhz": number(limits.floor_mhz), "gemmMaxClockMhz": number(limits.max_clock_mhz)}
    return out


def _speedup(speedup: pd.DataFrame) -> dict[str, str]:
    best = speedup[speedup.compared == "best"]
    out = {"gemmBestComparisons": number(len(best)), "gemmBestSpeedupMedian": ratio(best.speedup.median()),
           "gemmBestSpeedupMin": ratio(best.speedup.min()), "gemmBestSpeedupMax": ratio(best.speedup.max())}
    for winner, name in (("tma", "gemmBestTmaWins"), ("tie", "gemmBestTies"), ("cpasync", "gemmBestCpasyncWins")):
        out[name] = number((best.winner == winner).sum())
    for dtype, rows in best.groupby("dtype"):
        out[camel("gemm best speedup median", DTYPE_NAMES[dtype])] = ratio(rows.speedup.median())
    same = speedup[speedup.compared != "best"]
    spills = same[(same.tma_spill_store_bytes.fillna(0) > 0) & (same.cpasync_spill_store_bytes.fillna(0) == 0)]
    clean = same.drop(spills.index)
    out |= {"gemmSpillComparisons": number(len(spills)),
            "gemmSpillCpasyncWins": number((spills.winner == "cpasync").sum()),
            "gemmSameConfigComparisons": number(len(same)),
            "gemmNoSpillSpeedupMedian": ratio(clean.speedup.median()),
            "gemmNoSpillCpasyncWins": number((clean.winner == "cpasync").sum()),
            "gemmNoSpillComparisons": number(len(clean))}
    if len(spills):
        out |= {"gemmSpillSpeedupMedian": ratio(spills.speedup.median()),
                "gemmSpillSpeedupMax": ratio(spills.speedup.max()),
                "gemmSpillBytesMin": number(spills.tma_spill_store_bytes.min()),
                "gemmSpillBytesMax": number(spills.tma_spill_store_bytes.max())}
    return out


def _multicast(summary: pd.DataFrame) -> dict[str, str]:
    rows = summary[summary.status == MEASURED]
    out = {"gemmMulticastWins": number(rows.wins.sum()), "gemmMulticastComparisons": number(rows.comparisons.sum()),
           "gemmMulticastLosses": number(rows.losses.sum()),
           "gemmMulticastNotCompared": number(rows.not_compared.sum())}
    for r in rows.itertuples():
        out[camel("gemm multicast median gain", DTYPE_NAMES[r.dtype], CLUSTER_NAMES[r.cluster])] = ratio(r.median_gain)
    out |= {"gemmMulticastMaxGain": ratio(rows.max_gain.max()), "gemmMulticastMinGain": ratio(rows.min_gain.min())}
    return out


def _rules(rules: pd.DataFrame) -> dict[str, str]:
    out = {}
    for r in rules[(rules.rule == "crossover") & (rules.status == MEASURED)].itertuples():
        out[camel("gemm crossover bytes", SETS[r.working_set])] = size(r.crossover_bytes)
        if r.working_set == "hbm":
            out |= {"gemmCrossoverRulePercent": percent(r.fraction_right_of_decided, 0),
                    "gemmCrossoverRuleDecided": number(r.predicted_right + r.predicted_wrong),
                    "gemmCrossoverRuleWrong": number(r.predicted_wrong),
                    "gemmCrossoverRuleWrongSpills": number(r.wrong_where_tma_spills),
                    "gemmCrossoverRulePercentWithoutSpills": percent(r.fraction_right_without_spills, 0),
                    "gemmCrossoverRuleDecidedWithoutSpills": number(r.decided_without_spills)}
    every = rules[(rules.rule == "multicast") & (rules.status == MEASURED)]
    if len(every):               # measured rows carry a scope: one row over every cluster shape
        every = every[every.scope == "every cluster"]
    for r in every.itertuples():
        where = SETS[r.working_set]
        out |= {camel("gemm multicast rule agree percent", where): percent(r.fraction_agree, 0),
                camel("gemm multicast rule not faster percent", where): percent(r.fraction_not_faster_held, 0),
                camel("gemm multicast rule predicted losses", where): number(r.predicted_losses),
                camel("gemm multicast rule predicted ties", where): number(r.predicted_ties)}
    if len(every):
        r = every.iloc[0]          # the same GEMM comparisons for every operand location
        out |= {"gemmMulticastRuleComparisons": number(r.comparisons),
                "gemmMulticastRulePredictedWins": number(every.predicted_wins.max()),
                "gemmMulticastRuleGemmWins": number(r.gemm_wins),
                "gemmMulticastRuleLeftOutIdle": number(r.left_out_idle_ctas)}
    return out


L2_RULE_MACROS = ("gemmMulticastLtwoRuleAgreePercent", "gemmMulticastLtwoRuleComparisons",
                  "gemmMulticastLtwoRuleWrong", "gemmMulticastLtwoRuleWrongClocks",
                  "gemmMulticastLtwoRuleWrongWaves", "gemmMulticastLtwoRuleAgreePercentSameClocksManyWaves",
                  "gemmMulticastLtwoRuleBestThresholdPercent")


def _l2_rule(rules: pd.DataFrame) -> dict[str, str]:
    """The multicast study's L2-read-rate boundary scored on the GEMM (rules.csv rule multicast_l2);
    '(not measured)' without the multicast study's compute sweep, so the text still builds."""
    rows = rules[(rules.rule == "multicast_l2") & (rules.status == MEASURED)] if "rule" in rules else rules.iloc[0:0]
    if "scope" in rows:
        rows = rows[rows.scope == "every cluster"]
    if rows.empty:
        return dict.fromkeys(L2_RULE_MACROS, "(not measured)")
    r = rows.iloc[0]
    values = (percent(r.fraction_agree, 0), number(r.comparisons), number(r.comparisons - r.agree),
              number(r.wrong_where_clocks_differ), number(r.wrong_in_two_waves_or_fewer),
              percent(r.fraction_agree_same_clocks_over_two_waves, 0), percent(r.best_threshold_fraction_agree, 0))
    return dict(zip(L2_RULE_MACROS, values))


def _accumulation(measured: pd.DataFrame) -> dict[str, str]:
    """``gemmFpeightAccumulation<Load>``: how the run's fp8 rows of each load mechanism accumulated
    ('with promotion', 'without promotion', or 'with and without promotion' if they differ)."""
    if ACCUMULATION_COLUMN not in measured.columns:
        return {}
    out = {}
    fp8 = measured[measured.dtype == "fp8_e4m3"]
    for load, name in LOAD_NAMES.items():
        kinds = sorted(set(fp8.loc[fp8.load == load, ACCUMULATION_COLUMN].dropna()))
        if kinds:
            words = [ACCUMULATION_WORDS.get(k, k) for k in kinds]
            out[camel("gemm fpeight accumulation", name)] = (
                words[0] if len(words) == 1 else "with and without promotion")
    return out


def _protocol(protocol: dict) -> dict[str, str]:
    """The run's thermal protocol (protocol.py), from provenance; empty for a run without one."""
    if not protocol:
        return {}
    return {"gemmPreheatS": f"{float(protocol['preheat_s']):g}", "gemmPreheatMinGflop": number(protocol["preheat_min_gflop"]),
            "gemmPreheatGroups": number(len(protocol.get("preheats", []))),
            "gemmPreheatTotalS": number(protocol.get("preheat_seconds_total", float("nan"))),
            "gemmOrderSeed": number(protocol["order_seed"])}


def macros(derived_dir: Path, provenance: dict) -> dict[str, str]:
    derived_dir = Path(derived_dir)
    out = {"gemmConfigurations": number(provenance.get("configurations", float("nan"))),
           "gemmCutlassVersion": str((provenance.get("packages") or {}).get("nvidia-cutlass", "unknown"))}
    out |= _bar(pd.read_csv(derived_dir / "bar.csv"))
    out |= _protocol(provenance.get("protocol") or {})
    out |= _status(pd.read_csv(derived_dir / "status.csv"), provenance)
    speedup = pd.read_csv(derived_dir / "speedup.csv")
    if "speedup" in speedup.columns:
        out |= _speedup(speedup)
    summary = pd.read_csv(derived_dir / "multicast_summary.csv")
    if "median_gain" in summary.columns:
        out |= _multicast(summary)
    out |= _rules(pd.read_csv(derived_dir / "rules.csv"))
    out |= _l2_rule(pd.read_csv(derived_dir / "rules.csv"))
    if (derived_dir / "rule_baselines.csv").is_file():
        scores = pd.read_csv(derived_dir / "rule_baselines.csv")
        out |= rule_scores.macros(scores, "gemmCrossoverVsBaselines", rule="crossover", working_set="hbm",
                                  scope="decided without spills")
        out |= rule_scores.macros(scores, "gemmMulticastVsBaselines", rule="multicast", working_set="hbm")
        out |= rule_scores.macros(scores, "gemmMulticastLtwoVsBaselines", rule="multicast_l2")
        out |= rule_scores.macros(scores, "gemmLtwoThresholdCrossValidated", rule="multicast_l2_cross_validated")
    measured = pd.read_csv(derived_dir / "measured.csv")
    if "dtype" in measured.columns:
        out |= _accumulation(measured)
    kernels = derived_dir.parent / "kernels.csv"
    if kernels.is_file():
        table = pd.read_csv(kernels)
        sm90 = table[table.variant.str.startswith("sm90_")]
        out["gemmVariantsSmNinety"] = number(len(sm90))
        out["gemmVariantsSmHundred"] = number((table.variant.str.startswith("sm100_")).sum())
        if "spill_store_bytes" in table.columns and "load" in table.columns:
            out["gemmSpillingTmaVariants"] = number(((sm90.load == "tma") & (sm90.spill_store_bytes > 0)).sum())
    not_measured = provenance.get("not_measured_arches") or {}
    if not_measured:
        out["gemmNotMeasuredArches"] = "; ".join(f"{arch}: {why}" for arch, why in not_measured.items())
    return out
