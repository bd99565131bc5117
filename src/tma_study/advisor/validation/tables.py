"""The advisor's paper tables (``paper/tables/advisor_*.tex|md``) from its derived tables."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.tables import write_paragraph_table, write_table

SET_NAMES = {"leave_one_study_out": "leave one study out", "heldout": "held-out Triton kernels"}
POLICY_NAMES = {"advisor": "advisor", "always_tma": "always TMA", "always_alternative": "always the alternative",
                "transfer_size_only": "transfer size only", "fa3_rule": "FlashAttention-3's rule",
                "majority_class": "majority class"}
MISSES_PER_SET = 10


def _pct(value, digits: int = 1) -> str:
    return "" if pd.isna(value) else f"{100 * value:.{digits}f} %"


def _interval(low, high, digits: int = 1) -> str:
    return "" if pd.isna(low) else f"[{100 * low:.{digits}f}, {100 * high:.{digits}f}]"


def _verdict(r) -> str:
    """Where the advisor or the baseline is better beyond the interval: on losses, on regret."""
    better = [what for what, low in (("losses", r.fewer_losses_low), ("regret", r.less_regret_low)) if low > 0]
    worse = [what for what, high in (("losses", r.fewer_losses_high), ("regret", r.less_regret_high)) if high < 0]
    if better and not worse:
        return "advisor better: " + " and ".join(better)
    if worse and not better:
        return "baseline better: " + " and ".join(worse)
    return "no difference" if not better else "mixed"


def _score_rows(scores: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in scores.itertuples():
        if not r.cases:
            continue
        rows.append({"set": SET_NAMES.get(r.set, r.set), "family": r.family, "policy": POLICY_NAMES[r.policy],
                     "cases": int(r.cases), "wins / ties / losses": f"{int(r.wins)} / {int(r.ties)} / {int(r.losses)}",
                     "not worse": _pct(r.share_not_worse), "95 % interval": _interval(r.share_not_worse_low,
                                                                                        r.share_not_worse_high),
                     "mean regret": _pct(r.mean_regret, 2), "regret interval": _interval(r.mean_regret_low,
                                                                                        r.mean_regret_high),
                     "max regret": _pct(r.max_regret)})
    return pd.DataFrame(rows)


def _comparison_rows(comparison: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in comparison[comparison.family == "all"].itertuples():
        verdict = _verdict(r)
        rows.append({"set": SET_NAMES.get(r.set, r.set), "baseline": POLICY_NAMES[r.baseline], "cases": int(r.cases),
                     "fewer losses (points)": f"{100 * r.fewer_losses_share:+.1f}",
                     "95 % interval": _interval(r.fewer_losses_low, r.fewer_losses_high),
                     "less regret (points)": f"{100 * r.less_regret:+.2f}",
                     "regret interval": _interval(r.less_regret_low, r.less_regret_high, 2), "verdict": verdict})
    return pd.DataFrame(rows)


def _catalog_rows(catalog: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame([{"entry": r.id, "operand": r.operand, "library": r.library_mechanism,
                          "advisor": r.advisor_choice + (f" (tied: {r.advisor_tied})" if " " in r.advisor_tied else ""),
                          "agree": "yes" if r.agree else "tied" if r.agree_or_tied else "no",
                          "measured": r.measured} for r in catalog.itertuples()])


def _miss_rows(cases: pd.DataFrame) -> pd.DataFrame:
    if cases.empty:
        return pd.DataFrame(columns=["set", "case", "advisor", "winner", "regret", "TMA / alternative"])
    lost = cases[cases.advisor_result == "loss"].sort_values(["set", "advisor_regret"], ascending=[True, False])
    lost = lost.groupby("set", sort=False).head(MISSES_PER_SET)
    return pd.DataFrame([{"set": SET_NAMES.get(r.set, r.set), "case": f"{r.family}: {r.case}",
                          "advisor": r.advisor_choice, "winner": r.winner, "regret": _pct(r.advisor_regret),
                          "TMA / alternative": f"{r.ratio:.3f} predicted {r.advisor_predicted_ratio:.3f}"}
                         for r in lost.itertuples()])


def _or_empty(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    return frame if len(frame) else pd.DataFrame({"": [f"no {what}"]})


def write_tables(derived: Path, tables_dir: Path) -> None:
    derived = Path(derived)
    read = {name: pd.read_csv(derived / f"{name}.csv") for name in ("scores", "comparison", "catalog", "cases")}
    scores = read["scores"]
    overall = scores[scores.family == "all"] if len(scores) else scores
    write_table(_or_empty(_score_rows(overall), "validation case"), tables_dir, "advisor_scores",
                "The advisor against the trivial baselines on each validation set: a pick wins where the chosen "
                "mechanism is faster beyond the 95 % interval of the time ratio, ties where that interval contains 1; "
                "regret is the time lost against the faster mechanism (bootstrap 95 % intervals over the cases)")
    write_table(_or_empty(_score_rows(scores[scores.family != "all"]) if len(scores) else scores, "validation case"), tables_dir,
                "advisor_scores_by_family", "The advisor and the baselines on each family of each validation set")
    comparison = read["comparison"]
    write_table(_or_empty(_comparison_rows(comparison) if len(comparison) else comparison, "validation case"), tables_dir,
                "advisor_comparison", "The advisor against each baseline, paired on the same cases: the share of "
                "cases it loses fewer of and the regret it saves, with bootstrap 95 % intervals")
    write_paragraph_table(_catalog_rows(read["catalog"]), tables_dir, "advisor_catalog",
                          "The libraries' choices beside the advisor's, for each describable load of the catalog",
                          [2.6, 1.6, 1.6, 2.6, 0.9, 6.5])
    misses = _miss_rows(read["cases"])
    misses = misses if len(misses) else pd.DataFrame([["", "no loss", "", "", "", ""]], columns=misses.columns)
    write_paragraph_table(misses, tables_dir, "advisor_misses",
                          "What the advisor gets wrong: its losses with the largest regret in each set",
                          [2.4, 6.2, 1.5, 1.5, 1.3, 3.0])
