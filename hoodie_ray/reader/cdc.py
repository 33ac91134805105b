"""Change data capture reads: every change a range of commits made, Hudi's CDC query.

``hr.read(path, query_type="incremental", incremental_format="cdc", begin=..., end=...)``
returns one row per change, in commit order, with Hudi's CDC columns:

* ``op``: ``i`` (insert), ``u`` (update), ``d`` (delete) (Java ``HoodieCDCOperation``);
* ``ts_ms``: the instant (requested) time of the commit that made the change, a
  ``yyyyMMddHHmmssSSS`` string as in Hudi's CDC output (the name is Hudi's: it is no epoch);
* ``before`` / ``after``: the record before and after the change (null for an insert's
  ``before`` and a delete's ``after``), as a struct of the table's data columns (meta columns
  left out, as Java's CDC log blocks hold them), or, with ``image_format="json"``, as the JSON
  strings Spark's CDC query returns.

How the changes are found: Java's ``HoodieCDCExtractor`` reads CDC log files where a commit
wrote them (copy-on-write merges of a table with ``hoodie.table.cdc.enabled``) and infers the
changes of every other write from the file slices themselves (``HoodieCDCInferenceCase``:
``BASE_FILE_INSERT``, ``BASE_FILE_DELETE``, ``LOG_FILE``, ``REPLACE_COMMIT``). This reader
infers every commit's changes the one way those cases share: for each file group a commit
wrote (or replaced), the group's merged records as of the instant before the commit against
those as of the commit. A key the commit wrote (``_hoodie_commit_time`` is the commit) is an
insert where it was absent before and an update where it was present; a key present before
and absent after is a delete. So a table needs no CDC files to be read this way (Java refuses
a table without ``hoodie.table.cdc.enabled``), and it gives what the CDC files hold where they
exist; but the file slices a range's first commits replaced must not be cleaned yet (the same
limit Java's inference has): a read that needs a cleaned slice says so.

Which commits yield changes (Java ``WriteOperationType.yieldChanges``): inserts, upserts,
deletes, bulk inserts, overwrites and partition deletes; compaction and clustering rewrite
records without changing them and are skipped. The range ``(begin, end]`` compares requested
instant times, as Java's CDC query does (the plain incremental query of table versions 8+
compares completion times). Within a commit, changes come by file group (partition path,
file id), then by record key.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import os
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.exceptions import HoodieQueryError
from hoodie_ray.file_group.view import FileGroup, FileSlice, FileSystemView
from hoodie_ray.log_format import CDCDataBlock, DataBlock, read_log_file
from hoodie_ray.meta import COMMIT_SEQNO, COMMIT_TIME, META_FIELDS_WITH_OPERATION, RECORD_KEY
from hoodie_ray.reader.file_slice_reader import ReadContext, SliceSpec, read_file_slice
from hoodie_ray.reader.retention import stale_slice
from hoodie_ray.reader.schema import reconcile
from hoodie_ray.storage import join
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action, Instant
from hoodie_ray.timeline.metadata import NULL_COMMIT, HoodieWriteStat

__all__ = [
    "CDC_COLUMNS",
    "IMAGE_FORMATS",
    "YIELDING_OPERATIONS",
    "ChangeReader",
    "GroupSteps",
    "Step",
    "cdc_schema",
    "change_rows",
    "read_cdc",
]

#: The columns of a CDC read, in order (Spark's ``HoodieCDCFileIndex.FULL_CDC_SPARK_SCHEMA``).
CDC_COLUMNS = ("op", "ts_ms", "before", "after")
#: ``struct``: images typed as the table's row; ``json``: Hudi's JSON strings.
IMAGE_FORMATS = ("struct", "json")
#: Operations whose commits change records (Java ``WriteOperationType.yieldChanges``).
YIELDING_OPERATIONS = frozenset(
    {
        "INSERT",
        "UPSERT",
        "UPSERT_PREPPED",
        "DELETE",
        "DELETE_PREPPED",
        "BULK_INSERT",
        "DELETE_PARTITION",
        "INSERT_OVERWRITE",
        "INSERT_OVERWRITE_TABLE",
        "BOOTSTRAP",
    }
)
#: Operations that rewrite records without changing them: the records a commit of these
#: wrote are the records of the file groups it read.
REWRITE_OPERATIONS = frozenset({"COMPACT", "LOG_COMPACT", "CLUSTER"})
#: Bytes of file-group states kept between commits (a commit's "after" is the next one's
#: "before" when the same group is written again).
_STATE_CACHE_BYTES = 256 << 20


def cdc_schema(table_schema: pa.Schema, image_format: str = "struct") -> pa.Schema:
    """The schema of a CDC read of a table of ``table_schema``."""
    image: pa.DataType = pa.string()
    if image_format == "struct":
        image = pa.struct(list(_data_fields(table_schema)))
    return pa.schema(
        [
            pa.field("op", pa.string(), nullable=False),
            pa.field("ts_ms", pa.string(), nullable=False),
            pa.field("before", image),
            pa.field("after", image),
        ]
    )


def _data_fields(schema: pa.Schema) -> list[pa.Field]:
    return [f for f in schema if f.name not in META_FIELDS_WITH_OPERATION]


def read_cdc(
    tbl: HoodieTable,
    start: str | None,
    stop: str | None,
    image_format: str = "struct",
    max_workers: int | None = None,
) -> pa.Table:
    """Every change the commits requested in ``(start, stop]`` made (instant times, checked
    by the caller: ``hr.read(..., incremental_format="cdc")``); see the module doc.

    File groups are independent: each one's commits are read in order by one of up to
    ``max_workers`` threads (default: the CPU count, at most 8), each with its own
    :class:`ChangeReader`; the rows come in commit order, then by file group and key.

    Raises:
        HoodieQueryError: a bad image format, a table without meta columns, or a file slice
            the read needs that the cleaner removed.
    """
    reader = ChangeReader(tbl, image_format)
    units = reader.plan(reader.commits_in(start, stop))
    workers = max(1, min(len(units), max_workers or os.cpu_count() or 1, 8))
    if workers == 1:
        parts = [reader.group_changes(u) for u in units]
    else:
        chunks = [list(range(i, len(units), workers)) for i in range(workers)]

        def run(chunk: list[int]) -> list[tuple[int, pa.Table]]:
            own = ChangeReader(HoodieTable.load(tbl.base_uri, tbl.storage_options), image_format)
            return [(i, own.group_changes(units[i])) for i in chunk]

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hoodie-cdc") as ex:
            done = dict(pair for pairs in ex.map(run, chunks) for pair in pairs)
        parts = [done[i] for i in range(len(units))]
    return in_commit_order(parts, reader.schema)


def _changed_existing(stats: list[HoodieWriteStat]) -> bool:
    """Whether a commit's write stats of one file group say it changed records the group
    held before (updates or deletes, or a merge of an earlier base file), rather than only
    creating the group or inserting into it."""
    created = any(not st.is_delta and st.prev_commit in (None, "", NULL_COMMIT) for st in stats)
    inserts_only = all(
        (st.num_update_writes or 0) == 0 and (st.num_deletes or 0) == 0 for st in stats
    )
    return not (created or inserts_only)


def in_commit_order(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """Per-file-group changes (each in commit, then key order; the groups in (partition,
    file id) order) as one table in commit order, then group, then key (a stable sort)."""
    parts = [t for t in parts if t.num_rows]
    if not parts:
        return schema.empty_table()
    table = pa.concat_tables(parts)
    return table.take(pc.sort_indices(table["ts_ms"]))


@dataclass(frozen=True)
class Step:
    """One commit's change to one file group, as a CDC read plans it."""

    instant: str
    before_at: str | None  # the instant just before it (None: the first)
    replaced: bool  # the commit replaced the group (every record a delete)
    needs_before: bool  # the group held records the commit may have changed
    cdc_files: tuple[str, ...] = ()  # its .cdc files, read as they are (Java's AS_IS)


