"""tma_study: the measurement harness, study declarations, analysis and paper tier of the TMA study.

Layout, from the ground up
- ``tma_study.config``     load the pipeline config and validate it against the JSON schemas
- ``tma_study.gpu``        what GPU is here (name, SMs, L2, clocks) and whether it can measure
- ``tma_study.atomic``     writes that never leave half a result behind (every tier)
- ``tma_study.harness``    timing (cuda-bench), statistics, ceilings, provenance, kernel builds
- ``tma_study.report``     what figures and tables share: table writers, numbers as the text writes them
- ``tma_study.pipeline``   where the pipeline's files live; ``schedule``: the order of compile jobs
- ``tma_study.studies``    one subpackage per study: grid, compile list, measure (GPU), aggregate,
                           tables, and its rules, macros and comparison for the paper tier
- ``tma_study.compile_report``  the compile step and the kernel tables
- ``tma_study.paper``      the paper tier: claims, catalog, rules of thumb, macros, the PDF
- ``tma_study.cli``        the command line the Snakemake rules call

The kernels themselves live in ``tma_kernels`` (the repository's ``kernels/`` folder).
"""
