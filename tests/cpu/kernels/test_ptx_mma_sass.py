"""The tensor-core and conversion intrinsics compile for sm_90a to the SASS they promise.

No GPU needed (numba -> PTX -> ptxas 13.0 -> nvdisasm). Found here, and asserted:
``mma.sync ... .e4m3.e4m3`` has no native instruction on sm_90a (Hopper's fp8 tensor-core
path is ``wgmma``; ``QMMA`` is sm_89 / sm_120): ptxas unpacks the fp8 operands to fp16
(``F2FP.F16.E4M3.UNPACK_B``) and issues two fp16 ``HMMA.16816.F32`` per m16n8k32, so an
fp8 ``mma.sync`` kernel saves bytes moved but no tensor-core time on Hopper. It also adds the
two HMMAs' result into C with four ``FADD`` per mma; ``mma_e4m3_m16n8k32_via_f16`` (what the
paged attention kernel uses) chains them through C instead: no FADD.
"""
import functools

import numba
import pytest
from numba import cuda
from tma_kernels.build import compile_for_sm90a
from tma_kernels.ptx import smem_u32
from tma_kernels.ptx.convert import cvt_bf16x2_f32, cvt_e4m3x2_f32, ex2_approx, prmt
from tma_kernels.ptx.ldmatrix import ldmatrix_x4, ldmatrix_x4_trans
from tma_kernels.ptx.mma import (
    mma_bf16_m16n8k16,
    mma_e4m3_m16n8k32,
    mma_e4m3_m16n8k32_via_f16,
)
from tma_kernels.ptx.wgmma import k_major_descriptor, make_wgmma_rs, make_wgmma_ss

SIGNATURE = "void(uint32[::1], float32[::1])"
TILE_BYTES = 512
SELECT_EVEN_BYTES = 0x6420


def mma_bf16(words, floats):
    d = mma_bf16_m16n8k16(words[0], words[1], words[2], words[3], words[4], words[5],
                          floats[0], floats[1], floats[2], floats[3])
    floats[0], floats[1], floats[2], floats[3] = d[0], d[1], d[2], d[3]


def mma_e4m3(words, floats):
    d = mma_e4m3_m16n8k32(words[0], words[1], words[2], words[3], words[4], words[5],
                          floats[0], floats[1], floats[2], floats[3])
    floats[0], floats[1], floats[2], floats[3] = d[0], d[1], d[2], d[3]


def mma_e4m3_via_f16(words, floats):
    d = mma_e4m3_m16n8k32_via_f16(words[0], words[1], words[2], words[3], words[4], words[5],
                                  floats[0], floats[1], floats[2], floats[3])
    floats[0], floats[1], floats[2], floats[3] = d[0], d[1], d[2], d[3]


def ldmatrix(words, floats):
    tile = smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    r = ldmatrix_x4(tile + numba.uint32(cuda.threadIdx.x * 16))
    words[0], words[1], words[2], words[3] = r[0], r[1], r[2], r[3]


def ldmatrix_trans(words, floats):
    tile = smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    r = ldmatrix_x4_trans(tile + numba.uint32(cuda.threadIdx.x * 16))
    words[0], words[1], words[2], words[3] = r[0], r[1], r[2], r[3]


def conversions(words, floats):
    words[0] = cvt_bf16x2_f32(floats[0], floats[1])
    words[1] = cvt_e4m3x2_f32(floats[2], floats[3])
    words[2] = prmt(words[3], words[4], SELECT_EVEN_BYTES)
    floats[4] = ex2_approx(floats[5])


WGMMA_STEPS = ((0, 0), (32, 32), (64, 64), (96, 96))    # four k-steps along 128-byte rows
WGMMA_TILE_BYTES = 16384     # A: 64 rows of 128 bytes (8 KiB), then B
WGMMA_E4M3 = make_wgmma_ss("e4m3", 16, WGMMA_STEPS)
WGMMA_BF16 = make_wgmma_ss("bf16", 16, WGMMA_STEPS)


