// SM90 (Hopper, sm_90a) GEMM template: one CUTLASS 3.x warp-specialized kernel per variant.
//
// D (M×N, bf16) = A (M×K) · Bᵀ (B is N×K), fp32 accumulation; layouts in gemm_abi.cuh.
// A variant fixes only what the gemm study compares:
//   Mainloop  how operand tiles reach shared memory, and how the consumer warp groups share them
//     TmaCooperative     TMA loads (one producer warp issues them),   2 consumer warp groups split one tile
//     TmaPingpong        TMA loads,                                    2 consumer warp groups alternate tiles
//     CpAsyncCooperative cp.async 16 B per thread (a producer warp group), 2 consumer WGs split one tile
//     CpAsyncPingpong    cp.async,                                     2 consumer WGs alternate tiles
//   Element   bf16 or fp8 e4m3 inputs (output bf16, accumulator fp32)
//   Tile      CTA tile M×N×K
//   Cluster   CTAs per cluster along M and N. With TMA, the A tile is multicast to the CTAs of a
//             cluster row (along N) and the B tile to a cluster column (along M). cp.async has no
//             multicast, so its variants use 1×1 clusters (variants.py enforces it).
// Everything else is the same for every variant: the persistent tile scheduler, the TMA
// warp-specialized epilogue (with no C operand), and the pipeline depth CUTLASS derives from the
// shared memory left after the epilogue (StageCountAutoCarveout).
// fp8 accumulates the same way on both load paths: in the wgmma accumulator alone, without
// promotion. For fp8 inputs on a plain TMA schedule, CUTLASS 4.2's SM90 builder picks
// MainloopSm90TmaGmmaWarpSpecializedFP8 (sm90_gmma_builder.inl: the IsFP8Input branch), which
// keeps a second fp32 fragment and adds it into the accumulator every mma_promotion_interval = 4
// MMAs (fp8_accumulation.hpp); its cp.async builder has no such mainloop. That promotion doubles
// the accumulator registers (ptxas spilled ~900 B in ping-pong 128x128 and cooperative 128x256)
// and rounds differently, so a TMA vs cp.async comparison would time the promotion, not the
// load path. The TMA mainloops therefore take CUTLASS's FP8FastAccum schedules for fp8 (the ones
// CUTLASS's own kernel generator stamps out for fp8 ping-pong): the same wgmma mainloop as
// bf16. Variant static_asserts that no variant gets the promoting mainloop.
#pragma once

#include "gemm_abi.cuh"

#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

namespace tma_gemm::sm90 {

using bf16 = cutlass::bfloat16_t;
using fp8_e4m3 = cutlass::float_e4m3_t;

// Mainloop choices: the CUTLASS kernel schedule for bf16 (Kernel) and for fp8 (KernelFp8), and
// the epilogue schedule that goes with them.
struct TmaCooperative {
  static constexpr const char* name = "tma_cooperative";
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using KernelFp8 = cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum;  // no promotion
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
struct TmaPingpong {
  static constexpr const char* name = "tma_pingpong";
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using KernelFp8 = cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum;     // no promotion
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};
struct CpAsyncCooperative {
  static constexpr const char* name = "cpasync_cooperative";
  using Kernel = cutlass::gemm::KernelCpAsyncWarpSpecializedCooperative;
  using KernelFp8 = Kernel;               // CUTLASS's cp.async mainloop has no fp8 promotion
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
struct CpAsyncPingpong {
  static constexpr const char* name = "cpasync_pingpong";
  using Kernel = cutlass::gemm::KernelCpAsyncWarpSpecializedPingpong;
  using KernelFp8 = Kernel;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};

template <class Element> constexpr const char* element_name();
template <> constexpr const char* element_name<bf16>() { return "bf16"; }
template <> constexpr const char* element_name<fp8_e4m3>() { return "fp8_e4m3"; }

// The kernel schedule of a mainloop for an input type.
template <class Mainloop, class ElementAB>
using KernelSchedule = cute::conditional_t<cute::is_same_v<ElementAB, fp8_e4m3>,
                                           typename Mainloop::KernelFp8, typename Mainloop::Kernel>;

// True for CUTLASS's promoting fp8 mainloop (a second fp32 accumulator fragment), which no
// variant may get (see the top of this file).
template <class DispatchPolicy> struct PromotesFp8 : cute::false_type {};
template <int Stages, class ClusterShape, class Schedule>
struct PromotesFp8<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<Stages, ClusterShape, Schedule>>
    : cute::true_type {};

template <class Mainloop, class ElementAB, int TileM, int TileN, int TileK, int ClusterM, int ClusterN>
struct Variant {
  using Schedule = KernelSchedule<Mainloop, ElementAB>;
  using ElementD = bf16;
  using ElementAccumulator = float;
  using LayoutA = cutlass::layout::RowMajor;     // M×K, K contiguous
  using LayoutB = cutlass::layout::ColumnMajor;  // K×N with K contiguous = B stored N×K row-major
  using LayoutD = cutlass::layout::RowMajor;     // M×N
  static constexpr int kAlignmentAB = kVectorBytes / sizeof(ElementAB);  // elements per 16 B
  static constexpr int kAlignmentD = kVectorBytes / sizeof(ElementD);

