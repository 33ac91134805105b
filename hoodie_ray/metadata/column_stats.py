"""Column statistics of the metadata table (``column_stats`` and ``partition_stats``) as Hudi Java
1.x computes them (spec/metadata-table.md 3.2, types 3 and 6).

Java computes a ``HoodieColumnRangeMetadata`` per indexed column and file:

* **Parquet base files** from the footer (``ParquetUtils.readColumnStatsFromMetadata``): per
  column chunk the statistics' min/max, ``nullCount`` (the value count when the chunk has no
  statistics), ``valueCount`` = the chunk's value count (nulls included), ``totalSize`` /
  ``totalUncompressedSize`` = the chunk's compressed / uncompressed sizes; several row groups
  merge (min of mins, max of maxes, sums). A chunk whose statistics carry no min/max gives
  parquet-mr's defaults: null for binary columns, ``0``/``false`` for primitive ones.
* **Log files** from the records written in them (``collectColumnRangeMetadata``):
  ``valueCount`` = number of records, nulls (and values of types that cannot be compared)
  counted in ``nullCount``, min/max over the rest, sizes 0. A log file with no data records
  (delete blocks only) gets empty stats: null min/max, counts and sizes 0, value type NULL.

Values are stored in wrapper records. Table version 9 (column-stats index version V2) adds
``valueType = {typeOrdinal, additionalInfo}`` and wraps by the value type (:class:`ValueType`):
decimals as ``BytesWrapper`` holding the unscaled two's-complement value at the column's own
scale with ``additionalInfo = "precision,scale"``, dates as ``IntWrapper`` (days), timestamps and
times as ``LongWrapper``/``IntWrapper`` in their own unit. Table version 8 (V1) has no value
type and wraps by Java class (``HoodieAvroUtils.wrapValueIntoAvro``): decimals as
``DecimalWrapper`` rescaled to decimal(30,15), dates as ``DateWrapper``, timestamps as plain
``LongWrapper``.

Table version 6 (Hudi 0.14 / 0.15, docs/V6_COLUMN_STATS.md) wraps as version 8 does, without
``isTightBound`` in its record schema, and indexes the five meta fields and every top-level
column (:func:`columns_to_index_v6`); a log file's column of a type that cannot be compared
gets a record with null min/max.

Indexed columns (:func:`columns_to_index`): ``_hoodie_commit_time``,
``_hoodie_partition_path``, ``_hoodie_record_key`` (when meta fields are populated) followed by
the first 32 supported data columns in schema order
(``hoodie.metadata.index.column.stats.max.columns.to.index``) or the configured
``hoodie.metadata.index.column.stats.column.list``. Nested types are not indexed, nor decimals
whose ``precision + (15 - scale) > 30`` or ``scale > 15``.

Where Java fails, this module picks a value instead (Java catches the failure and writes no
column stats for the whole file): Parquet columns annotated ``INT(8/16/32/64)`` are read as
INT/LONG, ``ENUM``/``JSON`` as STRING, ``UUID`` as a UUID string, and a non-decimal
``FIXED_LEN_BYTE_ARRAY`` under v8 as bytes; ``INT96`` columns get no record.

Sources (facts only, apache/hudi master as stored): ``metadata/HoodieTableMetadataUtil.java``
(``getColumnsToIndex``, ``isColumnTypeSupported``, ``collectColumnRangeMetadata``,
``getColumnStatsRecords``, ``mergeColumnStatsRecords``), ``common/util/ParquetUtils.java``,
``metadata/stats/{ValueType,ValueMetadata,HoodieColumnRangeMetadata,LogicalTypeParquetAdapter}
.java``, ``avro/HoodieAvroUtils.wrapValueIntoAvro``, ``metadata/HoodieMetadataPayload.java``.
"""

from __future__ import annotations

import decimal as _decimal
import enum
import json
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.exceptions import HoodieInputError
from hoodie_ray.meta import META_FIELDS_WITH_OPERATION
from hoodie_ray.metadata.records import (
    NAMESPACE,
    MetadataPartitionType,
    column_stats_key,
    partition_identifier,
    partition_stats_key,
)

__all__ = [
    "DEFAULT_MAX_COLUMNS_TO_INDEX",
    "META_COLUMNS_TO_INDEX",
    "V6_META_COLUMNS",
    "ValueType",
    "column_stats_records",
    "column_stats_tombstones",
    "columns_to_index",
    "columns_to_index_v6",
    "merge_column_stats",
    "partition_stats_records",
]

