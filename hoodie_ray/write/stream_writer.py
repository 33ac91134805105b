"""The writer of one write task (Flink StreamWriteFunction + the write handles).

It buffers tagged rows per file group, flushes by the policy of :mod:`hoodie_ray.write.buffer`,
and writes through three handles:

* create: the base file of a new file group (``<fileId>_<token>_<instant>.parquet``);
* append (MERGE_ON_READ): a data block (and a delete block) appended to the file group's current
  log file, rolling to the next log version past ``hoodie.logfile.max.size``;
* merge (COPY_ON_WRITE): the base file rewritten with the updates.

Every file created or appended gets a marker under ``.hoodie/.temp/<instant>/`` first, so a
failed instant can always be rolled back. Write statuses (:class:`HoodieWriteStat`) are
collected per file and handed to the coordinator at the checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.exceptions import HoodieCommitConflictError, HoodieWriteError
from hoodie_ray.file_group.naming import (
    LogFileName,
    base_file_name,
    log_file_name,
    parse_log_file_name,
)
from hoodie_ray.file_group.view import FileSlice
from hoodie_ray.index import group_keys
from hoodie_ray.index.bloom_filter import BloomFilterSpec
from hoodie_ray.log_format.writer import ends_on_block
from hoodie_ray.merge import apply_updates, key_positions, partial_merge, unavailable_presence
from hoodie_ray.meta import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    META_FIELDS,
    META_PREFIX,
    OPERATION,
    RECORD_KEY,
)
from hoodie_ray.metadata.layout import RECORD_INDEX, completed_partitions
from hoodie_ray.reader.cdc import values_differ
from hoodie_ray.reader.schema import reconcile
from hoodie_ray.storage import Payload, join, payload_pieces, payload_size
from hoodie_ray.timeline.metadata import HoodieWriteStat
from hoodie_ray.write import cdc, logs
from hoodie_ray.write.base_file import (
    constant_strings,
    read_base_file,
    with_meta_columns,
    write_base_file,
)
from hoodie_ray.write.bucket_assigner import IS_NEW
from hoodie_ray.write.buffer import Bucket, BucketId, WriteBuffer
from hoodie_ray.write.context import WriteContext
from hoodie_ray.write.records import (
    ABSENT_COLUMNS,
    IS_DELETED,
    Presence,
    column_sets,
    folded_presence,
    partial_presence,
    precombine,
    precombine_reset,
)

TEMP_DIR = ".hoodie/.temp"


def _log_name(name: str) -> LogFileName:
    """The parts of a log file name this writer listed or made (always a valid name)."""
    parsed = parse_log_file_name(name)
    if parsed is None:
        raise HoodieWriteError(f"not a log file name: {name!r}")
    return parsed


def marker_path(instant: str, partition: str, file_name: str, io_type: str) -> str:
    """Java's direct marker: ``.hoodie/.temp/<instant>/<partition>/<file>.marker.<IOType>``."""
    return join(TEMP_DIR, instant, partition, f"{file_name}.marker.{io_type}")


@dataclass
class _GroupState:
    """What the writer knows of one file group during the current instant."""

    base_instant: str | None
    base_file: str | None
    log_files: list[str] = field(default_factory=list)
    created_now: bool = False  # base file written by this instant
    # the base instant the group had before this instant (None: new), its stats' prevCommit
    prev_instant: str | None = None
    # CDC tables: the base file the instant's first merge read (None: a new group), and the
    # CDC log file its merges wrote last (rewritten whole by each merge of the instant)
    cdc_before: str | None = None
    cdc_file: str | None = None


