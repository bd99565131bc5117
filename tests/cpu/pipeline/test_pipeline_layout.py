"""Where the pipeline reads and writes: results labels and the files each study needs."""
import datetime
import re
import subprocess
from pathlib import Path

import pytest

from tma_study.gpu import GpuInfo, GpuRequirementError
from tma_study.pipeline import Layout, MissingDataError, ResultsLabelError, results_label
from tma_study.studies import discover

REPO = Path(__file__).resolve().parents[3]


def gpu(name="NVIDIA H200", major=9):
    return GpuInfo(name=name, compute_capability=(major, 0), sm_count=132, l2_bytes=62914560,
                   smem_per_block_optin_bytes=232448, smem_per_sm_bytes=233472, max_sm_clock_khz=1980000,
                   memory_clock_khz=3201000, memory_bus_bits=6144, total_memory_bytes=150 << 30,
                   driver_version=13000)


def config(**overrides):
    return {"measure": True, "reference_gpu": "h200", "studies": {"crossover": {}}, **overrides}


def test_analysis_reads_the_reference_without_asking_for_a_gpu():
    assert results_label(config(measure=False), detect=lambda: None) == "h200"


def test_measuring_on_the_reference_gpu_goes_to_a_new_dated_label_by_default(tmp_path):
    label = results_label(config(), detect=gpu, root=tmp_path, today=datetime.date(2026, 12, 4))
    assert label == "h200-2026-12-04"


