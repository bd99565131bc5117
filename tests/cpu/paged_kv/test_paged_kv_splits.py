"""The decode split count: FA3's wave-efficiency rule (hopper/heuristics.h
num_splits_heuristic, commit in fa3_rule.FA3_COMMIT) over the compiled kernel's resident CTA
slots, and measure.py launching and recording the split chosen for the runner it times."""
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from tma_study.config import REPO_ROOT
from tma_study.harness import timing
from tma_study.studies.paged_kv import measure
from tma_study.studies.paged_kv.grid import sweep_configs
from tma_study.studies.paged_kv.splits import (
    RULE_DECODE,
    RULE_PREFILL,
    wave_efficiency_splits,
)

SM_COUNT = 132
LLAMA3_8B_B32 = 32 * 8          # Llama-3-8B decode, batch 32: 32 sequences x 8 KV heads x 1 query block
TILES_8K = 8192 // 64           # 128 KV tiles of 64 rows


@pytest.mark.parametrize("ctas_per_sm, splits, waves", [
    (2, 1, 256 / 264),          # 264 slots: 256 CTAs >= 0.8 x 264, one wave unsplit
    (3, 3, 768 / 396),          # 396 slots: 1 and 2 splits run 0.65 and 1.29 waves (eff 0.65), 3: 1.94 (0.97)
    (4, 2, 512 / 528),          # 528 slots: 2 splits fill 0.97 of one wave
])
def test_llama3_8b_batch32_decode(ctas_per_sm, splits, waves):
    slots = ctas_per_sm * SM_COUNT
    chosen, _ = wave_efficiency_splits(LLAMA3_8B_B32, slots, TILES_8K)
    assert chosen == splits
    assert LLAMA3_8B_B32 * chosen / slots == pytest.approx(waves)


def test_the_rule_picks_the_smallest_count_within_85_percent_of_the_best():
    # FA3's comment: 48 CTAs on 108 SMs, 2 splits (efficiency 0.89) beat 3 (0.67)
    assert wave_efficiency_splits(48, 108, 128)[0] == 2
    # 8 CTAs a split on 396 slots: 42 splits run 0.848 of a wave (under 0.85), 43 run 0.869
    assert wave_efficiency_splits(8, 396, 128)[0] == 43


def test_few_kv_tiles_or_a_nearly_full_grid_do_not_split():
    assert wave_efficiency_splits(8, 396, 4)[0] == 1                   # num_n_blocks <= 4
    assert wave_efficiency_splits(8, 396, 5)[0] == 5                   # 5 tiles: capped at one split each
    assert wave_efficiency_splits(317, 396, 128)[0] == 1               # 317 >= 0.8 x 396
    # 316 < 316.8: 1 to 4 splits each end 0.80 into a wave, 5 run 3.99 waves (efficiency 0.997)
    assert wave_efficiency_splits(316, 396, 128)[0] == 5
    assert wave_efficiency_splits(1000, 264, 128)[0] == 1              # several waves already


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="slots 0"):
        wave_efficiency_splits(8, 0, 128)


@pytest.fixture(scope="module")
def configs():
    study = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())["studies"]["paged_kv"]
    return sweep_configs(study)


def bf16_llama_decode(configs, load_path, producer_warps):
    return next(c for c in configs if (c.shape.name, c.dtype, c.phase.name, c.phase.batch, c.phase.seqlen_q,
                                       c.page_size, c.load_path, c.stages, c.producer_warps)
                == ("llama3_8b", "bf16", "decode", 32, 1, 64, load_path, 2, producer_warps))


def test_config_split_uses_the_given_residency(configs):
    tma = bf16_llama_decode(configs, "tma", 1)
    assert tma.ctas_per_split == LLAMA3_8B_B32 and tma.kv_tiles == TILES_8K
    three = tma.split(3, SM_COUNT)
    assert (three.num_splits, three.rule, three.grid_ctas, three.slots) == (3, RULE_DECODE, 768, 396)
    assert three.columns()["waves"] == pytest.approx(768 / 396)
    assert tma.split(2, SM_COUNT).num_splits == 1
    prefill = next(c for c in configs if c.phase.name == "prefill")
    assert (prefill.split(3, SM_COUNT).num_splits, prefill.split(3, SM_COUNT).rule) == (1, RULE_PREFILL)
    with pytest.raises(ValueError, match="0 CTAs per SM"):
        tma.split(0, SM_COUNT)


