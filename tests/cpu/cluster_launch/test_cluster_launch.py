"""CPU: the cluster_launch study: its kernel's SASS, its config rules, the per-CTA record check
of the measure step, and the analysis (placement, start waves, GPC inference, tables, macros,
figure) on a synthetic launch model of a GPU whose GPCs are known."""
import copy
import json
import re
import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from raw_fixture import timed, valid_provenance
from tma_study import config as config_mod
from tma_study.harness import timing
from tma_study.report import figures
from tma_study.studies import discover
from tma_study.studies.cluster_launch import STUDY
from tma_study.studies.cluster_launch import aggregate as agg
from tma_study.studies.cluster_launch.grid import LaunchPoint, check_config, fits_per_sm, grid_ctas, launch_points
from tma_study.studies.cluster_launch.macros import macros
from tma_study.studies.cluster_launch.measure import CTA_KEY, POISON_INFO, POISON_TIME, cta_records
from tma_study.studies.cluster_launch.tables import write_tables

REPO = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
GPCS = (18, 18, 18, 16, 16, 16, 16, 14)         # the synthetic GPU's GPCs: 132 SMs
SM_COUNT = sum(GPCS)
BASE_US, CLUSTER_US = 4.0, 0.3                   # synthetic empty-launch time and a cluster launch's extra


@pytest.fixture
def study_config():
    return copy.deepcopy(CONFIG["studies"]["cluster_launch"])


# ---------------------------------------------------------------- kernel

def test_kernel_compiles_to_timer_smid_and_cluster_register_reads():
    from tma_study.harness.kernel_builds import compile_build, missing_instructions
    (build,) = STUDY.entry("kernels")(CONFIG["studies"]["cluster_launch"])
    compiled = compile_build(build)
    assert not missing_instructions(compiled, build.expected_sass)
    sass = compiled.sass
    for register in ("SR_GLOBALTIMERLO", "SR_VIRTUALSMID", "SR_CgaCtaId", "SR_CTAID.X"):
        assert register in sass, register
    assert compiled.shared_bytes_static == 0 and compiled.spill_store_bytes == 0


# ---------------------------------------------------------------- sweep and config

def test_launch_points_pair_every_cluster_grid_with_a_plain_launch(study_config):
    points = launch_points(study_config, SM_COUNT)
    assert len({p.key for p in points}) == len(points)
    plain = {(p.grid_ctas, p.ctas_per_sm, p.dynamic_shared_bytes, p.spin_ns) for p in points if p.launch == "no_cluster"}
    clustered = [p for p in points if p.launch == "cluster"]
    assert {p.cluster_size for p in clustered} == {1, 2, 4, 8, 16}
    assert all((p.grid_ctas, p.ctas_per_sm, p.dynamic_shared_bytes, p.spin_ns) in plain for p in clustered)
    assert grid_ctas(8, 1, 132) == 128 and grid_ctas(16, 2, 132) == 256 and grid_ctas(4, 2, 132) == 264
    assert {fits_per_sm(s["dynamic_shared_bytes"], study_config["threads_per_cta"])
            for s in study_config["occupancy"]} == {1, 2, 3, 7}


@pytest.mark.parametrize("key,value,fragment", [
    ("cluster_sizes", [3], "studies.cluster_launch.cluster_sizes[0]"),
    ("spin_ns", [-1], "studies.cluster_launch.spin_ns[0]"),
    ("occupancy", [{"ctas_per_sm": 2}], "studies.cluster_launch.occupancy[0]"),
    ("occupancy", [{"ctas_per_sm": 2, "dynamic_shared_bytes": 131200}], "studies.cluster_launch.occupancy[0]"),
    ("occupancy", [{"ctas_per_sm": 1, "dynamic_shared_bytes": 0}] * 2, "studies.cluster_launch.occupancy[1]"),
    ("threads_per_cta", 100, "studies.cluster_launch.threads_per_cta"),
])
def test_bad_config_names_the_key(key, value, fragment):
    config = copy.deepcopy(CONFIG)
    config["studies"]["cluster_launch"][key] = value
    with pytest.raises(config_mod.ConfigError, match=re.escape(fragment)):
        config_mod.validate(config, discover())


def test_check_config_says_why_a_setting_does_not_fit(study_config):
    study_config["occupancy"] = [{"ctas_per_sm": 2, "dynamic_shared_bytes": 131200}]
    (message,) = check_config(study_config)
    assert "2 CTAs per SM" in message and "do not fit one SM" in message
    assert check_config(CONFIG["studies"]["cluster_launch"]) == []


# ---------------------------------------------------------------- the recorded launch's check

