"""The pipeline through Snakemake's SLURM executor with profiles/slurm.

- On a running SLURM cluster (CI: .ci/start_slurm.sh starts one on localhost): the no-GPU
  pipeline and one small compile job run as SLURM jobs, and their outputs equal a local run's,
  byte for byte. Without SLURM this test is skipped, saying what to install.
- Anywhere: the sbatch calls of a measure=true run, submitted to a recording stand-in for
  sbatch, ask for one GPU of the right model on the GPU partition, and compile jobs ask for
  CPUs on the CPU partition and no GPU.
"""
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline_run import copy_checkout
from tma_study import cli
from tma_study import gpu as gpu_mod
from tma_study.config import ConfigError
from tma_study.harness import gpu_lock
from tma_study.pipeline import Layout, MeasureTarget, measure_targets, results_label
from tma_study.studies import discover

REPO = Path(__file__).resolve().parents[3]
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
VENV_BIN = Path(sys.executable).parent
# What the SLURM run builds: one study's slice of the main job (its derived data, figures and
# tables, and the claims from every study's derived data) and one small compile job; under
# -m exhaustive the whole main job ("all" is its rule) and a larger compile job.
TARGETS = ["figures/crossover_bandwidth.pdf", "figures/crossover_map.pdf", "paper/tables/crossover_summary.md",
           "results/h200/claims.tsv", "build/compile/multicast/resources.csv"]
EXHAUSTIVE_TARGETS = ["all", "build/compile/dsm/resources.csv"]
# What is compared with the local run: every file under these, except records of when and how
# long (the compile step's timings).
COMPARED = ("figures", "paper/tables", "paper/generated", "results", "build/compile")
NOT_COMPARED = ("compile.json",)
INSTALL = ("needs a running SLURM cluster: as root, apt-get install slurm-wlm munge, then "
           "bash .ci/start_slurm.sh (a one-node cluster on localhost)")
PIPELINE_ENV = {"MPLBACKEND": "Agg", "SOURCE_DATE_EPOCH": "0"}   # PDFs without the time they were drawn


def filled_profile(folder: Path, cpu_partition: str, gpu_partition: str, compile_mem_mb: int | None = None) -> Path:
    """profiles/slurm/config.yaml with its partitions filled in, as a user does (and the compile
    job's memory cut to what a small test node has)."""
    profile = yaml.safe_load(PROFILE.read_text())
    profile["default-resources"]["slurm_partition"] = cpu_partition
    profile["set-resources"]["measure"]["slurm_partition"] = gpu_partition
    if compile_mem_mb is not None:
        profile["set-resources"]["compile"]["mem_mb"] = compile_mem_mb
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(profile))
    return folder


