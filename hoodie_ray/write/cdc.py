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
a file group writes none (readers infer its inserts from the base file), and neither does a
merge that left the group empty. Merge-on-read writes keep no CDC files (readers infer the
changes from the log blocks), and compaction writes none here (Spark's CDC query skips
compaction commits; Hudi 1.1's file-group-reader compaction would write them).
"""

from __future__ import annotations

import copy
from typing import Any

import pyarrow as pa

from hoodie_ray.avro.schema import schema_to_json
from hoodie_ray.file_group.naming import log_file_name
from hoodie_ray.log_format import CDCDataBlock, HeaderMetadataType, serialize_block
from hoodie_ray.meta import META_FIELDS_WITH_OPERATION
from hoodie_ray.reader.cdc import change_rows
from hoodie_ray.write.context import WriteContext

__all__ = ["CDC_SUFFIX", "cdc_avro_schema", "cdc_block", "cdc_file_name", "cdc_rows"]

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


def cdc_rows(
    ctx: WriteContext, instant: str, before: pa.Table | None, after: pa.Table | None
) -> pa.Table:
    """The CDC records of one merge of a file group (``before`` / ``after``: its records,
    meta columns included), in the columns of the table's logging mode."""
    image = pa.struct(list(ctx.data_schema))
    rows = change_rows(instant, before, after, image)
    mode = ctx.table_config.cdc_logging_mode
    if mode == "OP_KEY_ONLY":
        return rows.select(["op", "record_key"])
    if mode == "DATA_BEFORE":
        return rows.select(["op", "record_key", "before"])
    return rows.select(["op", "ts_ms", "before", "after"])


def cdc_block(ctx: WriteContext, instant: str, rows: pa.Table) -> bytes:
    """One CDC data block of ``rows`` (:func:`cdc_rows`), as a log file holds it."""
    schema = cdc_avro_schema(ctx.avro_schema, ctx.table_config.cdc_logging_mode)
    header = {
        HeaderMetadataType.INSTANT_TIME: instant,
        HeaderMetadataType.SCHEMA: schema_to_json(schema),
    }
    return serialize_block(CDCDataBlock(header, rows), table_version=ctx.table_version)
