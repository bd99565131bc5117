"""The kernels the compile step builds for this study, with the SASS each must contain: the
attention variant of every configuration (paged_kv's kernel, each TMA load shape's own build;
their SASS as the paged_kv study checks it, UTMALDG.5D for the ``tile`` shape) and the
pure-read stream of the crossover study (``LDG.E.128``)."""
from __future__ import annotations

from tma_study.harness.kernel_builds import KernelBuild

READ_STREAM = "read_stream"


def variants(study_config: dict) -> list:
    """Every attention variant the probe times, by name."""
    from .grid import probe_configs
    return sorted({c.variant() for c in probe_configs(study_config)}, key=lambda v: v.name)


def compile_list(study_config: dict) -> list[KernelBuild]:
    from tma_kernels.crossover.read_ceiling import READ_SIGNATURE, read_stream

    from tma_study.studies.paged_kv.kernels import attention_build
    builds = [attention_build(v, may_be_refused=v.min_ctas_per_sm > 1) for v in variants(study_config)]
    return builds + [KernelBuild(READ_STREAM, read_stream, READ_SIGNATURE, ("LDG.E.128",))]
