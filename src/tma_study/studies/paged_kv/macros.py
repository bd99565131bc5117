"""The paged_kv study's numbers for the paper's text (entry point ``macros``).

Names: ``pagedKv<Phase><Dtype><What>``, e.g. ``pagedKvDecodeBfTmaWins``; no digits in names
(``Bf`` for bf16, ``Fpeight`` for fp8 e4m3, ``Cpasync`` for cp.async, ``FaThree`` for
FlashAttention-3). Counts are over the page-size sweep's comparisons (facts.py) unless the
name says ``Scaling``. Macros of something a run did not measure (torch SDPA, scaling
points) are left out; the section tests for them with ``\\ifdefined``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study import fa3_rule, rule_scores
from tma_study.report.numbers import MacroError, camel, number, percent, ratio

from . import facts, matched, tuning_facts
from .grid import DECODE_CONSUMERS

DTYPE_NAMES = {"bf16": "bf", "e4m3": "fpeight"}
PATH_NAMES = {"tma": "tma", "cp_async": "cpasync"}


def _name(*words: str) -> str:
    return camel("paged kv", *words)


def _tally(prefix: tuple[str, ...], tally: facts.Tally) -> dict[str, str]:
    return {_name(*prefix, "compared"): number(tally.compared), _name(*prefix, "tma wins"): number(tally.tma_wins),
            _name(*prefix, "ties"): number(tally.ties), _name(*prefix, "cpasync wins"): number(tally.cp_async_wins)}


def _page_rule(prefix: tuple[str, ...], rule: facts.PageRule) -> dict[str, str]:
    out = {**_tally(prefix, rule.tally), _name(*prefix, "page verdict"): rule.verdict,
           _name(*prefix, "speedup median"): ratio(rule.speedup_median),
           _name(*prefix, "speedup min"): ratio(rule.speedup_min),
           _name(*prefix, "speedup max"): ratio(rule.speedup_max),
           _name(*prefix, "smallest page"): number(rule.pages[0])}
    if rule.tma_from is not None:       # the page size from which cp.async never won
        out[_name(*prefix, "tma from page")] = number(rule.tma_from)
    return out


def _sweep(speedup: pd.DataFrame, tuning: pd.DataFrame) -> dict[str, str]:
    """What was swept, read back from the data (not from the config)."""
    sweep = speedup[speedup.page_sweep.astype(bool)]
    pages = {path: sorted(int(p) for p in tuning[tuning.load_path == path].page_size.unique())
             for path in facts.LOAD_PATHS}
    out = {_name("shapes"): number(sweep["shape"].nunique()), _name("shape names"): facts.listing(sweep["shape"]),
           _name("cells"): number(len(tuning)), _name("cells not measured"): number((tuning.status != "measured").sum()),
           _name("page sizes tma"): facts.listing(pages["tma"]), _name("page sizes cpasync"): facts.listing(pages["cp_async"]),
           _name("smallest tma page"): number(min(pages["tma"])),
           _name("smallest page"): number(min(pages["cp_async"] + pages["tma"])),
           _name("block n"): facts.listing((int(n) for n in tuning.block_n.dropna()), last="or"),
           _name("cpasync producer warps"): facts.listing(
               int(n) for text in tuning[tuning.load_path == "cp_async"].producer_warps_swept.dropna()
               for n in str(text).split())}
    if "score_layout" in tuning.columns:   # data from before the decode consumer lack it
        decode = tuning[tuning.phase == "decode"]
        out[_name("decode cells")] = number(len(decode))
        for consumer in DECODE_CONSUMERS:   # e.g. pagedKvDecodeKqWgmmaCells: cells it won
            out[_name("decode", consumer, "cells")] = number((decode.score_layout == consumer).sum())
        for consumer in tuning_facts.compared_consumers(tuning):
            for dtype, short in DTYPE_NAMES.items():
                for tokens in sorted(int(q) for q in decode.seqlen_q.unique()):
                    wins = tuning_facts.consumer_wins(tuning, dtype, tokens, consumer)
                    if wins is not None:    # a run that swept kq and this consumer there
                        prefix = ("decode", consumer, short, f"q{tokens}")
                        out |= {_name(*prefix, "won"): number(wins.won), _name(*prefix, "cells"): number(wins.cells),
                                _name(*prefix, "time ratio"): ratio(wins.over_kq_median)}
    for phase in facts.PHASES:
        rows = sweep[sweep.phase == phase]
        if rows.empty:
            continue
        out |= {_name("sweep", phase, "query tokens"): facts.listing(rows.seqlen_q),
                _name("sweep", phase, "batch"): facts.listing(rows.batch),
                _name("sweep", phase, "context"): facts.listing(rows.context_tokens),
                _name(phase, "stages swept"): facts.listing(tuning_facts.swept_stages(tuning, phase)),
                _name(phase, "producer warps swept"): facts.listing(tuning_facts.swept_producer_warps(tuning, phase))}
    return out


def _scaling(speedup: pd.DataFrame) -> dict[str, str]:
    rows = facts.compared(speedup, page_sweep=False)
    if rows.empty:
        return {}
    scaling = speedup[~speedup.page_sweep.astype(bool)]
    decode = scaling[scaling.phase == "decode"]
    out = {**_tally(("scaling",), facts.Tally.of(rows)), _name("scaling shape"): facts.listing(scaling["shape"]),
           _name("scaling page"): facts.listing(int(p) for p in scaling.page_size)}
    if len(decode):
        out |= {_name("scaling decode batches"): facts.listing(decode.batch),
                _name("scaling decode contexts"): facts.listing(decode.context_tokens)}
    return out


def _comparisons(speedup: pd.DataFrame) -> dict[str, str]:
    out = {}
    for phase in facts.PHASES:
        pooled = facts.page_rule(speedup, phase)
        if pooled is None:
            continue
        out |= _page_rule((phase,), pooled)
        out[_name(phase, "not measured")] = number(facts.not_measured(speedup, phase))
        for dtype, short in DTYPE_NAMES.items():
            rule = facts.page_rule(speedup, phase, dtype)
            if rule is not None:
                out |= _page_rule((phase, short), rule)
    return out


def _fa3(speedup: pd.DataFrame) -> dict[str, str]:
    every = facts.fa3_agreement(speedup)
    if not every.decided:
        raise MacroError("speedup.csv has no configuration where both load paths ran: nothing to hold "
                         "FlashAttention-3's rule against")
    file, first, last = fa3_rule.RULE_CITATION
    stages_file, stages_line, _ = fa3_rule.KV_STAGES_CITATION
    out = {_name("fa three commit"): fa3_rule.FA3_COMMIT[:12], _name("fa three rule file"): file,
           _name("fa three rule lines"): f"{first}--{last}", _name("fa three stages"): number(fa3_rule.KV_STAGES_SM90),
           _name("fa three stages file"): stages_file, _name("fa three stages line"): number(stages_line),
           _name("fa three decided"): number(every.decided), _name("fa three agrees"): number(every.agrees),
           _name("fa three disagrees"): number(every.disagrees), _name("fa three agree percent"): percent(every.fraction, 0),
           _name("fa three picks tma"): number(every.picks_tma), _name("fa three only path"): number(every.only_path)}
    for clause, n in every.misses_by_clause.items():
        out[_name("fa three misses", clause)] = number(n)
    for phase in facts.PHASES:
        mine = facts.fa3_agreement(speedup, phase)
        if mine.decided:
            out |= {_name("fa three", phase, "decided"): number(mine.decided),
                    _name("fa three", phase, "agrees"): number(mine.agrees),
                    _name("fa three", phase, "picks tma"): number(mine.picks_tma)}
    tiles = {fa3_rule.fa3_choice(int(r.page_size), int(r.seqlen_q), int(r.q_heads), int(r.kv_heads),
                                 int(r.head_dim), r.dtype, causal=True).tma_tile
             for r in speedup.drop_duplicates(["q_heads", "kv_heads", "head_dim", "dtype", "seqlen_q"]).itertuples()}
    out |= {_name("fa three block n min"): number(min(t.block_n for t in tiles)),
            _name("fa three block n max"): number(max(t.block_n for t in tiles)),
            _name("fa three block m min"): number(min(t.block_m for t in tiles)),
            _name("fa three block m max"): number(max(t.block_m for t in tiles))}
    return out | _fa3_cost(speedup)


def _fa3_cost(speedup: pd.DataFrame) -> dict[str, str]:
    """Where FA3's rule picks the slower path: how often per dtype, and how much longer its choice
    takes than the faster path (the largest and the median share)."""
    if "fa3_slowdown" not in speedup:
        return {}
    misses = speedup[speedup.fa3_agrees.astype(str).str.lower() == "false"]
    out = {_name("fa three max slowdown percent"): percent(speedup.fa3_slowdown.max() - 1, 1)}
    for dtype, short in DTYPE_NAMES.items():
        mine = misses[misses.dtype == dtype]
        out[_name("fa three misses", short)] = number(len(mine))
        if len(mine):
            out[_name("fa three", short, "max loss percent")] = percent(mine.fa3_slowdown.max() - 1, 1)
            out[_name("fa three", short, "median loss percent")] = percent(mine.fa3_slowdown.median() - 1, 1)
    return out


def _decode(decode: pd.DataFrame) -> dict[str, str]:
    copy = decode.d2d_copy_gbps.dropna()
    out = {_name("copy gbps"): number(copy.iloc[0]) if len(copy) else "not measured",
           _name("decode bar percent"): percent(facts.BAR["fraction"], 0),
           _name("decode bar min context"): number(facts.BAR["min_context"]),
           _name("decode bar min batch"): number(facts.BAR["min_batch"]),
           _name("decode points"): number(decode.best_load_path.isin(facts.LOAD_PATHS).sum())}
    for path in facts.LOAD_PATHS:
        out[_name("decode best", PATH_NAMES[path])] = number((decode.best_load_path == path).sum())
    for dtype, short in (*DTYPE_NAMES.items(), (None, "")):
        bar = facts.decode_bar(decode, dtype)
        if bar is None:
            continue
        out |= {_name("decode bar", short, "points"): number(bar.points), _name("decode bar", short, "met"): number(bar.met),
                _name("decode bar", short, "missed"): number(bar.points - bar.met),
                _name("decode bar", short, "min percent"): percent(bar.fraction_min, 0),
                _name("decode bar", short, "median percent"): percent(bar.fraction_median, 0),
                _name("decode bar", short, "max percent"): percent(bar.fraction_max, 0),
                _name("decode bar", short, "best tma"): number(bar.best_tma),
                _name("decode bar", short, "best cpasync"): number(bar.best_cp_async)}
        for consumer, points in (bar.best_by_consumer or {}).items():   # data that record it
            out[_name("decode bar", short, "best", consumer)] = number(points)
        for consumer, points in (bar.met_without or {}).items():        # a run of several consumers
            out[_name("decode bar", short, "met without", consumer)] = number(points)
        if dtype is not None:
            mine = decode[(decode.dtype == dtype) & decode.fraction_of_d2d_copy.notna()]
            out[_name("decode best percent copy", short)] = percent(mine.fraction_of_d2d_copy.max(), 0)
    bound = facts.math_bound(decode)
    if bound is not None:
        out |= {_name("decode math bound points"): number(bound.points),
                _name("decode math bound missed"): number(bound.missed),
                _name("decode math bound max percent copy"): percent(bound.bound_max_fraction_of_copy, 0),
                _name("decode math bound min percent"): percent(bound.fraction_of_bound_min, 0),
                _name("decode math bound max percent"): percent(bound.fraction_of_bound_max, 0),
                _name("decode math bound flops per byte"): number(bound.flops_per_kv_byte_min),
                _name("decode math bound above"): number(bound.above),
                _name("decode math bound above wgmma"): number(bound.above_wgmma)}
    same = facts.same_bytes_copy(decode)
    if same is not None:
        out |= {_name("same bytes copy points"): number(same.points),
                _name("same bytes copy min percent"): percent(same.copy_fraction_min, 0),
                _name("same bytes copy max percent"): percent(same.copy_fraction_max, 0),
                _name("same bytes missed"): number(same.missed)}
        if same.missed:         # the missed points against their own size's copy
            out |= {_name("same bytes missed min percent"): percent(same.missed_fraction_min, 0),
                    _name("same bytes missed max percent"): percent(same.missed_fraction_max, 0)}
    sdpa = facts.sdpa(decode)
    if sdpa is not None:
        out |= {_name("sdpa points"): number(sdpa.points), _name("sdpa gbps median"): number(sdpa.gbps_median),
                _name("sdpa ratio median"): ratio(sdpa.paged_over_sdpa_median),
                _name("sdpa ratio min"): ratio(sdpa.paged_over_sdpa_min),
                _name("sdpa ratio max"): ratio(sdpa.paged_over_sdpa_max)}
    return out | _missed(decode)


def _missed(decode: pd.DataFrame) -> dict[str, str]:
    """The bar's points under it, named: e.g. "mqa_8x256 (e4m3, 4 query tokens)"; none when all meet it."""
    below = facts.bar_points(decode)
    below = below[below.fraction_of_d2d_copy < facts.BAR["fraction"]]
    if below.empty:
        return {}
    return {_name("decode bar missed list"): facts.listing(
        f"{r.shape} ({r.dtype}, {int(r.seqlen_q)} query token{'s' if r.seqlen_q > 1 else ''})"
        for r in below.itertuples())}


