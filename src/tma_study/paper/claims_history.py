"""Every version of every claim in the git history of ``config/claims/``: when it was registered,
whether its study's data were in the tree then, and each change made after they were.

This reads git (``git rev-list``, ``git show``, ``git ls-tree``) and is run by hand, not by the
pipeline: ``tma-study claims-history`` prints the events, and the claims registry
(``config/claims_registry/``, ``tma_study.paper.claims_registry``) was built from them.

- A claim *version* is its id with its fingerprint (``claims_registry.fingerprint``: statement,
  study, needs and checks). It is *registered* by the first commit that holds it.
- A study's *data* are in a commit's tree when a file is tracked under ``results/<label>/<study>/``
  (for the catalog: under ``catalog/``; for the advisor: its scoring rule,
  ``workflow/rules/advisor.smk``, which first wrote its scores). A version registered by a commit
  whose tree holds its study's data was registered after its data.
- A change (or deletion) of a version by a commit whose tree holds the study's data is a change
  *after the claim was judged*. It is ``moved`` where a check's file, rows, column, reduction,
  operator, value or tolerance changed, or a margin shrank; ``restated`` where only numbers in the
  statement changed; ``tightened`` where only a margin grew or a repeat-run check was added;
  ``reworded`` where only the statement's words changed.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tma_study.config import REPO_ROOT

from .claims_registry import DATA_MARKERS, canonical_checks, fingerprint

CLAIMS_PATH = "config/claims"
NUMBER = re.compile(r"\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Event:
    kind: str            # registered | moved | restated | tightened | reworded | deleted
    id: str
    study: str
    commit: str
    date: str
    after_data: bool
    old: dict | None     # the version before the change (None for registered)
    new: dict | None     # the version after it (None for deleted)


def _git(*args: str, root: Path = REPO_ROOT) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def claims_at(commit: str, root: Path = REPO_ROOT) -> dict[str, dict]:
    """Every claim of ``config/claims/*.yaml`` at ``commit``, by id."""
    names = [n for n in _git("ls-tree", "--name-only", f"{commit}:{CLAIMS_PATH}", root=root).split()
             if n.endswith(".yaml")]
    out = {}
    for name in names:
        data = yaml.safe_load(_git("show", f"{commit}:{CLAIMS_PATH}/{name}", root=root)) or {}
        for claim in data.get("claims") or []:
            out[claim["id"]] = claim
    return out


def studies_with_data(commit: str, root: Path = REPO_ROOT) -> set[str]:
    """The studies whose data are tracked in ``commit``'s tree (module docstring)."""
    files = _git("ls-tree", "-r", "--name-only", commit, "results", "catalog", "workflow/rules",
                 root=root).splitlines()
    studies = {parts[2] for parts in (f.split("/") for f in files)
               if parts[0] == "results" and len(parts) > 3 and parts[3] != "derived"}
    for study, markers in DATA_MARKERS.items():
        if any(f.startswith(m) for f in files for m in markers):
            studies.add(study)
    return studies


def _bare(check: dict) -> dict:
    """A check without its margin and repeat-run flag."""
    return {k: v for k, v in check.items() if k not in ("margin", "in_repeat")}


def _numbers_dropped(old: str, new: str) -> bool:
    """Whether a number of the old statement is gone from the new one (added ones state margins)."""
    before, after = NUMBER.findall(old), NUMBER.findall(new)
    return any(before.count(n) > after.count(n) for n in set(before))


def change_kind(old: dict, new: dict) -> str:
    """moved | restated | tightened | reworded (module docstring) for two versions of one id: a new
    version that keeps every old check (a margin as large or larger) and adds checks is tightened."""
    before, after = canonical_checks(old), canonical_checks(new)
    kept = [next((b for b in after if _bare(b) == _bare(a)), None) for a in before]
    if any(b is None or float(b.get("margin", 0)) < float(a.get("margin", 0)) for a, b in zip(before, kept)):
        return "moved"
    if _numbers_dropped(old["statement"], new["statement"]):
        return "restated"
    return "tightened" if before != after else "reworded"


def _commits(root: Path) -> list[tuple[str, list[str], str]]:
    lines = _git("rev-list", "--reverse", "--topo-order", "--parents", "--format=%ad", "--date=short", "HEAD",
                 "--", CLAIMS_PATH, root=root).splitlines()
    out = []
    for header, date in zip(lines[0::2], lines[1::2]):
        commit, *parents = header.removeprefix("commit ").split()
        out.append((commit, parents, date))
    return out


def events(root: Path = REPO_ROOT) -> list[Event]:
    """Every registration, change and deletion of a claim, oldest first. A merge adds an event only
    for a version that neither parent holds (a change made while merging)."""
    found: list[Event] = []
    seen: set[tuple[str, str]] = set()
    for commit, parents, date in _commits(root):
        now = claims_at(commit, root)
        before = [claims_at(p, root) for p in parents] or [{}]
        data = studies_with_data(commit, root)
        first = before[0]
        for cid, claim in now.items():
            key = (cid, fingerprint(claim))
            if key in seen or any(cid in b and fingerprint(b[cid]) == key[1] for b in before):
                seen.add(key)
                continue
            seen.add(key)
            after_data = claim["study"] in data
            old = first.get(cid)
            kind = "registered" if old is None else change_kind(old, claim)
            found.append(Event(kind, cid, claim["study"], commit, date, after_data, old, claim))
        if len(parents) <= 1:
            for cid in set(first) - set(now):
                found.append(Event("deleted", cid, first[cid]["study"], commit, date,
                                   first[cid]["study"] in data, first[cid], None))
    return found
