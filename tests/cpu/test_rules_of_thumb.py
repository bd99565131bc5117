"""The rules-of-thumb table: gathered from every study present, each row naming its figure,
its wording following the data, and a study's malformed row stopped by name."""
import shutil

import pandas as pd
import pytest
from paper_fixture import aggregated_reference, configured_studies

from tma_study import rules_of_thumb
from tma_study.studies.crossover.rules import rules_of_thumb as crossover_rules


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return aggregated_reference(tmp_path_factory.mktemp("rules") / "results")


def test_every_study_present_contributes_rows_that_name_their_figure(results, tmp_path):
    studies = configured_studies()
    table = rules_of_thumb.write(results, studies, tmp_path)
    with_rules = {name for name, study in studies.items() if study.rules}
    assert set(table.study) == with_rules
    for row in table.itertuples(index=False):
        study = studies[row.study]
        assert row[4] in (*study.figures, *study.tables)
    markdown = (tmp_path / "rules_of_thumb.md").read_text()
    assert "rests on" in markdown and "crossover_bandwidth" in markdown
    tex = (tmp_path / "rules_of_thumb.tex").read_text()
    assert r"\begin{longtable}" in tex and "p{" in tex      # continues onto the next page as studies add rows


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
