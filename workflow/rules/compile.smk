# numba -> PTX -> cubin (ptxas, sm_90a) -> SASS (nvdisasm), with each kernel's resource usage.
# Needs no GPU; runs in the default job, so a kernel that stops compiling fails the main job.


rule compile:
    output:
        resources="build/compile/{study}/resources.csv",
    log:
        "logs/compile/{study}.log",
    threads: 64  # compile processes; Snakemake scales this down to the cores it is given (-c)
    params:
        python=PYTHON,
        outdir=lambda wildcards: f"build/compile/{wildcards.study}",
    shell:
        "{params.python} -m tma_study compile {wildcards.study:q} --out {params.outdir:q} "
        "--workers {threads} > {log:q} 2>&1"


rule kernel_table:
    input:
        resources="build/compile/{study}/resources.csv",
    output:
        tex="paper/tables/{study}_kernels.tex",
        md="paper/tables/{study}_kernels.md",
    log:
        "logs/kernel_table/{study}.log",
    params:
        python=PYTHON,
    shell:
        "{params.python} -m tma_study kernel-table {wildcards.study:q} --resources {input.resources:q} "
        "--out paper/tables > {log:q} 2>&1"
