"""What `tma-study --help` says: a line for every command and every option of ``tma_study.cli``,
and the top-level list of commands (the study tier's and the paper tier's alike).

Help given where an argument is defined wins; this module fills in what is left, so the
argument definitions stay short. ``documented`` is applied to the finished parser.
"""
from __future__ import annotations

import argparse

INTRO = """\
The TMA study's command line: the steps the Snakemake rules run, usable by hand. `snakemake -c4`
runs them all in order (README.md); `tma-study COMMAND --help` describes one command.

An error is one line on stderr and a non-zero exit (2 for a usage error);
$TMA_STUDY_TRACEBACK=1 shows the traceback of an unexpected one."""

COMMANDS = {
    "compile": "(CPU) a study's compile step: every kernel its sweep times, built through the kernel "
               "cache and checked (registers, spills, required SASS instructions) into resources.csv",
    "measure": "(Hopper GPU) measure a study's sweep into --out: raw data, kernels.csv, provenance.json",
    "aggregate": "(CPU) check a study's raw data against its schema, then write its derived tables",
    "tables": "(CPU) a study's paper tables (paper/tables/<table>.tex|md) from its derived tables",
    "check-gpu": "say (as JSON) whether this machine's GPU can measure, or stop saying why not",
}

# (command, option dest) first, then the option dest alone
OPTIONS = {
    "study": "the study's name (a folder of src/tma_study/studies/, e.g. crossover)",
    ("compile", "out"): "folder for resources.csv and compile.json (the pipeline: build/compile/<study>/)",
    ("measure", "out"): "staging folder for the raw data (publish copies it into results/<label>/<study>/)",
    ("aggregate", "out"): "folder for the derived tables (the pipeline: results/<label>/<study>/derived/)",
    ("tables", "out"): "folder for the paper tables (the pipeline: paper/tables/)",
    ("publish", "out"): "the results folder to create (results/<label>/<study>/); refused where it exists",
    ("kernel-table", "out"): "folder for <study>_kernels.tex|md (the pipeline: paper/tables/)",
    ("compile", "config"): "pipeline config (YAML or JSON) holding the study's section (default: config/config.yaml)",
    ("measure", "config"): "pipeline config (YAML or JSON) holding the study's section, e.g. config/smoke.yaml "
                           "for a quick check (default: config/config.yaml)",
    ("aggregate", "config"): "accepted for symmetry with compile and measure; aggregate reads only --raw",
    ("tables", "config"): "accepted for symmetry with compile and measure; tables reads only its inputs",
    "raw": "folder of the study's raw data and provenance.json (results/<label>/<study>/)",
    "derived": "folder of the study's derived tables (results/<label>/<study>/derived/)",
    "provenance": "the run's provenance.json (results/<label>/<study>/provenance.json)",
    "staged": "a finished measurement's folder (build/measure/<label>/<study>/), checked before it is copied",
    "files": "the files to check",
}


def _option_help(command: str, action: argparse.Action) -> str | None:
    return OPTIONS.get((command, action.dest)) or OPTIONS.get(action.dest)


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _command_help(sub: argparse._SubParsersAction) -> dict[str, str | None]:
    """{command: its one-line help}, in the order the commands were defined."""
    given = {choice.dest: choice.help for choice in sub._choices_actions}
    return {name: given.get(name) or COMMANDS.get(name) for name in sub.choices}


def documented(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with help text on every command and option that lacks one; `tma-study --help`
    then lists every command (argparse lists only those given help)."""
    sub = _subcommands(parser)
    helps = _command_help(sub)
    sub._choices_actions[:] = [sub._ChoicesPseudoAction(name, (), text) for name, text in helps.items() if text]
    for command, subparser in sub.choices.items():
        subparser.description = subparser.description or helps[command]
        for action in subparser._actions:
            if not action.help:
                action.help = _option_help(command, action)
    sub.metavar = "COMMAND"
    parser.description = INTRO
    return parser


def undocumented(parser: argparse.ArgumentParser) -> list[str]:
    """'command' or 'command --option' for each one without help text (a test keeps this empty)."""
    sub = _subcommands(parser)
    missing = [name for name, text in _command_help(sub).items() if not text]
    for command, subparser in sub.choices.items():
        missing += [f"{command} {action.option_strings[0] if action.option_strings else action.dest}"
                    for action in subparser._actions if not action.help]
    return missing
