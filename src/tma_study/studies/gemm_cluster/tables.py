"""Tables of the gemm_cluster study (paper/tables/gemm_cluster_*.tex|md)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study import rule_scores
from tma_study.gemm_lib.kernel_table import kernels_table
from tma_study.gemm_lib.rows import TIE_TOLERANCE, with_accumulation
from tma_study.report.tables import run_table, source_line, write_table

DTYPE_WORDS = {"bf16": "bf16", "fp8_e4m3": "fp8"}
BASELINE_WORDS = {"default_order": "1x1 at swizzle 1", "best_order": "best vs best"}


def _num(value, digits: int = 2) -> str:
    return "" if pd.isna(value) else f"{value:.{digits}f}"


def _gain(row, prefix: str) -> str:
    """'1.23 (1.20-1.25) win': the median per-round gain, its quartiles and verdict."""
    median = getattr(row, f"{prefix}_gain", float("nan"))
    if pd.isna(median):
        return ""
    q1, q3 = getattr(row, f"{prefix}_gain_q1"), getattr(row, f"{prefix}_gain_q3")
    return f"{median:.3f} ({q1:.3f}-{q3:.3f}) {getattr(row, f'{prefix}_verdict')}"


def _order(swizzle, raster) -> str:
    return f"{int(swizzle)}" + ("" if raster == "heuristic" else f" {raster}")


def gains_table(gains: pd.DataFrame) -> pd.DataFrame:
    """Per (shape, cluster variant): the three gains, each with its quartiles over the rounds."""
    rows = []
    for r in gains.itertuples():
        rows.append({"dtype": DTYPE_WORDS.get(r.dtype, r.dtype), "size": str(r.size), "family": r.family,
                     "cluster": r.cluster,
                     "gain at swizzle 1": _gain(r, "default"),
                     "gain best vs best": _gain(r, "fair"),
                     "1x1 best vs swizzle 1": _gain(r, "one_order"),
                     "best swizzle (cluster / 1x1)": f"{_order(r.best_swizzle, r.best_raster_order)} / "
                                                     f"{_order(r.one_best_swizzle, r.one_best_raster_order)}",
                     "TFLOP/s best": _num(r.best_tflops, 0), "1x1 TFLOP/s best": _num(r.one_best_tflops, 0)})
    return pd.DataFrame(rows)


def tile_order_table(tile_order: pd.DataFrame) -> pd.DataFrame:
    """Per (shape, variant): TFLOP/s at the default order and at the best, and the gain between them."""
    return pd.DataFrame([{"dtype": DTYPE_WORDS.get(r.dtype, r.dtype), "size": str(r.size), "family": r.family,
                          "cluster": r.cluster, "TFLOP/s swizzle 1": _num(getattr(r, "default_tflops", None), 0),
                          "best swizzle": _order(r.best_swizzle, r.best_raster_order),
                          "TFLOP/s best": _num(r.best_tflops, 0), "best over swizzle 1": _gain(r, "order")}
                         for r in tile_order.itertuples()])


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in summary.itertuples():
        row = {"dtype": DTYPE_WORDS.get(r.dtype, r.dtype), "cluster": r.cluster, "comparisons": str(r.comparisons)}
        for prefix, words in (("default", "at swizzle 1"), ("fair", "best vs best"), ("one_order", "1x1 order")):
            if hasattr(r, f"{prefix}_gain_median"):
                row[f"median gain {words}"] = _num(getattr(r, f"{prefix}_gain_median"), 3)
                row[f"W/T/L {words}"] = "/".join(str(getattr(r, f"{prefix}_{v}s")) for v in ("win", "tie", "loss"))
        rows.append(row)
    return pd.DataFrame(rows)


def rule_table(rule: pd.DataFrame) -> pd.DataFrame:
    if "baseline" not in rule:
        return pd.DataFrame([{"rule": "multicast", "status": r.status} for r in rule.itertuples()])
    return pd.DataFrame([{"baseline": BASELINE_WORDS.get(r.baseline, r.baseline), "operands in": r.working_set,
                          "scope": r.scope, "comparisons": str(r.comparisons),
                          "predicted not faster": str(r.predicted_not_faster),
                          "GEMM W/T/L": f"{r.gemm_wins}/{r.gemm_ties}/{r.gemm_losses}",
                          "not faster held": "" if pd.isna(r.fraction_not_faster_held)
                          else f"{100 * r.fraction_not_faster_held:.0f} %"}
                         for r in rule.itertuples()])


def write_kernel_table(study, kernels_csv: Path, tables_dir: Path) -> None:
    """paper/tables/gemm_cluster_kernels.*: the variants the data were measured with."""
    kernels = with_accumulation(pd.read_csv(kernels_csv))
    write_table(kernels_table(kernels), tables_dir, f"{study.name}_kernels",
                "The gemm_cluster variants (the gemm study's CUTLASS 4.2 objects, nvcc -O3 -DNDEBUG): registers, "
                "pipeline stages, shared memory and the SASS that shows each uses TMA (multicast in the clusters).")


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    verdicts = (f"win or loss: beyond the larger of {100 * TIE_TOLERANCE:.0f} % and the per-round gains' "
                "interquartile range over their median, else tie")
    write_table(gains_table(pd.read_csv(derived_dir / "gains.csv")), tables_dir, "gemm_cluster_gains",
                "Each TMA cluster variant over its 1x1 sibling, round by round in one power state: at the "
                "scheduler's default tile order (swizzle 1, as the gemm study timed them), each at its best tile "
                "order, and the 1x1's own best order over swizzle 1. Median of the per-round gains (quartiles; "
                f"{verdicts}). {source}.")
    write_table(tile_order_table(pd.read_csv(derived_dir / "tile_order.csv")), tables_dir, "gemm_cluster_tile_order",
                "The tile-order effect: every variant's best scheduler swizzle (and raster order, where not the "
                f"heuristic) against swizzle 1, median of the per-round gains (quartiles; {verdicts}). {source}.")
    write_table(summary_table(pd.read_csv(derived_dir / "summary.csv")), tables_dir, "gemm_cluster_summary",
                "Per input type and cluster shape, over the families and sizes: the median gain over the 1x1 "
                f"sibling at swizzle 1 and best against best, and the wins, ties and losses (W/T/L). {source}.")
    write_table(rule_table(pd.read_csv(derived_dir / "rule.csv")), tables_dir, "gemm_cluster_rule",
                "The multicast microbenchmark's verdict (the 2-D pattern's multicast against own copies at the "
                "cluster shape and A tile size, as the gemm study scores it) against the GEMM, at each baseline: "
                f"how often its prediction that multicast is not faster holds. {source}.")
    write_table(rule_scores.table(pd.read_csv(derived_dir / "rule_baselines.csv"), ["baseline", "working_set"]),
                tables_dir, "gemm_cluster_rule_baselines",
                "The multicast microbenchmark's verdict as a prediction of each cluster comparison (win, or not "
                "faster) beside the trivial baselines on the same comparisons: the share each names right with a "
                "bootstrap 95 % interval (comparisons resampled), and the rule's margin over the best baseline "
                f"(paired resamples); a rule is predictive only where that interval lies above 0. {source}.")
    write_table(run_table(provenance), tables_dir, "gemm_cluster_run",
                "How the gemm_cluster data were measured (from provenance.json).")
