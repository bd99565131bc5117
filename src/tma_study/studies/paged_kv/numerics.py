"""bf16 and fp8 e4m3 on the host, in plain numpy (no ml_dtypes): the bit patterns the
kernel reads, and their exact values for the float64 reference.

- bf16: the upper 16 bits of an IEEE float32; rounding float32 -> bf16 is round to
  nearest, ties to even (what ``cvt.rn.bf16x2.f32`` does); NaN stays a quiet NaN.
- e4m3 (OCP FP8 E4M3, PTX ``.e4m3``): sign, 4 exponent bits (bias 7), 3 mantissa bits;
  no infinities; ``S.1111.111`` is NaN; largest finite 448; smallest subnormal 2**-9.
  Rounding is to nearest, ties to even, saturating to +-448 (``cvt.rn.satfinite``).
"""
from __future__ import annotations

import numpy as np

BF16_QUIET_NAN = np.uint16(0x7FC0)
E4M3_NAN = np.uint8(0x7F)
E4M3_MAX = 448.0
E4M3_EXPONENT_BIAS = 7
E4M3_MANTISSA_BITS = 3
_SIGN_BIT_E4M3 = 0x80


def float_to_bf16_bits(values) -> np.ndarray:
    """float32 (or anything castable) -> uint16 bf16 bits, round to nearest even."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    out = rounded.astype(np.uint16)
    out[np.isnan(bits.view(np.float32))] = BF16_QUIET_NAN
    return out


def bf16_bits_to_float(bits) -> np.ndarray:
    """uint16 bf16 bits -> float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _e4m3_table() -> np.ndarray:
    """float64 value of every e4m3 code 0..255 (NaN for the two NaN codes)."""
    codes = np.arange(256)
    sign = np.where(codes & _SIGN_BIT_E4M3, -1.0, 1.0)
    exponent = (codes >> E4M3_MANTISSA_BITS) & 0xF
    mantissa = codes & 0x7
    normal = (1.0 + mantissa / 8.0) * np.exp2(exponent - E4M3_EXPONENT_BIAS)
    subnormal = (mantissa / 8.0) * np.exp2(1 - E4M3_EXPONENT_BIAS)
    values = sign * np.where(exponent == 0, subnormal, normal)
    values[(codes & 0x7F) == 0x7F] = np.nan
    return values


E4M3_VALUES = _e4m3_table()
_POSITIVE_FINITE = E4M3_VALUES[:0x7F]          # codes 0x00 .. 0x7E, increasing


def e4m3_bits_to_float(bits) -> np.ndarray:
    """uint8 e4m3 bits -> float64 values (exact; NaN codes give NaN)."""
    return E4M3_VALUES[np.asarray(bits, dtype=np.uint8)]


def float_to_e4m3_bits(values) -> np.ndarray:
    """Real values -> uint8 e4m3 bits: nearest, ties to even, saturated to +-448; NaN -> NaN.

    Arithmetic, not a table search (the measure step rounds millions of values per check):
    e4m3 values in the binade [2**e, 2**(e+1)), e >= -6, are multiples of 2**(e-3), and below
    2**-6 (subnormals) multiples of 2**-9; ``rint`` of the magnitude over that quantum rounds to
    the nearest multiple, ties to the even one, whose parity is the mantissa's last bit (a
    carry to 16 quanta is the next binade's 1.0, mantissa 0). Division by a power of two is
    exact in float64. tests/cpu/paged_kv/test_paged_kv_numerics.py checks it against a nearest-value
    search over the 253 finite codes."""
    x = np.asarray(values, dtype=np.float64)
    nan = np.isnan(x)
    magnitude = np.minimum(np.abs(np.where(nan, 0.0, x)), E4M3_MAX)
    _, exponent = np.frexp(magnitude)                     # magnitude = f * 2**exponent, f in [0.5, 1)
    binade = np.maximum(exponent - 1, 1 - E4M3_EXPONENT_BIAS)
    quanta = np.rint(np.ldexp(magnitude, E4M3_MANTISSA_BITS - binade))     # value / quantum
    rounded = np.ldexp(quanta, binade - E4M3_MANTISSA_BITS)
    _, exponent = np.frexp(rounded)
    normal = rounded >= 2.0 ** (1 - E4M3_EXPONENT_BIAS)
    field = np.where(normal, exponent - 1 + E4M3_EXPONENT_BIAS, 0)
    mantissa = np.where(normal, np.ldexp(rounded, E4M3_MANTISSA_BITS + 1 - exponent) - 8,
                        np.ldexp(rounded, E4M3_MANTISSA_BITS - 1 + E4M3_EXPONENT_BIAS))
    code = ((field << E4M3_MANTISSA_BITS) + mantissa.astype(np.int64)).astype(np.uint8)
    code = np.where(np.signbit(x), code | _SIGN_BIT_E4M3, code)
    return np.where(nan, E4M3_NAN, code).astype(np.uint8)


def round_to(dtype: str, values) -> tuple[np.ndarray, np.ndarray]:
    """(bits the kernel reads, their exact float64 values) of ``values`` in ``dtype``."""
    if dtype == "bf16":
        bits = float_to_bf16_bits(values)
        return bits, bf16_bits_to_float(bits).astype(np.float64)
    if dtype == "e4m3":
        bits = float_to_e4m3_bits(values)
        return bits, e4m3_bits_to_float(bits)
    raise ValueError(f"dtype {dtype!r} is not one of 'bf16', 'e4m3'")


def nan_bits(dtype: str):
    """A NaN bit pattern of ``dtype`` (poison)."""
    return BF16_QUIET_NAN if dtype == "bf16" else E4M3_NAN
