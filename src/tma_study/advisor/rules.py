"""The advisor's rules: an operand and the microbenchmarks' tables in, mechanisms ranked out.

Frozen: these rules and their constants are hashed (``tma_study.advisor.frozen``) and were
registered before any held-out case was measured; changing them makes a new advisor version.

1. Candidates by access shape: a box can be moved by a TMA tensor copy, cp.async or plain
   loads; a contiguous range also by a 1-D bulk copy; gathered rows by any of the four, one
   transfer per row. Shared by several CTAs of a cluster: also TMA multicast and DSM.
2. Streaming: each candidate's rate is the crossover study's best GB/s at the operand's level,
   its transfer size (log2-interpolated between measured sizes) and a ring no deeper than the
   operand's bytes in flight per SM. A TMA box whose dimension exceeds 256 elements takes one
   copy per 256-element piece, so its transfers are that much smaller (a gathered row too,
   where its element size is given).
3. Dependent: each candidate's cost is the crossover study's full dependent chain (cycles per
   transfer) at the level and size.
4. Shared tiles: own TMA copies against multicast from the multicast study's 1-D pattern (every
   CTA of the cluster needs every tile), DSM against multicast from the dsm study, own copies
   by another mechanism scaled by that mechanism's streaming rate against TMA's.
5. Consumer: a byte costs max(its load time, its compute time): compute time is the consumer's
   FLOPs per byte over the dense tensor rate (mma: 2MNK over the (M+N)K operand elements of a
   k-step) or the CUDA cores' FP32 rate (compute). A consumer that outruns every mechanism's
   load makes them tie.
6. Unknown level: both levels are evaluated and the choice that loses least at either is given.
7. Decision: mechanisms whose time is within TIE_TOLERANCE of the fastest, in any run of the
   evidence, tie; among them the one with the fewest issuing threads (PREFERENCE) is chosen.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .evidence import Evidence
from .operand import MAX_BOX_DIM_ELEMENTS, MMA_DTYPE_BYTES, Operand

TIE_TOLERANCE = 0.02
# On a predicted tie: TMA issues from one thread, a bulk copy likewise; cp.async from every
# producer thread (16 bytes each); plain loads also hold the data in registers; DSM needs a
# second hop through the loading CTA.
PREFERENCE = ("tma", "tma_multicast", "bulk_copy", "cp_async", "plain_loads", "dsm")
CROSSOVER_NAME = {"tma": "tma_tile", "bulk_copy": "bulk_copy", "cp_async": "cp_async", "plain_loads": "plain_loads"}
CANDIDATES = {"box": ("tma", "cp_async", "plain_loads"),
              "bulk": ("tma", "bulk_copy", "cp_async", "plain_loads"),
              "gather": ("tma", "bulk_copy", "cp_async", "plain_loads")}
SHARED_CANDIDATES = ("tma_multicast", "dsm")
LATENCY_CHAIN = "full"
EVIDENCE = {   # rule -> (figures, claims) it rests on
    "streaming_hbm": (("crossover_bandwidth", "crossover_map"),
                      ("crossover_tma_ties_cp_async_from_1kib_hbm", "crossover_cp_async_wins_small_transfers",
                       "crossover_tma_equals_bulk_copy", "crossover_plain_loads_below_tma_hbm",
                       "crossover_shallow_ring_never_catches_cp_async")),
    "streaming_l2": (("crossover_bandwidth", "crossover_map"),
                     ("crossover_tma_beats_cp_async_from_2kib_l2", "crossover_tma_ahead_of_cp_async_l2_large",
                      "crossover_cp_async_wins_small_transfers", "crossover_tma_beats_plain_loads_from_2kib")),
    "dependent": (("crossover_latency",), ("crossover_tma_latency_higher_small",
                                           "crossover_tma_chain_cost_is_the_producer_path")),
    "shared": (("multicast_scaling", "dsm_broadcast"),
               ("multicast_not_faster_for_1d_broadcast", "multicast_cluster_launch_costs_at_four_and_more",
                "dsm_multicast_wins_from_four_ctas")),
    "consumer": (("multicast_compute",), ("multicast_not_faster_when_the_consumer_dominates",)),
}


class AdvisorRangeError(ValueError):
    """The evidence holds nothing at all for the operand (a level or mechanism never measured)."""


def _log2_interpolate(points: pd.Series, x: float, what: str, notes: list) -> float:
    """The value of ``points`` (index: sizes) at ``x``, linear in log2 of the size; clamped to the
    measured range with a note saying how many octaves beyond it ``x`` lies."""
    points = points.dropna().sort_index()
    if points.empty:
        raise AdvisorRangeError(f"no measurement of {what}")
    sizes = points.index.to_numpy(dtype=float)
    if x < sizes[0] or x > sizes[-1]:
        edge = sizes[0] if x < sizes[0] else sizes[-1]
        notes.append({"what": what, "asked": x, "measured_from": sizes[0], "measured_to": sizes[-1],
                      "octaves": abs(math.log2(x / edge))})
    return float(np.interp(math.log2(x), np.log2(sizes), points.to_numpy(dtype=float)))


def _transfer_bytes(op: Operand, mechanism: str) -> float:
    """Bytes per transfer of ``mechanism``: a TMA box over 256 elements in a dimension is split."""
    if mechanism != "tma" or op.element_bytes is None:
        return float(op.bytes_per_transfer)
    dims = op.box_dims or (op.bytes_per_transfer // op.element_bytes,)     # a gathered row: one dimension
    copies = math.prod(math.ceil(d / MAX_BOX_DIM_ELEMENTS) for d in dims)
    return op.bytes_per_transfer / copies


def stream_gbps(ev: Evidence, level: str, mechanism: str, op: Operand, notes: list) -> float:
    """Rule 2: the mechanism's best measured rate at this level, size and depth of ring."""
    best = ev.table("crossover", "best.csv")
    rows = best[(best.working_set == level) & (best.mechanism == CROSSOVER_NAME[mechanism])
                & (best.ring_bytes_per_sm > 0)]
    if rows.empty:
        raise AdvisorRangeError(f"the crossover study measured no {mechanism} at level {level}")
    rings = sorted(rows.ring_bytes_per_sm.unique())
    usable = [r for r in rings if r <= op.bytes_in_flight_per_sm]
    if not usable:
        usable = rings[:1]
        notes.append({"what": "bytes in flight per SM", "asked": op.bytes_in_flight_per_sm,
                      "measured_from": rings[0], "measured_to": rings[-1],
                      "octaves": math.log2(rings[0] / op.bytes_in_flight_per_sm)})
    per_size = rows[rows.ring_bytes_per_sm.isin(usable)].groupby("bytes_per_transfer").gbps.max()
    return _log2_interpolate(per_size, _transfer_bytes(op, mechanism), "bytes per transfer", notes)


