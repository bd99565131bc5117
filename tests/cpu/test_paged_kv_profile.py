"""The paged_kv profiling diagnostic (no GPU here): bad keys stop before any GPU work, the ncu
command leaves the clocks alone and takes the last launch, and the summary reads ncu's SASS view."""
import importlib.util

import pytest

from tma_study.studies.paged_kv import profile

KEY = "llama3_8b/e4m3/decode-q1-b32-ctx8192/page256/cp_async/s2p1"


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
    hottest = summary.splitlines()[4]
    assert "70.0 %" in hottest and "31232" in hottest and "BRA" in hottest


def test_a_run_without_the_sass_table_is_an_error():
    with pytest.raises(ValueError, match="no SASS table"):
        profile.summarize('"Kernel Name","k"\n')