class StreamWriteFunction:
    """Buffers and writes the rows of one write task."""

    def __init__(self, ctx: WriteContext, task_id: int, attempt: int = 0) -> None:
        self.ctx = ctx
        self.task_id = task_id
        self.attempt = attempt
        cfg = ctx.write_config
        self.buffer = WriteBuffer(cfg.write_batch_size, cfg.write_task_max_size)
        self.instant: str | None = None
        self._groups: dict[BucketId, _GroupState] = {}
        self._slices: dict[BucketId, FileSlice] = {}
        self._frozen: set[tuple[str, str]] = set()
        self._partitions: set[str] = set()  # partitions this instant made sure of (metadata)
        self._stats: dict[str, HoodieWriteStat] = {}
        self._seq = 0
        self._flushes = 0
        self.records_in = 0

    # -- instant lifecycle ---------------------------------------------------------------------
    def start_instant(
        self,
        instant: str,
        slices: dict[BucketId, FileSlice],
        frozen_logs: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        """Begin writing ``instant`` over the committed file slices given.

        ``frozen_logs``: ``(partition, log file)`` covered by pending compaction plans; the
        writer rolls a new log version instead of appending to them.
        """
        if self.buffer.buckets:
            raise HoodieWriteError("writer has buffered rows of a previous instant")
        self.instant = instant
        self._slices = slices
        self._frozen = set(frozen_logs)
        self._partitions = set()
        self._groups = {}
        self._stats = {}
        self._seq = 0

    @property
    def write_token(self) -> str:
        """``task-stage-attempt``, Hudi's write token. Under optimistic concurrency the middle
        part is taken from this writer's instant, so two writers of a version-6 file slice
        (whose log files are named by the slice, not the writer) never pick one file name."""
        if self.ctx.write_config.occ and self.instant is not None:
            return f"{self.task_id}-{int(self.instant) % 1_000_000_000}-{self.attempt}"
        return f"{self.task_id}-{self._flushes % 1000}-{self.attempt}"

    def set_context(self, ctx: WriteContext) -> None:
        """Adopt the write context of an evolved table schema (columns added, types widened):
        rows buffered already, and rows of the old schema still arriving (a replay), are
        written in it, nulls for the new columns."""
        old, self.ctx = self.ctx, ctx
        if old.data_schema.equals(ctx.data_schema):
            return
        for bucket in self.buffer.buckets.values():
            bucket.tables = [self._conform(t) for t in bucket.tables]

    def _conform(self, tagged: pa.Table) -> pa.Table:
        """``tagged`` with its data columns in the context's data schema (routing and tag
        columns kept after them)."""
        schema = self.ctx.data_schema
        names = tagged.schema.names
        if all(f.name in names and tagged.schema.field(f.name).type == f.type for f in schema):
            return tagged
        extra = [n for n in names if not n.startswith(META_PREFIX) and n not in schema.names]
        if extra:
            raise HoodieWriteError(
                f"rows with columns {extra} reached a writer whose table schema lacks them "
                "(the schema change was not handed to the writers)"
            )
        data = reconcile(tagged.select([n for n in names if n in schema.names]), schema)
        rest = [n for n in names if n.startswith(META_PREFIX)]
        tags = [tagged.column(n) for n in rest]
        added = [f.name for f in schema if f.name not in names]
        if added and ABSENT_COLUMNS in rest:
            # partial updates: rows from before a column was added do not carry it
            i = rest.index(ABSENT_COLUMNS)
            tags[i] = pc.binary_join_element_wise(tags[i], "\x00".join(added), "\x00")
        return pa.Table.from_arrays([*data.columns, *tags], names=[*schema.names, *rest])

    def write(self, tagged: pa.Table) -> None:
        """Buffer tagged rows; flush the buckets the policy selects."""
        if self.instant is None:
            raise HoodieWriteError("write before start_instant")
        tagged = self._conform(tagged)
        self.records_in += tagged.num_rows
        for bid in self.buffer.add(tagged):
            bucket = self.buffer.take(bid)
            if bucket is not None:
                self._flush(bucket)

    def flush_all(self) -> list[HoodieWriteStat]:
        """Flush every bucket and return the write statuses of this instant (then reset)."""
        for bid in self.buffer.all_buckets():
            bucket = self.buffer.take(bid)
            if bucket is not None:
                self._flush(bucket)
        stats = list(self._stats.values())
        self._stats = {}
        self.instant = None
        return stats

    def abort(self) -> None:
        """Drop buffered rows (the instant will be rolled back)."""
        self.buffer = WriteBuffer(self.buffer.batch_size, self.buffer.max_size)
        self._stats = {}
        self.instant = None

    @property
    def buffered_bytes(self) -> int:
        return self.buffer.total_bytes

    # -- flushing ------------------------------------------------------------------------------
    def _group(self, bid: BucketId) -> _GroupState:
        g = self._groups.get(bid)
        if g is None:
            s = self._slices.get(bid)
            g = _GroupState(
                base_instant=s.base_instant if s else None,
                base_file=s.base_file if s else None,
                log_files=list(s.log_files) if s else [],
                prev_instant=s.base_instant if s else None,
            )
            self._groups[bid] = g
        return g

    def _flush(self, bucket: Bucket) -> None:
        assert self.instant is not None
        self._flushes += 1
        rows = bucket.drain()
        bid = (bucket.partition_path, bucket.file_id)
        g = self._group(bid)
        if self.ctx.changelog:
            self._append_changes(bid, g, rows)
            return
        present = partial_presence(rows, self.ctx.data_schema.names)
        if not self.ctx.write_config.inserts_only:
            rows, present = self._precombine(rows, present)
        if g.base_instant is None and not g.log_files and not self._logs_only:
            self._create(bid, g, rows)  # new keys only: a column a row lacks is null
        elif self.ctx.is_mor:
            self._append(bid, g, rows, present)
        else:
            self._merge(bid, g, rows, present)

    def _precombine(
        self, rows: pa.Table, present: Presence | None
    ) -> tuple[pa.Table, Presence | None]:
        """One row per key (a delete, or the record the key's rows fold into): by the merge
        rule, or on a partial-update table by :func:`hoodie_ray.merge.partial_merge` (a null
        field takes the value a row before had). Rows of partial updates (``present``: the
        columns each row has) fold the same way, a column a row lacks taking the value a row
        before had; a folded row has the columns its key's rows the fold counted had."""
        if present is None and not self.ctx.table_config.partial_update:
            return precombine(rows, self.ctx.ordering_field), None
        counted = np.zeros(rows.num_rows, dtype=bool)
        folded, _ = partial_merge(
            rows,
            is_delete=rows.column(IS_DELETED).to_numpy(zero_copy_only=False),
            is_base=np.zeros(rows.num_rows, dtype=bool),
            ordering_field=self.ctx.ordering_field,
            mode=self.ctx.merge_mode,
            present=present if present is not None else self._present(rows),
            counted=counted,
        )
        if present is None or folded.num_rows == rows.num_rows:
            return folded, present
        return folded, folded_presence(rows, present, folded, counted)

    def _present(self, versions: pa.Table) -> dict[str, np.ndarray] | None:
        """``FILL_UNAVAILABLE``: which versions hold each column (the marker value does not);
        None in the other partial update modes (a null does not)."""
        marker = self.ctx.table_config.unavailable_value
        return unavailable_presence(versions, marker) if marker is not None else None

    @property
    def _logs_only(self) -> bool:
        """Non-blocking concurrency control on a MOR table: a new file group starts with a
        log file, never a base file (Java's NBCC writers tag new buckets as updates), so two
        writers creating one bucket's group at once leave two log files in one slice, not two
        base files of which one hides the other."""
        return self.ctx.is_mor and self.ctx.write_config.nbcc

    def _next_seq(self, n: int) -> int:
        start = self._seq
        self._seq += n
        return start

    def _marker(self, partition: str, file_name: str, io_type: str) -> None:
        """Create the marker of a file this instant is about to create or append to.

        Raises:
            HoodieCommitConflictError: the instant's marker folder vanished meanwhile: another
                writer took the lock over and rolled the instant back.
        """
        assert self.instant is not None
        storage = self.ctx.storage
        rel = marker_path(self.instant, partition, file_name, io_type)
        try:
            storage.create_new(rel, b"")
        except FileNotFoundError as e:
            # create_new made the folders itself just before: a file or folder missing now was
            # deleted meanwhile, and only a rollback of this instant deletes its markers.
            raise HoodieCommitConflictError(
                f"the markers of instant {self.instant} were removed while {storage.uri(rel)} "
                f"was being created: another writer took over the lock of {storage.base_uri} "
                "and rolled the instant back"
            ) from e

    def _stat(self, key: str, **init: Any) -> HoodieWriteStat:
        st = self._stats.get(key)
        if st is None:
            st = self._stats[key] = HoodieWriteStat(**init)
        return st

    def _create(
        self, bid: BucketId, g: _GroupState, rows: pa.Table, ops: pa.Array | None = None
    ) -> None:
        """A new file group: its base file holds the live rows (deletes of new keys vanish);
        ``ops``: their ``_hoodie_operation`` (changelog mode)."""
        assert self.instant is not None
        part, fid = bid
        live = rows.filter(pc.invert(rows.column(IS_DELETED))) if rows.num_rows else rows
        if ops is not None and live.num_rows != rows.num_rows:
            ops = ops.filter(pc.invert(rows.column(IS_DELETED).combine_chunks()))
        name = base_file_name(fid, self.write_token, self.instant)
        rel = join(part, name)
        stored = with_meta_columns(
            live,
            self.ctx.data_schema,
            instant=self.instant,
            task_id=self.task_id,
            file_name=name,
            seq_start=self._next_seq(live.num_rows),
            operation=ops,
        )
        self._ensure_partition(part)
        self._marker(part, name, "CREATE")
        size = self._write_base(rel, stored)
        g.base_instant, g.base_file, g.log_files, g.created_now = self.instant, name, [], True
        st = self._stat(rel, file_id=fid, path=rel, partition_path=part, prev_commit="null")
        if self._keeps_record_index:
            _note_keys(st, live.column(RECORD_KEY), None)
        st.num_writes += live.num_rows
        st.num_inserts += live.num_rows
        st.total_write_bytes = size
        st.file_size_in_bytes = size

    def _append(
        self, bid: BucketId, g: _GroupState, rows: pa.Table, present: Presence | None = None
    ) -> None:
        """MOR update path: blocks appended to the group's current log file. Partial updates
        (``present``): a data block per set of columns the rows have, holding those (Java's
        append handle with ``hoodie.write.partial.update.schema``: header ``IS_PARTIAL``)."""
        assert self.instant is not None
        fid = bid[1]
        deleted = rows.column(IS_DELETED).to_numpy(zero_copy_only=False)
        upserts = rows.filter(pa.array(~deleted)) if deleted.any() else rows
        deletes = rows.filter(pa.array(deleted)) if deleted.any() else None
        blocks: list[Payload] = []
        folded = not self.ctx.write_config.inserts_only  # _flush precombined the rows
        if folded and deletes is not None and deletes.num_rows and upserts.num_rows:
            # a default-ordered delete the precombine kept before a later version of its key
            # goes first, so a reader folds the two in that order (hoodie_ray.merge)
            up_keys = upserts.column(RECORD_KEY).combine_chunks()
            first = pc.is_in(deletes.column(RECORD_KEY), value_set=up_keys)
            if pc.any(first).as_py():
                blocks.extend(logs.delete_blocks(self.ctx, self.instant, deletes.filter(first)))
                deletes = deletes.filter(pc.invert(first))
        if upserts.num_rows:
            if present is not None and deleted.any():
                present = {k: v[~deleted] for k, v in present.items()}
            for part, columns in column_sets(upserts, present):
                stored = with_meta_columns(
                    part,
                    self.ctx.data_schema,
                    instant=self.instant,
                    task_id=self.task_id,
                    file_name=fid,
                    seq_start=self._next_seq(part.num_rows),
                )
                blocks.append(logs.data_block(self.ctx, self.instant, stored, columns))
        if deletes is not None and deletes.num_rows:
            blocks.extend(logs.delete_blocks(self.ctx, self.instant, deletes))
        n_up = upserts.num_rows
        # New keys appended to a small file group count as inserts, the rest as updates.
        n_new = 0
        if bid not in self._slices:  # NBCC: a group created with logs only
            n_new = n_up
        elif IS_NEW in upserts.column_names and n_up:
            n_new = int(pc.sum(upserts.column(IS_NEW)).as_py() or 0)
        new_keys = None
        if self._keeps_record_index and n_new:
            new_keys = upserts.filter(upserts.column(IS_NEW)).column(RECORD_KEY)
        gone = None if deletes is None else deletes.column(RECORD_KEY)
        counts = (n_up, n_new, n_up - n_new, 0 if deletes is None else deletes.num_rows)
        self._add_blocks(bid, g, blocks, counts, new_keys, gone)

    def _append_changes(self, bid: BucketId, g: _GroupState, rows: pa.Table) -> None:
        """Changelog mode (Flink's ``changelog.enabled``): every change of the flush appended
        unmerged, in arrival order, each with its ``_hoodie_operation``: deletes too are
        data-block rows (``D``), as Java's append handle writes them when the operation field
        is allowed. A delete without an ordering value goes into a delete block in its place
        instead (as a data row it would lose to every older version of its key)."""
        assert self.instant is not None
        gid, ngroups = group_keys(rows.column(RECORD_KEY))
        ops = _change_operations(rows, gid)
        deleted = rows.column(IS_DELETED).to_numpy(zero_copy_only=False).astype(bool)
        of = self.ctx.ordering_field
        by_key = deleted.copy()
        if of is not None and of in rows.column_names:
            by_key &= rows.column(of).is_null().to_numpy(zero_copy_only=False).astype(bool)
        if g.base_instant is None and not g.log_files and not self._logs_only:
            # A new group starts with a base file holding each key's first change (an insert
            # or update: the log keeps the rest, in order): hudi-rs 0.5 lists no log-only
            # file group of version 8, and the readers fold the two as the log alone.
            first = _first_changes(gid, ngroups, ops, deleted | by_key)
            if first.any():
                self._create(bid, g, rows.filter(pa.array(first)), ops.filter(pa.array(first)))
                rest = pa.array(~first)
                rows, ops = rows.filter(rest), ops.filter(rest)
                deleted, by_key = deleted[~first], by_key[~first]
        # runs of data rows and of key-only deletes, in order (one run each, usually)
        cuts = np.flatnonzero(np.diff(by_key.astype(np.int8))) + 1
        blocks: list[Payload] = []
        for start, stop in zip([0, *cuts], [*cuts, len(by_key)], strict=True):
            run = rows.slice(start, stop - start)
            if not run.num_rows:
                continue
            if by_key[start]:
                blocks.extend(logs.delete_blocks(self.ctx, self.instant, run))
                continue
            stored = with_meta_columns(
                run,
                self.ctx.data_schema,
                instant=self.instant,
                task_id=self.task_id,
                file_name=bid[1],
                seq_start=self._next_seq(run.num_rows),
                operation=ops.slice(start, stop - start),
            )
            blocks.append(logs.data_block(self.ctx, self.instant, stored))
        counted = pc.value_counts(ops).to_pylist()
        n_op = {c["values"]: c["counts"] for c in counted}
        n_rows = rows.num_rows - int(by_key.sum())
        counts = (n_rows, n_op.get("I", 0), n_op.get("U", 0) + n_op.get("-U", 0), n_op.get("D", 0))
        new_keys = gone = None
        if self._keeps_record_index:
            # the record index follows where each key ends up: the flush's rows folded
            final = precombine(rows, of)
            dead = final.column(IS_DELETED)
            live = final.filter(pc.invert(dead))
            if IS_NEW in live.column_names:
                new_keys = live.filter(live.column(IS_NEW)).column(RECORD_KEY)
            gone = final.filter(dead).column(RECORD_KEY)
        self._add_blocks(bid, g, blocks, counts, new_keys, gone)

    def _add_blocks(
        self,
        bid: BucketId,
        g: _GroupState,
        blocks: list[Payload],
        counts: tuple[int, int, int, int],
        new_keys: Any,
        gone: Any,
    ) -> None:
        """Append ``blocks`` to the group's log and count them in its write stat: ``counts``
        (records written, inserts, updates, deletes); ``new_keys`` / ``gone``: the keys the
        record index gains and loses."""
        assert self.instant is not None
        if not blocks:
            return
        part, fid = bid
        payload = [p for b in blocks for p in payload_pieces(b)]
        name, offset, size_after = self._append_to_log(part, fid, g, payload)
        rel = join(part, name)
        st = self._stat(
            rel,
            file_id=fid,
            path=rel,
            partition_path=part,
            prev_commit=self.instant if self.ctx.completion_time_slicing else g.base_instant,
            base_file="" if self.ctx.completion_time_slicing else (g.base_file or ""),
            log_files=[name],
            log_version=_log_name(name).version,
            log_offset=offset,
        )
        n_writes, n_inserts, n_updates, n_deletes = counts
        if self._keeps_record_index:
            _note_keys(st, new_keys, gone)
        st.num_writes += n_writes
        st.num_inserts += n_inserts
        st.num_update_writes += n_updates
        st.num_deletes += n_deletes
        st.total_write_bytes += size_after - offset
        st.file_size_in_bytes = size_after
        st.total_log_blocks += len(blocks)

    def _append_to_log(
        self, part: str, fid: str, g: _GroupState, payload: Payload
    ) -> tuple[str, int, int]:
        """Append to the current log file (v6: named by the base instant) or roll a new version."""
        assert self.instant is not None
        storage = self.ctx.storage
        max_size = self.ctx.write_config.logfile_max_size
        if self.ctx.completion_time_slicing:
            # v8: every delta commit writes its own log file, named by its instant.
            log_instant = self.instant
            mine = [n for n in g.log_files if _log_name(n).instant == log_instant]
        else:
            log_instant = g.base_instant or self.instant
            mine = [n for n in g.log_files if _log_name(n).instant == log_instant]
        current = max(mine, key=lambda n: _log_name(n).version) if mine else None
        # under optimistic concurrency a writer appends to no log file another writer may hold;
        # a version 6 table with column statistics keeps a log file's per commit (0.x computes
        # them over the blocks a commit appended), so each commit writes its own log file
        appendable = (
            storage.supports_append
            and not self.ctx.write_config.occ
            and not self.ctx.log_stats_per_commit
        )
        if current is not None and appendable and (part, current) not in self._frozen:
            rel = join(part, current)
            size = storage.size(rel) if storage.exists(rel) else 0
            if size < max_size and ends_on_block(storage, rel, size):
                self._marker(part, current, "APPEND")
                offset = storage.append(rel, payload)
                return current, offset, offset + payload_size(payload)
        version = (_log_name(current).version + 1) if current else 1
        name = log_file_name(fid, log_instant, version, self.write_token)
        rel = join(part, name)
        self._ensure_partition(part)
        self._marker(part, name, "APPEND")
        storage.write_bytes(rel, payload)
        g.log_files.append(name)
        return name, 0, payload_size(payload)

    def _merge(
        self, bid: BucketId, g: _GroupState, rows: pa.Table, present: Presence | None = None
    ) -> None:
        """COW update path: rewrite the base file with the updates applied.

        Rows carried over from the old base keep their commit time and seqno; every row gets
        the new file name.
        """
        assert self.instant is not None
        part, fid = bid
        old_rel = join(part, g.base_file) if g.base_file else None
        name = base_file_name(fid, self.write_token, self.instant)
        rel = join(part, name)
        deleted = rows.column(IS_DELETED).to_numpy(zero_copy_only=False)
        base, merged = self._merged_records(old_rel, name, rows, deleted, present)
        self._marker(part, name, "MERGE" if old_rel else "CREATE")
        size = self._write_base(rel, merged)
        if not g.created_now:
            g.cdc_before = old_rel
        cdc = self._write_cdc(part, fid, g, base if g.cdc_before == old_rel else None, merged)
        earlier = None  # the stat of this instant's earlier version of the file, superseded
        if g.created_now and old_rel and old_rel != rel:
            self.ctx.storage.delete(old_rel)  # superseded by this instant's newer version
            earlier = self._stats.pop(old_rel, None)
        g.base_instant, g.base_file, g.created_now = self.instant, name, True
        st = self._stat(
            rel,
            file_id=fid,
            path=rel,
            partition_path=part,
            prev_commit=g.prev_instant or "null",
        )
        if earlier is not None:  # one stat for the group: what the earlier merges wrote too
            st.num_inserts += earlier.num_inserts
            st.num_update_writes += earlier.num_update_writes
            st.num_deletes += earlier.num_deletes
            if earlier.record_key_ops:
                st.record_key_ops = list(earlier.record_key_ops)
        if self._keeps_record_index:
            # exact: the keys the merge added to and removed from this file group
            _note_keys(st, *_keys_added_and_gone(base, merged))
        st.num_writes = merged.num_rows
        st.num_update_writes += int((~deleted).sum())
        st.num_deletes += int(deleted.sum())
        st.total_write_bytes = size
        st.file_size_in_bytes = size
        st.cdc_stats = cdc
        if cdc is None and g.cdc_before is None and self.ctx.table_config.cdc_enabled:
            # a group this instant created: every record is an insert (how CDC readers
            # infer its changes, Java's BASE_FILE_INSERT: no updates, writes == inserts)
            st.num_inserts, st.num_update_writes = st.num_writes, 0

    def _write_cdc(
        self,
        part: str,
        fid: str,
        g: _GroupState,
        before: pa.Table | None,
        merged: pa.Table,
    ) -> dict[str, int] | None:
        """A CDC table's merge: the changes of this instant to the group so far (from the
        base file it had before the instant: ``before``, or read again) into one CDC log
        file, replacing the one an earlier merge of the instant wrote; its ``cdcStats``
        (None for a group this instant created: no file, as Java's merge handle writes none
        when every record is an insert)."""
        if not self.ctx.table_config.cdc_enabled:
            return None
        assert self.instant is not None
        storage = self.ctx.storage
        if g.cdc_file is not None:
            storage.delete(join(part, g.cdc_file))
            g.cdc_file = None
        if g.cdc_before is None:
            return None  # a group this instant created: readers infer its inserts
        if before is None:
            before = read_base_file(storage, g.cdc_before)
            if before.schema != merged.schema:
                before = reconcile(before, merged.schema)
        # written even when empty (an upsert its ordering values lost, a group emptied): Java's
        # CDC reader requires a .cdc file for every merge of an earlier base file
        spec = cdc.CdcSpec.of(self.ctx)
        rows = cdc.cdc_rows(spec, self.instant, before, merged)
        name = cdc.cdc_file_name(fid, self.instant, self.write_token)
        self._marker(part, name, "APPEND")
        payload = cdc.cdc_block(spec, self.instant, rows)
        storage.write_bytes(join(part, name), payload)
        g.cdc_file = name
        return {join(part, name): len(payload)}

    def _merged_records(
        self,
        old_rel: str | None,
        name: str,
        rows: pa.Table,
        deleted: np.ndarray,
        present: Presence | None = None,
    ) -> tuple[pa.Table, pa.Table]:
        """The old base file's records (reconciled to the write schema) and the records of
        its new version, named ``name``: the incoming rows merged into them (Hudi's merge
        handle)."""
        assert self.instant is not None
        upd = with_meta_columns(
            rows,
            self.ctx.data_schema,
            instant=self.instant,
            task_id=self.task_id,
            file_name=name,
            seq_start=self._next_seq(rows.num_rows),
        )
        base = read_base_file(self.ctx.storage, old_rel) if old_rel else upd.slice(0, 0)
        if base.schema != upd.schema:
            # an older schema (columns added since, types widened): nulls, casts
            base = reconcile(base, upd.schema)
        if self.ctx.table_config.partial_update or present is not None:
            return base, self._partial_merged(base, upd, deleted, name, present)
        merged = apply_updates(
            base,
            upd,
            is_delete=deleted,
            reset=precombine_reset(rows) if not self.ctx.write_config.inserts_only else None,
            ordering_field=self.ctx.ordering_field,
            mode=self.ctx.merge_mode,
        )
        merged = merged.set_column(
            META_FIELDS.index(FILE_NAME), FILE_NAME, constant_strings(name, merged.num_rows)
        )
        return base, merged

    def _partial_merged(
        self,
        base: pa.Table,
        upd: pa.Table,
        deleted: np.ndarray,
        name: str,
        present: Presence | None = None,
    ) -> pa.Table:
        """A partial-update table's merge handle: each stored record an incoming version
        names meets it (:func:`hoodie_ray.merge.partial_merge`, stored as the base). A record
        whose values the instant changed takes its commit time and sequence number even where
        the stored version won on ordering and only had nulls filled (Java 0.x's
        ``PartialUpdateAvroPayload`` takes the incoming record's meta columns), so incremental
        and CDC reads see it; an unchanged one keeps its own."""
        named = pc.is_in(base.column(RECORD_KEY), value_set=upd.column(RECORD_KEY).combine_chunks())
        hit = base.filter(named)
        versions = pa.concat_tables([hit, upd])
        if present is None:
            has = self._present(versions)
        else:  # partial updates: a stored record has every column
            stored_has = np.ones(hit.num_rows, dtype=bool)
            has = {k: np.concatenate([stored_has, v]) for k, v in present.items()}
        merged, gone = partial_merge(
            versions,
            is_delete=np.concatenate([np.zeros(hit.num_rows, dtype=bool), deleted]),
            is_base=np.arange(versions.num_rows) < hit.num_rows,
            ordering_field=self.ctx.ordering_field,
            mode=self.ctx.merge_mode,
            present=has,
        )
        merged = merged.filter(pa.array(~gone))
        at = pa.array(key_positions(merged.column(RECORD_KEY), upd.column(RECORD_KEY)))
        stored = key_positions(merged.column(RECORD_KEY), hit.column(RECORD_KEY))
        data = self.ctx.data_schema.names
        changed = stored < 0
        if (stored >= 0).any():
            old = hit.take(pa.array(np.maximum(stored, 0)))
            changed |= values_differ(merged, old, data)
        for meta in (COMMIT_TIME, COMMIT_SEQNO):
            i = merged.schema.get_field_index(meta)
            mine = upd.column(meta).take(at)
            merged = merged.set_column(
                i, meta, pc.if_else(pa.array(changed), mine, merged.column(i))
            )
        out = pa.concat_tables([base.filter(pc.invert(named)), merged])
        return out.set_column(
            META_FIELDS.index(FILE_NAME), FILE_NAME, constant_strings(name, out.num_rows)
        )

    def _write_base(self, rel: str, records: pa.Table) -> int:
        """Write a base file of this instant; its size."""
        return write_base_file(
            self.ctx.storage,
            rel,
            records,
            avro_schema=self.ctx.avro_schema,
            codec=self.ctx.write_config.parquet_codec,
            bloom=BloomFilterSpec.of(self.ctx.write_config),
        )

    @property
    def _keeps_record_index(self) -> bool:
        return RECORD_INDEX in completed_partitions(self.ctx.table_config)

    def _ensure_partition(self, part: str) -> None:
        """The partition's metadata file, checked once an instant (not once a file written)."""
        from hoodie_ray.file_group.naming import write_partition_metadata

        assert self.instant is not None
        if part not in self._partitions:
            write_partition_metadata(self.ctx.storage, part, self.instant)
            self._partitions.add(part)


def _change_operations(rows: pa.Table, gid: np.ndarray) -> pa.Array:
    """The ``_hoodie_operation`` of each tagged row in changelog mode: the input's where it
    gave one, else ``D`` for a delete, ``I`` for the first row of a key the index did not
    hold (``_hoodie_is_new``) or of a key deleted just before in the batch, ``U`` otherwise.
    A row marked deleted is always ``D``. ``gid``: each row's key group (``group_keys``)."""
    n = rows.num_rows
    deleted = rows.column(IS_DELETED).to_numpy(zero_copy_only=False).astype(bool)
    if IS_NEW in rows.column_names:
        is_new = rows.column(IS_NEW).to_numpy(zero_copy_only=False).astype(bool)
    else:
        is_new = np.zeros(n, dtype=bool)
    order = np.argsort(gid, kind="stable")
    same_key = np.zeros(n, dtype=bool)  # the row before it (in the key's order) has its key
    same_key[1:] = gid[order][1:] == gid[order][:-1]
    after_delete = np.zeros(n, dtype=bool)
    after_delete[1:] = same_key[1:] & deleted[order][:-1]
    insert = np.empty(n, dtype=bool)
    insert[order] = (~same_key & is_new[order]) | after_delete
    code = np.where(deleted, 2, np.where(insert, 0, 1)).astype(np.int8)
    derived = pa.array(["I", "U", "D"], pa.string()).take(pa.array(code))
    if OPERATION not in rows.column_names:
        return derived
    given = rows.column(OPERATION).combine_chunks().cast(pa.string())
    return pc.if_else(pa.array(deleted), "D", pc.coalesce(given, derived))


def _first_changes(gid: np.ndarray, ngroups: int, ops: pa.Array, deleted: np.ndarray) -> np.ndarray:
    """The rows that are their key's first (``gid``: each row's key group) and an insert or
    update (``I``, ``U``): what a new file group's base file can hold (one row per key, no
    deletes)."""
    n = len(gid)
    first_at = np.full(ngroups, n, dtype=np.int64)
    np.minimum.at(first_at, gid, np.arange(n))
    first = np.zeros(n, dtype=bool)
    first[first_at] = True
    upsert = pc.is_in(ops, value_set=pa.array(["I", "U"])).to_numpy(zero_copy_only=False)
    return first & upsert.astype(bool) & ~deleted


def _keys_added_and_gone(
    before: pa.Table, after: pa.Table
) -> tuple[pa.Array | None, pa.Array | None]:
    """The record keys a rewrite of a file group added and removed (None for none)."""
    old, new = before.column(RECORD_KEY), after.column(RECORD_KEY)
    added = pc.filter(new, pc.invert(pc.is_in(new, value_set=old)))
    gone = pc.filter(old, pc.invert(pc.is_in(old, value_set=new)))
    return (added if len(added) else None, gone if len(gone) else None)


def _note_keys(st: HoodieWriteStat, added: Any, deleted: Any) -> None:
    """Record, in write order, the keys a file group gained and lost in this instant (the
    record index takes each key's last change)."""
    ops = st.record_key_ops if st.record_key_ops is not None else []
    for keys, gained in ((added, True), (deleted, False)):
        if keys is not None and len(keys):
            ops.append((_flat(keys), gained))
    st.record_key_ops = ops or None


def _flat(a: Any) -> pa.Array:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
