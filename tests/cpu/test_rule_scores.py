"""Every predictive rule beside its trivial baselines (tma_study.rule_scores, tma_study.bootstrap):
a rule that is its baseline is not predictive, one that beats it by more than the interval is, the
intervals are the same bytes run to run, and a cross-validated threshold never sees its own group."""
import numpy as np
import pandas as pd

from tma_study import bootstrap, rule_scores
from tma_study.studies import discover


def _rows(right: dict) -> dict:
    return {r["policy"]: r for r in rule_scores.score({k: np.asarray(v) for k, v in right.items()}, "rule", {})}


def test_a_rule_that_is_its_baseline_is_not_predictive():
    same = [1] * 90 + [0] * 10
    rows = _rows({"rule": same, "always_tma": same, "always_cp_async": [1 - v for v in same]})
    assert rows["rule"]["best_baseline"] == "always_tma"
    assert rows["rule"]["over_best_baseline"] == 0 and rows["rule"]["agrees_with_best_baseline"] == 1
    assert not rows["rule"]["predictive"]


def test_a_rule_predicts_only_by_more_than_the_interval():
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 2, 400)
    rows = _rows({"rule": np.ones(400, int), "always_tma": truth, "always_cp_async": 1 - truth})
    assert rows["rule"]["predictive"] and rows["rule"]["over_best_low"] > 0
    small = np.r_[np.ones(52, int), np.zeros(48, int)]          # 52 % against 50 %: inside the interval
    rows = _rows({"rule": small, "always_tma": np.r_[np.zeros(50, int), np.ones(50, int)]})
    assert not rows["rule"]["predictive"] and rows["rule"]["over_best_low"] < 0 < rows["rule"]["over_best_high"]
    assert rows["rule"]["share_low"] <= rows["rule"]["share"] <= rows["rule"]["share_high"]


def test_the_intervals_are_the_same_every_run():
    right = {"rule": np.arange(60) % 3 == 0, "always_tma": np.arange(60) % 2 == 0}
    assert rule_scores.score(right, "rule", {}) == rule_scores.score(right, "rule", {})
    assert np.array_equal(bootstrap.resamples(7), bootstrap.resamples(7))


def test_ties_count_for_every_policy_and_the_majority_ignores_them():
    outcome = pd.Series(["tma", "tie", "cp_async", "cp_async", "tie"])
    assert rule_scores.majority_pick(outcome, tie="tie").tolist() == ["cp_async"] * 5
    right = rule_scores.picks_right(outcome, {"a": rule_scores.constant("tma", outcome)}, tie="tie")
    assert right["a"].tolist() == [1, 1, 0, 0, 1]


def test_a_cross_validated_threshold_never_sees_its_own_group():
    rate = pd.Series([0.9, 0.8, 0.2, 0.1, 0.95, 0.15])
    win = pd.Series([True, True, False, False, True, False])
    groups = pd.Series(["a", "a", "a", "b", "b", "b"])
    seen = []

    def fit(train):
        seen.append(sorted(groups[train].unique()))
        return rule_scores.best_threshold(rate[train], win[train])

    predicted = rule_scores.leave_one_group_out(groups, fit, lambda t, held: rate >= t)
    assert seen == [["b"], ["a"]]
    assert predicted.tolist() == win.tolist()
    assert rule_scores.best_threshold(rate, pd.Series([False] * 6)) == np.inf


def test_every_study_that_scores_a_rule_scores_it_beside_its_baselines():
    """A study writing a rule's agreement (rules.csv, rule.csv, fa3_agreement.csv) also writes
    rule_baselines.csv and a paper table of it."""
    for study in discover().values():
        if {"rules.csv", "rule.csv", "fa3_agreement.csv"} & set(study.derived_files):
            assert "rule_baselines.csv" in study.derived_files, study.name
            assert any(t.endswith("baselines") for t in study.tables), study.name


def test_a_tie_is_an_interval_that_holds_1_or_lies_inside_the_tolerance():
    assert bootstrap.interval_verdict(0.99, 1.03) == "tie"
    assert bootstrap.interval_verdict(1.005, 1.015, tolerance=0.02) == "tie"
    assert bootstrap.interval_verdict(1.01, 1.05, tolerance=0.02) == "win"
    assert bootstrap.interval_verdict(0.90, 0.97) == "loss"
    median, low, high = bootstrap.median_ratio_interval(np.full(12, 2.0), np.ones(12))
    assert median == low == high == 2.0
