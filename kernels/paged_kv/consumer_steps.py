"""The steps every S^T = K Q^T consumer rung (consumer_kq.py and up) shares, as inline device
functions: the prologue of a lane's query columns (their key limits and softmax state) and, for
the rungs whose warps share a tile (consumer_kq_wgmma.py and up), the exact online softmax over the
whole tile (the warps' column maxima meeting in ``red``) and the epilogue (the column sums meeting
in ``red``, then every warp writing its dims). A lane's column c is query row ``first_row + 8 (c >>
1) + (c & 1)`` (kq_steps.py's fragments).
"""
from numba import cuda

from tma_kernels.ptx import named_barrier_sync

from .consumer_qk import NEG_INF, ZERO, make_row_limit
from .kq_steps import column_sum


def make_start_columns(variant, columns):
    """``start_columns(limits, m_run, l_run, first_row, group, kv_len, seqlen_q)``: each of the lane's
    ``columns`` query columns' key limit (sequence end or causal diagonal) into ``limits``, its running
    max -inf and sum 0; returns the smallest limit (a tile below it needs no mask)."""
    row_limit = make_row_limit(variant.causal)

    @cuda.jit(device=True, inline=True)
    def start_columns(limits, m_run, l_run, first_row, group, kv_len, seqlen_q):
        smallest_limit = kv_len
        for c in range(columns):
            limits[c] = row_limit(first_row + 8 * (c >> 1) + (c & 1), group, kv_len, seqlen_q)
            smallest_limit = min(smallest_limit, limits[c])
            m_run[c] = NEG_INF
            l_run[c] = ZERO
        return smallest_limit

    return start_columns


def make_shared_softmax(columns, steps, exchange, tile_threads):
    """For warps sharing a tile: ``tile_softmax``, the exact online softmax of the tile (each
    warp's column maxima into ``red``, one named barrier, every warp then the same running max and
    corrections; scores -> P in place); ``finish``: each column's whole sum (the warps' partial
    sums meeting in ``red``), then every warp writes its dims of the rows (from dim block
    ``first_db``), warp 0 the log2-sum-exp too."""
    column_max, softmax_finish, store_column = steps.column_max, steps.softmax_finish, steps.store_column
    publish, gather_max, gather_sum = exchange.publish, exchange.gather_max, exchange.gather_sum

    @cuda.jit(device=True, inline=True)
    def tile_softmax(scores, maxima, m_run, l_run, corrections, red, lane_red, warp, lane, tile_barrier,
                     scale_log2):
        for c in range(columns):
            maxima[c] = column_max(scores, c)
        publish(red, lane_red, maxima, warp, lane)
        named_barrier_sync(tile_barrier, tile_threads)
        for c in range(columns):
            m_run[c], l_run[c], corrections[c] = softmax_finish(
                scores, c, gather_max(red, lane_red, c), m_run[c], l_run[c], scale_log2)

    @cuda.jit(device=True, inline=True)
    def finish(out, lse, acc, maxima, m_run, l_run, red, lane_red, warp, lane, tile_barrier, first_row,
               rows_valid, group, out_row_base, q_heads, kv_head, first_db):
        for c in range(columns):                        # the column sums meet in red
            maxima[c] = column_sum(l_run[c])
        publish(red, lane_red, maxima, warp, lane)
        named_barrier_sync(tile_barrier, tile_threads)
        for c in range(columns):
            store_column(out, lse, acc, c, m_run[c], gather_sum(red, lane_red, c),
                         first_row + 8 * (c >> 1) + (c & 1), rows_valid, group, out_row_base,
                         lane >> 2, q_heads, kv_head, first_db, warp == 0)

    return tile_softmax, finish
