"""The paged_kv_tma probe on the CPU: the TMA load shapes (kernels/paged_kv/tma_boxes.py) compile
to the instructions they exist for, their tensor maps land the tile layout the consumers read, the
probe's configurations, and its analysis (aggregate, tables, macros, claims, paper section) on
synthetic raw data."""
import copy
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from raw_fixture import timed, valid_provenance
from tma_kernels.paged_kv.geometry import Variant, VariantError
from tma_kernels.paged_kv.kernel import SIGNATURE, make_attention_kernel
from tma_kernels.paged_kv.runner import check_page_size
from tma_kernels.paged_kv.tma_boxes import TMA_BOXES, box_rows, map_geometry, page_size_problem, slot_rows

from tma_study.studies import discover
from tma_study.studies.paged_kv_tma import STUDY
from tma_study.studies.paged_kv_tma.grid import check_config, probe_configs
from tma_study.studies.paged_kv_tma.macros import macros
from tma_study.studies.paged_kv_tma.tables import write_tables

REPO = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
DECODE = {"dtype": "bf16", "head_dim": 128, "load_path": "tma", "block_n": 64, "consumer_warps": 4,
          "stages": 2, "score_layout": "kq_wgmma", "rows_per_warp": 2}


@pytest.fixture
def study_config():
    return copy.deepcopy(CONFIG["studies"]["paged_kv_tma"])


# ---------------------------------------------------------------- kernels

@pytest.mark.parametrize("box, present, absent", [
    ("chunk", "UTMALDG.4D", "UTMALDG.5D"), ("tile", "UTMALDG.5D", "UTMALDG.4D"),
    ("tile_evict_last", "UTMALDG.5D", "UTMALDG.4D"),
    ("slot", "UTMALDG.4D", "UTMALDG.5D"), ("slot_lanes", "UTMALDG.4D", "UTMALDG.5D")])
def test_each_load_shape_compiles_to_its_tma_instruction(box, present, absent):
    from tma_study.harness.kernel_builds import kernel_cache
    from tma_study.studies.paged_kv.kernels import expected_sass
    variant = Variant(**DECODE, tma_box=box)
    compiled = kernel_cache().compile(variant.name, make_attention_kernel(variant), SIGNATURE)
    counts = compiled.opcode_counts()
    assert counts.get(present) and not counts.get(absent), {k: v for k, v in counts.items() if "UTMA" in k}
    assert present in expected_sass(variant)
    assert compiled.spill_store_bytes == 0 and compiled.stack_frame_bytes == 0 and "LDGSTS" not in compiled.sass
    boxes = [line for line in compiled.sass.splitlines() if "UTMALDG" in line]
    assert all(("desc[" in line) == (box == "tile_evict_last") for line in boxes)    # the L2 policy operand
    if box == "slot_lanes":     # the warp converges after lane 0 arms the barrier, before any box
        assert counts.get("WARPSYNC.ALL", 0) + counts.get("WARPSYNC.COLLECTIVE", 0) > 0


def test_the_default_shape_keeps_the_sweeps_kernel_names():
    assert Variant(**DECODE).name == Variant(**DECODE, tma_box="chunk").name
    assert Variant(**DECODE, tma_box="tile").name.endswith("_boxtile")
    with pytest.raises(VariantError, match="tma_box"):
        Variant(**{**DECODE, "load_path": "cp_async", "producer_warps": 4}, tma_box="tile")
    with pytest.raises(VariantError, match="tma_box"):
        Variant(**DECODE, tma_box="rows")


# ---------------------------------------------------------------- tensor maps