@dataclass(frozen=True)
class GroupSteps:
    """The commits of a CDC read that changed one file group, in order. Picklable: the unit
    of work of a parallel or distributed CDC read."""

    partition: str
    file_id: str
    steps: tuple[Step, ...]


class ChangeReader:
    """Reads the changes of one commit at a time (:meth:`changes`), keeping the file-group
    states it read for the next commits (a group's state after commit n is its state before
    the next commit that writes it). One reader per table and read; not thread-safe."""

    def __init__(self, tbl: HoodieTable, image_format: str = "struct") -> None:
        if image_format not in IMAGE_FORMATS:
            raise HoodieQueryError(
                f"unknown CDC image format {image_format!r}; use one of "
                + ", ".join(repr(f) for f in IMAGE_FORMATS)
            )
        if not tbl.table_config.populate_meta_fields:
            raise HoodieQueryError(
                f"a CDC read of {tbl.base_uri} needs the meta columns "
                "(hoodie.populate.meta.fields=false): which commit wrote a record is not kept"
            )
        table_schema = tbl.schema or pa.schema([])  # none: no commit yet, nothing changed
        self.tbl = tbl
        self.image_format = image_format
        self.schema = cdc_schema(table_schema, image_format)
        self._image_type = pa.struct(list(_data_fields(table_schema)))
        cfg = tbl.table_config
        # see change_rows: a partial-update table's records may change values and keep their
        # sequence numbers, and so may those of a merge-on-read slice holding IS_PARTIAL log
        # blocks (version 8+: Spark's MERGE INTO, write.partial.updates), found per slice
        self._refilled = cfg.partial_update
        self._partial_logs: dict[str, bool] | None = (
            {} if cfg.table_type == "MERGE_ON_READ" and cfg.table_version >= 8 else None
        )
        self._partial_states: set[tuple[tuple[str, str], str]] = set()
        self._ctx = ReadContext.of_table(tbl, table_schema, tuple(table_schema.names))
        self._storage = tbl.storage
        self._view: FileSystemView = tbl.view()
        # a state may be read from a savepoint's older slice in place of a cleaned one: then
        # each slice read is checked
        self._check_stale = tbl.savepoint_may_stand_in()
        self._groups: dict[tuple[str, str], dict[str, FileGroup]] = {}
        self._states: OrderedDict[tuple[str, str], tuple[str, pa.Table]] = OrderedDict()
        self._state_bytes = 0
        self._touches: tuple[int, dict[tuple[str, str], list[str]]] | None = None

    # -- the range -------------------------------------------------------------------------------
    def commits_in(self, start: str | None, stop: str | None) -> list[Instant]:
        """The completed commits requested in ``(start, stop]`` that yield changes, in order."""
        return [
            inst
            for inst in self.tbl.commits()
            if (start is None or inst.timestamp > start)
            and (stop is None or inst.timestamp <= stop)
            and self.yields_changes(inst)
        ]

    def yields_changes(self, inst: Instant) -> bool:
        """True if the commit ``inst`` changed records (not a compaction or clustering)."""
        op = (self.tbl.metadata(inst).operation_type or "").upper()
        if op in REWRITE_OPERATIONS or inst.action == Action.COMPACTION:
            return False
        return op in YIELDING_OPERATIONS or op in ("", "UNKNOWN")

    def plan(self, commits: list[Instant]) -> list[GroupSteps]:
        """The file groups ``commits`` wrote or replaced, each with its steps, sorted by
        (partition, file id).

        Whether a step needs the group's records before the commit comes from the commit's
        write stats, not from the timeline (whose first writes of a group may be archived):
        a group the commit created (a base file with no previous commit) or only inserted into
        needs none; every other step does, and a read that then finds no slice says it was
        cleaned."""
        as_is = (
            self.tbl.table_config.cdc_enabled
            and self.tbl.table_config.cdc_logging_mode == "DATA_BEFORE_AFTER"
        )
        steps: dict[tuple[str, str], list[Step]] = {}
        # the instant before a commit: any commit-like one (a compaction's slice holds the
        # same records)
        times = [inst.timestamp for inst in self.tbl.commits()]
        for inst in commits:
            meta = self.tbl.metadata(inst)
            c = inst.timestamp
            i = bisect.bisect_left(times, c)
            before_at = times[i - 1] if i else None
            stats: dict[tuple[str, str], list[HoodieWriteStat]] = {}
            for p, st in meta.iter_write_stats():
                if st.file_id:
                    stats.setdefault((p, st.file_id), []).append(st)
            replaced = {
                (p, fid) for p, ids in meta.replaced_file_ids().items() for fid in ids
            } - set(stats)
            for key in sorted(set(stats) | replaced):
                files = tuple(f for st in stats.get(key, ()) for f in st.cdc_stats or ())
                steps.setdefault(key, []).append(
                    Step(
                        c,
                        before_at,
                        key in replaced,
                        key in replaced or _changed_existing(stats[key]),
                        files if as_is else (),
                    )
                )
        return [GroupSteps(p, f, tuple(v)) for (p, f), v in sorted(steps.items())]

    # -- one commit, one group -------------------------------------------------------------------
    def changes(self, inst: Instant) -> pa.Table:
        """The changes commit ``inst`` made, as rows of :attr:`schema` (by file group, then
        record key)."""
        return in_commit_order([self.group_changes(u) for u in self.plan([inst])], self.schema)

    def group_changes(self, unit: GroupSteps) -> pa.Table:
        """The changes of one file group's commits, in commit order, then by record key."""
        key = (unit.partition, unit.file_id)
        out = []
        for step in unit.steps:
            c = step.instant
            if step.cdc_files:
                # the changes as the writer logged them; the group's state after the commit
                # is not read (the next step reads its own)
                self._forget(key)
                out.append(self._format(self._logged(c, step.cdc_files)))
                continue
            before = self._before(key, step.before_at, c, step.needs_before)
            if step.replaced:
                self._forget(key)
                after = None
            else:
                after = self._state_at(key, c)
                if after is None:  # the commit wrote the group: its slice was cleaned since
                    raise HoodieQueryError(
                        f"the changes of commit {c} in file group {key[1]} (partition "
                        f"{key[0]!r}) need its file slice as of {c}, which was cleaned (or "
                        "archived away); read a later range, or keep more commits "
                        "(hoodie.cleaner.commits.retained)"
                    )
                self._keep(key, c, after)
            out.append(self._diff(c, before, after, (key, c) in self._partial_states))
        out = [t for t in out if t.num_rows]
        return pa.concat_tables(out) if out else self.schema.empty_table()

    def _logged(self, c: str, files: tuple[str, ...]) -> pa.Table:
        """The changes in commit ``c``'s ``.cdc`` files (``DATA_BEFORE_AFTER``): ``op`` and
        the images as logged (reconciled to the table's data columns), ``ts_ms`` the commit
        (Java's CDC reader takes the split's instant too)."""
        parts = []
        images = pa.schema([("before", self._image_type), ("after", self._image_type)])
        for rel in files:
            if not self._storage.exists(rel):
                raise HoodieQueryError(
                    f"the changes of commit {c} are in {rel}, which was cleaned with its file "
                    "slice; read a later range, or keep more commits "
                    "(hoodie.cleaner.commits.retained)"
                )
            for block in read_log_file(self._storage, rel):
                if not isinstance(block, CDCDataBlock):
                    continue
                recs = block.records
                if not recs.num_rows:
                    continue
                imgs = reconcile(recs.select(["before", "after"]), images)
                parts.append(
                    pa.table(
                        {
                            "op": recs["op"],
                            "ts_ms": pa.array([c] * recs.num_rows, pa.string()),
                            "before": imgs["before"],
                            "after": imgs["after"],
                        }
                    )
                )
        if not parts:
            return pa.schema([("op", pa.string()), ("ts_ms", pa.string()), *images]).empty_table()
        return pa.concat_tables(parts)

    def _diff(
        self, c: str, before: pa.Table | None, after: pa.Table | None, partial: bool = False
    ) -> pa.Table:
        rows = change_rows(c, before, after, self._image_type, self._refilled or partial)
        return self._format(rows.select(list(CDC_COLUMNS)))

    def _format(self, table: pa.Table) -> pa.Table:
        """``op``, ``ts_ms``, ``before``, ``after`` rows in the read's image format."""
        if self.image_format == "json":
            table = table.set_column(2, "before", _json(table["before"]))
            table = table.set_column(3, "after", _json(table["after"]))
        return table.cast(self.schema)

    # -- file-group states -----------------------------------------------------------------------
    def _before(
        self, key: tuple[str, str], at: str | None, c: str, needed: bool
    ) -> pa.Table | None:
        """The records of file group ``key`` just before commit ``c`` (as of instant ``at``);
        ``needed``: the group held records then (no slice: it was cleaned)."""
        kept = self._states.get(key)
        if kept is not None and at is not None:
            since, state = kept
            if since <= at and self._unchanged(key, since, at):
                self._states.move_to_end(key)
                return state
        state = self._state_at(key, at) if at is not None else None
        if state is None and needed:
            raise HoodieQueryError(
                f"the changes of commit {c} in file group {key[1]} (partition {key[0]!r}) "
                f"need its file slice as of {at}, which was cleaned (or archived away); read a "
                "later range, or keep more commits (hoodie.cleaner.commits.retained)"
            )
        return state

    def _unchanged(self, key: tuple[str, str], since: str, at: str) -> bool:
        """No commit requested after ``since`` up to ``at`` changed file group ``key``'s
        records (compactions and clusterings rewrite them unchanged)."""
        return not any(since < ts <= at for ts in self._changed_by().get(key, ()))

    def _changed_by(self) -> dict[tuple[str, str], list[str]]:
        """Each file group -> the commits that may have changed its records (wrote or replaced
        it; all but compactions and clusterings, whatever their operation yields)."""
        commits = self.tbl.commits()
        if self._touches is None or self._touches[0] != len(commits):
            out: dict[tuple[str, str], list[str]] = {}
            for inst in commits:
                meta = self.tbl.metadata(inst)
                if (meta.operation_type or "").upper() in REWRITE_OPERATIONS:
                    continue
                keys = {(p, s.file_id) for p, s in meta.iter_write_stats() if s.file_id}
                keys.update((p, f) for p, ids in meta.replaced_file_ids().items() for f in ids)
                for k in keys:
                    out.setdefault(k, []).append(inst.timestamp)
            self._touches = (len(commits), out)
        return self._touches[1]

    def _state_at(self, key: tuple[str, str], at: str) -> pa.Table | None:
        """The merged records of file group ``key`` as of instant ``at`` (None: no slice)."""
        part, fid = key

        groups = self._groups.get((part, at))
        if groups is None:
            groups = {
                fg.file_id: fg
                for fg in self._view.all_file_groups([part], as_of=at, include_replaced=True)
            }
            if len(self._groups) >= 16:  # a commit reads its instant and the one before
                del self._groups[next(iter(self._groups))]
            self._groups[(part, at)] = groups
        fg = groups.get(fid)
        s = fg.latest_slice(at) if fg is not None else None
        if s is None or s.is_empty:
            return None
        spec = SliceSpec.of(s)
        if self._check_stale:
            stale = stale_slice(self.tbl, at, [spec])
            if stale is not None:
                raise HoodieQueryError(
                    f"the changes around {at} are not kept: {stale}; read a later range, or "
                    "keep more commits (hoodie.cleaner.commits.retained)"
                )
        if self._has_partial_blocks(s, at):
            self._partial_states.add((key, at))
        ctx = dataclasses.replace(self._ctx, end_instant=at)
        return read_file_slice(ctx, spec, self._storage)

    def _has_partial_blocks(self, s: FileSlice, at: str) -> bool:
        """Does slice ``s`` (as of ``at``) hold an ``IS_PARTIAL`` data block? Headers only
        (the blocks' records are not decoded), once per log file."""
        if self._partial_logs is None:
            return False
        for name in s.log_files:
            rel = join(s.partition_path, name)
            hit = self._partial_logs.get(rel)
            if hit is None:
                hit = any(
                    isinstance(b, DataBlock) and b.is_partial
                    for b in read_log_file(self._storage, rel)
                )
                self._partial_logs[rel] = hit
            if hit:
                return True
        return False

    def _keep(self, key: tuple[str, str], at: str, state: pa.Table | None) -> None:
        self._forget(key)
        if state is None:
            return
        self._states[key] = (at, state)
        self._state_bytes += state.nbytes
        while self._state_bytes > _STATE_CACHE_BYTES and len(self._states) > 1:
            _, (_, old) = self._states.popitem(last=False)
            self._state_bytes -= old.nbytes

    def _forget(self, key: tuple[str, str]) -> None:
        kept = self._states.pop(key, None)
        if kept is not None:
            self._state_bytes -= kept[1].nbytes


