"""The order of a measure run's compile jobs, so that the one GPU waits least.

A measure run is a two-stage flow shop: each study is compiled on the CPU, then timed on the
GPU, and the GPU times one study at a time. Johnson's rule orders such jobs for the shortest
whole run: first the studies whose compile step is shorter than their measure step, shortest
compile first (the GPU starts early and always has the next study ready), then the others,
longest measure step first. The workflow turns this order into the priorities of the compile
jobs (workflow/rules/compile.smk), each running on every core but the GPU job's; each study
declares its rough costs in ``Study.cost_minutes``.

A priority orders jobs that wait for cores; it cannot stop narrow jobs from filling the cores
a wide job waits for. The gemm study's build is 58 one-core nvcc jobs: in the measured run
(docs/kernel_cache.md) they held the cores for 3 minutes while the small studies' compile jobs
waited, and the GPU started then.
"""
from __future__ import annotations

# Snakemake priorities: a ready measure job before any other job (the GPU is the scarce
# resource), then the compile jobs, in Johnson's order.
MEASURE_PRIORITY = 100
COMPILE_PRIORITY_BASE = 50


def johnson_order(cost_minutes: dict[str, tuple[float, float]]) -> list[str]:
    """Study names in Johnson's order for ``{name: (compile minutes, measure minutes)}``."""
    early = [n for n, (compile_min, measure_min) in cost_minutes.items() if compile_min < measure_min]
    late = [n for n in cost_minutes if n not in early]
    return (sorted(early, key=lambda n: (cost_minutes[n][0], n))
            + sorted(late, key=lambda n: (-cost_minutes[n][1], n)))


def compile_priorities(cost_minutes: dict[str, tuple[float, float]]) -> dict[str, int]:
    """{study: Snakemake priority of its compile jobs}: higher for those to compile first."""
    order = johnson_order(cost_minutes)
    return {name: COMPILE_PRIORITY_BASE + len(order) - rank for rank, name in enumerate(order)}