def tma_box_load(pool: np.ndarray, dims, strides, box, coords, element_bytes: int) -> np.ndarray:
    """What a tiled TMA load writes to shared memory before the swizzle, as the PTX ISA defines it:
    the box's elements in order, dimension 0 fastest, from global element offset
    sum(coord_i * stride_i) (stride_0 = one element)."""
    flat = pool.reshape(-1)
    element_strides = (1, *(s // element_bytes for s in strides))
    index = np.zeros(box[::-1], dtype=np.int64)
    for axis, (extent, start, stride, size) in enumerate(zip(box, coords, element_strides, dims)):
        steps = np.arange(extent) + start
        assert steps.max() < size, "the probe's boxes never leave the tensor"
        shape = [1] * len(box)
        shape[len(box) - 1 - axis] = extent                    # C order: dimension 0 last
        index = index + (steps * stride).reshape(shape)
    return flat[index].reshape(-1)


@pytest.mark.parametrize("dtype, head_dim, block_n", [("bf16", 128, 64), ("bf16", 256, 64), ("e4m3", 64, 64),
                                                      ("e4m3", 256, 64)])
@pytest.mark.parametrize("box", list(TMA_BOXES))
def test_every_load_shape_lands_the_chunked_tile(dtype, head_dim, block_n, box):
    """Boxes issued as the producer issues them land the tile layout of geometry.py (chunk c a dense
    (block_n, row_bytes) block), whatever the shape: same bytes for every shape."""
    variant = Variant(**{**DECODE, "dtype": dtype, "head_dim": head_dim, "block_n": block_n}, tma_box=box)
    page_size, kv_heads, pages, kv_head, page, first_row = 128, 3, 5, 2, 3, 64
    element = variant.element_bytes
    pool = np.arange(pages * page_size * kv_heads * head_dim, dtype=np.int64)
    dims, strides, box_dims = map_geometry(variant, page_size, kv_heads, pages)
    row_elements = variant.row_bytes // element
    tokens = pool.reshape(pages, page_size, kv_heads, head_dim)[page, first_row:first_row + block_n, kv_head]
    want = np.concatenate([tokens[:, c * row_elements:(c + 1) * row_elements].reshape(-1)
                           for c in range(variant.chunks)])
    got = np.empty_like(want)
    rows = box_rows(variant, page_size)
    box_elements = int(np.prod(box_dims))
    whole_tile = TMA_BOXES[box].whole_tile
    assert box_elements * element * (1 if whole_tile else variant.chunks) * (block_n // rows) \
        == variant.kv_tile_bytes                                  # the expect_tx bytes of a tile
    if whole_tile:
        got[:] = tma_box_load(pool, dims, strides, box_dims, (0, first_row, 0, kv_head, page), element)
    else:
        chunk_elements = block_n * row_elements
        for start in range(0, block_n, rows):
            for c in range(variant.chunks):
                landed = tma_box_load(pool, dims, strides, box_dims,
                                      (c * row_elements, kv_head, first_row + start, page), element)
                offset = c * chunk_elements + start * row_elements
                got[offset:offset + landed.size] = landed
    np.testing.assert_array_equal(got, want)


def test_tile_shape_needs_a_page_of_a_whole_tile():
    variant = Variant(**DECODE, tma_box="tile")
    assert page_size_problem(variant, 64) is None and page_size_problem(variant, 256) is None
    with pytest.raises(VariantError, match="page_size >= block_n"):
        check_page_size(variant, 32)
    slot = Variant(**DECODE, tma_box="slot")
    assert box_rows(slot, 256) == slot_rows(slot) == 8 and page_size_problem(slot, 16) is None


# ---------------------------------------------------------------- the probe's configurations

def test_probe_runs_every_point_with_both_paths_and_every_shape(study_config):
    configs = probe_configs(study_config)
    assert check_config(study_config, expand=True) == []
    points = {c.point for c in configs}
    assert len(points) == len(study_config["points"])
    per_cell = pd.DataFrame([{"point": c.point, "page": c.sweep.page_size, "producer": c.producer} for c in configs])
    for (_, page), cell in per_cell.groupby(["point", "page"]):
        want = {f"cp_async p{w}" for w in study_config["cp_async_producer_warps"]}
        want |= {f"tma {b}" for b in study_config["tma_boxes"] if not b.startswith("tile") or page >= 64}
        assert set(cell.producer) == want
    assert len({c.key for c in configs}) == len(configs)
    study_config["page_sizes"] = [32]
    assert not any(c.tma_box.startswith("tile") for c in probe_configs(study_config))


def test_check_config_names_the_point(study_config):
    study_config["points"][0]["shape"] = "gpt5"
    study_config["points"][1]["consumer"] = "kq_wgmma_rs_lazy"
    messages = check_config(study_config)
    assert any("points[0]" in m and "gpt5" in m for m in messages)
    assert any("points[1]" in m and "bf16" in m for m in messages)


# ---------------------------------------------------------------- analysis on synthetic data

READ_GBPS, COPY_GBPS = 4600.0, 4250.0


def synthetic_raw(folder: Path, study_config: dict) -> Path:
    """attention.csv, ceilings.csv, kernels.csv and provenance.json as measure.py writes them:
    cp.async at 92 % of the read ceiling, TMA shapes a little below."""
    from tma_study.studies.paged_kv.problem import timed_problem
    folder.mkdir(parents=True, exist_ok=True)
    slowdown = {"": 1.0, "chunk": 1.05, "tile": 1.01, "tile_evict_last": 1.015, "slot": 1.03, "slot_lanes": 1.02}
    rows = []
    for c in probe_configs(study_config):
        problem = timed_problem(c.sweep)
        kv_bytes, flops = problem.kv_bytes_read(), problem.flops()
        time_us = kv_bytes / (0.92 * READ_GBPS * 1e3) * slowdown[c.tma_box]
        rows.append({**c.columns(), "num_splits": 1, "split_rule": "fa3_wave_efficiency_over_resident_slots",
                     "split_reason": "synthetic", "grid_ctas": 256, "resident_slots": 264, "waves": 0.97,
                     "kernel": c.variant().name, "registers": 128, "local_bytes_per_thread": 0,
                     "resident_ctas_per_sm": 2, **timed(time_us), "bytes_moved": kv_bytes,
                     "gbps": kv_bytes / (time_us * 1e3), "flops": flops, "tflops": flops / (time_us * 1e6)})
    pd.DataFrame(rows).to_csv(folder / "attention.csv", index=False)
    ceilings = [{"ceiling": "d2d_copy", "bytes_moved": 2 << 30, "ctas_per_sm": 0,
                 **timed((2 << 30) / (COPY_GBPS * 1e3))}]
    for nbytes in sorted({r["bytes_moved"] for r in rows} | {1 << 30}):
        for ctas in study_config["read_ceiling_ctas_per_sm"]:
            gbps = READ_GBPS * (1 if nbytes == 1 << 30 else 0.98) * (1 - 0.01 * (ctas == 2))
            ceilings.append({"ceiling": "read_stream", "bytes_moved": nbytes, "ctas_per_sm": ctas,
                             **timed(nbytes / (gbps * 1e3))})
    frame = pd.DataFrame(ceilings)
    frame["gbps"] = frame.bytes_moved / (frame.time_us_median * 1e3)
    frame.to_csv(folder / "ceilings.csv", index=False)
    (folder / "provenance.json").write_text(json.dumps(valid_provenance(
        "paged_kv_tma", len(rows), config=study_config, gpu={"name": "synthetic test data"})))
    return folder


@pytest.fixture
def analysed(tmp_path, study_config):
    raw = synthetic_raw(tmp_path / "raw", study_config)
    STUDY.entry("aggregate")(raw, tmp_path / "derived")
    return tmp_path


def test_aggregate_holds_each_point_to_the_read_stream_and_its_roofline(analysed, study_config):
    points = pd.read_csv(analysed / "derived" / "points.csv")
    assert len(points) == len(study_config["points"])
    assert points.read_ceiling_gbps.iloc[0] == pytest.approx(READ_GBPS)
    assert points.read_over_copy.iloc[0] == pytest.approx(READ_GBPS / COPY_GBPS)
    assert points.fraction_of_read_ceiling.to_numpy() == pytest.approx(0.92)
    assert points.tma_over_cp_async.to_numpy() == pytest.approx(1 / 1.01)
    assert points.tile_over_chunk.to_numpy() == pytest.approx(1.05 / 1.01)
    assert (points.best_tma_box == "tile").all() and (points.bound == "memory").all()
    assert points.fraction_of_bound.to_numpy() == pytest.approx(0.92)
    producers = pd.read_csv(analysed / "derived" / "producers.csv")
    chunk = producers[producers.tma_box == "chunk"]
    assert chunk.over_cp_async.to_numpy() == pytest.approx(1 / 1.05)
    assert producers.same_launch_as_cp_async.all()


def test_tables_macros_and_paper_section(analysed):
    provenance = json.loads((analysed / "raw" / "provenance.json").read_text())
    tables = analysed / "tables"
    write_tables(analysed / "derived", provenance, tables)
    for name in STUDY.tables:
        assert "synthetic test data" in (tables / f"{name}.tex").read_text()
    found = macros(analysed / "derived", provenance)
    from tma_study.paper.macros import check_macros
    check_macros(found, "paged_kv_tma", prefix="pagedKvTma")
    section = (REPO / "paper" / "sections" / "studies" / "paged_kv_tma.tex").read_text()
    used = set(re.findall(r"\\(pagedKvTma[A-Za-z]+)", section))
    assert used and used <= set(found), sorted(used - set(found))


def test_every_claim_evaluates_on_synthetic_data(analysed, tmp_path):
    """Each claim reads columns that exist (PASS or FAIL, never NOT MEASURED) once data exist."""
    from tma_study.paper.claims import evaluate, load_claims
    results = tmp_path / "results"
    (results / "paged_kv_tma").mkdir(parents=True)
    (results / "paged_kv_tma" / "derived").symlink_to(analysed / "derived")
    claims = [c for c in load_claims(studies=discover()) if c.study == "paged_kv_tma"]
    assert len(claims) == 9                 # with the every-instance restatement (issue 45 item 6)
    for claim in claims:
        outcome = evaluate(claim, results)
        assert outcome.status in ("PASS", "FAIL"), (claim.id, outcome.reason)


def test_every_probe_map_follows_the_drivers_documented_rules(study_config):
    """Each TMA configuration's tensor map passes tensor_map.validate (the rules
    cuTensorMapEncodeTiled documents); the measure step also encodes each once before timing."""
    from tma_kernels import tensor_map
    from tma_kernels.paged_kv.runner import _RAW_DTYPE
    for config in probe_configs(study_config):
        variant = config.variant()
        if variant.load_path != "tma":
            continue
        s = config.sweep
        dims, strides, box = map_geometry(variant, s.page_size, s.shape.kv_heads, 4096)
        tensor_map.validate(tensor_map.TensorMapSpec(
            dtype=_RAW_DTYPE[variant.dtype], global_address=1 << 20, global_dims=dims, global_strides_bytes=strides,
            box_dims=box, swizzle=variant.tma_swizzle, l2_promotion_bytes=128))
