"""The cp.async producer's page-table loads on the SASS: one batch per tile, issued a tile
ahead, before the wait on ``empty`` and before any copy.

The producer's tile loop is the smallest SASS loop (a predicated backward ``BRA`` with no
``EXIT`` inside) that holds both the ``empty`` wait (``SYNCS.PHASECHK.TRANS64.TRYWAIT``)
and the copies (``LDGSTS``). Page-table entries are the loop's only 32-bit global loads
(``LDG.E R..``; K/V data moves by ``LDGSTS``, Q by ``LDG.E.128`` outside the loop). In it:

1. ``page_entries`` page-table LDGs per tile (``GatherPlan``; 1 here), not one per
   16-byte piece: the ``rows_per_thread`` rows' pages come from the row group's lanes by
   ``SHFL.IDX`` (one per copy);
2. exactly ``2 * rows_per_thread`` LDGSTS (K and V tile), i.e. the copies are fully
   unrolled (a compile-time trip count: no remainder loop of LDG -> LDGSTS pairs);
3. every page-table LDG is issued before the wait and before the first LDGSTS;
4. no instruction reads an LDG's destination register between the LDG and the loop's
   last LDGSTS: the entry loaded in this iteration is for the *next* tile, so no copy of
   this tile waits on it, and its latency overlaps the wait and the copies.
Together: the lookups of a tile are all in flight before anything uses one (1, 3), and
none sits on the path from the wait to the copies (4). The kernel before this change
(a per-piece lookup in a loop with a run-time start, which LLVM unrolled by 4 behind a
serial remainder loop) fails 1 to 4: 14 page-table LDGs and 14 LDGSTS in the loop (per K
and per V tile: 3 remainder LDG -> LDGSTS pairs and 4 LDGs then 4 LDGSTS), all after the
wait, each LDG's result read before the LDGSTS that follows it (e4m3 runs 8 lookups per
tile, bf16 16).
"""
import functools
import re

import pytest
from tma_kernels.paged_kv.geometry import Variant
from tma_kernels.paged_kv.kernel import SIGNATURE, make_attention_kernel
from tma_kernels.paged_kv.producers import GatherPlan, make_producer

from tma_study.harness.kernel_builds import kernel_cache

_LABEL = re.compile(r"^\.(L_x_\d+):\s*$")
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?P<text>.*?)\s*;?\s*$")
_BACK_BRANCH = re.compile(r"^@!?P\d+\s+BRA\s+`\(\.(L_x_\d+)\)")
_PAGE_LOAD = re.compile(r"^(?:@!?P\d+\s+)?LDG\.E\s+(R\d+),")
_WAIT = "SYNCS.PHASECHK.TRANS64.TRYWAIT"

DECODE = {"head_dim": 128, "load_path": "cp_async", "block_n": 64, "consumer_warps": 1,
          "stages": 2, "producer_warps": 4}
VARIANTS = [Variant(dtype="e4m3", **DECODE), Variant(dtype="bf16", **DECODE),
            Variant(dtype="e4m3", min_ctas_per_sm=2, **DECODE)]   # the bounded decode build


@functools.cache
def compiled(variant):
    return kernel_cache().compile(variant.name, make_attention_kernel(variant), SIGNATURE)


def parse(sass):
    """[instruction text] in address order and {label: index of the next instruction}."""
    instructions, labels = [], {}
    for line in sass.splitlines():
        if label := _LABEL.match(line):
            labels[label.group(1)] = len(instructions)
        elif instruction := _INSTRUCTION.match(line):
            instructions.append(instruction.group("text"))
    return instructions, labels


