"""Small synthetic derived data of the multicast and dsm studies for several runs, laid out
as results/<label>/<study>/{provenance.json, derived/} under a temporary folder, for the
comparison and overlay tests. Each run is built from a few numbers through the studies' own
aggregation, so the derived files have exactly the columns the pipeline writes. Also: a figure
notebook run as Snakemake would, and what it drew in another run's style."""
from __future__ import annotations

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import matplotlib.legend
import pandas as pd

from raw_fixture import valid_provenance
from tma_study.harness import l2_state
from tma_study.report import figures
from tma_study.studies.dsm import aggregate as dsm_aggregate
from tma_study.studies.multicast import aggregate as mc_aggregate

REPO = Path(__file__).resolve().parents[3]
TILES = (4096, 65536)


def _provenance(folder: Path, gpu: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record = valid_provenance(folder.name, 1, gpu={"name": gpu},
                              l2_before_each_sample=l2_state.DESCRIPTIONS["clean"])
    (folder / "provenance.json").write_text(json.dumps(record))


def multicast_run(root: Path, label: str, multicast_us: dict, gpu: str = "synthetic GPU") -> Path:
    """results/<label>/multicast/ where the own-copy variants take 100 us (110 us under a
    cluster launch) at every tile and shape, and multicast takes multicast_us[tile]; shapes:
    1-D 1x4 and 2-D 2x2 (the 2-D pattern at the larger tile only), baseline 1x1 at 50 us."""
    rows = []

    def add(pattern, x, y, variant, tile, time_us):
        rows.append({"pattern": pattern, "working_set": "hbm", "cluster_x": x, "cluster_y": y, "variant": variant,
                     "tile_bytes": tile, "stages": 4, "ctas_per_sm": 1, "consumer_threads": 256, "release": "warp",
                     "grid_ctas": 132, "clusters": 33, "max_active_clusters": 40, "busy_cta_share": 1.0,
                     "steps_total": 10, "stage_bytes": tile, "bytes_delivered": 1e9, "bytes_requested": 1e9,
                     "time_us_median": time_us, "time_us_iqr": 0.001 * time_us,
                     "delivered_gbps": 1e9 / (time_us * 1e3), "requested_gbps": 1.0, "sm_clock_mhz_mean": 1980.0})

    for pattern, x, y, tiles in (("1d", 1, 4, TILES), ("2d", 2, 2, TILES[-1:])):
        for tile in tiles:
            add(pattern, 1, 1, "no_cluster", tile, 50.0)
            add(pattern, x, y, "no_cluster", tile, 100.0)
            add(pattern, x, y, "cluster", tile, 110.0)
            add(pattern, x, y, "multicast", tile, multicast_us[tile])
    folder = root / label / "multicast"
    _provenance(folder, gpu)
    derived = folder / "derived"
    derived.mkdir()
    best = mc_aggregate.best_configurations(pd.DataFrame(rows))
    speedup = mc_aggregate.speedups(best)
    best.to_csv(derived / "best.csv", index=False)
    speedup.to_csv(derived / "speedup.csv", index=False)
    mc_aggregate.break_even(speedup).to_csv(derived / "break_even.csv", index=False)
    mc_aggregate.scheduling(speedup).to_csv(derived / "scheduling.csv", index=False)
    return derived


def dsm_run(root: Path, label: str, broadcast_us: dict, remote_cycles: float = 200.0,
            remote_gbps: float = 3000.0, gpu: str = "synthetic GPU") -> Path:
    """results/<label>/dsm/ for clusters of 2 and 4 at one 16 KiB tile, each variant's time
    broadcast_us[variant]; latency and bandwidth primitives from the two numbers given."""
    rows = [{"working_set": "hbm", "cluster_size": n, "variant": variant, "tile_bytes": 16384, "stages": 2,
             "ctas_per_sm": 1, "consumer_threads": 256, "grid_ctas": 132, "clusters": 132 // n,
             "max_active_clusters": 40, "busy_cta_share": 1.0, "steps_total": 10, "bytes_delivered": 1e9,
             "time_us_median": time_us, "time_us_iqr": 0.1, "gbps": 1e9 / (time_us * 1e3), "sm_clock_mhz_mean": 1980.0}
            for n in (2, 4) for variant, time_us in broadcast_us.items()]
    folder = root / label / "dsm"
    _provenance(folder, gpu)
    derived = folder / "derived"
    derived.mkdir()
    best = dsm_aggregate.best_configurations(pd.DataFrame(rows))
    best.to_csv(derived / "best.csv", index=False)
    dsm_aggregate.winners(best).to_csv(derived / "winners.csv", index=False)
    latency = pd.DataFrame([{"cluster_size": n, "target": target, "path": path, "cycles_per_hop_median": cycles}
                            for n in (2, 4)
                            for target, path, cycles in (("local_lds", "ld.shared", 34.0), ("0", "ld.shared::cluster", 43.0),
                                                         ("1", "ld.shared::cluster", remote_cycles),
                                                         (str(n - 1), "ld.shared::cluster", remote_cycles))])
    latency = dsm_aggregate.latency_table(latency.drop_duplicates(["cluster_size", "target"]), 1980.0)
    latency.to_csv(derived / "latency.csv", index=False)
    bandwidth = pd.DataFrame([{"path": path, "cluster_size": n, "ctas_per_sm": 2, "threads_per_cta": 1024,
                               "grid_ctas": 264, "busy_sms": 132, "busy_cta_share": 1.0, "time_us_median": 1000.0,
                               "relative_iqr": 0.001, "gbps": gbps, "gbps_per_busy_sm": gbps / 132,
                               "bytes_per_sm_cycle": gbps / 132 * 1e3 / 1980.0, "sm_clock_mhz_mean": 1980.0}
                              for path, n, gbps in (("local", 1, 21000.0), ("remote", 2, remote_gbps),
                                                    ("remote", 4, remote_gbps))])
    bandwidth.to_csv(derived / "bandwidth.csv", index=False)
    return derived


# ---------------------------------------------------------------- overlays on the figures

def render(monkeypatch, name: str, derived: Path, others: list[Path]):
    """Run notebooks/<name>.py as Snakemake would (``others``: other runs' derived folders)."""
    drawn = []
    lay_out = figures.finish
    monkeypatch.setattr(figures, "finish", lambda fig, provenance, pdf, **layout: (
        lay_out(fig, provenance, None, **layout), drawn.append(fig)))
    snakemake = SimpleNamespace(
        params=SimpleNamespace(derived=str(derived)),
        input=SimpleNamespace(provenance=str(derived.parent / "provenance.json"),
                              others=[str(f) for folder in others for f in sorted(folder.glob("*.csv"))]),
        output=SimpleNamespace(pdf=str(derived.parent / f"{name}.pdf")))
    runpy.run_path(str(REPO / "notebooks" / f"{name}.py"), init_globals={"snakemake": snakemake})
    (fig,) = drawn
    fig.canvas.draw()
    return fig


def overlaid(fig) -> int:
    """Artists drawn in another run's style: thin translucent lines or black-edged run markers."""
    count = 0
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_alpha() == figures.OVERLAY["alpha"] or line.get_marker() in figures.RUN_MARKERS:
                count += 1
    return count


def run_legends(fig) -> list[str]:
    """The entries of the legends naming the runs (titled 'runs', in a panel or under the panels)."""
    legends = [legend for ax in fig.axes for legend in ax.findobj(matplotlib.legend.Legend)] + list(fig.legends)
    return [text.get_text() for legend in legends
            if legend.get_title().get_text().startswith("runs") for text in legend.get_texts()]
