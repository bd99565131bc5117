"""The paged_kv study's rules of thumb (entry point ``rules``), computed from its derived data.

Every verdict follows the data (facts.py): the page-size rule says TMA, cp.async, a tie or
"no threshold" as the comparisons do; the FA3 row says whether, and through which clause,
FA3's rule picked the slower path; the decode row says whether the copy-rate bar was met;
the consumer row names the decode consumer that won most cells (where a run swept several).
The only fixed numbers are the issue's decode bar (aggregate.DECODE_BAR_*) and MAJORITY.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from . import facts, tuning_facts
from .facts import PATH_LABELS, PageRule

NEAR_TIE = 1.03         # TMA faster by at most this (cp.async time / TMA time): a win too small to switch for
MAJORITY = 0.5          # a rule that holds in more than half of the comparisons is worth stating
# the claims (config/claims/paged_kv.yaml) each row rests on: a row is a rule only while they PASS
PAGE_CLAIMS = {"decode": ("paged_kv_decode_tma_never_3pct_faster",
                          "paged_kv_decode_tile_box_loses_only_to_a_wider_gather"),
               "prefill": ("paged_kv_prefill_bf16_tma_from_32_token_pages",
                           "paged_kv_prefill_e4m3_tma_from_64_token_pages")}
FA3_CLAIMS = ("paged_kv_fa3_rule_costs_under_3pct_in_decode", "paged_kv_fa3_misses_are_cp_async_under_12pct")
CLAIM_MARGIN = 1.03     # the margin of the decode claims (config/claims/paged_kv.yaml)
DECODE_CLAIMS = ("paged_kv_decode_bf16_reaches_70pct_of_copy", "paged_kv_decode_e4m3_reaches_65pct_of_copy")
PHASE_SITUATIONS = {"decode": "paged-KV decode (few query tokens): load K/V pages with TMA or gather with cp.async",
                    "prefill": "paged-KV prefill (causal, long queries): load K/V pages with TMA or gather with cp.async"}


def _advice(rule: PageRule) -> str:
    """What a kernel writer should do, from one page-size verdict."""
    if rule.tma_from is None:
        if rule.tally.tma_wins == 0:
            return "gather K/V with cp.async: TMA was never faster at any page size"
        if rule.speedup_max <= NEAR_TIE:
            return (f"gather K/V with cp.async, or load them with TMA at a small cost: TMA won {rule.tally.tma_wins} "
                    f"of {rule.tally.compared}, by {100 * (rule.speedup_max - 1):.0f} % at most, and was "
                    f"{100 * (1 - rule.speedup_median):.0f} % slower in the median")
        return (f"no page-size rule: cp.async still won at {rule.pages[-1]}-token pages while TMA won elsewhere; "
                "measure the shape")
    smallest = rule.tma_from == rule.pages[0]
    if rule.tma_wins_from == 0:
        return ("either path: TMA was never slower" + ("" if smallest else f" from {rule.tma_from}-token pages")
                + ", and never faster")
    if smallest:
        return f"load K/V with TMA at every page size its boxes take (from {rule.pages[0]} tokens)"
    return (f"load K/V with TMA from {rule.tma_from}-token pages; gather smaller pages with cp.async "
            f"(the threshold lies above {rule.below} tokens)")


def _page_row(speedup: pd.DataFrame, phase: str) -> dict | None:
    pooled = facts.page_rule(speedup, phase)
    if pooled is None:
        return None
    by_dtype = {dtype: facts.page_rule(speedup, phase, dtype) for dtype in facts.DTYPES}
    by_dtype = {dtype: rule for dtype, rule in by_dtype.items() if rule is not None}
    if len({rule.verdict for rule in by_dtype.values()}) > 1:
        rule = "; ".join(f"{dtype}: {_advice(r)}" for dtype, r in by_dtype.items())
    else:
        rule = _advice(pooled)
    parts = [f"{dtype}: {r.tally.text()}, cp.async time / TMA time median {r.speedup_median:.2f} "
             f"({r.speedup_min:.2f} .. {r.speedup_max:.2f})" for dtype, r in by_dtype.items()]
    knobs = "stages, producer warps" + (", consumer" if phase == "decode" else "")
    evidence = (f"page-size sweep, each path at its best {knobs}; {'; '.join(parts)}; cp.async wins by "
                f"page size (tokens: count) {pooled.losses_text()}")
    return {"situation": PHASE_SITUATIONS[phase], "rule": rule, "evidence": evidence, "figure": "paged_kv_speedup",
            "claims": PAGE_CLAIMS[phase]}


def _against_baselines(baselines: pd.DataFrame | None):
    """(FA3's row over every phase in rule_baselines.csv, its best baseline's row), or None."""
    if baselines is None or "role" not in baselines:
        return None
    every = baselines[baselines.scope == "every phase"]
    rule = every[every.role == "rule"]
    if rule.empty:
        return None
    r = rule.iloc[0]
    return r, every[every.policy == r.best_baseline].iloc[0]


def _fa3_row(speedup: pd.DataFrame, baselines: pd.DataFrame | None = None) -> dict | None:
    every = facts.fa3_agreement(speedup)
    if not every.decided:
        return None
    main = every.main_miss()
    if main is None:
        rule = "follow FlashAttention-3's rule: it never chose the slower path here"
    elif every.fraction > MAJORITY:
        rule = (f"follow FlashAttention-3's rule, knowing it chose the slower path in {every.disagrees} of "
                f"{every.decided}, mostly through {facts.CLAUSE_TEXT[main]}")
    else:
        rule = (f"do not take FlashAttention-3's choice as the faster path on this GPU: it chose the slower one in "
                f"{every.disagrees} of {every.decided}, mostly through {facts.CLAUSE_TEXT[main]}")
    phases = [(phase, facts.fa3_agreement(speedup, phase)) for phase in facts.PHASES]
    misses = ", ".join(f"{clause} {n}" for clause, n in every.misses_by_clause.items() if n)
    evidence = ("where both paths ran (a tie agrees with either choice): "
                + "; ".join(f"{phase} {a.agrees} of {a.decided} agree, FA3 picks TMA in {a.picks_tma}"
                            for phase, a in phases if a.decided)
                + (f"; misses by clause: {misses}" if misses else ""))
    scored = _against_baselines(baselines)
    if scored is not None:
        r, best = scored
        evidence += (f"; {'predictive' if r.predictive else 'not predictive'}: right in {100 * r.share:.0f} % "
                     f"[{100 * r.share_low:.0f}, {100 * r.share_high:.0f}], {best.policy.replace('_', ' ')} in "
                     f"{100 * best.share:.0f} % [{100 * best.share_low:.0f}, {100 * best.share_high:.0f}]")
        if not r.predictive:
            rule = (f"do not read FlashAttention-3's rule as a prediction of the faster path here: "
                    f"{best.policy.replace('_', ' ')} is right more often or as often (it chose the slower path in "
                    f"{every.disagrees} of {every.decided}, mostly through {facts.CLAUSE_TEXT[main]})"
                    if main is not None else rule)
    return {"situation": "FlashAttention-3's paged-KV dispatch (TMA iff page size % kBlockN == 0 and query rows "
                         "per KV head > kBlockM)", "rule": rule, "evidence": evidence, "figure": "paged_kv_fa3",
            "claims": FA3_CLAIMS}


def _decode_row(decode: pd.DataFrame) -> dict | None:
    bar = facts.decode_bar(decode)
    if bar is None:
        return None
    percent, context, batch = (100 * facts.BAR["fraction"], facts.BAR["min_context"], facts.BAR["min_batch"])
    if bar.met == bar.points:
        # what every point reached, rounded down to 5 % after the claims' 3 % margin
        floor = 5 * math.floor(100 * bar.fraction_min / CLAIM_MARGIN / 5)
        rule = (f"expect paged decode to read K/V at {floor} % or more of the copy rate, with either path's best "
                f"(every point reached the {percent:.0f} % bar)")
    elif bar.met == 0:
        rule = f"budget paged decode below {percent:.0f} % of the copy rate: no point reached it"
    else:
        rule = f"{percent:.0f} % of the copy rate is reached at some decode points only ({bar.met} of {bar.points})"
    parts = []
    for dtype in facts.DTYPES:
        mine = facts.decode_bar(decode, dtype)
        if mine is not None:
            parts.append(f"{dtype}: {100 * mine.fraction_min:.0f} .. {100 * mine.fraction_max:.0f} % of copy "
                         f"(median {100 * mine.fraction_median:.0f} %), better path TMA at {mine.best_tma} of "
                         f"{mine.points} points")
    sdpa = facts.sdpa(decode)
    if sdpa is not None:
        parts.append(f"bf16 paged / torch SDPA on a contiguous cache: median {sdpa.paged_over_sdpa_median:.2f} "
                     f"at {sdpa.points} points")
    return {"situation": f"paged-KV decode at contexts of {context} tokens or more, batch {batch} or more: "
                         "how close to the copy rate",
            "rule": rule, "evidence": "; ".join(parts), "figure": "paged_kv_decode", "claims": DECODE_CLAIMS}


def _warps(n: int) -> str:
    return f"{n} producer warp{'s' if n > 1 else ''}"


def _knob_advice(found: dict, swept: tuple[int, ...], what: str) -> str:
    """'give cp.async e4m3 decode a 4-stage K/V ring; TMA bf16, ...: 2 stages' from the
    per-(path, dtype) winners of one knob (``what``: 'stages' or 'producer warps')."""
    unusual = {key: c for key, c in found.items() if c.chosen_most != swept[0]}
    if not unusual:
        return (f"a {swept[0]}-stage K/V ring is enough for either load path in decode" if what == "stages"
                else f"{_warps(swept[0])} for the cp.async gather in decode, in either dtype")
    if what == "stages":
        parts = [f"give {PATH_LABELS[path]} {dtype} decode a {c.chosen_most}-stage K/V ring"
                 for (path, dtype), c in unusual.items()]
    else:
        parts = [f"gather {dtype} decode K/V with {c.chosen_most} cp.async producer warps"
                 for (_, dtype), c in unusual.items()]
    rule = "; ".join(parts)
    usual = [f"{PATH_LABELS[path]} {dtype}" if what == "stages" else dtype for path, dtype in found
             if (path, dtype) not in unusual]
    if usual:
        rule += f"; {', '.join(usual)}: " + (f"{swept[0]} stages" if what == "stages" else _warps(swept[0]))
    return rule


def _tuning_row(tuning: pd.DataFrame) -> dict | None:
    """The decode tuning rule: which ring depth, and for the cp.async gather which producer-warp
    count, won most cells per path and dtype (each cell's fastest timed combination)."""
    swept = tuning_facts.swept_stages(tuning, "decode")
    warps = tuning_facts.swept_producer_warps(tuning, "decode")
    keys = [(path, dtype) for path in facts.LOAD_PATHS for dtype in facts.DTYPES]
    depth = {key: tuning_facts.stages(tuning, "decode", *key) for key in keys}
    depth = {key: c for key, c in depth.items() if c is not None}
    producers = {key: tuning_facts.producer_warps(tuning, "decode", *key) for key in keys if key[0] == "cp_async"}
    producers = {key: c for key, c in producers.items() if c is not None}
    parts, evidence = [], []
    if len(swept) > 1 and depth:
        parts.append(_knob_advice(depth, swept, "stages"))
        evidence.append("stage count that won the most decode cells: " + "; ".join(
            f"{PATH_LABELS[path]} {dtype} {c.chosen_most} ({c.chosen_most_cells} of {c.cells})"
            for (path, dtype), c in depth.items()))
    if len(warps) > 1 and producers:
        parts.append(_knob_advice(producers, warps, "producer warps"))
        evidence.append("cp.async producer-warp count that won the most decode cells: " + "; ".join(
            f"{dtype} {c.chosen_most} ({c.chosen_most_cells} of {c.cells})" for (_, dtype), c in producers.items()))
    if not parts:
        return None
    combos = [(key, tuning_facts.combination(tuning, "decode", *key)) for key in depth]
    evidence.append("combination that won the most: " + "; ".join(
        f"{PATH_LABELS[path]} {dtype} {c.stages} stages x {_warps(c.producer_warps)} ({c.cells_won} of {c.cells})"
        for (path, dtype), c in combos if c is not None))
    bounds = tuning_facts.launch_bounds(tuning)
    evidence.append(f"{bounds.bounded_kernels} of {bounds.kernels} chosen decode kernels compiled with launch bounds")
    knobs = [f"{' or '.join(map(str, swept))} stages"] if len(swept) > 1 else []
    knobs += [f"{' or '.join(map(str, warps))} cp.async producer warps"] if len(warps) > 1 else []
    return {"situation": f"K/V ring depth and producer warps of a paged decode kernel ({', '.join(knobs)})",
            "rule": "; ".join(parts), "evidence": "; ".join(evidence), "figure": "paged_kv_tuning"}


#: the rule's words for each decode consumer (tma_kernels.paged_kv.layouts.DECODE_CONSUMERS, each)
CONSUMER_TEXT = {"kq": "give each warp its own query rows over whole tiles (kq)",
                 "kq_wgmma": "share each K/V tile among 4 warps, S^T as one warpgroup wgmma (kq_wgmma)",
                 "kq_wgmma_rs_lazy": ("accumulate P V in place and rescale O only when a running max moves far "
                                      "(kq_wgmma_rs_lazy)"),
                 "kq_wgmma_rs_lazy_rowsplit": ("run two kq_wgmma_rs_lazy warpgroups on every K/V tile, half the "
                                               "query rows each (kq_wgmma_rs_lazy_rowsplit)")}


def _consumer_row(tuning: pd.DataFrame) -> dict | None:
    """The decode consumer rule, per query-token count: the consumer that won more than half
    of the timed cells in every dtype, from a run that swept several; None otherwise."""
    others = tuning_facts.compared_consumers(tuning)
    if not others:
        return None
    decode = tuning[(tuning.phase == "decode") & (tuning.status == facts.MEASURED)]
    parts, evidence = [], []
    for q in sorted(int(n) for n in decode.seqlen_q.unique()):
        tokens = f"{q} query token{'s' if q > 1 else ''}"
        won = {dtype: decode[(decode.seqlen_q == q) & (decode.dtype == dtype)].score_layout.value_counts()
               for dtype in facts.DTYPES}
        won = {dtype: counts for dtype, counts in won.items() if counts.sum()}
        leaders = {counts.idxmax() if counts.max() > MAJORITY * counts.sum() else None for counts in won.values()}
        leader = leaders.pop() if len(leaders) == 1 else None
        verdict = (CONSUMER_TEXT.get(leader, leader) if leader is not None
                   else "no one consumer (none won most cells in every dtype)")
        tallies = "; ".join(f"{dtype}: " + ", ".join(f"{c} {n}" for c, n in counts.sort_index().items())
                            + f" of {counts.sum()}" for dtype, counts in won.items())
        parts.append(f"{tokens}: {verdict} (cells won, {tallies})")
        for dtype in won:
            for consumer in others:
                w = tuning_facts.consumer_wins(tuning, dtype, q, consumer)
                if w is not None:
                    evidence.append(f"{dtype} {tokens}: {consumer} time / kq time median {w.over_kq_median:.2f} "
                                    f"over {w.cells} cells")
    swept = ", ".join(CONSUMER_TEXT.get(c, c) for c in [tuning_facts.BASE_CONSUMER, *others])
    return {"situation": f"consumer of a paged decode kernel: {swept}",
            "rule": "; ".join(parts), "evidence": "each consumer at its best other knobs; " + "; ".join(evidence),
            "figure": "paged_kv_tuning"}


def rules_of_thumb(derived_dir: Path, provenance: dict) -> list[dict]:
    derived_dir = Path(derived_dir)
    speedup = pd.read_csv(derived_dir / "speedup.csv")
    rows = [_page_row(speedup, phase) for phase in facts.PHASES]
    tuning = pd.read_csv(derived_dir / "tuning.csv")
    baselines = pd.read_csv(derived_dir / "rule_baselines.csv") if (derived_dir / "rule_baselines.csv").is_file() else None
    rows += [_fa3_row(speedup, baselines), _decode_row(pd.read_csv(derived_dir / "decode.csv")), _tuning_row(tuning),
             _consumer_row(tuning)]
    rows = [row for row in rows if row is not None]
    if "tma_page_lookup" not in provenance:
        rows = [_with_late_lookup_caveat(row) for row in rows]
    return rows


LATE_LOOKUP = ("these data predate the TMA producer's look-ahead: it read each box's page-table entry after "
               "the wait on a free stage, where the cp.async producer had its entries a tile earlier, which "
               "favours cp.async")


def _with_late_lookup_caveat(row: dict) -> dict:
    """Rows that compare the paths, from data measured before the TMA producer looked its pages
    up a tile ahead (provenance without ``tma_page_lookup``; paper: paged_kv section)."""
    if row["figure"] not in ("paged_kv_speedup", "paged_kv_decode", "paged_kv_fa3"):
        return row
    return {**row, "rule": f"{row['rule']} (provisional: TMA disadvantaged in these data)",
            "evidence": f"{row['evidence']}; caveat: {LATE_LOOKUP}"}
