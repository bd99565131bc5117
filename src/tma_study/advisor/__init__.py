"""The advisor: given a memory operand of a kernel, which mechanism should load it?

    from tma_study.advisor import advise
    advice = advise({"level": "hbm", "shape": "gather", "row_bytes": 256,
                     "bytes_in_flight_per_sm": 65536})
    advice.choice            # 'cp_async'
    advice.ranking           # every candidate, its predicted time over the choice's, an interval

CLI: ``tma-study advise --level hbm --shape gather --row-bytes 256 --bytes-in-flight-per-sm 65536
[--results results/<label>] [--json]``. The operand's fields: ``tma_study.advisor.operand``;
the rules: ``tma_study.advisor.rules`` (frozen: ``tma_study.advisor.frozen``); the tables it reads:
``tma_study.advisor.evidence``. The advice comes from the microbenchmark studies of one results
label (default the reference), its interval from the other runs of their sweeps on the same GPU
model, and says which claims and figures it rests on and how far the operand lies outside what
was measured.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tma_study.config import REPO_ROOT

from . import evidence as evidence_mod
from . import frozen, rules
from .operand import Operand, OperandError, from_mapping

DEFAULT_RESULTS = REPO_ROOT / "results" / "h200"
__all__ = ["Advice", "Operand", "OperandError", "advise", "advise_with", "from_mapping"]


@dataclass(frozen=True)
class Ranked:
    mechanism: str
    predicted_time_ratio: float         # its time over the choice's (reference run)
    interval: tuple[float, float]       # the same ratio's range over the runs of the evidence

    def as_dict(self) -> dict:
        return {"mechanism": self.mechanism, "predicted_time_ratio": round(self.predicted_time_ratio, 4),
                "interval": [round(v, 4) for v in self.interval]}


@dataclass(frozen=True)
class Advice:
    operand: Operand
    choice: str
    tied: list[str]                     # mechanisms predicted within the tie tolerance of the fastest
    ranking: list[Ranked]
    rules: list[str]
    figures: list[str]
    claims: list[str]
    extrapolation: list[dict]           # each lookup outside the measured range, with its octaves
    results: str                        # results/<label>/ the evidence came from
    runs: list[dict] = field(default_factory=list)   # each run of the evidence: study -> label
    version: int = 0
    sha256: str = ""

    @property
    def inside_measured_range(self) -> bool:
        return not self.extrapolation

    @property
    def extrapolation_octaves(self) -> float:
        return max((n["octaves"] for n in self.extrapolation), default=0.0)

    def as_dict(self) -> dict:
        return {"operand": self.operand.as_dict(), "choice": self.choice, "tied": self.tied,
                "ranking": [r.as_dict() for r in self.ranking], "rules": self.rules, "figures": self.figures,
                "claims": self.claims, "inside_measured_range": self.inside_measured_range,
                "extrapolation_octaves": round(self.extrapolation_octaves, 3), "extrapolation": self.extrapolation,
                "results": self.results, "runs": self.runs,
                "advisor": {"version": self.version, "sha256": self.sha256}}


def _unique_notes(notes: list[dict]) -> list[dict]:
    seen, out = set(), []
    for note in notes:
        key = (note["what"], note["asked"])
        if key not in seen:
            seen.add(key)
            out.append({k: (round(v, 3) if isinstance(v, float) else v) for k, v in note.items()})
    return out


def advise_with(operand: Operand, variants: list[evidence_mod.Evidence]) -> Advice:
    """The advice for ``operand`` from loaded evidence (``evidence.load``: the reference first)."""
    notes: list[dict] = []
    per_variant, used = [rules.relative_times(variants[0], operand, notes)], [variants[0]]
    for ev in variants[1:]:
        try:                 # another run that lacks what this operand needs has nothing to say of it
            per_variant.append(rules.relative_times(ev, operand, []))
            used.append(ev)
        except rules.AdvisorRangeError:
            continue
    choice, tied = rules.decide(per_variant)
    ranked = []
    for m in sorted(per_variant[0], key=lambda m: (per_variant[0][m] / per_variant[0][choice], m)):
        ratios = [v[m] / v[choice] for v in per_variant]
        ranked.append(Ranked(m, ratios[0], (min(ratios), max(ratios))))
    names = rules.rule_names(operand)
    figures = list(dict.fromkeys(f for n in names for f in rules.EVIDENCE[n][0]))
    claims = list(dict.fromkeys(c for n in names for c in rules.EVIDENCE[n][1]))
    version = frozen.current_version()
    return Advice(operand, choice, tied, ranked, names, figures, claims, _unique_notes(notes),
                  f"results/{variants[0].label}", [dict(ev.runs) for ev in used],
                  version["version"], version["sha256"])


def advise(operand: dict | Operand, results: Path | str = DEFAULT_RESULTS) -> Advice:
    """The advice for one operand (a mapping of its fields, or an Operand) from results/<label>/."""
    op = operand if isinstance(operand, Operand) else from_mapping(operand)
    return advise_with(op, evidence_mod.load(Path(results)))
