# Shared by every rule file: validated config, discovered studies, where results live.
import json
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from tma_study import config as config_mod
from tma_study import gpu as gpu_mod
from tma_study.studies import discover

KNOWN_STUDIES = discover()
try:
    config_mod.validate(config_mod.coerce_command_line(config), KNOWN_STUDIES)
except config_mod.ConfigError as error:
    raise WorkflowError(str(error)) from None
STUDIES = {name: KNOWN_STUDIES[name] for name in config["studies"]}
MEASURE = config["measure"]
PYTHON = (
    sys.executable
)  # jobs run the CLI with the interpreter that runs Snakemake (its venv)


def results_label():
    """results/<label>/: the reference data, or a new measurement's own folder."""
    if not MEASURE:
        return config["reference_gpu"]
    try:
        info = gpu_mod.require_hopper(gpu_mod.detect())
    except gpu_mod.GpuRequirementError as error:
        raise WorkflowError(str(error)) from None
    label = config.get("results_label") or info.slug
    if label == config["reference_gpu"] and not config.get(
        "overwrite_reference", False
    ):
        label = f"{label}-rerun"  # never replace the committed reference unless asked
    return label


LABEL = results_label()
RESULTS = f"results/{LABEL}"
FIGURE_STUDY = {fig: name for name, study in STUDIES.items() for fig in study.figures}
TABLE_STUDY = {tab: name for name, study in STUDIES.items() for tab in study.tables}


def raw_files(study):
    s = STUDIES[study]
    return [f"{RESULTS}/{study}/{f}" for f in s.raw_files] + [
        f"{RESULTS}/{study}/provenance.json"
    ]


def repeat_files(study):
    """Raw data of a second run of the same sweep (results/<label>-rerun/), when present."""
    repeat = [f"results/{LABEL}-rerun/{study}/{f}" for f in STUDIES[study].raw_files]
    return repeat if all(Path(f).exists() for f in repeat) else []


def code_files(study):
    """The study's Python code and the shared report code: editing them reruns the analysis."""
    files = sorted(Path(f"src/tma_study/studies/{study}").glob("*.py"))
    return [str(f) for f in files + sorted(Path("src/tma_study/report").glob("*.py"))]


def derived_files(study):
    return [f"{RESULTS}/{study}/derived/{f}" for f in STUDIES[study].derived_files]


def check_reference_data():
    """Without measure=true, every study's raw data must already be there (committed)."""
    if MEASURE:
        return
    missing = [f for study in STUDIES for f in raw_files(study) if not Path(f).exists()]
    if missing:
        raise WorkflowError(
            "analysis needs raw data that is not here: "
            + ", ".join(missing)
            + ". Restore the "
            "committed reference data (git checkout -- results/) or measure on a Hopper GPU "
            "with --config measure=true."
        )


check_reference_data()


def all_outputs():
    outputs = []
    for name, study in STUDIES.items():
        outputs += derived_files(name)
        outputs += [
            f"figures/{fig}.{ext}" for fig in study.figures for ext in ("pdf", "png")
        ]
        outputs += [
            f"paper/tables/{tab}.{ext}" for tab in study.tables for ext in ("tex", "md")
        ]
        outputs += [f"paper/tables/{name}_kernels.{ext}" for ext in ("tex", "md")]
    return outputs
