"""The claims' check language: PASS, FAIL and NOT MEASURED on small derived tables, the
tolerance, the row selection, and a bad claim stopped with its file, id and key named."""
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from raw_fixture import valid_provenance

from tma_study.config import REPO_ROOT
from tma_study.harness.provenance import config_hash
from tma_study.paper import claims as claims_mod
from tma_study.paper.claims import (
    FAIL,
    NOT_MEASURED,
    PASS,
    Claim,
    ClaimsError,
    evaluate,
    load_claims,
    parse_file,
    threshold_text,
)
from tma_study.studies import discover

REPO = Path(__file__).resolve().parents[3]
PEAKS = pd.DataFrame({
    "working_set": ["hbm", "hbm", "l2", "l2"],
    "mechanism": ["tma_tile", "cp_async", "tma_tile", "cp_async"],
    "gbps": [4000.0, 3000.0, 8000.0, 6000.0],
    "fraction": [0.96, 0.72, 0.80, 0.60],
    "never_loses": [True, False, True, False],
})


@pytest.fixture
def results(tmp_path) -> Path:
    """results/<label>/ with one study ('toy') holding derived/peaks.csv and its provenance."""
    derived = tmp_path / "toy" / "derived"
    derived.mkdir(parents=True)
    PEAKS.to_csv(derived / "peaks.csv", index=False)
    (tmp_path / "toy" / "provenance.json").write_text(
        json.dumps(valid_provenance("toy", 1, gpu={"name": "NVIDIA H200", "compute_capability": [9, 0]})))
    return tmp_path


def claim(needs=None, **check) -> Claim:
    base = {"file": "derived/peaks.csv", "column": "fraction", "op": ">=", "value": 0.95,
            "where": {"working_set": "hbm", "mechanism": "tma_tile"}}
    return Claim(id="toy_claim", statement="a toy claim for the tests", study="toy", figure="toy_figure",
                 check={**base, **check}, needs=needs, source="config/claims/toy.yaml")


def test_a_met_threshold_passes_with_the_observed_number(results):
    outcome = evaluate(claim(), results)
    assert outcome.status == PASS
    assert outcome.observed == "0.96" and "fraction >= 0.95" in outcome.threshold


def test_a_missed_threshold_fails(results):
    assert evaluate(claim(value=0.97), results).status == FAIL


def test_tolerance_is_granted_to_the_claim_and_no_more(results):
    assert evaluate(claim(value=0.97, tolerance=0.011), results).status == PASS
    assert evaluate(claim(value=0.97, tolerance=0.009), results).status == FAIL
    assert evaluate(claim(op="==", value=0.95, tolerance=0.011), results).status == PASS
    assert evaluate(claim(op="<=", value=0.95, tolerance=0.011), results).status == PASS


@pytest.mark.parametrize("reduce, op, value, status", [
    ("all", ">=", 0.75, FAIL), ("all", ">=", 0.55, PASS), ("any", ">=", 0.95, PASS),
    ("min", ">=", 0.60, PASS), ("max", "<", 0.96, FAIL), ("median", "==", 0.76, PASS)])
def test_reductions_over_several_rows(results, reduce, op, value, status):
    outcome = evaluate(claim(where={"mechanism": ["tma_tile", "cp_async"]}, reduce=reduce, op=op, value=value),
                       results)
    assert outcome.status == status, outcome


def test_where_compares_and_booleans_match(results):
    outcome = evaluate(claim(where={"gbps": {">": 5000}, "mechanism": "tma_tile"}, column="never_loses",
                             op="==", value=True), results)
    assert outcome.status == PASS


def test_several_rows_where_one_is_expected_fail_and_say_so(results):
    outcome = evaluate(claim(where={"mechanism": "tma_tile"}), results)
    assert outcome.status == FAIL and "2 rows" in outcome.reason


def test_ratio_to_partner_rows(results):
    check = {"where": {"mechanism": "tma_tile"}, "column": "gbps", "reduce": "all", "op": ">=", "value": 1.3,
             "relative_to": {"where": {"mechanism": "cp_async"}, "on": ["working_set"]}}
    outcome = evaluate(claim(**check), results)
    assert outcome.status == PASS and "1.333" in outcome.observed
    assert evaluate(claim(**{**check, "value": 1.4}), results).status == FAIL


