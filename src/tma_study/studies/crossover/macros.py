"""The crossover study's numbers for the paper's text (entry point ``macros``).

Names follow ``crossover<What><Mechanism><WorkingSet>``, e.g. ``crossoverPeakGbpsTmaHbm``;
working sets are ``Hbm`` and ``Ltwo`` (LaTeX names cannot hold digits).
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from tma_study.report.numbers import camel, number, percent, ratio, size

from .facts import BULK, CP_ASYNC, MECHANISMS, TMA, WORKING_SETS, Facts, crossover_size

SHORT = {"tma_tile": "tma", "bulk_copy": "bulk", "cp_async": "cp async", "plain_loads": "plain",
         "hbm": "hbm", "l2": "ltwo"}
NOT_MEASURED = "n/a"


def _name(*words: str) -> str:
    return camel("crossover", *(SHORT.get(w, w) for w in words))


def _bandwidth(facts: Facts) -> dict[str, str]:
    macros = {}
    for ws in WORKING_SETS:
        for mechanism in MECHANISMS:
            peak = facts.peak(ws, mechanism)
            if peak is None:
                continue
            macros[_name("peak gbps", mechanism, ws)] = number(peak.gbps)
            macros[_name("peak percent read", mechanism, ws)] = percent(peak.fraction_of_read_stream)
            macros[_name("peak size", mechanism, ws)] = size(peak.bytes_per_transfer)
            macros[_name("peak ring", mechanism, ws)] = size(peak.best_ring_bytes_per_sm)
            if ws == "hbm":
                macros[_name("peak percent copy", mechanism, ws)] = percent(peak.fraction_of_d2d_copy)
        read = facts.ceiling("read_stream", ws)
        if read is not None:
            macros[_name("ceiling read gbps", ws)] = number(read)
    copy = facts.ceiling("d2d_copy", "hbm")
    if copy is not None:
        macros[_name("ceiling copy gbps")] = number(copy)
    return macros


def _crossovers(facts: Facts) -> dict[str, str]:
    macros = {}
    for ws in WORKING_SETS:
        for alternative in MECHANISMS[1:]:
            row = facts.crossover_row(ws, alternative)
            if row is None:
                continue
            crossing = crossover_size(row)
            macros[_name("size", ws, alternative)] = "never" if math.isnan(crossing) else size(crossing)
            low = row.crossover_bracket_low_bytes
            macros[_name("size below", ws, alternative)] = NOT_MEASURED if pd.isna(low) else size(low)
            macros[_name("ratio smallest", ws, alternative)] = ratio(row.ratio_at_smallest)
            macros[_name("ratio largest", ws, alternative)] = ratio(row.ratio_at_largest)
        large = facts.ratio_to(ws, CP_ASYNC)
        if len(large):
            macros[_name("max ratio", ws, CP_ASYNC)] = ratio(large.max())
        bulk = facts.ratio_to(ws, BULK)
        if len(bulk):
            macros[_name("bulk deviation percent", ws)] = percent((bulk - 1).abs().max())
    sizes = sorted(facts.best.bytes_per_transfer.unique())
    macros[_name("smallest size")] = size(sizes[0])
    macros[_name("largest size")] = size(sizes[-1])
    rings = facts.rings()
    if rings:
        macros[_name("shallow ring")] = size(rings[0])
        macros[_name("deep ring")] = size(rings[-1])
        for ws in WORKING_SETS:
            row = facts.crossover_row(ws, CP_ASYNC, rings[0])
            if row is not None:
                macros[_name("shallow ring size", ws, CP_ASYNC)] = (
                    "never" if math.isnan(crossover_size(row)) else size(crossover_size(row)))
                macros[_name("shallow ring ratio largest", ws, CP_ASYNC)] = ratio(row.ratio_at_largest)
    return macros


def _latency(facts: Facts) -> dict[str, str]:
    macros = {}
    smallest = int(facts.latency.bytes_per_transfer.min())
    for level in WORKING_SETS:
        for mechanism in MECHANISMS:
            ns = facts.latency_ns(level, mechanism, smallest)
            if ns is not None:
                macros[_name("latency ns smallest", mechanism, level)] = number(ns)
        ratios = facts.latency_ratio(level)
        if len(ratios):
            macros[_name("latency ratio smallest", level)] = ratio(ratios.iloc[0])
            faster = ratios[ratios < 1]
            macros[_name("latency tma faster from", level)] = size(faster.index[0]) if len(faster) else "never"
    macros[_name("latency smallest size")] = size(smallest)
    macros[_name("latency hops")] = str(int(facts.latency.hops.iloc[0]))
    return macros


CHAIN_SHORT = {"full": "full", "one_thread": "one thread", "issue_to_arrival": "issue",
               "issue_to_arrival_hint": "issue hint", "issue_to_arrival_test_wait": "issue test wait"}


def _latency_chain(derived_dir: Path, stream_smallest: int) -> dict[str, str]:
    """The chase forms' numbers at the smallest chain size (``chain smallest``) and at the stream
    sweep's smallest size (``chain stream``); every name defined, ``n/a`` where not measured."""
    path = Path(derived_dir) / "latency_chain.csv"
    chain = pd.read_csv(path) if path.exists() else pd.DataFrame()
    smallest = int(chain.bytes_per_transfer.min()) if len(chain) else None
    macros = {_name("chain smallest size"): size(smallest) if smallest is not None else NOT_MEASURED}
    for where, at in (("smallest", smallest), ("stream", stream_smallest)):
        for level in WORKING_SETS:
            rows = chain[(chain.bytes_per_transfer == at) & (chain.level == level)] if len(chain) else chain
            for form, short in CHAIN_SHORT.items():
                for mechanism in MECHANISMS:
                    match = rows[(rows.chain == form) & (rows.mechanism == mechanism)] if len(rows) else rows
                    found = match.iloc[0] if len(match) else None
                    macros[_name("chain", where, short, mechanism, level)] = (
                        number(found.cycles_per_transfer_median) if found is not None else NOT_MEASURED)
                    if mechanism == TMA:
                        macros[_name("chain", where, short, "tma minus plain", level)] = (
                            number(found.cycles_minus_plain_loads) if found is not None
                            and not math.isnan(found.cycles_minus_plain_loads) else NOT_MEASURED)
                        macros[_name("chain", where, short, "tma minus cp async", level)] = (
                            number(found.cycles_minus_cp_async) if found is not None
                            and not math.isnan(found.cycles_minus_cp_async) else NOT_MEASURED)
                        macros[_name("chain", where, short, "tma percent of full", level)] = (
                            percent(found.fraction_of_full, 0) if found is not None
                            and not math.isnan(found.fraction_of_full) else NOT_MEASURED)
                        cp_full = found.get("fraction_of_cp_async_full", math.nan) if found is not None else math.nan
                        macros[_name("chain", where, short, "tma percent of cp async full", level)] = (
                            NOT_MEASURED if math.isnan(cp_full) else percent(cp_full, 0))
            tma = rows[rows.mechanism == TMA].set_index("chain").cycles_per_transfer_median if len(rows) else {}
            macros[_name("chain", where, "tma producer path", level)] = (
                number(tma["one_thread"] - tma["issue_to_arrival"])
                if {"one_thread", "issue_to_arrival"} <= set(getattr(tma, "index", ())) else NOT_MEASURED)
    return macros


