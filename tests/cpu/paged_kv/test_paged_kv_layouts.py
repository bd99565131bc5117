"""The consumers' one list (tma_kernels.paged_kv.layouts): what the config schema, the raw-data
schema, the sweep, the paper tier's rule words and the kernel read agrees with it, and each
consumer is a file of its own, a rung of the ladder with a short docstring."""
import ast
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml
from tma_kernels.paged_kv import layouts
from tma_kernels.paged_kv.geometry import Variant

from paged_kv_fixture import REPO
from tma_study.studies.paged_kv import grid, rules

KERNELS = REPO / "kernels" / "paged_kv"
STUDY = REPO / "src" / "tma_study" / "studies" / "paged_kv"
MAX_DOCSTRING_LINES = 40


def test_the_schemas_list_the_registry_consumers():
    """Config schema: the decode consumers, in the registry's order; raw-data schema: every layout."""
    schema = yaml.safe_load((REPO / "workflow/schemas/studies/paged_kv.schema.yaml").read_text())
    assert schema["$defs"]["decode_consumer_list"]["items"]["enum"] == list(layouts.DECODE_CONSUMERS)
    raw = yaml.safe_load((STUDY / "raw_schema.yaml").read_text())
    assert raw["files"]["attention.csv"]["columns"]["score_layout"]["values"] == list(layouts.SCORE_LAYOUTS)


def test_the_sweep_and_the_rules_read_the_registry():
    assert grid.DECODE_CONSUMERS is layouts.DECODE_CONSUMERS and grid.LAYOUTS is layouts.LAYOUTS
    assert grid.WGMMA_CONSUMERS == tuple(c for c in layouts.DECODE_CONSUMERS if layouts.LAYOUTS[c].uses_wgmma)
    assert list(rules.CONSUMER_TEXT) == list(layouts.DECODE_CONSUMERS)


def test_the_ladder_climbs():
    """Each decode rung keeps the flags of the one before it and adds to them; only qk, the first,
    is prefill's."""
    flags = ("shares_tile", "uses_wgmma", "register_v", "lazy_rescale", "row_split")
    ladder = list(layouts.LAYOUTS.values())
    assert [layout.decode for layout in ladder] == [False] + [True] * (len(ladder) - 1)
    for lower, upper in zip(ladder[1:], ladder[2:]):
        below = {f for f in flags if getattr(lower, f)}
        above = {f for f in flags if getattr(upper, f)}
        assert below < above, (lower.name, upper.name)
        assert set(upper.dtypes) <= set(lower.dtypes)


@pytest.mark.parametrize("name", list(layouts.LAYOUTS))
def test_each_consumer_is_a_file_of_its_own(name):
    """The kernel finds a layout's consumer by the registry's module name; the file exists, makes
    its consumer, and its docstring (operation, fragments, what the rung adds) stays short."""
    layout = layouts.LAYOUTS[name]
    path = KERNELS / f"{layout.module}.py"
    module = importlib.import_module(f"tma_kernels.paged_kv.{layout.module}")
    assert isinstance(module.make_consumer, types.FunctionType)
    docstring = ast.get_docstring(ast.parse(path.read_text()))
    assert f'score_layout="{name}"' in docstring
    assert len(docstring.splitlines()) <= MAX_DOCSTRING_LINES, f"{path.name}: {len(docstring.splitlines())} lines"


def test_kernel_names_carry_the_layout_suffix():
    for name, layout in layouts.LAYOUTS.items():
        rows = layout.rows_per_warp[-1]
        variant = Variant(dtype=layout.dtypes[-1], score_layout=name, rows_per_warp=rows,
                          consumer_warps=8 if layout.row_split else 4)
        assert variant.name.endswith(f"_causal{layout.suffix}{rows}" if layout.suffix else "_causal")


def test_the_layout_list_compiles_nothing():
    """layouts.py is plain Python: the sweep and the analysis read it without importing numba."""
    check = "import sys, tma_kernels.paged_kv.layouts; sys.exit('numba' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", check]).returncode == 0


def _imports(path: Path, package: str) -> set[str]:
    """The modules of ``package`` that ``path`` imports, at any depth of the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                found |= {f"{package}.{base}".rstrip(".")} if base else {f"{package}.{a.name}" for a in node.names}
            elif base.startswith(package):
                found.add(base)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(package)}
    return found


@pytest.mark.parametrize("folder, package", [(KERNELS, "tma_kernels.paged_kv"),
                                             (STUDY, "tma_study.studies.paged_kv")])
def test_no_import_circles(folder, package):
    """No module of the package reaches itself through the package's imports (at any depth of a
    file, function-level imports included), and no file is over 400 lines."""
    graph = {f"{package}.{p.stem}": _imports(p, package) - {package} for p in folder.glob("*.py")
             if p.stem != "__init__"}
    for start in graph:
        seen, stack = set(), list(graph[start])
        while stack:
            module = stack.pop()
            assert module != start, f"{start} imports itself through {sorted(seen)}"
            if module not in seen:
                seen.add(module)
                stack += graph.get(module, ())
    long = {p.name: n for p in folder.glob("*.py") if (n := len(p.read_text().splitlines())) >= 400}
    assert not long, long


def test_a_circle_would_be_found(tmp_path):
    """The check above can fail: an import inside a function closes a circle too."""
    (tmp_path / "a.py").write_text("def f():\n    from .b import g\n")
    (tmp_path / "b.py").write_text("from .a import f\n")
    assert _imports(tmp_path / "a.py", "pkg") == {"pkg.b"}
    with pytest.raises(AssertionError, match="imports itself"):
        test_no_import_circles(tmp_path, "pkg")