class FakeRunner:
    """A compiled kernel with fixed registers and static shared memory (so a fixed residency
    by CUDA's occupancy rule); records the split count of every launch."""

    def __init__(self, variant, registers):
        self.variant = variant
        self.kernel = SimpleNamespace(get_regs_per_thread=lambda: registers,
                                      get_shared_mem_per_block=lambda: 96,
                                      get_local_mem_per_thread=lambda: 0)
        self.launched = []

    def launch(self, device, splits, stream=0):
        self.launched.append(splits)


class FakeDevice:
    def __init__(self, splits):
        self.max_splits = splits

    def poison_outputs(self):
        pass

    def output(self, splits):
        assert splits == self.max_splits
        return np.zeros(4, np.float32)


class FakePools:
    group = "one group"

    def __init__(self):
        self.outputs, self.asked = {}, []

    def device_problem(self, config, splits):
        self.asked.append(splits)
        return FakeDevice(splits)


@pytest.mark.parametrize("load_path, producer_warps, registers, ctas_per_sm, splits", [
    ("tma", 1, 168, 3, 3),          # bf16 TMA decode: shared-memory bound at 3 CTAs per SM
    ("cp_async", 4, 168, 2, 1),     # bf16 cp.async, 4 producer warps: 2 per SM, one wave unsplit
])
def test_the_case_launches_and_records_the_runners_split(configs, monkeypatch, load_path, producer_warps,
                                                         registers, ctas_per_sm, splits):
    config = bf16_llama_decode(configs, load_path, producer_warps)
    runner = FakeRunner(config.variant(), registers)
    assert measure.resident_ctas(runner) == ctas_per_sm
    checked = []
    monkeypatch.setattr(measure, "check_against_reference", lambda r, c, s: checked.append((r, c, s)))
    monkeypatch.setattr("numba.cuda.synchronize", lambda: None)
    pools = FakePools()
    split, case = measure._attention_case(config, runner, pools, SM_COUNT)
    assert isinstance(case, timing.TimedCase)
    assert split == config.split(ctas_per_sm, SM_COUNT) and split.num_splits == splits
    case.check()
    case.launch(0)
    assert checked == [(runner, config, splits)]
    assert pools.asked == [splits] and runner.launched == [splits, splits]
    assert list(pools.outputs) == [("one group", config.page_size, splits, config.score_layout)]



class CountingPools(FakePools):
    """Each device problem's full-size output differs from every earlier one."""

    def device_problem(self, config, splits):
        device = super().device_problem(config, splits)
        value = float(len(self.asked))
        device.output = lambda n: np.full(4, value, np.float32)
        return device


def test_full_size_outputs_are_compared_within_one_consumer(configs, monkeypatch):
    """kq and kq_wgmma sum in different orders: their outputs are not held to bit identity;
    two kernels of one consumer at the same page size and split count are."""
    kq = bf16_llama_decode(configs, "tma", 1)
    split = dataclasses.replace(kq, decode_consumer="kq_wgmma")
    assert (kq.ctas_per_split, kq.kv_tiles) == (split.ctas_per_split, split.kv_tiles)   # same split count
    monkeypatch.setattr(measure, "check_against_reference", lambda r, c, s: None)
    monkeypatch.setattr(measure, "resident_ctas", lambda runner: 3)
    monkeypatch.setattr("numba.cuda.synchronize", lambda: None)
    pools = CountingPools()
    for config in (kq, split):
        measure._attention_case(config, FakeRunner(config.variant(), 168), pools, SM_COUNT)[1].check()
    _, again = measure._attention_case(kq, FakeRunner(kq.variant(), 168), pools, SM_COUNT)
    with pytest.raises(timing.CorrectnessError, match="differs from another kq kernel"):
        again.check()
