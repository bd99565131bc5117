# The data-movement catalog: catalog/*.yaml (cited facts read from FA3, FlashInfer and CUTLASS
# sources) -> validated -> paper/tables/catalog_*.tex|md and the counts its claims check
# (build/catalog/derived/). No GPU, no network; part of the main job.
from tma_study.paper import catalog as catalog_mod

CATALOG_TABLES = catalog_mod.table_files("paper/tables")
CATALOG_DERIVED = [f"{catalog_mod.DERIVED_DIR}/{f}" for f in catalog_mod.DERIVED_FILES]


rule catalog:
    input:
        data=catalog_mod.catalog_files("catalog"),
        schema="workflow/schemas/catalog.schema.yaml",
        code=[
            "src/tma_study/paper/catalog.py",
            "src/tma_study/paper/catalog_counts.py",
            "src/tma_study/report/tables.py",
        ],
        checked=CHECKED,  # after the raw data's checks: a refusal leaves no output (checks.smk)
    output:
        tables=CATALOG_TABLES,
        derived=CATALOG_DERIVED,
    log:
        "logs/catalog/catalog.log",
    params:
        python=PYTHON,
    shell:
        "{params.python} -m tma_study catalog --catalog catalog --out paper/tables "
        f"--derived {catalog_mod.DERIVED_DIR} > {{log:q}} 2>&1"
