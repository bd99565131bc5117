"""Study ``gemm_cluster``: is a TMA GEMM's cluster gain multicast or tile order?

The gemm study finds its SM90 TMA cluster variants (1x2, 2x1, 2x2: A multicast along the
cluster's N, B along its M) faster than the same variant at 1x1, while the multicast
microbenchmark never sees multicast win. Every gemm variant ran with CUTLASS's default tile order
(the persistent tile scheduler at swizzle 1, heuristic raster order), and a cluster changes which
tiles a wave runs together, so part of the gain may be L2 locality, not multicast. Here each
cluster variant and its 1x1 sibling run at every scheduler swizzle (and the configured raster
orders: tma_study/gemm_lib/cluster_configs.py), round-robin in one power state per shape (schedule.py, measure.py), and the
gain is taken both at the default order and best order against best order (aggregate.py, with
tma_study/gemm_lib/cluster_gains.py).

It builds nothing of its own: its compile step links the gemm study's objects of its variants
into one library (library.py), and measure.py reuses gemm's problem, check and ABI code
(NAME_run_scheduled, kernels/gemm/gemm_abi.cuh) and gemm_paired's sample runner and NVML monitor.
"""
from tma_study.studies.base import Study

_HERE = __name__

STUDY = Study(
    name="gemm_cluster",
    question="Is a TMA GEMM's cluster gain multicast or tile order? Each SM90 TMA cluster variant against its "
             "1x1 sibling at every scheduler swizzle, timed round-robin in one power state.",
    raw_files=("samples.csv",),
    derived_files=("configurations.csv", "tile_order.csv", "same_order.csv", "gains.csv", "summary.csv",
                   "rule.csv", "rule_baselines.csv"),
    figures=(),
    tables=("gemm_cluster_gains", "gemm_cluster_tile_order", "gemm_cluster_summary", "gemm_cluster_rule",
            "gemm_cluster_rule_baselines", "gemm_cluster_run"),
    compile=f"{_HERE}.library:compile_step",          # links gemm's objects of the variants
    compile_inputs=f"{_HERE}.library:compile_inputs",
    kernel_table=f"{_HERE}.tables:write_kernel_table",
    measure=f"{_HERE}.measure:measure",
    aggregate=f"{_HERE}.aggregate:aggregate",
    write_tables=f"{_HERE}.tables:write_tables",
    macros=f"{_HERE}.macros:macros",
    rules=f"{_HERE}.rules:rules_of_thumb",
    check_config="tma_study.gemm_lib.cluster_configs:check_config",
    reads_raw_of=("multicast",),       # rule.csv: does the multicast verdict hold against the fair baseline?
    measure_needs=("torch",),
    skip_analysis_without_data=True,   # until results/h200/gemm_cluster/ is measured and committed
    cost_minutes=(2.0, 3.0),           # (compile on 16 cores, measure on one H200): schedule only
)