def _reproducibility(facts: Facts) -> dict[str, str]:
    every = facts.repeat("every configuration")
    crossings = facts.repeat("crossover sizes")
    return {
        _name("repro configurations"): str(int(every.configurations)) if every is not None else NOT_MEASURED,
        _name("repro median percent"): percent(every.median_relative_difference, 2) if every is not None
        else NOT_MEASURED,
        _name("repro max percent"): percent(every.max_relative_difference, 1) if every is not None
        else NOT_MEASURED,
        _name("repro crossovers identical percent"): percent(crossings.share_identical, 0)
        if crossings is not None else NOT_MEASURED,
    }


def _run(provenance: dict) -> dict[str, str]:
    started = pd.Timestamp(provenance["started_utc"])
    seconds = (pd.Timestamp(provenance["finished_utc"]) - started).total_seconds()
    config = provenance.get("config", {})
    macros = {_name("configurations"): str(provenance.get("configurations")),
              _name("gpu time"): f"{int(seconds // 60)} min {int(seconds % 60)} s"}
    for ws, spec in config.get("working_sets", {}).items():
        macros[_name("working set", ws)] = size(spec["bytes"])
        macros[_name("bytes per launch", ws)] = size(spec["bytes_per_launch"])
    timing = config.get("timing", {})
    if "max_noise" in timing:
        macros[_name("max noise percent")] = percent(timing["max_noise"], 1)
    if "min_samples" in timing:
        macros[_name("min samples")] = str(int(timing["min_samples"]))
    for knob in ("stages", "ctas_per_sm", "consumer_threads", "producer_threads", "tma_issue_threads"):
        if knob in config:
            macros[_name("swept", knob)] = ", ".join(str(v) for v in config[knob])
    if "ring_bytes_per_sm" in config:
        macros[_name("swept rings")] = ", ".join(size(v) for v in config["ring_bytes_per_sm"])
    if "bytes_per_transfer" in config:
        macros[_name("swept sizes count")] = str(len(config["bytes_per_transfer"]))
    return macros


def macros(derived_dir: Path, provenance: dict) -> dict[str, str]:
    facts = Facts.load(derived_dir)
    tma_hbm = facts.peak("hbm", TMA)
    out = {**_bandwidth(facts), **_crossovers(facts), **_latency(facts),
           **_latency_chain(derived_dir, int(facts.latency.bytes_per_transfer.min())), **_reproducibility(facts),
           **_run(provenance)}
    if tma_hbm is not None:
        out[_name("tma best stages")] = str(int(tma_hbm.stages))
    return out
