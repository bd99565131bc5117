"""Call the GEMM variants of build/gemm/libgemm_<arch>.so through their C ABI (ctypes).

The ABI (kernels/gemm/gemm_abi.cuh) computes D = A · Bᵀ with A M×K row-major, B N×K
row-major (K contiguous in both: CUTLASS's "TN" layout) and D M×N row-major bf16. Pointers
are raw device addresses (e.g. ``tensor.data_ptr()``), the stream a raw ``CUstream`` handle
(``int(numba_stream)``, ``torch.cuda.Stream.cuda_stream``, 0 for the default stream).

Every call returns a status; anything but success raises :class:`GemmStatusError` naming the
variant, the call, the problem size and what the status means.

``run_scheduled`` is ``run`` with a chosen tile order of the persistent tile scheduler (CUTLASS's
``max_swizzle_size`` and ``raster_order``, RASTER_ORDERS); ``run`` keeps CUTLASS's defaults
(swizzle 1, heuristic raster order). The workspace does not depend on the tile order.
"""
from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass
from pathlib import Path

CUDA_ERROR_BASE = 1000     # kernels/gemm/gemm_abi.cuh: status = 1000 + cudaError_t
# cutlass::Status (cutlass/cutlass.h), in enum order
CUTLASS_STATUS = (
    ("kSuccess", "success"),
    ("kErrorMisalignedOperand", ("an operand is misaligned: pointers must be 16-byte aligned and K "
                                 "(and N for D) a multiple of 16 bytes of elements")),
    ("kErrorInvalidDataType", "the data type is not supported"),
    ("kErrorInvalidLayout", "the layout is not supported"),
    ("kErrorInvalidProblem", "the problem size is not supported (M, N, K must be positive and below 2^31)"),
    ("kErrorNotSupported", "the operation is not supported on this device"),
    ("kErrorWorkspaceNull", "the workspace is missing or smaller than workspace_bytes() says"),
    ("kErrorInternal", "CUTLASS internal error (e.g. the kernel's shared-memory attribute could not be set)"),
    ("kErrorArchMismatch", "the kernel was compiled for another GPU architecture"),
    ("kErrorInsufficientDriver", "the CUDA driver is too old"),
    ("kErrorMemoryAllocation", "device memory allocation failed"),
    ("kInvalid", ("the kernel refused the problem (CUTLASS's adapter reports every can_implement refusal "
                  "of the kernel as kInvalid: a size or alignment this variant cannot handle)")),
)
# the cudaError_t values a launch most often returns (others are reported by number)
CUDA_ERRORS = {1: "cudaErrorInvalidValue", 2: "cudaErrorMemoryAllocation", 100: "cudaErrorNoDevice",
               98: "cudaErrorInvalidDeviceFunction", 209: "cudaErrorNoKernelImageForDevice",
               400: "cudaErrorInvalidResourceHandle", 700: "cudaErrorIllegalAddress",
               701: "cudaErrorLaunchOutOfResources", 719: "cudaErrorLaunchFailure"}


class GemmStatusError(RuntimeError):
    """A variant refused or failed a call; ``status`` is the raw code."""

    def __init__(self, variant: str, call: str, status: int, problem: tuple[int, int, int] | None):
        self.variant, self.call, self.status, self.problem = variant, call, status, problem
        shape = f" for M, N, K = {problem}" if problem else ""
        super().__init__(f"GEMM variant {variant}: {call}{shape} returned status {status} "
                         f"({describe_status(status)})")


def describe_status(status: int) -> str:
    """A readable meaning of a status code of the ABI."""
    if 0 <= status < len(CUTLASS_STATUS):
        name, meaning = CUTLASS_STATUS[status]
        return f"cutlass::Status::{name}: {meaning}"
    if status > CUDA_ERROR_BASE:
        code = status - CUDA_ERROR_BASE
        name = CUDA_ERRORS.get(code, "cudaError_t")
        return f"CUDA launch error {code} ({name})"
    return "unknown status (not a cutlass::Status and not a CUDA error)"


def check_status(status: int, variant: str, call: str, problem=None) -> None:
    if status != 0:
        raise GemmStatusError(variant, call, status, problem)


_INT64 = ctypes.c_int64
_PTR = ctypes.c_void_p
# The ABI's raster_order codes: cutlass::gemm::kernel::detail::RasterOrderOptions, in enum order
# (the C++ side static_asserts the values). Swizzles: the max_swizzle_size values CUTLASS's
# get_log_swizzle_size distinguishes.
RASTER_ORDERS = {"heuristic": 0, "along_m": 1, "along_n": 2}
SWIZZLES = (1, 2, 4, 8)


