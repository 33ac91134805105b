"""Column-wise Avro binary encoding and decoding of Arrow record batches.

Hudi's Avro log blocks hold records in the Avro *binary* encoding (no container), each record
prefixed by its length (spec §4.3). Going through Python dicts (``Table.to_pylist`` + fastavro)
is 10-20x slower than the rest of the write path, so both directions work per column with
numpy and pyarrow compute; no Python code runs per record for primitive types.

Encoding
    Each column becomes one or two *parts*: a byte matrix with per-row lengths (union branch
    bytes, zigzag varints as an (N, 10) matrix, the raw bytes of floats and decimals, string
    length prefixes), or a per-row byte string (the string/bytes values straight from the Arrow
    buffers). Consecutive matrices are packed into one per-row byte string with a single boolean
    compress; the per-row strings of all parts are then concatenated row-wise in one pass by
    ``pyarrow.compute.binary_join_element_wise``. Nested types (records, arrays, maps) recurse
    column-wise: an array's items are encoded as their own "rows" and regrouped by the list
    offsets without copying.

Decoding
    Record starts are known (the length prefixes), so every field is decoded for all records at
    once with a position array: union branch bytes and varints are gathered with fancy indexing,
    strings become (start, length) pairs that one Arrow ``take`` turns into a string array.
    Arrays and maps decode their items in lock step across records (the k-th item of every
    record that has one, at once); a record with very many items falls back to fastavro for
    those items.

Compiled kernels
    For records of flat fields (null, boolean, int, long, float, double, string, bytes, and
    unions of null with one of them) both directions run through numba kernels
    (:mod:`hoodie_ray.avro.kernel`): one pass over the records instead of one numpy pass per
    field or per varint byte. They compute the same payloads as the column-wise code and hand
    them to the same builders and conversions, so the results and the refusals are the same;
    other schemas, and bytes the kernels cannot decode, take the column-wise path.

Hostile input is bounded: a varint longer than 10 bytes (5 for ``int``), a length or count that
does not fit in the rest of its record, a union branch out of range or a record whose fields do
not end exactly where the next record starts raises :class:`HoodieCorruptedDataError` naming
the source; nothing is allocated from an unchecked length.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.avro import kernel
from hoodie_ray.avro.schema import AvroType, avro_type_to_arrow, parse_avro_schema
from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieInputError, HoodieSchemaError

_INT32_MAX = 2**31 - 1
_U64 = np.uint64
# A record whose array/map items have no bytes at all (e.g. an array of nulls) cannot be bounded
# by its size: cap such counts instead.
_MAX_ZERO_SIZE_ITEMS = 1 << 20
# In the lock-step array decoder, rows left with more items than this go to fastavro.
_LOCKSTEP_MAX_ITEMS = 4096
# Fewer records than this decode on the numpy path (a compiled walk has a fixed call cost).
_JIT_MIN_RECORDS = 64
_UNIT_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _schema(avro_schema: dict[str, Any] | str | AvroType) -> AvroType:
    t = avro_schema if isinstance(avro_schema, AvroType) else parse_avro_schema(avro_schema)
    if t.kind != "record":
        raise HoodieSchemaError(f"records need a record schema, got Avro type {t.kind!r}")
    return t


# =============================================================================================
# Encoding
# =============================================================================================


@dataclass
class _Mat:
    """Per-row bytes as a matrix: row i holds ``m[i, :lens[i]]`` (all ``w`` bytes if None)."""

    m: np.ndarray
    lens: np.ndarray | None = None

    def row_lengths(self) -> np.ndarray:
        if self.lens is None:
            return np.full(self.m.shape[0], self.m.shape[1], dtype=np.int64)
        return self.lens


@dataclass
class _Bin:
    """Per-row bytes as an Arrow binary array (a null row contributes no bytes)."""

    arr: pa.Array

    def row_lengths(self) -> np.ndarray:
        return _binary_lengths(self.arr)


_Part = _Mat | _Bin


def _binary_lengths(arr: pa.Array) -> np.ndarray:
    offs = _offsets(arr)
    lens = np.diff(offs)
    if arr.null_count:
        lens = np.where(_valid_np(arr), lens, 0)
    return lens


def _offsets(arr: pa.Array) -> np.ndarray:
    """The ``len(arr) + 1`` offsets of a binary/string/list array (absolute, as int64)."""
    dt = (
        np.int64
        if pa.types.is_large_binary(arr.type)
        or pa.types.is_large_string(arr.type)
        or pa.types.is_large_list(arr.type)
        else np.int32
    )
    buf = arr.buffers()[1]
    n = len(arr)
    if buf is None:
        return np.zeros(n + 1, dtype=np.int64)
    return np.frombuffer(buf, dtype=dt, count=arr.offset + n + 1)[arr.offset :].astype(np.int64)


def _valid_np(arr: pa.Array) -> np.ndarray:
    return np.asarray(pc.is_valid(arr))


def _fixed_values(arr: pa.Array, dtype: Any) -> np.ndarray:
    """Zero-copy numpy view of a fixed-width primitive array's values (null slots arbitrary)."""
    buf = arr.buffers()[1]
    n = len(arr)
    if buf is None:
        return np.zeros(n, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=arr.offset + n)[arr.offset :]


def unsigned_varint(value: int) -> bytes:
    """Base-128 varint of a non-negative integer, low groups first (Avro's after the zigzag;
    protobuf's as it is)."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag_varint(value: int) -> bytes:
    """Avro's encoding of one long: zigzag, then a base-128 varint."""
    return unsigned_varint((value << 1) ^ (value >> 63))


def _zigzag(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.int64, copy=False)
    return ((v << 1) ^ (v >> 63)).view(_U64)


_SHIFTS = np.arange(0, 70, 7, dtype=_U64)
_THRESHOLDS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=_U64)


def _varint_mat(u: np.ndarray) -> _Mat:
    """Varint bytes of unsigned 64-bit values as an (N, w) matrix plus lengths."""
    n = len(u)
    if n == 0:
        return _Mat(np.zeros((0, 1), dtype=np.uint8), np.zeros(0, dtype=np.int64))
    lens = np.searchsorted(_THRESHOLDS, u, side="right").astype(np.int64) + 1
    w = int(lens.max())
    groups = (u[:, None] >> _SHIFTS[None, :w]).astype(np.uint8) & np.uint8(0x7F)
    if w > 1:
        groups[:, : w - 1] |= (np.arange(w - 1)[None, :] < (lens - 1)[:, None]).view(
            np.uint8
        ) << np.uint8(7)
    return _Mat(groups, lens)


def _bin_array(data: np.ndarray, lens: np.ndarray, large: bool) -> pa.Array:
    n = len(lens)
    offs = np.zeros(n + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(lens, out=offs[1:])
    typ = pa.large_binary() if large else pa.binary()
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offs), pa.py_buffer(data)])


