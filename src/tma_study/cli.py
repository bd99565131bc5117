"""Command line the Snakemake rules call (also usable by hand).

    tma-study compile   STUDY --out DIR [--config FILE] [--workers N]      (CPU) numba -> PTX -> cubin -> SASS
                        through the kernel cache, resources.csv; fails when an expected instruction is missing
    tma-study measure   STUDY --out DIR [--config config/config.yaml]      (Hopper GPU)
                        (--config takes a whole pipeline config, YAML or JSON)
    tma-study aggregate STUDY --raw DIR --out DIR [--repeat DIR]           (CPU)
    tma-study tables    STUDY --derived DIR --provenance FILE --out DIR    (CPU)
    tma-study publish   --staged DIR --out DIR                             copy a finished measurement into results/
    tma-study kernel-table STUDY --kernels CSV --out DIR                   (CPU) from results/<gpu>/<study>/kernels.csv
    tma-study check-gpu                                                    says whether this machine can measure
    tma-study catalog   --out DIR [--catalog DIR]      validate catalog/*.yaml, write its tables (CPU)

The paper tier's commands (claims, rules-of-thumb, compare, paper-generated, build-paper,
readme-tables) are described in tma_study.paper_cli.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import config as config_mod
from . import gpu as gpu_mod
from . import paper_cli
from .studies import discover

DEFAULT_CONFIG = config_mod.REPO_ROOT / "config" / "config.yaml"


def _study(name: str):
    studies = discover()
    if name not in studies:
        raise SystemExit(f"unknown study {name!r}; known studies: {', '.join(sorted(studies))}")
    return studies[name]


def _study_section(config_path: Path, name: str) -> dict:
    """The validated section studies.<name> of the pipeline config at ``config_path``."""
    config = config_mod.load(config_path, discover())
    if name not in config["studies"]:
        raise SystemExit(f"config file {config_path} has no section studies.{name}; it has: "
                         f"{', '.join(sorted(config['studies']))}")
    return config["studies"][name]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tma-study", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("compile", "measure", "aggregate", "tables"):
        p = sub.add_parser(name)
        p.add_argument("study")
        p.add_argument("--out", type=Path, required=True)
        p.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
        if name == "compile":
            p.add_argument("--workers", type=int, default=1,
                           help="compile in this many processes (no GPU needed; default 1)")
        if name == "aggregate":
            p.add_argument("--raw", type=Path, required=True)
            p.add_argument("--repeat", type=Path, default=None,
                           help="raw data of a second run of the same sweep, to measure reproducibility")
        if name == "tables":
            p.add_argument("--derived", type=Path, required=True)
            p.add_argument("--provenance", type=Path, required=True)
    p = sub.add_parser("publish", help="move a complete staged measurement into results/ atomically")
    p.add_argument("--staged", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("kernel-table", help="paper table of the kernels' resources and SASS checks")
    p.add_argument("study")
    p.add_argument("--kernels", type=Path, required=True,
                   help="results/<gpu>/<study>/kernels.csv: the kernels the data were measured with")
    p.add_argument("--out", type=Path, required=True)
    sub.add_parser("check-gpu")
    p = sub.add_parser("catalog", help="validate the data-movement catalog and write its tables")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--catalog", type=Path, default=config_mod.REPO_ROOT / "catalog")
    p.add_argument("--derived", type=Path, default=None, help="also write the counts the catalog's claims check")
    paper_cli.add_commands(sub)
    args = parser.parse_args(argv)

    if args.command in paper_cli.COMMANDS:
        return paper_cli.run(args)

    if args.command == "catalog":
        from . import catalog as catalog_mod
        try:
            catalog = catalog_mod.load(args.catalog)
            catalog_mod.write_tables(catalog, args.out)
            if args.derived is not None:
                catalog_mod.write_derived(catalog, args.derived)
        except catalog_mod.CatalogError as error:
            raise SystemExit(str(error)) from None
        return 0

    if args.command == "check-gpu":
        info = gpu_mod.require_hopper(gpu_mod.detect())
        print(json.dumps(info.as_dict(), indent=2))
        return 0
    if args.command == "publish":
        from .harness.atomic import publish_directory
        publish_directory(args.staged, args.out)
        return 0
    study = _study(args.study)
    if args.command == "kernel-table":
        from .compile_report import write_kernel_table
        write_kernel_table(study, args.kernels, args.out)
    elif args.command == "compile":
        from .compile_report import compile_study
        if args.workers < 1:
            parser.error(f"--workers {args.workers}: give at least 1")
        compile_study(study, _study_section(args.config, study.name), args.out, workers=args.workers)
    elif args.command == "measure":
        config = config_mod.load(args.config, discover())
        gpu_mod.require_architecture(gpu_mod.detect(), study.architectures, f"study {study.name}")
        from .harness.gpu_lock import exclusive_gpu
        with exclusive_gpu(f"measure {study.name}"):
            study.entry("measure")(config["studies"][study.name], config.get("gpu_probe", {}), args.out)
    elif args.command == "aggregate":
        study.entry("aggregate")(args.raw, args.out, args.repeat)
    elif args.command == "tables":
        prov = json.loads(args.provenance.read_text())
        study.entry("write_tables")(args.derived, prov, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
