"""What a provenance record says, checked against what can be known without trusting it.

- ``check_gpu``: the GPU it names is the GPU of its folder (a run under ``results/h200*/``
  names an H200: ``label_gpu``), its ``slug`` and ``device`` agree with its name, and where
  ``config/gpu_specs.yaml`` publishes the GPU's SM count, the record's is that count.
- ``check_dates``: no time after the analysis's own clock (beyond CLOCK_SKEW).
- ``check_commit``: the commit it names is in the project's git repository, unless the record
  says the run came from an archive (no checked commit: the source hash alone names the code).

harness.provenance.read runs the first two on every record it reads; the main job
(its first job, ``tma-study check-runs``: harness.run_checks) and ``tma-study check-provenance``
also run the third.
"""
from __future__ import annotations

import datetime as dt
import functools
import re
from pathlib import Path

import yaml

from .. import config as config_mod
from ..gpu import gpu_slug
from .source import commit_in_repository, own_repository, shallow_repository

CLOCK_SKEW = dt.timedelta(hours=1)      # a measuring machine's clock may run this far ahead
GPU_SPECS = config_mod.REPO_ROOT / "config" / "gpu_specs.yaml"
# a GPU model at the start of a results label: h200, h100, a100, gh200, b200, l40s (not "mine", "run1")
_GPU_TOKEN = re.compile(r"[a-z]{1,2}[0-9]{2,4}[a-z]?")


class ProvenanceCheckError(ValueError):
    """A provenance record whose content contradicts what can be checked; names file and key."""


def label_gpu(label: str) -> str | None:
    """The GPU model a results label names ('h200-rerun' -> 'h200'), or None ('mine')."""
    token = label.split("-")[0]
    return token if _GPU_TOKEN.fullmatch(token) else None


def gpu_model(name: str) -> str:
    """The model token of a GPU's name ('NVIDIA H100 80GB HBM3' -> 'h100')."""
    return gpu_slug(name).split("-")[0]


def results_label_of(path: Path) -> str | None:
    """<label> of results/<label>/<study>/provenance.json, or None (a staged measurement)."""
    parts = Path(path).absolute().parts
    return parts[-3] if len(parts) >= 4 and parts[-4] == "results" else None


@functools.lru_cache(maxsize=None)
def _published_sm_counts(path: Path, modified_ns: int) -> dict[str, int]:
    gpus = (yaml.safe_load(path.read_text()) or {}).get("gpus", {})
    return {slug: int(spec["sm_count"]) for slug, spec in gpus.items() if "sm_count" in spec}


def published_sm_counts(path: Path = GPU_SPECS) -> dict[str, int]:
    """{GPU slug: SM count} from config/gpu_specs.yaml (empty outside a checkout)."""
    return _published_sm_counts(path, path.stat().st_mtime_ns) if path.is_file() else {}


def check_gpu(record: dict, path: Path, where: str) -> None:
    gpu = record["gpu"]
    name, slug = gpu["name"], gpu_slug(gpu["name"])
    label = results_label_of(path)
    expected = label_gpu(label) if label else None
    if expected is not None and gpu_model(name) != expected:
        raise ProvenanceCheckError(
            f"{where}, key 'gpu.name': {name!r} is not the GPU of its folder results/{label}/ (a run under "
            f"results/{expected}*/ names a GPU of model {expected.upper()}): data of another GPU go under "
            "results/<its slug>/")
    if gpu.get("slug") is not None and gpu["slug"] != slug:
        raise ProvenanceCheckError(f"{where}, key 'gpu.slug': {gpu['slug']!r} is not the slug of gpu.name "
                                   f"{name!r} ({slug!r}): the record was edited")
    device = record.get("device") or {}
    for key in ("name", "uuid"):
        if device.get(key) and gpu.get(key) and device[key] != gpu[key]:
            raise ProvenanceCheckError(f"{where}, key 'device.{key}': {device[key]!r} is not gpu.{key} "
                                       f"{gpu[key]!r}: one run, one GPU")
    published = published_sm_counts().get(slug)
    if published is not None and gpu["sm_count"] != published:
        raise ProvenanceCheckError(f"{where}, key 'gpu.sm_count': {gpu['sm_count']}, but the {name} has "
                                   f"{published} SMs (config/gpu_specs.yaml)")


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def check_dates(record: dict, where: str, now: dt.datetime | None = None) -> None:
    now = now or dt.datetime.now(dt.timezone.utc)
    for key in ("started_utc", "finished_utc"):
        if utc(record[key]) > now + CLOCK_SKEW:
            raise ProvenanceCheckError(f"{where}, key '{key}': {record[key]} is after this analysis "
                                       f"({now.isoformat(timespec='seconds')}): a measurement cannot come from the future")


def from_archive(record: dict) -> bool:
    """Does the record say its run came from an archive (no checked commit, the source hash alone)?"""
    git = record.get("git") or {}
    return git.get("commit") is None and str(git.get("commit_source") or "").startswith("none:")


def check_commit(record: dict, root: Path, where: str) -> str:
    """ProvenanceCheckError where the project's git repository lacks a commit the record says was
    checked; else what is worth saying ('' where the commit is there, or nothing names one)."""
    git = record.get("git") or {}
    commit = git.get("commit") or git.get("stated_commit")
    if not commit or commit_in_repository(root, commit):
        return ""
    if not own_repository(root):
        return f"commit {commit}: no git repository at {root} to check it in"
    if shallow_repository(root):
        return (f"commit {commit}: not checked, the repository at {root} is a shallow clone "
                "(git fetch --unshallow to check it)")
    if from_archive(record):
        return (f"commit {commit} (stated, not checked): not in the repository at {root}; the record says the run "
                "came from an archive: source_sha256 alone identifies the code")
    raise ProvenanceCheckError(
        f"{where}, key 'git.commit': {commit} is not a commit of the repository at {root}, and the record does not "
        "say the run came from an archive (git.commit null, commit_source 'none: ...'): fetch the history "
        "(git fetch --unshallow) or correct the record")
