"""The gemm study's measurement protocol: which shape groups are pre-heated, and in which order a
group's candidates (the cuBLAS anchor and the CUTLASS variants) are timed.

Why. Large GEMMs run power-limited, and a case of 10 samples lasts less than the power limiter
needs to settle, so a case's SM clock depends on what ran just before it; without a protocol,
comparisons within a shape would measure thermal history, not kernels (docs/history.md: the run
that showed it).

What. Two measures, both recorded (provenance.json and two gemm.csv columns):

- pre-heat: before the first timed candidate of a group whose problem has at least
  ``timing.preheat_min_gflop`` GFLOP, the shape's cuBLAS GEMM runs back to back, untimed, for
  ``timing.preheat_s`` seconds (after that candidate's correctness check, right before nvbench's
  warm-up and samples), so every candidate of the group starts in the sustained, power-limited
  state. Column ``group_preheat_s``: the seconds it ran (0 below the threshold).
- order: each group's candidates are shuffled with a generator seeded by ``timing.order_seed``,
  the shape and the dtype, so no implementation always has the first (coolest) slot and none
  always follows the same neighbour; the permutation depends only on those three, so a re-run
  with the same seed times the same order. Column ``measure_order``: the row's position in the run.

Pure functions (no GPU): the CPU tests check the plan; measure.py runs it.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import shapes as shapes_mod
from . import variants as variants_mod

CUBLAS = "cublas"
# config keys of studies.gemm.timing that belong to this protocol, not to nvbench (timing.run)
PROTOCOL_KEYS = ("preheat_min_gflop", "preheat_s", "order_seed")
ORDER_METHOD = ("seeded shuffle of each (shape, dtype) group's candidates: "
                "random.Random('<order_seed>:<shape>:<dtype>').shuffle over [cuBLAS, variants in config order]")
PREHEAT_METHOD = ("the shape's cuBLAS GEMM back to back, untimed, for preheat_s seconds of host wall time "
                  "(synchronised), after the group's first timed candidate's correctness check and before "
                  "its first nvbench sample; only groups with at least preheat_min_gflop GFLOP")


@dataclass(frozen=True)
class Group:
    """One (shape, dtype) group of the sweep: its candidates in measurement order."""

    shape: shapes_mod.Shape
    dtype: str
    preheat_s: float                 # planned seconds of cuBLAS before the first candidate (0: none)
    candidates: tuple                # CUBLAS (the anchor) or a variants.Variant, in measurement order

    def names(self) -> list[str]:
        return [candidate_name(c, self.dtype) for c in self.candidates]


def candidate_name(candidate, dtype: str) -> str:
    """'cublas_bf16' for the anchor, else the variant's name."""
    return f"{CUBLAS}_{dtype}" if candidate == CUBLAS else candidate.name


def nvbench_timing(timing: dict) -> dict:
    """studies.gemm.timing without this protocol's keys: the keyword arguments of timing.run."""
    return {k: v for k, v in timing.items() if k not in PROTOCOL_KEYS}


def planned_preheat_s(shape: shapes_mod.Shape, timing: dict) -> float:
    """Seconds of pre-heat before ``shape``'s group: ``preheat_s`` from ``preheat_min_gflop`` up, else 0."""
    return float(timing["preheat_s"]) if shape.flop / 1e9 >= float(timing["preheat_min_gflop"]) else 0.0


def shuffled(items: list, seed: int, shape: shapes_mod.Shape, dtype: str) -> list:
    """``items`` in the group's measurement order: a permutation fixed by (seed, shape, dtype).

    random.Random seeded with a string hashes it (SHA-512), so the order does not depend on
    PYTHONHASHSEED, on the process, or on the other groups of the config.
    """
    out = list(items)
    random.Random(f"{int(seed)}:{shape.key}:{dtype}").shuffle(out)
    return out


def dtypes(study: dict, arch: str) -> list[str]:
    return sorted({v.dtype for v in variants_mod.variants(study, arch)})


def plan(study: dict, arch: str) -> list[Group]:
    """Every (shape, dtype) group of the sweep on ``arch``, shapes in config order, each with its
    pre-heat and its candidates' measurement order. Variants CUTLASS cannot run at a shape stay in
    the plan: measure.py records them as 'not run' and times the rest in this order."""
    timing = study["timing"]
    chosen = variants_mod.variants(study, arch)
    groups = []
    for shape in shapes_mod.shapes(study):
        for dtype in dtypes(study, arch):
            candidates = [CUBLAS, *(v for v in chosen if v.dtype == dtype)]
            groups.append(Group(shape, dtype, planned_preheat_s(shape, timing),
                                tuple(shuffled(candidates, timing["order_seed"], shape, dtype))))
    return groups


def preheat_total_s(study: dict, arch: str) -> float:
    """GPU seconds the plan spends pre-heating (groups at or above the threshold x preheat_s)."""
    return sum(group.preheat_s for group in plan(study, arch))


def preheat(run_once: Callable[[], None], synchronize: Callable[[], None], seconds: float,
            clock: Callable[[], float] = time.perf_counter) -> dict:
    """Run ``run_once`` back to back until ``seconds`` of wall time have passed; returns
    {'seconds': elapsed, 'launches': n}.

    Launches go out in batches with one synchronize after each, so the GPU never waits for the
    host; a batch doubles while time is left and never holds more launches than the remaining
    time needs at the rate measured so far, so the pre-heat overshoots by about one launch.
    """
    start = clock()
    launches, batch = 0, 1
    while True:
        for _ in range(batch):
            run_once()
        synchronize()
        launches += batch
        elapsed = clock() - start
        left = seconds - elapsed
        if left <= 0:
            return {"seconds": elapsed, "launches": launches}
        per_launch = elapsed / launches
        batch = max(1, min(2 * batch, int(left / per_launch) + 1)) if per_launch > 0 else 2 * batch
