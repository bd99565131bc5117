"""The GPU tests are skipped without a GPU, so a name they import from the project can vanish
(a refactoring moves it) without any CPU run noticing. Every ``from tma_kernels... import X`` and
``from tma_study... import X`` in tests/gpu must resolve here, as a module attribute or submodule."""
import ast
import importlib
from pathlib import Path

import pytest

GPU_TESTS = Path(__file__).resolve().parents[2] / "gpu"
PROJECT_PACKAGES = ("tma_kernels", "tma_study")


def _imports():
    for path in sorted(GPU_TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and node.module.split(".")[0] in PROJECT_PACKAGES:
                for alias in node.names:
                    yield pytest.param(node.module, alias.name,
                                       id=f"{path.relative_to(GPU_TESTS)}:{node.lineno}:{alias.name}")


@pytest.mark.parametrize("module, name", list(_imports()))
def test_gpu_test_import_resolves(module, name):
    loaded = importlib.import_module(module)
    if not hasattr(loaded, name):
        importlib.import_module(f"{module}.{name}")     # a submodule; raises naming it if absent
