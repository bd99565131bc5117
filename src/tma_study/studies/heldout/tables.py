"""The heldout study's paper tables: its families and the run."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.tables import run_table, write_table

FAMILY_NAMES = {"gemm": "GEMM (A and B tiles)", "attention": "attention forward (K and V tiles)",
                "paged_decode": "paged decode (K and V pages)", "gather": "row gather (rows)"}


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    families = pd.read_csv(Path(derived_dir) / "families.csv")
    shown = pd.DataFrame([{
        "family (operand)": FAMILY_NAMES.get(r.family, r.family), "cases": int(r.cases),
        "TMA faster / tie / pointer faster": f"{int(r.tma_wins)} / {int(r.ties)} / {int(r.alternative_wins)}",
        "pointer loads compiled to": f"cp.async {int(r.cp_async_cases)}, plain {int(r.plain_loads_cases)}",
        "TMA / pointer time, median (range)": f"{r.ratio_median:.3f} ({r.ratio_min:.3f} - {r.ratio_max:.3f})"}
        for r in families.itertuples()])
    write_table(shown, tables_dir, "heldout_families",
                "The held-out Triton kernels by family: where TMA or the pointer kernel is faster beyond the 95 % "
                "interval of their time ratio, and what Triton compiled the pointer loads to")
    write_table(run_table(provenance), tables_dir, "heldout_run", "Where and how the heldout data were measured")


def write_kernel_table(study, kernels_csv: Path, tables_dir: Path) -> None:
    frame = pd.read_csv(kernels_csv)
    shown = (frame.groupby(["kernel", "variant"])
             .agg(builds=("case", "count"), registers=("registers", "max"), shared=("shared_bytes", "max"),
                  utmaldg=("sass_utmaldg", "max"), ldgsts=("sass_ldgsts", "max"), ldg=("sass_ldg", "max"))
             .reset_index())
    shown.columns = ["kernel", "variant", "builds", "regs/thread (max)", "shared B (max)", "UTMALDG", "LDGSTS", "LDG"]
    write_table(shown, tables_dir, f"{study.name}_kernels",
                "The heldout study's Triton kernels (sm_90a): resources and the load instructions that tell TMA, "
                "cp.async and plain loads apart (largest count over the builds)")