#: Meta columns always indexed when meta fields are populated (Java's TreeMap order).
META_COLUMNS_TO_INDEX: tuple[str, ...] = (
    "_hoodie_commit_time",
    "_hoodie_partition_path",
    "_hoodie_record_key",
)
#: ``hoodie.metadata.index.column.stats.max.columns.to.index`` default.
DEFAULT_MAX_COLUMNS_TO_INDEX = 32
_DECIMAL_MAX_PRECISION = 30
_DECIMAL_MAX_SCALE = 15
_DEC_CTX = _decimal.Context(prec=120)


class ValueType(enum.IntEnum):
    """``org.apache.hudi.metadata.stats.ValueType``: ``valueType.typeOrdinal`` in v9 records."""

    V1 = 0
    NULL = 1
    BOOLEAN = 2
    INT = 3
    LONG = 4
    FLOAT = 5
    DOUBLE = 6
    STRING = 7
    BYTES = 8
    FIXED = 9
    DECIMAL = 10
    UUID = 11
    DATE = 12
    TIME_MILLIS = 13
    TIME_MICROS = 14
    TIMESTAMP_MILLIS = 15
    TIMESTAMP_MICROS = 16
    TIMESTAMP_NANOS = 17
    LOCAL_TIMESTAMP_MILLIS = 18
    LOCAL_TIMESTAMP_MICROS = 19
    LOCAL_TIMESTAMP_NANOS = 20

    @property
    def wrapper(self) -> str | None:
        """Short name of the wrapper record values of this type are stored in (v9)."""
        return _WRAPPER_OF_TYPE.get(self)


_WRAPPER_OF_TYPE: dict[ValueType, str] = {
    ValueType.BOOLEAN: "BooleanWrapper",
    ValueType.INT: "IntWrapper",
    ValueType.LONG: "LongWrapper",
    ValueType.FLOAT: "FloatWrapper",
    ValueType.DOUBLE: "DoubleWrapper",
    ValueType.STRING: "StringWrapper",
    ValueType.BYTES: "BytesWrapper",
    ValueType.FIXED: "BytesWrapper",
    ValueType.DECIMAL: "BytesWrapper",
    ValueType.UUID: "StringWrapper",
    ValueType.DATE: "IntWrapper",
    ValueType.TIME_MILLIS: "IntWrapper",
    ValueType.TIME_MICROS: "LongWrapper",
    ValueType.TIMESTAMP_MILLIS: "LongWrapper",
    ValueType.TIMESTAMP_MICROS: "LongWrapper",
    ValueType.TIMESTAMP_NANOS: "LongWrapper",
    ValueType.LOCAL_TIMESTAMP_MILLIS: "LongWrapper",
    ValueType.LOCAL_TIMESTAMP_MICROS: "LongWrapper",
    ValueType.LOCAL_TIMESTAMP_NANOS: "LongWrapper",
}


# ---------------------------------------------------------------------------------------------
# Typed ranges
# ---------------------------------------------------------------------------------------------


@dataclass
class _Kind:
    """How one column's values are typed, compared and wrapped.

    ``value_type`` is the v9 type (None under v8); ``wrapper`` the v8 wrapper (None under v9,
    where the value type decides); ``decimal`` the (precision, scale) of decimal columns.
    """

    value_type: ValueType | None
    wrapper: str | None = None
    decimal: tuple[int, int] | None = None

    @property
    def additional_info(self) -> str | None:
        if self.value_type == ValueType.DECIMAL and self.decimal is not None:
            return f"{self.decimal[0]},{self.decimal[1]}"
        return None

    def wrapper_name(self) -> str | None:
        if self.value_type is not None:
            return self.value_type.wrapper
        return self.wrapper


@dataclass
class _Range:
    """``HoodieColumnRangeMetadata`` with values in their stored (primitive) form."""

    column: str
    min: Any
    max: Any
    null_count: int
    value_count: int
    total_size: int
    total_uncompressed_size: int
    kind: _Kind


def _java_sort_key(v: Any) -> Any:
    """A key ordering stored values as Java compares their standardized forms: strings by
    UTF-16 code units (``String.compareTo``), byte buffers by signed bytes
    (``ByteBuffer.compareTo``), floats with -0.0 < 0.0 < NaN (``Double.compare``)."""
    if isinstance(v, str):
        return v.encode("utf-16-be")
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(b ^ 0x80 for b in bytes(v))
    if isinstance(v, float):
        return (math.isnan(v), 0.0 if math.isnan(v) else v, math.copysign(1.0, v))
    return v


def _comparable(v: Any, kind: _Kind) -> Any:
    if v is None:
        return None
    if kind.value_type == ValueType.DECIMAL:
        return int.from_bytes(v, "big", signed=True) if isinstance(v, bytes) else v
    return _java_sort_key(v)


