"""The paged_kv profiling diagnostic (no GPU here): bad keys stop before any GPU work, the ncu
command leaves the clocks alone and takes the last launch, and the summary reads ncu's SASS view."""
import importlib.util
import sys

import pytest

from tma_study.studies.paged_kv import profile

KEY = "llama3_8b/e4m3/decode-q1-b32-ctx8192/page256/cp_async/s2p1/kq"


@pytest.fixture(scope="module")
def study():
    return profile.study_config(profile.config_mod.REPO_ROOT / "config" / "config.yaml")


def test_an_unknown_key_is_refused_naming_it(study):
    with pytest.raises(SystemExit, match=r"'llama3_8b/e4m3/nope'.*--list"):
        profile.resolve(study, [KEY, "llama3_8b/e4m3/nope"])


def test_list_prints_the_sweep_keys(capsys):
    assert profile.main(["--list"]) == 0
    assert KEY in capsys.readouterr().out.splitlines()


def test_the_ncu_command_leaves_clocks_alone_and_profiles_the_last_launch():
    command = profile.ncu_command("/usr/bin/ncu", profile.config_mod.REPO_ROOT / "config" / "config.yaml", KEY)
    text = " ".join(command)
    assert "--clock-control none" in text
    assert f"--launch-skip {profile.LAUNCHES - 1} --launch-count 1" in text
    assert command[-3:-1] == ["--config", str(profile.config_mod.REPO_ROOT / "config" / "config.yaml")]
    assert "--child" in command and command[-1] == KEY
    # the child is this module by its import name, also when the parent runs as __main__
    child = command[command.index("-m") + 1]
    assert child == profile.CHILD_MODULE
    assert importlib.util.find_spec(child).origin == profile.__file__


NCU_CSV = "\n".join([
    '==PROF== Connected to process 1',
    f'{KEY}: kernel k, 168 registers',
    '"Kernel Name","paged_attention_cp_async_e4m3"',
    ('"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_long_sb",'
     '"stall_math","stall_long_sb (Not Issued)"'),
    '"0x10","SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R53+URZ], R8","10","31232","0","10","0"',
    '"0x20","@!P0  BRA 0x7efd","70","31232","70","0","70"',
    '"0x30","F2FP.F16.E4M3.UNPACK_B R24, R8","20","32768","0","20","0"',
])


def test_the_summary_shares_samples_by_reason_opcode_and_instruction():
    summary = profile.summarize(NCU_CSV)
    assert "stall samples: 100" in summary
    assert "stall_long_sb 70.0 %" in summary and "stall_math 30.0 %" in summary
    assert "BRA 70.0 %" in summary and "F2FP 20.0 %" in summary and "SYNCS 10.0 %" in summary
    lines = summary.splitlines()
    hottest = lines[lines.index("hottest instructions (share of samples, executions, instruction):") + 1]
    assert "70.0 %" in hottest and "31232" in hottest and "BRA" in hottest


def test_a_run_without_the_sass_table_is_an_error():
    with pytest.raises(ValueError, match="no SASS table"):
        profile.summarize('"Kernel Name","k"\n')


def test_the_summary_shares_executed_instructions_by_opcode():
    summary = profile.summarize(NCU_CSV)
    executed = next(line for line in summary.splitlines() if line.startswith("executed instructions"))
    assert executed.startswith(f"executed instructions: {31232 * 2 + 32768};")
    assert f"F2FP {100 * 32768 / (31232 * 2 + 32768):.1f} %" in executed


def test_the_pipe_pass_profiles_the_same_launch_for_the_pipe_metrics_only():
    config = profile.config_mod.REPO_ROOT / "config" / "config.yaml"
    samples, pipes = profile.ncu_command("ncu", config, KEY), profile.ncu_pipes_command("ncu", config, KEY)
    assert "--clock-control none" in " ".join(pipes)
    assert f"--launch-skip {profile.LAUNCHES - 1} --launch-count 1" in " ".join(pipes)
    assert pipes[pipes.index("--metrics") + 1].split(",") == list(profile.PIPE_METRICS)
    assert "--section" not in pipes and pipes[pipes.index("--page") + 1] == "raw"
    assert pipes[pipes.index(sys.executable):] == samples[samples.index(sys.executable):]


def _raw_page(values):
    names = ['"ID"', '"Kernel Name"', *(f'"{m}"' for m in profile.PIPE_METRICS)]
    units = ['""', '""', *('"%"' for _ in profile.PIPE_METRICS)]
    return "\n".join(["==PROF== Disconnected", ",".join(names), ",".join(units),
                      ",".join(['"0"', '"paged_attention_x"', *(f'"{v}"' for v in values)])])


def test_pipe_shares_read_the_raw_page_and_the_summary_names_each_pipe():
    values = ["61.42", "7.67", "9.88", "10.63", "7.03", "8.09", "47.11", "42.82", "1,770,000,000"]
    shares = profile.pipe_shares(_raw_page(values))
    assert shares["sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"] == 61.42
    assert shares["sm__cycles_elapsed.avg.per_second"] == 1.77e9
    line = profile.summarize_pipes(shares)
    assert "alu 61.4 %" in line and "tensor 7.0 %" in line and "xu 8.1 %" in line
    assert "issue slots used 47.1 %" in line and "DRAM 42.8 %" in line and "1.77 GHz" in line


