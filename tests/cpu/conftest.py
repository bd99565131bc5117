"""The CPU tests, arranged like the code: one folder per study (crossover/, multicast/, dsm/,
gemm/; paged_kv's tests beside them), paper/ (claims, catalog, macros, rules of thumb),
pipeline/ (the Snakemake workflow, its configs and the bad inputs it refuses), harness/,
kernels/ (the PTX toolkit, tensor maps, the kernel cache) and environment/ (the declared
dependencies). helpers/ holds the synthetic data and shared code the tests import by module
name (``from crossover_fixture import ...``): this file puts it on the import path.

Markers (pyproject.toml): ``slow`` (minutes of one worker: the main job, nvcc or numba builds;
scheduled first), ``exhaustive`` (every variant beyond one per kernel family; deselected unless
``pytest -m exhaustive``).

Scheduling (``--dist loadfile --no-loadscope-reorder``): each test file runs whole on one worker,
the files handed out in the order ``pytest_collection_modifyitems`` below sets: long work first.
The main job runs once a session (the ``main_job`` fixture); the other files reading its outputs
come last."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parent / "helpers"
if str(HELPERS) not in sys.path:
    sys.path.insert(0, str(HELPERS))

from bad_input_fixture import results_digest  # noqa: E402  (helpers/ is on the path from here on)
from pipeline_run import main_job as run_main_job  # noqa: E402

NO_SLURM_CONTROLLER = "TMA_TESTS_NO_SLURM_CONTROLLER"
MAIN_JOB_FILE = "tests/cpu/pipeline/test_pipeline_no_gpu.py"
READS_THE_MAIN_JOB = {"tests/cpu/paged_kv/test_paged_kv_pipeline.py"}


def pytest_configure(config):
    """Where SLURM's client tools are installed but no controller answers, the SLURM executor
    plugin's ``scontrol show config`` (asked each time Snakemake starts) waits about 9 s before it
    fails, and the suite starts Snakemake well over a hundred times. Asked once here (in the
    controlling process; the workers inherit the answer): without a controller, a ``scontrol`` that
    fails at once goes first on PATH, so each Snakemake sees the same failure without the wait.
    With a controller (CI: .ci/start_slurm.sh) or without the tools, nothing changes."""
    if os.environ.get(NO_SLURM_CONTROLLER) is not None or shutil.which("scontrol") is None:
        return
    try:
        answered = subprocess.run(["scontrol", "show", "config"], capture_output=True, timeout=3).returncode == 0
    except subprocess.TimeoutExpired:
        answered = False
    os.environ[NO_SLURM_CONTROLLER] = "" if answered else "1"
    if not answered:
        shim = Path(tempfile.mkdtemp(prefix="tma-tests-no-slurm-controller-"))
        (shim / "scontrol").write_text("#!/bin/sh\necho 'no SLURM controller (tests/cpu/conftest.py)' >&2\nexit 1\n")
        (shim / "scontrol").chmod(0o755)
        os.environ["PATH"] = f"{shim}{os.pathsep}{os.environ.get('PATH', '')}"


def pytest_collection_modifyitems(config, items):
    """The order pytest-xdist hands out test files in (``--dist loadfile --no-loadscope-reorder``):
    the main job's file first (the longest chain), then every file holding a slow test, then the
    rest, each group in the order collected; the files that only read the main job's outputs
    (``READS_THE_MAIN_JOB``) last, when it has long finished on another worker."""
    def rank(item):
        path = item.nodeid.split("::")[0]
        if path == MAIN_JOB_FILE:
            return 0
        if path in READS_THE_MAIN_JOB:
            return 3
        return 1 if path in slow_files else 2
    slow_files = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=rank)            # stable: the files of one rank keep their order


@pytest.fixture(scope="session")
def main_job(tmp_path_factory):
    """(root, result) of the main job run once this session in a copy of the checkout
    (helpers/pipeline_run.py): for tests that read its outputs; a test that damages its copy
    makes its own."""
    return run_main_job(tmp_path_factory)


@pytest.fixture
def results_unchanged():
    """The case leaves results/ of the checkout as it was (the bad-input tests use it for
    every case: ``pytestmark = pytest.mark.usefixtures("results_unchanged")``)."""
    before = results_digest()
    yield
    assert results_digest() == before, "a bad-input case changed results/"