def _knob(prefix: tuple[str, ...], choice: tuning_facts.KnobChoice) -> dict[str, str]:
    return {_name(*prefix): number(choice.chosen_most), _name(*prefix, "won"): number(choice.chosen_most_cells),
            _name(*prefix, "cells"): number(choice.cells), _name(*prefix, "largest won"): number(choice.largest_cells)}


def _tuning(tuning: pd.DataFrame) -> dict[str, str]:
    """Per phase, load path and dtype, the stage count and producer-warp count that won most
    cells, only where that knob had more than one value to choose from; and the combination
    of both that won most (``...Combo...``) where either knob had a choice."""
    out = {}
    for path, path_name in PATH_NAMES.items():
        for dtype, short in DTYPE_NAMES.items():
            for phase in facts.PHASES:
                chosen = {knob: tuning_facts.knob_choice(tuning, knob, phase, path, dtype) for knob in tuning_facts.KNOB_NAMES}
                chosen = {knob: c for knob, c in chosen.items() if c is not None and len(c.swept) > 1}
                for knob, choice in chosen.items():     # a knob run at one value has nothing to choose
                    out |= _knob((phase, knob.replace("_", " "), path_name, short), choice)
                combo = tuning_facts.combination(tuning, phase, path, dtype)
                if chosen and combo is not None:
                    prefix = (phase, "combo", path_name, short)
                    out |= {_name(*prefix, "stages"): number(combo.stages),
                            _name(*prefix, "producer warps"): number(combo.producer_warps),
                            _name(*prefix, "won"): number(combo.cells_won), _name(*prefix, "cells"): number(combo.cells)}
    bounds = tuning_facts.launch_bounds(tuning)
    out |= {_name("decode kernels"): number(bounds.kernels), _name("launch bounded kernels"): number(bounds.bounded_kernels),
            _name("launch bounded cells"): number(bounds.bounded_cells)}
    if bounds.bounded_kernels:
        out |= {_name("launch bounds ctas"): facts.listing(bounds.bound_ctas),
                _name("launch bounded local bytes max"): number(bounds.bounded_local_bytes_max)}
    return out


