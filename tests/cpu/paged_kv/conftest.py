"""Shared by the paged_kv CPU tests: the helper modules of tests/cpu (raw_fixture, paper_fixture,
paged_kv_fixture, ...) importable from here, and the shipped config's paged_kv section."""
import sys
from pathlib import Path

import pytest

CPU_TESTS = Path(__file__).resolve().parents[1]
if str(CPU_TESTS) not in sys.path:     # a worker given only this folder's files still finds them
    sys.path.insert(0, str(CPU_TESTS))

from paged_kv_fixture import shipped_study_config  # noqa: E402


@pytest.fixture
def study_config():
    """config/config.yaml's studies.paged_kv, a fresh copy for the test to change."""
    return shipped_study_config()
