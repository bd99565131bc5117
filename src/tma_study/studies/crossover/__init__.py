"""Study ``crossover``: from which transfer size (and bytes in flight) does TMA beat
bulk copies, cp.async and plain loads?"""
from tma_study.studies.base import Study

_HERE = __name__

STUDY = Study(
    name="crossover",
    question="From which transfer size, and with how many bytes in flight, does a TMA tensor "
             "load beat 1-D bulk copies, cp.async and plain 128-bit loads?",
    raw_files=("stream.csv", "ceilings.csv", "latency.csv"),
    derived_files=("best.csv", "crossover.csv", "ceilings.csv", "latency.csv", "latency_chain.csv",
                   "peaks.csv", "reproducibility.csv"),
    figures=("crossover_bandwidth", "crossover_map", "crossover_latency"),
    tables=("crossover_summary", "crossover_crossovers", "crossover_latency_chain", "crossover_reproducibility",
            "crossover_run"),
    kernels=f"{_HERE}.kernels:compile_list",
    measure=f"{_HERE}.measure:measure",
    aggregate=f"{_HERE}.aggregate:aggregate",   # (raw_dir, derived_dir, repeat_dir=None)
    write_tables=f"{_HERE}.tables:write_tables",
    rules=f"{_HERE}.rules:rules_of_thumb",
    macros=f"{_HERE}.macros:macros",
    compare=f"{_HERE}.compare:compare_runs",
    cost_minutes=(0.5, 2.0),         # (compile on 16 cores, measure on one H200): schedule only
)
