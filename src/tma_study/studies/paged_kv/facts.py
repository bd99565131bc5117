"""What the paged_kv paper tier states, computed once from the derived tables.

The rules of thumb (rules.py), the paper's numbers (macros.py), the summary table
(tables.py) and the comparison between runs (compare.py) all read these facts, so a number
in the text, a rule and a table cannot disagree.

A *comparison* is a configuration of the page-size sweep (``speedup.page_sweep``) at which
both load paths were timed, each at its own best K/V ring stages and producer warps; its
winner is TMA, cp.async, or a tie (the two medians within each other's interquartile range,
aggregate.speedup_table). The batch/context scaling points (one page size) are counted
apart, since they would weigh one page size more than the others.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .aggregate import (
    DECODE_BAR_FRACTION,
    DECODE_BAR_MIN_BATCH,
    DECODE_BAR_MIN_CONTEXT,
    MEASURED,
)
from .grid import DECODE_CONSUMERS, WGMMA_CONSUMERS

PHASES = ("decode", "prefill")
DTYPES = ("bf16", "e4m3")
LOAD_PATHS = ("tma", "cp_async")
DECIDED = ("tma", "tie", "cp_async")      # measured_winner where both paths were timed
PATH_LABELS = {"tma": "TMA", "cp_async": "cp.async"}
# FA3's rule (fa3_rule.fa3_choice) says why it chose a path; its clauses, by the reason's words
CLAUSE_PAGE, CLAUSE_ROWS, CLAUSE_TMA, CLAUSE_OTHER = "page", "rows", "tma", "other"
CLAUSE_TEXT = {CLAUSE_PAGE: "the page clause (page size not a multiple of kBlockN: cp.async)",
               CLAUSE_ROWS: "the short-query clause (query rows per KV head at most kBlockM: cp.async)",
               CLAUSE_TMA: "its TMA choice (both clauses met)",
               CLAUSE_OTHER: "its other conditions (architecture, left padding, appended K/V)"}


def listing(values, last: str = "and") -> str:
    """[1, 8, 32] -> '1, 8 and 32' (sorted, each once; ``last`` joins the last two)."""
    items = [str(v) for v in sorted(set(values))]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {last} " + items[-1]


def compared(speedup: pd.DataFrame, page_sweep: bool = True) -> pd.DataFrame:
    """The configurations (of the page-size sweep, or of the scaling points) where both paths ran."""
    rows = speedup[speedup.measured_winner.isin(DECIDED)]
    return rows[rows.page_sweep.astype(bool) == page_sweep]


@dataclass(frozen=True)
class Tally:
    """Who won how often among some comparisons."""

    compared: int
    tma_wins: int
    ties: int
    cp_async_wins: int

    @classmethod
    def of(cls, rows: pd.DataFrame) -> Tally:
        winners = rows.measured_winner
        return cls(len(rows), int((winners == "tma").sum()), int((winners == "tie").sum()),
                   int((winners == "cp_async").sum()))

    def text(self) -> str:
        return (f"TMA wins {self.tma_wins}, ties {self.ties}, cp.async wins {self.cp_async_wins} "
                f"of {self.compared}")

    def short(self) -> str:
        return f"TMA/tie/cp.async {self.tma_wins}/{self.ties}/{self.cp_async_wins}"


@dataclass(frozen=True)
class PageRule:
    """Where TMA stops losing as pages grow, over some comparisons of the page-size sweep.

    ``tma_from``: the smallest page size from which cp.async never won (at that size and every
    larger one measured), None when cp.async still won at the largest page size. A page-size
    grid cannot place the threshold between two of its sizes: ``below`` is the size measured
    just under ``tma_from`` (None when ``tma_from`` is the smallest size both paths ran at).
    """

    tally: Tally
    pages: tuple[int, ...]                      # page sizes at which both paths ran
    cp_async_wins_by_page: tuple[int, ...]      # in the order of ``pages``
    tma_from: int | None
    below: int | None
    tma_wins_from: int                          # TMA wins at pages >= tma_from (0 when None)
    speedup_median: float                       # cp.async time / TMA time
    speedup_min: float
    speedup_max: float

    @classmethod
    def of(cls, rows: pd.DataFrame) -> PageRule:
        if rows.empty:
            raise ValueError("no comparison: no page size at which both load paths were timed")
        pages = tuple(int(p) for p in sorted(rows.page_size.unique()))
        losses = tuple(int((rows[rows.page_size == p].measured_winner == "cp_async").sum()) for p in pages)
        start = len(pages)
        while start > 0 and losses[start - 1] == 0:
            start -= 1
        tma_from = pages[start] if start < len(pages) else None
        wins_from = 0 if tma_from is None else int(
            ((rows.page_size >= tma_from) & (rows.measured_winner == "tma")).sum())
        return cls(Tally.of(rows), pages, losses, tma_from, pages[start - 1] if 0 < start < len(pages) else None,
                   wins_from, float(rows.tma_speedup.median()), float(rows.tma_speedup.min()),
                   float(rows.tma_speedup.max()))

    @property
    def verdict(self) -> str:
        """The rule in a few words: 'TMA from 64-token pages', 'cp.async at every page size', ..."""
        if self.tma_from is None:
            if self.tally.tma_wins == 0:
                return "cp.async at every page size"
            return f"no page-size threshold (cp.async still won at {self.pages[-1]}-token pages)"
        everywhere = self.tma_from == self.pages[0]
        if self.tma_wins_from == 0:
            return "a tie at every page size" if everywhere else f"a tie from {self.tma_from}-token pages"
        return "TMA at every page size" if everywhere else f"TMA from {self.tma_from}-token pages"

    def losses_text(self) -> str:
        return ", ".join(f"{p}: {n}" for p, n in zip(self.pages, self.cp_async_wins_by_page))


def page_rule(speedup: pd.DataFrame, phase: str, dtype: str | None = None) -> PageRule | None:
    """The page-size rule of one phase (both dtypes pooled when ``dtype`` is None); None when
    nothing of that phase (and dtype) was compared."""
    rows = compared(speedup)
    rows = rows[rows.phase == phase]
    if dtype is not None:
        rows = rows[rows.dtype == dtype]
    return PageRule.of(rows) if len(rows) else None


def not_measured(speedup: pd.DataFrame, phase: str) -> int:
    """Configurations of the phase where a path has no timed stage count (never compared)."""
    rows = speedup[speedup.phase == phase]
    return int(rows.measured_winner.str.startswith("not measured").sum())


# ---------------------------------------------------------------- FlashAttention-3's rule

def fa3_clause(load_path: str, reason: str) -> str:
    """Which clause of FA3's rule made its choice, from fa3_rule.fa3_choice's reason."""
    if load_path == "tma":
        return CLAUSE_TMA
    if "not a multiple of kBlockN" in reason:
        return CLAUSE_PAGE
    if "<= kBlockM" in reason:
        return CLAUSE_ROWS
    return CLAUSE_OTHER


@dataclass(frozen=True)
class Fa3Agreement:
    """How often FA3's rule named the measured winner (a tie: either choice is right) where both
    paths ran, page-size sweep and scaling points alike, and through which clause it missed."""

    decided: int
    agrees: int
    picks_tma: int
    misses_by_clause: dict[str, int]
    only_path: int          # configurations where only cp.async runs (pages below TMA's smallest)

    @property
    def disagrees(self) -> int:
        return self.decided - self.agrees

    @property
    def fraction(self) -> float:
        return self.agrees / self.decided if self.decided else float("nan")

    def main_miss(self) -> str | None:
        """The clause behind most misses (None without a miss)."""
        if not self.disagrees:
            return None
        return max(self.misses_by_clause, key=lambda clause: self.misses_by_clause[clause])


def fa3_agreement(speedup: pd.DataFrame, phase: str | None = None, dtype: str | None = None) -> Fa3Agreement:
    rows = speedup if phase is None else speedup[speedup.phase == phase]
    rows = rows if dtype is None else rows[rows.dtype == dtype]
    decided = rows[rows.measured_winner.isin(DECIDED)]
    agrees = decided.fa3_agrees.astype(str).str.lower() == "true"
    clauses = [fa3_clause(r.fa3_load_path, str(r.fa3_reason)) for r in decided[~agrees].itertuples()]
    return Fa3Agreement(len(decided), int(agrees.sum()), int((decided.fa3_load_path == "tma").sum()),
                        {clause: clauses.count(clause) for clause in CLAUSE_TEXT},
                        int(rows.measured_winner.str.endswith("(only path)").sum()))


# ---------------------------------------------------------------- decode against the copy

@dataclass(frozen=True)
class DecodeBar:
    """The decode points in the bar's scope (contexts >= DECODE_BAR_MIN_CONTEXT tokens, batch >=
    DECODE_BAR_MIN_BATCH): the better path's K/V read rate as a fraction of the same run's copy."""

    points: int
    met: int
    fraction_min: float
    fraction_median: float
    fraction_max: float
    best_tma: int           # points where TMA was the better path
    best_cp_async: int
    best_by_consumer: dict[str, int] | None   # points whose fastest kernel ran each consumer (grid's
                                              # decode consumers); None: data without the column
    met_without: dict[str, int] | None   # per swept consumer: points the others (each at its best over
                                         # the other knobs) bring to the bar; None: one consumer swept


def bar_points(decode: pd.DataFrame) -> pd.DataFrame:
    """The measured decode points in the bar's scope (decode.csv rows)."""
    rows = decode[decode.bar_applies.astype(str).str.lower() == "true"]
    return rows[rows.best_load_path.isin(LOAD_PATHS)]


