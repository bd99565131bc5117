"""The GEMM problem every gemm study times and checks: A, B and D on the device with fresh random
inputs, torch's cuBLAS GEMM as the anchor (fp8: fast accumulation, as the CUTLASS variants), and
the correctness check of sampled outputs against float64 dot products.

Imported only on the measure path (PyTorch and a GPU).
"""
from __future__ import annotations

from tma_study import gpu as gpu_mod
from tma_study.harness import timing
from tma_study.harness.gpu_lock import pinned_device

from . import shapes as shapes_mod

# The fp8 anchor accumulates as the CUTLASS variants do: torch._scaled_mm(use_fast_accum=True)
# sets cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM ("intermediate results will not periodically
# be promoted to a higher precision"), the arithmetic of every fp8 variant built here (CUTLASS's
# FP8FastAccum and cp.async mainloops: variants.ACCUMULATION). With False, cuBLAS would add the
# promotion's extra registers and additions, and the fp8 fraction of cuBLAS would compare two
# kinds of accumulation (docs/history.md: data measured before this constant used False).
CUBLAS_FP8_FAST_ACCUM = True


def _torch():
    try:
        import torch
    except ImportError:
        raise gpu_mod.GpuRequirementError(
            "the gemm study needs PyTorch for its cuBLAS anchor and buffers (pip install torch, a "
            "CUDA 13 build such as torch 2.11+cu130)") from None
    return torch


class Problem:
    """Device buffers of one (shape, dtype): A, B, D, workspace; fresh random data on demand."""

    def __init__(self, torch, shape: shapes_mod.Shape, dtype: str, workspace_bytes: int):
        self.torch, self.shape, self.dtype = torch, shape, dtype
        element = torch.bfloat16 if dtype == "bf16" else torch.float8_e4m3fn
        device = "cuda"
        self.a = torch.empty(shape.m, shape.k, dtype=element, device=device)
        self.b = torch.empty(shape.n, shape.k, dtype=element, device=device)   # N x K: D = A . B^T
        self.d = torch.empty(shape.m, shape.n, dtype=torch.bfloat16, device=device)
        self.workspace = torch.empty(max(workspace_bytes, 1), dtype=torch.uint8, device=device)
        self.unit_scale = torch.ones((), dtype=torch.float32, device=device)
        self.refill()

    def refill(self) -> None:
        """New uniform [-1, 1) inputs (rounded to the input type) and D poisoned with NaN."""
        for tensor in (self.a, self.b):
            tensor.copy_(self.torch.rand(tensor.shape, device="cuda") * 2 - 1)
        self.d.fill_(float("nan"))

    def cublas(self):
        """torch's cuBLAS GEMM on the current stream; returns D."""
        torch = self.torch
        if self.dtype == "bf16":
            return torch.matmul(self.a, self.b.t(), out=self.d)
        return torch._scaled_mm(self.a, self.b.t(), scale_a=self.unit_scale, scale_b=self.unit_scale,
                                out_dtype=torch.bfloat16, use_fast_accum=CUBLAS_FP8_FAST_ACCUM)

    def release(self) -> None:
        del self.a, self.b, self.d, self.workspace


def _gather_rows(torch, matrix, rows):
    """matrix[rows] in float64; gathered as raw bytes, so fp8 needs no fp8 indexing kernel."""
    raw = matrix.view(torch.uint8) if matrix.element_size() == 1 else matrix.view(torch.int16)
    return raw[rows].view(matrix.dtype).to(torch.float64)


def check_sampled(torch, a, b, d, correctness: dict, name: str) -> dict:
    """Compare sampled D entries with float64 dot products; CorrectnessError on a mismatch."""
    m, n = d.shape
    samples = correctness["samples"]
    gen = torch.Generator(device="cuda")
    gen.seed()
    rows = torch.randint(0, m, (samples,), device="cuda", generator=gen)
    cols = torch.randint(0, n, (samples,), device="cuda", generator=gen)
    products = _gather_rows(torch, a, rows) * _gather_rows(torch, b, cols)     # samples x K, float64
    reference = products.sum(dim=1)
    magnitude = products.abs().sum(dim=1)
    got = d[rows, cols].to(torch.float64)
    bound = correctness["rtol_output"] * reference.abs() + correctness["rtol_accumulate"] * magnitude
    error = (got - reference).abs()
    nan_count = int(torch.isnan(d).sum())
    bad = int((~(error <= bound)).sum())
    if nan_count or bad:
        worst = int(torch.argmax(error - bound))
        raise timing.CorrectnessError(
            f"{name}: {nan_count} NaN left in D (poisoned before the run), {bad}/{samples} sampled outputs "
            f"outside tolerance; worst D[{int(rows[worst])}, {int(cols[worst])}] = {float(got[worst]):.6g}, "
            f"float64 reference {float(reference[worst]):.6g}, bound {float(bound[worst]):.3g}")
    return {"max_error_over_bound": float((error / bound).max())}


def _pci_bus_id(gpu) -> str | None:
    """The PCI bus id of the GPU this process uses, for NVML (which ignores CUDA_VISIBLE_DEVICES)."""
    return (pinned_device() or {}).get("pci_bus_id") or gpu.pci_bus_id


def _check(torch, problem, name: str, run, correctness: dict) -> dict:
    """One correctness check of ``run`` (enqueues D = A . B^T on the default stream; returns D, or
    None when it wrote problem.d) on fresh data."""
    problem.refill()
    d = run()
    torch.cuda.synchronize()
    return check_sampled(torch, problem.a, problem.b, problem.d if d is None else d, correctness, name)
