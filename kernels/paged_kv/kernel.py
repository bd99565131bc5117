"""Attention forward over a paged KV cache, warp-specialised like FlashAttention-3.

    O[b, t, h, :] = softmax(Q[b, t, h, :] . K[b, :, h // group, :]^T * softmax_scale) V[b, :, h // group, :]

Layouts (row-major, element type bf16 or fp8 e4m3, passed as raw device addresses):
    Q           (batch, seqlen_q, q_heads, head_dim)
    K, V pools  (num_pages, page_size, kv_heads, head_dim)     FlashAttention-3's paged layout
    page_table  int32 (batch, max_pages): physical page of each sequence's logical page
    seqlens_k   int32 (batch,): tokens in each sequence's cache (ragged; last page partial)
    out         float32 (num_splits, batch, seqlen_q, q_heads, head_dim)
    lse         float32 (num_splits, batch, seqlen_q, q_heads): log2 of each row's sum of
                exp2(scaled scores), -inf for a row with no key in its split
With ``num_splits == 1``, ``out[0]`` is the attention output; otherwise
:mod:`.combine` merges the splits, launched as a programmatic dependent launch: every CTA
here triggers it first thing (``griddepcontrol.launch_dependents``), so it is scheduled
while this grid runs and waits in ``griddepcontrol.wait`` for this grid's end.

Work tile (one CTA): (sequence b, KV head, split, m-block). GQA is packed into M as in
FA3's PackGQA: packed row r is query token ``r // group`` of query head
``kv_head * group + r % group`` (``group = q_heads / kv_heads``), so decode (1 or 4
tokens) fills the rows of an mma with the query heads that share one KV head. The
m-block covers packed rows ``[m_block * block_m, ...)``; the split covers an equal share
of the sequence's KV tiles (split-KV, for decode grids too small to fill the GPU).

    threads [0, 32 * consumer_warps)      consumers: rows_per_warp packed rows each, the
                                          consumer of the variant's score_layout (layouts.py:
                                          consumer_qk.py, S = Q K^T, 16 rows; consumer_kq.py,
                                          decode: S^T = K Q^T; and the rungs after it)
    threads [.., + 32 * producer_warps)   producer: K and V tiles into the rings (producers.py)

    K tile k uses stage s = k % stages of the K ring and of the V ring.
    producer: look up tile k + 1's pages -> wait empty[s] (after the first round)
              -> K tile -> full_k[s]; V tile -> full_v[s]
    consumer: wait full_k[s] -> S, softmax -> wait full_v[s] -> O += P V -> arrive empty[s]

Causal (a compile-time choice): bottom-right aligned, query token t sees keys
``< kv_len - seqlen_q + t + 1``; a CTA reads only the KV tiles some of its rows see.
The steps every variant shares (work tile, ring barriers, the producer's ring) are kernel_steps.py's.
Shared memory: Q tile, K ring, V ring, the shares_tile consumers' scratch (dynamic, 1024-byte
aligned) and 3 x MAX_STAGES mbarriers (static).
"""
import importlib

from numba import cuda, uint8, uint32, uint64
from tma_kernels.ptx import griddepcontrol_launch_dependents, smem_u32

from .geometry import MAX_STAGES, TILE_ALIGN_BYTES, Variant
from .kernel_steps import make_producer_ring, make_ring_init, make_work_tile

#: (q_address, k_pool_address, v_pool_address, k_tensor_map, v_tensor_map, page_table,
#:  seqlens_k, out, lse, seqlen_q, q_heads, kv_heads, log2_page_size, num_splits, m_blocks,
#:  scale_log2)
SIGNATURE = ("void(uint64, uint64, uint64, uint64, uint64, int32[:, ::1], int32[::1], "
             "float32[::1], float32[::1], int32, int32, int32, int32, int32, int32, float32)")


def make_consumer(variant: Variant):
    """``variant``'s consumer: ``make_consumer`` of its layout's file (``layouts.Layout.module``)."""
    return importlib.import_module(f".{variant.layout.module}", __package__).make_consumer(variant)