def decode_bar(decode: pd.DataFrame, dtype: str | None = None) -> DecodeBar | None:
    rows = bar_points(decode)
    if dtype is not None:
        rows = rows[rows.dtype == dtype]
    if rows.empty:
        return None
    fraction = rows.fraction_of_d2d_copy
    swept = [c for c in DECODE_CONSUMERS if f"best_{c}_gbps" in rows]
    met_without = None
    if len(swept) > 1:
        met_without = {c: int((rows[[f"best_{o}_gbps" for o in swept if o != c]].max(axis=1)
                               / rows.d2d_copy_gbps >= DECODE_BAR_FRACTION).sum()) for c in swept}
    return DecodeBar(len(rows), int((fraction >= DECODE_BAR_FRACTION).sum()), float(fraction.min()),
                     float(fraction.median()), float(fraction.max()), int((rows.best_load_path == "tma").sum()),
                     int((rows.best_load_path == "cp_async").sum()),
                     {c: int((rows.best_score_layout == c).sum()) for c in swept or DECODE_CONSUMERS}
                     if "best_score_layout" in rows else None, met_without)


@dataclass(frozen=True)
class MathBound:
    """The bar's points whose roofline bound (aggregate.decode_table) is the kernel family's
    prefill math rate (mma.sync), not the copy rate: at that rate they could not read K/V at
    the copy rate. A point won by a wgmma consumer computes S^T on wgmma and may run above it."""

    points: int
    missed: int                     # of them, below the bar
    bound_max_fraction_of_copy: float   # the highest such bound, as a fraction of the copy rate
    fraction_of_bound_min: float
    fraction_of_bound_max: float
    flops_per_kv_byte_min: float
    above: int                      # of them, faster than their bound (math faster than prefill's)
    above_wgmma: int                # of those, won by a consumer computing S^T with wgmma


