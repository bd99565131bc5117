"""The claims registry (config/claims_registry/): every claim of config/claims/ as registered, an
unregistered change named, and the history rules that built it (moved, tightened, deleted, restored)."""
import copy

from tma_study.paper import claims_registry as registry
from tma_study.paper.claim_files import load_claims
from tma_study.paper.claims_history import Event, change_kind
from tma_study.paper.claims_registry_build import chains
from tma_study.studies import discover

CHECK = {"file": "derived/peaks.csv", "where": {"mechanism": "tma"}, "column": "gbps", "op": ">=", "value": 1.2}
CLAIM = {"id": "toy_fast", "statement": "TMA is at least 1.2 times as fast.", "study": "toy", "check": CHECK}


def _claims() -> list[dict]:
    return registry.claim_dicts(load_claims(studies=discover()))


def test_every_claim_matches_its_registered_entry():
    """The test the registry exists for: a claim changed, added or deleted without an entry fails here."""
    assert registry.problems(_claims(), registry.load()) == []


def test_an_unregistered_change_is_named():
    claims, entries = _claims(), registry.load()
    moved = copy.deepcopy(claims)
    first = moved[0]
    checks = first["check"] if isinstance(first["check"], list) else [first["check"]]
    checks[0]["value"] = "moved" if not isinstance(checks[0]["value"], (int, float)) else checks[0]["value"] * 0.9
    found = registry.problems(moved, entries)
    assert len(found) == 1 and found[0].startswith(f"{first['id']}: changed since it was registered")
    assert any("not registered" in p for p in registry.problems([*claims, CLAIM], entries))
    assert any("gone from config/claims/" in p for p in registry.problems(claims[1:], entries))


def test_the_fingerprint_ignores_layout_and_reason_text_only():
    wrapped = {**CLAIM, "statement": "TMA is at least 1.2 times\n   as fast.", "check": [{**CHECK, "if_missing": "x"}]}
    assert registry.fingerprint(wrapped) == registry.fingerprint(CLAIM)
    assert registry.fingerprint({**CLAIM, "check": {**CHECK, "margin": 0.03}}) != registry.fingerprint(CLAIM)


def test_change_kinds():
    assert change_kind(CLAIM, {**CLAIM, "check": {**CHECK, "value": 1.15}}) == "moved"
    assert change_kind({**CLAIM, "check": {**CHECK, "margin": 0.03}}, {**CLAIM, "check": CHECK}) == "moved"
    assert change_kind(CLAIM, {**CLAIM, "check": [{**CHECK, "margin": 0.03}, {**CHECK, "column": "n"}]}) == "tightened"
    assert change_kind(CLAIM, {**CLAIM, "statement": "TMA is 1.1 times as fast."}) == "restated"
    assert change_kind(CLAIM, {**CLAIM, "statement": "TMA: at least 1.2 times as fast (margin 3 %)."}) == "reworded"


def _event(kind, commit, after_data, old=None, new=None, cid="toy_fast"):
    return Event(kind, cid, "toy", commit, "2026-12-01", after_data, old, new)


def test_a_change_after_the_data_restores_the_old_claim():
    moved = {**CLAIM, "check": {**CHECK, "value": 1.15}}
    live, restored = chains([_event("registered", "aaaaaaa1", False, new=CLAIM),
                             _event("moved", "bbbbbbb2", True, CLAIM, moved)])
    assert [c.id for c in restored] == ["toy_fast_before_bbbbbbb"]
    assert restored[0].before_data and restored[0].registered.startswith("aaaaaaa")
    assert live[0].restates == "toy_fast_before_bbbbbbb" and not live[0].before_data


def test_a_change_before_the_data_replaces_and_a_late_deletion_comes_back():
    moved = {**CLAIM, "check": {**CHECK, "value": 1.15}}
    live, restored = chains([_event("registered", "aaaaaaa1", False, new=CLAIM),
                             _event("moved", "bbbbbbb2", False, CLAIM, moved),
                             _event("tightened", "ccccccc3", True, moved, {**moved, "check": {**CHECK, "margin": 1}})])
    assert restored == [] and live[0].registered == "bbbbbbb2" and live[0].before_data
    assert live[0].revisions == [{"commit": "ccccccc", "change": "tightened"}]
    _, restored = chains([_event("registered", "aaaaaaa1", False, new=CLAIM),
                          _event("deleted", "bbbbbbb2", True, CLAIM, None)])
    assert [c.id for c in restored] == ["toy_fast"] and restored[0].restored_from["change"] == "deleted"


def test_every_restored_claim_is_judged_and_says_what_replaced_it():
    entries = registry.load()
    ids = {c["id"] for c in _claims()}
    restored = [e for e in entries if "restored_from" in e]
    assert restored and all(e["id"] in ids for e in restored)
    assert all(e["restates"] in ids for e in entries if e.get("restates"))


def test_a_restatement_is_found_through_the_registry_or_instead():
    from types import SimpleNamespace

    from tma_study.paper.instances import holds_everywhere, restatements
    claims = [SimpleNamespace(id="old", instead="by_instead"), SimpleNamespace(id="new", instead=None)]
    found = restatements(claims, [{"id": "new", "restates": "old"}, {"id": "x"}])
    assert found == {"old": ["new", "by_instead"]}
    assert holds_everywhere({"a": "PASS", "b": "PASS", "c": ""}, ["a", "b", "c"])
    assert not holds_everywhere({"a": "PASS", "b": "FAIL"}, ["a", "b"])


def test_the_ledger_puts_the_hypotheses_registered_before_their_data_apart(tmp_path):
    from tma_study.paper.generated import claims_table, registered_before_data
    tsv = tmp_path / "claims.tsv"
    tsv.write_text("id\tstudy\tstatement\tstatus\tobserved\tthreshold\treason\tfigure\n"
                   "early\tdsm\tA hypothesis.\tPASS\t1\t>= 0\t\tdsm_winners\n"
                   "late\tdsm\tA finding.\tFAIL\t0\t>= 1\t\tdsm_winners\n")
    before = registered_before_data([{"id": "early", "before_data": True}, {"id": "late", "before_data": False}])
    assert before == {"early"}
    hypotheses, findings = claims_table(tsv, set(), before_data=before).split(r"\end{longtable}")[:2]
    assert "tab:claims_registered" in hypotheses and "early" in hypotheses and "late" not in hypotheses
    assert "tab:claims}" in findings and "late" in findings and "early" not in findings
    committed = registered_before_data()           # the committed registry: the advisor's claims among them
    assert {"advisor_regret_under_5_percent_heldout", "advisor_agrees_with_the_libraries"} <= committed
