# The paper tier. In the default job (no TeX needed): the rules-of-thumb table, the macros
# that carry every number of the text and the list of study sections. `snakemake paper`
# builds paper/main.pdf (needs latexmk and pdflatex; without them it says what to install).

PAPER_INPUTS = {
    "derived": [f for name in STUDIES for f in LAYOUT.derived_files(name)],
    "provenance": [f"{RESULTS}/{name}/provenance.json" for name in STUDIES],
}
STUDY_OPTIONS = " ".join(f"--study {shlex.quote(name)}" for name in STUDIES)


rule rules_of_thumb:
    input:
        **PAPER_INPUTS,
        claims=f"{RESULTS}/claims.tsv",
        code=["src/tma_study/paper/rules_of_thumb.py"]
        + [f for name in STUDIES for f in LAYOUT.code_files(name)],
    output:
        tex=f"{LAYOUT.tables_dir}/rules_of_thumb.tex",
        md=f"{LAYOUT.tables_dir}/rules_of_thumb.md",
        refuted_tex=f"{LAYOUT.tables_dir}/rules_refuted.tex",
        refuted_md=f"{LAYOUT.tables_dir}/rules_refuted.md",
    log:
        "logs/paper/rules_of_thumb.log",
    params:
        python=PYTHON,
        studies=STUDY_OPTIONS,
        results=lambda wildcards, input: Path(input.provenance[0]).parent.parent,
        tables=lambda wildcards, output: Path(output.tex).parent,
        sealed=sealed_digest(PAPER_INPUTS["provenance"]),
    shell:
        "{params.python} -m tma_study rules-of-thumb --results {params.results:q} {params.studies} "
        "--claims {input.claims:q} --out {params.tables:q} > {log:q} 2>&1"


rule paper_generated:
    input:
        **PAPER_INPUTS,
        claims=f"{RESULTS}/claims.tsv",
        claims_by_run=f"{RESULTS}/claims_by_run.tsv",  # the appendix's claims that other runs change
        registry=sorted(str(p) for p in Path("config/claims_registry").glob("*.yaml")),  # its counts
        catalog=CATALOG_DERIVED,
        advisor=ADVISOR_DERIVED if ADVISOR_ACTIVE else [],  # workflow/rules/advisor.smk
        specs="config/gpu_specs.yaml",
        sections=sorted(str(p) for p in Path("paper/sections/studies").glob("*.tex")),
        code=[
            "src/tma_study/paper/macros.py",
            "src/tma_study/paper/generated.py",
            "src/tma_study/paper/projection.py",
            "src/tma_study/paper/catalog.py",
            "src/tma_study/paper/catalog_counts.py",
            "src/tma_study/report/numbers.py",
        ]
        + [f for name in STUDIES for f in LAYOUT.code_files(name)],
    output:
        macros=f"{LAYOUT.generated_dir}/macros.tex",
        studies=f"{LAYOUT.generated_dir}/studies.tex",
        studies_appendix=f"{LAYOUT.generated_dir}/studies_appendix.tex",
        claims=f"{LAYOUT.generated_dir}/claims.tex",
        projection=f"{LAYOUT.generated_dir}/projection.tex",
        fallback=[
            f"{LAYOUT.generated_dir}/study_{name}.tex"
            for name in STUDIES
            if not Path(f"paper/sections/studies/{name}.tex").exists()
        ],
    log:
        "logs/paper/generated.log",
    params:
        python=PYTHON,
        studies=STUDY_OPTIONS,
        results=lambda wildcards, input: Path(input.claims).parent,
        catalog=lambda wildcards, input: Path(input.catalog[0]).parent,
        generated=lambda wildcards, output: Path(output.macros).parent,
        sealed=sealed_digest(PAPER_INPUTS["provenance"]),
    shell:
        "{params.python} -m tma_study paper-generated --results {params.results:q} {params.studies} "
        "--claims {input.claims:q} --catalog-derived {params.catalog:q} --paper paper --out {params.generated:q} "
        "> {log:q} 2>&1"


# paper/main.pdf is built from the committed reference alone (another reference_gpu's figures
# and tables go to outputs/<label>/, which the paper does not read).
if not LAYOUT.outputs:

    rule paper:
        input:
            main="paper/main.tex",
            sections=sorted(str(p) for p in Path("paper/sections").rglob("*.tex")),
            bibliography="paper/references.bib",
            generated=rules.paper_generated.output,
            rules_of_thumb=rules.rules_of_thumb.output,
            catalog=[f for f in CATALOG_TABLES if f.endswith(".tex")],  # workflow/rules/catalog.smk
            figures=[f"figures/{figure}.pdf" for figure in FIGURE_STUDY],
            advisor=[f for f in ADVISOR_OUTPUTS if f.endswith((".tex", ".pdf"))],
            tables=[
                f
                for f in LAYOUT.all_outputs()
                if f.startswith("paper/tables/") and f.endswith(".tex")
            ],
        output:
            "paper/main.pdf",
        log:
            "logs/paper/main.log",
        params:
            python=PYTHON,
        shell:
            "{params.python} -m tma_study build-paper --paper paper --build-dir build/paper > {log:q} 2>&1 "
            "|| {{ tail -n 40 {log:q} >&2; exit 1; }}"
