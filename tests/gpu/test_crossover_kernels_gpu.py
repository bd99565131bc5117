"""GPU: the crossover study's kernels compute the checksums its host reference predicts.

The checks here run the measurement's own code (src/tma_study/studies/crossover/measure.py)
on small data, without cuda-bench:

- stream kernels: for every mechanism, access order (scattered, sequential), transfer size
  (256 B, 4 KiB, 64 KiB) and a few ring settings (stages, CTAs per SM, consumer + producer
  threads, issuing lanes), ``measure._stream_case(...).check()`` launches the kernel over a
  fresh 32 MiB random ``WorkingSet`` read twice, and compares the summed per-thread
  checksums with ``reference.expected_checksum`` (raising ``CorrectnessError`` otherwise);
- the same check fails once one word of the device buffer is flipped after the reference
  was taken (so a passing check means something);
- latency chase: each mechanism's pointer chase at 256 B and 64 KiB ends at the chunk
  ``reference.follow`` predicts;
- read ceiling: ``read_stream``'s checksum equals ``expected_checksum(sums, None, passes)``
  for every CTAs-per-SM setting the study measures (and fails on a flipped word), and the
  device-to-device copy ceiling's check passes.

The tests compile the kernels as the measurement does (``measure._compile``, which also
sets their dynamic shared memory limits). ``KERNELS`` lists the same kernels with their
signatures for tests/cpu/kernels/test_gpu_test_kernels_compile.py, which compiles every entry for
sm_90a on any machine.
"""

import os

import numpy as np
import pytest
from numba import cuda

from tma_kernels.crossover import (
    KERNEL_SIGNATURE,
    LATENCY_SIGNATURE,
    MECHANISMS,
    READ_SIGNATURE,
    latency_kernel,
    read_stream,
    stream_kernel,
)
from tma_kernels.crossover.latency import latency_dynamic_shared_bytes
from tma_study import gpu as gpu_mod
from tma_study.harness.timing import CorrectnessError
from tma_study.studies.crossover import measure, reference
from tma_study.studies.crossover.grid import (
    ORDER_MULTIPLIERS,
    TMA_ENGINE_MECHANISMS,
    TMA_ENGINE_PRODUCER_THREADS,
    StreamConfig,
    fits,
)

pytestmark = pytest.mark.gpu

#: name -> (Python kernel, its one explicit signature); compiled on the CPU by
#: tests/cpu/kernels/test_gpu_test_kernels_compile.py (the GPU tests use measure._compile).
KERNELS = {
    **{f"stream_{m}": (stream_kernel(m), KERNEL_SIGNATURE) for m in MECHANISMS},
    **{f"latency_{m}": (latency_kernel(m), LATENCY_SIGNATURE) for m in MECHANISMS},
    "read_stream": (read_stream, READ_SIGNATURE),
}

MiB = 1 << 20
WORKING_SET = "test32m"
WORKING_SET_BYTES = 32 * MiB
PASSES = 2
SIZES = (256, 4096, 65536)
ACCESS_ORDERS = ("scattered", "sequential")
NEGATIVE_SIZE = 4096
LATENCY_SIZES = (256, 65536)
CHAIN_SIZES = (16, 256)          # every chase form (measure.chases), as config.yaml's latency section
CHASE_BYTES = 16 * MiB
CHASE_HOPS = 300  # not a multiple of any chunk count here: the chase cannot end where it began
WORD_BITS = 32