def change_rows(
    instant: str,
    before: pa.Table | None,
    after: pa.Table | None,
    image_type: pa.StructType,
    refilled: bool = False,
) -> pa.Table:
    """The changes one commit made to one file group, sorted by record key: columns ``op``,
    ``ts_ms``, ``before``, ``after`` and ``record_key``.

    ``before`` / ``after`` are the group's records (meta columns included) before and after
    the commit ``instant`` (None: no records). A record is identified by its key and commit
    sequence number (a group may hold a key twice: inserts skip the index): the records of
    ``after`` with ``_hoodie_commit_time == instant`` are written, the records of ``before``
    missing from ``after`` are gone. Written and gone records of one key pair up in order as
    updates; a written one left over is an insert, a gone one a delete. The images are the
    records' columns of ``image_type`` (the table's data columns). The reader's CDC query and
    the writer's CDC log blocks both take their rows from here. ``refilled`` (partial-update
    tables): a record that keeps its sequence number but whose values the commit changed (a
    lower-ordered version filled its nulls) is an update too."""
    written: pa.Table | None = None
    if after is not None and after.num_rows:
        written = after.filter(pc.equal(after[COMMIT_TIME], instant))
    gone: pa.Table | None = None
    if before is not None and before.num_rows:
        gone = before
        if after is not None and after.num_rows:
            gone = before.filter(pc.invert(pc.is_in(row_ids(before), value_set=row_ids(after))))
    if refilled and before is not None and after is not None and before.num_rows:
        kept = after.filter(pc.not_equal(after[COMMIT_TIME], instant))
        was = pc.index_in(row_ids(kept), value_set=row_ids(before))
        kept, was = kept.filter(pc.is_valid(was)), was.drop_null()
        old = before.take(was)
        changed = values_differ(kept, old, [f.name for f in image_type])
        if changed.any():
            mask = pa.array(changed)
            written = pa.concat_tables([t for t in (written, kept.filter(mask)) if t is not None])
            gone = pa.concat_tables([t for t in (gone, old.filter(mask)) if t is not None])
    return pair_changes(instant, written, gone, image_type)