def _pick(a: Any, b: Any, kind: _Kind, want_max: bool) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    ka, kb = _comparable(a, kind), _comparable(b, kind)
    if want_max:
        return a if ka > kb else b
    return a if ka < kb else b


def _merge_ranges(left: _Range | None, right: _Range) -> _Range:
    """``HoodieColumnRangeMetadata.merge``: min of mins, max of maxes, sums (left's kind)."""
    if left is None:
        return right
    return _Range(
        left.column,
        _pick(left.min, right.min, left.kind, want_max=False),
        _pick(left.max, right.max, left.kind, want_max=True),
        left.null_count + right.null_count,
        left.value_count + right.value_count,
        left.total_size + right.total_size,
        left.total_uncompressed_size + right.total_uncompressed_size,
        left.kind,
    )


def _java_big_integer_bytes(n: int) -> bytes:
    """``BigInteger.toByteArray()``: minimal big-endian two's complement, at least one byte."""
    length = ((n if n >= 0 else ~n).bit_length() + 8) // 8
    return n.to_bytes(length, "big", signed=True)


#: ``HoodieTableMetadataUtil.tryUpcastDecimal``'s target: ``DecimalWrapper``'s decimal(30,15).
_WRAPPER_SCALE = _decimal.Decimal(1).scaleb(-_DECIMAL_MAX_SCALE)


def _decimal_30_15(d: _decimal.Decimal) -> _decimal.Decimal:
    """``d`` rescaled to decimal(30,15) as Java's ``tryUpcastDecimal`` does, which refuses a
    value that would need rounding or more than 30 digits (the 0.x commit then fails; v8's
    column choice leaves such columns out)."""
    ctx = _decimal.Context(prec=120, traps=[_decimal.Inexact, _decimal.InvalidOperation])
    try:
        q = d.quantize(_WRAPPER_SCALE, context=ctx)
    except _decimal.DecimalException:
        q = None
    if q is None or len(q.as_tuple().digits) > _DECIMAL_MAX_PRECISION:
        raise HoodieInputError(
            f"column statistics: decimal value {d} does not fit decimal(30,15) without "
            "rounding (Java's tryUpcastDecimal refuses it too); leave the column out of "
            "column_stats or drop the index"
        )
    return q


def _wrap(value: Any, kind: _Kind) -> Any:
    if value is None:
        return None
    name = kind.wrapper_name()
    if name is None:
        return None
    if name == "DecimalWrapper":
        return (f"{NAMESPACE}.{name}", {"value": _decimal_30_15(_decimal.Decimal(value))})
    return (f"{NAMESPACE}.{name}", {"value": value})


def _stats_record(
    key: str,
    file_name: str,
    r: _Range,
    *,
    record_type: int,
    v9: bool,
    is_deleted: bool = False,
    is_tight_bound: bool = False,
) -> tuple[str, dict[str, Any]]:
    stats: dict[str, Any] = {
        "fileName": file_name,
        "columnName": r.column,
        "minValue": _wrap(r.min, r.kind),
        "maxValue": _wrap(r.max, r.kind),
        "valueCount": r.value_count,
        "nullCount": r.null_count,
        "totalSize": r.total_size,
        "totalUncompressedSize": r.total_uncompressed_size,
        "isDeleted": is_deleted,
        "isTightBound": is_tight_bound,
    }
    if v9:
        vt = r.kind.value_type if r.kind.value_type is not None else ValueType.NULL
        stats["valueType"] = {"typeOrdinal": int(vt), "additionalInfo": r.kind.additional_info}
    rec: dict[str, Any] = {
        "key": "",
        "type": record_type,
        "filesystemMetadata": None,
        "BloomFilterMetadata": None,
        "ColumnStatsMetadata": stats,
        "recordIndexMetadata": None,
        "SecondaryIndexMetadata": None,
    }
    return key, rec


def _is_v9(table_version: int) -> bool:
    if table_version not in (6, 8, 9):
        raise HoodieInputError(
            f"column stats are written for table versions 6, 8 and 9, not {table_version}"
        )
    return table_version >= 9


# ---------------------------------------------------------------------------------------------
# Columns to index
# ---------------------------------------------------------------------------------------------


def _base_type(t: pa.DataType) -> pa.DataType:
    while pa.types.is_dictionary(t):
        t = t.value_type
    return t


