// SM100 (Blackwell B200, sm_100a) GEMM template: the SM90 questions asked of a UMMA (tcgen05) GEMM.
//
// D (M×N, bf16) = A (M×K) · Bᵀ (B is N×K), fp32 accumulation in tensor memory; layouts in
// gemm_abi.cuh. A variant fixes only what the gemm study compares:
//   Mainloop
//     Tma1Sm       TMA loads, one SM issues each UMMA (tile M = 128 per CTA)
//     Tma2Sm       TMA loads, a pair of SMs (cluster M even) issues each UMMA over a 2×128-row tile;
//                  each CTA loads half of B, so the pair shares B without multicast
//     CpAsync1Sm   cp.async 16 B per thread (4 producer warps); CUTLASS offers it for 1-SM UMMA and
//                  1×1 clusters only ("Lower alignment kernel only supports 1x1x1 cluster shape")
//     Mixed1Sm     A through TMA, B through cp.async (CUTLASS's mixed TMA/cp.async mainloop), 1×1
//   Element   bf16 or fp8 e4m3 inputs (output bf16)
//   Tile      the MMA tile M×N×K (for Tma2Sm M is the pair's 256 rows; each CTA holds 128)
//   Cluster   CTAs per cluster along M and N; with TMA, A is multicast along N and B along M
// Shared by every variant: CUTLASS's default SM100 tile scheduler (CLC-based, persistent),
// the TMA warp-specialized epilogue without a C operand, pipeline depth from the shared memory
// left after the epilogue.
#pragma once

#include "gemm_abi.cuh"

#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

namespace tma_gemm::sm100 {

using bf16 = cutlass::bfloat16_t;
using fp8_e4m3 = cutlass::float_e4m3_t;

struct Tma1Sm {
  static constexpr const char* name = "tma_1sm";
  static constexpr const char* mma = "1sm";
  using Kernel = cutlass::gemm::KernelTmaWarpSpecialized1SmSm100;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized1Sm;
};
struct Tma2Sm {
  static constexpr const char* name = "tma_2sm";
  static constexpr const char* mma = "2sm";
  using Kernel = cutlass::gemm::KernelTmaWarpSpecialized2SmSm100;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized2Sm;
};
struct CpAsync1Sm {
  static constexpr const char* name = "cpasync_1sm";
  static constexpr const char* mma = "1sm";
  using Kernel = cutlass::gemm::KernelWarpSpecialized1SmSm100;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized1Sm;
};
struct Mixed1Sm {
  static constexpr const char* name = "mixed_1sm";
  static constexpr const char* mma = "1sm";
  using Kernel = cutlass::gemm::KernelMixedTmaCpAsyncWarpSpecialized1SmSm100;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized1Sm;
};

template <class Element> constexpr const char* element_name();
template <> constexpr const char* element_name<bf16>() { return "bf16"; }
template <> constexpr const char* element_name<fp8_e4m3>() { return "fp8_e4m3"; }

template <class Mainloop, class ElementAB, int TileM, int TileN, int TileK, int ClusterM, int ClusterN>
struct Variant {
  using ElementD = bf16;
  using ElementAccumulator = float;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignmentAB = kVectorBytes / sizeof(ElementAB);
  static constexpr int kAlignmentD = kVectorBytes / sizeof(ElementD);

  using MmaTileShape = cute::Shape<cute::Int<TileM>, cute::Int<TileN>, cute::Int<TileK>>;
  using ClusterShape = cute::Shape<cute::Int<ClusterM>, cute::Int<ClusterN>, cute::_1>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm100, cutlass::arch::OpClassTensorOp, MmaTileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementAccumulator,
      void, LayoutD, kAlignmentD,
      ElementD, LayoutD, kAlignmentD, typename Mainloop::Epilogue>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm100, cutlass::arch::OpClassTensorOp,
      ElementAB, LayoutA, kAlignmentAB, ElementAB, LayoutB, kAlignmentAB, ElementAccumulator,
      MmaTileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<
          static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Mainloop::Kernel>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<
      cute::Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static const char* info(const char* name) {
    static char json[1024];
    static bool filled = false;
    if (!filled) {
      std::snprintf(json, sizeof(json),
          "{\"name\": \"%s\", \"arch\": \"sm_100a\", \"mainloop\": \"%s\", \"element_ab\": \"%s\", "
          "\"element_d\": \"bf16\", \"element_accumulator\": \"f32\", "
          "\"tile_m\": %d, \"tile_n\": %d, \"tile_k\": %d, \"cluster_m\": %d, \"cluster_n\": %d, "
          "\"mma\": \"%s\", \"stages\": %d, \"shared_storage_bytes\": %d, \"threads_per_cta\": %d, "
          "\"cutlass_version\": \"%d.%d.%d\", "
          "\"layout\": \"A MxK row-major, B NxK row-major, D MxN row-major: D = A @ B^T\"}",
          name, Mainloop::name, element_name<ElementAB>(), TileM, TileN, TileK, ClusterM, ClusterN,
          Mainloop::mma, int(CollectiveMainloop::DispatchPolicy::Stages),
          int(Kernel::SharedStorageSize), int(Kernel::MaxThreadsPerBlock),
          CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH);
      filled = true;
    }
    return json;
  }
};

}  // namespace tma_gemm::sm100

#define TMA_GEMM_SM100(NAME, MAINLOOP, ELEMENT, TM, TN, TK, CM, CN)                              \
  using NAME##_variant = tma_gemm::sm100::Variant<tma_gemm::sm100::MAINLOOP,                     \
                                                  tma_gemm::sm100::ELEMENT, TM, TN, TK, CM, CN>; \
  TMA_GEMM_EXPORT(NAME, NAME##_variant::Gemm, NAME##_variant::info)
