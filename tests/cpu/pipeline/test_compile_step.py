"""The compile step's SASS check: a kernel whose SASS lacks an instruction its study relies
on stops the step, names the kernel and the instruction, and writes no resources.csv; a
build that may be refused (a launch-bounded one) and was refused is left out, not an error."""
import json
from types import SimpleNamespace

import pytest
from tma_kernels.build import CompiledKernel

from tma_study import compile_report
from tma_study.harness.kernel_builds import KernelBuild


def _compiled(name, sass_line):
    return CompiledKernel(name=name, ptx="ptx", cubin=b"", sass=f"  /*0000*/ {sass_line} ;", registers=32,
                          shared_bytes_static=0, stack_frame_bytes=0, spill_store_bytes=0, spill_load_bytes=0)


def _fake_builds(results):
    def fake(study, study_config, workers, label="compile", stats=None):
        stats.hits, stats.compiled = 1, len(results) - 1
        return results
    return fake


STUDY = SimpleNamespace(name="fake")


def test_a_missing_instruction_fails_the_step(tmp_path, monkeypatch):
    results = [(KernelBuild("kernel0", None, "void()", ("LDGSTS",)), _compiled("kernel0", "LDGSTS.E.128 [R1], desc[UR4][R2.64]")),
               (KernelBuild("kernel1", None, "void()", ("LDGSTS", "UTMALDG")), _compiled("kernel1", "LDGSTS.E.128 [R1]"))]
    monkeypatch.setattr(compile_report, "compile_study_builds", _fake_builds(results))
    with pytest.raises(compile_report.SassCheckError, match="kernel1: no UTMALDG"):
        compile_report.compile_study(STUDY, {}, tmp_path / "out")
    assert not (tmp_path / "out" / "resources.csv").exists()
    assert (tmp_path / "out" / "kernel0.sass").exists()


def test_a_refused_build_that_may_be_refused_is_left_out(tmp_path, monkeypatch, capsys):
    results = [(KernelBuild("kernel0", None, "void()", ("LDGSTS",)), _compiled("kernel0", "LDGSTS.E.128 [R1]")),
               (KernelBuild("kernel0_m6", None, "void()", ("LDGSTS",), may_be_refused=True),
                "ptxas: register target too low")]
    monkeypatch.setattr(compile_report, "compile_study_builds", _fake_builds(results))
    frame = compile_report.compile_study(STUDY, {}, tmp_path / "out")
    assert list(frame["kernel"]) == ["kernel0"]
    record = json.loads((tmp_path / "out" / "compile.json").read_text())
    assert (record["builds"], record["refused"], record["cache_hits"], record["compiled"]) == (1, 1, 1, 1)
    assert frame.loc[0, "expected_sass"] == "LDGSTSx1"
    assert "kernel0_m6" in capsys.readouterr().out
