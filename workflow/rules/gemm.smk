# The gemm study's own build rules: one nvcc job per CUTLASS variant (parallel, cached: a variant
# whose generated source, template headers and flags are unchanged is not rebuilt), linked into
# build/gemm/libgemm_<arch>.so. The generic compile rule (compile.smk) needs them (the study's
# compile_inputs) and collects their reports into build/compile/gemm/resources.csv through the
# study's compile step, as it does every study's. Dozens of CUTLASS translation units take minutes
# even on 16 cores, so they run only for measure=true or when asked:
#   snakemake -c16 build/compile/gemm/resources.csv
# The analysis job reads the committed results/<gpu>/gemm/ instead (kernels.csv included).

from tma_study.gemm_lib import build as gemm_build
from tma_study.gemm_lib import variants as gemm_variants

# each variant includes the shared ABI header and its architecture's template
GEMM_TEMPLATES = {
    arch: ["kernels/gemm/gemm_abi.cuh", f"kernels/gemm/{header}"]
    for arch, header in gemm_variants.TEMPLATE_HEADER.items()
}

if "gemm" in config["studies"]:

    GEMM_VARIANTS = {
        arch: [v.name for v in gemm_variants.variants(config["studies"]["gemm"], arch)]
        for arch in gemm_variants.ARCHES
    }
    GEMM_ALL_VARIANTS = [name for names in GEMM_VARIANTS.values() for name in names]

    wildcard_constraints:
        variant="|".join(GEMM_ALL_VARIANTS) or "no-variant",
        gemm_arch="|".join(gemm_variants.ARCHES),

    rule gemm_source:
        output:
            "build/gemm/src/{variant}.cu",
        log:
            "logs/gemm/source/{variant}.log",
        priority: COMPILE_PRIORITY.get("gemm", 0)
        params:
            python=PYTHON,
            # the rendered text: a change of the generated source (and only that) reruns the job
            text=lambda wildcards: gemm_variants.render_source(
                gemm_variants.parse_name(wildcards.variant)
            ),
        shell:
            "{params.python} -m tma_study.gemm_lib.build source {wildcards.variant:q} --out {output:q} "
            "> {log:q} 2>&1"

    rule gemm_object:
        input:
            source="build/gemm/src/{variant}.cu",
            templates=lambda wildcards: GEMM_TEMPLATES[
                gemm_variants.parse_name(wildcards.variant).arch
            ],
        output:
            obj="build/gemm/obj/{variant}.o",
            report="build/gemm/obj/{variant}.json",
        log:
            "logs/gemm/object/{variant}.log",
        benchmark:
            "logs/benchmark/gemm_object/{variant}.tsv"
        priority: COMPILE_PRIORITY.get("gemm", 0)
        threads: 1
        params:
            python=PYTHON,
            flags=lambda wildcards: " ".join(
                gemm_build.flags(gemm_variants.parse_name(wildcards.variant).arch)
            ),
        shell:
            "{params.python} -m tma_study.gemm_lib.build object {wildcards.variant:q} "
            "--source {input.source:q} --out {output.obj:q} > {log:q} 2>&1"

    rule gemm_library:
        input:
            lambda wildcards: expand(
                "build/gemm/obj/{variant}.o",
                variant=GEMM_VARIANTS[wildcards.gemm_arch],
            ),
        output:
            "build/gemm/libgemm_{gemm_arch}.so",
        log:
            "logs/gemm/library/{gemm_arch}.log",
        priority: COMPILE_PRIORITY.get("gemm", 0)
        params:
            python=PYTHON,
        shell:
            "{params.python} -m tma_study.gemm_lib.build link {wildcards.gemm_arch:q} "
            "--objects {input:q} --out {output:q} > {log:q} 2>&1"
