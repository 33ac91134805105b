"""The CDC log files of a copy-on-write merge (Java ``HoodieCDCLogger``), for tables with
``hoodie.table.cdc.enabled``.

A merge that rewrites a file group's base file writes the changes it made beside it, in a log
file of the new slice: ``.<fileId>_<instant>.log.1_<writeToken>.cdc`` (the ``.cdc`` suffix
glued to the write token, ``HoodieCDCUtils.CDC_LOGFILE_SUFFIX``), one CDC data block (type 6,
Avro content, headers INSTANT_TIME and SCHEMA). Its records follow the table's supplemental
logging mode (``HoodieCDCUtils.schemaBySupplementalLoggingMode``):

* ``OP_KEY_ONLY``: record ``Record``, fields ``op``, ``record_key`` (``["string","null"]``);
* ``DATA_BEFORE``: record ``CDC`` (the table schema's namespace), ``op``, ``record_key``,
  ``before`` (``["null","string"]`` / ``["null", <table record>]``, default null);
* ``DATA_BEFORE_AFTER``: record ``CDC``: ``op``, ``ts_ms`` (the instant time), ``before``,
  ``after``.

The images are the table's records without meta fields; ``op`` is ``i``, ``u`` or ``d``. The
write stat of the base file names the file with its size (``cdcStats``). As in Java, creating
a file group writes none (readers infer its inserts from the base file). Merge-on-read writes
keep no CDC files (readers infer the changes from the log blocks); their compaction writes one
per compacted file group (:class:`CompactionChanges`, Hudi 1.1's
``FileGroupReaderBasedMergeHandle``), which Flink's CDC read consumes
(``read.cdc.from.changelog``) and Spark's skips.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.avro.schema import schema_to_json
from hoodie_ray.file_group.naming import log_file_name
from hoodie_ray.index import group_keys
from hoodie_ray.log_format import CDCDataBlock, HeaderMetadataType, serialize_block
from hoodie_ray.meta import META_FIELDS_WITH_OPERATION
from hoodie_ray.reader.cdc import change_rows, pair_changes, row_ids, values_differ
from hoodie_ray.write.context import WriteContext

__all__ = [
    "CDC_SUFFIX",
    "CdcSpec",
    "CompactionChanges",
    "cdc_avro_schema",
    "cdc_block",
    "cdc_file_name",
    "cdc_rows",
]

#: ``HoodieCDCUtils.CDC_LOGFILE_SUFFIX``.
CDC_SUFFIX = ".cdc"


def cdc_file_name(file_id: str, instant: str, write_token: str) -> str:
    """The CDC log file of ``instant`` in file group ``file_id`` (log version 1)."""
    return log_file_name(file_id, instant, 1, write_token) + CDC_SUFFIX


def _nullable(t: Any) -> list[Any]:
    return ["null", t]


def cdc_avro_schema(table_avro: dict[str, Any], mode: str) -> dict[str, Any]:
    """The Avro schema of the CDC records of a table whose record schema is ``table_avro``
    (meta fields included or not), for supplemental logging ``mode``."""
    if mode == "OP_KEY_ONLY":
        return {
            "type": "record",
            "name": "Record",
            "fields": [
                {"name": "op", "type": ["string", "null"]},
                {"name": "record_key", "type": ["string", "null"]},
            ],
        }
    image = copy.deepcopy(table_avro)
    image["fields"] = [f for f in image["fields"] if f["name"] not in META_FIELDS_WITH_OPERATION]
    namespace = image.get("namespace")
    full_name = f"{namespace}.{image['name']}" if namespace else image["name"]
    fields: list[dict[str, Any]] = [{"name": "op", "type": _nullable("string"), "default": None}]
    if mode == "DATA_BEFORE":
        fields.append({"name": "record_key", "type": _nullable("string"), "default": None})
        fields.append({"name": "before", "type": _nullable(image), "default": None})
    else:
        fields.append({"name": "ts_ms", "type": _nullable("string"), "default": None})
        fields.append({"name": "before", "type": _nullable(image), "default": None})
        fields.append({"name": "after", "type": _nullable(full_name), "default": None})
    out: dict[str, Any] = {"type": "record", "name": "CDC", "doc": "", "fields": fields}
    if namespace:
        out["namespace"] = namespace
    return out


@dataclass(frozen=True)
class CdcSpec:
    """What a CDC log file of a table is made of (picklable: compaction tasks carry it).

    ``data_schema``: the table's data columns (the images); ``avro_schema``: its record schema
    (meta fields included or not); ``mode``: the supplemental logging mode; ``refilled``: a
    partial-update table, where a record may change values and keep its sequence number.
    """

    mode: str
    data_schema: pa.Schema
    avro_schema: dict[str, Any]
    table_version: int
    refilled: bool = False

    @classmethod
    def of(cls, ctx: WriteContext) -> CdcSpec:
        cfg = ctx.table_config
        return cls(
            cfg.cdc_logging_mode,
            ctx.data_schema,
            ctx.avro_schema,
            ctx.table_version,
            cfg.partial_update,
        )


def cdc_rows(
    spec: CdcSpec, instant: str, before: pa.Table | None, after: pa.Table | None
) -> pa.Table:
    """The CDC records of one merge of a file group (``before`` / ``after``: its records,
    meta columns included), in the columns of the table's logging mode."""
    image = pa.struct(list(spec.data_schema))
    rows = change_rows(instant, before, after, image)
    return _in_mode(spec, rows)