def records(point: LaunchPoint, smids=None):
    n = point.grid_ctas
    times = np.zeros((n, 2), np.uint64)
    times[:, 0] = 1_000_000 + 10 * np.arange(n)
    times[:, 1] = times[:, 0] + point.spin_ns + 100
    ctas = np.arange(n)
    info = np.stack([ctas % SM_COUNT if smids is None else smids, ctas // point.cluster_size,
                     ctas % point.cluster_size, ctas], axis=1).astype(np.uint32)
    return times.ravel().copy(), info.ravel().copy()


def test_cta_records_are_relative_to_the_first_start():
    point = LaunchPoint("cluster", 4, 264, 2, 8320, 20000, 128)
    frame = cta_records(*records(point), point, SM_COUNT)
    assert len(frame) == 264 and frame.start_ns.min() == 0 and (frame.end_ns - frame.start_ns >= 20000).all()
    assert list(frame.columns) == ["cta", "smid", "cluster_id", "cluster_rank", "start_ns", "end_ns"]


@pytest.mark.parametrize("spoil,message", [
    (lambda t, i: t.__setitem__(6, POISON_TIME), "1 CTAs wrote no record"),
    (lambda t, i: i.__setitem__(4 * 5 + 1, POISON_INFO), "1 CTAs wrote no record"),
    (lambda t, i: i.__setitem__(4 * 7, SM_COUNT), "not below the SM count"),
    (lambda t, i: i.__setitem__(4 * 7 + 1, 99), "%clusterid.x or %cluster_ctarank"),
    (lambda t, i: i.__setitem__(4 * 7 + 2, 0), "%clusterid.x or %cluster_ctarank"),
    (lambda t, i: t.__setitem__(2 * 9 + 1, t[2 * 9]), "less than spin_ns"),
])
def test_cta_records_reject_a_bad_record(spoil, message):
    point = LaunchPoint("cluster", 4, 264, 2, 8320, 20000, 128)
    times, info = records(point)
    spoil(times, info)
    with pytest.raises(timing.CorrectnessError, match=re.escape(message)):
        cta_records(times, info, point, SM_COUNT)


def test_a_plain_launch_has_rank_zero():
    point = LaunchPoint("no_cluster", 1, 132, 1, 0, 0, 128)
    times, info = records(point)
    assert len(cta_records(times, info, point, SM_COUNT)) == 132
    info[4 * 3 + 2] = 1
    with pytest.raises(timing.CorrectnessError, match="cluster-free launch"):
        cta_records(times, info, point, SM_COUNT)


# ---------------------------------------------------------------- pieces of the analysis

def test_start_waves_split_where_a_cta_started_after_a_whole_spin():
    assert agg.start_waves([0, 5, 10, 1000, 1005], 100) == 2
    assert agg.start_waves([0, 5, 99], 100) == 1
    assert np.isnan(agg.start_waves([0, 5], 0))


def test_max_concurrent_closes_before_it_opens():
    assert agg.max_concurrent([0, 10, 20], [10, 20, 30]) == 1
    assert agg.max_concurrent([0, 1, 2], [10, 10, 10]) == 3


def test_timer_step_and_hosted_histogram():
    assert agg.timer_step([0, 32, 64, 64, 160]) == 32
    assert np.isnan(agg.timer_step([5, 5]))
    assert agg.hosted_histogram(pd.Series([2, 2, 1, 3]), idle=4) == "0x4 1x1 2x2 3x1"


def test_gpc_groups_join_the_sms_of_each_cluster():
    rows = []
    for cluster, sms in enumerate([(0, 1), (1, 2), (5, 6), (9,)]):   # 9: a cluster of one SM (2 CTAs)
        for sm in sms if len(sms) > 1 else sms * 2:
            rows.append({"launch": "cluster", "cluster_size": 2, "grid_ctas": 8, "ctas_per_sm": 2,
                         "dynamic_shared_bytes": 0, "spin_ns": 0, "cluster_id": cluster, "smid": sm})
    rows.append({**rows[0], "launch": "no_cluster", "cluster_size": 1, "cluster_id": 50, "smid": 7})
    gpcs = agg.gpc_groups(pd.DataFrame(rows))
    assert list(gpcs.smids) == ["0 1 2", "5 6", "7", "9"] and list(gpcs.sm_count) == [3, 2, 1, 1]


# ---------------------------------------------------------------- synthetic GPU, end to end

def _gpc_of_sm():
    return np.repeat(np.arange(len(GPCS)), GPCS)


