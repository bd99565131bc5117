"""A fake GPU for the sample runner (gemm_paired.runner) and the measure steps built on it
(gemm_paired, gemm_cluster): CUDA events whose time advances with every query, a stream that adds
up the work enqueued on it, and an NVML monitor that counts its readings. No tests here."""
import contextlib

from tma_study.gemm_lib.monitor import Monitor


class FakeEvent:
    """An event on a fake GPU whose time (ms) advances by POLL_MS with every query: it completes
    once that time reaches the end of the work enqueued before it."""
    clock = [0.0]
    POLL_MS = 0.5

    def __init__(self, enable_timing=True):
        self.at = None

    def record(self, stream):
        stream.enqueued.append(self)
        self.at = stream.busy_until = stream.busy_until + stream.pending_work
        stream.pending_work = 0.0

    def query(self):
        FakeEvent.clock[0] += self.POLL_MS
        return self.at <= FakeEvent.clock[0]

    def elapsed_time(self, end):
        return end.at - self.at


class FakeStream:
    def __init__(self):
        self.enqueued, self.busy_until, self.pending_work = [], 0.0, 0.0

    def synchronize(self):
        pass


class FakeTorch:
    class cuda:
        Event = FakeEvent


class CountingMonitor(Monitor):
    def __init__(self):
        self.handle, self.why_not, self.reads = "fake", "", 0

    def read_into(self, readings, temperature=False):
        self.reads += 1
        readings.sm_clock_mhz.append(1500.0 + self.reads % 1000)   # a clock that moves, within NVML's range
        readings.power_w.append(690.0)
        if temperature:
            readings.temperature_c.append(60.0)

    def temperature_c(self):
        return 60.0


class FakeTensor:
    def __init__(self, n=1):
        self.n = n

    def data_ptr(self):
        return 4096

    def numel(self):
        return self.n


def fake_torch(stream, log):
    """A torch module whose cuda namespace has the fake events, ``stream`` and a logged synchronize."""
    class cuda:
        Event = FakeEvent

        @staticmethod
        def Stream():
            return stream

        @staticmethod
        @contextlib.contextmanager
        def stream(s):
            yield

        @staticmethod
        def synchronize():
            log.append("synchronize")

        @staticmethod
        def empty_cache():
            log.append("empty_cache")

    return type("torch", (), {"cuda": cuda, "__version__": "fake"})
