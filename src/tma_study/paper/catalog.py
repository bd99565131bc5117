"""The data-movement catalog: how FlashAttention-3 forward (and, briefly, FlashInfer's Hopper
attention and CUTLASS's SM90/SM100 GEMM mainloops) move each operand, and when.

``catalog/*.yaml`` holds one entry per operand and data movement: direction, memory spaces,
mechanism (TMA, TMA multicast, cp.async, plain loads/stores, TMA store, DSM, other), the
condition that chooses it, and citations of the source (repository, 40-hex commit, file,
line, quoted text). This module loads and validates those files against
``workflow/schemas/catalog.schema.yaml`` and writes the paper tables. It needs no GPU and no
network: the citations were checked against the sources when the catalog was written.

Every validation error names the file, the entry id and the key.
"""
from __future__ import annotations

from pathlib import Path

import jsonschema
import pandas as pd
import yaml

from tma_study.atomic import atomic_write_text
from tma_study.config import REPO_ROOT, SCHEMA_DIR, key_path, leaf_errors
from tma_study.report.tables import latex_escape, to_markdown

from .catalog_counts import (  # noqa: F401  (the catalog's derived counts, re-exported)
    DERIVED_DIR,
    DERIVED_FILES,
    FA3_SUBJECT,
    derived_tables,
    macros,
    summary_table,
    write_derived,
)

CATALOG_DIR = REPO_ROOT / "catalog"
SCHEMA = SCHEMA_DIR / "catalog.schema.yaml"
# paper/tables/<name>.tex|md written by write_tables
TABLES = ("catalog_summary", "catalog_fa3", "catalog_fa3_paged_kv", "catalog_fa3_tiles", "catalog_other")
TABLE_FORMATS = ("tex", "md")

MECHANISM_LABELS = {"tma": "TMA", "tma_multicast": "TMA multicast", "cp_async": "cp.async",
                    "plain_load": "plain loads", "plain_store": "plain stores", "tma_store": "TMA store",
                    "dsm": "DSM", "other": "other"}
SPACE_LABELS = {"global": "global", "shared": "smem", "registers": "regs", "cluster_shared": "cluster smem"}
DTYPE_LABELS = {"bf16": "bf16/fp16", "fp8_e4m3": "fp8 e4m3"}


class CatalogError(ValueError):
    """A catalog file is invalid; the message names file, entry id and key of every problem."""


def _schema() -> dict:
    return yaml.safe_load(SCHEMA.read_text())


def allowed_mechanisms() -> tuple[str, ...]:
    """The mechanism names the schema allows (the schema is the one list)."""
    return tuple(_schema()["$defs"]["entry"]["properties"]["mechanism"]["enum"])


def _unexpected_keys(error: jsonschema.ValidationError) -> list[str]:
    return sorted(k for k in error.instance if k not in error.schema.get("properties", {}))


def _error_path(error: jsonschema.ValidationError) -> list:
    """Where the error is; for a missing or an unexpected key, the path of that key."""
    path = list(error.absolute_path)
    if error.validator == "required":
        path.append(next(k for k in error.validator_value if k not in (error.instance or {})))
    elif error.validator == "additionalProperties":
        path.append(", ".join(_unexpected_keys(error)))
    return path


def _describe(error: jsonschema.ValidationError) -> str:
    """What is wrong, and what is allowed where the schema says."""
    if error.validator == "required":
        return "missing (required)"
    if error.validator == "additionalProperties":
        return f"not an allowed key; allowed keys: {', '.join(sorted(error.schema.get('properties', {})))}"
    allowed = error.schema.get("description") if isinstance(error.schema, dict) else None
    if error.validator == "enum":
        return f"{error.instance!r} is not allowed; allowed: {allowed or error.validator_value}"
    return error.message + (f" (allowed: {allowed})" if allowed else "")


