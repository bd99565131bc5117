"""Load the pipeline config and validate it before any work starts.

The top-level schema is ``workflow/schemas/config.schema.yaml``; each study's section is
validated by its own ``workflow/schemas/studies/<study>.schema.yaml``, so adding a study
adds a schema file instead of editing a central one. Every error names the config key
(``studies.crossover.bytes_per_transfer[2]``), the offending value and what is allowed.
"""
from __future__ import annotations

from pathlib import Path

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas"
TOP_SCHEMA = SCHEMA_DIR / "config.schema.yaml"


class ConfigError(ValueError):
    """The config is invalid; the message names every offending key."""


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


def _schema_registry(folder: Path) -> Registry:
    """The schemas beside one another, so ``$ref: "multicast.schema.yaml#/$defs/..."`` resolves."""
    return Registry().with_resources(
        (path.name, Resource.from_contents(yaml.safe_load(path.read_text()), default_specification=DRAFT202012))
        for path in folder.glob("*.schema.yaml"))


def validate_against(instance, schema_path: Path, key_prefix: str = "") -> list[str]:
    """Messages for every violation of the schema at ``schema_path`` (empty when valid)."""
    schema = yaml.safe_load(schema_path.read_text())
    validator = jsonschema.Draft202012Validator(schema, registry=_schema_registry(schema_path.parent))
    messages = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        for leaf in leaf_errors(error):  # absolute_path includes the parents' path
            messages.append(f"config key '{key_path(leaf.absolute_path, key_prefix) or '<config>'}': {_describe(leaf)}")
    return sorted(set(messages))


BOOLEAN_KEYS = ("measure", "overwrite_reference")
COMMAND_LINE_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def coerce_command_line(config: dict) -> dict:
    """``snakemake --config measure=true`` passes the string "true": make such values booleans.

    Anything else is left as it is, for validation to reject with the key's name.
    """
    for key in BOOLEAN_KEYS:
        value = config.get(key)
        if isinstance(value, str) and value.strip().lower() in COMMAND_LINE_BOOLEANS:
            config[key] = COMMAND_LINE_BOOLEANS[value.strip().lower()]
    return config


def validate(config: dict, known_studies) -> dict:
    """Raise ConfigError listing every problem; return the config unchanged when valid."""
    messages = validate_against(config, TOP_SCHEMA)
    studies = config.get("studies")
    for name, section in (studies.items() if isinstance(studies, dict) else ()):
        if name not in known_studies:
            messages.append(f"config key 'studies.{name}': unknown study {name!r}; known studies: "
                            f"{', '.join(sorted(known_studies))}")
            continue
        messages += validate_against(section, SCHEMA_DIR / "studies" / f"{name}.schema.yaml",
                                     key_prefix=f"studies.{name}")
    if messages:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(messages))
    return config


def load(path: Path, known_studies, overrides: dict | None = None) -> dict:
    """Read a YAML config, apply ``overrides`` (top-level keys), validate it."""
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"config file {path} must hold a mapping, not {type(config).__name__}")
    config.update(overrides or {})
    return validate(config, known_studies)
