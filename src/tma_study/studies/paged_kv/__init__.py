"""Study ``paged_kv``: paged-KV attention, TMA vs cp.async K/V loads by page size, dtype,
model shape and phase, next to FlashAttention-3's own rule (tma_study.fa3_rule).

Its paper tier: facts.py (what the text, the rules and the summary table state), rules.py
(rules of thumb), macros.py (numbers of paper/sections/studies/paged_kv.tex), compare.py
(what moved between runs)."""
from tma_study.studies.base import Study

_HERE = __name__

STUDY = Study(
    name="paged_kv",
    question="In attention over a paged KV cache, when does loading K/V pages with TMA beat a "
             "cp.async gather, by page size, dtype, model shape and phase, and does "
             "FlashAttention-3's rule pick the faster one?",
    raw_files=("attention.csv", "ceilings.csv"),
    derived_files=("tuning.csv", "speedup.csv", "decode.csv", "prefill.csv", "scaling.csv",
                   "fa3_agreement.csv", "rule_baselines.csv", "l2_state.csv", "matched.csv", "matched_summary.csv"),
    figures=("paged_kv_speedup", "paged_kv_scaling", "paged_kv_roofline"),
    tables=("paged_kv_summary", "paged_kv_speedup", "paged_kv_decode", "paged_kv_fa3", "paged_kv_fa3_baselines",
            "paged_kv_scaling", "paged_kv_tuning", "paged_kv_l2_state"),
    kernels=f"{_HERE}.kernels:compile_list",
    measure=f"{_HERE}.measure:measure",
    aggregate=f"{_HERE}.aggregate:aggregate",
    write_tables=f"{_HERE}.tables:write_tables",
    rules=f"{_HERE}.rules:rules_of_thumb",
    macros=f"{_HERE}.macros:macros",
    compare=f"{_HERE}.compare:compare_runs",
    check_config=f"{_HERE}.grid:check_config",
    skip_analysis_without_data=True,   # until results/h200/paged_kv/ is measured and committed
    cost_minutes=(7.0, 3.5),         # (compile on 16 cores, measure on one H200): schedule only
)
