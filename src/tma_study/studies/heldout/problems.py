"""Inputs, launches and correctness checks of the heldout study's cases (GPU; PyTorch).

``Problem(case, torch)`` allocates the case's tensors once; ``launch(variant)`` enqueues that
variant's kernel on the current stream; ``check(variant)`` refills the inputs with fresh random
values, poisons the output, runs the variant and compares with a reference computed by PyTorch
in float32 (float64 where cheap; sampled heads for attention): a mismatch raises.
"""
from __future__ import annotations

import math
import zlib

import numpy as np

TOLERANCE = {"gemm": 2e-2, "attention": 2e-2, "paged_decode": 2e-2, "gather": 0.0}   # of the reference's max
ATTENTION_HEADS_CHECKED = 2
LOG2E = 1.4426950408889634


class CorrectnessError(AssertionError):
    """A heldout kernel computed the wrong result: nothing is recorded."""


def _dtype(torch, name):
    return {"bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}[name]


class Problem:
    def __init__(self, case, torch, compiled: dict):
        self.case, self.torch, self.compiled, p = case, torch, compiled, case.params
        self.generator = torch.Generator(device="cuda").manual_seed(zlib.crc32(case.key.encode()))
        getattr(self, f"_allocate_{case.family}")(p)

    # ------------------------------------------------------------------ inputs
    def _random(self, shape, dtype, scale=1.0):
        t = self.torch
        x = t.randn(*shape, generator=self.generator, device="cuda", dtype=t.float32) * scale
        return x.to(_dtype(t, dtype))

    def _allocate_gemm(self, p):
        self.a = self._random((p["m"], p["k"]), p["dtype"])
        self.b = self._random((p["n"], p["k"]), p["dtype"])
        self.out = self.torch.empty((p["m"], p["n"]), dtype=self.torch.bfloat16, device="cuda")

    def _allocate_attention(self, p):
        rows = p["batch"] * p["heads"] * p["tokens"]
        self.q, self.k, self.v = (self._random((rows, p["head_dim"]), "bf16", 0.5) for _ in range(3))
        self.out = self.torch.empty_like(self.q)
        self.scale = LOG2E / math.sqrt(p["head_dim"])

    def _allocate_paged_decode(self, p):
        t = self.torch
        per_sequence = p["context_tokens"] // p["page_size"]
        pages = p["sequences"] * per_sequence
        width = p["kv_heads"] * p["head_dim"]
        self.q = self._random((p["sequences"] * p["q_heads"], p["head_dim"]), "bf16")
        self.k_cache = self._random((pages * p["page_size"], width), p["dtype"])
        self.v_cache = self._random((pages * p["page_size"], width), p["dtype"])
        order = t.randperm(pages, generator=self.generator, device="cuda").to(t.int32)
        self.table = order.reshape(p["sequences"], per_sequence).contiguous()
        self.out = t.empty_like(self.q)
        self.scale = LOG2E / math.sqrt(p["head_dim"])

    def _allocate_gather(self, p):
        t = self.torch
        self.table = self._random((p["table_rows"], p["row_elements"]), "bf16")
        self.index = t.randint(0, p["table_rows"], (p["rows"],), generator=self.generator, device="cuda",
                               dtype=t.int32)
        self.out = t.empty((p["rows"], p["row_elements"]), dtype=t.bfloat16, device="cuda")

    def refill(self):
        getattr(self, f"_allocate_{self.case.family}")(self.case.params)

    # ------------------------------------------------------------------ launches
    def _descriptor(self, tensor, block):
        from triton.tools.tensor_descriptor import TensorDescriptor
        return TensorDescriptor(tensor, list(tensor.shape), list(tensor.stride()), list(block))

    def arguments(self, variant: str) -> tuple[tuple, tuple]:
        """(the kernel's arguments in signature order, constexprs included; the grid)."""
        p, build = self.case.params, self.compiled[variant][0]
        if self.case.family == "gemm":
            a, b = ((self._descriptor(self.a, (p["block_m"], p["block_k"])),
                     self._descriptor(self.b, (p["block_n"], p["block_k"]))) if variant == "tma" else (self.a, self.b))
            args = (a, b, self.out, p["m"], p["n"], p["k"])
            grid = ((p["m"] // p["block_m"]) * (p["n"] // p["block_n"]), 1, 1)
        elif self.case.family == "attention":
            block = (p["block_n"], p["head_dim"])
            k, v = ((self._descriptor(self.k, block), self._descriptor(self.v, block)) if variant == "tma"
                    else (self.k, self.v))
            args = (self.q, k, v, self.out, p["tokens"], self.scale)
            grid = (p["tokens"] // p["block_m"], p["batch"] * p["heads"], 1)
        elif self.case.family == "paged_decode":
            block = (p["page_size"], p["head_dim"])
            k, v = ((self._descriptor(self.k_cache, block), self._descriptor(self.v_cache, block))
                    if variant == "tma" else (self.k_cache, self.v_cache))
            args = (self.q, k, v, self.table, self.out, self.scale, p["context_tokens"] // p["page_size"])
            grid = (p["sequences"], p["kv_heads"], 1)
        else:
            table = self._descriptor(self.table, (1, p["row_elements"])) if variant == "tma" else self.table
            args = (table, self.index, self.out)
            grid = (p["rows"] // p["rows_per_cta"], 1, 1)
        self._check_divisible(build, args)
        return (*args, *build.constants.values()), grid

    def _check_divisible(self, build, args):
        for name, value in zip(build.signature, args):
            if name not in build.divisible:
                continue
            number = value.data_ptr() if hasattr(value, "data_ptr") else int(value)
            if number % 16:
                raise ValueError(f"{self.case.key}: argument {name} ({number}) is not divisible by 16, as its "
                                 "kernel was compiled to assume")

    def launcher(self, variant: str):
        """A function enqueuing one launch of ``variant`` on the current stream."""
        args, grid = self.arguments(variant)
        kernel = self.compiled[variant][1][grid]
        torch = self.torch
        return lambda: kernel(*args, stream=torch.cuda.current_stream().cuda_stream)

    # ------------------------------------------------------------------ checks
    def check(self, variant: str) -> float:
        """Fresh inputs, a poisoned output, one launch: the error over the reference's largest value."""
        self.refill()
        self.out.fill_(float("nan"))
        self.launcher(variant)()
        self.torch.cuda.synchronize()
        got, want = getattr(self, f"_reference_{self.case.family}")()
        if not bool(self.torch.isfinite(got).all()):
            raise CorrectnessError(f"{self.case.key}/{variant}: the output holds NaN or Inf (unwritten elements)")
        scale = float(want.abs().max()) or 1.0
        error = float((got - want).abs().max()) / scale
        if error > TOLERANCE[self.case.family]:
            raise CorrectnessError(f"{self.case.key}/{variant}: max error {error:.3g} of the reference's largest "
                                   f"value, allowed {TOLERANCE[self.case.family]}")
        return error

    def _reference_gemm(self):
        want = self.a.float() @ self.b.float().T
        return self.out.float(), want

    def _reference_attention(self):
        t, p = self.torch, self.case.params
        heads = p["batch"] * p["heads"]
        picked = np.linspace(0, heads - 1, ATTENTION_HEADS_CHECKED).round().astype(int)
        got, want = [], []
        for head in picked:
            rows = slice(int(head) * p["tokens"], (int(head) + 1) * p["tokens"])
            q, k, v = (x[rows].double() for x in (self.q, self.k, self.v))
            scores = (q @ k.T) / math.sqrt(p["head_dim"])
            if p["causal"]:
                scores = scores.masked_fill(t.ones_like(scores, dtype=t.bool).triu(1), float("-inf"))
            want.append(t.softmax(scores, dim=-1) @ v)
            got.append(self.out[rows].double())
        return t.cat(got), t.cat(want)

    def _reference_paged_decode(self):
        t, p = self.torch, self.case.params
        d, group = p["head_dim"], p["q_heads"] // p["kv_heads"]
        page_rows = (self.table.long()[:, :, None] * p["page_size"]
                     + t.arange(p["page_size"], device="cuda")).reshape(p["sequences"], -1)
        k = self.k_cache.float()[page_rows].reshape(p["sequences"], -1, p["kv_heads"], d)
        v = self.v_cache.float()[page_rows].reshape(p["sequences"], -1, p["kv_heads"], d)
        q = self.q.float().reshape(p["sequences"], p["kv_heads"], group, d)
        scores = t.einsum("shgd,sthd->shgt", q, k) / math.sqrt(d)
        want = t.einsum("shgt,sthd->shgd", t.softmax(scores, dim=-1), v).reshape(-1, d)
        return self.out.float(), want

    def _reference_gather(self):
        return self.out.float(), self.table[self.index.long()].float()
