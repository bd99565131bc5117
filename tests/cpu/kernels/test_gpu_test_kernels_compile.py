"""Without a GPU: every GPU test module imports, and each of its kernels
compiles to PTX for sm_90a with the signature the GPU test uses, emitting the
instructions the test is about. Catches typos and typing errors before a GPU
run."""

import importlib.util
from pathlib import Path

import pytest
import tma_kernels.numpy_compat  # noqa: F401  before numba compiles anything
from numba import cuda

GPU_TESTS = Path(__file__).resolve().parents[2] / "gpu"
GPU_TEST_MODULES = (
    "test_tensor_map_gpu",
    "test_cluster_launch_gpu",
    "test_ptx_data_gpu",
    "test_crossover_kernels_gpu",
    "test_cluster_studies_gpu",
    "test_paged_kv_gpu",
    "test_mma_gpu",
    "test_wgmma_gpu",
)
HOPPER = (9, 0, "a")

TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
TRY_WAIT = "mbarrier.try_wait.parity"
BULK_LOAD = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
BULK_WAIT = "cp.async.bulk.wait_group 0"
CONSUMER = ["ld.shared::cta.v4.u32", TRY_WAIT]  # tma_kernels/crossover/consumer.py, ring.py
TIMERS = ["%clock64", "%globaltimer"]
#: crossover mechanism -> PTX of its producer (tma_kernels/crossover/<mechanism>.py)
PRODUCER_PTX = {
    "tma_tile": [TMA_LOAD],
    "bulk_copy": [BULK_LOAD],
    "cp_async": ["cp.async.cg.shared::cta.global", "cp.async.mbarrier.arrive.noinc"],
    "plain_loads": ["ld.global.v4.u32", "st.shared::cta.v4.u32", "mbarrier.arrive.shared::cta.b64"],
}


#: tests/gpu/paged_kv/test_paged_kv_gpu.py kernels: paged_attention_<path>_<dtype>_d<dim>_...
PAGED_ATTENTION_NAMES = [
    f"paged_attention_{path}_{dtype}_d{d}_n64_w{w}_s2"
    f"_p{1 if path == 'tma' else 4}{causal}"
    for dtype in ("bf16", "e4m3")
    for d, warps in ((128, (4, 1)), (64, (4,)), (256, (2,)))
    for w in warps
    for path in ("tma", "cp_async")
    for causal in ("_causal",)
    if not (dtype == "e4m3" and w == 1)
] + ["paged_attention_tma_bf16_d128_n64_w4_s2_p1",
      "paged_attention_cp_async_e4m3_d128_n64_w4_s2_p1_causal",    # one cp.async producer warp
      "paged_attention_tma_e4m3_d128_n64_w1_s2_p1_causal_m6",      # launch bounds (64, 6)
      "paged_attention_cp_async_e4m3_d128_n64_w1_s2_p1_causal_m6",
      ] + [f"paged_attention_{path}_{dtype}_d256_n32_w1_s2_p1_causal"   # decode at head dim 256
           for dtype in ("bf16", "e4m3") for path in ("tma", "cp_async")] + [
    f"paged_attention_{path}_{dtype}_d{d}_n{n}_w{w}_s2_p{1 if path == 'tma' else 4}_causal_kq8"
    for path in ("tma", "cp_async")    # decode: S^T = K Q^T
    for dtype, d, w, n in (("bf16", 128, 1, 64), ("bf16", 128, 4, 64), ("bf16", 256, 4, 32), ("bf16", 64, 1, 64),
                           ("e4m3", 128, 1, 64), ("e4m3", 128, 4, 64), ("e4m3", 256, 4, 32), ("e4m3", 64, 1, 128))
] + [f"paged_attention_cp_async_{dtype}_d128_n64_w1_s2_p4_causal_kq16" for dtype in ("bf16", "e4m3")] + [
    f"paged_attention_{path}_{dtype}_d{d}_n64_w4_s2_p{1 if path == 'tma' else 4}_causal_kqw{r}"
    for path in ("tma", "cp_async")    # decode, S^T as one warpgroup wgmma (consumer_kq_wgmma.py)
    for dtype in ("bf16", "e4m3")
    for d, r in ((128, 8), (256, 8), (128, 4), (128, 2), (256, 2), (64, 2), (64, 8))
]
PAGED_ATTENTION_NAMES += [
    f"paged_attention_{path}_e4m3_d{d}_n64_w4_s2_p{1 if path == 'tma' else 4}_causal_kqwrl{r}"
    for path in ("tma", "cp_async")    # decode, P V by wgmma with V^T from registers, in place, with the
    for d, r in ((128, 8), (256, 8), (128, 4), (128, 2), (256, 2), (64, 2), (64, 8))   # lazy rescale
] + [
    f"paged_attention_{path}_e4m3_d{d}_n64_w4_s2_p{1 if path == 'tma' else 4}_causal_m2_kqwrl{r}"
    for path in ("tma", "cp_async")    # .. the lazy one under two CTAs' launch bounds
    for d, r in ((128, 8), (256, 8), (128, 4), (128, 2), (256, 2), (64, 2), (64, 8))
] + [
    f"paged_attention_{path}_e4m3_d{d}_n64_w8_s{s}_p{1 if path == 'tma' else 4}_causal_kqwrls{r}"
    for path in ("tma", "cp_async")    # decode, two lazy warpgroups on every tile, half the rows each
    for d, r, s in ((256, 4, 4), (128, 4, 2), (128, 2, 4), (64, 2, 2))
]
LDMATRIX = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
WGMMA_PTX = "wgmma.mma_async.sync.aligned.m64n"
WGMMA_TYPES = {"bf16": "k16.f32.bf16.bf16", "e4m3": "k32.f32.e4m3.e4m3"}
PAGED_ATTENTION_COMMON = [LDMATRIX,
                          "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", "ex2.approx.ftz.f32",
                          TRY_WAIT, "mbarrier.arrive.shared::cta.b64"]
