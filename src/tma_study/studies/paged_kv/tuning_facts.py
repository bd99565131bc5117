"""What the paged_kv paper tier states about the sweep's tuning, from tuning.csv: which K/V
ring depth, producer warps and decode consumer won the cells, together and apart, and which chosen
kernels carry launch bounds. Read, like facts.py, by the rules (rules.py), the paper's numbers
(macros.py) and the tables (tables.py), so that they cannot disagree."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .aggregate import MEASURED
from .grid import DECODE_CONSUMERS

KNOB_NAMES = ("stages", "producer_warps")     # tuning.csv's {knob}_swept and {knob}_chosen


@dataclass(frozen=True)
class KnobChoice:
    """Which value of one tuning knob (K/V ring stages or producer warps) won for one
    (phase, load path, dtype): each cell's fastest timed combination of both knobs counts."""

    swept: tuple[int, ...]
    cells: int
    chosen_most: int        # the value that won most cells (the smaller one on a tie)
    chosen_most_cells: int
    largest_cells: int      # cells the largest swept value won


def _swept(rows: pd.DataFrame, knob: str) -> tuple[int, ...]:
    return tuple(sorted({int(v) for text in rows[f"{knob}_swept"].dropna() for v in str(text).split()}))


def knob_choice(tuning: pd.DataFrame, knob: str, phase: str, load_path: str, dtype: str) -> KnobChoice | None:
    if knob not in KNOB_NAMES:
        raise ValueError(f"unknown tuning knob {knob!r}: one of {KNOB_NAMES}")
    rows = tuning[(tuning.phase == phase) & (tuning.load_path == load_path) & (tuning.dtype == dtype)]
    swept = _swept(rows, knob)
    rows = rows[rows.status == MEASURED]
    if rows.empty:
        return None
    counts = rows[f"{knob}_chosen"].astype(int).value_counts()
    most = int(min(counts.index[counts == counts.max()]))
    return KnobChoice(swept, len(rows), most, int(counts[most]), int(counts.get(max(swept), 0)))


def stages(tuning: pd.DataFrame, phase: str, load_path: str, dtype: str) -> KnobChoice | None:
    return knob_choice(tuning, "stages", phase, load_path, dtype)


def producer_warps(tuning: pd.DataFrame, phase: str, load_path: str, dtype: str) -> KnobChoice | None:
    return knob_choice(tuning, "producer_warps", phase, load_path, dtype)


def swept_stages(tuning: pd.DataFrame, phase: str) -> tuple[int, ...]:
    return _swept(tuning[tuning.phase == phase], "stages")


def swept_producer_warps(tuning: pd.DataFrame, phase: str, load_path: str = "cp_async") -> tuple[int, ...]:
    return _swept(tuning[(tuning.phase == phase) & (tuning.load_path == load_path)], "producer_warps")


@dataclass(frozen=True)
class Combination:
    """The (stages, producer warps) combination that won most cells of one (phase, load path,
    dtype), so that a text naming each knob's winner can also say whether they won together."""

    stages: int
    producer_warps: int
    cells_won: int
    cells: int


def combination(tuning: pd.DataFrame, phase: str, load_path: str, dtype: str) -> Combination | None:
    rows = tuning[(tuning.phase == phase) & (tuning.load_path == load_path) & (tuning.dtype == dtype)
                  & (tuning.status == MEASURED)]
    if rows.empty:
        return None
    pairs = pd.Series(list(zip(rows.stages_chosen.astype(int), rows.producer_warps_chosen.astype(int))))
    counts = pairs.value_counts()
    top = min(counts.index[counts == counts.max()])
    return Combination(int(top[0]), int(top[1]), int(counts[top]), len(rows))


BASE_CONSUMER = "kq"      # the decode consumer every other one is compared with


def compared_consumers(rows: pd.DataFrame) -> list[str]:
    """The decode consumers (grid order) other than kq whose best times tuning.csv records
    beside kq's: the ones a run swept with it."""
    if not {f"time_us_{BASE_CONSUMER}", "score_layout"} <= set(rows.columns):
        return []
    return [c for c in DECODE_CONSUMERS if c != BASE_CONSUMER and f"time_us_{c}" in rows.columns]


@dataclass(frozen=True)
class ConsumerWins:
    """The decode consumer knob (grid.SweepConfig.score_layout) at some cells: of the timed
    cells that ran both "kq" and ``consumer``, how many ``consumer`` won, and the median over
    them of its best time over kq's (each at its best other knobs)."""

    consumer: str
    cells: int
    won: int
    over_kq_median: float


def consumer_tally(rows: pd.DataFrame, consumer: str) -> ConsumerWins | None:
    """ConsumerWins over any tuning.csv rows (the timed ones that ran both consumers); None
    where there are none, or the data do not record both consumers' times."""
    if consumer not in compared_consumers(rows):
        return None
    theirs, base = rows[f"time_us_{consumer}"], rows[f"time_us_{BASE_CONSUMER}"]
    rows = rows[(rows.status == MEASURED) & theirs.notna() & base.notna()]
    if rows.empty:
        return None
    return ConsumerWins(consumer, len(rows), int((rows.score_layout == consumer).sum()),
                        float((rows[f"time_us_{consumer}"] / rows[f"time_us_{BASE_CONSUMER}"]).median()))


def consumer_wins(tuning: pd.DataFrame, dtype: str, seqlen_q: int, consumer: str) -> ConsumerWins | None:
    """None where the run did not sweep kq and ``consumer`` at that (dtype, query tokens)."""
    return consumer_tally(tuning[(tuning.phase == "decode") & (tuning.dtype == dtype)
                                 & (tuning.seqlen_q == seqlen_q)], consumer)


@dataclass(frozen=True)
class LaunchBounds:
    """The chosen decode kernels, and those compiled with launch bounds (measure.fit_residency:
    a decode kernel that fits fewer CTAs per SM than ``decode_min_ctas_per_sm`` is rebuilt with
    ``(threads, target)`` launch bounds where that fits more CTAs without spilling much)."""

    kernels: int
    bounded_kernels: int
    bounded_cells: int
    bound_ctas: tuple[int, ...]      # the min-CTAs-per-SM targets of the bounded kernels
    bounded_local_bytes_max: int     # local memory per thread (spills) of a bounded kernel


def launch_bounds(tuning: pd.DataFrame, phase: str = "decode") -> LaunchBounds:
    chosen = tuning[(tuning.phase == phase) & (tuning.status == MEASURED)]
    bounded = chosen[chosen.launch_min_ctas_per_sm.fillna(1).astype(int) > 1]
    return LaunchBounds(int(chosen.kernel.nunique()), int(bounded.kernel.nunique()), len(bounded),
                        tuple(sorted(int(c) for c in bounded.launch_min_ctas_per_sm.unique())),
                        int(bounded.local_bytes_per_thread.max()) if len(bounded) else 0)