def _where(document: dict, path: list) -> str:
    """"entry 'fa3.q.tma': key 'mechanism'" inside an entry, else "key 'tile_sizes.rows[3].line'"."""
    if len(path) >= 2 and path[0] == "entries" and isinstance(path[1], int):
        entry = document["entries"][path[1]]
        name = entry.get("id") if isinstance(entry, dict) and isinstance(entry.get("id"), str) else f"#{path[1]}"
        return f"entry '{name}': key '{key_path(path[2:]) or '<entry>'}'"
    return f"key '{key_path(path) or '<file>'}'"


def _fill_citation_defaults(document: dict) -> None:
    """Every citation without its own repository/commit gets the file's citation_defaults."""
    defaults = document.get("citation_defaults")
    if not isinstance(defaults, dict):
        return

    def fill(citations):
        for citation in citations if isinstance(citations, list) else ():
            if isinstance(citation, dict):
                for key in ("repository", "commit"):
                    if key not in citation and key in defaults:
                        citation[key] = defaults[key]

    for entry in document.get("entries") or []:
        if isinstance(entry, dict):
            fill(entry.get("citations"))
    for requirement in (document.get("paged_kv_dispatch") or {}).get("requirements") or []:
        if isinstance(requirement, dict):
            fill(requirement.get("citations"))
    fill((document.get("tile_sizes") or {}).get("citations"))


def _all_citations(document: dict):
    """(owner, key, citation) for every citation in a validated document."""
    for entry in document["entries"]:
        for i, citation in enumerate(entry["citations"]):
            yield f"entry '{entry['id']}': ", f"citations[{i}]", citation
    for requirement in (document.get("paged_kv_dispatch") or {}).get("requirements", []):
        for i, citation in enumerate(requirement["citations"]):
            yield "", f"paged_kv_dispatch.{requirement['id']}.citations[{i}]", citation
    for i, citation in enumerate((document.get("tile_sizes") or {}).get("citations", [])):
        yield "", f"tile_sizes.citations[{i}]", citation


def validate_document(document, path: Path) -> list[str]:
    """Messages for every problem of one catalog file (empty when valid)."""
    if not isinstance(document, dict):
        return [f"{path}: must hold a mapping, not {type(document).__name__}"]
    _fill_citation_defaults(document)
    validator = jsonschema.Draft202012Validator(_schema())
    messages = []
    for error in validator.iter_errors(document):
        for leaf in leaf_errors(error):
            messages.append(f"{path}: {_where(document, _error_path(leaf))}: {_describe(leaf)}")
    if messages:
        return sorted(set(messages))
    for owner, key, citation in _all_citations(document):
        if citation.get("end_line", citation["line"]) < citation["line"]:
            messages.append(f"{path}: {owner}key '{key}.end_line': {citation['end_line']} is before "
                            f"line {citation['line']}")
    seen = set()
    for entry in document["entries"]:
        if entry["id"] in seen:
            messages.append(f"{path}: entry '{entry['id']}': key 'id': duplicate id in this file")
        seen.add(entry["id"])
    return messages


