"""Bad configs, names, paths and commands stop with a message naming the file or key and a
non-zero exit, before any job; or they are handled correctly. Each case works on a tmp copy of
the checkout (Snakemake dry runs: no job runs) or of the files it needs; none touches results/.
Raw data and provenance: test_bad_raw_data.py; the source a record names: test_provenance_source.py.
"""
import copy
import importlib.util
import os
import shutil
import stat

import pytest
import yaml

from bad_input_fixture import (REPO, assert_one_line_error, assert_stopped_before_any_job, raw_copy, run_cli,
                               snakemake)
from tma_study import config as config_mod
from tma_study.gpu import GpuInfo
from tma_study.atomic import PublishError, publish_directory
from tma_study.pipeline import ResultsLabelError, results_label
from tma_study.studies import discover

pytestmark = pytest.mark.usefixtures("results_unchanged")  # tests/cpu/conftest.py

STUDIES = discover()
SHIPPED = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def paged_kv_problems(change) -> str:
    config = copy.deepcopy(SHIPPED)
    change(config["studies"]["paged_kv"])
    with pytest.raises(config_mod.ConfigError) as error:
        config_mod.validate(config, STUDIES)
    return str(error.value)


# ------------------------------------------------------------------ config files and --config
def test_a_yaml_syntax_error_in_the_config_names_file_and_line(checkout):
    path = checkout / "config" / "config.yaml"
    path.write_text(path.read_text().replace("stages: [2]", "stages: [2", 1))
    status, output = snakemake(checkout)
    assert_stopped_before_any_job(status, output, "config/config.yaml, line", "not valid YAML")


def test_a_key_given_twice_in_the_config_names_it_and_its_line(checkout):
    path = checkout / "config" / "config.yaml"
    path.write_text(path.read_text() + "measure: true\n")
    status, output = snakemake(checkout)
    assert_stopped_before_any_job(status, output, "config/config.yaml, line", "'measure' is given twice")


def test_nested_command_line_values_are_typed_as_in_a_yaml_file(checkout):
    status, output = snakemake(checkout, "paper/tables/crossover_summary.md", "--config",
                               "studies={crossover: {stages: [4], timing: {min_samples: 12}}}")
    assert status == 0 and "is not allowed" not in output, output


def test_run_studies_measures_and_analyses_only_those(checkout):
    status, output = snakemake(checkout, "--config", "run_studies=crossover,dsm")
    assert status == 0, output
    assert "aggregate_crossover " in output and "aggregate_dsm " in output
    assert "aggregate_gemm" not in output and "aggregate_paged_kv" not in output


def test_run_studies_naming_an_unknown_study_is_refused(checkout):
    status, output = snakemake(checkout, "--config", "run_studies=crossover,nope")
    assert_stopped_before_any_job(status, output, "config key 'run_studies[1]'", "'nope'")


def test_config_without_a_value_is_refused_naming_the_key(checkout):
    """Snakemake parses --config itself: its message (and traceback) names the entry."""
    status, output = snakemake(checkout, "--config", "measure")
    assert_stopped_before_any_job(status, output, "'measure'", "name=value")


def test_a_missing_configfile_is_named(checkout, tmp_path):
    status, output = snakemake(checkout, "--configfile", str(tmp_path / "absent.yaml"))
    assert_stopped_before_any_job(status, output, "absent.yaml")


def test_check_config_names_the_line_of_an_override_file(tmp_path, capsys):
    """Snakemake's own message for a --configfile that does not parse names no file:
    tma-study check-config names file, line and column (docs/configuration.md)."""
    override = tmp_path / "mine.yaml"
    override.write_text("studies:\n  crossover:\n    stages: [2\n")
    status, error = run_cli(capsys, "check-config", override)
    assert_one_line_error(status, error, "mine.yaml, line 4", "not valid YAML")


def test_check_config_validates_an_override_over_the_defaults(tmp_path, capsys):
    override = tmp_path / "mine.yaml"
    override.write_text("run_studies: [dsm]\nstudies:\n  dsm:\n    cluster_sizes: [2, 3]\n")
    status, error = run_cli(capsys, "check-config", override)
    assert_one_line_error(status, error, "studies.dsm.cluster_sizes[1]", "3")


