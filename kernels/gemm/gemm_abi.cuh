// The C ABI every GEMM variant exports, shared by the SM90 and SM100 templates.
//
// Operation: D = A · Bᵀ (alpha = 1, no C operand), fp32 accumulation.
//   A  M×K row-major  (K contiguous; "K-major")            element: the variant's input type
//   B  N×K row-major  (K contiguous; CUTLASS ColumnMajor K×N, the "TN" layout that 8-bit GMMA needs)
//   D  M×N row-major                                       element: bf16
// All three pointers must be 16-byte aligned and K, N multiples of the 16-byte vector
// (8 bf16 / 16 fp8 elements): TMA and 16-byte cp.async both need it; can_implement says so.
//
// Each variant NAME exports (extern "C", no C++ types cross the boundary):
//   int NAME_can_implement(int64 M, int64 N, int64 K)                         -> status
//   int NAME_workspace_bytes(int64 M, int64 N, int64 K, int64* bytes)        -> status
//   int NAME_run(const void* A, const void* B, void* D, int64 M, int64 N, int64 K,
//                void* workspace, int64 workspace_bytes, void* stream)       -> status
//   int NAME_run_scheduled(..., the same nine arguments, int max_swizzle_size, int raster_order)
//                                                                              -> status
//   const char* NAME_info(void)      a JSON object: the variant's parameters and resources
// Status: cutlass::Status (0 = success, 1..11, cutlass/cutlass.h; the adapter's can_implement
// says kInvalid for any refusal by the kernel) or, when the launch itself
// failed, TMA_GEMM_CUDA_ERROR_BASE + cudaError_t. tma_study/studies/gemm/abi.py maps both.
//
// Tile order (NAME_run_scheduled): the persistent tile scheduler's two runtime arguments,
// args.scheduler.max_swizzle_size (1, 2, 4 or 8: CUTLASS's get_log_swizzle_size in
// cutlass/gemm/kernel/tile_scheduler_params.h takes the largest of them the tile grid allows) and
// args.scheduler.raster_order (0 Heuristic, 1 AlongM, 2 AlongN: RasterOrderOptions,
// cutlass/gemm/kernel/tile_scheduler_detail.hpp). NAME_run leaves both at CUTLASS's defaults (SM90:
// swizzle 1, Heuristic) and is otherwise the same code. The workspace does not depend on them: the
// persistent scheduler's get_workspace_size is 0 whatever its arguments (sm90_tile_scheduler.hpp),
// so NAME_workspace_bytes holds for every tile order; run_scheduled still sizes the workspace with
// its own arguments and answers kErrorWorkspaceNull when the buffer is short.
#pragma once

#ifndef NDEBUG
// Without NDEBUG, CUTLASS keeps device-side assert() calls; ptxas then serialises wgmma
// (warning C7510) and the GEMM loses about 5 % (measured in the project's feasibility probe).
#error "build every GEMM variant with -DNDEBUG (see kernels/gemm/README.md)"
#endif

#include <cstdint>
#include <cstdio>
#include <limits>

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/version.h"
#include "cutlass/util/packed_stride.hpp"

namespace tma_gemm {

constexpr int kCudaErrorBase = 1000;  // status = kCudaErrorBase + cudaError_t
constexpr int kVectorBytes = 16;      // TMA boxes and 16-byte cp.async need 16-byte aligned rows

inline int status_code(cutlass::Status status) { return static_cast<int>(status); }

inline bool fits_int32(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  return m > 0 && n > 0 && k > 0 && m <= kMax && n <= kMax && k <= kMax;
}

inline bool aligned(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % kVectorBytes == 0;
}

// Arguments of a GemmUniversalAdapter `Gemm` for D = A · Bᵀ in the layout documented above.
template <class Gemm>
typename Gemm::Arguments make_arguments(const void* a, const void* b, void* d,
                                        int m, int n, int k, int device_sm_count) {
  using Kernel = typename Gemm::GemmKernel;
  using ElementA = typename Kernel::ElementA;
  using ElementB = typename Kernel::ElementB;
  using ElementD = typename Kernel::ElementD;
  auto stride_a = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, {m, k, 1});
  auto stride_b = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, {n, k, 1});
  auto stride_c = cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, {m, n, 1});
  auto stride_d = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, {m, n, 1});
  cutlass::KernelHardwareInfo hw_info;
  hw_info.device_id = 0;
  hw_info.sm_count = device_sm_count;
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {m, n, k, 1},
      {static_cast<const ElementA*>(a), stride_a, static_cast<const ElementB*>(b), stride_b},
      {{1.0f, 0.0f}, nullptr, stride_c, static_cast<ElementD*>(d), stride_d},
      hw_info};
  return args;
}

// SM count of the current device, read once per process (the persistent tile scheduler's
// grid size); -1 when no device is visible (can_implement and workspace_bytes still work).
inline int current_sm_count() {
  static int cached = [] {
    int device = 0, count = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky error of a machine without a GPU
      return -1;
    }
    return count;
  }();
  return cached;
}

// Problem-size checks need no GPU: pass a nominal SM count when none is visible.
constexpr int kNominalSmCount = 132;
inline int sm_count_or_nominal() {
  int count = current_sm_count();
  return count > 0 ? count : kNominalSmCount;
}

// Rows of A and B (K elements) and of D (N elements) must be whole 16-byte vectors. Checked
// here so the caller hears "misaligned": CUTLASS's adapter reports any refusal as kInvalid.
template <class Gemm>
bool extents_aligned(int64_t n, int64_t k) {
  using Kernel = typename Gemm::GemmKernel;
  return (k * int64_t(sizeof(typename Kernel::ElementA))) % kVectorBytes == 0 &&
         (n * int64_t(sizeof(typename Kernel::ElementD))) % kVectorBytes == 0;
}

