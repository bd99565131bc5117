"""FlashAttention-3's paged-KV TMA rule and tile sizes, as transcribed in fa3_rule.py.

Expected values are read off FA3's source (commit in fa3_rule.FA3_COMMIT): tile_size.h for
the tiles, flash_api.cpp get_pagedkv_tma for the choice.
"""
import pytest

from tma_study.fa3_rule import (
    FA3_COMMIT,
    effective_causal,
    fa3_choice,
    round_up_headdim,
    tile_size_fwd_sm90,
)


@pytest.mark.parametrize("head_dim, element_size, causal, non_tma, block_mn", [
    (64, 2, True, False, (192, 128)), (64, 2, False, False, (192, 192)), (64, 2, False, True, (192, 128)),
    (128, 2, True, False, (128, 128)), (128, 2, False, False, (128, 176)), (128, 2, False, True, (128, 128)),
    (256, 2, True, False, (128, 80)), (256, 2, False, True, (128, 80)),
    (64, 1, True, False, (192, 160)), (128, 1, True, False, (128, 224)), (128, 1, True, True, (128, 160)),
    (256, 1, False, False, (128, 128)), (256, 1, True, True, (128, 128)),
    (96, 2, False, False, (192, 144)), (192, 2, False, True, (128, 96)),
])
def test_tile_sizes(head_dim, element_size, causal, non_tma, block_mn):
    tile = tile_size_fwd_sm90(head_dim, head_dim, causal, False, element_size, paged_kv_non_tma=non_tma)
    assert (tile.block_m, tile.block_n) == block_mn


def test_fp8_hdim256_paged_non_tma_disables_intra_wg_overlap():
    assert not tile_size_fwd_sm90(256, 256, False, False, 1, paged_kv_non_tma=True).intra_wg_overlap


def test_round_up_headdim():
    assert [round_up_headdim(d) for d in (32, 64, 80, 128, 160, 256)] == [64, 64, 96, 128, 192, 256]


def test_decode_causal_special_case():
    assert effective_causal(True, 1, 128) is True          # kept: paged, 64 < d <= 128
    assert effective_causal(True, 1, 64) is False
    assert effective_causal(True, 1, 256) is False
    assert effective_causal(True, 4, 256) is True           # more than one query token
    assert effective_causal(True, 1, 128, paged=False) is False


@pytest.mark.parametrize("page, seqlen_q, heads, d, dtype, tma", [
    # prefill, Llama-3-8B shape, bf16 causal: kBlockN 128 -> pages 128, 256 use TMA
    (64, 2048, (32, 8), 128, "bf16", False), (128, 2048, (32, 8), 128, "bf16", True),
    (256, 512, (32, 8), 128, "bf16", True),
    # hdim 256 bf16: kBlockN 80 divides no power-of-two page
    (256, 2048, (8, 1), 256, "bf16", False),
    # fp8 hdim 128: kBlockN 224 -> never; fp8 hdim 256: 128 -> pages 128, 256
    (256, 2048, (32, 8), 128, "e4m3", False), (128, 2048, (8, 1), 256, "e4m3", True),
    # decode: seqlen_q x group <= kBlockM -> never TMA, whatever the page
    (256, 1, (32, 8), 128, "bf16", False), (256, 4, (64, 8), 128, "bf16", False),
    (256, 4, (32, 32), 128, "bf16", False),
    # 16/16/64 prefill: kBlockM 192 < 512 rows, kBlockN 128
    (128, 512, (16, 16), 64, "bf16", True), (32, 512, (16, 16), 64, "bf16", False),
])
def test_fa3_choice(page, seqlen_q, heads, d, dtype, tma):
    choice = fa3_choice(page, seqlen_q, heads[0], heads[1], d, dtype, causal=True)
    assert choice.uses_tma is tma, choice.reason
    assert choice.load_path == ("tma" if tma else "cp_async")


def test_non_tma_kernel_runs_its_own_tile():
    choice = fa3_choice(64, 2048, 32, 8, 128, "e4m3", causal=True)
    assert (choice.tma_tile.block_n, choice.kernel_tile.block_n) == (224, 160)
    assert "not a multiple of kBlockN 224" in choice.reason


def test_leftpad_or_append_disable_tma():
    assert not fa3_choice(256, 2048, 32, 8, 128, "bf16", True, leftpad_k=True).uses_tma
    assert not fa3_choice(256, 2048, 32, 8, 128, "bf16", True, append_kv=True).uses_tma


def test_unknown_dtype_and_commit_recorded():
    with pytest.raises(ValueError, match="'fp32' is not one of"):
        fa3_choice(16, 1, 8, 8, 128, "fp32", True)
    assert len(FA3_COMMIT) == 40
