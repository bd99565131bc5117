"""``tma-study advise``: the advisor's command (``tma_study.advisor``)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from . import DEFAULT_RESULTS, Advice, advise
from .operand import CONSUMERS, LEVELS, MMA_DTYPE_BYTES, PATTERNS, SHAPES, OperandError

OPTIONS = (   # (field, type, help)
    ("level", str, f"where its bytes come from: {', '.join(LEVELS)}"),
    ("shape", str, f"access shape: {', '.join(SHAPES)}"),
    ("box_dims", str, "box: element counts per dimension, innermost last, e.g. 128,64"),
    ("element_bytes", int, "box (or gather, for TMA's 256-element box limit): bytes per element"),
    ("bytes_per_transfer", int, "bulk: bytes of one contiguous transfer"),
    ("row_bytes", int, "gather: bytes of one gathered row or page"),
    ("bytes_in_flight_per_sm", int, "stages x stage bytes x CTAs per SM (or the next three)"),
    ("stages", int, "pipeline stages"),
    ("stage_bytes", int, "bytes of one stage"),
    ("ctas_per_sm", int, "resident CTAs per SM"),
    ("pattern", str, f"{', '.join(PATTERNS)} (default streaming)"),
    ("cluster_sharing", int, "CTAs of a cluster that need the same tile (default 1)"),
    ("consumer", str, f"{', '.join(CONSUMERS)} (default load_only)"),
    ("mma_dtype", str, f"mma: {', '.join(MMA_DTYPE_BYTES)}"),
    ("mma_tile", str, "mma: the CTA's MMA tile MxNxK, e.g. 128x128x64"),
    ("flops_per_byte", float, "compute: CUDA-core FLOPs per byte of this operand"),
)


def add_command(sub) -> None:
    p = sub.add_parser("advise", help="which mechanism should load this operand (TMA, multicast, cp.async, "
                                      "plain loads, DSM), from the measured tables",
                       description=__import__("tma_study.advisor", fromlist=["x"]).__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    for field, kind, text in OPTIONS:
        p.add_argument("--" + field.replace("_", "-"), dest=field, type=kind, default=None, help=text)
    p.add_argument("--operand", type=Path, default=None,
                   help="a YAML or JSON file holding the operand's fields (options given too override it)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS,
                   help="results/<label>/ whose microbenchmark tables to predict from (default: the reference)")
    p.add_argument("--json", action="store_true", help="print the advice as JSON")


def add_validate_command(sub) -> None:
    p = sub.add_parser("advisor-validate", help="score the frozen advisor on its validation sets (leave one study "
                                                "out, the held-out Triton kernels, the catalog) beside the baselines")
    p.add_argument("--results", type=Path, required=True, help="results/<label>/ whose tables to predict from and score")
    p.add_argument("--out", type=Path, required=True, help="where the derived tables go (results/<label>/advisor/derived)")
    p.add_argument("--tables", type=Path, default=None, help="also write the paper tables here (paper/tables)")
    p.add_argument("--decision-map", action="store_true",
                   help="write only decision_map.csv: the advisor's choice over transfer sizes and bytes in flight")


def run_validate(args) -> int:
    from .validation import run as validation, tables
    if args.decision_map:
        validation.write_map(args.results, args.out)
        return 0
    validation.validate(args.results, args.out)
    if args.tables is not None:
        tables.write_tables(args.out, args.tables)
    return 0


def _spec(args) -> dict:
    spec = {}
    if args.operand is not None:
        spec = yaml.safe_load(Path(args.operand).read_text())
        if not isinstance(spec, dict):
            raise OperandError(f"{args.operand}: must hold a mapping of operand fields")
    for field, _, _ in OPTIONS:
        value = getattr(args, field)
        if value is None:
            continue
        if field == "box_dims":
            try:
                value = [int(v) for v in value.split(",")]
            except ValueError:
                raise OperandError(f"operand field 'box_dims': {value!r} is not a comma-separated list of "
                                   "integers, e.g. 128,64") from None
        spec[field] = value
    return spec


def render(advice: Advice, statuses: dict | None = None) -> str:
    lines = [f"advice for {advice.operand.name or 'the operand'} from {advice.results}/ "
             f"(advisor v{advice.version}, sha256 {advice.sha256[:12]}):",
             f"  load it with: {advice.choice}"
             + (f"  (predicted tie with {', '.join(m for m in advice.tied if m != advice.choice)})"
                if len(advice.tied) > 1 else ""),
             "  mechanism        time / choice   interval over runs"]
    for r in advice.ranking:
        lines.append(f"  {r.mechanism:<16} {r.predicted_time_ratio:>13.3f}   {r.interval[0]:.3f} - {r.interval[1]:.3f}")
    lines.append(f"  runs of the evidence: {len(advice.runs)}"
                 + ("" if len(advice.runs) > 1 else " (no other run of this GPU model: no spread)"))
    if advice.inside_measured_range:
        lines.append("  inside the measured range")
    else:
        for n in advice.extrapolation:
            lines.append(f"  outside the measured range: {n['what']} {n['asked']:g} "
                         f"(measured {n['measured_from']:g} to {n['measured_to']:g}, {n['octaves']:.2f} octaves)")
    lines.append(f"  rests on figures {', '.join(advice.figures)}")
    statuses = statuses or {}
    lines.append("  and claims " + ", ".join(f"{c} ({statuses[c]})" if c in statuses else c for c in advice.claims))
    return "\n".join(lines)


def claim_statuses(results: Path) -> dict:
    """claim id -> PASS / FAIL / NOT MEASURED in results/<label>/claims.tsv, where the main job wrote one."""
    path = Path(results) / "claims.tsv"
    if not path.is_file():
        return {}
    import pandas as pd
    table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    return dict(zip(table["id"], table["status"]))


def run(args) -> int:
    advice = advise(_spec(args), args.results)
    statuses = claim_statuses(args.results)
    if args.json:
        document = advice.as_dict()
        document["claims"] = [{"id": c, "status": statuses.get(c, "unknown: no claims.tsv")} for c in advice.claims]
        print(json.dumps(document, indent=2))
    else:
        print(render(advice, statuses))
    return 0
