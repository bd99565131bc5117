"""Shared by the bad-input tests: tmp copies of committed raw data and of the checkout, the
tma-study CLI run in-process, Snakemake run in a copy, and the digest of results/ that the
``results_unchanged`` fixture (tests/cpu/conftest.py) compares before and after each case.
The checkout copies are fixtures of tests/cpu/pipeline/conftest.py."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import outputs_manifest
from tma_study import cli
from tma_study.harness import provenance, seal

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent


def results_digest() -> str:
    """sha256 over every committed file under results/ (path and content) and the list of all
    paths there (derived data and claims, which the main job rewrites, left out)."""
    digest = hashlib.sha256()
    for path in sorted((REPO / "results").rglob("*")):
        relative = path.relative_to(REPO)
        if "derived" in relative.parts or path.name.startswith("claims."):
            continue
        digest.update(str(relative).encode() + b"\0")
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def raw_copy(destination: Path, study: str, label: str = "h200", sealed: bool = True) -> Path:
    """results/<label>/<study>/'s raw files (no derived data) copied to ``destination``;
    ``sealed=False``: without the seal, as a measurement is staged before publish seals it."""
    source = REPO / "results" / label / study
    target = destination / "results" / label / study
    target.mkdir(parents=True)
    for path in source.iterdir():
        if path.is_file():
            shutil.copyfile(path, target / path.name)
    if not sealed:
        record = json.loads((target / "provenance.json").read_text())
        record = {k: v for k, v in record.items() if k not in (seal.SEAL_KEY, seal.SEALED_BY_KEY)}
        (target / "provenance.json").write_text(provenance.dumps(record))
    return target


def reseal(folder: Path) -> None:
    """Seal ``folder``'s raw files as they are now: a damaged copy whose seal is made to match,
    so that what refuses it is the check behind the seal (the schema), as for a measurement
    that was published damaged. A provenance.json that does not parse is left as it is."""
    path = Path(folder) / "provenance.json"
    try:
        record = json.loads(path.read_text())
    except ValueError:
        return
    if not isinstance(record, dict) or seal.SEAL_KEY not in record:
        return
    contents = {name: (folder / name).read_bytes() for name in record[seal.SEAL_KEY] if (folder / name).is_file()}
    path.write_text(provenance.dumps(seal.sealed(record, contents, "tests: resealed after the damage")))


def run_cli(capsys, *args: str) -> tuple[int, str]:
    """(exit status, stderr) of ``tma-study ARGS`` run in this process."""
    try:
        status = cli.main([str(a) for a in args])
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else 1
        if not isinstance(stop.code, int) and stop.code is not None:
            print(stop.code, file=sys.stderr)
    return status, capsys.readouterr().err


def assert_one_line_error(status: int, error: str, *names: str) -> str:
    """A refusal: non-zero status, one line on stderr, naming each of ``names``."""
    assert status != 0, error
    assert error.strip().count("\n") == 0, f"not one line:\n{error}"
    for name in names:
        assert name in error, f"{name!r} not named in: {error}"
    print(f"MESSAGE: {error.strip()}")          # the case's message (pytest -rP lists them)
    return error


def copy_checkout(destination: Path) -> Path:
    """The files git tracks or would track (results/ included), as a checkout of its own."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for relative in filter(None, listed):
        source = REPO / relative
        if source.is_file() and not source.is_symlink():
            (destination / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / relative)
    return destination


# a kernels.csv that follows its schema (the committed data's are sealed: a test writing this one reseals)
SYNTHETIC_KERNELS = ("kernel,registers,shared_bytes_static,stack_frame_bytes,spill_store_bytes,spill_load_bytes,"
                     "sass_instructions,expected_sass\nsynthetic_kernel,64,128,0,0,0,1000,UTMALDGx1\n")


def snakemake(root: Path, *args: str, cwd: Path | None = None) -> tuple[int, str]:
    """(exit status, output) of ``snakemake -n ARGS`` in ``root``: a dry run, no job runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMA_STUDY_")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run([str(VENV_BIN / "snakemake"), "-n", "-s", str(root / "Snakefile"), *args],
                            cwd=cwd or root, env=env, capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout + result.stderr


def main_job(root: Path, *args: str) -> tuple[int, str]:
    """(exit status, output) of ``snakemake -c2 ARGS`` in ``root``: a real run, for what the main
    job's first job checks (the raw data: workflow/rules/checks.smk), which a dry run does not run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMA_STUDY_")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run([str(VENV_BIN / "snakemake"), "-c2", "-s", str(root / "Snakefile"), *args],
                            cwd=root, env=env, capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


# everything the main job writes: the outputs of tests/cpu/helpers/outputs_manifest.py and derived data
WRITTEN = (*outputs_manifest.PATTERNS, "results/*/*/derived/*", "build/catalog/derived/*")


def assert_stopped_by_the_first_job(root: Path, status: int, output: str, *names: str) -> str:
    """A refusal by the main job's first job (check_raw_data), naming each of ``names``: no other
    job started, no output written."""
    assert status != 0, output
    started = re.findall(r"^(?:local)?rule (\w+):", output, flags=re.MULTILINE)
    assert started == ["check_raw_data"], f"jobs started: {started}\n{output}"
    written = [str(path.relative_to(root)) for pattern in WRITTEN for path in Path(root).glob(pattern)]
    assert not written, f"written before the refusal: {written}"
    for name in names:
        assert name in output, f"{name!r} not named in:\n{output}"
    print(f"MESSAGE: {output.split('tma-study check-runs: error: ')[-1].splitlines()[0]}")
    return output


def assert_stopped_before_any_job(status: int, output: str, *names: str) -> str:
    assert status != 0, output
    assert "Building DAG of jobs" not in output and "Job stats" not in output, output
    for name in names:
        assert name in output, f"{name!r} not named in:\n{output}"
    message = [line for line in output.splitlines() if line.strip()
               and not line.startswith(("Traceback", "  File", "    ", "Assuming", "host:"))]
    print(f"MESSAGE: {' | '.join(message[-3:])}")
    return output
