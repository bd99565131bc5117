"""The paged_kv paper tier on synthetic raw data (paged_kv_fixture.synthetic_raw): rules of
thumb whose wording follows the data, macros that are complete, finite and equal to the
derived numbers, a section whose macros are all generated, and the comparison between runs.

The synthetic data's known answers (see synthetic_time there): TMA is 20 % faster from page
64 and 10 % slower below; 4 K/V stages win only for e4m3 cp.async decode; in cp.async decode
1 producer warp wins in bf16 and 4 in e4m3 (one bf16 cell's 1-warp rows are untimed); one bf16 cell has
only its 4-stage TMA row timed (cp.async wins it at page 128) and one e4m3 cell is not
measured at all.
"""
import copy
import json
import re
import shutil

import pandas as pd
import pytest
import yaml
from paged_kv_fixture import REPO, synthetic_raw

from tma_study.paper import catalog, rules_of_thumb
from tma_study.paper import macros as macros_mod
from tma_study import fa3_rule
from tma_study.studies.paged_kv import STUDY, facts, tuning_facts
from tma_study.studies.paged_kv.aggregate import aggregate
from tma_study.studies.paged_kv.compare import compare_runs
from tma_study.studies.paged_kv.macros import macros
from tma_study.studies.paged_kv.rules import rules_of_thumb as paged_kv_rules
from tma_study.studies.paged_kv.tables import write_tables

# The study's text: its section of the body and its details in the appendix.
SECTIONS = (REPO / "paper" / "sections" / "studies" / "paged_kv.tex", REPO / "paper" / "sections" / "appendix" / "paged_kv.tex")
OTHER_STUDY = re.compile(r"\\ifdefined\\pagedKvTmaPoints.*?\\fi", flags=re.DOTALL)   # the paged_kv_tma study's paragraph


