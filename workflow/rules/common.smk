# Shared by every rule file: the project root, the validated config, the studies it asks for,
# where their files live (tma_study.pipeline.Layout); the raw data are checked by the first job
# (workflow/rules/checks.smk), not here, so that a dry run answers at once.
import json
import os
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import update_config

# The project root is this workflow's folder, whatever checkout the venv's package comes from:
# this checkout's packages go first on the path (for this process and, through PYTHONPATH,
# every job), and $TMA_STUDY_ROOT tells the package where schemas, config and results are.
ROOT = Path(workflow.basedir).resolve()
# What the main job writes must be writable (a read-only checkout fails later, in Snakemake's
# own bookkeeping, with a traceback): the checkout and each of these folders that exists.
_WRITTEN = [
    ".snakemake",
    "build",
    "logs",
    "figures",
    "paper/tables",
    "paper/generated",
    "results",
]
_WRITTEN += [str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("results/*/*/derived"))]
_READ_ONLY = [
    f"{name}/"
    for name in [".", *_WRITTEN]
    if (ROOT / name).is_dir() and not os.access(ROOT / name, os.W_OK)
]
if _READ_ONLY:
    raise WorkflowError(
        f"the checkout {ROOT} cannot be written here: {', '.join(_READ_ONLY)} must be writable (the "
        "main job writes .snakemake/, build/, logs/, figures/, paper/tables/, paper/generated/ and "
        "results/<label>/); copy the checkout to a writable folder (cp -r) or make these writable"
    )
_PACKAGES = ROOT / "build" / "python-path"
for _name, _source in (
    ("tma_study", ROOT / "src" / "tma_study"),
    ("tma_kernels", ROOT / "kernels"),
):
    _link = _PACKAGES / _name
    if not (_link.is_symlink() and _link.resolve() == _source):
        _PACKAGES.mkdir(parents=True, exist_ok=True)
        _link.unlink(missing_ok=True)
        _link.symlink_to(_source, target_is_directory=True)
os.environ["TMA_STUDY_ROOT"] = str(ROOT)
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(_PACKAGES), os.environ.get("PYTHONPATH")])
)
sys.path.insert(0, str(_PACKAGES))

import tma_study  # noqa: E402

if not Path(tma_study.__file__).resolve().is_relative_to(ROOT):
    raise WorkflowError(
        f"Python imports tma_study from {Path(tma_study.__file__).parent}, not from this "
        f"workflow's checkout {ROOT}: start Snakemake in a fresh process"
    )

from tma_study import config as config_mod  # noqa: E402
from tma_study import gpu as gpu_mod  # noqa: E402
from tma_study import schedule  # noqa: E402
from tma_study.harness.provenance import ProvenanceError  # noqa: E402
from tma_study.pipeline import (  # noqa: E402
    LABEL_VARIABLE,
    TARGETS_VARIABLE,
    Layout,
    MeasureTarget,
    MissingDataError,
    ResultsLabelError,
    measure_targets,
    results_label,
    study_config_text,
)
from tma_study.harness.runs import (
    Interpreter,
    content_digest,
    sealed_digest,
)  # noqa: E402
from tma_study.studies import discover  # noqa: E402

