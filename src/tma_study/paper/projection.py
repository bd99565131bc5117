"""A model-based projection of the measured H200 crossovers to another GPU (the B200), from
published specifications (``config/gpu_specs.yaml``), labelled as a projection everywhere.

The model, stated once so the paper can quote it:

- Bytes in flight. By Little's law an SM must keep (its share of the memory bandwidth) x (the
  load latency) bytes in flight to stream at the bandwidth. With the latency unchanged, the ring
  TMA needs per SM for its peak scales with the bandwidth per SM.
- Crossover size. Below the crossover, TMA's fixed cost per transfer (one issue, one mbarrier
  transaction) limits the rate; the transfer size at which that cost is hidden scales with the
  bytes each SM must move per unit time, again the bandwidth per SM.
- Decode stays memory-bound while its flops per K/V byte stay below the ridge point (dense
  tensor rate over bandwidth), which moves with the two published rates.
- GEMM mainloops: the tensor rate per SM sets how fast a mainloop must deliver operands; where
  it grows, so does the issue load of a cp.async producer, whose threads issue every 16 bytes.

Every output is a ratio of published numbers applied to a measured H200 value; nothing here
was measured on the target GPU, and the SM100 claims stay NOT MEASURED until a run on one.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import yaml

from tma_study.config import REPO_ROOT
from tma_study.report.tables import human_bytes

SPECS = REPO_ROOT / "config" / "gpu_specs.yaml"
FIELDS = ("sm_count", "hbm_tb_per_s", "bf16_dense_tflops", "fp8_dense_tflops", "shared_memory_per_sm_kib")


class ProjectionError(ValueError):
    """The specifications file is unusable; the message names the GPU and key."""


def load_specs(path: Path = SPECS) -> dict[str, dict]:
    gpus = yaml.safe_load(Path(path).read_text()).get("gpus", {})
    for key, spec in gpus.items():
        missing = [f for f in (*FIELDS, "name", "source") if f not in spec]
        if missing:
            raise ProjectionError(f"{path}: gpu {key!r} lacks {', '.join(missing)}")
    return gpus


PROJECTED = ("h200", "b200")     # (measured source, projected target): the table shows these two
HOPPER_OTHER = "h100-80gb-hbm3"  # the H100 SXM, the measured H200's chip with other memory (its column first)


def spec_key(device_name: str | None, specs: dict[str, dict], default: str = "h200") -> str:
    """The gpu_specs.yaml entry of the GPU a provenance names: the one listing that name among its
    ``device_names`` (or a name it starts with, e.g. 'NVIDIA H200 (synthetic test data)'), else
    ``default``."""
    name = str(device_name or "")
    for key, spec in specs.items():
        if any(name == known or name.startswith(f"{known} ") for known in spec.get("device_names", ())):
            return key
    return default


def _power_of_two_at_least(n_bytes: float) -> int:
    return 1 << math.ceil(math.log2(n_bytes))


def project(specs: dict[str, dict], crossover_derived: Path, source: str = "h200", target: str = "b200") -> dict:
    """The projected quantities (numbers), from the measured crossover data of ``source``."""
    a, b = specs[source], specs[target]
    per_sm = (b["hbm_tb_per_s"] / b["sm_count"]) / (a["hbm_tb_per_s"] / a["sm_count"])
    peaks = pd.read_csv(Path(crossover_derived) / "peaks.csv")
    crossover = pd.read_csv(Path(crossover_derived) / "crossover.csv")
    tma = peaks[(peaks.working_set == "hbm") & (peaks.mechanism == "tma_tile")].iloc[0]
    hbm = crossover[(crossover.working_set == "hbm") & (crossover.ring_bytes_per_sm == 0)
                    & (crossover.alternative == "cp_async")].iloc[0]
    ring = tma.best_ring_bytes_per_sm * per_sm
    size = hbm.crossover_bytes * per_sm
    return {"bandwidth_ratio": b["hbm_tb_per_s"] / a["hbm_tb_per_s"], "sm_ratio": b["sm_count"] / a["sm_count"],
            "bandwidth_per_sm_ratio": per_sm,
            "tensor_per_sm_ratio": (b["bf16_dense_tflops"] / b["sm_count"]) / (a["bf16_dense_tflops"] / a["sm_count"]),
            "ridge_source": a["bf16_dense_tflops"] / a["hbm_tb_per_s"],
            "ridge_target": b["bf16_dense_tflops"] / b["hbm_tb_per_s"],
            "ring_measured_bytes": float(tma.best_ring_bytes_per_sm), "ring_projected_bytes": ring,
            "ring_fraction_of_shared": ring / (1024 * b["shared_memory_per_sm_kib"]),
            "crossover_measured_bytes": float(hbm.crossover_bytes), "crossover_projected_bytes": size,
            "crossover_projected_grid_bytes": float(_power_of_two_at_least(size))}


def macros(specs: dict[str, dict], crossover_derived: Path) -> dict[str, str]:
    """``\\projection...`` macros for the paper's generality section."""
    p = project(specs, crossover_derived)
    b = specs["b200"]
    return {"projectionTargetName": b["name"], "projectionTargetSms": str(b["sm_count"]),
            "projectionTargetTbps": f"{b['hbm_tb_per_s']:.1f}", "projectionSourceTbps": f"{specs['h200']['hbm_tb_per_s']:.1f}",
            "projectionTargetBfTflops": str(b["bf16_dense_tflops"]),
            "projectionSourceBfTflops": str(specs["h200"]["bf16_dense_tflops"]),
            "projectionBandwidthRatio": f"{p['bandwidth_ratio']:.2f}", "projectionSmRatio": f"{p['sm_ratio']:.2f}",
            "projectionBandwidthPerSmRatio": f"{p['bandwidth_per_sm_ratio']:.2f}",
            "projectionTensorPerSmRatio": f"{p['tensor_per_sm_ratio']:.2f}",
            "projectionRidgeSource": f"{p['ridge_source']:.0f}", "projectionRidgeTarget": f"{p['ridge_target']:.0f}",
            "projectionRingMeasured": human_bytes(p["ring_measured_bytes"]),
            "projectionRingProjectedKib": f"{p['ring_projected_bytes'] / 1024:.0f}",
            "projectionRingPercentShared": f"{100 * p['ring_fraction_of_shared']:.0f}",
            "projectionCrossoverMeasured": human_bytes(p["crossover_measured_bytes"]),
            "projectionCrossoverProjectedBytes": f"{p['crossover_projected_bytes']:.0f}",
            "projectionCrossoverGrid": human_bytes(p["crossover_projected_grid_bytes"])}