def _max_active(n: int, fit: int) -> int:
    return int(sum(fit * s // n for s in GPCS))


def _place(point: LaunchPoint, fit: int):
    """(smid, start_ns, end_ns) per CTA: clusters fill the GPCs in order (each CTA on the least
    loaded SM of its GPC); what does not fit at once starts when the first wave ends."""
    load = np.zeros(SM_COUNT, int)
    gpc_of = _gpc_of_sm()
    slots = {g: fit * s for g, s in enumerate(GPCS)}
    n = point.cluster_size
    smid, wave = np.zeros(point.grid_ctas, int), np.zeros(point.grid_ctas, int)
    for cluster in range(point.clusters):
        gpc = next((g for g in range(len(GPCS)) if slots[g] >= n), None)
        ctas = range(cluster * n, (cluster + 1) * n)
        if gpc is None:                      # a second wave, on the SMs the first cluster leaves
            wave[list(ctas)] = 1
            smid[list(ctas)] = smid[:n]
            continue
        slots[gpc] -= n
        for cta in ctas:
            sms = np.flatnonzero(gpc_of == gpc)
            sm = sms[np.argmin(load[sms])]
            load[sm] += 1
            smid[cta] = sm
    start = 7 * np.arange(point.grid_ctas) % 500 + wave * (point.spin_ns + 800)
    return smid, start, start + point.spin_ns + 50, int(wave.max()) + 1


def synthetic_raw(folder: Path, study_config: dict) -> Path:
    """launch.csv, ctas.csv, kernels.csv and provenance.json as measure.py writes them, from the
    placement model above (a cluster-free launch spreads CTAs round-robin over the SMs)."""
    folder.mkdir(parents=True, exist_ok=True)
    points = launch_points(study_config, SM_COUNT)
    launch_rows, cta_frames = [], []
    for p in points:
        fit = fits_per_sm(p.dynamic_shared_bytes, p.threads_per_cta)
        if p.launch == "cluster":
            resident = _max_active(p.cluster_size, fit)
            smid, start, end, waves = _place(p, fit)
        else:
            resident = SM_COUNT * fit
            smid = np.arange(p.grid_ctas) % SM_COUNT
            start = 7 * np.arange(p.grid_ctas) % 500
            end, waves = start + p.spin_ns + 50, 1
        extra = CLUSTER_US * (p.launch == "cluster") * (1 + p.cluster_size / 8)
        time_us = BASE_US + extra + waves * p.spin_ns / 1e3
        ctas = np.arange(p.grid_ctas)
        frame = pd.DataFrame({"cta": ctas, "smid": smid, "cluster_id": ctas // p.cluster_size,
                              "cluster_rank": ctas % p.cluster_size, "start_ns": start - start.min(),
                              "end_ns": end - start.min()})
        cta_frames.append(frame.assign(**{k: v for k, v in p.columns().items() if k in CTA_KEY}))
        hosted = frame.groupby("smid").size()
        launch_rows.append({**p.columns(), "max_active_clusters": resident, "max_resident_ctas": resident * p.cluster_size,
                            "all_resident": bool(p.clusters <= resident), "ctas_per_sm_fit": fit,
                            "sms_used": int(hosted.size), "max_ctas_on_one_sm": int(hosted.max()), **timed(time_us)})
    pd.DataFrame(launch_rows).to_csv(folder / "launch.csv", index=False)
    pd.concat(cta_frames, ignore_index=True)[[*CTA_KEY, "cta", "smid", "cluster_id", "cluster_rank", "start_ns",
                                              "end_ns"]].to_csv(folder / "ctas.csv", index=False)
    pd.DataFrame([{"kernel": "cluster_launch_record_placement", "registers": 20, "shared_bytes_static": 0,
                   "stack_frame_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0, "sass_instructions": 60,
                   "expected_sass": "CS2Rx3 S2Rx4"}]).to_csv(folder / "kernels.csv", index=False)
    (folder / "provenance.json").write_text(json.dumps(valid_provenance(
        "cluster_launch", len(points), config=study_config,
        gpu={"name": "synthetic test data", "sm_count": SM_COUNT})))
    return folder


@pytest.fixture
def analysed(tmp_path, study_config):
    raw = synthetic_raw(tmp_path / "raw", study_config)
    STUDY.entry("aggregate")(raw, tmp_path / "derived")
    return tmp_path


def test_aggregate_recovers_the_gpcs_and_the_occupancy_api(analysed):
    derived = analysed / "derived"
    gpcs = pd.read_csv(derived / "gpcs.csv")
    assert sorted(gpcs.sm_count) == sorted(GPCS) and gpcs.sm_count.sum() == SM_COUNT
    fit = pd.read_csv(derived / "cluster_fit.csv")
    assert fit.prediction_matches.all()
    one = fit[(fit.ctas_per_sm_fit == 1) & (fit.cluster_size == 16)].iloc[0]
    # GPCs of 18, 18, 18, 16, 16, 16, 16, 14 SMs hold 7 clusters of 16: 20 SMs idle
    assert one.predicted_max_clusters == 7 and one.observed_idle_sms == 20 and one.cta_slots_unusable == 20


def test_aggregate_times_each_cluster_launch_against_its_plain_launch(analysed):
    launch = pd.read_csv(analysed / "derived" / "launch.csv")
    assert set(STUDY.derived_files) == {p.name for p in (analysed / "derived").iterdir()}
    plain = launch[launch.launch == "no_cluster"]
    assert (plain.overhead_us == 0).all() and (plain.slowdown == 1).all()
    c8 = launch[(launch.launch == "cluster") & (launch.cluster_size == 8) & (launch.spin_ns == 0)
                & (launch.dynamic_shared_bytes == 98304)].iloc[0]
    assert c8.overhead_us == pytest.approx(2 * CLUSTER_US) and c8.no_cluster_time_us == pytest.approx(BASE_US)
    # clusters of 16 at one CTA per SM: 8 clusters in a grid of 128 CTAs, 7 fit: two waves
    c16 = launch[(launch.launch == "cluster") & (launch.cluster_size == 16) & (launch.ctas_per_sm_fit == 1)
                 & (launch.spin_ns == 200000)].iloc[0]
    assert c16.waves == 2 and not c16.all_resident and c16.late_ctas == 16
    resident = launch[(launch.launch == "cluster") & launch.all_resident & (launch.spin_ns > 0)]
    assert (resident.waves == 1).all()
    assert launch[launch.spin_ns == 0].waves.isna().all()


def test_placement_counts_idle_sms_and_stacked_ctas(analysed):
    placement = pd.read_csv(analysed / "derived" / "placement.csv")
    row = placement[(placement.launch == "cluster") & (placement.cluster_size == 8)
                    & (placement.dynamic_shared_bytes == 8320) & (placement.spin_ns == 200000)].iloc[0]
    assert row.sms_used + row.sms_idle == SM_COUNT and row.ctas == 264
    assert row.hosted_per_sm.split()[-1].startswith(f"{row.max_ctas_on_one_sm}x")
    assert row.cluster_start_spread_max_ns >= 0 and row.timer_step_ns > 0
    plain = placement[placement.launch == "no_cluster"]
    assert plain.cluster_start_spread_max_ns.isna().all() and (plain.clusters_sharing_an_sm == 0).all()


def test_tables_macros_figure_and_paper_section(analysed, monkeypatch):
    provenance = json.loads((analysed / "raw" / "provenance.json").read_text())
    tables = analysed / "tables"
    write_tables(analysed / "derived", provenance, tables)
    for name in STUDY.tables:
        assert "synthetic test data" in (tables / f"{name}.tex").read_text()
    cost = (tables / "cluster_launch_cost.md").read_text()
    assert "2/SM, 64.1 KiB (3 fit)" in cost and "200 us spin x" in cost
    found = macros(analysed / "derived", provenance)
    from tma_study.paper.macros import check_macros
    check_macros(found, "cluster_launch", prefix="clusterLaunch")
    section = (REPO / "paper" / "sections" / "studies" / "cluster_launch.tex").read_text()
    used = set(re.findall(r"\\(clusterLaunch[A-Za-z]+)", section))
    assert used and used <= set(found), sorted(used - set(found))
    drawn = []
    monkeypatch.setattr(figures, "finish", lambda fig, provenance, pdf, **layout: drawn.append(fig))
    snakemake = SimpleNamespace(params=SimpleNamespace(derived=str(analysed / "derived")),
                                input=SimpleNamespace(provenance=str(analysed / "raw" / "provenance.json")),
                                output=SimpleNamespace(pdf=str(analysed / "cluster_launch_cost.pdf")))
    runpy.run_path(str(REPO / "notebooks" / "cluster_launch_cost.py"), init_globals={"snakemake": snakemake})
    (fig,) = drawn
    assert len(fig.axes) == 3 and all(ax.lines for ax in fig.axes)


def test_every_draft_claim_evaluates_on_synthetic_data(analysed, tmp_path):
    """Each claim reads columns that exist (PASS or FAIL, never NOT MEASURED) once data exist."""
    from tma_study.paper.claims import evaluate, load_claims
    results = tmp_path / "results"
    (results / "cluster_launch").mkdir(parents=True)
    (results / "cluster_launch" / "derived").symlink_to(analysed / "derived")
    claims = [c for c in load_claims(studies=discover()) if c.study == "cluster_launch"]
    assert claims
    for claim in claims:
        outcome = evaluate(claim, results)
        assert outcome.status in ("PASS", "FAIL"), (claim.id, outcome.reason)
