"""A study imports only the shared tiers and itself (docs/adding_a_study.md, issue 48).

Every import statement of ``src/tma_study/studies/<X>/`` (absolute ``tma_study.studies.<Y>`` or
relative ``..<Y>``) and of ``kernels/<X>/`` (``tma_kernels.<Y>``, or ``..<Y>``) is read from the
source, so a lazy import inside a function counts too. An import of another study's package fails
the test: code two studies need lives in a shared tier (``tma_study.harness``,
``tma_study.gemm_lib``, ``kernels/common``, ``tma_kernels.ptx`` ...), and a study that uses another's
results reads its derived files as declared Snakemake inputs.

``STILL_CROSSING`` lists the edges not yet removed (each must still exist, so the list only shrinks).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
STUDIES = REPO / "src" / "tma_study" / "studies"
KERNELS = REPO / "kernels"

# (importer, imported): results one study computes from another's raw data with that study's Python,
# to be read from its derived files instead (the remaining part of issue 48 item 1)
STILL_CROSSING = {
    ("studies", "gemm", "crossover"),               # gemm/predict.py: crossover.csv of the crossover study
    ("studies", "gemm", "multicast"),               # gemm/predict.py: speedup.csv, compute_boundary.csv
    ("studies", "gemm_cluster", "gemm"),            # gemm_cluster/aggregate.py: gemm.predict.multicast_verdicts
    ("studies", "paged_kv_tma", "paged_kv"),        # the paged-KV grid, kernel build and measure helpers
}


def study_folders(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}


def imported_packages(path: Path, package: str, root_parts: tuple[str, ...]) -> set[str]:
    """Second-level names under ``root_parts`` (e.g. ('tma_study', 'studies')) that ``path``
    imports, absolute or relative; ``package`` is the dotted package ``path`` is in."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            # "from tma_study.studies import gemm" imports package gemm
            modules = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if tuple(parts[: len(root_parts)]) == root_parts and len(parts) > len(root_parts):
                names.add(parts[len(root_parts)])
    return names


def crossing_edges(root: Path, dotted_root: tuple[str, ...], tier: str, folders: set[str]) -> set[tuple[str, str, str]]:
    """(tier, study, other study) for every import between two of ``folders`` under ``root``."""
    edges = set()
    for study in sorted(folders):
        for path in sorted((root / study).rglob("*.py")):
            package = ".".join(dotted_root + (study,) + path.relative_to(root / study).parent.parts)
            for other in imported_packages(path, package, dotted_root) & folders:
                if other != study:
                    edges.add((tier, study, other))
    return edges


def all_edges() -> set[tuple[str, str, str]]:
    studies = study_folders(STUDIES)
    # a study's kernel folder is named after it (kernels/ptx, kernels/common ... are shared tiers)
    return (crossing_edges(STUDIES, ("tma_study", "studies"), "studies", studies)
            | crossing_edges(KERNELS, ("tma_kernels",), "kernels", study_folders(KERNELS) & studies))


def test_no_study_imports_another_study():
    new = sorted(all_edges() - STILL_CROSSING)
    assert not new, "a study imports another study's package (move the shared code to a shared tier, or read " \
                    "the other study's derived files as declared inputs): " + \
                    ", ".join(f"{tier}/{a} -> {b}" for tier, a, b in new)


def test_the_list_of_remaining_crossings_only_shrinks():
    gone = sorted(STILL_CROSSING - all_edges())
    assert not gone, f"remove these from STILL_CROSSING, they no longer cross: {gone}"


@pytest.mark.parametrize("source, package, found", [
    ("from tma_study.studies.multicast.device import launcher", "tma_study.studies.dsm", {"multicast"}),
    ("from tma_study.studies import gemm", "tma_study.studies.gemm_paired", {"gemm"}),
    ("import tma_study.studies.crossover.reference", "tma_study.studies.dsm", {"crossover"}),
    ("from ..gemm.rows import TIE_TOLERANCE", "tma_study.studies.gemm_cluster", {"gemm"}),
    ("from ..multicast import reference", "tma_study.studies.dsm", {"multicast"}),
    ("from . import grid", "tma_study.studies.dsm", {"dsm"}),
    ("from tma_study.harness import timing", "tma_study.studies.dsm", set()),
    ("def f():\n    from tma_study.studies.paged_kv.grid import Shape\n", "tma_study.studies.x", {"paged_kv"}),
])
def test_every_form_of_import_is_seen(tmp_path, source, package, found):
    path = tmp_path / "module.py"
    path.write_text(source + "\n")
    assert imported_packages(path, package, ("tma_study", "studies")) == found


def test_kernel_folder_imports_are_seen(tmp_path):
    path = tmp_path / "module.py"
    path.write_text("from tma_kernels.multicast.consume import make_consume\nfrom ..multicast import ring\n"
                    "from tma_kernels.ptx import smem_u32\n")
    assert imported_packages(path, "tma_kernels.dsm", ("tma_kernels",)) == {"multicast", "ptx"}
    kernel_studies = study_folders(KERNELS) & study_folders(STUDIES)
    assert {"multicast", "dsm", "paged_kv", "crossover"} <= kernel_studies
    assert not {"common", "ptx", "tensor_map"} & kernel_studies
