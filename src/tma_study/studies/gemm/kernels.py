"""The gemm study's kernels are CUTLASS C++ (kernels/gemm/), not numba functions: the generic
compile step does not build them; workflow/rules/gemm.smk does (``snakemake -c16 gemm_build``)."""


def compile_list():
    raise NotImplementedError(
        "the gemm study is compiled by workflow/rules/gemm.smk (python -m tma_study.studies.gemm.build), "
        "not by `tma-study compile`: run `snakemake -c16 gemm_build`")