def make_attention_kernel(variant: Variant):
    """The Python kernel function of ``variant`` (compile it with :data:`SIGNATURE`)."""
    consume = make_consumer(variant).consume
    work_tile, init_ring = make_work_tile(variant), make_ring_init(variant)
    produce_ring = make_producer_ring(variant)
    consumer_threads, q_tile_bytes, threads = variant.consumer_threads, variant.q_tile_bytes, variant.threads
    ring_bytes = variant.stages * variant.kv_tile_bytes

    def paged_attention(q_address,  # uint64: Q (batch, seqlen_q, q_heads, head_dim)
                        k_pool,  # uint64: K pages (num_pages, page_size, kv_heads, head_dim)
                        v_pool,  # uint64: V pages, same shape
                        k_map,  # uint64: tensor map over the K pool (tma path; else unused)
                        v_map,  # uint64: tensor map over the V pool
                        page_table,  # int32[batch, max_pages]: physical page per logical page
                        seqlens_k,  # int32[batch]: cached tokens per sequence
                        out,  # float32[num_splits * batch * seqlen_q * q_heads * head_dim]
                        lse,  # float32[num_splits * batch * seqlen_q * q_heads]
                        seqlen_q,  # int32: query tokens per sequence (1 and 4: decode)
                        q_heads,  # int32: query heads (a multiple of kv_heads)
                        kv_heads,  # int32: KV heads
                        log2_page_size,  # int32: log2 of tokens per page
                        num_splits,  # int32: KV splits per (sequence, KV head)
                        m_blocks,  # int32: m-blocks per (sequence, KV head)
                        scale_log2):  # float32: softmax_scale * log2(e)
        dynamic = cuda.shared.array(0, uint8)
        full_k = cuda.shared.array(MAX_STAGES, uint64)
        full_v = cuda.shared.array(MAX_STAGES, uint64)
        empty = cuda.shared.array(MAX_STAGES, uint64)
        tid = cuda.threadIdx.x
        base = (smem_u32(dynamic) + uint32(TILE_ALIGN_BYTES - 1)) & ~uint32(TILE_ALIGN_BYTES - 1)
        q_smem, k_smem = base, base + uint32(q_tile_bytes)
        v_smem = k_smem + uint32(ring_bytes)
        full_k_smem, full_v_smem, empty_smem = smem_u32(full_k), smem_u32(full_v), smem_u32(empty)
        # Step 0: let the split combine (launched dependent on this grid) be scheduled once
        # every CTA of this grid has started; it waits for this grid's end before reading.
        if tid == 0:
            griddepcontrol_launch_dependents()
        # Step 1: which work tile, and which KV tiles it reads. Step 2: the ring's barriers.
        batch, kv_head, split, group, rows_valid, kv_len, m_start, n_begin, tiles = work_tile(
            seqlens_k, seqlen_q, q_heads, kv_heads, num_splits, m_blocks)
        if tid == 0:
            init_ring(full_k_smem, full_v_smem, empty_smem)
        cuda.syncthreads()
        # Step 3: producer and consumers run the ring (a thread past them, in a block launched
        # wider than the variant's threads, has no part).
        if tid >= threads:
            return
        if tid >= consumer_threads:
            produce_ring(k_smem, v_smem, k_map, v_map, k_pool, v_pool, full_k_smem, full_v_smem, empty_smem,
                         page_table, batch, kv_head, n_begin, tiles, kv_len, log2_page_size, kv_heads,
                         tid - consumer_threads)
        else:
            out_row_base = (split * page_table.shape[0] + batch) * seqlen_q * q_heads
            consume(q_smem, k_smem, v_smem, full_k_smem, full_v_smem, empty_smem, q_address, out, lse,
                    tid >> 5, tid & 31, m_start, rows_valid, group, batch, kv_head, seqlen_q, q_heads, kv_len,
                    n_begin, tiles, scale_log2, out_row_base)

    paged_attention.__name__ = paged_attention.__qualname__ = variant.name
    paged_attention.launch_bounds = variant.launch_bounds   # read by compile_for_sm90a
    return paged_attention
