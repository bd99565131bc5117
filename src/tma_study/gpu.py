"""Which GPU is here, and can it run the measure tier?

Everything here is read through the CUDA driver API (cuda-bindings); nothing changes the
GPU's settings. On a machine without a driver or GPU, ``detect()`` returns ``None``.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

HOPPER_MAJOR = 9
REQUIREMENT = ("the measure tier needs an NVIDIA Hopper GPU (compute capability 9.0, e.g. H100 "
               "or H200) with a CUDA 13 driver (>= 580)")


class GpuRequirementError(RuntimeError):
    """Raised before any measurement when this machine cannot measure."""


@dataclass(frozen=True)
class GpuInfo:
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    l2_bytes: int
    smem_per_block_optin_bytes: int
    smem_per_sm_bytes: int
    max_sm_clock_khz: int
    memory_clock_khz: int
    memory_bus_bits: int
    total_memory_bytes: int
    driver_version: int

    @property
    def slug(self) -> str:
        return gpu_slug(self.name)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["slug"] = self.slug
        return d


def gpu_slug(name: str) -> str:
    """'NVIDIA H200' -> 'h200', 'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3'."""
    name = re.sub(r"^nvidia\s+", "", name.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _check(result):
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver call failed: {err!r}")
    return values[0] if len(values) == 1 else values


def detect(device_ordinal: int = 0) -> GpuInfo | None:
    """Properties of GPU ``device_ordinal``, or None where no driver or GPU exists."""
    try:
        from cuda.bindings import driver as drv
        if int(drv.cuInit(0)[0]) != 0:
            return None
        device = _check(drv.cuDeviceGet(device_ordinal))
    except Exception:  # no libcuda, no device: this machine cannot measure
        return None
    A = drv.CUdevice_attribute

    def attr(a):
        return int(_check(drv.cuDeviceGetAttribute(a, device)))

    name = _check(drv.cuDeviceGetName(256, device)).split(b"\0")[0].decode()
    return GpuInfo(
        name=name,
        compute_capability=(attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                            attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
        sm_count=attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        l2_bytes=attr(A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
        smem_per_block_optin_bytes=attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        smem_per_sm_bytes=attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        max_sm_clock_khz=attr(A.CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
        memory_clock_khz=attr(A.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
        memory_bus_bits=attr(A.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
        total_memory_bytes=int(_check(drv.cuDeviceTotalMem(device))),
        driver_version=int(_check(drv.cuDriverGetVersion())),
    )


ARCHITECTURE_NAMES = {9: "Hopper (compute capability 9.0: H100, H200)",
                      10: "Blackwell (compute capability 10.0: B200)"}


def require_architecture(info: GpuInfo | None, majors=(HOPPER_MAJOR,), what: str = "the measure tier") -> GpuInfo:
    """Return ``info`` if its compute-capability major is one of ``majors``, else raise
    GpuRequirementError naming ``what`` needs which GPUs."""
    if majors == (HOPPER_MAJOR,):
        return require_hopper(info)
    needs = (" or ".join(ARCHITECTURE_NAMES.get(m, f"compute capability {m}.x") for m in majors)
             + " with a CUDA 13 driver (>= 580)")
    if info is None:
        raise GpuRequirementError(
            f"measure=true but no CUDA GPU is visible here: {what} needs {needs}. Without a GPU, run "
            "the main job without measure=true: it regenerates every figure and table from the "
            "committed reference data in results/h200/.")
    if info.compute_capability[0] not in majors:
        cc = ".".join(map(str, info.compute_capability))
        raise GpuRequirementError(f"{what} needs {needs}; this GPU is {info.name} (compute capability {cc}).")
    return info


def require_hopper(info: GpuInfo | None) -> GpuInfo:
    """Return ``info`` if it can measure, else raise GpuRequirementError saying what is needed."""
    if info is None:
        raise GpuRequirementError(
            f"measure=true but no CUDA GPU is visible here: {REQUIREMENT}. Without a GPU, run "
            "the main job without measure=true: it regenerates every figure and table from the "
            "committed reference data in results/h200/.")
    if info.compute_capability[0] != HOPPER_MAJOR:
        cc = ".".join(map(str, info.compute_capability))
        raise GpuRequirementError(
            f"measure=true but this GPU is {info.name} (compute capability {cc}): {REQUIREMENT}. "
            "The kernels use sm_90a-only instructions (TMA, clusters, wgmma-class features).")
    return info