def dependent_cycles(ev: Evidence, level: str, mechanism: str, op: Operand, notes: list) -> float:
    """Rule 3: the full dependent chain's cycles per transfer at this level and size."""
    chain = ev.table("crossover", "latency_chain.csv")
    rows = chain[(chain.chain == LATENCY_CHAIN) & (chain.level == level)
                 & (chain.mechanism == CROSSOVER_NAME[mechanism])]
    series = rows.set_index("bytes_per_transfer").cycles_per_transfer_median
    return _log2_interpolate(series, _transfer_bytes(op, mechanism), "dependent transfer bytes", notes)


def _nearest(measured, asked: int, what: str, notes: list) -> int:
    measured = sorted(int(m) for m in measured)
    if not measured:
        raise AdvisorRangeError(f"no measurement of {what}")
    near = min(measured, key=lambda m: (abs(math.log2(m / asked)), m))
    if near != asked:
        notes.append({"what": what, "asked": asked, "measured_from": measured[0], "measured_to": measured[-1],
                      "octaves": abs(math.log2(near / asked))})
    return near


def shared_relative_times(ev: Evidence, level: str, op: Operand, notes: list) -> dict:
    """Rule 4: load time relative to own TMA copies, for multicast and DSM."""
    speedup = ev.table("multicast", "speedup.csv")
    one_d = speedup[(speedup.pattern == "1d") & (speedup.working_set == level) & (speedup.cluster_x == 1)]
    n = _nearest(one_d.cluster_y.unique(), op.cluster_sharing, "CTAs sharing a tile (multicast)", notes)
    gain = _log2_interpolate(one_d[one_d.cluster_y == n].set_index("tile_bytes").speedup_over_no_cluster,
                             op.bytes_per_transfer, "tile bytes (multicast)", notes)
    winners = ev.table("dsm", "winners.csv")
    at = winners[winners.working_set == level]
    m = _nearest(at.cluster_size.unique(), op.cluster_sharing, "CTAs sharing a tile (DSM)", notes)
    at = at[at.cluster_size == m].set_index("tile_bytes")
    dsm_over_multicast = _log2_interpolate(at.multicast_gbps / at[["dsm_pull_gbps", "dsm_push_gbps"]].max(axis=1),
                                           op.bytes_per_transfer, "tile bytes (DSM)", notes)
    return {"tma_multicast": 1.0 / gain, "dsm": dsm_over_multicast / gain}


