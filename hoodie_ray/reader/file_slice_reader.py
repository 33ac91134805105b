"""Reading one file slice: base Parquet merged with its log blocks (merge-on-read view).

The log blocks are filtered by the gates of spec §6.4 (:func:`~hoodie_ray.reader.log_scan.admitted_blocks`),
decoded one at a time and folded into a keyed :class:`~hoodie_ray.reader.merger.LogRecordBuffer`.
The base file is then streamed in record batches (``ParquetFile.iter_batches``) and merged batch
by batch; the log records no base record consumed come last. Memory stays bounded by the log
records plus one base batch, whatever the size of the base file.

Everything :func:`read_file_slice` needs is in two picklable values, a :class:`ReadContext`
(per query) and a :class:`SliceSpec` (per slice), so a Ray task can read one slice.
"""

from __future__ import annotations

import datetime as _dt
import decimal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_ray.config.table_config import MergeMode
from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieError, HoodieUnsupportedError
from hoodie_ray.log_format.blocks import THREADED_DECODE_MIN_BYTES
from hoodie_ray.lru import SizedLru
from hoodie_ray.merge import partial_merge, unavailable_presence
from hoodie_ray.reader.compiled_merger import CompiledLogRecordBuffer, new_log_record_buffer
from hoodie_ray.reader.filters import Filter, apply_filters
from hoodie_ray.reader.log_scan import (
    DATA,
    DELETE,
    CommitGate,
    DeleteRecords,
    InstantRange,
    ScannedBlock,
    admitted_blocks,
    data_of_blocks,
    scan_log_file,
)
from hoodie_ray.reader.merger import (
    COMMIT_TIME,
    OPERATION,
    PARTITION_PATH,
    RECORD_KEY,
    DeleteMarker,
    LogRecordBuffer,
    _bool_np,
    ordering_class,
)
from hoodie_ray.reader.parquet_footer import ReadAt, footer_charge, local_footer, read_footer
from hoodie_ray.reader.schema import reconcile
from hoodie_ray.storage import LocalStorage, Storage, join, open_storage

if TYPE_CHECKING:
    from hoodie_ray.table import HoodieTable

__all__ = ["ReadContext", "SliceSpec", "finish_rows", "iter_file_slice", "read_file_slice"]

DEFAULT_BATCH_ROWS = 131_072
#: Upper bound of a base batch grown to the size of the log state.
MAX_MERGE_BATCH_ROWS = 4 * 1024 * 1024
#: The compiled log buffer can take a Parquet block's merge columns first and decode the
#: others only for its winners, at output, a block at a time; a slice's Parquet blocks are
#: decoded whole (one pass, ~0.15 ms less a block) until it holds this many bytes of them,
#: then in those two passes, which bound a large log's memory.
WHOLE_BLOCKS_MAX_BYTES = 16 << 20
#: Avro data blocks of one writer schema are decoded together up to about this many bytes.
JOINT_DECODE_MAX_BYTES = 16 << 20
#: Parsed footers of base files, by local path, size, modification time and inode (a file
#: rewritten under its name is another key), or by an object store's URI and size, each
#: kept without the bloom filter a Hudi base file's footer holds where that is safe
#: (parquet_footer.read_footer: ~430 KB at Java's defaults, most of a small file's bytes), and
#: sized by what it holds in memory (parquet_footer.footer_charge: ~25 KB for a 2,000-row,
#: 15-column file, 450 KB kept whole). Kept whole, 150 such footers filled the cache, and a
#: scan of 600 files parsed every footer on every read (benchmarks/scan_files.py).
#: 64 MiB of footers; one over 8 MiB is never kept.
PARQUET_FOOTERS = SizedLru(64 << 20, max_entry=8 << 20)

#: An object store's base file of at most this many bytes whose footer is not kept yet is
#: read in one request (a 2,000-row Hudi file is ~0.5 MB, most of it the footer's bloom
#: filter); a larger one, and any read once its footer is kept, reads the columns it needs.
WHOLE_READ_MAX_BYTES = 2 << 20

#: Base-file row groups of at least this many values (rows x columns read) are decoded on
#: Arrow's threads. Below it the hand-offs cost more than they save: a 2,000-row, 10-column
#: file took 0.92 ms of CPU (0.86 wall) with them, 0.51 without; 50,000 rows took 6.9
#: against 6.1 (both wall and CPU); at 200,000 rows they halved the wall time.
THREADED_DECODE_MIN_CELLS = 1 << 20


