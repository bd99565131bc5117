"""The split decode consumer of the paged attention kernel (variant ``score_layout="kq_split"``):
consumer_kq.py's S^T = K Q^T and O^T += V^T P^T, with the consumer warps sharing each K/V
tile instead of each warp reading all of it.

Why. In consumer_kq.py every warp owns 8 query rows and so reads, and for e4m3 unpacks to
fp16, every element of every K and V tile: with 4 warps each tile is unpacked 4 times.
sm_90a has no fp8 ``mma.sync``, and the unpack (``F2FP``) issues on the ALU pipe, which the
profile of the 32-row e4m3 decode points found the busiest (paged_kv/profile.py). Here
each element is read and unpacked once per CTA:

- S^T: warp ``w`` takes tokens ``[w, w + 1) * block_n / warps`` of the K tile for all
  ``block_m`` query rows (``q_blocks = warps`` mma N blocks, Q's fragments for all of them);
- softmax: each warp's column maxima go to shared memory (``red``); after a named barrier
  every warp reduces the same ``warps`` values, so all hold the same running max and
  corrections; each warp keeps partial sums over its own tokens;
- P^T: each warp's B fragments (consumer_kq's ``p_fragments``) go to shared memory
  (``pbuf``, lane-minor: conflict-free); after a second barrier every warp's P V reads all
  of the tile's from there as it needs them (held in registers all at once, they raise the
  register count);
- O^T: warp ``w`` takes head dims ``[w, w + 1) * head_dim / warps`` over all the tile's
  tokens (V^T of its dims: the only V it reads);
- end: the column sums meet in ``red`` (third barrier); each warp writes its dims of
  every row, warp 0 the log2-sum-exp.

Costs against consumer_kq: two consumer-only named barriers per tile, 2 bytes of P per
token and query row through shared memory, and Q's fragments of every row read from shared
memory (``qbuf``, written once) every tile: held in registers beside the rest they spilled.
``red``, ``pbuf`` and ``qbuf`` are the scratch after the V ring (``Variant.scratch_bytes``).

With 2 or 4 rows a warp (8 or 16 a CTA) it also spreads a CTA of few query rows, which
consumer_kq runs in one warp, over 4 warps.

Measured on the H200 (narrowed decode runs at 16 and 32 rows a CTA, 8 a warp, outside
results/): no faster than consumer_kq, at 2 CTAs per SM, and slower at 3. The unpacks' load
moved from the ALU pipe to the shared-memory pipe (the paper's paged_kv section). With 2
rows a warp it was a little faster at most one-token points. The sweep runs both consumers
in every decode cell (config ``decode_consumers``) and keeps the faster.

``red`` is not reused before it is read: a warp writes tile k + 1's maxima after the
second barrier of tile k, which every warp reaches after reading tile k's; it writes P of
tile k + 1 after that tile's first barrier, which every warp reaches after its P V of tile k.

``score_layout="kq_wgmma"``: the same consumer, but S^T of a tile is one warpgroup
``wgmma`` (tma_kernels.ptx.wgmma; sm_90a's native fp8 tensor-core path, as FlashAttention-3
computes Q K^T) with K and Q read from shared memory as they lie: e4m3 needs no unpack and
no copy of Q's fragments (``qbuf``), and a K tile is read once per CTA by the tensor cores
instead of by 4 warps' ldmatrix. The wgmma's M is the tile's 64 tokens, so warp ``w``
receives tokens ``16 w ..`` (kq_split's split at 4 warps and block_n 64, hence those two
are required) in the registers kq_split's mmas fill. Q, written by the consumers' plain
stores, is fenced to the async proxy (``fence.proxy.async.shared::cta``) before the
consumer barrier; K tiles come from TMA (async proxy) or cp.async, which FA3's cp.async
paged-KV path hands to its wgmma through the same mbarrier with no fence
(hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp, ``cpasync_barrier_arrive``). P V stays
``mma.sync`` (V^T would need an fp8 transpose in shared memory, as FA3 does).

``score_layout="kq_wgmma_dual"``: two kq_wgmma warpgroups (8 consumer warps; group g is
warps 4g .. 4g + 3) on one ring, group g taking tiles g, g + 2, ...: each with its own
named barrier (id 1 + g), scratch and online-softmax state over its tiles; a tile's
``empty`` barrier counts its group's 128 threads. Why: a 4-warp consumer of a 32-row e4m3
decode tile waits on its own latencies (the maxima's shuffles and exchange, two barriers,
the P exchange) with one warp per SM sub-partition; a second group overlaps them without
more shared memory or more KV splits. (On the H200, outside the reference data,
config/probes/paged_kv_dual_consumer.yaml: correct in the GPU tests; at the e4m3 decode points
of llama3_70b and mqa_8x256 about 3 % faster than kq_wgmma at one token of llama3_70b, level at
one token of mqa_8x256, about 3 % slower at four tokens, where it runs fewer CTAs an SM or
spills; so the sweep does not run it.) At the end group 1's state (O^T, maxima, sums) goes
through the idle K/V ring and group 0 merges it (``merge_groups``) and writes the rows. Q is
loaded by group 0 and read by both (barrier id 1 + 2 over all 8 warps).

``score_layout="kq_wgmma_pv"`` and ``"kq_wgmma_rs"`` (e4m3 only): kq_wgmma with P V as
warpgroup wgmmas too (consumer_pv.py's ``tile_pv`` steps replace the P^T exchange and the
``mma.sync`` P V): P^T goes through shared memory as e4m3 and V^T is either a V^T ring a
transpose warp fills (kq_wgmma_pv, transpose_v.py) or gathered into the wgmma's A registers
from the V tile (kq_wgmma_rs). Both are built and tested, and probed on the H200 outside the
reference data (config/probes/paged_kv_pv_consumer.yaml, paged_kv_rs_consumer.yaml); neither is
in the sweep (config.yaml's ``decode_consumers`` comment says what the probes found).

``score_layout="kq_wgmma_rs_dual"``: two kq_wgmma_rs groups as kq_wgmma_dual's, each with its own P^T
buffer and ``red``. At 9 warps a thread may take 168 registers (geometry.register_budget), where
kq_wgmma_rs at one CTA of 5 warps takes 225; probed outside the reference data
(config/probes/paged_kv_ring_depth.yaml), not swept.

``score_layout="kq_wgmma_rs_lazy"``: kq_wgmma_rs with two changes that cut its per-tile
instructions (the H200 profile of kq_wgmma_rs: issue-bound at one CTA an SM, 593 instructions a
warp a tile, 88 of them FFMA): P V accumulates into O^T's registers in place (make_wgmma_rs
``accumulate``; no fresh results and no adds, and at one CTA of 5 warps an SM one wgmma call
and one wait a tile), and a running max moves only when a tile's exceeds it by more than
LAZY_RESCALE_LOG2, so most tiles skip O^T's rescale (a warp vote on the corrections).
Correct in the GPU tests, also on keys grown along each sequence, which take the rescale branch
mid-sequence; chosen for the e4m3 sweep by config/probes/paged_kv_lazy_consumer.yaml.

From head dim 128 up (``Variant.speculates``) kq_wgmma_rs_lazy also speculates: since a running max
rarely moves, each lane first computes its P under the maxima as they stand (``speculate``, no
shuffles and no ``red``), stores P^T, and one ``bar.red.or`` tells every warp whether any lane
saw a score past its column's max by more than LAZY_RESCALE_LOG2 (always, on a column's first
tile). If none did, that P is exactly what the lazy step would have computed (the same maxima,
corrections of 1), and P V follows at once: one consumer barrier a tile instead of two, and
neither the maxima's shuffles nor their exchange. If one did, the tile runs the exact lazy step
from its S^T again (the K tile is still in; its ``empty`` arrival comes after). As P^T is then
written with no barrier since the previous tile's P V, tile k writes P^T buffer ``k & 1``: a warp
reaches tile k + 2's write only after every warp has passed tile k + 1's barrier, so after its
wgmma of tile k. ``red`` is touched only on the exact step's tiles, each behind its own two
barriers. In a same-run A/B on the H200 (every shape's e4m3 decode points at batch 32 and 8K
tokens, tma page 64 and cp.async page 256, 2 and 4 stages, outside the reference data): at 4 tokens
of llama3_70b (32 rows) 14 to 20 % faster, at 4 tokens of mqa_8x256 up to 10 % (the best
configuration 3 %), at one token up to 6 %; at head dim 64 (mha_16x64) its few more registers cost
a resident CTA an SM, and the best configuration of its 1- and 4-token points ran 5 and 10 % slower
(hence SPECULATIVE_MIN_HEAD_DIM). Its full sweep (the reference data) put the mqa_8x256 4-token
point at 69 % of the copy, 66 % before. There its launch-bounded builds for two CTAs an SM at head
dim 256 (128 or 168 registers) spill 16 to 120 bytes a thread (the 168-register one 0 before); the
one-CTA build, with no spill, wins that point.
Tried and reverted: issuing a tile's V^T ``ldmatrix`` loads right after its S^T, before the
softmax (their registers live across it, 222 registers at one CTA of head dim 256), so their
latency would pass under the softmax and its barriers. Correct in the GPU tests, but in a narrowed
H200 run outside the reference data (every shape's e4m3 decode points, batch 32, 8K tokens) no
faster at the mqa_8x256 4-token point, and within noise elsewhere. An ncu profile of that point
(paged_kv/profile.py; tma, 4 stages, one CTA an SM) found the consumer warps issuing about one
instruction in four cycles, some 750 instructions a warp a tile, the tensor pipe almost idle;
deeper rings (config/probes/paged_kv_deep_ring.yaml) did not help either.
Tried and reverted (bad3fd9): FlashAttention-3's intra-warpgroup overlap in the speculative loop.
Tile k's S^T wgmma was issued with no wait, tile k - 1's V^T gathered under it, then tile k - 1's P V
issued and tile k's softmax computed under that, every tile's P V deferred to the next (the exact
step rescaling O^T itself). ptxas serialized every wgmma of the kernel (C7518: a wait it inserted in a
divergent path) until no branch lay between an issue and its wait; then the SASS had the softmax's
MUFU.EX2 between the P V QGMMAs and their DEPBAR, 220 registers at one CTA of head dim 256, no
spill. Correct in 68 kq_wgmma_rs_lazy GPU cases (reference, rising keys, TMA against cp.async
bitwise). In a same-run A/B on the H200 (e4m3 decode at batch 32 and 8K tokens, tma page 128 and
cp.async page 256, 4 stages; one pair, outside the reference data) it was no faster at 4 tokens of
mqa_8x256 (45.79 against 45.57 us at cp.async, 47.14 both at tma) or at one token, and 4 to 6 %
slower at 4 tokens of llama3_70b (two CTAs an SM, 162 registers, 154 before). A profile of the
speculative kernel at the mqa point before it (tma page 128): the consumer warps' stall samples
at the K and V full barriers 10 and 4 % of all, at the wgmma waits 4 and 3 %, in the prologue
(setup and Q's load) about 8 %; DRAM at 63 % of peak.

``score_layout="kq_wgmma_rs_lazy_rowsplit"``: two kq_wgmma_rs_lazy groups (8 consumer warps) on
*every* tile, group g computing with rows ``m_start + g * group_m ..`` of the CTA's block_m from a
Q tile of its own (``Variant.group_q_tile_bytes`` apart), with its own P^T buffers, ``red`` and
named barrier (id 1 + g); a stage's ``empty`` barrier counts both groups' 256 threads
(``Variant.release_threads``), and each group writes its own rows: nothing is merged. It is how
FlashAttention-3's consumer warp groups split their M tile. Why: at the 4-token point of
mqa_8x256 (32 rows, head dim 256) kq_wgmma_rs_lazy's one warpgroup holds O^T in 64 registers a
thread (198 in all), so one CTA of 5 warps fits an SM, one consumer warp a sub-partition, and
its profile found it waiting on its own latencies; two groups of 16 rows take 148 registers
(their wide P V calls, consumer_pv.RS_WIDE_GROUP_ROWS) under the 168 that 9 warps allow, and give
each sub-partition two consumer warps. The cost: each group gathers all of every V tile's V^T for
its own rows. On the H200, outside the reference data (config/probes/paged_kv_rowsplit_consumer.yaml,
copy 4246 GB/s): at mqa_8x256's 4-token point 44.5 us at best (cp.async, 4 producer warps), against
45.9 for kq_wgmma_rs_lazy at its best; at head dim 128 (llama3_8b, llama3_70b, whose single
warpgroup fits two CTAs an SM) 5 and 19 % slower. In the two full sweeps with it (one the
reference data) it won that mqa point at 44.3 and 44.4 us, 71 % of the copy, where
kq_wgmma_rs_lazy's best took 45.7 and 46.0. Correct in 25 GPU cases (reference, rising keys,
TMA against cp.async bitwise), a group with no valid row among them.

The dual layouts need a stage count that is a multiple of their 2 groups (check_split): group g then owns
stages g, g + 2, ..., and a stage's successive fills are its own successive tiles. With 3 stages
the groups would share stages, and a group could reach a stage's full barrier two phases ahead of
its fill, where the parity wait passes at once (the probe's first run, at 3 stages, failed its
launch with CUDA_ERROR_LAUNCH_FAILED, which fits that; it was not profiled further).

The steps are consumer_kq.make_kq_tiles' (checked on the CPU by
tests/cpu/test_paged_kv_fragments_kq.py) plus the exchanges below, which
tests/cpu/test_paged_kv_split.py runs warp by warp between emulated barriers.
"""
import types

