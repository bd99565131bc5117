"""Study ``heldout``: the advisor's held-out test. Triton kernels (kernels/heldout/) in pairs that
differ only in how one operand is loaded - a TMA tensor descriptor, or pointers (which Triton
compiles to cp.async or plain loads) - over GEMMs, dense attention, paged decode and row gathers,
each pair checked against PyTorch and timed in alternating order from a clean L2. Measured after
the advisor was frozen (tma_study.advisor.frozen); each case records its hash. The advisor's
scores on these cases: workflow/rules/advisor.smk.
"""
from tma_study.studies.base import Study

_HERE = __name__

STUDY = Study(
    name="heldout",
    question="Does the frozen advisor pick the faster load for operands of Triton kernels it was not built on?",
    raw_files=("cases.csv", "samples.csv"),
    derived_files=("cases.csv", "families.csv"),
    figures=("heldout_ratios",),
    tables=("heldout_families", "heldout_run"),
    compile=f"{_HERE}.compile:compile_step",
    kernel_table=f"{_HERE}.tables:write_kernel_table",
    measure=f"{_HERE}.measure:measure",
    aggregate=f"{_HERE}.aggregate:aggregate",
    write_tables=f"{_HERE}.tables:write_tables",
    measure_needs=("torch", "triton"),
    skip_analysis_without_data=True,   # until results/h200/heldout/ is measured and committed
    cost_minutes=(0.5, 2.0),           # (compile on 16 cores, measure on one H200): schedule only
)
