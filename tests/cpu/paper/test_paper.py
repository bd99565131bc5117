"""The paper's numbers and inputs: every macro the text uses is generated from the data and
well formed, every file the paper includes is a pipeline output or a paper source, the
README's checklist is generated, and building without TeX says what to install."""
import re

import pandas as pd
import pytest
from paper_fixture import (
    REFERENCE,
    REPO,
    aggregated_reference,
    configured_studies,
    expanded_macros,
)
from raw_fixture import valid_provenance

from tma_study.advisor.validation import run as advisor_validation
from tma_study.paper import catalog as catalog_mod
from tma_study.paper import claims as claims_mod
from tma_study.paper import generated as generated_mod
from tma_study.paper import macros as macros_mod
from tma_study.paper import pdf
from tma_study.paper import readme as readme_mod
from tma_study.pipeline import Layout
from tma_study.report import numbers
from tma_study.studies.base import Study

PAPER = REPO / "paper"
# the hand-written sources (paper/generated/ and paper/tables/ are pipeline outputs)
SOURCES = sorted(p for p in PAPER.rglob("*.tex") if p.parent.name not in ("generated", "tables"))
GENERATED_PREFIXES = ("claims", "gpu", "resultsLabel", "studiesCount", "sweepRuns", "catalog", "projection")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """(results dir, paper dir) after claims and paper-generated ran on the reference data."""
    root = tmp_path_factory.mktemp("paper")
    results = aggregated_reference(root / "results", tmp_path_factory=tmp_path_factory)
    studies = configured_studies()
    catalog_derived = root / "catalog" / "derived"
    catalog_mod.write_derived(catalog_mod.load(), catalog_derived)
    loaded, study_dirs = claims_mod.load_claims(studies=studies), {"catalog": catalog_derived.parent}
    outcomes = claims_mod.check_all(loaded, results, study_dirs)
    claims_mod.write_reports(outcomes, results, claims_mod.other_runs(loaded, results, study_dirs))
    paper_dir = root / "paper"
    (paper_dir / "sections" / "studies").mkdir(parents=True)
    for section in (PAPER / "sections" / "studies").glob("*.tex"):
        (paper_dir / "sections" / "studies" / section.name).write_text(section.read_text())
    generated_mod.write_generated(results, studies, paper_dir, results / "claims.tsv", catalog_derived)
    return results, paper_dir


@pytest.fixture(scope="module")
def macros(generated):
    return macros_mod.parse((generated[1] / "generated" / "macros.tex").read_text())


def macro_prefixes() -> tuple[str, ...]:
    return (*GENERATED_PREFIXES, *(macros_mod.camel(name) for name in configured_studies()))


def used_macros() -> set[str]:
    used = set()
    for source in SOURCES:
        text = re.sub(r"(?<!\\)%.*", "", source.read_text())   # comments may name macros freely
        used |= set(re.findall(r"\\([A-Za-z]+)", text))
    return {name for name in used if name.startswith(macro_prefixes())}


def test_every_macro_the_text_uses_is_generated(macros):
    used = set().union(*(expanded_macros(source.read_text(), set(macros)) for source in SOURCES))
    missing = sorted(name for name in used - set(macros) if name.startswith(macro_prefixes()))
    assert not missing, f"paper/ uses macros that paper/generated/macros.tex does not define: {missing}"


def test_a_macro_in_a_branch_the_data_take_must_be_generated():
    """The check above follows \\ifdefined: a guarded block's macros count only where its guard is
    defined, and its \\else branch's only where not."""
    text = r"\a{} \ifdefined\g \b{}\ifdefined\h \c\else \d\fi\else \e\fi % \f"
    assert expanded_macros(text, set()) == {"a", "e"}
    assert expanded_macros(text, {"g"}) == {"a", "b", "d"}
    assert expanded_macros(text, {"g", "h"}) == {"a", "b", "c"}


def test_macro_names_are_letters_and_values_are_formatted(macros):
    assert macros, "no macro generated"
    for name, value in macros.items():
        assert re.fullmatch(r"[A-Za-z]+", name), name
        assert value.strip() and value.lower() not in ("nan", "none", "inf"), (name, value)
        assert not re.search(r"\d\.\d{3,}", value), f"{name} = {value}: too many decimals for prose"
        assert "nan" not in value.lower().split("~"), (name, value)


