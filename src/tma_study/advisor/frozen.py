"""The advisor's frozen versions: the sha256 of its rule files, registered before validation.

``config/advisor_versions.yaml`` lists each version's hash and when it was registered. The
held-out study records the hash of the advisor that existed when it measured, and the scores
count a case for a version only where that hash matches: an advisor changed after seeing
validation results is a new version, scored on cases measured after the change.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

from tma_study.config import REPO_ROOT

RULE_FILES = ("operand.py", "evidence.py", "rules.py")    # what the advice is computed by
VERSIONS = REPO_ROOT / "config" / "advisor_versions.yaml"
HERE = Path(__file__).parent


class UnregisteredAdvisorError(RuntimeError):
    """The advisor's rule files hash to no registered version."""


def current_sha256(folder: Path = HERE) -> str:
    digest = hashlib.sha256()
    for name in RULE_FILES:
        digest.update(name.encode() + b"\0" + (Path(folder) / name).read_bytes().replace(b"\r\n", b"\n") + b"\0")
    return digest.hexdigest()


def versions(path: Path = VERSIONS) -> list[dict]:
    return list((yaml.safe_load(Path(path).read_text()) or {}).get("versions", []))


def current_version(path: Path = VERSIONS) -> dict:
    """The registered version whose hash the rule files have now (UnregisteredAdvisorError if none)."""
    sha = current_sha256()
    for version in versions(path):
        if version["sha256"] == sha:
            return version
    raise UnregisteredAdvisorError(
        f"the advisor's rule files ({', '.join(RULE_FILES)} in src/tma_study/advisor/) hash to {sha}, which "
        f"{path.name} does not register: a changed advisor is a new version; add it there (its score counts "
        "only on held-out cases measured after it)")
