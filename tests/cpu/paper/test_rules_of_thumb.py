"""The rules-of-thumb table: gathered from every study present, each row naming its figure and
the claims it rests on, kept only while those claims pass (a failing claim is a refuted
expectation, listed apart), its wording following the data, and a malformed row stopped by name."""
import shutil

import pandas as pd
import pytest
from paper_fixture import aggregated_reference, configured_studies

from tma_study.paper import rules_of_thumb
from tma_study.studies.crossover.rules import rules_of_thumb as crossover_rules


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return aggregated_reference(tmp_path_factory.mktemp("rules") / "results", tmp_path_factory=tmp_path_factory)


@pytest.fixture(scope="module")
def claims_tsv(results):
    from tma_study.paper import claims as claims_mod
    studies = configured_studies()
    outcomes = claims_mod.check_all(claims_mod.load_claims(studies=studies), results)
    return claims_mod.write_reports(outcomes, results)[0]


def test_every_study_present_contributes_rows_that_name_their_figure(results, tmp_path):
    studies = configured_studies()
    table = rules_of_thumb.write(results, studies, tmp_path)
    with_rules = {name for name, study in studies.items() if study.rules}
    assert set(table.study) == with_rules
    for row in table.itertuples(index=False):
        study = studies[row.study]
        assert row[5] in (*study.figures, *study.tables)
    markdown = (tmp_path / "rules_of_thumb.md").read_text()
    assert "rests on" in markdown and "crossover_bandwidth" in markdown
    tex = (tmp_path / "rules_of_thumb.tex").read_text()
    assert r"\begin{longtable}" in tex and "p{" in tex      # continues onto the next page as studies add rows
    assert r"Fig.~\ref{fig:crossover_bandwidth}" in tex and r"\ref{sec:crossover}" in tex


def test_a_rule_is_kept_only_while_its_claims_pass(results, claims_tsv, tmp_path):
    studies = configured_studies()
    statuses = dict(line.split("\t")[:2] for line in claims_tsv.read_text().splitlines()[1:])
    table = rules_of_thumb.write(results, studies, tmp_path, claims_tsv)
    assert len(table) and all(statuses[c] == "PASS" for claims in table.claims for c in claims)
    failing = [c for c, status in statuses.items() if status == "FAIL"]
    edited = claims_tsv.read_text().replace("crossover_tma_equals_bulk_copy\tPASS", "crossover_tma_equals_bulk_copy\tFAIL")
    failed_tsv = tmp_path / "claims.tsv"
    failed_tsv.write_text(edited)
    without = rules_of_thumb.write(results, studies, tmp_path, failed_tsv)
    assert not any("crossover_tma_equals_bulk_copy" in claims for claims in without.claims)
    assert len(without) == len(table) - 1
    refuted = (tmp_path / "rules_refuted.md").read_text()
    assert "crossover_tma_equals_bulk_copy" in refuted and all(c in refuted for c in failing)
    assert r"\claimref{crossover_tma_equals_bulk_copy}" in (tmp_path / "rules_refuted.tex").read_text()


def test_a_refuted_expectation_sits_beside_what_the_data_show(results, claims_tsv, tmp_path):
    rules_of_thumb.write(results, configured_studies(), tmp_path, claims_tsv)
    refuted = (tmp_path / "rules_refuted.md").read_text()
    if "gemm_multicast_no_median_gain" in refuted:      # the reference data refute it
        assert "gemm_multicast_changes_median_by_under_10_percent" in refuted


def test_a_claim_the_checker_does_not_know_stops_the_table(results, claims_tsv, tmp_path):
    broken = tmp_path / "claims.tsv"
    broken.write_text("\n".join(line for line in claims_tsv.read_text().splitlines()
                                if not line.startswith("crossover_tma_equals_bulk_copy\t")) + "\n")
    with pytest.raises(rules_of_thumb.RulesError, match="crossover_tma_equals_bulk_copy"):
        rules_of_thumb.write(results, configured_studies(), tmp_path, broken)


def test_cluster_shapes_sort_by_size_not_as_text(results):
    from tma_study.studies.multicast.rules import rules_of_thumb as multicast_rules
    evidence = " ".join(r["evidence"] for r in multicast_rules(results / "multicast" / "derived", {}))
    if "1x16" in evidence:
        assert evidence.index("1x2,") < evidence.index("1x4") < evidence.index("1x8") < evidence.index("1x16")


def test_the_numbers_in_the_rules_come_from_the_data(results):
    rows = crossover_rules(results / "crossover" / "derived", {})
    crossover = pd.read_csv(results / "crossover" / "derived" / "crossover.csv")
    hbm = crossover[(crossover.working_set == "hbm") & (crossover.ring_bytes_per_sm == 0)
                    & (crossover.alternative == "cp_async")].iloc[0]
    streaming = next(r for r in rows if r["situation"].startswith("streaming tiles from HBM"))
    assert f"{hbm.ratio_at_smallest:.2f}" in streaming["evidence"]


def test_the_wording_follows_the_data(results, tmp_path):
    derived = tmp_path / "derived"
    shutil.copytree(results / "crossover" / "derived", derived)
    crossover = pd.read_csv(derived / "crossover.csv")
    hbm = (crossover.working_set == "hbm") & (crossover.alternative == "cp_async") & (crossover.ring_bytes_per_sm == 0)
    crossover.loc[hbm, ["tma_never_catches_up", "tma_never_loses"]] = [True, False]
    crossover.to_csv(derived / "crossover.csv", index=False)
    streaming = next(r for r in crossover_rules(derived, {}) if r["situation"].startswith("streaming tiles from HBM"))
    assert streaming["rule"].startswith("use cp.async: TMA never catches up")


@pytest.mark.parametrize("row, says", [
    ({"situation": "s", "rule": "r", "evidence": "e", "figure": "nope"}, "key 'figure': 'nope'"),
    ({"situation": "s", "rule": "r", "evidence": "ratio nan at 1 KiB", "figure": "crossover_map"},
     "key 'evidence': a number is missing"),
    ({"situation": "s", "rule": "", "evidence": "e", "figure": "crossover_map"}, "missing rule"),
])
def test_a_bad_row_is_named_by_study_row_and_key(row, says):
    with pytest.raises(rules_of_thumb.RulesError, match=says):
        rules_of_thumb.check_rows([row], configured_studies()["crossover"])


def test_a_study_without_rules_contributes_nothing(results, tmp_path):
    from dataclasses import replace
    studies = {name: replace(study, rules=None) for name, study in configured_studies().items()}
    table = rules_of_thumb.write(results, studies, tmp_path)
    assert "no study with rules of thumb" in table.situation.iloc[0]
