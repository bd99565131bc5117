"""The data-movement catalog (catalog/*.yaml): every entry validates and cites a repository,
a full commit, a file and a line; mechanisms come from the allowed set; FA3's entries cover
every operand issue 6 names; bad input is reported by file, entry and key; the tables hold
every entry. Needs neither a GPU nor the network (the citations were checked against the
sources when written; here their form is checked)."""

import re
import shutil
from pathlib import Path

import pytest
import yaml

from tma_study.paper import catalog as catalog_mod
from tma_study.cli import main as cli_main

REPO = Path(__file__).resolve().parents[3]
CATALOG = REPO / "catalog"
ALLOWED_MECHANISMS = ("tma", "tma_multicast", "cp_async", "plain_load", "plain_store", "tma_store", "dsm", "other")
SUBJECTS = ("fa3_forward", "flashinfer_hopper", "cutlass_gemm")
# issue 6: "Q, K, V, paged K/V, appended K/V, O, LSE, scales, sequence lengths, page table,
# scheduler metadata" -> a test on the entry's operand name
FA3_OPERANDS = {
    "Q": lambda op: op == "Q",
    "K": lambda op: op in ("K", "K and V"),
    "V": lambda op: op in ("V", "K and V"),
    "paged K/V": lambda op: op == "paged K/V",
    "appended K/V": lambda op: op.startswith("appended K/V"),
    "O": lambda op: op == "O",
    "LSE": lambda op: op == "LSE",
    "scales": lambda op: op.startswith("descale factors"),
    "sequence lengths": lambda op: op.startswith("sequence lengths"),
    "page table": lambda op: op == "page table",
    "scheduler metadata": lambda op: op.startswith("scheduler"),
}


@pytest.fixture(scope="module")
def catalog():
    return catalog_mod.load(CATALOG)


def all_citations(document):
    for entry in document["entries"]:
        yield from entry["citations"]
    for requirement in (document.get("paged_kv_dispatch") or {}).get("requirements", []):
        yield from requirement["citations"]
    yield from (document.get("tile_sizes") or {}).get("citations", [])


def test_every_file_validates_and_has_its_subject(catalog):
    assert set(catalog) == set(SUBJECTS)
    assert all(document["entries"] for document in catalog.values())


def test_every_citation_names_repository_commit_file_line_and_quote(catalog):
    count = 0
    for document in catalog.values():
        for citation in all_citations(document):
            count += 1
            assert re.fullmatch(r"[\w.-]+/[\w.-]+", citation["repository"]), citation
            assert re.fullmatch(r"[0-9a-f]{40}", citation["commit"]), citation
            assert citation["file"] and not citation["file"].startswith("/"), citation
            assert isinstance(citation["line"], int) and citation["line"] >= 1, citation
            assert citation.get("end_line", citation["line"]) >= citation["line"], citation
            assert len(citation["quote"].strip()) >= 3, citation
    assert count >= 100  # the three files hold about 180


def test_every_tile_row_cites_a_line_of_the_tile_file(catalog):
    tiles = catalog["fa3_forward"]["tile_sizes"]
    assert tiles["file"] == "hopper/tile_size.h"
    assert all(row["line"] >= 1 and row["quote"] for row in tiles["rows"])


def test_the_schema_allows_exactly_the_mechanisms_of_the_study(catalog):
    assert catalog_mod.allowed_mechanisms() == ALLOWED_MECHANISMS
    used = {entry["mechanism"] for document in catalog.values() for entry in document["entries"]}
    assert used <= set(ALLOWED_MECHANISMS)


def test_other_mechanisms_say_what_they_are(catalog):
    for document in catalog.values():
        for entry in document["entries"]:
            if entry["mechanism"] == "other":
                assert entry["mechanism_detail"].strip(), entry["id"]


@pytest.mark.parametrize("operand", FA3_OPERANDS)
def test_fa3_lists_every_operand_the_issue_names(catalog, operand):
    operands = [entry["operand"] for entry in catalog["fa3_forward"]["entries"]]
    assert any(FA3_OPERANDS[operand](name) for name in operands), (operand, operands)


def mechanisms_of(catalog, operand_test):
    return {e["mechanism"] for e in catalog["fa3_forward"]["entries"] if operand_test(e["operand"])}


def test_fa3_operands_with_a_choice_list_both_sides(catalog):
    """Where FA3 picks between mechanisms, the catalog holds both (with their conditions)."""
    assert mechanisms_of(catalog, FA3_OPERANDS["paged K/V"]) == {"tma", "cp_async"}
    assert mechanisms_of(catalog, FA3_OPERANDS["Q"]) == {"tma", "cp_async"}
    assert mechanisms_of(catalog, FA3_OPERANDS["O"]) == {"tma_store", "plain_store"}
    assert {"tma", "tma_multicast"} <= mechanisms_of(catalog, FA3_OPERANDS["K"])


