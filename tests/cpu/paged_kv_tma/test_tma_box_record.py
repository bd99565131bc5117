"""One record per TMA load shape (tma_kernels.paged_kv.tma_boxes.TMA_BOXES): the raw-data schema's
enum, the config schema's, the SASS the compile step checks, the aggregate's shapes and the paged_kv
sweep's page-size rule all read it or are bound to it here. Pure Python: compiles nothing."""
from pathlib import Path

import pytest
import yaml
from tma_kernels.paged_kv.geometry import Variant
from tma_kernels.paged_kv.tma_boxes import (
    DEFAULT_TMA_BOX,
    FA3_TMA_BOX,
    NO_TMA_BOX,
    RAW_TMA_BOX_VALUES,
    TMA_BOXES,
    page_size_problem,
    sweep_tma_box,
)

from tma_study.studies.paged_kv.kernels import expected_sass
from tma_study.studies.paged_kv_tma import aggregate

REPO = Path(__file__).resolve().parents[3]
DECODE = {"dtype": "bf16", "head_dim": 128, "load_path": "tma", "block_n": 64, "consumer_warps": 4,
          "stages": 2, "score_layout": "kq_wgmma", "rows_per_warp": 2}


def test_the_raw_data_schema_enum_is_the_record():
    schema = yaml.safe_load((REPO / "src/tma_study/studies/paged_kv_tma/raw_schema.yaml").read_text())
    enum = schema["files"]["attention.csv"]["columns"]["tma_box"]["values"]
    assert tuple(enum) == RAW_TMA_BOX_VALUES == (NO_TMA_BOX, *TMA_BOXES)


def test_the_config_schema_enum_and_the_aggregate_are_the_record():
    schema = yaml.safe_load((REPO / "workflow/schemas/studies/paged_kv_tma.schema.yaml").read_text())
    assert tuple(schema["properties"]["tma_boxes"]["items"]["enum"]) == tuple(TMA_BOXES)
    assert aggregate.TMA_BOXES == tuple(TMA_BOXES)


@pytest.mark.parametrize("name", list(TMA_BOXES))
def test_the_compile_steps_sass_check_is_the_records_rank(name):
    box = TMA_BOXES[name]
    assert box.expected_sass == (f"UTMALDG.{box.rank}D",)
    assert set(box.expected_sass) <= set(expected_sass(Variant(**DECODE, tma_box=name)))


@pytest.mark.parametrize("page_size", [16, 32, 64, 128])
def test_the_page_size_rule_is_the_records(page_size):
    """A whole-tile box needs the page to hold the tile; the paged_kv sweep picks FA3's box only there."""
    from tma_study.studies.paged_kv import grid
    for name, box in TMA_BOXES.items():
        variant = Variant(**DECODE, tma_box=name)
        refused = page_size_problem(variant, page_size)
        assert box.loads_page(page_size, variant.block_n) or refused is not None
    expected = FA3_TMA_BOX if page_size >= DECODE["block_n"] else DEFAULT_TMA_BOX
    assert sweep_tma_box(page_size, DECODE["block_n"]) == expected
    assert grid.sweep_tma_box is sweep_tma_box and grid.NO_TMA_BOX == NO_TMA_BOX
