"""Space-filling-curve row orders for clustering: Hudi's ``z-order`` and ``hilbert`` layouts
(``hoodie.layout.optimize.strategy``), as Spark's clustering builds them with the default
``hoodie.layout.optimize.curve.build.method=direct``. Column-wise over numpy; no per-row
Python.

* **z-order**: each value becomes 8 bytes (Hudi's ``BinaryUtil``: ``longTo8Byte``,
  ``intTo8Byte``, ``doubleTo8Byte``, ``utf8To8Byte``, ...), read here as an unsigned 64-bit
  number; the columns' bits are interleaved most significant first (bit ``s`` of column ``i``
  becomes bit ``s * k + i`` of the ``8k``-byte key) and rows are ordered by that key, compared
  as unsigned bytes.
* **hilbert**: each value becomes a long (``mapColumnValueToLong``); the index on a 63-bit
  ``k``-dimensional Hilbert curve (Skilling's transpose, as the ``hilbert-curve`` library Hudi
  uses computes it) orders the rows.

As in Hudi, the columns take part in the order of their position in the table schema, not in
the order ``sort.columns`` lists them, and nulls map to each type's maximum. With a single
column Spark only range-partitions by it; here the rows are sorted by it (linear).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.config.options import LAYOUTS
from hoodie_ray.exceptions import HoodieUnsupportedError

_SIGN64 = np.uint64(1 << 63)
_INT_MAX = (1 << 31) - 1
_LONG_MAX = (1 << 63) - 1
_DAY_MS = 86_400_000
#: Bits per dimension of Hudi's Hilbert curve (``HilbertCurve.bits(63)``).
HILBERT_BITS = 63


def layout_order(rows: pa.Table, columns: Sequence[str], strategy: str) -> np.ndarray:
    """The row indices of ``rows`` in ``strategy``'s order over ``columns`` (stable)."""
    if strategy not in LAYOUTS:
        raise HoodieUnsupportedError(f"hoodie.layout.optimize.strategy={strategy} is unknown")
    if strategy == "linear" or len(columns) < 2:
        idx = pc.sort_indices(rows, [(c, "ascending") for c in columns])
        return np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)
    names = rows.column_names
    ordered = sorted(columns, key=names.index)  # Hudi: by schema position
    cols = [rows.column(c).combine_chunks() for c in ordered]
    if strategy == "z-order":
        words = interleave([zorder_key(c) for c in cols], 64)
    else:
        coords = [hilbert_long(c).view(np.uint64) for c in cols]
        words = interleave(hilbert_transpose(coords, HILBERT_BITS), HILBERT_BITS)
    # np.lexsort sorts by its last key first: the most significant word goes last
    return np.lexsort(tuple(reversed(words))).astype(np.int64)


def check_layout_columns(schema: pa.Schema, columns: Sequence[str], strategy: str) -> None:
    """Refuse, before anything is scheduled, sort columns the table lacks or ``strategy``
    cannot order (:class:`HoodieUnsupportedError` naming the column and its type)."""
    if strategy not in LAYOUTS:
        raise HoodieUnsupportedError(f"hoodie.layout.optimize.strategy={strategy} is unknown")
    for c in columns:
        if c not in schema.names:
            raise HoodieUnsupportedError(
                f"clustering sort column {c!r} is not a column of the table"
            )
    if strategy == "linear" or len(columns) < 2:
        # sorted as they are (one column is sorted linearly whatever the strategy)
        for c in columns:
            t = schema.field(c).type
            try:
                pc.sort_indices(pa.table({c: pa.array([], t)}), sort_keys=[(c, "ascending")])
            except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
                raise HoodieUnsupportedError(
                    f"clustering sort column {c!r} of type {t} cannot be sorted"
                ) from None
        return
    key = zorder_key if strategy == "z-order" else hilbert_long
    for c in columns:
        t = schema.field(c).type
        try:
            key(pa.array([], t))
        except HoodieUnsupportedError:
            raise HoodieUnsupportedError(
                f"clustering sort column {c!r} of type {t} cannot be ordered by "
                f"hoodie.layout.optimize.strategy={strategy}"
            ) from None


