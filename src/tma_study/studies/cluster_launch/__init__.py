"""Study ``cluster_launch``: what a thread-block-cluster launch costs by itself, and why:
launch time of a near-empty kernel per cluster size, when each CTA started, and on which SM."""
from tma_study.studies.base import Study

_HERE = __name__

STUDY = Study(
    name="cluster_launch",
    question="What does launching a grid as thread-block clusters cost by itself, by cluster size and "
             "CTAs per SM, and is it the gang scheduling of fewer co-resident CTAs, a slower start of "
             "each CTA, or the placement of clusters on the GPCs' SMs?",
    raw_files=("launch.csv", "ctas.csv"),
    derived_files=("launch.csv", "placement.csv", "gpcs.csv", "cluster_fit.csv", "partners.csv"),
    figures=("cluster_launch_cost",),
    tables=("cluster_launch_cost", "cluster_launch_gpcs", "cluster_launch_run"),
    kernels=f"{_HERE}.kernels:compile_list",
    measure=f"{_HERE}.measure:measure",
    aggregate=f"{_HERE}.aggregate:aggregate",
    write_tables=f"{_HERE}.tables:write_tables",
    macros=f"{_HERE}.macros:macros",
    check_config=f"{_HERE}.grid:check_config",
    skip_analysis_without_data=True,   # until results/h200/cluster_launch/ is measured and committed
    cost_minutes=(0.1, 1.0),           # (compile on 16 cores, measure on one H200): schedule only
)