def _is_supported_arrow(t: pa.DataType) -> bool:
    """``isColumnTypeSupported`` for the Avro type a column maps to (record type AVRO: bytes
    and fixed are indexed; records, arrays, maps and enums are not)."""
    t = _base_type(t)
    if pa.types.is_decimal(t):
        return (
            t.precision + (_DECIMAL_MAX_SCALE - t.scale) <= _DECIMAL_MAX_PRECISION
            and t.scale <= _DECIMAL_MAX_SCALE
        )
    return not (
        pa.types.is_struct(t)
        or pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_map(t)
        or pa.types.is_union(t)
        or pa.types.is_float16(t)
    )


def columns_to_index(
    schema: pa.Schema,
    *,
    populate_meta_fields: bool = True,
    column_list: Sequence[str] | None = None,
    max_columns: int = DEFAULT_MAX_COLUMNS_TO_INDEX,
) -> list[str]:
    """The columns Java indexes for a table schema (``getColumnsToIndex``): the three always
    indexed meta columns, then ``column_list`` (its supported non-meta columns, in its order)
    or else the first ``max_columns`` supported non-meta columns of ``schema``."""
    out: list[str] = list(META_COLUMNS_TO_INDEX) if populate_meta_fields else []
    if column_list:
        for c in column_list:
            if c in META_COLUMNS_TO_INDEX or c in out:
                continue
            idx = schema.get_field_index(c)
            if idx < 0:
                raise HoodieInputError(f"column {c!r} to index is not in the table schema")
            if _is_supported_arrow(schema.field(idx).type):
                out.append(c)
        return out
    n = 0
    for f in schema:
        if n >= max_columns:
            break
        if f.name in META_FIELDS_WITH_OPERATION or not _is_supported_arrow(f.type):
            continue
        out.append(f.name)
        n += 1
    return out


#: The meta fields 0.x indexes (``HoodieAvroUtils.addMetadataFields``: the five, in this order).
V6_META_COLUMNS: tuple[str, ...] = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)


def columns_to_index_v6(
    schema: pa.Schema, *, populate_meta_fields: bool = True, with_operation: bool = False
) -> list[str]:
    """The columns Hudi 0.14 / 0.15 indexes without a configured list
    (``HoodieTableMetadataUtil.getColumnsToIndex``, docs/V6_COLUMN_STATS.md 1.1-1.2): the five
    meta fields (and ``_hoodie_operation`` where the table keeps it: ``with_operation``, the
    clean and initialisation paths), then every top-level field of ``schema`` in order, of any
    type (nested ones get no record from a Parquet footer, null min/max from log records)."""
    meta = list(V6_META_COLUMNS) if populate_meta_fields else []
    if populate_meta_fields and with_operation:
        meta.append("_hoodie_operation")
    return meta + [f.name for f in schema if f.name not in META_FIELDS_WITH_OPERATION]


# ---------------------------------------------------------------------------------------------
# Parquet footers
# ---------------------------------------------------------------------------------------------


#: Parquet physical type -> (v9 value type, v8 wrapper) of a column its logical type leaves as is.
_PHYSICAL_KINDS: dict[str, tuple[ValueType, str]] = {
    "BOOLEAN": (ValueType.BOOLEAN, "BooleanWrapper"),
    "INT32": (ValueType.INT, "IntWrapper"),
    "INT64": (ValueType.LONG, "LongWrapper"),
    "FLOAT": (ValueType.FLOAT, "FloatWrapper"),
    "DOUBLE": (ValueType.DOUBLE, "DoubleWrapper"),
    "BYTE_ARRAY": (ValueType.BYTES, "BytesWrapper"),
    "FIXED_LEN_BYTE_ARRAY": (ValueType.FIXED, "BytesWrapper"),
}
#: v9 value types of Parquet logical types (Time and Timestamp by their unit, below).
_LOGICAL_VALUE_TYPES = {
    "String": ValueType.STRING,
    "Enum": ValueType.STRING,
    "Json": ValueType.STRING,
    "Date": ValueType.DATE,
    "UUID": ValueType.UUID,
}
#: (unit, isAdjustedToUTC) of a Parquet Timestamp -> its v9 value type.
_TIMESTAMP_VALUE_TYPES = {
    ("milliseconds", True): ValueType.TIMESTAMP_MILLIS,
    ("microseconds", True): ValueType.TIMESTAMP_MICROS,
    ("nanoseconds", True): ValueType.TIMESTAMP_NANOS,
    ("milliseconds", False): ValueType.LOCAL_TIMESTAMP_MILLIS,
    ("microseconds", False): ValueType.LOCAL_TIMESTAMP_MICROS,
    ("nanoseconds", False): ValueType.LOCAL_TIMESTAMP_NANOS,
}


