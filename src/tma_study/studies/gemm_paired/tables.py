"""Tables of the gemm_paired study (paper/tables/gemm_paired_*.tex|md)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.gemm_lib.kernel_table import kernels_table
from tma_study.gemm_lib.rows import with_accumulation
from tma_study.report.tables import run_table, source_line, write_table

STATE_WORDS = {"burst": "bursts (unthrottled)", "sustained": "sustained (power-limited)"}


def _pct(value) -> str:
    return "" if pd.isna(value) else f"{100 * value:.1f}"


def _num(value, digits: int = 0) -> str:
    return "" if pd.isna(value) else f"{value:.{digits}f}"


def ratios_table(ratios: pd.DataFrame) -> pd.DataFrame:
    """Per state and candidate: the ABBA ratio's median and spread (the bar's estimator), the
    pairs' medians by which kernel opened the pair (the first slot's advantage), the ratio warm against
    warm (each kernel where it ran second) with its bootstrap interval, each side's medians."""
    rows = []
    for r in ratios.sort_values(["state", "abba_median"], ascending=[True, False]).itertuples():
        rows.append({"state": STATE_WORDS.get(r.state, r.state), "candidate": r.variant, "pairs": str(r.pairs),
                     "% of cuBLAS (ABBA median)": _pct(r.abba_median),
                     "ABBA IQR": f"{_pct(r.abba_q1)}-{_pct(r.abba_q3)}",
                     "cuBLAS first": _pct(r.cublas_first_median),
                     "candidate first": _pct(r.candidate_first_median),
                     **({"warm vs warm [95 %]": f"{_pct(r.warm_median)} [{_pct(r.warm_low)}, {_pct(r.warm_high)}]"}
                        if hasattr(r, "warm_median") else {}),
                     "TFLOP/s / cuBLAS": f"{_num(r.candidate_tflops_median)} / {_num(r.cublas_tflops_median)}",
                     "MHz / cuBLAS": (f"{_num(r.candidate_sm_clock_mhz_mean_median)} / "
                                      f"{_num(r.cublas_sm_clock_mhz_mean_median)}"),
                     "W / cuBLAS": f"{_num(r.candidate_power_w_mean_median)} / {_num(r.cublas_power_w_mean_median)}",
                     "clears 95 %": "yes" if r.passes else "no"})
    return pd.DataFrame(rows)


def states_table(states: pd.DataFrame) -> pd.DataFrame:
    """The two states as cuBLAS saw them."""
    return pd.DataFrame([{"state": STATE_WORDS.get(r.state, r.state), "cuBLAS samples": str(r.cublas_samples),
                          "launches per sample": str(r.launches_per_sample), "idle before pair s": _num(r.cooldown_s, 2),
                          "cuBLAS TFLOP/s": _num(r.cublas_tflops_median), "SM MHz": _num(r.cublas_sm_clock_mhz_median),
                          "power W": _num(r.cublas_power_w_median), "max temp C": _num(r.temperature_c_max),
                          "samples power-capped %": _pct(r.power_capped_fraction)}
                         for r in states.itertuples()])


def write_kernel_table(study, kernels_csv: Path, tables_dir: Path) -> None:
    """paper/tables/gemm_paired_kernels.*: the candidates the data were measured with."""
    kernels = with_accumulation(pd.read_csv(kernels_csv))
    write_table(kernels_table(kernels), tables_dir, f"{study.name}_kernels",
                "The gemm_paired candidates (the gemm study's CUTLASS 4.2 objects, nvcc -O3 -DNDEBUG): registers, "
                "pipeline stages, shared memory and the SASS that shows each uses TMA.")


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    write_table(ratios_table(pd.read_csv(derived_dir / "ratios.csv")), tables_dir, "gemm_paired_ratios",
                "Each bar candidate against cuBLAS in one power state: the paired ratio (cuBLAS's time over the "
                "candidate's, in pairs of back-to-back samples, alternating which runs first), its median, "
                "interquartile range and range over the pairs, warm against warm (cuBLAS's time where it ran second "
                "over the candidate's where it ran second, per two consecutive pairs; bootstrap 95 % interval), and "
                f"each side's median TFLOP/s, SM clock and power (NVML, while the sample ran). {source}.")
    write_table(states_table(pd.read_csv(derived_dir / "states.csv")), tables_dir, "gemm_paired_states",
                "The two power states as cuBLAS's samples saw them: bursts, each pair after an idle cool-down, "
                f"and sustained load, back to back after a warm-up. {source}.")
    write_table(run_table(provenance), tables_dir, "gemm_paired_run",
                "How the gemm_paired data were measured (from provenance.json).")
