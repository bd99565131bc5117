# The analyze tier: any machine, no GPU. Raw data -> derived tables -> figures and paper tables.
# One rule of each kind per study, generated from the study declarations (no central list).
from tma_study.paper.claims import notebook_title
from tma_study.report.report_pages import FigureCaption

for _name, _study in STUDIES.items():

    rule:
        name:
            f"aggregate_{_name}"
        input:
            raw=LAYOUT.raw_files(_name),
            read=LAYOUT.read_raw_files(_name),
            repeat=LAYOUT.repeat_files(_name),
            code=LAYOUT.code_files(_name),
            checked=CHECKED,  # the first job's report (checks.smk)
        output:
            LAYOUT.derived_files(_name),
        log:
            f"logs/aggregate/{LABEL}/{_name}.log",
        params:
            python=PYTHON,
            raw=lambda wildcards, input: Path(input.raw[0]).parent,
            repeat=lambda wildcards, input: (
                f"--repeat {shlex.quote(str(Path(input.repeat[0]).parent))}"
                if input.repeat
                else ""
            ),
            derived=lambda wildcards, output: Path(output[0]).parent,
            study=_name,
            # content, not clocks: new data rerun it (common.smk)
            sealed=sealed_digest(
                LAYOUT.raw_files(_name)
                + LAYOUT.read_raw_files(_name)
                + LAYOUT.repeat_files(_name)
            ),
        shell:
            "{params.python} -m tma_study aggregate {params.study:q} --raw {params.raw:q} {params.repeat} "
            "--out {params.derived:q} > {log:q} 2>&1"

    # The study's paper tables and, in the same process, its kernel table (from the kernels.csv
    # beside its raw data): one job instead of two keeps the main job short.
    rule:
        name:
            f"tables_{_name}"
        input:
            derived=LAYOUT.derived_files(_name),
            provenance=f"{RESULTS}/{_name}/provenance.json",
            kernels=f"{RESULTS}/{_name}/kernels.csv",
            code=sorted(
                set(LAYOUT.code_files(_name) + LAYOUT.kernel_table_code_files(_name))
            ),
        output:
            LAYOUT.table_files(_name) + LAYOUT.kernel_table_files(_name),
        log:
            f"logs/tables/{_name}.log",
        params:
            python=PYTHON,
            derived=lambda wildcards, input: Path(input.derived[0]).parent,
            study=_name,
            tables=lambda wildcards, output: Path(output[0]).parent,
            sealed=sealed_digest([f"{RESULTS}/{_name}/provenance.json"]),
        shell:
            "{params.python} -m tma_study tables {params.study:q} --derived {params.derived:q} "
            "--provenance {input.provenance:q} --kernels {input.kernels:q} --out {params.tables:q} > {log:q} 2>&1"


rule figure:
    input:
        notebook="notebooks/{figure}.py",
        derived=lambda wildcards: LAYOUT.derived_files(FIGURE_STUDY[wildcards.figure]),
        provenance=lambda wildcards: f"{RESULTS}/{FIGURE_STUDY[wildcards.figure]}/provenance.json",
        code=lambda wildcards: LAYOUT.code_files(FIGURE_STUDY[wildcards.figure]),
        # other runs of the study (results/<other label>/), overlaid on this one
        others=lambda wildcards: LAYOUT.overlay_derived_files(
            FIGURE_STUDY[wildcards.figure]
        ),
    output:
        pdf=f"{LAYOUT.figures_dir}/{{figure}}.pdf",
        png=report(
            f"{LAYOUT.figures_dir}/{{figure}}.png",
            caption="../report/figure.rst",
            category=lambda wildcards: FIGURE_STUDY[wildcards.figure],
            subcategory="figures",
        ),
    log:
        "logs/figures/{figure}.log",
    params:
        python=PYTHON,
        derived=lambda wildcards, input: Path(input.derived[0]).parent,
        # the HTML report's caption: the figure's claims and their status, read when the report
        # is made (an object: Snakemake's params trigger leaves it out, tma_study.report.report_pages)
        report=lambda wildcards: FigureCaption(
            wildcards.figure,
            notebook_title(Path("notebooks") / f"{wildcards.figure}.py"),
            f"{RESULTS}/claims.tsv",
        ),
        sealed=lambda wildcards: sealed_digest(
            [f"{RESULTS}/{FIGURE_STUDY[wildcards.figure]}/provenance.json"]
        ),
    # the notebook runs as Snakemake's script: would run it (a `snakemake` object with these
    # inputs, tma_study.report.notebook), with the interpreter quoted: a venv path may hold spaces
    shell:
        "{params.python} -m tma_study.report.notebook {input.notebook:q} --derived {params.derived:q} "
        "--provenance {input.provenance:q} --pdf {output.pdf:q} --others {input.others:q} > {log:q} 2>&1"
