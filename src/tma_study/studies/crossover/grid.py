"""The crossover sweep: every (mechanism, knobs, transfer size, working set) to measure.

A configuration is kept only if it can run as declared: a stage holds at least one transfer,
and the CTAs per SM fit the SM's shared memory and thread slots. Knobs that do not apply to
a mechanism are not expanded for it: TMA-engine mechanisms (tma_tile, bulk_copy) have one
producer warp and sweep the lanes that issue copies; cp.async and plain loads sweep the
number of producer threads.
"""
from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

TMA_ENGINE_MECHANISMS = ("tma_tile", "bulk_copy")
TMA_ENGINE_PRODUCER_THREADS = 32       # one producer warp (kernels/crossover/ring.py)
RING_ALIGN_BYTES = 128                 # kernels/crossover/ring.py
STATIC_SHARED_BYTES = 128              # 2 x MAX_STAGES mbarriers
RESERVED_SHARED_PER_CTA_BYTES = 1024   # the driver reserves 1 KiB per CTA on sm_90
MAX_SHARED_PER_CTA_BYTES = 232448      # opt-in limit per block on sm_90 (static + dynamic)
SHARED_PER_SM_BYTES_H100_CLASS = 233472
MAX_THREADS_PER_SM = 2048
LOADS_IN_FLIGHT_PLAIN = 4              # kernels/crossover/plain_loads.py
VECTOR_BYTES = 16
ORDER_MULTIPLIERS = {"sequential": 1, "scattered": 0x9E3779B1}  # odd: a permutation mod 2^k


@dataclass(frozen=True)
class StreamConfig:
    mechanism: str
    working_set: str
    working_set_bytes: int
    bytes_per_launch: int
    access_order: str
    bytes_per_transfer: int
    ring_bytes_per_sm: int
    stages: int
    ctas_per_sm: int
    consumer_threads: int
    producer_threads: int
    issue_threads: int

    @property
    def threads_per_cta(self) -> int:
        return self.consumer_threads + self.producer_threads

    @property
    def stage_bytes(self) -> int:
        return self.ring_bytes_per_sm // (self.stages * self.ctas_per_sm)

    @property
    def bytes_in_flight_per_sm_bound(self) -> int:
        """Most bytes that can be outstanding per SM: the ring, or for plain loads the registers."""
        if self.mechanism == "plain_loads":
            register_bound = self.producer_threads * LOADS_IN_FLIGHT_PLAIN * VECTOR_BYTES * self.ctas_per_sm
            return min(self.ring_bytes_per_sm, register_bound)
        return self.ring_bytes_per_sm

    @property
    def key(self) -> str:
        return (f"{self.mechanism}/{self.working_set}/{self.access_order}/B{self.bytes_per_transfer}"
                f"/ring{self.ring_bytes_per_sm}/s{self.stages}/c{self.ctas_per_sm}"
                f"/t{self.consumer_threads}+{self.producer_threads}/i{self.issue_threads}")

    def columns(self) -> dict:
        cols = asdict(self)
        cols["stage_bytes"] = self.stage_bytes
        cols["threads_per_cta"] = self.threads_per_cta
        cols["bytes_in_flight_per_sm_bound"] = self.bytes_in_flight_per_sm_bound
        return cols


def fits(config: StreamConfig, shared_per_sm_bytes: int = SHARED_PER_SM_BYTES_H100_CLASS) -> bool:
    """Can ``ctas_per_sm`` CTAs of this configuration be resident on one SM?"""
    per_cta = (config.stages * config.stage_bytes + RING_ALIGN_BYTES + STATIC_SHARED_BYTES
               + RESERVED_SHARED_PER_CTA_BYTES)
    per_block = config.stages * config.stage_bytes + RING_ALIGN_BYTES + STATIC_SHARED_BYTES
    return (config.stage_bytes >= config.bytes_per_transfer
            and per_block <= MAX_SHARED_PER_CTA_BYTES
            and config.stage_bytes % config.bytes_per_transfer == 0
            and config.ctas_per_sm * per_cta <= shared_per_sm_bytes
            and config.ctas_per_sm * config.threads_per_cta <= MAX_THREADS_PER_SM)


def stream_configs(study: dict, shared_per_sm_bytes: int = SHARED_PER_SM_BYTES_H100_CLASS) -> list[StreamConfig]:
    """Expand the study config into the configurations to measure, mechanism-major."""
    configs = []
    for mechanism in study["mechanisms"]:
        engine = mechanism in TMA_ENGINE_MECHANISMS
        issue = study["tma_issue_threads"] if engine else [1]
        producers = [TMA_ENGINE_PRODUCER_THREADS] if engine else study["producer_threads"]
        for (ws_name, ws), order, size, ring, stages, ctas, consumers, producer_threads, issue_threads in \
                itertools.product(study["working_sets"].items(), study["access_order"],
                                  study["bytes_per_transfer"], study["ring_bytes_per_sm"], study["stages"],
                                  study["ctas_per_sm"], study["consumer_threads"], producers, issue):
            config = StreamConfig(mechanism, ws_name, int(ws["bytes"]), int(ws["bytes_per_launch"]), order,
                                  int(size), int(ring), stages, ctas, consumers, producer_threads,
                                  issue_threads)
            if fits(config, shared_per_sm_bytes):
                configs.append(config)
    return configs