def _parquet_kind(col: Any, v9: bool) -> _Kind | None:
    """The kind of a Parquet leaf column (``ValueType.fromParquetPrimitiveType`` for v9, the
    legacy ``convertToNativeJavaType`` classes for v8); None if Java cannot index it."""
    physical = col.physical_type
    logical = json.loads(col.logical_type.to_json()) if col.logical_type is not None else {}
    lt = logical.get("Type", "None")
    if lt == "Decimal":
        dec = (int(logical["precision"]), int(logical["scale"]))
        return _Kind(ValueType.DECIMAL, decimal=dec) if v9 else _Kind(None, "DecimalWrapper", dec)
    if physical == "INT96":
        return None
    if not v9:
        if lt == "Date":
            return _Kind(None, "DateWrapper")
        if lt == "String" or (physical == "BYTE_ARRAY" and col.converted_type == "UTF8"):
            return _Kind(None, "StringWrapper")
        kinds = _PHYSICAL_KINDS.get(physical)
        return _Kind(None, kinds[1]) if kinds else None
    vt = _parquet_value_type(physical, lt, logical)
    return _Kind(vt) if vt is not None else None


def _parquet_value_type(physical: str, lt: str, logical: Mapping[str, Any]) -> ValueType | None:
    """The v9 value type of a Parquet column of logical type ``lt`` (details in ``logical``)."""
    if lt in _LOGICAL_VALUE_TYPES:
        return _LOGICAL_VALUE_TYPES[lt]
    if lt == "Time":
        millis = logical.get("timeUnit") == "milliseconds"
        return ValueType.TIME_MILLIS if millis else ValueType.TIME_MICROS
    if lt == "Timestamp":
        unit = str(logical.get("timeUnit", ""))
        return _TIMESTAMP_VALUE_TYPES.get((unit, bool(logical.get("isAdjustedToUTC"))))
    kinds = _PHYSICAL_KINDS.get(physical)
    return kinds[0] if kinds else None


_PRIMITIVE_DEFAULT = {"BOOLEAN": False, "INT32": 0, "INT64": 0, "FLOAT": 0.0, "DOUBLE": 0.0}


def _parquet_value(raw: Any, physical: str, kind: _Kind) -> Any:
    """A footer min/max (physical value) in its stored form."""
    if raw is None:
        return None
    if kind.decimal is not None:
        unscaled = int.from_bytes(raw, "big", signed=True) if isinstance(raw, bytes) else int(raw)
        if kind.value_type == ValueType.DECIMAL:
            return _java_big_integer_bytes(unscaled)
        return _decimal.Decimal(unscaled).scaleb(-kind.decimal[1], _DEC_CTX)
    vt = kind.value_type
    name = kind.wrapper_name()
    if vt == ValueType.UUID:
        return str(uuid.UUID(bytes=bytes(raw))) if len(raw) == 16 else None
    if name == "StringWrapper":
        return bytes(raw).decode("utf-8", errors="replace")
    if name == "BytesWrapper":
        return bytes(raw)
    if physical == "FLOAT" or physical == "DOUBLE":
        return float(raw)
    if physical == "BOOLEAN":
        return bool(raw)
    return int(raw)


def _parquet_ranges(metadata: Any, columns: Sequence[str], v9: bool) -> dict[str, _Range]:
    wanted = set(columns)
    schema = metadata.schema
    kinds: dict[int, _Kind | None] = {}
    out: dict[str, _Range] = {}
    for g in range(metadata.num_row_groups):
        rg = metadata.row_group(g)
        for i in range(rg.num_columns):
            chunk = rg.column(i)
            name = chunk.path_in_schema
            if name not in wanted:
                continue
            if i not in kinds:
                kinds[i] = _parquet_kind(schema.column(i), v9)
            kind = kinds[i]
            if kind is None:
                continue
            physical = chunk.physical_type
            st = chunk.statistics if chunk.is_stats_set else None
            if st is not None and st.has_min_max:
                lo = _parquet_value(st.min_raw, physical, kind)
                hi = _parquet_value(st.max_raw, physical, kind)
            else:
                # parquet-mr statistics without min/max keep their field defaults
                d = _PRIMITIVE_DEFAULT.get(physical)
                lo = hi = None if d is None else _parquet_value(d, physical, kind)
            if st is None or (not st.has_min_max and not st.has_null_count):
                nulls = chunk.num_values  # Statistics.isEmpty(): Java counts every value null
            elif st.has_null_count:
                nulls = st.null_count
            else:
                nulls = -1
            r = _Range(
                name,
                lo,
                hi,
                nulls,
                chunk.num_values,
                chunk.total_compressed_size,
                chunk.total_uncompressed_size,
                kind,
            )
            out[name] = _merge_ranges(out.get(name), r)
    return out


# ---------------------------------------------------------------------------------------------
# Records (log files)
# ---------------------------------------------------------------------------------------------


