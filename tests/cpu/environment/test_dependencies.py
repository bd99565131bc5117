"""Declared and locked dependencies: constraints/h200-reference.txt pins exactly what the
reference provenance records, inside pyproject's bounds (so pip can install it); what a study's
measure step needs beyond the base install is declared in the measure extra; the LICENSE file
is the license pyproject names."""
import json
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tma_study.studies import discover

REPO = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
CONSTRAINTS = REPO / "constraints" / "h200-reference.txt"
IMPORT_NAME = {"torch": "torch", "triton": "triton"}   # measure extra distribution -> module a study imports


def pinned() -> dict[str, Version]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", f"{line}: a lock pins exact versions"
            pins[canonicalize_name(requirement.name)] = Version(spec.version)
    return pins


def recorded() -> dict[str, Version]:
    """{package: version} every reference provenance.json records (they must agree)."""
    versions: dict[str, Version] = {}
    for path in sorted((REPO / "results" / "h200").glob("*/provenance.json")):
        for name, version in json.loads(path.read_text())["packages"].items():
            if version is None:
                continue
            name = canonicalize_name(name)
            assert versions.setdefault(name, Version(version)) == Version(version), f"{path}: {name} {version}"
    return versions


def declared() -> dict[str, Requirement]:
    requirements = PROJECT["dependencies"] + PROJECT["optional-dependencies"]["measure"]
    return {canonicalize_name(Requirement(r).name): Requirement(r) for r in requirements}


def test_the_lock_pins_exactly_what_the_reference_provenance_records():
    assert pinned() == recorded()


def test_every_pinned_version_is_inside_the_declared_bounds():
    bounds = declared()
    outside = {name: str(version) for name, version in pinned().items()
               if name in bounds and not bounds[name].specifier.contains(version, prereleases=True)}
    assert not outside, f"pyproject.toml's bounds exclude the reference versions: {outside}"


def test_what_a_measure_step_needs_is_declared_in_the_measure_extra():
    extra = {canonicalize_name(Requirement(r).name) for r in PROJECT["optional-dependencies"]["measure"]}
    needed = {module for study in discover().values() for module in study.measure_needs}
    assert needed and needed <= {IMPORT_NAME[name] for name in extra}


def test_the_license_file_is_the_license_pyproject_names():
    assert PROJECT["license"] == {"text": "BSD-3-Clause"}
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "Neither the name of the copyright holder" in text
