"""GPU: the tma_issue study's kernels on a Hopper GPU, through the measurement's own code.

- Every chase form over a small and a large working set ends at the chunk the host's path
  predicts, and no wait gives up (``measure.measure_chases`` on a two-hop-count config);
- the issue-rate kernel's check launch matches the host's checksums for both mechanisms at the
  smallest and a larger size, one and several issuing threads (``issue_rate_case(...).check()``),
  and fails on a source word flipped after the host's sums were taken.
"""
import functools

import pytest
from tma_kernels.tma_issue import CHASE_SIGNATURE, FORMS, ISSUE_RATE_SIGNATURE, chase_kernel, issue_rate_kernel

from tma_study.harness.kernel_builds import load_cached
from tma_study.harness.timing import CorrectnessError

KERNELS = {**{f"chase_{form}": (chase_kernel(form), CHASE_SIGNATURE) for form in FORMS},
           **{f"issue_rate_{m}": (issue_rate_kernel(m), ISSUE_RATE_SIGNATURE) for m in ("tma_tile", "bulk_copy")}}


@functools.cache
def kernel(name):
    return load_cached(name, *KERNELS[name])


def gpu_info():
    from tma_study import gpu as gpu_mod
    return gpu_mod.require_hopper(gpu_mod.detect())


def test_every_chase_form_ends_where_the_host_predicts():
    from tma_kernels import launch
    from tma_kernels.tma_issue import chase_dynamic_shared_bytes

    from tma_study.studies.tma_issue.measure import measure_chases
    settings = {"bytes_per_transfer": 16, "working_set_bytes": [1 << 22, 1 << 26], "hops": 64, "repeats": 2}
    kernels = {f"chase_{form}": kernel(f"chase_{form}") for form in FORMS}
    for k in kernels.values():
        launch.set_max_dynamic_shared_bytes(k, chase_dynamic_shared_bytes(16))
    rows = measure_chases(settings, kernels, gpu_info())        # raises on a wrong chunk or a lost wait
    assert len(rows) == 2 * len(FORMS) * 2
    assert (rows.cycles_per_hop_median > 100).all() and (rows.cycles_per_hop_median < 5000).all()


@pytest.mark.parametrize("mechanism", ["tma_tile", "bulk_copy"])
@pytest.mark.parametrize("size, threads", [(16, 1), (256, 32), (1024, 128)])
def test_issue_rate_check_matches_the_host_and_catches_a_flipped_word(mechanism, size, threads):
    from tma_kernels import launch

    from tma_study.harness.buffers import fresh_rng
    from tma_study.studies.tma_issue.issue_rate import (IssueRateConfig, IssueRateSource, dynamic_shared_bytes,
                                                         issue_rate_case)
    from tma_study.harness.chunk_maps import chunk_tensor_map
    gpu = gpu_info()
    config = IssueRateConfig(mechanism, size, threads, 4, 65536, 1 << 20, 1 << 22)
    source = IssueRateSource(config.working_set_bytes, fresh_rng())
    tmap = chunk_tensor_map(source.device, source.nbytes, size) if mechanism == "tma_tile" else None
    k = kernel(f"issue_rate_{mechanism}")
    launch.set_max_dynamic_shared_bytes(k, dynamic_shared_bytes(config, gpu))
    case = issue_rate_case(config, k, source, tmap, gpu)
    case.check()
    flipped = source.words.copy()
    last_chunk_of_cta0 = ((config.rounds - 1) * config.transfers_per_round) & (source.nbytes // size - 1)
    flipped[last_chunk_of_cta0 * size // 4] ^= 1                # a word CTA 0's last round copies
    source.device.copy_to_device(flipped)
    with pytest.raises(CorrectnessError):
        case.check()
