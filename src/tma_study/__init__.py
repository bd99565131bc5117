"""tma_study: the measurement harness, study declarations and analysis of the TMA study.

Layout
- ``tma_study.config``     load the pipeline config and validate it against the JSON schemas
- ``tma_study.gpu``        what GPU is here (name, SMs, L2, clocks) and whether it can measure
- ``tma_study.harness``    timing (cuda-bench), statistics, ceilings, provenance, kernel builds
- ``tma_study.studies``    one subpackage per study: grid, measure (GPU), aggregate (CPU)
- ``tma_study.cli``        the command line the Snakemake rules call

The kernels themselves live in ``tma_kernels`` (the repository's ``kernels/`` folder).
"""
