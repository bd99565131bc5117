"""Run one figure notebook as the workflow's ``figure`` rule does.

    python -m tma_study.report.notebook notebooks/dsm_broadcast.py --derived DIR --provenance FILE \
        --pdf figures/dsm_broadcast.pdf [--others FILE ...]

The notebook reads its inputs from a ``snakemake`` object, as under Snakemake's ``script:``
(tma_study.report.figures.inputs): this builds that object from the arguments and runs the
notebook in this interpreter. The rule runs it through a shell command whose every path is
quoted, so a venv or checkout whose path holds spaces or non-ASCII characters works (Snakemake's
``script:`` puts the interpreter's path into its command unquoted).
"""
from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace


def snakemake_object(derived: Path, provenance: Path, pdf: Path, others: list[str]) -> SimpleNamespace:
    """What the notebooks read of Snakemake's object: params.derived, input.provenance and
    input.others (the other runs' derived files), output.pdf."""
    return SimpleNamespace(params=SimpleNamespace(derived=str(derived)),
                           input=SimpleNamespace(provenance=str(provenance), others=list(others)),
                           output=SimpleNamespace(pdf=str(pdf), png=str(Path(pdf).with_suffix(".png"))))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tma_study.report.notebook", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--derived", type=Path, required=True)
    parser.add_argument("--provenance", type=Path, required=True)
    parser.add_argument("--pdf", type=Path, required=True)
    parser.add_argument("--others", nargs="*", default=[])
    args = parser.parse_args(argv)
    snakemake = snakemake_object(args.derived, args.provenance, args.pdf, args.others)
    runpy.run_path(str(args.notebook), init_globals={"snakemake": snakemake}, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
