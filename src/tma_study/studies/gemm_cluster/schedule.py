"""The gemm_cluster study's sample plan: which configuration runs when (pure; no GPU).

Shapes (M = N = K = size, one input type) run one after the other, smallest first. Within a
shape every configuration (configs.py: variant x swizzle x raster order) is timed once per
*round*, ``rounds`` rounds back to back, after a warm-up (measure.py); each round runs the
configurations in its own order, shuffled with a generator seeded by (order_seed, size, dtype,
round), so no configuration always follows the same one or always sits at the same point of the
round. Every configuration of a shape therefore sees the same power state, and a comparison can
pair two configurations round by round.

A sample is ``launches`` back-to-back launches of one configuration between CUDA events
(gemm_paired.runner): as many as take about ``sample_s`` at the shape's estimated rate
(``estimate_tflops``, for the plan and the time estimate only), at least one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tma_study.gemm_lib.cluster_configs import Configuration, configurations

CHECK_OVERHEAD_S = 0.05          # per correctness check (fresh inputs, the launch, the sampled reference)


@dataclass(frozen=True)
class Shape:
    size: int                     # M = N = K
    dtype: str

    @property
    def flop(self) -> int:
        return 2 * self.size ** 3


@dataclass(frozen=True)
class Sample:
    size: int
    dtype: str
    round: int                    # from 0
    position: int                 # its place in the round, from 0
    configuration: Configuration
    launches: int                 # back-to-back launches timed as this sample

    @property
    def kernel(self) -> str:
        """The launcher key (gemm_paired.runner.TimedSample)."""
        return self.configuration.key


def shapes(study: dict) -> list[Shape]:
    """The shapes in run order: sizes ascending, each size's dtypes in config order."""
    return [Shape(size, dtype) for size in sorted(study["sizes"]) for dtype in study["dtypes"]]


def seconds_per_launch(study: dict, shape: Shape) -> float:
    """The estimated time of one launch at ``estimate_tflops``."""
    return shape.flop / (float(study["estimate_tflops"][shape.dtype]) * 1e12)


def launches_per_sample(study: dict, shape: Shape) -> int:
    """Launches that take about ``sample_s`` at the estimated rate (at least one)."""
    return max(1, round(float(study["sample_s"]) / seconds_per_launch(study, shape)))


def round_order(study: dict, shape: Shape, round_: int, count: int) -> list[int]:
    """The permutation of ``count`` configurations that round ``round_`` runs (seeded)."""
    dtype_index = list(study["dtypes"]).index(shape.dtype)
    rng = np.random.default_rng([int(study["order_seed"]), shape.size, dtype_index, round_])
    return [int(i) for i in rng.permutation(count)]


def plan(study: dict, shape: Shape) -> list[list[Sample]]:
    """The rounds of one shape, each a list of samples in run order."""
    configs = configurations(study, shape.dtype)
    launches = launches_per_sample(study, shape)
    return [[Sample(shape.size, shape.dtype, r, position, configs[i], launches)
             for position, i in enumerate(round_order(study, shape, r, len(configs)))]
            for r in range(study["rounds"])]


def estimate_shape_seconds(study: dict, shape: Shape) -> float:
    """GPU seconds of one shape: checks, warm-up and the rounds at the estimated rate."""
    count = len(configurations(study, shape.dtype))
    per_launch = seconds_per_launch(study, shape)
    checks = count * (CHECK_OVERHEAD_S + per_launch)
    samples = study["rounds"] * count * launches_per_sample(study, shape) * per_launch
    return checks + float(study["warmup_s"]) + samples


def estimate_seconds(study: dict) -> float:
    """GPU seconds of the whole plan at the estimated rates."""
    return math.fsum(estimate_shape_seconds(study, shape) for shape in shapes(study))
