"""The paper as a program committee reads it, checked on its sources and on what LaTeX reports
(no TeX needed here; tests/cpu/pipeline/test_pipeline_no_gpu.py applies the same checks to a real
build): the body cites at most one claim a paragraph, the bibliography holds the reproduced paper
and at least 35 entries, every table prints whole at 8 pt or more, no overfull line sticks out,
the body's length is read from the build, every figure prints at its own width, and the README
and CI install every Debian package the build needs."""
import re

import pytest
from paper_fixture import REPO

from tma_study.paper import generated as generated_mod
from tma_study.paper import pdf

PAPER = REPO / "paper"
REPRODUCED = "2610.34907"            # the arXiv paper this artifact reproduces
MIN_BIBLIOGRAPHY = 35
BODY_END = r"\appendices"            # main.tex: what comes before it is the body (and the references)


def strip_comments(text: str) -> str:
    return re.sub(r"(?<!\\)%.*", "", text)


def body_sources() -> list:
    """The body's source files, in order: main.tex's inputs before the appendix, the studies of
    generated/studies.tex (generated_mod.BODY_STUDIES) in its place."""
    main = strip_comments((PAPER / "main.tex").read_text()).split(BODY_END)[0].split(r"\begin{document}")[1]
    sources = []
    for target in re.findall(r"\\input\{([^}]+)\}", main):
        if target == "generated/studies":
            sources += [PAPER / "sections" / "studies" / f"{name}.tex" for name in generated_mod.BODY_STUDIES]
        elif target.startswith("sections/"):
            sources.append(PAPER / f"{target}.tex")
    return [s for s in sources if s.is_file()]


def paragraphs_citing_several_claims(text: str) -> list[str]:
    """The paragraphs (blank-line separated; a \\paragraph heading or a float starts a new one) that
    cite more than one claim, each shown by its first words."""
    text = strip_comments(text)
    text = re.sub(r"\\(paragraph|begin\{(?:figure|table)\*?\})", "\n\n\\\\\\1", text)
    crowded = []
    for paragraph in re.split(r"\n\s*\n", text):
        cited = re.findall(r"\\claimref\{", paragraph)
        if len(cited) > 1:
            crowded.append(f"{len(cited)} claims: {' '.join(paragraph.split())[:90]}")
    return crowded


def test_the_body_is_the_papers_story_and_the_appendix_the_rest():
    names = [s.relative_to(PAPER).as_posix() for s in body_sources()]
    assert names[0] == "sections/abstract.tex" and "sections/advisor.tex" in names, names
    assert all(f"sections/studies/{n}.tex" in names for n in generated_mod.BODY_STUDIES), names
    assert "sections/appendix.tex" not in names


def test_a_body_paragraph_cites_at_most_one_claim():
    crowded = {s.relative_to(REPO).as_posix(): found for s in body_sources()
               if (found := paragraphs_citing_several_claims(s.read_text()))}
    assert not crowded, f"the body cites at most one claim a paragraph; the ledger is in the appendix: {crowded}"


def test_the_claim_count_can_fail():
    text = ("\\paragraph{A.} one \\claimref{a} and \\claimref{b}.\n\n\\paragraph{B.} one \\claimref{c}.\n"
            "\\paragraph{C.} none % \\claimref{d} \\claimref{e}\n")
    assert paragraphs_citing_several_claims(text) == ["2 claims: \\paragraph{A.} one \\claimref{a} and \\claimref{b}."]


def bibliography_keys() -> list[str]:
    return re.findall(r"^@\w+\{([^,]+),", (PAPER / "references.bib").read_text(), flags=re.MULTILINE)