def pair_changes(
    instant: str, written: pa.Table | None, gone: pa.Table | None, image_type: pa.StructType
) -> pa.Table:
    """The changes of ``instant`` from the records it ``written`` and those ``gone`` (meta
    columns included), sorted by record key: a key's written and gone records pair up in
    order as updates, a written one left over is an insert, a gone one a delete. Columns
    ``op``, ``ts_ms``, ``before``, ``after`` and ``record_key``."""
    w_keys = _keys(written)
    g_keys = _keys(gone)
    pairs = pa.table(
        {"k": w_keys, "r": _ranks(w_keys), "w": pa.array(np.arange(len(w_keys)), pa.int64())}
    ).join(
        pa.table(
            {"k": g_keys, "r": _ranks(g_keys), "g": pa.array(np.arange(len(g_keys)), pa.int64())}
        ),
        keys=["k", "r"],
        join_type="full outer",
    )
    pairs = pairs.take(pc.sort_indices(pairs, [("k", "ascending"), ("r", "ascending")]))
    w_idx, g_idx = _flat(pairs["w"]), _flat(pairs["g"])
    n = pairs.num_rows
    op = pc.if_else(
        pc.is_valid(w_idx), pc.if_else(pc.is_valid(g_idx), "u", "i"), pa.scalar("d", pa.string())
    )
    return pa.table(
        {
            "op": _flat(op),
            "ts_ms": pa.array([instant] * n, pa.string()),
            "before": _images(gone, image_type, g_idx),
            "after": _images(written, image_type, w_idx),
            "record_key": _flat(pairs["k"]),
        }
    )


