"""Device code more than one study's kernels use. A study's kernel folder (``kernels/<study>/``)
imports only this package, the PTX toolkit (``tma_kernels.ptx``) and the shared top-level modules,
never another study's folder (tests/cpu/kernels/test_study_imports.py).

- :mod:`.cluster_tiles`: the shared-memory layout of the cluster rings (multicast, dsm)
- :mod:`.cluster_consume`: their consumer, a checksum folded over a stage 16 bytes at a time
- :mod:`.chase_steps`: a one-thread chase's TMA-engine issue and bounded wait (crossover, tma_issue)
"""
