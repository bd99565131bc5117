"""The committed reference data, aggregated into a temporary results/<label>/ folder, for
the paper-tier tests (macros, rules of thumb, README table) to read real derived numbers.

A study that may lack reference data (``skip_analysis_without_data``) and has none committed
gets a synthetic raw folder instead (``SYNTHETIC``), so its paper tier (rules, macros,
section) is exercised before its first measurement lands; ``synthetic_studies`` names them.
"""
from __future__ import annotations

import fcntl
import re
import shutil
from pathlib import Path

import yaml
from pipeline_run import shared_folder

from tma_study.studies import discover

REPO = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
REFERENCE = CONFIG["reference_gpu"]


def _paged_kv(folder: Path) -> Path:
    from paged_kv_fixture import synthetic_raw
    return synthetic_raw(folder, CONFIG["studies"]["paged_kv"])


def _cluster_launch(folder: Path) -> Path:
    from test_cluster_launch import synthetic_raw
    return synthetic_raw(folder, CONFIG["studies"]["cluster_launch"])


def _gemm_cluster(folder: Path) -> Path:
    from gemm_cluster_fixture import synthetic_raw
    return synthetic_raw(folder, CONFIG["studies"]["gemm_cluster"])


def _tma_issue(folder: Path) -> Path:
    from test_tma_issue import synthetic_raw
    return synthetic_raw(folder, CONFIG["studies"]["tma_issue"])


SYNTHETIC = {"paged_kv": _paged_kv,      # study -> (raw folder) -> writes synthetic raw data there
             "cluster_launch": _cluster_launch, "gemm_cluster": _gemm_cluster, "tma_issue": _tma_issue}


def configured_studies() -> dict:
    known = discover()
    return {name: known[name] for name in CONFIG["studies"]}


def synthetic_studies() -> list[str]:
    """The configured studies without committed reference data that the fixture fills in."""
    return [name for name in configured_studies()
            if name in SYNTHETIC and not (REPO / "results" / REFERENCE / name).is_dir()]


def aggregated_reference(destination: Path, studies: dict | None = None, tmp_path_factory=None) -> Path:
    """destination/<label>/<study>/{raw, derived/} for every configured study with data
    (committed, or synthetic for the studies of ``synthetic_studies``). With ``tmp_path_factory``
    (every configured study), a copy of the one aggregation this test session makes."""
    if tmp_path_factory is not None and studies is None:
        shared = _shared_aggregation(tmp_path_factory)
        return shutil.copytree(shared, destination / REFERENCE, symlinks=True)
    results = destination / REFERENCE
    for name, study in (studies or configured_studies()).items():
        raw = REPO / "results" / REFERENCE / name
        if raw.is_dir():
            shutil.copytree(raw, results / name, ignore=shutil.ignore_patterns("derived"))
        elif name in SYNTHETIC:
            SYNTHETIC[name](results / name)
        else:
            continue
        repeat = REPO / "results" / f"{REFERENCE}-rerun" / name
        study.entry("aggregate")(results / name, results / name / "derived", repeat if repeat.is_dir() else None)
    return results


def _shared_aggregation(tmp_path_factory) -> Path:
    """results/<label>/ aggregated once a session, in the folder every xdist worker sees (under a
    file lock: the first asks, the others wait and copy)."""
    folder = shared_folder(tmp_path_factory) / "aggregated-reference"
    folder.mkdir(exist_ok=True)
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "done").is_file():
            aggregated_reference(folder / "results")
            (folder / "done").write_text("")
    return folder / "results" / REFERENCE


BRANCH_TOKEN = re.compile(r"\\ifdefined\\([A-Za-z]+)|\\(else|fi)\b|\\(if(?:num|dim|x|case)?)\b|\\([A-Za-z]+)")


def expanded_macros(text: str, defined: set[str]) -> set[str]:
    """The macros TeX expands in ``text`` with ``defined`` defined: every use outside an
    ``\\ifdefined\\X`` (notes about runs that lack a measurement), and inside one the uses in the
    branch taken (the first where X is defined, the ``\\else`` one where not); inside a test of a
    run-time value (``\\ifnum``, ``\\ifdim``) both branches."""
    taken, expanded = [], set()
    for match in BRANCH_TOKEN.finditer(re.sub(r"(?<!\\)%.*", "", text)):
        guard, keyword, other_if, name = match.groups()
        if guard is not None:
            taken.append(guard in defined)
        elif other_if is not None:      # a test on a run-time value (\ifnum, \ifdim): both branches count
            taken.append(None)
        elif keyword == "else":
            taken[-1] = None if taken[-1] is None else not taken[-1]
        elif keyword == "fi":
            taken.pop()
        elif all(t is not False for t in taken):
            expanded.add(name)
    assert not taken, "an \\ifdefined without its \\fi"
    return expanded
