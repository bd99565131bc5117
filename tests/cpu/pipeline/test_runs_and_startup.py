"""The main job's start on damaged or odd checkouts (Snakemake dry runs in a copy: no job runs,
except where a case needs outputs to exist or the first job's checks): a run folder missing a
file, a config key of the wrong type and a read-only checkout stop before any job naming the
culprit; a raw file linked out of results/ and a record naming another GPU stop the main job at
its first job, the raw data's checks, before any output is written; a copied run is handled
correctly; new raw data rerun the analysis whatever the files' times say. None touches results/
of the checkout."""
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from bad_input_fixture import (VENV_BIN, assert_stopped_before_any_job, assert_stopped_by_the_first_job, main_job, reseal,
                               snakemake)
from tma_study.paper.claims import same_sweep_runs

pytestmark = pytest.mark.usefixtures("results_unchanged")  # tests/cpu/conftest.py
DSM_TARGET = "results/h200/dsm/derived/winners.csv"


def test_a_run_missing_a_file_is_named_before_any_job(checkout):
    """results/h200-rerun/crossover/latency.csv deleted: two reproducibility claims went NOT
    MEASURED with the false reason 'no second run of this sweep is present'."""
    (checkout / "results" / "h200-rerun" / "crossover" / "latency.csv").unlink()
    status, output = snakemake(checkout)
    assert_stopped_before_any_job(status, output, "results/h200-rerun/crossover/ lacks latency.csv",
                                  "git checkout -- results/h200-rerun/")


def test_a_copied_run_folder_is_the_same_run_not_another_instance(checkout):
    """Handled, not refused: results/h200-rerun-copy/ holds the same sealed raw files as
    results/h200-rerun/: no overlay, spread or claims_by_run column of its own, and a note."""
    shutil.copytree(checkout / "results" / "h200-rerun", checkout / "results" / "h200-rerun-copy")
    status, output = snakemake(checkout)
    assert status == 0, output[-3000:]
    assert "note: results/h200-rerun-copy/dsm/ holds the same raw files as results/h200-rerun/dsm/" in output
    assert "h200_rerun_copy" not in output and "h200-rerun-copy/dsm/derived" not in output
    runs = same_sweep_runs(checkout / "results" / "h200" / "dsm")
    assert "h200-rerun-copy" not in {run.parent.name for run in runs} and "h200-rerun" in {r.parent.name for r in runs}


def test_every_job_of_the_main_job_waits_for_the_raw_datas_checks(checkout):
    """The raw data are checked by the main job's first job, not when Snakemake parses (a dry run
    answers at once): every other job depends on it, so a refusal stops all before any output."""
    status, output = snakemake(checkout, "--forceall", "--dag")
    assert status == 0, output[-3000:]
    names = dict(re.findall(r'^\s*(\d+)\[label = "(\w+)', output, flags=re.MULTILINE))
    edges = re.findall(r"^\s*(\d+) -> (\d+)", output, flags=re.MULTILINE)
    assert len(names) > 20 and edges, output[-3000:]
    first = {names[job] for job in names if job not in {after for _, after in edges}}
    assert first == {"check_raw_data"}, f"jobs that do not wait for the checks: {first}"


def test_a_raw_file_linked_out_of_results_stops_the_main_job(checkout, tmp_path):
    """results/h200/dsm/broadcast.csv a link to another run's copy outside the repository."""
    elsewhere = tmp_path / "other-run" / "broadcast.csv"
    elsewhere.parent.mkdir()
    shutil.copyfile(checkout / "results" / "h200-rerun" / "dsm" / "broadcast.csv", elsewhere)
    (checkout / "results" / "h200" / "dsm" / "broadcast.csv").unlink()
    (checkout / "results" / "h200" / "dsm" / "broadcast.csv").symlink_to(elsewhere)
    status, output = main_job(checkout, "figures/dsm_broadcast.pdf")
    assert_stopped_by_the_first_job(checkout, status, output, "results/h200/dsm/broadcast.csv",
                                    "a symbolic link to", "outside")


