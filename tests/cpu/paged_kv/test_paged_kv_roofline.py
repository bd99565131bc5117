"""decode.csv's roofline: a decode point's arithmetic per K/V byte against the same run's copy
rate and the best prefill TFLOP/s of its shape and dtype (aggregate.decode_table), the copy of
as many bytes as the point reads beside it, the facts the paper draws from them
(facts.math_bound) and the decode table's columns."""
import pandas as pd
import pytest

from tma_study.studies.paged_kv import facts
from tma_study.studies.paged_kv.aggregate import MEASURED, decode_table
from tma_study.studies.paged_kv.tables import decode_display

COPY_GBPS = 4000.0
KV_BYTES = 1e9


def _row(shape, dtype, phase, seqlen_q, gbps=None, flops=None, tflops=None, batch=32, status=MEASURED):
    return {"shape": shape, "q_heads": 64, "kv_heads": 8, "head_dim": 128, "dtype": dtype, "phase": phase,
            "batch": batch, "seqlen_q": seqlen_q, "context_tokens": 8192, "page_size": 64,
            "load_path": "cp_async", "stages": 2, "producer_warps": 1, "status": status, "gbps": gbps,
            "flops": flops, "bytes_moved": KV_BYTES, "tflops": tflops}


@pytest.fixture
def decode():
    best = pd.DataFrame([
        # 64 flop per byte: at prefill's 150 TFLOP/s K/V could be read at 2344 GB/s, under the copy rate
        _row("llama3_70b", "e4m3", "decode", 4, gbps=2300.0, flops=64 * KV_BYTES),
        _row("llama3_70b", "e4m3", "decode", 1, gbps=3400.0, flops=16 * KV_BYTES),
        _row("llama3_70b", "e4m3", "prefill", 2048, tflops=150.0),
        _row("llama3_70b", "e4m3", "prefill", 1024, tflops=120.0),       # the best prefill point counts
        # no prefill measured for this shape: no bound from it
        _row("mqa_8x256", "bf16", "decode", 4, gbps=2600.0, flops=32 * KV_BYTES),
        _row("mqa_8x256", "bf16", "prefill", 2048, tflops=None, status="not measured: no sample"),
    ])
    ceilings = pd.DataFrame([{"ceiling": "d2d_copy", "bytes_moved": 2**31, "gbps": COPY_GBPS},
                             {"ceiling": "d2d_copy_same_bytes", "bytes_moved": KV_BYTES, "gbps": 3500.0},
                             {"ceiling": "d2d_copy_same_bytes", "bytes_moved": 2 * KV_BYTES, "gbps": 3800.0}])
    return decode_table(best, ceilings).set_index(["shape", "dtype", "seqlen_q"])


def test_a_point_whose_math_outweighs_the_copy_is_bound_by_prefill_tflops(decode):
    row = decode.loc[("llama3_70b", "e4m3", 4)]
    assert row.flops_per_kv_byte == 64 and row.prefill_tflops == 150.0
    assert row.prefill_rate_gbps == pytest.approx(150e3 / 64)
    assert row.bound == "prefill_tflops" and row.bound_gbps == pytest.approx(150e3 / 64)
    assert row.fraction_of_bound == pytest.approx(2300.0 / (150e3 / 64))
    assert row.fraction_of_d2d_copy == pytest.approx(2300.0 / COPY_GBPS)      # the bar is unchanged


def test_a_point_with_little_math_per_byte_is_bound_by_the_copy(decode):
    row = decode.loc[("llama3_70b", "e4m3", 1)]
    assert row.bound == "copy" and row.bound_gbps == COPY_GBPS
    assert row.fraction_of_bound == pytest.approx(row.fraction_of_d2d_copy)


def test_an_unmeasured_point_has_no_bound():
    best = pd.DataFrame([_row("llama3_70b", "e4m3", "decode", 4, status="not measured: no sample"),
                         _row("llama3_70b", "e4m3", "prefill", 2048, tflops=150.0)])
    (row,) = decode_table(best, pd.DataFrame([{"ceiling": "d2d_copy", "bytes_moved": 2**31,
                                                "gbps": COPY_GBPS}])).itertuples()
    assert row.bound == "not measured" and pd.isna(row.bound_gbps) and pd.isna(row.fraction_of_bound)


def test_no_prefill_rate_leaves_the_copy_as_the_bound(decode):
    row = decode.loc[("mqa_8x256", "bf16", 4)]
    assert pd.isna(row.prefill_tflops) and pd.isna(row.prefill_rate_gbps)
    assert row.bound == "copy" and row.bound_gbps == COPY_GBPS


