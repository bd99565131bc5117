"""The claims files, ``config/claims/<study>.yaml``, read into ``Claim`` objects and validated
against ``workflow/schemas/claims.schema.yaml`` and what the schema cannot say (the file's study,
the figure or table the claim rests on, operators that fit the value). A bad file stops with
``ClaimsError`` naming the file, each claim id and key. ``tma_study.paper.claims`` checks them.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import yaml

from tma_study.config import REPO_ROOT, SCHEMA_DIR, key_path

from . import catalog
from .claim_checks import is_number

CLAIMS_DIR = REPO_ROOT / "config" / "claims"
SCHEMA = SCHEMA_DIR / "claims.schema.yaml"
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml where built: the same data, faster


class ClaimsError(ValueError):
    """A claims file is invalid; the message names the file, each claim id and key."""


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    study: str
    figure: str
    check: dict | list
    needs: str | None = None
    source: str = ""            # the claims file, for messages
    instead: str | None = None  # the claim stating what the data show where this expectation fails
    reference_gpu_specific: str | None = None   # why its thresholds hold for the reference GPU only

    @property
    def checks(self) -> list[dict]:
        """The claim's checks: one, or the list that must all hold."""
        return list(self.check) if isinstance(self.check, list) else [self.check]


def _key_path(path) -> str:
    return key_path(path) or "<file>"