def section_text() -> str:
    """The study's text, less the body's paragraph on the paged_kv_tma study (whose macros that study makes)."""
    return OTHER_STUDY.sub("", "\n".join(section.read_text() for section in SECTIONS))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(derived dir, provenance) of the synthetic run."""
    root = tmp_path_factory.mktemp("paged_kv_paper")
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["studies"]["paged_kv"]
    raw = synthetic_raw(root / "raw", copy.deepcopy(config))
    aggregate(raw, root / "derived")
    return root / "derived", json.loads((raw / "provenance.json").read_text())


def rule_of(rows: list[dict], situation_start: str) -> dict:
    (row,) = [r for r in rows if r["situation"].startswith(situation_start)]
    return row


# ---------------------------------------------------------------- rules of thumb

def test_data_before_the_tma_look_ahead_are_marked_provisional(run):
    """Data measured before the TMA producer looked its page-table entries up a tile ahead
    (provenance without ``tma_page_lookup``): the rows that compare the paths say so, and the
    paper gets the macro of its asymmetry paragraph; data with it get neither."""
    from tma_study.studies.paged_kv.macros import macros
    derived, provenance = run
    old = {k: v for k, v in provenance.items() if k != "tma_page_lookup"} | {"git": {"commit": "bcabb37225"}}
    for rows, marked in ((paged_kv_rules(derived, provenance), False), (paged_kv_rules(derived, old), True)):
        for row in rows:
            compares = row["figure"] in ("paged_kv_speedup", "paged_kv_decode", "paged_kv_fa3")
            assert ("provisional" in row["rule"]) == (marked and compares), row
    assert "pagedKvTmaLookupAfterWait" not in macros(derived, provenance)
    assert macros(derived, old)["pagedKvTmaLookupAfterWait"] == "bcabb37"
    assert "\\ifdefined\\pagedKvTmaLookupAfterWait" in section_text()


def test_rules_name_their_figures_and_follow_the_known_answers(run):
    derived, provenance = run
    rows = paged_kv_rules(derived, provenance)
    rules_of_thumb.check_rows(rows, STUDY)
    assert [r["figure"] for r in rows] == ["paged_kv_speedup", "paged_kv_speedup", "paged_kv_fa3",
                                           "paged_kv_decode", "paged_kv_tuning", "paged_kv_tuning"]
    prefill = rule_of(rows, "paged-KV prefill")
    assert prefill["rule"].startswith("load K/V with TMA from 64-token pages") and "above 32 tokens" in prefill["rule"]
    assert "cp.async wins by page size (tokens: count) 16: 10, 32: 10, 64: 0, 128: 0, 256: 0" in prefill["evidence"]
    # decode: the half-timed bf16 cell (cp.async wins at page 128) moves bf16's threshold to 256
    decode = rule_of(rows, "paged-KV decode (few")
    assert decode["rule"].startswith("bf16: load K/V with TMA from 256-token pages")
    assert "e4m3: load K/V with TMA from 64-token pages" in decode["rule"]
    tuning = rule_of(rows, "K/V ring depth and producer warps")
    assert tuning["rule"].startswith("give cp.async e4m3 decode a 4-stage K/V ring")
    assert "gather e4m3 decode K/V with 4 cp.async producer warps; bf16: 1 producer warp" in tuning["rule"]
    assert "cp.async e4m3 4 (74 of 74)" in tuning["evidence"]
    assert "producer-warp count that won the most decode cells: bf16 1 (74 of 75); e4m3 4 (74 of 74)" \
        in tuning["evidence"]
    assert "cp.async bf16 2 stages x 1 producer warp (74 of 75)" in tuning["evidence"]
    bar = rule_of(rows, "paged-KV decode at contexts")
    assert "some decode points only" in bar["rule"] and "SDPA" in bar["evidence"]


def page_rows(winners_by_page: dict[int, list[str]]) -> pd.DataFrame:
    rows = [{"page_size": page, "measured_winner": w, "tma_speedup": {"tma": 1.2, "tie": 1.0, "cp_async": 0.8}[w],
             "phase": "decode", "dtype": "bf16", "page_sweep": True}
            for page, winners in winners_by_page.items() for w in winners]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("winners, verdict", [
    ({16: ["cp_async"], 32: ["cp_async", "tma"], 64: ["tma", "tie"], 128: ["tma"]}, "TMA from 64-token pages"),
    ({16: ["tma"], 32: ["tie"], 64: ["tma"]}, "TMA at every page size"),
    ({16: ["cp_async"], 32: ["cp_async"], 64: ["cp_async"]}, "cp.async at every page size"),
    ({16: ["tma"], 32: ["cp_async"], 64: ["tma", "cp_async"]},
     "no page-size threshold (cp.async still won at 64-token pages)"),
    ({16: ["cp_async"], 32: ["tie"], 64: ["tie"]}, "a tie from 32-token pages"),
])
def test_the_page_size_verdict_follows_the_winners(winners, verdict):
    rule = facts.PageRule.of(page_rows(winners))
    assert rule.verdict == verdict
    assert rule.tally.compared == sum(len(w) for w in winners.values())


def test_the_rule_wording_follows_the_data(run, tmp_path):
    derived = tmp_path / "derived"
    shutil.copytree(run[0], derived)
    speedup = pd.read_csv(derived / "speedup.csv")
    decided = speedup.measured_winner.isin(facts.DECIDED)
    speedup.loc[decided, "measured_winner"] = "cp_async"
    speedup.loc[decided, "fa3_agrees"] = speedup.loc[decided, "fa3_load_path"] == "cp_async"
    speedup.to_csv(derived / "speedup.csv", index=False)
    from tma_study.studies.paged_kv.baselines import rule_baselines
    rule_baselines(speedup).to_csv(derived / "rule_baselines.csv", index=False)
    rows = paged_kv_rules(derived, run[1])
    for phase in ("decode (few", "prefill"):
        assert rule_of(rows, f"paged-KV {phase}")["rule"] == "gather K/V with cp.async: TMA was never faster at any page size"
    fa3 = rule_of(rows, "FlashAttention-3")
    # cp.async wins every decided cell: always-cp.async names them all, so FA3's rule is no prediction here
    assert fa3["rule"].startswith("do not read FlashAttention-3's rule as a prediction of the faster path here")
    assert "always cp async is right more often" in fa3["rule"] and "through its TMA choice" in fa3["rule"]
    (derived / "rule_baselines.csv").unlink()                 # without the scores: the wording from agreement alone
    fa3 = rule_of(paged_kv_rules(derived, run[1]), "FlashAttention-3")
    assert fa3["rule"].startswith("follow FlashAttention-3's rule, knowing it chose the slower path")


def test_fa3_reasons_map_to_their_clauses():
    page = fa3_rule.fa3_choice(64, 2048, 32, 8, 128, "bf16", causal=True)
    rows = fa3_rule.fa3_choice(128, 1, 32, 8, 128, "bf16", causal=True)
    tma = fa3_rule.fa3_choice(256, 2048, 32, 8, 128, "bf16", causal=True)
    other = fa3_rule.fa3_choice(256, 2048, 32, 8, 128, "bf16", causal=True, append_kv=True)
    assert [facts.fa3_clause(c.load_path, c.reason) for c in (page, rows, tma, other)] == [
        facts.CLAUSE_PAGE, facts.CLAUSE_ROWS, facts.CLAUSE_TMA, facts.CLAUSE_OTHER]


def test_fa3_citations_agree_with_the_catalog():
    document = catalog.load_file(catalog.CATALOG_DIR / "fa3_forward.yaml")
    entries = {entry["id"]: entry for entry in document["entries"]}

    def cited(entry_id):
        return {(c["file"], c["line"], c.get("end_line", c["line"])) for c in entries[entry_id]["citations"]}

    assert fa3_rule.RULE_CITATION in cited("fa3.paged_kv.tma")
    assert fa3_rule.KV_STAGES_CITATION in cited("fa3.k.tma")
    assert document["citation_defaults"]["commit"] == fa3_rule.FA3_COMMIT


# ---------------------------------------------------------------- macros

def test_macros_are_complete_finite_and_named_for_the_study(run):
    found = macros(*run)
    macros_mod.check_macros(found, "paged_kv", prefix="pagedKv")
    for name, value in found.items():
        assert not re.search(r"\bnan\b|\binf\b", value.lower()), (name, value)


def test_macros_carry_the_derived_numbers(run):
    derived, provenance = run
    found = macros(derived, provenance)
    speedup = pd.read_csv(derived / "speedup.csv")
    sweep = speedup[speedup.page_sweep & (speedup.phase == "decode") & (speedup.dtype == "bf16")]
    assert found["pagedKvDecodeBfTmaWins"] == str((sweep.measured_winner == "tma").sum())
    assert found["pagedKvDecodeBfCpasyncWins"] == str((sweep.measured_winner == "cp_async").sum())
    assert found["pagedKvDecodeBfPageVerdict"] == "TMA from 256-token pages"
    assert found["pagedKvPrefillPageVerdict"] == "TMA from 64-token pages"
    assert found["pagedKvDecodeNotMeasured"] == "1" and found["pagedKvCellsNotMeasured"] == "1"
    both = speedup[speedup.measured_winner.isin(facts.DECIDED)]
    assert found["pagedKvFaThreeDecided"] == str(len(both))
    assert found["pagedKvFaThreeAgrees"] == str((both.fa3_agrees.astype(str) == "True").sum())
    assert found["pagedKvFaThreeCommit"] == fa3_rule.FA3_COMMIT[:12]
    decode = pd.read_csv(derived / "decode.csv")
    bar = decode[decode.bar_applies & (decode.dtype == "e4m3")]
    assert found["pagedKvDecodeBarFpeightMet"] == str((bar.fraction_of_d2d_copy >= 0.70).sum())
    assert found["pagedKvDecodeBarFpeightMaxPercent"] == f"{100 * bar.fraction_of_d2d_copy.max():.0f}"
    assert found["pagedKvDecodeStagesCpasyncFpeight"] == "4" and found["pagedKvDecodeStagesTmaBf"] == "2"
    tuning = pd.read_csv(derived / "tuning.csv")
    gather = tuning[(tuning.load_path == "cp_async") & (tuning.phase == "decode") & (tuning.status == "measured")]
    for dtype, short, warps in (("bf16", "Bf", 1), ("e4m3", "Fpeight", 4)):
        mine = gather[gather.dtype == dtype]
        assert found[f"pagedKvDecodeProducerWarpsCpasync{short}"] == str(warps)
        assert found[f"pagedKvDecodeProducerWarpsCpasync{short}Won"] == str((mine.producer_warps_chosen == warps).sum())
        assert found[f"pagedKvDecodeProducerWarpsCpasync{short}Cells"] == str(len(mine))
    assert found["pagedKvDecodeComboCpasyncFpeightStages"] == "4"
    assert found["pagedKvDecodeComboCpasyncFpeightProducerWarps"] == "4"
    assert (found["pagedKvDecodeComboCpasyncBfStages"], found["pagedKvDecodeComboCpasyncBfProducerWarps"]) == ("2", "1")
    assert found["pagedKvDecodeProducerWarpsSwept"] == "1 and 4" and found["pagedKvCpasyncProducerWarps"] == "1 and 4"
    # nothing to choose: TMA's one producer warp, prefill's one stage count
    assert not any(name.startswith(("pagedKvDecodeProducerWarpsTma", "pagedKvPrefillStagesCpasync"))
                   for name in found)
    assert found["pagedKvPrefillBestTflopsTmaBf"] == "625.0"      # 1e12 flops / (2000 us x 0.8)
    assert found["pagedKvSdpaGbpsMedian"] == "3000" and found["pagedKvDecodeMinCtasPerSm"] == "2"
    assert found["pagedKvShapeNames"].endswith("and mqa_8x256") and found["pagedKvBlockN"] == "32, 64 or 128"


def test_unmeasured_extras_leave_their_macros_out(run, tmp_path):
    """No torch SDPA and no scaling points: their macros are absent (the section tests
    \\ifdefined), everything else still formats."""
    derived = tmp_path / "derived"
    shutil.copytree(run[0], derived)
    decode = pd.read_csv(derived / "decode.csv").assign(torch_sdpa_gbps=float("nan"))
    decode.to_csv(derived / "decode.csv", index=False)
    speedup = pd.read_csv(derived / "speedup.csv")
    speedup[speedup.page_sweep].to_csv(derived / "speedup.csv", index=False)
    found = macros(derived, {})
    macros_mod.check_macros(found, "paged_kv", prefix="pagedKv")
    assert not any(name.startswith(("pagedKvSdpa", "pagedKvScaling")) for name in found)
    assert "pagedKvDecodeMinCtasPerSm" not in found


# ---------------------------------------------------------------- the section

def section_macros() -> tuple[set[str], set[str]]:
    """(every pagedKv macro the section uses, those it guards with \\ifdefined)."""
    text = re.sub(r"(?<!\\)%.*", "", section_text())
    used = set(re.findall(r"\\(pagedKv[A-Za-z]+)", text))
    guarded = set(re.findall(r"\\ifdefined\\(pagedKv[A-Za-z]+)", text))
    return used, guarded


def test_every_macro_the_section_uses_is_generated(run):
    used, guarded = section_macros()
    found = macros(*run)
    optional = {"pagedKvTmaLookupAfterWait",       # only for data without the TMA look-ahead
                "pagedKvDecodeBarMissedList"}      # only where a bar point misses
    if "pagedKvLtwoStateSizes" not in found:       # only for data with the dirty-L2 copies (not these)
        optional |= {name for name in used if name.startswith("pagedKvLtwoState")}
    assert used and not sorted(used - set(found) - optional), sorted(used - set(found) - optional)
    text = section_text()
    for claims_macro in set(re.findall(r"\\(claimsOf[A-Za-z]+)", text)):
        assert claims_macro in {macros_mod.camel("claims of", name) for name in (*STUDY.figures, *STUDY.tables)}
    # notes that hold only for some runs are guarded: older data, optional measurements
    assert guarded == {"pagedKvScalingCompared", "pagedKvSdpaPoints", "pagedKvTmaLookupAfterWait",
                       "pagedKvDecodeSplitGridCtasPerSm", "pagedKvDecodeMathBoundPoints", "pagedKvLtwoStateSizes"}
    # every decode cell of the synthetic run is a kq (S^T = K Q^T) kernel, as the grid builds them
    assert found["pagedKvDecodeKqCells"] == found["pagedKvDecodeCells"] != "0"


def test_data_before_the_per_kernel_split_rule_say_so(run):
    """Provenance without ``decode_split_rule`` (measured with the fixed grid target): the
    section's note on the old split grid is defined; with it, left out."""
    derived, provenance = run
    assert macros(derived, provenance)["pagedKvDecodeSplitGridCtasPerSm"] == "2"
    assert "pagedKvDecodeSplitGridCtasPerSm" not in macros(derived, {**provenance, "decode_split_rule": "x"})