def _prefill(prefill: pd.DataFrame) -> dict[str, str]:
    out = {}
    for path, path_name in PATH_NAMES.items():
        for dtype, short in (*DTYPE_NAMES.items(), (None, "")):
            best = facts.prefill_best_tflops(prefill, path, dtype)
            if best is not None:
                out[_name("prefill best tflops", path_name, short)] = number(best, 1)
    return out


def _l2_state(l2_state: pd.DataFrame) -> dict[str, str]:
    """The same-size copies in both L2 states (aggregate.l2_state_table); none in older data."""
    if l2_state.empty:
        return {}
    at_largest_ratio = l2_state.loc[l2_state.dirty_over_clean_time.idxmax()]
    return {_name("l2 state sizes"): number(len(l2_state)),
            _name("l2 state smallest mb"): number(l2_state.bytes_moved.min() / 1e6, 1),
            _name("l2 state largest mb"): number(l2_state.bytes_moved.max() / 1e6),
            _name("l2 state extra min us"): number(l2_state.dirty_extra_us.min(), 1),
            _name("l2 state extra max us"): number(l2_state.dirty_extra_us.max(), 1),
            _name("l2 state ratio max"): ratio(at_largest_ratio.dirty_over_clean_time),
            _name("l2 state ratio max mb"): number(at_largest_ratio.bytes_moved / 1e6),
            _name("l2 state ratio largest"): ratio(l2_state.dirty_over_clean_time.iloc[-1]),
            **_launch_size(l2_state)}


