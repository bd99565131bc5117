"""Every number in the paper's text, as a LaTeX macro computed from the pipeline's outputs.

``paper/generated/macros.tex`` holds one ``\\newcommand`` per number. Each study with a
``macros`` entry point returns ``{name: text}`` from its derived data (its names begin with
the study's name in camelCase, e.g. ``crossoverPeakGbpsTmaHbm``); this module adds the GPU
of the run and the claims' tally, checks every name and value, and writes the file. The
paper never types a number: a missing or malformed value stops the build here, by name.
"""
from __future__ import annotations

import re
from pathlib import Path

from tma_study.atomic import atomic_write_text
from tma_study.harness.provenance import read as read_provenance
from tma_study.report.numbers import MacroError, camel, size
from tma_study.report.tables import latex_escape

from tma_study.advisor.validation import macros as advisor_macros
from tma_study.advisor.validation.run import FIGURES as ADVISOR_FIGURES
from tma_study.advisor.validation.run import TABLES as ADVISOR_TABLES

from . import catalog, claims_registry, projection
from .catalog import TABLES as CATALOG_TABLES
from .claims import (
    BY_RUN_FILE,
    FAIL,
    NOT_MEASURED,
    PASS,
    read_outcomes,
    run_agreement,
    same_sweep_runs,
)

ADVISOR_DERIVED = Path("advisor") / "derived"     # results/<label>/advisor/derived (tma-study advisor-validate)
MACRO_NAME = re.compile(r"^[A-Za-z]+$")          # LaTeX command names: letters only
FORBIDDEN_VALUES = ("nan", "none", "inf", "??", "todo", "xxx")


class RawTex(str):
    """A macro value that is LaTeX already (written as is, not escaped): claim references."""


# ---------------------------------------------------------------- collecting and checking

def check_macros(macros: dict, source: str, prefix: str = "") -> None:
    """Raise MacroError naming every bad name or value of ``source``."""
    problems = []
    for name, value in macros.items():
        if not MACRO_NAME.match(str(name)):
            problems.append(f"{source}: macro name {name!r} must be letters only (LaTeX)")
        elif prefix and not name.startswith(prefix):
            problems.append(f"{source}: macro {name!r} must begin with {prefix!r}")
        text = str(value).strip()
        if not isinstance(value, str) or not text or text.lower() in FORBIDDEN_VALUES:
            problems.append(f"{source}: macro {name!r} has no usable value ({value!r}); give it text")
    if problems:
        raise MacroError("invalid paper macros:\n  " + "\n  ".join(problems))


def run_macros(results_dir: Path, studies: dict) -> dict[str, str]:
    """The GPU the data came from, from the first study's provenance, and the fewest runs of the
    same sweep any measured study has in results/ (the reference's own and those of other labels,
    tma_study.paper.claims.same_sweep_runs: what the claims' spreads are taken over): over all of
    them, over those measured more than once, and the studies measured once (their names)."""
    measured = [name for name in studies if (Path(results_dir) / name / "provenance.json").is_file()]
    if not measured:
        raise MacroError(f"no provenance.json under {results_dir}/ for studies {', '.join(studies)}")
    gpu = read_provenance(Path(results_dir) / measured[0] / "provenance.json", study=measured[0])["gpu"]
    runs = {name: 1 + len(same_sweep_runs(Path(results_dir) / name)) for name in measured}
    repeated, once = [n for n in runs.values() if n > 1], [name for name, n in runs.items() if n == 1]
    return {"gpuName": str(gpu.get("name", "unknown GPU")), "gpuSmCount": str(gpu.get("sm_count", "?")),
            "gpuLtwoSize": size(gpu.get("l2_bytes", 0)) if gpu.get("l2_bytes") else "unknown",
            "resultsLabel": Path(results_dir).name, "studiesCount": str(len(studies)),
            "sweepRunsMin": str(min(runs.values())), "sweepRunsMinRepeated": str(min(repeated or [1])),
            "sweepRunsOnceStudies": str(len(once)),
            "sweepRunsOnceNames": ", ".join(f"the {latex_escape(name)} study" for name in once) or "none"}


