"""Tables of the gemm_cluster_counters study (paper/tables/gemm_cluster_counters_*.tex|md)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study import rule_scores
from tma_study.gemm_lib.kernel_table import kernels_table
from tma_study.gemm_lib.rows import with_accumulation
from tma_study.report.tables import run_table, source_line, write_table

DTYPE_WORDS = {"bf16": "bf16", "fp8_e4m3": "fp8"}


def _num(value, digits: int = 2) -> str:
    return "" if pd.isna(value) else f"{value:.{digits}f}"


def _order(r) -> str:
    return f"{int(r.swizzle)}" + ("" if r.raster_order == "heuristic" else f" {r.raster_order}")


def counters_table(counters: pd.DataFrame) -> pd.DataFrame:
    """Per variant at its best tile order: rate, stage period, L2 traffic and how busy each unit was."""
    best = counters[counters.order == "best"]
    return pd.DataFrame([{"dtype": DTYPE_WORDS.get(r.dtype, r.dtype), "family": r.family, "cluster": r.cluster,
                          "swizzle": _order(r), "TFLOP/s": _num(r.tflops, 0),
                          "cycles / k-block": _num(r.cycles_per_kblock, 0),
                          "L2 reads / operand B": _num(r.l2_reads_per_operand_byte),
                          "L2->SM TB/s": _num(r.l2_read_tbps, 1),
                          "L2 req / SM cycle": _num(r.l2_requests_per_sm_cycle),
                          "B / L2 req": _num(r.bytes_per_l2_request, 0),
                          "L2 %": _num(r.l2_throughput_pct, 0), "L2 tag %": _num(r.l2_tag_requests_pct, 0),
                          "tensor %": _num(r.tensor_active_pct, 0),
                          "DRAM reads / operand B": _num(r.dram_reads_per_operand_byte)}
                         for r in best.itertuples()])


def _timed(r) -> str:
    """'1.175 win': the gemm_cluster run's fair gain of the pair and its verdict ('' where it has none)."""
    gain, verdict = getattr(r, "timed_fair_gain", float("nan")), getattr(r, "timed_fair_verdict", "")
    return f"{_num(gain, 3)} {verdict if isinstance(verdict, str) else ''}".strip()


def contrast_table(contrast: pd.DataFrame) -> pd.DataFrame:
    """Per cluster variant: what changes against the 1x1 sibling (both at their best orders)."""
    rows = []
    for r in contrast.itertuples():
        rows.append({"dtype": DTYPE_WORDS.get(r.dtype, r.dtype), "family": r.family, "cluster": r.cluster,
                     "timed gain": _timed(r),
                     "counted TFLOP/s ratio": _num(r.tflops_ratio, 3),
                     "cycles / k-block (1x1)": f"{_num(r.cycles_per_kblock, 0)} ({_num(r.one_cycles_per_kblock, 0)})",
                     "L2 reads / operand B (1x1)": f"{_num(r.l2_reads_per_operand_byte)} "
                                                   f"({_num(r.one_l2_reads_per_operand_byte)})",
                     "L2 req / SM cycle (1x1)": f"{_num(r.l2_requests_per_sm_cycle)} "
                                                f"({_num(r.one_l2_requests_per_sm_cycle)})",
                     "L2 % (1x1)": f"{_num(r.l2_throughput_pct, 0)} ({_num(r.one_l2_throughput_pct, 0)})",
                     "tensor % (1x1)": f"{_num(r.tensor_active_pct, 0)} ({_num(r.one_tensor_active_pct, 0)})"})
    return pd.DataFrame(rows)


def _families(text) -> str:
    """'fp8_e4m3/tma_pingpong_t128x128x64 ...' as words ('no family' where none, read back as NaN)."""
    return text.replace("_", " ") if isinstance(text, str) and text else "no family"


def rule_table(rule: pd.DataFrame) -> pd.DataFrame:
    if "comparisons" not in rule:
        return pd.DataFrame([{"scope": r.scope, "status": r.status} for r in rule.itertuples()])
    return pd.DataFrame([{"size": r.scope, "comparisons": str(r.comparisons), "predicted wins": str(r.predicted_wins),
                          "GEMM wins": str(r.gemm_wins), "GEMM wins predicted": str(r.gemm_wins_predicted),
                          "agree": f"{r.agree} ({100 * r.fraction_agree:.0f} %)"} for r in rule.itertuples()])


def write_kernel_table(study, kernels_csv: Path, tables_dir: Path) -> None:
    """paper/tables/gemm_cluster_counters_kernels.*: the variants the counters were read from."""
    kernels = with_accumulation(pd.read_csv(kernels_csv))
    write_table(kernels_table(kernels), tables_dir, f"{study.name}_kernels",
                "The gemm_cluster_counters variants (the gemm study's CUTLASS 4.2 objects, nvcc -O3 -DNDEBUG).")


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    size = provenance.get("config", {}).get("size", "")
    write_table(counters_table(pd.read_csv(derived_dir / "counters.csv")), tables_dir, "gemm_cluster_counters",
                f"Nsight Compute's counters of one launch of each TMA GEMM variant at its best tile order, M = N = K = "
                f"{size}. A k-block is one pipeline stage of one CTA tile; cycles per k-block are SM cycles times "
                "the SMs over the problem's k-blocks. L2 reads per operand byte: L2-to-SM bytes over the bytes every "
                "CTA would read with its own copies (a multicast operand is read once per cluster). L2 %, tag % and "
                f"tensor %: shares of the unit's peak (ncu). DRAM reads per operand byte: over A and B once. {source}.")
    write_table(contrast_table(pd.read_csv(derived_dir / "contrast.csv")), tables_dir,
                "gemm_cluster_counters_contrast",
                "Each cluster variant against its 1x1 sibling, both at their best tile order: the gain the "
                "gemm_cluster run timed (round-robin, median of the per-round gains, with its verdict), the ratio of "
                f"the counted launches' rates, and the counters of both (the 1x1's in parentheses). {source}.")
    rule = pd.read_csv(derived_dir / "rule.csv")
    bound = ""
    if "tag_bound_pct" in rule:
        bound = (f" (the 1x1's L2 tag lookups at {rule.tag_bound_pct.iloc[0]:.0f} % of their peak or more, its tensor "
                 f"pipe busy {rule.tensor_idle_pct.iloc[0]:.0f} % of its active cycles or less: "
                 f"{_families(rule.bound_families.iloc[0])})")
    write_table(rule_table(rule), tables_dir, "gemm_cluster_counters_rule",
                "The counters' verdict against the GEMM: a cluster is predicted to beat its best-ordered 1x1 sibling "
                f"exactly where the 1x1 is L2-request bound at M = N = K = {size}{bound}; scored against the "
                f"gemm_cluster run's fair verdicts at every size it timed. {source}.")
    write_table(rule_scores.table(pd.read_csv(derived_dir / "rule_baselines.csv"), ["rule", "scope"]), tables_dir,
                "gemm_cluster_counters_rule_baselines",
                "The counters' rule beside its trivial baselines on the same cluster comparisons: the share it names "
                "right (win, or not faster) with a bootstrap 95 % interval (comparisons resampled), and its margin over "
                "the best baseline (paired resamples); a rule is predictive only where that interval lies above 0. "
                "counters: the thresholds chosen on these counters (in sample); counters_cross_validated: each size "
                f"predicted with the thresholds that name the other sizes' verdicts best. {source}.")
    write_table(run_table(provenance), tables_dir, "gemm_cluster_counters_run",
                "How the gemm_cluster_counters data were measured (from provenance.json).")