CROSSOVER_HBM_WORKING_SET = 512 << 20   # bytes: the crossover study's HBM working set (config)


def _launch_size(l2_state: pd.DataFrame) -> dict[str, str]:
    """How the copy rate depends on the launch's size, from the crossover study's 512 MiB HBM
    working set up (clean L2: the state every sample starts in; dirty: the state before)."""
    large = l2_state[l2_state.bytes_moved >= CROSSOVER_HBM_WORKING_SET]
    if large.empty or "clean_of_largest_clean" not in large:
        return {}
    at = large.iloc[0]
    return {_name("copy clean working set of largest percent"): number(100 * at.clean_of_largest_clean, 1),
            _name("copy dirty working set of largest percent"): number(100 * at.dirty_of_largest_clean, 1),
            _name("copy largest mb"): number(l2_state.bytes_moved.max() / 1e6)}


def _matched(summary: pd.DataFrame) -> dict[str, str]:
    """TMA against the one-warp cp.async gather (matched.py), per phase and TMA load shape, e.g.
    ``pagedKvMatchedDecodeTileOneWarpMedian``."""
    out = {_name("matched win percent"): percent(1 - matched.WIN, 0)}
    for r in summary.itertuples():
        prefix = ("matched", r.phase, r.tma_box)
        out |= {_name(*prefix, "cells"): number(r.cells), _name(*prefix, "cpasync wins"): number(r.cp_async_wins),
                _name(*prefix, "wins more warps"): number(r.cp_async_wins_with_more_warps),
                _name(*prefix, "wins fewer splits"): number(r.cp_async_wins_with_more_warps_and_fewer_splits),
                _name(*prefix, "median"): ratio(r.tma_speedup_median), _name(*prefix, "min"): ratio(r.tma_speedup_min),
                _name(*prefix, "one warp median"): ratio(r.tma_speedup_one_warp_median),
                _name(*prefix, "one warp min"): ratio(r.tma_speedup_one_warp_min)}
    return out


