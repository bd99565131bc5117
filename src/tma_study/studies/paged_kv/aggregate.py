"""Derived tables of the paged_kv study, from attention.csv and ceilings.csv.

attention.csv holds one row per (point, page size, load path, K/V ring stages, producer
warps, decode consumer): each load path has two tuning knobs, the ring depth and (cp.async
only; TMA's producer is one warp) the number of warps gathering K/V, and decode a third, the
consumer (``score_layout``, one of tma_kernels.paged_kv.layouts.DECODE_CONSUMERS; grid.py). Every comparison below uses each
path at its own best combination of them (the lowest median time among the combinations
measured for that cell), as measurement.md asks ("each mechanism gets its best
configuration from a sweep of its own knobs"). A cell with no timed row (every sample
discarded: NaN times) is kept, marked "not measured", and never wins; an untimed
combination never wins either.

- ``tuning.csv``: per (point, page size, load path): the stage and producer-warp counts
  swept, the time and resident CTAs per SM at each combination (columns ``time_us_s{stages}_p{warps}``,
  ``resident_ctas_per_sm_s{stages}_p{warps}``, the faster consumer's where several ran,
  blank where a path did not run that combination); the consumers swept
  (``score_layout_swept``) and each one's best time over the other knobs
  (``time_us_{consumer}``); the chosen counts (``stages_chosen``, ``producer_warps_chosen``) and the
  chosen kernel (name, registers, local bytes per thread, resident CTAs, launch bounds, KV
  tile rows, consumer (``score_layout``) and warps) and its launch's KV splits (``num_splits``; with
  ``split_rule`` and ``waves`` where measure.py recorded them).
- ``speedup.csv``: per (point, page size): the TMA and cp.async times at their best knobs
  (``{path}_stages``, ``{path}_producer_warps``) where both ran, TMA's speedup (cp.async
  time / TMA time), the measured winner (a tie when the two medians are within each
  other's interquartile spread), FA3's choice for the same
  call and whether they agree; ``page_sweep`` marks points measured at more than one page
  size (the page-size sweep, as opposed to the one-page batch/context scaling points).
- ``decode.csv``: per decode point, the better path (with its page size, stages,
  producer warps and consumer: ``best_*``; and each consumer's own best rate,
  ``best_{consumer}_gbps``, where the run swept several) and its K/V read rate as a fraction of the
  same run's device-to-device copy rate (read + write bytes per second), next to torch
  SDPA on a contiguous cache, and whether it meets the issue's bar (>= 70 % at contexts
  >= 8K with batch >= 32). Beside it, a roofline from the same run: the point's arithmetic
  per K/V byte (``flops_per_kv_byte``), the best prefill TFLOP/s of the same shape and dtype
  (``prefill_tflops``: the rate this kernel family's mma.sync math is seen to reach, not a
  hardware peak), the K/V rate that math rate allows (``prefill_rate_gbps`` = prefill
  TFLOP/s / flops per byte), the lower of it and the copy rate (``bound_gbps``, with
  ``bound`` naming which) and the better path's rate as a fraction of it
  (``fraction_of_bound``). A point whose bound is ``prefill_tflops`` cannot reach the copy
  rate unless its decode math runs faster than the kernel family's prefill does, which the
  kq_wgmma consumer's S^T (on wgmma, not mma.sync) can: there ``fraction_of_bound`` may
  exceed 1. And, for
  context, ``same_bytes_copy_gbps``: the same run's copy moving as many bytes as the point
  reads (a short transfer's launch and ramp included), with ``fraction_of_same_bytes_copy``;
  NaN in data measured before that ceiling was.
- ``prefill.csv``: TFLOP/s of each path (best knobs) per prefill configuration.
- ``scaling.csv``: the batch/context scaling series at the scaling points' shape and page
  size: decode K/V GB/s of each path vs batch (at a fixed context) and vs context (at a
  fixed batch), with the copy rate and torch SDPA; prefill TFLOP/s per prefill point.
- ``fa3_agreement.csv``: per (dtype, phase): configurations, agreements, disagreements
  (``rule_baselines.csv``: FA3's rule beside the trivial baselines, baselines.py).
- ``l2_state.csv``: per byte count copied in both L2 states (harness.l2_state): the same-bytes
  copy timed in the run's state (``clean_*``, ceiling ``d2d_copy_same_bytes``) and after
  nvbench's flush alone (``dirty_*``, ``d2d_copy_same_bytes_dirty_l2``): median times, GB/s
  and samples of each, the time ratio ``dirty_over_clean_time`` and ``dirty_extra_us`` (the
  dirty time minus the clean one: the write-back of the flush's dirty lines inside the timed
  region). No rows in data measured before the harness recorded the L2 state.
- ``matched.csv``, ``matched_summary.csv``: TMA against cp.async with the same producer, one
  warp (matched.py).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.atomic import atomic_write_text

from .grid import DECODE_CONSUMERS
from .baselines import rule_baselines
from .matched import matched_summary, matched_table, with_tma_box

POINT = ["shape", "q_heads", "kv_heads", "head_dim", "dtype", "phase", "batch", "seqlen_q",
         "context_tokens"]
CELL = POINT + ["page_size", "load_path"]
KERNEL_COLUMNS = ["kernel", "registers", "local_bytes_per_thread", "resident_ctas_per_sm",
                  "launch_min_ctas_per_sm"]
TILE_COLUMNS = ["block_n", "consumer_warps", "producer_warps"]   # the chosen kernel's tile and warps
# the chosen kernel's launch: KV splits and waves of resident slots (splits.py); data measured
# before splits were chosen per kernel have num_splits only
SPLIT_COLUMNS = ["num_splits", "split_rule", "waves"]
# the chosen kernel's consumer (grid.SweepConfig.score_layout); data measured before the
# decode consumer had S^T = K Q^T lack them (every kernel was "qk", 16 rows per warp)
CONSUMER_COLUMNS = ["score_layout", "rows_per_warp"]
KNOBS = ["stages", "producer_warps"]      # each load path's tuning knobs, swept per cell (grid.py)
MEASURED = "measured"
NOT_MEASURED = "not measured"
DECODE_BAR_FRACTION = 0.70
DECODE_BAR_MIN_CONTEXT = 8192
DECODE_BAR_MIN_BATCH = 32
SAME_BYTES_COPY = "d2d_copy_same_bytes"      # ceilings.csv: a copy moving a decode point's K/V bytes
SAME_BYTES_COPY_DIRTY_L2 = "d2d_copy_same_bytes_dirty_l2"   # the same after nvbench's flush alone
L2_STATE_COLUMNS = ["bytes_moved", "clean_time_us", "dirty_time_us", "clean_gbps", "dirty_gbps",
                    "dirty_over_clean_time", "dirty_extra_us", "clean_samples", "dirty_samples",
                    "clean_of_largest_clean", "dirty_of_largest_clean"]
SCALING_COLUMNS = ["series", *POINT, "page_size", "load_path", "status", *KNOBS, "time_us_median",
                   "gbps", "tflops", *KERNEL_COLUMNS, "d2d_copy_gbps", "fraction_of_d2d_copy",
                   "torch_sdpa_gbps"]


def _require(frame: pd.DataFrame, columns: list[str], file: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{file} lacks columns {missing}: it is not paged_kv measure.py's output "
                         "(measured before K/V stages and kernel columns were recorded?)")


def _not_measured_reason(cell: pd.DataFrame) -> str:
    reasons = sorted({str(s) for s in cell.get("timing_status", pd.Series(dtype=object)).dropna()
                      if str(s) != "ok"})
    text = "; ".join(r.removeprefix(NOT_MEASURED).lstrip(": ") for r in reasons)
    return f"{NOT_MEASURED}: {text}" if text else f"{NOT_MEASURED}: no time recorded"


def knob_label(stages: int, producer_warps: int) -> str:
    """The tuning combination's label in tuning.csv's column names: 's4_p1' is 4 K/V stages
    filled by 1 producer warp."""
    return f"s{int(stages)}_p{int(producer_warps)}"


def _fastest(rows: pd.DataFrame):
    """The row of ``rows`` with the lowest median time; the first row when none was timed; None when none."""
    if rows.empty:
        return None
    timed = rows[rows.time_us_median.notna()]
    return timed.loc[timed.time_us_median.idxmin()] if len(timed) else rows.iloc[0]


def _swept(values) -> str:
    return " ".join(str(int(v)) for v in sorted(set(values)))


def best_tuning(attention: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(best, tuning): ``best`` keeps one row per cell, the timed row with the lowest median
    time over every tuning combination (K/V ring stages x producer warps; ``status``
    "measured"), or, when no combination was timed, the cell's row at its fewest stages and
    producer warps with NaN times (``status`` "not measured: why"); ``tuning`` says per cell
    what each combination measured and which one, and which kernel, was chosen."""
    _require(attention, CELL + [*KNOBS, "time_us_median", "time_us_q1", "time_us_q3", "gbps", "tflops",
                                *KERNEL_COLUMNS, *TILE_COLUMNS],
             "attention.csv")
    combinations = sorted({(int(s), int(w)) for s, w in zip(attention.stages, attention.producer_warps)})
    consumers = sorted(attention.score_layout.unique()) if "score_layout" in attention else []
    chosen_rows, statuses, tuning_rows = [], [], []
    for key, cell in attention.groupby(CELL, sort=True):
        timed = cell[cell.time_us_median.notna()]
        if timed.empty:
            chosen, status = cell.sort_values(KNOBS).iloc[0], _not_measured_reason(cell)
        else:
            chosen, status = timed.loc[timed.time_us_median.idxmin()], MEASURED
        chosen_rows.append(chosen.name)
        statuses.append(status)
        tuning = {**dict(zip(CELL, key)), "status": status,
                  "stages_swept": _swept(cell.stages), "producer_warps_swept": _swept(cell.producer_warps),
                  "stages_chosen": int(chosen.stages) if len(timed) else None,
                  "producer_warps_chosen": int(chosen.producer_warps) if len(timed) else None}
        by_knobs = dict(iter(cell.groupby(KNOBS, sort=False)))
        for stages, warps in combinations:
            at = _fastest(by_knobs.get((stages, warps), cell.iloc[:0]))
            label = knob_label(stages, warps)
            tuning[f"time_us_{label}"] = at.time_us_median if at is not None else float("nan")
            tuning[f"resident_ctas_per_sm_{label}"] = at.resident_ctas_per_sm if at is not None else None
        if consumers:
            tuning["score_layout_swept"] = " ".join(sorted(cell.score_layout.unique()))
        for consumer in consumers:
            tuning[f"time_us_{consumer}"] = cell.loc[cell.score_layout == consumer, "time_us_median"].min()
        tuning.update({column: chosen[column] for column in (*KERNEL_COLUMNS, *TILE_COLUMNS)})
        tuning.update({column: chosen[column] for column in (*SPLIT_COLUMNS, *CONSUMER_COLUMNS)
                       if column in chosen.index})
        tuning_rows.append(tuning)
    best = attention.loc[chosen_rows].assign(status=statuses).reset_index(drop=True)
    for consumer in consumers:          # each consumer's best time in the cell, beside the winner's
        best[f"time_us_{consumer}"] = [row[f"time_us_{consumer}"] for row in tuning_rows]
    pages = best.groupby(POINT).page_size.nunique().rename("page_sizes_at_point")
    best = best.join(pages, on=POINT)
    tuning = _integers(pd.DataFrame(tuning_rows), ["stages_chosen", "producer_warps_chosen", *(
        f"resident_ctas_per_sm_{knob_label(*c)}" for c in combinations)])
    return best, tuning


