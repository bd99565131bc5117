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
from tma_study.report.tables import write_table


class SassCheckError(AssertionError):
    """A kernel compiled without an instruction its study relies on."""


def compile_study(study, out_dir: Path) -> pd.DataFrame:
    from tma_kernels.build import compile_for_sm90a

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, problems = [], []
    for name, function, signature, expected in study.entry("kernels")():
        compiled = compile_for_sm90a(function, signature, name=name)
        atomic_write_text(out_dir / f"{name}.ptx", compiled.ptx)
        atomic_write_text(out_dir / f"{name}.sass", compiled.sass)
        counts = compiled.opcode_counts()
        found = {prefix: sum(n for op, n in counts.items() if op.startswith(prefix)) for prefix in expected}
        problems += [f"{name}: no {prefix} in its SASS" for prefix, n in found.items() if n == 0]
        rows.append({"kernel": name, "registers": compiled.registers,
                     "shared_bytes_static": compiled.shared_bytes_static,
                     "stack_frame_bytes": compiled.stack_frame_bytes,
                     "spill_store_bytes": compiled.spill_store_bytes,
                     "spill_load_bytes": compiled.spill_load_bytes,
                     "sass_instructions": sum(counts.values()),
                     "expected_sass": " ".join(f"{p}x{n}" for p, n in found.items())})
        print(f"compiled {name}: {compiled.registers} registers, "
              f"{compiled.spill_store_bytes} B spilled, {rows[-1]['expected_sass']}", flush=True)
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
