"""The heldout study's cases: one per configuration of a workload, each timed with both loads.

A case is a family (gemm, attention, paged_decode, gather) and its parameters; its key names
them all (``gemm/bf16/m4096n4096k4096/t128x128x64/s3``). Configurations whose operand buffers
(stages x the operand's tiles, and attention's query tile) exceed the config's shared-memory
limit are left out: neither kernel could run them.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

FAMILIES = ("gemm", "attention", "paged_decode", "gather")
ELEMENT_BYTES = {"bf16": 2, "fp8_e4m3": 1}
ROW_BYTES_PER_K_STEP = 128     # a GEMM's BLOCK_K holds 128 bytes of a row (64 bf16, 128 fp8)
GROUP_PAD = 16                 # paged decode: a KV head's query rows padded to one MMA's rows
WARPS = {"gemm": {64: 4, 128: 8}, "attention": 8, "paged_decode": 4, "gather": 4}


@dataclass(frozen=True)
class Case:
    family: str
    key: str
    params: dict = field(hash=False)

    def __getitem__(self, name):
        return self.params[name]


def _gemm(section: dict, limit: int):
    for (m, n, k), dtype, (bm, bn), stages in itertools.product(section["shapes"], section["dtypes"],
                                                                section["tiles"], section["stages"]):
        elem = ELEMENT_BYTES[dtype]
        bk = ROW_BYTES_PER_K_STEP // elem
        if stages * (bm + bn) * bk * elem > limit:
            continue
        params = {"m": m, "n": n, "k": k, "dtype": dtype, "block_m": bm, "block_n": bn, "block_k": bk,
                  "stages": stages, "warps": WARPS["gemm"][bm]}
        yield Case("gemm", f"gemm/{dtype}/m{m}n{n}k{k}/t{bm}x{bn}x{bk}/s{stages}", params)


def _attention(section: dict, limit: int):
    bm = section["block_m"]
    for tokens, d, causal, bn, stages in itertools.product(section["tokens"], section["head_dims"], section["causal"],
                                                           section["block_n"], section["stages"]):
        if stages * 2 * bn * d * 2 + bm * d * 2 > limit:
            continue
        params = {"batch": section["batch"], "heads": section["heads"], "tokens": tokens, "head_dim": d,
                  "causal": causal, "block_m": bm, "block_n": bn, "stages": stages, "dtype": "bf16",
                  "warps": WARPS["attention"]}
        kind = "causal" if causal else "full"
        yield Case("attention", f"attention/{kind}/n{tokens}d{d}/t{bm}x{bn}/s{stages}", params)


def _paged_decode(section: dict, limit: int):
    for d, dtype, page, context, stages in itertools.product(section["head_dims"], section["dtypes"],
                                                             section["page_sizes"], section["context_tokens"],
                                                             section["stages"]):
        if context % page or stages * 2 * page * d * ELEMENT_BYTES[dtype] > limit:
            continue
        params = {"sequences": section["sequences"], "q_heads": section["q_heads"], "kv_heads": section["kv_heads"],
                  "head_dim": d, "dtype": dtype, "page_size": page, "context_tokens": context, "stages": stages,
                  "group_pad": GROUP_PAD, "warps": WARPS["paged_decode"]}
        yield Case("paged_decode", f"paged_decode/{dtype}/d{d}/p{page}/ctx{context}/s{stages}", params)


def _gather(section: dict, limit: int):
    for elements, (level, table_bytes), stages in itertools.product(section["row_elements"],
                                                                     sorted(section["tables"].items()),
                                                                     section["stages"]):
        row_bytes = elements * ELEMENT_BYTES["bf16"]
        if stages * row_bytes > limit:
            continue
        params = {"row_elements": elements, "row_bytes": row_bytes, "dtype": "bf16", "table": level,
                  "table_rows": table_bytes // row_bytes, "rows": section["bytes_gathered"] // row_bytes,
                  "rows_per_cta": section["rows_per_cta"], "stages": stages, "warps": WARPS["gather"]}
        yield Case("gather", f"gather/{level}/r{row_bytes}/s{stages}", params)


def cases(study: dict) -> list[Case]:
    """Every case of the configured sweep, in family order."""
    limit = study["shared_memory_limit_bytes"]
    out = [*_gemm(study["gemm"], limit), *_attention(study["attention"], limit),
           *_paged_decode(study["paged_decode"], limit), *_gather(study["gather"], limit)]
    keys = [c.key for c in out]
    if len(set(keys)) != len(keys):
        raise ValueError("heldout: two cases share a key")
    return out
