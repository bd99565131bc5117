"""Tables of the gemm study (paper/tables/gemm_*.tex|md).

    python -m tma_study.studies.gemm.tables kernels --kernels results/<gpu>/gemm/kernels.csv --out paper/tables

Rows that were not measured say so ("NOT MEASURED: ..."), with the reason from the data.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from tma_study.report.tables import source_line, write_table

from .aggregate import BAR_FRACTION, NOT_MEASURED_TEXT


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path)


def _not_measured(frame: pd.DataFrame) -> bool:
    return "status" in frame.columns and len(frame) == 1 and str(frame.status.iloc[0]).startswith(NOT_MEASURED_TEXT)


def bar_table(bar: pd.DataFrame) -> pd.DataFrame:
    r = bar.iloc[0]
    if r.status != "measured":
        return pd.DataFrame([{"shape": r["shape"], "dtype": r["dtype"], "result": r.status}])
    return pd.DataFrame([{"shape": r["shape"], "dtype": r["dtype"], "best SM90 TMA variant": r.variant,
                          "TFLOP/s": f"{r.tflops:.1f}", "cuBLAS TFLOP/s": f"{r.cublas_tflops:.1f}",
                          "% of cuBLAS": f"{100 * r.fraction_of_cublas:.1f}",
                          f"bar >= {100 * BAR_FRACTION:.0f} %": "met" if r.passes else "NOT met"}])


def speedup_table(speedup: pd.DataFrame) -> pd.DataFrame:
    if _not_measured(speedup):
        return speedup[["status"]]
    best = speedup[speedup.compared == "best"]
    rows = []
    for (arch, dtype, family), group in best.groupby(["arch", "dtype", "family"]):
        rows.append({"arch": arch, "dtype": dtype, "shapes": family, "count": len(group),
                     "TMA/cp.async median": f"{group.speedup.median():.2f}",
                     "min": f"{group.speedup.min():.2f}", "max": f"{group.speedup.max():.2f}",
                     "TMA wins / ties / cp.async wins": (f"{(group.winner == 'tma').sum()} / "
                                                         f"{(group.winner == 'tie').sum()} / "
                                                         f"{(group.winner == 'cpasync').sum()}")})
    return pd.DataFrame(rows)


def multicast_table(summary: pd.DataFrame) -> pd.DataFrame:
    if _not_measured(summary):
        return summary[["status"]]
    return pd.DataFrame([{"arch": r.arch, "dtype": r.dtype, "cluster (M x N)": r.cluster,
                          "median gain over 1x1": f"{r.median_gain:.3f}", "min": f"{r.min_gain:.3f}",
                          "max": f"{r.max_gain:.3f}", "wins / losses / comparisons":
                              f"{r.wins} / {r.losses} / {r.comparisons}"} for r in summary.itertuples()])


def rules_table(rules: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in rules.itertuples():
        if r.status != "measured":
            rows.append({"rule": r.rule, "result": r.status})
            continue
        rows.append({"rule": f"{r.rule} ({r.crossover_working_set}: TMA from {r.crossover_bytes:.0f} B)",
                     "result": f"right {r.predicted_right:.0f}, wrong {r.predicted_wrong:.0f}, ties {r.ties:.0f} "
                               f"of {r.comparisons:.0f} ({100 * r.fraction_right_of_decided:.0f} % of decided)"})
    return pd.DataFrame(rows)


def status_table(status: pd.DataFrame) -> pd.DataFrame:
    return status.rename(columns={"implementation": "implementation", "rows": "rows (variant x shape)"})


def run_table(provenance: dict) -> pd.DataFrame:
    gpu = provenance.get("gpu", {})
    seconds = (pd.Timestamp(provenance["finished_utc"]) - pd.Timestamp(provenance["started_utc"])).total_seconds()
    packages = provenance.get("packages", {})
    rows = [("GPU", f"{gpu.get('name')} ({gpu.get('sm_count')} SMs)"),
            ("measured architecture", str(provenance.get("measured_arch"))),
            ("not measured", "; ".join(f"{a}: {why}" for a, why in (provenance.get("not_measured_arches") or {}).items())
             or "nothing"),
            ("configurations timed", str(provenance.get("configurations"))),
            ("measurement, start to finish", f"{int(seconds // 60)} min {int(seconds % 60)} s"),
            ("estimate printed before the run", f"{provenance.get('estimated_gpu_seconds')} s"),
            ("cuBLAS anchor", str(provenance.get("cublas"))),
            ("nvidia-cutlass / torch / cuda-bench",
             " / ".join(str(packages.get(p)) for p in ("nvidia-cutlass", "torch", "cuda-bench"))),
            ("timer", str(provenance.get("timer")))]
    return pd.DataFrame(rows, columns=["", "value"])


def kernels_table(kernels: pd.DataFrame) -> pd.DataFrame:
    columns = {"variant": "variant", "registers": "regs/thread", "abi_stages": "stages",
               "abi_shared_storage_bytes": "smem B", "spill_store_bytes": "spill B",
               "compile_seconds": "nvcc s", "expected_sass": "key SASS (count)"}
    present = [c for c in columns if c in kernels.columns]
    return kernels[present].rename(columns=columns)


def write_kernel_table(kernels_csv: Path, tables_dir: Path) -> None:
    write_table(kernels_table(pd.read_csv(kernels_csv)), tables_dir, "gemm_kernels",
                "GEMM variants (CUTLASS 4.2, nvcc -O3 -DNDEBUG): registers, pipeline stages, shared memory, "
                "compile time and the SASS that shows each uses the load mechanism it is named for.")


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    write_table(bar_table(_read(derived_dir / "bar.csv")), tables_dir, "gemm_bar",
                f"Best SM90 TMA GEMM at 8192^3 bf16 against cuBLAS (torch.matmul) in the same run. {source}.")
    write_table(speedup_table(_read(derived_dir / "speedup.csv")), tables_dir, "gemm_speedup",
                "Best TMA variant over best cp.async variant per shape (TFLOP/s ratio; ties within 2 % "
                f"or the runs' spread). {source}.")
    write_table(multicast_table(_read(derived_dir / "multicast_summary.csv")), tables_dir, "gemm_multicast",
                f"TMA multicast: each cluster shape's TFLOP/s over the same variant with a 1x1 cluster. {source}.")
    write_table(rules_table(_read(derived_dir / "rules.csv")), tables_dir, "gemm_rules",
                "Do the crossover and multicast studies' rules predict the GEMM winner (TMA vs cp.async, "
                f"same schedule and tile, 1x1 cluster)? {source}.")
    write_table(status_table(_read(derived_dir / "status.csv")), tables_dir, "gemm_status",
                f"What was measured, per architecture, and why the rest was not. {source}.")
    write_table(run_table(provenance), tables_dir, "gemm_run", f"How the gemm data were measured. {source}.")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tma_study.studies.gemm.tables")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("kernels")
    p.add_argument("--kernels", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    write_kernel_table(args.kernels, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
