"""The heldout study's raw samples -> one validation case per configuration (derived/cases.csv).

Per case: what the pointer kernel's loads compiled to (``alternatives``, from kernels.csv); the
median time of each kernel over its samples; the ratio of TMA's time to the pointer
kernel's within each pair (the two ran back to back in one power state); its median and a
bootstrap 95 % interval (pairs resampled, a fixed seed). TMA wins where the whole interval lies
below 1, the alternative (cp.async or plain loads, as the pointer kernel compiled) where it lies
above, else the two tie. The columns are the advisor's validation table's
(tma_study.advisor.validation.cases), plus the case's parameters and the advisor's hash.
``families.csv``: each family's cases, wins, ties and the range of its ratios.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tma_study.advisor.validation.cases import COLUMNS, TIE, TMA, winner
from tma_study.atomic import atomic_write_text
from tma_study.bootstrap import BOOTSTRAP_RESAMPLES, SEED
from tma_study.harness import raw_data

INTERVAL_METHOD = "bootstrap over the case's pairs (2000 resamples) of the median TMA / pointer time ratio"


def pair_ratios(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per case and pair: TMA's time over the pointer kernel's."""
    wide = samples.pivot_table(index=["case", "pair"], columns="variant", values="time_us").reset_index()
    wide["ratio"] = wide["tma"] / wide["pointer"]
    return wide


def ratio_interval(ratios: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    resampled = rng.choice(ratios, size=(BOOTSTRAP_RESAMPLES, len(ratios)), replace=True)
    medians = np.median(resampled, axis=1)
    return float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))


def operand_bytes(cases: pd.DataFrame) -> pd.Series:
    """Bytes of one transfer of the operand: its box, or its gathered row."""
    box = cases.box_dims.fillna("").map(lambda d: float(np.prod([int(v) for v in d.split("x")])) if d else np.nan)
    return (box * cases.element_bytes).fillna(cases.row_bytes)


def alternatives(cases: pd.DataFrame, kernels: pd.DataFrame) -> pd.Series:
    """What each pointer kernel's loads of the operand compiled to: cp.async where it issues more
    LDGSTS than the TMA kernel (whose own are index or page-table prefetches) and its shared memory
    holds at least one transfer of the operand; else plain loads (a row gather's short rows go
    straight to registers, only its index loads through cp.async). The raw ``alternative`` column
    was labelled by the LDGSTS count alone, which takes those index prefetches for the operand."""
    wide = kernels.pivot_table(index="case", columns="variant", values=["sass_ldgsts", "shared_bytes"])
    more = wide[("sass_ldgsts", "pointer")] > wide[("sass_ldgsts", "tma")]
    held = wide.loc[cases.case, ("shared_bytes", "pointer")].to_numpy() >= operand_bytes(cases).to_numpy()
    return pd.Series(np.where(more.loc[cases.case].to_numpy() & held, "cp_async", "plain_loads"), index=cases.index)


def cases_table(cases: pd.DataFrame, samples: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    ratios = pair_ratios(samples)
    medians = samples.groupby(["case", "variant"]).time_us.median().unstack()
    rng = np.random.default_rng(SEED)
    rows = []
    for case in cases.itertuples(index=False):
        r = ratios[ratios.case == case.case].ratio.to_numpy()
        low, high = ratio_interval(r, rng)
        rows.append({"case": case.case, "ratio": float(np.median(r)), "ratio_low": low, "ratio_high": high,
                     "tma_time_us": medians.loc[case.case, "tma"],
                     "alternative_time_us": medians.loc[case.case, "pointer"], "pairs": len(r)})
    cases = cases.rename(columns={"alternative": "alternative_by_ldgsts_count"})
    cases["alternative"] = alternatives(cases, kernels)
    out = cases.merge(pd.DataFrame(rows), on="case")
    out["set"] = "heldout"
    out["pattern"], out["cluster_sharing"] = "streaming", 1
    out["interval_method"] = INTERVAL_METHOD
    for column in ("bytes_per_transfer", "flops_per_byte"):      # no heldout operand is a bulk range
        out[column] = np.nan                                      # or a CUDA-core consumer
    out["winner"] = [winner(lo, hi, alt) for lo, hi, alt in zip(out.ratio_low, out.ratio_high, out.alternative)]
    extra = [c for c in out.columns if c not in COLUMNS]
    return out[[*COLUMNS, *extra]]


def families(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for family, group in table.groupby("family", sort=False):
        rows.append({"family": family, "cases": len(group), "tma_wins": int((group.winner == TMA).sum()),
                     "ties": int((group.winner == TIE).sum()),
                     "alternative_wins": int(((group.winner != TMA) & (group.winner != TIE)).sum()),
                     "cp_async_cases": int((group.alternative == "cp_async").sum()),
                     "plain_loads_cases": int((group.alternative == "plain_loads").sum()),
                     "ratio_median": float(group.ratio.median()), "ratio_min": float(group.ratio.min()),
                     "ratio_max": float(group.ratio.max())})
    return pd.DataFrame(rows)


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    from . import STUDY
    raw = raw_data.load(STUDY, raw_dir)
    table = cases_table(raw["cases.csv"], raw["samples.csv"], raw["kernels.csv"])
    derived_dir = Path(derived_dir)
    derived_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(derived_dir / "cases.csv", table.to_csv(index=False))
    atomic_write_text(derived_dir / "families.csv", families(table).to_csv(index=False))