def _in_mode(spec: CdcSpec, rows: pa.Table) -> pa.Table:
    if spec.mode == "OP_KEY_ONLY":
        return rows.select(["op", "record_key"])
    if spec.mode == "DATA_BEFORE":
        return rows.select(["op", "record_key", "before"])
    return rows.select(["op", "ts_ms", "before", "after"])


def cdc_block(spec: CdcSpec, instant: str, rows: pa.Table) -> bytes:
    """One CDC data block of ``rows`` (:func:`cdc_rows`), as a log file holds it."""
    schema = cdc_avro_schema(spec.avro_schema, spec.mode)
    header = {
        HeaderMetadataType.INSTANT_TIME: instant,
        HeaderMetadataType.SCHEMA: schema_to_json(schema),
    }
    return serialize_block(CDCDataBlock(header, rows), table_version=spec.table_version)


class CompactionChanges:
    """The changes a merge-on-read compaction makes to one file group, gathered as its merged
    rows stream into the new base file (:meth:`observe`), then one CDC block (:meth:`block`).

    Hudi 1.1's ``FileGroupReaderBasedMergeHandle`` logs through ``HoodieCDCLogger`` what its
    ``UpdateProcessor`` callbacks see: a base record a log record replaced is ``u`` (before: the
    base record, after: the compacted one), or ``d`` where the merge deleted it; a key only the
    logs hold is ``i`` (a log-only delete logs nothing); a base record the logs left as it was
    (none for its key, or one that lost on ordering) is not logged. ``ts_ms`` is the compaction
    instant. Here a record is told apart by its commit sequence number, as the CDC reader tells
    them (:func:`hoodie_ray.reader.cdc.row_ids`): a compacted record whose number the base file
    does not hold came from the logs. One row a key (Java's logger keeps a map by record
    key). Memory: the base file's keys and numbers and the rows the logs changed while the
    rows stream, then the base file's records for the before images (on a partial-update
    table its records throughout: a lower log version may fill a stored record's nulls).
    """

    def __init__(
        self,
        spec: CdcSpec,
        base: pa.Table | None,
        before: Callable[[], pa.Table] | None = None,
    ) -> None:
        """``base``: the old base file's records, or only its keys and sequence numbers with
        ``before`` to read its whole records (row for row) once the changes are known."""
        self.spec = spec
        self.base = base
        self._before = before
        self._ids = row_ids(base) if base is not None else pa.array([], pa.string())
        self._seen = np.zeros(len(self._ids), dtype=bool)
        self._changed: list[pa.Table] = []

    def observe(self, table: pa.Table) -> pa.Table:
        """Note one batch of compacted rows (returned as given)."""
        if not table.num_rows:
            return table
        at = pc.index_in(row_ids(table), value_set=self._ids)
        kept = pc.is_valid(at).to_numpy(zero_copy_only=False)
        found = at.drop_null().to_numpy(zero_copy_only=False)
        self._seen[found] = True
        changed = ~kept
        if self.spec.refilled and self.base is not None and found.size:
            old = self.base.take(pa.array(found))
            differ = values_differ(table.filter(pa.array(kept)), old, self.spec.data_schema.names)
            changed[np.flatnonzero(kept)[differ]] = True
            self._seen[found[differ]] = False  # its before image goes with the change
        if changed.any():
            self._changed.append(table.filter(pa.array(changed)))
        return table

    def rows(self, instant: str) -> pa.Table:
        """The CDC records of the compaction ``instant``, in the table's logging mode."""
        written = pa.concat_tables(self._changed) if self._changed else None
        gone = None  # replaced by a log record (an update) or deleted
        if self.base is not None and not self._seen.all():
            base = self._before() if self._before is not None else self.base
            gone = base.filter(pa.array(~self._seen))
        image = pa.struct(list(self.spec.data_schema))
        rows = pair_changes(instant, written, gone, image)
        if rows.num_rows > 1:
            # one row a key, as Java's logger keys its map by record key (a base file holding
            # a key twice pairs one copy as the update and leaves the other a delete)
            gid, groups = group_keys(rows.column("record_key"))
            if groups < rows.num_rows:
                _, first = np.unique(gid, return_index=True)
                rows = rows.take(pa.array(np.sort(first)))
        return _in_mode(self.spec, rows)

    def block(self, instant: str) -> bytes:
        """The CDC log block of the compaction ``instant`` (written even when it holds no
        change: ``HoodieCDCLogger.close`` flushes whatever it has)."""
        return cdc_block(self.spec, instant, self.rows(instant))
