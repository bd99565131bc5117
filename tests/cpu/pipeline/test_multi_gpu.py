"""Several GPUs on one node: each measure job claims its own device and pins itself to it.

The unit tests drive tma_study.harness.gpu_lock with made-up devices. The pipeline tests run
the real measure rule (``snakemake --config measure=true --resources gpu=N``) in a copy of the
checkout whose Python processes see N fake GPUs (tests/cpu/pipeline/fake_gpus/sitecustomize.py: the
device listing and detection are faked, and the study's measure step records the device it
was pinned to instead of timing kernels), then read what each job saw.
"""
import json
import os
import subprocess
import sys
import time
from itertools import combinations
from pathlib import Path

import pytest

from pipeline_run import jobs_run
from tma_study.harness import gpu_lock
from tma_study.harness.gpu_lock import VisibleDevice, claim_device, devices_from_listing

FAKE_GPUS_DIR = Path(__file__).resolve().parent / "fake_gpus"
VENV_BIN = Path(sys.executable).parent
STUDIES = ("crossover", "multicast", "dsm")   # their measure steps need no torch
LABEL = "fake-gpus"


def fake_devices(count: int) -> list[VisibleDevice]:
    return devices_from_listing([{"ordinal": i, "name": "NVIDIA H200", "uuid": f"GPU-{i:08x}-fake",
                                  "pci_bus_id": f"0000:{16 + i:02x}:00.0"} for i in range(count)], None)


# ------------------------------------------------------------------ the device pool
def test_entries_follow_the_starting_cuda_visible_devices():
    listing = [{"ordinal": 0, "name": "a", "uuid": None, "pci_bus_id": None},
               {"ordinal": 1, "name": "b", "uuid": None, "pci_bus_id": None}]
    assert [d.entry for d in devices_from_listing(listing, "3,5")] == ["3", "5"]
    assert [d.entry for d in devices_from_listing(listing, None)] == ["0", "1"]
    assert [d.pin for d in devices_from_listing(listing, "3,5")] == ["3", "5"]   # no UUID: the entry


def test_a_device_is_pinned_by_its_uuid_and_the_environment_restored(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    devices = fake_devices(2)
    with claim_device("first", tmp_path, devices) as first:
        assert os.environ["CUDA_VISIBLE_DEVICES"] == first.uuid == "GPU-00000000-fake"
        assert gpu_lock.pinned_device()["pci_bus_id"] == "0000:10:00.0"
        with claim_device("second", tmp_path, devices) as second:   # the first still holds device 0
            assert os.environ["CUDA_VISIBLE_DEVICES"] == second.uuid == "GPU-00000001-fake"
        assert os.environ["CUDA_VISIBLE_DEVICES"] == first.uuid
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1" and gpu_lock.pinned_device() is None


def test_no_visible_gpu_claims_nothing(tmp_path):
    with claim_device("measure x", tmp_path, []) as device:
        assert device is None and gpu_lock.pinned_device() is None


def test_a_process_that_already_started_cuda_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_lock.gpu_mod, "cuda_initialised_here", lambda: True)
    with pytest.raises(RuntimeError, match="CUDA was initialised before a GPU was claimed"):
        with claim_device("measure x", tmp_path, fake_devices(1)):
            pass


CLAIMANT = """
import json, os, sys, time
from tma_study.harness.gpu_lock import claim_device, devices_from_listing
devices = devices_from_listing(json.loads(sys.argv[2]), None)
with claim_device(sys.argv[3], sys.argv[1], devices, poll_s=0.1):
    began = time.monotonic()
    time.sleep(1.0)
    print(json.dumps([os.environ["CUDA_VISIBLE_DEVICES"], began, time.monotonic()]), flush=True)
"""


def held_intervals(tmp_path, devices: int, processes: int) -> list[tuple[str, float, float, str]]:
    """(CUDA_VISIBLE_DEVICES, start, end, output) of ``processes`` claimants started at once."""
    listing = json.dumps([{"ordinal": i, "name": "NVIDIA H200", "uuid": f"GPU-{i:08x}-fake", "pci_bus_id": None}
                          for i in range(devices)])
    procs = [subprocess.Popen([sys.executable, "-c", CLAIMANT, str(tmp_path), listing, f"job {k}"],
                              stdout=subprocess.PIPE, text=True) for k in range(processes)]
    found = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        device, began, ended = json.loads(out.strip().splitlines()[-1])
        found.append((device, began, ended, out))
    return found