def _arrow_kind(t: pa.DataType, v9: bool) -> _Kind | None:
    """The kind of an Arrow column, through the Avro type hoodie_ray writes it as."""
    t = _base_type(t)
    if pa.types.is_decimal(t):
        dec = (t.precision, t.scale)
        return _Kind(ValueType.DECIMAL, decimal=dec) if v9 else _Kind(None, "DecimalWrapper", dec)
    if pa.types.is_boolean(t):
        vt, w = ValueType.BOOLEAN, "BooleanWrapper"
    elif t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        vt, w = ValueType.INT, "IntWrapper"
    elif t in (pa.int64(), pa.uint32(), pa.uint64()):
        vt, w = ValueType.LONG, "LongWrapper"
    elif t == pa.float32():
        vt, w = ValueType.FLOAT, "FloatWrapper"
    elif t == pa.float64():
        vt, w = ValueType.DOUBLE, "DoubleWrapper"
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or t == pa.string_view():
        vt, w = ValueType.STRING, "StringWrapper"
    elif (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or t == pa.binary_view()
    ):
        vt, w = ValueType.BYTES, "BytesWrapper"
    elif pa.types.is_date(t):
        vt, w = ValueType.DATE, "DateWrapper"
    elif pa.types.is_time32(t):
        vt, w = ValueType.TIME_MILLIS, "IntWrapper"
    elif pa.types.is_time64(t):
        vt, w = ValueType.TIME_MICROS, "LongWrapper"
    elif pa.types.is_timestamp(t):
        vt = ValueType.TIMESTAMP_MILLIS if t.unit == "ms" else ValueType.TIMESTAMP_MICROS
        w = "LongWrapper"
    elif pa.types.is_null(t):
        vt, w = ValueType.NULL, "StringWrapper"
    else:
        return None
    return _Kind(vt) if v9 else _Kind(None, w)


def _arrow_primitive(col: pa.Array, kind: _Kind) -> pa.Array:
    """The column as the primitive values that get stored (Avro's encoding of the type)."""
    t = _base_type(col.type)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if pa.types.is_date(t):
        return col.cast(pa.date32()).view(pa.int32())
    if pa.types.is_time32(t):
        return col.cast(pa.time32("ms")).view(pa.int32())
    if pa.types.is_time64(t):
        return col.cast(pa.time64("us"), safe=False).view(pa.int64())
    if pa.types.is_timestamp(t):
        unit = "ms" if t.unit == "ms" else "us"
        return col.cast(pa.timestamp(unit, tz=t.tz), safe=False).view(pa.int64())
    if t in (pa.int8(), pa.int16(), pa.uint8(), pa.uint16()):
        return col.cast(pa.int32())
    if t in (pa.uint32(), pa.uint64()):
        return col.cast(pa.int64(), safe=False)
    if pa.types.is_large_string(t) or t == pa.string_view():
        return col.cast(pa.string())
    if pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or t == pa.binary_view():
        return col.cast(pa.binary())
    return col


def _decimal_unscaled(d: _decimal.Decimal, scale: int) -> int:
    return int(d.scaleb(scale, _DEC_CTX))


def _table_range(name: str, col: pa.ChunkedArray, kind: _Kind, sizes: tuple[int, int]) -> _Range:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    n = len(arr)
    nulls = arr.null_count
    lo: Any = None
    hi: Any = None
    if nulls < n and not pa.types.is_null(arr.type):
        prim = _arrow_primitive(arr, kind)
        if pa.types.is_binary(prim.type):
            # Avro compares ``bytes`` as ByteBuffers: signed bytes
            vals = [v for v in prim.to_pylist() if v is not None]
            lo = min(vals, key=_java_sort_key)
            hi = max(vals, key=_java_sort_key)
        elif pa.types.is_floating(prim.type):
            vals = [v for v in prim.to_pylist() if v is not None]
            lo = min(vals, key=_java_sort_key)
            hi = max(vals, key=_java_sort_key)
        else:
            mm = pc.min_max(prim)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if kind.decimal is not None:
            scale = kind.decimal[1]
            if kind.value_type == ValueType.DECIMAL:
                lo = _java_big_integer_bytes(_decimal_unscaled(lo, scale))
                hi = _java_big_integer_bytes(_decimal_unscaled(hi, scale))
    return _Range(name, lo, hi, nulls, n, sizes[0], sizes[1], kind)


