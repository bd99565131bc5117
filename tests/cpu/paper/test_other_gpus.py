"""Your own GPU's run, judged: the reference data copied under another GPU's name (an H100 label
whose provenance names an H100) gets every claim judged (claims_by_gpu.tsv, a section of
claims.md, the reference-specific claims marked) and a comparison table for every study."""
import json
import shutil

import pandas as pd
import pytest
from paper_fixture import REFERENCE, REPO, aggregated_reference, configured_studies

from tma_study.paper import claims as claims_mod
from tma_study.paper import claims_by_gpu
from tma_study.paper.generated import write_comparison

OTHER, OTHER_GPU = "h100-80gb-hbm3", "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """results/<reference>/ aggregated, and the same data under results/<OTHER>/ naming an H100."""
    root = tmp_path_factory.mktemp("gpus")
    reference = aggregated_reference(root / "results", tmp_path_factory=tmp_path_factory)
    other = shutil.copytree(reference, root / "results" / OTHER)
    for provenance in other.glob("*/provenance.json"):
        # every field that names the GPU (gpu.name, its slug, device.name) names the H100: provenance
        # is checked, so a record naming two GPUs would be refused as edited
        text = provenance.read_text().replace('"NVIDIA H200"', json.dumps(OTHER_GPU))
        record = json.loads(text)
        record["gpu"]["slug"] = OTHER
        provenance.write_text(json.dumps(record, indent=2))
    return reference


def test_every_claim_is_judged_on_the_other_gpus_run(results):
    loaded = claims_mod.load_claims(studies=configured_studies())
    gpu_claims = [c for c in loaded if (results / c.study).is_dir()]
    frame = claims_by_gpu.judge(loaded, results).set_index("id")
    column = f"{OTHER} ({OTHER_GPU})"
    assert list(frame.columns) == ["study", claims_by_gpu.SPECIFIC_COLUMN, column]
    reference = {o.claim.id: o.status for o in claims_mod.check_all(gpu_claims, results)}
    assert {claim.id: frame.loc[claim.id, column] for claim in gpu_claims} == reference   # the same data
    specific = frame[frame[claims_by_gpu.SPECIFIC_COLUMN] != ""]
    assert len(specific) >= 10 and specific.index.isin(reference).all()


def test_the_claims_files_say_where_thresholds_are_the_reference_gpus(results, tmp_path):
    loaded = claims_mod.load_claims(studies=configured_studies())
    outcomes = claims_mod.check_all([c for c in loaded if (results / c.study).is_dir()], results)
    marked = [o for o in outcomes if o.claim.reference_gpu_specific]
    assert marked and all(claims_mod.REFERENCE_GPU_SPECIFIC in o.threshold for o in marked)
    assert not any(claims_mod.REFERENCE_GPU_SPECIFIC in o.threshold for o in outcomes if o not in marked)
    claims_mod.write_reports(outcomes, results)
    claims_by_gpu.write(loaded, results)
    text = (results / "claims.md").read_text()
    assert "## Judged on runs of other GPU models" in text and f"{OTHER} ({OTHER_GPU})" in text
    assert text.count("(*reference GPU*)") == len({o.claim.id for o in marked})


@pytest.mark.parametrize("name", sorted(configured_studies()))
def test_every_study_compares_the_other_gpus_run_with_the_reference(results, name, tmp_path):
    if not (results / name).is_dir():
        pytest.skip(f"no reference data of {name}")
    study = configured_studies()[name]
    runs = {REFERENCE: results / name / "derived", OTHER: results.parent / OTHER / name / "derived"}
    write_comparison(study, runs, REFERENCE, tmp_path)
    table = (tmp_path / f"{name}_comparison.md").read_text()
    header = next(line for line in table.splitlines() if line.startswith("| quantity"))
    assert f"| {REFERENCE} | {OTHER} | moved |" in header
    frame = study.entry("compare")(runs, REFERENCE)
    if frame.moved.str.startswith("nothing to compare").all():     # a study that states no claims
        assert not (REPO / "config" / "claims" / f"{name}.yaml").is_file()
        return
    assert len(frame) and (frame.moved == "no").all(), frame[frame.moved != "no"].to_string()
    absent = pd.Series(frame[OTHER]).eq("not measured")
    assert (pd.Series(frame[REFERENCE])[absent] == "not measured").all()   # measured wherever the reference is


def test_gpu_specs_cover_the_hopper_family_and_find_a_run_by_its_device_name():
    from tma_study.paper import projection
    specs = projection.load_specs()
    assert {"h200", "b200", "h100-80gb-hbm3", "h100-pcie", "h800", "gh200-480gb", "h20"} <= set(specs)
    assert all(spec["device_names"] and spec["source"] for spec in specs.values())
    from tma_study.gpu import gpu_slug      # keyed by slug: the advisor finds a run's GPU by it too
    assert all(gpu_slug(spec["device_names"][0]) == key for key, spec in specs.items())
    assert projection.spec_key(OTHER_GPU, specs) == "h100-80gb-hbm3"
    assert projection.spec_key("NVIDIA H100 PCIe", specs) == "h100-pcie"
    assert projection.spec_key("NVIDIA H200 (synthetic test data)", specs) == "h200"
    assert projection.spec_key("NVIDIA A100-SXM4-80GB", specs, default="none") == "none"
    assert projection.table({k: specs[k] for k in projection.PROJECTED}).shape[1] == 3   # the projection's two


def test_a_run_on_another_gpu_is_bounded_by_that_gpus_tensor_rate():
    from tma_study.studies.paged_kv_tma.aggregate import tensor_peaks_tflops
    assert tensor_peaks_tflops("NVIDIA H20") == {"bf16": 148.0, "e4m3": 296.0}
    assert tensor_peaks_tflops("NVIDIA H200") == tensor_peaks_tflops(None) == {"bf16": 989.0, "e4m3": 1979.0}