def test_the_section_includes_the_study_figures_and_existing_tables(run, tmp_path):
    text = section_text()
    for figure in STUDY.figures:
        assert f"{{{figure}.pdf}}" in text
    write_tables(run[0], run[1], tmp_path)
    for table in re.findall(r"\\input\{tables/([a-z_]+)\}", text):
        assert table in STUDY.tables or table in ("paged_kv_comparison", "paged_kv_kernels"), table
        if table in STUDY.tables:
            assert (tmp_path / f"{table}.tex").is_file()
    summary = (tmp_path / "paged_kv_summary.md").read_text()
    assert "| decode | e4m3 | 50 | 30 | 0 | 20 |" in summary and "TMA from 64-token pages" in summary


# ---------------------------------------------------------------- comparison between runs

def test_compare_names_what_moved(run, tmp_path):
    derived, _ = run
    alone = compare_runs({"h200": derived}, "h200")
    assert alone.moved.tolist() == ["nothing to compare"]
    other = tmp_path / "other"
    shutil.copytree(derived, other)
    speedup = pd.read_csv(other / "speedup.csv")
    prefill = speedup.phase == "prefill"
    speedup.loc[prefill & speedup.measured_winner.isin(facts.DECIDED), "measured_winner"] = "cp_async"
    speedup.loc[prefill, "tma_speedup"] *= 0.5
    speedup.to_csv(other / "speedup.csv", index=False)
    table = compare_runs({"h200": derived, "other": other}, "h200").set_index("quantity")
    assert table.loc["prefill, bf16: page-size rule", "moved"] == "other"
    assert table.loc["prefill, bf16: page-size rule", "other"].startswith("cp.async at every page size")
    assert table.loc["prefill, e4m3: median cp.async / TMA time", "moved"] == "other"
    assert table.loc["decode, bf16: page-size rule", "moved"] == "no"
    assert table.loc["decode, e4m3: better path, median % of copy (bar's points)", "moved"] == "no"


