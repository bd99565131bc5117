"""One measurement on the GPU at a time.

Snakemake may start several studies' measure jobs at once (``-c4``); two of them timing
kernels on the same GPU would each slow the other and corrupt both data sets. Every
measurement therefore holds an exclusive ``flock`` on a lock file for its whole run; a
second one waits (and says so) until the first is done. The lock is released when the
process exits, however it exits.
"""
from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path

from tma_study.config import REPO_ROOT

DEFAULT_LOCK = REPO_ROOT / "build" / "gpu.lock"


@contextmanager
def exclusive_gpu(what: str, lock_path: Path = DEFAULT_LOCK):
    """Hold the GPU lock while the body runs; print who waits for how long."""
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another measurement"
            print(f"[{what}] waiting for the GPU: {holder} holds {lock_path}", flush=True)
            began = time.monotonic()
            fcntl.flock(handle, fcntl.LOCK_EX)
            print(f"[{what}] got the GPU after {time.monotonic() - began:.0f} s", flush=True)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{what} (pid {os.getpid()})\n")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)
