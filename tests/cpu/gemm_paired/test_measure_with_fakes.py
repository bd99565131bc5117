"""CPU: the gemm_paired measure step end to end on a fake GPU (fake torch, events, library and
NVML): the order it runs things in, and that what it writes passes the raw-data schema and the
analysis. The fake GPU's time advances with every event query (helpers/gpu_fakes.FakeEvent)."""
import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gpu_fakes import CountingMonitor, FakeEvent, FakeStream, FakeTensor, fake_torch
from tma_study import gpu as gpu_mod
from tma_study.harness import provenance, raw_data
from tma_study.gemm_lib import variants as gemm_variants
from tma_study.studies.gemm_paired import STUDY, candidates as candidates_mod
from tma_study.studies.gemm_paired import measure as measure_mod

REPO = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
WORK_MS = {"cublas": 1.4}             # per launch; candidates 1.45 ms


def test_measure_runs_checks_first_then_bursts_then_sustained(tmp_path, monkeypatch):
    study = copy.deepcopy(CONFIG["studies"]["gemm_paired"])
    study["sustained"]["warmup_s"] = 0.01
    study["bursts"]["pairs"], study["sustained"]["pairs"] = 4, 4
    stream, log = FakeStream(), []
    stream.cuda_stream = 0
    FakeEvent.clock[0] = 0.0

    class Problem:
        def __init__(self, torch, shape, dtype, workspace_bytes):
            self.a, self.b, self.d, self.workspace = FakeTensor(), FakeTensor(), FakeTensor(), FakeTensor()

        def refill(self):
            log.append("refill")

        def cublas(self):
            stream.pending_work += WORK_MS["cublas"]

    class Handle:
        def __init__(self, name):
            self.name = name

        def require(self, m, n, k):
            pass

        def workspace_bytes(self, m, n, k):
            return 0

        def run(self, *args):
            stream.pending_work += 1.45

        def info(self):
            return {"name": self.name, "stages": 4}

    class Library:
        def __init__(self, path):
            pass

        def variant(self, name):
            return Handle(name)

    names = candidates_mod.choose(pd.read_csv(candidates_mod.reference_csv(study)), study)
    compile_dir = tmp_path / "compile"
    compile_dir.mkdir()
    pd.DataFrame([{**gemm_variants.parse_name(n).columns(), "registers": 168, "spill_store_bytes": 0,
                   "spill_load_bytes": 0} for n in names]).to_csv(compile_dir / "resources.csv", index=False)
    gpu = gpu_mod.GpuInfo("NVIDIA H200", (9, 0), 132, 62914560, 232448, 233472, 1980000, 3201000, 6016,
                          150109880320, 13000, pci_bus_id="0000:19:00.0")
    monkeypatch.setattr(measure_mod.gemm_measure, "_torch", lambda: fake_torch(stream, log))
    monkeypatch.setattr(measure_mod.gemm_measure, "Problem", Problem)
    monkeypatch.setattr(measure_mod.gemm_measure, "check_sampled",
                        lambda torch, a, b, d, correctness, name: log.append(f"check {name}") or {"max_error_over_bound": 0.1})
    monkeypatch.setattr(measure_mod, "GemmLibrary", Library)
    monkeypatch.setattr(measure_mod, "Monitor", lambda bus: CountingMonitor())
    monkeypatch.setattr(measure_mod.gpu_mod, "detect", lambda: gpu)
    monkeypatch.setattr(provenance, "nvidia_smi_clocks", lambda: None)
    monkeypatch.setattr(measure_mod.time, "sleep", lambda s: log.append(f"sleep {s}"))

    out = tmp_path / "raw"
    measure_mod.measure(study, {}, out, compile_dir=compile_dir)

    checks = [entry for entry in log if entry.startswith("check")]
    assert checks == ["check cublas", *(f"check {n}" for n in names)]
    cooldowns = [entry for entry in log if entry == f"sleep {study['bursts']['cooldown_s']}"]
    assert len(cooldowns) == study["bursts"]["pairs"] * len(names)
    raw = raw_data.load(STUDY, out)                       # the schema holds for what measure wrote
    samples = raw["samples.csv"]
    assert len(samples) == 2 * len(names) * 8 and raw.provenance["configurations"] == len(samples)
    cublas = samples[samples.implementation == "cublas"]
    assert cublas.time_us.values == pytest.approx(1e3 * WORK_MS["cublas"])
    assert set(raw.provenance["states"]) == {"burst", "sustained"}
    assert [c["variant"] for c in raw.provenance["candidates"]] == names      # with their reference TFLOP/s
    STUDY.entry("aggregate")(out, tmp_path / "derived")
    ratios = pd.read_csv(tmp_path / "derived" / "ratios.csv")
    assert ratios.fraction_of_cublas_median.values == pytest.approx(1.4 / 1.45)
