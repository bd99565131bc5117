"""tma_kernels.numpy_compat: np.row_stack is restored only where numpy lacks it."""

import importlib
import subprocess
import sys
import textwrap
import types

import numpy as np

import tma_kernels.numpy_compat as numpy_compat

NUMPY_WITHOUT_ROW_STACK = (2, 5)  # first numpy release without np.row_stack


def _numpy_major_minor() -> tuple[int, int]:
    major, minor = np.__version__.split(".")[:2]
    return int(major), int(minor)


def test_shim_applied_exactly_on_numpy_without_row_stack():
    expected = _numpy_major_minor() >= NUMPY_WITHOUT_ROW_STACK
    assert numpy_compat.SHIM_APPLIED is expected
    assert "row_stack" in vars(np)


def test_apply_shim_binds_vstack_on_a_module_without_row_stack():
    fresh = types.ModuleType("fake_numpy_2_5")
    fresh.vstack = np.vstack
    assert numpy_compat.apply_shim(fresh) is True
    assert fresh.row_stack is np.vstack


def test_apply_shim_leaves_an_existing_row_stack_alone():
    def own_row_stack(arrays):
        return arrays

    fresh = types.ModuleType("fake_numpy_2_4")
    fresh.vstack = np.vstack
    fresh.row_stack = own_row_stack
    assert numpy_compat.apply_shim(fresh) is False
    assert fresh.row_stack is own_row_stack


def test_reload_on_simulated_numpy_2_5_restores_row_stack(monkeypatch):
    monkeypatch.delattr(np, "row_stack")
    try:
        reloaded = importlib.reload(numpy_compat)
        assert reloaded.SHIM_APPLIED is True
        assert np.row_stack is np.vstack
    finally:
        monkeypatch.undo()
        importlib.reload(numpy_compat)  # back to the real numpy's state


def test_importing_ptx_applies_the_shim_before_any_compile():
    """With row_stack removed, a compile after `import tma_kernels.ptx` must work.

    Runs in a fresh interpreter so numba's registries start empty; without the
    shim this compile fails with AttributeError: ... 'row_stack'.
    """
    script = textwrap.dedent("""
        import numpy as np
        vars(np).pop("row_stack", None)          # simulate numpy 2.5
        import tma_kernels.ptx                   # must import the shim itself
        from numba import cuda

        def store_one(values):
            values[0] = 1.0

        cuda.compile(store_one, "void(float32[::1])", device=False,
                     cc=(9, 0, "a"), output="ptx", abi="numba")
        assert np.row_stack is np.vstack
        """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