class BaseFooter:
    """A base file's parsed footer (``metadata``) and the row-group bounds read from it so far.

    :meth:`bounds` reads a column's min/max statistics from the Thrift footer once: each
    access builds Python objects for every column of the row group, ~0.1 ms a file, which a
    filtered read of many small files paid for each file and query (with two reading
    threads, 6 of a 54-ms lookup's milliseconds, holding the GIL)."""

    __slots__ = ("_bounds", "_columns", "_leaves", "_sizes", "metadata")

    def __init__(self, metadata: pq.FileMetaData) -> None:
        self.metadata = metadata
        self._columns: dict[str, int] | None = None
        self._leaves: dict[str, int] | None = None
        self._bounds: dict[tuple[int, str], tuple[Any, Any] | None] = {}
        self._sizes: dict[int, tuple[int, int]] = {}

    def group_size(self, group: int) -> tuple[int, int]:
        """``(rows, uncompressed bytes)`` of row group ``group``, read from the footer once."""
        size = self._sizes.get(group)
        if size is None:
            rg = self.metadata.row_group(group)
            size = self._sizes[group] = (rg.num_rows, rg.total_byte_size)
        return size

    def worth_threads(self, groups: list[int], columns: list[str]) -> bool:
        """Whether decoding ``columns`` (top-level names) of ``groups`` (one call's row
        groups) on Arrow's threads pays for their hand-offs: only for many values
        (:data:`THREADED_DECODE_MIN_CELLS`, rows x the Parquet leaf columns read) or many
        bytes (:data:`~hoodie_ray.log_format.blocks.THREADED_DECODE_MIN_BYTES` of the
        groups' uncompressed bytes, the leaves' share of them: every leaf taken as large
        as the others, which the footer does not tell without a Python object per column
        chunk)."""
        if self._leaves is None:
            leaves: dict[str, int] = {}
            schema = self.metadata.schema
            for i in range(len(schema)):
                top = schema.column(i).path.split(".", 1)[0]
                leaves[top] = leaves.get(top, 0) + 1
            self._leaves = leaves
        read = sum(self._leaves.get(c, 0) for c in columns)
        total = self.metadata.num_columns or 1
        rows = nbytes = 0
        for g in groups:
            r, b = self.group_size(g)
            rows += r
            nbytes += b
        return (
            rows * read >= THREADED_DECODE_MIN_CELLS
            or nbytes * read // total >= THREADED_DECODE_MIN_BYTES
        )

    def bounds(self, group: int, column: str) -> tuple[Any, Any] | None:
        """``(min, max)`` of ``column`` (a top-level name) in row group ``group``, as pyarrow
        gives them; None where the file has no such column or no usable statistics."""
        key = (group, column)
        if key in self._bounds:
            return self._bounds[key]
        if self._columns is None:
            schema = self.metadata.schema
            self._columns = {schema.column(i).path: i for i in range(len(schema))}
        out: tuple[Any, Any] | None = None
        i = self._columns.get(column)
        if i is not None:
            st = self.metadata.row_group(group).column(i).statistics
            if st is not None and st.has_min_max:
                try:
                    out = (st.min, st.max)
                except Exception:  # statistics of types pyarrow cannot convert
                    out = None
                if out is not None and st.physical_type == "FLOAT":
                    # as float32, for Filter.may_match (a column widened to double since)
                    out = (np.float32(out[0]), np.float32(out[1]))
        self._bounds[key] = out  # one assignment: safe beside another reading thread
        return out


@dataclass(frozen=True)
class SliceSpec:
    """One file slice to read: partition path, file id, base instant, base file and log files
    (names relative to the partition directory, log files in merge order), and the bytes of
    those files where the listing gave them (0 when unknown; not part of equality)."""

    partition_path: str
    file_id: str
    base_instant: str | None
    base_file: str | None
    log_files: tuple[str, ...] = ()
    size_bytes: int = field(default=0, compare=False)

    @classmethod
    def of(cls, s: Any) -> SliceSpec:
        """From any object with the ``FileSlice`` attributes."""
        if isinstance(s, SliceSpec):
            return s
        return cls(
            partition_path=s.partition_path or "",
            file_id=s.file_id,
            base_instant=getattr(s, "base_instant", None),
            base_file=s.base_file or None,
            log_files=tuple(s.log_files or ()),
            size_bytes=getattr(s, "base_file_size", 0) + getattr(s, "total_log_size", 0),
        )


