# Shared by every rule file: the validated config, the studies it asks for, and where
# their files live (tma_study.pipeline.Layout).
import json
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from tma_study import config as config_mod
from tma_study import gpu as gpu_mod
from tma_study.pipeline import Layout, MissingDataError, results_label
from tma_study.studies import discover

KNOWN_STUDIES = discover()
try:
    config_mod.validate(config_mod.coerce_command_line(config), KNOWN_STUDIES)
    _requested = {name: KNOWN_STUDIES[name] for name in config["studies"]}
    _majors = sorted({m for study in _requested.values() for m in study.architectures})
    LAYOUT = Layout(_requested, results_label(config, majors=_majors))
    if config["measure"]:
        LAYOUT, _skipped = LAYOUT.measurable_on(gpu_mod.detect().compute_capability[0])
        for _name in _skipped:
            print(
                f"note: study {_name} cannot measure on this GPU: not measured or analysed in this run",
                file=sys.stderr,
            )
    else:
        LAYOUT, _skipped = LAYOUT.without_absent_optional_studies()
        for _name in _skipped:
            print(
                f"note: study {_name} has no data in {LAYOUT.results}/{_name}/ yet: not analysed "
                "(measure it with --config measure=true on its GPU)",
                file=sys.stderr,
            )
        LAYOUT.check_raw_data_present()
except (config_mod.ConfigError, gpu_mod.GpuRequirementError, MissingDataError) as error:
    raise WorkflowError(str(error)) from None

MEASURE = config["measure"]
STUDIES = LAYOUT.studies
LABEL = LAYOUT.label
RESULTS = LAYOUT.results
FIGURE_STUDY = LAYOUT.figure_study()
# jobs run the CLI with the interpreter that runs Snakemake (its venv)
PYTHON = sys.executable


def study_config_text(name):
    """build/config/<name>.json: the validated config holding study ``name`` alone."""
    alone = {
        "measure": False,
        "reference_gpu": config["reference_gpu"],
        "studies": {name: config["studies"][name]},
    }
    if "gpu_probe" in config:
        alone["gpu_probe"] = config["gpu_probe"]
    return json.dumps(alone, indent=2, sort_keys=True) + "\n"
