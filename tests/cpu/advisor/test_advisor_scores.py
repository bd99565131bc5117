"""Scoring the advisor and the baselines: wins, ties, losses, regret, and paired bootstrap comparisons."""
import numpy as np
import pandas as pd
import pytest

from tma_study.advisor.validation import scores
from tma_study.advisor.validation.cases import finish, quartile_interval, winner


def _cases(ratios, low_high=0.01):
    """Cases whose TMA / alternative time ratio is each of ``ratios``, with an interval of +-low_high."""
    frame = pd.DataFrame({"set": "s", "family": "f", "case": [f"c{i}" for i in range(len(ratios))],
                          "alternative": "cp_async", "alternative_time_us": 100.0,
                          "tma_time_us": [100.0 * r for r in ratios], "ratio": ratios,
                          "ratio_low": [r - low_high for r in ratios], "ratio_high": [r + low_high for r in ratios]})
    return finish(frame)


def test_a_case_is_decided_by_its_interval():
    assert winner(0.90, 0.95, "cp_async") == "tma"
    assert winner(1.02, 1.10, "cp_async") == "cp_async"
    assert winner(0.99, 1.01, "cp_async") == "tie"


def test_the_quartile_interval_narrows_with_more_samples():
    few = quartile_interval(100, 4, 10, 110, 4, 10)
    many = quartile_interval(100, 4, 1000, 110, 4, 1000)
    assert few[0] < many[0] < 100 / 110 < many[1] < few[1]


def test_outcomes_count_wins_ties_losses_and_regret():
    cases = _cases([0.8, 1.0, 1.25])
    out = scores.outcomes(cases, pd.Series(["tma", "tma", "tma"]))
    assert list(out.result) == ["win", "tie", "loss"]
    assert out.regret.tolist() == pytest.approx([0.0, 0.0, 0.25])
    alt = scores.outcomes(cases, pd.Series(["alternative"] * 3))
    assert list(alt.result) == ["loss", "tie", "win"] and alt.regret.tolist() == pytest.approx([0.25, 0.0, 0.0])


def test_a_policy_that_is_always_right_beats_one_that_is_always_tma():
    ratios = [0.8] * 20 + [1.25] * 20
    cases = _cases(ratios)
    picks = pd.DataFrame({p: "tma" for p in scores.POLICIES}, index=cases.index)
    picks["advisor"] = ["tma"] * 20 + ["alternative"] * 20
    picks["fa3_rule"] = None
    rows, compared = scores.score(cases, picks, {"set": "s", "family": "all"})
    by_policy = {r["policy"]: r for r in rows}
    assert by_policy["advisor"]["share_not_worse"] == 1.0 and by_policy["advisor"]["mean_regret"] == 0.0
    assert by_policy["always_tma"]["losses"] == 20 and by_policy["fa3_rule"]["cases"] == 0
    versus = {r["baseline"]: r for r in compared}
    assert versus["always_tma"]["advisor_beats_it"] and versus["always_tma"]["fewer_losses_low"] > 0
    assert "fa3_rule" not in versus


def test_equal_policies_do_not_beat_each_other():
    cases = _cases(list(np.linspace(0.8, 1.2, 30)))
    picks = pd.DataFrame({p: "tma" for p in scores.POLICIES}, index=cases.index)
    _, compared = scores.score(cases, picks, {"set": "s", "family": "all"})
    assert not any(r["advisor_beats_it"] or r["it_beats_advisor"] for r in compared)


def test_the_majority_class_is_the_most_frequent_decided_winner():
    cases = _cases([1.25, 1.25, 0.8, 1.0, 1.0, 1.0])
    assert set(scores.majority_pick(cases)) == {"alternative"}