def claims_macros(claims_tsv: Path | None, studies: dict) -> dict[str, str]:
    """The claims' tally, and per figure or table the claims resting on it as references to the
    claims table (``\\claimsOfCrossoverBandwidth`` -> "C4, C5"), for captions that cannot go stale."""
    if claims_tsv is None:
        return {}
    outcomes = read_outcomes(claims_tsv)
    statuses = list(outcomes["status"])
    macros = {"claimsTotal": str(len(statuses)), "claimsPassed": str(statuses.count(PASS)),
              "claimsFailed": str(statuses.count(FAIL)), "claimsNotMeasured": str(statuses.count(NOT_MEASURED))}
    by_run = Path(claims_tsv).parent / BY_RUN_FILE
    if by_run.is_file():                     # the claims judged again on the other runs of their sweep
        checked, differing = run_agreement(read_outcomes(by_run))
        macros.update({"claimsOtherRunsChecked": str(len(checked)), "claimsOtherRunsDiffer": str(len(differing)),
                       "claimsOtherRunsSame": str(len(checked) - len(differing))})
    counts = claims_registry.counts(claims_registry.load())     # config/claims_registry/: how each was registered
    macros.update({"claimsRegistered": str(counts["claims"]), "claimsRegisteredBeforeData": str(counts["before_data"]),
                   "claimsRegisteredAfterData": str(counts["after_data"]), "claimsRestored": str(counts["restored"]),
                   "claimsRestating": str(counts["restating"])})
    names = [*CATALOG_TABLES, *ADVISOR_FIGURES, *ADVISOR_TABLES,
             *(f for study in studies.values() for f in (*study.figures, *study.tables))]
    for figure in names:
        ids = list(outcomes[outcomes.figure == figure]["id"])
        macros[camel("claims of", figure)] = (RawTex(", ".join(rf"\claimref{{{i}}}" for i in ids)) if ids
                                              else "no claim")
    return macros


def source_macros(results_dir: Path, catalog_derived: Path | None) -> dict[str, str]:
    """The catalog's counts (from its derived tables) and the labelled B200 projection (published
    specifications applied to the measured crossover), where their inputs are present."""
    macros = {}
    if catalog_derived is not None and (Path(catalog_derived) / "mechanisms.csv").is_file():
        macros.update(catalog.macros(catalog_derived))
    crossover = Path(results_dir) / "crossover" / "derived"
    if (crossover / "peaks.csv").is_file():
        macros.update(projection.macros(projection.load_specs(), crossover))
        macros.update(projection.hopper_macros(projection.load_specs(), crossover))
    advisor = Path(results_dir) / ADVISOR_DERIVED
    if (advisor / "scores.csv").is_file():
        macros.update(advisor_macros.macros(advisor))
    return macros


def collect(results_dir: Path, studies: dict, claims_tsv: Path | None = None,
            catalog_derived: Path | None = None) -> dict[str, str]:
    """Every macro: the run's GPU, the claims' tally, the catalog, the projection and each study's own."""
    macros = {**run_macros(results_dir, studies), **claims_macros(claims_tsv, studies),
              **source_macros(results_dir, catalog_derived)}
    check_macros(macros, "tma_study.paper.macros")
    for name, study in studies.items():
        if study.macros is None:
            continue
        study_dir = Path(results_dir) / name
        provenance = read_provenance(study_dir / "provenance.json", study=name)
        try:
            own = study.entry("macros")(study_dir / "derived", provenance)
        except MacroError as error:
            raise MacroError(f"study {name!r} ({study.macros}): {error}") from None
        check_macros(own, f"study {name!r} ({study.macros})", prefix=camel(name))
        clashes = sorted(set(own) & set(macros))
        if clashes:
            raise MacroError(f"study {name!r} redefines macros {', '.join(clashes)}")
        macros.update(own)
    return macros


def _tex(text: str) -> str:
    """Escaped for LaTeX; a number stays on one line with its unit, identifiers may wrap at '_'."""
    escaped = latex_escape(text).replace(r"\_", r"\_\allowbreak{}")
    return re.sub(r"(\d) (B|KiB|MiB|GiB|min|s|ns|SMs)\b", r"\1~\2", escaped)


def render(macros: dict[str, str], source: str) -> str:
    lines = [f"% Generated by `tma-study paper-generated` from {source}; do not edit.",
             "% Every number in the paper's text is one of these macros."]
    for name in sorted(macros):
        value = macros[name] if isinstance(macros[name], RawTex) else _tex(macros[name])
        lines.append(f"\\newcommand{{\\{name}}}{{{value}}}")
    return "\n".join(lines) + "\n"


def parse(tex: str) -> dict[str, str]:
    """{name: value} of a macros.tex (for tests and checks)."""
    return dict(re.findall(r"^\\newcommand\{\\([A-Za-z]+)\}\{(.*)\}$", tex, flags=re.MULTILINE))


def write(results_dir: Path, studies: dict, out: Path, claims_tsv: Path | None = None,
          catalog_derived: Path | None = None) -> Path:
    atomic_write_text(Path(out), render(collect(results_dir, studies, claims_tsv, catalog_derived), f"{results_dir}/"))
    return Path(out)
