# The advisor (tma_study.advisor) scored on what it was not built from: the workload studies'
# winners (leave one study out), the heldout study's Triton kernels and the catalog's choices,
# beside the trivial baselines -> results/<label>/advisor/derived/, its paper tables and the
# decision-map figure. It predicts from the microbenchmarks of this run (and the other runs of
# their sweeps, for its intervals), so it runs where the run holds all three.
from tma_study.advisor import evidence as advisor_evidence
from tma_study.advisor.validation import run as advisor_validation

ADVISOR_ACTIVE = all(name in STUDIES for name in advisor_evidence.STUDIES)
ADVISOR_DIR = f"{RESULTS}/advisor/derived"
ADVISOR_DERIVED = [f"{ADVISOR_DIR}/{f}" for f in advisor_validation.DERIVED_FILES]
ADVISOR_SCORED = [f"{ADVISOR_DIR}/{f}" for f in advisor_validation.SCORED_FILES]
ADVISOR_MAP = f"{ADVISOR_DIR}/{advisor_validation.MAP_FILE}"
# under outputs/<label>/ where this run is not the committed reference (LAYOUT.outputs)
ADVISOR_TABLES = [
    f"{LAYOUT.outputs}{f}"
    for f in advisor_validation.output_files()
    if f.startswith("paper/tables/")
]
ADVISOR_FIGURES = [
    f"{LAYOUT.outputs}{f}"
    for f in advisor_validation.output_files()
    if f.startswith("figures/")
]
ADVISOR_OUTPUTS = (
    ADVISOR_DERIVED + ADVISOR_TABLES + ADVISOR_FIGURES if ADVISOR_ACTIVE else []
)


# The tables the advisor predicts from: this run's microbenchmarks and, for its intervals, the
# other runs of their sweeps; then with the tables it is scored on (only where the advisor runs).
ADVISOR_EVIDENCE = (
    [
        f
        for name in advisor_evidence.STUDIES
        for f in LAYOUT.derived_files(name)
        + LAYOUT.overlay_derived_files(name)
        + [f"{RESULTS}/{name}/provenance.json"]
    ]
    if ADVISOR_ACTIVE
    else []
)
ADVISOR_WORKLOADS = {
    "paged_kv": ["attention.csv"],
    "gemm": ["gemm.csv", "kernels.csv"],
    "heldout": [],
}
ADVISOR_INPUTS = ADVISOR_EVIDENCE + [
    f
    for name, raw in ADVISOR_WORKLOADS.items()
    if name in STUDIES and ADVISOR_ACTIVE
    for f in LAYOUT.derived_files(name) + [f"{RESULTS}/{name}/{r}" for r in raw]
]


if ADVISOR_ACTIVE:

    rule advisor_validation:
        input:
            data=ADVISOR_INPUTS,
            config=[
                "config/advisor_versions.yaml",
                "config/advisor_catalog.yaml",
                "config/gpu_specs.yaml",
            ],
            catalog=sorted(str(p) for p in Path("catalog").glob("*.yaml")),
            code=sorted(str(p) for p in Path("src/tma_study/advisor").rglob("*.py"))
            + ["src/tma_study/harness/runs.py", "src/tma_study/report/tables.py"],
        output:
            derived=ADVISOR_SCORED,
            tables=ADVISOR_TABLES,
        log:
            f"logs/advisor/{LABEL}.log",
        params:
            python=PYTHON,
            results=lambda wildcards, output: Path(output.derived[0]).parents[2],
            out=lambda wildcards, output: Path(output.derived[0]).parent,
            tables=lambda wildcards, output: Path(output.tables[0]).parent,
        shell:
            "{params.python} -m tma_study advisor-validate --results {params.results:q} --out {params.out:q} "
            "--tables {params.tables:q} > {log:q} 2>&1"

    # The decision map needs only the microbenchmarks: it runs beside the workload studies' jobs.
    rule advisor_decision_map:
        input:
            data=ADVISOR_EVIDENCE,
            config=["config/advisor_versions.yaml", "config/gpu_specs.yaml"],
            code=sorted(str(p) for p in Path("src/tma_study/advisor").rglob("*.py"))
            + ["src/tma_study/harness/runs.py"],
        output:
            ADVISOR_MAP,
        log:
            f"logs/advisor/{LABEL}-decision-map.log",
        params:
            python=PYTHON,
            results=lambda wildcards, output: Path(output[0]).parents[2],
            out=lambda wildcards, output: Path(output[0]).parent,
        shell:
            "{params.python} -m tma_study advisor-validate --decision-map --results {params.results:q} "
            "--out {params.out:q} > {log:q} 2>&1"

    rule advisor_figure:
        input:
            derived=ADVISOR_MAP,
            provenance=f"{RESULTS}/crossover/provenance.json",
        output:
            pdf=f"{LAYOUT.figures_dir}/advisor_decision_map.pdf",
            png=report(
                f"{LAYOUT.figures_dir}/advisor_decision_map.png",
                caption="../report/figure.rst",
                category="advisor",
                subcategory="figures",
            ),
        log:
            "logs/figures/advisor_decision_map.log",
        params:
            derived=lambda wildcards, input: Path(input.derived).parent,
            caption="The advisor's decision map: which mechanism it chooses by transfer size and bytes in flight per SM.",
        script:
            "../../notebooks/advisor_decision_map.py"
