"""The ceilings the paged_kv measure step times beside the attention (ceilings.csv): a large
device-to-device copy (the decode bar's rate), a copy moving as many bytes as each decode point
reads of K/V, and torch ``scaled_dot_product_attention`` on a contiguous (unpaged) bf16 KV cache
for every decode shape. Each is a (columns, timing.TimedCase), checked before it is timed."""
from __future__ import annotations

import math

import numpy as np

from tma_study.harness import timing

from .aggregate import SAME_BYTES_COPY, SAME_BYTES_COPY_DIRTY_L2
from .device_data import FILL_THREADS, fill_kernel, fresh_seed
from .problem import timed_problem

SDPA_TOLERANCE = 1e-2               # torch's bf16 SDPA against float64, absolute
COPY_BYTES = 1 << 30


def copy_case(copy_bytes: int = COPY_BYTES, ceiling: str = "d2d_copy", l2_after_flush: str | None = None,
               buffers: dict | None = None):
    """(columns, case): a device-to-device copy of ``copy_bytes`` (it moves twice that: read +
    write). Its buffers are allocated in the first check of the cases sharing ``buffers`` and
    filled afresh in each, right before it is timed; ``l2_after_flush`` overrides the run's L2
    state (harness.l2_state)."""
    from numba import cuda
    state = {} if buffers is None else buffers

    def copy(stream):
        state["destination"].copy_to_device(state["source"], stream=stream)

    def check():
        if not state:
            state["source"] = cuda.device_array(copy_bytes // 4, np.uint32)
            state["destination"] = cuda.device_array_like(state["source"])
        source = state["source"]
        fill = fill_kernel()
        fill[-(-source.size // FILL_THREADS), FILL_THREADS](source, np.uint64(fresh_seed() >> 1),
                                                           np.uint32(0xFFFFFFFF))
        state["destination"].copy_to_device(np.zeros(source.size, np.uint32))
        copy(0)
        cuda.synchronize()
        if not np.array_equal(state["destination"].copy_to_host(), source.copy_to_host()):
            raise timing.CorrectnessError(f"{ceiling} of {copy_bytes} B: destination differs from source")

    return ({"ceiling": ceiling, "bytes_moved": 2 * copy_bytes},
            timing.TimedCase(f"ceiling/{ceiling}/{2 * copy_bytes}", copy, check, bytes_read=copy_bytes,
                             bytes_written=copy_bytes, l2_after_flush=l2_after_flush))


def same_bytes_copy_cases(configs: list):
    """A copy moving as many bytes (read + write) as each decode point reads of K/V, one per
    distinct byte count: what a memory-bound kernel of that size reaches when timed the same
    way (launch and the ramp of a short transfer included). Context only: the bar is against
    the large copy (``d2d_copy``). Each is timed twice: in the run's L2 state, and as
    ``SAME_BYTES_COPY_DIRTY_L2`` after nvbench's flush alone (harness.l2_state: what the
    flush's dirty lines cost a transfer of that size); the two share one pair of buffers."""
    kv_bytes = sorted({timed_problem(c).kv_bytes_read() for c in configs if c.phase.name == "decode"})
    cases = []
    for b in kv_bytes:
        buffers = {}
        cases += [copy_case(b // 2, name, state, buffers)
                  for name, state in ((SAME_BYTES_COPY, None), (SAME_BYTES_COPY_DIRTY_L2, "dirty"))]
    return cases


def sdpa_cases(configs: list):
    """torch SDPA on a contiguous bf16 KV cache for every decode (shape, phase): [(columns, case)].
    Non-causal (torch's causal mask is top-left aligned; decode masks at most 3 of the
    context's keys). Empty when torch is missing."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return []
    seen, cases = set(), []
    for c in configs:
        if c.phase.name != "decode" or (c.shape, c.phase) in seen:
            continue
        seen.add((c.shape, c.phase))
        s, p = c.shape, c.phase
        state = {}

        def make(s=s, p=p, state=state):
            generator = torch.Generator(device="cuda").manual_seed(fresh_seed() >> 1)
            state["q"] = torch.randn(p.batch, s.q_heads, p.seqlen_q, s.head_dim, device="cuda",
                                     dtype=torch.bfloat16, generator=generator)
            state["k"] = torch.randn(p.batch, s.kv_heads, p.context, s.head_dim, device="cuda",
                                     dtype=torch.bfloat16, generator=generator)
            state["v"] = torch.randn_like(state["k"])

        def launch(stream, s=s, state=state):
            with torch.cuda.stream(torch.cuda.ExternalStream(int(stream))):
                state["out"] = F.scaled_dot_product_attention(
                    state["q"], state["k"], state["v"], enable_gqa=s.q_heads != s.kv_heads)

        def check(s=s, p=p, state=state, make=make, launch=launch):
            make()
            launch(0)
            torch.cuda.synchronize()
            b, h = p.batch - 1, s.q_heads - 1
            q = state["q"][b, h].double()
            k = state["k"][b, h // (s.q_heads // s.kv_heads)].double()
            v = state["v"][b, h // (s.q_heads // s.kv_heads)].double()
            expected = torch.softmax(q @ k.T / math.sqrt(s.head_dim), dim=-1) @ v
            error = float((state["out"][b, h].double() - expected).abs().max())
            if error > SDPA_TOLERANCE:
                raise timing.CorrectnessError(f"torch sdpa {s.name} decode q{p.seqlen_q}: error {error:.3g}")

        element_bytes = 2
        kv_bytes = 2 * p.batch * p.context * s.kv_heads * s.head_dim * element_bytes
        columns = {"ceiling": "torch_sdpa_contiguous", "shape": s.name, "q_heads": s.q_heads,
                   "kv_heads": s.kv_heads, "head_dim": s.head_dim, "dtype": "bf16", "phase": "decode",
                   "batch": p.batch, "seqlen_q": p.seqlen_q, "context_tokens": p.context,
                   "bytes_moved": kv_bytes, "torch_version": torch.__version__}
        cases.append((columns, timing.TimedCase(f"ceiling/sdpa/{s.name}/q{p.seqlen_q}/b{p.batch}"
                                                f"/ctx{p.context}", launch, check, bytes_read=kv_bytes)))
    return cases
