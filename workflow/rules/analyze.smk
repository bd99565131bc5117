# The analyze tier: any machine, no GPU. Raw data -> derived tables -> figures and paper tables.
# One rule of each kind per study, generated from the study declarations (no central list).
from tma_study.paper.claims import notebook_title
from tma_study.report.report_pages import FigureCaption

# One job per study (its start-up and pandas' import paid once): this run's raw data and every
# other run it overlays (results/<other label>/<study>/ of another GPU or a repeat, so figures
# overlay them and a table says what moved: Layout.overlay_labels) -> derived tables; then the
# study's paper tables, its kernel table (from the kernels.csv beside its raw data) and its
# comparison of the runs (studies with ``compare``).
for _name, _study in STUDIES.items():
    _overlays = LAYOUT.overlay_labels(_name)

    rule:
        name:
            f"aggregate_{_name}"
        input:
            raw=LAYOUT.raw_files(_name),
            read=LAYOUT.read_raw_files(_name),
            repeat=LAYOUT.repeat_files(_name),
            others=[
                f"results/{label}/{_name}/{f}"
                for label in _overlays
                for f in (*_study.raw_files, "provenance.json")
            ],
            others_read=[
                f
                for label in _overlays
                for f in LAYOUT.overlay_read_raw_files(_name, label)
            ],
            kernels=f"{RESULTS}/{_name}/kernels.csv",
            code=sorted(
                set(LAYOUT.code_files(_name) + LAYOUT.kernel_table_code_files(_name))
            ),
            # the default comparison reads the study's claims (tma_study.report.claim_compare)
            claims=[
                f
                for f in [f"config/claims/{_name}.yaml"]
                if _study.compare is not None and Path(f).is_file()
            ],
            checked=CHECKED,  # the first job's report (checks.smk)
        output:
            derived=LAYOUT.derived_files(_name),
            others=LAYOUT.overlay_derived_files(_name),
            tables=LAYOUT.table_files(_name) + LAYOUT.kernel_table_files(_name),
            comparison=LAYOUT.comparison_files(_name),
        log:
            f"logs/aggregate/{LABEL}/{_name}.log",
        # the largest first, so that the longest job does not start last on few cores
        priority: LAYOUT.raw_bytes(_name) // 100_000
        params:
            python=PYTHON,
            # tma-study steps: each command quoted as one argument (Layout.analysis_steps)
            steps=" ".join(
                shlex.quote(shlex.join(step)) for step in LAYOUT.analysis_steps(_name)
            ),
            # content, not clocks: new data rerun it (common.smk)
            sealed=sealed_digest(
                LAYOUT.raw_files(_name)
                + LAYOUT.read_raw_files(_name)
                + LAYOUT.repeat_files(_name)
                + [f"results/{label}/{_name}/provenance.json" for label in _overlays]
                + [
                    f
                    for label in _overlays
                    for f in LAYOUT.overlay_read_raw_files(_name, label)
                ]
            ),
        shell:
            "{params.python} -m tma_study steps {params.steps} > {log:q} 2>&1"


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
