"""provenance.json: where, when, on what and from which code a study's data came.

``build`` writes the record at the end of a measurement; ``read`` is how every reader loads one:
valid JSON holding an object, valid against ``workflow/schemas/provenance.schema.yaml``, of the
study expected, its ``config_sha256`` the hash of its ``config``, its start before its end and
neither after the reader's clock, and the GPU it names the GPU of its folder (harness.provenance_checks).
Which code the record names is harness/source.py's business; its raw files' seals, harness/seal.py's.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata as md
import json
import platform
import socket
import subprocess
from pathlib import Path

from .. import config as config_mod
from . import gpu_lock, l2_state, provenance_checks, seal
from .source import SOURCE_COMMIT_VARIABLE, git_state, source_hash  # noqa: F401  (provenance's API)

SCHEMA = config_mod.SCHEMA_DIR / "provenance.schema.yaml"
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


class ProvenanceError(ValueError):
    """A provenance.json that cannot be trusted; the message names the file and the key."""


_show = seal.shown


def dumps(record: dict) -> str:
    """A record as provenance.json holds it (two-space indent, one newline at the end)."""
    return json.dumps(record, indent=2) + "\n"


def check(record, path: Path, study: str | None = None) -> dict:
    """``record`` (read from ``path``) when it is a valid provenance record; else ProvenanceError."""
    where = _show(path)
    if not isinstance(record, dict):
        raise ProvenanceError(f"{where}: holds a JSON {type(record).__name__}, not an object of keys")
    messages = config_mod.validate_against(record, SCHEMA, noun="key")
    if messages:
        more = f" (and {len(messages) - 1} more problems)" if len(messages) > 1 else ""
        raise ProvenanceError(f"{where}, {messages[0]}{more}; provenance must follow {_show(SCHEMA)}")
    if study is not None and record["study"] != study:
        raise ProvenanceError(f"{where}, key 'study': {record['study']!r}, but the folder holds study {study!r}")
    if config_hash(record["config"]) != record["config_sha256"]:
        raise ProvenanceError(f"{where}, key 'config_sha256': is not the sha256 of key 'config' "
                              "(the config was edited after the measurement)")
    if provenance_checks.utc(record["started_utc"]) > provenance_checks.utc(record["finished_utc"]):
        raise ProvenanceError(f"{where}, key 'finished_utc': {record['finished_utc']} is before "
                              f"started_utc {record['started_utc']}")
    try:
        provenance_checks.check_dates(record, where)
        provenance_checks.check_gpu(record, path, where)
    except provenance_checks.ProvenanceCheckError as error:
        raise ProvenanceError(str(error)) from None
    return record


def read(path: Path, study: str | None = None) -> dict:
    """The provenance record at ``path``, checked (``check``); ``study``: the study it must be of."""
    path = Path(path)
    try:
        text = seal.read_checked(path, seal.MAX_PROVENANCE_BYTES).decode()
    except FileNotFoundError:
        raise ProvenanceError(f"{_show(path)}: missing (every study's raw data come with one)") from None
    except seal.UnsafeFileError as error:
        raise ProvenanceError(str(error)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ProvenanceError(f"{_show(path)}: cannot be read: {error}") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        raise ProvenanceError(f"{_show(path)}, line {error.lineno} column {error.colno}: not valid JSON: "
                              f"{error.msg}") from None
    return check(record, path, study)
