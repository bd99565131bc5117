"""Tables of the gemm study (paper/tables/gemm_*.tex|md): ``write_tables`` from its derived data,
``write_kernel_table`` (its ``kernel_table`` entry point) from results/<gpu>/gemm/kernels.csv.

Rows that were not measured say so ("NOT MEASURED: ..."), with the reason from the data.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study import rule_scores
from tma_study.harness import l2_state
from tma_study.gemm_lib.kernel_table import ACCUMULATION_LABEL, kernels_table
from tma_study.gemm_lib.rows import (
    ACCUMULATION_COLUMN,
    BAR_FRACTION,
    FLOOR_TOLERANCE,
    MEASURED,
    NOT_MEASURED_TEXT,
    TIE_TOLERANCE,
    TimingLimits,
    with_accumulation,
)
from tma_study.report.tables import source_line, write_paragraph_table, write_table

LOAD_LABEL = {"tma": "TMA", "cpasync": "cp.async", "mixed": "mixed", "cublas": "cuBLAS"}


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path)


def _not_measured(frame: pd.DataFrame) -> bool:
    return "status" in frame.columns and len(frame) == 1 and str(frame.status.iloc[0]).startswith(NOT_MEASURED_TEXT)


def _mhz(value) -> str:
    return "n/a" if pd.isna(value) else f"{value:.0f}"


def bar_table(bar: pd.DataFrame) -> pd.DataFrame:
    """One key/value row per fact: the result, the samples and clocks behind it, and the
    candidates that could not be measured (the best is only over those that were)."""
    r = bar.iloc[0]
    rows = [("shape, dtype", f"{r['shape']} {r['dtype']}")]
    if r.status != MEASURED:
        rows.append(("result", r.status))
    else:
        rows += [("best measured SM90 TMA variant", r.variant),
                 ("TFLOP/s (TMA / cuBLAS)", f"{r.tflops:.1f} / {r.cublas_tflops:.1f}"),
                 ("% of cuBLAS", f"{100 * r.fraction_of_cublas:.1f}"),
                 (f"bar >= {100 * BAR_FRACTION:.0f} %", "met" if r.passes else "NOT met"),
                 ("samples (TMA / cuBLAS)", f"{r.samples:.0f} / {r.cublas_samples:.0f}"),
                 ("mean SM clock, MHz (TMA / cuBLAS)", f"{_mhz(r.sm_clock_mhz)} / {_mhz(r.cublas_sm_clock_mhz)}")]
        if "clock_ratio" in bar.columns:        # derived data written before the clock columns lack them
            rows += [("clock ratio TMA / cuBLAS", f"{r.clock_ratio:.3f}"
                      + (" (clocks differ: the comparison is clock-confounded)" if r.clocks_differ else "")),
                     ("per clock: TFLOP/s per GHz (TMA / cuBLAS), % of cuBLAS",
                      (f"{r.tflops_per_ghz:.1f} / {r.cublas_tflops_per_ghz:.1f}, "
                       f"{100 * r.fraction_of_cublas_per_clock:.1f}"))]
    if "tma_candidates" in bar.columns:
        missing = int(r.tma_not_measured)
        rows.append(("TMA candidates measured", f"{int(r.tma_measured)} of {int(r.tma_candidates)}"))
        rows.append(("TMA candidates NOT MEASURED",
                     f"{missing}: {r.tma_not_measured_variants} ({r.not_measured_reason})" if missing else "none"))
    return pd.DataFrame(rows, columns=["", "value"])


def _accumulation_labels(values) -> str:
    """The distinct accumulations of some rows, as printed; rows without one (e.g. a cuBLAS run
    that was not measured at that shape) are left out, and 'n/a' says that none had one."""
    labels = sorted({ACCUMULATION_LABEL.get(v, v) for v in values if isinstance(v, str)})
    return "+".join(labels) if labels else "n/a"


def speedup_table(speedup: pd.DataFrame) -> pd.DataFrame:
    if _not_measured(speedup):
        return speedup[["status"]]
    best = speedup[speedup.compared == "best"]
    rows = []
    for (arch, dtype, family), group in best.groupby(["arch", "dtype", "family"]):
        row = {"arch": arch, "dtype": dtype, "shapes": family, "count": len(group)}
        if "tma_accumulation" in group.columns:
            row["accumulation (TMA / cp.async / cuBLAS)"] = " / ".join(
                _accumulation_labels(group[f"{side}_accumulation"]) for side in ("tma", "cpasync", "cublas"))
        row |= {"TMA/cp.async median": f"{group.speedup.median():.2f}",
                "min": f"{group.speedup.min():.2f}", "max": f"{group.speedup.max():.2f}",
                "TMA wins / ties / cp.async wins": (f"{(group.winner == 'tma').sum()} / "
                                                    f"{(group.winner == 'tie').sum()} / "
                                                    f"{(group.winner == 'cpasync').sum()}")}
        if "tma_not_measured" in group.columns:
            row["candidates NOT MEASURED (TMA / cp.async)"] = (f"{int(group.tma_not_measured.sum())} of "
                                                               f"{int(group.tma_candidates.sum())} / "
                                                               f"{int(group.cpasync_not_measured.sum())} of "
                                                               f"{int(group.cpasync_candidates.sum())}")
        if "clock_ratio" in group.columns:
            row["SM clock TMA/cp.async median (min-max)"] = _ratio_range(group.clock_ratio)
        rows.append(row)
    return pd.DataFrame(rows)


def _ratio_range(values: pd.Series) -> str:
    """'0.97 (0.91-1.04)': a ratio's median and range, or 'n/a' without values."""
    values = values.dropna()
    return f"{values.median():.2f} ({values.min():.2f}-{values.max():.2f})" if len(values) else "n/a"