def test_the_copy_of_the_same_bytes_is_context(decode):
    row = decode.loc[("llama3_70b", "e4m3", 1)]
    assert row.same_bytes_copy_gbps == 3500.0 and row.fraction_of_same_bytes_copy == pytest.approx(3400 / 3500)
    assert row.fraction_of_d2d_copy == pytest.approx(3400 / COPY_GBPS)        # the bar's rate stays the large copy


def test_math_bound_facts_and_table(decode):
    frame = decode.reset_index()
    bound = facts.math_bound(frame)
    assert (bound.points, bound.missed) == (1, 1)
    assert bound.bound_max_fraction_of_copy == pytest.approx(150e3 / 64 / COPY_GBPS)
    assert bound.fraction_of_bound_min == bound.fraction_of_bound_max == pytest.approx(2300.0 * 64 / 150e3)
    assert bound.flops_per_kv_byte_min == 64
    assert (bound.above, bound.above_wgmma) == (0, 0)      # 2300 GB/s is under its 2344 GB/s bound
    faster = frame.assign(best_gbps=frame.best_gbps.where(frame.bound != "prefill_tflops", 2500.0),
                          best_score_layout="kq_wgmma")
    faster["fraction_of_bound"] = faster.best_gbps / faster.bound_gbps
    assert (facts.math_bound(faster).above, facts.math_bound(faster).above_wgmma) == (1, 1)
    shown = decode_display(frame).set_index(["shape", "dtype", "phase"])
    assert shown.loc[("llama3_70b", "e4m3", "decode q4 b32 ctx8192"), "bound"] == "prefill math, 2344 GB/s"
    assert shown.loc[("llama3_70b", "e4m3", "decode q1 b32 ctx8192"), "% of same-size copy"] == "97.1"
    named = decode_display(frame.assign(best_score_layout="kq_wgmma_rs_lazy_rowsplit")).best   # its consumer too
    assert len(named) and named.str.endswith(", page 64, 2 st., 1 pw, kq_wgmma_rs_lazy_rowsplit").all(), named
    assert facts.math_bound(frame.drop(columns=["bound"])) is None       # data before the roofline
    same = facts.same_bytes_copy(frame)        # three points in the bar; two (2300, 2600 GB/s) miss it
    assert (same.points, same.missed) == (3, 2)
    assert same.copy_fraction_min == same.copy_fraction_max == 3500.0 / COPY_GBPS
    assert same.missed_fraction_min == pytest.approx(2300.0 / 3500.0)
    assert same.missed_fraction_max == pytest.approx(2600.0 / 3500.0)
    assert facts.same_bytes_copy(frame.drop(columns=["same_bytes_copy_gbps"])) is None


def test_measure_times_a_copy_of_every_decode_points_bytes():
    """measure.py's same-size copies: one per distinct K/V byte count of the configured decode
    points and L2 state (the run's, and nvbench's flush alone), each moving (read + write)
    exactly those bytes; nothing is allocated before its check."""
    import yaml

    from tma_study.config import REPO_ROOT
    from tma_study.studies.paged_kv import ceilings
    from tma_study.studies.paged_kv.grid import sweep_configs

    configs = sweep_configs(yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())["studies"]["paged_kv"])
    wanted = {2 * c.phase.batch * c.phase.context * c.shape.kv_heads * c.shape.head_dim
              * (2 if c.dtype == "bf16" else 1) for c in configs if c.phase.name == "decode"}
    cases = ceilings.same_bytes_copy_cases(configs)
    by_ceiling = {}
    for columns, case in cases:
        by_ceiling.setdefault(columns["ceiling"], []).append((columns["bytes_moved"], case.l2_after_flush))
    assert set(by_ceiling) == {"d2d_copy_same_bytes", "d2d_copy_same_bytes_dirty_l2"}
    assert sorted(by_ceiling["d2d_copy_same_bytes"]) == [(b, None) for b in sorted(wanted)]        # the run's state
    assert sorted(by_ceiling["d2d_copy_same_bytes_dirty_l2"]) == [(b, "dirty") for b in sorted(wanted)]
    assert all(case.bytes_read + case.bytes_written == columns["bytes_moved"] for columns, case in cases)
    # the two states of one size copy the same buffers: one dict in both closures, one per size
    buffers = {}
    for columns, case in cases:
        (state,) = [c.cell_contents for c in case.check.__closure__ if c.cell_contents == {}]
        buffers.setdefault(columns["bytes_moved"], set()).add(id(state))
    assert all(len(ids) == 1 for ids in buffers.values())
    assert len({next(iter(ids)) for ids in buffers.values()}) == len(wanted)
    assert len({case.key for _, case in cases}) == len(cases)