def wgmma_e4m3(words, floats):
    tile = smem_u32(cuda.shared.array(WGMMA_TILE_BYTES, numba.uint8))
    d = WGMMA_E4M3(k_major_descriptor(tile, 128), k_major_descriptor(tile + numba.uint32(8192), 128))
    for i in range(8):
        floats[i] = d[i]


def wgmma_bf16(words, floats):
    tile = smem_u32(cuda.shared.array(WGMMA_TILE_BYTES, numba.uint8))
    d = WGMMA_BF16(k_major_descriptor(tile, 128), k_major_descriptor(tile + numba.uint32(8192), 128))
    for i in range(8):
        floats[i] = d[i]


# kernel -> SASS mnemonics (with modifiers) it must contain, and ones it must not
CASES = {
    mma_bf16: (("HMMA.16816.F32.BF16",), ()),
    mma_e4m3: (("F2FP.F16.E4M3.UNPACK_B", "HMMA.16816.F32", "FADD"), ("QMMA", "HMMA.16816.F32.BF16")),
    mma_e4m3_via_f16: (("F2FP.F16.E4M3.UNPACK_B", "HMMA.16816.F32"),
                       ("QMMA", "HMMA.16816.F32.BF16", "FADD")),
    ldmatrix: (("LDSM.16.M88.4",), ("LDSM.16.MT88.4",)),
    ldmatrix_trans: (("LDSM.16.MT88.4",), ()),
    conversions: (("F2FP.BF16.F32.PACK_AB", "F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C", "PRMT",
                   "MUFU.EX2"), ()),
    wgmma_e4m3: (("QGMMA.64", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR.LE"), ("F2FP", "HMMA", "HGMMA")),
    wgmma_bf16: (("HGMMA.64", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR.LE"), ("F2FP", "HMMA", "QGMMA")),
}


@functools.cache
def compiled(kernel):
    return compile_for_sm90a(kernel, SIGNATURE)


@pytest.mark.parametrize("kernel", list(CASES), ids=lambda k: k.__name__)
def test_intrinsic_sass(kernel):
    present, absent = CASES[kernel]
    counts = compiled(kernel).opcode_counts()
    missing = [m for m in present if m not in counts]
    assert not missing, f"{kernel.__name__}: SASS lacks {missing}; has {sorted(counts)}"
    unexpected = [p for p in absent if any(op.startswith(p) for op in counts)]
    assert not unexpected, f"{kernel.__name__}: SASS unexpectedly has {unexpected}"


@pytest.mark.parametrize("kernel", [mma_e4m3, mma_e4m3_via_f16], ids=lambda k: k.__name__)
def test_e4m3_mma_is_two_fp16_hmma(kernel):
    """One m16n8k32 e4m3 mma = two HMMA.16816.F32 (k = 16 each) on sm_90a, either way."""
    assert compiled(kernel).opcode_counts()["HMMA.16816.F32"] == 2



@pytest.mark.parametrize("kernel, opcode", [(wgmma_e4m3, "QGMMA"), (wgmma_bf16, "HGMMA")],
                         ids=["e4m3", "bf16"])
def test_wgmma_is_one_instruction_per_k_step(kernel, opcode):
    """make_wgmma_ss issues one warpgroup mma per k-step, all waited for at the end."""
    counts = compiled(kernel).opcode_counts()
    assert sum(n for op, n in counts.items() if op.startswith(opcode)) == len(WGMMA_STEPS)


WGMMA_BLOCKS = make_wgmma_ss("e4m3", 16, ((0, 0), (32, 32)), a_blocks=(0, 4096))   # two 64-row blocks of A


def wgmma_two_blocks(words, floats):
    tile = smem_u32(cuda.shared.array(WGMMA_TILE_BYTES, numba.uint8))
    d = WGMMA_BLOCKS(k_major_descriptor(tile, 64), k_major_descriptor(tile + numba.uint32(8192), 64))
    for i in range(16):
        floats[i] = d[i]


def test_wgmma_over_a_blocks_is_one_instruction_per_block_and_k_step():
    """a_blocks: each block's k-steps into its own results, one wait for all (consumer_pv.py)."""
    counts = compiled(wgmma_two_blocks).opcode_counts()
    assert sum(n for op, n in counts.items() if op.startswith("QGMMA")) == 2 * 2
    assert counts.get("WARPGROUP.ARRIVE", 0) == 1
    assert WGMMA_BLOCKS.ptx.count("wgmma.wait_group") == 1 and WGMMA_BLOCKS.ptx.count("add.s64 da, $16, 256;") == 1


WGMMA_RS = make_wgmma_rs(16, (0, 32), a_blocks=2)     # A from registers: 2 blocks x 2 k-steps


def wgmma_registers(words, floats):
    tile = smem_u32(cuda.shared.array(WGMMA_TILE_BYTES, numba.uint8))
    w = words
    d = WGMMA_RS(k_major_descriptor(tile, 64), w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7],
                 w[8], w[9], w[10], w[11], w[12], w[13], w[14], w[15])
    for i in range(16):
        floats[i] = d[i]


def test_wgmma_with_a_from_registers():
    """make_wgmma_rs: one QGMMA per block and k-step, A from registers (consumer_pv.make_pv_rs)."""
    counts = compiled(wgmma_registers).opcode_counts()
    assert sum(n for op, n in counts.items() if op.startswith("QGMMA")) == 2 * 2
    assert counts.get("WARPGROUP.ARRIVE", 0) == 1 and "F2FP" not in " ".join(counts)
    assert WGMMA_RS.ptx.count("{$17, $18, $19, $20}") == 1      # block 0, step 0: A after D and B


WGMMA_RS_ACC = make_wgmma_rs(16, (0, 32), a_blocks=2, accumulate=True)   # D += A B in place


def wgmma_registers_accumulate(words, floats):
    tile = smem_u32(cuda.shared.array(WGMMA_TILE_BYTES, numba.uint8))
    w, f = words, floats
    d = WGMMA_RS_ACC(k_major_descriptor(tile, 64), w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7],
                     w[8], w[9], w[10], w[11], w[12], w[13], w[14], w[15],
                     f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12], f[13],
                     f[14], f[15])
    for i in range(16):
        floats[i] = d[i]


def test_wgmma_with_a_from_registers_accumulates_in_place():
    """make_wgmma_rs(accumulate=True) (consumer_pv's kq_wgmma_rs_lazy): the accumulators go in
    tied to the results, and every step adds to them (scale-d true), none starts from zero."""
    counts = compiled(wgmma_registers_accumulate).opcode_counts()
    assert sum(n for op, n in counts.items() if op.startswith("QGMMA")) == 2 * 2
    assert counts.get("WARPGROUP.ARRIVE", 0) == 1
    steps = [line for line in WGMMA_RS_ACC.ptx.splitlines() if line.startswith("wgmma.mma_async")]
    assert len(steps) == 4 and all(line.endswith("p1, 1, 1;") for line in steps)
    assert WGMMA_RS_ACC.ptx.count("{$17, $18, $19, $20}") == 1      # the A operands' numbering is unchanged


def test_wgmma_factory_rejects_what_it_cannot_build():
    with pytest.raises(ValueError, match="dtype"):
        make_wgmma_ss("fp16", 16, WGMMA_STEPS)
    with pytest.raises(ValueError, match="n=12"):
        make_wgmma_ss("e4m3", 12, WGMMA_STEPS)
    with pytest.raises(ValueError, match="multiple of 16"):
        make_wgmma_ss("e4m3", 16, ((0, 8),))
    with pytest.raises(ValueError, match="a_blocks"):
        make_wgmma_ss("e4m3", 16, WGMMA_STEPS, a_blocks=(8,))


def test_k_major_descriptor_fields():
    """Bit fields as CUTLASS's GmmaDescriptor: start / 16, LBO 1, SBO one 8-row atom / 16, layout."""
    descriptor = k_major_descriptor.py_func
    d = int(descriptor(numba.uint32(0x12400), 128))
    assert d & 0x3FFF == 0x12400 >> 4 and (d >> 16) & 0x3FFF == 1
    assert (d >> 32) & 0x3FFF == 1024 >> 4 and d >> 62 == 1
    d = int(descriptor(numba.uint32(0x800), 64))
    assert (d >> 32) & 0x3FFF == 512 >> 4 and d >> 62 == 2
