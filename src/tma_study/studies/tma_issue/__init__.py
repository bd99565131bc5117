"""Study ``tma_issue``: what one TMA transfer costs from issue to arrival against a minimal plain
load, over working sets from L2-sized to far past the TLB's reach, and how many TMA-engine copies
one SM issues per microsecond with one issuing thread and with several."""
from tma_study.studies.base import Study

_HERE = __name__

STUDY = Study(
    name="tma_issue",
    question="How much longer than a minimal dependent plain load does one TMA transfer take from "
             "issue to arrival, does it depend on the working set (TLB reach), and how many TMA copies "
             "can one SM issue per microsecond with one issuing thread and with several?",
    raw_files=("chase.csv", "issue_rate.csv"),
    derived_files=("chase.csv", "issue_rate.csv"),
    figures=("tma_issue_limits",),
    tables=("tma_issue_chase", "tma_issue_rate", "tma_issue_run"),
    kernels=f"{_HERE}.kernels:compile_list",
    measure=f"{_HERE}.measure:measure",
    aggregate=f"{_HERE}.aggregate:aggregate",
    write_tables=f"{_HERE}.tables:write_tables",
    macros=f"{_HERE}.macros:macros",
    skip_analysis_without_data=True,   # until results/h200/tma_issue/ is measured and committed
    cost_minutes=(0.1, 1.0),           # (compile on 16 cores, measure on one H200): schedule only
)