def test_the_bibliography_holds_the_reproduced_paper_and_is_all_cited():
    keys = bibliography_keys()
    assert len(keys) >= MIN_BIBLIOGRAPHY, f"{len(keys)} entries in references.bib, at least {MIN_BIBLIOGRAPHY}"
    assert REPRODUCED in (PAPER / "references.bib").read_text(), "the reproduced paper (arXiv) is in the bibliography"
    sources = "".join(strip_comments(s.read_text()) for s in PAPER.rglob("*.tex"))
    cited = {key.strip() for group in re.findall(r"\\cite[pt]?\*?(?:\[[^]]*\])?\{([^}]+)\}", sources)
             for key in group.split(",")}
    assert not sorted(set(keys) - cited), f"entries no source cites (IEEEtranN would leave them out): {sorted(set(keys) - cited)}"
    reproduced = next(k for k in keys if REPRODUCED in (PAPER / "references.bib").read_text().split(k, 1)[1][:300])
    body = "".join(strip_comments(s.read_text()) for s in body_sources())
    assert reproduced in body, "the body cites the paper it reproduces"


def test_a_table_printed_below_eight_points_is_named():
    log = ("tma-table-scale: table VII 0.998 size 8\ntma-table-scale: table IX 0.95 size 9\n"
           "tma-table-scale: table XXIX 0.768 size 8\n")
    assert pdf.shrunk_tables(log) == ["table VII shrunk to 100%: 8.0 pt text", "table XXIX shrunk to 77%: 6.1 pt text"]
    assert pdf.shrunk_tables("no tables were scaled") == []


def test_a_float_too_large_and_an_overfull_box_are_named_with_their_file():
    log = ("(./sections/studies/crossover.tex\nOverfull \\hbox (3.2pt too wide) in paragraph at lines 4--5\n"
           "(./tables/paged_kv_decode.tex\nOverfull \\hbox (10.2pt too wide) in alignment at lines 2--7\n"
           "LaTeX Warning: Float too large for page by 44.0pt on input line 12.\n)")
    assert pdf.overfull_boxes(log) == ["tables/paged_kv_decode.tex: 10.2 pt, in alignment at lines 2--7"]
    assert pdf.floats_too_large(log) == ["LaTeX Warning: Float too large for page by 44.0pt on input line 12."]
    assert pdf.overfull_boxes("Overfull \\hbox (4.9pt too wide) in paragraph") == []


def test_the_body_length_and_the_figure_widths_are_read_from_the_build():
    aux = "\\newlabel{sec:conclusion}{{XIII}{11}{Conclusion}{section.13}{}}\n\\newlabel{body-end}{{XIII}{12}{Conclusion}{section.13}{}}\n"
    assert pdf.body_pages(aux) == 12 and pdf.body_pages("no label") is None
    log = "tma-figure-width: crossover_bandwidth.pdf 516.0pt\ntma-figure-width: dsm_broadcast.pdf 252.0pt\n"
    assert pdf.printed_figure_widths(log) == pytest.approx({"crossover_bandwidth.pdf": 514.07, "dsm_broadcast.pdf": 251.06},
                                                           abs=0.01)


@pytest.mark.parametrize("where", ["README.md", ".ci/run"])
def test_the_readme_and_ci_install_every_package_the_build_needs(where):
    text = (REPO / where).read_text()
    lines = [line for line in text.splitlines() if "texlive-latex-base" in line or "latexmk" in line]
    named = " ".join(lines)
    missing = [p for p in (*pdf.TEX_PACKAGES, pdf.PDF_TEXT_PACKAGE) if not re.search(rf"(?<![\w-]){p}(?![\w-])", named)]
    assert not missing, f"{where}'s TeX line lacks {missing}"


def test_a_failed_build_reruns_once_the_environment_is_fixed(monkeypatch, tmp_path):
    """latexmk keeps a record of its last run; after a build that stopped on a missing package it
    would answer 'Nothing to do' until build/paper was deleted. build_pdf forces a run (-g)."""
    commands = []

    def run(command, cwd, check):
        commands.append(command)
        (tmp_path / "build").mkdir(exist_ok=True)
        (tmp_path / "build" / "main.pdf").write_bytes(b"%PDF-1.5")
    monkeypatch.setattr(pdf.shutil, "which", lambda program: f"/usr/bin/{program}")
    monkeypatch.setattr(pdf.subprocess, "run", run)
    pdf.build_pdf(PAPER, tmp_path / "main.pdf", tmp_path / "build")
    (command,) = commands
    assert command[0] == "latexmk" and "-g" in command and "-halt-on-error" in command
