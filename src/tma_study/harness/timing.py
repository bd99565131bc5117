"""Kernel timing through cuda-bench (NVIDIA nvbench's Python API).

Why cuda-bench: it times on device events, repeats until the relative noise is under a
target, flushes L2 before every "cold" sample, detects and discards throttled samples,
and records the SM clock during the samples.

cuda-bench summarises the cold samples (median, quartiles, min, max, relative stdev, sample
count, mean SM clock); nvbench itself discards samples taken while the GPU throttled.

A :class:`TimedCase` is one configuration: a correctness check (run once, before any
timing: a mismatch raises and the whole run fails, recording nothing) and a launch that
enqueues the measured work on the stream cuda-bench gives it. An optional ``prepare`` runs
once, after the check and right before nvbench's warm-up and samples (the gemm study
pre-heats the GPU there).

One sample, in order (nvbench's ``timer.start()`` does the first three):
1. nvbench flushes L2 (a memset of an L2-sized buffer) and synchronizes its stream;
2. nvbench enqueues its blocking kernel, which holds the stream until ``timer.stop()``;
3. nvbench records the start event behind the blocking kernel;
4. untimed, on a second stream the host waits for: the L2 state's preparation
   (l2_state: ``clean`` reads 2x the L2 size so no dirty line of the flush is left) and the
   case's optional ``warm`` launch (an L2-resident working set made resident);
5. the case's launch, behind the start event; ``timer.stop()`` records the stop event and
   releases the blocking kernel, so the timed region holds the launch alone.
Work placed before ``timer.start()`` would run before nvbench's flush, which undoes it.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


from . import l2_state
from .progress import Progress

# nvbench's stdrel stopping criterion: stop once the relative standard deviation of the
# samples is below max_noise (a fraction) and min_time seconds of samples were taken.
DEFAULT_MAX_NOISE = 0.005
DEFAULT_MIN_TIME_S = 0.05
DEFAULT_TIMEOUT_S = 2.0
DEFAULT_MIN_SAMPLES = 20


class CorrectnessError(AssertionError):
    """A configuration moved or computed the wrong data: the run records nothing."""


@dataclass
class TimedCase:
    key: str                                   # unique, e.g. "tma_tile/hbm/B4096/..."
    launch: Callable[[object], None]           # enqueue the measured work on a numba stream
    check: Callable[[], None]                  # correctness check; raises CorrectnessError
    bytes_read: int = 0
    bytes_written: int = 0
    warm: Callable[[object], None] | None = None   # untimed, each sample, after nvbench's flush
    label: str = ""                            # progress text
    prepare: Callable[[], None] | None = None  # untimed, once: after the check, before the samples
    l2_after_flush: str | None = None          # l2_state.L2_STATES; None: the run's


@dataclass
class Timing:
    """One case's result as cuda-bench summarised its cold samples (times in us, clock in MHz)."""

    key: str
    summary: dict          # nvbench summary tag -> value, e.g. "nv/cold/time/gpu/median"

    def _get(self, tag: str) -> float:
        try:
            return float(self.summary[tag])
        except KeyError:
            raise KeyError(f"cuda-bench wrote no {tag!r} for {self.key!r}; "
                           f"it wrote: {sorted(self.summary)}") from None

    NO_SAMPLE = ("not measured: no valid cold sample within the timeout (nvbench discards samples "
                 "taken while the GPU throttles)")

    def columns(self) -> dict:
        """Time columns; NaN times and ``timing_status`` saying why when no sample survived."""
        if "nv/cold/time/gpu/median" not in self.summary and float(self.summary.get("nv/cold/sample_size", 0)) == 0:
            nan = float("nan")
            return {"time_us_median": nan, "time_us_q1": nan, "time_us_q3": nan, "time_us_iqr": nan,
                    "time_us_min": nan, "time_us_max": nan, "time_relative_stdev": nan, "samples": 0,
                    "sm_clock_mhz_mean": nan, "timing_status": self.NO_SAMPLE}
        us = 1e6
        q1, q3 = self._get("nv/cold/time/gpu/q1") * us, self._get("nv/cold/time/gpu/q3") * us
        return {
            "time_us_median": self._get("nv/cold/time/gpu/median") * us,
            "time_us_q1": q1,
            "time_us_q3": q3,
            "time_us_iqr": q3 - q1,
            "time_us_min": self._get("nv/cold/time/gpu/min") * us,
            "time_us_max": self._get("nv/cold/time/gpu/max") * us,
            "time_relative_stdev": self._get("nv/cold/time/gpu/stdev/relative"),
            "samples": int(self._get("nv/cold/sample_size")),
            "sm_clock_mhz_mean": self._get("nv/cold/sm_clock_rate/mean") / 1e6,
            "timing_status": "ok",
        }


def numba_stream(cuda_bench_stream):
    """The numba stream object for the stream cuda-bench times on."""
    from numba import cuda
    return cuda.external_stream(cuda_bench_stream.addressof())