@dataclass(frozen=True)
class ReadContext:
    """What a query needs to read any of its slices (picklable; one per query).

    Attributes:
        base_uri: the table's base path.
        storage_options: storage credentials (never printed).
        table_version: 6, 8 or 9.
        populate_meta_fields: false when the table has no meta columns (no merging possible).
        ordering_field: the ordering (precombine) field, or None.
        merge_mode: EVENT_TIME_ORDERING or COMMIT_TIME_ORDERING.
        read_schema: the columns read from files and merged (table types, table order).
        output_columns: the columns returned, in order.
        filters: row filters (AND).
        end_instant: blocks of later instants are skipped (the query instant).
        commit_gate: table version < 8: the per-block commit check.
        instant_range: incremental queries: ``(start, end]`` and the commit-time row filter.
        read_optimized: base files only.
        delete_marker: custom delete marker of data records.
        batch_rows: rows per base-file batch.
        changelog: every record of the range unmerged, each with its ``_hoodie_operation``
            (``incremental_format="changelog"``).
        partial_update: the table's partial updates (a null field keeps the older value:
            :func:`hoodie_ray.merge.partial_merge`).
        arrow_threads: whether Arrow's threads may decode a large base file's columns.
        defer_row_filters: the row filters and the projection left to the caller
            (:func:`finish_rows`; :meth:`ReadPlan.read_all` applies them to several slices'
            rows at once).
    """

    base_uri: str
    table_version: int
    populate_meta_fields: bool
    ordering_field: str | None
    merge_mode: MergeMode
    read_schema: pa.Schema
    output_columns: tuple[str, ...]
    filters: tuple[Filter, ...] = ()
    end_instant: str | None = None
    commit_gate: CommitGate | None = None
    instant_range: InstantRange | None = None
    read_optimized: bool = False
    delete_marker: DeleteMarker = field(default_factory=DeleteMarker)
    batch_rows: int = DEFAULT_BATCH_ROWS
    storage_options: Mapping[str, Any] | None = field(default=None, repr=False)
    changelog: bool = False
    partial_update: bool = False
    unavailable_value: str | None = None
    #: Arrow's threads may decode a large base file's columns (:meth:`BaseFooter.worth_threads`
    #: decides per read); off where slices are read in parallel already
    #: (:meth:`ReadPlan.read_all`)
    arrow_threads: bool = True
    #: The row filters and the projection left to the caller (:func:`finish_rows`), which
    #: applies them to the rows of several slices at once (:meth:`ReadPlan.read_all`)
    defer_row_filters: bool = False

    @classmethod
    def of_table(
        cls,
        table: HoodieTable,
        read_schema: pa.Schema,
        output_columns: tuple[str, ...],
        *,
        filters: tuple[Filter, ...] = (),
        end_instant: str | None = None,
        instant_range: InstantRange | None = None,
        read_optimized: bool = False,
        batch_rows: int | None = None,
        changelog: bool = False,
    ) -> ReadContext:
        """The context of a query of ``table`` (its version, merge settings, delete marker and
        commit gate) reading ``read_schema`` and returning ``output_columns``."""
        cfg = table.table_config
        return cls(
            # the table's
            table_version=cfg.table_version,
            populate_meta_fields=cfg.populate_meta_fields,
            ordering_field=cfg.ordering_field,
            merge_mode=cfg.merge_mode,
            partial_update=cfg.partial_update,
            unavailable_value=cfg.unavailable_value,
            delete_marker=DeleteMarker.from_props(dict(cfg.props)),
            commit_gate=CommitGate.of_table(table),
            base_uri=table.base_uri,
            storage_options=table.storage_options,
            # the query's
            read_schema=read_schema,
            output_columns=output_columns,
            batch_rows=DEFAULT_BATCH_ROWS if batch_rows is None else int(batch_rows),
            filters=filters,
            end_instant=end_instant,
            instant_range=instant_range,
            read_optimized=read_optimized,
            changelog=changelog,
        )

    def storage(self) -> Storage:
        return open_storage(self.base_uri, self.storage_options)

    @property
    def output_schema(self) -> pa.Schema:
        return pa.schema([self.read_schema.field(c) for c in self.output_columns])


def merge_columns(table: HoodieTable, schema: pa.Schema) -> set[str]:
    """The columns of ``schema`` a merge of ``table``'s file slices reads: the record key, the
    ordering field and the delete-marker columns (those the schema has)."""
    cfg = table.table_config
    marker = DeleteMarker.from_props(dict(cfg.props))
    wanted = [RECORD_KEY, cfg.ordering_field, *marker.columns()]
    return {c for c in wanted if c is not None and c in schema.names}


# -- public entry points ------------------------------------------------------------------------


def read_file_slice(
    ctx: ReadContext, slc: SliceSpec | Any, storage: Storage | None = None
) -> pa.Table:
    """The merged records of one file slice as one table (``ctx.output_columns``).

    Example::

        plan = plan_file_slices("/data/trips")
        tables = [read_file_slice(plan.context, s) for s in plan.slices]
    """
    parts = list(iter_file_slice(ctx, slc, storage))
    if not parts:
        return ctx.output_schema.empty_table()
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def finish_rows(ctx: ReadContext, table: pa.Table) -> pa.Table:
    """``table`` (rows of ``ctx.read_schema``) filtered by ``ctx.filters`` and projected to
    ``ctx.output_columns``: the last step of a slice's read."""
    if ctx.filters and table.num_rows:
        table = apply_filters(ctx.filters, table)
    if list(ctx.output_columns) != table.schema.names:
        table = table.select(list(ctx.output_columns))
    return table


def iter_file_slice(
    ctx: ReadContext, slc: SliceSpec | Any, storage: Storage | None = None
) -> Iterator[pa.Table]:
    """The merged records of one file slice, as a stream of tables (bounded memory)."""
    slc = SliceSpec.of(slc)
    storage = storage or ctx.storage()
    reader = _SliceReader(ctx, slc, storage)
    yield from reader.run()


# -- implementation -----------------------------------------------------------------------------