class Knobs:
    """One ring setting; the stage holds max(transfer, min_stage_bytes) bytes."""

    def __init__(self, stages, ctas_per_sm, consumer_threads, producer_threads, issue_threads,
                 min_stage_bytes):
        self.stages, self.ctas_per_sm = stages, ctas_per_sm
        self.consumer_threads, self.producer_threads = consumer_threads, producer_threads
        self.issue_threads, self.min_stage_bytes = issue_threads, min_stage_bytes

    def config(self, mechanism: str, access_order: str, bytes_per_transfer: int) -> StreamConfig:
        """The StreamConfig the study would build for this setting (TMA-engine mechanisms:
        one producer warp and ``issue_threads`` lanes; the others: one issuing lane)."""
        engine = mechanism in TMA_ENGINE_MECHANISMS
        stage_bytes = max(bytes_per_transfer, self.min_stage_bytes)
        return StreamConfig(
            mechanism=mechanism,
            working_set=WORKING_SET,
            working_set_bytes=WORKING_SET_BYTES,
            bytes_per_launch=PASSES * WORKING_SET_BYTES,
            access_order=access_order,
            bytes_per_transfer=bytes_per_transfer,
            ring_bytes_per_sm=stage_bytes * self.stages * self.ctas_per_sm,
            stages=self.stages,
            ctas_per_sm=self.ctas_per_sm,
            consumer_threads=self.consumer_threads,
            producer_threads=TMA_ENGINE_PRODUCER_THREADS if engine else self.producer_threads,
            issue_threads=self.issue_threads if engine else 1,
        )


KNOBS = (
    Knobs(stages=2, ctas_per_sm=1, consumer_threads=128, producer_threads=128, issue_threads=1,
          min_stage_bytes=16384),
    Knobs(stages=4, ctas_per_sm=2, consumer_threads=256, producer_threads=512, issue_threads=32,
          min_stage_bytes=8192),  # 64 KiB transfers do not fit 2 CTAs x 4 stages: not generated
    Knobs(stages=2, ctas_per_sm=1, consumer_threads=256, producer_threads=512, issue_threads=32,
          min_stage_bytes=32768),
)


def stream_configs():
    """Every (mechanism, order, size, knobs) configuration that fits an SM, as the grid keeps."""
    configs = [
        knobs.config(mechanism, order, size)
        for mechanism in MECHANISMS
        for order in ACCESS_ORDERS
        for size in SIZES
        for knobs in KNOBS
    ]
    return [c for c in configs if fits(c)]


STREAM_CONFIGS = stream_configs()
assert {(c.mechanism, c.access_order, c.bytes_per_transfer) for c in STREAM_CONFIGS} == {
    (m, o, s) for m in MECHANISMS for o in ACCESS_ORDERS for s in SIZES
}, "every (mechanism, order, size) must keep at least one ring setting"
assert set(ACCESS_ORDERS) <= set(ORDER_MULTIPLIERS)


# ---------------------------------------------------------------- fixtures and helpers
@pytest.fixture(scope="module")
def gpu():
    return gpu_mod.require_hopper(gpu_mod.detect())


@pytest.fixture(scope="module")
def compiled():
    """(stream kernels, latency kernels, read kernel), loaded from the kernel cache and
    configured by measure.py."""
    study = {"mechanisms": list(MECHANISMS), "bytes_per_transfer": list(SIZES),
             "latency": {"chain_bytes_per_transfer": list(CHAIN_SIZES)}}
    return measure._kernels(study, STREAM_CONFIGS)[:3]


def fresh_rng():
    seed = int.from_bytes(os.urandom(8), "little")
    return seed, np.random.default_rng(seed)


def new_working_set(gpu) -> measure.WorkingSet:
    """A new 32 MiB working set read PASSES times per launch; its random contents are
    drawn by the first check that uses it (WorkingSet.ensure_fresh)."""
    ws = measure.WorkingSet(WORKING_SET, WORKING_SET_BYTES, PASSES * WORKING_SET_BYTES,
                            gpu.l2_bytes)
    assert ws.passes == PASSES
    return ws


def flip_one_bit(ws: measure.WorkingSet) -> str:
    """Flip one random bit of one random word of the device buffer (not of the host sums)."""
    seed, rng = fresh_rng()
    index = int(rng.integers(ws.device.size))
    bit = int(rng.integers(WORD_BITS))
    view = ws.device[index:index + 1]
    word = view.copy_to_host()
    view.copy_to_device(word ^ np.uint32(1 << bit))
    return f"seed={seed}: word {index}, bit {bit}"


