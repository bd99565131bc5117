# The claims of config/claims/<study>.yaml, checked against this run's derived data:
# results/<label>/claims.tsv and claims.md (PASS, FAIL or NOT MEASURED, with the numbers), and
# claims_by_run.tsv: the status of each claim in every other run of its sweep in results/, and
# claims_by_gpu.tsv: in every run of another GPU model (tma_study.paper.claims_by_gpu).
# The claims files are validated when the workflow is parsed, so a bad claim stops every
# invocation before any job, naming the file, the claim and the key.
from tma_study.paper.claims import ClaimsError, load_claims

try:
    CLAIMS = load_claims(studies=KNOWN_STUDIES)
except ClaimsError as error:
    raise WorkflowError(str(error)) from None


rule claims:
    input:
        derived=[f for name in STUDIES for f in LAYOUT.derived_files(name)],
        # the other runs: spreads, in_repeat checks (results/<label>-rerun/), claims_by_run.tsv
        others=[f for name in STUDIES for f in LAYOUT.overlay_derived_files(name)],
        catalog=CATALOG_DERIVED,  # workflow/rules/catalog.smk
        advisor=ADVISOR_DERIVED if ADVISOR_ACTIVE else [],  # workflow/rules/advisor.smk
        claims=sorted(str(p) for p in Path("config/claims").glob("*.yaml")),
        # the registry's restatements, named beside the claims another instance changes
        registry=sorted(str(p) for p in Path("config/claims_registry").glob("*.yaml")),
        schema="workflow/schemas/claims.schema.yaml",
        code=[
            "src/tma_study/paper/claims.py",
            "src/tma_study/paper/claim_checks.py",
            "src/tma_study/paper/claim_files.py",
            "src/tma_study/paper/instances.py",
            "src/tma_study/paper/claims_by_gpu.py",
        ],
    output:
        tsv=f"{RESULTS}/claims.tsv",
        md=f"{RESULTS}/claims.md",  # in the HTML report as claims.html (workflow/rules/report.smk)
        # each claim's status in every other run of its sweep (results/<other label>/)
        runs=f"{RESULTS}/claims_by_run.tsv",
        # each claim's status on every run of another GPU model (results/<label>/, your own GPU)
        gpus=f"{RESULTS}/claims_by_gpu.tsv",
    log:
        f"logs/claims/{LABEL}.log",
    params:
        python=PYTHON,
        results=lambda wildcards, output: Path(output.tsv).parent,
        catalog=lambda wildcards, input: Path(input.catalog[0]).parent.parent,
        advisor=(
            f"--study-dir advisor={shlex.quote(str(Path(ADVISOR_DIR).parent))}"
            if ADVISOR_ACTIVE
            else ""
        ),
    shell:
        "{params.python} -m tma_study claims --results {params.results:q} "
        "--study-dir catalog={params.catalog:q} {params.advisor} > {log:q} 2>&1"
