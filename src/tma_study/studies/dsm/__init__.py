"""Study ``dsm``: which primitive broadcasts a tile to a cluster fastest: TMA multicast,
or one TMA load shared through distributed shared memory (pull or push)?"""
from tma_study.studies.base import Study

_HERE = __name__

STUDY = Study(
    name="dsm",
    question="To give every CTA of a cluster the same tile, is TMA multicast from global memory, "
             "a DSM pull or a DSM push fastest, by cluster size and tile size, and why?",
    raw_files=("broadcast.csv", "latency.csv", "bandwidth.csv"),
    derived_files=("best.csv", "winners.csv", "latency.csv", "bandwidth.csv"),
    figures=("dsm_broadcast", "dsm_primitives"),
    tables=("dsm_winners", "dsm_primitives", "dsm_run"),
    kernels=f"{_HERE}.kernels:compile_list",
    measure=f"{_HERE}.measure:measure",
    aggregate=f"{_HERE}.aggregate:aggregate",
    write_tables=f"{_HERE}.tables:write_tables",
    rules=f"{_HERE}.rules:rules_of_thumb",
    macros=f"{_HERE}.macros:macros",
    compare=f"{_HERE}.compare:compare_runs",
    cost_minutes=(0.3, 2.0),         # (compile on 16 cores, measure on one H200): schedule only
)
