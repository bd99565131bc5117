"""Load the pipeline config and validate it before any work starts.

The top-level schema is ``workflow/schemas/config.schema.yaml``; each study's section is
validated by its own ``workflow/schemas/studies/<study>.schema.yaml``, so adding a study
adds a schema file instead of editing a central one, and a study whose keys constrain one
another declares a ``check_config`` entry point, run here too. Every error names the config
key (``studies.crossover.bytes_per_transfer[2]``), the offending value and what is allowed;
a YAML file that does not parse is named with its line and column.

The project root (schemas, config, results, build) is $TMA_STUDY_ROOT where it is set (the
Snakefile sets it to its own folder, for itself and its jobs), else the checkout this package
lies in; a package installed from a wheel outside any checkout reads the copy of the schemas
it ships (``PACKAGED_SCHEMA_DIR``).
"""
from __future__ import annotations

import functools
import inspect
import os
from pathlib import Path

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

ROOT_VARIABLE = "TMA_STUDY_ROOT"
REPO_ROOT = Path(os.environ.get(ROOT_VARIABLE) or Path(__file__).resolve().parents[2]).resolve()
# An installed wheel carries a copy of workflow/schemas/ (setup.py): used where no checkout is
# around (no $TMA_STUDY_ROOT, and the package does not lie in a checkout).
PACKAGED_SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
SCHEMA_DIR = (PACKAGED_SCHEMA_DIR if not os.environ.get(ROOT_VARIABLE) and PACKAGED_SCHEMA_DIR.is_dir()
              and not (REPO_ROOT / "workflow" / "schemas").is_dir() else REPO_ROOT / "workflow" / "schemas")
TOP_SCHEMA = SCHEMA_DIR / "config.schema.yaml"


class ConfigError(ValueError):
    """The config is invalid; the message names every offending key."""


def check_root() -> Path:
    """REPO_ROOT, when it holds this project (else ConfigError naming it and $TMA_STUDY_ROOT)."""
    if not TOP_SCHEMA.is_file():
        raise ConfigError(f"{REPO_ROOT} is not a checkout of the TMA study (no {TOP_SCHEMA.relative_to(REPO_ROOT)}); "
                          f"set ${ROOT_VARIABLE} to the checkout's folder or run from it")
    return REPO_ROOT


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """A safe loader (libyaml's where built: the workflow reads config.yaml at every start) that
    refuses a mapping giving the same key twice (the later would win)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice in one mapping", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path):
    """The YAML document at ``path``; ConfigError naming the file, line and column where it is
    missing, does not parse, or repeats a key."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"config file {path} cannot be read: {error}") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)   # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f", line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"config file {path}{where}: not valid YAML: {problem}") from None


def key_path(path, prefix: str = "") -> str:
    """'studies.crossover.bytes_per_transfer[2]' for a JSON-schema error path ('' at the root).

    Shared by every file the project validates (config, catalog, claims)."""
    key = prefix
    for part in path:
        key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else str(part))
    return key


def _describe(error: jsonschema.ValidationError) -> str:
    """'<value> is not allowed: <schema description>' where the schema explains itself."""
    allowed = error.schema.get("description") if isinstance(error.schema, dict) else None
    if error.validator == "enum":
        allowed = allowed or f"one of {error.validator_value}"
        return f"{error.instance!r} is not allowed; allowed: {allowed}"
    if allowed and error.validator not in ("required", "additionalProperties"):
        return f"{error.message} (allowed: {allowed})"
    return error.message


def leaf_errors(error):
    """The most specific errors under an allOf/anyOf/if-then/$ref chain."""
    if error.context:
        for sub in error.context:
            yield from leaf_errors(sub)
    else:
        yield error


_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=None)
def _schema_file(path: Path, modified_ns: int):
    """A schema file's document (cached per file version: schemas are read once per process)."""
    return yaml.load(path.read_text(), Loader=_SAFE_LOADER)   # noqa: S506 (a safe loader)


def load_schema(path: Path):
    path = Path(path)
    return _schema_file(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=None)
def _validator(schema_path: Path, versions: tuple) -> jsonschema.Draft202012Validator:
    folder = schema_path.parent
    registry = Registry().with_resources(
        (path.name, Resource.from_contents(load_schema(path), default_specification=DRAFT202012))
        for path in folder.glob("*.schema.yaml"))
    return jsonschema.Draft202012Validator(load_schema(schema_path), registry=registry)


def _schema_validator(schema_path: Path) -> jsonschema.Draft202012Validator:
    """A validator of the schema at ``schema_path``, with the schemas beside it resolvable
    (``$ref: "multicast.schema.yaml#/$defs/..."``)."""
    schema_path = Path(schema_path)
    versions = tuple((p.name, p.stat().st_mtime_ns) for p in sorted(schema_path.parent.glob("*.schema.yaml")))
    return _validator(schema_path, versions)


