# The analyze tier: any machine, no GPU. Raw data -> derived tables -> figures and paper tables.
# One rule of each kind per study, generated from the study declarations (no central list).

for _name, _study in STUDIES.items():

    rule:
        name:
            f"aggregate_{_name}"
        input:
            raw_files(_name),
        output:
            derived_files(_name),
        log:
            f"logs/aggregate/{LABEL}/{_name}.log",
        params:
            python=PYTHON,
            raw=lambda wildcards, input: Path(input[0]).parent,
            derived=lambda wildcards, output: Path(output[0]).parent,
            study=_name,
        shell:
            "{params.python} -m tma_study aggregate {params.study} --raw {params.raw} --out {params.derived} > {log} 2>&1"

    rule:
        name:
            f"tables_{_name}"
        input:
            derived=derived_files(_name),
            provenance=f"{RESULTS}/{_name}/provenance.json",
        output:
            [f"paper/tables/{t}.{ext}" for t in _study.tables for ext in ("tex", "md")],
        log:
            f"logs/tables/{_name}.log",
        params:
            python=PYTHON,
            derived=lambda wildcards, input: Path(input.derived[0]).parent,
            study=_name,
        shell:
            "{params.python} -m tma_study tables {params.study} --derived {params.derived} "
            "--provenance {input.provenance} --out paper/tables > {log} 2>&1"


rule figure:
    input:
        derived=lambda wildcards: derived_files(FIGURE_STUDY[wildcards.figure]),
        provenance=lambda wildcards: f"{RESULTS}/{FIGURE_STUDY[wildcards.figure]}/provenance.json",
    output:
        pdf="figures/{figure}.pdf",
        png="figures/{figure}.png",
    log:
        "logs/figures/{figure}.log",
    params:
        derived=lambda wildcards, input: Path(input.derived[0]).parent,
    script:
        "../../notebooks/{wildcards.figure}.py"
