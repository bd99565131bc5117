"""The advisor scored on what it was not built from.

The advisor reads only the microbenchmark studies (crossover, multicast, dsm). It is scored on:

- ``leave_one_study_out``: the paged_kv and gemm studies' measured winners (TMA against
  cp.async, each at its best configuration), described as operands by ``loso.py``;
- ``heldout``: the Triton kernels of the heldout study, measured after the advisor was frozen;
- ``catalog``: FlashAttention-3's, FlashInfer's and CUTLASS's own choices (``catalog.py``).

Each set's cases share one table (``cases.py``); ``scores.py`` scores the advisor and the
trivial baselines on it with bootstrap intervals; ``run.py`` writes the tables the claims,
figures and paper read (``results/<label>/advisor/derived/``).
"""
