# Snakemake's HTML report (snakemake --report report.html), grouped by study: its figures
# (analyze.smk, captioned with their claims' status) and here a page per paper table, ending with
# the claims resting on it, and every claim (tma_study.report.report_pages); the report's opening
# text: workflow/report/workflow.rst (the Snakefile's report directive).

# paper/tables/<table>.md -> the group its page sits in: its study, the rules of thumb, the catalog
REPORT_TABLES = {
    **{
        md: name
        for name in STUDIES
        for md in LAYOUT.table_files(name)
        + LAYOUT.kernel_table_files(name)
        + LAYOUT.comparison_files(name)
        if md.endswith(".md")
    },
    **{
        f"{LAYOUT.tables_dir}/{table}.md": "rules of thumb"
        for table in ("rules_of_thumb", "rules_refuted")
    },
    **{md: "catalog" for md in CATALOG_TABLES if md.endswith(".md")},
    **{md: "advisor" for md in ADVISOR_OUTPUTS if md.endswith(".md")},  # advisor.smk
}
REPORT_PAGES = [f"{LAYOUT.report_dir}/{Path(md).stem}.html" for md in REPORT_TABLES] + [
    f"{LAYOUT.report_dir}/claims.html"
]


rule report_pages:
    input:
        tables=list(REPORT_TABLES),
        claims=f"{RESULTS}/claims.tsv",
        code="src/tma_study/report/report_pages.py",
    output:
        [
            report(
                f"{LAYOUT.report_dir}/{Path(md).stem}.html",
                caption="../report/table.rst",
                category=group,
                subcategory="tables",
            )
            for md, group in REPORT_TABLES.items()
        ]
        + [
            report(
                f"{LAYOUT.report_dir}/claims.html",
                caption="../report/claims_page.rst",
                category="claims",
            )
        ],
    log:
        f"logs/report/{LABEL}.log",
    params:
        python=PYTHON,
        out=lambda wildcards, output: Path(output[0]).parent,
    shell:
        "{params.python} -m tma_study report-pages --claims {input.claims:q} --out {params.out:q} "
        "{input.tables:q} > {log:q} 2>&1"