def test_macros_carry_the_numbers_of_the_derived_data(generated, macros):
    results, _ = generated
    peaks = pd.read_csv(results / "crossover" / "derived" / "peaks.csv")
    tma = peaks[(peaks.working_set == "hbm") & (peaks.mechanism == "tma_tile")].iloc[0]
    assert macros["crossoverPeakGbpsTmaHbm"] == f"{tma.gbps:.0f}"
    assert macros["crossoverPeakPercentCopyTmaHbm"] == f"{100 * tma.fraction_of_d2d_copy:.1f}"
    tally = claims_mod.read_outcomes(results / "claims.tsv")
    assert macros["claimsTotal"] == str(len(tally))
    assert macros["gpuName"].replace("~", " ").startswith("NVIDIA")


# Names that hold digits but are no measured numbers: instructions, formats, products, models, papers.
ALLOWED_NAMES = re.compile(r"sm\\_90a|LDG\.128|128-bit|16-byte|1-D|2-D|FlashAttention-[23]|cp\.async|LDG|H\d00|B\d00|HBM3e?|"
                           r"SM\d{2,3}|\b(8|70)B\b|\bL2\b|\bFA3\b|\bbf16\b|\bfp(8|16|32)\b|\be4m3\b|Llama~3|C\+\+|\\\\")


def prose(source) -> str:
    """The text a reader sees: the document body of main.tex, every other source whole."""
    text = source.read_text()
    return text.split(r"\begin{document}", 1)[1] if r"\begin{document}" in text else text


def test_a_number_in_the_text_that_is_not_a_macro_is_caught():
    """Digits in prose outside macros, comments, labels, citations and known names are suspicious."""
    typed = []
    for source in SOURCES:
        for line_number, line in enumerate(prose(source).splitlines(), start=1):
            text = re.sub(r"(?<!\\)%.*", "", line)
            text = re.sub(r"\\(label|ref|input|includegraphics|texttt|usepackage|documentclass|graphicspath"
                          r"|begin|end|hypersetup|citep|cite|claimref)(\[[^]]*\])?\{[^}]*\}", "", text)
            text = re.sub(r"\\includegraphics\[[^]]*\]", "", text)
            text = ALLOWED_NAMES.sub("", text)
            if re.search(r"\d", text):
                typed.append(f"{source.relative_to(REPO)}:{line_number}: {line.strip()}")
    assert not typed, "typed numbers in the paper's prose (use a generated macro):\n" + "\n".join(typed)


def test_the_typed_number_check_can_fail(tmp_path):
    source = tmp_path / "section.tex"
    source.write_text("TMA reached 97 % of the copy (\\claimref{x_1}) at \\crossoverPeak{} GB/s in bf16.")
    assert re.search(r"\d", ALLOWED_NAMES.sub("", re.sub(r"\\claimref\{[^}]*\}", "", prose(source))))


def test_a_study_macro_that_is_not_a_number_stops_the_build(tmp_path, generated):
    results, _ = generated
    bad = Study(name="crossover", question="q", raw_files=(), derived_files=(), figures=(), tables=(),
                kernels="", measure="", aggregate="", write_tables="", macros="test_paper:bad_macros")
    with pytest.raises(macros_mod.MacroError, match=r"study 'crossover'.*'crossoverBadValue'"):
        macros_mod.collect(results, {"crossover": bad})


def bad_macros(derived_dir, provenance):
    return {"crossoverBadValue": "nan"}


def test_a_nan_cannot_be_formatted_into_a_macro():
    with pytest.raises(numbers.MacroError):
        numbers.number(float("nan"))
    assert numbers.percent(0.98076) == "98.1" and numbers.size(1024) == "1 KiB"
    assert numbers.camel("crossover", "peak", "cp_async", "l2") == "crossoverPeakCpAsyncLtwo"


def include_targets(tex: str) -> list[tuple[str, str]]:
    text = re.sub(r"(?<!\\)%.*", "", tex)
    targets = [("input", t) for t in re.findall(r"\\input\{([^}]+)\}", text)]
    targets += [("figure", t) for t in re.findall(r"\\includegraphics(?:\[[^]]*\])?\{([^}]+)\}", text)]
    return targets


