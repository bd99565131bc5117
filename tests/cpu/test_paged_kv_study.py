"""The paged_kv study without a GPU: config validation, the sweep grid, and the analysis
(aggregate -> tables -> figure) on synthetic raw data shaped like measure.py's output."""
import copy
import itertools
import json
import math
import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from raw_fixture import timed, untimed, valid_provenance
from tma_study import config as config_mod
from tma_study.harness.timing import Timing
from tma_study.report import figures
from tma_study.studies import discover
from tma_study.studies.paged_kv import STUDY, grid
from tma_study.studies.paged_kv.aggregate import aggregate
from tma_study.studies.paged_kv.grid import GridError, sweep_configs
from tma_study.studies.paged_kv.tables import write_tables

REPO = Path(__file__).resolve().parents[2]
SM_COUNT = 132
COPY_GBPS = 4000.0
SAME_BYTES_COPY_FRACTION = 0.9      # a copy of a decode point's K/V bytes runs at 90 % of the large copy


@pytest.fixture
def study_config():
    return copy.deepcopy(yaml.safe_load((REPO / "config" / "config.yaml").read_text())["studies"]["paged_kv"])


def rejection(section) -> str:
    full = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    full["studies"] = {"paged_kv": section}
    with pytest.raises(config_mod.ConfigError) as info:
        config_mod.validate(full, discover())
    return str(info.value)


def test_shipped_configs_are_valid():
    for name in ("config.yaml", "smoke.yaml"):
        loaded = config_mod.load(REPO / "config" / name, discover())
        assert sweep_configs(loaded["studies"]["paged_kv"])


def test_tma_page_below_16_is_rejected_naming_the_key(study_config):
    study_config["page_sizes"]["tma"] = [8, 16]
    assert "studies.paged_kv.page_sizes.tma[0]" in rejection(study_config)


def test_unknown_head_dim_is_rejected(study_config):
    study_config["shapes"]["odd"] = {"q_heads": 8, "kv_heads": 8, "head_dim": 96}
    message = rejection(study_config)
    assert "studies.paged_kv.shapes.odd.head_dim" in message and "96" in message


def test_grid_errors_name_the_key(study_config):
    study_config["shapes"]["bad"] = {"q_heads": 12, "kv_heads": 8, "head_dim": 128}
    with pytest.raises(GridError, match="shapes.bad"):
        sweep_configs(study_config)
    del study_config["shapes"]["bad"]
    study_config["phases"][0]["context"] = 8000
    with pytest.raises(GridError, match=r"phases\[0\].*multiple of the largest page size 256"):
        sweep_configs(study_config)


def test_grid_size_and_kernel_choices(study_config):
    study_config["decode_consumers"] = ["kq"]
    configs = sweep_configs(study_config)
    # decode page-size sweep: 2 phases x 5 shapes x 2 dtypes x (5 TMA + 7 cp.async pages x 2
    # producer-warp counts) x 2 stage counts (head dim 256 decodes with 32-row tiles, so 4
    # stages fit); prefill: 5 shapes x 2 dtypes x (5 + 7 x 2) at 2 stages; scaling: Llama-3-8B
    # x 2 dtypes at page 64: 5 decode points x (1 + 2) x 2 stages, 3 prefill points x (1 + 2)
    decode = 2 * 5 * 2 * (5 + 7 * 2) * 2
    prefill = 5 * 2 * (5 + 7 * 2)
    scaling = 5 * 2 * 3 * 2 + 3 * 2 * 3
    assert len(configs) == decode + prefill + scaling == 1028
    # decode kernels use the S^T = K Q^T consumer at 8 query rows a warp, so a shape's 1- and
    # 4-token decodes (rows = tokens x group) differ in consumer warps
    assert len({c.variant() for c in configs}) == 90
    assert {(c.phase.name, c.score_layout, c.rows_per_warp) for c in configs} == {
        ("decode", "kq", 8), ("prefill", "qk", 16)}
    # decode tiles: 64 rows, 128 for e4m3 at head dim 64 (8 KiB of K), 32 at head dim 256
    assert {(c.dtype, c.shape.head_dim, c.block_n) for c in configs if c.phase.name == "decode"} == {
        ("bf16", 64, 64), ("bf16", 128, 64), ("bf16", 256, 32),
        ("e4m3", 64, 128), ("e4m3", 128, 64), ("e4m3", 256, 32)}
    assert {c.block_n for c in configs if c.phase.name == "prefill"} == {64}
    decode = next(c for c in configs if c.shape.name == "mqa_8x256" and c.phase.seqlen_q == 4)
    # 32 sequences x 1 KV head x 1 query block = 32 CTAs a split; at 2 CTAs per SM (264 slots)
    # 7 splits fill 224 slots (0.848 of a wave, under 85 % of the best: 33 splits fill 2 waves);
    # 8 fill 256 (0.97)
    assert decode.consumer_warps == 4 and decode.ctas_per_split == 32
    assert decode.split(2, SM_COUNT).num_splits == 8
    assert all(c.split(3, SM_COUNT).num_splits == 1 for c in configs if c.phase.name == "prefill")
    prefill_256 = next(c for c in configs if c.phase.name == "prefill" and c.shape.name == "llama3_8b"
                       and c.page_size == 256 and c.dtype == "bf16")
    assert prefill_256.fa3().uses_tma



