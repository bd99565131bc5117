"""The main pipeline builds the paged_kv paper tier as soon as results/<reference>/paged_kv/
exists, with no further code: the main job (``snakemake -c2``) makes the rules of thumb with
paged_kv rows, its macros and comparison table and lists its section. With the committed
reference data these are outputs of the session's one main job (the ``main_job`` fixture, shared
with test_pipeline_no_gpu.py); where none are committed, a copy of the checkout is given the
synthetic raw folder of paged_kv_fixture and builds the paper tier's targets alone. Building the
PDF with every study section is test_pipeline_no_gpu's.
"""
import re

import pytest
import yaml
from paper_fixture import expanded_macros
from paged_kv_fixture import synthetic_raw
from pipeline_run import (
    REFERENCE_GPU,
    REPO,
    copy_checkout,
    output_of,
    snakemake,
)

from tma_study.paper import macros as macros_mod


RAW = f"results/{REFERENCE_GPU}/paged_kv"
PAPER_TIER = ["paper/generated/macros.tex", "paper/generated/studies.tex", "paper/tables/rules_of_thumb.md",
              "paper/tables/paged_kv_comparison.md", "paper/tables/paged_kv_summary.tex"]


@pytest.fixture(scope="module")
def paper_tier(request, tmp_path_factory):
    if (REPO / RAW).exists():                       # the committed data: the main job made the tier
        root, result = request.getfixturevalue("main_job")
        assert result.returncode == 0, output_of(result)[-5000:]
        return root
    root = copy_checkout(tmp_path_factory.mktemp("checkout"))
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["studies"]["paged_kv"]
    synthetic_raw(root / RAW, config)
    result = snakemake(root, "-c2", *PAPER_TIER)
    assert result.returncode == 0, output_of(result)[-5000:]
    return root


def test_the_paper_tier_lists_the_section_and_its_rules(paper_tier):
    studies = (paper_tier / "paper/generated/studies.tex").read_text()
    assert r"\input{sections/studies/paged_kv}" in studies
    rules = (paper_tier / "paper/tables/rules_of_thumb.md").read_text()
    assert len(re.findall(r"^\| paged_kv \|", rules, flags=re.MULTILINE)) >= 4
    assert "paged_kv_speedup" in rules and "paged_kv_fa3" in rules
    comparison = (paper_tier / "paper/tables/paged_kv_comparison.md").read_text()
    assert "paged_kv" in comparison


def test_every_macro_of_the_section_is_generated(paper_tier):
    defined = macros_mod.parse((paper_tier / "paper/generated/macros.tex").read_text())
    # notes about older runs or missed points: only the \ifdefined branches these data take count
    expanded = expanded_macros((REPO / "paper/sections/studies/paged_kv.tex").read_text(), set(defined))
    used = {name for name in expanded if name.startswith(("pagedKv", "claimsOf"))}
    assert used and not sorted(used - set(defined)), sorted(used - set(defined))