def run_snakemake(root: Path, *args: str, path_first: Path | None = None, timeout_s: int = 1800):
    path = os.pathsep.join(str(p) for p in (path_first, VENV_BIN) if p) + os.pathsep + os.environ.get("PATH", "")
    env = {**os.environ, **PIPELINE_ENV, "PATH": path, "PYTHONPATH": str(root / ".test-packages")}
    return subprocess.run([str(VENV_BIN / "snakemake"), *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=timeout_s)


def output_of(result) -> str:
    return (result.stdout + result.stderr)[-8000:]


# ------------------------------------------------------------------ the profile itself
def test_profile_leaves_partitions_and_account_to_fill_in():
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "slurm"
    assert profile["default-resources"]["slurm_partition"] == "" == profile["default-resources"]["slurm_account"]
    assert profile["set-resources"]["measure"]["slurm_partition"] == ""
    assert PROFILE.read_text().count("# FILL IN") == 3


# ------------------------------------------------------------------ sbatch calls, recorded
RECORDER = """#!{python}
import json, os, sys
from pathlib import Path
log = Path({log!r})
name = Path(sys.argv[0]).name
if name == "sbatch":
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    with log.open("a") as handle:
        handle.write(json.dumps(sys.argv[1:]) + "\\n")
    print(1000 + len(calls))
elif name == "scontrol" and sys.argv[1:3] == ["show", "config"]:
    print("MinJobAge = 600 sec")
elif name in ("squeue", "sacct") and "Account%256" not in " ".join(sys.argv):
    # every submitted job has failed: the run ends at the first status check
    calls = log.read_text().splitlines() if log.exists() else []
    for number in range(len(calls)):
        print(f"{{1000 + number}}|FAILED")
"""


@pytest.fixture(scope="module")
def recorded_sbatch_calls(tmp_path_factory) -> list[str]:
    """The sbatch command lines of a measure=true run on two GPU kinds plus one compile job."""
    root = copy_checkout(tmp_path_factory.mktemp("checkout"))
    for made in ("build/config/crossover.json", "build/compile/crossover/resources.csv",
                 "build/config/dsm.json"):
        (root / made).parent.mkdir(parents=True, exist_ok=True)   # the submitted jobs' inputs, made here
        (root / made).write_text("{}\n")
    fake_bin, log = root / "fake-slurm-bin", root / "sbatch-calls.jsonl"
    fake_bin.mkdir()
    for name in ("sbatch", "squeue", "sinfo", "scontrol", "sacct"):
        (fake_bin / name).write_text(RECORDER.format(python=sys.executable, log=str(log)))
        (fake_bin / name).chmod((fake_bin / name).stat().st_mode | stat.S_IEXEC)
    profile = filled_profile(root / "filled-profile", "cpu-part", "gpu-part")
    result = run_snakemake(root, "build/measure/h800/crossover", "build/measure/h100-80gb-hbm3/crossover",
                           "build/compile/dsm/resources.csv", "--profile", str(profile),
                           "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1",
                           "--latency-wait", "0",
                           "--config", "measure=true", "run_studies=crossover,dsm", "measure_gpus={h800: h800, h100-80gb-hbm3: h100}",
                           path_first=fake_bin, timeout_s=300)
    calls = [" ".join(json.loads(line)) for line in log.read_text().splitlines()] if log.exists() else []
    assert calls, f"no sbatch call recorded:\n{output_of(result)}"
    return calls


def call_of(calls: list[str], comment: str) -> str:
    found = [c for c in calls if f"--comment {comment}" in c]
    assert len(found) == 1, f"no single sbatch call with --comment {comment}:\n" + "\n".join(calls)
    return found[0]


@pytest.mark.parametrize("label, model", [("h800", "h800"), ("h100-80gb-hbm3", "h100")])
def test_a_measure_job_asks_for_one_gpu_of_its_model_on_the_gpu_partition(recorded_sbatch_calls, label, model):
    call = call_of(recorded_sbatch_calls, f"rule_measure_wildcards_{label}_crossover")
    assert f"--gpus={model}:1" in call.split()
    assert "-p gpu-part" in call and "--cpus-per-gpu=16" in call and "--mem 64000" in call and "-t 60" in call


def test_a_compile_job_runs_on_the_cpu_partition_without_a_gpu(recorded_sbatch_calls):
    call = call_of(recorded_sbatch_calls, "rule_compile_wildcards_dsm")
    assert "-p cpu-part" in call and "--cpus-per-task=16" in call
    assert "--gpus" not in call and "--gres" not in call


# ------------------------------------------------------------------ a real SLURM cluster
def slurm_unavailable_reason() -> str | None:
    if not (shutil.which("sbatch") and shutil.which("sinfo")):
        return INSTALL
    states = subprocess.run(["sinfo", "--noheader", "--format=%t"], capture_output=True, text=True)
    if states.returncode != 0 or not {"idle", "mix", "alloc"} & set(states.stdout.split()):
        return f"{INSTALL} (sinfo: {(states.stdout + states.stderr).strip() or 'no node'})"
    return None


# numba names a kernel built by a closure with a counter of its compiling process ('B3v14B...'):
# PTX and SASS compiled in two processes differ there and nowhere else
NUMBA_CLOSURE_COUNTER = re.compile(rb"B\d+v\d+(?=B)")
# ... and each shared array a per-process counter ('_cudapy_smem_11')
NUMBA_SHARED_COUNTER = re.compile(rb"_cudapy_smem_\d+")


def digests(root: Path) -> dict[str, str]:
    """sha256 of every compared file, by its path in the checkout."""
    found = {}
    for f in sorted(f for where in COMPARED for f in (root / where).rglob("*")):
        if f.is_file() and f.name not in NOT_COMPARED:
            data = f.read_bytes()
            if f.suffix in (".ptx", ".sass"):
                data = NUMBA_SHARED_COUNTER.sub(b"_cudapy_smem_", NUMBA_CLOSURE_COUNTER.sub(b"Bv", data))
            found[str(f.relative_to(root))] = hashlib.sha256(data).hexdigest()
    return found


@pytest.mark.parametrize("targets", [pytest.param(TARGETS, id="slice"),
                                     pytest.param(EXHAUSTIVE_TARGETS, id="main-job", marks=pytest.mark.exhaustive)])
def test_the_pipeline_through_slurm_equals_a_local_run(tmp_path, targets):
    reason = slurm_unavailable_reason()
    if reason:
        pytest.skip(reason)
    local = copy_checkout(tmp_path / "local")
    result = run_snakemake(local, "-c2", *targets)
    assert result.returncode == 0, output_of(result)
    on_slurm = copy_checkout(tmp_path / "slurm")
    cores = os.cpu_count() or 1   # the one-node test cluster has this many CPUs
    profile = filled_profile(tmp_path / "profile", "", "", compile_mem_mb=4000)   # "": the default partition
    # squeue for job states: this cluster keeps no accounting database for sacct
    result = run_snakemake(on_slurm, "--profile", str(profile), "--slurm-status-command", "squeue",
                           "--slurm-init-seconds-before-status-checks", "1", "--seconds-between-status-checks", "2",
                           "--max-threads", str(cores), *targets)
    print(output_of(result))
    assert result.returncode == 0, output_of(result)
    log = result.stdout + result.stderr
    for rule in ("compile", "check_raw_data", "aggregate_crossover", "figure", "claims"):   # each a SLURM job
        assert f"slurm_logs/rule_{rule}/" in log, f"no SLURM job of rule {rule}:\n{output_of(result)}"
    assert [line for line in log.splitlines() if line.startswith("localrule ") and line != "localrule all:"] == []
    expected, found = digests(local), digests(on_slurm)
    assert any(f.endswith("/resources.csv") for f in expected) and any(f.startswith("figures/") for f in expected)
    assert sorted(set(found) ^ set(expected)) == [], (sorted(set(found) - set(expected)), sorted(set(expected) - set(found)))
    assert [f for f in expected if found[f] != expected[f]] == []


# ------------------------------------------------------------------ a cluster's GPU kinds
def kinds_config(**overrides) -> dict:
    return {"measure": True, "reference_gpu": "h200", "studies": {"crossover": {}},
            "measure_gpus": {"h100-80gb-hbm3": "h100", "h200": "h200"}, **overrides}


def test_each_gpu_kind_gets_its_own_folder_and_model_without_a_gpu_here(tmp_path):
    day = dt.date(2026, 12, 4)

    def no_gpu_lookup():
        raise AssertionError("a measure_gpus run must not look for a GPU where Snakemake runs")
    assert measure_targets(kinds_config(), root=tmp_path, today=day) == [
        MeasureTarget("h100-80gb-hbm3", "h100-80gb-hbm3", "h100"),
        MeasureTarget("h200-2026-12-04", "h200", "h200")]   # the reference GPU: a dated folder
    assert results_label(kinds_config(), detect=no_gpu_lookup, root=tmp_path, today=day) == "h100-80gb-hbm3"


def test_results_label_and_measure_gpus_together_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="results_label .* and measure_gpus .* both set"):
        measure_targets(kinds_config(results_label="mine"), root=tmp_path)


