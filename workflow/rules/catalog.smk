# The data-movement catalog: catalog/*.yaml (cited facts read from FA3, FlashInfer and CUTLASS
# sources) -> validated -> paper/tables/catalog_*.tex|md and the counts its claims check
# (build/catalog/derived/). No GPU, no network; part of the main job.
from tma_study.paper import catalog as catalog_mod

# Another reference's run (outputs/<label>/) writes its own copy, as every other output of it.
CATALOG_TABLES = catalog_mod.table_files(LAYOUT.tables_dir)
CATALOG_DIR = f"{LAYOUT.outputs}{catalog_mod.DERIVED_DIR}"
CATALOG_DERIVED = [f"{CATALOG_DIR}/{f}" for f in catalog_mod.DERIVED_FILES]


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
        f"logs/catalog/{LABEL}.log",
    params:
        python=PYTHON,
        tables=lambda wildcards, output: Path(output.tables[0]).parent,
        derived=lambda wildcards, output: Path(output.derived[0]).parent,
    shell:
        "{params.python} -m tma_study catalog --catalog catalog --out {params.tables:q} "
        "--derived {params.derived:q} > {log:q} 2>&1"
