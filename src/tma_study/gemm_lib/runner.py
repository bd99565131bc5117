"""Run planned samples on the GPU: each sample is ``launches`` back-to-back launches of one kernel
between two CUDA events on one stream; its time is the events' span over the launches (us per
launch). While a sample runs the host polls NVML (monitor.py) into that sample's readings.

Samples are enqueued at most ``AHEAD`` at a time, in order, on one stream, so the GPU never waits
for the host between them; a reading belongs to the oldest unfinished sample once its start event
has completed (the stream runs in order, so that sample is the one on the GPU). A run that takes
longer than its deadline raises ``TimeoutError`` naming the sample it waited for.

A sample is any object with ``kernel`` (the key of its launcher) and ``launches``
(:class:`TimedSample`): gemm_paired's schedule.Sample, gemm_cluster's schedule.Sample.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from .monitor import Monitor, Readings

AHEAD = 2                 # samples enqueued ahead of the one running


class TimedSample(Protocol):
    kernel: str           # the key of the launcher that enqueues one launch
    launches: int         # back-to-back launches timed as this sample


class SampleRunner:
    def __init__(self, torch, stream, monitor: Monitor, poll_s: float, study: str = "gemm_paired"):
        self.torch, self.stream, self.monitor, self.poll_s = torch, stream, monitor, poll_s
        self.study = study        # names the study in a timeout's message

    def run(self, samples: Sequence[TimedSample], launchers: dict[str, Callable[[], None]], deadline_s: float,
            started: float) -> list[dict]:
        """Time ``samples`` back to back; one dict per sample: time_us per launch, readings, and
        ``t_s`` (host seconds since ``started`` when its end was seen). ``launchers[kernel]()``
        enqueues one launch of that kernel on the runner's stream."""
        torch = self.torch
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in samples]
        readings = [Readings() for _ in samples]
        seen_s = [0.0] * len(samples)
        pending: deque[int] = deque()
        queued = 0
        deadline = time.monotonic() + deadline_s
        while queued < len(samples) or pending:
            while queued < len(samples) and len(pending) < AHEAD:
                start, end = events[queued]
                launch = launchers[samples[queued].kernel]
                start.record(self.stream)
                for _ in range(samples[queued].launches):
                    launch()
                end.record(self.stream)
                pending.append(queued)
                queued += 1
            oldest = pending[0]
            start, end = events[oldest]
            if end.query():
                seen_s[oldest] = time.monotonic() - started
                pending.popleft()
                continue
            if start.query():
                self.monitor.read_into(readings[oldest], temperature=not readings[oldest].sm_clock_mhz)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.study}: sample {samples[oldest]} did not finish within {deadline_s:.0f} s")
            time.sleep(self.poll_s)
        self.stream.synchronize()
        return [{"time_us": start.elapsed_time(end) * 1e3 / s.launches, "t_s": seen, **r.columns()}
                for s, (start, end), r, seen in zip(samples, events, readings, seen_s)]
