"""Config validation: a wrong config stops the pipeline before any work, with a message that
names the key path (and for an unknown study, the known ones); the shipped configs pass."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tma_study import config as config_mod
from tma_study import gpu as gpu_mod
from tma_study.config import ConfigError
from tma_study.studies import discover

REPO = Path(__file__).resolve().parents[3]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
KNOWN_STUDIES = discover()


@pytest.fixture
def config() -> dict:
    """A fresh copy of the shipped config, free to break."""
    return copy.deepcopy(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))


def rejection(config: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        config_mod.validate(config, KNOWN_STUDIES)
    return str(caught.value)


# ------------------------------------------------------------------ the shipped configs
@pytest.mark.parametrize("name", ["config.yaml", "smoke.yaml"])
def test_shipped_config_is_valid(name):
    loaded = config_mod.load(REPO / "config" / name, KNOWN_STUDIES)
    assert "crossover" in loaded["studies"]


PROBES = sorted((REPO / "config" / "probes").glob("*.yaml"))


@pytest.mark.parametrize("path", PROBES, ids=lambda p: p.name)
def test_probe_configs_are_valid_and_say_how_to_run_them(path):
    """config/probes/: the narrowed runs behind statements "outside the reference data" load,
    expand to a sweep, and name the command that reruns them (outside results/)."""
    loaded = config_mod.load(path, KNOWN_STUDIES)
    for name, study in loaded["studies"].items():
        if name == "paged_kv":
            from tma_study.studies.paged_kv.grid import sweep_configs
            assert sweep_configs(study)
    header = path.read_text().split("\nmeasure:")[0]
    assert f"tma-study measure {next(iter(loaded['studies']))} --config config/probes/{path.name}" in header


# ------------------------------------------------------------------ rejections name the key
def test_cluster_size_3_is_rejected_naming_its_index(config):
    config["gpu_probe"]["cluster_sizes"] = [1, 2, 3]
    message = rejection(config)
    assert "gpu_probe.cluster_sizes[2]" in message
    assert "3" in message.split("gpu_probe.cluster_sizes[2]")[1]


def test_negative_transfer_size_is_rejected(config):
    config["studies"]["crossover"]["bytes_per_transfer"] = [256, -512]
    message = rejection(config)
    assert "studies.crossover.bytes_per_transfer[1]" in message and "-512" in message


@pytest.mark.parametrize("size", [768, 1000, 4104])   # 768: multiple of 16, not a power of two
def test_transfer_size_not_a_power_of_two_is_rejected(config, size):
    config["studies"]["crossover"]["bytes_per_transfer"] = [256, size]
    message = rejection(config)
    assert "studies.crossover.bytes_per_transfer[1]" in message and str(size) in message


def test_transfer_size_below_16_bytes_is_rejected(config):
    config["studies"]["crossover"]["bytes_per_transfer"] = [8]
    assert "studies.crossover.bytes_per_transfer[0]" in rejection(config)


def test_unknown_mechanism_is_rejected_listing_the_allowed_ones(config):
    config["studies"]["crossover"]["mechanisms"] = ["tma_tile", "ldgsts"]
    message = rejection(config)
    assert "studies.crossover.mechanisms[1]" in message and "'ldgsts'" in message
    assert "cp_async" in message


@pytest.mark.parametrize("study", ["crossover", "multicast", "dsm", "paged_kv", "gemm"])
def test_an_unknown_l2_state_is_rejected_naming_the_key_and_the_states(config, study):
    config["studies"][study]["timing"]["l2_after_flush"] = "warm"
    message = rejection(config)
    assert f"studies.{study}.timing.l2_after_flush" in message and "'warm'" in message
    assert "clean" in message and "dirty" in message


def test_unknown_study_is_rejected_listing_known_studies(config):
    config["studies"]["crossoverr"] = {}
    message = rejection(config)
    assert "studies.crossoverr" in message
    assert "known studies: " + ", ".join(sorted(KNOWN_STUDIES)) in message


@pytest.mark.parametrize("value", ["maybe", "true", 1])
def test_measure_of_the_wrong_type_is_rejected(config, value):
    config["measure"] = value
    message = rejection(config)
    assert "'measure'" in message and "boolean" in message


def test_studies_of_the_wrong_type_is_a_config_error(config):
    config["studies"] = ["crossover"]
    assert "'studies'" in rejection(config)


def test_missing_top_level_key_is_named(config):
    del config["reference_gpu"]
    assert "'reference_gpu' is a required property" in rejection(config)


def test_missing_study_key_is_named_with_its_section(config):
    del config["studies"]["crossover"]["timing"]
    message = rejection(config)
    assert "config key 'studies.crossover'" in message and "'timing'" in message


def test_extra_top_level_key_is_rejected(config):
    config["colour"] = "blue"
    assert "'colour' was unexpected" in rejection(config)


def test_extra_nested_key_is_rejected_with_its_section(config):
    config["studies"]["crossover"]["latency"]["hopz"] = 64
    message = rejection(config)
    assert "config key 'studies.crossover.latency'" in message and "'hopz' was unexpected" in message


def test_every_problem_is_reported_at_once(config):
    config["measure"] = "maybe"
    config["studies"]["crossover"]["stages"] = [3]
    message = rejection(config)
    assert "'measure'" in message and "studies.crossover.stages[0]" in message


# ------------------------------------------------------------------ command-line booleans
@pytest.mark.parametrize("key", config_mod.BOOLEAN_KEYS)
@pytest.mark.parametrize("text, value", [("true", True), ("True", True), ("yes", True), ("1", True),
                                         ("false", False), ("FALSE", False), ("no", False), ("0", False)])
def test_command_line_boolean_strings_become_booleans(config, key, text, value):
    config[key] = text
    assert config_mod.coerce_command_line(config)[key] is value
    config_mod.validate(config, KNOWN_STUDIES)


def test_other_strings_are_left_for_validation_to_reject(config):
    config["measure"] = "maybe"
    assert config_mod.coerce_command_line(config)["measure"] == "maybe"
    assert "'measure'" in rejection(config)


def test_only_boolean_keys_are_coerced(config):
    config["results_label"] = "true"
    assert config_mod.coerce_command_line(config)["results_label"] == "true"


# ------------------------------------------------------------------ load()
def test_load_applies_overrides_before_validating(tmp_path):
    with pytest.raises(ConfigError, match="'measure'"):
        config_mod.load(REPO / "config" / "config.yaml", KNOWN_STUDIES, overrides={"measure": "maybe"})


def test_load_of_a_missing_file_says_so(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        config_mod.load(tmp_path / "nope.yaml", KNOWN_STUDIES)


def test_load_of_invalid_yaml_says_so(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("measure: [false\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        config_mod.load(path, KNOWN_STUDIES)


def test_load_of_a_yaml_list_says_it_must_be_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- measure\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        config_mod.load(path, KNOWN_STUDIES)


# ------------------------------------------------------------------ through Snakemake
def snakemake_dry_run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{SNAKEMAKE.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(SNAKEMAKE), "-n", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


def assert_stopped_before_any_job(result: subprocess.CompletedProcess) -> str:
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Building DAG of jobs" not in output and "Job stats" not in output, output
    return output


def test_snakemake_rejects_a_wrong_measure_value_naming_the_key():
    output = assert_stopped_before_any_job(snakemake_dry_run("--config", "measure=maybe"))
    assert "config key 'measure'" in output


def test_snakemake_rejects_an_invalid_study_section_naming_the_key(tmp_path):
    override = tmp_path / "bad.yaml"
    override.write_text("studies:\n  crossover:\n    bytes_per_transfer: [256, 1000]\n")
    output = assert_stopped_before_any_job(snakemake_dry_run("--configfile", str(override)))
    assert "studies.crossover.bytes_per_transfer[1]" in output and "1000" in output


needs_no_hopper = pytest.mark.skipif(
    gpu_mod.detect() is not None and gpu_mod.detect().compute_capability[0] == gpu_mod.HOPPER_MAJOR,
    reason="a Hopper GPU is here: measure=true would measure")


@needs_no_hopper
@pytest.mark.parametrize("flag", ["measure=true", "measure=True"])
def test_snakemake_measure_without_hopper_says_a_hopper_gpu_is_needed(flag):
    """``--config measure=true`` is the documented spelling (Snakefile, config.yaml)."""
    output = assert_stopped_before_any_job(snakemake_dry_run("--config", flag))
    # the studies in config.yaml measure on Hopper (and gemm also on Blackwell)
    assert "no CUDA GPU is visible" in output and "Hopper (compute capability 9.0" in output, output
    assert "CUDA 13 driver" in output, output


# ------------------------------------------------------------------ every key of the wrong type
def _keys_and_wrong_values():
    """(config path, a value of the wrong type) for every top-level key and every key of each
    study's section: a mapping where the schema wants anything else, a number where it wants one."""
    def wrong(spec):
        kind = spec.get("type")
        return 42 if kind == "object" or (isinstance(kind, list) and "object" in kind) else {"wrong": ["type"]}
    cases = [((key,), wrong(spec)) for key, spec in config_mod.load_schema(config_mod.TOP_SCHEMA)["properties"].items()]
    for name in KNOWN_STUDIES:
        schema = config_mod.load_schema(config_mod.SCHEMA_DIR / "studies" / f"{name}.schema.yaml")
        cases += [(("studies", name, key), wrong(spec)) for key, spec in schema.get("properties", {}).items()]
    return cases


def test_every_config_key_of_the_wrong_type_names_the_key_and_its_form(config):
    """As --config gives them (typed as YAML reads them: run_studies=42 is 42): each one refused
    naming the key, with what the schema allows, never an exception of another kind."""
    unnamed = []
    for path, value in _keys_and_wrong_values():
        broken = copy.deepcopy(config)
        section = broken
        for key in path[:-1]:
            section = section.setdefault(key, {})
        section[path[-1]] = value
        config_mod.coerce_command_line(broken)
        key = ".".join(path)
        message = rejection(broken)
        if f"config key '{key}" not in message or not any(w in message for w in ("is not of type", "allowed")):
            unnamed.append(f"{key}: {message}")
    assert not unnamed, "\n".join(unnamed)
    assert len(_keys_and_wrong_values()) > 60
