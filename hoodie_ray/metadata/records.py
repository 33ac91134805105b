"""Records of the metadata table (``HoodieMetadataRecord``) as Apache Hudi Java 1.x writes them.

Everything a writer needs to produce the keys and values of the metadata table (MDT) for table
versions 8 and 9 (spec/metadata-table.md sections 1.4, 1.6, 3 and 4.3), and for version 6 (Hudi
0.14 / 0.15: the v8 schema without what 1.0 added):

* :func:`metadata_schema` / :func:`metadata_schema_json`: the writer schema Java stores in the
  HFile file info and in log-block headers: ``HoodieMetadataRecord`` with the five ``_hoodie_*``
  meta fields prepended, fields, union branches, docs and defaults in Java's order. The JSON
  is byte-identical to what Java writes (``Schema.toString()``): 8910 bytes for v9 (checked
  against the sample v9 table), 7969 bytes for v8.
* keys and file groups: :func:`file_group_id`, :func:`key_to_file_group_index` (Java
  ``String.hashCode`` over UTF-16 code units), :func:`column_stats_key`,
  :func:`partition_stats_key`, :func:`bloom_filter_key` (xxHash64 and MD5 ids, see
  :func:`xxhash64`).
* values: :func:`all_partitions_record`, :func:`files_record`, :func:`record_index_record`
  (and :func:`decode_record_index`), :func:`encode_records` / :func:`decode_value`,
  :func:`merge_files_records` and the DELETE-block content of the record index
  (:func:`delete_record_list_bytes` / :func:`decode_delete_record_list`).

Sources (facts only; apache/hudi master as stored, 2025/2026 revisions):
``hudi-common/src/main/avro/HoodieMetadata.avsc``, ``metadata/HoodieMetadataPayload.java``,
``metadata/MetadataPartitionType.java``, ``metadata/HoodieTableMetadataUtil.java``,
``common/util/hash/{HashID,ColumnIndexID,PartitionIndexID,FileIndexID}.java``,
``common/table/timeline/HoodieInstantTimeGenerator.java``. The v9 schema was checked byte for
byte against the schema JSON of the sample ``sample_mor_avro_v9_txns_complex_meta`` and the v8
schema against the one a Hudi 1.0.x writer stored in hudi-rs's ``v8_trips_8i3u1d`` test table.

Record dicts use fastavro's conventions: plain dicts for records, ``None`` for null branches,
and ``(full record name, dict)`` tuples for the value wrappers of ``minValue``/``maxValue``
(the only unions with more than one record branch).
"""

from __future__ import annotations

import base64
import datetime as _dt
import enum
import hashlib
import io
import json
import re
import struct
import sys
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieInputError
from hoodie_ray.log_format.blocks import BLOCK_CONTENT_VERSION, DeleteBlock
from hoodie_ray.meta import META_FIELDS

__all__ = [
    "ALL_PARTITIONS_KEY",
    "NAMESPACE",
    "NON_PARTITIONED_NAME",
    "RECORD_INDEX_MISSING_FILEINDEX_FALLBACK",
    "RECORD_TYPE_ALL_PARTITIONS",
    "RECORD_TYPE_SECONDARY_INDEX",
    "FileListing",
    "MetadataPartitionType",
    "RecordIndexColumns",
    "all_partitions_record",
    "bloom_filter_key",
    "column_index_id",
    "column_stats_key",
    "decode_delete_record_list",
    "decode_record_index",
    "decode_value",
    "delete_record_list_bytes",
    "encode_records",
    "file_group_id",
    "file_index_id",
    "files_record",
    "instant_to_epoch_ms",
    "is_deleted_record",
    "java_string_hash",
    "key_to_file_group_index",
    "key_to_file_group_indexes",
    "merge_files_records",
    "metadata_schema",
    "metadata_schema_json",
    "partition_identifier",
    "partition_index_id",
    "partition_stats_key",
    "record_index_record",
    "record_index_value",
    "xxhash64",
]

#: Avro namespace of every named type of the MDT schema.
NAMESPACE = "org.apache.hudi.avro.model"
#: Key of the record listing every data partition (``HoodieTableMetadata.RECORDKEY_PARTITION_LIST``).
ALL_PARTITIONS_KEY = "__all_partitions__"
#: Name of the single partition of a non-partitioned table in MDT keys.
NON_PARTITIONED_NAME = "."
#: ``type`` of the ``__all_partitions__`` record (``MetadataPartitionType.ALL_PARTITIONS``).
RECORD_TYPE_ALL_PARTITIONS = 1
#: ``type`` of secondary-index records (``MetadataPartitionType.SECONDARY_INDEX``).
RECORD_TYPE_SECONDARY_INDEX = 7
#: ``fileIndex`` Java stores for a UUID file id without a ``-<n>`` suffix.
RECORD_INDEX_MISSING_FILEINDEX_FALLBACK = -1

_EMPTY_PARTITION_NAME = ""


class MetadataPartitionType(enum.Enum):
    """The MDT partitions a writer fills (``MetadataPartitionType``): folder name, file-id
    prefix and the ``type`` code of their records."""

    FILES = "files"
    COLUMN_STATS = "column_stats"
    BLOOM_FILTERS = "bloom_filters"
    RECORD_INDEX = "record_index"
    PARTITION_STATS = "partition_stats"

    @property
    def partition_path(self) -> str:
        """The folder under ``.hoodie/metadata``."""
        return self.value

    @property
    def file_id_prefix(self) -> str:
        """Prefix of the file-group ids (``files-``, ``col-stats-``, ...)."""
        return _FILE_ID_PREFIX[self]

    @property
    def record_type(self) -> int:
        """The ``type`` field of the partition's records (2 for a ``files`` file list; the
        ``__all_partitions__`` record of ``files`` has :data:`RECORD_TYPE_ALL_PARTITIONS`)."""
        return _RECORD_TYPE[self]

    @classmethod
    def from_record_type(cls, record_type: int) -> MetadataPartitionType:
        """The partition holding records of ``record_type`` (1 and 2 are both ``files``)."""
        if record_type == RECORD_TYPE_ALL_PARTITIONS:
            return cls.FILES
        for p, t in _RECORD_TYPE.items():
            if t == record_type:
                return p
        raise HoodieInputError(f"no metadata partition has records of type {record_type}")


_FILE_ID_PREFIX = {
    MetadataPartitionType.FILES: "files-",
    MetadataPartitionType.COLUMN_STATS: "col-stats-",
    MetadataPartitionType.BLOOM_FILTERS: "bloom-filters-",
    MetadataPartitionType.RECORD_INDEX: "record-index-",
    MetadataPartitionType.PARTITION_STATS: "partition-stats-",
}
_RECORD_TYPE = {
    MetadataPartitionType.FILES: 2,
    MetadataPartitionType.COLUMN_STATS: 3,
    MetadataPartitionType.BLOOM_FILTERS: 4,
    MetadataPartitionType.RECORD_INDEX: 5,
    MetadataPartitionType.PARTITION_STATS: 6,
}


# ---------------------------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------------------------

