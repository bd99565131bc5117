"""The main job run in a copy of the checkout, as the pipeline tests do: the copy (with the
crossover raw data, synthetic where the checkout has none), Snakemake run there with the copy's
packages first on the path, and what its output says."""
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from crossover_fixture import write_realistic_raw_folder

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent
REFERENCE_GPU = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["reference_gpu"]
RAW = f"results/{REFERENCE_GPU}/crossover"
REAL_DATA = (REPO / RAW / "stream.csv").exists()   # else the copy holds synthetic data


def copy_checkout(destination: Path) -> Path:
    """The files git tracks or would track, with the crossover raw data (synthetic if none)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for relative in filter(None, listed):
        source = REPO / relative
        if source.is_file():            # a tracked file deleted in the work tree is listed too
            (destination / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / relative)
    if not (destination / RAW).exists():
        write_realistic_raw_folder(destination / RAW)
    # The documented commands run .venv/bin/...: the copy's .venv is the venv running the tests.
    (destination / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    # The venv's editable install points at REPO; import the copy's packages instead.
    packages = destination / ".test-packages"
    packages.mkdir()
    (packages / "tma_study").symlink_to(destination / "src" / "tma_study")
    (packages / "tma_kernels").symlink_to(destination / "kernels")
    return destination


def environment(root: Path, bin_dir: Path = VENV_BIN) -> dict[str, str]:
    """What a command in the copy runs with: the venv first on PATH, the copy's own packages."""
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(root / ".test-packages"), "MPLBACKEND": "Agg"}


def shell(root: Path, command: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """A documented command line, exactly as written, run by bash in the copy."""
    return subprocess.run(["bash", "-c", command], cwd=root, env=environment(root), capture_output=True,
                          text=True, timeout=timeout)


VENV_LINK = "a venv ä é"


def venv_link(folder: Path) -> Path:
    """This venv under ``folder`` (a link), its path holding spaces and non-ASCII characters: its
    ``bin/python`` is the interpreter jobs run with (sys.executable), as from a venv made there."""
    link = folder / VENV_LINK
    link.symlink_to(Path(sys.prefix), target_is_directory=True)
    return link / "bin" / "python"


def snakemake(root: Path, *args: str, python: Path | None = None) -> subprocess.CompletedProcess:
    """``snakemake ARGS`` in ``root``; ``python``: run as ``python -m snakemake`` with that interpreter."""
    env = environment(root, Path(python).parent if python else VENV_BIN)
    command = [str(python), "-m", "snakemake"] if python else [str(VENV_BIN / "snakemake")]
    # A guard against a hung job, not a speed check: the first main job compiles every kernel
    # (about 20 minutes on 2 slow cores).
    return subprocess.run([*command, *args], cwd=root, env=env, capture_output=True, text=True, timeout=2700)


def output_of(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


def jobs_run(result: subprocess.CompletedProcess) -> dict[str, int]:
    """{rule: count} from Snakemake's 'Job stats' table."""
    table = output_of(result).split("Job stats:", 1)[1].split("total", 1)[0]
    return {rule: int(count) for rule, count in re.findall(r"^(\w+)\s+(\d+)\s*$", table, flags=re.MULTILINE)}


def shared_folder(tmp_path_factory) -> Path:
    """The folder every pytest-xdist worker of this session sees (the session's base temp without
    -n), for what the session builds once."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def main_job(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The main job (``snakemake -c2``), run once a test session in a copy of the checkout whose
    path and venv's hold spaces and non-ASCII characters; every test that reads its outputs shares
    it (tests/cpu/conftest.py's ``main_job`` fixture). A file lock makes it once a session under
    pytest-xdist too: the first worker runs it, another waits and reads what it recorded."""
    folder = shared_folder(tmp_path_factory) / "main-job"
    folder.mkdir(exist_ok=True)
    root, record = folder / "a checkout ü ß", folder / "result.json"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.is_file():
            copy_checkout(root)
            venv_link(folder)
            result = snakemake(root, "-c2", python=folder / VENV_LINK / "bin" / "python")
            record.write_text(json.dumps({"args": result.args, "returncode": result.returncode,
                                          "stdout": result.stdout, "stderr": result.stderr}))
    done = json.loads(record.read_text())
    return root, subprocess.CompletedProcess(done["args"], done["returncode"], done["stdout"], done["stderr"])
