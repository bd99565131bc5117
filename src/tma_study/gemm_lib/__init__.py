"""The GEMM library the gemm studies share (``gemm``, ``gemm_paired``, ``gemm_cluster``,
``gemm_cluster_counters``): a shared tier like the harness, never a study. A gemm study imports it
and itself, never another gemm study (tests/cpu/pipeline/test_study_imports.py).

- :mod:`.variants`, :mod:`.shapes`: the CUTLASS variant and problem-shape tables
- :mod:`.build`: the nvcc jobs and the link of a study's library (workflow/rules/gemm.smk)
- :mod:`.abi`: the C ABI of the built library (kernels/gemm/gemm_abi.cuh)
- :mod:`.problem`: device buffers, the cuBLAS anchor and the sampled correctness check
- :mod:`.protocol`, :mod:`.runner`, :mod:`.monitor`: the timing protocol, the paired sample runner, NVML
- :mod:`.cluster_configs`: the cluster families at every tile order (gemm_cluster, gemm_cluster_counters)
- :mod:`.cluster_gains`: a cluster variant's round-by-round gains over its 1x1 sibling, its best order
- :mod:`.rows`, :mod:`.verdicts`, :mod:`.kernel_table`: what a row says, win/tie/loss, the kernel table
"""
