"""A memory operand as a kernel author describes it to the advisor, checked field by field.

An operand is one tensor a kernel loads into shared memory (or registers), described by what
decides how it should be loaded:

- ``level``: where its bytes come from: ``hbm`` (streamed once, or a working set well over the
  L2), ``l2`` (re-read by many CTAs, or a working set well under the L2), ``unknown`` (both are
  evaluated and the choice that loses least at either is given);
- ``shape``: ``box`` (an affine tile: ``box_dims`` in elements, innermost last, and
  ``element_bytes``), ``bulk`` (one contiguous range of ``bytes_per_transfer``) or ``gather``
  (rows or pages found through an index: ``row_bytes`` each, contiguous inside; with
  ``element_bytes``, a TMA copy of a row holds at most 256 elements);
- ``bytes_in_flight_per_sm``: stages x stage bytes x CTAs per SM (or give those three);
- ``pattern``: ``streaming`` (independent transfers, a pipeline keeps several in flight) or
  ``dependent`` (the next address comes from the last load: latency, not bandwidth);
- ``cluster_sharing``: how many CTAs of a cluster need the same tile (1: none share it);
- ``consumer``: ``load_only``, ``mma`` (tensor-core MMA: ``mma_dtype`` and ``mma_tile``
  "MxNxK") or ``compute`` (``flops_per_byte`` on the CUDA cores).

:func:`from_mapping` turns a dict (JSON, YAML, the CLI's options) into an :class:`Operand` or
raises :class:`OperandError` naming the field, what it got and what is allowed.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

LEVELS = ("hbm", "l2", "unknown")
SHAPES = ("box", "bulk", "gather")
PATTERNS = ("streaming", "dependent")
CONSUMERS = ("load_only", "mma", "compute")
MMA_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "tf32": 4}
ELEMENT_BYTES = (1, 2, 4, 8)
TRANSFER_ALIGN_BYTES = 16          # TMA, bulk copies and cp.async move multiples of 16 bytes
MAX_CLUSTER_SHARING = 16           # the largest (non-portable) cluster on Hopper
MAX_BOX_DIM_ELEMENTS = 256         # a TMA box dimension holds at most 256 elements
MAX_BOX_RANK = 5
FIELDS = ("level", "shape", "box_dims", "element_bytes", "bytes_per_transfer", "row_bytes",
          "bytes_in_flight_per_sm", "stages", "stage_bytes", "ctas_per_sm", "pattern",
          "cluster_sharing", "consumer", "mma_dtype", "mma_tile", "flops_per_byte", "name")


class OperandError(ValueError):
    """An operand description the advisor cannot take: the message names the field."""


@dataclass(frozen=True)
class Operand:
    level: str
    shape: str
    bytes_per_transfer: int
    bytes_in_flight_per_sm: int | None      # None: a dependent operand (one transfer in flight)
    pattern: str = "streaming"
    cluster_sharing: int = 1
    consumer: str = "load_only"
    mma_dtype: str | None = None
    mma_tile: tuple[int, int, int] | None = None
    flops_per_byte: float = 0.0             # of the consumer, per byte of this operand loaded
    box_dims: tuple[int, ...] | None = None
    element_bytes: int | None = None
    name: str = ""

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}


def _choice(spec: dict, field: str, allowed: tuple, default=None):
    value = spec.get(field, default)
    if value is None:
        raise OperandError(f"operand field {field!r} is required; allowed: {', '.join(allowed)}")
    if value not in allowed:
        raise OperandError(f"operand field {field!r}: {value!r} is not allowed; allowed: {', '.join(allowed)}")
    return value


def _int(spec: dict, field: str, low: int = 1, high: int | None = None, default=None, required=True) -> int | None:
    value = spec.get(field, default)
    if value is None:
        if required:
            raise OperandError(f"operand field {field!r} is required (an integer >= {low})")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
        raise OperandError(f"operand field {field!r}: {value!r} is not an integer")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise OperandError(f"operand field {field!r}: {value} is out of range; allowed: {bound}")
    return value


def _element_bytes(spec: dict) -> int:
    element = spec.get("element_bytes")
    if element not in ELEMENT_BYTES:
        raise OperandError(f"operand field 'element_bytes': {element!r} is not allowed; allowed: "
                           f"{', '.join(map(str, ELEMENT_BYTES))}")
    return element


def _box(spec: dict) -> tuple[tuple[int, ...], int, int]:
    dims = spec.get("box_dims")
    if not isinstance(dims, (list, tuple)) or not dims:
        raise OperandError("operand field 'box_dims' is required for shape 'box': a list of 1 to "
                           f"{MAX_BOX_RANK} element counts, innermost last, e.g. [128, 64]")
    if len(dims) > MAX_BOX_RANK:
        raise OperandError(f"operand field 'box_dims': {len(dims)} dimensions; allowed: 1 to {MAX_BOX_RANK}")
    dims = tuple(_int({"box_dims": d}, "box_dims", 1) for d in dims)
    element = _element_bytes(spec)
    inner = dims[-1] * element
    if inner % TRANSFER_ALIGN_BYTES:
        raise OperandError(f"operand field 'box_dims': the innermost dimension is {inner} bytes; a TMA box "
                           f"needs a multiple of {TRANSFER_ALIGN_BYTES}")
    return dims, element, math.prod(dims) * element


def _transfer(spec: dict, shape: str) -> tuple[int, tuple | None, int | None]:
    if shape == "box":
        dims, element, size = _box(spec)
    elif shape == "gather":
        size, dims, element = _int(spec, "row_bytes", TRANSFER_ALIGN_BYTES), None, None
        if size % TRANSFER_ALIGN_BYTES:
            raise OperandError(f"operand field 'row_bytes': {size} is not a multiple of {TRANSFER_ALIGN_BYTES} "
                               "(rows that are not are outside what TMA or cp.async can move)")
    else:
        size, dims, element = _int(spec, "bytes_per_transfer", TRANSFER_ALIGN_BYTES), None, None
        if size % TRANSFER_ALIGN_BYTES:
            raise OperandError(f"operand field 'bytes_per_transfer': {size} is not a multiple of "
                               f"{TRANSFER_ALIGN_BYTES}")
    given = spec.get("bytes_per_transfer")
    if shape != "bulk" and given is not None and _int(spec, "bytes_per_transfer") != size:
        raise OperandError(f"operand field 'bytes_per_transfer': {given} disagrees with the {shape}'s own "
                           f"size, {size} bytes; give one or make them agree")
    return size, dims, element


def _in_flight(spec: dict, pattern: str) -> int | None:
    parts = [spec.get(k) for k in ("stages", "stage_bytes", "ctas_per_sm")]
    if spec.get("bytes_in_flight_per_sm") is not None:
        if any(p is not None for p in parts):
            raise OperandError("operand field 'bytes_in_flight_per_sm': give it or stages, stage_bytes and "
                               "ctas_per_sm, not both")
        return _int(spec, "bytes_in_flight_per_sm", TRANSFER_ALIGN_BYTES)
    if all(p is not None for p in parts):
        return math.prod(_int(spec, k) for k in ("stages", "stage_bytes", "ctas_per_sm"))
    if pattern == "dependent":
        return None
    missing = [k for k, p in zip(("stages", "stage_bytes", "ctas_per_sm"), parts) if p is None]
    raise OperandError("operand field 'bytes_in_flight_per_sm' is required for a streaming operand (stages x "
                       f"stage bytes x CTAs per SM), or all of stages, stage_bytes, ctas_per_sm (missing: "
                       f"{', '.join(missing)})")


def _consumer(spec: dict) -> dict:
    consumer = _choice(spec, "consumer", CONSUMERS, "load_only")
    out = {"consumer": consumer, "mma_dtype": None, "mma_tile": None, "flops_per_byte": 0.0}
    if consumer == "mma":
        out["mma_dtype"] = _choice(spec, "mma_dtype", tuple(MMA_DTYPE_BYTES))
        tile = spec.get("mma_tile")
        parts = str(tile).lower().split("x") if tile is not None else []
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise OperandError(f"operand field 'mma_tile': {tile!r} is not allowed; allowed: the CTA's MMA tile "
                               "as MxNxK, e.g. 128x128x64")
        out["mma_tile"] = tuple(int(p) for p in parts)
    elif consumer == "compute":
        value = spec.get("flops_per_byte")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
            raise OperandError(f"operand field 'flops_per_byte': {value!r} is not allowed; allowed: a positive "
                               "number (the consumer's CUDA-core FLOPs per byte of this operand)")
        out["flops_per_byte"] = float(value)
    return out


def from_mapping(spec: dict) -> Operand:
    """The operand ``spec`` describes (see the module doc), or OperandError naming the field."""
    if not isinstance(spec, dict):
        raise OperandError(f"an operand is a mapping of fields ({', '.join(FIELDS)}), not {type(spec).__name__}")
    unknown = sorted(set(spec) - set(FIELDS))
    if unknown:
        raise OperandError(f"unknown operand field(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(FIELDS)}")
    level = _choice(spec, "level", LEVELS)
    shape = _choice(spec, "shape", SHAPES)
    pattern = _choice(spec, "pattern", PATTERNS, "streaming")
    size, dims, element = _transfer(spec, shape)
    if shape != "box" and spec.get("box_dims") is not None:
        raise OperandError(f"operand field 'box_dims' describes a box; shape is {shape!r}")
    if shape == "gather" and spec.get("element_bytes") is not None:
        element = _element_bytes(spec)
        if size % element:
            raise OperandError(f"operand field 'row_bytes': {size} is not a whole number of {element}-byte elements")
    elif shape == "bulk" and spec.get("element_bytes") is not None:
        raise OperandError("operand field 'element_bytes' describes a box or a gather's rows; shape is 'bulk'")
    if shape != "gather" and spec.get("row_bytes") is not None:
        raise OperandError(f"operand field 'row_bytes' describes a gather; shape is {shape!r}")
    return Operand(level=level, shape=shape, bytes_per_transfer=size, bytes_in_flight_per_sm=_in_flight(spec, pattern),
                   pattern=pattern, cluster_sharing=_int(spec, "cluster_sharing", 1, MAX_CLUSTER_SHARING, default=1),
                   box_dims=dims, element_bytes=element, name=str(spec.get("name", "")), **_consumer(spec))