# -- z-order -------------------------------------------------------------------------------------
def zorder_key(arr: pa.Array) -> np.ndarray:
    """Each value's 8 z-order bytes as a big-endian uint64 (Hudi's ``mapColumnValueTo8Bytes``
    with its null stand-ins)."""
    t = arr.type
    if pa.types.is_int64(t):
        return _long8(_ints(arr, _LONG_MAX))
    if pa.types.is_int32(t) or pa.types.is_int16(t):
        return _int8((1 << 15) - 1 if pa.types.is_int16(t) else _INT_MAX, arr)
    if pa.types.is_int8(t):  # byteTo8Byte: the byte as it is, no sign flip
        return _ints(arr, 127).astype(np.int8).view(np.uint8).astype(np.uint64)
    if pa.types.is_boolean(t):
        return _int8(0, pc.cast(pc.fill_null(arr, False), pa.int32()))
    if pa.types.is_floating(t):
        big = float(np.finfo(np.float64 if pa.types.is_float64(t) else np.float32).max)
        return _double8(_floats(arr, big))
    if _is_bytes(t):
        return _padded8(arr)
    if _is_time(t) or pa.types.is_decimal(t):
        return _long8(_ints(_as_millis_or_long(arr), _LONG_MAX))
    raise HoodieUnsupportedError(f"a z-order layout cannot order a column of type {t}")


def _ints(arr: pa.Array, null: int) -> np.ndarray:
    return np.asarray(pc.fill_null(pc.cast(arr, pa.int64()), null).to_numpy(), dtype=np.int64)


def _floats(arr: pa.Array, null: float) -> np.ndarray:
    filled = pc.fill_null(pc.cast(arr, pa.float64()), null)
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.float64)


def _long8(v: np.ndarray) -> np.ndarray:
    """``longTo8Byte``: the sign bit flipped, so negative values come first."""
    return v.view(np.uint64) ^ _SIGN64


def _int8(null: int, arr: pa.Array) -> np.ndarray:
    """``intTo8Byte``: the int's sign bit flipped, in the low four of eight bytes."""
    v = _ints(arr, null).astype(np.int32).view(np.uint32) ^ np.uint32(1 << 31)
    return v.astype(np.uint64)


def _double8(v: np.ndarray) -> np.ndarray:
    """``doubleTo8Byte``: positive values get the sign bit set, negative ones every bit
    inverted (zero and NaN as they are)."""
    bits = v.view(np.uint64).copy()
    pos, neg = v > 0, v < 0
    bits[pos] ^= _SIGN64
    bits[neg] = ~bits[neg]
    return bits