def multicast_table(summary: pd.DataFrame) -> pd.DataFrame:
    if _not_measured(summary):
        return summary[["status"]]
    rows, said = [], set()
    for r in summary.itertuples():
        if getattr(r, "status", MEASURED) != MEASURED:      # one row per architecture and reason
            if (r.arch, r.status) not in said:
                said.add((r.arch, r.status))
                rows.append({"arch": r.arch, "dtype": "all", "cluster (M x N)": "all",
                             "median gain over 1x1": r.status})
            continue
        row = {"arch": r.arch, "dtype": r.dtype, "cluster (M x N)": r.cluster,
               "median gain over 1x1": f"{r.median_gain:.3f}", "min": f"{r.min_gain:.3f}",
               "max": f"{r.max_gain:.3f}", "wins / losses / comparisons": f"{r.wins} / {r.losses} / {r.comparisons}"}
        if hasattr(r, "median_gain_every_cta_busy"):
            row["median, every CTA with a tile (comparisons)"] = (
                f"{r.median_gain_every_cta_busy:.3f} ({r.comparisons_every_cta_busy})"
                if r.comparisons_every_cta_busy else "none")
            row["not compared"] = str(r.not_compared)
        if hasattr(r, "median_clock_ratio"):
            row["median SM clock ratio (clocks differ)"] = f"{r.median_clock_ratio:.2f} ({r.comparisons_clocks_differ})"
        rows.append(row)
    return pd.DataFrame(rows).fillna("")


def _crossover_result(r) -> str:
    text = (f"right {r.predicted_right:.0f}, wrong {r.predicted_wrong:.0f}, ties {r.ties:.0f} "
            f"of {r.comparisons:.0f} ({100 * r.fraction_right_of_decided:.0f} % of decided)")
    if getattr(r, "tma_spills", 0) and not pd.isna(r.tma_spills):
        text += (f"; {r.wrong_where_tma_spills:.0f} of the wrong ones time a TMA variant that spills registers "
                 f"(its cp.async partner does not); without those, right in "
                 f"{100 * r.fraction_right_without_spills:.0f} % of {r.decided_without_spills:.0f} decided")
    return text