def validate_against(instance, schema_path: Path, key_prefix: str = "", noun: str = "config key") -> list[str]:
    """Messages for every violation of the schema at ``schema_path`` (empty when valid), each
    starting ``<noun> '<key>'``."""
    validator = _schema_validator(schema_path)
    messages = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        for leaf in leaf_errors(error):  # absolute_path includes the parents' path
            messages.append(f"{noun} '{key_path(leaf.absolute_path, key_prefix) or ('<config>' if noun == 'config key' else '<top level>')}': {_describe(leaf)}")
    return sorted(set(messages))


BOOLEAN_KEYS = ("measure", "overwrite_reference")
COMMAND_LINE_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
RUN_STUDIES = "run_studies"


def coerce_command_line(config: dict, command_line: dict | None = None) -> dict:
    """Values given with ``snakemake --config KEY=VALUE``, typed as a YAML file would type them.

    Snakemake reads nested values (``studies='{crossover: {stages: [4]}}'``) as strings all the
    way down; ``command_line`` (Snakemake's ``workflow.config_settings.config``) says which
    values came from there, and each of their string leaves is read as a YAML scalar. The
    boolean keys also take the strings true/yes/1 and false/no/0 in any case, and
    ``run_studies`` a comma-separated list. Anything else is left for validation to reject.
    """
    for key, given in (command_line or {}).items():
        config[key] = _merge_typed(config.get(key), given)
    for key in BOOLEAN_KEYS:
        value = config.get(key)
        if isinstance(value, str) and value.strip().lower() in COMMAND_LINE_BOOLEANS:
            config[key] = COMMAND_LINE_BOOLEANS[value.strip().lower()]
    selected = config.get(RUN_STUDIES)
    if isinstance(selected, str):
        config[RUN_STUDIES] = [name.strip() for name in selected.split(",") if name.strip()]
    return config


def _typed(value):
    """A command-line string leaf as YAML reads it ('4' -> 4, 'true' -> True, 'h200' -> 'h200')."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, str):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        return parsed if isinstance(parsed, (int, float, bool)) or parsed is None else value
    return value


def _merge_typed(current, given):
    """``current`` (the merged config's value) with ``given``'s string leaves typed."""
    if isinstance(current, dict) and isinstance(given, dict):
        return {**current, **{k: _merge_typed(current.get(k), v) for k, v in given.items()}}
    return _typed(given)


def validate(config: dict, known_studies, expand: bool = False) -> dict:
    """Raise ConfigError listing every problem; return the config unchanged when valid.

    Each study section is checked by its schema, then (when the schema passes) by the study's
    ``check_config`` entry point, for rules that tie one key to another (``expand``: the
    measure step's start, where a study may also build its whole sweep). A ``check_config`` that
    takes a ``config`` argument also gets this whole config (gemm_cluster checks, in a measure run
    that selects it, that studies.gemm builds its variants).
    """
    messages = validate_against(config, TOP_SCHEMA)
    studies = config.get("studies")
    for name, section in (studies.items() if isinstance(studies, dict) else ()):
        if name not in known_studies:
            messages.append(f"config key 'studies.{name}': unknown study {name!r}; known studies: "
                            f"{', '.join(sorted(known_studies))}")
            continue
        problems = validate_against(section, SCHEMA_DIR / "studies" / f"{name}.schema.yaml",
                                    key_prefix=f"studies.{name}")
        if not problems and known_studies[name].check_config is not None:
            check = known_studies[name].entry("check_config")
            extra = {"config": config} if "config" in inspect.signature(check).parameters else {}
            problems = list(check(section, expand=expand, **extra))
        messages += problems
    selected = config.get(RUN_STUDIES)
    for i, name in enumerate(selected if isinstance(selected, list) else ()):   # a wrong type: schema says so
        if isinstance(studies, dict) and isinstance(name, str) and name not in studies:
            messages.append(f"config key '{RUN_STUDIES}[{i}]': {name!r} is not a study of key 'studies'; "
                            f"choose among {', '.join(sorted(studies))}")
    if messages:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(messages))
    return config


def selected_studies(config: dict) -> list[str]:
    """The studies this run takes: ``run_studies`` where given, else every section of ``studies``."""
    return list(config.get(RUN_STUDIES) or config["studies"])


def load(path: Path, known_studies, overrides: dict | None = None, expand: bool = False) -> dict:
    """Read a YAML config, apply ``overrides`` (top-level keys), validate it."""
    path = Path(path)
    config = read_yaml(path)
    if not isinstance(config, dict):
        raise ConfigError(f"config file {path} must hold a mapping, not {type(config).__name__}")
    config.update(overrides or {})
    return validate(config, known_studies, expand=expand)