def load_file(path: Path) -> dict:
    """One catalog file, validated, with citation defaults filled in."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise CatalogError(f"catalog file {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise CatalogError(f"catalog file {path} is not valid YAML: {exc}") from None
    messages = validate_document(document, path)
    if messages:
        raise CatalogError("invalid catalog:\n  " + "\n  ".join(messages))
    return document


def load(directory: Path = CATALOG_DIR) -> dict[str, dict]:
    """Every catalog/*.yaml, validated, keyed by its subject; entry ids unique across files."""
    paths = sorted(Path(directory).glob("*.yaml"))
    if not paths:
        raise CatalogError(f"no catalog files (*.yaml) in {directory}")
    catalog, messages, owner = {}, [], {}
    for path in paths:
        try:
            document = load_file(path)
        except CatalogError as error:
            messages.append(str(error).removeprefix("invalid catalog:\n  "))
            continue
        if document["subject"] in catalog:
            messages.append(f"{path}: key 'subject': {document['subject']!r} is also the subject of "
                            f"{catalog[document['subject']]['path']}")
        for entry in document["entries"]:
            if entry["id"] in owner and owner[entry["id"]] != path:
                messages.append(f"{path}: entry '{entry['id']}': key 'id': also used in {owner[entry['id']]}")
            owner[entry["id"]] = path
        catalog[document["subject"]] = {**document, "path": path}
    if messages:
        raise CatalogError("invalid catalog:\n  " + "\n  ".join(messages))
    return catalog


# ---------------------------------------------------------------- tables

def _cited_at(citations, link: bool) -> str:
    """'file.h:56, 208; other.h:12-14' (Markdown: each line a link to GitHub at the commit)."""
    by_file: dict[tuple, list[str]] = {}
    for c in citations:
        lines = f"{c['line']}" if c.get("end_line", c["line"]) == c["line"] else f"{c['line']}-{c['end_line']}"
        if link:
            anchor = f"L{c['line']}" + (f"-L{c['end_line']}" if "-" in lines else "")
            lines = f"[{lines}](https://github.com/{c['repository']}/blob/{c['commit']}/{c['file']}#{anchor})"
        by_file.setdefault((c["repository"], c["file"]), []).append(lines)
    home = citations[0]["repository"]
    return "; ".join(f"{'' if repository == home else repository.split('/')[-1] + ' '}{Path(file).name}:"
                     f"{', '.join(lines)}" for (repository, file), lines in by_file.items())


def _mechanism(entry: dict) -> str:
    label = MECHANISM_LABELS[entry["mechanism"]]
    return f"{label} ({entry['mechanism_detail']})" if entry["mechanism"] == "other" else label


def entries_table(entries, link: bool, with_condition: bool, library: str | None = None) -> pd.DataFrame:
    """One row per entry; the Markdown (``with_condition``) keeps direction and path apart, the
    paper's table joins them ("load: global -> smem") to fit the page."""
    rows = []
    for e in entries:
        row = {"entry": e["id"]}
        if library:
            row["library"] = library
        path = f"{SPACE_LABELS[e['source']]} -> {SPACE_LABELS[e['destination']]}"
        row["operand"] = e["operand"]
        if with_condition:
            row.update({"direction": e["direction"], "from -> to": path})
        else:
            row["moves"] = f"{e['direction'].replace('_', ' ')}: {path}"
        row.update({"mechanism": _mechanism(e), "chosen when": e["predicate"]})
        if with_condition:
            row["condition"] = " ".join(e["condition"].split())
        row["cited at"] = _cited_at(e["citations"], link)
        rows.append(row)
    return pd.DataFrame(rows)


def paged_kv_table(document: dict, link: bool) -> pd.DataFrame:
    rows = [{"requirement": r["id"], "what": " ".join(r["text"].split()), "predicate": r["predicate"],
             "cited at": _cited_at(r["citations"], link)}
            for r in document["paged_kv_dispatch"]["requirements"]]
    return pd.DataFrame(rows)


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def tma_page_sizes(block_n: int) -> str:
    """Which page sizes let a paged cache go through TMA for a kernel with this kBlockN."""
    if _is_power_of_two(block_n):
        return f"multiples of {block_n} (smallest power of two: {block_n})"
    return f"multiples of {block_n} (no power-of-two page size)"


def tile_table(document: dict) -> pd.DataFrame:
    """One row per (head dim, dtype, mask): the TMA tile, the cp.async (paged) tile, and which
    page sizes allow the TMA path (page_size % kBlockN of the TMA tile == 0)."""
    tiles = document["tile_sizes"]
    frame = pd.DataFrame(tiles["rows"])
    file = Path(tiles["file"]).name
    rows = []
    for (head_dim, dtype, mask), group in frame.groupby(["head_dim", "dtype", "mask"], sort=False):
        by_load = {r.kv_load: r for r in group.itertuples()}
        tma, gather = by_load.get("tma"), by_load.get("cp_async")

        def describe(r):
            if r is None:
                return "not listed"
            return (f"{r.block_m} x {r.block_n}, P from {'regs' if r.mma_pv_is_rs else 'smem'}"
                    f"{'' if r.intra_wg_overlap else ', no intra-WG overlap'}")

        rows.append({"head dim": head_dim, "dtype": DTYPE_LABELS.get(dtype, dtype), "mask": mask,
                     "TMA K/V tile (dense or paged)": describe(tma),
                     "cp.async paged tile": describe(gather),
                     "page sizes allowing TMA": tma_page_sizes(tma.block_n) if tma is not None else "n/a",
                     "cited at": f"{file}:" + ", ".join(sorted({str(r.line) for r in group.itertuples()}, key=int))})
    return pd.DataFrame(rows)


def _source_caption(document: dict) -> str:
    defaults = document["citation_defaults"]
    return f"{defaults['repository']} at commit {defaults['commit'][:10]}"


def _tex(text) -> str:
    """latex_escape plus what it leaves to the font encoding: <, >, | and the arrow; long
    identifiers may break after an underscore."""
    escaped = latex_escape(str(text).replace("->", "\x00"))
    for char, command in (("<", r"\textless{}"), (">", r"\textgreater{}"), ("|", r"\textbar{}")):
        escaped = escaped.replace(char, command)
    return escaped.replace("\x00", r"$\to$").replace(r"\_", r"\_\allowbreak{}")


def to_latex_wrapped(frame: pd.DataFrame, caption: str, label: str, widths: dict[str, str], float_: bool = False) -> str:
    """A booktabs longtable (it may run onto the next page; the appendix is one column) whose columns
    all wrap at ``widths`` (``l`` where a column has none), at \\footnotesize (8 pt); ``float_``: a
    table* float across the two columns instead, for a table short enough to sit in the body."""
    spec = "".join(rf">{{\raggedright\arraybackslash}}p{{{widths[c]}}}" if c in widths else "l"
                   for c in frame.columns)
    head = " & ".join(rf"\textbf{{{_tex(c)}}}" for c in frame.columns) + r" \\"
    rows = [" & ".join(_tex(v) for v in row) + r" \\" for row in frame.itertuples(index=False)]
    if float_:
        return "\n".join([r"\begin{table*}[!t]", r"\centering", r"\footnotesize", r"\setlength{\tabcolsep}{3pt}",
                          rf"\caption{{{_tex(caption)}}}\label{{{label}}}", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
                          head, r"\midrule", *rows, r"\bottomrule", r"\end{tabular}", r"\end{table*}", ""])
    lines = [r"{\footnotesize\setlength{\tabcolsep}{3pt}", rf"\begin{{longtable}}{{{spec}}}",
             rf"\caption{{{_tex(caption)}}}\label{{{label}}} \\", r"\toprule", head, r"\midrule", r"\endfirsthead",
             r"\toprule", head, r"\midrule", r"\endhead", r"\bottomrule", r"\endlastfoot"]
    lines += rows
    lines += [r"\end{longtable}", "}", ""]
    return "\n".join(lines)


def _write(tables_dir: Path, name: str, caption: str, tex_frame: pd.DataFrame, md_frame: pd.DataFrame,
           widths: dict[str, str], float_: bool = False) -> None:
    atomic_write_text(tables_dir / f"{name}.tex", to_latex_wrapped(tex_frame, caption, f"tab:{name}", widths, float_))
    # predicates hold C++ '||', which would end a Markdown cell
    md_frame = md_frame.map(lambda value: str(value).replace("|", r"\|"))
    atomic_write_text(tables_dir / f"{name}.md", to_markdown(md_frame, caption))


def write_tables(catalog: dict[str, dict], tables_dir: Path) -> list[Path]:
    """paper/tables/catalog_*.tex|md from a loaded catalog; returns the files written."""
    tables_dir = Path(tables_dir)
    tables_dir.mkdir(parents=True, exist_ok=True)
    if FA3_SUBJECT not in catalog:
        raise CatalogError(f"the catalog has no file with subject {FA3_SUBJECT!r}; subjects: {sorted(catalog)}")
    fa3 = catalog[FA3_SUBJECT]
    # column widths that fit the paper's text width (one column in the appendix, 17.8 cm) at \footnotesize
    wide = {"entry": "3.2cm", "operand": "1.8cm", "moves": "2.0cm", "mechanism": "1.8cm", "chosen when": "4.2cm",
            "cited at": "3.4cm", "requirement": "2.6cm", "what": "6.2cm", "predicate": "4.2cm",
            "head dim": "1.0cm", "dtype": "1.3cm", "mask": "1.1cm", "TMA K/V tile (dense or paged)": "3.0cm",
            "cp.async paged tile": "3.0cm", "page sizes allowing TMA": "3.3cm"}
    narrow = {**wide, "library": "1.5cm", "entry": "3.0cm", "moves": "1.9cm", "mechanism": "1.7cm",
              "chosen when": "3.2cm", "cited at": "3.3cm"}
    _write(tables_dir, "catalog_fa3",
           f"FlashAttention-3 forward (SM90): mechanism per operand and when it is chosen; source "
           f"{_source_caption(fa3)}",
           entries_table(fa3["entries"], link=False, with_condition=False),
           entries_table(fa3["entries"], link=True, with_condition=True), wide)
    _write(tables_dir, "catalog_fa3_paged_kv",
           f"FlashAttention-3 reads a paged KV cache with TMA only when all of these hold (else "
           f"cp.async); source {_source_caption(fa3)}",
           paged_kv_table(fa3, link=False), paged_kv_table(fa3, link=True), wide)
    tiles = tile_table(fa3)
    _write(tables_dir, "catalog_fa3_tiles",
           f"FlashAttention-3 SM90 forward tiles (kBlockM x kBlockN), {fa3['tile_sizes']['assumptions']}; "
           f"a paged cache also needs the other requirements of the paged-KV table for TMA; "
           f"source {_source_caption(fa3)}", tiles, tiles, {**wide, "cited at": "2.0cm"})
    summary = summary_table(catalog)
    _write(tables_dir, "catalog_summary", "The catalog in numbers: per mechanism, how many of each kernel's cataloged "
           "data movements use it, and the operands they move (every entry cited to a source line; "
           f"FlashAttention-3: {_source_caption(fa3)})", summary, summary,
           {c: ("2.6cm" if c == "mechanism" else "4.8cm") for c in summary.columns}, float_=True)
    others = [(doc["title"], doc) for subject, doc in sorted(catalog.items()) if subject != FA3_SUBJECT]
    tex = pd.concat([entries_table(d["entries"], link=False, with_condition=False, library=t) for t, d in others],
                    ignore_index=True) if others else pd.DataFrame()
    md = pd.concat([entries_table(d["entries"], link=True, with_condition=True, library=t) for t, d in others],
                   ignore_index=True) if others else pd.DataFrame()
    sources = "; ".join(f"{t}: {_source_caption(d)}" for t, d in others)
    _write(tables_dir, "catalog_other", f"Other kernels: mechanism per operand ({sources})", tex, md, narrow)
    return [tables_dir / f"{name}.{ext}" for name in TABLES for ext in TABLE_FORMATS]


def table_files(tables_dir: str = "paper/tables") -> list[str]:
    """The files write_tables makes (for the Snakemake rule)."""
    return [f"{tables_dir}/{name}.{ext}" for name in TABLES for ext in TABLE_FORMATS]


def catalog_files(directory: str = "catalog") -> list[str]:
    """The catalog data files (the Snakemake rule's inputs)."""
    return [str(p) for p in sorted(Path(directory).glob("*.yaml"))]
