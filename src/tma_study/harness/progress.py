"""Progress lines for long sweeps: which configuration, how many left, elapsed and ETA."""
from __future__ import annotations

import sys
import time


class Progress:
    """Prints ``[study] 12/480 (2%) <label>  elapsed 3.1 s  eta 120 s`` to stderr.

    Every ``every``-th step (and the last) is printed, so a long sweep shows it is alive
    without flooding the log.
    """

    def __init__(self, study: str, total: int, every: int = 1, stream=sys.stderr):
        self.study, self.total, self.every, self.stream = study, total, max(1, every), stream
        self.done = 0
        self.start = time.monotonic()

    def step(self, label: str) -> None:
        self.done += 1
        if self.done % self.every and self.done != self.total:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        pct = 100 * self.done / self.total if self.total else 100
        print(f"[{self.study}] {self.done}/{self.total} ({pct:.0f}%) {label}  "
              f"elapsed {elapsed:.1f} s  eta {eta:.0f} s", file=self.stream, flush=True)