template <class Gemm>
int can_implement(int64_t m, int64_t n, int64_t k) {
  if (!fits_int32(m, n, k)) return status_code(cutlass::Status::kErrorInvalidProblem);
  if (!extents_aligned<Gemm>(n, k)) return status_code(cutlass::Status::kErrorMisalignedOperand);
  // Null pointers are fine here: CUTLASS checks sizes and alignment of the extents only.
  auto args = make_arguments<Gemm>(nullptr, nullptr, nullptr, int(m), int(n), int(k),
                                   sm_count_or_nominal());
  return status_code(Gemm::can_implement(args));
}

template <class Gemm>
int workspace_bytes(int64_t m, int64_t n, int64_t k, int64_t* bytes) {
  if (bytes == nullptr) return status_code(cutlass::Status::kErrorInvalidProblem);
  *bytes = 0;
  if (!fits_int32(m, n, k)) return status_code(cutlass::Status::kErrorInvalidProblem);
  auto args = make_arguments<Gemm>(nullptr, nullptr, nullptr, int(m), int(n), int(k),
                                   sm_count_or_nominal());
  *bytes = static_cast<int64_t>(Gemm::get_workspace_size(args));
  return status_code(cutlass::Status::kSuccess);
}

// A tile order for the persistent tile scheduler (see the top of this file).
struct TileOrder {
  int max_swizzle_size;  // 1, 2, 4 or 8
  int raster_order;      // RasterOrderOptions: 0 Heuristic, 1 AlongM, 2 AlongN
};

inline bool valid_tile_order(const TileOrder& order) {
  int s = order.max_swizzle_size;
  return (s == 1 || s == 2 || s == 4 || s == 8) && order.raster_order >= 0 && order.raster_order <= 2;
}

// Sets args.scheduler's tile order; the ABI's raster codes are the enum's values, checked here.
template <class Arguments>
void set_tile_order(Arguments& args, const TileOrder& order) {
  using Raster = decltype(args.scheduler.raster_order);
  static_assert(int(Raster::Heuristic) == 0 && int(Raster::AlongM) == 1 && int(Raster::AlongN) == 2,
                "the ABI's raster_order codes must be RasterOrderOptions' values");
  args.scheduler.max_swizzle_size = order.max_swizzle_size;
  args.scheduler.raster_order = static_cast<Raster>(order.raster_order);
}

// D = A · Bᵀ on `stream`; `order` null: the scheduler's defaults (NAME_run), else that tile order.
template <class Gemm>
int run(const void* a, const void* b, void* d, int64_t m, int64_t n, int64_t k,
        void* workspace, int64_t workspace_size, void* stream, const TileOrder* order = nullptr) {
  if (!fits_int32(m, n, k)) return status_code(cutlass::Status::kErrorInvalidProblem);
  if (order != nullptr && !valid_tile_order(*order)) {
    return status_code(cutlass::Status::kErrorInvalidProblem);
  }
  if (!aligned(a) || !aligned(b) || !aligned(d) || !extents_aligned<Gemm>(n, k)) {
    return status_code(cutlass::Status::kErrorMisalignedOperand);
  }
  int sm_count = current_sm_count();
  if (sm_count <= 0) return kCudaErrorBase + static_cast<int>(cudaErrorNoDevice);
  auto args = make_arguments<Gemm>(a, b, d, int(m), int(n), int(k), sm_count);
  if (order != nullptr) set_tile_order(args, *order);
  size_t needed = Gemm::get_workspace_size(args);
  if (needed > 0 && (workspace == nullptr || workspace_size < static_cast<int64_t>(needed))) {
    return status_code(cutlass::Status::kErrorWorkspaceNull);
  }
  cutlass::Status status = Gemm::can_implement(args);
  if (status != cutlass::Status::kSuccess) return status_code(status);
  Gemm gemm;
  status = gemm.run(args, workspace, static_cast<cudaStream_t>(stream));
  cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) return kCudaErrorBase + static_cast<int>(launch);
  return status_code(status);
}

}  // namespace tma_gemm

// Emits the five extern "C" functions of one variant. INFO_JSON is a function returning the
// variant's description (built once, on first call).
#define TMA_GEMM_EXPORT(NAME, GEMM, INFO_JSON)                                                   \
  extern "C" int NAME##_can_implement(int64_t m, int64_t n, int64_t k) {                         \
    return tma_gemm::can_implement<GEMM>(m, n, k);                                               \
  }                                                                                              \
  extern "C" int NAME##_workspace_bytes(int64_t m, int64_t n, int64_t k, int64_t* bytes) {       \
    return tma_gemm::workspace_bytes<GEMM>(m, n, k, bytes);                                      \
  }                                                                                              \
  extern "C" int NAME##_run(const void* a, const void* b, void* d, int64_t m, int64_t n,         \
                            int64_t k, void* workspace, int64_t workspace_size, void* stream) {  \
    return tma_gemm::run<GEMM>(a, b, d, m, n, k, workspace, workspace_size, stream);             \
  }                                                                                              \
  extern "C" int NAME##_run_scheduled(const void* a, const void* b, void* d, int64_t m,          \
                                      int64_t n, int64_t k, void* workspace,                     \
                                      int64_t workspace_size, void* stream,                      \
                                      int max_swizzle_size, int raster_order) {                  \
    const tma_gemm::TileOrder order{max_swizzle_size, raster_order};                             \
    return tma_gemm::run<GEMM>(a, b, d, m, n, k, workspace, workspace_size, stream, &order);     \
  }                                                                                              \
  extern "C" const char* NAME##_info(void) { return INFO_JSON(#NAME); }
