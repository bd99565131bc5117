"""Synthetic raw data of the paged_kv study, shaped like measure.py's output, for the CPU tests
(tests/cpu/paged_kv/) and the paper tier's (paper_fixture.py): the sweep of a study config with
known winners, a cell never timed, one half timed, and a fastest combination left untimed."""
import json
import math
from pathlib import Path

import pandas as pd
import yaml

from raw_fixture import timed, untimed, valid_provenance
from tma_study.harness.timing import Timing
from tma_study.studies.paged_kv.grid import sweep_configs

REPO = Path(__file__).resolve().parents[3]
SM_COUNT = 132
COPY_GBPS = 4000.0
SAME_BYTES_COPY_FRACTION = 0.9      # a copy of a decode point's K/V bytes runs at 90 % of the large copy


def shipped_study_config() -> dict:
    """config/config.yaml's studies.paged_kv (a fresh copy each call)."""
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())["studies"]["paged_kv"]


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
