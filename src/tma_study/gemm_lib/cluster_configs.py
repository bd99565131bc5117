"""What the gemm_cluster study times: its GEMM variants and their tile orders (pure; no GPU).

A *family* is an SM90 TMA (mainloop, tile) pair of the gemm study; each family is built at every
configured cluster shape (1x1 included: every gain is over it) and input type, with the gemm
study's variant names (gemm.variants). A *configuration* is a variant at one tile order of the
persistent tile scheduler: ``max_swizzle_size`` (a swizzle) and ``raster_order`` (gemm.abi's
RASTER_ORDERS). Swizzle 1 with the heuristic raster order is CUTLASS's default, the order the gemm
study timed every variant in (DEFAULT_ORDER).

The variants are the gemm study's objects, so a run that builds them may name only what
studies.gemm builds: ``check_config`` (run by the config validation with the whole config) says
which key asks for a variant it does not, in a measure run that selects this study (a run that
only narrows studies.gemm, e.g. to build fewer variants, or analyses committed data, builds none
of these variants and is not refused), and ``variants`` raises ValueError with the same words.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from tma_study.gemm_lib import variants as gemm_variants
from tma_study.gemm_lib.abi import RASTER_ORDERS, SWIZZLES

ARCH = "sm90"
KEY = "studies.gemm_cluster"
ONE_BY_ONE = (1, 1)
DEFAULT_ORDER = (1, "heuristic")              # CUTLASS's defaults: gemm_abi.cuh's NAME_run
TMA_MAINLOOPS = tuple(m for m, (_, load, _) in gemm_variants.MAINLOOPS[ARCH].items() if load == "tma")

assert set(SWIZZLES) == {1, 2, 4, 8} and "heuristic" in RASTER_ORDERS


@dataclass(frozen=True)
class Configuration:
    """One variant at one tile order: what a sample times."""

    variant: str
    swizzle: int
    raster_order: str

    @property
    def key(self) -> str:
        """The configuration's launcher key, e.g. 'sm90_..._c2x1/swizzle4/heuristic'."""
        return f"{self.variant}/swizzle{self.swizzle}/{self.raster_order}"

    @property
    def is_default_order(self) -> bool:
        return (self.swizzle, self.raster_order) == DEFAULT_ORDER


def family_name(mainloop: str, tile) -> str:
    """'tma_cooperative_t128x256x64' (the variant's name without arch, dtype and cluster)."""
    return f"{mainloop}_t{'x'.join(str(int(t)) for t in tile)}"


def variant_of(family: dict, dtype: str, cluster) -> gemm_variants.Variant:
    return gemm_variants.Variant(ARCH, family["mainloop"], dtype, *map(int, family["tile"]), *map(int, cluster))


def problems(study: dict, gemm_study: dict | None, key: str = KEY) -> list[str]:
    """Messages naming each key of ``study`` that asks for something this study cannot time:
    no 1x1 cluster, no default tile order, a family that is not SM90 TMA, and (with the gemm
    section) any variant the gemm study does not build. ``key``: the config section the messages name (another
    study that profiles these variants names its own)."""
    out = []
    clusters = [tuple(c) for c in study["clusters"]]
    if ONE_BY_ONE not in clusters:
        out.append(f"config key '{key}.clusters': must include [1, 1]: every cluster variant is compared with its "
                   "1x1 sibling")
    if DEFAULT_ORDER[0] not in study["swizzles"]:
        out.append(f"config key '{key}.swizzles': must include 1 (CUTLASS's default, the gemm study's tile order)")
    if DEFAULT_ORDER[1] not in study["raster_orders"]:
        out.append(f"config key '{key}.raster_orders': must include heuristic (CUTLASS's default, the gemm study's "
                   "tile order)")
    for i, family in enumerate(study["families"]):
        if family["mainloop"] not in TMA_MAINLOOPS:
            out.append(f"config key '{key}.families[{i}].mainloop': {family['mainloop']!r} is not an SM90 TMA mainloop; "
                       f"choose among {', '.join(TMA_MAINLOOPS)}")
            continue
        reasons = {gemm_variants.why_not_built(variant_of(family, d, c)) for d in study["dtypes"] for c in clusters}
        reasons.discard(None)
        if reasons:
            out.append(f"config key '{key}.families[{i}]': {family_name(family['mainloop'], family['tile'])} is not "
                       f"built: {'; '.join(sorted(reasons))}")
    if gemm_study is None or out:
        return out
    built = {v.name for v in gemm_variants.variants(gemm_study, ARCH)}
    gemm = gemm_study["variants"].get(ARCH, {})
    for j, cluster in enumerate(study["clusters"]):
        if list(cluster) not in [list(c) for c in gemm.get("clusters", [])]:
            out.append(f"config key '{key}.clusters[{j}]': {list(cluster)} is not a cluster of studies.gemm.variants."
                       f"{ARCH}.clusters {gemm.get('clusters', [])}: the gemm study builds no such object")
    for k, dtype in enumerate(study["dtypes"]):
        if dtype not in gemm.get("dtypes", []):
            out.append(f"config key '{key}.dtypes[{k}]': {dtype} is not among studies.gemm.variants.{ARCH}.dtypes "
                       f"{gemm.get('dtypes', [])}")
    if out:
        return out
    for i, family in enumerate(study["families"]):
        missing = sorted(v.name for d in study["dtypes"] for c in clusters
                         if (v := variant_of(family, d, c)).name not in built)
        if missing:
            out.append(f"config key '{key}.families[{i}]': the gemm study does not build "
                       f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} (studies.gemm.variants.{ARCH}: "
                       "mainloops and tiles)")
    return out


def check_config(study: dict, expand: bool = False, config: dict | None = None) -> list[str]:
    """The config validation's check (tma_study.config.validate; ``config``: the whole config,
    ``expand``: a measure run's start). The variants are checked against studies.gemm in a measure
    run that selects this study; otherwise, and without a gemm section (a config of this study
    alone, as the compile and measure steps get it), against nothing but themselves."""
    config = config or {}
    studies = config.get("studies") if isinstance(config.get("studies"), dict) else {}
    selected = config.get("run_studies") or list(studies)
    gemm_study = studies.get("gemm")
    checked = expand and "gemm_cluster" in selected and isinstance(gemm_study, dict) and "variants" in gemm_study
    return problems(study, gemm_study if checked else None)


def variants(study: dict, dtype: str | None = None, gemm_study: dict | None = None) -> list[gemm_variants.Variant]:
    """Every variant the config times (families x clusters x dtypes, in config order), or those
    of one dtype; ValueError naming the key when one cannot be timed (see ``problems``)."""
    messages = problems(study, gemm_study)
    if messages:
        raise ValueError("gemm_cluster: " + "; ".join(messages))
    dtypes = [dtype] if dtype else study["dtypes"]
    return [variant_of(f, d, c) for d in dtypes for f in study["families"] for c in study["clusters"]]


def configurations(study: dict, dtype: str) -> list[Configuration]:
    """Every (variant, swizzle, raster order) of one dtype, in config order."""
    return [Configuration(v.name, int(s), r) for v, s, r in
            itertools.product(variants(study, dtype), study["swizzles"], study["raster_orders"])]