  using TileShape = cute::Shape<cute::Int<TileM>, cute::Int<TileN>, cute::Int<TileK>>;
  using ClusterShape = cute::Shape<cute::Int<ClusterM>, cute::Int<ClusterN>, cute::_1>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementAccumulator,
      void, LayoutD, kAlignmentD,            // no C operand: D = alpha * accumulator
      ElementD, LayoutD, kAlignmentD, typename Mainloop::Epilogue>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      ElementAB, LayoutA, kAlignmentAB, ElementAB, LayoutB, kAlignmentAB, ElementAccumulator,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<
          static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      Schedule>::CollectiveOp;
  static_assert(!PromotesFp8<typename CollectiveMainloop::DispatchPolicy>::value,
                "fp8 on a TMA schedule must take CUTLASS's FP8FastAccum schedule (no promotion), "
                "like the cp.async mainloop: see the top of gemm_sm90.cuh");

  using Kernel = cutlass::gemm::kernel::GemmUniversal<
      cute::Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static const char* info(const char* name) {
    static char json[1024];
    static bool filled = false;
    if (!filled) {
      std::snprintf(json, sizeof(json),
          "{\"name\": \"%s\", \"arch\": \"sm_90a\", \"mainloop\": \"%s\", \"element_ab\": \"%s\", "
          "\"element_d\": \"bf16\", \"element_accumulator\": \"f32\", "
          "\"tile_m\": %d, \"tile_n\": %d, \"tile_k\": %d, \"cluster_m\": %d, \"cluster_n\": %d, "
          "\"mma\": \"1sm\", \"stages\": %d, \"shared_storage_bytes\": %d, \"threads_per_cta\": %d, "
          "\"cutlass_version\": \"%d.%d.%d\", "
          "\"layout\": \"A MxK row-major, B NxK row-major, D MxN row-major: D = A @ B^T\"}",
          name, Mainloop::name, element_name<ElementAB>(), TileM, TileN, TileK, ClusterM, ClusterN,
          int(CollectiveMainloop::DispatchPolicy::Stages), int(Kernel::SharedStorageSize),
          int(Kernel::MaxThreadsPerBlock), CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH);
      filled = true;
    }
    return json;
  }
};

}  // namespace tma_gemm::sm90

// One line per generated translation unit, e.g.
//   TMA_GEMM_SM90(sm90_tma_cooperative_bf16_t128x128x64_c2x1, TmaCooperative, bf16, 128, 128, 64, 2, 1)
#define TMA_GEMM_SM90(NAME, MAINLOOP, ELEMENT, TM, TN, TK, CM, CN)                               \
  using NAME##_variant = tma_gemm::sm90::Variant<tma_gemm::sm90::MAINLOOP, tma_gemm::sm90::ELEMENT, \
                                                 TM, TN, TK, CM, CN>;                           \
  TMA_GEMM_EXPORT(NAME, NAME##_variant::Gemm, NAME##_variant::info)