# ---------------------------------------------------------------- the decode consumer knob

OTHER = "kq_wgmma"          # the shipped config's other bf16 decode consumer (the synthetic run's, both dtypes)
SPLIT_FASTER_Q1 = 0.9       # synthetic: its time over kq's at 1 query token
SPLIT_SLOWER_Q4 = 1.1       # and at 4


@pytest.fixture(scope="module")
def consumer_run(tmp_path_factory):
    """(derived dir, provenance, tables dir) of the synthetic run with kq_wgmma 10 % faster at
    one query token and 10 % slower at four."""
    root = tmp_path_factory.mktemp("paged_kv_consumer")
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["studies"]["paged_kv"]
    config["decode_consumers"] = ["kq", OTHER]      # one other consumer for both dtypes
    raw = synthetic_raw(root / "raw", copy.deepcopy(config))
    attention = pd.read_csv(raw / "attention.csv")
    split = attention.score_layout == OTHER
    factor = attention.seqlen_q.map({1: SPLIT_FASTER_Q1, 4: SPLIT_SLOWER_Q4}).where(split, 1.0)
    for column in ("time_us_median", "time_us_q1", "time_us_q3", "time_us_iqr", "time_us_min", "time_us_max"):
        attention[column] *= factor
    attention["gbps"] /= factor
    attention["tflops"] /= factor
    attention.to_csv(raw / "attention.csv", index=False)
    aggregate(raw, root / "derived")
    write_tables(root / "derived", json.loads((raw / "provenance.json").read_text()), root / "tables")
    return root / "derived", json.loads((raw / "provenance.json").read_text()), root / "tables"


