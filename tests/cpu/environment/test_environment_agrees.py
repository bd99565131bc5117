"""environment.yml (conda) and pyproject.toml (pip) state the same dependencies with the
same bounds and extras, so the two ways of installing the artifact cannot drift apart."""

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

REPO = Path(__file__).resolve().parents[3]
PYPROJECT = REPO / "pyproject.toml"
ENVIRONMENT = REPO / "environment.yml"
CONDA_ONLY = {"python", "pip"}          # the interpreter and installer, not project dependencies
PROJECT_ITSELF = "-e .[test]"


def normalise(name: str) -> str:
    return name.lower().replace("_", "-")


def conda_to_pep508(spec: str) -> str:
    """'numpy >=1.26,<2.5' -> 'numpy>=1.26,<2.5'; conda's fuzzy 'pandas=2.1' -> 'pandas==2.1.*'."""
    spec = re.sub(r"\s+", "", spec)
    return re.sub(r"^([A-Za-z0-9_.\-\[\],]+)=(?![=])([^,<>=!]+)$", r"\1==\2.*", spec)


def index(requirements: list[str], where: str) -> dict[str, tuple[frozenset, SpecifierSet]]:
    """{normalised name: (extras, specifier set)}; a name listed twice is an error."""
    found = {}
    for text in requirements:
        requirement = Requirement(text)
        name = normalise(requirement.name)
        if name in found:
            raise AssertionError(f"{where} lists {name} twice")
        found[name] = (frozenset(requirement.extras), requirement.specifier)
    return found


def pyproject_requirements() -> list[str]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    return project["dependencies"] + project["optional-dependencies"]["test"]


def environment_sections() -> tuple[list[str], list[str]]:
    """(conda dependencies without python/pip, pip section without the project itself)."""
    document = yaml.safe_load(ENVIRONMENT.read_text())
    conda, pip = [], []
    for entry in document["dependencies"]:
        if isinstance(entry, dict):
            pip += [line for line in entry["pip"] if line != PROJECT_ITSELF]
        elif normalise(re.split(r"[\s=<>!\[]", entry, maxsplit=1)[0]) not in CONDA_ONLY:
            conda.append(conda_to_pep508(entry))
    return conda, pip


def differences(pyproject: dict, environment: dict) -> list[str]:
    problems = []
    for name in sorted(set(pyproject) | set(environment)):
        if name not in environment:
            problems.append(f"{name}: in pyproject.toml, missing from environment.yml")
        elif name not in pyproject:
            problems.append(f"{name}: in environment.yml, missing from pyproject.toml")
        elif pyproject[name] != environment[name]:
            (py_extras, py_spec), (env_extras, env_spec) = pyproject[name], environment[name]
            problems.append(f"{name}: pyproject.toml has {sorted(py_extras)} '{py_spec}', "
                            f"environment.yml has {sorted(env_extras)} '{env_spec}'")
    return problems


# ------------------------------------------------------------------ the files themselves
def test_environment_states_the_same_dependencies_and_bounds_as_pyproject():
    conda, pip = environment_sections()
    problems = differences(index(pyproject_requirements(), "pyproject.toml"),
                           index(conda + pip, "environment.yml"))
    assert not problems, "environment.yml and pyproject.toml disagree:\n  " + "\n  ".join(problems)


def test_pip_section_repeats_pyproject_strings_verbatim():
    _, pip = environment_sections()
    declared = set(pyproject_requirements())
    assert [line for line in pip if line not in declared] == []


def test_cuda_and_numba_packages_come_from_pip():
    conda, _ = environment_sections()
    from_conda = [Requirement(line).name for line in conda]
    assert [name for name in from_conda if name.startswith(("cuda", "nvidia", "numba"))] == []


def test_environment_installs_the_project_with_its_test_extra_last():
    document = yaml.safe_load(ENVIRONMENT.read_text())
    assert document["name"] == "tma-study"
    assert document["channels"] == ["conda-forge"]
    assert any(str(entry).startswith("python") for entry in document["dependencies"])
    pip_section = next(entry["pip"] for entry in document["dependencies"] if isinstance(entry, dict))
    assert pip_section[-1] == PROJECT_ITSELF


# ------------------------------------------------------------------ the comparison itself
def compare(pyproject: list[str], environment: list[str]) -> list[str]:
    return differences(index(pyproject, "pyproject"), index(environment, "environment"))


def test_comparison_accepts_reordered_specifiers_and_normalised_names():
    assert compare(["cuda_core>=1.0,<2", "PyYAML>=6"], ["cuda-core<2,>=1.0", "pyyaml>=6"]) == []


@pytest.mark.parametrize("pyproject, environment, named", [
    (["pandas>=2.1"], ["pandas>=2.0"], "pandas"),
    (["numpy>=1.26,<2.5"], ["numpy>=1.26"], "numpy"),
    (["numba-cuda[cu13]==0.30.4"], ["numba-cuda==0.30.4"], "numba-cuda"),
    (["cuda-bench[cu13]==0.3.*"], ["cuda-bench[cu12]==0.3.*"], "cuda-bench"),
    (["jupytext>=1.16", "pyyaml>=6"], ["pyyaml>=6"], "jupytext"),
    (["pyyaml>=6"], ["pyyaml>=6", "pytest>=8"], "pytest"),
])
def test_comparison_names_the_package_that_differs(pyproject, environment, named):
    problems = compare(pyproject, environment)
    assert len(problems) == 1 and problems[0].startswith(f"{named}:")


def test_conda_fuzzy_version_means_that_release_series():
    assert conda_to_pep508("pandas=2.1") == "pandas==2.1.*"
    assert conda_to_pep508("numpy >=1.26,<2.5") == "numpy>=1.26,<2.5"


def test_environment_pyproject_and_readme_promise_the_same_python():
    """One minimum Python everywhere a reader looks: pyproject's requires-python, environment.yml
    and the README's first command."""
    minimum = tomllib.loads(PYPROJECT.read_text())["project"]["requires-python"]
    assert re.fullmatch(r">=3\.\d+", minimum), minimum
    document = yaml.safe_load(ENVIRONMENT.read_text())
    pythons = [entry for entry in document["dependencies"] if str(entry).startswith("python")]
    assert pythons == [f"python{minimum}"], pythons
    readme = (REPO / "README.md").read_text()
    assert f"Python ≥ {minimum[2:]}" in readme and not re.search(r"Python ≥ 3\.(?!%s\b)\d+" % minimum[4:], readme)
