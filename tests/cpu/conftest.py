"""The CPU tests, arranged like the code: one folder per study (crossover/, multicast/, dsm/,
gemm/; paged_kv's tests beside them), paper/ (claims, catalog, macros, rules of thumb),
pipeline/ (the Snakemake workflow, its configs and the bad inputs it refuses), harness/,
kernels/ (the PTX toolkit, tensor maps, the kernel cache) and environment/ (the declared
dependencies). helpers/ holds the synthetic data and shared code the tests import by module
name (``from crossover_fixture import ...``): this file puts it on the import path.

Markers (pyproject.toml): ``slow`` (the whole no-GPU pipeline), ``exhaustive`` (every variant
beyond one per kernel family; deselected unless ``pytest -m exhaustive``)."""
import sys
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parent / "helpers"
if str(HELPERS) not in sys.path:
    sys.path.insert(0, str(HELPERS))

from bad_input_fixture import results_digest  # noqa: E402  (helpers/ is on the path from here on)


@pytest.fixture
def results_unchanged():
    """The case leaves results/ of the checkout as it was (the bad-input tests use it for
    every case: ``pytestmark = pytest.mark.usefixtures("results_unchanged")``)."""
    before = results_digest()
    yield
    assert results_digest() == before, "a bad-input case changed results/"