def test_paged_kv_dispatch_names_every_requirement(catalog):
    requirements = {r["id"] for r in catalog["fa3_forward"]["paged_kv_dispatch"]["requirements"]}
    assert {"arch", "no_leftpad", "no_append", "page_multiple_of_block_n",
            "packed_query_longer_than_block_m"} <= requirements


def test_tile_rows_cover_both_kv_paths_and_paged_tiles_are_never_larger(catalog):
    rows = catalog["fa3_forward"]["tile_sizes"]["rows"]
    keys = {(r["head_dim"], r["dtype"], r["mask"]) for r in rows}
    assert {(d, t) for d, t, _ in keys} >= {(d, t) for d in (64, 128, 256) for t in ("bf16", "fp8_e4m3")}
    by_key = {(r["head_dim"], r["dtype"], r["mask"], r["kv_load"]): r for r in rows}
    assert len(by_key) == len(rows), "a (head_dim, dtype, mask, kv_load) row is listed twice"
    for head_dim, dtype, mask in keys:
        tma, gather = by_key[head_dim, dtype, mask, "tma"], by_key[head_dim, dtype, mask, "cp_async"]
        assert gather["block_m"] == tma["block_m"]
        assert gather["block_n"] <= tma["block_n"], (head_dim, dtype, mask)


def test_entry_ids_are_unique_across_files(catalog):
    ids = [entry["id"] for document in catalog.values() for entry in document["entries"]]
    assert len(ids) == len(set(ids))


# ---------------------------------------------------------------- bad input

@pytest.fixture
def copy_of_catalog(tmp_path):
    destination = tmp_path / "catalog"
    shutil.copytree(CATALOG, destination)
    return destination


def edit(path: Path, change) -> None:
    document = yaml.safe_load(path.read_text())
    change(document)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def error_of(directory: Path) -> str:
    with pytest.raises(catalog_mod.CatalogError) as caught:
        catalog_mod.load(directory)
    return str(caught.value)


def test_a_missing_key_is_named_with_file_and_entry(copy_of_catalog):
    path = copy_of_catalog / "fa3_forward.yaml"
    edit(path, lambda d: d["entries"][0].pop("mechanism"))
    message = error_of(copy_of_catalog)
    assert str(path) in message
    assert "entry 'fa3.q.tma': key 'mechanism': missing (required)" in message


def test_an_unknown_mechanism_is_named_with_what_is_allowed(copy_of_catalog):
    path = copy_of_catalog / "cutlass_gemm.yaml"
    edit(path, lambda d: d["entries"][1].update(mechanism="teleport"))
    message = error_of(copy_of_catalog)
    assert str(path) in message
    assert "entry 'cutlass.sm90.b.tma': key 'mechanism': 'teleport' is not allowed" in message
    assert all(name in message for name in ALLOWED_MECHANISMS)


def test_a_short_commit_is_named_down_to_the_citation(copy_of_catalog):
    path = copy_of_catalog / "flashinfer_hopper.yaml"
    edit(path, lambda d: d["entries"][2]["citations"][1].update(commit="fb28d72"))
    message = error_of(copy_of_catalog)
    assert f"{path}: entry 'fi.paged_kv.cp_async': key 'citations[1].commit'" in message


def test_a_citation_without_line_is_rejected(copy_of_catalog):
    path = copy_of_catalog / "fa3_forward.yaml"
    edit(path, lambda d: d["entries"][3]["citations"][0].pop("line"))
    assert "entry 'fa3.k.tma': key 'citations[0].line': missing (required)" in error_of(copy_of_catalog)


def test_a_line_below_one_is_rejected(copy_of_catalog):
    path = copy_of_catalog / "fa3_forward.yaml"
    edit(path, lambda d: d["entries"][0]["citations"][0].update(line=0))
    assert "entry 'fa3.q.tma': key 'citations[0].line'" in error_of(copy_of_catalog)


def test_a_range_that_ends_before_it_starts_is_rejected(copy_of_catalog):
    path = copy_of_catalog / "fa3_forward.yaml"
    edit(path, lambda d: d["entries"][0]["citations"][0].update(end_line=10))
    assert "entry 'fa3.q.tma': key 'citations[0].end_line': 10 is before line 56" in error_of(copy_of_catalog)


def test_other_without_detail_is_rejected(copy_of_catalog):
    path = copy_of_catalog / "fa3_forward.yaml"
    edit(path, lambda d: d["entries"][0].update(mechanism="other"))
    assert "entry 'fa3.q.tma': key 'mechanism_detail': missing (required)" in error_of(copy_of_catalog)


def test_an_unknown_key_is_named_with_the_allowed_keys(copy_of_catalog):
    path = copy_of_catalog / "fa3_forward.yaml"
    edit(path, lambda d: d["entries"][0].update(mechansim="tma"))
    message = error_of(copy_of_catalog)
    assert "entry 'fa3.q.tma': key 'mechansim': not an allowed key; allowed keys: citations," in message


