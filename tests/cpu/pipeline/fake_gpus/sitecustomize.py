"""Fake GPUs for tests/cpu/pipeline/test_multi_gpu.py, in every Python process of a Snakemake run.

On PYTHONPATH with $FAKE_GPUS=N set: N visible "NVIDIA H200" devices (CUDA_VISIBLE_DEVICES
applied as CUDA applies it), and a measure step that records which device it was pinned to
(its CUDA_VISIBLE_DEVICES, the claimed device, a provenance record) and holds it for
$FAKE_MEASURE_S seconds, in place of timing kernels.
"""
import json
import os
import time
from pathlib import Path

if os.environ.get("FAKE_GPUS"):
    from tma_study import cli
    from tma_study import gpu as gpu_mod

    def _fake_uuid(index: int) -> str:
        return f"GPU-{index:08x}-0000-0000-0000-00000000fa4e"

    def list_devices() -> list[dict]:
        every = [{"ordinal": i, "name": "NVIDIA H200", "uuid": _fake_uuid(i), "pci_bus_id": f"0000:{16 + i:02x}:00.0"}
                 for i in range(int(os.environ["FAKE_GPUS"]))]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:    # as CUDA does: the listed indices or UUIDs, in that order
            chosen = [d for entry in visible.split(",") for d in every if entry.strip() in (str(d["ordinal"]), d["uuid"])]
            every = [{**d, "ordinal": i} for i, d in enumerate(chosen)]
        return every

    def detect(device_ordinal: int = 0):
        devices = list_devices()
        if device_ordinal >= len(devices):
            return None
        d = devices[device_ordinal]
        return gpu_mod.GpuInfo(name=d["name"], compute_capability=(9, 0), sm_count=132, l2_bytes=62914560,
                               smem_per_block_optin_bytes=232448, smem_per_sm_bytes=233472,
                               max_sm_clock_khz=1980000, memory_clock_khz=3201000, memory_bus_bits=6144,
                               total_memory_bytes=150 << 30, driver_version=13000, uuid=d["uuid"],
                               pci_bus_id=d["pci_bus_id"])

    gpu_mod.list_devices, gpu_mod.detect = list_devices, detect

    def fake_measure(study_config: dict, gpu_probe: dict, out: Path) -> None:
        from tma_study.harness import gpu_lock, provenance
        started, began = provenance.utc_now(), time.time()
        time.sleep(float(os.environ.get("FAKE_MEASURE_S", "3")))
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        record = provenance.build(study=out.name, gpu=detect().as_dict(), study_config=study_config,
                                  repo=Path.cwd(), started=started)
        (out / "provenance.json").write_text(json.dumps(record, indent=2))
        (out / "device.json").write_text(json.dumps({
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "claimed": gpu_lock.pinned_device(), "began_s": began, "ended_s": time.time()}))

    class _FakeMeasuredStudy:
        def __init__(self, study):
            self._study = study

        def __getattr__(self, name):
            return getattr(self._study, name)

        def entry(self, what):
            return fake_measure if what == "measure" else self._study.entry(what)

    _real_study = cli._study
    cli._study = lambda name: _FakeMeasuredStudy(_real_study(name))
