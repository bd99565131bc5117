"""Study ``gemm``: do the load-mechanism rules carry to real GEMMs? CUTLASS 3.x mainloops
(TMA warp-specialized vs cp.async warp-specialized, TMA multicast cluster shapes) on SM90,
with the same questions compiled for SM100 and measured wherever an SM100 GPU exists.

Its kernels are CUTLASS C++, one nvcc job per variant (workflow/rules/gemm.smk); its compile step
collects them for the generic compile rule (tma_study/gemm_lib/build.py). Measured through a C ABI (tma_study/gemm_lib/abi.py) with the
project's harness, cuBLAS as the anchor in the same run. Its paper tier: rules.py (rules of
thumb), macros.py (numbers of paper/sections/studies/gemm.tex), predict.py (do the crossover and
multicast rules name the GEMM winners?), baselines.py (each rule beside its trivial baselines).
"""
from tma_study.studies.base import Study

_HERE = __name__

STUDY = Study(
    name="gemm",
    question="Do TMA mainloops (and TMA multicast) beat cp.async mainloops in CUTLASS GEMMs on "
             "square and LLM projection shapes, and do the crossover and multicast rules predict it?",
    raw_files=("gemm.csv", "kernels.csv"),
    derived_files=("measured.csv", "speedup.csv", "multicast.csv", "multicast_summary.csv", "cublas.csv",
                   "bar.csv", "rules.csv", "rule_baselines.csv", "status.csv"),
    figures=("gemm_speedup", "gemm_cublas"),
    tables=("gemm_bar", "gemm_speedup", "gemm_multicast", "gemm_rules", "gemm_rule_baselines", "gemm_status",
            "gemm_run"),
    compile="tma_study.gemm_lib.build:compile_step",   # the reports of the per-variant nvcc jobs
    compile_inputs="tma_study.gemm_lib.build:compile_inputs",
    kernel_table=f"{_HERE}.tables:write_kernel_table",
    measure=f"{_HERE}.measure:measure",
    aggregate=f"{_HERE}.aggregate:aggregate",
    write_tables=f"{_HERE}.tables:write_tables",
    rules=f"{_HERE}.rules:rules_of_thumb",
    macros=f"{_HERE}.macros:macros",
    architectures=(9, 10),             # SM90 variants on Hopper, SM100 variants on a B200
    reads_raw_of=("crossover", "multicast"),   # rules.csv: do their rules predict the GEMM winners?
    measure_needs=("torch",),          # the cuBLAS anchor and the buffers (pyproject's measure extra)
    # The H200 reference (results/h200/gemm/) is committed, so the analysis job always has data:
    # like crossover, multicast and dsm, a results folder without gemm's raw files is an error
    # that names them, not a study silently left out.
    cost_minutes=(4.5, 6.5),         # (compile on 16 cores, measure on one H200): schedule only
)
