"""What the gemm_cluster_counters study profiles (pure; no GPU): the gemm_cluster variants of its
config, each at the best tile order the gemm_cluster run ``orders_from`` found for it at ``size``
and at CUTLASS's default order.

The variants are the gemm study's objects (as gemm_cluster's), so the config is checked as
gemm_cluster's is (``gemm_lib.cluster_configs.problems``, with this study's key in the messages); the
tile orders are data: ``results/<orders_from>/gemm_cluster/samples.csv``, read by ``profiled`` and
checked before any GPU work (``check_config`` at a measure run's start).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tma_study.config import REPO_ROOT
from tma_study.gemm_lib import build as gemm_build
from tma_study.gemm_lib import cluster_configs as cluster_configs
from tma_study.gemm_lib.cluster_configs import ARCH, DEFAULT_ORDER
from tma_study.gemm_lib.cluster_gains import configurations

KEY = "studies.gemm_cluster_counters"
LIBRARY_NAME = "libgemm_cluster_counters_{arch}.so"
ORDERS = ("best", "default")          # which tile order of a variant a row profiles


@dataclass(frozen=True)
class Profiled:
    """One variant at one tile order: one launch under ncu."""

    variant: str
    dtype: str
    order: str                        # "best" (of the orders run) or "default" (swizzle 1, heuristic)
    swizzle: int
    raster_order: str

    @property
    def key(self) -> str:
        return f"{self.variant}/{self.order}/swizzle{self.swizzle}/{self.raster_order}"


def _as_cluster_study(study: dict) -> dict:
    """This study's config as gemm_cluster's checks read one (the default tile order only)."""
    return {**study, "swizzles": [DEFAULT_ORDER[0]], "raster_orders": [DEFAULT_ORDER[1]]}


def problems(study: dict, gemm_study: dict | None = None) -> list[str]:
    """gemm_cluster's checks of the families, clusters and dtypes, naming this study's keys."""
    return cluster_configs.problems(_as_cluster_study(study), gemm_study, key=KEY)


def variants(study: dict) -> list:
    """Every variant profiled (families x clusters x dtypes, in config order); ValueError naming the key."""
    messages = problems(study)
    if messages:
        raise ValueError("gemm_cluster_counters: " + "; ".join(messages))
    return [cluster_configs.variant_of(f, d, c) for d in study["dtypes"] for f in study["families"]
            for c in study["clusters"]]


def orders_file(study: dict, root: Path = REPO_ROOT) -> Path:
    return Path(root) / "results" / study["orders_from"] / "gemm_cluster" / "samples.csv"


def profiled(study: dict, samples: pd.DataFrame) -> list[Profiled]:
    """Each variant at its best tile order in ``samples`` (gemm_cluster's samples.csv) at ``size``,
    then at the default order; ValueError naming the key when the samples lack a variant or size."""
    size = int(study["size"])
    at_size = samples[samples["size"] == size]
    if at_size.empty:
        raise ValueError(f"config key '{KEY}.size': {size} is not a size of {orders_file(study)} "
                         f"(it has {sorted(int(s) for s in samples['size'].unique())})")
    chosen = variants(study)
    missing = sorted({v.name for v in chosen} - set(at_size.variant))
    if missing:
        raise ValueError(f"config key '{KEY}.orders_from': {orders_file(study)} has no samples of "
                         f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} at {size}")
    configs = configurations(at_size[at_size.variant.isin([v.name for v in chosen])])
    best = configs[configs.is_best_order].set_index("variant")
    out = []
    for order in ORDERS:
        for v in chosen:
            swizzle, raster = ((int(best.loc[v.name, "swizzle"]), best.loc[v.name, "raster_order"])
                               if order == "best" else DEFAULT_ORDER)
            out.append(Profiled(v.name, v.dtype, order, swizzle, raster))
    return out


def check_config(study: dict, expand: bool = False, config: dict | None = None) -> list[str]:
    """The config validation's check: the variants as gemm_cluster checks its own (against
    studies.gemm in a measure run that selects this study) and, at that run's start, that the
    orders run's samples are there."""
    config = config or {}
    studies = config.get("studies") if isinstance(config.get("studies"), dict) else {}
    selected = expand and "gemm_cluster_counters" in (config.get("run_studies") or list(studies))
    gemm_study = studies.get("gemm") if selected and isinstance(studies.get("gemm"), dict) else None
    out = problems(study, gemm_study if gemm_study and "variants" in gemm_study else None)
    if selected and not orders_file(study).is_file():
        out.append(f"config key '{KEY}.orders_from': {orders_file(study)} does not exist: the tile orders come "
                   "from a gemm_cluster run of that label (measure it first, or name a label that has one)")
    return out


def compile_inputs(study: dict) -> list[str]:
    """The gemm study's object and report of every variant (paths relative to the checkout)."""
    return gemm_build.object_inputs(variants(study))


def library_path(out_dir: Path, arch: str = ARCH) -> Path:
    return Path(out_dir) / LIBRARY_NAME.format(arch=arch)


def compile_step(study, study_config: dict, out_dir: Path, workers: int = 1) -> None:
    """resources.csv of the variants' reports and the library of their objects in ``out_dir``."""
    gemm_build.link_study_library("gemm_cluster_counters", compile_inputs(study_config), out_dir,
                                  library_path(out_dir))
