"""Triton kernels of the heldout study, in pairs that differ only in how one operand is loaded.

Each file holds two kernels of one workload: ``*_tma`` loads the operand through a TMA tensor
descriptor (``desc.load``: ``cp.async.bulk.tensor``, UTMALDG in SASS); ``*_pointer`` loads the
same tile through pointers, which Triton's software pipeliner turns into cp.async (LDGSTS) or
leaves as plain loads (LDG): the study records which, from each compiled kernel's SASS. Tiles,
stages, warps, the consumer and every other operand's loads are the same in both.

- ``gemm.py``: C = A @ B^T (A: M x K, B: N x K, both K-major), bf16 or fp8 e4m3, fp32 accumulation;
  the operand: the A and B tiles.
- ``attention.py``: attention forward over dense K and V (FlashAttention's online softmax), causal
  or not; the operand: the K and V tiles.
- ``paged_decode.py``: one query token per sequence against a paged K/V cache (pages of one KV
  head are rows strided by the heads), grouped query heads; the operand: the K and V pages.
- ``gather.py``: rows of a table gathered by an index (an embedding lookup, a MoE token gather);
  the operand: the gathered rows.

Triton 3.6 (the H200 image's); imported only by the heldout study's measure step.
"""