def _branch_errors(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    """An anyOf error replaced by the errors of the branch that fits the value's type (a check
    given as one mapping, or as a list of them), so the message names the key at fault."""
    if error.validator != "anyOf" or not error.context:
        return [error]
    branches: dict[int, list] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    fitting = [subs for subs in branches.values()
               if not any(sub.validator == "type" and not sub.relative_path for sub in subs)]
    if len(fitting) != 1:
        return [error]
    return [leaf for sub in fitting[0] for leaf in _branch_errors(sub)]


@functools.lru_cache(maxsize=None)
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(yaml.load(SCHEMA.read_text(), Loader=_SAFE_LOADER))   # noqa: S506


def _schema_messages(data, source: str) -> list[str]:
    validator = _validator()
    messages = []
    for error in (leaf for top in validator.iter_errors(data) for leaf in _branch_errors(top)):
        path = list(error.absolute_path)
        where = f"{source}: key '{_key_path(path)}'"
        if len(path) >= 2 and path[0] == "claims" and isinstance(path[1], int):
            claim = data["claims"][path[1]]
            claim_id = claim.get("id") if isinstance(claim, dict) else None
            name = f"claim {claim_id!r}" if claim_id else f"claim #{path[1] + 1} (no id)"
            where = f"{source}: {name} key '{_key_path(path[2:])}'"
        allowed = error.schema.get("description") if isinstance(error.schema, dict) else None
        detail = error.message
        if error.validator == "enum":
            detail = f"{error.instance!r} is not allowed; allowed: {', '.join(map(str, error.validator_value))}"
        elif allowed and error.validator not in ("required", "additionalProperties"):
            detail += f" (allowed: {allowed})"
        messages.append(f"{where}: {detail}")
    return sorted(set(messages))


def _non_gpu_study(name: str):
    """(tables and figures, derived files) of a study whose data do not come from a GPU of its own
    (the catalog; the advisor, scored from other studies' data), or None."""
    if name == "catalog":
        return catalog.TABLES, catalog.DERIVED_FILES
    if name == "advisor":
        from tma_study.advisor.validation import run as advisor_validation
        return (*advisor_validation.FIGURES, *advisor_validation.TABLES), advisor_validation.DERIVED_FILES
    return None


def _semantic_messages(claim: Claim, studies: dict | None) -> list[str]:
    """What the schema cannot say: the file's study, the figure, operators that fit the value."""
    at = f"{claim.source}: claim {claim.id!r}"
    messages = []
    stem = Path(claim.source).stem
    if claim.study != stem:
        messages.append(f"{at} key 'study': {claim.study!r} differs from the file's study {stem!r} "
                        f"(claims of study S live in config/claims/S.yaml)")
    study = (studies or {}).get(claim.study)
    known_files = None
    if study is not None:
        known, known_files = (*study.figures, *study.tables, f"{study.name}_kernels"), study.derived_files
    elif studies is not None and _non_gpu_study(claim.study) is not None:
        known, known_files = _non_gpu_study(claim.study)
    if known_files is not None and claim.figure not in known:
        messages.append(f"{at} key 'figure': {claim.figure!r} is not a figure or table of study "
                        f"{claim.study!r}; allowed: {', '.join(known)}")
    for index, check in enumerate(claim.checks):
        key = "check" if not isinstance(claim.check, list) else f"check[{index}]"
        derived = check["file"].removeprefix("derived/")
        if known_files is not None and derived not in known_files:
            messages.append(f"{at} key '{key}.file': {check['file']!r} is not written by study "
                            f"{claim.study!r}; allowed: {', '.join('derived/' + f for f in known_files)}")
        messages += _value_messages(check, f"{at} key '{key}")
    return messages


def _value_messages(check: dict, at: str) -> list[str]:
    """Operators, tolerance and margin that fit the check's value."""
    value, op = check["value"], check["op"]
    messages = []
    if not is_number(value) and op not in ("==", "!="):
        messages.append(f"{at}.op': {op!r} needs a number; with {value!r} allowed: ==, !=")
    if not is_number(value) and "tolerance" in check:
        messages.append(f"{at}.tolerance': a tolerance needs a number value, not {value!r}")
    if "margin" in check:
        if not is_number(value) or op == "!=":
            messages.append(f"{at}.margin': a margin needs a number value and one of <, <=, >, >=, ==")
        elif op == "==" and float(check.get("tolerance", 0)) <= check["margin"] * abs(value):
            messages.append(f"{at}.margin': with == the margin narrows the tolerance; "
                            f"{check.get('tolerance', 0)} leaves nothing for a margin of {check['margin']}")
    return messages


def parse_file(path: Path, studies: dict | None = None) -> list[Claim]:
    """The claims of one file, validated; raises ClaimsError naming every problem."""
    path = Path(path)
    source = str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)
    try:
        data = yaml.load(path.read_text(), Loader=_SAFE_LOADER)   # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        raise ClaimsError(f"{source} is not valid YAML: {exc}") from None
    messages = _schema_messages(data, source)
    if messages:
        raise ClaimsError("invalid claims:\n  " + "\n  ".join(messages))
    claims = [Claim(id=c["id"], statement=c["statement"], study=c["study"], figure=c["figure"],
                    check=c["check"], needs=c.get("needs"), source=source, instead=c.get("instead"),
                    reference_gpu_specific=c.get("reference_gpu_specific"))
              for c in data["claims"]]
    messages = [m for claim in claims for m in _semantic_messages(claim, studies)]
    if messages:
        raise ClaimsError("invalid claims:\n  " + "\n  ".join(messages))
    return claims


def load_claims(directory: Path = CLAIMS_DIR, studies: dict | None = None) -> list[Claim]:
    """Every claim of every ``<study>.yaml`` in ``directory``; ids are unique across files."""
    claims = [c for path in sorted(Path(directory).glob("*.yaml")) for c in parse_file(path, studies)]
    seen: dict[str, str] = {}
    messages = []
    for claim in claims:
        if claim.id in seen:
            messages.append(f"{claim.source}: claim {claim.id!r} key 'id': already used in {seen[claim.id]}")
        seen.setdefault(claim.id, claim.source)
    for claim in claims:
        if claim.instead is not None and claim.instead not in seen:
            messages.append(f"{claim.source}: claim {claim.id!r} key 'instead': no claim {claim.instead!r} "
                            f"in {directory}/")
    if messages:
        raise ClaimsError("invalid claims:\n  " + "\n  ".join(messages))
    return claims
