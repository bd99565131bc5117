"""Study ``gemm_paired``: the gemm study's bar (best SM90 TMA GEMM at the bar's shape against
cuBLAS) in one power state. Under the H200's power cap a GEMM's SM clock depends on what ran
before it, so two rows timed at different moments compare power states as much as kernels.
Here each bar candidate (the fastest variants of the gemm reference data, candidates.py) is
timed in pairs with cuBLAS, alternating which goes first, in two states: unthrottled bursts,
each after an idle cool-down, and sustained load, back to back after a warm-up (schedule.py).
Every sample records its SM clock, power and temperature (NVML, monitor.py).

It builds nothing of its own: its compile step links the gemm study's objects of the candidates
into one library (candidates.py), and measure.py reuses gemm's problem, check and ABI code.
"""
from tma_study.studies.base import Study

_HERE = __name__

STUDY = Study(
    name="gemm_paired",
    question="Does the best SM90 TMA GEMM reach 95 % of cuBLAS when both are timed in one power state, "
             "in pairs, both unthrottled (bursts after a cool-down) and power-limited (sustained load)?",
    raw_files=("samples.csv",),
    derived_files=("pairs.csv", "ratios.csv", "bar.csv", "states.csv"),
    figures=(),
    tables=("gemm_paired_ratios", "gemm_paired_states", "gemm_paired_run"),
    compile=f"{_HERE}.candidates:compile_step",        # links gemm's objects of the candidates
    compile_inputs=f"{_HERE}.candidates:compile_inputs",
    kernel_table=f"{_HERE}.tables:write_kernel_table",
    measure=f"{_HERE}.measure:measure",
    aggregate=f"{_HERE}.aggregate:aggregate",
    write_tables=f"{_HERE}.tables:write_tables",
    macros=f"{_HERE}.macros:macros",
    measure_needs=("torch",),
    skip_analysis_without_data=True,   # until results/h200/gemm_paired/ is measured and committed
    cost_minutes=(1.5, 1.5),           # (compile on 16 cores, measure on one H200): schedule only
)
