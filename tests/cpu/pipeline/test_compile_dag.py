"""The compile step is a target of its own that the DAG keeps current: the main job never
runs it, while an edit of a kernel source or of the study's config section makes
``snakemake kernels`` schedule that study's compile again (and nothing else's config
change does)."""
import os
from pathlib import Path

import pytest

from pipeline_run import copy_checkout, output_of, snakemake

STUDY = "crossover"
RESOURCES = f"build/compile/{STUDY}/resources.csv"


@pytest.fixture(scope="module")
def compiled_checkout(tmp_path_factory) -> Path:
    """A checkout whose crossover compile step is current, as after `snakemake kernels`: its
    config file written by the workflow (params recorded), its output newer than every input."""
    root = copy_checkout(tmp_path_factory.mktemp("checkout"))
    result = snakemake(root, "-c1", f"build/config/{STUDY}.json")
    assert result.returncode == 0, output_of(result)[-3000:]
    (root / RESOURCES).parent.mkdir(parents=True)
    (root / RESOURCES).write_text("kernel\n")
    result = snakemake(root, "-n", RESOURCES)
    assert "Nothing to be done" in output_of(result), output_of(result)[-3000:]
    return root


def scheduled_rules(root: Path, *args: str) -> str:
    """The dry run's output for the crossover compile step's resources.csv."""
    result = snakemake(root, "-n", RESOURCES, *args)
    assert result.returncode == 0, output_of(result)[-3000:]
    return output_of(result)


def test_the_main_job_schedules_no_compile(compiled_checkout):
    result = snakemake(compiled_checkout, "-n")
    assert result.returncode == 0, output_of(result)[-3000:]
    assert "rule compile:" not in output_of(result)


def test_editing_a_kernel_source_reruns_the_compile(compiled_checkout):
    source = compiled_checkout / "kernels" / "crossover" / "tma_tile.py"
    original, stat = source.read_text(), source.stat()
    source.write_text(original + "# an edit\n")
    try:
        out = scheduled_rules(compiled_checkout)
    finally:
        source.write_text(original)
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))   # as it was, for the other tests
    assert "rule compile:" in out and f"study={STUDY}" in out
    assert "Updated input files: kernels/crossover/tma_tile.py" in out


def test_editing_the_studys_config_section_reruns_the_compile(compiled_checkout):
    out = scheduled_rules(compiled_checkout, "--config",
                          "studies={'crossover': {'mechanisms': ['tma_tile', 'cp_async']}}")
    assert "rule study_config:" in out and "rule compile:" in out


def test_another_studys_config_change_leaves_this_compile_alone(compiled_checkout):
    out = scheduled_rules(compiled_checkout, "--config", "studies={'dsm': {'variants': ['dsm_pull', 'multicast']}}")
    assert "rule compile:" not in out, out[-3000:]