def test_a_bf16_consumer_list_holding_an_e4m3_only_consumer_is_refused():
    problems = paged_kv_problems(lambda s: s.update(decode_consumers={"bf16": ["kq", "kq_wgmma_rs_lazy"],
                                                                      "e4m3": ["kq"]}))
    assert ("studies.paged_kv.decode_consumers.bf16" in problems
            and "['kq_wgmma_rs_lazy'] run only at ['e4m3']" in problems)


def test_a_consumer_list_that_leaves_a_dtype_no_consumer_is_refused():
    problems = paged_kv_problems(lambda s: s.update(decode_consumers=["kq_wgmma_rs_lazy"]))
    assert "studies.paged_kv.decode_consumers" in problems and "every bf16 decode cell would be left out" in problems


def test_an_unknown_shape_in_a_phase_is_refused_at_startup():
    problems = paged_kv_problems(lambda s: s["phases"][-1].update(shapes=["llama3_9000b"]))
    assert "studies.paged_kv.phases[" in problems and "llama3_9000b" in problems


def test_the_measure_step_expands_the_sweep_before_any_gpu_work():
    config = copy.deepcopy(SHIPPED)
    config["studies"]["paged_kv"]["stages"]["decode"] = [6]
    config_mod.validate(copy.deepcopy(config), STUDIES)                 # the schema allows 6 stages
    with pytest.raises(config_mod.ConfigError, match="studies.paged_kv.stages.decode"):
        config_mod.validate(config, STUDIES, expand=True)               # no decode kernel fits them


# ------------------------------------------------------------------ the tma-study command line
def test_measure_with_a_missing_config_file_is_one_line(tmp_path, capsys):
    status, error = run_cli(capsys, "measure", "crossover", "--config", tmp_path / "absent.yaml", "--out", tmp_path)
    assert_one_line_error(status, error, "absent.yaml", "does not exist")


def test_measure_with_a_config_that_does_not_parse_names_its_line(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("measure: true\nstudies: {crossover: [\n")
    status, error = run_cli(capsys, "measure", "crossover", "--config", tmp_path / "bad.yaml", "--out", tmp_path)
    assert_one_line_error(status, error, "bad.yaml, line 3", "not valid YAML")


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_measuring_gemm_without_torch_says_what_to_install(tmp_path, capsys):
    status, error = run_cli(capsys, "measure", "gemm", "--out", tmp_path / "never")
    assert_one_line_error(status, error, "needs torch", "pip install -e '.[measure]'")


def test_a_usage_error_is_one_line(capsys):
    status, error = run_cli(capsys, "aggregate", "crossover")
    assert status == 2 and error.strip().count("\n") == 0 and "--raw" in error, error


def test_an_unexpected_error_is_one_line_too(capsys):
    status, error = run_cli(capsys, "compare", "crossover", "--reference", "h200", "--run", "nolabel",
                            "--out", "/nonexistent")
    assert_one_line_error(status, error, "ValueError", "TMA_STUDY_TRACEBACK")


# ------------------------------------------------------------------ names and paths
def test_a_results_folder_named_with_a_shell_command_is_refused(checkout):
    """results/x$(touch PWNED)/dsm/ with the dsm files in: refused before any job, nothing run."""
    evil = checkout / "results" / "x$(touch PWNED)" / "dsm"
    shutil.copytree(checkout / "results" / "h200" / "dsm", evil)
    status, output = snakemake(checkout, "figures/dsm_broadcast.pdf")
    assert_stopped_before_any_job(status, output, "results/x$(touch PWNED)/", "not a results label")
    assert not (checkout / "PWNED").exists()


@pytest.mark.parametrize("key, value", [("results_label", "../elsewhere"), ("reference_gpu", "h200;rm"),
                                        ("results_label", "$(touch PWNED)")])
def test_a_label_that_is_not_a_safe_name_is_refused(checkout, key, value):
    status, output = snakemake(checkout, "--config", f"{key}={value}")
    assert_stopped_before_any_job(status, output, f"config key '{key}'", "does not match")
    assert not (checkout / "PWNED").exists()


def test_the_project_root_is_the_workflows_folder_not_the_packages(checkout, tmp_path):
    """Two checkouts, one venv (installed from this one): a run in the other reads the other's
    schemas and runs the other's code."""
    schema = checkout / "workflow" / "schemas" / "config.schema.yaml"
    schema.write_text(schema.read_text().replace("    type: boolean\n    description: measure on",
                                                 "    enum: [true]\n    description: measure on", 1))
    marker = checkout / "src" / "tma_study" / "studies" / "dsm" / "__init__.py"
    marker.write_text(marker.read_text() + '\nprint("code of the other checkout")\n')
    status, output = snakemake(checkout, cwd=checkout)
    assert_stopped_before_any_job(status, output, "config key 'measure'", "code of the other checkout")


def test_a_project_root_that_is_not_a_checkout_is_named(tmp_path):
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-m", "tma_study", "check-config"], capture_output=True, text=True,
                            env={**os.environ, "TMA_STUDY_ROOT": str(tmp_path)})
    assert_one_line_error(result.returncode, result.stderr, str(tmp_path), "not a checkout", "TMA_STUDY_ROOT")


