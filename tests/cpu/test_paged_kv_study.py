"""The paged_kv study without a GPU: config validation, the sweep grid, and the analysis
(aggregate -> tables -> figure) on synthetic raw data shaped like measure.py's output."""
import copy
import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from tma_study import config as config_mod
from tma_study.report import figures
from tma_study.studies import discover
from tma_study.studies.paged_kv import STUDY
from tma_study.studies.paged_kv.aggregate import aggregate
from tma_study.studies.paged_kv.grid import GridError, sweep_configs
from tma_study.studies.paged_kv.tables import write_tables

REPO = Path(__file__).resolve().parents[2]
SM_COUNT = 132
COPY_GBPS = 4000.0


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
    configs = sweep_configs(study_config)
    # page-size sweep: 5 shapes x 2 dtypes x 3 phases x (5 TMA + 7 cp.async page sizes) x stages
    # (decode 2 and 4, less bf16 head_dim 256 at 4, which does not fit in shared memory);
    # scaling: Llama-3-8B x 2 dtypes x 8 phases x 2 paths at page 64 (decode also at 4 stages)
    sweep = 2 * 5 * 2 * 12 * 2 - 2 * 12 * 1 + 5 * 2 * 12
    scaling = 2 * 5 * 2 * 2 + 2 * 3 * 2
    assert len(configs) == sweep + scaling == 628
    assert len({c.variant() for c in configs}) == 48
    decode = next(c for c in configs if c.shape.name == "mqa_8x256" and c.phase.seqlen_q == 4)
    assert decode.consumer_warps == 2 and decode.num_splits(SM_COUNT) == 9
    assert all(c.num_splits(SM_COUNT) == 1 for c in configs if c.phase.name == "prefill")
    prefill_256 = next(c for c in configs if c.phase.name == "prefill" and c.shape.name == "llama3_8b"
                       and c.page_size == 256 and c.dtype == "bf16")
    assert prefill_256.fa3().uses_tma


def synthetic_raw(folder: Path, study_config) -> Path:
    """attention.csv / ceilings.csv / provenance.json as measure.py writes them; TMA is 20 %
    faster from page 64 and 10 % slower below, so the winners are known."""
    folder.mkdir(parents=True)
    rows = []
    for c in sweep_configs(study_config):
        base = 500.0 if c.phase.name == "decode" else 2000.0
        time = base * (0.8 if c.load_path == "tma" and c.page_size >= 64 else
                       1.1 if c.load_path == "tma" else 1.0)
        kv = 2 * c.phase.batch * c.phase.context * c.shape.kv_heads * c.shape.head_dim * (
            2 if c.dtype == "bf16" else 1)
        rows.append({**c.columns(SM_COUNT), "time_us_median": time, "time_us_q1": 0.99 * time,
                     "time_us_q3": 1.01 * time, "bytes_moved": kv, "gbps": kv / (time * 1e3),
                     "flops": 1e12, "tflops": 1e12 / (time * 1e6)})
    pd.DataFrame(rows).to_csv(folder / "attention.csv", index=False)
    ceilings = [{"ceiling": "d2d_copy", "bytes_moved": 2**31, "gbps": COPY_GBPS, "time_us_median": 537.0}]
    for shape in study_config["shapes"]:
        ceilings.append({"ceiling": "torch_sdpa_contiguous", "shape": shape, "seqlen_q": 1, "batch": 32,
                         "context_tokens": 8192, "gbps": 3000.0, "time_us_median": 100.0})
    pd.DataFrame(ceilings).to_csv(folder / "ceilings.csv", index=False)
    (folder / "provenance.json").write_text(json.dumps({
        "gpu": {"name": "synthetic test data", "sm_count": SM_COUNT}, "finished_utc": "2026-01-01T00:00:00",
        "source_sha256": "0" * 64}))
    return folder


@pytest.fixture
def analysed(tmp_path, study_config):
    raw = synthetic_raw(tmp_path / "raw", study_config)
    aggregate(raw, tmp_path / "derived")
    return tmp_path


def test_aggregate_finds_the_known_winners(analysed):
    speedup = pd.read_csv(analysed / "derived" / "speedup.csv")
    both = speedup.dropna(subset=["tma_speedup"])
    assert set(both[both.page_size >= 64].measured_winner) == {"tma"}
    assert set(both[both.page_size < 64].measured_winner) == {"cp_async"}
    assert np.allclose(both[both.page_size >= 64].tma_speedup, 1.25)
    only = speedup[speedup.page_size < 16]
    assert set(only.measured_winner) == {"cp_async (only path)"} and only.fa3_agrees.all()
    # FA3 picks TMA only for prefill at pages that are multiples of its kBlockN: agrees there
    picked = speedup[speedup.fa3_load_path == "tma"]
    assert len(picked) and (picked.phase == "prefill").all() and picked.fa3_agrees.all()


def test_decode_fraction_of_copy_and_bar(analysed):
    decode = pd.read_csv(analysed / "derived" / "decode.csv")
    row = decode[(decode["shape"] == "llama3_8b") & (decode.dtype == "bf16") & (decode.seqlen_q == 1)].iloc[0]
    assert row.best_load_path == "tma" and row.d2d_copy_gbps == COPY_GBPS
    assert row.fraction_of_d2d_copy == pytest.approx(row.best_gbps / COPY_GBPS)
    assert row.bar_applies and row.torch_sdpa_gbps == 3000.0


def test_tables_and_figure(analysed, monkeypatch):
    tables = analysed / "tables"
    write_tables(analysed / "derived", json.loads((analysed / "raw" / "provenance.json").read_text()), tables)
    for name in STUDY.tables:
        assert (tables / f"{name}.md").read_text().count("|") > 10
        assert "synthetic test data" in (tables / f"{name}.tex").read_text()
    drawn = []
    monkeypatch.setattr(figures, "finish", lambda fig, provenance, pdf: drawn.append(fig))
    snakemake = SimpleNamespace(params=SimpleNamespace(derived=str(analysed / "derived")),
                                input=SimpleNamespace(provenance=str(analysed / "raw" / "provenance.json")),
                                output=SimpleNamespace(pdf=str(analysed / "f.pdf")))
    runpy.run_path(str(REPO / "notebooks" / "paged_kv_speedup.py"), init_globals={"snakemake": snakemake})
    (fig,) = drawn
    assert len(fig.axes) == 3 and all(ax.lines for ax in fig.axes)
