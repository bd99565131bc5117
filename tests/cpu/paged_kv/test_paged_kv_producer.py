"""The cp.async producer's page-lookup sharing, checked on the CPU by emulating every
producer thread (``look_up`` / ``produce`` of ``producers.make_cp_async_producer`` run as
``py_func`` with each per-thread value a numpy array over the producer threads).

``shfl.sync`` is emulated from the PTX ISA (lane ``l`` reads ``value`` of lane
``src_lane[l]`` of its own warp), ``cp.async.cg`` as a 16-byte copy from the pool bytes
into a shared-memory image. The emulation runs the kernel's sequence (``kernel.py``,
step 3): look up tile 0; per tile, look up tile k + 1 into ``next_pages``, K and V from
``pages``, then ``pages = next_pages``. Each tile image must equal the reference tile
(token ``row`` from page ``page_table[b, min(row >> log2_page_size, last_page)]``, row
``row & (page_size - 1)``, every 16-byte piece at ``geometry.tile_offset``), i.e. the
bytes a per-piece lookup writes: a wrong row group, entry, clamp or shuffle source lane
puts another row's (random) bytes there. Each thread must read exactly
``page_entries`` page-table entries per tile, none past the sequence's last page, and
arrive once per tile.

Page sizes 1 (a page per row), 8, 16, 64 (= block_n) and 256 with a partial last page;
producer warps 1, 2, 4; head dims whose rows are 4, 8, 16 and 32 pieces (entries
clamped to the tile when a group has more lanes than rows, two entries per thread with
one producer warp). What this cannot see: timing, ptxas, the barrier hardware (the GPU
tests run the kernel).
"""
import numpy as np
import pytest
from numba import cuda
from tma_kernels.paged_kv import geometry, producers
from tma_kernels.paged_kv.geometry import Variant, VariantError

KV_HEADS = 3
KV_HEAD = 2
SEQUENCES = ((0, 300), (1, 77))   # (batch, tokens in its cache): partial last pages


class CountingTable:
    """A page table that records which (thread, entry) read it."""

    def __init__(self, table):
        self.table = table
        self.reads = []

    def __getitem__(self, index):
        batch, logical = index
        logical = np.asarray(logical)
        self.reads.append(logical.copy())
        return self.table[batch, logical]


class Recorder:
    """cp.async into a shared-memory image; counts arrivals per thread."""

    def __init__(self, pool_bytes, tile_bytes, threads):
        self.pool = pool_bytes
        self.smem = np.zeros(tile_bytes, np.uint8)
        self.written = np.zeros(tile_bytes, np.int64)
        self.arrivals = np.zeros(threads, np.int64)

    def cp_async_cg16(self, dst, source):
        for d, s in zip(np.asarray(dst).ravel(), np.asarray(source).ravel()):
            self.smem[d:d + 16] = self.pool[s:s + 16]
            self.written[d:d + 16] += 1

    def arrive(self, full):
        self.arrivals += 1


def shfl_sync(ranks):
    def shuffle(mask, value, src_lane):
        value = np.broadcast_to(np.asarray(value), ranks.shape)
        return value[(ranks & ~31) | np.asarray(src_lane)]
    return shuffle


@pytest.fixture
def emulated(monkeypatch):
    """Point the producer module's globals at Python emulations; returns a setter for the
    current recorder and thread ranks."""
    state = {}

    class FakeCuda:
        jit = cuda.jit

        @staticmethod
        def shfl_sync(mask, value, src_lane):
            return shfl_sync(state["ranks"])(mask, value, src_lane)

    for name, value in {
        "cuda": FakeCuda,
        "cp_async_cg16": lambda dst, source: state["recorder"].cp_async_cg16(dst, source),
        "cp_async_mbarrier_arrive_noinc": lambda full: state["recorder"].arrive(full),
        "uint32": lambda x: np.asarray(x, np.int64) & 0xFFFFFFFF,
        "int32": lambda x: np.asarray(x, np.int64),
        "uint64": lambda x: np.asarray(x, np.int64),
        "min": np.minimum,
        "tile_offset": geometry.tile_offset.py_func,
        "copy_tile_row": producers.copy_tile_row.py_func,
        "entry_copy": producers.entry_copy.py_func,
        "copy_source_lane": producers.copy_source_lane.py_func,
    }.items():
        monkeypatch.setattr(producers, name, value, raising=False)
    monkeypatch.setattr(geometry, "swizzle", geometry.swizzle.py_func)
    return state


def paged_pool(rng, variant, page_size, max_pages):
    """Pool bytes [num_pages, page_size, KV_HEADS, head_bytes] and a shuffled page table."""
    num_pages = len(SEQUENCES) * max_pages
    pool = rng.integers(0, 256, (num_pages, page_size, KV_HEADS, variant.head_bytes), np.uint8)
    table = rng.permutation(num_pages).astype(np.int32).reshape(len(SEQUENCES), max_pages)
    return pool, table


