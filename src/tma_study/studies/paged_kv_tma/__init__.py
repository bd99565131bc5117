"""Study ``paged_kv_tma``: why paged-KV decode reads K/V slower with TMA than with cp.async, at
the paged_kv study's bar points: the cp.async gather against each shape of TMA load (the
paged_kv sweep's former box per chunk, FlashAttention-3's one box a tile (the sweep's shape since
where a page holds a tile), a box per swizzle atom from one lane or spread over lanes), everything else fixed, beside the same run's pure-read stream."""
from tma_study.studies.base import Study

_HERE = __name__

STUDY = Study(
    name="paged_kv_tma",
    question="At paged-KV decode points where TMA trails cp.async, is it the shape of this kernel's TMA "
             "loads (box per page, tensor-map rank, issuing lane, request order) or TMA itself, and how "
             "close does each path come to a pure-read stream and to its roofline bound?",
    raw_files=("attention.csv", "ceilings.csv"),
    derived_files=("producers.csv", "points.csv"),
    figures=(),
    tables=("paged_kv_tma_points", "paged_kv_tma_producers", "paged_kv_tma_run"),
    kernels=f"{_HERE}.kernels:compile_list",
    measure=f"{_HERE}.measure:measure",
    aggregate=f"{_HERE}.aggregate:aggregate",
    write_tables=f"{_HERE}.tables:write_tables",
    macros=f"{_HERE}.macros:macros",
    check_config=f"{_HERE}.grid:check_config",
    skip_analysis_without_data=True,   # until results/h200/paged_kv_tma/ is measured and committed
    cost_minutes=(1.0, 2.5),           # (compile on 16 cores, measure on one H200): schedule only
)
