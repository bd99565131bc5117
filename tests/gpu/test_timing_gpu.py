"""The harness's sample on the H200: the L2 states (harness/l2_state.py) and the warm pass
run in every sample, after nvbench's flush, without stalling nvbench's blocking kernel.
No test here asserts a time: the states' effect on a copy is data (paged_kv ceilings.csv)."""
import numpy as np
import pytest

from tma_study.harness import l2_state, timing

COPY_WORDS = 1 << 22        # 16 MiB


def _copy_case(key: str, state: str | None, warm_calls: list):
    from numba import cuda
    source = cuda.to_device(np.arange(COPY_WORDS, dtype=np.uint32))
    destination = cuda.device_array_like(source)

    def launch(stream):
        destination.copy_to_device(source, stream=stream)

    def warm(stream):
        warm_calls.append(stream)
        launch(stream)

    def check():
        launch(0)
        cuda.synchronize()
        if not np.array_equal(destination.copy_to_host(), source.copy_to_host()):
            raise timing.CorrectnessError(key)

    return timing.TimedCase(key, launch, check, bytes_read=4 * COPY_WORDS, bytes_written=4 * COPY_WORDS,
                            warm=warm, l2_after_flush=state)


@pytest.mark.gpu
def test_every_state_times_and_warms_each_sample_on_the_untimed_stream():
    calls = {state: [] for state in l2_state.L2_STATES}
    cases = [_copy_case(f"copy/{state}", state, calls[state]) for state in l2_state.L2_STATES]
    timings = timing.run(cases, study="harness_gpu_test", min_samples=10, min_time_s=0.001, timeout_s=2.0)
    for state in l2_state.L2_STATES:
        columns = timings[f"copy/{state}"].columns()
        assert columns["timing_status"] == "ok" and columns["samples"] >= 10
        assert len(calls[state]) >= columns["samples"]            # one warm pass a sample (+ warm-up)
        bench_streams = {id(s) for s in calls[state]}
        assert len(bench_streams) == 1                            # the one untimed stream, every time


@pytest.mark.gpu
def test_the_cleaner_reads_its_whole_buffer_and_never_stores():
    from numba import cuda

    from tma_study import gpu as gpu_mod
    gpu = gpu_mod.detect()
    cleaner = l2_state.Cleaner(gpu.l2_bytes, gpu.sm_count)
    assert cleaner.words.nbytes == l2_state.READ_L2_MULTIPLE * gpu.l2_bytes
    cleaner.sink.copy_to_device(np.array([7], np.uint64))
    cleaner(0)
    cuda.synchronize()
    assert int(cleaner.sink.copy_to_host()[0]) == 7               # XOR of zeros never matches