def config_id(config: StreamConfig) -> str:
    return (f"{config.mechanism}-{config.access_order}-B{config.bytes_per_transfer}"
            f"-s{config.stages}-c{config.ctas_per_sm}"
            f"-t{config.consumer_threads}+{config.producer_threads}-i{config.issue_threads}")


# ---------------------------------------------------------------- stream kernels
@pytest.mark.parametrize("config", STREAM_CONFIGS, ids=config_id)
def test_stream_checksum_matches_reference(config, gpu, compiled):
    streams, _, _ = compiled
    ws = new_working_set(gpu)
    case = measure._stream_case(config, streams[config.mechanism], ws, gpu.sm_count)
    case.check()  # raises CorrectnessError on a mismatch


@pytest.mark.parametrize("mechanism", list(MECHANISMS))
def test_stream_check_fails_on_a_flipped_word(mechanism, gpu, compiled):
    streams, _, _ = compiled
    config = KNOBS[0].config(mechanism, "scattered", NEGATIVE_SIZE)
    ws = new_working_set(gpu)
    case = measure._stream_case(config, streams[mechanism], ws, gpu.sm_count)
    case.check()  # intact data: passes, and fixes the reference sums of this generation
    where = flip_one_bit(ws)
    with pytest.raises(CorrectnessError):
        case.check()  # same generation: no new data, the reference is the old one
    print(f"flipped {where}")


# ---------------------------------------------------------------- latency chase
CHAIN_FORMS = [(chase, size) for size in CHAIN_SIZES
               for chase in measure.chases(MECHANISMS, size, [], CHAIN_SIZES) if chase.chain != "full"]


@pytest.mark.parametrize("chase, bytes_per_transfer", CHAIN_FORMS,
                         ids=[f"{c.chain}-{c.mechanism}-{b}" for c, b in CHAIN_FORMS])