def producer_loop(sass, copy="LDGSTS"):
    """Instructions of the smallest loop holding the empty wait and the ``copy`` instructions."""
    instructions, labels = parse(sass)
    loops = []
    for end, text in enumerate(instructions):
        branch = _BACK_BRANCH.match(text)
        if branch and labels.get(branch.group(1), end + 1) <= end:
            body = instructions[labels[branch.group(1)]:end + 1]
            if (any(t.startswith(copy) for t in body) and any(_WAIT in t for t in body)
                    and not any("EXIT" in t for t in body)):
                loops.append(body)
    assert loops, f"no SASS loop holds both the empty wait and the {copy} copies"
    return min(loops, key=len)


def reads(text, register):
    """Whether instruction ``text`` reads ``register`` (any operand but a plain destination)."""
    operands = [o.strip() for o in text.split(None, 1)[-1].split(",")]
    number = int(register[1:])
    names = {register, f"R{number - 1}.64"}
    return any(re.search(rf"\b{re.escape(n)}\b", o) for o in operands[1:] for n in names) or (
        "[" in operands[0] and re.search(rf"\b{register}\b", operands[0]) is not None)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_page_table_loads_are_batched_ahead_of_the_copies(variant):
    plan = GatherPlan.of(variant)
    body = producer_loop(compiled(variant).sass)
    loads = [(i, _PAGE_LOAD.match(t).group(1)) for i, t in enumerate(body) if _PAGE_LOAD.match(t)]
    copies = [i for i, t in enumerate(body) if t.startswith("LDGSTS")]
    wait = min(i for i, t in enumerate(body) if _WAIT in t)
    shuffles = sum(t.startswith("SHFL.IDX") for t in body)
    where = f"{variant.name}: producer loop of {len(body)} instructions"
    assert len(loads) == plan.page_entries, f"{where}: {len(loads)} page-table LDGs per tile"
    assert len(copies) == 2 * plan.rows_per_thread, f"{where}: {len(copies)} LDGSTS per tile"
    assert shuffles == 2 * plan.rows_per_thread, f"{where}: {shuffles} SHFL.IDX per tile"
    assert_loaded_ahead(body, loads, copies, wait, where)


def assert_loaded_ahead(body, loads, copies, wait, where):
    """Points 3 and 4 of the module docstring: every page-table LDG before the wait and the
    first copy, and its register unread until after the last copy."""
    for index, register in loads:
        assert index < wait and index < copies[0], (
            f"{where}: page-table LDG at {index} after the wait ({wait}) or a copy ({copies[0]})")
        users = [i for i in range(index + 1, copies[-1] + 1) if reads(body[i], register)]
        assert not users, (f"{where}: {register} (page-table LDG at {index}) read at {users[0]}, "
                           f"before the last copy ({copies[-1]}): a copy waits on the lookup")


TMA_DECODE = [Variant(dtype=dtype, head_dim=128, load_path="tma", block_n=64, consumer_warps=1,
                      stages=2, producer_warps=1) for dtype in ("bf16", "e4m3")]


@pytest.mark.parametrize("variant", TMA_DECODE, ids=lambda v: v.name)
def test_tma_page_entries_are_loaded_a_tile_ahead(variant):
    """The TMA path's producer loop: its page_entries page-table LDGs (one per 8- or 16-row
    slot, producers.make_tma_producer) come before the wait and before the first box
    (UTMALDG), and no box of this tile reads one (they are the next tile's): no box waits
    on a page-table load from HBM, as every box did when lane 0 loaded each box's entry
    right before issuing it."""
    entries = make_producer(variant).page_entries
    body = producer_loop(compiled(variant).sass, copy="UTMALDG")
    loads = [(i, _PAGE_LOAD.match(t).group(1)) for i, t in enumerate(body) if _PAGE_LOAD.match(t)]
    boxes = [i for i, t in enumerate(body) if t.startswith("UTMALDG")]
    wait = min(i for i, t in enumerate(body) if _WAIT in t)
    where = f"{variant.name}: producer loop of {len(body)} instructions"
    assert len(loads) == entries, f"{where}: {len(loads)} page-table LDGs per tile, not {entries}"
    assert_loaded_ahead(body, loads, boxes, wait, where)
