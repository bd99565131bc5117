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
    uuid: str | None = None         # 'GPU-8932f937-...': which physical device, across hosts and indices
    pci_bus_id: str | None = None   # '0000:19:00.0': where it sits in this host

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


def _uuid(drv, device) -> str | None:
    """The device's UUID as nvidia-smi and CUDA_VISIBLE_DEVICES write it ('GPU-xxxxxxxx-xxxx-...')."""
    try:
        raw = bytes(_check(drv.cuDeviceGetUuid(device)).bytes)[:16]
    except Exception:  # an older driver or binding without the query: identity unknown
        return None
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _pci_bus_id(drv, device) -> str | None:
    try:
        raw = _check(drv.cuDeviceGetPCIBusId(64, device))
    except Exception:
        return None
    text = raw.split(b"\0")[0].decode() if isinstance(raw, bytes) else str(raw).split("\0")[0]
    return text or None


def list_devices() -> list[dict]:
    """Every GPU this process may use (CUDA_VISIBLE_DEVICES applied): ordinal, name, uuid,
    pci_bus_id. Empty without a driver or GPU.

    Initialises CUDA in the calling process, which then can no longer change which devices it
    sees: tma_study.harness.gpu_lock calls it in a child process.
    """
    try:
        from cuda.bindings import driver as drv
        if int(drv.cuInit(0)[0]) != 0:
            return []
        count = int(_check(drv.cuDeviceGetCount()))
    except Exception:  # no libcuda, no device
        return []
    devices = []
    for ordinal in range(count):
        device = _check(drv.cuDeviceGet(ordinal))
        name = _check(drv.cuDeviceGetName(256, device)).split(b"\0")[0].decode()
        devices.append({"ordinal": ordinal, "name": name, "uuid": _uuid(drv, device),
                        "pci_bus_id": _pci_bus_id(drv, device)})
    return devices


def cuda_initialised_here() -> bool:
    """Whether this process has already called cuInit (it then ignores later changes to
    CUDA_VISIBLE_DEVICES). Never initialises CUDA itself."""
    try:
        from cuda.bindings import driver as drv
        return int(drv.cuDeviceGetCount()[0]) == 0   # CUDA_ERROR_NOT_INITIALIZED before cuInit
    except Exception:
        return False


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
        uuid=_uuid(drv, device),
        pci_bus_id=_pci_bus_id(drv, device),
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
