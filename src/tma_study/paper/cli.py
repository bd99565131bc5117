"""Commands of the paper tier (CPU only), added to ``tma-study`` by ``tma_study.cli``.

    tma-study catalog --out DIR [--catalog DIR] [--derived DIR]
                                                           validate catalog/*.yaml, write its tables
                                                           (and the counts its claims check)
    tma-study claims --results results/h200 [--study-dir catalog=build/catalog] [--strict]
                                                           results/h200/claims.tsv, claims.md,
                                                           claims_by_run.tsv (every run of each sweep)
                                                           and claims_by_gpu.tsv (other GPUs' runs)
    tma-study claims --results results/h200 --study gemm [--strict]
                                                           print one study's lines of claims.tsv
                                                           (exact name; checks and writes nothing)
    tma-study rules-of-thumb --results DIR --study S ... [--claims TSV] --out paper/tables
    tma-study compare STUDY --reference LABEL --run LABEL=DERIVED_DIR ... --out paper/tables
    tma-study paper-generated --results DIR --study S ... [--claims TSV] --paper paper
    tma-study build-paper [--paper paper]                  paper/main.pdf (needs latexmk, pdflatex)
    tma-study readme-tables [--claims TSV] [--check]       the README's checklist and cost tables
    tma-study release [--out build/release]                an archive to deposit: code and raw data at
                                                           HEAD, paper/main.pdf, SHA256SUMS (docs/release.md)
    tma-study report-pages --claims TSV --out DIR TABLE.md ...
                                                           the HTML report's page of each table, with the
                                                           claims resting on it, and claims.html
    tma-study claims-register [--check | --resolve]        register new claims in config/claims_registry/
                                                           (--check: name every unregistered change)
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tma_study.config import REPO_ROOT
from tma_study.studies import discover

from . import catalog, claims, claims_by_gpu, claims_registry, instances, rules_of_thumb
from .generated import write_comparison, write_generated
from .pdf import TexMissingError, build_pdf
from .readme import update_readme

COMMANDS = ("catalog", "claims", "rules-of-thumb", "compare", "paper-generated", "build-paper", "readme-tables",
            "release", "report-pages", "claims-register")


def add_commands(sub) -> None:
    p = sub.add_parser("catalog", help="validate the data-movement catalog and write its tables")
    p.add_argument("--out", type=Path, required=True, help="folder for the catalog's tables (paper/tables/)")
    p.add_argument("--catalog", type=Path, default=REPO_ROOT / "catalog", help="folder of the catalog's YAML files")
    p.add_argument("--derived", type=Path, default=None, help="also write the counts the catalog's claims check")
    p = sub.add_parser("claims", help="check every claim of config/claims/ against results/<label>/")
    p.add_argument("--results", type=Path, required=True, help="results/<label>")
    p.add_argument("--claims-dir", type=Path, default=None, help="folder of <study>.yaml claims files "
                   "(default: config/claims/)")
    p.add_argument("--study-dir", action="append", default=[], metavar="STUDY=DIR",
                   help="the folder holding derived/ of a study whose data are not under --results (the catalog)")
    p.add_argument("--strict", action="store_true", help="exit 1 when a claim FAILs, naming each")
    p.add_argument("--study", action="append", default=[], metavar="NAME",
                   help="print the lines of <results>/claims.tsv of this study (exact name, repeatable) "
                        "as the main job wrote them; nothing is checked or written")
    p = sub.add_parser("rules-of-thumb", help="paper/tables/rules_of_thumb.tex|md from every study given")
    p.add_argument("--results", type=Path, required=True, help="results/<label>: the run the rules come from")
    p.add_argument("--study", action="append", default=[], help="a study whose rules to include (repeatable)")
    p.add_argument("--claims", type=Path, default=None, help="claims.tsv: keep the rows whose claims pass")
    p.add_argument("--out", type=Path, required=True, help="folder for the tables (paper/tables/)")
    p = sub.add_parser("compare", help="paper/tables/<study>_comparison.tex|md: what moved between runs")
    p.add_argument("study", help="the study whose runs to compare")
    p.add_argument("--reference", required=True, help="the reference run's label")
    p.add_argument("--run", action="append", default=[], help="LABEL=DERIVED_DIR, once per run")
    p.add_argument("--out", type=Path, required=True, help="folder for the table (paper/tables/)")
    p = sub.add_parser("paper-generated", help="paper/generated/macros.tex and studies.tex")
    p.add_argument("--results", type=Path, required=True, help="results/<label>: the run the numbers come from")
    p.add_argument("--study", action="append", default=[], help="a study the paper holds (repeatable)")
    p.add_argument("--claims", type=Path, default=None, help="claims.tsv, for the claims' tally")
    p.add_argument("--catalog-derived", type=Path, default=None, help="the catalog's derived tables, for its counts")
    p.add_argument("--paper", type=Path, default=Path("paper"), help="the paper's folder (its sections/studies/)")
    p.add_argument("--out", type=Path, default=None, help="folder for the generated files (default: <paper>/generated)")
    p = sub.add_parser("build-paper", help="paper/main.pdf with latexmk (needs a TeX installation)")
    p.add_argument("--paper", type=Path, default=Path("paper"), help="the paper's folder (main.tex)")
    p.add_argument("--build-dir", type=Path, default=Path("build/paper"), help="folder for LaTeX's work files")
    p = sub.add_parser("readme-tables", help="rewrite (or --check) the README's generated tables")
    p.add_argument("--claims", type=Path, default=None,
                   help="results/<label>/claims.tsv (default: that of config/config.yaml's reference_gpu)")
    p.add_argument("--readme", type=Path, default=Path("README.md"), help="the README to rewrite or check")
    p.add_argument("--check", action="store_true", help="exit 1 when the README's table is out of date")
    p = sub.add_parser("release", help="an archive to deposit: the code and raw data committed at HEAD, "
                                       "paper/main.pdf and SHA256SUMS (docs/release.md)")
    p.add_argument("--out", type=Path, default=Path("build/release"),
                   help="folder for tma-study-<version>-<commit>.tar.gz and its .sha256 (default: build/release)")
    p.add_argument("--pdf", type=Path, default=None, help="the paper's PDF (default: paper/main.pdf)")
    p = sub.add_parser("report-pages", help="the HTML report's page of each table (with the claims resting "
                                            "on it) and claims.html (workflow/rules/report.smk)")
    p.add_argument("tables", type=Path, nargs="+", help="paper/tables/<table>.md files")
    p.add_argument("--claims", type=Path, required=True, help="results/<label>/claims.tsv")
    p.add_argument("--out", type=Path, required=True, help="folder for the pages (build/report/)")
    p = sub.add_parser("claims-register", help="add registry entries for new claims (config/claims_registry/)")
    p.add_argument("--check", action="store_true", help="exit 1 naming each claim that differs from its entry")
    p.add_argument("--resolve", action="store_true", help="fill 'registered: pending' with the committing commit")


def _study_dirs(items: list[str]) -> dict[str, Path]:
    """{study: folder} from STUDY=DIR arguments."""
    pairs = [item.split("=", 1) for item in items]
    bad = [item for item, pair in zip(items, pairs) if len(pair) != 2 or not all(pair)]
    if bad:
        raise SystemExit(f"--study-dir expects STUDY=DIR, e.g. catalog=build/catalog; got {', '.join(bad)}")
    return {study: Path(folder) for study, folder in pairs}


def _studies(names: list[str]) -> dict:
    known = discover()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown studies {', '.join(unknown)}; known studies: {', '.join(sorted(known))}")
    return {name: known[name] for name in names}


def _reference_claims() -> Path:
    """results/<reference_gpu>/claims.tsv of config/config.yaml, relative to the working folder
    where it lies below it (the README quotes it so)."""
    from tma_study.config import read_yaml
    label = read_yaml(REPO_ROOT / "config" / "config.yaml")["reference_gpu"]
    path = REPO_ROOT / "results" / label / "claims.tsv"
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


def _print_study_claims(results: Path, studies: list[str], strict: bool) -> int:
    """Print the header and the lines of ``results``/claims.tsv whose study column is exactly one
    of ``studies`` (a prefix never matches another study's claims); with ``strict``, 1 when one FAILs."""
    tsv = Path(results) / "claims.tsv"
    if not tsv.is_file():
        raise SystemExit(f"no {tsv}: the main job writes it (snakemake -c4 {tsv})")
    known = set(claims.read_outcomes(tsv).study)
    unknown = [s for s in studies if s not in known]
    if unknown:
        raise SystemExit(f"{tsv} holds no claims of study {', '.join(unknown)}; its studies: {', '.join(sorted(known))}")
    header, *lines = tsv.read_text().splitlines()
    study_column = header.split("\t").index("study")
    mine = [line for line in lines if line.split("\t")[study_column] in studies]
    print("\n".join([header, *mine]))
    failing = [line.split("\t")[0] for line in mine if line.split("\t")[1] == claims.FAIL]
    if strict and failing:
        print(f"error: {len(failing)} claims FAIL: {', '.join(failing)} (reasons in {tsv.with_suffix('.md')})",
              file=sys.stderr)
        return 1
    return 0


def run(args) -> int:
    if args.command == "catalog":
        entries = catalog.load(args.catalog)
        catalog.write_tables(entries, args.out)
        if args.derived is not None:
            catalog.write_derived(entries, args.derived)
        return 0
    if args.command == "claims" and args.study:
        return _print_study_claims(args.results, args.study, args.strict)
    if args.command == "claims":
        study_dirs = _study_dirs(args.study_dir)
        loaded = claims.load_claims(args.claims_dir or claims.CLAIMS_DIR, discover())
        outcomes = claims.check_all(loaded, args.results, study_dirs)
        runs = instances.annotate(claims.other_runs(loaded, args.results, study_dirs), loaded,
                                  {o.claim.id: o.status for o in outcomes}, args.results)
        tsv, md = claims.write_reports(outcomes, args.results, runs)
        claims_by_gpu.write(loaded, args.results, study_dirs)
        counts = claims.summary_counts(outcomes)
        print(f"{tsv}, {md}: " + ", ".join(f"{n} {status}" for status, n in counts.items()))
        failing = claims.failing(outcomes)
        if args.strict and failing:
            print(f"error: {len(failing)} claims FAIL: {', '.join(failing)} (reasons in {md})", file=sys.stderr)
            return 1
        return 0
    if args.command == "rules-of-thumb":
        print(rules_of_thumb.write(args.results, _studies(args.study), args.out, args.claims).to_string())
        return 0
    if args.command == "compare":
        runs = dict(item.split("=", 1) for item in args.run)
        if args.reference not in runs:
            raise SystemExit(f"--reference {args.reference!r} is not among --run labels {', '.join(runs)}")
        write_comparison(_studies([args.study])[args.study], runs, args.reference, args.out)
        return 0
    if args.command == "paper-generated":
        write_generated(args.results, _studies(args.study), args.paper, args.claims, args.catalog_derived, args.out)
        return 0
    if args.command == "build-paper":
        try:
            build_pdf(args.paper, args.paper / "main.pdf", args.build_dir)
        except TexMissingError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        except subprocess.CalledProcessError:
            print(f"error: LaTeX failed on {args.paper}/main.tex; the first error is above, the whole log in "
                  f"{args.build_dir}/main.log", file=sys.stderr)
            return 1
        return 0
    if args.command == "readme-tables":
        args.claims = args.claims or _reference_claims()
        changed = update_readme(args.readme, args.claims, check_only=args.check)
        if changed and args.check:
            print(f"{args.readme}: its generated tables are out of date; run: tma-study readme-tables "
                  f"--claims {args.claims}", file=sys.stderr)
            return 1
        print(f"{args.readme}: generated tables {'updated' if changed else 'already up to date'}")
        return 0
    if args.command == "report-pages":
        from tma_study.report.report_pages import write_pages
        print(f"{len(write_pages(args.claims, args.tables, args.out))} pages in {args.out}")
        return 0
    if args.command == "release":
        from tma_study.release import build
        archive, count = build(REPO_ROOT, args.out, args.pdf)
        print(f"{archive}: {count} files (the code and raw data at HEAD, paper/main.pdf, SHA256SUMS); "
              f"its sha256 in {archive.name}.sha256 beside it")
        return 0
    if args.command == "claims-register":
        return _register(args)
    raise SystemExit(f"not a paper command: {args.command}")


def _register(args) -> int:
    import datetime
    current = claims_registry.claim_dicts(claims.load_claims(claims.CLAIMS_DIR, discover()))
    if args.resolve:
        print(f"{claims_registry.resolve_pending()} pending entries resolved")
        return 0
    if not args.check:
        added = claims_registry.register(current, today=datetime.date.today().isoformat())
        print(f"registered (pending until committed): {', '.join(added) or 'nothing new'}")
    found = claims_registry.problems(current, claims_registry.load())
    for line in found:
        print(f"error: {line}", file=sys.stderr)
    return 1 if found else 0
