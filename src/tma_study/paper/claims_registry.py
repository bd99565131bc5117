"""The claims registry: every claim as it was registered, so that none moves after its data are seen.

``config/claims_registry/<study>.yaml`` holds one entry per claim version::

    - id: crossover_tma_latency_higher_small
      fingerprint: 3f2a9c0d17e4b2a8      # sha256 of its statement, study, needs and checks (16 hex digits)
      registered: b63e86d                # the commit that registered this version ("pending": not yet committed)
      date: 2026-12-04
      before_data: false                 # was its study's data absent from that commit's tree?
      thresholds: [...]                  # each check, as claims.tsv states it
      restates: crossover_tma_latency_higher_small_as_registered   # the claim this one restated after its data
      restored_from: {id: ..., commit: ..., changed_at: ..., change: moved}   # an old version brought back

A claim in ``config/claims/`` must match its entry's fingerprint (``problems``). A change to a claim
after it was first judged is a new claim with a new id and a new entry; the old one stays, with its
status. A registered claim never leaves ``config/claims/``: a deleted one comes back (``restored_from``)
and is judged like every other. ``tma-study claims-register`` adds entries for new claims.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml

from tma_study.config import REPO_ROOT

REGISTRY_DIR = REPO_ROOT / "config" / "claims_registry"
PENDING = "pending"
# Studies whose data are not under results/: the file whose presence means their data exist.
DATA_MARKERS = {"catalog": ("catalog/",), "advisor": ("workflow/rules/advisor.smk",)}
COSMETIC_CHECK_KEYS = ("if_missing",)          # a reason text; not part of the hypothesis


def canonical_checks(claim: dict) -> list[dict]:
    """The claim's checks as a list, keys sorted, without the cosmetic ones."""
    checks = claim["check"] if isinstance(claim["check"], list) else [claim["check"]]
    return [{k: check[k] for k in sorted(check) if k not in COSMETIC_CHECK_KEYS} for check in checks]


def fingerprint(claim: dict) -> str:
    """sha256 (16 hex digits) of what a claim asserts: statement (whitespace folded), study, needs, checks."""
    content = {"statement": " ".join(str(claim["statement"]).split()), "study": claim["study"],
               "needs": claim.get("needs"), "checks": canonical_checks(claim)}
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def load(directory: Path = REGISTRY_DIR) -> list[dict]:
    """Every entry of every ``<study>.yaml`` in ``directory``."""
    return [entry for path in sorted(Path(directory).glob("*.yaml"))
            for entry in (yaml.safe_load(path.read_text()) or {}).get("claims", [])]


def claim_dicts(claims) -> list[dict]:
    """``Claim`` objects (``claim_files.load_claims``) as the mappings of their YAML."""
    return [{"id": c.id, "statement": c.statement, "study": c.study, "needs": c.needs, "check": c.check}
            for c in claims]


def problems(claims: list[dict], entries: list[dict]) -> list[str]:
    """Every difference between the claims and the registry: a claim with no entry or another
    fingerprint (an unregistered change), an entry whose claim left config/claims/, a duplicate."""
    found, current = [], {}
    for entry in entries:
        if entry["id"] in current:
            found.append(f"registry: {entry['id']} has two entries")
        current[entry["id"]] = entry
    present = {c["id"]: c for c in claims}
    for cid, claim in present.items():
        entry = current.get(cid)
        if entry is None:
            found.append(f"{cid}: not registered (tma-study claims-register {cid})")
        elif entry["fingerprint"] != fingerprint(claim):
            found.append(f"{cid}: changed since it was registered at {entry['registered']} "
                         f"({entry['fingerprint']} -> {fingerprint(claim)}); a registered claim never moves: "
                         "restore it and state the change as a new claim with a new id")
    for cid, entry in current.items():
        if cid not in present:
            found.append(f"{cid}: registered at {entry['registered']} but gone from config/claims/; "
                         "a registered claim stays (its status is what the data say)")
    for entry in entries:
        for key in ("restates",):
            if entry.get(key) and entry[key] not in current:
                found.append(f"{entry['id']}: {key} {entry[key]!r}, which is not registered")
    return sorted(found)


def counts(entries: list[dict]) -> dict[str, int]:
    """How many entries were registered before their data, after them, restored, and restate one."""
    return {"claims": len(entries),
            "before_data": sum(bool(e.get("before_data")) for e in entries),
            "after_data": sum(not e.get("before_data") for e in entries),
            "restored": sum("restored_from" in e for e in entries),
            "restating": sum(bool(e.get("restates")) for e in entries)}


def data_present(study: str, root: Path = REPO_ROOT) -> bool:
    """Whether the checkout holds data of ``study`` (claims_history's rule, on the working tree)."""
    if study in DATA_MARKERS:
        return any((root / marker).exists() for marker in DATA_MARKERS[study])
    return any(p.is_file() and "derived" not in p.relative_to(root / "results").parts[2:]
               for p in (root / "results").glob(f"*/{study}/**/*"))


def register(claims: list[dict], directory: Path = REGISTRY_DIR, today: str = "") -> list[str]:
    """Append an entry (registered: pending) for each claim without one; the ids added. A claim whose
    entry has another fingerprint is not re-registered: that is a change, which ``problems`` names."""
    from .claim_checks import threshold_text
    known = {e["id"] for e in load(directory)}
    added = []
    for claim in claims:
        if claim["id"] in known:
            continue
        entry = {"id": claim["id"], "study": claim["study"], "fingerprint": fingerprint(claim),
                 "registered": PENDING, "date": today, "before_data": not data_present(claim["study"]),
                 "thresholds": [threshold_text(c) for c in canonical_checks(claim)]}
        if claim.get("restates"):
            entry["restates"] = claim["restates"]
        path = Path(directory) / f"{claim['study']}.yaml"
        text = path.read_text() if path.is_file() else "claims:\n"
        path.write_text(text + yaml.safe_dump([entry], sort_keys=False, width=110, allow_unicode=True))
        added.append(claim["id"])
    return added


def resolve_pending(directory: Path = REGISTRY_DIR, root: Path = REPO_ROOT) -> int:
    """Replace ``registered: pending`` with the commit that added the entry's fingerprint to the registry."""
    import subprocess
    count = 0
    for path in sorted(Path(directory).glob("*.yaml")):
        lines = path.read_text().splitlines(keepends=True)
        for index, line in enumerate(lines):
            if line.strip() != f"registered: {PENDING}" or "fingerprint:" not in lines[index - 1]:
                continue
            value = lines[index - 1].split("fingerprint:")[1].strip()
            commits = subprocess.run(["git", "log", "--reverse", "--format=%h", "--abbrev=7", "-S", value, "--",
                                      str(path.relative_to(root))], cwd=root, capture_output=True, text=True).stdout
            if commits.split():
                lines[index] = line.replace(PENDING, commits.split()[0])
                count += 1
        path.write_text("".join(lines))
    return count

