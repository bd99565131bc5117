"""The paged_kv sweep: every (shape, dtype, phase, page size, load path) to measure.

A configuration pairs a problem shape (query heads / KV heads / head dim), a dtype, a
phase (decode with 1 or 4 query tokens, or causal prefill), a page size and a load path.
The TMA path runs only at page sizes its boxes can take (``runner.check_page_size``), with
FlashAttention-3's one box per K/V tile where a page holds a tile and a box per chunk below
(``SweepConfig.tma_box``); the cp.async path also at 1 and 8. Each configuration's kernel variant follows from it:
block_n 64 (decode: 128 for e4m3 at head dim 64, 32 at head dim 256, see ``SweepConfig.block_n``), the consumer of
``SweepConfig.score_layout`` (prefill: "qk", S = Q K^T, 16 packed query rows per warp, 4 warps;
decode: each of config ``decode_consumers``, a consumer of the ladder in
tma_kernels.paged_kv.layouts (the one list of them): "kq", S^T = K Q^T, 8 rows per warp, as many
warps as its query heads x tokens need; the shares_tile consumers, 4 warps sharing each tile of
64 tokens ("kq_wgmma", and for e4m3 "kq_wgmma_rs_lazy"), and the row_split one, two such
warpgroups on every tile, half the CTA's query rows each ("kq_wgmma_rs_lazy_rowsplit", e4m3, run
only where a KV head has at least ROWSPLIT_MIN_ROWS packed query rows); a consumer runs only at
the dtypes its layout is built for), each of the phase kind's ``stages`` counts that fits in shared memory, one producer warp for
TMA and each of the phase kind's ``cp_async_producer_warps`` counts for cp.async (the tuning
knobs: a path is compared at its best combination; the analysis keeps the fastest per path)
(FA3 uses a warpgroup there). Decode splits the KV sequence per compiled kernel, by FA3's
wave-efficiency rule over that kernel's resident CTA slots (splits.py; measure.py picks it
once the kernel is built, since residency is a property of the compiled code); prefill does
not split.

A phase normally runs with every shape and every page size of its path (the page-size
sweep); a phase may narrow that with ``shapes`` (names) and ``page_sizes`` (both paths, at
the sizes each path can take): the batch/context scaling points run one shape at one page size.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from tma_kernels.paged_kv.layouts import DECODE_CONSUMERS, LAYOUTS
from tma_kernels.paged_kv.tma_boxes import NO_TMA_BOX, sweep_tma_box

from tma_study.fa3_rule import fa3_choice
from .splits import RULE_DECODE, RULE_PREFILL, SplitChoice, wave_efficiency_splits

LOAD_PATHS = ("tma", "cp_async")
PREFILL_ROWS_PER_WARP = 16  # S = Q K^T: query rows are the mma's M
DECODE_ROWS_PER_WARP = 8    # S^T = K Q^T: query rows are the mma's N
PREFILL_WARPS = 4
BLOCK_N = 64                # KV rows per tile (FA3 uses 80-224 with wgmma); decode: SweepConfig.block_n
DECODE_BLOCK_N_MAX = 128
DECODE_BLOCK_N_D256 = 32
DECODE_SPLIT_WARPS = 4      # shares_tile consumers: warps sharing each tile (one warpgroup)
DECODE_SPLIT_MAX_ROWS = 32  # shares_tile consumers: query rows of a CTA at most (4 warps x 8)
DECODE_WGMMA_BLOCK_N = 64   # wgmma consumers: the tile is the wgmma's M (tma_kernels.ptx.wgmma.M)
DECODE_ROWSPLIT_WARPS = 8   # the row_split consumers: two warpgroups
ROWSPLIT_MIN_ROWS = 16      # the row_split consumers: two groups of at least one mma N block of 8 rows
# DECODE_CONSUMERS (config decode_consumers may list them): tma_kernels.paged_kv.layouts'
WGMMA_CONSUMERS = tuple(c for c in DECODE_CONSUMERS if LAYOUTS[c].uses_wgmma)   # S^T by wgmma


class GridError(ValueError):
    """A sweep setting the kernel cannot run; the message names the config key."""


@dataclass(frozen=True)
class Shape:
    name: str
    q_heads: int
    kv_heads: int
    head_dim: int

    @property
    def group(self) -> int:
        return self.q_heads // self.kv_heads


@dataclass(frozen=True)
class Phase:
    name: str            # "decode" or "prefill"
    batch: int
    seqlen_q: int
    context: int         # tokens in each sequence's cache (query tokens included)


@dataclass(frozen=True)
class SweepConfig:
    shape: Shape
    dtype: str
    phase: Phase
    page_size: int
    load_path: str
    stages: int
    producer_warps: int
    decode_min_kv_tile_bytes: int     # config studies.paged_kv.decode_min_kv_tile_bytes
    decode_consumer: str = "kq"       # one of config studies.paged_kv.decode_consumers

    @property
    def layout(self):
        """The consumer's record (tma_kernels.paged_kv.layouts.Layout)."""
        return LAYOUTS[self.score_layout]

    @property
    def block_n(self) -> int:
        """KV rows per tile: 64; in decode, more where a tile of 64 rows holds less than
        config ``decode_min_kv_tile_bytes`` of one head's K (up to 128: e4m3 at head dim 64),
        and 32 at head dim 256, where 64 rows (2 stages x 2 x 32 KiB of bf16) let one CTA
        reside per SM; the wgmma consumers' tile is the wgmma's M, 64 tokens. How these were
        chosen: docs/paged_kv_consumers.md."""
        if self.phase.name == "prefill":
            return BLOCK_N
        if self.shape.head_dim == 256:
            rows = DECODE_BLOCK_N_D256
        else:
            rows = min(DECODE_BLOCK_N_MAX, max(BLOCK_N, self.decode_min_kv_tile_bytes // self.head_bytes))
        if self.layout.uses_wgmma:
            return DECODE_WGMMA_BLOCK_N
        return rows

    @property
    def head_bytes(self) -> int:
        from tma_kernels.paged_kv.geometry import ELEMENT_BYTES
        return self.shape.head_dim * ELEMENT_BYTES[self.dtype]

    @property
    def score_layout(self) -> str:
        """The consumer (tma_kernels.paged_kv.geometry.Variant.score_layout; the ladder of them:
        tma_kernels.paged_kv.layouts): prefill "qk" (S = Q K^T, query rows as the mma's M, as
        FA3); decode ``decode_consumer``, a tuning knob swept per cell like the stages: "kq" (S^T =
        K Q^T, KV tokens as M: at 1 to 8 query rows per KV head, rows as M leave most of every
        mma padding) or a consumer whose warps share each K/V tile."""
        if self.phase.name == "prefill":
            return "qk"
        return self.decode_consumer

    @property
    def rows_per_warp(self) -> int:
        """Query rows a consumer warp loads: prefill 16, decode 8; the shares_tile consumers: the
        CTA's rows (the packed rows of a KV head, as a power of two from 8 to 32) over its warps
        (the row_split consumers: over both groups' warps, from 16 rows)."""
        if self.phase.name == "prefill":
            return PREFILL_ROWS_PER_WARP
        if self.layout.shares_tile:   # whole mma N blocks of query rows
            from tma_kernels.paged_kv.kq_steps import Q_ROWS_PER_BLOCK
            rows = self.phase.seqlen_q * self.shape.group
            block_m = min(DECODE_SPLIT_MAX_ROWS, max(Q_ROWS_PER_BLOCK, 1 << math.ceil(math.log2(rows))))
            if self.layout.row_split:
                return block_m // DECODE_ROWSPLIT_WARPS     # sweep_configs: block_m >= ROWSPLIT_MIN_ROWS here
            return block_m // DECODE_SPLIT_WARPS
        return DECODE_ROWS_PER_WARP

    @property
    def consumer_warps(self) -> int:
        if self.phase.name == "prefill":
            return PREFILL_WARPS
        if self.layout.row_split:
            return DECODE_ROWSPLIT_WARPS
        if self.layout.shares_tile:
            return DECODE_SPLIT_WARPS
        rows = self.phase.seqlen_q * self.shape.group
        return min(PREFILL_WARPS, 1 << max(0, math.ceil(math.log2(math.ceil(rows / self.rows_per_warp)))))

    @property
    def tma_box(self) -> str:
        """The TMA path's load shape (tma_kernels.paged_kv.tma_boxes): FlashAttention-3's, one
        rank-5 box per K or V tile ("tile"), where a page holds a whole tile (page_size >= block_n);
        below that, a box per chunk of each page ("chunk"). The paged_kv_tma study measured every
        shape at the decode points: the tile box was never slower than the chunk boxes
        (docs/paged_kv_tma.md). The cp.async path: "none"."""
        if self.load_path != "tma":
            return NO_TMA_BOX
        return sweep_tma_box(self.page_size, self.block_n)

    def variant(self):
        from tma_kernels.paged_kv.geometry import Variant
        tma_box = {} if self.load_path != "tma" else {"tma_box": self.tma_box}
        return Variant(dtype=self.dtype, head_dim=self.shape.head_dim, load_path=self.load_path,
                       block_n=self.block_n, consumer_warps=self.consumer_warps, stages=self.stages,
                       producer_warps=1 if self.load_path == "tma" else self.producer_warps, causal=True,
                       score_layout=self.score_layout, rows_per_warp=self.rows_per_warp, **tma_box)

    @property
    def ctas_per_split(self) -> int:
        """CTAs of one KV split: one per (sequence, KV head, block of packed query rows)."""
        tile_warps = DECODE_SPLIT_WARPS if self.layout.shares_tile else self.consumer_warps
        block_m = self.rows_per_warp * tile_warps * (2 if self.layout.row_split else 1)
        m_blocks = math.ceil(self.phase.seqlen_q * self.shape.group / block_m)
        return self.phase.batch * self.shape.kv_heads * m_blocks

    @property
    def kv_tiles(self) -> int:
        """block_n-row KV tiles of one sequence: at most one split per tile."""
        return math.ceil(self.phase.context / self.block_n)

    def split(self, resident_ctas_per_sm: int, sm_count: int) -> SplitChoice:
        """The split count to launch this configuration with, for a kernel that fits
        ``resident_ctas_per_sm`` CTAs on each of ``sm_count`` SMs: prefill 1, decode by FA3's
        wave-efficiency rule over the kernel's resident slots (splits.wave_efficiency_splits)."""
        if resident_ctas_per_sm < 1:
            raise ValueError(f"{self.key}: the kernel fits {resident_ctas_per_sm} CTAs per SM; "
                             "it cannot launch")
        slots = resident_ctas_per_sm * sm_count
        if self.phase.name == "prefill":
            return SplitChoice(1, RULE_PREFILL, "prefill is not split", self.ctas_per_split, slots)
        splits, reason = wave_efficiency_splits(self.ctas_per_split, slots, self.kv_tiles)
        return SplitChoice(splits, RULE_DECODE, reason,
                           self.ctas_per_split * splits, slots)

    def fa3(self):
        return fa3_choice(self.page_size, self.phase.seqlen_q, self.shape.q_heads, self.shape.kv_heads,
                          self.shape.head_dim, self.dtype, causal=True)

    @property
    def key(self) -> str:
        return (f"{self.shape.name}/{self.dtype}/{self.phase.name}-q{self.phase.seqlen_q}"
                f"-b{self.phase.batch}-ctx{self.phase.context}/page{self.page_size}/{self.load_path}"
                f"/s{self.stages}" + (f"p{self.producer_warps}" if self.load_path == "cp_async" else "")
                + (f"/{self.score_layout}" if self.phase.name == "decode" else ""))

    def columns(self) -> dict:
        """The configuration's row columns; the launch's split columns come from ``split``
        (measure.py adds them once the kernel, and so its residency, is known)."""
        fa3 = self.fa3()
        return {"shape": self.shape.name, "q_heads": self.shape.q_heads, "kv_heads": self.shape.kv_heads,
                "head_dim": self.shape.head_dim, "dtype": self.dtype, "phase": self.phase.name,
                "batch": self.phase.batch, "seqlen_q": self.phase.seqlen_q,
                "context_tokens": self.phase.context, "page_size": self.page_size,
                "load_path": self.load_path, "tma_box": self.tma_box, "block_n": self.block_n,
                "score_layout": self.score_layout, "rows_per_warp": self.rows_per_warp,
                "consumer_warps": self.consumer_warps, "stages": self.stages,
                "producer_warps": self.variant().producer_warps,
                "fa3_load_path": fa3.load_path,
                "fa3_block_m": fa3.kernel_tile.block_m, "fa3_block_n": fa3.kernel_tile.block_n,
                "fa3_reason": fa3.reason}


def shapes(study: dict) -> list[Shape]:
    out = []
    for name, s in study["shapes"].items():
        if s["q_heads"] % s["kv_heads"]:
            raise GridError(f"config key 'studies.paged_kv.shapes.{name}': q_heads {s['q_heads']} is not a "
                            f"multiple of kv_heads {s['kv_heads']}")
        out.append(Shape(name, s["q_heads"], s["kv_heads"], s["head_dim"]))
    return out


def phases(study: dict) -> list[Phase]:
    return [phase for phase, _, _ in _phase_plans(study)]


def _phase_plans(study: dict) -> list[tuple[Phase, list[Shape], dict[str, list[int]]]]:
    """[(phase, its shapes, its page sizes by load path)], every phase checked."""
    all_shapes = {s.name: s for s in shapes(study)}
    plans = []
    for i, p in enumerate(study["phases"]):
        key = f"config key 'studies.paged_kv.phases[{i}]"
        if p["context"] < p["seqlen_q"]:
            raise GridError(f"{key}': context {p['context']} < seqlen_q {p['seqlen_q']} "
                            "(the cache holds the query tokens)")
        unknown = [name for name in p.get("shapes", ()) if name not in all_shapes]
        if unknown:
            raise GridError(f"{key}.shapes': {unknown} not among studies.paged_kv.shapes "
                            f"{sorted(all_shapes)}")
        phase_shapes = [all_shapes[name] for name in p["shapes"]] if "shapes" in p else list(all_shapes.values())
        if "page_sizes" in p:
            pages = {path: [size for size in p["page_sizes"] if size in study["page_sizes"][path]]
                     for path in LOAD_PATHS}
            stray = sorted(set(p["page_sizes"]) - set(pages["tma"]) - set(pages["cp_async"]))
            if stray:
                raise GridError(f"{key}.page_sizes': {stray} not in studies.paged_kv.page_sizes of "
                                "any load path")
        else:
            pages = {path: list(study["page_sizes"][path]) for path in LOAD_PATHS}
        largest_page = max(max(sizes, default=1) for sizes in pages.values())
        if p["context"] % largest_page:
            raise GridError(f"{key}': context {p['context']} is not a multiple of the largest page "
                            f"size {largest_page} (timed caches are whole pages)")
        phase = Phase(p["name"], p["batch"], p["seqlen_q"], p["context"])
        if any(phase == earlier for earlier, _, _ in plans):
            raise GridError(f"{key}': {phase} is listed twice")
        plans.append((phase, phase_shapes, pages))
    return plans


def decode_consumers(study: dict) -> dict[str, list[str]]:
    """Config ``decode_consumers``, per dtype of config ``dtypes``: the decode consumers to sweep,
    each of DECODE_CONSUMERS; one list for every dtype, or a mapping from each dtype to its own."""
    key = "studies.paged_kv.decode_consumers"
    given = study["decode_consumers"]
    if isinstance(given, dict):
        missing = [d for d in study["dtypes"] if d not in given]
        if missing:
            raise GridError(f"config key '{key}': no list for dtype(s) {missing}; give one list per dtype of "
                            f"studies.paged_kv.dtypes ({study['dtypes']}), or one list for all")
        lists = {d: (f"{key}.{d}", given[d]) for d in study["dtypes"]}
    else:
        lists = {d: (key, given) for d in study["dtypes"]}
    for dtype, (name, consumers) in lists.items():
        stray = [c for c in consumers if c not in DECODE_CONSUMERS]
        if not consumers or stray or len(set(consumers)) != len(consumers):
            raise GridError(f"config key '{name}': {consumers} must list distinct consumers among "
                            f"{list(DECODE_CONSUMERS)}, at least one")
        runs = [c for c in consumers if dtype in LAYOUTS[c].dtypes]
        other_dtype = [c for c in consumers if c not in runs]
        if isinstance(given, dict) and other_dtype:
            raise GridError(f"config key '{name}': {other_dtype} run only at "
                            f"{sorted({d for c in other_dtype for d in LAYOUTS[c].dtypes})}, not {dtype}")
        if not runs:
            raise GridError(f"config key '{name}': no consumer of {consumers} runs at {dtype}, so every {dtype} "
                            f"decode cell would be left out; add one of "
                            f"{[c for c in DECODE_CONSUMERS if dtype in LAYOUTS[c].dtypes]}")
    return {d: list(consumers) for d, (_, consumers) in lists.items()}


def check_config(study: dict, expand: bool = False) -> list[str]:
    """Messages for the rules between keys of ``studies.paged_kv`` that its schema cannot state
    (shapes' heads, phases' shapes and page sizes, decode consumers per dtype); ``expand``: also
    build the whole sweep (imports the kernels' geometry: for the measure step's start)."""
    try:
        shapes(study)
        _phase_plans(study)
        decode_consumers(study)
        if expand:
            sweep_configs(study)
    except GridError as error:
        return [str(error)]
    return []


def sweep_configs(study: dict) -> list[SweepConfig]:
    """Expand the study config, shape-major; keep only page sizes a path can load."""
    from tma_kernels.paged_kv.geometry import VariantError
    from tma_kernels.paged_kv.runner import check_page_size
    configs = []
    plans = _phase_plans(study)
    consumers = decode_consumers(study)
    for shape, dtype, (phase, phase_shapes, pages), path in itertools.product(
            shapes(study), study["dtypes"], plans, LOAD_PATHS):
        if shape not in phase_shapes:
            continue
        producer_warps = study["cp_async_producer_warps"][phase.name] if path == "cp_async" else [1]
        phase_consumers = consumers[dtype] if phase.name == "decode" else ["kq"]   # prefill: "qk" regardless
        phase_consumers = [c for c in phase_consumers if dtype in LAYOUTS[c].dtypes
                           and (not LAYOUTS[c].row_split or phase.seqlen_q * shape.group >= ROWSPLIT_MIN_ROWS)]
        for page, stages, warps, consumer in itertools.product(pages[path], study["stages"][phase.name],
                                                               producer_warps, phase_consumers):
            config = SweepConfig(shape, dtype, phase, page, path, stages, warps, study["decode_min_kv_tile_bytes"],
                                 consumer)
            try:
                variant = config.variant()
            except VariantError:
                if stages == min(study["stages"][phase.name]):
                    raise GridError(f"config key 'studies.paged_kv.stages.{phase.name}': {shape.name} "
                                    f"{dtype} ({config.score_layout}) does not fit at {stages} stages") from None
                continue        # a deeper ring that does not fit in shared memory
            try:
                check_page_size(variant, page)
            except VariantError as error:
                raise GridError(f"config key 'studies.paged_kv.page_sizes.{path}': {error}") from None
            configs.append(config)
    return configs
