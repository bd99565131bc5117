"""How many pieces a decode launch splits each sequence's KV into: FA3's wave-efficiency rule,
counted over the compiled kernel's resident CTA slots.

A split-KV grid has ``ctas_per_split x splits`` CTAs (one per (sequence, KV head, query
block) and KV piece). How well it fills the GPU depends on how many CTAs of *this* kernel
run at once: ``slots = resident CTAs per SM x SMs`` (measure.resident_ctas). Two kernels
of one configuration can differ there (the bf16 TMA decode kernel fits 3 CTAs per SM, the
4-producer-warp cp.async one 2), so each kernel gets its own split count, chosen for its
own slots; a grid rule fixed per configuration would time one path at a full last wave and
the other at a part-empty one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tma_study.fa3_rule import FA3_COMMIT, FA3_REPOSITORY

FA3_SOURCE = (f"{FA3_REPOSITORY}@{FA3_COMMIT} hopper/heuristics.h lines 25-59 (num_splits_heuristic), called from "
              "hopper/flash_api.cpp line 469")
FA3_MAX_SPLITS = 128            # flash_api.cpp line 469 passes max_splits = 128
ONE_WAVE_FRACTION = 0.8         # heuristics.h: total_mblocks >= 0.8 * num_SMs -> 1 split
FEW_KV_TILES = 4                # heuristics.h: num_n_blocks <= 4 -> 1 split
EFFICIENCY_SHARE = 0.85         # heuristics.h: smallest split count within 85 % of the best

RULE_DECODE = "fa3_wave_efficiency_over_resident_slots"
RULE_PREFILL = "prefill_unsplit"
RULE_TEXT = (f"decode: FA3's num_splits_heuristic ({FA3_SOURCE}) with num_SMs replaced by the "
             "compiled kernel's resident CTA slots (resident CTAs per SM x SMs), without FA3's "
             "L2-size branch (it needs 2 x num_SMs query blocks per KV head and no causal mask; "
             "decode has a few query blocks per KV head); prefill: 1 split")


@dataclass(frozen=True)
class SplitChoice:
    """The split count a launch uses, the rule and branch that chose it, and its waves."""

    num_splits: int
    rule: str               # RULE_DECODE or RULE_PREFILL
    reason: str             # which branch of the rule decided
    grid_ctas: int          # ctas_per_split x num_splits
    slots: int              # resident CTAs per SM x SMs

    @property
    def waves(self) -> float:
        """Grid CTAs over resident slots: 1.94 is two waves with the second 94 % full."""
        return self.grid_ctas / self.slots

    def columns(self) -> dict:
        return {"num_splits": self.num_splits, "split_rule": self.rule, "split_reason": self.reason,
                "grid_ctas": self.grid_ctas, "resident_slots": self.slots, "waves": self.waves}


def wave_efficiency_splits(ctas_per_split: int, slots: int, kv_tiles: int,
                           max_splits: int = FA3_MAX_SPLITS) -> tuple[int, str]:
    """(splits, branch): FA3's split-KV heuristic with resident CTA slots in place of SMs.

    Follows ``num_splits_heuristic`` in hopper/heuristics.h lines 25-59 of
    Dao-AILab/flash-attention at 0251105a2fb19d2957484b7f023cd8c115286ced, which
    flash_api.cpp line 469 calls with num_SMs = the SM count and max_splits = 128:

    - 1 split if the unsplit grid nearly fills the GPU (``ctas_per_split >= 0.8 x slots``);
    - 1 split if there are at most 4 KV tiles to split;
    - otherwise, for splits 1 .. min(max_splits, slots, kv_tiles), the wave efficiency
      ``n / ceil(n)`` with ``n = ctas_per_split x splits / slots`` waves; the smallest split
      count whose efficiency is at least 85 % of the best one.

    What differs from FA3: ``slots`` (the kernel's resident CTAs per SM x SMs) stands where
    FA3 has num_SMs, because FA3's kernels fit one CTA per SM and ours fit several: a wave is
    one CTA per resident slot. FA3's L2-size branch (split a single KV head larger than
    50 MB when the unsplit grid already fills the GPU) is left out: it requires at least
    2 x num_SMs query blocks per KV head and a non-causal, non-local call, and our decode
    has one to a few query blocks per KV head, so it could never fire here. FA3 computes
    the efficiencies in float32; this in float64 (a tie at the 85 % line could round apart).
    """
    if min(ctas_per_split, slots, kv_tiles, max_splits) < 1:
        raise ValueError(f"wave_efficiency_splits: ctas_per_split {ctas_per_split}, slots {slots}, "
                         f"kv_tiles {kv_tiles} and max_splits {max_splits} must all be >= 1")
    if ctas_per_split >= ONE_WAVE_FRACTION * slots:
        return 1, f"unsplit grid fills >= {ONE_WAVE_FRACTION:.0%} of the resident slots"
    if kv_tiles <= FEW_KV_TILES:
        return 1, f"at most {FEW_KV_TILES} KV tiles"
    candidates = range(1, min(max_splits, slots, kv_tiles) + 1)
    efficiency = []
    for splits in candidates:
        waves = ctas_per_split * splits / slots
        efficiency.append(waves / math.ceil(waves))
    best = max(efficiency)
    chosen = next(s for s, e in zip(candidates, efficiency) if e >= EFFICIENCY_SHARE * best)
    return chosen, f"smallest split count within {EFFICIENCY_SHARE:.0%} of the best wave efficiency"