def test_the_faster_consumer_wins_each_decode_cell(consumer_run):
    derived, provenance, tables = consumer_run
    tuning = pd.read_csv(derived / "tuning.csv")
    decode = tuning[(tuning.phase == "decode") & (tuning.status == "measured")]
    assert set(decode.score_layout_swept) == {f"kq {OTHER}"}
    assert set(tuning[tuning.phase == "prefill"].score_layout_swept) == {"qk"}
    assert set(decode[decode.seqlen_q == 1].score_layout) == {OTHER}
    assert set(decode[decode.seqlen_q == 4].score_layout) == {"kq"}
    ratio = decode[f"time_us_{OTHER}"] / decode.time_us_kq
    assert ratio[decode.seqlen_q == 1].round(6).eq(SPLIT_FASTER_Q1).all()
    # the per-combination columns hold the faster consumer's time
    one = decode[decode.seqlen_q == 1].iloc[0]
    label = f"time_us_s{int(one.stages_chosen)}_p{int(one.producer_warps_chosen)}"
    assert one[label] == pytest.approx(one[f"time_us_{OTHER}"])
    bar = pd.read_csv(derived / "decode.csv")
    measured = bar[bar.best_load_path.isin(facts.LOAD_PATHS)]
    assert set(measured[measured.seqlen_q == 1].best_score_layout) == {OTHER}
    assert set(measured[measured.seqlen_q == 4].best_score_layout) == {"kq"}
    assert tuning_facts.compared_consumers(tuning) == [OTHER]
    wins = tuning_facts.consumer_wins(tuning, "bf16", 1, OTHER)
    assert wins.won == wins.cells == len(decode[(decode.dtype == "bf16") & (decode.seqlen_q == 1)])
    assert wins.over_kq_median == pytest.approx(SPLIT_FASTER_Q1)
    assert tuning_facts.consumer_wins(tuning, "e4m3", 4, OTHER).won == 0
    assert tuning_facts.consumer_wins(tuning, "bf16", 1, "kq_wgmma_rs_lazy") is None       # not swept at bf16
    found = macros(derived, provenance)
    assert found["pagedKvDecodeKqWgmmaBfQoneWon"] == found["pagedKvDecodeKqWgmmaBfQoneCells"] == str(wins.cells)
    assert found["pagedKvDecodeKqWgmmaFpeightQfourWon"] == "0"
    assert found["pagedKvDecodeKqWgmmaBfQoneTimeRatio"] == "0.90"
    assert found["pagedKvDecodeKqWgmmaFpeightQfourTimeRatio"] == "1.10"
    assert not [name for name in found if name.startswith("pagedKvDecodeKqSplit") and name != "pagedKvDecodeKqSplitCells"]
    in_bar = facts.bar_points(bar)
    assert found["pagedKvDecodeBarBestKqWgmma"] == str(int((in_bar.seqlen_q == 1).sum()))
    assert found["pagedKvDecodeBarBestKq"] == str(int((in_bar.seqlen_q == 4).sum()))
    # each consumer's own best rate: kq_wgmma's is the winner's at one token, kq's 10 % lower
    one_token = in_bar[in_bar.seqlen_q == 1]
    assert (one_token[f"best_{OTHER}_gbps"] == one_token.best_gbps).all()
    assert (one_token.best_kq_gbps / one_token.best_gbps).round(6).eq(SPLIT_FASTER_Q1).all()
    kq_fraction = in_bar.best_kq_gbps / in_bar.d2d_copy_gbps
    assert found["pagedKvDecodeBarMetWithoutKqWgmma"] == str(int((kq_fraction >= 0.7).sum()))
    other_fraction = in_bar[f"best_{OTHER}_gbps"] / in_bar.d2d_copy_gbps
    assert found["pagedKvDecodeBarMetWithoutKq"] == str(int((other_fraction >= 0.7).sum()))
    table = (tables / "paged_kv_tuning.md").read_text()
    assert "| chosen consumer (cells) |" in table and f"| median time {OTHER}/kq |" in table
    assert "| 0.90 |" in table and "| 1.10 |" in table