def overlap(a, b) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most intervals (start, end) that hold at one instant."""
    return max(sum(start <= s < end for start, end in intervals) for s, _ in intervals)


def test_concurrent_claimants_get_distinct_devices_and_the_rest_wait(tmp_path):
    found = held_intervals(tmp_path, devices=2, processes=3)
    assert {device for device, *_ in found} == {"GPU-00000000-fake", "GPU-00000001-fake"}
    assert all(a[0] != b[0] for a, b in combinations(found, 2) if overlap(a, b))
    assert most_at_once([(began, ended) for _, began, ended, _ in found]) == 2
    assert any("waiting for a GPU: all 2 are measuring" in out for *_, out in found)


def test_one_gpu_serialises_measurements(tmp_path):
    found = held_intervals(tmp_path, devices=1, processes=2)
    assert {device for device, *_ in found} == {"GPU-00000000-fake"}
    assert not overlap(found[0], found[1])


# ------------------------------------------------------------------ through Snakemake
@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    from pipeline_run import copy_checkout
    root = copy_checkout(tmp_path_factory.mktemp("checkout"))
    # the compile step's outputs first, so that only measure jobs remain for the runs below: each
    # study's config written by the workflow, its resources.csv by hand (as test_compile_dag.py
    # does; the fake measure step compiles nothing, and the compile itself is tested elsewhere)
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run([str(VENV_BIN / "snakemake"), "-c1", "--config", f"run_studies={','.join(STUDIES)}", "--",
                             *[f"build/config/{study}.json" for study in STUDIES]],
                            cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    for study in STUDIES:
        (root / "build" / "compile" / study).mkdir(parents=True)
        (root / "build" / "compile" / study / "resources.csv").write_text("kernel\n")
    return root


def measure_through_snakemake(root: Path, fake_gpus: int, *resources: str) -> list[dict]:
    """Run the measure jobs of STUDIES with ``fake_gpus`` GPUs visible; what each job saw."""
    for study in STUDIES:
        subprocess.run(["rm", "-rf", str(root / "build" / "measure" / LABEL / study)], check=True)
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": f"{root / '.test-packages'}{os.pathsep}{FAKE_GPUS_DIR}",
           "FAKE_GPUS": str(fake_gpus), "FAKE_MEASURE_S": "4"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    targets = [f"build/measure/{LABEL}/{study}" for study in STUDIES]
    result = subprocess.run([str(VENV_BIN / "snakemake"), *targets, "-c4", "--config", "measure=true",
                             f"results_label={LABEL}", f"run_studies={','.join(STUDIES)}", *resources],
                            cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(jobs_run(result)) == {"measure"}, jobs_run(result)      # nothing compiled again
    seen = []
    for study in STUDIES:
        job = json.loads((root / "build" / "measure" / LABEL / study / "device.json").read_text())
        job["provenance"] = json.loads((root / "build" / "measure" / LABEL / study / "provenance.json").read_text())
        seen.append(job)
    return seen


def concurrent(jobs: list[dict]) -> list[tuple[dict, dict]]:
    return [(a, b) for a, b in combinations(jobs, 2) if a["began_s"] < b["ended_s"] and b["began_s"] < a["ended_s"]]


@pytest.mark.slow
def test_two_gpus_measure_two_studies_at_once_each_on_its_own_device(checkout):
    jobs = measure_through_snakemake(checkout, 2, "--resources", "gpu=2")
    fakes = {"GPU-00000000-0000-0000-0000-00000000fa4e", "GPU-00000001-0000-0000-0000-00000000fa4e"}
    assert {job["cuda_visible_devices"] for job in jobs} == fakes
    pairs = concurrent(jobs)
    assert pairs, "with gpu=2, two measure jobs should have overlapped"
    assert all(a["cuda_visible_devices"] != b["cuda_visible_devices"] for a, b in pairs)
    assert most_at_once([(job["began_s"], job["ended_s"]) for job in jobs]) == 2
    for job in jobs:   # provenance names the device that ran the study
        device = job["provenance"]["device"]
        assert device["uuid"] == job["cuda_visible_devices"] == job["provenance"]["gpu"]["uuid"]
        assert device["pci_bus_id"] == job["provenance"]["gpu"]["pci_bus_id"]


@pytest.mark.slow
def test_one_gpu_measures_one_study_at_a_time(checkout):
    jobs = measure_through_snakemake(checkout, 1)     # gpu not limited: the lock serialises
    assert {job["cuda_visible_devices"] for job in jobs} == {"GPU-00000000-0000-0000-0000-00000000fa4e"}
    assert concurrent(jobs) == []
