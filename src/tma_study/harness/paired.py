"""Two kernels timed in pairs, alternating which goes first, each sample from a clean L2.

For pair ``i`` the order is (A, B) when ``i`` is even and (B, A) when odd, so a drift in clock or
temperature falls on both alike. One sample, in order on the current stream: the GPU sleeps
(``torch.cuda._sleep``) while the host enqueues the rest, so host time is never timed; an untimed
read of twice the L2 size leaves L2 holding clean lines of an unrelated buffer (the ``clean``
state of harness.l2_state: the timed kernel's data come from HBM, and no write-back of an
earlier sample lands in its time); CUDA events around one launch. Each sample is one row:
its pair, its position in the pair and its time.
"""
from __future__ import annotations

from collections.abc import Callable

READ_L2_MULTIPLE = 2
DESCRIPTION = ("clean: before each sample an untimed read of 2x the L2 size (a torch reduction over a zero buffer), "
               "after a GPU sleep that covers the host's enqueue (harness.paired)")


class L2Cleaner:
    """Reads ``READ_L2_MULTIPLE`` x the L2 size, replacing every line of L2 by a clean one."""

    def __init__(self, torch):
        l2_bytes = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        self.buffer = torch.zeros(READ_L2_MULTIPLE * l2_bytes // 4, dtype=torch.float32, device="cuda")

    def __call__(self) -> None:
        self.buffer.sum()


def time_pairs(torch, launchers: dict[str, Callable[[], None]], pairs: int, sleep_cycles: int,
               cleaner: L2Cleaner) -> list[dict]:
    """``pairs`` samples of each of the two launchers, alternating which runs first."""
    if len(launchers) != 2:
        raise ValueError(f"time_pairs takes two launchers, got {len(launchers)}")
    names = list(launchers)
    timed = []
    for pair in range(pairs):
        order = names if pair % 2 == 0 else names[::-1]
        for position, name in enumerate(order):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(sleep_cycles)
            cleaner()
            start.record()
            launchers[name]()
            end.record()
            timed.append((pair, position, name, start, end))
        torch.cuda.synchronize()
    return [{"pair": pair, "position": position, "variant": name, "time_us": start.elapsed_time(end) * 1e3}
            for pair, position, name, start, end in timed]