def test_everything_the_paper_includes_is_a_pipeline_output_or_a_paper_source(generated):
    _, paper_dir = generated
    studies = configured_studies()
    outputs = set(Layout(studies, REFERENCE).all_outputs()) | set(catalog_mod.table_files("paper/tables"))
    outputs |= set(advisor_validation.output_files())
    generated_files = sorted((paper_dir / "generated").glob("*.tex"))
    texts = {s: s.read_text() for s in SOURCES} | {g: g.read_text() for g in generated_files}
    for source, tex in texts.items():
        for kind, target in include_targets(tex):
            if kind == "figure":
                path = f"figures/{target}" + ("" if target.endswith(".pdf") else ".pdf")
                assert path in outputs, f"{source.name} includes {path}, which no rule makes"
                continue
            path = "paper/" + target + ("" if target.endswith(".tex") else ".tex")
            if path.startswith("paper/generated/study_"):
                assert (paper_dir / path.removeprefix("paper/")).is_file(), path
            else:
                assert path in outputs or (REPO / path).is_file(), (
                    f"{source.name} inputs {path}: neither made by a rule nor a paper source")


def test_every_figure_of_every_study_is_in_the_paper(generated):
    _, paper_dir = generated
    included = {t for s in [*SOURCES, *(paper_dir / "generated").glob("*.tex")]
                for kind, t in include_targets(s.read_text()) if kind == "figure"}
    for study in configured_studies().values():
        for figure in study.figures:
            assert f"{figure}.pdf" in included or figure in included, f"figure {figure} is not in the paper"


def test_a_study_without_its_own_section_gets_a_generated_one(tmp_path, generated):
    results, _ = generated
    studies = configured_studies()
    generated_mod.write_generated(results, studies, tmp_path, results / "claims.tsv")
    body = (tmp_path / "generated" / "studies.tex").read_text()
    appendix = (tmp_path / "generated" / "studies_appendix.tex").read_text()
    for name, study in studies.items():
        line = rf"\input{{generated/study_{name}}}"
        in_body, in_appendix = line in body.splitlines(), line in appendix.splitlines()
        assert in_body == (name in generated_mod.BODY_STUDIES) and in_appendix != in_body, name
        section = (tmp_path / "generated" / f"study_{name}.tex").read_text()
        assert all(f"{{{figure}.pdf}}" in section for figure in study.figures)


def test_building_without_tex_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(pdf.shutil, "which", lambda program: None)
    with pytest.raises(pdf.TexMissingError, match="apt-get install texlive-latex-base .*latexmk"):
        pdf.build_pdf(PAPER, tmp_path / "main.pdf", tmp_path / "build")


def test_the_default_job_needs_no_tex():
    outputs = Layout(configured_studies(), REFERENCE).all_outputs()
    assert "paper/main.pdf" not in outputs
    assert "paper/generated/macros.tex" in outputs and f"results/{REFERENCE}/claims.tsv" in outputs


def test_the_readme_checklist_is_generated_between_markers(generated, tmp_path):
    results, _ = generated
    table = readme_mod.checklist_table(results / "claims.tsv")
    outcomes = claims_mod.read_outcomes(results / "claims.tsv")
    for study in set(outcomes.study):
        mine = outcomes[outcomes.study == study]
        assert f"| `{study}` | {(mine.status == 'PASS').sum()} / {(mine.status == 'FAIL').sum()} /" in table
        assert f"tma-study claims --results {results.as_posix()} --study {study}`" in table
    assert "`figures/crossover_bandwidth.png`" in table and "`paper/tables/crossover_summary.md`" in table
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{readme_mod.BEGIN}\nSTALE-TABLE\n{readme_mod.END}\noutro\n")
    assert readme_mod.update_readme(readme, results / "claims.tsv")
    assert "STALE-TABLE" not in readme.read_text() and readme.read_text().startswith("intro")
    assert not readme_mod.update_readme(readme, results / "claims.tsv", check_only=True)
    readme.write_text("no markers")
    with pytest.raises(readme_mod.ReadmeError):
        readme_mod.update_readme(readme, results / "claims.tsv")


