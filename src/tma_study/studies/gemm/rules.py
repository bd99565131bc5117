"""The gemm study's rules of thumb (entry point ``rules``), computed from its derived data.

Every number and every verdict in the wording comes from derived/*.csv; where the data would
say otherwise (cp.async winning best against best, multicast gaining in the median), the rule
says that instead.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .aggregate import MEASURED, TIE_TOLERANCE, short_variant

MAJORITY = 0.5          # a rule that holds in more than half of the comparisons is worth stating


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
            "evidence": evidence, "figure": "gemm_speedup"}


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
            "figure": "gemm_rules"}


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
            "figure": "gemm_multicast"}


def _prediction_rule(rules: pd.DataFrame) -> dict | None:
    crossover = rules[(rules.rule == "crossover") & (rules.status == MEASURED)]
    multicast = rules[(rules.rule == "multicast") & (rules.status == MEASURED)]
    if len(multicast):           # measured rows carry a scope: one row over every cluster shape
        multicast = multicast[multicast.scope == "every cluster"]
    if crossover.empty and multicast.empty:
        return None
    parts = []
    if len(crossover):
        c = crossover.iloc[0]
        parts.append(f"crossover rule right in {100 * c.fraction_right_of_decided:.0f} % of {c.predicted_right + c.predicted_wrong:.0f} "
                     f"decided same-configuration comparisons, {100 * c.fraction_right_without_spills:.0f} % of "
                     f"{c.decided_without_spills:.0f} without spilling TMA variants")
    for m in multicast.itertuples():
        parts.append(f"multicast rule ({m.working_set}): 'not faster' holds in {100 * m.fraction_not_faster_held:.0f} % "
                     f"of {m.not_faster_predicted:.0f}, win/tie/loss agrees in {100 * m.fraction_agree:.0f} %")
    advice = []
    if len(crossover):
        c = crossover.iloc[0]
        spills_matter = c.fraction_right_without_spills > c.fraction_right_of_decided
        advice.append("predict the mainloop winner from the crossover size" +
                      (" once register spills are ruled out" if spills_matter else ""))
    if len(multicast):
        holds = (multicast.fraction_not_faster_held > MAJORITY).all()
        advice.append("expect no gain from multicast where the microbenchmark shows none" if holds else
                      "do not carry the multicast microbenchmark's verdict to GEMMs")
    return {"situation": "carrying microbenchmark rules to GEMMs", "rule": "; ".join(advice),
            "evidence": "; ".join(parts), "figure": "gemm_rules"}


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
            "figure": "gemm_bar"}


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
    if rules is not None:
        rows.append(_prediction_rule(rules))
    rows.append(_bar_rule(pd.read_csv(derived_dir / "bar.csv")))
    return [row for row in rows if row is not None]