class _SliceReader:
    def __init__(self, ctx: ReadContext, slc: SliceSpec, storage: Storage) -> None:
        self.ctx = ctx
        self.slc = slc
        self.storage = storage
        self.schema = ctx.read_schema
        # Columns decoded from data blocks: the merged ones plus the delete markers.
        self._block_columns = list(
            dict.fromkeys([*ctx.read_schema.names, *ctx.delete_marker.columns()])
        )

    def _rel(self, name: str) -> str:
        return join(self.slc.partition_path, name)

    # -- the pipeline ----------------------------------------------------------------------------
    def run(self) -> Iterator[pa.Table]:
        if self.ctx.changelog:
            yield from self._changes()
            return
        ctx = self.ctx
        buffer: LogRecordBuffer | CompiledLogRecordBuffer | None = None
        use_logs = bool(self.slc.log_files) and not ctx.read_optimized
        if use_logs:
            if not ctx.populate_meta_fields:
                raise HoodieUnsupportedError(
                    f"file group {self.slc.file_id}: the table does not populate meta fields "
                    "(hoodie.populate.meta.fields=false), so its log files cannot be merged"
                )
            blocks = self._admitted_blocks()
            by_presence = any(b.partial for b in blocks if b.kind == DATA)
            if ctx.partial_update or by_presence:
                yield from self._partial(blocks, by_presence)
                return
            buffer = self._scan_logs(blocks)
        if self.slc.base_file:
            # Value filters may skip row groups only when no log record can lose to a base
            # record there (nothing to mark consumed): no logs, or commit-time ordering.
            prune_values = (
                buffer is None
                or buffer.is_empty
                or ctx.merge_mode is MergeMode.COMMIT_TIME_ORDERING
            )
            # Base batches about as long as the log state: each merge step hashes the state
            # once, so this keeps the merge linear; memory stays bounded by the log records.
            rows = ctx.batch_rows
            if buffer is not None and len(buffer) > rows:
                rows = min(len(buffer), MAX_MERGE_BATCH_ROWS)
            for batch in self._base_batches(self._prune_filters(prune_values), rows):
                if ctx.instant_range is not None and ctx.populate_meta_fields:
                    # Incremental: base records outside the range go before the merge, so a
                    # log record in the range is emitted even if it lost to its base record
                    # (hudi-rs 0.5.0's commit-time filter on base files).
                    batch = _filter_commit_time(batch, ctx.instant_range)
                if buffer is not None and not buffer.is_empty:
                    batch = buffer.merge_base(batch)
                out = self._finish(batch)
                if out.num_rows:
                    yield out
        if buffer is not None and not buffer.is_empty:
            for table in buffer.remaining_batches():
                out = self._finish(table)
                if out.num_rows:
                    yield out

    def _changes(self) -> Iterator[pa.Table]:
        """Changelog read: every record of the slice in the range, unmerged, in the order it
        was written (the base file's, then each log block's); a record without an operation
        is ``I`` (Flink's reading of a missing or null one), a delete record ``D`` (a
        delete block's: key, partition and commit time only)."""
        ctx = self.ctx
        if self.slc.base_file:
            for batch in self._base_batches((), ctx.batch_rows):
                if ctx.instant_range is not None and ctx.populate_meta_fields:
                    batch = _filter_commit_time(batch, ctx.instant_range)
                out = self._finish(_with_operations(batch, None))
                if out.num_rows:
                    yield out
        if not self.slc.log_files or ctx.read_optimized:
            return
        for blk in self._admitted_blocks():
            if blk.kind == DATA:
                raw = blk.data(self._block_columns)
                table = _with_operations(reconcile(raw, self.schema), ctx.delete_marker.mask(raw))
            elif blk.kind == DELETE:
                table = self._delete_rows(blk.instant or "", blk.deletes())
            else:
                continue
            out = self._finish(table)
            if out.num_rows:
                yield out

    def _partial(self, blocks: list[ScannedBlock], by_presence: bool) -> Iterator[pa.Table]:
        """A partial-update table's slice, or one with partial log blocks (``by_presence``:
        Spark's MERGE INTO; a field a block's schema lacks keeps its older value, a null it
        carries is a value): the log's versions of each key folded, then met with its base
        record (:func:`hoodie_ray.merge.partial_merge`); base records no log version names go
        out as they are, batch by batch."""
        ctx = self.ctx
        of = ctx.ordering_field
        parts: list[pa.Table] = []
        deleted: list[np.ndarray] = []
        default: list[np.ndarray] = []
        carried: list[set[str] | None] = []  # the columns each part's block has (None: all)
        for blk in blocks:
            if blk.kind == DATA:
                raw = blk.data(self._block_columns)
                parts.append(reconcile(raw, self.schema))
                deleted.append(ctx.delete_marker.mask(raw))
                default.append(np.zeros(raw.num_rows, dtype=bool))
                carried.append(set(raw.column_names) if blk.partial else None)
            elif blk.kind == DELETE:
                recs = blk.deletes()
                rows = self._delete_rows(blk.instant or "", recs)
                fixed = np.zeros(rows.num_rows, dtype=bool)
                if of is not None and of in self.schema.names:
                    ordering, dflt, foreign = delete_ordering_values(
                        recs.ordering_kinds, recs.ordering_values, self.schema.field(of).type
                    )
                    at = self.schema.get_field_index(of)
                    rows = rows.set_column(at, self.schema.field(at), ordering)
                    fixed = np.asarray(dflt | foreign, dtype=bool)
                parts.append(rows)
                deleted.append(np.ones(rows.num_rows, dtype=bool))
                default.append(fixed)
                carried.append(None)
        log = pa.concat_tables(parts) if parts else self.schema.empty_table()
        in_log = log.column(RECORD_KEY).combine_chunks()
        held: list[pa.Table] = []
        if self.slc.base_file:
            for batch in self._base_batches((), ctx.batch_rows):
                if ctx.instant_range is not None:
                    batch = _filter_commit_time(batch, ctx.instant_range)
                named = _bool_np(pc.is_in(batch.column(RECORD_KEY), value_set=in_log))
                if named.any():
                    held.append(batch.filter(pa.array(named)))
                    batch = batch.filter(pa.array(~named))
                out = self._finish(batch)
                if out.num_rows:
                    yield out
        base = pa.concat_tables(held) if held else self.schema.empty_table()
        versions = pa.concat_tables([base, log])
        nb = base.num_rows
        present = None
        if ctx.unavailable_value is not None and not by_presence:
            present = unavailable_presence(versions, ctx.unavailable_value)
        if by_presence:
            present = {
                name: np.concatenate(
                    [
                        np.ones(nb, dtype=bool),
                        *(
                            np.full(p.num_rows, cols is None or name in cols, dtype=bool)
                            for p, cols in zip(parts, carried, strict=True)
                        ),
                    ]
                )
                for name in self.schema.names
            }
        merged, gone = partial_merge(
            versions,
            is_delete=np.concatenate([np.zeros(nb, dtype=bool), *deleted]),
            is_base=np.arange(versions.num_rows) < nb,
            ordering_field=of,
            mode=ctx.merge_mode,
            default_delete=np.concatenate([np.zeros(nb, dtype=bool), *default]),
            present=present,
        )
        out = self._finish(merged.filter(pa.array(~gone)))
        if out.num_rows:
            yield out

    def _delete_rows(self, instant: str, recs: DeleteRecords) -> pa.Table:
        """A delete block's records as rows of the read schema: key, partition, commit time
        and ``D``; nulls elsewhere."""
        n = len(recs.keys)
        given = {
            RECORD_KEY: recs.keys,
            PARTITION_PATH: recs.partition_paths,
            COMMIT_TIME: pa.repeat(pa.scalar(instant, pa.string()), n),
            OPERATION: pa.repeat(pa.scalar("D", pa.string()), n),
        }
        cols = [
            given[f.name].cast(f.type) if f.name in given else pa.nulls(n, f.type)
            for f in self.schema
        ]
        return pa.Table.from_arrays(cols, schema=self.schema)

    def _finish(self, table: pa.Table) -> pa.Table:
        """Row filters, projection (unless the context defers them to its caller)."""
        return table if self.ctx.defer_row_filters else finish_rows(self.ctx, table)

    # -- logs --------------------------------------------------------------------------------------
    def _admitted_blocks(self) -> list[ScannedBlock]:
        """The slice's log blocks the query reads, in order."""
        ctx = self.ctx
        blocks: list[ScannedBlock] = []
        for name in self.slc.log_files:
            rel = self._rel(name)
            try:
                blocks.extend(scan_log_file(self.storage, rel))
            except HoodieError:
                raise
            except Exception as e:  # a malformed file must name itself
                raise HoodieCorruptedDataError(
                    f"cannot read log file {self.storage.uri(rel)}: {type(e).__name__}: {e}"
                ) from e
        return admitted_blocks(
            blocks,
            end_instant=ctx.end_instant,
            commit_gate=ctx.commit_gate,
            instant_range=ctx.instant_range,
        )

    def _scan_logs(self, admitted: list[ScannedBlock]) -> LogRecordBuffer | CompiledLogRecordBuffer:
        ctx = self.ctx
        buffer = new_log_record_buffer(
            self.schema,
            ctx.ordering_field,
            ctx.merge_mode,
            log_bytes=sum(b.size for b in admitted if b.kind == DATA),
        )
        # Blocks that decode column by column give the compiled buffer only the columns the
        # merge needs now, the others when its winners are output (each decoded once).
        head_names = {RECORD_KEY, ctx.ordering_field, *ctx.delete_marker.columns()}
        head = pa.schema([f for f in self.schema if f.name in head_names])
        rest = pa.schema([f for f in self.schema if f.name not in head_names])
        split = isinstance(buffer, CompiledLogRecordBuffer) and len(rest) > 0
        head_columns = [c for c in self._block_columns if c in head_names]
        # Consecutive data blocks are folded together (a buffer folds a block's records in
        # order, a key's versions one after another, so the result is the block-by-block
        # one): a fold's fixed cost is paid once for many small blocks, as a streaming
        # writer's checkpoints leave them (one block per file group and checkpoint).
        run = _DataRun(buffer, ctx.batch_rows, self._merge_failed)
        # Avro blocks of one writer schema wait to be decoded together (data_of_blocks), up
        # to a batch's records or JOINT_DECODE_MAX_BYTES
        joint: list[ScannedBlock] = []
        joint_bytes = joint_records = 0
        whole_bytes = 0  # Parquet blocks the compiled buffer holds whole (WHOLE_BLOCKS_MAX_BYTES)

        def decode_joint() -> None:
            nonlocal joint_bytes, joint_records
            if not joint:
                return
            blocks = list(joint)
            joint.clear()
            joint_bytes = joint_records = 0
            try:
                raws = [data_of_blocks(blocks, self._block_columns)]
            except Exception:
                # decoded alone, the faulty block names itself
                raws = [self._block_data(b, self._block_columns) for b in blocks]
            for raw in raws:
                run.add(reconcile(raw, self.schema), ctx.delete_marker.mask(raw))

        for blk in admitted:
            if blk.kind == DATA and blk.joint is not None:
                if joint and (
                    joint[0].joint != blk.joint
                    or joint_bytes >= JOINT_DECODE_MAX_BYTES
                    or joint_records >= ctx.batch_rows
                ):
                    decode_joint()
                joint.append(blk)
                joint_bytes += blk.size
                joint_records += blk.num_records()
                continue
            decode_joint()
            if (
                blk.kind == DATA
                and split
                and blk.columnar
                and whole_bytes >= WHOLE_BLOCKS_MAX_BYTES
            ):
                raw = self._block_data(blk, head_columns)
                run.add(
                    reconcile(raw, head), ctx.delete_marker.mask(raw), self._rest_loader(blk, rest)
                )
            elif blk.kind == DATA:
                raw = self._block_data(blk, self._block_columns)
                table = reconcile(raw, self.schema)
                if split and blk.columnar:
                    whole_bytes += table.nbytes
                run.add(table, ctx.delete_marker.mask(raw))
            elif blk.kind == DELETE:
                try:
                    deletes = blk.deletes()
                except HoodieError:
                    raise
                except Exception as e:
                    raise self._undecodable(blk, e) from e
                run.flush()
                self._add_deletes(buffer, deletes)
        decode_joint()
        run.flush()
        return buffer

    def _block_data(self, blk: ScannedBlock, columns: list[str]) -> pa.Table:
        """A data block's ``columns`` (as decoded), or an error naming the block."""
        try:
            return blk.data(columns)
        except HoodieError:
            raise
        except Exception as e:
            raise self._undecodable(blk, e) from e

    def _undecodable(self, blk: ScannedBlock, e: Exception) -> HoodieCorruptedDataError:
        return HoodieCorruptedDataError(
            f"cannot decode a {blk.kind} block of instant {blk.instant} in log file "
            f"{self.storage.uri(self._rel(blk.file_name))}: {type(e).__name__}: {e}"
        )

    def _merge_failed(self, e: Exception) -> HoodieCorruptedDataError:
        files = ", ".join(self.storage.uri(self._rel(n)) for n in self.slc.log_files)
        return HoodieCorruptedDataError(
            f"cannot merge the log blocks of file group {self.slc.file_id} ({files}): "
            f"{type(e).__name__}: {e}"
        )

    def _rest_loader(self, blk: ScannedBlock, schema: pa.Schema) -> Callable[[], pa.Table]:
        """Decodes the columns ``schema`` of a data block (reconciled), on call."""

        def load() -> pa.Table:
            try:
                return reconcile(blk.data(schema.names), schema)
            except HoodieError:
                raise
            except Exception as e:
                raise HoodieCorruptedDataError(
                    f"cannot decode a data block of instant {blk.instant} in log file "
                    f"{self.storage.uri(self._rel(blk.file_name))}: {type(e).__name__}: {e}"
                ) from e

        return load

    def _add_deletes(
        self, buffer: LogRecordBuffer | CompiledLogRecordBuffer, recs: DeleteRecords
    ) -> None:
        ordering, default, foreign = None, None, None
        of = buffer.ordering_field
        if of is not None:
            ordering, default, foreign = delete_ordering_values(
                recs.ordering_kinds, recs.ordering_values, self.schema.field(of).type
            )
        else:
            n = len(recs.keys)
            default = np.array([k is None for k in recs.ordering_kinds], dtype=bool)
            foreign = np.zeros(n, dtype=bool)
        buffer.add_delete_block(recs.keys, recs.partition_paths, ordering, default, foreign)

    # -- base file -----------------------------------------------------------------------------
    def _open_parquet(self, rel: str) -> tuple[pq.ParquetFile, BaseFooter]:
        if isinstance(self.storage, LocalStorage):
            path, st = self.storage.local_file(rel)
            if st is None:
                pf = pq.ParquetFile(path, pre_buffer=False)  # its error names the file
                return pf, BaseFooter(pf.metadata)
            key: tuple[Any, ...] = (path, st.st_size, st.st_mtime_ns, st.st_ino)
            footer = PARQUET_FOOTERS.get(key)
            if footer is None:
                footer = self._keep(key, local_footer(path, st.st_size))
            return self._parquet_file(path, key, footer)
        f: Any = self.storage.open_input(rel)  # ArrowStorage's: a pyarrow NativeFile
        # An object store's file by its URI and size (the open's HEAD; pyarrow does not give
        # its ETag or time): a committed base file's name, which carries the instant and the
        # write token, is never reused for other bytes, and a reader opens committed slices
        # only. Two GETs of its footer fewer a read.
        size = f.size()
        key = (self.storage.uri(rel), size)
        footer = PARQUET_FOOTERS.get(key)
        source = f
        if footer is None:
            read_at: ReadAt = f.read_at
            if size <= WHOLE_READ_MAX_BYTES:
                # one GET for the footer and the rows, not three (the footer's end, its
                # start, the columns)
                whole = read_at(size, 0)
                f.close()
                source = pa.BufferReader(whole)

                def read_at(n: int, at: int, whole: bytes = whole) -> bytes:
                    return whole[at : at + n]

            footer = self._keep(key, read_footer(read_at, size))
        return self._parquet_file(source, key, footer)

    @staticmethod
    def _keep(key: tuple[Any, ...], metadata: pq.FileMetaData | None) -> BaseFooter | None:
        if metadata is None:
            return None
        footer = BaseFooter(metadata)
        PARQUET_FOOTERS.put(key, footer, footer_charge(metadata))
        return footer

    def _parquet_file(
        self, source: Any, key: tuple[Any, ...], footer: BaseFooter | None
    ) -> tuple[pq.ParquetFile, BaseFooter]:
        """The base file opened over ``footer`` (None: pyarrow parses the whole footer, kept
        under ``key``)."""
        pf = pq.ParquetFile(
            source,
            metadata=footer.metadata if footer is not None else None,
            pre_buffer=self.storage.coalesce_reads,
        )
        if footer is None:
            footer = BaseFooter(pf.metadata)
            PARQUET_FOOTERS.put(key, footer, footer_charge(pf.metadata))
        return pf, footer

    def _prune_filters(self, with_values: bool) -> tuple[Filter, ...]:
        """Filters whose row-group statistics may skip base row groups."""
        ctx = self.ctx
        out = list(ctx.filters) if with_values else []
        rng = ctx.instant_range
        if rng is not None and rng.completion is None and ctx.populate_meta_fields:
            # v6 incremental: base rows outside the range are dropped before the merge anyway.
            if rng.start is not None:
                out.append(Filter(COMMIT_TIME, ">", pa.scalar(rng.start, pa.string())))
            if rng.end is not None:
                out.append(Filter(COMMIT_TIME, "<=", pa.scalar(rng.end, pa.string())))
        return tuple(out)

    def _base_batches(self, prune_filters: tuple[Filter, ...], rows: int) -> Iterator[pa.Table]:
        assert self.slc.base_file is not None
        rel = self._rel(self.slc.base_file)
        try:
            pf, footer = self._open_parquet(rel)
        except HoodieError:
            raise
        except Exception as e:
            raise HoodieCorruptedDataError(
                f"cannot open base file {self.storage.uri(rel)}: {type(e).__name__}: {e}"
            ) from e
        file_names = set(pf.schema_arrow.names)
        columns = [n for n in self.schema.names if n in file_names]
        groups = list(range(pf.num_row_groups))
        if prune_filters:
            groups = [g for g in groups if _row_group_may_match(footer, g, prune_filters)]
        if not groups:
            return
        try:
            # A few row groups at a time: ``iter_batches`` pre-buffers every row group it is
            # given, so one call over the whole file would hold the file in memory.
            for chunk in _row_group_chunks(footer, groups, rows):
                for rb in pf.iter_batches(
                    batch_size=rows,
                    row_groups=chunk,
                    columns=columns,
                    use_threads=self.ctx.arrow_threads and footer.worth_threads(chunk, columns),
                ):
                    yield reconcile(rb, self.schema)
        except HoodieError:
            raise
        except Exception as e:
            raise HoodieCorruptedDataError(
                f"cannot read base file {self.storage.uri(rel)}: {type(e).__name__}: {e}"
            ) from e


