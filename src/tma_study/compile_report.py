"""The compile step: every kernel of a study to PTX, cubin and SASS for sm_90a, no GPU needed.

Writes ``<name>.ptx`` and ``<name>.sass`` per kernel and ``resources.csv`` (registers, shared
memory, stack, spills, and the count of each instruction the kernel is expected to contain).
A kernel whose SASS lacks an expected instruction fails the step: the mechanism it claims
to measure would not be the one running.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.harness.atomic import atomic_write_text
from tma_study.harness.parallel_compile import process_map
from tma_study.report.tables import write_table


class SassCheckError(AssertionError):
    """A kernel compiled without an instruction its study relies on."""


def _compile_kernel(study_name: str, index: int) -> dict:
    """Compile kernel ``index`` of a study's compile list (in a worker process: the list
    holds closures, so each worker builds it again and takes its own entry)."""
    from tma_kernels.build import compile_for_sm90a

    from tma_study.studies import discover
    name, function, signature, expected = discover()[study_name].entry("kernels")()[index]
    compiled = compile_for_sm90a(function, signature, name=name)
    counts = compiled.opcode_counts()
    return {"name": name, "ptx": compiled.ptx, "sass": compiled.sass, "counts": counts,
            "expected": expected, "registers": compiled.registers,
            "shared_bytes_static": compiled.shared_bytes_static,
            "stack_frame_bytes": compiled.stack_frame_bytes,
            "spill_store_bytes": compiled.spill_store_bytes,
            "spill_load_bytes": compiled.spill_load_bytes}


def _compiled_kernels(study, workers: int):
    """Every compiled kernel of the study, in the compile list's order."""
    count = len(study.entry("kernels")())
    yield from process_map(_compile_kernel, [study.name] * count, range(count), workers=workers)


def compile_study(study, out_dir: Path, workers: int = 1) -> pd.DataFrame:
    """Compile every kernel of ``study`` (``workers`` processes), check its SASS, write the
    PTX, SASS and resources.csv into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, problems = [], []
    for compiled in _compiled_kernels(study, workers):
        name, counts = compiled["name"], compiled["counts"]
        atomic_write_text(out_dir / f"{name}.ptx", compiled["ptx"])
        atomic_write_text(out_dir / f"{name}.sass", compiled["sass"])
        found = {prefix: sum(n for op, n in counts.items() if op.startswith(prefix))
                 for prefix in compiled["expected"]}
        problems += [f"{name}: no {prefix} in its SASS" for prefix, n in found.items() if n == 0]
        rows.append({"kernel": name, "registers": compiled["registers"],
                     "shared_bytes_static": compiled["shared_bytes_static"],
                     "stack_frame_bytes": compiled["stack_frame_bytes"],
                     "spill_store_bytes": compiled["spill_store_bytes"],
                     "spill_load_bytes": compiled["spill_load_bytes"],
                     "sass_instructions": sum(counts.values()),
                     "expected_sass": " ".join(f"{p}x{n}" for p, n in found.items())})
        print(f"compiled {name}: {compiled['registers']} registers, "
              f"{compiled['spill_store_bytes']} B spilled, {rows[-1]['expected_sass']}", flush=True)
    if problems:
        raise SassCheckError("; ".join(problems))
    frame = pd.DataFrame(rows)
    atomic_write_text(out_dir / "resources.csv", frame.to_csv(index=False))
    return frame


def write_kernel_table(study, resources_csv: Path, tables_dir: Path) -> None:
    frame = pd.read_csv(resources_csv)
    shown = frame.rename(columns={"kernel": "kernel", "registers": "regs/thread",
                                  "shared_bytes_static": "static smem B",
                                  "spill_store_bytes": "spill B",
                                  "expected_sass": "key SASS instructions (count)"})
    shown = shown[["kernel", "regs/thread", "static smem B", "spill B", "key SASS instructions (count)"]]
    write_table(shown, tables_dir, f"{study.name}_kernels",
                f"Kernels of the {study.name} study compiled for sm_90a (ptxas 13.0): resources and the "
                "instructions that show each uses the mechanism it is named for.")
