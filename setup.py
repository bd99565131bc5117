"""The package list and the shipped schemas, computed so that they cannot go stale.

pyproject.toml holds the project's metadata; this file adds what a static list would let drift
(tests/cpu/environment/test_wheel.py installs the wheel outside the checkout and runs it):

- every package under ``src/`` (``tma_study`` and its subpackages) and under ``kernels/``
  (imported as ``tma_kernels``), found by setuptools.find_packages;
- the workflow's JSON schemas (``workflow/schemas/``), copied into the wheel as
  ``tma_study/schemas/`` (tma_study.config reads them there when no checkout is around).
"""
import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SCHEMAS = ROOT / "workflow" / "schemas"
PACKAGES = find_packages("src") + ["tma_kernels", *(f"tma_kernels.{name}" for name in find_packages("kernels"))]


class BuildWithSchemas(build_py):
    """build_py, plus workflow/schemas/**/*.yaml as tma_study/schemas/ in the build."""

    def run(self):
        super().run()
        target = Path(self.build_lib) / "tma_study" / "schemas"
        for source in sorted(SCHEMAS.rglob("*.yaml")):
            destination = target / source.relative_to(SCHEMAS)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination)


setup(packages=PACKAGES, package_dir={"": "src", "tma_kernels": "kernels"}, cmdclass={"build_py": BuildWithSchemas})