def table(specs: dict[str, dict]) -> pd.DataFrame:
    """The published numbers the paper uses, one column per GPU (named by its key's first part: H100, H200, B200)."""
    rows = [("SMs", "sm_count", "{:.0f}"), ("HBM (TB/s)", "hbm_tb_per_s", "{:g}"), ("HBM (GB)", "hbm_gb", "{:.0f}"),
            ("dense BF16 (TFLOP/s)", "bf16_dense_tflops", "{:.0f}"), ("dense FP8 (TFLOP/s)", "fp8_dense_tflops", "{:.0f}"),
            ("shared memory per SM (KiB)", "shared_memory_per_sm_kib", "{:.0f}")]
    frame = pd.DataFrame({"published": [label for label, _, _ in rows]})
    for key, spec in specs.items():
        frame[key.split("-")[0].upper()] = [fmt.format(spec[field]) if field in spec else "--" for _, field, fmt in rows]
    return frame


def hopper_macros(specs: dict[str, dict], crossover_derived: Path, measured: str = "h200",
                  other: str = HOPPER_OTHER) -> dict[str, str]:
    """``\\projectionHOneHundred...``: the H100 beside the measured H200 (the same chip, SMs and tensor
    rates, other memory), and what Little's law makes of the measured ring and crossover there."""
    if other not in specs or "hbm_gb" not in specs[other]:
        return {}
    p = project(specs, crossover_derived, source=measured, target=other)
    a, b = specs[measured], specs[other]
    return {"projectionHOneHundredName": b["name"], "projectionHOneHundredTbps": f"{b['hbm_tb_per_s']:g}",
            "projectionHOneHundredGb": f"{b['hbm_gb']:.0f}", "projectionSourceGb": f"{a['hbm_gb']:.0f}",
            "projectionHOneHundredLtwoMb": f"{b['l2_mb']:.0f}",
            "projectionSourceOverHOneHundredBandwidth": f"{1 / p['bandwidth_ratio']:.2f}",
            "projectionHOneHundredRingKib": f"{p['ring_projected_bytes'] / 1024:.0f}",
            "projectionHOneHundredCrossoverGrid": human_bytes(p["crossover_projected_grid_bytes"])}
