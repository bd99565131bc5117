"""The gemm_paired study's sample plan: which sample runs when, in which state (pure; no GPU).

A *pair* is two samples run one right after the other: cuBLAS's and a candidate's, the same
``launches_per_sample`` back-to-back launches each. Their ratio (cuBLAS time over candidate time =
the candidate's TFLOP/s over cuBLAS's) compares two kernels in one power state. Which of the two
goes first alternates from pair to pair (ABBA: pair 0 cuBLAS first, pair 1 the candidate first,
...), so neither always has the cooler first slot. Candidates take turns pair by pair, so each
sees the whole state, not one end of it.

- ``burst`` (unthrottled): before each pair the GPU idles ``cooldown_s`` (the power limiter's
  budget and the clock recover), then the pair runs alone.
- ``sustained`` (power-limited): cuBLAS runs back to back for ``warmup_s`` (measure.py), then every
  pair of every candidate back to back, with no idle gap between samples.

Bursts run first, on a GPU that has not yet been heated by the sustained block.
"""
from __future__ import annotations

from dataclasses import dataclass

CUBLAS = "cublas"
STATES = ("burst", "sustained")


@dataclass(frozen=True)
class Sample:
    state: str               # burst | sustained
    candidate: str           # the variant this pair compares with cuBLAS
    pair: int                # the pair's number within (state, candidate), from 0
    implementation: str      # cublas | cutlass: whose sample this is
    position: int            # 0: first of its pair, 1: second
    launches: int            # back-to-back launches timed as this sample
    cooldown_s: float        # idle seconds right before this sample (bursts: the pair's first)

    @property
    def kernel(self) -> str:
        """The kernel this sample runs: CUBLAS or the candidate's name."""
        return CUBLAS if self.implementation == CUBLAS else self.candidate


def cublas_first(pair: int) -> bool:
    """ABBA: cuBLAS opens even pairs, the candidate odd ones."""
    return pair % 2 == 0


def _pair(state: str, candidate: str, pair: int, launches: int, cooldown_s: float) -> list[Sample]:
    order = [CUBLAS, "cutlass"] if cublas_first(pair) else ["cutlass", CUBLAS]
    return [Sample(state, candidate, pair, implementation, position, launches, cooldown_s if position == 0 else 0.0)
            for position, implementation in enumerate(order)]


def plan(study: dict, candidates: list[str]) -> dict[str, list[Sample]]:
    """{state: its samples in run order}: pairs round-robin over the candidates."""
    out = {}
    for state in STATES:
        section = study["bursts" if state == "burst" else "sustained"]
        cooldown = float(section["cooldown_s"]) if state == "burst" else 0.0
        out[state] = [sample for pair in range(section["pairs"]) for candidate in candidates
                      for sample in _pair(state, candidate, pair, section["launches_per_sample"], cooldown)]
    return out


def estimate_seconds(study: dict, candidates: int, seconds_per_launch: float) -> float:
    """GPU seconds the plan should take (cool-downs, warm-up, samples) at ``seconds_per_launch``."""
    bursts, sustained = study["bursts"], study["sustained"]
    burst = bursts["pairs"] * candidates * (bursts["cooldown_s"] + 2 * bursts["launches_per_sample"] * seconds_per_launch)
    steady = sustained["warmup_s"] + sustained["pairs"] * candidates * 2 * sustained["launches_per_sample"] * seconds_per_launch
    return burst + steady
