"""The GEMM variants of the study: listed from the config, named by their parameters, rendered
as one tiny CUDA translation unit each (the CUTLASS template lives in kernels/gemm/*.cuh).

A variant's name holds every parameter, e.g. ``sm90_tma_cooperative_bf16_t128x256x64_c2x1``
(architecture, mainloop, input type, tile M×N×K, cluster M×N), so the build rules need only
the name and :func:`parse_name` recovers the rest.

Combinations CUTLASS cannot build, or that the study has no reason to build, are dropped with
the reason (:func:`excluded_variants`); the tables list them so a reader sees what is missing.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass

ARCHES = ("sm90", "sm100")
ARCH_FLAG = {"sm90": "sm_90a", "sm100": "sm_100a"}
TEMPLATE_HEADER = {"sm90": "gemm_sm90.cuh", "sm100": "gemm_sm100.cuh"}
EXPORT_MACRO = {"sm90": "TMA_GEMM_SM90", "sm100": "TMA_GEMM_SM100"}

# mainloop -> (C++ struct in the template, how operands are loaded, how the MMA is scheduled)
MAINLOOPS = {
    "sm90": {
        "tma_cooperative": ("TmaCooperative", "tma", "cooperative"),
        "tma_pingpong": ("TmaPingpong", "tma", "pingpong"),
        "cpasync_cooperative": ("CpAsyncCooperative", "cpasync", "cooperative"),
        "cpasync_pingpong": ("CpAsyncPingpong", "cpasync", "pingpong"),
    },
    "sm100": {
        "tma_1sm": ("Tma1Sm", "tma", "1sm"),
        "tma_2sm": ("Tma2Sm", "tma", "2sm"),
        "cpasync_1sm": ("CpAsync1Sm", "cpasync", "1sm"),
        "mixed_1sm": ("Mixed1Sm", "mixed", "1sm"),   # A through TMA, B through cp.async
    },
}
DTYPES = {"bf16": ("bf16", 2), "fp8_e4m3": ("fp8_e4m3", 1)}   # name -> (C++ alias, bytes per element)
OUTPUT_DTYPE = "bf16"           # D is bf16 for both input types (fp8 GEMMs in LLMs emit bf16)

# The CUTLASS kernel schedule each SM90 mainloop takes, per input type (kernels/gemm/gemm_sm90.cuh
# chooses it; the generated source static_asserts that the template agrees with this table).
# fp8 on TMA takes the FP8FastAccum schedules: the plain ones would give fp8 CUTLASS's promoting
# mainloop, which the cp.async mainloop has no counterpart of (see ACCUMULATION).
SM90_KERNEL_SCHEDULES = {
    ("tma_cooperative", "bf16"): "KernelTmaWarpSpecializedCooperative",
    ("tma_cooperative", "fp8_e4m3"): "KernelTmaWarpSpecializedCooperativeFP8FastAccum",
    ("tma_pingpong", "bf16"): "KernelTmaWarpSpecializedPingpong",
    ("tma_pingpong", "fp8_e4m3"): "KernelTmaWarpSpecializedPingpongFP8FastAccum",
    ("cpasync_cooperative", "bf16"): "KernelCpAsyncWarpSpecializedCooperative",
    ("cpasync_cooperative", "fp8_e4m3"): "KernelCpAsyncWarpSpecializedCooperative",
    ("cpasync_pingpong", "bf16"): "KernelCpAsyncWarpSpecializedPingpong",
    ("cpasync_pingpong", "fp8_e4m3"): "KernelCpAsyncWarpSpecializedPingpong",
}
# How a GEMM row accumulates (column ``accumulation`` of kernels.csv, gemm.csv and the derived
# tables). fp32 accumulation of fp8 products comes in two kinds on Hopper: in the tensor cores'
# accumulator alone, whose internal precision for fp8 NVIDIA does not document (cuBLAS calls it
# "fast accumulation": intermediate results are not periodically promoted to a higher
# precision), or with promotion: partial sums added into a separate fp32 register accumulator
# every few MMAs (CUTLASS's MainloopSm90TmaGmmaWarpSpecializedFP8, every 4; cuBLAS without
# CUBLASLT_MATMUL_DESC_FAST_ACCUM). Every variant built here accumulates without promotion: the
# SM90 template refuses the promoting mainloop, and CUTLASS 4.2's SM100 mainloops (TMA, cp.async,
# mixed: sm100_umma_builder.inl, sm100_cpasync_umma_builder.inl, sm100_mixed_tma_cpasync_umma_builder.inl)
# accumulate in tensor memory without any promotion step.
ACCUMULATION = {
    "fp32": "bf16 inputs, fp32 accumulator of the tensor cores",
    "fp8_no_promotion": "fp8 inputs, the tensor cores' accumulator alone (no promotion; cuBLAS: fast accumulation)",
    "fp8_promoted": "fp8 inputs, partial sums promoted into a separate fp32 register accumulator every few MMAs",
}

# SASS each loading mechanism must show (prefixes), and what it must not (a cp.async mainloop
# that contained TMA loads would not be the mechanism it is named for). The epilogue stores D
# with TMA (UTMASTG) in every variant, and there is no C operand, so UTMALDG comes only from
# the mainloop.
MMA_SASS = {("sm90", "bf16"): "HGMMA", ("sm90", "fp8_e4m3"): "QGMMA",          # wgmma
            ("sm100", "bf16"): "UTCHMMA", ("sm100", "fp8_e4m3"): "UTCQMMA"}   # tcgen05.mma
MULTICAST_SASS = "UTMALDG.3D.MULTICAST"           # sm_90a TMA loads with a CTA mask
LOAD_SASS = {"tma": (("UTMALDG",), ("LDGSTS",)),
             "cpasync": (("LDGSTS",), ("UTMALDG",)),
             "mixed": (("UTMALDG", "LDGSTS"), ())}

NAME_PATTERN = re.compile(
    r"^(?P<arch>sm90|sm100)_(?P<mainloop>[a-z0-9]+_[a-z0-9]+)_(?P<dtype>bf16|fp8_e4m3)"
    r"_t(?P<tile_m>\d+)x(?P<tile_n>\d+)x(?P<tile_k>\d+)_c(?P<cluster_m>\d+)x(?P<cluster_n>\d+)$")

SM90_REGISTER_LIMIT = 255
SM90_THREADS_PER_WARP_GROUP = 128


@dataclass(frozen=True, order=True)
class Variant:
    arch: str           # sm90 | sm100
    mainloop: str       # a key of MAINLOOPS[arch]
    dtype: str          # bf16 | fp8_e4m3 (A and B); D is bf16, accumulation fp32
    tile_m: int         # the MMA tile (for sm100 tma_2sm: the SM pair's 256 rows)
    tile_n: int
    tile_k: int
    cluster_m: int      # CTAs per cluster along M (B is multicast along M with TMA)
    cluster_n: int      # CTAs per cluster along N (A is multicast along N with TMA)

    @property
    def name(self) -> str:
        return (f"{self.arch}_{self.mainloop}_{self.dtype}_t{self.tile_m}x{self.tile_n}x{self.tile_k}"
                f"_c{self.cluster_m}x{self.cluster_n}")

    @property
    def load(self) -> str:
        """tma | cpasync | mixed: how A and B reach shared memory."""
        return MAINLOOPS[self.arch][self.mainloop][1]

    @property
    def schedule(self) -> str:
        """cooperative | pingpong (sm90), 1sm | 2sm (sm100)."""
        return MAINLOOPS[self.arch][self.mainloop][2]

    @property
    def kernel_schedule(self) -> str | None:
        """The CUTLASS SM90 kernel schedule (cutlass::gemm::...); None for SM100 variants."""
        return SM90_KERNEL_SCHEDULES[self.mainloop, self.dtype] if self.arch == "sm90" else None

    @property
    def accumulation(self) -> str:
        """A key of ACCUMULATION: fp32 (bf16), else fp8 without promotion (every variant built)."""
        return "fp32" if self.dtype == "bf16" else "fp8_no_promotion"

    @property
    def cluster(self) -> str:
        return f"{self.cluster_m}x{self.cluster_n}"

    @property
    def tile(self) -> str:
        return f"{self.tile_m}x{self.tile_n}x{self.tile_k}"

    @property
    def cluster_size(self) -> int:
        return self.cluster_m * self.cluster_n

    def expected_sass(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(prefixes that must appear, prefixes that must not) in this variant's SASS."""
        required, forbidden = LOAD_SASS[self.load]
        required = (*required, MMA_SASS[self.arch, self.dtype])
        if self.arch == "sm90" and self.load == "tma" and self.cluster_size > 1:
            required += (MULTICAST_SASS,)
        return required, forbidden

    def columns(self) -> dict:
        return {"variant": self.name, **asdict(self), "load": self.load, "schedule": self.schedule,
                "cluster": self.cluster, "tile": self.tile, "kernel_schedule": self.kernel_schedule or "",
                "accumulation": self.accumulation}