def _integers(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Integer columns that may hold gaps (not measured) stay integers in the CSV."""
    for column in columns:
        if column in frame:
            frame[column] = pd.array(frame[column].astype("Float64").round(), dtype="Int64")
    return frame


def speedup_table(best: pd.DataFrame) -> pd.DataFrame:
    """One row per (point, page size): each path's best time and knobs, the TMA row's load shape
    (``tma_box``), the measured winner, TMA's speedup and FA3's agreement and slowdown."""
    rows = []
    for key, cell in best.groupby(POINT + ["page_size"], sort=True):
        by_path = {r.load_path: r for r in cell.itertuples()}
        row = dict(zip(POINT + ["page_size"], key))
        any_row = next(iter(by_path.values()))
        row["fa3_load_path"], row["fa3_reason"] = any_row.fa3_load_path, any_row.fa3_reason
        row["page_sweep"] = bool(any_row.page_sizes_at_point > 1)
        for path, r in by_path.items():
            row[f"{path}_time_us"] = r.time_us_median
            row[f"{path}_gbps"] = r.gbps
            row[f"{path}_stages"] = r.stages if r.status == MEASURED else None
            row[f"{path}_producer_warps"] = r.producer_warps if r.status == MEASURED else None
            row[f"{path}_status"] = r.status
        row["tma_box"] = by_path["tma"].tma_box if "tma" in by_path else None
        missing = [path for path, r in by_path.items() if r.status != MEASURED]
        row["tma_speedup"] = row["fa3_slowdown"] = float("nan")
        if missing:
            row["measured_winner"] = f"{NOT_MEASURED}: {', '.join(missing)}"
            row["fa3_agrees"] = None
        elif {"tma", "cp_async"} <= set(by_path):
            tma, gather = by_path["tma"], by_path["cp_async"]
            row["tma_speedup"] = gather.time_us_median / tma.time_us_median
            overlap = tma.time_us_q1 <= gather.time_us_q3 and gather.time_us_q1 <= tma.time_us_q3
            row["measured_winner"] = "tie" if overlap else (
                "tma" if tma.time_us_median < gather.time_us_median else "cp_async")
            row["fa3_agrees"] = row["measured_winner"] in ("tie", row["fa3_load_path"])
            # time of the path FA3's rule picks over the faster path's (1: it picks the faster one)
            chosen = tma if row["fa3_load_path"] == "tma" else gather
            row["fa3_slowdown"] = chosen.time_us_median / min(tma.time_us_median, gather.time_us_median)
        else:       # one path at this page size (cp.async below TMA's smallest box)
            (path,) = by_path
            row["measured_winner"] = f"{path} (only path)"
            # FA3 choosing the one path that runs agrees; choosing the other is not compared here
            row["fa3_agrees"] = True if row["fa3_load_path"] == path else None
        rows.append(row)
    return _integers(pd.DataFrame(rows), [f"{path}_{knob}" for path in ("tma", "cp_async") for knob in KNOBS])


def _copy_gbps(ceilings: pd.DataFrame) -> float:
    return float(ceilings.loc[ceilings.ceiling == "d2d_copy", "gbps"].max())


def _same_bytes_copy_gbps(ceilings: pd.DataFrame, kv_bytes: float) -> float:
    """The same run's copy moving ``kv_bytes`` (read + write), NaN where not measured."""
    match = ceilings[(ceilings.ceiling == SAME_BYTES_COPY) & (ceilings.bytes_moved == kv_bytes)]
    return float(match.gbps.iloc[0]) if len(match) else float("nan")


def _sdpa_gbps(ceilings: pd.DataFrame, shape: str, seqlen_q: int, batch: int, context: int) -> float:
    """torch SDPA on a contiguous bf16 cache at this decode point, NaN where not measured."""
    if "shape" not in ceilings:
        return float("nan")
    match = ceilings[(ceilings.ceiling == "torch_sdpa_contiguous") & (ceilings["shape"] == shape)
                     & (ceilings.seqlen_q == seqlen_q) & (ceilings.batch == batch)
                     & (ceilings.context_tokens == context)]
    return float(match.gbps.iloc[0]) if len(match) else float("nan")


def _prefill_tflops(best: pd.DataFrame) -> dict[tuple[str, str], float]:
    """(shape, dtype) -> the best measured prefill TFLOP/s over its points, page sizes and paths."""
    prefill = best[(best.phase == "prefill") & (best.status == MEASURED)]
    return prefill.groupby(["shape", "dtype"]).tflops.max().to_dict()


def _roofline(row: dict, top, prefill_tflops: float, copy_gbps: float) -> dict:
    """The decode point's roofline columns (see the module docstring); NaN where unmeasured."""
    if top is None:
        nan = float("nan")
        return {"flops_per_kv_byte": nan, "prefill_tflops": prefill_tflops, "prefill_rate_gbps": nan,
                "bound_gbps": nan, "bound": NOT_MEASURED, "fraction_of_bound": nan}
    flops_per_byte = float(top.flops) / float(top.bytes_moved)
    math_gbps = prefill_tflops * 1e3 / flops_per_byte        # TFLOP/s / (flop/B) = 1e3 GB/s
    bound_is_math = bool(math_gbps < copy_gbps)
    bound_gbps = math_gbps if bound_is_math else copy_gbps
    return {"flops_per_kv_byte": flops_per_byte, "prefill_tflops": prefill_tflops,
            "prefill_rate_gbps": math_gbps, "bound_gbps": bound_gbps,
            "bound": "prefill_tflops" if bound_is_math else "copy",
            "fraction_of_bound": row["best_gbps"] / bound_gbps}


def decode_table(best: pd.DataFrame, ceilings: pd.DataFrame) -> pd.DataFrame:
    copy_gbps = _copy_gbps(ceilings)
    prefill_tflops = _prefill_tflops(best)
    rows = []
    for key, cell in best[best.phase == "decode"].groupby(POINT, sort=True):
        row = dict(zip(POINT, key))
        timed = cell[cell.status == MEASURED]
        top = None
        if timed.empty:
            row.update({"best_load_path": NOT_MEASURED, "best_page_size": None, "best_stages": None,
                        "best_producer_warps": None, "best_score_layout": None, "best_gbps": float("nan")})
        else:
            top = timed.loc[timed.gbps.idxmax()]
            row.update({"best_load_path": top.load_path, "best_page_size": int(top.page_size),
                        "best_stages": int(top.stages), "best_producer_warps": int(top.producer_warps),
                        "best_score_layout": top.get("score_layout"), "best_gbps": top.gbps})
        for consumer in DECODE_CONSUMERS:   # each consumer's best rate where the run swept it
            if f"time_us_{consumer}" in timed:
                row[f"best_{consumer}_gbps"] = (timed.bytes_moved / (timed[f"time_us_{consumer}"] * 1e3)).max()
        row.update({"d2d_copy_gbps": copy_gbps, "fraction_of_d2d_copy": row["best_gbps"] / copy_gbps,
                    "best_tma_gbps": timed.loc[timed.load_path == "tma", "gbps"].max(),
                    "best_cp_async_gbps": timed.loc[timed.load_path == "cp_async", "gbps"].max(),
                    "torch_sdpa_gbps": _sdpa_gbps(ceilings, key[0], row["seqlen_q"], row["batch"],
                                                  row["context_tokens"])})
        in_scope = row["context_tokens"] >= DECODE_BAR_MIN_CONTEXT and row["batch"] >= DECODE_BAR_MIN_BATCH
        row["bar_applies"] = in_scope
        row["meets_bar"] = (bool(row["fraction_of_d2d_copy"] >= DECODE_BAR_FRACTION)
                            if in_scope and len(timed) else None)
        row.update(_roofline(row, top, prefill_tflops.get((row["shape"], row["dtype"]), float("nan")),
                             copy_gbps))
        same = _same_bytes_copy_gbps(ceilings, top.bytes_moved) if top is not None else float("nan")
        row.update({"same_bytes_copy_gbps": same, "fraction_of_same_bytes_copy": row["best_gbps"] / same})
        rows.append(row)
    return _integers(pd.DataFrame(rows), ["best_page_size", "best_stages", "best_producer_warps"])


def prefill_table(best: pd.DataFrame) -> pd.DataFrame:
    prefill = best[best.phase == "prefill"]
    return prefill[POINT + ["page_size", "load_path", "status", *KNOBS, "time_us_median", "tflops",
                            "fa3_load_path", *KERNEL_COLUMNS]]


def scaling_table(best: pd.DataFrame, ceilings: pd.DataFrame) -> pd.DataFrame:
    """The scaling series. Scaling points are the points measured at a single page size; their
    (shape, page size) pairs select every point measured there (the page-size sweep's points
    at that page size included). Decode points form a ``decode_batch`` series where several
    batches share (shape, dtype, query tokens, context), and a ``decode_context`` series where
    several contexts share (shape, dtype, query tokens, batch); a point can be in both.
    Every prefill point there is in the ``prefill`` series."""
    single = best[best.page_sizes_at_point == 1]
    pairs = set(zip(single["shape"], single.page_size))
    at_pairs = best[[pair in pairs for pair in zip(best["shape"], best.page_size)]]
    copy_gbps = _copy_gbps(ceilings)
    parts = []
    decode = at_pairs[at_pairs.phase == "decode"]
    for series, fixed, varied in (("decode_batch", "context_tokens", "batch"),
                                  ("decode_context", "batch", "context_tokens")):
        for _, group in decode.groupby(["shape", "page_size", "dtype", "seqlen_q", fixed], sort=True):
            if group[varied].nunique() > 1:
                parts.append(group.assign(series=series))
    parts.append(at_pairs[at_pairs.phase == "prefill"].assign(series="prefill"))
    frame = pd.concat(parts, ignore_index=True)
    if frame.empty:
        return pd.DataFrame(columns=SCALING_COLUMNS)
    decode_rows = frame.phase == "decode"
    frame["d2d_copy_gbps"] = pd.Series(copy_gbps, index=frame.index).where(decode_rows)
    frame["fraction_of_d2d_copy"] = frame.gbps.where(decode_rows) / copy_gbps
    frame["torch_sdpa_gbps"] = [
        _sdpa_gbps(ceilings, r.shape, r.seqlen_q, r.batch, r.context_tokens) if r.phase == "decode"
        else float("nan") for r in frame.itertuples()]
    for knob in KNOBS:
        frame[knob] = frame[knob].where(frame.status == MEASURED)
    return _integers(frame[SCALING_COLUMNS], KNOBS).sort_values(["series", "shape", "dtype", "load_path", "batch",
                                              "seqlen_q", "context_tokens"]).reset_index(drop=True)


def agreement_table(speedup: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (dtype, phase), cell in speedup.groupby(["dtype", "phase"], sort=True):
        rows.append({"dtype": dtype, "phase": phase, "configurations": len(cell),
                     "fa3_agrees": int(cell.fa3_agrees.eq(True).sum()),
                     "fa3_disagrees": int(cell.fa3_agrees.eq(False).sum()),
                     "not_measured": int(cell.measured_winner.str.startswith(NOT_MEASURED).sum()),
                     "tma_wins": int(cell.measured_winner.isin(["tma", "tma (only path)"]).sum()),
                     "cp_async_wins": int(cell.measured_winner.isin(["cp_async", "cp_async (only path)"]).sum()),
                     "ties": int((cell.measured_winner == "tie").sum())})
    return pd.DataFrame(rows)


def l2_state_table(ceilings: pd.DataFrame) -> pd.DataFrame:
    """The same-bytes copy in both L2 states, one row per byte count timed in both (see the
    module docstring); no rows where the ceilings have no dirty-L2 copy (older data)."""
    def state(ceiling: str, prefix: str) -> pd.DataFrame:
        rows = ceilings[ceilings.ceiling == ceiling]
        return pd.DataFrame({"bytes_moved": rows.bytes_moved, f"{prefix}_time_us": rows.time_us_median,
                             f"{prefix}_gbps": rows.gbps,
                             f"{prefix}_samples": rows.get("samples", pd.Series(float("nan"), rows.index))})
    frame = state(SAME_BYTES_COPY, "clean").merge(state(SAME_BYTES_COPY_DIRTY_L2, "dirty"), on="bytes_moved")
    frame["dirty_over_clean_time"] = frame.dirty_time_us / frame.clean_time_us
    frame["dirty_extra_us"] = frame.dirty_time_us - frame.clean_time_us
    # each rate against the largest clean copy's: from which size a launch reaches the copy rate
    largest_clean = frame.loc[frame.bytes_moved.idxmax(), "clean_gbps"] if len(frame) else float("nan")
    frame["clean_of_largest_clean"] = frame.clean_gbps / largest_clean
    frame["dirty_of_largest_clean"] = frame.dirty_gbps / largest_clean
    frame = frame[L2_STATE_COLUMNS].sort_values("bytes_moved").reset_index(drop=True)
    return _integers(frame, ["bytes_moved", "clean_samples", "dirty_samples"])


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    """Read raw data from ``raw_dir``, write the derived tables into ``derived_dir``."""
    from tma_study.harness import raw_data

    from . import STUDY
    raw = raw_data.load(STUDY, Path(raw_dir))     # checked before anything is written
    # attention rows that were not timed stay (a cell says why it was not measured; their
    # times are empty, raw_data checks it), ceilings are timed rows only
    attention, ceilings = raw["attention.csv"], raw_data.ok_rows(raw["ceilings.csv"])
    (derived_dir := Path(derived_dir)).mkdir(parents=True, exist_ok=True)
    best, tuning = best_tuning(attention := with_tma_box(attention))
    speedup = speedup_table(best)
    matched = matched_table(attention, POINT + ["page_size"])
    for name, frame in (("tuning.csv", tuning), ("speedup.csv", speedup),
                        ("decode.csv", decode_table(best, ceilings)), ("prefill.csv", prefill_table(best)),
                        ("scaling.csv", scaling_table(best, ceilings)), ("fa3_agreement.csv", agreement_table(speedup)),
                        ("rule_baselines.csv", rule_baselines(speedup)),
                        ("l2_state.csv", l2_state_table(ceilings)), ("matched.csv", matched),
                        ("matched_summary.csv", matched_summary(matched))):
        atomic_write_text(derived_dir / name, frame.to_csv(index=False))
