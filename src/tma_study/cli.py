"""Command line the Snakemake rules call (also usable by hand).

    tma-study compile   STUDY --out DIR [--config FILE] [--workers N]      (CPU) the study's compile step
                        (numba -> PTX -> cubin -> SASS through the kernel cache, or the study's own): resources.csv;
                        fails when an expected instruction is missing
    tma-study measure   STUDY --out DIR [--config config/config.yaml]      (Hopper GPU)
                        [--expect-gpu SLUG]  (--config takes a whole pipeline config, YAML or JSON;
                        the job claims one free visible GPU: tma_study.harness.gpu_lock)
    tma-study aggregate STUDY --raw DIR --out DIR [--repeat DIR]           (CPU) checks the raw data (sealed) first
    tma-study tables    STUDY --derived DIR --provenance FILE --out DIR    (CPU)
    tma-study publish   --staged DIR --out DIR                             check a finished measurement, seal its raw
                                                                           files in its provenance, copy it into results/
    tma-study seal      DIR...                                             seal results/<label>/<study>/ folders
                                                                           published before seals (once)
    tma-study kernel-table STUDY --kernels CSV --out DIR                   (CPU) from results/<gpu>/<study>/kernels.csv
    tma-study check-gpu                                                    says whether this machine can measure
    tma-study check-raw STUDY --raw DIR                                    check raw data against the study's schema
    tma-study check-runs --run STUDY=DIR... --out FILE [--workers N]      check runs as the analysis reads them (sealed,
                                                                           provenance checked, schema); FILE: the report
    tma-study steps 'COMMAND ARGS' ...                                    several of these commands in one process (one
                                                                           job, one start-up), in order; stops at a failing one
    tma-study check-provenance FILE...                                     check provenance.json files, and whether
                                                                           the commit each names is in the repository
                                                                           and holds its code
    tma-study check-config FILE...                                         config/config.yaml under these override
                                                                           files (as --configfile), validated

The paper tier's commands (catalog, claims, rules-of-thumb, compare, paper-generated,
build-paper, readme-tables) are described in tma_study.paper.cli. An error is one line on
stderr and a non-zero exit; $TMA_STUDY_TRACEBACK=1 shows the traceback of an unexpected one.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from . import config as config_mod
from . import gpu as gpu_mod
from .advisor import cli as advisor_cli
from .paper import cli as paper_cli
from .studies import discover

DEFAULT_CONFIG = config_mod.REPO_ROOT / "config" / "config.yaml"
TRACEBACK_VARIABLE = "TMA_STUDY_TRACEBACK"


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


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


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tma-study", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("compile", "measure", "aggregate", "tables"):
        p = sub.add_parser(name)
        p.add_argument("study")
        p.add_argument("--out", type=Path, required=True)
        p.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
        if name == "measure":
            p.add_argument("--expect-gpu", metavar="SLUG", default=None,
                           help="refuse to measure unless the claimed GPU's slug is SLUG "
                                "(a cluster job that asked the scheduler for that GPU model)")
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
            p.add_argument("--kernels", type=Path, default=None,
                           help="also the kernel table from this kernels.csv (as kernel-table does)")
    p = sub.add_parser("publish", help="check a complete staged measurement, copy it into results/ atomically")
    p.add_argument("--staged", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("seal", help="seal the raw files of results/<label>/<study>/ folders published before seals")
    p.add_argument("folders", type=Path, nargs="+", metavar="DIR",
                   help="results/<label>/<study>/ folders to seal (a seal already there is checked, never rewritten)")
    p = sub.add_parser("kernel-table", help="paper table of the kernels' resources and SASS checks")
    p.add_argument("study")
    p.add_argument("--kernels", type=Path, required=True,
                   help="results/<gpu>/<study>/kernels.csv: the kernels the data were measured with")
    p.add_argument("--out", type=Path, required=True)
    sub.add_parser("check-gpu")
    p = sub.add_parser("check-raw", help="check a study's raw data against its raw_schema.yaml")
    p.add_argument("study")
    p.add_argument("--raw", type=Path, required=True)
    p = sub.add_parser("check-runs", help="check runs as the analysis reads them: the main job's first job")
    p.add_argument("--run", dest="runs", action="append", required=True, metavar="STUDY=DIR",
                   help="a study and its run's folder (results/<label>/<study>/); repeat for each run")
    p.add_argument("--out", type=Path, required=True, help="the report, written once every run passed")
    p.add_argument("--workers", type=int, default=1, help="check in this many processes (default 1)")
    p = sub.add_parser("steps", help="several commands in one process, in order; stops at a failing one")
    p.add_argument("commands", nargs="+", metavar="'COMMAND ARGS'",
                   help="a command of this CLI with its arguments, quoted as one argument")
    p = sub.add_parser("check-provenance", help="check provenance.json files and the commits they name")
    p.add_argument("files", type=Path, nargs="+")
    p = sub.add_parser("check-config", help="validate config/config.yaml under override files")
    p.add_argument("files", type=Path, nargs="*")
    paper_cli.add_commands(sub)
    advisor_cli.add_command(sub)
    advisor_cli.add_validate_command(sub)
    return parser


def _measure(study, args) -> None:
    """Everything that can refuse the run is checked before the GPU is touched."""
    from .harness import source
    missing = study.missing_measure_modules()
    if missing:
        raise gpu_mod.GpuRequirementError(
            f"study {study.name}'s measure step needs {', '.join(missing)}: pip install -e '.[measure]' "
            "(docs/dependencies.md: the CUDA 13 build the reference data were measured with)")
    config = config_mod.load(args.config, discover(), expand=True)
    source.git_state(config_mod.REPO_ROOT)      # a stated commit that is not these files stops here
    from .harness.gpu_lock import claim_device
    with claim_device(f"measure {study.name}"):   # pins CUDA_VISIBLE_DEVICES before any CUDA call
        info = gpu_mod.require_architecture(gpu_mod.detect(), study.architectures, f"study {study.name}")
        if args.expect_gpu is not None and info.slug != args.expect_gpu:
            raise gpu_mod.GpuRequirementError(
                f"this job was to measure {study.name} on a GPU whose slug is {args.expect_gpu!r} (config key "
                f"measure_gpus), but it got {info.name} (slug {info.slug!r}): map {args.expect_gpu!r} to "
                "the scheduler's name of that GPU model in measure_gpus")
        study.entry("measure")(config["studies"][study.name], config.get("gpu_probe", {}), args.out)


def _check_config(files: list[Path]) -> None:
    from snakemake.utils import update_config
    config = config_mod.read_yaml(DEFAULT_CONFIG)
    for path in files:
        override = config_mod.read_yaml(path)
        if not isinstance(override, dict):
            raise config_mod.ConfigError(f"config file {path} must hold a mapping, not {type(override).__name__}")
        update_config(config, override)
    config_mod.validate(config, discover())
    print(f"valid: {', '.join(map(str, [DEFAULT_CONFIG, *files]))}; studies run: "
          f"{', '.join(config_mod.selected_studies(config))}")


def _publish(staged: Path, out: Path) -> None:
    from .harness import provenance, publishing
    record = provenance.read(Path(staged) / "provenance.json")
    publishing.publish(_study(record["study"]), staged, out)       # bad data never reach results/


def _seal(folders: list[Path]) -> None:
    from .harness import provenance, publishing
    studies = discover()
    for folder in folders:
        if Path(folder).name not in studies and not (Path(folder) / "provenance.json").exists():
            print(f"{folder}: not a study's run (results/<label>/<study>/): left alone")
            continue
        record = provenance.read(Path(folder) / "provenance.json")
        print(publishing.seal_published(_study(record["study"]), folder))


def _check_provenance(files: list[Path]) -> None:
    from .harness import provenance, provenance_checks, source
    for path in files:
        record = provenance.read(path)
        said = [provenance_checks.check_commit(record, config_mod.REPO_ROOT, str(path)),
                source.check_recorded(record, config_mod.REPO_ROOT)]
        print(f"{path}: valid; {'; '.join(filter(None, said))}")


def _check_runs(runs: list[str], out: Path, workers: int) -> None:
    from .atomic import atomic_write_text
    from .harness import run_checks
    pairs = [run.partition("=") for run in runs]
    lines = run_checks.check_runs([(_study(name), Path(folder)) for name, _, folder in pairs],
                                  config_mod.REPO_ROOT, workers)
    atomic_write_text(out, "".join(f"{line}\n" for line in lines))


def _run(args, parser) -> int:
    config_mod.check_root()                     # $TMA_STUDY_ROOT, where set, must be a checkout
    if args.command in paper_cli.COMMANDS:
        return paper_cli.run(args)
    if args.command == "advise":
        return advisor_cli.run(args)
    if args.command == "advisor-validate":
        return advisor_cli.run_validate(args)
    if args.command == "steps":
        return _steps(args.commands)
    if args.command == "check-gpu":
        print(json.dumps(gpu_mod.require_hopper(gpu_mod.detect()).as_dict(), indent=2))
    elif args.command == "publish":
        _publish(args.staged, args.out)
    elif args.command == "seal":
        _seal(args.folders)
    elif args.command == "check-config":
        _check_config(args.files)
    elif args.command == "check-provenance":
        _check_provenance(args.files)
    elif args.command == "check-runs":
        _check_runs(args.runs, args.out, args.workers)
    else:
        _run_study_command(args, parser, _study(args.study))
    return 0


def _run_study_command(args, parser, study) -> None:
    if args.command == "kernel-table":
        study.entry("kernel_table")(study, args.kernels, args.out)
    elif args.command == "compile":
        if args.workers < 1:
            parser.error(f"--workers {args.workers}: give at least 1")
        study.entry("compile")(study, _study_section(args.config, study.name), args.out, workers=args.workers)
    elif args.command == "measure":
        _measure(study, args)
    elif args.command == "aggregate":
        from .harness import provenance, seal
        for folder in filter(None, (args.raw, args.repeat)):   # analysis reads published, sealed data
            seal.require(provenance.read(Path(folder) / "provenance.json", study=study.name), folder)
        study.entry("aggregate")(args.raw, args.out, args.repeat)
    elif args.command == "check-raw":
        from .harness import raw_data
        raw = raw_data.load(study, args.raw)
        sealed = "sealed" if raw.provenance.get("raw_files") else "not sealed (a staged measurement: publish seals it)"
        print(f"{args.raw}: valid {study.name} raw data ({raw.provenance['configurations']} configurations, {sealed})")
    elif args.command == "tables":
        from .harness import provenance
        study.entry("write_tables")(args.derived, provenance.read(args.provenance, study=study.name), args.out)
        if args.kernels is not None:
            study.entry("kernel_table")(study, args.kernels, args.out)


def one_line(error: BaseException) -> str:
    """An error as one line: a project error's own message; anything else with its type."""
    text = " ".join(str(error).split("\n"))
    text = " ".join(text.split()) or type(error).__name__
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.filename}: {error.strerror or text}"
    if type(error).__module__.startswith(("tma_study", "tma_kernels")):
        return text
    return (f"{type(error).__name__}: {text} (unexpected: ${TRACEBACK_VARIABLE}=1 shows where)")


def _steps(commands: list[str]) -> int:
    """Each of ``commands`` (a command line of this CLI, quoted as one argument) in turn, in this
    process: the analysis of one study is one job instead of one per run and table. The first
    that fails stops the rest; its status is the result."""
    for command in commands:
        status = main(shlex.split(command))
        if status:
            return status
    return 0


def main(argv=None) -> int:
    from .cli_help import documented
    parser = documented(_parser())
    args = parser.parse_args(argv)
    try:
        return _run(args, parser)
    except KeyboardInterrupt:
        print("tma-study: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001: every error ends as one line (below)
        if os.environ.get(TRACEBACK_VARIABLE):
            raise
        print(f"tma-study {args.command}: error: {one_line(error)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