def test_a_run_of_one_consumer_has_no_consumer_macros(run, tmp_path):
    """Data of a run that swept only kq (or older data): no counts against kq, and the
    section's sentences on them are skipped (\\ifdefined)."""
    derived, provenance = run
    one = tmp_path / "derived"
    shutil.copytree(derived, one)
    tuning = pd.read_csv(one / "tuning.csv")
    tuning = tuning.drop(columns=[c for c in tuning.columns if c.startswith("time_us_kq_")])   # all but kq's
    tuning.to_csv(one / "tuning.csv", index=False)
    assert tuning_facts.consumer_wins(tuning, "bf16", 1, OTHER) is None and tuning_facts.compared_consumers(tuning) == []
    found = macros(one, provenance)
    # a consumer's count of cells won is defined for every consumer the sweep can list; nothing else
    assert not [name for name in found if name.startswith("pagedKvDecodeKqWgmma") and not name.endswith("Cells")]
    # the paper's section names no consumer counts (the consumers' history is in docs/)
    assert not [name for name in section_macros()[0] if name.startswith("pagedKvDecodeKqWgmma")]
    decode = pd.read_csv(one / "decode.csv")
    decode = decode.drop(columns=["best_score_layout"] + [c for c in decode.columns
                                                          if c.startswith("best_kq_") and c.endswith("_gbps")])
    decode.to_csv(one / "decode.csv", index=False)
    assert facts.decode_bar(decode).best_by_consumer is None and facts.decode_bar(decode).met_without is None
    found = macros(one, provenance)
    assert not [name for name in found if name.startswith("pagedKvDecodeBarBest") and "Kq" in name]
    assert not [name for name in found if "MetWithout" in name]