class _DataRun:
    """Consecutive data blocks of a file slice, folded into a log buffer together once they
    hold ``max_rows`` rows or the run ends (a delete block, the last block). A block given
    as its merge columns with a loader of the others (the compiled buffer's two-pass decode)
    is folded alone, so that its other columns are decoded block by block, as the buffer
    drops superseded blocks. ``failed``: the error to raise for a fold that fails."""

    def __init__(
        self,
        buffer: LogRecordBuffer | CompiledLogRecordBuffer,
        max_rows: int,
        failed: Callable[[Exception], Exception],
    ) -> None:
        self.buffer = buffer
        self.max_rows = max_rows
        self.failed = failed
        self._tables: list[pa.Table] = []
        self._deletes: list[np.ndarray] = []
        self._rows = 0

    def add(
        self,
        table: pa.Table,
        is_delete: np.ndarray,
        rest: Callable[[], pa.Table] | None = None,
    ) -> None:
        if rest is not None:
            self.flush()
            self._fold(table, is_delete, rest)
            return
        self._tables.append(table)
        self._deletes.append(is_delete)
        self._rows += table.num_rows
        if self._rows >= self.max_rows:
            self.flush()

    def flush(self) -> None:
        if not self._tables:
            return
        tables, deletes = self._tables, self._deletes
        self._tables, self._deletes, self._rows = [], [], 0
        self._fold(
            tables[0] if len(tables) == 1 else pa.concat_tables(tables),
            deletes[0] if len(deletes) == 1 else np.concatenate(deletes),
            None,
        )

    def _fold(
        self, table: pa.Table, is_delete: np.ndarray, rest: Callable[[], pa.Table] | None
    ) -> None:
        try:
            if rest is None:
                self.buffer.add_data_block(table, is_delete)
            else:
                assert isinstance(self.buffer, CompiledLogRecordBuffer)
                self.buffer.add_data_block(table, is_delete, rest=rest)
        except HoodieError:
            raise
        except Exception as e:
            raise self.failed(e) from e