def test_decode_consumer_is_a_knob_swept_per_cell(study_config):
    # the shipped config: kq and kq_wgmma for bf16, kq, kq_wgmma_rs_lazy and its rowsplit form for e4m3
    assert study_config["decode_consumers"] == {"bf16": ["kq", "kq_wgmma"],
                                                "e4m3": ["kq", "kq_wgmma_rs_lazy", "kq_wgmma_rs_lazy_rowsplit"]}
    configs = sweep_configs(study_config)
    rowsplit = [c for c in configs if c.score_layout == "kq_wgmma_rs_lazy_rowsplit"]
    assert len(rowsplit) == 3 * 2 * (5 + 7 * 2)     # 3 shapes' 4-token points x 2 stages x page sizes
    configs = [c for c in configs if c.score_layout != "kq_wgmma_rs_lazy_rowsplit"]
    decode = [c for c in configs if c.phase.name == "decode"]
    split = [c for c in decode if c.score_layout in ("kq_wgmma", "kq_wgmma_rs_lazy")]
    kq = [c for c in decode if c.score_layout == "kq"]
    assert {c.dtype for c in split if c.score_layout == "kq_wgmma"} == {"bf16"}
    assert {c.dtype for c in split if c.score_layout == "kq_wgmma_rs_lazy"} == {"e4m3"}
    # a split consumer beside every kq configuration, except bf16 head dim 256 at 4 stages: its
    # 64-row tiles (a 16-token block per warp) do not fit 4 stages (2 phases x (5 TMA + 7 x 2 cp.async))
    assert len(kq) == 820 and len(split) == 820 - 2 * (5 + 7 * 2)
    assert not [c for c in split if (c.dtype, c.shape.head_dim, c.stages) == ("bf16", 256, 4)]
    assert ({c.key.rsplit("/", 1)[0] for c in split} <= {c.key.removesuffix("/kq") for c in kq})
    assert len({c.key for c in configs}) == len(configs) == 1028 + len(split)
    assert all(c.score_layout == "qk" and not c.key.endswith("qk") for c in configs if c.phase.name == "prefill")
    # 4 warps share each tile; the CTA's rows are the KV head's packed query rows as a power
    # of two from 8 to 32, each warp loading a quarter; tiles hold a 16-token block per warp
    rows = {(c.shape.name, c.phase.seqlen_q, c.rows_per_warp, c.block_n) for c in split}
    assert {(name, q, r) for name, q, r, _ in rows} == {
        ("llama3_8b", 1, 2), ("llama3_8b", 4, 4), ("llama3_70b", 1, 2), ("llama3_70b", 4, 8),
        ("mha_32x128", 1, 2), ("mha_32x128", 4, 2), ("mha_16x64", 1, 2), ("mha_16x64", 4, 2),
        ("mqa_8x256", 1, 2), ("mqa_8x256", 4, 8)}
    assert all(c.consumer_warps == 4 and c.block_n == 64 for c in split)     # the wgmma's M
    assert all(c.variant().score_layout == c.score_layout for c in decode)


def test_every_decode_consumer_can_be_swept(study_config):
    """kq_split and kq_wgmma_dual are out of the shipped sweep but still build: listed, they run
    beside the others, with their own tile rule (e4m3 at head dim 64: 128 rows for kq_split;
    the wgmma consumers: always the wgmma's 64) and warps (kq_wgmma_dual: 8, two groups of
    kq_wgmma's 4 over the same rows, so the same CTAs per split)."""
    layouts = ("kq", "kq_split", "kq_wgmma", "kq_wgmma_dual")
    study_config["decode_consumers"] = list(layouts)
    configs = sweep_configs(study_config)
    decode = [c for c in configs if c.phase.name == "decode"]
    by_layout = {layout: [c for c in decode if c.score_layout == layout] for layout in layouts}
    assert len(by_layout["kq_split"]) == len(by_layout["kq_wgmma"]) > 0
    tiles = {(c.score_layout, c.block_n) for c in decode if (c.dtype, c.shape.head_dim) == ("e4m3", 64)}
    assert ("kq_split", 128) in tiles and ("kq_wgmma", 64) in tiles and ("kq_wgmma", 128) not in tiles
    single = {c.key.removesuffix("/kq_wgmma"): c for c in by_layout["kq_wgmma"]}
    dual = by_layout["kq_wgmma_dual"]
    assert dual and all(c.consumer_warps == 8 and c.block_n == 64 for c in dual)
    for c in dual:          # every dual configuration has its single-warpgroup twin
        twin = single[c.key.removesuffix("/kq_wgmma_dual")]
        assert (c.rows_per_warp, c.ctas_per_split) == (twin.rows_per_warp, twin.ctas_per_split)
        assert c.variant().block_m == twin.variant().block_m
    assert len({c.key for c in configs}) == len(configs)