from numba import cuda, float32, int32, uint32, uint64
from tma_kernels.ptx import (
    fence_proxy_async_shared,
    mbarrier_arrive,
    mbarrier_wait_parity,
    named_barrier_red_or,
    named_barrier_sync,
    smem_u32,
)
from tma_kernels.ptx.convert import ex2_approx
from tma_kernels.ptx.wgmma import K_STEP_BYTES, k_major_descriptor, make_wgmma_ss
from tma_kernels.ptx.wgmma import M as WGMMA_M

from .consumer import FULL_MASK, NEG_INF, ONE, SCORE_FLOOR, ZERO, make_q_loader, make_row_limit
from .consumer_kq import Q_ROWS_PER_BLOCK, ROW_BLOCK, column_sum, make_kq_tiles
from .consumer_pv import make_pv_steps, p_buffer_bytes, p_tile_bytes
from .geometry import LAZY_LAYOUTS, PV_WGMMA_LAYOUTS, WGMMA_LAYOUTS, VariantError
from .transpose_v import vt_bytes

# kq_wgmma_rs_lazy: a column's running max stays until a tile's exceeds it by this much (log2
# units), so P stays at most 2 ** 8 = 256, under e4m3's largest finite 448 (FlashAttention-4's
# threshold: the same 8)
LAZY_RESCALE_LOG2 = 8.0
CONSUMER_BARRIER = 1               # bar.sync id of the warps of a tile (group g: 1 + g; 0 is __syncthreads)
LANES = 32
WARPGROUP = 4