def _with_operations(table: pa.Table, deleted: np.ndarray | None) -> pa.Table:
    """``table`` with every ``_hoodie_operation`` set: ``D`` for a record marked deleted
    otherwise (``_hoodie_is_deleted``, a custom marker), else ``I`` where it has none."""
    if OPERATION not in table.schema.names:
        return table
    at = table.schema.get_field_index(OPERATION)
    given = table.column(at)
    ops = pc.fill_null(given, "I")
    if deleted is not None and deleted.any():
        ops = pc.if_else(pc.and_(pa.array(deleted), pc.is_null(given)), "D", ops)
    return table.set_column(at, table.schema.field(at), ops)


def _row_group_chunks(footer: BaseFooter, groups: list[int], rows: int) -> Iterator[list[int]]:
    """Consecutive runs of row groups holding about ``rows`` rows (at least one group each)."""
    chunk: list[int] = []
    n = 0
    for g in groups:
        r = footer.group_size(g)[0]
        if chunk and n + r > rows:
            yield chunk
            chunk, n = [], 0
        chunk.append(g)
        n += r
    if chunk:
        yield chunk


def _filter_commit_time(table: pa.Table, rng: InstantRange) -> pa.Table:
    """Rows whose ``_hoodie_commit_time`` lies in the incremental range."""
    if COMMIT_TIME not in table.schema.names:
        return table
    col = table.column(COMMIT_TIME)
    uniq = [v for v in pc.unique(col).to_pylist() if v is not None]
    allowed = rng.allowed(uniq)
    if len(allowed) == len(uniq) and col.null_count == 0:
        return table
    return table.filter(pc.is_in(col, value_set=pa.array(allowed, col.type)))