@pytest.mark.parametrize("layout", ["kq_wgmma_pv", "kq_wgmma_rs", "kq_wgmma_rs_dual", "kq_wgmma_rs_lazy"])
def test_the_consumers_with_pv_on_wgmma_run_at_e4m3_only(study_config, layout):
    """kq_wgmma_pv, kq_wgmma_rs and kq_wgmma_rs_dual (e4m3 V to the tensor cores as it is) are
    skipped in bf16 cells, and sit beside every e4m3 kq_wgmma configuration with its rows and tiles."""
    study_config["decode_consumers"] = ["kq", "kq_wgmma", layout]
    configs = sweep_configs(study_config)
    pv = [c for c in configs if c.score_layout == layout]
    e4m3_wgmma = {c.key.removesuffix("/kq_wgmma"): c for c in configs
                  if c.score_layout == "kq_wgmma" and c.dtype == "e4m3"}
    assert pv and all(c.dtype == "e4m3" for c in pv)
    assert {c.key.removesuffix(f"/{layout}") for c in pv} == set(e4m3_wgmma)
    for c in pv:
        twin = e4m3_wgmma[c.key.removesuffix(f"/{layout}")]
        assert (c.rows_per_warp, c.block_n, c.ctas_per_split) == (twin.rows_per_warp, twin.block_n, twin.ctas_per_split)
        assert c.variant().transposes_v == (layout == "kq_wgmma_pv")


