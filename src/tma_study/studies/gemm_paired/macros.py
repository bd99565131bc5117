"""The gemm_paired study's numbers for the paper's text (entry point ``macros``).

Names: ``gemmPaired<What><State>`` with State Burst or Sustained (bar.csv's best candidate and
states.csv's cuBLAS row of that state), and a few over the run.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.numbers import camel, number, percent, ratio
from tma_study.report.tables import latex_escape


def macros(derived_dir: Path, provenance: dict) -> dict[str, str]:
    derived_dir = Path(derived_dir)
    config = provenance.get("config", {})
    out = {camel("gemm paired", "size"): number(config.get("size", float("nan"))),
           camel("gemm paired", "cooldown s"): number(config["bursts"]["cooldown_s"], 1),
           camel("gemm paired", "warmup s"): number(config["sustained"]["warmup_s"], 0),
           camel("gemm paired", "burst launches"): number(config["bursts"]["launches_per_sample"]),
           camel("gemm paired", "sustained launches"): number(config["sustained"]["launches_per_sample"])}
    best = pd.read_csv(derived_dir / "bar.csv")
    for r in best.itertuples():
        words = ("gemm paired", r.state)
        out[camel(*words, "best")] = latex_escape(r.variant)
        out[camel(*words, "percent cublas")] = percent(r.abba_median)
        out[camel(*words, "percent cublas qone")] = percent(r.abba_q1)
        out[camel(*words, "percent cublas qthree")] = percent(r.abba_q3)
        out[camel(*words, "percent cublas min")] = percent(r.abba_min)
        out[camel(*words, "percent cublas max")] = percent(r.abba_max)
        out[camel(*words, "cublas first percent")] = percent(r.cublas_first_median)
        out[camel(*words, "candidate first percent")] = percent(r.candidate_first_median)
        out[camel(*words, "pairs")] = number(r.pairs)
        out[camel(*words, "candidates")] = number(r.candidates)
        out[camel(*words, "tflops")] = number(r.candidate_tflops_median)
        out[camel(*words, "clock mhz")] = number(r.candidate_sm_clock_mhz_mean_median)
        if "cublas_tflops_first" in best:
            for side in ("cublas", "candidate"):
                for slot in ("first", "second"):
                    out[camel(*words, side, "tflops", slot)] = number(getattr(r, f"{side}_tflops_{slot}"))
        if "warm_median" in best and pd.notna(r.warm_median):
            out[camel(*words, "warm percent cublas")] = percent(r.warm_median)
            out[camel(*words, "warm percent cublas low")] = percent(r.warm_low)
            out[camel(*words, "warm percent cublas high")] = percent(r.warm_high)
    for r in pd.read_csv(derived_dir / "states.csv").itertuples():
        words = ("gemm paired", r.state)
        out[camel(*words, "cublas tflops")] = number(r.cublas_tflops_median)
        out[camel(*words, "cublas clock mhz")] = number(r.cublas_sm_clock_mhz_median)
        out[camel(*words, "cublas power w")] = number(r.cublas_power_w_median)
        out[camel(*words, "power capped percent")] = percent(r.power_capped_fraction, 0)
        if r.state == "burst" and "cublas_clock_over_sustained" in r._fields:
            out[camel("gemm paired", "burst clock over sustained")] = ratio(r.cublas_clock_over_sustained)
            out[camel("gemm paired", "burst tflops over sustained")] = ratio(r.cublas_tflops_over_sustained)
    return out
