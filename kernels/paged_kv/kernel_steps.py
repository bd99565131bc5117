"""The steps of kernel.py's ``paged_attention`` that every variant shares, as inline device
functions: which work tile a CTA runs and which KV tiles it reads (step 1), the ring's mbarriers
(step 2) and the producer's side of the ring (step 3: page-table look-ups and loads, stage by
stage, each stage refilled once the consumers released it).
"""
from numba import cuda, int32, uint32
from tma_kernels.ptx import fence_mbarrier_init_cluster, mbarrier_init, mbarrier_wait_parity

from .geometry import MBARRIER_BYTES
from .producers import make_producer


def make_work_tile(variant):
    """``work_tile(seqlens_k, seqlen_q, q_heads, kv_heads, num_splits, m_blocks)``: the CTA's
    (batch, kv_head, split, group, rows_valid, kv_len, m_start, n_begin, tiles): sequence, KV head,
    split and first packed row of its work tile, and its KV tiles ``n_begin .. + tiles`` (only
    those some of its rows see, when causal)."""
    block_m = variant.block_m
    block_n = variant.block_n
    log2_block_n = block_n.bit_length() - 1
    causal = variant.causal

    @cuda.jit(device=True, inline=True)
    def work_tile(seqlens_k, seqlen_q, q_heads, kv_heads, num_splits, m_blocks):
        work = cuda.blockIdx.x
        m_block = work % m_blocks
        work //= m_blocks
        split = work % num_splits
        work //= num_splits
        kv_head = work % kv_heads
        batch = work // kv_heads
        group = q_heads // kv_heads
        rows_valid = seqlen_q * group
        kv_len = seqlens_k[batch]
        m_start = m_block * block_m
        key_end = kv_len
        if causal:
            last_row = min(m_start + block_m, rows_valid) - 1
            key_end = min(kv_len, kv_len - seqlen_q + last_row // group + 1)
        n_blocks = (key_end + block_n - 1) >> log2_block_n
        per_split = (n_blocks + num_splits - 1) // num_splits
        n_begin = split * per_split
        tiles = max(0, min(n_begin + per_split, n_blocks) - n_begin)
        return batch, kv_head, split, group, rows_valid, kv_len, m_start, n_begin, tiles

    return work_tile


def make_ring_init(variant):
    """``init_ring(full_k, full_v, empty)``, thread 0's: each stage's full barriers count the
    producer's arrivals (TMA: one; cp.async: every producer thread), its empty barrier the
    releasing consumer threads."""
    stages = variant.stages
    fill_arrivals = 1 if variant.load_path == "tma" else variant.producer_threads
    release_threads = variant.release_threads

    @cuda.jit(device=True, inline=True)
    def init_ring(full_k_smem, full_v_smem, empty_smem):
        for s in range(stages):
            mbarrier_init(full_k_smem + uint32(s * MBARRIER_BYTES), fill_arrivals)
            mbarrier_init(full_v_smem + uint32(s * MBARRIER_BYTES), fill_arrivals)
            mbarrier_init(empty_smem + uint32(s * MBARRIER_BYTES), release_threads)
        fence_mbarrier_init_cluster()

    return init_ring


def make_producer_ring(variant):
    """``produce_ring(...)``, a producer thread's part: tile k's K and V into stage k % stages
    (producers.py's loads), tile k + 1's page-table entries looked up before the wait on
    ``empty`` and first read after tile k's copies, so their latency hides behind both."""
    producer = make_producer(variant)
    produce, look_up, page_entries = producer.produce, producer.look_up, producer.page_entries
    block_n = variant.block_n
    stages = variant.stages
    kv_tile_bytes = variant.kv_tile_bytes

    @cuda.jit(device=True, inline=True)
    def produce_ring(k_smem, v_smem, k_map, v_map, k_pool, v_pool, full_k_smem, full_v_smem, empty_smem,
                     page_table, batch, kv_head, n_begin, tiles, kv_len, log2_page_size, kv_heads, rank):
        pages = cuda.local.array(page_entries, int32)
        next_pages = cuda.local.array(page_entries, int32)
        if tiles > 0:
            look_up(pages, page_table, batch, n_begin * block_n, kv_len, log2_page_size, rank)
        for k in range(tiles):
            stage = k % stages
            barrier = uint32(stage * MBARRIER_BYTES)
            first_row = (n_begin + k) * block_n
            if k + 1 < tiles:
                look_up(next_pages, page_table, batch, first_row + block_n, kv_len, log2_page_size, rank)
            if k >= stages:
                mbarrier_wait_parity(empty_smem + barrier, ((k // stages) - 1) & 1)
            offset = uint32(stage * kv_tile_bytes)
            produce(k_smem + offset, k_map, k_pool, full_k_smem + barrier, page_table, pages,
                    batch, kv_head, first_row, kv_len, log2_page_size, kv_heads, rank)
            produce(v_smem + offset, v_map, v_pool, full_v_smem + barrier, page_table, pages,
                    batch, kv_head, first_row, kv_len, log2_page_size, kv_heads, rank)
            for entry in range(page_entries):
                pages[entry] = next_pages[entry]

    return produce_ring


def make_ring_wait(stages):
    """``ring_wait(full, k)``, a consumer's wait for tile k: (stage, phase, the stage's barrier
    offset) of tile k in the ring, once its ``full`` barrier (K's or V's: ``full + barrier``, the
    same phase) completed the K tile's phase."""

    @cuda.jit(device=True, inline=True)
    def ring_wait(full, k):
        stage = k % stages
        phase = (k // stages) & 1
        barrier = uint32(stage * MBARRIER_BYTES)
        mbarrier_wait_parity(full + barrier, phase)
        return stage, phase, barrier

    return ring_wait
