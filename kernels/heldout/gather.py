"""Rows of a table gathered by an index: out[i] = table[index[i]] (an embedding lookup, a MoE
token gather), D elements a row.

One CTA copies ROWS consecutive entries of the index, one row at a time, STAGES rows in flight;
each row is stored by pointers. The two kernels differ only in how a row is loaded: a TMA tensor
descriptor (a 1 x D box at the indexed row), or pointers.
"""
import triton
import triton.language as tl


@triton.jit
def gather_tma(table_desc,      # TMA descriptor of the table, rows x D, block 1 x D
               index_ptr,       # int32 row of the table for each output row
               out_ptr,         # output rows, row-major, D elements each
               ROWS: tl.constexpr, D: tl.constexpr, STAGES: tl.constexpr):
    first = tl.program_id(0) * ROWS
    cols = tl.arange(0, D)
    for r in tl.range(0, ROWS, num_stages=STAGES):
        row = tl.load(index_ptr + first + r)
        x = table_desc.load([row, 0])
        tl.store(out_ptr + (first + r) * D + cols[None, :], x)


@triton.jit
def gather_pointer(table_ptr,   # the table, rows x D, row-major
                   index_ptr, out_ptr,
                   ROWS: tl.constexpr, D: tl.constexpr, STAGES: tl.constexpr):
    first = tl.program_id(0) * ROWS
    cols = tl.arange(0, D)
    for r in tl.range(0, ROWS, num_stages=STAGES):
        row = tl.load(index_ptr + first + r)
        x = tl.load(table_ptr + row * D + cols[None, :])
        tl.store(out_ptr + (first + r) * D + cols[None, :], x)