def values_differ(a: pa.Table, b: pa.Table, names: Iterable[str]) -> np.ndarray:
    """Row by row: does any of the columns ``names`` differ between ``a`` and ``b`` (two
    nulls are equal)?"""
    out = np.zeros(a.num_rows, dtype=bool)
    for name in names:
        x, y = _flat(a[name]), _flat(b[name])
        try:
            same = pc.or_(
                pc.fill_null(pc.equal(x, y), False), pc.and_(pc.is_null(x), pc.is_null(y))
            )
            out |= ~np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # nested: compared as values
            out |= np.array([p != q for p, q in zip(x.to_pylist(), y.to_pylist(), strict=True)])
    return out


def _keys(rows: pa.Table | None) -> pa.Array:
    return pa.array([], pa.string()) if rows is None else _flat(rows[RECORD_KEY])


def row_ids(rows: pa.Table) -> pa.Array:
    """Each record's identity within its file group: its commit sequence number
    (``<instant>_<task>_<n>``: one task writes a group per commit, and a record keeps its
    number until it is written again), with the key where a number is missing."""
    seqno = _flat(rows[COMMIT_SEQNO])
    if not seqno.null_count:
        return seqno
    keyed = pc.binary_join_element_wise(_flat(rows[RECORD_KEY]), pc.fill_null(seqno, ""), "\x00")
    return _flat(keyed)


