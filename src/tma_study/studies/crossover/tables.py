"""Tables of the crossover study (paper/tables/crossover_*.tex|md)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.tables import human_bytes, run_table, source_line, write_table

MECHANISM_LABELS = {"tma_tile": "TMA tensor tile", "bulk_copy": "bulk copy (1-D)",
                    "cp_async": "cp.async 16 B", "plain_loads": "plain LDG.128"}


def summary_table(peaks: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in peaks.sort_values(["working_set", "gbps"], ascending=[True, False]).itertuples():
        rows.append({
            "working set": r.working_set, "mechanism": MECHANISM_LABELS.get(r.mechanism, r.mechanism),
            "best GB/s": f"{r.gbps:.0f}",
            # the copy ceiling is an HBM number: against L2 streams it would read as > 100 %
            "% of D2D copy": f"{100 * r.fraction_of_d2d_copy:.1f}" if r.working_set == "hbm" else "n/a",
            "% of read stream": f"{100 * r.fraction_of_read_stream:.1f}",
            "at transfer": human_bytes(r.bytes_per_transfer),
            "ring/SM, stages, CTAs/SM, consumers+producers, issuers": (
                f"{human_bytes(r.best_ring_bytes_per_sm)}, {r.stages}, {r.ctas_per_sm}, "
                f"{r.consumer_threads}+{r.producer_threads}, {r.issue_threads}"),
        })
    return pd.DataFrame(rows)


def crossover_table(crossover: pd.DataFrame) -> pd.DataFrame:
    def describe(r):
        if r.tma_never_loses:
            return f"TMA never slower (from {human_bytes(r.smallest_size_bytes)})"
        if r.tma_never_catches_up:
            return f"TMA slower up to {human_bytes(r.largest_size_bytes)}"
        return f"{human_bytes(r.crossover_bracket_low_bytes)} < x <= {human_bytes(r.crossover_bytes)}"

    rows = [{"working set": r.working_set,
             "ring bytes/SM": "best of all" if r.ring_bytes_per_sm == 0 else human_bytes(r.ring_bytes_per_sm),
             "TMA vs": MECHANISM_LABELS.get(r.alternative, r.alternative),
             "crossover transfer size": describe(r),
             "TMA/alt at smallest": f"{r.ratio_at_smallest:.2f}",
             "TMA/alt at largest": f"{r.ratio_at_largest:.2f}"}
            for r in crossover.itertuples()]
    return pd.DataFrame(rows)


CHAIN_LABELS = {"full": "full chain", "one_thread": "one thread", "issue_to_arrival": "issue-arrival, try_wait",
                "issue_to_arrival_hint": "issue-arrival, hint",
                "issue_to_arrival_test_wait": "issue-arrival, test_wait"}
CHAIN_MECHANISMS = {"tma_tile": "TMA", "bulk_copy": "bulk", "cp_async": "cp.async", "plain_loads": "plain"}
LEVEL_LABELS = {"hbm": "HBM", "l2": "L2"}


def latency_chain_table(chain: pd.DataFrame) -> pd.DataFrame:
    """One row per (size, level, chase form): each mechanism's cycles per transfer, and TMA's
    difference to cp.async and to plain loads in the same form."""
    if chain.empty:
        return pd.DataFrame({"chase form": ["not measured: this run chased the full chain only"]})
    rows = []
    for (size, level, step, form), group in chain.groupby(["bytes_per_transfer", "level", "step", "chain"]):
        cycles = group.set_index("mechanism").cycles_per_transfer_median
        tma = group[group.mechanism == "tma_tile"]

        def cell(value):
            return "" if pd.isna(value) else f"{value:.0f}"

        rows.append({"transfer": human_bytes(size), "from": LEVEL_LABELS.get(level, level),
                     "chase form": CHAIN_LABELS.get(form, form),
                     **{CHAIN_MECHANISMS[m]: cell(cycles.get(m, float("nan"))) for m in CHAIN_MECHANISMS},
                     "TMA - cp.async": cell(tma.cycles_minus_cp_async.iloc[0]) if len(tma) else "",
                     "TMA - plain": cell(tma.cycles_minus_plain_loads.iloc[0]) if len(tma) else ""})
    return pd.DataFrame(rows)


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    write_table(summary_table(pd.read_csv(derived_dir / "peaks.csv")), tables_dir, "crossover_summary",
                "Best streaming bandwidth of each load mechanism (each tuned by the same sweep), "
                f"as a share of the ceilings measured in the same run. {source}.")
    write_table(crossover_table(pd.read_csv(derived_dir / "crossover.csv")), tables_dir,
                "crossover_crossovers",
                "Transfer size from which a TMA tensor load is never slower than each alternative "
                f"(ties within the measured spread count as not slower). {source}.")
    write_table(latency_chain_table(pd.read_csv(derived_dir / "latency_chain.csv")), tables_dir,
                "crossover_latency_chain",
                "Latency of one dependent transfer (SM cycles, median of repeats) in each chase form, each "
                "dropping one cost of the one above: full chain (every thread of the CTA issues its share and "
                "waits on the mbarrier, one __syncthreads per hop); one thread (the same kernel in a one-thread "
                "CTA); issue-arrival (one thread, the bare transfer, a try_wait loop: the published chase), then "
                "with a suspend-time hint or a test_wait poll instead. Plain loads wait on registers: their "
                f"try_wait row stands for every wait form. {source}.")
    write_table(run_table(provenance), tables_dir, "crossover_run",
                "How the crossover data were measured (from provenance.json).")
    repeat = pd.read_csv(derived_dir / "reproducibility.csv")
    write_table(reproducibility_table(repeat), tables_dir, "crossover_reproducibility",
                "Reproducibility: two runs of the same sweep on the same GPU, relative difference of "
                f"the median GB/s of each configuration (|a - b| / mean). {source}.")


def reproducibility_table(repeat: pd.DataFrame) -> pd.DataFrame:
    if "configurations" not in repeat:
        return pd.DataFrame({"compared": repeat.compared, "result": ["not measured: no second run present"]})

    def pct(value):
        return "" if pd.isna(value) else f"{100 * value:.1f}"

    return pd.DataFrame([{
        "compared": r.compared, "n": int(r.configurations),
        "median |diff| %": pct(getattr(r, "median_relative_difference", float("nan"))),
        "p90 |diff| %": pct(getattr(r, "p90_relative_difference", float("nan"))),
        "max |diff| %": pct(getattr(r, "max_relative_difference", float("nan"))),
        "within 5 % (share %)": pct(getattr(r, "share_within_5_percent", float("nan"))),
        "identical (share %)": pct(getattr(r, "share_identical", float("nan"))),
    } for r in repeat.itertuples()])
