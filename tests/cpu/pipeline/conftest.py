"""Copies of the checkout for the pipeline tests to damage (results/ included; the original's
results/ is checked untouched by the ``results_unchanged`` fixture)."""
import shutil
from pathlib import Path

import pytest
from bad_input_fixture import copy_checkout


@pytest.fixture(scope="module")
def pristine_checkout(tmp_path_factory) -> Path:
    """One copy of the checkout per test module, never changed."""
    return copy_checkout(tmp_path_factory.mktemp("pristine"))


@pytest.fixture
def checkout(pristine_checkout, tmp_path) -> Path:
    """A fresh copy of the checkout for one case to damage."""
    target = tmp_path / "checkout"
    shutil.copytree(pristine_checkout, target, symlinks=True)
    return target