def _ranks(keys: pa.Array) -> pa.Array:
    """Each key's occurrence number among the equal keys before it (0 for the first)."""
    n = len(keys)
    if n == 0:
        return pa.array([], pa.int64())
    order = np.asarray(pc.sort_indices(keys))
    sk = keys.take(pa.array(order))
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = np.asarray(pc.not_equal(sk.slice(1), sk.slice(0, n - 1)).fill_null(True))
    starts = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.arange(n) - starts[group]
    return pa.array(ranks)


def _images(
    rows: pa.Table | None, image_type: pa.StructType, idx: pa.Array | None = None
) -> pa.Array:
    """The ``image_type`` columns of ``rows`` as one struct array (``idx``: taken at these
    indices, a null index giving a null image)."""
    if rows is None:
        assert idx is not None
        return pa.nulls(len(idx), image_type)
    cols = [_flat(rows[f.name]) for f in image_type]
    struct = pa.StructArray.from_arrays(cols, fields=list(image_type))
    return struct if idx is None else _flat(pc.take(struct, idx))


def _flat(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(a, pa.ChunkedArray):
        return a.combine_chunks() if a.num_chunks != 1 else a.chunk(0)
    return a


def _json(images: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Struct images as JSON object strings (Spark's CDC output; field order kept)."""
    return pa.array(
        [
            None if r is None else json.dumps(r, default=str, ensure_ascii=False)
            for r in images.to_pylist()
        ],
        pa.string(),
    )