def test_a_record_naming_an_a100_stops_the_main_job(checkout):
    path = checkout / "results" / "h200" / "dsm" / "provenance.json"
    record = json.loads(path.read_text())
    record["gpu"].update(name="NVIDIA A100-SXM4-40GB", sm_count=108, l2_bytes=40 * 2**20)
    path.write_text(json.dumps(record, indent=2) + "\n")
    status, output = main_job(checkout, "paper/generated/macros.tex")
    assert_stopped_by_the_first_job(checkout, status, output, "results/h200/dsm/provenance.json", "key 'gpu.name'",
                                    "'NVIDIA A100-SXM4-40GB'")


def test_a_config_key_of_the_wrong_type_names_the_key_and_its_form(checkout):
    status, output = snakemake(checkout, "--config", "run_studies=42")
    assert_stopped_before_any_job(status, output, "config key 'run_studies'", "42 is not of type 'array', 'null'")
    assert "TypeError" not in output


def test_new_raw_data_rerun_the_analysis_whatever_the_clocks_say(checkout):
    """Outputs dated in the future (clock skew, an unpacked archive), then a raw file replaced (and
    sealed, as a new measurement is): the aggregate step reruns, its parameter being the digest of
    the run's provenance.json, which seals the raw files."""
    result = subprocess.run([str(VENV_BIN / "snakemake"), "-c1", DSM_TARGET], cwd=checkout, capture_output=True,
                            text=True, timeout=600, env={k: v for k, v in os.environ.items()
                                                         if not k.startswith("TMA_STUDY_")})
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    future = (checkout / DSM_TARGET).stat().st_mtime + 86400
    for path in (checkout / "results" / "h200" / "dsm" / "derived").iterdir():
        os.utime(path, (future, future))
    latency = checkout / "results" / "h200" / "dsm" / "latency.csv"
    lines = latency.read_text().splitlines(keepends=True)
    latency.write_text("".join([lines[0], *lines[2:], lines[1]]))      # the same rows, in another order
    reseal(latency.parent)
    status, output = snakemake(checkout, DSM_TARGET)
    assert status == 0, output[-3000:]
    assert "aggregate_dsm" in output and "Nothing to be done" not in output, output[-3000:]


# ------------------------------------------------------------------ a read-only checkout
def _as_other_user(command: list[str]) -> list[str]:
    """``command`` run by a user who cannot write the checkout: nobody where this is root (root
    writes read-only folders), this user otherwise."""
    if os.geteuid() != 0:
        return command
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot take write access away")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]


def test_a_read_only_checkout_names_the_folders_that_must_be_writable(pristine_checkout):
    """A checkout the main job ran in before, then made read-only: one message naming the folders
    (Snakemake's own bookkeeping failed with a traceback on .snakemake/iocache)."""
    top = Path(tempfile.mkdtemp(prefix="tma-read-only-"))
    try:
        os.chmod(top, 0o755)
        root = top / "checkout"
        shutil.copytree(pristine_checkout, root, symlinks=True)
        status, output = snakemake(root, "results/h200/claims.tsv")        # built before: .snakemake/, build/
        assert status == 0, output[-3000:]
        home = top / "home"
        home.mkdir(mode=0o777)
        os.chmod(home, 0o777)
        for folder, _, files in os.walk(root):
            os.chmod(folder, 0o555)
            for name in files:
                path = Path(folder) / name
                if not path.is_symlink():
                    os.chmod(path, path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        env = {k: v for k, v in os.environ.items() if not k.startswith("TMA_STUDY_")}
        env.update(HOME=str(home), XDG_CACHE_HOME=str(home / "cache"), MPLCONFIGDIR=str(home / "mpl"))
        result = subprocess.run(_as_other_user([str(VENV_BIN / "snakemake"), "-n", "-s", str(root / "Snakefile")]),
                                cwd=root, env=env, capture_output=True, text=True, timeout=300)
        assert_stopped_before_any_job(result.returncode, result.stdout + result.stderr,
                                      "cannot be written here", "./", ".snakemake/", "must be writable")
        assert "Traceback" not in result.stdout + result.stderr.split("WorkflowError")[0]
    finally:
        for folder, _, _ in os.walk(top):
            os.chmod(folder, 0o755)
        shutil.rmtree(top)