def test_claims_of_one_study_are_its_own_not_those_of_a_study_sharing_its_prefix(generated, capsys):
    """`tma-study claims --study gemm` prints gemm's lines of claims.tsv, not gemm_cluster's (a
    prefix grep would), reads claims.tsv without rewriting it, and with --strict fails on a FAIL."""
    from tma_study.cli import main
    results, _ = generated
    outcomes = claims_mod.read_outcomes(results / "claims.tsv")
    before = (results / "claims.tsv").stat().st_mtime_ns
    assert main(["claims", "--results", str(results), "--study", "gemm"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.startswith("id\tstatus") and len(lines) == (outcomes.study == "gemm").sum() > 0
    assert {line.split("\t")[5] for line in lines} == {"gemm"}
    assert (results / "claims.tsv").stat().st_mtime_ns == before
    failing = outcomes[outcomes.status == "FAIL"].study.iloc[0]
    assert main(["claims", "--results", str(results), "--study", failing, "--strict"]) == 1
    with pytest.raises(SystemExit, match="no claims of study gem;"):
        main(["claims", "--results", str(results), "--study", "gem"])


def test_the_cost_table_splits_compile_from_timing_where_recorded(tmp_path):
    """A measure run that records when its timing began shows that share apart (taking its kernels
    from the kernel cache where it records the cache, compiling them itself before that), and the
    compile step that filled the cache where the run recorded it; a run with neither shows the
    whole step. Each row names the GPUs the study measures on (its declaration)."""
    import json
    compile_step = {"started_utc": "2026-12-04T00:10:00+00:00", "finished_utc": "2026-12-04T00:11:30+00:00",
                    "builds": 9, "refused": 0, "cache_hits": 2, "compiled": 7, "not_cacheable": 0, "workers": 16}
    for study, extra in (("crossover", {}), ("dsm", {"timing_started_utc": "2026-12-04T00:13:13+00:00",
                                                    "kernel_cache": {"hits": 9}, "compile_step": compile_step}),
                         ("paged_kv", {"timing_started_utc": "2026-12-04T00:18:34+00:00"})):
        (tmp_path / study).mkdir()
        (tmp_path / study / "provenance.json").write_text(json.dumps(valid_provenance(
            study, 10, gpu={"name": "NVIDIA H200", "sm_count": 132}, **{
                "started_utc": "2026-12-04T00:13:11+00:00", "finished_utc": "2026-12-04T00:22:05+00:00", **extra})))
    rows = readme_mod.cost_table(tmp_path).splitlines()
    assert "| `crossover` | Hopper (sm_90a) | NVIDIA H200 (132 SMs) | 10 | not recorded | 8 min 54 s | 2026-12-04 |" in rows
    assert ("| `dsm` | Hopper (sm_90a) | NVIDIA H200 (132 SMs) | 10 | 1 min 30 s (9 kernels, 7 compiled, 2 from the "
            "cache) | 8 min 54 s (0 min 2 s taking and loading the kernels, 8 min 52 s timing) | 2026-12-04 |") in rows
    assert ("| `paged_kv` | Hopper (sm_90a) | NVIDIA H200 (132 SMs) | 10 | not recorded | 8 min 54 s (5 min 23 s "
            "compiling and loading the kernels, 3 min 31 s timing) | 2026-12-04 |") in rows


def test_a_broken_glyph_or_reference_in_the_pdf_text_is_named():
    assert pdf.pdf_text_problems("512 B < x <= 1 KiB\nsee Table 3") == []
    problems = pdf.pdf_text_problems("512 B \u00a1 x \u00a1= 1 KiB\nsee Table ??\nas in [??]")
    assert len(problems) == 2
    assert "inverted exclamation mark" in problems[0] and "2 lines" in problems[1]


def cited_claims(text: str) -> list[str]:
    return re.findall(r"\\claimref\{([a-z0-9_]+)\}", re.sub(r"(?<!\\)%.*", "", text))


def abstract_claims(text: str) -> list[str]:
    """The claims the abstract's findings rest on: its '% rests-on:' lines (it cites none in print)."""
    return [c for line in re.findall(r"^% rests-on:(.*)$", text, flags=re.MULTILINE) for c in line.split()]


def test_every_finding_of_the_abstract_rests_on_a_passing_claim(generated):
    results, _ = generated
    if not (REPO / "results" / REFERENCE).is_dir():
        pytest.skip("the abstract's findings are about the committed reference data")
    statuses = dict(zip(*(claims_mod.read_outcomes(results / "claims.tsv")[c] for c in ("id", "status"))))
    abstract = (PAPER / "sections" / "abstract.tex").read_text()
    rests_on = abstract_claims(abstract)
    assert len(rests_on) >= 10, "the abstract names the claims its findings rest on ('% rests-on:' lines)"
    assert not cited_claims(abstract), "the abstract cites no claim in print; it names them in '% rests-on:'"
    assert not [c for c in rests_on if statuses.get(c) != "PASS"], {c: statuses.get(c) for c in rests_on}


def test_every_claim_the_paper_cites_exists(generated):
    results, _ = generated
    known = set(claims_mod.read_outcomes(results / "claims.tsv").id)
    cited = {c for source in SOURCES for c in cited_claims(source.read_text())}
    assert cited and not sorted(cited - known), sorted(cited - known)
