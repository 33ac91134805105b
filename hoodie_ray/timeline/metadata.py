"""Commit metadata: ``HoodieCommitMetadata``, ``HoodieReplaceCommitMetadata`` and ``HoodieWriteStat``.

Two encodings (spec §2.3, §2.4):

* timeline layout 1 (table version 6): Jackson pretty-printed JSON, with exactly the field set
  Java 0.14/0.15 writes (``recordsStats`` and the log fields only on log-append stats);
* timeline layout 2 (table versions 8/9): an Avro container holding one record, with the writer
  schema laid out as Java 1.x writes it (copied from Java-written completed instants).

JSON keys and Avro field names are Hudi's camelCase, mapped explicitly onto the snake_case
attributes here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from json.encoder import encode_basestring as _json_string
from typing import Any

from hoodie_ray.exceptions import HoodieCorruptedDataError
from hoodie_ray.timeline.avro_io import is_avro_container, read_single_record, write_single_record
from hoodie_ray.timeline.instant import Instant, instant_file_name

__all__ = [
    "COMMIT_METADATA_SCHEMA",
    "REPLACE_COMMIT_METADATA_SCHEMA",
    "HoodieCommitMetadata",
    "HoodieRuntimeStats",
    "HoodieWriteStat",
    "jackson_pretty",
]

NULL_COMMIT = "null"  # HoodieWriteStat.NULL_COMMIT: prevCommit of a new file


# -- Jackson-style pretty printing ------------------------------------------------------------


def _json_scalar(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return _json_string(v)  # what json.dumps(v, ensure_ascii=False) returns
    raise TypeError(f"not JSON-serialisable: {type(v).__name__}")


def jackson_pretty(value: Any, indent: int = 0) -> str:
    """JSON as Jackson's ``DefaultPrettyPrinter`` writes it (how Hudi 0.x writes commit files).

    Objects put one ``"key" : value`` per line, indented by two spaces per level; arrays stay
    on one line (``[ a, b ]``), so an array of objects reads ``[ {`` ... ``}, {`` ... ``} ]``;
    empty containers are ``{ }`` and ``[ ]``.
    """
    # exact types first: a commit's metadata is ~30 values a file group written
    t = type(value)
    if t is str:
        return _json_string(value)
    if t is int:
        return str(value)
    if t is dict or (t is not list and t is not tuple and isinstance(value, dict)):
        if not value:
            return "{ }"
        pad = " " * (indent + 2)
        inner = indent + 2
        items = [
            f"{pad}{_json_string(k if type(k) is str else str(k))} : {jackson_pretty(v, inner)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if t is list or t is tuple or isinstance(value, (list, tuple)):
        if not value:
            return "[ ]"
        return "[ " + ", ".join([jackson_pretty(v, indent) for v in value]) + " ]"
    return _json_scalar(value)


# -- Avro schemas (field layout of Java 1.x files) ------------------------------------------------


def _jstr() -> dict[str, Any]:
    return {"type": "string", "avro.java.string": "String"}


def _opt(name: str, typ: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", typ], "default": None}


def _write_stat_schema() -> dict[str, Any]:
    s, lng = _jstr, "long"
    return {
        "type": "record",
        "name": "HoodieWriteStat",
        "fields": [
            _opt("fileId", s()),
            _opt("path", s()),
            _opt("prevCommit", s()),
            _opt("numWrites", lng),
            _opt("numDeletes", lng),
            _opt("numUpdateWrites", lng),
            _opt("totalWriteBytes", lng),
            _opt("totalWriteErrors", lng),
            _opt("partitionPath", s()),
            _opt("totalLogRecords", lng),
            _opt("totalLogFiles", lng),
            _opt("totalUpdatedRecordsCompacted", lng),
            _opt("numInserts", lng),
            _opt("totalLogBlocks", lng),
            _opt("totalCorruptLogBlock", lng),
            _opt("totalRollbackBlocks", lng),
            _opt("fileSizeInBytes", lng),
            _opt("logVersion", "int"),
            _opt("logOffset", lng),
            _opt("baseFile", s()),
            _opt("logFiles", {"type": "array", "items": s(), "default": None}),
            _opt(
                "cdcStats",
                {"type": "map", "values": "long", "avro.java.string": "String", "default": None},
            ),
            _opt("prevBaseFile", s()),
            _opt("minEventTime", lng),
            _opt("maxEventTime", lng),
            _opt(
                "runtimeStats",
                {
                    "type": "record",
                    "name": "HoodieRuntimeStats",
                    "fields": [
                        _opt("totalScanTime", lng),
                        _opt("totalCreateTime", lng),
                        _opt("totalUpsertTime", lng),
                    ],
                },
            ),
            _opt("totalLogFilesCompacted", lng),
            _opt("totalLogReadTimeMs", lng),
            _opt("totalLogSizeCompacted", lng),
            _opt("tempPath", s()),
            _opt("numUpdates", lng),
        ],
    }


def _commit_schema(replace: bool) -> dict[str, Any]:
    extra_map: dict[str, Any] = {"type": "map", "values": _jstr(), "avro.java.string": "String"}
    if not replace:
        extra_map["default"] = None  # present in HoodieCommitMetadata files, not in replace ones
    fields: list[dict[str, Any]] = [
        _opt(
            "partitionToWriteStats",
            {
                "type": "map",
                "values": {"type": "array", "items": _write_stat_schema()},
                "avro.java.string": "String",
            },
        ),
        _opt("compacted", "boolean"),
        _opt("extraMetadata", extra_map),
        {"name": "version", "type": ["int", "null"], "default": 1},
        _opt("operationType", _jstr()),
    ]
    if replace:
        fields.append(
            _opt(
                "partitionToReplaceFileIds",
                {
                    "type": "map",
                    "values": {"type": "array", "items": _jstr()},
                    "avro.java.string": "String",
                },
            )
        )
    return {
        "type": "record",
        "name": "HoodieReplaceCommitMetadata" if replace else "HoodieCommitMetadata",
        "namespace": "org.apache.hudi.avro.model",
        "fields": fields,
    }


#: Writer schema of ``org.apache.hudi.avro.model.HoodieCommitMetadata`` as Java 1.x writes it.
COMMIT_METADATA_SCHEMA: dict[str, Any] = _commit_schema(replace=False)
#: Writer schema of ``org.apache.hudi.avro.model.HoodieReplaceCommitMetadata`` (Java 1.x).
REPLACE_COMMIT_METADATA_SCHEMA: dict[str, Any] = _commit_schema(replace=True)


# -- HoodieWriteStat --------------------------------------------------------------------------

# attribute -> Hudi key, in the Avro schema's field order
_STAT_KEYS: dict[str, str] = {
    "file_id": "fileId",
    "path": "path",
    "prev_commit": "prevCommit",
    "num_writes": "numWrites",
    "num_deletes": "numDeletes",
    "num_update_writes": "numUpdateWrites",
    "total_write_bytes": "totalWriteBytes",
    "total_write_errors": "totalWriteErrors",
    "partition_path": "partitionPath",
    "total_log_records": "totalLogRecords",
    "total_log_files": "totalLogFiles",
    "total_updated_records_compacted": "totalUpdatedRecordsCompacted",
    "num_inserts": "numInserts",
    "total_log_blocks": "totalLogBlocks",
    "total_corrupt_log_block": "totalCorruptLogBlock",
    "total_rollback_blocks": "totalRollbackBlocks",
    "file_size_in_bytes": "fileSizeInBytes",
    "log_version": "logVersion",
    "log_offset": "logOffset",
    "base_file": "baseFile",
    "log_files": "logFiles",
    "cdc_stats": "cdcStats",
    "prev_base_file": "prevBaseFile",
    "min_event_time": "minEventTime",
    "max_event_time": "maxEventTime",
    "runtime_stats": "runtimeStats",
    "total_log_files_compacted": "totalLogFilesCompacted",
    "total_log_read_time_ms": "totalLogReadTimeMs",
    "total_log_size_compacted": "totalLogSizeCompacted",
    "temp_path": "tempPath",
    "num_updates": "numUpdates",
}
_STAT_ATTRS = {v: k for k, v in _STAT_KEYS.items()}

# Java 0.x JSON: the fields of HoodieWriteStat in Jackson's order (primitive longs never null)
_JSON_BASE_FIELDS: list[tuple[str, bool]] = [  # (attribute, is_primitive_long)
    ("file_id", False),
    ("path", False),
    ("cdc_stats", False),
    ("prev_commit", False),
    ("num_writes", True),
    ("num_deletes", True),
    ("num_update_writes", True),
    ("num_inserts", True),
    ("total_write_bytes", True),
    ("total_write_errors", True),
    ("temp_path", False),
    ("partition_path", False),
    ("total_log_records", True),
    ("total_log_files_compacted", True),
    ("total_log_size_compacted", True),
    ("total_updated_records_compacted", True),
    ("total_log_blocks", True),
    ("total_corrupt_log_block", True),
    ("total_rollback_blocks", True),
    ("file_size_in_bytes", True),
    ("min_event_time", False),
    ("max_event_time", False),
]

_INT_ATTRS = {
    "num_writes",
    "num_deletes",
    "num_update_writes",
    "total_write_bytes",
    "total_write_errors",
    "total_log_records",
    "total_log_files",
    "total_updated_records_compacted",
    "num_inserts",
    "total_log_blocks",
    "total_corrupt_log_block",
    "total_rollback_blocks",
    "file_size_in_bytes",
    "log_version",
    "log_offset",
    "min_event_time",
    "max_event_time",
    "total_log_files_compacted",
    "total_log_read_time_ms",
    "total_log_size_compacted",
    "num_updates",
}
_STR_ATTRS = {
    "file_id",
    "path",
    "prev_commit",
    "partition_path",
    "base_file",
    "prev_base_file",
    "temp_path",
}
# Attributes that are Java primitives in the POJO: a null in a file reads as 0.
_PRIMITIVE_ZERO = {a for a, prim in _JSON_BASE_FIELDS if prim} | {
    "total_log_read_time_ms",
    "num_updates",
}


@dataclass
class HoodieRuntimeStats:
    """``HoodieWriteStat.RuntimeStats``: milliseconds spent scanning, creating and upserting."""

    total_scan_time: int = 0
    total_create_time: int = 0
    total_upsert_time: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        # Jackson's order in 0.x files: scan, upsert, create
        return {
            "totalScanTime": self.total_scan_time,
            "totalUpsertTime": self.total_upsert_time,
            "totalCreateTime": self.total_create_time,
        }

    def to_avro_obj(self) -> dict[str, Any]:
        return {
            "totalScanTime": self.total_scan_time,
            "totalCreateTime": self.total_create_time,
            "totalUpsertTime": self.total_upsert_time,
        }

    @classmethod
    def from_obj(cls, obj: Any, what: str) -> HoodieRuntimeStats | None:
        if obj is None:
            return None
        if not isinstance(obj, dict):
            raise HoodieCorruptedDataError(f"corrupt commit metadata {what}: runtimeStats")
        vals = {}
        for attr, key in (
            ("total_scan_time", "totalScanTime"),
            ("total_create_time", "totalCreateTime"),
            ("total_upsert_time", "totalUpsertTime"),
        ):
            v = obj.get(key)
            if v is None:
                v = 0
            if not isinstance(v, int) or isinstance(v, bool):
                raise HoodieCorruptedDataError(f"corrupt commit metadata {what}: {key}")
            vals[attr] = v
        return cls(**vals)


@dataclass
class HoodieWriteStat:
    """Statistics of one file written by one instant (Hudi's ``HoodieWriteStat``).

    Defaults are what Java's POJO holds before it is filled in: ``None`` for strings and
    nullable fields, ``0`` for counters. The log fields (``log_version``, ``log_offset``,
    ``base_file``, ``log_files``) are set for log appends only (Java's ``HoodieDeltaWriteStat``).

    Example:
        >>> st = HoodieWriteStat(file_id="f-0", path="p/f-0_0-1-2_20250101000000000.parquet",
        ...                      partition_path="p", prev_commit="null", num_writes=3, num_inserts=3)
        >>> st.file_name, st.is_delta
        ('f-0_0-1-2_20250101000000000.parquet', False)
    """

    file_id: str | None = None
    path: str | None = None
    prev_commit: str | None = None
    num_writes: int = 0
    num_deletes: int = 0
    num_update_writes: int = 0
    total_write_bytes: int = 0
    total_write_errors: int = 0
    partition_path: str | None = None
    total_log_records: int = 0
    total_log_files: int | None = None
    total_updated_records_compacted: int = 0
    num_inserts: int = 0
    total_log_blocks: int = 0
    total_corrupt_log_block: int = 0
    total_rollback_blocks: int = 0
    file_size_in_bytes: int = 0
    log_version: int | None = None
    log_offset: int | None = None
    base_file: str | None = None
    log_files: list[str] | None = None
    cdc_stats: dict[str, int] | None = None
    prev_base_file: str | None = None
    min_event_time: int | None = None
    max_event_time: int | None = None
    runtime_stats: HoodieRuntimeStats | None = None
    total_log_files_compacted: int = 0
    total_log_read_time_ms: int = 0
    total_log_size_compacted: int = 0
    temp_path: str | None = None
    num_updates: int = 0
    # Not serialized: what the metadata table's record index needs from the writer, in write
    # order: (record keys, True) for keys this file group gained, (keys, False) for keys it
    # lost; kept only while the table has a record index.
    record_key_ops: Any = field(default=None, compare=False, repr=False)

    @property
    def is_delta(self) -> bool:
        """True for a log append (Java ``HoodieDeltaWriteStat``)."""
        return self.log_files is not None or self.log_version is not None

    @property
    def file_name(self) -> str | None:
        """The name of the file written (last segment of ``path``)."""
        return self.path.rsplit("/", 1)[-1] if self.path else None

    # -- JSON (layout 1) ---------------------------------------------------------------------
    def to_json_obj(self) -> dict[str, Any]:
        """The stat as Java 0.x's Jackson writes it (same keys, same order)."""
        out: dict[str, Any] = {}
        for attr, primitive in _JSON_BASE_FIELDS:
            v = getattr(self, attr)
            if primitive and v is None:
                v = 0
            out[_STAT_KEYS[attr]] = dict(v) if isinstance(v, dict) else v
        out["runtimeStats"] = self.runtime_stats.to_json_obj() if self.runtime_stats else None
        if self.is_delta:
            out["logVersion"] = self.log_version or 0
            out["logOffset"] = self.log_offset or 0
            out["baseFile"] = self.base_file
            out["logFiles"] = list(self.log_files or [])
            out["recordsStats"] = {"val": None}
        return out

    # -- Avro (layout 2) ---------------------------------------------------------------------
    def to_avro_obj(self) -> dict[str, Any]:
        """The stat as an Avro ``HoodieWriteStat`` record (all fields, schema order)."""
        out: dict[str, Any] = {}
        for attr, key in _STAT_KEYS.items():
            v = getattr(self, attr)
            if attr == "runtime_stats":
                v = v.to_avro_obj() if v is not None else None
            elif isinstance(v, (list, dict)):
                v = type(v)(v)
            out[key] = v
        return out

    @classmethod
    def from_obj(cls, obj: Any, what: str) -> HoodieWriteStat:
        """A stat from a decoded JSON object or Avro record (unknown keys are ignored)."""
        if not isinstance(obj, dict):
            raise HoodieCorruptedDataError(
                f"corrupt commit metadata {what}: a write stat is not an object"
            )
        kwargs: dict[str, Any] = {}
        for key, v in obj.items():
            attr = _STAT_ATTRS.get(key)
            if attr is None:
                continue
            if attr == "runtime_stats":
                kwargs[attr] = HoodieRuntimeStats.from_obj(v, what)
                continue
            if v is None:
                if attr in _PRIMITIVE_ZERO:
                    v = 0
                kwargs[attr] = v
                continue
            if attr in _INT_ATTRS:
                if not isinstance(v, int) or isinstance(v, bool):
                    raise HoodieCorruptedDataError(
                        f"corrupt commit metadata {what}: {key} is not a number"
                    )
            elif attr in _STR_ATTRS:
                if not isinstance(v, str):
                    raise HoodieCorruptedDataError(
                        f"corrupt commit metadata {what}: {key} is not a string"
                    )
            elif attr == "log_files":
                if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                    raise HoodieCorruptedDataError(f"corrupt commit metadata {what}: logFiles")
                v = list(v)
            elif attr == "cdc_stats":
                if not isinstance(v, dict) or not all(
                    isinstance(k, str) and isinstance(x, int) and not isinstance(x, bool)
                    for k, x in v.items()
                ):
                    raise HoodieCorruptedDataError(f"corrupt commit metadata {what}: cdcStats")
                v = dict(v)
            kwargs[attr] = v
        return cls(**kwargs)


# -- HoodieCommitMetadata ---------------------------------------------------------------------


def _what(instant: Instant | str | None, layout_version: int | None) -> str:
    if isinstance(instant, Instant):
        if layout_version in (1, 2):
            try:
                return instant_file_name(instant, layout_version)
            except Exception:
                return str(instant)
        return str(instant)
    return instant or "<commit metadata>"


@dataclass
class HoodieCommitMetadata:
    """Hudi's ``HoodieCommitMetadata`` (and ``HoodieReplaceCommitMetadata`` when
    ``partition_to_replace_file_ids`` is not ``None``).

    Args:
        partition_to_write_stats: partition path (``""`` when non-partitioned) -> write stats.
        compacted: true only for compaction commits.
        extra_metadata: ``schema`` (the writer's Avro schema without meta fields) and friends.
        operation_type: ``INSERT``, ``UPSERT``, ``BULK_INSERT``, ``DELETE``, ``COMPACT``,
            ``INSERT_OVERWRITE``, ``CLUSTER``... (Java's default is ``UNKNOWN``).
        partition_to_replace_file_ids: replacecommits only: partition -> replaced file ids.
        version: the Avro ``version`` field (Java 1.x writes null).

    Example:
        >>> m = HoodieCommitMetadata({"p": [HoodieWriteStat(file_id="f-0")]},
        ...                          extra_metadata={"schema": "{}"}, operation_type="UPSERT")
        >>> HoodieCommitMetadata.from_json(m.to_json()).file_ids()
        {'f-0'}
    """

    partition_to_write_stats: dict[str, list[HoodieWriteStat]] = field(default_factory=dict)
    compacted: bool = False
    extra_metadata: dict[str, str] = field(default_factory=dict)
    operation_type: str | None = "UNKNOWN"
    partition_to_replace_file_ids: dict[str, list[str]] | None = None
    version: int | None = None

    # -- helpers -------------------------------------------------------------------------------
    @property
    def is_replace(self) -> bool:
        """True for replacecommit metadata."""
        return self.partition_to_replace_file_ids is not None

    @property
    def schema(self) -> str | None:
        """``extraMetadata.schema``: the writer schema (Avro JSON without meta fields)."""
        return self.extra_metadata.get("schema") or None

    def write_stats(self) -> list[HoodieWriteStat]:
        """Every write stat, partition by partition."""
        return [s for stats in self.partition_to_write_stats.values() for s in stats]

    def iter_write_stats(self) -> Iterator[tuple[str, HoodieWriteStat]]:
        """``(partition path, stat)`` pairs."""
        for part, stats in self.partition_to_write_stats.items():
            for s in stats:
                yield part, s

    def file_ids(self) -> set[str]:
        """File ids written by this instant (stats with an empty file id are skipped)."""
        return {s.file_id for s in self.write_stats() if s.file_id}

    def partition_file_ids(self) -> dict[str, set[str]]:
        """Partition -> file ids written by this instant."""
        out: dict[str, set[str]] = {}
        for part, s in self.iter_write_stats():
            if s.file_id:
                out.setdefault(part, set()).add(s.file_id)
        return out

    def replaced_file_ids(self) -> dict[str, set[str]]:
        """Partition -> file ids this replacecommit replaced (empty for other commits)."""
        return {p: set(ids) for p, ids in (self.partition_to_replace_file_ids or {}).items()}

    def written_paths(self) -> list[str]:
        """The ``path`` of every stat that has one, and its CDC log files (``cdcStats``),
        relative to the base path."""
        out = []
        for s in self.write_stats():
            if s.path:
                out.append(s.path)
            out.extend(s.cdc_stats or ())
        return out

    # -- JSON (layout 1) -------------------------------------------------------------------------
    def to_json_obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [s.to_json_obj() for s in stats]
                for p, stats in self.partition_to_write_stats.items()
            },
            "compacted": bool(self.compacted),
            "extraMetadata": dict(self.extra_metadata),
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            out["partitionToReplaceFileIds"] = {
                p: list(ids) for p, ids in self.partition_to_replace_file_ids.items()
            }
        return out

    def to_json(self) -> bytes:
        """UTF-8 JSON as Java 0.x writes completed commit files (Jackson pretty printer)."""
        return jackson_pretty(self.to_json_obj()).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str, what: str = "<commit metadata>") -> HoodieCommitMetadata:
        """Parse JSON commit metadata; empty content gives empty metadata.

        Raises:
            HoodieCorruptedDataError: invalid JSON or wrong types (names ``what``).
        """
        if isinstance(data, bytes):
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise HoodieCorruptedDataError(
                    f"corrupt commit metadata {what}: not UTF-8"
                ) from None
        else:
            text = data
        if not text.strip():
            return cls()
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise HoodieCorruptedDataError(
                f"corrupt commit metadata {what}: invalid JSON ({e})"
            ) from None
        return cls.from_obj(obj, what)

    @classmethod
    def from_obj(cls, obj: Any, what: str) -> HoodieCommitMetadata:
        """Metadata from a decoded JSON object or Avro record."""
        if not isinstance(obj, dict):
            raise HoodieCorruptedDataError(f"corrupt commit metadata {what}: not an object")
        raw_stats = obj.get("partitionToWriteStats") or {}
        if not isinstance(raw_stats, dict):
            raise HoodieCorruptedDataError(f"corrupt commit metadata {what}: partitionToWriteStats")
        stats: dict[str, list[HoodieWriteStat]] = {}
        for part, lst in raw_stats.items():
            if lst is None:
                lst = []
            if not isinstance(lst, list):
                raise HoodieCorruptedDataError(
                    f"corrupt commit metadata {what}: stats of partition {part!r}"
                )
            stats[str(part)] = [HoodieWriteStat.from_obj(s, what) for s in lst]
        compacted = obj.get("compacted")
        if compacted is not None and not isinstance(compacted, bool):
            raise HoodieCorruptedDataError(f"corrupt commit metadata {what}: compacted")
        extra = obj.get("extraMetadata") or {}
        if not isinstance(extra, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in extra.items()
        ):
            raise HoodieCorruptedDataError(f"corrupt commit metadata {what}: extraMetadata")
        op = obj.get("operationType")
        if op is not None and not isinstance(op, str):
            raise HoodieCorruptedDataError(f"corrupt commit metadata {what}: operationType")
        version = obj.get("version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise HoodieCorruptedDataError(f"corrupt commit metadata {what}: version")
        replace: dict[str, list[str]] | None = None
        if "partitionToReplaceFileIds" in obj:
            raw = obj.get("partitionToReplaceFileIds") or {}
            if not isinstance(raw, dict):
                raise HoodieCorruptedDataError(
                    f"corrupt commit metadata {what}: partitionToReplaceFileIds"
                )
            replace = {}
            for part, ids in raw.items():
                ids = ids or []
                if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                    raise HoodieCorruptedDataError(
                        f"corrupt commit metadata {what}: partitionToReplaceFileIds"
                    )
                replace[str(part)] = list(ids)
        return cls(
            partition_to_write_stats=stats,
            compacted=bool(compacted),
            extra_metadata=dict(extra),
            operation_type=op,
            partition_to_replace_file_ids=replace,
            version=version,
        )

    # -- Avro (layout 2) -------------------------------------------------------------------------
    def to_avro_obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [s.to_avro_obj() for s in stats]
                for p, stats in self.partition_to_write_stats.items()
            },
            "compacted": bool(self.compacted),
            "extraMetadata": dict(self.extra_metadata),
            "version": self.version,
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            out["partitionToReplaceFileIds"] = {
                p: list(ids) for p, ids in self.partition_to_replace_file_ids.items()
            }
        return out

    def to_avro(self, sync: bytes | None = None) -> bytes:
        """An Avro container (codec null, one record) as Java 1.x writes completed instants."""
        schema = REPLACE_COMMIT_METADATA_SCHEMA if self.is_replace else COMMIT_METADATA_SCHEMA
        return write_single_record(schema, self.to_avro_obj(), sync=sync)

    @classmethod
    def from_avro(cls, data: bytes, what: str = "<commit metadata>") -> HoodieCommitMetadata:
        """Parse an Avro container of ``HoodieCommitMetadata`` / ``HoodieReplaceCommitMetadata``."""
        schema, record = read_single_record(data, what)
        name = schema.get("name") if isinstance(schema, dict) else None
        if name not in ("HoodieCommitMetadata", "HoodieReplaceCommitMetadata"):
            raise HoodieCorruptedDataError(
                f"corrupt commit metadata {what}: unexpected Avro record {name!r}"
            )
        meta = cls.from_obj(record, what)
        if name == "HoodieReplaceCommitMetadata" and meta.partition_to_replace_file_ids is None:
            meta.partition_to_replace_file_ids = {}
        return meta

    # -- any encoding ----------------------------------------------------------------------------
    def to_bytes(self, layout_version: int) -> bytes:
        """JSON for timeline layout 1, Avro for layout 2."""
        return self.to_avro() if layout_version >= 2 else self.to_json()

    @classmethod
    def from_bytes(
        cls,
        data: bytes,
        layout_version: int | None = None,
        instant: Instant | str | None = None,
    ) -> HoodieCommitMetadata:
        """Parse an instant file of either encoding.

        Empty content gives empty metadata; Avro containers are decoded as Avro, anything else
        as JSON (layout 1, or a legacy instant in layout 2). Errors name the instant file.

        Args:
            data: the file content.
            layout_version: the timeline layout, used to name the file in errors.
            instant: the instant (or a file name) the content was read from.
        """
        what = _what(instant, layout_version)
        if not data or not data.strip():
            return cls()
        if is_avro_container(data):
            return cls.from_avro(data, what)
        return cls.from_json(data, what)