def test_every_chase_form_ends_at_the_chunk_follow_predicts(chase, bytes_per_transfer, compiled):
    """The one-thread and issue-to-arrival chases (a bounded wait: a lost completion ends the
    kernel with result[3] = 1 instead of hanging)."""
    _, latencies, _ = compiled
    seed, rng = fresh_rng()
    chunk_count = CHASE_BYTES // bytes_per_transfer
    words_per_chunk = bytes_per_transfer // measure.ELEMENT_BYTES
    successor = reference.chase_chain(chunk_count, rng)
    words = rng.integers(1, 2**32, size=CHASE_BYTES // measure.ELEMENT_BYTES, dtype=np.uint32)
    words[np.arange(chunk_count) * words_per_chunk] = successor
    chain = cuda.to_device(words)
    tmap = measure._chunk_tensor_map(chain, CHASE_BYTES, bytes_per_transfer)
    start = int(rng.integers(chunk_count))
    path = reference.chase_path(successor, start, CHASE_HOPS)
    d_result = cuda.to_device(rng.integers(2**32, 2**63, size=5, dtype=np.uint64))
    latencies[chase.kernel_name][1, chase.threads, 0, latency_dynamic_shared_bytes(bytes_per_transfer)](
        int(chain.__cuda_array_interface__["data"][0]), tmap.address if chase.mechanism == "tma_tile" else 0,
        bytes_per_transfer.bit_length() - 1, chunk_count - 1, start, CHASE_HOPS, 1, d_result)
    cuda.synchronize()
    cycles, nanoseconds, final, given_up, checksum = (int(v) for v in d_result.copy_to_host())
    assert final == int(successor[path[-1]]), f"seed={seed}: ended at chunk {final}"
    assert 0 < cycles < 2**32 and 0 < nanoseconds < 2**32, (cycles, nanoseconds)
    if chase.checks_chain_result:
        assert given_up == 0
        if chase.mechanism == "plain_loads":
            assert checksum == reference.chunk_word_sum(words, words_per_chunk, path), f"seed={seed}"


@pytest.mark.parametrize("bytes_per_transfer", LATENCY_SIZES)
@pytest.mark.parametrize("mechanism", list(MECHANISMS))
def test_latency_chase_ends_at_the_chunk_follow_predicts(mechanism, bytes_per_transfer, compiled):
    _, latencies, _ = compiled
    seed, rng = fresh_rng()
    chunk_count = CHASE_BYTES // bytes_per_transfer
    successor = reference.chase_chain(chunk_count, rng)
    words = rng.integers(1, 2**32, size=CHASE_BYTES // measure.ELEMENT_BYTES, dtype=np.uint32)
    words[np.arange(chunk_count) * (bytes_per_transfer // measure.ELEMENT_BYTES)] = successor
    chain = cuda.to_device(words)
    tmap = measure._chunk_tensor_map(chain, CHASE_BYTES, bytes_per_transfer)
    address = int(chain.__cuda_array_interface__["data"][0])
    start = int(rng.integers(chunk_count))
    want = reference.follow(successor, start, CHASE_HOPS)
    assert want != start
    # poison above any chunk index, so it can never pass for a result
    d_result = cuda.to_device(rng.integers(2**32, 2**63, size=3, dtype=np.uint64))
    latencies[f"latency_{mechanism}"][
        1, measure.LATENCY_THREADS[mechanism], 0, latency_dynamic_shared_bytes(bytes_per_transfer)
    ](
        address,
        tmap.address if mechanism == "tma_tile" else 0,
        bytes_per_transfer.bit_length() - 1,
        chunk_count - 1,
        start,
        CHASE_HOPS,
        1,
        d_result,
    )
    cuda.synchronize()
    cycles, nanoseconds, final = (int(v) for v in d_result.copy_to_host())
    assert final == want, f"seed={seed}: ended at chunk {final}, expected {want}"
    assert 0 < cycles < 2**32 and 0 < nanoseconds < 2**32, (cycles, nanoseconds)


# ---------------------------------------------------------------- ceilings
def read_ceiling_case(cases, ctas_per_sm):
    [case] = [case for columns, case in cases
              if columns["ceiling"] == "read_stream" and columns["ctas_per_sm"] == ctas_per_sm]
    return case


@pytest.mark.parametrize("ctas_per_sm", measure.READ_CEILING_CTAS_PER_SM)
def test_read_ceiling_checksum_matches_reference(ctas_per_sm, gpu, compiled):
    _, _, read_kernel = compiled
    ws = new_working_set(gpu)
    cases = measure._ceiling_cases(read_kernel, {ws.name: ws}, gpu.sm_count)
    read_ceiling_case(cases, ctas_per_sm).check()
    assert ws.expected(None) == reference.expected_checksum(ws.sums, None, PASSES)


def test_read_ceiling_check_fails_on_a_flipped_word(gpu, compiled):
    _, _, read_kernel = compiled
    ws = new_working_set(gpu)
    cases = measure._ceiling_cases(read_kernel, {ws.name: ws}, gpu.sm_count)
    case = read_ceiling_case(cases, measure.READ_CEILING_CTAS_PER_SM[0])
    case.check()
    where = flip_one_bit(ws)
    with pytest.raises(CorrectnessError):
        case.check()
    print(f"flipped {where}")


def test_device_to_device_copy_ceiling_check_passes(gpu, compiled):
    _, _, read_kernel = compiled
    ws = new_working_set(gpu)
    cases = measure._ceiling_cases(read_kernel, {ws.name: ws}, gpu.sm_count)
    [copy_case] = [case for columns, case in cases if columns["ceiling"] == "d2d_copy"]
    copy_case.check()
