"""One measurement per GPU at a time, on every GPU this machine shows.

Snakemake starts up to N measure jobs at once with ``--resources gpu=N`` (or every ready one
when ``gpu`` is not limited), but it does not say which GPU a job should use. Each measure job
therefore claims one visible GPU from a pool of lock files, one per physical device, holding an
exclusive ``flock`` on it for its whole run, and pins itself to that device by setting
``CUDA_VISIBLE_DEVICES`` before its first CUDA call. When every device is held it waits (and
says so) until one is released; a lock is released when its process exits, however it exits.
With one GPU this is the old single lock: measurements take turns.

Locks are named by the device's UUID (``build/gpu-locks/GPU-<uuid>.lock``), not by its index:
a SLURM job sees its one GPU as index 0 whichever it is, so index-named locks on a build/
shared by a cluster's nodes would make jobs on different nodes wait for each other.

The visible devices are listed by a child process: CUDA reads ``CUDA_VISIBLE_DEVICES`` once, at
``cuInit``, so the measuring process must not initialise CUDA before it has pinned its device.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from tma_study import gpu as gpu_mod
from tma_study.config import REPO_ROOT

DEFAULT_LOCK_DIR = REPO_ROOT / "build" / "gpu-locks"
PINNED_DEVICE_VARIABLE = "TMA_STUDY_GPU"   # JSON of the claimed device, read by provenance
POLL_S = 2.0                               # how often a waiting job tries the locks again
_LIST_DEVICES = ("import json; from tma_study.gpu import list_devices; "
                 "print(json.dumps(list_devices()))")


@dataclass(frozen=True)
class VisibleDevice:
    ordinal: int            # CUDA's index among the devices this job started with
    name: str               # 'NVIDIA H200'
    uuid: str | None        # 'GPU-8932f937-...' (None where the driver does not say)
    pci_bus_id: str | None  # '0000:19:00.0'
    entry: str              # what selects it in the starting CUDA_VISIBLE_DEVICES ('3', 'GPU-...')

    @property
    def pin(self) -> str:
        """The CUDA_VISIBLE_DEVICES value that leaves this device alone visible."""
        return self.uuid or self.entry

    @property
    def lock_name(self) -> str:
        return f"{self.uuid}.lock" if self.uuid else f"{socket.gethostname()}-{self.entry}.lock"


def devices_from_listing(listing: list[dict], visible: str | None) -> list[VisibleDevice]:
    """VisibleDevice records from tma_study.gpu.list_devices() output, with the entry of
    ``visible`` (the starting CUDA_VISIBLE_DEVICES, or None) that selects each one."""
    entries = [e.strip() for e in visible.split(",")] if visible else []
    return [VisibleDevice(ordinal=d["ordinal"], name=d["name"], uuid=d.get("uuid"),
                          pci_bus_id=d.get("pci_bus_id"),
                          entry=entries[d["ordinal"]] if d["ordinal"] < len(entries) else str(d["ordinal"]))
            for d in listing]


def visible_devices() -> list[VisibleDevice]:
    """The GPUs this process may use, listed by a child process (this one stays uninitialised)."""
    result = subprocess.run([sys.executable, "-c", _LIST_DEVICES], capture_output=True, text=True,
                            timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"listing the visible GPUs failed ({sys.executable} -c ...):\n{result.stderr}")
    return devices_from_listing(json.loads(result.stdout.strip().splitlines()[-1]),
                                os.environ.get("CUDA_VISIBLE_DEVICES"))


def _try_lock(path: Path):
    """An open handle holding ``path``'s exclusive lock, or None when another process holds it."""
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _holders(lock_dir: Path, devices: list[VisibleDevice]) -> str:
    texts = []
    for device in devices:
        path = lock_dir / device.lock_name
        holder = path.read_text().strip() if path.exists() else ""
        texts.append(f"GPU {device.entry}: {holder or 'another measurement'}")
    return "; ".join(texts)


def _claim(what: str, lock_dir: Path, devices: list[VisibleDevice], poll_s: float):
    """(device, handle) for the first device whose lock is free, waiting while all are held."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    began, said = time.monotonic(), False
    while True:
        for device in devices:
            handle = _try_lock(lock_dir / device.lock_name)
            if handle is not None:
                if said:
                    print(f"[{what}] got GPU {device.entry} after {time.monotonic() - began:.0f} s", flush=True)
                return device, handle
        if not said:
            print(f"[{what}] waiting for a GPU: all {len(devices)} are measuring "
                  f"({_holders(lock_dir, devices)}), locks in {lock_dir}", flush=True)
            said = True
        time.sleep(poll_s)


@contextmanager
def claim_device(what: str, lock_dir: Path = DEFAULT_LOCK_DIR, devices: list[VisibleDevice] | None = None,
                 poll_s: float = POLL_S):
    """Hold one visible GPU for the body, with CUDA_VISIBLE_DEVICES set to it alone; yields
    the VisibleDevice (None where no GPU is visible: the caller's GPU check then says why).

    Refuses to run in a process that has already initialised CUDA: it could not be pinned.
    """
    if gpu_mod.cuda_initialised_here():
        raise RuntimeError(f"[{what}] CUDA was initialised before a GPU was claimed, so "
                           "CUDA_VISIBLE_DEVICES can no longer pin this process to one device")
    devices = visible_devices() if devices is None else devices
    if not devices:
        yield None
        return
    lock_dir = Path(lock_dir)
    device, handle = _claim(what, lock_dir, devices, poll_s)
    saved = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", PINNED_DEVICE_VARIABLE)}
    record = {**asdict(device), "visible_at_start": saved["CUDA_VISIBLE_DEVICES"],
              "cuda_visible_devices": device.pin, "host": socket.gethostname(),
              "lock": str(lock_dir / device.lock_name)}
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{what} (pid {os.getpid()} on {socket.gethostname()})\n")
        handle.flush()
        os.environ["CUDA_VISIBLE_DEVICES"] = device.pin
        os.environ[PINNED_DEVICE_VARIABLE] = json.dumps(record)
        print(f"[{what}] on GPU {device.entry} of {len(devices)}: {device.name} {device.uuid or ''} "
              f"{device.pci_bus_id or ''}".rstrip(), flush=True)
        yield device
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        handle.seek(0)
        handle.truncate()
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def pinned_device() -> dict | None:
    """The device record claim_device() left for this process and its children, or None."""
    text = os.environ.get(PINNED_DEVICE_VARIABLE)
    return json.loads(text) if text else None