class _UntimedWork:
    """Step 4 of a sample (module doc): the L2 state's preparation and the case's warm pass,
    on a stream of their own, which the host waits for while nvbench's blocking kernel holds
    the start event. The stream and the cleaner are made on first use, before a timer.start()."""

    def __init__(self, device: int):
        self.device = device
        self.stream = None
        self.cleaner = None

    def ready(self, clean: bool) -> None:
        from numba import cuda
        if self.stream is None:
            self.stream = cuda.stream()
        if clean and self.cleaner is None:
            from tma_study import gpu as gpu_mod
            gpu = gpu_mod.detect(self.device)
            self.cleaner = l2_state.Cleaner(gpu.l2_bytes, gpu.sm_count)

    def run(self, clean: bool, warm) -> None:
        if not clean and warm is None:
            return
        if clean:
            self.cleaner(self.stream)
        if warm is not None:
            warm(self.stream)
        self.stream.synchronize()


def run(cases: list[TimedCase], *, study: str, max_noise: float = DEFAULT_MAX_NOISE,
        min_time_s: float = DEFAULT_MIN_TIME_S, timeout_s: float = DEFAULT_TIMEOUT_S,
        min_samples: int = DEFAULT_MIN_SAMPLES, device: int = 0,
        throttle_threshold_percent: float | None = None,
        l2_after_flush: str = l2_state.DEFAULT_L2_STATE) -> dict[str, Timing]:
    """Check, then time, every case; returns {key: Timing}. Raises CorrectnessError on a mismatch.

    ``l2_after_flush``: what L2 holds when each sample starts (l2_state; a case's own
    ``l2_after_flush`` overrides it). ``throttle_threshold_percent``: nvbench discards samples
    taken while the SM clock is below this percent of the default clock (None: nvbench's
    default, 75). A GEMM at full power runs below it for whole seconds, so the gemm study
    lowers it and reports each row's mean clock."""
    by_key = {c.key: c for c in cases}
    if len(by_key) != len(cases):
        raise ValueError("duplicate TimedCase keys")
    l2_state.check_state(l2_after_flush, "timing: l2_after_flush")
    states = {c.key: l2_state.check_state(c.l2_after_flush or l2_after_flush,
                                          f"timing case {c.key!r}: l2_after_flush") for c in cases}
    from cuda import bench

    untimed = _UntimedWork(device)
    failures: list[str] = []
    progress = Progress(study, len(cases), every=max(1, len(cases) // 100))

    def state_fn(state):
        case = by_key[state.get_string("case")]
        progress.step(case.label or case.key)
        try:
            case.check()
        except Exception as exc:  # recorded, reported after the run, nothing is written
            failures.append(f"{case.key}: {type(exc).__name__}: {exc}")
            state.skip(f"correctness check failed: {exc}")
            return
        if case.prepare is not None:
            case.prepare()
        state.add_global_memory_reads(int(case.bytes_read))
        state.add_global_memory_writes(int(case.bytes_written))

        clean = states[case.key] == "clean"

        def timed(launch, timer):
            stream = numba_stream(launch.get_stream())
            untimed.ready(clean)    # first use: allocate and load now, never behind the blocking kernel
            timer.start()           # flush, blocking kernel, start event (module doc: steps 1-3)
            untimed.run(clean, case.warm)
            case.launch(stream)
            timer.stop()

        state.exec(timed, timer=True, batched=False)

    benchmark = bench.register(state_fn)
    benchmark.set_name(study)
    benchmark.add_string_axis("case", list(by_key))

    with tempfile.TemporaryDirectory(prefix=f"cuda-bench-{study}-") as tmp:
        json_path = Path(tmp) / "nvbench.json"
        bench.run_all_benchmarks([
            "cuda-bench", "--quiet", "--json", str(json_path), "--devices", str(device),
            "--min-samples", str(min_samples), "--min-time", str(min_time_s),
            "--max-noise", str(100 * max_noise),  # nvbench takes percent
            "--timeout", str(timeout_s),
            *([] if throttle_threshold_percent is None
              else ["--throttle-threshold", str(throttle_threshold_percent)])])
        keep = os.environ.get("TMA_STUDY_KEEP_NVBENCH_JSON")  # debugging aid: keep nvbench's own output
        if keep:
            shutil.copytree(tmp, keep, dirs_exist_ok=True)
        if failures:
            raise CorrectnessError(f"{len(failures)} configuration(s) failed their check; "
                                   "nothing recorded:\n  " + "\n  ".join(failures))
        return parse_results(json_path, study)


def parse_results(json_path: Path, benchmark_name: str) -> dict[str, Timing]:
    """{case key: Timing} for every executed (not skipped) state of the benchmark."""
    document = json.loads(Path(json_path).read_text())
    timings = {}
    for benchmark in document["benchmarks"]:
        if benchmark["name"] != benchmark_name:
            continue
        for state in benchmark["states"]:
            if state.get("is_skipped"):
                continue
            key = next(a["value"] for a in state["axis_values"] if a["name"] == "case")
            summary = {item["tag"]: next((d["value"] for d in item["data"] if d["name"] == "value"), None)
                       for item in state["summaries"]}
            timings[key] = Timing(key, summary)
    return timings