def _log_file_ranges(
    table: pa.Table,
    columns: Sequence[str],
    v9: bool,
    sizes: tuple[int, int],
    every_type: bool = False,
) -> dict[str, _Range]:
    """The range of each of ``columns`` over the records of a log file (those it has, of a
    kind Java indexes); a file without records (only deletes) gets Java's empty ranges.
    ``every_type`` (0.x): a column of a type that cannot be compared (records, arrays, maps)
    gets a range too, with null min/max and its values counted as values (maps: as nulls,
    ``collectColumnRangeMetadata``'s ``canCompare``)."""
    ranges: dict[str, _Range] = {}
    for c in columns:
        idx = table.schema.get_field_index(c)
        if idx < 0:
            continue
        kind = _arrow_kind(table.schema.field(idx).type, v9)
        if kind is None:
            if every_type:
                col = table.column(idx)
                n = table.num_rows
                nulls = n if pa.types.is_map(_base_type(col.type)) else col.null_count
                ranges[c] = _Range(c, None, None, nulls, n, *sizes, _Kind(None))
            continue
        if table.num_rows == 0:
            # HoodieColumnRangeMetadata.createEmpty: NULL value metadata
            ranges[c] = _Range(c, None, None, 0, 0, 0, 0, _Kind(ValueType.NULL if v9 else None))
        else:
            ranges[c] = _table_range(c, table.column(idx), kind, sizes)
    return ranges


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def column_stats_records(
    partition: str,
    file_name: str,
    table: pa.Table | None = None,
    parquet_metadata: Any = None,
    *,
    table_version: int,
    total_size: int = 0,
    total_uncompressed_size: int = 0,
    columns: Sequence[str] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """``column_stats`` records (type 3) of one data file, one per indexed column, as
    ``(key, HoodieMetadataRecord dict)`` pairs ready for :func:`~hoodie_ray.metadata.records.
    encode_records`.

    * Base file: pass its ``parquet_metadata`` (``pyarrow.parquet.FileMetaData``); stats come
      from the footer as Java reads them (``table`` is ignored, as are the size arguments).
    * Log file: pass ``table``, the records written in it (all data blocks of the file; an
      empty table for a log file holding only deletes); ranges are computed over the records and
      ``totalSize``/``totalUncompressedSize`` are ``total_size``/``total_uncompressed_size``
      (Java writes 0).

    ``columns`` defaults to :func:`columns_to_index` of the file's schema; columns missing from
    the file or of a type Java cannot index get no record. ``file_name`` is the bare file name.
    """
    v9 = _is_v9(table_version)
    v6 = table_version == 6
    pick = columns_to_index_v6 if v6 else columns_to_index
    ranges: dict[str, _Range]
    if parquet_metadata is not None:
        if columns is None:
            columns = pick(parquet_metadata.schema.to_arrow_schema())
        ranges = _parquet_ranges(parquet_metadata, columns, v9)
    elif table is not None:
        if columns is None:
            columns = pick(table.schema)
        sizes = (total_size, total_uncompressed_size)
        ranges = _log_file_ranges(table, columns, v9, sizes, every_type=v6)
    else:
        raise HoodieInputError("column_stats_records needs a table or a Parquet footer")
    order = [c for c in columns if c in ranges]
    record_type = MetadataPartitionType.COLUMN_STATS.record_type
    return [
        _stats_record(
            column_stats_key(c, partition, file_name),
            file_name,
            ranges[c],
            record_type=record_type,
            v9=v9,
        )
        for c in order
    ]


def column_stats_tombstones(
    partition: str, file_name: str, columns: Iterable[str], *, table_version: int = 9
) -> list[tuple[str, dict[str, Any]]]:
    """What a clean writes to ``column_stats`` for a deleted file (base or log), per indexed
    column: ``HoodieColumnRangeMetadata.stub`` with ``isDeleted = true``: null min/max, counts
    and sizes -1, value type NULL (v9)."""
    v9 = _is_v9(table_version)
    record_type = MetadataPartitionType.COLUMN_STATS.record_type
    kind = _Kind(ValueType.NULL if v9 else None)
    return [
        _stats_record(
            column_stats_key(c, partition, file_name),
            file_name,
            _Range(c, None, None, -1, -1, -1, -1, kind),
            record_type=record_type,
            v9=v9,
            is_deleted=True,
        )
        for c in columns
    ]


def _unwrap(v: Any) -> tuple[str | None, Any]:
    if v is None:
        return None, None
    if isinstance(v, tuple):
        name, rec = v
        return name.rsplit(".", 1)[-1], rec["value"]
    if isinstance(v, Mapping) and "value" in v:
        return None, v["value"]
    return None, v


def _range_from_stats(stats: Mapping[str, Any]) -> _Range:
    vt_info = stats.get("valueType")
    if isinstance(vt_info, tuple):
        vt_info = vt_info[1]
    wmin, lo = _unwrap(stats.get("minValue"))
    wmax, hi = _unwrap(stats.get("maxValue"))
    kind: _Kind
    if vt_info is not None:
        vt = ValueType(vt_info["typeOrdinal"])
        dec = None
        if vt == ValueType.DECIMAL and vt_info.get("additionalInfo"):
            p, s = str(vt_info["additionalInfo"]).split(",")
            dec = (int(p), int(s))
        kind = _Kind(vt, decimal=dec)
    else:
        kind = _Kind(None, wmin or wmax)
    return _Range(
        stats["columnName"],
        lo,
        hi,
        stats.get("nullCount") or 0,
        stats.get("valueCount") or 0,
        stats.get("totalSize") or 0,
        stats.get("totalUncompressedSize") or 0,
        kind,
    )


def _untyped(kind: _Kind) -> bool:
    return kind.value_type == ValueType.NULL or kind.wrapper_name() is None


def _stats_of(record: Mapping[str, Any]) -> Mapping[str, Any]:
    s = record.get("ColumnStatsMetadata", record)
    if isinstance(s, tuple):
        s = s[1]
    if not isinstance(s, Mapping) or "columnName" not in s:
        raise HoodieInputError("not a column-stats record")
    return s


def partition_stats_records(
    partition: str, file_stats: Iterable[Mapping[str, Any]], table_version: int
) -> list[tuple[str, dict[str, Any]]]:
    """``partition_stats`` records (type 6) of one data partition: per column the aggregate of
    the column stats of every file of the partition's latest file slices (base and log files),
    min of mins, max of maxes, summed counts and sizes, ``fileName`` = the partition path,
    ``isTightBound = true`` (what Java 1.x writes after each commit, spec 3.2).

    ``file_stats`` are ``HoodieMetadataColumnStats`` dicts or whole records (as built by
    :func:`column_stats_records` or decoded); tombstones are skipped. Columns come out in
    first-seen order.
    """
    v9 = _is_v9(table_version)
    agg: dict[str, _Range] = {}
    for fs in file_stats:
        s = _stats_of(fs)
        if s.get("isDeleted"):
            continue
        r = _range_from_stats(s)
        prev = agg.get(r.column)
        if prev is not None and _untyped(prev.kind):
            # an empty range (delete-only log file) adopts the type of real ranges
            prev = _Range(
                prev.column,
                prev.min,
                prev.max,
                prev.null_count,
                prev.value_count,
                prev.total_size,
                prev.total_uncompressed_size,
                r.kind,
            )
        agg[r.column] = _merge_ranges(prev, r)
    name = partition_identifier(partition) if partition == "" else partition
    record_type = MetadataPartitionType.PARTITION_STATS.record_type
    return [
        _stats_record(
            partition_stats_key(c, partition),
            name,
            r,
            record_type=record_type,
            v9=v9,
            is_tight_bound=True,
        )
        for c, r in agg.items()
    ]


def merge_column_stats(older: Mapping[str, Any], newer: Mapping[str, Any]) -> dict[str, Any]:
    """Combine two column-stats values of one key (``mergeColumnStatsRecords``): a tombstone on
    either side or a tight-bound newer value replaces; otherwise min of mins, max of maxes,
    summed counts and sizes, ``newer``'s file name and flags. Takes and returns
    ``HoodieMetadataColumnStats`` dicts or whole records (returns the same shape as ``newer``)."""
    a, b = _stats_of(older), _stats_of(newer)
    if a.get("columnName") != b.get("columnName"):
        raise HoodieInputError("cannot merge column stats of different columns")
    if b.get("isDeleted") or a.get("isDeleted") or b.get("isTightBound"):
        return dict(newer)
    ra, rb = _range_from_stats(a), _range_from_stats(b)
    merged = _merge_ranges(rb, ra)
    out = dict(b)
    out["minValue"] = _wrapped_of(merged.min, b.get("minValue"), a.get("minValue"))
    out["maxValue"] = _wrapped_of(merged.max, b.get("maxValue"), a.get("maxValue"))
    out["valueCount"] = merged.value_count
    out["nullCount"] = merged.null_count
    out["totalSize"] = merged.total_size
    out["totalUncompressedSize"] = merged.total_uncompressed_size
    if "ColumnStatsMetadata" in newer:
        rec = dict(newer)
        rec["ColumnStatsMetadata"] = out
        return rec
    return out


def _wrapped_of(value: Any, newer: Any, older: Any) -> Any:
    """The wrapped form (newer's first) whose value is ``value``."""
    if value is None:
        return None
    return newer if _unwrap(newer)[1] == value else older