def _row_group_may_match(footer: BaseFooter, g: int, filters: tuple[Filter, ...]) -> bool:
    """False when a row group's min/max statistics prove no row can satisfy the filters."""
    for f in filters:
        if f.op in ("!=", "NOT IN"):
            continue
        bounds = footer.bounds(g, f.field)
        if bounds is None:
            continue
        lo, hi = bounds
        if isinstance(lo, bytes) and isinstance(f.value, pa.Scalar):
            continue
        if not f.may_match(lo, hi):
            return False
    return True


# -- delete ordering values -----------------------------------------------------------------------

_COMPATIBLE = {
    "int": {"int"},
    "long": {"long"},
    "float": {"float"},
    "double": {"double"},
    "boolean": {"boolean"},
    "string": {"string"},
    "bytes": {"bytes"},
    "date": {"date", "int"},
    "decimal": {"decimal"},
    "time": {"time", "long"},
    "timestamp": {"timestamp", "long"},
}
_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _as_field_value(kind: str, v: Any, fclass: str) -> Any:
    """A delete's ordering value in the Python form pyarrow takes for the field's type."""
    if kind == "decimal" and isinstance(v, (bytes, bytearray)):
        return decimal.Decimal(int.from_bytes(v, "big", signed=True)).scaleb(-15)
    if fclass == "date" and isinstance(v, int):
        return _EPOCH_DATE + _dt.timedelta(days=v)
    if fclass == "timestamp" and isinstance(v, int):
        return _EPOCH + _dt.timedelta(microseconds=v)
    if fclass == "time" and isinstance(v, int):
        return (_dt.datetime(1970, 1, 1) + _dt.timedelta(microseconds=v)).time()
    return v


