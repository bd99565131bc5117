"""The gemm study's rules of thumb (entry point ``rules``), computed from its derived data.

Every number and every verdict in the wording comes from derived/*.csv; where the data would
say otherwise (cp.async winning best against best, multicast gaining in the median), the rule
says that instead.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.gemm_lib.rows import MEASURED, TIE_TOLERANCE, short_variant

# the share of GEMM cluster variants for which the multicast microbenchmark's "not faster" must hold
# before it is stated as a rule (the threshold of gemm_multicast_rule_not_faster_holds)
MULTICAST_VERDICT_HOLDS = 0.8


def _read(path: Path) -> pd.DataFrame | None:
    frame = pd.read_csv(path)
    return None if "status" in frame.columns and len(frame) == 1 and str(frame.status.iloc[0]).startswith(
        "NOT MEASURED") else frame


def _mainloop_rule(speedup: pd.DataFrame) -> dict | None:
    best = speedup[speedup.compared == "best"]
    if best.empty:
        return None
    wins, ties, losses = ((best.winner == w).sum() for w in ("tma", "tie", "cpasync"))
    if losses == 0:
        rule = "load GEMM operands with TMA: the best TMA mainloop was never slower than the best cp.async one"
    elif losses < wins:
        rule = f"prefer TMA, but check: cp.async won {losses} of {len(best)} shapes"
    else:
        rule = f"do not assume TMA: cp.async won {losses} of {len(best)} shapes"
    evidence = (f"best TMA / best cp.async TFLOP/s: median {best.speedup.median():.2f} "
                f"({best.speedup.min():.2f} .. {best.speedup.max():.2f}) over {len(best)} shapes and dtypes; "
                f"TMA wins {wins}, ties {ties}, cp.async wins {losses}; candidates not measured (every sample "
                f"throttled): TMA {int(best.tma_not_measured.sum())} of {int(best.tma_candidates.sum())}, cp.async "
                f"{int(best.cpasync_not_measured.sum())} of {int(best.cpasync_candidates.sum())}")
    return {"situation": "GEMM mainloop on Hopper: TMA or cp.async (CUTLASS warp-specialized)", "rule": rule,
            "evidence": evidence, "figure": "gemm_speedup",
            "claims": ("gemm_best_tma_never_slower_than_best_cpasync", "gemm_tma_median_speedup_over_cp_async")}


def _spill_rule(speedup: pd.DataFrame) -> dict | None:
    same = speedup[speedup.compared != "best"]
    spills = same[(same.tma_spill_store_bytes.fillna(0) > 0) & (same.cpasync_spill_store_bytes.fillna(0) == 0)]
    if spills.empty:
        return None
    clean = same.drop(spills.index)
    configurations = ", ".join(sorted({f"{r.dtype} {r.compared.removesuffix(' 1x1')}" for r in spills.itertuples()}))
    return {"situation": "comparing load paths inside a real kernel",
            "rule": "check ptxas spills first: a mainloop that spills registers measures its spills, not its loads",
            "evidence": (f"where the TMA variant spills and its cp.async partner does not ({configurations}): "
                         f"cp.async wins {(spills.winner == 'cpasync').sum()} of {len(spills)}, TMA / cp.async "
                         f"median {spills.speedup.median():.2f}; without spills TMA / cp.async median "
                         f"{clean.speedup.median():.2f}, cp.async wins {(clean.winner == 'cpasync').sum()} of "
                         f"{len(clean)}"),
            "figure": "gemm_rules", "claims": ("gemm_spilling_fp8_tma_loses_to_cp_async",)}


def _multicast_rule(summary: pd.DataFrame) -> dict | None:
    rows = summary[summary.status == MEASURED] if "status" in summary.columns else summary
    if rows.empty:
        return None
    medians = "; ".join(f"{r.dtype} {r.cluster} {r.median_gain:.2f}" for r in rows.itertuples())
    wins, comparisons = int(rows.wins.sum()), int(rows.comparisons.sum())
    if (rows.median_gain <= 1 + TIE_TOLERANCE).all():
        rule = ("do not pick a cluster shape for multicast's bandwidth: at the same tile no cluster shape "
                "raised median TFLOP/s")
    else:
        better = rows.loc[rows.median_gain.idxmax()]        # a Series: ["dtype"], not .dtype
        rule = (f"multicast pays in the median at {better['dtype']} cluster {better['cluster']} "
                f"({better['median_gain']:.2f}x); check it at one power state (clocks differ between rows)")
    return {"situation": "TMA multicast in a GEMM (clusters 1x2, 2x1, 2x2)", "rule": rule,
            "evidence": f"TFLOP/s over the same variant at 1x1, median: {medians}; wins (> {100 * TIE_TOLERANCE:.0f} %) "
                        f"{wins} of {comparisons}",
            "figure": "gemm_multicast", "claims": ("gemm_multicast_changes_median_by_under_10_percent",)}


def _against_baselines(baselines: pd.DataFrame | None, **where) -> tuple[bool, str]:
    """(whether the rule is predictive, a clause with its share and its best baseline's) from
    rule_baselines.csv; (False, "") where the file has no such row."""
    if baselines is None or "role" not in baselines:
        return False, ""
    rows = baselines[baselines.role == "rule"]
    for column, value in where.items():
        rows = rows[rows[column] == value]
    if rows.empty:
        return False, ""
    r = rows.iloc[0]
    best = baselines[(baselines.rule == r.rule) & (baselines.working_set == r.working_set)
                     & (baselines.scope == r.scope) & (baselines.policy == r.best_baseline)].iloc[0]
    verdict = "predictive" if r.predictive else "not predictive"
    return bool(r.predictive), (f"{verdict}: right in {100 * r.share:.0f} % [{100 * r.share_low:.0f}, "
                                f"{100 * r.share_high:.0f}] of {r.cases:.0f}, {r.best_baseline.replace('_', ' ')} in "
                                f"{100 * best.share:.0f} % [{100 * best.share_low:.0f}, {100 * best.share_high:.0f}]")


def _crossover_row(c, baselines) -> dict:
    predictive, against = _against_baselines(baselines, rule="crossover", working_set=c.working_set,
                                             scope="decided without spills")
    evidence = (f"crossover rule right in {100 * c.fraction_right_of_decided:.0f} % of "
                f"{c.predicted_right + c.predicted_wrong:.0f} decided same-configuration comparisons, "
                f"{100 * c.fraction_right_without_spills:.0f} % of {c.decided_without_spills:.0f} without spilling TMA "
                "variants" + (f"; {against}" if against else ""))
    if predictive or not against:
        spills_matter = c.fraction_right_without_spills > c.fraction_right_of_decided
        return {"situation": "carrying the crossover rule to GEMM mainloops",
                "rule": "predict the mainloop winner from the crossover size"
                        + (" once register spills are ruled out" if spills_matter else ""),
                "evidence": evidence, "figure": "gemm_rules",
                "claims": ("gemm_crossover_rule_predicts_without_spills", "gemm_crossover_rule_beats_its_baselines")}
    return {"situation": "carrying the crossover rule to GEMM mainloops",
            "rule": "load GEMM operand tiles with TMA: every A tile is past the crossover size, so the crossover "
                    "rule says no more than always-TMA does here",
            "evidence": evidence, "figure": "gemm_rule_baselines",
            "claims": ("gemm_crossover_rule_predicts_without_spills", "gemm_rules_reduce_to_a_trivial_baseline")}


def _prediction_rules(rules: pd.DataFrame, baselines: pd.DataFrame | None = None) -> list[dict]:
    """Whether the crossover and multicast studies' verdicts carry to the GEMM: one row each."""
    crossover = rules[(rules.rule == "crossover") & (rules.status == MEASURED)]
    multicast = rules[(rules.rule == "multicast") & (rules.status == MEASURED)]
    if len(multicast):           # measured rows carry a scope: one row over every cluster shape
        multicast = multicast[multicast.scope == "every cluster"]
    rows = [_crossover_row(crossover.iloc[0], baselines)] if len(crossover) else []
    if len(multicast):
        holds = bool((multicast.fraction_not_faster_held >= MULTICAST_VERDICT_HOLDS).all())
        _, against = _against_baselines(baselines, rule="multicast", working_set="hbm", scope="every cluster")
        rows.append({"situation": "carrying the multicast microbenchmark's verdict to GEMMs",
                     "rule": ("expect no gain from multicast where the microbenchmark shows none" if holds else
                              "do not carry the load-only multicast verdict to GEMMs: measure the cluster shape"),
                     "evidence": "; ".join(f"'not faster' holds for {100 * m.fraction_not_faster_held:.0f} % of "
                                           f"{m.not_faster_predicted:.0f} cluster variants ({m.working_set}), win/tie/loss "
                                           f"agrees in {100 * m.fraction_agree:.0f} %" for m in multicast.itertuples())
                                 + (f"; win or not faster (HBM verdict): {against}" if against else ""),
                     "figure": "gemm_rules",
                     "claims": ("gemm_multicast_rule_not_faster_holds",) if holds else
                               ("gemm_multicast_microbenchmark_misses_often",)})
    return rows


def _l2_rule(rules: pd.DataFrame, baselines: pd.DataFrame | None = None) -> dict | None:
    """Whether the multicast study's L2-read-rate boundary predicts the GEMM's cluster variants."""
    rows = rules[(rules.rule == "multicast_l2") & (rules.status == MEASURED)]
    if rows.empty:
        return None
    every = rows[rows.scope == "every cluster"].iloc[0]
    holds = every.fraction_agree >= MULTICAST_VERDICT_HOLDS
    per_shape = "; ".join(f"{r.scope} {100 * r.fraction_agree:.0f} %" for r in rows[rows.scope != "every cluster"].itertuples())
    if holds:
        rule = ("predict multicast's gain from the 1x1 kernel's L2 read rate (TFLOP/s x bytes per FLOP) against "
                "the L2 read ceiling, with the multicast study's boundary per cluster shape")
        claims = ("gemm_multicast_l2_rule_predicts",)
    else:
        rule = ("the L2 read rate alone does not decide multicast in a GEMM: measure the cluster shape, at one power "
                "state and on grids of more than two waves")
        claims = ("gemm_multicast_l2_rule_misses_are_clocks_or_waves", "gemm_no_l2_threshold_reaches_80_percent")
    evidence = (f"right in {100 * every.fraction_agree:.0f} % of {every.comparisons:.0f} cluster variants ({per_shape}); "
                f"of the {every.comparisons - every.agree:.0f} wrong, {every.wrong_where_clocks_differ:.0f} ran at another "
                f"SM clock than their 1x1 variant and {every.wrong_in_two_waves_or_fewer:.0f} in two waves or fewer; "
                f"{100 * every.fraction_agree_same_clocks_over_two_waves:.0f} % right where neither; no threshold on the "
                f"L2 read rate, even one chosen on the GEMM data, is right in more than "
                f"{100 * every.best_threshold_fraction_agree:.0f} %")
    for name, label in (("multicast_l2", "the boundary"), ("multicast_l2_cross_validated",
                                                           "a threshold chosen on the other shapes")):
        against = _against_baselines(baselines, rule=name)[1]
        evidence += f"; {label} is {against}" if against else ""
    return {"situation": "predicting TMA multicast's gain in a GEMM from its L2 read rate", "rule": rule,
            "evidence": evidence, "figure": "gemm_rules", "claims": claims}


def _bar_rule(bar: pd.DataFrame) -> dict | None:
    r = bar.iloc[0]
    if r.status != MEASURED:
        return None
    per_clock = (r.tflops / r.sm_clock_mhz) / (r.cublas_tflops / r.cublas_sm_clock_mhz)
    variant = short_variant(r.variant)
    if r.passes:
        rule = f"a TMA warp-specialized CUTLASS GEMM ({variant}) comes close to cuBLAS on a large square problem"
    else:
        rule = (f"the best TMA warp-specialized CUTLASS GEMM ({variant}) stayed below "
                f"{100 * r.required_fraction:.0f} % of cuBLAS's TFLOP/s on a large square problem in this run; "
                f"per clock cycle it did {100 * per_clock:.0f} % of cuBLAS's work, so compare the two at one power state")
    return {"situation": "a CUTLASS TMA GEMM against cuBLAS", "rule": rule,
            "evidence": (f"{r['shape']} bf16: {100 * r.fraction_of_cublas:.1f} % of cuBLAS ({r.tflops:.0f} / "
                         f"{r.cublas_tflops:.0f} TFLOP/s at mean SM clocks of {r.sm_clock_mhz:.0f} / "
                         f"{r.cublas_sm_clock_mhz:.0f} MHz), best of the {int(r.tma_measured)} of "
                         f"{int(r.tma_candidates)} TMA candidates that could be measured"),
            "figure": "gemm_bar", "claims": ("gemm_tma_reaches_95_percent_of_cublas",)}


def rules_of_thumb(derived_dir: Path, provenance: dict) -> list[dict]:
    derived_dir = Path(derived_dir)
    speedup = _read(derived_dir / "speedup.csv")
    summary = _read(derived_dir / "multicast_summary.csv")
    rules = _read(derived_dir / "rules.csv")
    rows = []
    if speedup is not None:
        rows += [_mainloop_rule(speedup), _spill_rule(speedup)]
    if summary is not None:
        rows.append(_multicast_rule(summary))
    baselines = pd.read_csv(derived_dir / "rule_baselines.csv") if (derived_dir / "rule_baselines.csv").is_file() else None
    if rules is not None:
        rows += _prediction_rules(rules, baselines)
        rows.append(_l2_rule(rules, baselines))
    rows.append(_bar_rule(pd.read_csv(derived_dir / "bar.csv")))
    return [row for row in rows if row is not None]
