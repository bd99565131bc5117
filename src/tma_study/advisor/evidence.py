"""The measured tables the advisor predicts from: the microbenchmark studies of one results label.

The advisor reads only the microbenchmarks' derived tables (``results/<label>/<study>/derived/``),
never a workload study's, so every workload (paged-KV attention, the CUTLASS GEMMs, the Triton
kernels of the held-out study) is held out from it:

- ``crossover/derived/best.csv``: each mechanism's best GB/s by level, transfer size and ring
  (bytes in flight per SM); ``latency_chain.csv``: cycles per dependent transfer;
- ``multicast/derived/speedup.csv``: TMA multicast against own copies by level, cluster and tile;
- ``dsm/derived/winners.csv``: multicast against a DSM pull and push by level, cluster and tile.

An :class:`Evidence` is one set of those tables. :func:`load` gives the label's own set and one
variant for each other run of a study's sweep on the same GPU model (another instance), with
that study's tables swapped in: the spread of a prediction over the variants is its interval.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
import yaml

from tma_study.config import REPO_ROOT
from tma_study.harness.runs import same_sweep_runs

GPU_SPECS = REPO_ROOT / "config" / "gpu_specs.yaml"
TABLES = {   # (study, derived file): the columns the rules read
    ("crossover", "best.csv"): ("working_set", "mechanism", "bytes_per_transfer", "ring_bytes_per_sm", "gbps"),
    ("crossover", "latency_chain.csv"): ("chain", "mechanism", "bytes_per_transfer", "level",
                                         "cycles_per_transfer_median"),
    ("multicast", "speedup.csv"): ("pattern", "working_set", "cluster_x", "cluster_y", "tile_bytes",
                                   "speedup_over_no_cluster"),
    ("dsm", "winners.csv"): ("working_set", "cluster_size", "tile_bytes", "multicast_gbps", "dsm_pull_gbps",
                             "dsm_push_gbps"),
}
STUDIES = tuple(sorted({study for study, _ in TABLES}))


class EvidenceError(ValueError):
    """The results folder lacks a table the advisor needs: the message names the file."""


@dataclass(frozen=True)
class Evidence:
    label: str                                   # results/<label>/ of the reference tables
    tables: dict = field(repr=False)             # (study, file) -> DataFrame
    runs: dict = field(default_factory=dict)     # study -> the results label its tables came from
    gpu: dict = field(default_factory=dict)      # provenance's gpu record (name, sm_count, slug, ...)
    tensor_tflops: dict = field(default_factory=dict)   # mma dtype -> dense TFLOP/s (gpu_specs.yaml)

    def table(self, study: str, name: str) -> pd.DataFrame:
        return self.tables[(study, name)]

    @property
    def cuda_core_tflops(self) -> float:
        """FP32 FMA peak of the CUDA cores: SMs x 128 lanes x 2 FLOP x the maximum SM clock."""
        return self.gpu["sm_count"] * 128 * 2 * self.gpu["max_sm_clock_khz"] * 1e3 / 1e12


def _read(study_dir: Path, name: str, columns: tuple) -> pd.DataFrame:
    path = study_dir / "derived" / name
    if not path.is_file():
        raise EvidenceError(f"{path}: missing; the advisor needs the {study_dir.name} study's derived tables "
                            f"(make them with: snakemake -c2 {path})")
    frame = pd.read_csv(path)
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise EvidenceError(f"{path}: lacks column(s) {', '.join(absent)}")
    return frame


def _gpu(results_dir: Path) -> dict:
    path = results_dir / "crossover" / "provenance.json"
    if not path.is_file():
        raise EvidenceError(f"{path}: missing; the advisor needs the crossover run's GPU record")
    return json.loads(path.read_text())["gpu"]


def tensor_rates(gpu: dict, specs_path: Path = GPU_SPECS) -> dict:
    """mma dtype -> published dense tensor TFLOP/s of ``gpu`` (gpu_specs.yaml's entry keyed by its
    slug, or named as the GPU is, less a parenthesis), or {} when unlisted."""
    specs = (yaml.safe_load(Path(specs_path).read_text()) or {}).get("gpus", {})
    spec = specs.get(gpu.get("slug", "")) or next(
        (s for s in specs.values() if str(s.get("name", "")).split(" (")[0] == gpu.get("name")), None)
    if spec is None:
        return {}
    bf16 = float(spec["bf16_dense_tflops"])
    return {"bf16": bf16, "fp16": bf16, "tf32": bf16 / 2, "fp8": float(spec["fp8_dense_tflops"])}


def load_run(results_dir: Path, studies: dict | None = None) -> Evidence:
    """The tables of results/<label>/ (``studies``: study -> another run's folder to take instead)."""
    results_dir = Path(results_dir)
    studies = studies or {}
    tables, runs = {}, {}
    for (study, name), columns in TABLES.items():
        folder = Path(studies.get(study, results_dir / study))
        tables[(study, name)] = _read(folder, name, columns)
        runs[study] = folder.parent.name
    gpu = _gpu(results_dir)
    return Evidence(results_dir.name, tables, runs, gpu, tensor_rates(gpu))


def load(results_dir: Path) -> list[Evidence]:
    """The label's own evidence first, then one variant per other run of each study's sweep on the
    same GPU model (tma_study.harness.runs.same_sweep_runs), that study's tables swapped in."""
    reference = load_run(results_dir)
    variants = [reference]
    for study in STUDIES:
        for other in same_sweep_runs(Path(results_dir) / study):
            if all((other / "derived" / name).is_file() for s, name in TABLES if s == study):
                swapped = {(s, name): _read(other, name, columns) for (s, name), columns in TABLES.items() if s == study}
                variants.append(replace(reference, tables={**reference.tables, **swapped},
                                        runs={**reference.runs, study: other.parent.name}))
    return variants
