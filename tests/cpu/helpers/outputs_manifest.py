"""The sha256 of every figure, table, claim and paper macro the main job makes from the
committed data, against the manifest ``tests/cpu/pipeline/outputs.sha256`` (the format of
``sha256sum``, so ``sha256sum -c`` reads it too).

The no-GPU pipeline test compares its run with the manifest, so a change of code that was
meant to change no output (a refactoring) is shown to change none. After changing an output
on purpose, regenerate the manifest from a main job run in the checkout (docs/testing.md)::

    .venv/bin/snakemake -c2 && .venv/bin/python tests/cpu/helpers/outputs_manifest.py --write
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
MANIFEST = REPO / "tests" / "cpu" / "pipeline" / "outputs.sha256"
# the main job's outputs (results/<label>/: the claims of every label it checks)
PATTERNS = ("figures/*.pdf", "figures/*.png", "paper/tables/*.tex", "paper/tables/*.md", "paper/generated/*.tex",
            "results/*/claims.tsv", "results/*/claims.md", "results/*/claims_by_run.tsv",
            "results/*/claims_by_gpu.tsv", "build/report/*.html")


def digests(root: Path) -> dict[str, str]:
    """{path relative to ``root``: sha256} of every output under ``root``."""
    root = Path(root)
    paths = sorted({path for pattern in PATTERNS for path in root.glob(pattern) if path.is_file()})
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


def render(found: dict[str, str]) -> str:
    return "".join(f"{digest}  {path}\n" for path, digest in sorted(found.items()))


def read(manifest: Path = MANIFEST) -> dict[str, str]:
    pairs = (line.split(maxsplit=1) for line in Path(manifest).read_text().splitlines() if line.strip())
    return {path: digest for digest, path in pairs}


def differences(expected: dict[str, str], found: dict[str, str]) -> list[str]:
    """One line per output that is missing, new or has other bytes than the manifest says."""
    lines = [f"missing: {path}" for path in sorted(set(expected) - set(found))]
    lines += [f"not in the manifest: {path}" for path in sorted(set(found) - set(expected))]
    lines += [f"changed: {path}" for path in sorted(set(expected) & set(found)) if expected[path] != found[path]]
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=REPO, help="where the main job ran (default: this checkout)")
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--write", action="store_true", help="rewrite the manifest (else: compare with it)")
    args = parser.parse_args(argv)
    found = digests(args.root)
    if not found:
        print(f"no outputs under {args.root}: run the main job first (snakemake -c2)", file=sys.stderr)
        return 1
    if args.write:
        args.manifest.write_text(render(found))
        print(f"{args.manifest}: {len(found)} outputs")
        return 0
    problems = differences(read(args.manifest), found)
    print("\n".join(problems) or f"all {len(found)} outputs as in {args.manifest}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