def split_scratch_bytes(variant) -> int:
    """Shared-memory bytes the split consumer needs after the V ring: ``red`` (one float per
    query row and warp), ``pbuf`` (P^T of a tile: 2 bytes per token and query row) and, but
    for the wgmma layouts, ``qbuf`` (Q's B fragments: 2 bytes per element of the Q tile, fp16 /
    bf16); one set per consumer group. kq_wgmma_pv: the V^T ring (transpose_v.py), P^T as
    e4m3 (consumer_pv.py) and ``red``."""
    if variant.score_layout in PV_WGMMA_LAYOUTS:   # (kq_wgmma_pv: the V^T ring), P^T (e4m3), ``red``
        return ((vt_bytes(variant) if variant.transposes_v else 0)
                + (p_buffer_bytes(variant) + 4 * variant.group_m * variant.tile_warps) * variant.consumer_groups)
    q_words = 0 if variant.score_layout in WGMMA_LAYOUTS else variant.head_dim // 2
    return (4 * variant.group_m * (variant.tile_warps + variant.block_n // 2 + q_words)
            * variant.consumer_groups)


def check_split(variant) -> None:
    """The shapes the split can divide: whole 16-token blocks of K and 16-dim blocks of V a warp."""
    warps = variant.tile_warps
    if warps < 2:
        raise VariantError(f"consumer_warps={warps}: score_layout '{variant.score_layout}' shares a tile among "
                           "2 or more consumer warps")
    if variant.group_m % Q_ROWS_PER_BLOCK:
        raise VariantError(f"rows_per_warp={variant.rows_per_warp}: score_layout '{variant.score_layout}' needs "
                           f"rows_per_warp x the {warps} warps of a group ({variant.group_m}) to be whole mma N "
                           f"blocks of {Q_ROWS_PER_BLOCK} rows")
    if variant.block_n % (ROW_BLOCK * warps):
        raise VariantError(f"block_n={variant.block_n}: score_layout '{variant.score_layout}' gives each of "
                           f"{warps} warps whole {ROW_BLOCK}-token blocks")
    if variant.head_dim % (16 * warps):
        raise VariantError(f"head_dim={variant.head_dim}: score_layout '{variant.score_layout}' gives each of "
                           f"{warps} warps whole 16-dim blocks")
    if variant.score_layout in WGMMA_LAYOUTS and (warps, variant.block_n) != (WARPGROUP, WGMMA_M):
        raise VariantError(f"consumer_warps={variant.consumer_warps}, block_n={variant.block_n}: score_layout "
                           f"'{variant.score_layout}' runs one warpgroup ({WARPGROUP} warps) over a tile of "
                           f"{WGMMA_M} tokens (the wgmma's M)")
    if variant.alternates_tiles and variant.stages % variant.consumer_groups:
        raise VariantError(f"stages={variant.stages}: score_layout '{variant.score_layout}' gives each of its "
                           f"{variant.consumer_groups} groups stages of its own (a multiple of "
                           f"{variant.consumer_groups}); shared, a group could wait on a stage's full barrier "
                           "two phases ahead, where the parity wait cannot tell the phases apart")
    if variant.alternates_tiles and merge_words(variant) * 4 > 2 * variant.stages * variant.kv_tile_bytes:
        raise VariantError(f"{variant.name}: the groups' merge ({merge_words(variant) * 4} B) does not fit "
                           f"in the K and V rings ({2 * variant.stages * variant.kv_tile_bytes} B)")


def merge_words(variant) -> int:
    """32-bit words a group's softmax state takes in shared memory at the end (kq_wgmma_dual):
    each thread of a tile's warps: its O^T registers, and the running max and sum of each of
    its query columns."""
    q_blocks = variant.group_m // Q_ROWS_PER_BLOCK
    acc_regs = variant.head_dim // 16 // variant.tile_warps * q_blocks * 4
    return 32 * variant.tile_warps * (acc_regs + 2 * 2 * q_blocks)


def make_split_exchange(variant, q_regs, p_regs_warp):
    """The cross-warp steps over the shared arrays ``red`` (float32) and ``pbuf`` / ``qbuf``
    (uint32), each lane addressing them from its own element offset (``*_lane``; unsigned,
    so indexing has no negative-index wraparound, and the per-register steps are
    compile-time constants ptxas folds into the instruction). ``q_regs`` and ``p_regs_warp``
    are make_kq_tiles' register counts (Q's fragments; a warp's P^T fragments). The CPU
    test passes numpy arrays."""
    warps = variant.tile_warps
    q_blocks = variant.group_m // Q_ROWS_PER_BLOCK
    columns = 2 * q_blocks
    p_regs = p_regs_warp * warps

    @cuda.jit(device=True, inline=True)
    def red_lane(red_base, lane):
        """The lane's offset in ``red``: entry (row, warp) is at row * warps + warp; the lane's
        columns are rows 8 qb + 2 (lane & 3) + e."""
        return red_base + uint32(2 * warps) * uint32(lane & 3)

    @cuda.jit(device=True, inline=True)
    def publish(red, lane_offset, values, warp, lane):
        """red[(row of column c) * warps + warp] = values[c] for every column (warp-wide
        values; lanes 0-3 write)."""
        if lane < 4:
            own = lane_offset + uint32(warp)
            for c in range(columns):
                red[own + uint32((8 * (c >> 1) + (c & 1)) * warps)] = values[c]

    @cuda.jit(device=True, inline=True)
    def gather_max(red, lane_offset, column):
        row = lane_offset + uint32((8 * (column >> 1) + (column & 1)) * warps)
        mx = red[row]
        for w in range(1, warps):
            mx = max(mx, red[row + uint32(w)])
        return mx

    @cuda.jit(device=True, inline=True)
    def gather_sum(red, lane_offset, column):
        row = lane_offset + uint32((8 * (column >> 1) + (column & 1)) * warps)
        total = red[row]
        for w in range(1, warps):
            total += red[row + uint32(w)]
        return total

    @cuda.jit(device=True, inline=True)
    def publish_p(pbuf, p_lane, pf_warp, warp):
        """The warp's P^T B fragments into pbuf at their place among the tile's (lane-minor:
        register i of lane l at i * 32 + l)."""
        own = p_lane + uint32(warp * p_regs_warp * LANES)
        for i in range(p_regs_warp):
            pbuf[own + uint32(i * LANES)] = pf_warp[i]

    @cuda.jit(device=True, inline=True)
    def publish_q(qbuf, q_lane, qf, warp):
        """Q's B fragments (every warp computes the same) into qbuf, lane-minor; warp w writes
        registers w, w + warps, ..."""
        for i in range(q_regs):
            if i % warps == warp:
                qbuf[q_lane + uint32(i * LANES)] = qf[i]

    return types.SimpleNamespace(red_lane=red_lane, publish=publish, gather_max=gather_max,
                                 gather_sum=gather_sum, publish_p=publish_p,
                                 publish_q=publish_q, q_regs=q_regs, p_regs=p_regs,
                                 p_regs_warp=p_regs_warp)


def make_split_consumer(variant):
    """``.consume(...)``, with the signature of consumer.py's, and its steps."""
    check_split(variant)
    warps = variant.tile_warps
    groups = variant.consumer_groups
    head_dim = variant.head_dim
    block_n = variant.block_n
    block_m = variant.group_m
    stages = variant.stages
    kv_tile_bytes = variant.kv_tile_bytes
    row_bytes = variant.row_bytes
    tile_threads = uint32(32 * warps)                   # the warps of one group
    all_threads = uint32(variant.consumer_threads)
    all_barrier = uint32(CONSUMER_BARRIER + (groups if groups > 1 else 0))   # every consumer warp
    alternate = variant.alternates_tiles                # the dual layouts: group g takes tiles g, g + groups, ..
    row_split = variant.row_groups > 1                  # the rowsplit layouts: every tile, rows of its own
    tile_step = groups if alternate else 1              # group g's tiles: g, g + tile_step, .. (dual) or all
    first_tile_step = 1 if alternate else 0             # .. from g * first_tile_step
    group_rows = block_m if row_split else 0            # group g's rows from m_start + g * group_rows
    group_q_step = variant.group_q_tile_bytes if row_split else 0   # .. its Q tile at q_smem + g * group_q_step
    q_blocks = block_m // Q_ROWS_PER_BLOCK
    columns = 2 * q_blocks
    warp_token_blocks = block_n // ROW_BLOCK // warps
    warp_dim_blocks = head_dim // 16 // warps
    acc_regs = warp_dim_blocks * q_blocks * 4
    load_q = make_q_loader(variant)
    row_limit = make_row_limit(variant.causal)
    pv_wgmma = variant.score_layout in PV_WGMMA_LAYOUTS  # P V by wgmma (consumer_pv.py)
    pv_steps = make_pv_steps(variant) if pv_wgmma else None
    lazy = variant.score_layout in LAZY_LAYOUTS
    steps = make_kq_tiles(variant, q_blocks, warp_token_blocks, warp_dim_blocks, q_stride=LANES,
                          p_stride=LANES, store_acc=pv_steps.store_acc_column if pv_wgmma else None,
                          lazy_rescale_log2=LAZY_RESCALE_LOG2 if lazy else None)
    wgmma = variant.score_layout in WGMMA_LAYOUTS
    q_regs, score_regs, p_regs_warp = steps.q_regs, steps.score_regs, steps.p_regs
    exchange = make_split_exchange(variant, 0 if wgmma else q_regs, p_regs_warp)
    vt_ring = stages * kv_tile_bytes                    # kq_wgmma_pv, from v_smem: the V^T ring, P^T
    p_offset = vt_ring + (vt_bytes(variant) if variant.transposes_v else 0)
    pv_ring = vt_ring if variant.transposes_v else 0    # the ring P V reads: V^T (kq_wgmma_pv) or V
    p_bytes = p_buffer_bytes(variant) if pv_wgmma else 0   # group g's P^T at p_offset + g p_bytes
    speculative = variant.speculates
    p_tile = p_tile_bytes(variant) if speculative else 0   # speculative: tile k's P^T buffer is k & 1
    scratch = p_offset + groups * p_bytes               # from v_smem: ``red`` ..
    db_stride = 1 if pv_wgmma else warp_dim_blocks      # store_column's first_db: warp w's dims
    red_words = block_m * warps
    p_words = 0 if pv_wgmma else exchange.p_regs * LANES
    group_words = red_words + p_words + (0 if wgmma else q_regs * LANES)   # a group's scratch
    merge_acc = 32 * warps * acc_regs                   # merge: O^T, then the maxima and the sums
    load_q_fragments, scores_tile, mask_tile = steps.load_q_fragments, steps.scores_tile, steps.mask_tile
    column_max, softmax_finish, p_fragments = steps.column_max, steps.softmax_finish, steps.p_fragments
    pv_tile, store_column = steps.pv_tile, steps.store_column
    red_lane, publish, gather_max, gather_sum = (exchange.red_lane, exchange.publish,
                                                 exchange.gather_max, exchange.gather_sum)
    publish_p, publish_q = exchange.publish_p, exchange.publish_q

    if wgmma:
        # S^T = K Q^T of the whole tile (M: its 64 tokens, N: the block_m query rows), one
        # 32-byte k-step of every row at a time; K tile and Q tile alike are column chunks
        # of row_bytes (geometry.tile_offset)
        steps_ab = tuple(((k // row_bytes) * block_n * row_bytes + k % row_bytes,
                          (k // row_bytes) * block_m * row_bytes + k % row_bytes)
                         for k in range(0, variant.head_bytes, K_STEP_BYTES))
        tile_wgmma = make_wgmma_ss(variant.dtype, block_m, steps_ab)

        @cuda.jit(device=True, inline=True)
        def prepare_q(q_smem, words, q_lane, warp, lane, q_barrier, q_threads):
            """Q (just stored) to the async proxy, then every warp's rows are in (the warps
            of barrier ``q_barrier``): the descriptor of the Q tile."""
            fence_proxy_async_shared()
            named_barrier_sync(q_barrier, q_threads)
            return k_major_descriptor(q_smem, row_bytes)

        @cuda.jit(device=True, inline=True)
        def tile_scores(scores, words, q_lane, q_desc, k_tile, warp, lane):
            d = tile_wgmma(k_major_descriptor(k_tile, row_bytes), q_desc)
            for i in range(score_regs):
                scores[i] = d[i]
    else:
        @cuda.jit(device=True, inline=True)
        def prepare_q(q_smem, words, q_lane, warp, lane, q_barrier, q_threads):
            """Every warp's rows are in: Q's B fragments (all rows) into qbuf, once."""
            named_barrier_sync(q_barrier, q_threads)   # every warp reads every row
            qf = cuda.local.array(q_regs, uint32)
            load_q_fragments(qf, q_smem, 0, lane)
            publish_q(words, q_lane, qf, warp)
            named_barrier_sync(q_barrier, q_threads)
            return uint64(0)

        @cuda.jit(device=True, inline=True)
        def tile_scores(scores, words, q_lane, q_desc, k_tile, warp, lane):
            """The warp's tokens (first_token on) of S^T, Q's fragments read from qbuf."""
            first_token = warp * warp_token_blocks * ROW_BLOCK
            scores_tile(scores, words, q_lane, k_tile + uint32(first_token * row_bytes), lane)

    if pv_wgmma:
        store_p, p_descriptor, pv = pv_steps.store_p, pv_steps.p_descriptor, pv_steps.pv

        @cuda.jit(device=True, inline=True)
        def tile_pv(acc, corrections, scores, pf_warp, words, p_lane, v_smem, p_smem, stage, full_v, phase,
                    first_db, warp, lane, tile_barrier):
            """P^T into the group's ``p_smem`` as e4m3; once every warp's is in and the tile's V^T
            (kq_wgmma_pv: ``full_v`` is the V^T ring's barrier) or V (the rs layouts) too,
            O^T = O^T * correction + V^T P^T (wgmma)."""
            store_p(p_smem, scores, warp, lane)
            fence_proxy_async_shared()
            rescale = True
            if lazy:        # every warp holds every column, with the same corrections: a uniform branch
                moved = False
                for c in range(columns):
                    moved = moved or corrections[c] != ONE
                rescale = cuda.any_sync(FULL_MASK, moved)
            named_barrier_sync(tile_barrier, tile_threads)
            mbarrier_wait_parity(full_v, phase)
            pv(acc, v_smem + uint32(pv_ring + stage * kv_tile_bytes), p_descriptor(p_smem), corrections,
               warp, lane, rescale)
    else:
        @cuda.jit(device=True, inline=True)
        def tile_pv(acc, corrections, scores, pf_warp, words, p_lane, v_smem, p_smem, stage, full_v, phase,
                    first_db, warp, lane, tile_barrier):
            """The old O^T rescaled; every warp's P^T fragments through pbuf; once the V tile
            is in, O^T += V^T P^T over the warp's dims (mma.sync)."""
            for i in range(acc_regs):
                acc[i] *= corrections[2 * ((i >> 2) % q_blocks) + (i & 1)]
            p_fragments(pf_warp, scores)
            publish_p(words, p_lane, pf_warp, warp)
            named_barrier_sync(tile_barrier, tile_threads)
            mbarrier_wait_parity(full_v, phase)
            pv_tile(acc, words, p_lane, v_smem + uint32(stage * kv_tile_bytes), first_db, lane)

    if speculative:
        lazy_log2 = float32(LAZY_RESCALE_LOG2)
        pv_in_place, store_p_tile, p_tile_descriptor = pv_steps.pv, pv_steps.store_p, pv_steps.p_descriptor

        @cuda.jit(device=True, inline=True)
        def speculate(scores, sums, m_run, scale_log2):
            """The lazy softmax's usual case, with no exchange among the warps: P (in place of the
            scores) under the running maxima as they stand, each column's sum over the lane's
            tokens into ``sums``. Returns 1 if some score of the lane exceeds its column's running
            max by more than LAZY_RESCALE_LOG2 (``x > m + threshold``; always, for a finite score,
            while the max is -inf), the case where the exact step (softmax_finish) would move the
            max; else 0, where its P, sums and corrections of 1 are these."""
            over = False
            for c in range(columns):
                qb = c >> 1
                e = c & 1
                m_use = max(m_run[c], SCORE_FLOOR)
                bound = m_run[c] + lazy_log2
                col_sum = ZERO
                for tb in range(warp_token_blocks):
                    for h in range(2):
                        j = (tb * q_blocks + qb) * 4 + 2 * h + e
                        x = scores[j] * scale_log2
                        over = over | (x > bound)
                        p = ex2_approx(x - m_use)
                        scores[j] = p
                        col_sum += p
                sums[c] = col_sum
            return uint32(over)
    else:       # the names consume's ``if speculative:`` branch (pruned here) refers to
        lazy_log2 = speculate = pv_in_place = store_p_tile = p_tile_descriptor = None

    if groups > 1:
        @cuda.jit(device=True, inline=True)
        def group_of(warp):
            """The dual and rowsplit layouts: the group of consumer warp ``warp`` (warps 4g .. 4g + 3)."""
            return warp // warps
    else:
        @cuda.jit(device=True, inline=True)
        def group_of(warp):
            """One group: a constant, so the single-group kernels compile as before the groups."""
            return 0

    @cuda.jit(device=True, inline=True)
    def merge_groups(smem, ring, acc, m_run, l_sum, own, other, group_id, tid):
        """kq_wgmma_dual, at the end: group 1's softmax state (O^T, running maxima, whole
        sums) into the idle K/V ring (``smem[ring ..]``, lane-minor), then group 0's merged
        with it in place (the online-softmax step, once). Every tile's full barrier has been
        waited on by then, so no load is in flight; the first barrier waits for the last
        tile's readers."""
        named_barrier_sync(all_barrier, all_threads)
        if group_id == 1:
            for i in range(acc_regs):
                smem[ring + uint32(i * 32 * warps) + tid] = acc[i]
            for c in range(columns):
                smem[ring + uint32(merge_acc + c * 32 * warps) + tid] = m_run[c]
                smem[ring + uint32(merge_acc + (columns + c) * 32 * warps) + tid] = l_sum[c]
        named_barrier_sync(all_barrier, all_threads)
        if group_id == 0:
            for c in range(columns):
                m_other = smem[ring + uint32(merge_acc + c * 32 * warps) + tid]
                m_new = max(m_run[c], m_other)
                m_use = max(m_new, SCORE_FLOOR)
                own[c] = ex2_approx(max(m_run[c], SCORE_FLOOR) - m_use)
                other[c] = ex2_approx(max(m_other, SCORE_FLOOR) - m_use)
                m_run[c] = m_new
                l_sum[c] = (l_sum[c] * own[c]
                            + smem[ring + uint32(merge_acc + (columns + c) * 32 * warps) + tid] * other[c])
            for i in range(acc_regs):
                c = 2 * ((i >> 2) % q_blocks) + (i & 1)
                acc[i] = acc[i] * own[c] + smem[ring + uint32(i * 32 * warps) + tid] * other[c]

    if alternate:
        @cuda.jit(device=True, inline=True)
        def finish(out, lse, acc, m_run, l_run, own, other, red, lane_red, k_smem, group_id, warp, lane,
                   first_row, rows_valid, group, out_row_base, group_lane, q_heads, kv_head, first_db):
            """The column sums are in ``red``: merge the groups' states, then group 0 writes the rows."""
            for c in range(columns):
                l_run[c] = gather_sum(red, lane_red, c)          # now the column's whole sum
            merge_groups(red, (k_smem - smem_u32(red)) >> uint32(2), acc, m_run, l_run, own, other,
                         group_id, uint32(warp * 32 + lane))
            if group_id == 0:
                for c in range(columns):
                    store_column(out, lse, acc, c, m_run[c], l_run[c],
                                 first_row + 8 * (c >> 1) + (c & 1), rows_valid, group, out_row_base,
                                 group_lane, q_heads, kv_head, first_db, warp == 0)
    else:
        @cuda.jit(device=True, inline=True)
        def finish(out, lse, acc, m_run, l_run, own, other, red, lane_red, k_smem, group_id, warp, lane,
                   first_row, rows_valid, group, out_row_base, group_lane, q_heads, kv_head, first_db):
            """The column sums are in ``red``: every warp writes its dims of the rows."""
            for c in range(columns):
                store_column(out, lse, acc, c, m_run[c], gather_sum(red, lane_red, c),
                             first_row + 8 * (c >> 1) + (c & 1), rows_valid, group, out_row_base,
                             group_lane, q_heads, kv_head, first_db, warp == 0)

    @cuda.jit(device=True, inline=True)
    def consume(q_smem, k_smem, v_smem, full_k, full_v, empty, q_address, out, lse, warp, lane,
                m_start, rows_valid, group, batch, kv_head, seqlen_q, q_heads, kv_len, n_begin,
                tiles, scale_log2, out_row_base):
        # red, pbuf, qbuf: uint32 / float32 views of the dynamic shared memory past the V ring;
        # kq_wgmma_dual: group g (warps 4g ..) takes tiles g, g + 2, ..., with its own scratch
        # and barrier, and the groups merge at the end; the rowsplit layouts: group g takes
        # every tile for rows m_start + g group_m .., from its own Q tile, with its own scratch
        # and barrier, and writes its rows itself
        group_id = group_of(warp)
        warp = warp - group_id * warps
        tile_barrier = uint32(CONSUMER_BARRIER + group_id)
        red = cuda.shared.array(0, float32)
        words = cuda.shared.array(0, uint32)
        red_base = ((v_smem + uint32(scratch) - smem_u32(red)) >> uint32(2)) + uint32(group_id * group_words)
        lane_red = red_lane(red_base, lane)
        p_lane = red_base + uint32(red_words) + uint32(lane)
        q_lane = p_lane + uint32(p_words)
        p_smem = v_smem + uint32(p_offset) + uint32(group_id) * uint32(p_bytes)   # the pv layouts' P^T
        q_tile = q_smem + uint32(group_id * group_q_step)
        row_start = m_start + group_id * group_rows
        # the rowsplit layouts: each group loads its own Q tile and waits for its own warps; else
        # group 0 loads the one Q tile and every consumer warp waits for it
        q_barrier = tile_barrier if row_split else all_barrier
        q_threads = tile_threads if row_split else all_threads
        if row_split or group_id == 0:
            load_q(q_tile, q_address, warp, lane, row_start, rows_valid, group, batch, kv_head,
                   seqlen_q, q_heads)
        q_desc = prepare_q(q_tile, words, q_lane, warp, lane, q_barrier, q_threads)
        scores = cuda.local.array(score_regs, float32)
        pf_warp = cuda.local.array(p_regs_warp, uint32)
        acc = cuda.local.array(acc_regs, float32)
        for i in range(acc_regs):
            acc[i] = ZERO
        group_lane = lane >> 2
        first_row = row_start + 2 * (lane & 3)
        first_token = warp * warp_token_blocks * ROW_BLOCK
        first_db = warp * db_stride
        limits = cuda.local.array(columns, int32)
        m_run = cuda.local.array(columns, float32)
        l_run = cuda.local.array(columns, float32)
        corrections = cuda.local.array(columns, float32)
        maxima = cuda.local.array(columns, float32)
        smallest_limit = kv_len
        for c in range(columns):
            limits[c] = row_limit(first_row + 8 * (c >> 1) + (c & 1), group, kv_len, seqlen_q)
            smallest_limit = min(smallest_limit, limits[c])
            m_run[c] = NEG_INF
            l_run[c] = ZERO
        for k in range(group_id * first_tile_step, tiles, tile_step):
            stage = k % stages
            phase = (k // stages) & 1
            barrier = uint32(stage * 8)
            k_tile = k_smem + uint32(stage * kv_tile_bytes)
            mbarrier_wait_parity(full_k + barrier, phase)
            tile_scores(scores, words, q_lane, q_desc, k_tile, warp, lane)
            first_key = (n_begin + k) * block_n + first_token
            masked = first_key + warp_token_blocks * ROW_BLOCK > smallest_limit
            if masked:
                mask_tile(scores, first_key, group_lane, limits)
            tile_p = p_smem + uint32((k & 1) * p_tile)
            if speculative:     # one barrier tells every warp whether some warp's max would move
                over = speculate(scores, maxima, m_run, scale_log2)
                store_p_tile(tile_p, scores, warp, lane)
                fence_proxy_async_shared()
                if named_barrier_red_or(tile_barrier, tile_threads, over) == 0:
                    for c in range(columns):
                        l_run[c] += maxima[c]
                    mbarrier_wait_parity(full_v + barrier, phase)
                    pv_in_place(acc, v_smem + uint32(stage * kv_tile_bytes), p_tile_descriptor(tile_p), corrections,
                                warp, lane, False)
                    mbarrier_arrive(empty + barrier)
                    continue
                # some max moves: the exact step, from the raw scores again (the K tile is still in)
                tile_scores(scores, words, q_lane, q_desc, k_tile, warp, lane)
                if masked:
                    mask_tile(scores, first_key, group_lane, limits)
            for c in range(columns):
                maxima[c] = column_max(scores, c)
            publish(red, lane_red, maxima, warp, lane)
            named_barrier_sync(tile_barrier, tile_threads)
            for c in range(columns):
                m_run[c], l_run[c], corrections[c] = softmax_finish(
                    scores, c, gather_max(red, lane_red, c), m_run[c], l_run[c], scale_log2)
            tile_pv(acc, corrections, scores, pf_warp, words, p_lane, v_smem, tile_p, stage, full_v + barrier,
                    phase, first_db, warp, lane, tile_barrier)
            mbarrier_arrive(empty + barrier)
        for c in range(columns):
            maxima[c] = column_sum(l_run[c])
        publish(red, lane_red, maxima, warp, lane)
        named_barrier_sync(tile_barrier, tile_threads)
        finish(out, lse, acc, m_run, l_run, corrections, maxima, red, lane_red, k_smem, group_id, warp, lane,
               first_row, rows_valid, group, out_row_base, group_lane, q_heads, kv_head, first_db)

    return types.SimpleNamespace(consume=consume, steps=steps, exchange=exchange, load_q=load_q,
                                 merge_groups=merge_groups, speculate=speculate)