def compute_seconds_per_byte(ev: Evidence, op: Operand) -> float:
    """Rule 5: the consumer's time per byte of this operand (0 for a load-only consumer)."""
    if op.consumer == "mma":
        m, n, k = op.mma_tile
        flops_per_byte = 2 * m * n * k / ((m + n) * k * MMA_DTYPE_BYTES[op.mma_dtype])
        if op.mma_dtype not in ev.tensor_tflops:
            raise AdvisorRangeError(f"config/gpu_specs.yaml lists no dense tensor rate for {ev.gpu.get('name')} "
                                    f"(slug {ev.gpu.get('slug')!r}): an mma consumer needs it")
        return flops_per_byte / (ev.tensor_tflops[op.mma_dtype] * 1e12)
    if op.consumer == "compute":
        return op.flops_per_byte / (ev.cuda_core_tflops * 1e12)
    return 0.0


def candidates(op: Operand) -> tuple[str, ...]:
    own = CANDIDATES[op.shape]
    return (*own, *SHARED_CANDIDATES) if op.cluster_sharing > 1 and op.pattern == "streaming" else own


def times_at_level(ev: Evidence, op: Operand, level: str, notes: list) -> dict:
    """Predicted time per byte (seconds; dependent: cycles per transfer) of each candidate."""
    if op.pattern == "dependent":
        return {m: dependent_cycles(ev, level, m, op, notes) for m in candidates(op)}
    rates = {m: stream_gbps(ev, level, m, op, notes) for m in CANDIDATES[op.shape]}
    load = {m: 1.0 / (g * 1e9) for m, g in rates.items()}
    if op.cluster_sharing > 1:
        relative = shared_relative_times(ev, level, op, notes)
        load.update({m: r * load["tma"] for m, r in relative.items()})
    compute = compute_seconds_per_byte(ev, op)
    return {m: max(t, compute) for m, t in load.items()}


def levels(op: Operand) -> tuple[str, ...]:
    return ("hbm", "l2") if op.level == "unknown" else (op.level,)


def relative_times(ev: Evidence, op: Operand, notes: list) -> dict:
    """Each candidate's time over the fastest candidate's, worst over the levels (rule 6)."""
    worst: dict = {}
    for level in levels(op):
        times = times_at_level(ev, op, level, notes)
        fastest = min(times.values())
        for m, t in times.items():
            worst[m] = max(worst.get(m, 0.0), t / fastest)
    return worst


def rule_names(op: Operand) -> list[str]:
    if op.pattern == "dependent":
        names = ["dependent"]
    else:
        names = [f"streaming_{level}" for level in levels(op)]
        names += ["shared"] if op.cluster_sharing > 1 else []
    return names + (["consumer"] if op.consumer != "load_only" else [])


def decide(per_variant: list[dict]) -> tuple[str, list[str]]:
    """Rule 7: (the choice, the mechanisms tied with the fastest in some run of the evidence)."""
    reference = per_variant[0]
    fastest = min(reference, key=lambda m: (reference[m], PREFERENCE.index(m)))
    tied = [m for m in reference
            if min(v[m] / v[fastest] for v in per_variant) <= 1 + TIE_TOLERANCE]
    return min(tied, key=PREFERENCE.index), sorted(tied, key=PREFERENCE.index)
