"""Study ``multicast``: when does TMA multicast across a thread-block cluster help or hurt?"""
from tma_study.studies.base import Study

_HERE = __name__

STUDY = Study(
    name="multicast",
    question="When every CTA of a cluster needs the same tile, does TMA multicast beat each CTA "
             "loading its own copy, how much of a loss at large clusters is scheduling, and from which "
             "consumer work and L2 read rate does multicast start to win?",
    raw_files=("stream.csv", "occupancy.csv", "traffic.csv"),
    derived_files=("best.csv", "speedup.csv", "break_even.csv", "scheduling.csv", "traffic.csv", "compute.csv",
                   "compute_boundary.csv"),
    figures=("multicast_scaling", "multicast_2d", "multicast_compute"),
    tables=("multicast_summary", "multicast_2d", "multicast_traffic", "multicast_compute", "multicast_run"),
    kernels=f"{_HERE}.kernels:compile_list",
    measure=f"{_HERE}.measure:measure",
    aggregate=f"{_HERE}.aggregate:aggregate",
    write_tables=f"{_HERE}.tables:write_tables",
    rules=f"{_HERE}.rules:rules_of_thumb",
    macros=f"{_HERE}.macros:macros",
    compare=f"{_HERE}.compare:compare_runs",
    cost_minutes=(0.3, 1.2),         # (compile on 16 cores, measure on one H200): schedule only
)