def math_bound(decode: pd.DataFrame) -> MathBound | None:
    """None where no bar point is math-bound (or the data predate the roofline columns)."""
    if "bound" not in decode:
        return None
    rows = bar_points(decode)
    bound = rows[rows.bound == "prefill_tflops"]
    if bound.empty:
        return None
    above = bound[bound.fraction_of_bound > 1]
    wgmma = int(above.best_score_layout.isin(WGMMA_CONSUMERS).sum()) if "best_score_layout" in above else 0
    return MathBound(len(bound), int((bound.fraction_of_d2d_copy < DECODE_BAR_FRACTION).sum()),
                     float((bound.bound_gbps / bound.d2d_copy_gbps).max()), float(bound.fraction_of_bound.min()),
                     float(bound.fraction_of_bound.max()), float(bound.flops_per_kv_byte.min()), len(above),
                     wgmma)


@dataclass(frozen=True)
class SameBytesCopy:
    """The bar's points against a copy moving as many bytes as each reads (same run, same timing)."""

    points: int
    copy_fraction_min: float        # that copy's rate as a fraction of the large copy's
    copy_fraction_max: float
    missed: int                     # points below the bar
    missed_fraction_min: float | None   # their K/V rate as a fraction of their same-size copy's
    missed_fraction_max: float | None   # (None where no point misses)


def same_bytes_copy(decode: pd.DataFrame) -> SameBytesCopy | None:
    """None where the data have no same-size copy (measured before it was)."""
    if "same_bytes_copy_gbps" not in decode:
        return None
    rows = bar_points(decode)
    rows = rows[rows.same_bytes_copy_gbps.notna()]
    if rows.empty:
        return None
    missed = rows[rows.fraction_of_d2d_copy < DECODE_BAR_FRACTION]
    copy_fraction = rows.same_bytes_copy_gbps / rows.d2d_copy_gbps
    of_own_copy = missed.fraction_of_same_bytes_copy
    return SameBytesCopy(len(rows), float(copy_fraction.min()), float(copy_fraction.max()), len(missed),
                         float(of_own_copy.min()) if len(missed) else None,
                         float(of_own_copy.max()) if len(missed) else None)


BAR = {"fraction": DECODE_BAR_FRACTION, "min_context": DECODE_BAR_MIN_CONTEXT, "min_batch": DECODE_BAR_MIN_BATCH}


@dataclass(frozen=True)
class Sdpa:
    """torch SDPA on a contiguous bf16 cache at the decode points where it ran, against the
    better paged path (bf16) at the same point."""

    points: int
    gbps_median: float
    paged_over_sdpa_median: float
    paged_over_sdpa_min: float
    paged_over_sdpa_max: float


def sdpa(decode: pd.DataFrame) -> Sdpa | None:
    rows = decode[(decode.dtype == "bf16") & decode.torch_sdpa_gbps.notna() & decode.best_gbps.notna()]
    if rows.empty:
        return None
    ratio = rows.best_gbps / rows.torch_sdpa_gbps
    return Sdpa(len(rows), float(rows.torch_sdpa_gbps.median()), float(ratio.median()), float(ratio.min()),
                float(ratio.max()))


def prefill_best_tflops(prefill: pd.DataFrame, load_path: str, dtype: str | None = None) -> float | None:
    rows = prefill[(prefill.status == MEASURED) & (prefill.load_path == load_path)]
    if dtype is not None:
        rows = rows[rows.dtype == dtype]
    return float(rows.tflops.max()) if len(rows) else None