def _multicast_result(r) -> str:
    text = (f"predicts win / tie / loss {r.predicted_wins:.0f} / {r.predicted_ties:.0f} / {r.predicted_losses:.0f}; "
            f"GEMM {r.gemm_wins:.0f} / {r.gemm_ties:.0f} / {r.gemm_losses:.0f} (median gain {r.median_gain:.2f}); "
            f"agrees in {r.agree:.0f} of {r.comparisons:.0f} ({100 * r.fraction_agree:.0f} %)")
    if r.not_faster_predicted:
        text += (f"; 'multicast not faster' holds in {r.not_faster_held:.0f} of {r.not_faster_predicted:.0f} "
                 f"({100 * r.fraction_not_faster_held:.0f} %)")
    return text + (f"; left out: {r.left_out_idle_ctas:.0f} with CTAs without a tile, "
                   f"{r.left_out_not_measured:.0f} not measured")


def _multicast_l2_result(r) -> str:
    start = ("no win in the sweep at this shape" if pd.isna(r.win_from_l2_read_fraction)
             else f"wins from {100 * r.win_from_l2_read_fraction:.0f} %")
    scope = "" if r.scope == "every cluster" else f" ({start})"
    return (f"right in {r.agree:.0f} of {r.comparisons:.0f} ({100 * r.fraction_agree:.0f} %){scope}: predicted wins "
            f"{r.predicted_wins:.0f}, GEMM wins {r.gemm_wins:.0f}; GEMM's own-copy L2 read rate a median "
            f"{100 * r.median_l2_read_fraction:.0f} % of the {r.l2_read_ceiling_gbps:.0f} GB/s ceiling; wrong: "
            f"{r.wrong_gemm_wins_below:.0f} GEMM wins below the boundary, {r.wrong_predicted_wins:.0f} predicted wins "
            f"that were not; of the wrong, {r.wrong_where_clocks_differ:.0f} with different SM clocks, "
            f"{r.wrong_in_two_waves_or_fewer:.0f} in grids of two waves or fewer, {r.wrong_unexplained:.0f} neither; "
            f"the best threshold per shape, chosen on these GEMM data, would be right in "
            f"{100 * r.best_threshold_fraction_agree:.0f} %")