@dataclass
class GemmVariant:
    """One variant's five exported functions."""

    name: str
    library: ctypes.CDLL

    def __post_init__(self):
        lib, name = self.library, self.name
        try:
            self._can = getattr(lib, f"{name}_can_implement")
            self._workspace = getattr(lib, f"{name}_workspace_bytes")
            self._run = getattr(lib, f"{name}_run")
            self._run_scheduled = getattr(lib, f"{name}_run_scheduled")
            self._info = getattr(lib, f"{name}_info")
        except AttributeError:
            raise KeyError(f"GEMM variant {name!r} is not in {lib._name}; rebuild it "
                           "(snakemake -c16 build/compile/gemm/resources.csv) or check the variant list in the config") from None
        self._can.argtypes, self._can.restype = [_INT64] * 3, ctypes.c_int
        self._workspace.argtypes = [_INT64] * 3 + [ctypes.POINTER(_INT64)]
        self._workspace.restype = ctypes.c_int
        self._run.argtypes = [_PTR, _PTR, _PTR, _INT64, _INT64, _INT64, _PTR, _INT64, _PTR]
        self._run.restype = ctypes.c_int
        self._run_scheduled.argtypes = self._run.argtypes + [ctypes.c_int, ctypes.c_int]
        self._run_scheduled.restype = ctypes.c_int
        self._info.argtypes, self._info.restype = [], ctypes.c_char_p

    def info(self) -> dict:
        """The parameters and resources the variant was compiled with (stages, shared memory, ...)."""
        return json.loads(self._info().decode())

    def can_implement(self, m: int, n: int, k: int) -> bool:
        return self._can(m, n, k) == 0

    def require(self, m: int, n: int, k: int) -> None:
        """Raise GemmStatusError when the variant cannot compute an M×N×K problem."""
        check_status(self._can(m, n, k), self.name, "can_implement", (m, n, k))

    def workspace_bytes(self, m: int, n: int, k: int) -> int:
        out = _INT64(0)
        check_status(self._workspace(m, n, k, ctypes.byref(out)), self.name, "workspace_bytes", (m, n, k))
        return out.value

    def run(self, a: int, b: int, d: int, m: int, n: int, k: int, workspace: int = 0,
            workspace_size: int = 0, stream: int = 0) -> None:
        """Enqueue D = A · Bᵀ on ``stream`` (raw device pointers and CUstream handle)."""
        status = self._run(a, b, d, m, n, k, workspace or None, workspace_size, stream or None)
        check_status(status, self.name, "run", (m, n, k))

    def run_scheduled(self, a: int, b: int, d: int, m: int, n: int, k: int, workspace: int = 0,
                      workspace_size: int = 0, stream: int = 0, max_swizzle_size: int = 1,
                      raster_order: str | int = "heuristic") -> None:
        """``run`` with the tile scheduler's ``max_swizzle_size`` (SWIZZLES) and ``raster_order``
        (a key of RASTER_ORDERS or its code); ValueError for a value the ABI does not take."""
        code = RASTER_ORDERS.get(raster_order, raster_order) if isinstance(raster_order, str) else int(raster_order)
        if max_swizzle_size not in SWIZZLES or code not in RASTER_ORDERS.values():
            raise ValueError(f"GEMM variant {self.name}: tile order max_swizzle_size={max_swizzle_size!r}, "
                             f"raster_order={raster_order!r}; allowed: swizzle in {SWIZZLES}, raster order in "
                             f"{sorted(RASTER_ORDERS)} (or codes {sorted(RASTER_ORDERS.values())})")
        status = self._run_scheduled(a, b, d, m, n, k, workspace or None, workspace_size, stream or None,
                                     int(max_swizzle_size), code)
        check_status(status, self.name, f"run_scheduled(swizzle {max_swizzle_size}, raster {raster_order})",
                     (m, n, k))


class GemmLibrary:
    """libgemm_<arch>.so, loaded once; variants looked up by name."""

    def __init__(self, path: Path):
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: build the GEMM variants first "
                                    "(snakemake -c16 build/compile/gemm/resources.csv)")
        self.path = path
        self.library = ctypes.CDLL(str(path.resolve()))
        self._variants: dict[str, GemmVariant] = {}

    def variant(self, name: str) -> GemmVariant:
        if name not in self._variants:
            self._variants[name] = GemmVariant(name, self.library)
        return self._variants[name]