def test_a_raw_page_without_the_metrics_is_an_error_naming_them():
    with pytest.raises(ValueError, match="no row of"):
        profile.pipe_shares('"ID","Kernel Name"\n"","" \n')
    partial = _raw_page(["1"] * len(profile.PIPE_METRICS)).replace(profile.PIPE_METRICS[-1], "other")
    with pytest.raises(ValueError, match="sm__cycles_elapsed"):
        profile.pipe_shares(partial)


def test_the_durations_pass_times_every_kernel_of_every_launch_in_nanoseconds():
    config = profile.config_mod.REPO_ROOT / "config" / "config.yaml"
    command = profile.ncu_durations_command("ncu", config, KEY)
    assert "--clock-control none" in " ".join(command) and "--launch-skip" not in command
    assert command[command.index("--kernel-name") + 1] == "regex:paged_attention_|combine_splits"
    assert command[command.index("--metrics") + 1].split(",") == ["gpu__time_duration.sum",
                                                                   "sm__cycles_elapsed.avg.per_second"]
    assert command[command.index("--print-units") + 1] == "base"
    samples = profile.ncu_command("ncu", config, KEY)
    assert command[command.index(sys.executable):] == samples[samples.index(sys.executable):]


def _durations_page(kernels, unit="nsecond"):
    rows = ['"ID","Kernel Name","Grid Size","gpu__time_duration.sum","sm__cycles_elapsed.avg.per_second"',
            f'"","","","{unit}","cycle/second"']
    rows += [f'"{i}","{name}","(256, 1, 1)","{ns}","{hz}"' for i, (name, ns, hz) in enumerate(kernels)]
    return "\n".join(["==PROF== Connected to process 7", f"{KEY}: kernel k", *rows])


SPLIT_LAUNCHES = [("paged_attention_cp_async_e4m3_d256", "36,380", "1,980,000,000"),
                  ("combine_splits", "3,840", "1,755,000,000")] * 3


@pytest.mark.parametrize("unit", ["nsecond", "ns"])     # ns: ncu of CUDA 13 with --print-units base (H200)
def test_kernel_durations_read_each_kernel_in_microseconds_and_gigahertz(unit):
    durations = profile.kernel_durations(_durations_page(SPLIT_LAUNCHES, unit=unit))
    assert len(durations) == 6
    assert durations[0] == ("paged_attention_cp_async_e4m3_d256", pytest.approx(36.38), pytest.approx(1.98))
    assert durations[-1] == ("combine_splits", pytest.approx(3.84), pytest.approx(1.755))


def test_the_durations_summary_takes_the_last_launch_and_sets_the_reference_beside_it():
    durations = profile.kernel_durations(_durations_page(SPLIT_LAUNCHES))
    line = profile.summarize_durations(durations, (49.34, 1774.5))
    assert line.startswith("last launch (of 3): attention 36.38 us at 1.98 GHz, combine 3.84 us at 1.75 GHz; "
                           "kernels together 40.22 us")
    assert "49.34 us (median, SM clock 1.77 GHz mean), 9.12 us more" in line
    unsplit = profile.kernel_durations(_durations_page([("paged_attention_tma_bf16", "250,000", "1.9e9")] * 3))
    assert profile.summarize_durations(unsplit, None) == (
        "last launch (of 3): attention 250.00 us at 1.90 GHz; kernels together 250.00 us")


def test_a_durations_page_it_cannot_read_is_an_error_saying_why():
    with pytest.raises(ValueError, match="no row of 'gpu__time_duration.sum' values"):
        profile.kernel_durations('"ID","Kernel Name"\n"",""\n')
    assert profile.kernel_durations(_durations_page(SPLIT_LAUNCHES, unit="usecond"))[1][1] == 3840.0
    with pytest.raises(ValueError, match="'cycle'.*--print-units base"):
        profile.kernel_durations(_durations_page(SPLIT_LAUNCHES, unit="cycle"))
    with pytest.raises(ValueError, match="lacks.*sm__cycles_elapsed"):
        profile.kernel_durations(_durations_page(SPLIT_LAUNCHES).replace("sm__cycles_elapsed", "other"))
    with pytest.raises(ValueError, match="no paged_attention_ kernel"):
        profile.summarize_durations([("combine_splits", 3.0, 1.9)], None)


def test_the_reference_timing_is_the_keys_row(study, tmp_path):
    import pandas as pd
    (config,) = profile.resolve(study, [KEY])
    row = {**config.columns(), "time_us_median": 145.0, "sm_clock_mhz_mean": 1770.0}
    other = {**row, "stages": 4, "time_us_median": 150.0}
    path = tmp_path / "attention.csv"
    pd.DataFrame([row, other]).to_csv(path, index=False)
    assert profile.reference_timing(config, path) == (145.0, 1770.0)
    assert profile.reference_timing(config, tmp_path / "missing.csv") is None
    pd.DataFrame([other]).to_csv(path, index=False)
    assert profile.reference_timing(config, path) is None