PAGED_ATTENTION_PTX = {
    "tma": ["cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes",
            "mbarrier.arrive.expect_tx"],
    "cp": ["cp.async.cg.shared::cta.global", "cp.async.mbarrier.arrive.noinc"],
}
F16_MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
E4M3_VIA_F16 = F16_MMA    # tma_kernels.ptx.mma.mma_e4m3_m16n8k32_via_f16
PAGED_ATTENTION_MMA = {
    "bf16": ["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "cvt.rn.bf16x2.f32"],
    "e4m3": [E4M3_VIA_F16, "cvt.rn.f16x2.e4m3x2", "cvt.rn.satfinite.e4m3x2.f32", "prmt.b32"],
}


def paged_attention_ptx(name):
    """PTX a paged attention variant must hold: its load path's and its dtype's instructions."""
    path = "tma" if name.startswith("paged_attention_tma_") else "cp"
    dtype = "e4m3" if "_e4m3_" in name else "bf16"
    if "_kqwr" in name:   # both products by wgmma: no mma.sync, no unpack; P^T as e4m3
        gather = ["ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"]                     # V^T into registers
        return ([f for f in PAGED_ATTENTION_COMMON if not f.startswith("ldmatrix")] + PAGED_ATTENTION_PTX[path]
                + ["cvt.rn.satfinite.e4m3x2.f32", "st.shared.u16", "prmt.b32", "bar.sync", WGMMA_PTX,
                   WGMMA_TYPES[dtype], "wgmma.commit_group.sync.aligned", "fence.proxy.async.shared::cta"]
                + gather)
    kq = ["movmatrix.sync.aligned.m8n8.trans.b16"] if "_kq" in name else []
    split = ["bar.sync"] if "_kqw" in name else []    # the consumer warps' named barriers
    wgmma = ([WGMMA_PTX, WGMMA_TYPES[dtype], "wgmma.commit_group.sync.aligned", "fence.proxy.async.shared::cta"]
             if "_kqw" in name else [])
    common = [f for f in PAGED_ATTENTION_COMMON if not (wgmma and f == LDMATRIX)]    # K: read by the wgmma
    return common + PAGED_ATTENTION_PTX[path] + PAGED_ATTENTION_MMA[dtype] + kq + split + wgmma


def tma_load(rank):
    return TMA_LOAD.replace(".2d.", f".{rank}d.")


def tma_store(rank):
    return f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group"


def wgmma_test_ptx(dtype, n):
    """PTX of tests/gpu/test_wgmma_gpu.py's kernel of that dtype and N."""
    k, types = (16, "bf16.bf16") if dtype == "bf16" else (32, "e4m3.e4m3")
    return [f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{types}", "wgmma.fence.sync.aligned",
            "wgmma.wait_group.sync.aligned 0", "fence.proxy.async.shared::cta"]


#: kernel name -> PTX fragments its test relies on
EXPECTED_PTX = {
    "tma_tile_copy": [TMA_LOAD, "mbarrier.init.shared::cta.b64", "mbarrier.try_wait.parity"],
    "cluster_identity": [
        "%cluster_ctarank",
        "%nclusterid.x",
        "barrier.cluster.arrive",
        "mapa.shared::cluster.u32",
        "ld.shared::cluster.u32",
    ],
    "multicast_tile": [
        TMA_LOAD + ".multicast::cluster",
        "fence.mbarrier_init.release.cluster",
        "barrier.cluster.wait",
    ],
    "reverse_through_dynamic_shared": [".extern .shared"],
    # test_ptx_data_gpu
    "tma_load_1d_box": [tma_load(1), TRY_WAIT],
    "tma_load_2d_evict_first_box": [
        TMA_LOAD + ".L2::cache_hint",
        "createpolicy.fractional.L2::evict_first.b64",
        "prefetch.tensormap",
    ],
    "tma_load_2d_evict_last_box": [
        TMA_LOAD + ".L2::cache_hint",
        "createpolicy.fractional.L2::evict_last.b64",
        "prefetch.tensormap",
    ],
    "tma_load_3d_box": [tma_load(3), TRY_WAIT],
    "tma_load_4d_box": [tma_load(4), TRY_WAIT],
    "tma_load_5d_box": [tma_load(5), TRY_WAIT],
    "tma_store_1d_box": [
        tma_store(1), "fence.proxy.async.shared::cta", "cp.async.bulk.commit_group", BULK_WAIT
    ],
    "tma_store_2d_box": [
        tma_store(2), "fence.proxy.async.shared::cta", "cp.async.bulk.commit_group", BULK_WAIT
    ],
    "bulk_round_trip": [
        BULK_LOAD,
        "cp.async.bulk.global.shared::cta.bulk_group",
        BULK_WAIT,
        "cp.async.bulk.wait_group.read 0",
    ],
    "bulk_copy_to_peer_pair": [
        "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes",
        "mapa.shared::cluster.u32",
        "fence.proxy.async.shared::cta",
        "barrier.cluster.wait",
    ],
    "cp_async_copy": [
        "cp.async.ca.shared::cta.global",
        "cp.async.cg.shared::cta.global",
        "cp.async.commit_group",
        "cp.async.wait_group 0",
        "cp.async.wait_all",
        "cp.async.mbarrier.arrive.noinc.shared::cta.b64",
    ],
    "vector_reverse": [
        "ld.global.v4.u32",
        "ld.global.nc.v4.u32",
        "st.global.v4.u32",
        "ld.shared::cta.v4.u32",
        "st.shared::cta.v4.u32",
    ],
    "mbarrier_phases": [
        "mbarrier.expect_tx.relaxed.cta.shared::cta.b64",
        "mbarrier.arrive.shared::cta.b64",
        BULK_LOAD,
        TRY_WAIT,
        "selp.u32",
    ],
    "cluster_arrivals": ["mbarrier.arrive.release.cluster.shared::cluster.b64", TRY_WAIT],
    "dsm_ring_exchange": [
        "st.shared::cluster.u32",
        "st.shared::cluster.v4.u32",
        "ld.shared::cluster.v4.u32",
        "mapa.shared::cluster.u32",
    ],
    "relaxed_cluster_barrier": ["barrier.cluster.arrive.relaxed", "barrier.cluster.wait", "%globaltimer"],
    "cluster_registers": ["%cluster_ctaid.x", "%cluster_nctaid.x", "%smid"],
    "timers": TIMERS,
    # test_crossover_kernels_gpu
    **{f"stream_{m}": PRODUCER_PTX[m] + CONSUMER for m in PRODUCER_PTX},
    **{f"latency_{m}": PRODUCER_PTX[m] + [TRY_WAIT] + TIMERS for m in PRODUCER_PTX},
    "read_stream": ["ld.global.v4.u32"],
    # test_cluster_studies_gpu
    "cluster_stream_own_copy": [TMA_LOAD, "ld.shared::cta.v4.u32", TRY_WAIT],
    "cluster_stream_multicast": [TMA_LOAD + ".multicast::cluster", "mbarrier.arrive.shared::cluster.b64",
                                 "barrier.cluster.wait"],
    "cluster_stream_own_copy_cta_release": [TMA_LOAD, "bar.sync"],
    "cluster_stream_multicast_cta_release": [TMA_LOAD + ".multicast::cluster", "mbarrier.arrive.shared::cluster.b64",
                                             "bar.sync"],
    # the compute consumer's churn: w = w * 1664525 + 1013904223 (kernels/multicast/consume.py)
    "cluster_compute_stream_own_copy": [TMA_LOAD, "ld.shared::cta.v4.u32", "mad.lo.s32", "1664525, 1013904223"],
    "cluster_compute_stream_multicast": [TMA_LOAD + ".multicast::cluster", "mbarrier.arrive.shared::cluster.b64",
                                         "mad.lo.s32", "1664525, 1013904223"],
    "broadcast_dsm_pull": [TMA_LOAD, "ld.shared::cluster.v4.u32", "mbarrier.arrive.release.cluster",
                           "mbarrier.try_wait.parity.acquire.cluster"],
    "broadcast_dsm_push": [TMA_LOAD, "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes",
                           "cp.async.bulk.wait_group.read 0"],
    "dsm_neighbour_read": ["ld.shared::cluster.v4.u32", "mapa.shared::cluster.u32"],
    "dsm_own_read": ["ld.shared::cta.v4.u32"],
    "dsm_latency_chase": ["ld.shared::cluster.u32", "%clock64"],
    # test_paged_kv_gpu: every attention variant (see paged_attention_ptx), the combine
    **{name: paged_attention_ptx(name) for name in PAGED_ATTENTION_NAMES},
    **{f"combine_splits_{n}": ["ld.global.f32", "st.global.f32", "ex2.approx"] for n in (2, 3, 8, 43, 128)},
    # test_mma_gpu: ptxas's e4m3 mma.sync and the two-fp16-mma form the attention kernel uses
    "mma_e4m3": ["mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"],
    "mma_e4m3_via_f16": [E4M3_VIA_F16, "cvt.rn.f16x2.e4m3x2"],
    # test_wgmma_gpu: one warpgroup's wgmma over the swizzled tile layout
    **{f"wgmma_{dtype}_d{d}_n{n}": wgmma_test_ptx(dtype, n)
       for dtype, d in (("e4m3", 64), ("e4m3", 128), ("e4m3", 256), ("bf16", 64), ("bf16", 128)) for n in (8, 16, 32)},
}


def load_gpu_test_module(name):
    """Import tests/gpu/<name>.py under a private name (no package needed)."""
    path = next(GPU_TESTS.rglob(f"{name}.py"))      # tests/gpu/ or a study's folder in it
    spec = importlib.util.spec_from_file_location(f"gpu_tests_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: tests/gpu/paged_kv/test_paged_kv_gpu.py's attention variants compiled here by default: one of each consumer
#: the sweep runs (they share every device function, so a typing error shows in one); the GPU test run
#: compiles its own representative set, -m exhaustive all of them here
PAGED_ATTENTION_DEFAULT = {
    "paged_attention_tma_bf16_d128_n64_w4_s2_p1_causal", "paged_attention_cp_async_e4m3_d128_n64_w4_s2_p4_causal_kq8",
    "paged_attention_tma_bf16_d128_n64_w4_s2_p1_causal_kqw8", "paged_attention_cp_async_e4m3_d256_n64_w4_s2_p4_causal_kqwrl8",
    "paged_attention_tma_e4m3_d128_n64_w4_s2_p1_causal_m2_kqwrl8", "paged_attention_tma_e4m3_d256_n64_w8_s4_p1_causal_kqwrls4",
}


def all_kernels():
    """Every GPU test kernel; the attention variants beyond PAGED_ATTENTION_DEFAULT (and what a module
    lists in EXHAUSTIVE_KERNELS) only under -m exhaustive."""
    for module_name in GPU_TEST_MODULES:
        module = load_gpu_test_module(module_name)
        exhaustive = getattr(module, "EXHAUSTIVE_KERNELS", set()) | {
            name for name in module.KERNELS
            if name.startswith("paged_attention_") and name not in PAGED_ATTENTION_DEFAULT}
        for kernel_name, (function, signature) in module.KERNELS.items():
            yield pytest.param(kernel_name, function, signature, id=f"{module_name}::{kernel_name}",
                               marks=pytest.mark.exhaustive if kernel_name in exhaustive else ())


@pytest.mark.parametrize("name, function, signature", list(all_kernels()))
def test_gpu_test_kernel_compiles_for_sm90a(name, function, signature):
    ptx, _ = cuda.compile(function, signature, device=False, cc=HOPPER, output="ptx", abi="numba")
    assert ".target sm_90a" in ptx
    missing = [fragment for fragment in EXPECTED_PTX[name] if fragment not in ptx]
    assert not missing, f"{name}: PTX lacks {missing}"


def test_the_default_attention_kernels_exist():
    assert PAGED_ATTENTION_DEFAULT <= set(load_gpu_test_module("test_paged_kv_gpu").KERNELS)


def test_every_gpu_test_kernel_has_expected_ptx_listed():
    names = {
        name
        for module_name in GPU_TEST_MODULES
        for name in load_gpu_test_module(module_name).KERNELS
    }
    assert names == set(EXPECTED_PTX)