def test_the_other_kinds_of_this_run_are_overlaid(tmp_path):
    layout = Layout({"crossover": discover()["crossover"]}, "h100-80gb-hbm3", root=tmp_path,
                    measured_labels=("h200-2026-12-04",))
    assert layout.overlay_labels("crossover") == ["h200-2026-12-04"]


def test_a_job_on_a_gpu_of_another_kind_refuses_to_measure(tmp_path, monkeypatch, capsys):
    h100 = gpu_mod.GpuInfo(name="NVIDIA H100 80GB HBM3", compute_capability=(9, 0), sm_count=132,
                           l2_bytes=52428800, smem_per_block_optin_bytes=232448, smem_per_sm_bytes=233472,
                           max_sm_clock_khz=1980000, memory_clock_khz=2619000, memory_bus_bits=5120,
                           total_memory_bytes=80 << 30, driver_version=13000)
    monkeypatch.setattr(gpu_lock, "visible_devices", lambda: [])
    monkeypatch.setattr(gpu_mod, "detect", lambda device_ordinal=0: h100)
    measured = []
    monkeypatch.setattr(cli, "_study", lambda name: type("S", (), {
        "name": name, "architectures": (9,), "missing_measure_modules": lambda self: [],
        "entry": lambda self, what: lambda *a: measured.append(a)})())
    assert cli.main(["measure", "crossover", "--out", str(tmp_path / "out"), "--expect-gpu", "h200"]) == 1
    assert "slug 'h100-80gb-hbm3'" in capsys.readouterr().err and measured == []
    assert cli.main(["measure", "crossover", "--out", str(tmp_path / "out"), "--expect-gpu", "h100-80gb-hbm3"]) == 0
    assert len(measured) == 1
