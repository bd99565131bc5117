# The data-movement catalog: catalog/*.yaml (cited facts read from FA3, FlashInfer and CUTLASS
# sources) -> validated -> paper/tables/catalog_*.tex|md. No GPU, no network; part of the main job.
from tma_study import catalog as catalog_mod

CATALOG_TABLES = catalog_mod.table_files("paper/tables")


rule catalog:
    input:
        data=catalog_mod.catalog_files("catalog"),
        schema="workflow/schemas/catalog.schema.yaml",
        code=["src/tma_study/catalog.py", "src/tma_study/report/tables.py"],
    output:
        CATALOG_TABLES,
    log:
        "logs/catalog/catalog.log",
    params:
        python=PYTHON,
    shell:
        "{params.python} -m tma_study catalog --catalog catalog --out paper/tables > {log:q} 2>&1"