def reference_tile(variant, pool, table, batch, kv_len, first_row, log2_page_size):
    """The tile a per-piece lookup writes (the kernel's layout, geometry.tile_offset)."""
    tile = np.zeros(variant.kv_tile_bytes, np.uint8)
    last_page = (kv_len - 1) >> log2_page_size
    for tile_row in range(variant.block_n):
        row = first_row + tile_row
        page = table[batch, min(row >> log2_page_size, last_page)]
        data = pool[page, row & ((1 << log2_page_size) - 1), KV_HEAD]
        for piece in range(variant.head_bytes // 16):
            offset = geometry.tile_offset.py_func(tile_row, piece * 16, variant.block_n,
                                                  variant.row_bytes, variant.swizzle_mask)
            tile[offset:offset + 16] = data[piece * 16:piece * 16 + 16]
    return tile


GATHER_VARIANTS = [
    Variant(dtype="e4m3", head_dim=128, load_path="cp_async", consumer_warps=1, producer_warps=4),
    Variant(dtype="bf16", head_dim=128, load_path="cp_async", consumer_warps=1, producer_warps=4),
    Variant(dtype="e4m3", head_dim=64, load_path="cp_async", consumer_warps=1, producer_warps=4),
    Variant(dtype="bf16", head_dim=256, load_path="cp_async", consumer_warps=1, producer_warps=4),
    Variant(dtype="e4m3", head_dim=128, load_path="cp_async", consumer_warps=1, producer_warps=1),
    Variant(dtype="bf16", head_dim=64, load_path="cp_async", block_n=128, consumer_warps=1,
            producer_warps=2),
    Variant(dtype="e4m3", head_dim=256, load_path="cp_async", block_n=32, consumer_warps=1,
            producer_warps=4),
]


@pytest.mark.parametrize("variant", GATHER_VARIANTS, ids=lambda v: v.name)
@pytest.mark.parametrize("page_size", [1, 8, 16, 64, 256])
def test_shared_lookups_fill_the_same_tiles(emulated, variant, page_size):
    rng = np.random.default_rng(page_size * 1000 + variant.head_dim)
    log2_page_size = page_size.bit_length() - 1
    block_n = variant.block_n
    max_pages = -(-max(n for _, n in SEQUENCES) // page_size) + 1
    k_pool, table = paged_pool(rng, variant, page_size, max_pages)
    v_pool = rng.integers(0, 256, k_pool.shape, np.uint8)
    parts = producers.make_cp_async_producer(variant)
    plan = producers.GatherPlan.of(variant)
    ranks = np.arange(variant.producer_threads)
    emulated["ranks"] = ranks
    for batch, kv_len in SEQUENCES:
        tiles = -(-kv_len // block_n)
        counting = CountingTable(table)
        pages = [None] * parts.page_entries
        next_pages = [None] * parts.page_entries
        parts.look_up.py_func(pages, counting, batch, 0, kv_len, log2_page_size, ranks)
        for k in range(tiles):
            first_row = k * block_n
            if k + 1 < tiles:
                parts.look_up.py_func(next_pages, counting, batch, first_row + block_n, kv_len,
                                      log2_page_size, ranks)
            for pool in (k_pool, v_pool):
                recorder = emulated["recorder"] = Recorder(pool.ravel(), variant.kv_tile_bytes,
                                                          len(ranks))
                parts.produce.py_func(0, 0, 0, 0, None, pages, batch, KV_HEAD, first_row, kv_len,
                                      log2_page_size, KV_HEADS, ranks)
                where = f"{variant.name}, page {page_size}, batch {batch}, tile {k}"
                assert np.all(recorder.written == 1), f"{where}: a tile byte written != once"
                assert np.all(recorder.arrivals == 1), f"{where}: not one arrive per thread"
                expected = reference_tile(variant, pool, table, batch, kv_len, first_row,
                                          log2_page_size)
                bad = np.flatnonzero(recorder.smem != expected)
                assert bad.size == 0, f"{where}: {bad.size} tile bytes differ, first at {bad[0]}"
            pages[:] = next_pages
        last_page = (kv_len - 1) >> log2_page_size
        assert len(counting.reads) == tiles * plan.page_entries, "page-table loads per tile"
        assert max(r.max() for r in counting.reads) <= last_page, "read past the sequence"


@pytest.mark.parametrize("variant, rows_per_thread, page_entries", [
    (GATHER_VARIANTS[0], 4, 1),    # e4m3 d128, 4 warps: 8 lanes per row, lanes 0-3 look up
    (GATHER_VARIANTS[1], 8, 1),    # bf16 d128: 16 lanes per row
    (GATHER_VARIANTS[4], 16, 2),   # e4m3 d128, 1 warp: 16 rows per thread, 2 entries
])
def test_gather_plan(variant, rows_per_thread, page_entries):
    plan = producers.GatherPlan.of(variant)
    assert (plan.rows_per_thread, plan.page_entries) == (rows_per_thread, page_entries)
    # every piece of the tile is some thread's copy
    assert plan.rows_per_thread * variant.producer_threads == variant.block_n * plan.pieces_per_row


def test_variant_rejects_an_uneven_gather_split(monkeypatch):
    """3 producer warps (96 threads) do not divide a tile's 512 pieces: a clear error
    (no allowed producer_warps does; this guards the assumption if one is added)."""
    monkeypatch.setattr(geometry, "PRODUCER_WARP_COUNTS", (1, 2, 3, 4))
    with pytest.raises(VariantError, match="producer_warps=3: the cp_async path needs"):
        Variant(dtype="e4m3", head_dim=128, load_path="cp_async", producer_warps=3)
    Variant(dtype="e4m3", head_dim=128, load_path="tma", producer_warps=3)   # TMA: no gather


class BoxRecorder:
    """cp.async.bulk.tensor.4d: (shared-memory byte offset, coordinates) of each box."""

    def __init__(self):
        self.boxes = []
        self.armed = 0

    def tma_load_4d(self, dst, tensor_map, full, c0, c1, c2, c3):
        self.boxes.append((int(dst), (int(c0), int(c1), int(c2), int(c3))))


TMA_VARIANTS = [
    Variant(dtype="bf16", head_dim=128, load_path="tma", consumer_warps=1),        # 8-row slots
    Variant(dtype="e4m3", head_dim=64, load_path="tma", consumer_warps=1),         # 64-B rows: 16
    Variant(dtype="e4m3", head_dim=256, load_path="tma", block_n=32, consumer_warps=1),
]


@pytest.mark.parametrize("variant", TMA_VARIANTS, ids=lambda v: v.name)
@pytest.mark.parametrize("page_size", [16, 32, 64, 256])
def test_tma_boxes_use_entries_looked_up_a_tile_ahead(monkeypatch, variant, page_size):
    """The kernel's sequence (look up tile k + 1 before tile k's boxes; produce tile k from
    the entries looked up one iteration earlier) issues, per chunk, one box per page slice
    at (chunk column, kv_head, row in page, physical page) of the token's page: the boxes a
    per-box lookup issues. Only lane 0 reads the page table, page_entries entries per tile,
    none past the sequence's last page."""
    recorder = BoxRecorder()
    for name, value in {
        "cuda": type("FakeCuda", (), {"jit": cuda.jit}),
        "tma_load_4d": recorder.tma_load_4d,
        "mbarrier_arrive_expect_tx": lambda full, nbytes: setattr(recorder, "armed", recorder.armed + nbytes),
        "uint32": int,
        "min": min,
    }.items():
        monkeypatch.setattr(producers, name, value, raising=False)
    rng = np.random.default_rng(page_size)
    log2_page_size = page_size.bit_length() - 1
    block_n = variant.block_n
    max_pages = -(-max(n for _, n in SEQUENCES) // page_size) + 1
    table = rng.permutation(len(SEQUENCES) * max_pages).astype(np.int32).reshape(len(SEQUENCES), -1)
    parts = producers.make_tma_producer(variant)
    box_rows = min(page_size, block_n)
    chunk_elements = variant.row_bytes // variant.element_bytes
    for batch, kv_len in SEQUENCES:
        tiles = -(-kv_len // block_n)
        last_page = (kv_len - 1) >> log2_page_size
        counting = CountingTable(table)
        pages, next_pages = [None] * parts.page_entries, [None] * parts.page_entries
        for rank in (1, 31):                      # other producer lanes read nothing
            parts.look_up.py_func(pages, counting, batch, 0, kv_len, log2_page_size, rank)
        assert not counting.reads
        parts.look_up.py_func(pages, counting, batch, 0, kv_len, log2_page_size, 0)
        for k in range(tiles):
            first_row = k * block_n
            if k + 1 < tiles:
                parts.look_up.py_func(next_pages, counting, batch, first_row + block_n, kv_len,
                                      log2_page_size, 0)
            recorder.boxes.clear()
            parts.produce.py_func(0, None, None, None, None, pages, batch, KV_HEAD, first_row,
                                  kv_len, log2_page_size, KV_HEADS, 0)
            expected = []
            for box in range(block_n // box_rows):
                row = first_row + box * box_rows
                page = int(table[batch, min(row >> log2_page_size, last_page)])
                for chunk in range(variant.chunks):
                    expected.append((box * box_rows * variant.row_bytes + chunk * block_n * variant.row_bytes,
                                     (chunk * chunk_elements, KV_HEAD, row & (page_size - 1), page)))
            assert sorted(recorder.boxes) == sorted(expected), f"{variant.name}, page {page_size}, tile {k}"
            pages[:] = next_pages
        assert len(counting.reads) == tiles * parts.page_entries
        assert max(int(r) for r in counting.reads) <= last_page
    assert recorder.armed == variant.kv_tile_bytes * sum(-(-n // block_n) for _, n in SEQUENCES)
