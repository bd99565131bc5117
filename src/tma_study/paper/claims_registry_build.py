"""The claims registry's first build, from the history of ``config/claims/`` (``claims_history.events``).

Run once (``tma-study claims-registry-build``, which refuses to overwrite a registry): after that the
registry is the record, appended by ``tma-study claims-register``; a rebuild would take the claims it
restored for ones registered by the commit that restored them.

Each claim is a chain of versions of one id. A change before its study's data were in the tree
replaces the version (the chain is registered by that commit, before its data); a change after them
that only grows a margin, adds a check or rewords the statement is a revision of the same claim
(``revisions``); a ``moved`` or ``restated`` change ends the chain: the old version comes back under
``<id>_before_<commit>`` (``restored_from``) with its status, and the new one is a new claim,
registered by that commit after its data (``restates``). A claim deleted after its data comes back
under its own id.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .claim_checks import threshold_text
from .claims_history import Event
from .claims_registry import REGISTRY_DIR, canonical_checks, fingerprint

ACCEPTED = ("tightened", "reworded", "scoped")
# changes the history's rules call moved that a reader of the commit finds were not: (id, commit) -> (kind, why)
OVERRIDES = {
    ("dsm_bandwidth_falls_beyond_two", "22a669a"): (
        "scoped", "the pair read pattern joined the data in this commit; the checks name the ring, the only "
                  "pattern they read before (the old checks would pair each ring row with two partners)"),
}
# what each claim deleted after its data became (the claim that says what the data show instead)
SUCCESSORS = {
    "crossover_reproducible_within_1_5_percent": "crossover_reproducible_within_2_percent",
    "crossover_reproducible_within_2_percent": "crossover_reproducible_within_2_5_percent",
    "paged_kv_decode_e4m3_reaches_70pct_of_copy": "paged_kv_decode_e4m3_reaches_65pct_of_copy",
    "cluster_launch_one_wave_when_two_fit": "cluster_launch_second_wave_when_only_two_fit",
    "cluster_launch_costs_where_multicast_saw_it": "cluster_launch_no_cost_when_all_resident",
    "cluster_launch_cost_is_idle_sms": "cluster_launch_cost_is_placement",
    "crossover_tma_issue_to_arrival_below_full_chain": "crossover_tma_chain_cost_is_the_producer_path",
}


@dataclass
class Chain:
    id: str
    claim: dict
    registered: str
    date: str
    before_data: bool
    revisions: list = field(default_factory=list)
    restates: str | None = None
    restored_from: dict | None = None

    def entry(self) -> dict:
        out = {"id": self.id, "study": self.claim["study"], "fingerprint": fingerprint(self.claim),
               "registered": self.registered[:7], "date": self.date, "before_data": self.before_data,
               "thresholds": [threshold_text(c) for c in canonical_checks(self.claim)]}
        if self.revisions:
            out["revisions"] = self.revisions
        if self.restates:
            out["restates"] = self.restates
        if self.restored_from:
            out["restored_from"] = self.restored_from
        return out


def _restored(chain: Chain, event: Event) -> Chain:
    """The old version of a claim moved or deleted by ``event``, under the id it comes back with."""
    deleted = event.kind == "deleted"
    new_id = chain.id if deleted else f"{chain.id}_before_{event.commit[:7]}"
    chain.restored_from = {"id": chain.id, "commit": event.commit[:7], "change": event.kind}
    chain.id = new_id
    return chain


def chains(events: list[Event]) -> tuple[list[Chain], list[Chain]]:
    """(the chains of the claims in config/claims/ now, the versions to restore), from ``events``."""
    live: dict[str, Chain] = {}
    restored: list[Chain] = []
    for e in events:
        old = live.get(e.id)
        kind, why = OVERRIDES.get((e.id, e.commit[:7]), (e.kind, None))
        if e.kind == "deleted":
            live.pop(e.id, None)
            if e.after_data and old is not None:
                restored.append(_restored(old, e))
            continue
        if old is None or not e.after_data:
            before = old.before_data if old is not None else True
            live[e.id] = Chain(e.id, e.new, e.commit, e.date, (not e.after_data) and before)
        elif kind in ACCEPTED:
            old.claim = e.new
            old.revisions.append({"commit": e.commit[:7], "change": kind, **({"why": why} if why else {})})
        else:
            restored.append(_restored(old, e))
            live[e.id] = Chain(e.id, e.new, e.commit, e.date, False, restates=restored[-1].id)
    every = {c.id: c for c in [*live.values(), *restored]}
    for chain in restored:                       # a deleted claim's successor restates it
        successor = every.get(SUCCESSORS.get(chain.restored_from["id"], ""))
        if chain.restored_from["change"] == "deleted" and successor is not None and successor.restates is None:
            successor.restates = chain.id
    return list(live.values()), restored


def restored_yaml(chain: Chain, current_ids: set[str], figures: dict[str, str]) -> str:
    """The restored claim as a YAML list item for config/claims/<study>.yaml."""
    source = chain.restored_from["id"]
    claim = {"id": chain.id, "instead": source if source in current_ids else SUCCESSORS.get(source),
             "statement": " ".join(chain.claim["statement"].split()), "study": chain.claim["study"],
             "figure": figures.get(source, chain.claim["figure"]), "check": chain.claim["check"]}
    if chain.claim.get("needs"):
        claim["needs"] = chain.claim["needs"]
    claim = {k: v for k, v in claim.items() if v is not None}
    checks = claim.pop("check")
    text = yaml.safe_dump([claim], sort_keys=False, width=110, allow_unicode=True)
    text += "  check:\n"
    for check in checks if isinstance(checks, list) else [checks]:
        flow = yaml.safe_dump(check, sort_keys=False, default_flow_style=True, width=100).strip()
        text += "    - " + flow.replace("\n", "\n      ") + "\n"
    return "\n".join("  " + line if line else line for line in text.splitlines()) + "\n\n"


def write(entries: list[dict], directory: Path = REGISTRY_DIR) -> None:
    """One ``<study>.yaml`` per study, entries in the order given."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    by_study: dict[str, list] = {}
    for entry in entries:
        by_study.setdefault(entry["study"], []).append(entry)
    for study, rows in by_study.items():
        header = (f"# The claims registry of study {study}: every claim of config/claims/{study}.yaml as it was\n"
                  "# registered (tma_study.paper.claims_registry). Appended by tma-study claims-register; never\n"
                  "# edited: a claim that changes is a new claim with a new entry.\n")
        body = yaml.safe_dump({"claims": rows}, sort_keys=False, width=110, allow_unicode=True)
        (directory / f"{study}.yaml").write_text(header + body)


def build() -> list[dict]:
    """The registry's entries from the git history (the restored claims must already be in config/claims/)."""
    from .claims_history import events
    live, restored = chains(events())
    return [c.entry() for c in [*live, *restored]]


if __name__ == "__main__":                       # python -m tma_study.paper.claims_registry_build
    if any(REGISTRY_DIR.glob("*.yaml")):
        raise SystemExit(f"{REGISTRY_DIR} exists: the registry is appended (tma-study claims-register), never rebuilt")
    write(build())