def _padded8(arr: pa.Array) -> np.ndarray:
    """``utf8To8Byte`` / ``paddingTo8Byte``: the first 8 bytes, a shorter value right-aligned
    (zeros in front), as a big-endian number; null is empty."""
    if pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type):
        arr = pc.cast(arr, pa.large_binary())
    else:
        arr = pc.cast(arr, pa.binary())
    head = pc.binary_slice(pc.fill_null(arr, b""), 0, 8)
    if isinstance(head, pa.ChunkedArray):
        head = head.combine_chunks()
    off_type = np.int64 if pa.types.is_large_binary(head.type) else np.int32
    bufs = head.buffers()
    offsets = np.frombuffer(bufs[1], dtype=off_type)[head.offset : head.offset + len(head) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(1, np.uint8)
    starts = offsets[:-1].astype(np.int64)
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    out = np.zeros(len(head), dtype=np.uint64)
    for j in range(8):
        has = lengths > j
        if not has.any():
            break
        b = data[np.where(has, starts + j, 0)].astype(np.uint64)
        out = np.where(has, (out << np.uint64(8)) | b, out)
    return out


def _is_bytes(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    )


def _is_time(t: pa.DataType) -> bool:
    return pa.types.is_date(t) or pa.types.is_timestamp(t)


def _as_millis_or_long(arr: pa.Array) -> pa.Array:
    """Dates and timestamps as epoch milliseconds (``getTime()``, UTC), decimals as their
    integer part (``BigDecimal.longValue``)."""
    t = arr.type
    if pa.types.is_decimal(t):
        return pc.cast(arr, pa.int64(), safe=False)
    if pa.types.is_date32(t):
        return pc.multiply(pc.cast(arr, pa.int32()).cast(pa.int64()), _DAY_MS)
    if pa.types.is_date64(t):
        return pc.cast(arr, pa.int64())
    per_ms = {"s": None, "ms": 1, "us": 1_000, "ns": 1_000_000}[t.unit]
    raw = pc.cast(arr, pa.int64())
    if per_ms is None:
        return pc.multiply(raw, 1000)
    if per_ms == 1:
        return raw
    v = np.asarray(pc.fill_null(raw, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    mask = pc.is_null(raw).to_numpy(zero_copy_only=False)
    return pa.array(np.floor_divide(v, per_ms), pa.int64(), mask=mask)


def interleave(values: Sequence[np.ndarray], bits: int) -> list[np.ndarray]:
    """The ``bits`` low bits of each of the ``k`` uint64 arrays interleaved, most significant
    first (bit ``bits - 1 - s`` of array ``i`` goes to key bit ``s * k + i``, counted from the
    top), as uint64 words, the most significant first (the last one zero-filled at the
    bottom)."""
    k = len(values)
    total = bits * k
    words = [np.zeros(len(values[0]), dtype=np.uint64) for _ in range((total + 63) // 64)]
    bit = np.empty_like(words[0])
    for s in range(bits):
        src = np.uint64(1 << (bits - 1 - s))
        for i, v in enumerate(values):
            pos = s * k + i
            np.bitwise_and(v, src, out=bit)  # the bit where it is, then moved into place
            dst = 63 - pos % 64
            here = bits - 1 - s
            if dst > here:
                bit <<= np.uint64(dst - here)
            elif dst < here:
                bit >>= np.uint64(here - dst)
            words[pos // 64] |= bit
    return words


# -- hilbert -------------------------------------------------------------------------------------
def hilbert_long(arr: pa.Array) -> np.ndarray:
    """Each value as the long Hudi's ``mapColumnValueToLong`` gives the Hilbert curve."""
    t = arr.type
    if pa.types.is_int8(t):  # the byte read unsigned; null is Long.MAX_VALUE
        v = _ints(arr, 0).astype(np.int8).view(np.uint8).astype(np.int64)
        v[pc.is_null(arr).to_numpy(zero_copy_only=False)] = _LONG_MAX
        return v
    if pa.types.is_integer(t):
        return _ints(arr, _LONG_MAX)
    if pa.types.is_boolean(t):
        v = pc.fill_null(arr, False).to_numpy(zero_copy_only=False)
        return np.where(v, _LONG_MAX, 0).astype(np.int64)
    if pa.types.is_floating(t):  # doubleToLongBits, no sign fix; null is Long.MAX_VALUE
        bits = _floats(arr, 0.0).view(np.int64).copy()
        bits[pc.is_null(arr).to_numpy(zero_copy_only=False)] = _LONG_MAX
        return bits
    if _is_bytes(t):
        v = _padded8(arr).view(np.int64).copy()
        v[pc.is_null(arr).to_numpy(zero_copy_only=False)] = _LONG_MAX
        return v
    if _is_time(t) or pa.types.is_decimal(t):
        return _ints(_as_millis_or_long(arr), _LONG_MAX)
    raise HoodieUnsupportedError(f"a hilbert layout cannot order a column of type {t}")


def hilbert_transpose(coords: Sequence[np.ndarray], bits: int) -> list[np.ndarray]:
    """Skilling's ``AxesToTranspose`` (2004) on ``bits``-bit coordinates, column-wise: the
    transposed Hilbert index, whose bits read from the top, dimension by dimension
    (:func:`interleave`), are the index on the curve. Branches become masks (all ones where
    a coordinate's bit is set), so every step is a few in-place integer operations."""
    x = [c.astype(np.uint64, copy=True) for c in coords]
    n = len(x)
    one, zero = np.uint64(1), np.uint64(0)
    m = np.empty_like(x[0])
    t = np.empty_like(x[0])
    for b in range(bits - 1, 0, -1):  # undo excess work, Q = 2**b
        shift, p = np.uint64(b), np.uint64((1 << b) - 1)
        for i in range(n):
            np.right_shift(x[i], shift, out=m)
            m &= one
            np.subtract(zero, m, out=m)  # all ones where bit b of x[i] is set
            if i == 0:
                m &= p
                x[0] ^= m  # set: invert the low bits of x[0]
                continue
            np.bitwise_xor(x[0], x[i], out=t)
            t &= p
            t &= ~m  # clear: exchange the low bits of x[0] and x[i]
            m &= p
            m |= t
            x[0] ^= m
            x[i] ^= t
    for i in range(1, n):  # Gray encode
        x[i] ^= x[i - 1]
    t.fill(0)
    for b in range(bits - 1, 0, -1):
        np.right_shift(x[n - 1], np.uint64(b), out=m)
        m &= one
        np.subtract(zero, m, out=m)
        m &= np.uint64((1 << b) - 1)
        t ^= m
    for i in range(n):
        x[i] ^= t
    return x