def test_measuring_never_writes_into_committed_data_unless_asked(tmp_path):
    """results/h200-rerun/ is committed (the reproducibility run): an explicit label naming it
    stops before any work, unless overwrite_reference says so."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "results" / "h200-rerun").mkdir(parents=True)
    (tmp_path / "results" / "h200-rerun" / "provenance.json").write_text("{}")
    subprocess.run(["git", "-C", str(tmp_path), "add", "results"], check=True)
    with pytest.raises(ResultsLabelError, match="results/h200-rerun/ holds committed data"):
        results_label(config(results_label="h200-rerun"), detect=gpu, root=tmp_path)
    assert results_label(config(results_label="h200-rerun", overwrite_reference=True), detect=gpu,
                         root=tmp_path) == "h200-rerun"


def test_overwriting_the_reference_must_be_asked_for():
    assert results_label(config(overwrite_reference=True), detect=gpu) == "h200"


def test_another_gpu_measures_into_its_own_folder():
    assert results_label(config(), detect=lambda: gpu("NVIDIA H100 80GB HBM3")) == "h100-80gb-hbm3"


def test_an_explicit_label_wins():
    assert results_label(config(results_label="mine"), detect=gpu) == "mine"


@pytest.mark.parametrize("detected, says", [(lambda: None, "no CUDA GPU"),
                                            (lambda: gpu("NVIDIA A100", major=8), "compute capability 8.0")])
def test_measuring_without_a_hopper_gpu_stops_and_says_why(detected, says):
    with pytest.raises(GpuRequirementError, match=says):
        results_label(config(), detect=detected)


def test_layout_names_every_output_and_missing_raw_file(tmp_path):
    layout = Layout({"crossover": discover()["crossover"]}, "h200", root=tmp_path)
    outputs = layout.all_outputs()
    assert "figures/crossover_map.pdf" in outputs and "paper/tables/crossover_kernels.tex" in outputs
    assert layout.repeat_files("crossover") == []
    with pytest.raises(MissingDataError, match="results/h200/crossover/stream.csv"):
        layout.check_raw_data_present()


def test_a_blackwell_gpu_measures_the_studies_that_support_it():
    """On a B200 the same command measures gemm (SM100 variants) and leaves out Hopper-only studies."""
    studies = discover()
    b200 = lambda: gpu("NVIDIA B200", major=10)  # noqa: E731
    label = results_label(config(studies={"crossover": {}, "gemm": {}}), detect=b200, majors=(9, 10))
    assert label == "b200"
    layout, skipped = Layout({n: studies[n] for n in ("crossover", "gemm")}, label).measurable_on(10)
    assert list(layout.studies) == ["gemm"] and skipped == ["crossover"]


def test_a_gpu_no_requested_study_supports_stops_and_names_the_architectures():
    with pytest.raises(GpuRequirementError, match="Blackwell .* this GPU is NVIDIA A100"):
        results_label(config(), detect=lambda: gpu("NVIDIA A100", major=8), majors=(9, 10))


def test_the_measure_command_refuses_a_study_on_the_wrong_architecture(monkeypatch, capsys):
    from tma_study import cli
    from tma_study import gpu as gpu_mod
    monkeypatch.setattr(gpu_mod, "detect", lambda: gpu("NVIDIA B200", major=10))
    assert cli.main(["measure", "crossover", "--out", "/tmp/never-written"]) == 1
    error = capsys.readouterr().err
    assert re.search("NVIDIA B200 .*needs an NVIDIA Hopper GPU", error) and error.count("\n") == 1


def test_an_aggregate_step_waits_for_the_raw_data_of_the_studies_it_reads():
    # gemm's rules.csv reads the crossover and multicast raw data of the same run: in a measure
    # run its aggregate job must come after they are published, not see them missing
    studies = discover()
    layout = Layout({n: studies[n] for n in ("crossover", "multicast", "gemm")}, "h200-x")
    read = layout.read_raw_files("gemm")
    assert "results/h200-x/crossover/stream.csv" in read and "results/h200-x/multicast/stream.csv" in read
    alone = Layout({"gemm": studies["gemm"]}, "h200-x")      # not in this run: nothing to wait for
    assert alone.read_raw_files("gemm") == []


def test_compile_jobs_are_ordered_by_johnsons_rule():
    from tma_study.schedule import compile_priorities, johnson_order
    costs = {"small_a": (0.3, 2.0), "small_b": (0.5, 1.0), "big_measure": (4.5, 6.5), "big_compile": (7.0, 3.5)}
    assert johnson_order(costs) == ["small_a", "small_b", "big_measure", "big_compile"]
    priorities = compile_priorities(costs)
    assert sorted(costs, key=priorities.get, reverse=True) == johnson_order(costs)


# ---------------------------------------------------------------- the compile step of every study

def shipped_study_config(name: str) -> dict:
    from tma_study import config as config_mod
    return config_mod.load(config_mod.REPO_ROOT / "config" / "config.yaml", discover())["studies"][name]


def test_every_study_has_a_compile_step_and_a_kernel_table_the_generic_rules_call():
    for name, study in discover().items():
        assert callable(study.entry("compile")) and callable(study.entry("kernel_table")), name
        numba_compile = study.compile == "tma_study.compile_report:compile_study"
        assert (study.kernels is not None) == numba_compile, f"{name}: a compile list xor a compile step of its own"


def test_gemm_compile_step_needs_the_reports_and_libraries_of_its_nvcc_jobs():
    layout = Layout(discover(), "h200")
    section = shipped_study_config("gemm")
    from tma_study.gemm_lib import variants
    names = [v.name for arch in variants.ARCHES for v in variants.variants(section, arch)]
    built = layout.compile_inputs("gemm", section)
    assert built == [f"build/gemm/obj/{n}.json" for n in names] + ["build/gemm/libgemm_sm90.so",
                                                                     "build/gemm/libgemm_sm100.so"]
    assert layout.compile_inputs("crossover", shipped_study_config("crossover")) == []
    assert "src/tma_study/gemm_lib/build.py" in layout.kernel_code_files("gemm")
    assert layout.kernel_code_files("crossover") == ["src/tma_study/harness/kernel_builds.py",
                                                     "src/tma_study/compile_report.py",
                                                     "src/tma_study/studies/crossover/kernels.py"]
    assert layout.kernel_table_code_files("gemm") == ["src/tma_study/studies/gemm/tables.py"]


def test_gemm_compile_step_without_its_built_variants_names_them_and_the_command(tmp_path, monkeypatch):
    from tma_study.studies.gemm import STUDY
    from tma_study.gemm_lib import build
    monkeypatch.setattr(build, "REPO_ROOT", tmp_path)       # a checkout where nothing is built
    with pytest.raises(build.BuildToolError, match=re.escape("snakemake -c16 build/compile/gemm/resources.csv")):
        build.compile_step(STUDY, shipped_study_config("gemm"), tmp_path / "out")
    assert not (tmp_path / "out" / "resources.csv").exists()


def test_an_other_runs_aggregate_reads_its_own_cross_study_data_or_else_this_runs(tmp_path):
    """The overlay aggregate of another run declares the raw data of the studies its aggregate
    reads (reads_raw_of): the run's own where it has them, else this run's (gemm_cluster's rule.csv
    of a repeat run scores the reference multicast verdicts)."""
    studies = discover()
    layout = Layout({n: studies[n] for n in ("multicast", "gemm_cluster")}, "h200", root=tmp_path)
    names = (*studies["multicast"].raw_files, "provenance.json")
    assert layout.overlay_read_raw_files("gemm_cluster", "h200-rerun") == [f"results/h200/multicast/{n}" for n in names]
    for name in names:
        (tmp_path / "results" / "h200-rerun" / "multicast").mkdir(parents=True, exist_ok=True)
        (tmp_path / "results" / "h200-rerun" / "multicast" / name).write_text("")
    assert layout.overlay_read_raw_files("gemm_cluster", "h200-rerun") == [
        f"results/h200-rerun/multicast/{n}" for n in names]
    assert layout.overlay_read_raw_files("multicast", "h200-rerun") == []


def test_a_studys_analysis_job_aggregates_every_run_then_writes_its_tables_and_comparison():
    """One job per study (workflow/rules/analyze.smk): this run with its repeat, each other run it
    overlays, then the paper and kernel tables and the comparison of the runs."""
    studies = discover()
    layout = Layout({"crossover": studies["crossover"]}, "h200", root=REPO)
    steps = layout.analysis_steps("crossover")
    aggregated = [step[step.index("--raw") + 1] for step in steps if step[0] == "aggregate"]
    assert aggregated == ["results/h200/crossover"] + [f"results/{label}/crossover"
                                                       for label in layout.overlay_labels("crossover")]
    assert steps[0][-2:] == ["--repeat", "results/h200-rerun/crossover"]
    assert [step[0] for step in steps[len(aggregated):]] == ["tables", "compare"]


def test_the_steps_command_stops_at_the_first_failing_step(capsys):
    from tma_study import cli
    status = cli.main(["steps", "check-config", "check-raw crossover --raw /nonexistent", "check-config"])
    output = capsys.readouterr()
    assert status == 1 and output.out.count("valid: ") == 1, output