def test_no_matching_row_fails_unless_the_claim_says_it_may_be_absent(results):
    assert evaluate(claim(where={"working_set": "dram"}), results).status == FAIL
    outcome = evaluate(claim(where={"working_set": "dram"}, if_missing="no second run present"), results)
    assert outcome.status == NOT_MEASURED and "no second run present" in outcome.reason
    missing_column = evaluate(claim(column="nope", if_missing="not in this run"), results)
    assert missing_column.status == NOT_MEASURED


def test_a_study_without_data_is_not_measured_and_the_folder_is_named(results):
    outcome = evaluate(Claim(**{**claim().__dict__, "study": "gemm"}), results)
    assert outcome.status == NOT_MEASURED and f"{results}/gemm/" in outcome.reason


def test_a_study_without_derived_data_is_not_measured(results):
    (results / "toy" / "derived" / "peaks.csv").unlink()
    assert evaluate(claim(), results).status == NOT_MEASURED


def test_a_claim_for_another_architecture_is_not_measured_here(results):
    outcome = evaluate(claim(needs="sm100"), results)
    assert outcome.status == NOT_MEASURED and "needs an SM100 GPU" in outcome.reason
    assert "NVIDIA H200" in outcome.reason
    assert evaluate(claim(needs="sm90"), results).status == PASS


