"""What Snakemake's HTML report (`snakemake --report report.html`) shows beside the figures: each
figure's caption with the claims resting on it, and a page per paper table.

- ``FigureCaption``: a figure rule's ``params.report`` object; the report's caption template calls
  its ``rst()`` when the report is made, so the caption holds each claim's status (PASS, FAIL,
  NOT MEASURED), the numbers observed and the threshold as claims.tsv has them then. (An object,
  not a string: Snakemake's params trigger leaves objects out, so a changed status reruns no figure.)
- ``write_pages``: an HTML page per table (its caption, the table, then the claims resting on it
  with their status, numbers and threshold) and ``claims.html``, every claim by study: the
  report's items of each study beside its figures (workflow/rules/report.smk).
"""
from __future__ import annotations

import csv
import html
import re
from pathlib import Path

from tma_study.atomic import atomic_write_text

STATUS_COLOURS = {"PASS": "#1a7f37", "FAIL": "#cf222e", "NOT MEASURED": "#9a6700"}
STYLE = ("body{font-family:sans-serif;font-size:13px} table{border-collapse:collapse;margin:8px 0} "
         "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top} th{background:#f3f3f3}")


def read_claims(claims_tsv: Path) -> list[dict]:
    """claims.tsv's rows (none where it does not exist yet)."""
    if not Path(claims_tsv).is_file():
        return []
    with open(claims_tsv, newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


class FigureCaption:
    """A figure's report caption: its title and the claims resting on it, read when rendered."""

    def __init__(self, figure: str, title: str, claims_tsv: str):
        self.figure, self.title, self.claims_tsv = figure, title, claims_tsv

    def rst(self) -> str:
        mine = [row for row in read_claims(Path(self.claims_tsv)) if row["figure"] == self.figure]
        if not mine:
            return f"{self.title.rstrip('.')}. No claim rests on it."
        lines = [f"{self.title.rstrip('.')}. Claims resting on it ({self.claims_tsv}):", ""]
        for row in mine:
            observed = f" Observed: {_rst(row['observed'])}." if row["observed"] else ""
            lines.append(f"- **{row['status']}** ``{row['id']}``: {_rst(row['statement'])}{observed} "
                         f"Threshold: {_rst(row['threshold'])}.")
        return "\n".join(lines)


def _rst(text: str) -> str:
    """Plain text safe inside an RST paragraph (no markup characters acting as markup)."""
    return re.sub(r"([*`_|\\])", r"\\\1", " ".join(str(text).split()))


def _inline(text: str) -> str:
    """A Markdown cell as HTML: escaped, `code` and **bold** kept."""
    text = html.escape(text)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", text)


def markdown_table(md_text: str) -> tuple[str, str]:
    """(caption, HTML table) of a table written by tma_study.report.tables.to_markdown."""
    lines = md_text.splitlines()
    caption = lines[0].strip("*") if lines and lines[0].startswith("**") else ""
    rows = [line for line in lines if line.startswith("|")]
    cells = [[cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip())[1:-1]] for row in rows]
    body = [c for c in cells[1:] if not all(set(x) <= {"-", ":"} for x in c)]
    head = "".join(f"<th>{_inline(c)}</th>" for c in cells[0]) if cells else ""
    rows_html = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body)
    return caption, f"<table><tr>{head}</tr>{rows_html}</table>"


def claims_table(rows: list[dict]) -> str:
    """HTML: each claim's status, statement, numbers observed and threshold."""
    out = ["<table><tr><th>claim</th><th>status</th><th>statement</th><th>observed</th><th>threshold</th></tr>"]
    for row in rows:
        colour = STATUS_COLOURS.get(row["status"], "#000")
        out.append(f"<tr><td><code>{html.escape(row['id'])}</code></td>"
                   f"<td><b style='color:{colour}'>{html.escape(row['status'])}</b></td>"
                   + "".join(f"<td>{html.escape(row[k])}</td>" for k in ("statement", "observed", "threshold"))
                   + "</tr>")
    return "".join(out) + "</table>"


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{body}</body></html>\n")


def table_page(md_path: Path, claims: list[dict]) -> str:
    """A table's page: its caption, the table, and the claims resting on it."""
    caption, table = markdown_table(Path(md_path).read_text())
    mine = [row for row in claims if row["figure"] == Path(md_path).stem]
    resting = (f"<h3>Claims resting on it</h3>{claims_table(mine)}" if mine
               else "<p>No claim rests on this table.</p>")
    return _page(Path(md_path).stem, f"<h2>{_inline(caption)}</h2>{table}{resting}")


def write_pages(claims_tsv: Path, tables: list[Path], out_dir: Path) -> list[Path]:
    """<out_dir>/<table>.html for every table's Markdown file, and <out_dir>/claims.html."""
    claims, out_dir = read_claims(claims_tsv), Path(out_dir)
    written = []
    for md in tables:
        written.append(out_dir / f"{Path(md).stem}.html")
        atomic_write_text(written[-1], table_page(md, claims))
    studies = list(dict.fromkeys(row["study"] for row in claims))
    body = "".join(f"<h3>{html.escape(s)}</h3>{claims_table([r for r in claims if r['study'] == s])}" for s in studies)
    written.append(out_dir / "claims.html")
    atomic_write_text(written[-1], _page("claims", f"<h2>Every claim, checked against {Path(claims_tsv).parent}/"
                                                   f"</h2>{body}"))
    return written
