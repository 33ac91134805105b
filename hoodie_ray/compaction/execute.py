"""Executing one compaction operation: a file slice merged into a new base file, streamed."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_ray.file_group.naming import base_file_name
from hoodie_ray.index.bloom_filter import BloomFilterSpec, record_key_footer
from hoodie_ray.log_format.blocks import dictionary_columns
from hoodie_ray.meta import COMMIT_SEQNO, META_FIELDS_WITH_OPERATION, RECORD_KEY
from hoodie_ray.meta import FILE_NAME as FILE_NAME_COL
from hoodie_ray.reader.file_slice_reader import ReadContext, SliceSpec, iter_file_slice
from hoodie_ray.reader.schema import reconcile
from hoodie_ray.storage import Storage, join
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.metadata import HoodieWriteStat
from hoodie_ray.timeline.plans import HoodieCompactionOperation
from hoodie_ray.write.base_file import META_FIELDS, constant_strings, read_base_file
from hoodie_ray.write.cdc import CdcSpec, CompactionChanges, cdc_file_name


@dataclass(frozen=True)
class CompactionTask:
    """Everything one operation needs (picklable, so a Ray task or actor can run it).

    ``output_schema``: the base file's columns; ``_hoodie_file_name``, when one of them, is
    written by the compaction and never read (the context leaves it out). None: the
    context's output columns. ``bloom``: the record-key bloom filter of the new base file's
    footer (none when None), built as the rows stream through.
    """

    context: ReadContext  # the read context, end instant = the compaction instant
    instant: str
    operation: HoodieCompactionOperation
    task_id: int
    avro_schema_json: str
    codec: str = "snappy"
    output_schema: pa.Schema | None = None
    bloom: BloomFilterSpec | None = None
    cdc: CdcSpec | None = None


#: Rows of the one ``_hoodie_file_name`` chunk an operation builds; its column in each output
#: table is that chunk repeated (zero copy: the name is the same in every row).
_NAME_CHUNK_ROWS = 1 << 16


def _repeated(unit: pa.Array, n: int) -> pa.ChunkedArray:
    """``n`` rows of the constant array ``unit``, as chunks that all share its buffers."""
    full, rest = divmod(n, len(unit))
    chunks = [unit] * full + ([unit.slice(0, rest)] if rest else [])
    return pa.chunked_array(chunks, unit.type)


def execute_operation(task: CompactionTask) -> HoodieWriteStat:
    """Merge the slice of ``task.operation`` into ``<fileId>_<token>_<instant>.parquet``.

    The slice's base file is read in batches and the merged rows go through a
    ``ParquetWriter`` straight into the new file, so memory is bounded by the slice's log
    records plus one batch (a CDC table's compaction holds the old base file too: the before
    images of its changes).
    """
    op = task.operation
    ctx = task.context
    storage = ctx.storage()
    part = op.partition_path or ""
    token = f"{task.task_id}-0-0"
    name = base_file_name(op.file_id, token, task.instant)
    rel = join(part, name)
    slc = SliceSpec(
        part, op.file_id, op.base_instant_time, op.data_file_path, tuple(op.delta_file_paths or ())
    )
    schema = task.output_schema or ctx.output_schema
    md = {b"parquet.avro.schema": task.avro_schema_json.encode(), b"writer.model.name": b"avro"}
    schema = schema.with_metadata(md)
    compression = None if task.codec in ("none", "uncompressed") else task.codec
    # Streamed into the file (an in-memory copy first costs ~30% more, page faults mostly): a
    # failed run leaves a partial file named by the instant, which the compaction's rollback
    # deletes (never committed, so never read).
    with storage.open_output(rel) as out:
        unit = constant_strings(name, _NAME_CHUNK_ROWS)
        merged = iter_file_slice(ctx, slc, storage)
        keys = _KeyFooter(task.bloom) if RECORD_KEY in schema.names else None
        batches: Iterable[pa.Table] = (_as_written(t, schema, unit) for t in merged if t.num_rows)
        if keys is not None:
            batches = map(keys.observe, batches)
        changes = _changes_of(task, storage, schema)
        if changes is not None:
            batches = map(changes.observe, batches)
        rows = _write_parquet_stream(
            out, schema, batches, compression, keys.footer if keys is not None else None
        )
        size = out.tell()
    log_size = sum(
        storage.size(join(part, n))
        for n in op.delta_file_paths or []
        if storage.exists(join(part, n))
    )
    stat = _compaction_stat(op, rel, rows, size, log_size)
    if changes is not None:
        cdc_rel = join(part, cdc_file_name(op.file_id, task.instant, token))
        payload = changes.block(task.instant)
        storage.write_bytes(cdc_rel, payload)
        stat.cdc_stats = {cdc_rel: len(payload)}
    return stat


def _changes_of(
    task: CompactionTask, storage: Storage, schema: pa.Schema
) -> CompactionChanges | None:
    """The change log of a CDC table's compaction, over the slice's base file as the new
    base file's columns hold it; None when the table keeps none. While the rows stream, only
    the base file's keys and sequence numbers are held (a partial-update table's whole rows:
    a lower log version may fill a stored record's nulls); the before images are read at the
    end, for the records that changed."""
    if task.cdc is None:
        return None
    op = task.operation
    if not op.data_file_path:
        return CompactionChanges(task.cdc, None)
    rel = join(op.partition_path or "", op.data_file_path)

    def whole() -> pa.Table:
        base = read_base_file(storage, rel)
        return base if base.schema == schema else reconcile(base, schema)

    if task.cdc.refilled:
        return CompactionChanges(task.cdc, whole())
    ids = read_base_file(storage, rel, columns=[RECORD_KEY, COMMIT_SEQNO])
    return CompactionChanges(task.cdc, ids, before=whole)


def _as_written(table: pa.Table, schema: pa.Schema, name_unit: pa.Array) -> pa.Table:
    """A merged batch as the new base file holds it: its name (``name_unit``'s value) in
    ``_hoodie_file_name`` when the schema has the column, in the file's schema."""
    name_idx = schema.get_field_index(FILE_NAME_COL)
    if name_idx >= 0:
        file_names = _repeated(name_unit, table.num_rows)
        if FILE_NAME_COL in table.schema.names:
            table = table.drop_columns([FILE_NAME_COL])
        table = table.add_column(name_idx, schema.field(name_idx), file_names)
    return table if table.schema == schema else table.cast(schema)


class _KeyFooter:
    """The record keys of a streamed base file as Java's writer footer holds them: the bloom
    filter (keys added in row order) and the key range."""

    def __init__(self, spec: BloomFilterSpec | None) -> None:
        self.spec = spec
        self.builder = spec.builder() if spec is not None else None
        self.min_key: str | None = None
        self.max_key: str | None = None

    def observe(self, table: pa.Table) -> pa.Table:
        keys = table.column(RECORD_KEY)
        if self.builder is not None:
            self.builder.add(keys)
        mm = pc.min_max(keys)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if lo is not None and (self.min_key is None or lo < self.min_key):
            self.min_key = lo
        if hi is not None and (self.max_key is None or hi > self.max_key):
            self.max_key = hi
        return table

    def footer(self) -> dict[bytes, bytes]:
        bloom = self.builder.build() if self.builder is not None else None
        return record_key_footer(
            None, self.spec, bloom=bloom, min_key=self.min_key, max_key=self.max_key
        )


def _write_parquet_stream(
    out: IO[bytes],
    schema: pa.Schema,
    batches: Iterable[pa.Table],
    compression: str | None,
    footer: Callable[[], dict[bytes, bytes]] | None = None,
) -> int:
    """Write ``batches`` into one Parquet file on ``out`` (an empty file when there are
    none); the rows written. ``footer``: key-value metadata added once every row is written."""
    rows = 0
    w: pq.ParquetWriter | None = None
    try:
        for table in batches:
            if w is None:
                # Dictionary encoding for the columns whose values repeat, judged on the
                # first batch (the writer fixes it for the file).
                w = pq.ParquetWriter(
                    out, schema, compression=compression, use_dictionary=dictionary_columns(table)
                )
            w.write_table(table)
            rows += table.num_rows
        if w is None:
            w = pq.ParquetWriter(out, schema, compression=compression, use_dictionary=False)
        if footer is not None:
            extra = footer()
            if extra:
                w.add_key_value_metadata(extra)
    finally:
        if w is not None:
            w.close()
    return rows


def _compaction_stat(
    op: HoodieCompactionOperation, rel: str, rows: int, size: int, log_size: int
) -> HoodieWriteStat:
    """The write stat of a compacted file slice: every row counts as an updated record."""
    return HoodieWriteStat(
        file_id=op.file_id,
        path=rel,
        prev_commit=op.base_instant_time,
        num_writes=rows,
        num_inserts=0,
        num_update_writes=rows,
        total_write_bytes=size,
        partition_path=op.partition_path or "",
        file_size_in_bytes=size,
        prev_base_file=op.data_file_path,
        total_log_files_compacted=len(op.delta_file_paths or []),
        total_log_size_compacted=log_size,
        total_updated_records_compacted=rows,
    )


def compaction_context(table: HoodieTable, instant: str) -> tuple[ReadContext, str, pa.Schema]:
    """The read context of a compaction (all columns but ``_hoodie_file_name``, which the
    compaction rewrites, blocks up to ``instant``), the Avro schema JSON of the base file and
    its Arrow schema (meta columns first)."""
    from hoodie_ray.avro.schema import arrow_to_avro_schema, schema_to_json
    from hoodie_ray.reader.query import plan_file_slices

    plan = plan_file_slices(table, "snapshot")
    ctx = plan.context
    meta = [f for f in ctx.read_schema if f.name in META_FIELDS]
    data = [f for f in ctx.read_schema if f.name not in META_FIELDS]
    output = pa.schema(meta + data)
    read = pa.schema([f for f in ctx.read_schema if f.name != FILE_NAME_COL])
    ctx = dataclasses.replace(
        ctx,
        read_schema=read,
        end_instant=instant,
        output_columns=tuple(n for n in output.names if n != FILE_NAME_COL),
        filters=(),
    )
    avro = arrow_to_avro_schema(pa.schema(data), table.name, with_meta=True)
    return ctx, schema_to_json(avro), output


def compaction_cdc(table: HoodieTable, output_schema: pa.Schema, avro_json: str) -> CdcSpec | None:
    """What a compaction of ``table`` logs of its changes (``hoodie.table.cdc.enabled``), for
    base files of ``output_schema`` / ``avro_json`` (:func:`compaction_context`); None when
    the table keeps no CDC files."""
    cfg = table.table_config
    if not cfg.cdc_enabled:
        return None
    data = pa.schema([f for f in output_schema if f.name not in META_FIELDS_WITH_OPERATION])
    return CdcSpec(
        cfg.cdc_logging_mode, data, json.loads(avro_json), cfg.table_version, cfg.partial_update
    )
