"""The issue-rate sweep (``issue_rate.csv``, kernels/tma_issue/issue_rate.py): how many TMA-engine
copies one SM issues per microsecond, by mechanism, transfer size and issuing threads.

One CTA per SM copies ``bytes_per_sm`` bytes from an L2-resident working set with ``stages``
rounds of ``in_flight_bytes_per_sm / stages`` bytes in flight; nothing reads the copies.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tma_study.harness import timing

ELEMENT_BYTES = 4
WARP = 32
SLOT_ALIGN_BYTES = 128          # kernels/tma_issue/issue_rate.py: a copy's slot in shared memory


@dataclass(frozen=True)
class IssueRateConfig:
    mechanism: str
    bytes_per_transfer: int
    issue_threads: int
    stages: int
    in_flight_bytes_per_sm: int
    bytes_per_sm: int
    working_set_bytes: int

    @property
    def key(self) -> str:
        return f"issue_rate/{self.mechanism}/B{self.bytes_per_transfer}/i{self.issue_threads}"

    @property
    def transfers_per_round(self) -> int:
        """The copies of one stage: its share of the shared memory in flight, a slot each
        (kernels/tma_issue/issue_rate.py: a slot is the copy, at least 128 bytes)."""
        return self.in_flight_bytes_per_sm // self.stages // max(self.bytes_per_transfer, SLOT_ALIGN_BYTES)

    @property
    def rounds(self) -> int:
        return self.bytes_per_sm // (self.transfers_per_round * self.bytes_per_transfer)

    @property
    def threads_per_cta(self) -> int:
        return max(WARP, -(-self.issue_threads // WARP) * WARP)

    def columns(self, ctas: int) -> dict:
        transfers = ctas * self.rounds * self.transfers_per_round
        return {"mechanism": self.mechanism, "bytes_per_transfer": self.bytes_per_transfer,
                "issue_threads": self.issue_threads, "threads_per_cta": self.threads_per_cta,
                "stages": self.stages, "in_flight_bytes_per_sm": self.in_flight_bytes_per_sm,
                "transfers_per_round": self.transfers_per_round, "rounds": self.rounds, "ctas": ctas,
                "working_set_bytes": self.working_set_bytes, "transfers": transfers,
                "bytes_moved": transfers * self.bytes_per_transfer}


def issue_rate_configs(study: dict) -> list[IssueRateConfig]:
    """Every configuration of the study's ``issue_rate`` section (none when it has none)."""
    from tma_kernels.tma_issue.issue_rate import MECHANISMS
    settings = study.get("issue_rate")
    if not settings:
        return []
    return [IssueRateConfig(m, size, threads, settings["stages"], settings["in_flight_bytes_per_sm"],
                            settings["bytes_per_sm"], settings["working_set_bytes"])
            for m in MECHANISMS for size in settings["bytes_per_transfer"] for threads in settings["issue_threads"]]


def expected_checksums(chunk_sums: np.ndarray, config: IssueRateConfig, ctas: int) -> np.ndarray:
    """Each CTA's checksum: the words of every stage's last round (kernels/crossover/issue_rate.py)."""
    from tma_kernels.tma_issue.issue_rate import CTA_CHUNK_STRIDE
    mask = chunk_sums.size - 1
    tpr, rounds, stages = config.transfers_per_round, config.rounds, config.stages
    last_rounds = [max(r for r in range(rounds) if r % stages == s) for s in range(min(stages, rounds))]
    firsts = (np.arange(ctas, dtype=np.int64) * CTA_CHUNK_STRIDE) & 0xFFFFFFFF
    offsets = np.concatenate([r * tpr + np.arange(tpr, dtype=np.int64) for r in last_rounds])
    chunks = (firsts[:, None] + offsets[None, :]) & mask
    return chunk_sums[chunks].sum(axis=1, dtype=np.uint64)


class IssueRateSource:
    """The L2-resident source every issue-rate case copies from, with its per-chunk word sums."""

    def __init__(self, nbytes: int, rng):
        from numba import cuda
        self.nbytes = nbytes
        self.words = rng.integers(0, 2**32, size=nbytes // ELEMENT_BYTES, dtype=np.uint32)
        self.device = cuda.to_device(self.words)
        self.address = int(self.device.__cuda_array_interface__["data"][0])
        self._chunk_sums: dict[int, np.ndarray] = {}

    def chunk_sums(self, size: int) -> np.ndarray:
        if size not in self._chunk_sums:
            self._chunk_sums[size] = self.words.reshape(-1, size // ELEMENT_BYTES).astype(np.uint64).sum(
                axis=1, dtype=np.uint64)
        return self._chunk_sums[size]


def dynamic_shared_bytes(config: IssueRateConfig, gpu) -> int:
    """The launch's dynamic shared memory: its stages, and more than half the SM's so no second CTA fits."""
    from tma_kernels.tma_issue.issue_rate import issue_rate_dynamic_shared_bytes
    return max(issue_rate_dynamic_shared_bytes(config.stages, config.transfers_per_round, config.bytes_per_transfer),
               gpu.smem_per_sm_bytes // 2 + 1)


def issue_rate_case(config: IssueRateConfig, kernel, source: IssueRateSource, tensor_map, gpu) -> timing.TimedCase:
    """A timed case: one CTA per SM (its dynamic shared memory keeps a second one out); ``tensor_map``:
    the chunk tensor map (tma_tile) or None, kept alive by the case."""
    from numba import cuda
    ctas = gpu.sm_count
    shared = dynamic_shared_bytes(config, gpu)
    checksums = cuda.device_array(ctas, np.uint64)
    args = (source.address, 0 if tensor_map is None else tensor_map.address, config.bytes_per_transfer.bit_length() - 1,
            source.nbytes // config.bytes_per_transfer - 1, config.transfers_per_round, config.rounds,
            config.stages, config.issue_threads)

    def launch(stream, check=0):
        kernel[ctas, config.threads_per_cta, stream, shared](*args, check, checksums)
        return tensor_map                     # referenced here, so alive as long as the case

    def check():
        checksums.copy_to_device(np.zeros(ctas, np.uint64))
        launch(0, check=1)
        cuda.synchronize()
        got = checksums.copy_to_host()
        want = expected_checksums(source.chunk_sums(config.bytes_per_transfer), config, ctas)
        bad = np.flatnonzero(got != want)
        if bad.size:
            raise timing.CorrectnessError(f"{config.key}: CTA {bad[0]} checksum {int(got[bad[0]]):#018x}, "
                                          f"expected {int(want[bad[0]]):#018x} ({bad.size} CTAs differ)")

    return timing.TimedCase(config.key, launch, check, bytes_read=config.bytes_per_sm * ctas,
                            label=config.key, warm=launch)


def issue_rate_row(config: IssueRateConfig, ctas: int, timed: dict) -> dict:
    columns = config.columns(ctas)
    time_us = timed["time_us_median"]
    return {**columns, **timed, "gbps": columns["bytes_moved"] / (time_us * 1e3),
            "transfers_per_sm_per_us": columns["transfers"] / (ctas * time_us)}