def delete_ordering_values(
    kinds: list[str | None], values: list[Any], field_type: pa.DataType
) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """Ordering values of delete records as an array of the ordering field's type.

    Returns ``(values, default, foreign)``: a delete whose value is null or ``IntWrapper(0)``
    is *default* (it always wins); one whose class differs from the field's is *foreign*
    (compared as "different classes": the newer wins). Both are null in ``values``.
    """
    n = len(kinds)
    fclass = ordering_class(field_type)
    ok_kinds = _COMPATIBLE.get(fclass, {fclass})
    default = np.zeros(n, dtype=bool)
    foreign = np.zeros(n, dtype=bool)
    same: list[Any] = [None] * n
    for i, (k, v) in enumerate(zip(kinds, values, strict=False)):
        if k is None or v is None or (k == "int" and v == 0):
            default[i] = True
        elif k in ok_kinds:
            same[i] = _as_field_value(k, v, fclass)
        else:
            foreign[i] = True
    if not any(x is not None for x in same):
        return pa.nulls(n, field_type), default, foreign
    try:
        arr = pa.array(same, type=field_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        try:
            arr = pa.array(same).cast(field_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            arr = pa.nulls(n, field_type)
            foreign |= np.array([x is not None for x in same], dtype=bool)
    return arr, default, foreign
