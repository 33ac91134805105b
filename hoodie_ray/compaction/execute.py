"""Executing one compaction operation: a file slice merged into a new base file, streamed."""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_ray.file_group.naming import base_file_name
from hoodie_ray.log_format.blocks import dictionary_columns
from hoodie_ray.meta import FILE_NAME as FILE_NAME_COL
from hoodie_ray.meta import RECORD_KEY
from hoodie_ray.reader.file_slice_reader import ReadContext, SliceSpec, iter_file_slice
from hoodie_ray.storage import join
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.metadata import HoodieWriteStat
from hoodie_ray.timeline.plans import HoodieCompactionOperation
from hoodie_ray.write.base_file import META_FIELDS, constant_strings


@dataclass(frozen=True)
class CompactionTask:
    """Everything one operation needs (picklable, so a Ray task or actor can run it)."""

    context: ReadContext  # the read context, end instant = the compaction instant
    instant: str
    operation: HoodieCompactionOperation
    task_id: int
    avro_schema_json: str
    codec: str = "snappy"


def execute_operation(task: CompactionTask) -> HoodieWriteStat:
    """Merge the slice of ``task.operation`` into ``<fileId>_<token>_<instant>.parquet``.

    The base file is streamed in batches and written with a ``ParquetWriter``, so memory is
    bounded by the slice's log records plus one batch.
    """
    op = task.operation
    ctx = task.context
    storage = ctx.storage()
    part = op.partition_path or ""
    name = base_file_name(op.file_id, f"{task.task_id}-0-0", task.instant)
    rel = join(part, name)
    slc = SliceSpec(
        part, op.file_id, op.base_instant_time, op.data_file_path, tuple(op.delta_file_paths or ())
    )
    schema = pa.schema([ctx.read_schema.field(c) for c in ctx.output_columns])
    md = {b"parquet.avro.schema": task.avro_schema_json.encode(), b"writer.model.name": b"avro"}
    schema = schema.with_metadata(md)
    buf = io.BytesIO()
    rows = 0
    min_key: str | None = None
    max_key: str | None = None
    compression = None if task.codec in ("none", "uncompressed") else task.codec
    w: pq.ParquetWriter | None = None
    try:
        for table in iter_file_slice(ctx, slc, storage):
            if table.num_rows == 0:
                continue
            table = table.select(list(schema.names))
            idx = table.schema.get_field_index(FILE_NAME_COL)
            table = table.set_column(idx, FILE_NAME_COL, constant_strings(name, table.num_rows))
            if table.schema != schema:
                table = table.cast(schema)
            if w is None:
                # Dictionary encoding for the columns whose values repeat, judged on the first
                # batch (the writer fixes it for the file).
                w = pq.ParquetWriter(
                    buf,
                    schema,
                    compression=compression,
                    use_dictionary=dictionary_columns(table),
                )
            w.write_table(table)
            rows += table.num_rows
            mm = pc.min_max(table.column(RECORD_KEY))
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            min_key = lo if min_key is None or (lo is not None and lo < min_key) else min_key
            max_key = hi if max_key is None or (hi is not None and hi > max_key) else max_key
        if w is None:
            w = pq.ParquetWriter(buf, schema, compression=compression, use_dictionary=False)
    finally:
        if w is not None:
            w.close()
    data = buf.getvalue()
    storage.write_bytes(rel, data)
    log_size = sum(
        storage.size(join(part, n))
        for n in op.delta_file_paths or []
        if storage.exists(join(part, n))
    )
    return HoodieWriteStat(
        file_id=op.file_id,
        path=rel,
        prev_commit=op.base_instant_time,
        num_writes=rows,
        num_inserts=0,
        num_update_writes=rows,
        total_write_bytes=len(data),
        partition_path=part,
        file_size_in_bytes=len(data),
        prev_base_file=op.data_file_path,
        total_log_files_compacted=len(op.delta_file_paths or []),
        total_log_size_compacted=log_size,
        total_updated_records_compacted=rows,
    )


def compaction_context(table: HoodieTable, instant: str) -> tuple[ReadContext, str]:
    """The read context of a compaction: all columns, meta included, blocks up to ``instant``."""
    from hoodie_ray.avro.schema import arrow_to_avro_schema, schema_to_json
    from hoodie_ray.reader.query import plan_file_slices

    plan = plan_file_slices(table, "snapshot")
    ctx = plan.context
    meta = [f for f in ctx.read_schema if f.name in META_FIELDS]
    data = [f for f in ctx.read_schema if f.name not in META_FIELDS]
    out_cols = tuple([f.name for f in meta] + [f.name for f in data])
    ctx = dataclasses.replace(ctx, end_instant=instant, output_columns=out_cols, filters=())
    avro = arrow_to_avro_schema(pa.schema(data), table.name, with_meta=True)
    return ctx, schema_to_json(avro)