def test_an_id_used_in_two_files_is_rejected(copy_of_catalog):
    edit(copy_of_catalog / "cutlass_gemm.yaml", lambda d: d["entries"][0].update(id="fa3.q.tma"))
    assert "entry 'fa3.q.tma': key 'id': also used in" in error_of(copy_of_catalog)


def test_invalid_yaml_names_the_file(copy_of_catalog):
    path = copy_of_catalog / "cutlass_gemm.yaml"
    path.write_text("entries: [unclosed\n")
    assert f"catalog file {path} is not valid YAML" in error_of(copy_of_catalog)


def test_an_empty_folder_is_reported(tmp_path):
    assert f"no catalog files (*.yaml) in {tmp_path}" in error_of(tmp_path)


# ---------------------------------------------------------------- tables

@pytest.fixture(scope="module")
def tables(catalog, tmp_path_factory):
    out = tmp_path_factory.mktemp("tables")
    written = catalog_mod.write_tables(catalog, out)
    return out, written


def test_write_tables_makes_the_files_the_rule_declares(tables):
    _, written = tables
    assert sorted(p.name for p in written) == sorted(Path(f).name for f in catalog_mod.table_files())
    assert all(p.is_file() and p.stat().st_size > 0 for p in written)


def test_the_fa3_table_holds_every_fa3_entry(catalog, tables):
    out, _ = tables
    markdown = (out / "catalog_fa3.md").read_text()
    latex = (out / "catalog_fa3.tex").read_text()
    for entry in catalog["fa3_forward"]["entries"]:
        assert f"| {entry['id']} |" in markdown, entry["id"]
        assert catalog_mod._tex(entry["id"]) + " &" in latex, entry["id"]


def test_the_other_table_holds_every_flashinfer_and_cutlass_entry(catalog, tables):
    out, _ = tables
    markdown = (out / "catalog_other.md").read_text()
    latex = (out / "catalog_other.tex").read_text()
    for subject in ("flashinfer_hopper", "cutlass_gemm"):
        for entry in catalog[subject]["entries"]:
            assert f"| {entry['id']} |" in markdown, entry["id"]
            assert catalog_mod._tex(entry["id"]) + " &" in latex, entry["id"]


def test_markdown_cells_never_split_on_a_cpp_or(tables):
    out, _ = tables
    for path in out.glob("*.md"):
        header, _, *rows = [line for line in path.read_text().splitlines() if line.startswith("|")]
        columns = len(re.split(r"(?<!\\)\|", header))
        assert all(len(re.split(r"(?<!\\)\|", row)) == columns for row in rows), path.name


def test_markdown_citations_link_to_the_cited_commit(catalog, tables):
    out, _ = tables
    markdown = (out / "catalog_fa3.md").read_text()
    commit = catalog["fa3_forward"]["citation_defaults"]["commit"]
    assert (f"https://github.com/Dao-AILab/flash-attention/blob/{commit}/hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp#L56"
            in markdown)


def test_the_paged_kv_and_tile_tables_hold_every_requirement_and_tile(catalog, tables):
    out, _ = tables
    fa3 = catalog["fa3_forward"]
    paged = (out / "catalog_fa3_paged_kv.md").read_text()
    assert all(f"| {r['id']} |" in paged for r in fa3["paged_kv_dispatch"]["requirements"])
    tiles = (out / "catalog_fa3_tiles.md").read_text()
    for row in fa3["tile_sizes"]["rows"]:
        assert f"{row['block_m']} x {row['block_n']}" in tiles, row
    table_rows = [line for line in tiles.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(table_rows) == len({(r["head_dim"], r["dtype"], r["mask"]) for r in fa3["tile_sizes"]["rows"]})


@pytest.mark.parametrize(("block_n", "says"), [
    (176, "multiples of 176 (no power-of-two page size)"),
    (128, "multiples of 128 (smallest power of two: 128)"),
    (80, "multiples of 80 (no power-of-two page size)"),
])
def test_page_sizes_that_allow_tma(block_n, says):
    assert catalog_mod.tma_page_sizes(block_n) == says


def test_cli_writes_the_tables(tmp_path):
    assert cli_main(["catalog", "--catalog", str(CATALOG), "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(Path(f).name for f in catalog_mod.table_files())


def test_cli_stops_with_the_catalog_error(copy_of_catalog, tmp_path, capsys):
    edit(copy_of_catalog / "fa3_forward.yaml", lambda d: d["entries"][0].update(mechanism="teleport"))
    assert cli_main(["catalog", "--catalog", str(copy_of_catalog), "--out", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert "entry 'fa3.q.tma': key 'mechanism'" in error and error.strip().count("\n") == 0
    assert not (tmp_path / "out").exists()


def test_the_main_job_builds_the_catalog_tables():
    snakefile = (REPO / "Snakefile").read_text()
    assert 'include: "workflow/rules/catalog.smk"' in snakefile
    rule_all = snakefile.split("rule all:", 1)[1]
    assert "CATALOG_TABLES" in rule_all