def rules_table(rules: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in rules.itertuples():
        if r.status != MEASURED:
            rows.append({"rule": r.rule, "result": r.status})
        elif r.rule == "crossover":
            rows.append({"rule": f"crossover ({r.working_set}: TMA from {r.crossover_bytes:.0f} B)",
                         "result": _crossover_result(r)})
        elif r.rule == "multicast_l2":
            rows.append({"rule": f"multicast from the L2 read rate (compute sweep; {r.scope})",
                         "result": _multicast_l2_result(r)})
        else:
            rows.append({"rule": f"multicast ({r.working_set}, 2-D pattern at the A tile; {r.scope})",
                         "result": _multicast_result(r)})
    return pd.DataFrame(rows)


def status_table(status: pd.DataFrame) -> pd.DataFrame:
    return status.rename(columns={"rows": "rows (variant x shape)",
                                  "fewer_than_min_samples": "of them: fewer samples than min_samples",
                                  "at_throttle_floor": "of them: at the throttle floor"})


def fp8_accumulation_text(measured: pd.DataFrame) -> str:
    """How the run's fp8 rows accumulated, per load mechanism, e.g. 'TMA: promoted; cp.async: no
    promotion; cuBLAS: promoted'."""
    if ACCUMULATION_COLUMN not in measured.columns or "dtype" not in measured.columns:
        return "not recorded"
    fp8 = measured[measured.dtype == "fp8_e4m3"]
    if fp8.empty:
        return "no fp8 rows measured"
    loads = [load for load in LOAD_LABEL if (fp8.load == load).any()]          # TMA, cp.async, ..., cuBLAS
    parts = [f"{LOAD_LABEL[load]}: {_accumulation_labels(fp8.loc[fp8.load == load, ACCUMULATION_COLUMN])}"
             for load in loads]
    return "; ".join(parts)


def protocol_text(provenance: dict) -> tuple[str, str]:
    """(candidate order, pre-heat) of the run as the run table prints them; runs that predate
    protocol.py timed cuBLAS first in every group and pre-heated nothing."""
    p = provenance.get("protocol")
    if not p:
        order = ("cuBLAS first in every (shape, dtype) group, then the variants in config order "
                 "(the run predates the shuffled order)")
        return order, "none (the run predates the pre-heat)"
    preheat = (f"cuBLAS back to back for {p['preheat_s']} s before each group of >= {p['preheat_min_gflop']} "
               f"GFLOP ({p['preheat_groups_planned']} groups, {p['preheat_seconds_total']:.1f} s in all)"
               if p["preheat_s"] and p["preheat_groups_planned"] else "none")
    return f"shuffled within each (shape, dtype) group, seed {p['order_seed']}", preheat


def run_table(provenance: dict, measured: pd.DataFrame | None = None) -> pd.DataFrame:
    gpu = provenance.get("gpu", {})
    seconds = (pd.Timestamp(provenance["finished_utc"]) - pd.Timestamp(provenance["started_utc"])).total_seconds()
    packages = provenance.get("packages", {})
    rows = [("GPU", f"{gpu.get('name')} ({gpu.get('sm_count')} SMs)"),
            ("measured architecture", str(provenance.get("measured_arch"))),
            ("not measured", "; ".join(f"{a}: {why}" for a, why in (provenance.get("not_measured_arches") or {}).items())
             or "nothing"),
            ("configurations timed", str(provenance.get("configurations"))),
            ("measurement, start to finish", f"{int(seconds // 60)} min {int(seconds % 60)} s"),
            ("estimate printed before the run", f"{provenance.get('estimated_gpu_seconds')} s"),
            ("cuBLAS anchor", str(provenance.get("cublas"))),
            ("cuBLAS fp8 use_fast_accum", str(provenance["cublas_fp8_use_fast_accum"])
             if "cublas_fp8_use_fast_accum" in provenance else "not recorded (the run predates the key)"),
            ("nvidia-cutlass / torch / cuda-bench",
             " / ".join(str(packages.get(p)) for p in ("nvidia-cutlass", "torch", "cuda-bench"))),
            ("timer", str(provenance.get("timer"))),
            ("L2 at the start of each sample", l2_state.describe(provenance)),
            ("candidate order", protocol_text(provenance)[0]),
            ("pre-heat", protocol_text(provenance)[1])]
    if measured is not None:
        rows.insert(rows.index(next(r for r in rows if r[0] == "cuBLAS fp8 use_fast_accum")) + 1,
                    ("fp8 accumulation", fp8_accumulation_text(measured)))
    return pd.DataFrame(rows, columns=["", "value"])


def write_kernel_table(study, kernels_csv: Path, tables_dir: Path) -> None:
    """paper/tables/gemm_kernels.*: the variants the data were measured with (``study``: gemm's declaration)."""
    kernels = with_accumulation(pd.read_csv(kernels_csv))
    write_table(kernels_table(kernels), tables_dir, "gemm_kernels",
                "GEMM variants (CUTLASS 4.2, nvcc -O3 -DNDEBUG): how fp8 inputs accumulate (promoted into a "
                "separate fp32 register accumulator, or not), registers, pipeline stages, shared memory, "
                "compile time and the SASS that shows each uses the load mechanism it is named for.")


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    limits = TimingLimits.of(provenance)
    floor = (f"{limits.throttle_percent:.0f} % of the {limits.max_clock_mhz:.0f} MHz maximum, i.e. "
             f"{limits.floor_mhz:.0f} MHz" if limits.floor_mhz else f"{limits.throttle_percent:.0f} % of the maximum")
    write_paragraph_table(bar_table(_read(derived_dir / "bar.csv")), tables_dir, "gemm_bar",
                          "Best SM90 TMA GEMM at 8192^3 bf16 against cuBLAS (torch.matmul) in the same run. The "
                          "best is over the TMA candidates that were measured; nvbench discards samples taken "
                          f"below {floor} of SM clock, and a candidate none of whose samples cleared it is NOT "
                          "MEASURED. Per clock: TFLOP/s divided by each row's mean SM clock in GHz, a diagnostic "
                          "of clock-confounding (under the power cap a kernel's own draw sets part of its clock), "
                          f"not the result. {source}.", [5.0, 11.0])
    write_table(speedup_table(_read(derived_dir / "speedup.csv")), tables_dir, "gemm_speedup",
                "Best TMA variant over best cp.async variant per shape (TFLOP/s ratio; ties within 2 % "
                "or the runs' spread); the best of each mechanism is over its measured candidates (last column: "
                "how many were not measured). Accumulation: fp8 partial sums promoted into a separate fp32 "
                f"register accumulator every few MMAs, or not (the tensor cores' accumulator alone). SM clock: "
                "the TMA row's mean SM clock over the cp.async row's (1.00: same clock; a ratio further from 1 "
                f"than the speedup's margin can decide the comparison). {source}.")
    write_table(multicast_table(_read(derived_dir / "multicast_summary.csv")), tables_dir, "gemm_multicast",
                "TMA multicast: each cluster shape's TFLOP/s over the same variant with a 1x1 cluster; 'every CTA "
                "with a tile' leaves out problems with fewer tiles along M or N than the cluster has CTAs; SM "
                "clock ratio: the cluster variant's mean SM clock over the 1x1 variant's (comparisons whose "
                f"clocks differ by more than {100 * TIE_TOLERANCE:.0f} %). {source}.")
    write_paragraph_table(rules_table(_read(derived_dir / "rules.csv")), tables_dir, "gemm_rules",
                          "Do the crossover and multicast studies' rules predict the GEMM winner? Crossover: TMA "
                          "vs cp.async, same schedule and tile, 1x1 cluster. Multicast: each TMA cluster variant "
                          "over the same variant at 1x1, against the multicast study's 2-D verdict at the GEMM's "
                          "cluster shape and A tile; from the L2 read rate: win where the 1x1 variant's L2 read "
                          "rate (TFLOP/s x bytes per FLOP) reaches the fraction of the L2 read ceiling from which "
                          f"the multicast study's compute sweep saw multicast win at that shape. {source}.", [4.0, 12.0])
    write_table(rule_scores.table(_read(derived_dir / "rule_baselines.csv"), ["rule", "working_set", "scope"]),
                tables_dir, "gemm_rule_baselines",
                "Each rule of the gemm_rules table beside its trivial baselines on the same comparisons: the share "
                "it names right with a bootstrap 95 % interval (comparisons resampled), and its margin over the best "
                "baseline (paired resamples). A rule is predictive only where that interval lies above 0. The "
                "crossover and multicast rules' thresholds come from their own studies; the L2 read rate's, "
                f"cross-validated, from the other problem shapes. {source}.")
    write_table(status_table(_read(derived_dir / "status.csv")), tables_dir, "gemm_status",
                "What was measured, per architecture and load mechanism, and why the rest was not; of the "
                "measured rows, how many kept fewer samples than the run asked for (min_samples) and how many "
                f"averaged an SM clock within {100 * FLOOR_TOLERANCE:.0f} % above nvbench's throttle floor "
                f"({floor}). {source}.")
    measured = _read(derived_dir / "measured.csv")
    write_table(run_table(provenance, measured), tables_dir, "gemm_run", f"How the gemm data were measured. {source}.")
