"""The compile step's SASS check: a kernel whose SASS lacks an instruction its study relies
on stops the step, names the kernel and the instruction, and writes no resources.csv."""
from types import SimpleNamespace

import pytest

from tma_study import compile_report


def _fake_compile(study_name, index):
    return {"name": f"kernel{index}", "ptx": "ptx", "sass": "sass", "counts": {"LDGSTS.E.128": 4},
            "expected": ("LDGSTS", "UTMALDG") if index == 1 else ("LDGSTS",), "registers": 32,
            "shared_bytes_static": 0, "stack_frame_bytes": 0, "spill_store_bytes": 0,
            "spill_load_bytes": 0}


def test_a_missing_instruction_fails_the_step(tmp_path, monkeypatch):
    monkeypatch.setattr(compile_report, "_compile_kernel", _fake_compile)
    study = SimpleNamespace(name="fake", entry=lambda _: lambda: [None, None])
    with pytest.raises(compile_report.SassCheckError, match="kernel1: no UTMALDG"):
        compile_report.compile_study(study, tmp_path / "out")
    assert not (tmp_path / "out" / "resources.csv").exists()
    assert (tmp_path / "out" / "kernel0.sass").exists()
