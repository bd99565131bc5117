"""Each heldout case as the operand a kernel author would describe to the advisor.

Written, like the advisor, before any case was measured; it reads the case's parameters and the
compiled TMA kernel's resources (shared memory, registers, warps: what decides how many CTAs an
SM holds, and so the bytes in flight), never a timing.

- gemm: the A and B tiles, re-read by a row or column of CTAs: ``l2``; a box of BLOCK_M x BLOCK_K;
  a tensor-core MMA of BLOCK_M x BLOCK_N x BLOCK_K.
- attention: the K and V tiles, re-read by every query tile of their head: ``l2``; a box of
  BLOCK_N x head dim; an MMA of BLOCK_M x BLOCK_N x head dim.
- paged_decode: every page read once per step: ``hbm``; a box of page size x head dim; an MMA of
  the padded query group (16 rows) x page x head dim, in bf16 (fp8 pages are converted first).
- gather: rows of a table well under the L2 (``l2``) or well over it (``hbm``), read by a
  load-only consumer; a gather of row bytes, bf16 elements.

Bytes in flight per SM: the TMA kernel's shared memory (its stages of the operand, and the query
tile where it has one) times the CTAs an SM holds.
"""
from __future__ import annotations

import math

from tma_study.fa3_rule import fa3_choice

SHARED_PER_SM_BYTES = 233472       # Hopper: 228 KiB per SM ...
RESERVED_PER_CTA_BYTES = 1024      # ... of which the driver reserves 1 KiB per CTA
REGISTERS_PER_SM = 65536
REGISTER_ALLOCATION = 256          # registers are allocated per warp in units of 256
MAX_WARPS_PER_SM, MAX_CTAS_PER_SM = 64, 32
MMA_DTYPE = {"bf16": "bf16", "fp8_e4m3": "fp8"}
FA3_DTYPE = {"bf16": "bf16", "fp8_e4m3": "e4m3"}
ELEMENT_BYTES = {"bf16": 2, "fp8_e4m3": 1}


def ctas_per_sm(shared_bytes: int, registers: int, warps: int) -> int:
    """How many CTAs of a kernel one SM holds at once (shared memory, registers, warps)."""
    by_shared = SHARED_PER_SM_BYTES // (shared_bytes + RESERVED_PER_CTA_BYTES)
    per_warp = math.ceil(registers * 32 / REGISTER_ALLOCATION) * REGISTER_ALLOCATION
    by_registers = REGISTERS_PER_SM // (per_warp * warps) if registers else MAX_CTAS_PER_SM
    return max(1, min(by_shared, by_registers, MAX_WARPS_PER_SM // warps, MAX_CTAS_PER_SM))


def operand(case, shared_bytes: int, registers: int) -> dict:
    """The advisor's operand fields for ``case`` (grid.Case), and FA3's choice where it applies."""
    p = case.params
    in_flight = max(16, shared_bytes) * ctas_per_sm(shared_bytes, registers, p["warps"])
    if case.family == "gemm":
        return {"level": "l2", "shape": "box", "box_dims": f"{p['block_m']}x{p['block_k']}",
                "element_bytes": ELEMENT_BYTES[p["dtype"]], "bytes_in_flight_per_sm": in_flight,
                "consumer": "mma", "mma_dtype": MMA_DTYPE[p["dtype"]],
                "mma_tile": f"{p['block_m']}x{p['block_n']}x{p['block_k']}", "fa3_load_path": ""}
    if case.family == "attention":
        return {"level": "l2", "shape": "box", "box_dims": f"{p['block_n']}x{p['head_dim']}", "element_bytes": 2,
                "bytes_in_flight_per_sm": in_flight, "consumer": "mma", "mma_dtype": "bf16",
                "mma_tile": f"{p['block_m']}x{p['block_n']}x{p['head_dim']}", "fa3_load_path": ""}
    if case.family == "paged_decode":
        fa3 = fa3_choice(p["page_size"], 1, p["q_heads"], p["kv_heads"], p["head_dim"], FA3_DTYPE[p["dtype"]],
                         causal=False)
        return {"level": "hbm", "shape": "box", "box_dims": f"{p['page_size']}x{p['head_dim']}",
                "element_bytes": ELEMENT_BYTES[p["dtype"]], "bytes_in_flight_per_sm": in_flight,
                "consumer": "mma", "mma_dtype": "bf16",
                "mma_tile": f"{p['group_pad']}x{p['page_size']}x{p['head_dim']}", "fa3_load_path": fa3.load_path}
    return {"level": p["table"], "shape": "gather", "row_bytes": p["row_bytes"], "element_bytes": 2,
            "bytes_in_flight_per_sm": in_flight, "consumer": "load_only", "fa3_load_path": ""}