KNOWN_STUDIES = discover()
try:
    # config/config.yaml under the command line's --configfile and --config values (read here,
    # not by a configfile: directive, so a YAML error names its file, line and column)
    if not workflow.config_settings.replace_workflow_config:
        _merged = config_mod.read_yaml(ROOT / "config" / "config.yaml")
        update_config(_merged, dict(config))
        config.clear()
        config.update(_merged)
    config_mod.coerce_command_line(config, workflow.config_settings.config)
    config_mod.validate(config, KNOWN_STUDIES, expand=config.get("measure") is True)
    _requested = {
        name: KNOWN_STUDIES[name] for name in config_mod.selected_studies(config)
    }
    _majors = sorted({m for study in _requested.values() for m in study.architectures})
    if config["measure"] and config.get("measure_gpus"):
        # a cluster's GPU kinds (docs/cluster.md): decided once, where the run starts; its jobs
        # (started on other nodes, maybe another day) read them from the environment
        if os.environ.get(TARGETS_VARIABLE):
            MEASURE_TARGETS = [
                MeasureTarget(**t) for t in json.loads(os.environ[TARGETS_VARIABLE])
            ]
        else:
            MEASURE_TARGETS = measure_targets(config, root=ROOT)
        os.environ[TARGETS_VARIABLE] = json.dumps([vars(t) for t in MEASURE_TARGETS])
        _label = MEASURE_TARGETS[0].label
    else:
        if (
            config["measure"]
            and not config.get("results_label")
            and os.environ.get(LABEL_VARIABLE)
        ):
            config["results_label"] = os.environ[
                LABEL_VARIABLE
            ]  # a job of this run: the run's label
        _label = results_label(config, majors=_majors, root=ROOT)
        MEASURE_TARGETS = measure_targets(config, _label) if config["measure"] else []
    LAYOUT = Layout(
        _requested,
        _label,
        measured_labels=tuple(t.label for t in MEASURE_TARGETS[1:]),
    )
    if config["measure"]:
        # measure_gpus: a cluster's GPUs are not visible here, each measure job checks its own
        if not config.get("measure_gpus"):
            os.environ[LABEL_VARIABLE] = LAYOUT.label
            LAYOUT, _skipped = LAYOUT.measurable_on(
                gpu_mod.detect().compute_capability[0]
            )
            for _name in _skipped:
                print(
                    f"note: study {_name} cannot measure on this GPU: not measured or analysed in this run",
                    file=sys.stderr,
                )
            if "gpu" not in workflow.global_resources.keys():
                # one measure job per visible GPU at a time: a job waiting for a GPU would
                # otherwise hold a core that a compile job could use
                workflow.register_resource("gpu", len(gpu_mod.list_devices()))
        _missing = {n: s.missing_measure_modules() for n, s in LAYOUT.studies.items()}
        if any(_missing.values()):
            raise gpu_mod.GpuRequirementError(
                "the measure step needs "
                + "; ".join(
                    f"{', '.join(m)} for study {n}" for n, m in _missing.items() if m
                )
                + ": pip install -e '.[measure]' (docs/dependencies.md)"
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
        for _name in LAYOUT.studies:
            for _copy, _same in LAYOUT.same_runs(_name):
                print(
                    f"note: {_copy}/ holds the same raw files as {_same}/ (the same sealed "
                    "digests): the same run, not another; left out",
                    file=sys.stderr,
                )
except (
    config_mod.ConfigError,
    gpu_mod.GpuRequirementError,
    MissingDataError,
    ResultsLabelError,
    ProvenanceError,
) as error:
    raise WorkflowError(str(error)) from None

# The figures and tables of any label but the committed reference (config/config.yaml's
# reference_gpu) go to outputs/<label>/: another reference never overwrites the checkout's own.
LAYOUT = LAYOUT.own_outputs(
    config_mod.read_yaml(ROOT / "config" / "config.yaml")["reference_gpu"]
)
MEASURE = config["measure"]
STUDIES = LAYOUT.studies
# A measure run on one node compiles on every core but one, which the GPU job keeps, and
# compiles the studies in the order that keeps the GPU busy (tma_study.schedule).
COMPILE_PRIORITY = schedule.compile_priorities(
    {name: study.cost_minutes for name, study in STUDIES.items()}
)
COMPILE_THREADS = (
    max(1, (workflow.cores or 2) - 1)
    if MEASURE and not config.get("measure_gpus")
    else 64  # Snakemake scales this down to the cores it is given (-c)
)
LABEL = LAYOUT.label
RESULTS = LAYOUT.results
FIGURE_STUDY = LAYOUT.figure_study()
# jobs run the CLI with the interpreter that runs Snakemake (its venv); every value that goes
# into a shell command is quoted (shlex.quote, or {...:q} in a rule's shell string)
PYTHON = Interpreter(sys.executable)