def parse_name(name: str) -> Variant:
    """The variant a name describes; ValueError naming the expected form otherwise."""
    match = NAME_PATTERN.match(name)
    if not match or match["mainloop"] not in MAINLOOPS[match["arch"]]:
        raise ValueError(f"{name!r} is not a GEMM variant name; expected "
                         "<arch>_<mainloop>_<dtype>_t<M>x<N>x<K>_c<M>x<N> with arch in {sm90, sm100}, "
                         f"mainloop in {sorted(MAINLOOPS['sm90'])} (sm90) or {sorted(MAINLOOPS['sm100'])} "
                         f"(sm100), dtype in {sorted(DTYPES)}")
    values = match.groupdict()
    return Variant(values.pop("arch"), values.pop("mainloop"), values.pop("dtype"),
                   **{key: int(value) for key, value in values.items()})


def why_not_built(variant: Variant) -> str | None:
    """None when CUTLASS can build the variant and the study wants it; else the reason."""
    if variant.load != "tma" and variant.cluster_size > 1:
        return ("cp.async has no multicast, so a cluster only changes the tile order: cp.async "
                "mainloops are built with 1x1 clusters (and CUTLASS's SM100 cp.async kernels "
                "accept only 1x1x1)")
    if variant.arch == "sm90" and variant.schedule == "pingpong":
        accumulators = variant.tile_m * variant.tile_n // SM90_THREADS_PER_WARP_GROUP
        if accumulators > SM90_REGISTER_LIMIT - 64:
            return (f"ping-pong gives each consumer warp group a whole {variant.tile_m}x{variant.tile_n} "
                    f"tile: {accumulators} fp32 accumulators per thread leave no room in "
                    f"{SM90_REGISTER_LIMIT} registers (CUTLASS pairs ping-pong with N <= 128 tiles)")
    if variant.mainloop == "tma_2sm" and variant.cluster_m % 2:
        return "2-SM UMMA runs on a pair of CTAs along M: the cluster's M extent must be even"
    return None


