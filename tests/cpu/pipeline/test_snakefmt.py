"""The workflow is snakefmt-clean (the formatting the Snakemake community uses), so a diff
of a rule shows what changed, not how it was laid out, and `snakemake --lint` finds nothing
but what docs/known_limits.md explains."""
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


# The lint findings docs/known_limits.md explains; any other is fixed, not explained away.
EXPLAINED_LINTS = ("Specify a conda environment or container for each rule.",
                   "Environment variable TMA_STUDY_ROOT used but not asserted with envvars directive",
                   "Environment variable PYTHONPATH used but not asserted with envvars directive")


def test_snakemake_lint_finds_only_what_known_limits_explains():
    snakemake = Path(sys.executable).parent / "snakemake"
    result = subprocess.run([str(snakemake), "--lint"], cwd=REPO, capture_output=True, text=True, timeout=600)
    findings = [line.strip()[2:] for line in (result.stdout + result.stderr).splitlines()
                if line.startswith("    * ")]
    assert findings, result.stdout + result.stderr
    unexplained = [f for f in findings if not f.startswith(EXPLAINED_LINTS)]
    assert not unexplained, "fix them, or explain each in docs/known_limits.md:\n" + "\n".join(unexplained)
