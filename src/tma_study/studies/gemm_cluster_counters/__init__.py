"""Study ``gemm_cluster_counters``: what limits the small fp8 tile that a cluster of two speeds up?

The gemm_cluster study finds that, against the best-ordered 1x1 sibling, a cluster wins only for
fp8 with the 128 x 128 CTA tile, whose 1x1 variants run below the 128 x 256 tile's rate. Two
mechanisms fit that: the L2 (bandwidth, or the rate of its tag lookups: fp8's 64-element k-block
is a 64-byte row, so a box of it is twice as many L2 requests per byte as bf16's) and the
pipeline's per-stage cost, which fp8 pays at twice bf16's k-block rate. Multicast halves the L2
reads of one operand per CTA, so either could be what a cluster relieves. Here Nsight Compute
(ncu) counts, for each gemm_cluster variant at the best tile order the gemm_cluster run found for
it (and at CUTLASS's default order), the L2 sectors and requests the SMs read, how busy the L2,
the DRAM and the tensor pipe were, and the kernel's cycles (measure.py, child.py); aggregate.py
turns them into per-k-block quantities and contrasts each cluster variant with its 1x1 sibling.

One launch per configuration under ncu (clock control off: the GPU's clocks as they are; caches
flushed before each replay pass) is a counter reading, not a timing: the rates here are read
beside the gemm_cluster study's round-robin timings, not instead of them.
"""
from tma_study.studies.base import Study

_HERE = __name__

STUDY = Study(
    name="gemm_cluster_counters",
    question="What limits the fp8 128x128 GEMM that a cluster of two speeds up: the L2 (bandwidth or request "
             "rate) or the pipeline's per-stage cost? Nsight Compute's counters of each gemm_cluster variant at "
             "its best tile order.",
    raw_files=("counters.csv",),
    derived_files=("counters.csv", "contrast.csv", "rule.csv", "rule_baselines.csv"),
    figures=(),
    tables=("gemm_cluster_counters", "gemm_cluster_counters_contrast", "gemm_cluster_counters_rule",
            "gemm_cluster_counters_rule_baselines", "gemm_cluster_counters_run"),
    compile=f"{_HERE}.configs:compile_step",          # links gemm's objects of the variants
    compile_inputs=f"{_HERE}.configs:compile_inputs",
    kernel_table=f"{_HERE}.tables:write_kernel_table",
    measure=f"{_HERE}.measure:measure",
    aggregate=f"{_HERE}.aggregate:aggregate",
    write_tables=f"{_HERE}.tables:write_tables",
    macros=f"{_HERE}.macros:macros",
    rules=f"{_HERE}.rules:rules_of_thumb",
    check_config=f"{_HERE}.configs:check_config",
    reads_raw_of=("gemm_cluster",),   # contrast.csv, rule.csv: the gains the gemm_cluster run timed
    measure_needs=("torch",),
    skip_analysis_without_data=True,   # until results/h200/gemm_cluster_counters/ is measured and committed
    cost_minutes=(2.0, 2.0),           # (compile on 16 cores, measure on one H200): schedule only
)