def _candidates(arch: str, section: dict) -> list[Variant]:
    out = []
    for mainloop, dtype, tile, cluster in itertools.product(
            section["mainloops"], section["dtypes"], section["tiles"], section["clusters"]):
        tile_m, tile_n, tile_k = tile
        if mainloop == "tma_2sm":
            tile_m *= 2      # the config gives the tile per CTA; the 2-SM MMA tile spans the pair
        out.append(Variant(arch, mainloop, dtype, tile_m, tile_n, tile_k, *cluster))
    return out


def all_candidates(study: dict) -> list[Variant]:
    """Every combination the config asks for, before exclusions (sorted, unique)."""
    return sorted({v for arch in ARCHES if arch in study["variants"]
                   for v in _candidates(arch, study["variants"][arch])})


def variants(study: dict, arch: str | None = None) -> list[Variant]:
    """The variants to build and measure, for one architecture or all."""
    return [v for v in all_candidates(study)
            if why_not_built(v) is None and (arch is None or v.arch == arch)]


def excluded_variants(study: dict) -> list[tuple[Variant, str]]:
    return [(v, reason) for v in all_candidates(study) if (reason := why_not_built(v)) is not None]


def render_source(variant: Variant) -> str:
    """The translation unit of one variant: its parameters, nothing else; for SM90, a compile-time
    check that the template picked the kernel schedule this module records for it."""
    struct = MAINLOOPS[variant.arch][variant.mainloop][0]
    element = DTYPES[variant.dtype][0]
    source = (
        "// Generated by tma_study.gemm_lib.variants from the variant's name; do not edit.\n"
        f"// {variant.arch} mainloop {variant.mainloop}, {variant.dtype} inputs, bf16 output, "
        f"tile {variant.tile}, cluster {variant.cluster}\n"
        f'#include "{TEMPLATE_HEADER[variant.arch]}"\n'
        f"{EXPORT_MACRO[variant.arch]}({variant.name}, {struct}, {element}, "
        f"{variant.tile_m}, {variant.tile_n}, {variant.tile_k}, {variant.cluster_m}, {variant.cluster_n})\n")
    if variant.kernel_schedule:
        source += (f"static_assert(cute::is_same_v<{variant.name}_variant::Schedule, "
                   f"cutlass::gemm::{variant.kernel_schedule}>, \"kernel schedule: {variant.kernel_schedule}\");\n")
    return source
