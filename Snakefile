"""The TMA study, from kernels to figures and tables.

snakemake -c4                          analyze the committed H200 reference data (no GPU)
snakemake -c4 --config measure=true    measure on this Hopper GPU first
snakemake -c4 figures/crossover_bandwidth.pdf    one figure

config/config.yaml is read by workflow/rules/common.smk (under --configfile and --config).
"""

from snakemake.utils import min_version

min_version("9.0")


include: "workflow/rules/common.smk"
include: "workflow/rules/checks.smk"


wildcard_constraints:
    study="|".join(STUDIES),
    figure="|".join(FIGURE_STUDY),


include: "workflow/rules/compile.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/analyze.smk"
include: "workflow/rules/catalog.smk"
include: "workflow/rules/advisor.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/paper.smk"
include: "workflow/rules/gemm.smk"
include: "workflow/rules/report.smk"


report: "workflow/report/workflow.rst"


rule all:
    default_target: True
    input:
        LAYOUT.all_outputs(),
        CATALOG_TABLES,
        ADVISOR_OUTPUTS,
        REPORT_PAGES,


# The main job ends with its result: each study's claims and where to read the rest
# (tma_study.summary); Snakemake's whole output stays in the log it names after this.
onsuccess:
    from snakemake.logging import logger
    from tma_study.summary import summary

    if (
        not workflow.dag_settings.targets
        and Path(f"{RESULTS}/claims.tsv").is_file()
    ):
        logger.info(
            "\n"
            + summary(
                Path(f"{RESULTS}/claims.tsv"),
                [f"{LAYOUT.figures_dir}/{figure}.png" for figure in FIGURE_STUDY]
                + [f for f in ADVISOR_FIGURES if f.endswith(".png")],
                LAYOUT.tables_dir,
            )
        )
