"""CPU: the gemm_cluster measure step end to end on a fake GPU (fake torch, events, library and
NVML): per shape every configuration is checked before anything is timed, then the warm-up, then
the rounds in the plan's order; what it writes passes the raw-data schema and the analysis, and
each configuration's time is the one the fake library gave it."""
import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gpu_fakes import CountingMonitor, FakeEvent, FakeStream, FakeTensor, fake_torch
from tma_study import gpu as gpu_mod
from tma_study.harness import provenance, raw_data
from tma_study.gemm_lib import variants as gemm_variants
from tma_study.gemm_lib import cluster_configs as configs
from tma_study.studies.gemm_cluster import STUDY, schedule
from tma_study.studies.gemm_cluster import measure as measure_mod

REPO = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def work_ms(variant: str, swizzle: int, raster: str) -> float:
    """The fake GPU's time per launch: 2x1 clusters 10 % faster, swizzle 2 another 5 %."""
    time = 1.0 * (0.9 if variant.endswith("_c2x1") else 1.0)
    return time * (0.95 if swizzle == 2 else 1.0)


def test_measure_checks_then_warms_up_then_runs_the_rounds(tmp_path, monkeypatch):
    study = copy.deepcopy(CONFIG["studies"]["gemm_cluster"])
    study.update(sizes=[4096, 8192], dtypes=["bf16"], clusters=[[1, 1], [2, 1]], swizzles=[1, 2], rounds=3,
                 warmup_s=0.01, families=study["families"][:2])
    stream, log = FakeStream(), []
    stream.cuda_stream = 7
    FakeEvent.clock[0] = 0.0

    class Problem:
        def __init__(self, torch, shape, dtype, workspace_bytes):
            log.append(f"problem {shape.m}")
            self.a, self.b, self.d, self.workspace = FakeTensor(), FakeTensor(), FakeTensor(), FakeTensor()

        def refill(self):
            pass

        def release(self):
            log.append("release")

    class Handle:
        def __init__(self, name):
            self.name = name

        def require(self, m, n, k):
            pass

        def workspace_bytes(self, m, n, k):
            return 0

        def run_scheduled(self, a, b, d, m, n, k, ws, ws_bytes, on_stream, swizzle, raster):
            if on_stream == 0:
                log.append(f"checked {m} {self.name}/swizzle{swizzle}/{raster}")
            else:
                stream.pending_work += work_ms(self.name, swizzle, raster)

        def info(self):
            return {"name": self.name, "stages": 4}

    class Library:
        def __init__(self, path):
            pass

        def variant(self, name):
            return Handle(name)

    def preheat(run_once, synchronize, seconds):
        log.append("warm-up")
        run_once()
        return {"seconds": seconds, "launches": 1}

    names = [v.name for v in configs.variants(study)]
    compile_dir = tmp_path / "compile"
    compile_dir.mkdir()
    pd.DataFrame([{**gemm_variants.parse_name(n).columns(), "registers": 168, "spill_store_bytes": 0,
                   "spill_load_bytes": 0} for n in names]).to_csv(compile_dir / "resources.csv", index=False)
    gpu = gpu_mod.GpuInfo("NVIDIA H200", (9, 0), 132, 62914560, 232448, 233472, 1980000, 3201000, 6016,
                          150109880320, 13000, pci_bus_id="0000:19:00.0")
    monkeypatch.setattr(measure_mod.gemm_measure, "_torch", lambda: fake_torch(stream, log))
    monkeypatch.setattr(measure_mod.gemm_measure, "Problem", Problem)
    monkeypatch.setattr(measure_mod.gemm_measure, "check_sampled",
                        lambda torch, a, b, d, correctness, name: {"max_error_over_bound": 0.1})
    monkeypatch.setattr(measure_mod.gemm_protocol, "preheat", preheat)
    monkeypatch.setattr(measure_mod, "GemmLibrary", Library)
    monkeypatch.setattr(measure_mod, "Monitor", lambda bus: CountingMonitor())
    monkeypatch.setattr(measure_mod.gpu_mod, "detect", lambda: gpu)
    monkeypatch.setattr(provenance, "nvidia_smi_clocks", lambda: None)

    out = tmp_path / "raw"
    measure_mod.measure(study, {}, out, compile_dir=compile_dir)

    per_shape = len(configs.configurations(study, "bf16"))
    events = [e for e in log if e.startswith(("problem", "checked", "warm-up", "release"))]
    for size, block in zip(study["sizes"], (events[: per_shape + 3], events[per_shape + 3:])):
        assert block[0] == f"problem {size}" and block[-2:] == ["warm-up", "release"]
        assert sorted(block[1:-2]) == sorted(f"checked {size} {c.key}" for c in configs.configurations(study, "bf16"))
    raw = raw_data.load(STUDY, out)                       # the schema holds for what measure wrote
    samples = raw["samples.csv"]
    assert len(samples) == 2 * per_shape * study["rounds"] == raw.provenance["configurations"]
    for size in study["sizes"]:                           # run in the plan's order, round by round
        ran = samples[samples["size"] == size].sort_values("t_s")
        planned = [s for r in schedule.plan(study, schedule.Shape(size, "bf16")) for s in r]
        assert ran.variant.tolist() == [s.configuration.variant for s in planned]
        assert ran.swizzle.tolist() == [s.configuration.swizzle for s in planned]
    expected = [work_ms(r.variant, r.swizzle, r.raster_order) * 1e3 for r in samples.itertuples()]
    assert samples.time_us.tolist() == pytest.approx(expected)
    assert set(raw.provenance["shapes"]) == {"4096/bf16", "8192/bf16"}
    assert len(raw.provenance["correctness"]) == 2 * per_shape
    STUDY.entry("aggregate")(out, tmp_path / "derived")
    gains = pd.read_csv(tmp_path / "derived" / "gains.csv")
    assert gains.default_gain.values == pytest.approx(1 / 0.9)
    assert gains.fair_gain.values == pytest.approx(1 / 0.9) and (gains.one_order_gain.values == pytest.approx(1 / 0.95))
