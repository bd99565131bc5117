"""provenance.json: where, when, on what and from which code a study's data came."""
from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata as md
import json
import os
import platform
import socket
import subprocess
from pathlib import Path

from . import gpu_lock, l2_state

SOURCE_COMMIT_VARIABLE = "TMA_STUDY_SOURCE_COMMIT"
PACKAGES = ("numba", "numba-cuda", "llvmlite", "numpy", "cuda-bindings", "cuda-core",
            "cuda-bench", "nvidia-nvvm", "nvidia-cuda-nvcc", "nvidia-cuda-runtime", "pandas",
            "snakemake", "torch", "nvidia-cutlass")


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def package_versions() -> dict[str, str | None]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state(repo: Path) -> dict:
    """Commit and whether the tree had uncommitted changes (None where git is unavailable).

    A runner that copies the tree to a GPU machine states the commit it copied in
    $TMA_STUDY_SOURCE_COMMIT; that statement wins over whatever .git the copy carries (it may
    be stale), and source_sha256 lets anyone check it.
    """
    def git(*args):
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    stated = os.environ.get(SOURCE_COMMIT_VARIABLE)
    if stated:
        return {"commit": stated, "dirty": None, "commit_source": f"${SOURCE_COMMIT_VARIABLE} (stated by the runner)"}
    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None, "commit_source": None}
    return {"commit": commit, "dirty": dirty, "commit_source": "git"}


SOURCE_FOLDERS = ("kernels", "src", "workflow", "config")
SOURCE_SUFFIXES = (".py", ".yaml", ".smk")


def source_hash(repo: Path) -> str:
    """sha256 over the code and config that produce the data (path + content, sorted).

    Checkable without git: hash the same files of a checkout with this function.
    """
    digest = hashlib.sha256()
    files = [repo / "Snakefile"] + sorted(
        p for folder in SOURCE_FOLDERS for p in (repo / folder).rglob("*")
        if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts)
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def config_hash(study_config: dict) -> str:
    """sha256 of the study's validated config, canonical JSON (sorted keys)."""
    canonical = json.dumps(study_config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def nvidia_smi_clocks() -> dict | None:
    """SM/memory clocks, power and temperature as nvidia-smi reads them (read-only query), of
    the GPU this process claimed (nvidia-smi ignores CUDA_VISIBLE_DEVICES; ``--id`` names it)."""
    fields = "clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu,pstate"
    device = gpu_lock.pinned_device() or {}
    which = device.get("uuid") or device.get("pci_bus_id")
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader",
                              *([f"--id={which}"] if which else [])],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    values = [v.strip() for v in out.splitlines()[0].split(",")]
    return dict(zip(fields.split(","), values))


def build(*, study: str, gpu: dict, study_config: dict, repo: Path, started: str,
          extra: dict | None = None) -> dict:
    """The provenance record written beside a study's raw data."""
    record = {
        "study": study,
        "gpu": gpu,
        "cuda_driver_version": gpu.get("driver_version"),
        "packages": package_versions(),
        "python": platform.python_version(),
        "host": socket.gethostname(),
        "device": gpu_lock.pinned_device(),   # which of the host's GPUs: uuid, PCI bus id, index
        "git": git_state(repo),
        "source_sha256": source_hash(repo),
        "config_sha256": config_hash(study_config),
        "config": study_config,
        "started_utc": started,
        "finished_utc": utc_now(),
        "l2_before_each_sample": l2_state.DESCRIPTIONS[
            (study_config.get("timing") or {}).get("l2_after_flush", l2_state.DEFAULT_L2_STATE)],
    }
    record.update(extra or {})
    return record