def test_the_l2_promotion_macro_comes_from_the_provenance(run):
    derived, provenance = run
    assert macros(derived, provenance | {"tma_l2_promotion_bytes": 128})["pagedKvTmaLtwoPromotionBytes"] == "128"
    older = {k: v for k, v in provenance.items() if k != "tma_l2_promotion_bytes"}
    assert macros(derived, older)["pagedKvTmaLtwoPromotionBytes"] == "256"      # before it was recorded


def test_the_consumer_rule_follows_the_winners(consumer_run, run):
    derived, provenance, _ = consumer_run
    row = rule_of(paged_kv_rules(derived, provenance), "consumer of a paged decode kernel")
    cells = {(q, dtype): len(pd.read_csv(derived / "tuning.csv").query(
        f"phase == 'decode' and dtype == '{dtype}' and seqlen_q == {q} and status == 'measured'"))
        for q in (1, 4) for dtype in ("bf16", "e4m3")}
    assert row["rule"].startswith("1 query token: share each K/V tile among 4 warps, S^T as one warpgroup "
                                  f"wgmma (kq_wgmma) (cells won, bf16: {OTHER} {cells[1, 'bf16']} of "
                                  f"{cells[1, 'bf16']}; e4m3: {OTHER} {cells[1, 'e4m3']} of {cells[1, 'e4m3']})")
    assert ("4 query tokens: give each warp its own query rows over whole tiles (kq) "
            f"(cells won, bf16: kq {cells[4, 'bf16']} of {cells[4, 'bf16']}; ") in row["rule"]
    assert f"bf16 1 query token: {OTHER} time / kq time median 0.90" in row["evidence"]
    assert row["figure"] == "paged_kv_tuning"
    ties, tie_provenance = run          # every cell a tie, kq first: kq everywhere
    row = rule_of(paged_kv_rules(ties, tie_provenance), "consumer of a paged decode kernel")
    assert "share each" not in row["rule"] and row["rule"].count("(kq)") == 2


def test_a_few_tma_wins_by_a_hair_leave_cp_async_the_default():
    """cp.async still winning at the largest page while TMA wins a few cells by less than
    rules.NEAR_TIE: the rule keeps cp.async and says how far TMA was; a larger TMA win leaves no
    page-size rule."""
    from tma_study.studies.paged_kv import rules
    winners = {16: ["cp_async", "cp_async"], 64: ["tma", "cp_async"], 256: ["tie", "cp_async"]}
    rows = page_rows(winners)
    rows.loc[rows.measured_winner == "tma", "tma_speedup"] = 1.01
    advice = rules._advice(facts.PageRule.of(rows))
    assert advice.startswith("gather K/V with cp.async, or load them with TMA at a small cost: TMA won 1 of 6, "
                             "by 1 % at most"), advice
    rows.loc[rows.measured_winner == "tma", "tma_speedup"] = 1.2
    assert rules._advice(facts.PageRule.of(rows)).startswith("no page-size rule")
