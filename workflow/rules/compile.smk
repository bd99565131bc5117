# The compile step: every kernel a study times, numba -> PTX -> cubin (ptxas, sm_90a) -> SASS
# (nvdisasm), through the kernel cache under build/kernel-cache/, with each kernel's resources
# and a check of the instructions it must contain; a study built by other tools declares its
# own compile step and the files its own rules make first (Study.compile, compile_inputs: gemm's
# per-variant nvcc jobs, workflow/rules/gemm.smk). Needs no GPU. Not part of the default job
# (the kernel tables read what the measure run recorded: results/<gpu>/<study>/kernels.csv);
# `snakemake kernels` runs it for every study, and --config measure=true before any GPU time.
# Its inputs are the kernel sources and the study's section of the validated config, so an
# edit of either reruns it.

KERNEL_SOURCES = sorted(str(p) for p in Path("kernels").rglob("*.py"))


rule study_config:
    output:
        "build/config/{study}.json",
    log:
        "logs/study_config/{study}.log",
    priority: schedule.MEASURE_PRIORITY
    params:
        # the validated config of this study alone: a change of its section (and only that)
        # reruns this rule and what depends on it
        text=lambda wildcards: study_config_text(config, wildcards.study),
    run:
        Path(output[0]).write_text(params.text)


rule compile:
    input:
        config="build/config/{study}.json",
        kernels=KERNEL_SOURCES,
        study_code=lambda wildcards: LAYOUT.kernel_code_files(wildcards.study),
        # what the study's own build rules make first (none for a numba study)
        built=lambda wildcards: LAYOUT.compile_inputs(
            wildcards.study, config["studies"][wildcards.study]
        ),
    output:
        resources="build/compile/{study}/resources.csv",
    log:
        "logs/compile/{study}.log",
    benchmark:
        "logs/benchmark/compile/{study}.tsv"
    priority: lambda wildcards: COMPILE_PRIORITY[wildcards.study]
    threads: COMPILE_THREADS  # compile processes
    params:
        python=PYTHON,
        outdir=lambda wildcards: f"build/compile/{wildcards.study}",
    shell:
        "{params.python} -m tma_study compile {wildcards.study:q} --config {input.config:q} "
        "--out {params.outdir:q} --workers {threads} 2>&1 | tee {log:q}"


rule kernels:
    input:
        [f"build/compile/{name}/resources.csv" for name in STUDIES],
