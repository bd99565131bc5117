"""The paged_kv sweep without a GPU: config validation naming the key, the grid of sweep
configurations and the kernel variant each builds, and the decode consumers as a knob swept per
cell (the consumers themselves: tma_kernels.paged_kv.layouts; test_paged_kv_layouts.py)."""
from collections import Counter

import pytest
import yaml

from paged_kv_fixture import REPO, SM_COUNT
from tma_study import config as config_mod
from tma_study.studies import discover
from tma_study.studies.paged_kv import grid
from tma_study.studies.paged_kv.grid import GridError, sweep_configs


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
    # 4-token decodes (rows = tokens x group) differ in consumer warps; a TMA kernel comes twice,
    # with a box per chunk (pages smaller than a tile) and one box per tile (FA3's, pages of a tile
    # or more): 30 TMA kernels of each box, 60 cp.async ones
    variants = {c.variant() for c in configs}
    assert len(variants) == 120
    assert sorted(Counter((v.load_path, v.tma_box) for v in variants).items()) == [
        (("cp_async", "chunk"), 60), (("tma", "chunk"), 30), (("tma", "tile"), 30)]
    assert all(c.tma_box == ("tile" if c.page_size >= c.block_n else "chunk") for c in configs
               if c.load_path == "tma")
    assert {c.tma_box for c in configs if c.load_path == "cp_async"} == {"none"}
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
    """Every decode consumer of the ladder (tma_kernels.paged_kv.layouts) can be listed for every
    dtype: each runs at the dtypes it is built for (the bf16 cells skip the e4m3 ones), the wgmma
    consumers always on the wgmma's 64-row tiles (kq: 128 for e4m3 at head dim 64), the row_split
    one on 8 warps at the same CTAs a split as its single-warpgroup rung."""
    study_config["decode_consumers"] = list(grid.DECODE_CONSUMERS)
    configs = sweep_configs(study_config)
    decode = [c for c in configs if c.phase.name == "decode"]
    for layout in grid.DECODE_CONSUMERS:
        swept = [c for c in decode if c.score_layout == layout]
        assert swept and {c.dtype for c in swept} == set(grid.LAYOUTS[layout].dtypes), layout
        assert all(c.variant().layout is grid.LAYOUTS[layout] for c in swept)
    tiles = {(c.score_layout, c.block_n) for c in decode if (c.dtype, c.shape.head_dim) == ("e4m3", 64)}
    assert ("kq", 128) in tiles and ("kq_wgmma", 64) in tiles and ("kq_wgmma", 128) not in tiles
    assert all(c.block_n == 64 for c in decode if c.score_layout in grid.WGMMA_CONSUMERS)
    assert len({c.key for c in configs}) == len(configs)


def test_the_consumers_with_pv_on_wgmma_run_at_e4m3_only(study_config):
    """kq_wgmma_rs_lazy (e4m3 V to the tensor cores as it is) is skipped in bf16 cells, and sits
    beside every e4m3 kq_wgmma configuration with its rows and tiles."""
    layout = "kq_wgmma_rs_lazy"
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
        assert c.variant().layout.register_v and not twin.variant().layout.register_v


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
    study_config["decode_consumers"] = {"bf16": ["kq", "kq_wgmma"], "e4m3": ["kq", "kq_wgmma_rs_lazy"]}
    decode = [c for c in sweep_configs(study_config) if c.phase.name == "decode"]
    assert {c.score_layout for c in decode if c.dtype == "bf16"} == {"kq", "kq_wgmma"}
    assert {c.score_layout for c in decode if c.dtype == "e4m3"} == {"kq", "kq_wgmma_rs_lazy"}
    study_config["decode_consumers"] = {"bf16": ["kq"]}
    with pytest.raises(GridError, match=r"decode_consumers': no list for dtype\(s\) \['e4m3'\]"):
        sweep_configs(study_config)
