"""An install that works without -e: the wheel built from the checkout, installed in a fresh venv
outside it, runs ``tma-study`` on its own files: every study discovered, the schemas shipped as
package data, a check-raw and a check-provenance on committed data.

The fresh venv takes the dependencies from this venv's site-packages (a plain path line in a
.pth file: this venv's editable finder is not run there), so nothing is downloaded; the wheel is
built from a copy of the files setup.py reads (the checkout's build/ is left alone)."""
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BUILD_INPUTS = ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "src", "kernels",
                "workflow/schemas")
STUDIES = sorted(p.parent.name for p in (REPO / "src/tma_study/studies").glob("*/__init__.py"))


def run(*command, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMA_STUDY_") and k != "PYTHONPATH"}
    return subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """bin/ of a fresh venv holding the wheel (not an editable install) and nothing else of ours."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    for name in BUILD_INPUTS:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        copy(REPO / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                             if (REPO / name).is_dir() else {}))
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", root / "dist", source, cwd=root)
    assert built.returncode == 0, built.stderr[-3000:]
    venv = root / "fresh venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    wheel = next((root / "dist").glob("tma_study-*.whl"))
    done = run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel,
               cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=root).stdout.strip()
    (Path(site) / "dependencies-of-the-test-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def test_the_installed_package_is_the_wheels_with_every_study(installed, tmp_path):
    result = run(installed / "python", "-c", "import tma_study, tma_kernels; from tma_study import config; "
                 "from tma_study.studies import discover; print(tma_study.__file__); print(tma_kernels.__file__); "
                 "print(config.SCHEMA_DIR); print(' '.join(sorted(discover())))", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    study_file, kernels_file, schemas, studies = result.stdout.strip().splitlines()
    for path in (study_file, kernels_file, schemas):
        assert Path(path).is_relative_to(installed.parent) and not Path(path).is_relative_to(REPO), path
    assert studies.split() == STUDIES


def test_check_raw_and_check_provenance_run_on_committed_data(installed, tmp_path):
    folder = REPO / "results" / "h200" / "cluster_launch"
    result = run(installed / "tma-study", "check-raw", "cluster_launch", "--raw", folder, cwd=tmp_path)
    assert result.returncode == 0 and "valid cluster_launch raw data" in result.stdout, result.stderr
    result = run(installed / "tma-study", "check-provenance", folder / "provenance.json", cwd=tmp_path)
    assert result.returncode == 0 and ": valid" in result.stdout, result.stderr
