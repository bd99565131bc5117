"""The workflow is snakefmt-clean (the formatting the Snakemake community uses), so a diff
of a rule shows what changed, not how it was laid out."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def test_snakefile_and_rules_are_snakefmt_clean():
    snakefmt = shutil.which("snakefmt", path=str(Path(sys.executable).parent)) or shutil.which("snakefmt")
    if snakefmt is None:
        pytest.skip("snakefmt is not installed: pip install -e '.[test]'")
    files = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
    result = subprocess.run([snakefmt, "--check", *map(str, files)], capture_output=True, text=True)
    assert result.returncode == 0, f"run `snakefmt Snakefile workflow/rules/`:\n{result.stderr}"