def macros(derived_dir: Path, provenance: dict) -> dict[str, str]:
    derived_dir = Path(derived_dir)
    speedup = pd.read_csv(derived_dir / "speedup.csv")
    tuning = pd.read_csv(derived_dir / "tuning.csv")
    out = {**_sweep(speedup, tuning), **_scaling(speedup), **_comparisons(speedup), **_fa3(speedup),
           **_decode(pd.read_csv(derived_dir / "decode.csv")), **_tuning(tuning),
           **_prefill(pd.read_csv(derived_dir / "prefill.csv"))}
    if (derived_dir / "matched_summary.csv").exists():
        out |= _matched(pd.read_csv(derived_dir / "matched_summary.csv"))
    if (derived_dir / "l2_state.csv").exists():
        out |= _l2_state(pd.read_csv(derived_dir / "l2_state.csv"))
    if (derived_dir / "rule_baselines.csv").exists():
        scores = pd.read_csv(derived_dir / "rule_baselines.csv")
        for scope, name in (("every phase", "All"), ("decode", "Decode"), ("prefill", "Prefill")):
            out |= rule_scores.macros(scores, f"pagedKvFaThreeVsBaselines{name}", scope=scope)
    split = (provenance.get("config") or {}).get("decode_min_ctas_per_sm")
    if split is not None:
        out[_name("decode min ctas per sm")] = number(split)
    if split is not None and "decode_split_rule" not in provenance:
        # data measured before decode splits were chosen per kernel (splits.py): the grid was
        # split to hold decode_min_ctas_per_sm CTAs per SM, whatever the kernel's residency
        out[_name("decode split grid ctas per sm")] = number(split)
    # the TMA path's L2 promotion (runner.TMA_L2_PROMOTION_BYTES); data measured before it was
    # recorded ran 256 B, which the paper names as such
    out[_name("tma l2 promotion bytes")] = number(provenance.get("tma_l2_promotion_bytes", 256))
    if "tma_page_lookup" not in provenance:
        # data measured before the TMA producer looked its page-table entries up a tile ahead
        # (it loaded each box's entry after the wait on a free stage): the paper says so
        out[_name("tma lookup after wait")] = provenance.get("git", {}).get("commit", "unknown")[:7]
    return out