_JSTRING: dict[str, Any] = {"type": "string", "avro.java.string": "String"}
_WRAPPERS: tuple[tuple[str, str, Any], ...] = (
    ("BooleanWrapper", "boolean type", "boolean"),
    ("IntWrapper", "int type", "int"),
    ("LongWrapper", "long type", "long"),
    ("FloatWrapper", "float type", "float"),
    ("DoubleWrapper", "double type", "double"),
    ("BytesWrapper", "bytes type", "bytes"),
    ("StringWrapper", "string type", _JSTRING),
    ("DateWrapper", "Date logical type", "int"),
    (
        "DecimalWrapper",
        "Decimal logical type",
        {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
    ),
    (
        "TimeMicrosWrapper",
        "Time-micros logical type",
        {"type": "long", "logicalType": "time-micros"},
    ),
    ("TimestampMicrosWrapper", "Timestamp-micros logical type", "long"),
    ("LocalDateWrapper", "Local Date type", "int"),
)
#: Value wrappers by short name, in union-branch order (branch index = position + 1).
WRAPPER_NAMES: tuple[str, ...] = tuple(w[0] for w in _WRAPPERS)
_RID_DOC = (
    "A UUID based fileId is stored as 3 pieces in RLI (fileIdHighBits, fileIdLowBits and "
    "fileIndex). \nFileID format is {UUID}-{fileIndex}."
)


def _field(name: str, typ: Any, doc: str | None = None, default: Any = ...) -> dict[str, Any]:
    f: dict[str, Any] = {"name": name, "type": typ}
    if doc is not None:
        f["doc"] = doc
    if default is not ...:
        f["default"] = default
    return f


def _record(name: str, fields: list[dict[str, Any]], doc: str | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {"type": "record", "name": name}
    if doc is not None:
        r["doc"] = doc
    r["fields"] = fields
    return r


def _wrapper_union(with_array: bool) -> list[Any]:
    branches: list[Any] = ["null"]
    for name, what, typ in _WRAPPERS:
        doc = f"A record wrapping {what} to be able to be used it w/in Avro's Union"
        branches.append(_record(name, [_field("value", typ)], doc))
    if with_array:
        items = ["null", *WRAPPER_NAMES]
        branches.append(
            _record(
                "ArrayWrapper",
                [
                    _field(
                        "wrappedValues",
                        ["null", {"type": "array", "items": items}],
                        "An array where each element is one of the supported wrapper types.",
                        None,
                    )
                ],
                "A record containing a list of wrapped values.",
            )
        )
    return branches


class _Ref(NamedTuple):
    """A named part of the schema, built per table version by :func:`_resolve`."""

    name: str


class _F(NamedTuple):
    """One field of a schema table: Avro type (with :class:`_Ref` parts), doc, default."""

    name: str
    type: Any
    doc: str | None = None
    default: Any = ...
    v9_only: bool = False


_NSTRING: list[Any] = ["null", _JSTRING]
_NLONG = ["null", "long"]

#: The records of ``HoodieMetadata.avsc``: name -> (doc, fields), in Java's field order.
_RECORDS: dict[str, tuple[str | None, tuple[_F, ...]]] = {
    "HoodieMetadataRecord": (
        "A record saved within the Metadata Table",
        (
            _F("key", _JSTRING),
            _F("type", "int", "Type of the metadata record"),
            _F(
                "filesystemMetadata",
                [
                    "null",
                    {
                        "type": "map",
                        "values": _Ref("HoodieMetadataFileInfo"),
                        "avro.java.string": "String",
                    },
                ],
                "Contains information about partitions and files within the dataset",
            ),
            _F(
                "BloomFilterMetadata",
                ["null", _Ref("HoodieMetadataBloomFilter")],
                "Metadata Index of bloom filters for all data files in the user table",
                None,
            ),
            _F(
                "ColumnStatsMetadata",
                ["null", _Ref("HoodieMetadataColumnStats")],
                "Metadata Index of column statistics for all data files in the user table",
                None,
            ),
            _F(
                "recordIndexMetadata",
                ["null", _Ref("HoodieRecordIndexInfo")],
                "Metadata Index that contains information about record keys and their location "
                "in the dataset",
                None,
            ),
            _F(
                "SecondaryIndexMetadata",
                ["null", _Ref("HoodieSecondaryIndexInfo")],
                "Metadata Index that contains information about secondary keys and the "
                "corresponding record keys in the dataset",
                None,
            ),
        ),
    ),
    "HoodieMetadataFileInfo": (
        None,
        (
            _F("size", "long", "Size of the file"),
            _F("isDeleted", "boolean", "True if this file has been deleted"),
        ),
    ),
    "HoodieMetadataBloomFilter": (
        "Data file bloom filter details",
        (
            _F("type", _JSTRING, "Bloom filter type code"),
            _F("timestamp", _JSTRING, "Instant timestamp when this metadata was created/updated"),
            _F("bloomFilter", "bytes", "Bloom filter binary byte array"),
            _F("isDeleted", "boolean", "Bloom filter entry valid/deleted flag"),
        ),
    ),
    "HoodieMetadataColumnStats": (
        "Data file column statistics",
        (
            _F(
                "fileName",
                _NSTRING,
                "File name for which this column statistics applies",
                None,
            ),
            _F(
                "columnName",
                _NSTRING,
                "Column name for which this column statistics applies",
                None,
            ),
            _F(
                "minValue",
                _Ref("minValue"),
                "Minimum value in the range. Based on user data table schema, we can convert "
                "this to appropriate type",
                None,
            ),
            _F(
                "maxValue",
                _Ref("maxValue"),
                "Maximum value in the range. Based on user data table schema, we can convert it "
                "to appropriate type",
                None,
            ),
            _F("valueCount", _NLONG, "Total count of values", None),
            _F("nullCount", _NLONG, "Total count of null values", None),
            _F("totalSize", _NLONG, "Total storage size on disk", None),
            _F("totalUncompressedSize", _NLONG, "Total uncompressed storage size on disk", None),
            _F("isDeleted", "boolean", "Column range entry valid/deleted flag"),
            _F(
                "isTightBound",
                "boolean",
                "Whether the min/max range of a column is tight bound or not",
                False,
            ),
            _F(
                "valueType",
                ["null", _Ref("HoodieValueTypeInfo")],
                "Value type information containing enum ordinal and optional additional "
                "information",
                None,
                v9_only=True,
            ),
        ),
    ),
    "HoodieValueTypeInfo": (
        None,
        (
            _F("typeOrdinal", "int", "Enum type ordinal representing the value type"),
            _F(
                "additionalInfo",
                _NSTRING,
                "Optional additional information about the value type",
                None,
            ),
        ),
    ),
    "HoodieRecordIndexInfo": (
        None,
        (
            _F(
                "partitionName",
                _NSTRING,
                "Refers to the partition name the record belongs to",
                None,
            ),
            _F(
                "fileIdHighBits",
                _NLONG,
                "Refers to high 64 bits if the fileId is based on UUID format. \n" + _RID_DOC,
                None,
            ),
            _F(
                "fileIdLowBits",
                _NLONG,
                "Refers to low 64 bits if the fileId is based on UUID format. \n" + _RID_DOC,
                None,
            ),
            _F(
                "fileIndex",
                ["null", "int"],
                "Index representing file index which is used to re-construct UUID based "
                "fileID. Applicable when the fileId is based on UUID format. \n" + _RID_DOC,
                None,
            ),
            _F(
                "fileId",
                _NSTRING,
                "Represents fileId of the location where record belongs to. When the encoding "
                "is 1, fileID is stored in raw string format.",
                None,
            ),
            _F(
                "instantTime",
                _NLONG,
                "Epoch time in millisecond representing the commit time at which record was added",
                None,
            ),
            _F(
                "fileIdEncoding",
                "int",
                "Represents fileId encoding. Possible values are 0 and 1. O represents UUID "
                "based fileID, and 1 represents raw string format of the fileId. \nWhen the "
                "encoding is 0, reader can deduce fileID from fileIdLowBits, fileIdHighBits "
                "and fileIndex.",
                0,
            ),
            _F(
                "position",
                _NLONG,
                "Represents position of record within a file group for easier access. It "
                "will be used for index lookup.",
                None,
            ),
        ),
    ),
    "HoodieSecondaryIndexInfo": (
        None,
        (_F("isDeleted", "boolean", "True if this entry has been deleted"),),
    ),
}


def _resolve(typ: Any, v9: bool) -> Any:
    """``typ`` with each :class:`_Ref` replaced by the part it names (fresh containers)."""
    if isinstance(typ, _Ref):
        if typ.name == "minValue":
            return _wrapper_union(with_array=v9)
        if typ.name == "maxValue":  # the wrappers again, by name (defined by minValue)
            return ["null", *WRAPPER_NAMES, *(["ArrayWrapper"] if v9 else [])]
        return _named_record(typ.name, v9)
    if isinstance(typ, list):
        return [_resolve(t, v9) for t in typ]
    if isinstance(typ, dict):
        return {k: _resolve(t, v9) for k, t in typ.items()}
    return typ


def _named_record(name: str, v9: bool, prefix: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    doc, specs = _RECORDS[name]
    fields = [
        _field(f.name, _resolve(f.type, v9), f.doc, f.default) for f in specs if v9 or not f.v9_only
    ]
    return _record(name, [*prefix, *fields], doc)


#: 1.0's additions, absent from 0.x's ``HoodieMetadata.avsc`` (table version 6): field names
#: (top-level ``SecondaryIndexMetadata``, record-index ``position``, column-stats
#: ``isTightBound``) and the ``minValue`` / ``maxValue`` union branch ``LocalDateWrapper`` (0.x:
#: 12 branches; it is the last wrapper, so the others keep their branch indexes).
_FIELDS_ADDED_IN_1_0 = frozenset({"SecondaryIndexMetadata", "position", "isTightBound"})
_BRANCHES_ADDED_IN_1_0 = frozenset({"LocalDateWrapper"})


def _branch_name(branch: Any) -> str | None:
    """The name of a union branch: a named record's, or a reference's."""
    if isinstance(branch, dict):
        name = branch.get("name")
        return name if isinstance(name, str) else None
    return branch if isinstance(branch, str) else None


def _strip_1_0(schema: Any) -> Any:
    """``schema`` without what 1.0 added (a fresh copy)."""
    if isinstance(schema, dict):
        out = {k: _strip_1_0(v) for k, v in schema.items()}
        if isinstance(out.get("fields"), list):
            out["fields"] = [f for f in out["fields"] if f.get("name") not in _FIELDS_ADDED_IN_1_0]
        return out
    if isinstance(schema, list):
        return [_strip_1_0(b) for b in schema if _branch_name(b) not in _BRANCHES_ADDED_IN_1_0]
    return schema


def _build_schema(table_version: int, meta_fields: bool) -> dict[str, Any]:
    meta = [_field(n, ["null", "string"], "", None) for n in META_FIELDS if meta_fields]
    record = _named_record("HoodieMetadataRecord", table_version >= 9, meta)
    # the top-level record names its namespace (between its name and its doc, as Java writes)
    schema = {"type": "record", "name": record["name"], "namespace": NAMESPACE, **record}
    return _strip_1_0(schema) if table_version == 6 else schema


def _check_version(table_version: int) -> None:
    if table_version not in (6, 8, 9):
        raise HoodieInputError(
            f"metadata-table records are written for table versions 6, 8 and 9, not {table_version}"
        )


def metadata_schema(table_version: int, meta_fields: bool = True) -> dict[str, Any]:
    """The ``HoodieMetadataRecord`` writer schema that Java stores for ``table_version``
    (a fresh dict each call): with the five ``_hoodie_*`` meta fields first, as in HFile file
    info and log-block headers, or without them (``meta_fields=False``), as in the
    ``extraMetadata.schema`` of MDT commit metadata.

    v9 (Hudi 1.1.x) is v8 (Hudi 1.0.x) plus the ``valueType`` field of
    ``HoodieMetadataColumnStats`` and the ``ArrayWrapper`` branch of ``minValue``/``maxValue``;
    v6 (Hudi 0.14 / 0.15) is v8 without ``SecondaryIndexMetadata``, the record index's
    ``position``, the column statistics' ``isTightBound`` and the ``LocalDateWrapper`` branch.
    """
    _check_version(table_version)
    return json.loads(metadata_schema_json(table_version, meta_fields))  # type: ignore[no-any-return]


@lru_cache(maxsize=8)
def metadata_schema_json(table_version: int, meta_fields: bool = True) -> str:
    """:func:`metadata_schema` as the compact JSON Java writes (``Schema.toString()``): with
    meta fields for the ``schema`` HFile file-info entry and the SCHEMA log-block header (8910
    bytes for v9), without them for ``extraMetadata.schema`` of MDT commits (8509 bytes)."""
    _check_version(table_version)
    return json.dumps(
        _build_schema(table_version, meta_fields), separators=(",", ":"), ensure_ascii=False
    )


@lru_cache(maxsize=8)
def _parsed_schema(schema_json: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_json))


def _schema_json(schema: Mapping[str, Any] | str | int) -> str:
    if isinstance(schema, int):
        return metadata_schema_json(schema)
    if isinstance(schema, str):
        return schema
    return json.dumps(schema, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# File groups and key hashing
# ---------------------------------------------------------------------------------------------


def file_group_id(partition: MetadataPartitionType | str, index: int) -> str:
    """The id of file group ``index`` of an MDT partition: ``files-0000-0``,
    ``record-index-0003-0``, ``secondary-index-<name>-0001-0`` (``getFileIDForFileGroup``).

    ``partition`` is a :class:`MetadataPartitionType` or an MDT partition name; names that are
    not one of the enum's (secondary and expression indexes) use the name with ``_`` replaced by
    ``-`` as the prefix.
    """
    if isinstance(partition, MetadataPartitionType):
        prefix = partition.file_id_prefix
    else:
        try:
            prefix = MetadataPartitionType(partition).file_id_prefix
        except ValueError:
            if not partition:
                raise HoodieInputError("an MDT partition name may not be empty") from None
            prefix = partition.replace("_", "-") + "-"
    if not 0 <= index <= 9999:
        raise HoodieInputError(f"file group index {index} is outside 0..9999")
    return f"{prefix}{index:04d}-0"


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()``: ``31*h + c`` over UTF-16 code units, signed 32-bit."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _group_of_hash(h: int, num_groups: int) -> int:
    # Math.abs(Math.abs(h) % n): Math.abs(Integer.MIN_VALUE) stays negative and % truncates
    # toward zero, so the outer abs gives |h| mod n in every case
    return abs(h) % num_groups


def key_to_file_group_index(key: str, num_groups: int) -> int:
    """The file group of an MDT key (``HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex``):
    ``abs(abs(h) % n)`` with ``h`` = Java ``String.hashCode`` of the key. Used for record-index,
    column-stats and (over ``<value>$``) secondary-index keys (spec 1.4)."""
    if num_groups <= 0:
        raise HoodieInputError(
            f"a metadata partition needs at least one file group, not {num_groups}"
        )
    return _group_of_hash(java_string_hash(key), num_groups)


_POW31_CACHE: list[np.ndarray] = []


def _pow31(n: int) -> np.ndarray:
    """31**i mod 2**64 for i < n (uint64; truncated to 32 bits later)."""
    if not _POW31_CACHE or len(_POW31_CACHE[0]) < n:
        size = max(n, 64)
        out = np.empty(size, dtype=np.uint64)
        out[0] = 1
        with np.errstate(over="ignore"):
            for i in range(1, size):
                out[i] = out[i - 1] * np.uint64(31)
        _POW31_CACHE[:] = [out]
    return _POW31_CACHE[0][:n]


#: Key counts from which Java string hashes are computed by the compiled kernel even in a process
#: that has not loaded numba yet (loading it costs ~0.5-1 CPU-s once; the numpy passes cost
#: ~0.5 us a key).
_KERNEL_MIN_KEYS = 1 << 20


def _use_kernel(n_keys: int) -> bool:
    if "numba" not in sys.modules and n_keys < _KERNEL_MIN_KEYS:
        return False
    from hoodie_ray import jit

    return jit.enabled()


def _hash_units(units: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Java string hashes (int32) of the keys whose UTF-16 code units are
    ``units[offsets[i]:offsets[i+1]]``.

    Horner's rule one character position at a time over all keys still that long (keys
    ordered longest first, so those are a prefix): ``h = 31*h + unit`` in wrapping uint32,
    about one pass over the key bytes, no per-unit temporaries."""
    n = len(offsets) - 1
    if n <= 0:
        return np.zeros(0, dtype=np.int32)
    if _use_kernel(n):
        from hoodie_ray.metadata import _jit

        hashed = np.empty(n, dtype=np.uint32)
        _jit.java_string_hashes(units, offsets.astype(np.int64, copy=False), hashed)
        return hashed.view(np.int32)
    starts = offsets[:-1].astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)
    order = np.argsort(-lengths, kind="stable")
    s_starts = starts[order]
    s_lens = lengths[order]
    units32 = units.astype(np.uint32, copy=False)
    h = np.zeros(n, dtype=np.uint32)
    longest = int(s_lens[0])
    # active[j]: how many keys are longer than j (a prefix of the longest-first order)
    active: np.ndarray = n - np.searchsorted(s_lens[::-1], np.arange(longest), side="right")
    mult = np.uint32(31)
    for j in range(longest):
        m = int(active[j])
        hj = h[:m]
        hj *= mult
        hj += units32[s_starts[:m] + j]
    out = np.empty(n, dtype=np.uint32)
    out[order] = h
    return out.view(np.int32)


def key_to_file_group_indexes(
    keys: Sequence[str] | pa.Array | pa.ChunkedArray, num_groups: int
) -> np.ndarray:
    """:func:`key_to_file_group_index` for many keys at once (int32 array, numpy-vectorised).

    ASCII keys in an Arrow string array are hashed straight from its buffers; other keys go
    through their UTF-16 encoding.
    """
    if num_groups <= 0:
        raise HoodieInputError(
            f"a metadata partition needs at least one file group, not {num_groups}"
        )
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    hashes: np.ndarray | None = None
    if isinstance(keys, pa.Array):
        if keys.null_count:
            raise HoodieInputError("metadata keys may not be null")
        if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
            off_type = np.int64 if pa.types.is_large_string(keys.type) else np.int32
            bufs = keys.buffers()
            offsets = np.frombuffer(bufs[1], dtype=off_type)[
                keys.offset : keys.offset + len(keys) + 1
            ]
            data = (
                np.frombuffer(bufs[2], dtype=np.uint8)
                if bufs[2] is not None
                else np.zeros(0, dtype=np.uint8)
            )
            span = data[int(offsets[0]) : int(offsets[-1])] if len(offsets) else data[:0]
            if not (span >= 0x80).any():
                hashes = _hash_units(data, offsets.astype(np.int64))
        if hashes is None:
            keys = keys.to_pylist()
    if hashes is None:
        strs = list(keys)  # type: ignore[arg-type]
        encoded = [s.encode("utf-16-le") for s in strs]
        lengths = np.fromiter((len(b) // 2 for b in encoded), dtype=np.int64, count=len(encoded))
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        units = np.frombuffer(b"".join(encoded), dtype="<u2")
        hashes = _hash_units(units, offsets)
    return (np.abs(hashes.astype(np.int64)) % num_groups).astype(np.int32)


# ---------------------------------------------------------------------------------------------
# Index ids: xxHash64 (HashID BITS_64) and MD5 (BITS_128)
# ---------------------------------------------------------------------------------------------

_M64 = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
#: ``HashID.HASH_SEED`` is the Java ``int`` 0xdabadaba; ``XXHash64.hash(.., long seed)``
#: receives it sign-extended to a long.
HASH_SEED = 0xFFFFFFFFDABADABA


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _M64
    return (_rotl(acc, 31) * _P1) & _M64


def xxhash64(data: bytes, seed: int = 0) -> int:
    """XXH64 of ``data`` (unsigned 64-bit); pure Python, for the short names Hudi hashes."""
    seed &= _M64
    n = len(data)
    p = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _M64
        v2 = (seed + _P2) & _M64
        v3 = seed
        v4 = (seed - _P1) & _M64
        while p + 32 <= n:
            a, b, c, d = struct.unpack_from("<4Q", data, p)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            p += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M64
        for v in (v1, v2, v3, v4):
            h = ((h ^ _round(0, v)) * _P1 + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while p + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, p)
        h = (_rotl(h ^ _round(0, k), 27) * _P1 + _P4) & _M64
        p += 8
    if p + 4 <= n:
        (k,) = struct.unpack_from("<I", data, p)
        h = (_rotl(h ^ ((k * _P1) & _M64), 23) * _P2 + _P3) & _M64
        p += 4
    while p < n:
        h = (_rotl(h ^ ((data[p] * _P5) & _M64), 11) * _P1) & _M64
        p += 1
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    h ^= h >> 32
    return h


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


@lru_cache(maxsize=4096)
def _hash_id_64(name: str) -> str:
    return _b64(struct.pack(">Q", xxhash64(name.encode("utf-8"), HASH_SEED)))


def partition_identifier(partition: str) -> str:
    """The partition name used in MDT keys: the relative partition path, ``.`` for the single
    partition of a non-partitioned table (``getPartitionIdentifier``)."""
    return NON_PARTITIONED_NAME if partition == _EMPTY_PARTITION_NAME else partition


def column_index_id(column: str) -> str:
    """``ColumnIndexID(column).asBase64EncodedString()``: base64 of the big-endian XXH64 of the
    column name's UTF-8 bytes, seed :data:`HASH_SEED` (12 characters)."""
    return _hash_id_64(column)


def partition_index_id(partition: str) -> str:
    """``PartitionIndexID`` of a data partition path (``""`` is hashed as ``.``), base64."""
    return _hash_id_64(partition_identifier(partition))


def file_index_id(file_name: str) -> str:
    """``FileIndexID(fileName)``: base64 of the MD5 of the file name (24 characters)."""
    return _b64(hashlib.md5(file_name.encode("utf-8")).digest())


def column_stats_key(column: str, partition: str, file_name: str) -> str:
    """Key of a ``column_stats`` record (type 3): column id + partition id + file id (48
    characters; ``HoodieMetadataPayload.getColumnStatsIndexKey``)."""
    return column_index_id(column) + partition_index_id(partition) + file_index_id(file_name)


def partition_stats_key(column: str, partition: str) -> str:
    """Key of a ``partition_stats`` record (type 6): column id + partition id (24 characters;
    ``HoodieTableMetadataUtil.getPartitionStatsIndexKey``)."""
    return column_index_id(column) + partition_index_id(partition)


def bloom_filter_key(partition: str, file_name: str) -> str:
    """Key of a ``bloom_filters`` record (type 4): partition id + file id."""
    return partition_index_id(partition) + file_index_id(file_name)


# ---------------------------------------------------------------------------------------------
# Java HashMap iteration order (map entries are written in it)
# ---------------------------------------------------------------------------------------------


def _table_size_for(cap: int) -> int:
    n = 1
    while n < cap:
        n <<= 1
    return min(n, 1 << 30)


def _java_hashmap_order(keys: Sequence[str], capacity: int, load_factor: float) -> list[str]:
    """The iteration order of a ``java.util.HashMap`` created with ``capacity`` and
    ``load_factor`` after putting ``keys`` (distinct) in order: bucket order, then insertion
    order within a bucket, the table doubling when the size passes the threshold or when a
    bucket would turn into a tree below 64 buckets. (Tree bins, 8+ colliding keys in a table
    of 64+ buckets, keep insertion order here; Java's may differ.)"""
    cap = capacity
    spread = []
    for k in keys:
        h = java_string_hash(k) & 0xFFFFFFFF
        spread.append(h ^ (h >> 16))
    bins: dict[int, int] = {}

    def rebin(size: int) -> dict[int, int]:
        out: dict[int, int] = {}
        for j in range(size):
            bj = spread[j] & (cap - 1)
            out[bj] = out.get(bj, 0) + 1
        return out

    for i in range(len(keys)):
        size = i + 1
        b = spread[i] & (cap - 1)
        bins[b] = bins.get(b, 0) + 1
        if bins[b] > 8 and cap < 64:  # treeifyBin on a small table resizes instead
            cap <<= 1
            bins = rebin(size)
        if size > cap * load_factor:  # then putVal's own threshold check
            cap <<= 1
            bins = rebin(size)
    order = sorted(range(len(keys)), key=lambda i: (spread[i] & (cap - 1), i))
    return [keys[i] for i in order]


# ---------------------------------------------------------------------------------------------
# files partition
# ---------------------------------------------------------------------------------------------


def _record_skeleton(record_type: int) -> dict[str, Any]:
    return {
        "key": "",
        "type": record_type,
        "filesystemMetadata": None,
        "BloomFilterMetadata": None,
        "ColumnStatsMetadata": None,
        "recordIndexMetadata": None,
        "SecondaryIndexMetadata": None,
    }


def all_partitions_record(
    partitions: Iterable[str], deleted: Iterable[str] = ()
) -> tuple[str, dict[str, Any]]:
    """The ``__all_partitions__`` record (type 1) of a write: every partition it touched as
    ``{size: 0, isDeleted: false}``, and ``deleted`` partitions (a clean that removed a whole
    partition) with ``isDeleted: true``. ``""`` is listed as ``.``.

    Entries are in the order of Java's ``new HashMap<>()`` (``createPartitionListRecord``).
    """
    info: dict[str, dict[str, Any]] = {}
    for p in partitions:
        info[partition_identifier(p)] = {"size": 0, "isDeleted": False}
    for p in deleted:
        info[partition_identifier(p)] = {"size": 0, "isDeleted": True}
    rec = _record_skeleton(RECORD_TYPE_ALL_PARTITIONS)
    rec["filesystemMetadata"] = {k: info[k] for k in _java_hashmap_order(list(info), 16, 0.75)}
    return ALL_PARTITIONS_KEY, rec


def files_record(
    partition: str, added: Mapping[str, int], deleted: Iterable[str] = ()
) -> tuple[str, dict[str, Any]]:
    """The file-list record (type 2) of one data partition (``createPartitionFilesRecord``):
    file name (no directory) -> ``{size, isDeleted: false}`` for ``added`` files, ``{0, true}``
    tombstones for ``deleted`` ones. The key is the partition path, ``.`` for ``""``.

    Java refuses added files of size <= 0; so does this. Entries are in the order of Java's
    ``new HashMap<>(n, 1)``.
    """
    info: dict[str, dict[str, Any]] = {}
    deleted = list(deleted)
    for name, size in added.items():
        if "/" in name:
            raise HoodieInputError(f"files record: {name!r} must be a file name, not a path")
        if int(size) <= 0:
            raise HoodieInputError(
                f"File name {name}, is a 0 byte file. It does not have any contents"
            )
        info[name] = {"size": int(size), "isDeleted": False}
    for name in deleted:
        info[name] = {"size": 0, "isDeleted": True}
    cap = _table_size_for(max(len(added) + len(deleted), 1))
    rec = _record_skeleton(MetadataPartitionType.FILES.record_type)
    rec["filesystemMetadata"] = {k: info[k] for k in _java_hashmap_order(list(info), cap, 1.0)}
    return partition_identifier(partition), rec


class FileListing:
    """The merged ``filesystemMetadata`` of one ``files`` key, record after record
    (``HoodieTableMetadataUtil.combineFileSystemMetadata``, spec 6.1): a tombstone drops a
    live entry (and is kept when there is none, so merging logs before the base stays right);
    a live entry over another keeps the larger size."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[str, tuple[int, bool]] = {}  # name -> (size, is_deleted)

    def apply(self, fsm: Mapping[str, Any] | None) -> None:
        """Merge one newer record's map into this listing."""
        for name, info in (fsm or {}).items():
            size, deleted = int(info.get("size") or 0), bool(info.get("isDeleted"))
            old = self.entries.get(name)
            if deleted:
                if old is not None and not old[1]:
                    del self.entries[name]
                else:
                    self.entries[name] = (0, True)
            elif old is None or old[1]:
                self.entries[name] = (size, False)
            else:
                self.entries[name] = (max(old[0], size), False)

    def live(self) -> dict[str, int]:
        """File name -> size of the entries that are not tombstones."""
        return {n: s for n, (s, d) in self.entries.items() if not d}


def merge_files_records(older: Mapping[str, Any], newer: Mapping[str, Any]) -> dict[str, Any]:
    """Combine two ``files`` records of one key, ``newer`` taking precedence, by the rules of
    :class:`FileListing`. Returns a new record (``newer``'s key and type) whose map holds
    ``older``'s entries, then ``newer``'s new ones (Java's order comes from its ``HashMap``
    and merge path; no reader depends on it). Raises :class:`HoodieInputError` if ``newer`` is
    a file list (type 2) with a live entry of size <= 0 (Java's ``validatePayload``).
    """
    new_map: Mapping[str, Any] | None = newer.get("filesystemMetadata")
    if new_map is not None and newer.get("type") == MetadataPartitionType.FILES.record_type:
        for name, fi in new_map.items():
            if not fi["isDeleted"] and fi["size"] <= 0:
                raise HoodieInputError(
                    f"files record for {name!r}: existing files should have size > 0"
                )
    listing = FileListing()
    listing.apply(older.get("filesystemMetadata"))
    listing.apply(new_map)
    out = dict(newer)
    out["filesystemMetadata"] = {
        n: {"size": size, "isDeleted": deleted} for n, (size, deleted) in listing.entries.items()
    }
    return out


# ---------------------------------------------------------------------------------------------
# record_index partition
# ---------------------------------------------------------------------------------------------

_UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _split_uuid_file_id(file_id: str) -> tuple[int, int, int] | None:
    """(high bits, low bits, file index) of a ``<uuid>[-<n>]`` file id, None if it is not one."""
    if len(file_id) == 36:
        uuid_part, index = file_id, RECORD_INDEX_MISSING_FILEINDEX_FALLBACK
    else:
        cut = file_id.rfind("-")
        if cut < 0:
            return None
        uuid_part, suffix = file_id[:cut], file_id[cut + 1 :]
        if not re.fullmatch(r"[+-]?\d{1,10}", suffix):
            return None
        index = int(suffix)
        if not -(1 << 31) <= index < (1 << 31):
            return None
    if not _UUID_RE.match(uuid_part):
        return None
    u = uuid.UUID(uuid_part).int
    return _signed64(u >> 64), _signed64(u & _M64), index


def record_index_record(
    record_key: str,
    partition: str,
    file_id: str,
    instant_time_ms: int,
    *,
    file_id_encoding: int | None = None,
    position: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """A ``record_index`` entry (type 5) mapping a data record key to its location
    (``HoodieMetadataPayload.createRecordIndexUpdate``). The key is the record key itself.

    ``fileIdEncoding`` 0 splits a ``<uuid>-<n>`` file id into the UUID's signed most/least
    significant 64 bits and ``fileIndex = n`` (a bare 36-character UUID gets
    :data:`RECORD_INDEX_MISSING_FILEINDEX_FALLBACK`) and writes ``fileId = ""``; encoding 1
    stores the raw ``fileId`` with high = low = fileIndex = -1. By default (``None``) a
    canonical UUID id uses 0 and anything else falls back to 1 (Java would refuse a non-UUID id
    under encoding 0). ``partition`` is the data partition path as written (Java does not map
    ``""`` to ``.`` here). ``instant_time_ms``: :func:`instant_to_epoch_ms` of the instant that
    wrote the record's file.
    """
    info: dict[str, Any]
    parts = _split_uuid_file_id(file_id) if file_id_encoding in (None, 0) else None
    if parts is None and file_id_encoding == 0:
        raise HoodieInputError(
            f"Invalid UUID or index: fileID={file_id}, partition={partition} (fileIdEncoding 0)"
        )
    if file_id_encoding not in (None, 0, 1):
        raise HoodieInputError(f"fileIdEncoding must be 0 or 1, not {file_id_encoding}")
    if parts is not None:
        high, low, index = parts
        info = {
            "partitionName": partition,
            "fileIdHighBits": high,
            "fileIdLowBits": low,
            "fileIndex": index,
            "fileId": "",
            "instantTime": int(instant_time_ms),
            "fileIdEncoding": 0,
            "position": position,
        }
    else:
        info = {
            "partitionName": partition,
            "fileIdHighBits": -1,
            "fileIdLowBits": -1,
            "fileIndex": -1,
            "fileId": file_id,
            "instantTime": int(instant_time_ms),
            "fileIdEncoding": 1,
            "position": position,
        }
    rec = _record_skeleton(MetadataPartitionType.RECORD_INDEX.record_type)
    rec["recordIndexMetadata"] = info
    return record_key, rec


def decode_record_index(record: Mapping[str, Any]) -> tuple[str, str, int]:
    """``(partition, file_id, instant millis)`` of a record-index value (a whole
    ``HoodieMetadataRecord`` or its ``recordIndexMetadata``); inverse of
    :func:`record_index_record` (``HoodieTableMetadataUtil.getLocationFromRecordIndexInfo``)."""
    info = record.get("recordIndexMetadata", record)
    if not isinstance(info, Mapping) or "fileIdEncoding" not in info:
        raise HoodieCorruptedDataError("not a record-index value: no recordIndexMetadata")
    encoding = info["fileIdEncoding"]
    if encoding == 0:
        high, low = info["fileIdHighBits"], info["fileIdLowBits"]
        u = str(uuid.UUID(int=((high & _M64) << 64) | (low & _M64)))
        index = info["fileIndex"]
        file_id = u if index == RECORD_INDEX_MISSING_FILEINDEX_FALLBACK else f"{u}-{index}"
    elif encoding == 1:
        file_id = info["fileId"]
    else:
        raise HoodieCorruptedDataError(f"record-index value with unknown fileIdEncoding {encoding}")
    return info["partitionName"], file_id, info["instantTime"]


def record_index_value(
    partition: str, file_id: str, instant_time_ms: int, table_version: int
) -> bytes:
    """The Avro bytes of the record-index value locating a key in ``(partition, file_id)``
    (what :func:`record_index_record` and :func:`encode_records` write: the value does not
    hold the key, so every key of one file group shares these bytes)."""
    _, r = record_index_record("", partition, file_id, instant_time_ms)
    return encode_records([r], table_version)[0]


def byte_order(keys: pa.Array) -> tuple[np.ndarray, bool]:
    """The stable order of string ``keys`` by their bytes (what ``pc.sort_indices`` gives) and
    whether two keys may be equal.

    Sorted by the 8 bytes after the keys' common prefix (big-endian, zero-padded) and where a
    key ends inside them, which ~5x Arrow's string sort on keys such as ``k<13 digits>`` or
    UUIDs; only keys that tie on both and are longer go through Arrow's sort, within their
    run."""
    n = len(keys)
    if n < 2:
        return np.arange(n, dtype=np.int64), False
    if not (pa.types.is_large_string(keys.type) or pa.types.is_string(keys.type)):
        return pc.sort_indices(keys).to_numpy(), True
    bufs = keys.buffers()
    off_type = np.int64 if pa.types.is_large_string(keys.type) else np.int32
    offsets = np.frombuffer(bufs[1], dtype=off_type)[keys.offset : keys.offset + n + 1]
    offsets = offsets.astype(np.int64, copy=False)
    data = (
        np.frombuffer(bufs[2], dtype=np.uint8)
        if bufs[2] is not None and bufs[2].size
        else np.zeros(1, np.uint8)  # every key empty
    )
    starts, lens = offsets[:-1], np.diff(offsets)
    lo, hi = pc.min_max(keys).values()
    a, b = lo.as_buffer().to_pybytes(), hi.as_buffer().to_pybytes()
    common = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    word = np.zeros(n, dtype=np.uint64)
    last = max(len(data) - 1, 0)
    for j in range(8):
        at = common + j
        byte = data[np.minimum(starts + at, last)].astype(np.uint64)
        byte[lens <= at] = 0
        word |= byte << np.uint64(56 - 8 * j)
    # past the word, only whether a key ended inside it orders it (a key is before the keys
    # it is a prefix of); keys longer than the word all count as one length: Arrow orders them
    ends = np.minimum(lens, common + 9)
    same_len = bool((ends == ends[0]).all())
    order = (np.argsort(word, kind="stable") if same_len else np.lexsort((ends, word))).astype(
        np.int64
    )
    w, e = word[order], ends[order]
    tie = (w[1:] == w[:-1]) & (e[1:] == e[:-1])
    if not tie.any():
        return order, False
    longer = tie & (e[1:] > common + 8)
    if longer.any():
        member = np.zeros(n, dtype=bool)
        member[1:] |= longer
        member[:-1] |= longer
        pos = np.flatnonzero(member)
        run = np.cumsum(np.concatenate(([True], ~longer)))  # run id of each sorted position
        sub = pa.table({"run": run[pos], "key": keys.take(pa.array(order[pos]))})
        within = pc.sort_indices(sub, [("run", "ascending"), ("key", "ascending")]).to_numpy()
        order[pos] = order[pos][within]
    return order, True


@dataclass(frozen=True)
class RecordIndexColumns:
    """Record-index entries column-wise: key ``keys[i]`` is located by the Avro value
    ``values[loc[i]]`` (one value per file group location, shared by all its keys).

    What the record index is built and updated from without a Python object per key: keys
    are hashed to their MDT file group from the Arrow buffers
    (:func:`key_to_file_group_indexes`), sorted by Arrow, and written with
    :func:`~hoodie_ray.hfile.write_hfile_arrays`. A secondary index's entries fit the same
    shape (every live entry has the same value); ``group_keys`` then holds what places each
    entry in its file group, the ``<escaped value>$`` prefix of its key (None: the key).
    """

    keys: pa.Array
    loc: np.ndarray
    values: list[bytes]
    group_keys: pa.Array | None = None

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def empty(cls) -> RecordIndexColumns:
        return cls(pa.array([], pa.large_string()), np.zeros(0, np.int32), [])

    @classmethod
    def of_locations(
        cls,
        located: Iterable[tuple[str, str, int, pa.Array | pa.ChunkedArray | Sequence[str]]],
        table_version: int,
    ) -> RecordIndexColumns:
        """Entries of ``(data partition, file id, instant millis, keys)``; a later key
        replaces an earlier copy of itself (see :meth:`sorted_unique`)."""
        values: list[bytes] = []
        value_of: dict[tuple[str, str, int], int] = {}
        arrays: list[pa.Array] = []
        locs: list[np.ndarray] = []
        for part, fid, ms, keys in located:
            arr = (
                keys
                if isinstance(keys, pa.Array | pa.ChunkedArray)
                else pa.array(keys, pa.string())
            )
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks() if arr.num_chunks else pa.array([], pa.string())
            if not len(arr):
                continue
            if arr.null_count:
                raise HoodieInputError(f"record keys of file group {part}/{fid} may not be null")
            loc = value_of.get((part, fid, ms))
            if loc is None:
                loc = value_of[(part, fid, ms)] = len(values)
                values.append(record_index_value(part, fid, ms, table_version))
            arrays.append(arr.cast(pa.large_string()))
            locs.append(np.full(len(arr), loc, dtype=np.int32))
        if not arrays:
            return cls(pa.array([], pa.large_string()), np.zeros(0, np.int32), values)
        keys_all = pa.concat_arrays(arrays) if len(arrays) > 1 else arrays[0]
        return cls(keys_all, np.concatenate(locs), values)

    def take(self, idx: np.ndarray) -> RecordIndexColumns:
        """The entries at positions ``idx``, in that order."""
        at = pa.array(idx)
        group_keys = None if self.group_keys is None else self.group_keys.take(at)
        return RecordIndexColumns(self.keys.take(at), self.loc[idx], self.values, group_keys)

    def file_group_indexes(self, groups: int) -> np.ndarray:
        """Each key's MDT file group (Java's hash of the key or its group key; 0 for a single
        group)."""
        if groups == 1:
            return np.zeros(len(self.keys), dtype=np.int32)
        return key_to_file_group_indexes(
            self.keys if self.group_keys is None else self.group_keys, groups
        )

    def split(self, groups: int) -> list[RecordIndexColumns]:
        """The entries of each of ``groups`` file groups, in their order here."""
        of = self.file_group_indexes(groups)
        # a stable sort of 16-bit values is numpy's radix sort (~10x the int32 merge sort)
        order = np.argsort(of.astype(np.uint16 if groups <= 1 << 16 else np.int64), kind="stable")
        bounds = np.searchsorted(of[order], np.arange(groups + 1))
        return [self.take(order[bounds[g] : bounds[g + 1]]) for g in range(groups)]

    def sorted_unique(self) -> RecordIndexColumns:
        """Sorted by key bytes (an HFile's order); of a key held more than once, the last."""
        n = len(self.keys)
        if n == 0:
            return self
        order, maybe_repeats = byte_order(self.keys)
        ks = self.keys.take(pa.array(order))
        if n > 1 and maybe_repeats:
            same = pc.equal(ks.slice(1), ks.slice(0, n - 1)).to_numpy(zero_copy_only=False)
            if same.any():
                keep = np.ones(n, dtype=bool)
                keep[:-1] = ~same  # the last of each run of equal keys
                return self.take(order[keep])
        group_keys = None if self.group_keys is None else self.group_keys.take(pa.array(order))
        return RecordIndexColumns(ks, self.loc[order], self.values, group_keys)

    def value_column(self) -> pa.DictionaryArray:
        """Each key's Avro value (binary), as a dictionary-encoded Arrow column (``loc`` over
        the distinct values: the HFile writer copies each distinct value's bytes once)."""
        return pa.DictionaryArray.from_arrays(
            pa.array(self.loc, pa.int32()), pa.array(self.values, pa.binary())
        )

    def to_records(self) -> dict[str, bytes]:
        """``key -> value`` (Python objects: for tests and small inputs)."""
        return dict(zip(self.keys.to_pylist(), (self.values[i] for i in self.loc), strict=True))


_INSTANT_RE = re.compile(r"^\d{14}(\d{3})?\d*$")


def instant_to_epoch_ms(instant: str, tz: str | _dt.tzinfo | None = "LOCAL") -> int:
    """Epoch milliseconds of an instant time as Java's ``parseDateFromInstantTime`` computes
    them for ``recordIndexMetadata.instantTime`` (spec 1.6).

    The instant's digits are a wall-clock time (``yyyyMMddHHmmss[SSS]``; 14 digits get ``999``
    milliseconds, more than 17 are cut to 17, as ``fixInstantTimeCompatibility`` does), read in
    a time zone:

    * ``"LOCAL"`` (Hudi's default ``hoodie.table.timeline.timezone``) or ``None``: Java uses the
      JVM's default zone; here the zone of this process. The sample v9 table was written by a
      JVM at UTC-6 (``20260307162628304`` -> ``1772922388304``).
    * ``"UTC"``: UTC. Java revisions that take the zone from ``commitTimeZone`` do this; older
      1.x revisions parsed with the JVM zone whatever the timeline zone (they only formatted
      new instants in UTC), so a Java writer of those versions on a non-UTC JVM stored
      shifted values for UTC timelines.
    * a ``tzinfo``: that zone (to reproduce a particular JVM's default zone). Times in a DST gap
      or overlap resolve as ``LocalDateTime.atZone`` does (gap: shifted forward by the gap;
      overlap: the earlier offset).
    """
    if not _INSTANT_RE.match(instant):
        raise HoodieInputError(f"not an instant time: {instant!r}")
    s = instant + "999" if len(instant) == 14 else instant[:17]
    naive = _dt.datetime(
        int(s[0:4]),
        int(s[4:6]),
        int(s[6:8]),
        int(s[8:10]),
        int(s[10:12]),
        int(s[12:14]),
        int(s[14:17]) * 1000,
    )
    if tz is None or (isinstance(tz, str) and tz.upper() == "LOCAL"):
        aware = naive.astimezone()  # fold=0 local time
    elif isinstance(tz, str):
        if tz.upper() != "UTC":
            raise HoodieInputError(f"timeline time zone must be LOCAL or UTC, not {tz!r}")
        aware = naive.replace(tzinfo=_dt.timezone.utc)
    else:
        aware = naive.replace(tzinfo=tz)
    epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    delta = aware - epoch
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


# ---------------------------------------------------------------------------------------------
# Avro values
# ---------------------------------------------------------------------------------------------

_TOP_DEFAULTS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
    "filesystemMetadata",
    "BloomFilterMetadata",
    "ColumnStatsMetadata",
    "recordIndexMetadata",
    "SecondaryIndexMetadata",
)


def _qualify(value: Any) -> Any:
    """A wrapper given as ``("StringWrapper", {...})`` gets the full record name."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        name = value[0] if "." in value[0] else f"{NAMESPACE}.{value[0]}"
        return (name, value[1])
    return value


def _prepare(record: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(record)
    for f in _TOP_DEFAULTS:
        out.setdefault(f, None)
    out["key"] = ""
    cs = out.get("ColumnStatsMetadata")
    if isinstance(cs, tuple):  # as decoded with return_record_name
        cs = cs[1]
    if cs is not None:
        cs = dict(cs)
        cs["minValue"] = _qualify(cs.get("minValue"))
        cs["maxValue"] = _qualify(cs.get("maxValue"))
        out["ColumnStatsMetadata"] = cs
    return out


def encode_records(
    records: Sequence[Mapping[str, Any]], schema: Mapping[str, Any] | str | int
) -> list[bytes]:
    """Avro binary of each ``HoodieMetadataRecord`` (no header, no fingerprint), as stored in
    HFile cells. ``schema`` is a schema dict, its JSON or a table version. The ``key`` field is
    written as ``""`` as Java does (the real key is the HFile row key); missing optional fields
    are null."""
    parsed = _parsed_schema(_schema_json(schema))
    out = []
    buf = io.BytesIO()
    for r in records:
        buf.seek(0)
        buf.truncate()
        try:
            fastavro.schemaless_writer(buf, parsed, _prepare(r))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise HoodieInputError(f"metadata record does not fit the schema: {e}") from None
        out.append(buf.getvalue())
    return out


def decode_value(
    value: bytes | memoryview, schema: Mapping[str, Any] | str | int
) -> dict[str, Any]:
    """One HFile cell value decoded with the writer schema (dict, JSON or table version).

    Wrapper unions come back as ``(full record name, {"value": ...})`` tuples; other records as
    plain dicts. Raises :class:`HoodieCorruptedDataError` if the bytes do not decode exactly.
    """
    parsed = _parsed_schema(_schema_json(schema))
    fo = io.BytesIO(value)
    try:
        rec = fastavro.schemaless_reader(
            fo, parsed, None, return_record_name=True, return_record_name_override=True
        )
    except Exception as e:  # fastavro raises many types on garbage
        raise HoodieCorruptedDataError(
            f"metadata value does not decode: {type(e).__name__}: {e}"
        ) from None
    if fo.tell() != len(value):
        raise HoodieCorruptedDataError(
            f"metadata value: {len(value) - fo.tell()} bytes left after the record"
        )
    if not isinstance(rec, dict):
        raise HoodieCorruptedDataError("metadata value is not a record")
    return rec


def is_deleted_record(record: Mapping[str, Any]) -> bool:
    """Whether a decoded record is a tombstone that MDT compaction drops: a column-stats,
    partition-stats, bloom-filter or secondary-index value with ``isDeleted = true``
    (``HoodieMetadataPayload.isDeletedRecord``). ``files`` records are never tombstones as a
    whole; their entries are merged with :func:`merge_files_records`."""
    for field in ("ColumnStatsMetadata", "BloomFilterMetadata", "SecondaryIndexMetadata"):
        v = record.get(field)
        if isinstance(v, tuple):
            v = v[1]
        if isinstance(v, Mapping) and v.get("isDeleted"):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# Delete blocks (record index, secondary indexes)
# ---------------------------------------------------------------------------------------------


def delete_record_list_bytes(keys: Sequence[str], partition_name: str) -> bytes:
    """Content of a DELETE log block removing ``keys`` from an MDT partition (spec 4.3):
    ``int32 3``, ``int32 length``, Avro ``HoodieDeleteRecordList`` whose entries carry the key,
    the **MDT** partition name (e.g. ``record_index``) and ``orderingVal = IntWrapper{0}``, with
    the v8/v9 ``orderingVal`` union (a single wrapper, not the newer array form)."""
    block = DeleteBlock({}, record_keys=list(keys), partition_paths=partition_name)
    return b"".join(bytes(p) for p in block.content_pieces())


def decode_delete_record_list(content: bytes | memoryview) -> list[tuple[str, str | None]]:
    """``(record key, partition)`` pairs of a DELETE block's content (version 3 only)."""
    if len(content) < 4 or struct.unpack_from(">i", content, 0)[0] != BLOCK_CONTENT_VERSION:
        raise HoodieCorruptedDataError("delete block content is not version 3")
    block = DeleteBlock({}, content=content)
    return list(zip(block.record_keys.to_pylist(), block.partition_paths.to_pylist(), strict=True))