def _pack_mats(mats: list[_Mat], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Row-major bytes of consecutive matrices and their per-row lengths."""
    if len(mats) == 1 and mats[0].lens is None:
        m = np.ascontiguousarray(mats[0].m)
        return m.reshape(-1), np.full(n, m.shape[1], dtype=np.int64)
    width = sum(p.m.shape[1] for p in mats)
    big = np.empty((n, width), dtype=np.uint8)
    keep = np.empty((n, width), dtype=bool)
    lens = np.zeros(n, dtype=np.int64)
    col = 0
    for p in mats:
        w = p.m.shape[1]
        big[:, col : col + w] = p.m
        if p.lens is None:
            keep[:, col : col + w] = True
            lens += w
        else:
            np.less(np.arange(w)[None, :], p.lens[:, None], out=keep[:, col : col + w])
            lens += p.lens
        col += w
    if keep.all():
        return big.reshape(-1), lens
    return big[keep], lens


def _assemble(parts: Sequence[_Part], n: int, length_prefix: bool = False) -> pa.Array:
    """Concatenate the parts row-wise into one binary array of ``n`` rows.

    With ``length_prefix`` each row starts with its length as a big-endian int32 (Hudi's
    record framing in Avro data blocks).
    """
    parts = list(parts)
    total = 0
    if length_prefix or len(parts) > 1:
        row_len = np.zeros(n, dtype=np.int64)
        for p in parts:
            row_len += p.row_lengths()
        total = int(row_len.sum())
        if length_prefix:
            if n and int(row_len.max()) > _INT32_MAX:
                raise HoodieInputError("an Avro record is larger than 2 GiB")
            prefix = row_len.astype(">i4").view(np.uint8).reshape(n, 4)
            parts.insert(0, _Mat(prefix))
            total += 4 * n
    else:
        total = int(parts[0].row_lengths().sum()) if parts else 0
    large = total > _INT32_MAX
    pieces: list[pa.Array] = []
    i = 0
    while i < len(parts):
        p = parts[i]
        if isinstance(p, _Mat):
            j = i
            while j < len(parts) and isinstance(parts[j], _Mat):
                j += 1
            data, lens = _pack_mats(parts[i:j], n)  # type: ignore[arg-type]
            pieces.append(_bin_array(data, lens, large))
            i = j
        else:
            arr = p.arr
            want = pa.large_binary() if large else pa.binary()
            if arr.type != want:
                arr = arr.cast(want)
            pieces.append(arr)
            i += 1
    if not pieces:
        return _bin_array(np.zeros(0, dtype=np.uint8), np.zeros(n, dtype=np.int64), large)
    if len(pieces) == 1 and pieces[0].null_count == 0:
        return pieces[0]
    sep = pa.scalar(b"", type=pa.large_binary() if large else pa.binary())
    return pc.binary_join_element_wise(*pieces, sep, null_handling="replace", null_replacement="")


def _mask_parts(parts: list[_Part], valid: np.ndarray) -> list[_Part]:
    """Give rows where ``valid`` is False no bytes."""
    out: list[_Part] = []
    for p in parts:
        if isinstance(p, _Mat):
            lens = p.row_lengths()
            out.append(_Mat(p.m, np.where(valid, lens, 0)))
        else:
            out.append(_Bin(_with_nulls(p.arr, valid)))
    return out


def _with_nulls(arr: pa.Array, valid: np.ndarray) -> pa.Array:
    """``arr`` (binary) made null where ``valid`` is False, sharing its buffers."""
    if arr.null_count:
        valid = valid & _valid_np(arr)
    if arr.null_count == int((~valid).sum()):
        return arr
    bits = np.zeros(arr.offset + len(arr), dtype=bool)
    bits[arr.offset :] = valid
    bitmap = pa.array(bits).buffers()[1]
    bufs = arr.buffers()
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *bufs[1:]], offset=arr.offset)


def _expand_parts(parts: list[_Part], valid: np.ndarray) -> list[_Part]:
    """Parts encoded for the rows where ``valid`` is True, spread to all rows (others empty)."""
    n = len(valid)
    out: list[_Part] = []
    take_idx: pa.Array | None = None
    for p in parts:
        if isinstance(p, _Mat):
            m = np.zeros((n, p.m.shape[1]), dtype=np.uint8)
            m[valid] = p.m
            lens = np.zeros(n, dtype=np.int64)
            lens[valid] = p.row_lengths()
            out.append(_Mat(m, lens))
        else:
            if take_idx is None:
                take_idx = pa.array(np.cumsum(valid) - 1, mask=~valid)
            out.append(_Bin(p.arr.take(take_idx)))
    return out


def _prepend_branch(parts: list[_Part], branch: np.ndarray | int, n: int) -> list[_Part]:
    """Put the union branch byte (zigzag of the index, always one byte here) before ``parts``."""
    if isinstance(branch, int):
        col = np.full((n, 1), branch * 2, dtype=np.uint8)
    else:
        col = (branch.astype(np.uint8) * np.uint8(2)).reshape(n, 1)
    if parts and isinstance(parts[0], _Mat):
        first = parts[0]
        m = np.empty((n, first.m.shape[1] + 1), dtype=np.uint8)
        m[:, :1] = col
        m[:, 1:] = first.m
        return [_Mat(m, None if first.lens is None else first.lens + 1), *parts[1:]]
    return [_Mat(col), *parts]


class _Encoder:
    """Encodes Arrow arrays per Avro type; ``where`` names the field for errors."""

    @staticmethod
    def plain(arr: pa.Array) -> pa.Array:
        """``arr`` with dictionaries decoded and extension types as their storage."""
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        if isinstance(arr, pa.ExtensionArray):
            arr = arr.storage
        return arr

    @staticmethod
    def require_no_nulls(arr: pa.Array, where: str) -> None:
        """Refuse nulls in a field the Avro schema does not make nullable."""
        if arr.null_count:
            raise HoodieInputError(
                f"field {where!r} is not nullable in the Avro schema but has "
                f"{arr.null_count} null value(s)"
            )

    @staticmethod
    def null_count(arr: pa.Array) -> int:
        """Nulls of a column for a nullable union (every row of a null-typed column)."""
        return len(arr) if pa.types.is_null(arr.type) else arr.null_count

    def encode(self, t: AvroType, arr: pa.Array, where: str) -> list[_Part]:
        n = len(arr)
        arr = self.plain(arr)
        if t.kind == "union":
            return self._union(t, arr, where)
        if t.kind == "null":
            if arr.null_count != n:
                raise HoodieInputError(f"field {where!r} has Avro type null but non-null values")
            return []
        self.require_no_nulls(arr, where)
        return self._value(t, arr, where, None)

    def _union(self, t: AvroType, arr: pa.Array, where: str) -> list[_Part]:
        n = len(arr)
        if t.is_nullable_union:
            vt, vi, ni = t.value_type, t.value_index, t.null_index
            nulls = self.null_count(arr)
            if nulls == 0:
                return _prepend_branch(self._value(vt, arr, where, None), vi, n)
            if nulls == n:
                return [_Mat(np.full((n, 1), ni * 2, dtype=np.uint8))]
            valid = _valid_np(arr)
            if vt.kind in ("record", "array", "map", "union"):
                parts = _expand_parts(
                    self._value(vt, arr.filter(pa.array(valid)), where, None), valid
                )
            else:
                parts = _mask_parts(self._value(vt, arr, where, valid), valid)
            branch = np.where(valid, vi, ni)
            return _prepend_branch(parts, branch, n)
        if len(t.branches) == 1:
            return _prepend_branch(self.encode(t.branches[0], arr, where), 0, n)
        if all(b.kind == "null" for b in t.branches):
            return [_Mat(np.zeros((n, 1), dtype=np.uint8))]
        raise HoodieSchemaError(
            f"field {where!r}: Avro unions of several non-null types cannot be written"
        )

    # -- values (no nulls except where ``valid`` says so) ---------------------------------
    def _value(
        self, t: AvroType, arr: pa.Array, where: str, valid: np.ndarray | None
    ) -> list[_Part]:
        k, lg = t.kind, t.logical
        n = len(arr)
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        if k == "null":
            return []
        if k == "union":
            return self.encode(t, arr, where)
        if lg == "decimal":
            return self._decimal(t, arr, where)
        if k == "boolean":
            vals = pc.fill_null(self._cast(arr, pa.bool_(), where), False)
            return [_Mat(np.asarray(vals).view(np.uint8).reshape(n, 1))]
        if k in ("int", "long"):
            return [_varint_mat(_zigzag(self._integers(t, arr, where, valid)))]
        if k in ("float", "double"):
            typ = pa.float32() if k == "float" else pa.float64()
            vals = _fixed_values(
                self._cast(arr, typ, where), np.float32 if k == "float" else np.float64
            )
            return [_Mat(vals.view(np.uint8).reshape(n, 4 if k == "float" else 8))]
        if k in ("string", "bytes"):
            return self._binary(k, arr, where)
        if k == "fixed":
            fa = self._cast(arr, pa.binary(t.size), where)
            buf = fa.buffers()[1]
            raw = (
                np.frombuffer(buf, dtype=np.uint8, count=(fa.offset + n) * t.size) if buf else None
            )
            if raw is None:
                return [_Mat(np.zeros((n, t.size), dtype=np.uint8))]
            return [_Mat(raw[fa.offset * t.size :].reshape(n, t.size))]
        if k == "enum":
            sa = self._cast(arr, pa.string(), where)
            idx = pc.index_in(sa, value_set=pa.array(list(t.symbols), pa.string()))
            bad = pc.and_(pc.is_null(idx), pc.is_valid(sa))
            if pc.any(bad).as_py():
                first = sa.filter(bad)[0].as_py()
                raise HoodieInputError(
                    f"field {where!r}: {first!r} is not a symbol of enum {t.name}"
                )
            return [_varint_mat(_zigzag(_fixed_values(pc.fill_null(idx, 0), np.int32)))]
        if k == "record":
            return self._record(t, arr, where)
        if k in ("array", "map"):
            return self._collection(t, arr, where)
        raise HoodieSchemaError(f"field {where!r}: Avro type {k!r} cannot be written")

    def _cast(self, arr: pa.Array, typ: pa.DataType, where: str, safe: bool = True) -> pa.Array:
        if arr.type == typ:
            return arr
        try:
            return pc.cast(arr, typ, safe=safe)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise HoodieInputError(
                f"field {where!r}: cannot write Arrow {arr.type} as Avro ({typ}): {e}"
            ) from None

    def _integers(
        self, t: AvroType, arr: pa.Array, where: str, valid: np.ndarray | None
    ) -> np.ndarray:
        """int64 values of an int/long-based column, converted per its logical type."""
        lg = t.logical
        at = arr.type
        if lg is not None and (
            lg.startswith(("timestamp-", "local-timestamp-")) or lg.startswith("time-")
        ):
            unit = {"millis": "ms", "micros": "us", "nanos": "ns"}[lg.rsplit("-", 1)[1]]
            if pa.types.is_timestamp(at) or pa.types.is_time(at):
                vals = _fixed_values(arr, np.int64 if at.bit_width == 64 else np.int32).astype(
                    np.int64
                )
                return self._rescale(vals, at.unit, unit, where, valid)
            if pa.types.is_integer(at):
                return _fixed_values(self._cast(arr, pa.int64(), where), np.int64)
            raise HoodieInputError(f"field {where!r}: cannot write Arrow {at} as Avro {lg}")
        if lg == "date":
            if pa.types.is_date64(at) or pa.types.is_timestamp(at):
                arr = self._cast(arr, pa.date32(), where, safe=False)
                at = arr.type
            if pa.types.is_date32(at):
                return _fixed_values(arr, np.int32).astype(np.int64)
        if pa.types.is_date32(at) or pa.types.is_time32(at):
            return _fixed_values(arr, np.int32).astype(np.int64)
        if pa.types.is_timestamp(at) or pa.types.is_time64(at) or pa.types.is_date64(at):
            return _fixed_values(arr, np.int64)
        if pa.types.is_boolean(at) or not (pa.types.is_integer(at) or pa.types.is_null(at)):
            raise HoodieInputError(f"field {where!r}: cannot write Arrow {at} as Avro {t.kind}")
        target = pa.int32() if t.kind == "int" else pa.int64()
        if at == target:
            return _fixed_values(arr, np.int32 if t.kind == "int" else np.int64).astype(
                np.int64, copy=False
            )
        return (
            _fixed_values(self._cast(arr, pa.int64(), where), np.int64)
            if t.kind == "long"
            else (_fixed_values(self._cast(arr, pa.int32(), where), np.int32).astype(np.int64))
        )

    @staticmethod
    def _rescale(
        vals: np.ndarray, src: str, dst: str, where: str, valid: np.ndarray | None
    ) -> np.ndarray:
        fs, fd = _UNIT_PER_SECOND[src], _UNIT_PER_SECOND[dst]
        if fs == fd:
            return vals
        if fs > fd:
            return np.floor_divide(vals, fs // fd)
        factor = fd // fs
        limit = np.iinfo(np.int64).max // factor
        check = vals if valid is None else vals[valid]
        if check.size and (check.max() > limit or check.min() < -limit):
            raise HoodieInputError(f"field {where!r}: a time value overflows when scaled to {dst}")
        return vals * factor

    def _binary(self, kind: str, arr: pa.Array, where: str) -> list[_Part]:
        bin_arr = self.binary_values(kind, arr, where)
        lens = np.diff(_offsets(bin_arr))
        return [_varint_mat(_zigzag(lens)), _Bin(bin_arr)]

    def binary_values(self, kind: str, arr: pa.Array, where: str) -> pa.Array:
        """The values of a string/bytes field as a (large_)binary array."""
        at = arr.type
        if kind == "string":
            if pa.types.is_string(at) or pa.types.is_large_string(at):
                pass
            elif pa.types.is_large_binary(at):
                arr = self._cast(arr, pa.large_string(), where)
            else:
                arr = self._cast(arr, pa.string(), where)
        else:
            if not (pa.types.is_binary(at) or pa.types.is_large_binary(at)):
                if pa.types.is_string(at):
                    arr = arr.view(pa.binary())
                elif pa.types.is_large_string(at):
                    arr = arr.view(pa.large_binary())
                else:
                    arr = self._cast(arr, pa.binary(), where)
        large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
        return arr.view(pa.large_binary() if large else pa.binary())

    def _decimal(self, t: AvroType, arr: pa.Array, where: str) -> list[_Part]:
        n = len(arr)
        wide = t.precision > 38
        typ = pa.decimal256(t.precision, t.scale) if wide else pa.decimal128(t.precision, t.scale)
        if not pa.types.is_decimal(arr.type) and not pa.types.is_integer(arr.type):
            raise HoodieInputError(
                f"field {where!r}: cannot write Arrow {arr.type} as Avro decimal"
            )
        da = self._cast(arr, typ, where)
        width = 32 if wide else 16
        buf = da.buffers()[1]
        raw = (
            np.frombuffer(buf, dtype=np.uint8, count=(da.offset + n) * width)[
                da.offset * width :
            ].reshape(n, width)
            if buf is not None
            else np.zeros((n, width), dtype=np.uint8)
        )
        be = raw[:, ::-1]  # big-endian two's complement, full width
        if t.kind == "fixed":
            size = t.size
            if size <= width:
                return [_Mat(np.ascontiguousarray(be[:, width - size :]))]
            sign = np.where(be[:, 0] >= 0x80, 0xFF, 0).astype(np.uint8)
            m = np.empty((n, size), dtype=np.uint8)
            m[:, : size - width] = sign[:, None]
            m[:, size - width :] = be
            return [_Mat(m)]
        # bytes: minimal two's complement, like Java's BigInteger.toByteArray
        fill = np.where(be[:, 0] >= 0x80, 0xFF, 0).astype(np.uint8)
        redundant = (be[:, :-1] == fill[:, None]) & ((be[:, 1:] >> 7) == (fill[:, None] >> 7))
        lead = np.cumprod(redundant, axis=1).sum(axis=1)
        lens = (width - lead).astype(np.int64)
        idx = np.minimum(lead[:, None] + np.arange(width)[None, :], width - 1)
        body = np.take_along_axis(be, idx, axis=1)
        prefix = _varint_mat(_zigzag(lens))
        m = np.concatenate([prefix.m, body], axis=1)
        # the prefix is variable-length; pack it with the body by shifting the body left
        pw = prefix.m.shape[1]
        assert prefix.lens is not None
        if pw > 1 and (prefix.lens != pw).any():
            out = np.zeros((n, pw + width), dtype=np.uint8)
            cols = prefix.lens[:, None] + np.arange(width)[None, :]
            out[:, :pw] = prefix.m
            np.put_along_axis(out, cols, body, axis=1)
            m = out
        return [_Mat(m, prefix.lens + lens)]

    def _record(self, t: AvroType, arr: pa.Array, where: str) -> list[_Part]:
        if not pa.types.is_struct(arr.type):
            raise HoodieInputError(
                f"field {where!r}: expected a struct for Avro record, got {arr.type}"
            )
        names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        schema_names = {f.name for f in t.fields}
        extra = [nm for nm in names if nm not in schema_names]
        if extra:
            raise HoodieSchemaError(
                f"field {where!r}: struct fields {extra} are not in the Avro schema"
            )
        parts: list[_Part] = []
        for f in t.fields:
            sub = f"{where}.{f.name}"
            if f.name in names:
                child = arr.field(names.index(f.name))
            else:
                child = _missing_column(f.type, len(arr), sub)
            parts.extend(self.encode(f.type, child, sub))
        return parts

    def _collection(self, t: AvroType, arr: pa.Array, where: str) -> list[_Part]:
        n = len(arr)
        at = arr.type
        if t.kind == "array":
            if (
                pa.types.is_fixed_size_list(at)
                or pa.types.is_list_view(at)
                or pa.types.is_large_list_view(at)
            ):
                arr = self._cast(arr, pa.large_list(at.value_field), where)
            elif not (pa.types.is_list(at) or pa.types.is_large_list(at)):
                raise HoodieInputError(f"field {where!r}: expected a list for Avro array, got {at}")
        elif not pa.types.is_map(at):
            raise HoodieInputError(f"field {where!r}: expected a map for Avro map, got {at}")
        offs = _offsets(arr)
        first, last = int(offs[0]), int(offs[-1])
        counts = np.diff(offs)
        m = last - first
        if t.kind == "array":
            assert t.items is not None
            items = arr.values.slice(first, m)
            item_parts = self.encode(t.items, items, where + "[]")
        else:
            assert t.values is not None
            keys = arr.keys.slice(first, m)
            if keys.null_count:
                raise HoodieInputError(f"field {where!r}: map keys may not be null")
            item_parts = self._binary("string", keys, where + "{key}")
            item_parts += self.encode(t.values, arr.items.slice(first, m), where + "{}")
        items_bin = _assemble(item_parts, m)
        item_offs = _offsets(items_bin)
        large = pa.types.is_large_binary(items_bin.type)
        row_offs = item_offs[offs - first].astype(np.int64 if large else np.int32)
        data = items_bin.buffers()[2]
        rows = pa.Array.from_buffers(items_bin.type, n, [None, pa.py_buffer(row_offs), data])
        header = _varint_mat(_zigzag(counts))
        assert header.lens is not None
        header.lens = np.where(counts > 0, header.lens, 0)
        return [header, _Bin(rows), _Mat(np.zeros((n, 1), dtype=np.uint8))]


def _missing_column(t: AvroType, n: int, where: str) -> pa.Array:
    """An all-null column for an Avro field absent from the input (nullable fields only)."""
    if t.kind == "null" or (t.kind == "union" and t.null_index >= 0):
        return pa.nulls(n)
    raise HoodieSchemaError(f"field {where!r} is missing from the data and is not nullable")


def _column(table: pa.Table | pa.RecordBatch, name: str) -> pa.Array:
    col = table.column(name)
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)
        if col.num_chunks == 0:
            return pa.array([], type=col.type)
        return col.combine_chunks()
    return col


def encode_binary(
    table: pa.Table | pa.RecordBatch,
    avro_schema: dict[str, Any] | str | AvroType,
    *,
    length_prefix: bool = False,
) -> pa.Array:
    """Encode every row of ``table`` as an Avro binary datum; one binary array element per row.

    With ``length_prefix`` each element starts with the datum's length as a big-endian int32,
    which is how Hudi frames records inside an Avro data block. Columns are matched to the
    record's fields by name; a nullable field missing from ``table`` is written as null.
    Raises :class:`HoodieSchemaError` for a column the schema does not have, a missing
    non-nullable field or an unwritable type, :class:`HoodieInputError` for values that do not
    fit (nulls in a non-nullable field, overflowing integers, unknown enum symbols).
    """
    t = _schema(avro_schema)
    names = table.column_names
    schema_names = {f.name for f in t.fields}
    extra = [nm for nm in names if nm not in schema_names]
    if extra:
        raise HoodieSchemaError(f"columns {extra} are not in the Avro schema {t.name}")
    if len(set(names)) != len(names):
        raise HoodieSchemaError("the table has duplicate column names")
    n = table.num_rows
    if n >= _JIT_MIN_RECORDS and kernel.available():
        plan = kernel.flat_plan(t)
        if plan is not None:
            encoded = _encode_flat(t, plan, table, n, length_prefix)
            if encoded is not None:
                return encoded
    enc = _Encoder()
    parts: list[_Part] = []
    for f in t.fields:
        col = _column(table, f.name) if f.name in names else _missing_column(f.type, n, f.name)
        parts.extend(enc.encode(f.type, col, f.name))
    return _assemble(parts, n, length_prefix=length_prefix)


def _encode_flat(
    t: AvroType,
    plan: kernel.FlatPlan,
    table: pa.Table | pa.RecordBatch,
    n: int,
    length_prefix: bool,
) -> pa.Array | None:
    """:func:`encode_binary` of a flat record schema by the compiled encoder: each field's
    values come from :class:`_Encoder`'s own conversions (so the same refusals), the bytes from
    two passes over the records. None when a record would pass 2 GiB (the numpy path refuses
    it by name)."""
    enc = _Encoder()
    names = set(table.column_names)
    nf = len(t.fields)
    # Record-major: the kernels read one record's fields together.
    vals = np.zeros((n, nf), dtype=np.int64)
    valid = np.ones((n, nf), dtype=np.bool_)
    sstart = np.zeros((n, nf), dtype=np.int64)
    strings = _FlatStrings()
    for j, f in enumerate(t.fields):
        where = f.name
        col = _column(table, f.name) if f.name in names else _missing_column(f.type, n, f.name)
        arr = enc.plain(col)
        mask: np.ndarray | None = None
        if plan.null_branch[j] >= 0:
            nulls = enc.null_count(arr)
            if nulls == n:
                valid[:, j] = False
                continue
            if nulls:
                mask = _valid_np(arr)
                valid[:, j] = mask
        else:
            enc.require_no_nulls(arr, where)
        vt = plan.value_types[j]
        if int(plan.kinds[j]) == kernel.K_BYTES:
            vals[:, j], sstart[:, j] = strings.add(enc.binary_values(vt.kind, arr, where))
        else:
            vals[:, j] = _flat_values(enc, int(plan.kinds[j]), vt, arr, where, mask)
    out, offsets = kernel.encode_flat_records(
        plan, vals, valid, sstart, strings.data(), length_prefix
    )
    if n and int(np.diff(offsets).max()) - (4 if length_prefix else 0) > _INT32_MAX:
        return None
    large = int(offsets[-1]) > _INT32_MAX
    typ = pa.large_binary() if large else pa.binary()
    offs_buf = offsets if large else offsets.astype(np.int32)
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offs_buf), pa.py_buffer(out)])


def _flat_values(
    enc: _Encoder, kind: int, vt: AvroType, arr: pa.Array, where: str, mask: np.ndarray | None
) -> np.ndarray:
    """A boolean or number field's values as the compiled encoder takes them: the integer,
    or the bits of the float, by :class:`_Encoder`'s conversions."""
    if kind == kernel.K_BOOLEAN:
        flags = pc.fill_null(enc._cast(arr, pa.bool_(), where), False)
        return np.asarray(flags).view(np.uint8)
    if kind in (kernel.K_INT, kernel.K_LONG):
        return enc._integers(vt, arr, where, mask)
    if kind == kernel.K_FLOAT:
        return _fixed_values(enc._cast(arr, pa.float32(), where), np.uint32)
    return _fixed_values(enc._cast(arr, pa.float64(), where), np.int64)


class _FlatStrings:
    """The string and bytes payloads of a compiled encode, back to back in one buffer."""

    def __init__(self) -> None:
        self.datas: list[np.ndarray] = []
        self.base = 0

    def add(self, bin_arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """Append a (large_)binary column's bytes; its lengths and starts in the buffer."""
        offs = _offsets(bin_arr)
        buf = bin_arr.buffers()[2]
        lo, hi = int(offs[0]), int(offs[-1])
        if hi > lo and buf is not None:
            self.datas.append(np.frombuffer(buf, dtype=np.uint8, count=hi)[lo:])
        starts = offs[:-1] + (self.base - lo)
        self.base += hi - lo
        return np.diff(offs), starts

    def data(self) -> np.ndarray:
        """Every payload added, in order."""
        return np.concatenate(self.datas) if self.datas else np.zeros(0, dtype=np.uint8)


def encode_records(
    table: pa.Table | pa.RecordBatch, avro_schema: dict[str, Any] | str | AvroType
) -> tuple[np.ndarray, np.ndarray]:
    """Avro binary encoding (no container) of each row of ``table``, column-wise.

    Returns ``(buf, offsets)``: ``buf`` is a uint8 array holding the records back to back and
    ``offsets`` an int64 array of ``num_rows + 1`` positions (record ``i`` is
    ``buf[offsets[i]:offsets[i+1]]``). See :func:`encode_binary` for errors.
    """
    arr = encode_binary(table, avro_schema)
    return binary_to_numpy(arr)


def binary_to_numpy(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(data, offsets)`` views of a binary array without nulls (offsets rebased to 0)."""
    offs = _offsets(arr)
    data_buf = arr.buffers()[2]
    start, stop = (int(offs[0]), int(offs[-1])) if len(offs) else (0, 0)
    data = (
        np.frombuffer(data_buf, dtype=np.uint8, count=stop)[start:]
        if data_buf is not None and stop
        else np.zeros(0, dtype=np.uint8)
    )
    return data, offs - start


# =============================================================================================
# Decoding
# =============================================================================================

_PAD = 16


class _Decoder:
    """Vectorised reader over one buffer; positions are int64 arrays over a subset of records."""

    def __init__(self, buf: Any, source: str) -> None:
        raw = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf
        raw = raw.reshape(-1).view(np.uint8)
        self.size = len(raw)
        padded = np.zeros(self.size + _PAD, dtype=np.uint8)
        padded[: self.size] = raw
        self.buf = padded
        self.source = source
        self._pabuf: pa.Buffer | None = None
        self._fastavro_schemas: dict[int, Any] = {}

    @property
    def pabuf(self) -> pa.Buffer:
        if self._pabuf is None:
            self._pabuf = pa.py_buffer(self.buf)
        return self._pabuf

    def corrupt(self, msg: str) -> HoodieCorruptedDataError:
        return HoodieCorruptedDataError(f"corrupt Avro data in {self.source}: {msg}")

    # -- primitives -------------------------------------------------------------------------
    def varint(
        self, pos: np.ndarray, end: np.ndarray, max_bytes: int = 10
    ) -> tuple[np.ndarray, np.ndarray]:
        """Zigzag-decoded varints at ``pos`` (int64) and the positions after them."""
        if pos.size == 0:
            return np.zeros(0, dtype=np.int64), pos
        if (pos >= end).any():
            raise self.corrupt("a value runs past the end of its record")
        b = self.buf[pos]
        more = b >= 0x80
        if not more.any():
            v = b.astype(np.int64)
            return (v >> 1) ^ -(v & 1), pos + 1
        # Byte k of every value at once; rows whose varint ended stop contributing. The buffer
        # is padded, so reading past a short last record is safe (overruns are rejected below).
        u = (b & 0x7F).astype(_U64)
        n = np.ones(len(pos), dtype=np.int64)
        active = more
        for k in range(1, max_bytes):
            bk = self.buf[pos + k]
            u |= ((bk & 0x7F).astype(_U64) << _SHIFTS[k]) * active
            n += active
            active = active & (bk >= 0x80)
            if not active.any():
                break
        else:
            raise self.corrupt(f"a varint is longer than {max_bytes} bytes")
        new = pos + n
        if (new > end).any():
            raise self.corrupt("a value runs past the end of its record")
        if max_bytes == 5 and (u >= _U64(1 << 32)).any():
            raise self.corrupt("an int varint overflows 32 bits")
        s = (u >> _U64(1)).view(np.int64) ^ -(u & _U64(1)).view(np.int64)
        return s, new

    def fixed(self, pos: np.ndarray, end: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``width`` bytes at each position as a (k, width) matrix."""
        new = pos + width
        if pos.size and (new > end).any():
            raise self.corrupt("a value runs past the end of its record")
        if width == 0:
            return np.zeros((len(pos), 0), dtype=np.uint8), new
        return self.buf[pos[:, None] + np.arange(width)[None, :]], new

    def spans(self, pos: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Length-prefixed byte strings: (starts, lengths, positions after)."""
        lens, p = self.varint(pos, end)
        if lens.size and ((lens < 0).any() or (lens > end - p).any()):
            raise self.corrupt("a string/bytes length is negative or beyond the end of its record")
        return p, lens, p + lens

    def binary_array(
        self, starts: np.ndarray, lens: np.ndarray, valid: np.ndarray | None, string: bool
    ) -> pa.Array:
        """An Arrow binary/string array of the spans (null where ``valid`` is False)."""
        k = len(starts)
        large = self.size + _PAD > _INT32_MAX
        otype = np.int64 if large else np.int32
        if k == 0:
            out: pa.Array = pa.array([], type=pa.large_binary() if large else pa.binary())
        else:
            # Offsets [s0, e0, s1, e1, ...] over the whole buffer: element 2i is span i, the odd
            # elements are the gaps; spans come in buffer order, so offsets never decrease.
            pairs = np.empty(2 * k + 1, dtype=otype)
            pairs[0 : 2 * k : 2] = starts
            pairs[1 : 2 * k : 2] = starts + lens
            pairs[2 * k] = pairs[2 * k - 1]
            if (np.diff(pairs) < 0).any():
                order_ok = False
            else:
                order_ok = True
            typ = pa.large_binary() if large else pa.binary()
            if order_ok:
                both = pa.Array.from_buffers(typ, 2 * k, [None, pa.py_buffer(pairs), self.pabuf])
                idx = np.arange(0, 2 * k, 2, dtype=np.int64)
                out = both.take(pa.array(idx, mask=None if valid is None else ~valid))
            else:  # not in buffer order (cannot happen for well-formed positions): gather
                total = int(lens.sum())
                offs = np.zeros(k + 1, dtype=otype)
                np.cumsum(lens, out=offs[1:])
                gather = np.repeat(starts - offs[:-1], lens) + np.arange(total)
                data = self.buf[gather]
                bitmap = None if valid is None else pa.array(valid).buffers()[1]
                out = pa.Array.from_buffers(
                    typ, k, [bitmap, pa.py_buffer(offs), pa.py_buffer(data)]
                )
        if string:
            out = out.view(pa.large_string() if large else pa.string())
            try:
                out.validate(full=True)
            except pa.ArrowInvalid:
                raise self.corrupt("a string is not valid UTF-8") from None
            if large:
                out = out.cast(pa.string()) if int(np.sum(lens)) <= _INT32_MAX else out
        elif large and int(np.sum(lens)) <= _INT32_MAX:
            out = out.cast(pa.binary())
        return out

    # -- typed decoding ---------------------------------------------------------------------
    def decode(
        self, t: AvroType, pos: np.ndarray, end: np.ndarray, where: str, build: bool = True
    ) -> tuple[pa.Array | None, np.ndarray]:
        """Decode one value of type ``t`` at each position; returns (array, new positions)."""
        if t.kind == "union":
            return self._union(t, pos, end, where, build)
        if t.kind == "null":  # no bytes; one null per record
            return (pa.nulls(len(pos)) if build else None), pos
        payload, new = self.read(t, pos, end, where)
        return (self.build(t, payload, None) if build else None), new

    def _union(
        self, t: AvroType, pos: np.ndarray, end: np.ndarray, where: str, build: bool
    ) -> tuple[pa.Array | None, np.ndarray]:
        k = len(pos)
        branch, pos = self.varint(pos, end, 5)
        nb = len(t.branches)
        if k and ((branch < 0).any() or (branch >= nb).any()):
            raise self.corrupt(f"field {where!r}: union branch out of range 0..{nb - 1}")
        non_null = [i for i, b in enumerate(t.branches) if b.kind != "null"]
        if len(non_null) > 1:
            raise HoodieSchemaError(
                f"field {where!r}: Avro unions of several non-null types cannot be read"
            )
        if not non_null:
            return (pa.nulls(k) if build else None), pos
        vi = non_null[0]
        vt = t.branches[vi]
        valid = branch == vi
        if valid.all():
            return self.decode(vt, pos, end, where, build)
        sub = np.flatnonzero(valid)
        payload, new_sub = self.read(vt, pos[sub], end[sub], where)
        before = pos
        pos = pos.copy()
        pos[sub] = new_sub
        if not build:
            return None, pos
        return self.build(vt, self.scatter(vt, payload, sub, before), valid), pos

    def read(
        self, t: AvroType, pos: np.ndarray, end: np.ndarray, where: str
    ) -> tuple[Any, np.ndarray]:
        """Decode values of non-union type ``t``: a type-specific payload and new positions."""
        k, lg = t.kind, t.logical
        if k == "null":
            return None, pos
        if k == "boolean":
            m, new = self.fixed(pos, end, 1)
            return m[:, 0] == 1, new
        if k == "int" or k == "enum":
            v, new = self.varint(pos, end, 5)
            if k == "enum" and v.size and ((v < 0).any() or (v >= len(t.symbols)).any()):
                raise self.corrupt(f"field {where!r}: enum index out of range")
            return v.astype(np.int32), new
        if k == "long":
            return self.varint(pos, end)
        if k == "float":
            m, new = self.fixed(pos, end, 4)
            return m.view(np.float32).reshape(-1), new
        if k == "double":
            m, new = self.fixed(pos, end, 8)
            return m.view(np.float64).reshape(-1), new
        if k in ("string", "bytes"):
            if lg == "decimal":
                starts, lens, new = self.spans(pos, end)
                return self._bytes_decimal(t, starts, lens, where), new
            starts, lens, new = self.spans(pos, end)
            return (starts, lens), new
        if k == "fixed":
            m, new = self.fixed(pos, end, t.size)
            if lg == "decimal":
                return self._fixed_decimal(t, m, where), new
            return m, new
        if k == "record":
            return self._record(t, pos, end, where)
        if k in ("array", "map"):
            return self._collection(t, pos, end, where)
        if k == "union":
            return self._union(t, pos, end, where, True)
        raise HoodieSchemaError(f"field {where!r}: Avro type {k!r} cannot be read")

    def scatter(self, t: AvroType, payload: Any, sub: np.ndarray, before: np.ndarray) -> Any:
        """Spread a payload decoded for rows ``sub`` to all rows (others zero/empty)."""
        n = len(before)
        if t.kind == "null":
            return None
        if isinstance(payload, pa.Array):
            valid = np.zeros(n, dtype=bool)
            valid[sub] = True
            return payload.take(pa.array(np.cumsum(valid) - 1, mask=~valid))
        if isinstance(payload, tuple):
            starts, lens = payload
            full_s = before.copy()  # a null row: an empty span where it stands keeps order
            full_l = np.zeros(n, dtype=np.int64)
            full_s[sub] = starts
            full_l[sub] = lens
            return full_s, full_l
        full = np.zeros((n, *payload.shape[1:]), dtype=payload.dtype)
        full[sub] = payload
        return full

    def build(self, t: AvroType, payload: Any, valid: np.ndarray | None) -> pa.Array:
        """The Arrow array of a payload (rows where ``valid`` is False become null)."""
        k, lg = t.kind, t.logical
        if k == "null":
            return pa.nulls(len(valid) if valid is not None else 0)
        if isinstance(payload, pa.Array):
            return payload  # nested values: nulls were put in place by scatter()
        if isinstance(payload, tuple):
            starts, lens = payload
            return self.binary_array(starts, lens, valid, k == "string")
        typ, _ = avro_type_to_arrow(t)
        mask = None if valid is None else ~valid
        if k == "enum":
            symbols = pa.array(list(t.symbols), pa.string())
            return symbols.take(pa.array(payload, mask=mask))
        if k == "fixed" and lg != "decimal":
            bitmap = None if valid is None else pa.array(valid).buffers()[1]
            return pa.Array.from_buffers(
                typ, len(payload), [bitmap, pa.py_buffer(np.ascontiguousarray(payload))]
            )
        if lg == "decimal":
            bitmap = None if valid is None else pa.array(valid).buffers()[1]
            return pa.Array.from_buffers(typ, len(payload), [bitmap, pa.py_buffer(payload)])
        if k == "boolean":
            return pa.array(payload, type=pa.bool_(), mask=mask)
        if typ in (pa.int32(), pa.int64(), pa.float32(), pa.float64()):
            return pa.array(payload, type=typ, mask=mask)
        # date / time / timestamp: same bits as the int32/int64 storage
        storage = pa.int32() if k == "int" else pa.int64()
        return pa.array(payload, type=storage, mask=mask).view(typ)

    def _fixed_decimal(self, t: AvroType, m: np.ndarray, where: str) -> np.ndarray:
        k, size = m.shape
        width = 32 if t.precision > 38 else 16
        out = np.empty((k, width), dtype=np.uint8)
        if size == 0:
            out[:] = 0
            return out
        sign = np.where(m[:, 0] >= 0x80, 0xFF, 0).astype(np.uint8)
        if size <= width:
            out[:, :size] = m[:, ::-1]
            out[:, size:] = sign[:, None]
        else:
            head = m[:, : size - width]
            if k and (
                (head != sign[:, None]).any() or ((m[:, size - width] >> 7) != (sign >> 7)).any()
            ):
                raise self.corrupt(f"field {where!r}: decimal value out of range")
            out[:] = m[:, ::-1][:, :width]
        return out

    def _bytes_decimal(
        self, t: AvroType, starts: np.ndarray, lens: np.ndarray, where: str
    ) -> np.ndarray:
        k = len(starts)
        width = 32 if t.precision > 38 else 16
        if k and (lens > width).any():
            raise self.corrupt(f"field {where!r}: decimal of more than {width} bytes")
        # right-align each big-endian value in `width` bytes, sign-extending on the left
        j = np.arange(width)[None, :]
        src = starts[:, None] + j - (width - lens)[:, None]
        inside = j >= (width - lens)[:, None]
        be = self.buf[np.where(inside, src, 0)]
        first = self.buf[starts]
        sign = np.where((lens > 0) & (first >= 0x80), 0xFF, 0).astype(np.uint8)
        be = np.where(inside, be, sign[:, None]).astype(np.uint8)
        return np.ascontiguousarray(be[:, ::-1])

    def _record(
        self, t: AvroType, pos: np.ndarray, end: np.ndarray, where: str
    ) -> tuple[pa.Array, np.ndarray]:
        children = []
        for f in t.fields:
            arr, pos = self.decode(f.type, pos, end, f"{where}.{f.name}")
            children.append(arr)
        typ, _ = avro_type_to_arrow(t)
        if not t.fields:
            return pa.array([{}] * len(pos), type=typ) if len(pos) else pa.array([], type=typ), pos
        return pa.StructArray.from_arrays(children, fields=list(typ)), pos

    def _collection(
        self, t: AvroType, pos: np.ndarray, end: np.ndarray, where: str
    ) -> tuple[pa.Array, np.ndarray]:
        """An array or map column: blocks of items until a zero count, every record at once."""
        n = len(pos)
        item_t = t.items if t.kind == "array" else t.values
        assert item_t is not None
        min_item = item_t.min_size + (1 if t.kind == "map" else 0)
        pos = pos.copy()
        items = _CollectionItems(n)
        active = np.arange(n)
        while active.size:
            cnt = self._block_count(pos, end, active, min_item, where)
            go = cnt > 0
            self._block_items(t, item_t, pos, end, active[go], cnt[go], items, where)
            active = active[go]
        return items.to_arrow(t), pos

    def _block_count(
        self, pos: np.ndarray, end: np.ndarray, active: np.ndarray, min_item: int, where: str
    ) -> np.ndarray:
        """The item count of the next block of each active record, ``pos`` moved past the
        block header (a negative count is followed by the block's size in bytes)."""
        cnt, p = self.varint(pos[active], end[active])
        neg = cnt < 0
        if neg.any():
            if (cnt == np.iinfo(np.int64).min).any():
                raise self.corrupt(f"field {where!r}: invalid block count")
            cnt = np.abs(cnt)
            nidx = np.flatnonzero(neg)
            size, p_after = self.varint(p[nidx], end[active][nidx])
            if (size < 0).any():
                raise self.corrupt(f"field {where!r}: negative block size")
            p[nidx] = p_after
        pos[active] = p
        room = end[active] - p
        limit = room // min_item if min_item else np.full(len(room), _MAX_ZERO_SIZE_ITEMS)
        if (cnt > limit).any():
            raise self.corrupt(f"field {where!r}: an item count exceeds what the record holds")
        return cnt

    def _block_items(
        self,
        t: AvroType,
        item_t: AvroType,
        pos: np.ndarray,
        end: np.ndarray,
        act: np.ndarray,
        rem: np.ndarray,
        items: _CollectionItems,
        where: str,
    ) -> None:
        """Decode ``rem[i]`` items of record ``act[i]``: one item of every record per round;
        a few records with long blocks are left to fastavro, one record at a time."""
        while act.size:
            if act.size <= 16 and int(rem.max()) > _LOCKSTEP_MAX_ITEMS:
                for r, c in zip(act.tolist(), rem.tolist(), strict=True):
                    keys, vals, pos[r] = self._items_fastavro(
                        t, item_t, int(pos[r]), int(end[r]), c, where
                    )
                    items.pieces.append((np.full(c, r, dtype=np.int64), vals, keys))
                    items.counts[r] += c
                return
            keys = None
            p = pos[act]
            if t.kind == "map":
                starts, lens, p = self.spans(p, end[act])
                keys = self.binary_array(starts, lens, None, True)
            vals, p = self.decode(
                item_t, p, end[act], where + ("[]" if t.kind == "array" else "{}")
            )
            pos[act] = p
            items.pieces.append((act, vals, keys))  # type: ignore[arg-type]
            items.counts[act] += 1
            rem = rem - 1
            keep = rem > 0
            act, rem = act[keep], rem[keep]

    def _items_fastavro(
        self, t: AvroType, item_t: AvroType, pos: int, end: int, count: int, where: str
    ) -> tuple[pa.Array | None, pa.Array, int]:
        """``count`` consecutive items of one record, decoded one by one with fastavro."""
        import fastavro

        key = id(item_t)
        if key not in self._fastavro_schemas:
            self._fastavro_schemas[key] = fastavro.parse_schema(item_t.fastavro_json())
        schema = self._fastavro_schemas[key]
        fo = io.BytesIO(self.buf[:end].tobytes())
        fo.seek(pos)
        keys: list[Any] = []
        vals: list[Any] = []
        try:
            for _ in range(count):
                if t.kind == "map":
                    keys.append(fastavro.schemaless_reader(fo, "string", None))
                vals.append(fastavro.schemaless_reader(fo, schema, None))
        except Exception as e:  # fastavro raises many types on garbage
            raise self.corrupt(f"field {where!r}: {type(e).__name__}: {e}") from None
        typ, _ = avro_type_to_arrow(item_t)
        key_arr = pa.array(keys, pa.string()) if t.kind == "map" else None
        return key_arr, pa.array(vals, type=typ), fo.tell()


class _CollectionItems:
    """The items of an array or map column as decoded, in pieces: the records they belong
    to, their values and (maps) keys; and each record's item count."""

    def __init__(self, n: int) -> None:
        self.counts = np.zeros(n, dtype=np.int64)
        self.pieces: list[tuple[np.ndarray, pa.Array, pa.Array | None]] = []

    def to_arrow(self, t: AvroType) -> pa.Array:
        """The list or map array: the pieces put back in record order."""
        pieces = self.pieces
        typ, _ = avro_type_to_arrow(t)
        offsets = np.zeros(len(self.counts) + 1, dtype=np.int32)
        np.cumsum(self.counts, out=offsets[1:])
        item_type = typ.value_type if t.kind == "array" else typ.item_type
        if pieces:
            rows = np.concatenate([pc_[0] for pc_ in pieces])
            order = pa.array(np.argsort(rows, kind="stable"))
            vals = pa.concat_arrays([pc_[1] for pc_ in pieces]).take(order)
        else:
            vals = pa.array([], type=item_type)
        if t.kind == "array":
            return pa.ListArray.from_arrays(pa.array(offsets), vals, type=typ)
        keys = (
            pa.concat_arrays([pc_[2] for pc_ in pieces]).take(order)  # type: ignore[misc]
            if pieces
            else pa.array([], type=pa.string())
        )
        return pa.MapArray.from_arrays(pa.array(offsets), keys, vals, type=typ)


def decode_records(
    buf: Any,
    offsets: Any,
    avro_schema: dict[str, Any] | str | AvroType,
    *,
    columns: Sequence[str] | None = None,
    source: str = "<buffer>",
) -> pa.Table:
    """Decode Avro binary records laid out at ``offsets`` in ``buf`` into an Arrow table.

    ``buf`` is bytes-like or a uint8 array; ``offsets`` holds ``N + 1`` increasing positions
    (record ``i`` is ``buf[offsets[i]:offsets[i+1]]``). The schema is the writer's schema
    (JSON text, parsed JSON or :class:`AvroType`). ``columns`` selects top-level fields (the
    others are skipped without building arrays). The table's schema is
    :func:`~hoodie_ray.avro.schema.avro_to_arrow_schema` of ``avro_schema`` (projected).
    Raises :class:`HoodieCorruptedDataError` naming ``source`` for data that does not decode.
    """
    offs = np.asarray(offsets, dtype=np.int64).reshape(-1)
    if offs.size == 0:
        raise HoodieCorruptedDataError(f"corrupt Avro data in {source}: record offsets are empty")
    return decode_spans(buf, offs[:-1], offs[1:], avro_schema, columns=columns, source=source)


def decode_spans(
    buf: Any,
    starts: Any,
    ends: Any,
    avro_schema: dict[str, Any] | str | AvroType,
    *,
    columns: Sequence[str] | None = None,
    source: str = "<buffer>",
) -> pa.Table:
    """Like :func:`decode_records` for records at ``buf[starts[i]:ends[i]]`` (in buffer order,
    possibly with gaps between them, e.g. Hudi's length prefixes)."""
    t = _schema(avro_schema)
    dec = _Decoder(buf, source)
    starts = np.asarray(starts, dtype=np.int64).reshape(-1)
    end = np.asarray(ends, dtype=np.int64).reshape(-1)
    if starts.shape != end.shape:
        raise dec.corrupt("record starts and ends differ in number")
    if starts.size and (
        starts[0] < 0 or end[-1] > dec.size or (end < starts).any() or (starts[1:] < end[:-1]).any()
    ):
        raise dec.corrupt("record spans are not in order within the buffer")
    want = set(columns) if columns is not None else None
    if want is not None:
        unknown = want - {f.name for f in t.fields}
        if unknown:
            raise HoodieSchemaError(
                f"columns {sorted(unknown)} are not in the Avro schema {t.name}"
            )
    names = list(columns) if columns is not None else [f.name for f in t.fields]
    if starts.size >= _JIT_MIN_RECORDS and kernel.available():
        plan = kernel.flat_plan(t)
        if plan is not None:
            walked = kernel.walk_flat_records(dec.buf, starts, end, plan)
            if walked is not None:
                return _table_from_walk(dec, t, plan, walked, names)
            # else: malformed; the numpy path below names the fault
    pos = starts.copy()
    arrays: dict[str, pa.Array] = {}
    fields: dict[str, pa.Field] = {}
    for f in t.fields:
        build = want is None or f.name in want
        arr, pos = dec.decode(f.type, pos, end, f.name, build)
        if build:
            assert arr is not None
            typ, nullable = avro_type_to_arrow(f.type, f.name)
            arrays[f.name] = arr
            fields[f.name] = pa.field(f.name, typ, nullable)
    if pos.size and (pos != end).any():
        bad = int(np.flatnonzero(pos != end)[0])
        raise dec.corrupt(
            f"record {bad} has {int(end[bad] - pos[bad])} byte(s) its schema does not account for"
        )
    return pa.Table.from_arrays(
        [arrays[nm] for nm in names], schema=pa.schema([fields[nm] for nm in names])
    )


def _table_from_walk(
    dec: _Decoder,
    t: AvroType,
    plan: kernel.FlatPlan,
    walked: tuple[np.ndarray, np.ndarray, np.ndarray],
    names: list[str],
) -> pa.Table:
    """The table of a compiled walk: each payload as :meth:`_Decoder.read` would give it,
    turned into an array by :meth:`_Decoder.build` (the numpy path's own code)."""
    vals, vpos, valid = walked
    index = {f.name: j for j, f in enumerate(t.fields)}
    arrays, fields = [], []
    for nm in names:
        j = index[nm]
        f = t.fields[j]
        k = int(plan.kinds[j])
        v: np.ndarray | None = valid[j] if plan.null_branch[j] >= 0 else None
        if v is not None and v.all():
            v = None
        payload: Any
        if k == kernel.K_LONG:
            payload = vals[j].copy()
        elif k == kernel.K_INT:
            payload = vals[j].astype(np.int32)
        elif k == kernel.K_BOOLEAN:
            payload = vals[j] == 1
        elif k == kernel.K_FLOAT:
            payload = vals[j].astype(np.uint32).view(np.float32)
        elif k == kernel.K_DOUBLE:
            payload = vals[j].view(np.float64).copy()
        else:  # string, bytes: (starts, lengths) in the buffer
            payload = (vpos[j], vals[j])
        arrays.append(dec.build(plan.value_types[j], payload, v))
        typ, nullable = avro_type_to_arrow(f.type, f.name)
        fields.append(pa.field(f.name, typ, nullable))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


_BE_INT32 = struct.Struct(">i")


def length_prefixed_spans(
    buf: Any, start: int, count: int, source: str = "<buffer>"
) -> tuple[np.ndarray, np.ndarray, int]:
    """Locate ``count`` records each prefixed by a big-endian int32 length, from byte ``start``
    (the layout of an Avro data block). Returns ``(starts, ends, position after the last)``.

    Each record's position depends on all the lengths before it, so this walk is sequential; it
    touches 4 bytes per record. Raises :class:`HoodieCorruptedDataError` when the count cannot
    fit or a length is negative or runs past the buffer.
    """
    data = buf if isinstance(buf, bytes | bytearray) else memoryview(buf).cast("B")
    size = len(data)
    if count < 0 or start < 0 or count > max(0, size - start) // 4:
        raise HoodieCorruptedDataError(
            f"corrupt Avro data block in {source}: {count} records cannot fit in {size - start} bytes"
        )
    if count >= _JIT_MIN_RECORDS and kernel.available():
        walked = kernel.walk_length_prefixed(np.frombuffer(data, dtype=np.uint8), start, count)
        if walked is not None:
            return _prefixed_spans(*walked)
        # else: malformed; the walk below names the fault
    starts = [0] * count
    unpack = _BE_INT32.unpack_from
    p = start
    try:
        for i in range(count):
            (ln,) = unpack(data, p)
            if ln < 0:
                raise HoodieCorruptedDataError(
                    f"corrupt Avro data block in {source}: record {i} has a negative length"
                )
            p += 4
            starts[i] = p
            p += ln
    except struct.error:
        raise HoodieCorruptedDataError(
            f"corrupt Avro data block in {source}: a record length runs past the block"
        ) from None
    if p > size:
        raise HoodieCorruptedDataError(
            f"corrupt Avro data block in {source}: the last record runs past the block"
        )
    return _prefixed_spans(np.array(starts, dtype=np.int64), p)


def _prefixed_spans(starts: np.ndarray, stop: int) -> tuple[np.ndarray, np.ndarray, int]:
    """``(starts, ends, stop)``: each record ends where the next one's length prefix begins."""
    ends = np.empty(len(starts), dtype=np.int64)
    if len(starts):
        ends[:-1] = starts[1:] - 4
        ends[-1] = stop
    return starts, ends, stop