def write_claims(tmp_path, entries, name="toy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"claims": entries}))
    return path


def good_entry(**overrides) -> dict:
    return {"id": "toy_claim", "statement": "a toy claim for the tests", "study": "toy", "figure": "toy_figure",
            "check": {"file": "derived/peaks.csv", "column": "fraction", "op": ">=", "value": 0.95},
            **overrides}


@pytest.mark.parametrize("entry, says", [
    (good_entry(check={"file": "derived/peaks.csv", "column": "x", "op": "=>", "value": 1}),
     "claim 'toy_claim' key 'check.op': '=>' is not allowed"),
    (good_entry(check={"file": "derived/peaks.csv", "column": "x", "op": ">="}),
     "claim 'toy_claim' key 'check': 'value' is a required property"),
    (good_entry(check={"file": "derived/peaks.csv", "column": "x", "op": ">=", "value": 1, "code": "1+1"}),
     "claim 'toy_claim' key 'check': Additional properties are not allowed ('code'"),
    (good_entry(check={"file": "../../etc/passwd", "column": "x", "op": ">=", "value": 1}),
     "claim 'toy_claim' key 'check.file'"),
    (good_entry(id="Bad Id"), "key 'id'"),
    (good_entry(study="gemm"), "claim 'toy_claim' key 'study': 'gemm' differs from the file's study 'toy'"),
    (good_entry(check={"file": "derived/peaks.csv", "column": "x", "op": ">=", "value": "hbm"}),
     "claim 'toy_claim' key 'check.op': '>=' needs a number"),
    (good_entry(check={"file": "derived/peaks.csv", "column": "x", "op": "==", "value": True, "tolerance": 0.1}),
     "claim 'toy_claim' key 'check.tolerance'"),
])
def test_a_bad_claim_is_named_by_file_id_and_key(tmp_path, entry, says):
    with pytest.raises(ClaimsError) as error:
        parse_file(write_claims(tmp_path, [entry]))
    assert says in str(error.value)
    assert "toy.yaml" in str(error.value)


def test_a_claim_without_id_is_named_by_position(tmp_path):
    entry = good_entry()
    del entry["id"]
    with pytest.raises(ClaimsError, match=r"claim #1 \(no id\)"):
        parse_file(write_claims(tmp_path, [entry]))


def test_a_figure_or_file_the_study_does_not_make_is_rejected(tmp_path):
    studies = discover()
    entry = good_entry(study="crossover", figure="crossover_nope",
                       check={"file": "derived/nope.csv", "column": "x", "op": ">=", "value": 1})
    with pytest.raises(ClaimsError) as error:
        parse_file(write_claims(tmp_path, [entry], "crossover.yaml"), studies)
    assert "key 'figure': 'crossover_nope' is not a figure or table" in str(error.value)
    assert "key 'check.file': 'derived/nope.csv' is not written" in str(error.value)


def test_ids_are_unique_across_files(tmp_path):
    write_claims(tmp_path, [good_entry()], "toy.yaml")
    write_claims(tmp_path, [good_entry(study="other")], "other.yaml")
    with pytest.raises(ClaimsError, match="claim 'toy_claim' key 'id': already used"):
        load_claims(tmp_path)


def test_the_committed_claims_are_valid_and_name_real_figures():
    studies = discover()
    loaded = load_claims(REPO / "config" / "claims", studies)
    assert loaded, "config/claims/ holds no claim"
    for c in loaded:
        if c.study in studies:
            assert c.figure in (*studies[c.study].figures, *studies[c.study].tables, f"{c.study}_kernels")


def test_reports_have_one_row_per_claim_and_a_readable_summary(results, tmp_path):
    outcomes = [evaluate(claim(), results), evaluate(claim(value=0.99), results),
                evaluate(claim(needs="sm100"), results)]
    tsv, md = claims_mod.write_reports(outcomes, tmp_path)
    table = claims_mod.read_outcomes(tsv)
    assert list(table.columns) == claims_mod.TSV_COLUMNS
    assert list(table.status) == [PASS, FAIL, NOT_MEASURED]
    assert "1 PASS, 1 FAIL, 1 NOT MEASURED of 3 claims" in md.read_text()


def test_figure_captions_give_the_status_and_numbers_of_the_claims_resting_on_them(tmp_path):
    """The HTML report's caption of a figure (tma_study.report.report_pages.FigureCaption), read
    from claims.tsv when the report is made, and a table's page ending with its claims."""
    from tma_study.report.report_pages import FigureCaption, table_page
    tsv, _ = claims_mod.write_reports([claims_mod.Outcome(claim(), FAIL, "misses", "0.9", "x >= 1")], tmp_path)
    caption = FigureCaption("toy_figure", "A toy figure", str(tsv)).rst()
    assert caption.startswith("A toy figure. Claims resting on it")
    assert "**FAIL** ``toy_claim``" in caption and "Observed: 0.9." in caption and "Threshold: x >= 1." in caption
    assert "No claim" in FigureCaption("other", "Other.", str(tsv)).rst()
    assert "No claim" in FigureCaption("toy_figure", "Before the main job.", str(tmp_path / "none.tsv")).rst()
    (tmp_path / "toy_figure.md").write_text("**A toy table.**\n\n| a | b |\n| --- | --- |\n| `1` | x < 2 |\n")
    page = table_page(tmp_path / "toy_figure.md", claims_mod.read_outcomes(tsv).to_dict("records"))
    assert "<h2>A toy table.</h2>" in page and "<td><code>1</code></td><td>x &lt; 2</td>" in page
    assert "Claims resting on it" in page and ">FAIL</b>" in page
    title = claims_mod.notebook_title(REPO / "notebooks" / "crossover_bandwidth.py")
    assert title.startswith("Crossover")


def test_a_claim_of_several_checks_passes_only_when_each_does(results):
    low = {"file": "derived/peaks.csv", "where": {"working_set": "hbm", "mechanism": "tma_tile"},
           "column": "fraction", "op": ">=", "value": 0.90}
    both = Claim(**{**claim().__dict__, "check": [low, {**low, "op": "<=", "value": 0.99}]})
    assert evaluate(both, results).status == PASS
    upper_missed = Claim(**{**claim().__dict__, "check": [low, {**low, "op": "<=", "value": 0.95}]})
    outcome = evaluate(upper_missed, results)
    assert outcome.status == FAIL and "misses fraction <= 0.95" in outcome.reason
    assert " and " in outcome.threshold


def test_a_margin_demands_room_beyond_the_threshold(results):
    # 0.96 clears 0.95 by about 1 %: enough for a margin of 0.5 %, not for 3 %
    assert evaluate(claim(margin=0.005), results).status == PASS
    outcome = evaluate(claim(margin=0.03), results)
    assert outcome.status == FAIL and "margin of 3 %" in outcome.reason and ">= 0.9785" in outcome.reason
    assert evaluate(claim(op="<=", value=0.97, margin=0.03), results).status == FAIL
    assert evaluate(claim(op="<=", value=1.0, margin=0.03), results).status == PASS
    # with ==, the margin narrows the tolerance
    assert evaluate(claim(op="==", value=0.95, tolerance=0.02, margin=0.005), results).status == PASS
    assert evaluate(claim(op="==", value=0.95, tolerance=0.02, margin=0.015), results).status == FAIL


def test_in_repeat_checks_the_repeat_run_too(results, tmp_path):
    repeat = tmp_path.parent / f"{tmp_path.name}-rerun" / "toy" / "derived"
    repeat.mkdir(parents=True)
    assert evaluate(claim(in_repeat=True), results).status == PASS       # no repeat yet: reference only
    PEAKS.assign(fraction=[0.90, 0.7, 0.8, 0.6]).to_csv(repeat / "peaks.csv", index=False)
    outcome = evaluate(claim(in_repeat=True), results)
    assert outcome.status == FAIL and "repeat run: observed 0.9 misses" in outcome.reason
    assert evaluate(claim(), results).status == PASS                     # not asked: the repeat is not read


def test_a_study_outside_results_reads_its_own_folder(results, tmp_path):
    catalog = tmp_path / "elsewhere"
    (catalog / "derived").mkdir(parents=True)
    PEAKS.to_csv(catalog / "derived" / "peaks.csv", index=False)
    elsewhere = Claim(**{**claim().__dict__, "study": "catalog"})
    assert evaluate(elsewhere, results).status == NOT_MEASURED
    assert evaluate(elsewhere, results, {"catalog": catalog}).status == PASS


@pytest.mark.parametrize("check, says", [
    ({"file": "derived/peaks.csv", "column": "x", "op": "!=", "value": 1, "margin": 0.03}, "check.margin'"),
    ({"file": "derived/peaks.csv", "column": "x", "op": "==", "value": "hbm", "margin": 0.03}, "check.margin'"),
    ({"file": "derived/peaks.csv", "column": "x", "op": "==", "value": 1.0, "tolerance": 0.01, "margin": 0.03},
     "leaves nothing for a margin"),
    ([{"file": "derived/peaks.csv", "column": "x", "op": ">=", "value": "a"}], "check[0].op'"),
])
def test_a_margin_that_cannot_apply_is_rejected(tmp_path, check, says):
    with pytest.raises(ClaimsError, match=re.escape(says)):
        parse_file(write_claims(tmp_path, [good_entry(check=check)]))


def test_strict_names_the_failing_claims(tmp_path):
    import subprocess
    import sys
    derived = tmp_path / "h200" / "toy" / "derived"
    derived.mkdir(parents=True)
    PEAKS.to_csv(derived / "peaks.csv", index=False)
    claims_dir = tmp_path / "claims"
    claims_dir.mkdir()
    write_claims(claims_dir, [good_entry(check={**good_entry()["check"], "where": {"mechanism": "tma_tile",
                                                                                "working_set": "hbm"}}),
                              good_entry(id="toy_too_high", check={
        "file": "derived/peaks.csv", "where": {"working_set": "hbm", "mechanism": "tma_tile"},
        "column": "fraction", "op": ">=", "value": 0.99})])
    result = subprocess.run([sys.executable, "-m", "tma_study", "claims", "--results", str(tmp_path / "h200"),
                             "--claims-dir", str(claims_dir), "--strict"], capture_output=True, text=True)
    assert result.returncode == 1
    assert "1 claims FAIL: toy_too_high" in result.stderr


# Columns whose values are exact (counts, sizes chosen by the sweep, hardware counters of bytes, a
# measured spread itself): a threshold on them needs no margin for run-to-run noise.
EXACT_COLUMNS = {"entries", "operands", "mechanism", "crossover_bytes", "best_ring_bytes_per_sm", "cluster_size",
                 "cluster_x", "tile_bytes", "page_size", "l2_read_bytes_per_unique_byte",
                 "xbar_bytes_per_unique_byte", "max_relative_difference", "share_identical", "smallest_tile_bytes",
                 "largest_tile_bytes",
                 "cpasync_not_measured", "best_cp_async_producer_warps",
                 "waves", "sms_idle", "max_concurrent_on_one_sm", "observed_idle_sms"}   # cluster_launch: counts


# The ends of a bootstrap interval (the advisor's scores): the interval is the margin.
INTERVAL_COLUMNS = {"fewer_losses_low", "less_regret_low", "mean_regret_high", "share_not_worse_low"}
# A share of catalog entries the advisor agrees with: a count over cited facts, not a measurement.
EXACT_COLUMNS |= {"share_agree_or_tied"}
# The share of cases on which a rule and its best baseline are right together: a count of identical picks.
EXACT_COLUMNS |= {"agrees_with_best_baseline"}


def test_every_measured_threshold_leaves_a_stated_margin():
    """A threshold on a measured value must be cleared by a margin (or be checked in the repeat
    run too), and the statement must say so; exact values need none. A claim restored from the
    history (config/claims_registry/) keeps the checks it was registered with, margin or none."""
    from tma_study.paper import claims_registry
    restored = {e["id"] for e in claims_registry.load() if "restored_from" in e}
    missing = []
    for c in load_claims(REPO / "config" / "claims", discover()):
        for check in c.checks if c.id not in restored else []:
            numeric = isinstance(check["value"], (int, float)) and not isinstance(check["value"], bool)
            if not numeric or check["op"] == "!=" or check["column"] in EXACT_COLUMNS | INTERVAL_COLUMNS:
                continue
            if not (check.get("margin") or check.get("in_repeat")):
                missing.append(f"{c.id}: {check['column']} {check['op']} {check['value']} has no margin")
            elif check.get("margin") and "margin" not in c.statement:
                missing.append(f"{c.id}: the statement does not state its margin")
    assert not missing, "\n".join(missing)


# ------------------------------------------------------------ spread between runs of one sweep
def _run(root, label, gbps, config_change=None):
    """results/<label>/crossover/ with the reference provenance (config changed if asked) and a
    derived/peaks.csv of one row."""
    import shutil
    study_dir = root / label / "crossover"
    (study_dir / "derived").mkdir(parents=True)
    provenance = json.loads((REPO_ROOT / "results/h200/crossover/provenance.json").read_text())
    provenance.pop("raw_files")        # a run of its own: the reference's seal would make it a copy
    provenance["config"].update(config_change or {})
    provenance["config_sha256"] = config_hash(provenance["config"])
    (study_dir / "provenance.json").write_text(json.dumps(provenance))
    (study_dir / "derived" / "peaks.csv").write_text(f"mechanism,gbps\ntma_tile,{gbps}\n")
    shutil.copy(REPO_ROOT / "results/h200/crossover/stream.csv", study_dir / "stream.csv")
    return study_dir


SPREAD_CLAIM = {"id": "peak_above_4000", "statement": "s", "study": "crossover", "figure": "crossover_bandwidth",
                "check": {"file": "derived/peaks.csv", "where": {"mechanism": "tma_tile"}, "column": "gbps",
                          "op": ">=", "value": 4000, "margin": 0.03}}


def test_a_bound_clears_the_spread_between_runs_of_the_same_sweep(tmp_path):
    claim = Claim(**SPREAD_CLAIM)
    reference = _run(tmp_path, "h200", 4300)              # clears 4000 by 7.5 %, more than the 3 % margin
    _run(tmp_path, "h200-other", 4300)
    assert evaluate(claim, reference.parent).status == PASS
    _run(tmp_path, "h200-far", 3900)                       # moved by 400: a 10 % spread of the threshold
    outcome = evaluate(claim, reference.parent)
    assert outcome.status == FAIL
    assert "spread between runs of this sweep 10 % (h200-far, h200-other)" in outcome.reason
    assert "spread between runs of this sweep 10 %" in outcome.threshold


def test_runs_of_another_sweep_give_no_spread(tmp_path):
    from tma_study.paper.claims import same_sweep_runs
    reference = _run(tmp_path, "h200", 4300)
    _run(tmp_path, "h200-wide", 3000, {"stages": [2, 4, 8]})
    assert same_sweep_runs(reference) == []
    assert evaluate(Claim(**SPREAD_CLAIM), reference.parent).status == PASS


def _tolerance_claim(value, tolerance, margin=0.0):
    check = {"file": "derived/peaks.csv", "where": {"mechanism": "tma_tile"}, "column": "gbps", "op": "==",
             "value": value, "tolerance": tolerance, **({"margin": margin} if margin else {})}
    return Claim(**{**SPREAD_CLAIM, "id": "peak_near", "check": check})


def test_a_tolerance_narrows_by_the_spread_between_runs_of_the_same_sweep(tmp_path):
    claim = _tolerance_claim(4300, 200, margin=0.01)            # the margin narrows 200 to 157
    reference = _run(tmp_path, "h200", 4420)                     # 120 from the value
    _run(tmp_path, "h200-other", 4400)                           # 100 from it: moved 20, within 43
    outcome = evaluate(claim, reference.parent)
    assert outcome.status == PASS
    assert "spread between runs of this sweep 0.47 % (h200-other), within the claim's margin" in outcome.reason
    _run(tmp_path, "h200-far", 4300)                             # 0 from it: moved 120, narrows 200 to 80
    outcome = evaluate(claim, reference.parent)
    assert outcome.status == FAIL, outcome.reason
    assert "with the spread 120 (within 80)" in outcome.reason
    assert "spread between runs of this sweep 2.79 % (h200-far, h200-other), larger than the claim's margin" \
        in outcome.threshold


def test_a_tolerance_around_zero_states_its_spread_as_a_share_of_the_tolerance(tmp_path):
    assert "margin of 3 % (within 48.5)" in threshold_text(_tolerance_claim(0, 50, margin=0.03).checks[0])
    claim = _tolerance_claim(0, 50)
    reference = _run(tmp_path, "h200", 10)
    _run(tmp_path, "h200-other", 40)                              # moved 30 of the tolerance's 50
    outcome = evaluate(claim, reference.parent)
    assert outcome.status == PASS, outcome.reason
    assert "spread between runs of this sweep 60 % of the tolerance (h200-other)" in outcome.reason
    assert "(within 20)" in outcome.reason
    _run(tmp_path, "h200-far", -35)                               # moved 25 in distance: 30 is still the largest
    assert evaluate(claim, reference.parent).status == PASS
    assert evaluate(_tolerance_claim(0, 35), reference.parent).status == FAIL     # 35 - 30 < 10


def test_every_claim_is_judged_again_on_each_other_run_of_its_sweep(tmp_path):
    from tma_study.paper.claims import other_runs, run_agreement, write_reports
    from tma_study.paper.generated import runs_table
    claim = Claim(**SPREAD_CLAIM)                  # gbps >= 4000, margin 3 %
    reference = _run(tmp_path, "h200", 4300)
    _run(tmp_path, "h200-other", 4100)             # moved 200 (5 %): each run must reach 4200
    _run(tmp_path, "h200-wide", 3000, {"stages": [2, 4, 8]})       # another sweep: not judged
    runs = other_runs([claim], reference.parent)
    assert list(runs.columns) == ["id", "study", "h200-other"] and runs.loc[0, "h200-other"] == FAIL
    write_reports([evaluate(claim, reference.parent)], reference.parent, runs)
    by_run = pd.read_csv(reference.parent / "claims_by_run.tsv", sep="\t", dtype=str)
    assert by_run.loc[0, ["h200", "h200-other"]].tolist() == [PASS, FAIL]
    assert run_agreement(by_run) == (["peak_above_4000"], ["peak_above_4000"])
    table = runs_table(reference.parent / "claims_by_run.tsv")
    assert "0 of the 1 claims so checked have the same status" in table and r"\claimref{peak_above_4000}" in table


def test_a_run_of_other_kernels_is_not_a_run_of_the_same_sweep(tmp_path):
    from tma_study.paper.claims import same_sweep_runs
    reference = _run(tmp_path, "h200", 4300)
    same, changed = _run(tmp_path, "h200-same", 4300), _run(tmp_path, "h200-changed", 4300)
    kernels = "kernel,registers,sass_instructions,expected_sass,compile_seconds\nk,40,1000,UTMALDGx1,{}\n"
    (reference / "kernels.csv").write_text(kernels.format(1.0))
    (same / "kernels.csv").write_text(kernels.format(2.5))        # compiled in another time: the same kernel
    (changed / "kernels.csv").write_text(kernels.format(1.0).replace("1000", "1012"))
    assert same_sweep_runs(reference) == [same]