def test_the_rowsplit_consumer_runs_where_each_group_has_rows(study_config):
    """kq_wgmma_rs_lazy_rowsplit: e4m3 only, and only at the decode points whose KV heads have 16 or
    more packed query rows (4 tokens of llama3_8b, llama3_70b and mqa_8x256); there beside every
    kq_wgmma_rs_lazy configuration, with the same CTA rows (so the same CTAs a split) over 8 warps."""
    layout = "kq_wgmma_rs_lazy_rowsplit"
    study_config["decode_consumers"] = ["kq", "kq_wgmma_rs_lazy", layout]
    configs = sweep_configs(study_config)
    rowsplit = [c for c in configs if c.score_layout == layout]
    assert {(c.dtype, c.shape.name, c.phase.seqlen_q) for c in rowsplit} == {
        ("e4m3", "llama3_8b", 4), ("e4m3", "llama3_70b", 4), ("e4m3", "mqa_8x256", 4)}
    single = {c.key.removesuffix("/kq_wgmma_rs_lazy"): c for c in configs if c.score_layout == "kq_wgmma_rs_lazy"}
    for c in rowsplit:
        twin = single[c.key.removesuffix(f"/{layout}")]
        variant = c.variant()
        assert (c.consumer_warps, c.rows_per_warp * 2, c.ctas_per_split) == (8, twin.rows_per_warp, twin.ctas_per_split)
        assert (variant.block_m, variant.group_m) == (twin.variant().block_m, twin.variant().block_m // 2)
    assert len(rowsplit) == len([c for c in single.values()
                                 if c.phase.seqlen_q * c.shape.group >= grid.ROWSPLIT_MIN_ROWS])


def test_the_sweep_and_the_kernel_name_the_same_consumers():
    """The analysis side (grid.py, no numba needed) lists the kernel's consumers by name: the
    lists must agree with tma_kernels.paged_kv.geometry's and with the config schema's enum."""
    from tma_kernels.paged_kv import geometry
    schema = yaml.safe_load((config_mod.REPO_ROOT / "workflow/schemas/studies/paged_kv.schema.yaml").read_text())
    assert schema["$defs"]["decode_consumer_list"]["items"]["enum"] == list(grid.DECODE_CONSUMERS)
    assert set(grid.DECODE_CONSUMERS) <= set(geometry.SCORE_LAYOUTS)
    assert grid.SPLIT_CONSUMERS == geometry.SPLIT_LAYOUTS
    assert grid.WGMMA_CONSUMERS == geometry.WGMMA_LAYOUTS
    assert grid.DECODE_DUAL_WARPS == geometry.DUAL_CONSUMER_WARPS


@pytest.mark.parametrize("consumers", [[], ["kq", "kq"], ["qk"], {"bf16": ["kq"], "e4m3": ["qk"]},
                                       {"bf16": ["kq"], "fp16": ["kq"]}, {}])
def test_decode_consumers_are_checked_naming_the_key(study_config, consumers):
    study_config["decode_consumers"] = consumers
    assert "studies.paged_kv.decode_consumers" in rejection(study_config)
    with pytest.raises(GridError, match="studies.paged_kv.decode_consumers"):
        sweep_configs(study_config)


def test_decode_consumers_may_differ_by_dtype(study_config):
    """A mapping from dtype to consumers sweeps each dtype's own; a dtype it leaves out is an error
    naming the key, before any GPU work."""
    study_config["decode_consumers"] = {"bf16": ["kq", "kq_wgmma"], "e4m3": ["kq", "kq_wgmma_rs"]}
    decode = [c for c in sweep_configs(study_config) if c.phase.name == "decode"]
    assert {c.score_layout for c in decode if c.dtype == "bf16"} == {"kq", "kq_wgmma"}
    assert {c.score_layout for c in decode if c.dtype == "e4m3"} == {"kq", "kq_wgmma_rs"}
    study_config["decode_consumers"] = {"bf16": ["kq"]}
    with pytest.raises(GridError, match=r"decode_consumers': no list for dtype\(s\) \['e4m3'\]"):
        sweep_configs(study_config)


NOT_TIMED = Timing.NO_SAMPLE
# a cell with no timed combination (all NaN): it must say "not measured", not vanish
# (shape, dtype, phase, batch, query tokens, context, page, path)
UNTIMED_CELL = ("llama3_8b", "e4m3", "decode", 1, 1, 8192, 64, "cp_async")
# a cell whose 2-stage row was not timed: its slower 4-stage row must be chosen
HALF_TIMED_CELL = ("mha_16x64", "bf16", "decode", 32, 4, 8192, 128, "tma")
# a bf16 cp.async decode cell whose fastest combination (2 stages, 1 producer warp) was not
# timed: the next fastest timed one (2 stages, 4 warps) must be chosen, never the NaN row
FAST_UNTIMED_CELL = ("llama3_70b", "bf16", "decode", 32, 1, 8192, 32, "cp_async")
ONE_WARP_FASTER = 0.95       # bf16 cp.async decode: 1 producer warp, more resident CTAs
ONE_WARP_SLOWER = 1.05       # e4m3 cp.async decode: 4 producer warps win


def synthetic_time(c) -> float:
    """TMA is 20 % faster from page 64 and 10 % slower below; 4 K/V stages cost 30 % except for
    e4m3 cp.async decode, where they save 10 %; in cp.async decode one producer warp (more
    resident CTAs) saves 5 % in bf16 and costs 5 % in e4m3, and in prefill it costs 5 %: the
    winners and chosen knobs are known."""
    base = 500.0 if c.phase.name == "decode" else 2000.0
    path = 0.8 if c.load_path == "tma" and c.page_size >= 64 else 1.1 if c.load_path == "tma" else 1.0
    deeper = 0.9 if (c.load_path, c.dtype, c.phase.name) == ("cp_async", "e4m3", "decode") else 1.3
    warps = 1.0
    if c.load_path == "cp_async" and c.producer_warps == 1:
        warps = ONE_WARP_FASTER if (c.dtype, c.phase.name) == ("bf16", "decode") else ONE_WARP_SLOWER
    return base * path * warps * (deeper if c.stages == 4 else 1.0)


def synthetic_resident_ctas(c) -> int:
    """2 CTAs per SM at 2 stages, 1 at 4; a 1-warp cp.async producer fits one more."""
    return (2 if c.stages == 2 else 1) + (1 if c.load_path == "cp_async" and c.producer_warps == 1 else 0)


def cell_of(c) -> tuple:
    return (c.shape.name, c.dtype, c.phase.name, c.phase.batch, c.phase.seqlen_q, c.phase.context, c.page_size,
            c.load_path)


def copy_ceiling(ceiling: str, bytes_moved: int, gbps: float, samples: int = 40) -> dict:
    """A ceilings.csv row measuring ``gbps`` over ``bytes_moved``."""
    t = timed(bytes_moved / (gbps * 1e3), samples)
    return {"ceiling": ceiling, "bytes_moved": bytes_moved, **t, "gbps": bytes_moved / (t["time_us_median"] * 1e3)}


def synthetic_raw(folder: Path, study_config) -> Path:
    """attention.csv / ceilings.csv / provenance.json with the columns measure.py writes."""
    folder.mkdir(parents=True)
    rows = []
    for c in sweep_configs(study_config):
        time = synthetic_time(c)
        if (cell_of(c) == UNTIMED_CELL or (cell_of(c) == HALF_TIMED_CELL and c.stages == 2)
                or (cell_of(c) == FAST_UNTIMED_CELL and (c.stages, c.producer_warps) == (2, 1))):
            time = float("nan")
        kv = 2 * c.phase.batch * c.phase.context * c.shape.kv_heads * c.shape.head_dim * (
            2 if c.dtype == "bf16" else 1)
        rows.append({**c.columns(), **c.split(synthetic_resident_ctas(c), SM_COUNT).columns(), "kernel": c.variant().name, "registers": 168,
                     "local_bytes_per_thread": 0, "resident_ctas_per_sm": synthetic_resident_ctas(c),
                     "launch_min_ctas_per_sm": 1, **(untimed() if math.isnan(time) else timed(time, relative_iqr=0.02)),
                     "bytes_moved": kv, "gbps": kv / (time * 1e3), "flops": 10**12, "tflops": 1e12 / (time * 1e6)})
    pd.DataFrame(rows).to_csv(folder / "attention.csv", index=False)
    ceilings = [copy_ceiling("d2d_copy", 2**31, COPY_GBPS)]
    decode_bytes = {r["bytes_moved"] for r in rows if r["phase"] == "decode"}
    ceilings += [copy_ceiling("d2d_copy_same_bytes", kv, SAME_BYTES_COPY_FRACTION * COPY_GBPS)
                 for kv in sorted(decode_bytes)]
    for shape in study_config["shapes"]:
        for batch in (32, 128):
            ceilings.append({**copy_ceiling("torch_sdpa_contiguous", 300_000_000, 3000.0), "shape": shape,
                             "seqlen_q": 1, "batch": batch, "context_tokens": 8192})
    pd.DataFrame(ceilings).to_csv(folder / "ceilings.csv", index=False)
    (folder / "provenance.json").write_text(json.dumps(valid_provenance(
        "paged_kv", len(rows), config=study_config, gpu={"name": "synthetic test data", "sm_count": SM_COUNT},
        tma_page_lookup="a tile ahead")))
    return folder


@pytest.fixture
def analysed(tmp_path, study_config):
    raw = synthetic_raw(tmp_path / "raw", study_config)
    aggregate(raw, tmp_path / "derived")
    return tmp_path


def test_aggregate_finds_the_known_winners(analysed):
    speedup = pd.read_csv(analysed / "derived" / "speedup.csv")
    half_timed = cell_rows(speedup.assign(load_path="tma"), HALF_TIMED_CELL).index
    both = speedup.dropna(subset=["tma_speedup"]).drop(half_timed)
    assert set(both[both.page_size >= 64].measured_winner) == {"tma"}
    assert set(both[both.page_size < 64].measured_winner) == {"cp_async"}
    e4m3_decode = (both.dtype == "e4m3") & (both.phase == "decode")
    bf16_decode = (both.dtype == "bf16") & (both.phase == "decode")
    assert np.allclose(both[(both.page_size >= 64) & ~e4m3_decode & ~bf16_decode].tma_speedup, 1.25)
    # bf16 cp.async decode runs at its 1-producer-warp time
    assert np.allclose(both[(both.page_size >= 64) & bf16_decode].tma_speedup, ONE_WARP_FASTER / 0.8)
    # only the 4-stage TMA row was timed there (1.3 x 0.8 of the cp.async time)
    assert speedup.loc[half_timed, "measured_winner"].tolist() == ["cp_async"]
    only = speedup[speedup.page_size < 16]
    assert set(only.measured_winner) == {"cp_async (only path)"} and only.fa3_agrees.all()
    # FA3 picks TMA only for prefill at pages that are multiples of its kBlockN: agrees there
    picked = speedup[speedup.fa3_load_path == "tma"]
    assert len(picked) and (picked.phase == "prefill").all() and picked.fa3_agrees.all()


def cell_rows(frame: pd.DataFrame, cell: tuple) -> pd.DataFrame:
    shape, dtype, phase, batch, seqlen_q, context, page, path = cell
    return frame[(frame["shape"] == shape) & (frame.dtype == dtype) & (frame.phase == phase)
                 & (frame.batch == batch) & (frame.seqlen_q == seqlen_q) & (frame.context_tokens == context)
                 & (frame.page_size == page) & (frame.load_path == path)]


def test_each_path_runs_at_its_best_stage_count(analysed):
    tuning = pd.read_csv(analysed / "derived" / "tuning.csv")
    odd = cell_rows(tuning, HALF_TIMED_CELL).index.union(cell_rows(tuning, FAST_UNTIMED_CELL).index)
    measured = tuning[tuning.status == "measured"].drop(odd)
    deeper_wins = (measured.load_path == "cp_async") & (measured.dtype == "e4m3") & (measured.phase == "decode")
    assert set(measured[deeper_wins].stages_chosen) == {4}
    assert set(measured[~deeper_wins].stages_chosen) == {2}
    assert set(measured[deeper_wins].kernel.str.contains("_s4_")) == {True}
    # distinct counts, whatever the number of producer-warp rows per stage count
    assert set(tuning[tuning.phase == "decode"].stages_swept) == {"2 4"}
    (half,) = cell_rows(tuning, HALF_TIMED_CELL).itertuples()
    assert half.status == "measured" and half.stages_chosen == 4 and pd.isna(half.time_us_s2_p1)
    assert half.resident_ctas_per_sm == 1 and half.producer_warps_chosen == 1
    speedup = pd.read_csv(analysed / "derived" / "speedup.csv")
    e4m3 = speedup[(speedup.dtype == "e4m3") & (speedup.phase == "decode") & (speedup.page_size >= 64)
                   & speedup.tma_speedup.notna()]
    assert np.allclose(e4m3.tma_speedup, 0.9 / 0.8) and set(e4m3.cp_async_stages) == {4}
    assert set(e4m3.tma_stages) == {2}


def test_each_path_runs_at_its_best_producer_warps(analysed):
    """cp.async sweeps 1 and 4 producer warps: in decode 1 wins in bf16 (more resident CTAs), 4
    in e4m3; in prefill 4 wins; TMA runs 1 warp, with nothing to choose."""
    tuning = pd.read_csv(analysed / "derived" / "tuning.csv")
    measured = tuning[tuning.status == "measured"].drop(cell_rows(tuning, FAST_UNTIMED_CELL).index)
    gather_decode = measured[(measured.load_path == "cp_async") & (measured.phase == "decode")]
    assert set(tuning[tuning.load_path == "cp_async"].producer_warps_swept) == {"1 4"}
    assert set(tuning[tuning.load_path == "tma"].producer_warps_swept) == {"1"}
    bf16, e4m3 = gather_decode[gather_decode.dtype == "bf16"], gather_decode[gather_decode.dtype == "e4m3"]
    assert set(bf16.producer_warps_chosen) == {1} and set(bf16.stages_chosen) == {2}
    assert set(bf16.kernel.str.endswith("_s2_p1_causal_kq8")) == {True} and set(bf16.producer_warps) == {1}
    assert set(bf16.resident_ctas_per_sm) == {3} and set(bf16.resident_ctas_per_sm_s2_p4) == {2}
    assert set(e4m3.producer_warps_chosen) == {4} and set(e4m3.stages_chosen) == {4}
    assert np.allclose(e4m3.time_us_s4_p1 / e4m3.time_us_s4_p4, ONE_WARP_SLOWER)
    assert set(measured[measured.load_path == "tma"].producer_warps_chosen) == {1}
    assert set(measured[(measured.load_path == "cp_async") & (measured.phase == "prefill")].producer_warps_chosen) \
        == {4}
    assert tuning[tuning.load_path == "tma"].time_us_s2_p4.isna().all()
    speedup = pd.read_csv(analysed / "derived" / "speedup.csv")
    decode = speedup[(speedup.phase == "decode") & speedup.tma_speedup.notna()]
    assert set(decode[decode.dtype == "e4m3"].cp_async_producer_warps) == {4}
    assert set(decode.tma_producer_warps) == {1}


def test_an_untimed_combination_never_wins(analysed):
    """The fastest combination of FAST_UNTIMED_CELL was not timed: the fastest timed one wins,
    and every downstream table carries its knobs and its time."""
    derived = analysed / "derived"
    (cell,) = cell_rows(pd.read_csv(derived / "tuning.csv"), FAST_UNTIMED_CELL).itertuples()
    assert cell.status == "measured" and pd.isna(cell.time_us_s2_p1)
    assert (cell.stages_chosen, cell.producer_warps_chosen) == (2, 4) and cell.kernel.endswith("_s2_p4_causal_kq8")
    assert cell.resident_ctas_per_sm == 2
    # the chosen kernel's launch: 32 x 8 CTAs a split, 2 per SM fit 256 of 264 slots unsplit
    assert (cell.num_splits, cell.split_rule) == (1, "fa3_wave_efficiency_over_resident_slots")
    assert cell.waves == pytest.approx(256 / 264)
    speedup = pd.read_csv(derived / "speedup.csv")
    (row,) = cell_rows(speedup.assign(load_path="cp_async"), FAST_UNTIMED_CELL).itertuples()
    assert row.cp_async_time_us == 500.0 and (row.cp_async_stages, row.cp_async_producer_warps) == (2, 4)
    # every other bf16 cp.async decode cell at this page ran at 1 warp, 5 % faster
    others = speedup[(speedup.dtype == "bf16") & (speedup.phase == "decode") & (speedup.page_size == 32)]
    assert set(others.drop(row.Index).cp_async_time_us) == {500.0 * ONE_WARP_FASTER}
    decode = pd.read_csv(derived / "decode.csv")
    assert set(decode[decode.best_load_path == "cp_async"].best_producer_warps.dropna()) <= {1, 4}
    assert {"best_stages", "best_producer_warps"} <= set(decode.columns)
    for name in ("prefill.csv", "scaling.csv"):
        frame = pd.read_csv(derived / name)
        assert frame.loc[frame.status == "measured", ["stages", "producer_warps"]].notna().all().all(), name


def test_a_cell_without_a_timed_row_says_not_measured(analysed):
    derived = analysed / "derived"
    (untimed,) = cell_rows(pd.read_csv(derived / "tuning.csv"), UNTIMED_CELL).itertuples()
    assert untimed.status.startswith("not measured: no valid cold sample") and pd.isna(untimed.stages_chosen)
    speedup = pd.read_csv(derived / "speedup.csv")
    (row,) = cell_rows(speedup.assign(load_path="cp_async"), UNTIMED_CELL).itertuples()
    assert row.measured_winner == "not measured: cp_async" and pd.isna(row.fa3_agrees)
    assert pd.isna(row.tma_speedup) and row.tma_stages == 2 and pd.isna(row.cp_async_producer_warps)
    assert pd.isna(untimed.producer_warps_chosen)
    agreement = pd.read_csv(derived / "fa3_agreement.csv").set_index(["dtype", "phase"])
    assert agreement.not_measured.to_dict() == {("bf16", "decode"): 0, ("bf16", "prefill"): 0,
                                                ("e4m3", "decode"): 1, ("e4m3", "prefill"): 0}
    scaling = pd.read_csv(derived / "scaling.csv")
    (missing,) = cell_rows(scaling[scaling.series == "decode_batch"], UNTIMED_CELL).itertuples()
    assert missing.status.startswith("not measured") and pd.isna(missing.stages) and pd.isna(missing.gbps)
    assert pd.isna(missing.producer_warps)


def test_decode_fraction_of_copy_and_bar(analysed):
    decode = pd.read_csv(analysed / "derived" / "decode.csv")
    row = decode[(decode["shape"] == "llama3_8b") & (decode.dtype == "bf16") & (decode.seqlen_q == 1)
                 & (decode.batch == 32) & (decode.context_tokens == 8192)].iloc[0]
    assert row.best_load_path == "tma" and row.best_stages == 2 and row.d2d_copy_gbps == COPY_GBPS
    assert row.best_producer_warps == 1
    assert row.fraction_of_d2d_copy == pytest.approx(row.best_gbps / COPY_GBPS)
    assert row.bar_applies and row.torch_sdpa_gbps == 3000.0
    assert row.same_bytes_copy_gbps == SAME_BYTES_COPY_FRACTION * COPY_GBPS
    assert row.fraction_of_same_bytes_copy == pytest.approx(row.best_gbps / row.same_bytes_copy_gbps)
    scaling_points = decode[(decode["shape"] == "llama3_8b") & (decode.seqlen_q == 1)]
    assert sorted(set(zip(scaling_points.batch, scaling_points.context_tokens))) == [
        (1, 8192), (8, 8192), (32, 1024), (32, 8192), (32, 32768), (128, 8192)]


def test_scaling_series(analysed):
    scaling = pd.read_csv(analysed / "derived" / "scaling.csv")
    assert set(scaling["shape"]) == {"llama3_8b"} and set(scaling.page_size) == {64}
    for dtype, path in itertools.product(("bf16", "e4m3"), ("tma", "cp_async")):
        mine = scaling[(scaling.dtype == dtype) & (scaling.load_path == path)]
        batch = mine[mine.series == "decode_batch"]
        assert sorted(batch.batch) == [1, 8, 32, 128] and set(batch.context_tokens) == {8192}
        context = mine[mine.series == "decode_context"]
        assert sorted(context.context_tokens) == [1024, 8192, 32768] and set(context.batch) == {32}
        prefill = mine[mine.series == "prefill"]
        assert sorted(zip(prefill.batch, prefill.seqlen_q, prefill.context_tokens)) == [
            (1, 4096, 16384), (2, 2048, 4096), (4, 1024, 8192), (8, 512, 1024)]
        assert prefill.tflops.notna().all() and prefill.torch_sdpa_gbps.isna().all()
    decode = scaling[scaling.phase == "decode"]
    assert (decode.d2d_copy_gbps == COPY_GBPS).all()
    sdpa = decode.dropna(subset=["torch_sdpa_gbps"])
    assert set(zip(sdpa.batch, sdpa.context_tokens)) == {(32, 8192), (128, 8192)}
    tma = decode[(decode.load_path == "tma") & (decode.status == "measured")]
    assert np.allclose(tma.fraction_of_d2d_copy, tma.gbps / COPY_GBPS) and set(tma.stages) == {2}
    speedup = pd.read_csv(analysed / "derived" / "speedup.csv")
    scaling_points = speedup[~speedup.page_sweep]
    assert set(scaling_points.page_size) == {64} and len(scaling_points) == 2 * 8
    assert speedup[speedup.page_sweep].page_size.nunique() == 7


def render(analysed, monkeypatch, name: str):
    drawn = []
    monkeypatch.setattr(figures, "finish", lambda fig, provenance, pdf, **layout: drawn.append(fig))
    snakemake = SimpleNamespace(params=SimpleNamespace(derived=str(analysed / "derived")),
                                input=SimpleNamespace(provenance=str(analysed / "raw" / "provenance.json")),
                                output=SimpleNamespace(pdf=str(analysed / f"{name}.pdf")))
    runpy.run_path(str(REPO / "notebooks" / f"{name}.py"), init_globals={"snakemake": snakemake})
    (fig,) = drawn
    return fig


def test_tables_and_figures(analysed, monkeypatch):
    tables = analysed / "tables"
    write_tables(analysed / "derived", json.loads((analysed / "raw" / "provenance.json").read_text()), tables)
    for name in STUDY.tables:
        assert (tables / f"{name}.md").read_text().count("|") > 10
        assert "synthetic test data" in (tables / f"{name}.tex").read_text()
    scaling = (tables / "paged_kv_scaling.md").read_text()
    assert "not measured" in scaling and "TFLOP/s (2 st., 4 pw)" in scaling and "GB/s (4 st., 4 pw)" in scaling
    assert "GB/s (2 st., 1 pw)" in scaling       # bf16 cp.async decode: 1 producer warp won
    tuning = (tables / "paged_kv_tuning.md").read_text()
    assert "median time 4/2 stages" in tuning and "median time 4/1 producer warps" in tuning
    assert "CTAs/SM at 2 st., 1 pw" in tuning
    # llama3_8b e4m3 decode q1 cp.async: 4 stages and 4 warps won every measured cell (one of
    # the 12 is UNTIMED_CELL); the ratios: time at 4 / at 2 stages, at 4 / at 1 producer warps
    row = next(line for line in tuning.splitlines() if line.startswith("| decode q1 | llama3_8b | e4m3 | cp_async |"))
    assert "| 12 | 1 | 4: 11 | 4: 11 | 4 st., 4 pw: 11 | 0.90 | 0.95 |" in row
    row = next(line for line in tuning.splitlines() if line.startswith("| decode q1 | llama3_8b | bf16 | cp_async |"))
    assert "| 12 | 0 | 2: 12 | 1: 12 | 2 st., 1 pw: 12 | 1.30 | 1.05 |" in row
    speedup = (tables / "paged_kv_speedup.md").read_text()
    assert "cp.async producer warps" in speedup
    decode = (tables / "paged_kv_decode.md").read_text()
    assert "st., " in decode and " pw" in decode
    # the speedup figure: only the page-size sweep's three points, not the scaling points
    fig = render(analysed, monkeypatch, "paged_kv_speedup")
    assert len(fig.axes) == 3 and all(ax.lines for ax in fig.axes)
    assert all(len(line.get_xdata()) > 1 for ax in fig.axes for line in ax.lines[:1])
    fig = render(analysed, monkeypatch, "paged_kv_scaling")
    by_batch, by_context, prefill = fig.axes
    assert "context 8192" in by_batch.get_title() and "batch 32" in by_context.get_title()
    xs = {tuple(line.get_xdata()) for line in by_batch.lines if len(line.get_xdata()) > 1}
    assert (1, 8, 32, 128) in xs
    assert {tuple(line.get_xdata()) for line in by_context.lines if len(line.get_xdata()) > 1} >= {
        (1024, 8192, 32768)}
    assert len(prefill.patches) == 4 * 4 and prefill.get_legend() is not None and fig.legends
    fig = render(analysed, monkeypatch, "paged_kv_roofline")
    roofline, key = fig.axes
    bar_points = pd.read_csv(analysed / "derived" / "decode.csv").query("bar_applies")
    # per point: the line to its bound, the bound, the point; the copy and 70 % lines
    assert len(roofline.lines) == 3 * len(bar_points) + 2 and key.get_legend() is not None


def test_a_cells_configurations_share_one_reduced_check_problem(study_config):
    """measure._check_case makes each cell's reduced inputs and float64 reference once (fresh
    per cell), and its cache holds every page size of a (shape, dtype, phase) group, the span
    over which sweep_configs comes back to a cell (TMA pages first, then cp.async pages)."""
    from tma_study.studies.paged_kv import measure

    configs = sweep_configs(study_config)
    groups = itertools.groupby(configs, key=lambda c: (c.shape, c.dtype, c.phase))
    assert max(len({c.page_size for c in group}) for _, group in groups) <= measure.CHECK_CELLS_CACHED
    decode = next(c for c in configs if c.phase.name == "decode" and c.page_size == 64
                  and c.shape.name == "mha_16x64")
    measure._check_case.cache_clear()
    first = measure._check_case(decode.phase, decode.shape, 64, decode.dtype)
    assert measure._check_case(decode.phase, decode.shape, 64, decode.dtype) is first
    other = measure._check_case(decode.phase, decode.shape, 32, decode.dtype)
    assert other[1].problem.page_size == 32 and other is not first
    _, inputs, want = first
    assert inputs.problem.page_size == 64 and want.out.shape == want.tolerance.shape
    measure._check_case.cache_clear()