def test_measuring_into_committed_data_or_a_folder_of_another_gpu_is_refused():
    h200 = GpuInfo(name="NVIDIA H200", compute_capability=(9, 0), sm_count=132, l2_bytes=1, smem_per_block_optin_bytes=1,
                   smem_per_sm_bytes=1, max_sm_clock_khz=1, memory_clock_khz=1, memory_bus_bits=1,
                   total_memory_bytes=1, driver_version=13000)

    config = {"measure": True, "reference_gpu": "h200", "results_label": "h200-rerun", "studies": {}}
    with pytest.raises(ResultsLabelError, match="results/h200-rerun/ holds committed data"):
        results_label(config, detect=lambda: h200, root=REPO)
    config["results_label"] = "a100-mine"          # its provenance would contradict its folder
    with pytest.raises(ResultsLabelError, match="results/a100-mine/ names a GPU of model A100.*slug is 'h200'"):
        results_label(config, detect=lambda: h200, root=REPO)
    config["results_label"] = "mine"
    assert results_label(config, detect=lambda: h200, root=REPO) == "mine"


# ------------------------------------------------------------------ publishing a measurement
@pytest.fixture
def staged(tmp_path):
    return raw_copy(tmp_path / "staged", "dsm", sealed=False)


def test_publishing_gives_ordinary_permissions(tmp_path, staged):
    os.chmod(staged / "latency.csv", 0o600)
    publish_directory(staged, tmp_path / "results" / "mine" / "dsm")
    umask = os.umask(0)
    os.umask(umask)
    published = tmp_path / "results" / "mine" / "dsm"
    assert stat.S_IMODE(published.stat().st_mode) == 0o777 & ~umask
    assert {stat.S_IMODE(p.stat().st_mode) for p in published.iterdir()} == {0o666 & ~umask}


def test_publishing_refuses_a_symbolic_link(tmp_path, staged):
    outside = tmp_path / "secret.txt"
    outside.write_text("not measured\n")
    (staged / "notes.csv").symlink_to(outside)
    destination = tmp_path / "results" / "mine" / "dsm"
    with pytest.raises(PublishError, match="notes.csv: a symbolic link"):
        publish_directory(staged, destination)
    assert not destination.exists()


def test_publishing_into_a_linked_folder_is_refused(tmp_path, staged):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "mine").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PublishError, match="is a symbolic link"):
        publish_directory(staged, tmp_path / "results" / "mine" / "dsm")
    assert not any((tmp_path / "elsewhere").iterdir())


def test_publishing_bad_raw_data_is_refused(tmp_path, staged, capsys):
    (staged / "bandwidth.csv").write_text((staged / "bandwidth.csv").read_text().replace(",ok,", ",timeout,", 1))
    destination = tmp_path / "results" / "mine" / "dsm"
    status, error = run_cli(capsys, "publish", "--staged", staged, "--out", destination)
    assert_one_line_error(status, error, "bandwidth.csv", "row 1", "timing_status", "'timeout'")
    assert not destination.exists()
