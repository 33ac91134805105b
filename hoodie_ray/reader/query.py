"""Queries over a Hudi table: snapshot, time travel, read-optimized and incremental.

:func:`read_table` (``hr.read``) returns a ``pyarrow.Table``. :func:`plan_file_slices` returns
the slices a query reads plus one picklable :class:`~hoodie_ray.reader.file_slice_reader.ReadContext`,
so each slice can be read on its own (:func:`read_file_slice`, one Ray read task per slice).

Semantics follow hudi-rs 0.5.0 (the project's test oracle):

* ``snapshot``: the latest file slice of every file group as of the latest completed commit
  (or ``as_of``: time travel, instants whose *requested* time is at or before it), base file
  merged with its log files.
* ``read_optimized``: the base files of those slices only (log files ignored).
* ``incremental``: records committed in ``(begin, end]``. The file slices come from the commit
  metadata of the instants in the range (file groups replaced in the range are left out), the
  log blocks of instants outside the range are skipped, and rows are kept when their
  ``_hoodie_commit_time`` lies in the range. For table versions 8 and 9, instants are placed by
  their *completion* time (their requested time for version 6).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from hoodie_ray.exceptions import (
    HoodieCorruptedDataError,
    HoodieQueryError,
    HoodieTimelineError,
)
from hoodie_ray.file_group.naming import parse_base_file_name, parse_log_file_name
from hoodie_ray.lru import SizedLru
from hoodie_ray.metadata.layout import COLUMN_STATS, RECORD_INDEX
from hoodie_ray.reader import retention
from hoodie_ray.reader.file_slice_reader import (
    ReadContext,
    SliceSpec,
    finish_rows,
    iter_file_slice,
    merge_columns,
    read_file_slice,
)
from hoodie_ray.reader.filters import Filter, parse_filters, partition_may_match
from hoodie_ray.reader.log_scan import InstantRange
from hoodie_ray.reader.lookup_cost import LookupCost
from hoodie_ray.reader.merger import COMMIT_TIME, FILE_NAME, OPERATION, PARTITION_PATH, RECORD_KEY
from hoodie_ray.storage import Storage, redact_options
from hoodie_ray.table import HoodieTable
from hoodie_ray.threads import MAX_READ_THREADS, map_in_pool
from hoodie_ray.timeline.archive import LSMTimeline
from hoodie_ray.timeline.instant import Action, format_instant_time

if TYPE_CHECKING:
    from hoodie_ray.metadata.secondary_index import IndexDefinition

__all__ = [
    "QUERY_TYPES",
    "ReadPlan",
    "plan_file_slices",
    "read",
    "read_file_slice",
    "read_table",
]

QUERY_TYPES = ("snapshot", "read_optimized", "incremental")
_QUERY_ALIASES = {
    "snapshot": "snapshot",
    "read_optimized": "read_optimized",
    "read-optimized": "read_optimized",
    "ro": "read_optimized",
    "incremental": "incremental",
}
_DIGITS = re.compile(r"^[0-9]+$")


# -- the loaded table ----------------------------------------------------------------------------


# -- plans ----------------------------------------------------------------------------------------


@dataclass
class ReadPlan:
    """The file slices one query reads and the context to read each of them.

    ``read_file_slice(plan.context, s)`` for ``s`` in ``plan.slices`` gives the query's rows,
    slice by slice; :meth:`read_all` concatenates them.
    """

    query_type: str
    context: ReadContext
    slices: list[SliceSpec]
    query_instant: str | None = None
    #: how the plan was pruned: ``file_groups_total`` (before pruning),
    #: ``file_groups_planned``, ``pruned_by`` (``partition``, ``column_stats``,
    #: ``record_index`` or ``secondary_index``, in order), and for a lookup ``record_index``
    #: (``keys`` looked up, ``found``) or ``record_index_skipped`` (why the index was not
    #: used; the same for ``secondary_index``), with ``lookup_cost`` (the planner's estimate
    #: of the lookup against the scan: :class:`~hoodie_ray.reader.lookup_cost.LookupCost`)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def schema(self) -> pa.Schema:
        """The schema of the rows the plan returns."""
        return self.context.output_schema

    def read_all(self, storage: Storage | None = None, max_workers: int | None = None) -> pa.Table:
        """Read every slice and concatenate the rows (in slice order).

        Slices are read by up to ``max_workers`` threads (default: the process's shared
        reader pool, :mod:`hoodie_ray.threads`, as many threads as CPUs up to eight); pyarrow
        releases the GIL while it decodes and merges, so they overlap. Each thread reads a
        run of consecutive slices and filters their rows together, up to
        :data:`FILTER_BATCH_ROWS` at a time.
        """
        storage = storage or self.context.storage()
        workers = max_workers or min(len(self.slices), os.cpu_count() or 1, MAX_READ_THREADS)
        parallel = workers > 1 and len(self.slices) > 1
        ctx = replace(self.context, arrow_threads=False) if parallel else self.context
        deferred = replace(ctx, defer_row_filters=True) if ctx.filters else ctx

        def one(run: Sequence[SliceSpec]) -> list[pa.Table]:
            if deferred is ctx:
                return [t for s in run for t in iter_file_slice(ctx, s, storage) if t.num_rows]
            out: list[pa.Table] = []
            held: list[pa.Table] = []
            rows = 0
            for s in run:
                for t in iter_file_slice(deferred, s, storage):
                    held.append(t)
                    rows += t.num_rows
                    if rows >= FILTER_BATCH_ROWS:
                        out.append(finish_rows(ctx, pa.concat_tables(held)))
                        held, rows = [], 0
            if held:
                out.append(finish_rows(ctx, pa.concat_tables(held)))
            return [t for t in out if t.num_rows]

        runs = _slice_runs(self.slices, workers * RUNS_PER_THREAD if parallel else 1)
        if not parallel:
            results = [one(r) for r in runs]
        elif max_workers is None:
            results = map_in_pool(one, runs)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hoodie-read") as ex:
                results = list(ex.map(one, runs))
        parts = [t for r in results for t in r]
        if not parts:
            return self.schema.empty_table()
        return pa.concat_tables(parts)


#: A filtered read's rows are filtered a batch of slices at a time, up to this many rows:
#: each Arrow call on a small slice's rows costs its fixed share (a lookup's 48 slices of
#: 2,000 rows: 26-28 -> 20-21 ms read), and the held rows stay bounded.
FILTER_BATCH_ROWS = 1 << 16
#: Runs of consecutive slices a reading thread takes in turn (the pool balances them).
RUNS_PER_THREAD = 4


def _slice_runs(slices: Sequence[SliceSpec], n: int) -> list[Sequence[SliceSpec]]:
    """``slices`` cut into runs of consecutive slices, at least ``n`` of them where there are
    as many slices (rounding the run down: one run more rather than a thread's extra
    slices)."""
    size = max(1, len(slices) // max(1, n))
    return [slices[i : i + size] for i in range(0, len(slices), size)]


def read_table(
    path: str,
    query_type: str = "snapshot",
    as_of: str | _dt.datetime | None = None,
    begin: str | _dt.datetime | None = None,
    end: str | _dt.datetime | None = None,
    columns: Sequence[str] | None = None,
    filters: Iterable[Sequence[Any]] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    *,
    incremental_format: str = "latest_state",
    cdc_image_format: str = "struct",
) -> pa.Table:
    """Read a Hudi table (merge-on-read view) into a ``pyarrow.Table``.

    Args:
        path: the table's base path (local, ``file://``, ``s3://``...).
        query_type: ``"snapshot"`` (default), ``"read_optimized"`` (base files only) or
            ``"incremental"`` (records committed in ``(begin, end]``).
        as_of: snapshot / read-optimized time travel: an instant time of the timeline
            (``yyyyMMddHHmmssSSS``), a ``datetime`` or an ISO-8601 string (UTC if naive).
        begin: incremental start, exclusive (default: the beginning of the table).
        end: incremental end, inclusive (default: the latest commit).
        columns: columns to return, in this order (default: every column of the table).
        filters: ``(field, op, value)`` tuples combined with AND; ops ``=``, ``!=``, ``<``,
            ``<=``, ``>``, ``>=``, ``IN``, ``NOT IN``. Partition filters prune partitions.
        storage_options: credentials/endpoint for object stores.
        incremental_format: ``"latest_state"`` (default: the records as the range left them),
            ``"cdc"`` (Hudi's CDC query: one row per change, columns ``op``, ``ts_ms``,
            ``before``, ``after``; see :mod:`hoodie_ray.reader.cdc`; ``begin``/``end``
            compare requested instant times, as Java's CDC query does) or ``"changelog"``
            (every record the range wrote, unmerged, with its ``_hoodie_operation``: ``I``,
            ``-U``, ``U``, ``D``; what a ``changelog.enabled`` writer kept, as Flink's
            streaming read emits it; file slice by file slice, each in write order).
        cdc_image_format: ``"struct"`` (``before``/``after`` typed as the table's data
            columns) or ``"json"`` (Hudi's JSON strings).

    Returns:
        The rows, with the table's column types (meta columns first when the table has them).

    Raises:
        HoodieTableNotFoundError: ``path`` holds no Hudi table.
        HoodieQueryError: unknown query type or column, bad filter, ``begin`` after ``end``,
            time travel to slices that were cleaned.
        HoodieTimelineError: ``as_of`` is not an instant of the timeline.

    Example::

        import hoodie_ray as hr
        t = hr.read("/data/trips", filters=[("city", "=", "sf")], columns=["uuid", "fare"])
        changes = hr.read("/data/trips", query_type="incremental", begin="20250101000000000")
        cdc = hr.read("/data/trips", query_type="incremental", incremental_format="cdc",
                      begin="20250101000000000")
    """
    fmt = _incremental_format(incremental_format)
    if fmt == "cdc":
        return _read_cdc(
            path, query_type, as_of, begin, end, columns, filters, storage_options, cdc_image_format
        )
    plan = plan_file_slices(
        path,
        query_type,
        as_of,
        begin,
        end,
        columns,
        filters,
        storage_options,
        changelog=fmt == "changelog",
    )
    return plan.read_all()


#: ``incremental_format`` values: Hudi's ``hoodie.datasource.query.incremental.format``
#: (``latest_state``, ``cdc``) and ``changelog``, the unmerged records of the range with their
#: ``_hoodie_operation`` (what Flink's streaming read of a ``changelog.enabled`` table emits).
INCREMENTAL_FORMATS = ("latest_state", "cdc", "changelog")


def _incremental_format(fmt: str) -> str:
    key = fmt.strip().lower() if isinstance(fmt, str) else None
    if key not in INCREMENTAL_FORMATS:
        raise HoodieQueryError(
            f"unknown incremental_format {fmt!r}; use one of "
            + ", ".join(repr(f) for f in INCREMENTAL_FORMATS)
        )
    return key


def _read_cdc(
    path: str,
    query_type: str,
    as_of: Any,
    begin: Any,
    end: Any,
    columns: Sequence[str] | None,
    filters: Iterable[Sequence[Any]] | None,
    storage_options: Mapping[str, Any] | None,
    image_format: str,
) -> pa.Table:
    """A CDC read (``incremental_format="cdc"``): every change of the range's commits."""
    from hoodie_ray.reader.cdc import read_cdc

    if _query_type(query_type) != "incremental":
        raise HoodieQueryError(
            f'incremental_format="cdc" is for incremental queries, not {query_type!r}'
        )
    if as_of is not None or columns is not None or filters is not None:
        raise HoodieQueryError(
            "a CDC read returns every change of the range: as_of, columns and filters do not "
            "apply (filter the returned rows)"
        )
    tbl = HoodieTable.load(path, storage_options)
    start, stop = cdc_range(tbl, begin, end)
    return read_cdc(tbl, start, stop, image_format)


def cdc_range(tbl: HoodieTable, begin: Any, end: Any) -> tuple[str | None, str | None]:
    """A CDC read's ``(begin, end]`` as instant times, checked (in order, not archived)."""
    start = _timestamp(begin, "begin") if begin is not None else None
    stop = _timestamp(end, "end") if end is not None else None
    if start is not None and stop is not None and start > stop:
        raise HoodieQueryError(f"begin {start} is after end {stop}")
    _check_not_archived(tbl, start)
    return start, stop


#: ``hr.read``: the same function.
read = read_table


def plan_file_slices(
    path: str | HoodieTable,
    query_type: str = "snapshot",
    as_of: str | _dt.datetime | None = None,
    begin: str | _dt.datetime | None = None,
    end: str | _dt.datetime | None = None,
    columns: Sequence[str] | None = None,
    filters: Iterable[Sequence[Any]] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    batch_rows: int | None = None,
    changelog: bool = False,
) -> ReadPlan:
    """Plan a query: the file slices it reads and the :class:`ReadContext` to read them.

    Same arguments and errors as :func:`read_table` (``changelog``: the incremental query
    reads ``incremental_format="changelog"``). Each slice is read independently with
    ``read_file_slice(plan.context, slice)`` (both arguments are picklable).
    """
    qt = _query_type(query_type)
    if changelog and qt != "incremental":
        raise HoodieQueryError(
            f'incremental_format="changelog" is for incremental queries, not {query_type!r}'
        )
    tbl = path if isinstance(path, HoodieTable) else HoodieTable.load(path, storage_options)
    if qt == "incremental":
        if as_of is not None:
            raise HoodieQueryError(
                "as_of is for snapshot / read_optimized queries, not incremental"
            )
    elif begin is not None or end is not None:
        raise HoodieQueryError(f"begin/end are for incremental queries, not {qt}")
    schema = tbl.schema
    if schema is None:
        if columns:
            raise HoodieQueryError(f"unknown column(s) {list(columns)}: the table has no schema")
        ctx = _Query(tbl, qt, pa.schema([]), columns, [], batch_rows).context(None)
        return ReadPlan(qt, ctx, [], None)
    if changelog and OPERATION not in schema.names:
        # a table whose commits do not name it (Java's): its files may hold it all the same
        at = schema.get_field_index(FILE_NAME) + 1 if FILE_NAME in schema.names else 0
        schema = schema.insert(at, pa.field(OPERATION, pa.string()))
    query = _Query(tbl, qt, schema, columns, parse_filters(filters, schema), batch_rows, changelog)
    if qt == "incremental":
        return _plan_incremental(query, begin, end)
    return _plan_snapshot(query, as_of)


@dataclass(frozen=True)
class _Query:
    """What every plan reads: the table, the query type, its schema, columns and filters."""

    tbl: HoodieTable
    qt: str
    schema: pa.Schema
    columns: Sequence[str] | None
    filters: list[Filter]
    batch_rows: int | None
    changelog: bool = False

    def context(
        self, end_instant: str | None, instant_range: InstantRange | None = None
    ) -> ReadContext:
        """The query's :class:`ReadContext`: the output columns, plus the columns its filters
        and (merging queries) the merge read."""
        out_cols = _output_columns(self.schema, self.columns)
        needed = set(out_cols) | {f.field for f in self.filters}
        if self.tbl.table_config.populate_meta_fields and self.qt != "read_optimized":
            needed |= merge_columns(self.tbl, self.schema)
            if instant_range is not None:
                needed.add(COMMIT_TIME)
            if self.changelog:
                needed |= {RECORD_KEY, PARTITION_PATH, OPERATION}
        return ReadContext.of_table(
            self.tbl,
            pa.schema([f for f in self.schema if f.name in needed]),
            out_cols,
            filters=tuple(self.filters),
            end_instant=end_instant,
            instant_range=instant_range,
            read_optimized=self.qt == "read_optimized",
            batch_rows=self.batch_rows,
            changelog=self.changelog,
        )


def _plan_incremental(
    query: _Query, begin: str | _dt.datetime | None, end: str | _dt.datetime | None
) -> ReadPlan:
    """Records committed in ``(begin, end]``: the file groups the range's commits wrote."""
    tbl = query.tbl
    start = _timestamp(begin, "begin") if begin is not None else None
    stop = _timestamp(end, "end") if end is not None else None
    if start is not None and stop is not None and start > stop:
        raise HoodieQueryError(f"begin {start} is after end {stop}")
    if stop is None:
        stop = _latest_position(tbl)
    _check_not_archived(tbl, start)
    slicing = tbl.completion_time_slicing
    rng = InstantRange(start, stop, tbl.completion_map() if slicing else None)
    ctx = query.context(None if slicing else stop, rng)
    slices = [] if stop is None else _incremental_slices(tbl, rng)
    retention.check_files_kept(tbl, slices, rng)
    if end is not None and stop is not None and tbl.savepoint_may_stand_in():
        # a savepoint's older slice may stand where the one as of the end was cleaned
        stale = retention.stale_slice(tbl, retention.requested_time(tbl, stop), slices)
        if stale is not None:
            raise HoodieQueryError(
                f"an incremental read up to {stop} is not possible: {stale}; read a later "
                "range, or keep more commits (hoodie.cleaner.commits.retained)"
            )
    slices = _prune_partitions(tbl, slices, query.filters, query.schema)
    return ReadPlan(query.qt, ctx, slices, stop)


def _plan_snapshot(query: _Query, as_of: str | _dt.datetime | None) -> ReadPlan:
    """Snapshot and read-optimized plans: the latest slices as of the query instant (the
    latest commit, or ``as_of``), pruned by partition and by column statistics."""
    tbl = query.tbl
    commits = tbl.commits()
    query_instant = None
    if as_of is not None:
        query_instant = _resolve_as_of(tbl, as_of)
    elif commits:
        query_instant = commits[-1].timestamp
    ctx = query.context(query_instant)
    if query_instant is None:
        return ReadPlan(query.qt, ctx, [], None)
    slices = _snapshot_slices(tbl, query_instant, check_cleaned=as_of is not None)
    stats: dict[str, Any] = {"file_groups_total": len(slices), "pruned_by": []}

    def pruned(name: str, before: int) -> None:
        if len(slices) < before:
            stats["pruned_by"].append(name)

    n = len(slices)
    slices = _prune_partitions(tbl, slices, query.filters, query.schema)
    pruned("partition", n)
    n = len(slices)
    # statistics first: an index lookup is weighed against the scan they leave
    slices = _prune_by_column_stats(tbl, slices, query.filters)
    pruned("column_stats", n)
    latest = as_of is None and query.qt == "snapshot"
    slices = _prune_by_record_index(tbl, slices, query, latest, stats)
    if "record_index" in stats:
        stats["pruned_by"].append("record_index")  # a lookup decides even when all match
    else:
        slices = _prune_by_secondary_index(tbl, slices, query, latest, stats)
        if "secondary_index" in stats:
            stats["pruned_by"].append("secondary_index")
    stats["file_groups_planned"] = len(slices)
    if query.qt == "read_optimized":
        slices = [
            SliceSpec(s.partition_path, s.file_id, s.base_instant, s.base_file, ())
            for s in slices
            if s.base_file
        ]
    return ReadPlan(query.qt, ctx, slices, query_instant, stats)


# -- argument handling ---------------------------------------------------------------------------


def _query_type(q: str) -> str:
    key = q.strip().lower() if isinstance(q, str) else None
    if key not in _QUERY_ALIASES:
        raise HoodieQueryError(
            f"unknown query type {q!r}; use one of {', '.join(repr(t) for t in QUERY_TYPES)}"
        )
    return _QUERY_ALIASES[key]


def _timestamp(value: str | _dt.datetime | int, what: str) -> str:
    """An instant-time string ``yyyyMMddHHmmssSSS`` (or the 14-digit legacy form) for ``value``."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return format_instant_time(value)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise HoodieQueryError(
            f"{what} must be an instant time string or a datetime, got {value!r}"
        )
    v = value.strip()
    if _DIGITS.match(v):
        if len(v) in (14, 17) or v.strip("0") == "":
            return v
        raise HoodieQueryError(f"{what}={v!r} is not an instant time (yyyyMMddHHmmssSSS)")
    try:
        dt = _dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        raise HoodieQueryError(
            f"{what}={v!r} is neither an instant time (yyyyMMddHHmmssSSS) nor an ISO-8601 time"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_dt.timezone.utc)
    return format_instant_time(dt)


def _check_not_archived(tbl: HoodieTable, begin: str | None) -> None:
    """An incremental query may not reach back into archived instants: their commit
    metadata, which names the files they wrote, has left the active timeline."""
    commits = tbl.commits()
    first = commits[0].timestamp if commits else None
    if first is None or (begin is not None and begin >= first):
        return
    arch = tbl.archived_timeline
    if isinstance(arch, LSMTimeline):
        # the archived range is in the history's file names (one manifest read)
        newest = max((hi for _, hi in arch.file_ranges()), default=None)
        if newest is None or (begin is not None and begin >= newest):
            return
    elif not arch.file_names():  # a version 6 archive holds everything before `first`
        return
    raise HoodieTimelineError(
        f"incremental query from {begin or 'the first commit'} reaches archived instants of "
        f"{tbl.base_uri}: the earliest active instant is {first}; begin at or after it, or "
        "read a snapshot"
    )


def _archived_hint(tbl: HoodieTable, ts: str, first: str | None) -> str:
    if first is not None and ts < first and tbl.has_archived_instants():
        return (
            f"; instants before {first}, the earliest active instant, are archived and time "
            "travel reads the active timeline only"
        )
    return ""


def _resolve_as_of(tbl: HoodieTable, as_of: str | _dt.datetime) -> str:
    """The query instant of a time travel.

    An exact instant time (digits) must be the requested or completion time of a completed
    instant of the active timeline; a ``datetime`` or ISO-8601 time may fall between instants
    but not before the first commit.
    """
    ts = _timestamp(as_of, "as_of")
    commits = tbl.commits()
    exact = isinstance(as_of, str) and _DIGITS.match(as_of.strip()) is not None
    if exact:
        completed = tbl.active_timeline.completed()
        if any(i.timestamp == ts or i.completion_time == ts for i in completed):
            if not commits or ts < commits[0].timestamp:
                raise HoodieTimelineError(
                    f"as_of {ts} is before the first commit on the active timeline of "
                    f"{tbl.base_uri}"
                    + _archived_hint(tbl, ts, commits[0].timestamp if commits else None)
                )
            return ts
        pending = [i for i in tbl.active_timeline.instants if i.timestamp == ts]
        if pending:
            raise HoodieTimelineError(
                f"as_of {ts}: instant {pending[0]} of {tbl.base_uri} is not completed"
            )
        first = commits[0].timestamp if commits else None
        raise HoodieTimelineError(
            f"as_of {ts} is not an instant on the active timeline of {tbl.base_uri}"
            + (
                f" (first commit: {commits[0].timestamp}, last: {commits[-1].timestamp})"
                if commits
                else ""
            )
            + _archived_hint(tbl, ts, first)
        )
    if not commits or ts < commits[0].timestamp:
        raise HoodieTimelineError(
            f"as_of {ts} is before the first commit on the active timeline of {tbl.base_uri}"
            + _archived_hint(tbl, ts, commits[0].timestamp if commits else None)
        )
    return ts


def _latest_position(tbl: HoodieTable) -> str | None:
    """The default end of an incremental query: the latest commit (its completion time in v8+)."""
    commits = tbl.commits()
    if not commits:
        return None
    if tbl.completion_time_slicing:
        return max(i.completion_time or i.timestamp for i in commits)
    return commits[-1].timestamp


def _output_columns(schema: pa.Schema, columns: Sequence[str] | None) -> tuple[str, ...]:
    """The columns a query returns: ``columns`` (checked against ``schema``), or all."""
    if columns is None:
        return tuple(schema.names)
    if isinstance(columns, str):
        columns = [columns]
    if not columns:
        # rows with no columns would not even keep their count: the merge reads the keys
        raise HoodieQueryError("columns is empty: name at least one column (None: all of them)")
    unknown = [c for c in columns if c not in schema.names]
    if unknown:
        raise HoodieQueryError(f"unknown column(s) {unknown}; columns: {', '.join(schema.names)}")
    if len(set(columns)) != len(columns):
        raise HoodieQueryError(f"duplicate column(s) in {list(columns)}")
    return tuple(columns)


def _prune_partitions(
    tbl: HoodieTable, slices: list[SliceSpec], filters: list[Filter], schema: pa.Schema
) -> list[SliceSpec]:
    cfg = tbl.table_config
    fields = cfg.partition_fields
    if not filters or not fields or cfg.keygen_type in ("TIMESTAMP", "CUSTOM", "UNKNOWN"):
        return slices
    if not any(f.field in fields for f in filters):
        return slices
    cache: dict[str, bool] = {}
    out = []
    for s in slices:
        ok = cache.get(s.partition_path)
        if ok is None:
            ok = cache[s.partition_path] = partition_may_match(
                filters, s.partition_path, fields, cfg.hive_style, cfg.url_encode, schema
            )
        if ok:
            out.append(s)
    return out


#: At most this many keys are looked up in the record index (IN lists, or the product of
#: several key fields' values); more fall back to the other pruning.
MAX_RECORD_INDEX_LOOKUP_KEYS = 100_000


def record_key_lookup(
    tbl: HoodieTable, filters: Sequence[Filter], schema: pa.Schema
) -> tuple[list[str] | None, str]:
    """The record keys a query's filters pin down, or None and why not.

    A simple key needs ``=`` or ``IN`` on its field; a complex key (``ComplexKeyGenerator``,
    several key fields) ``=`` / ``IN`` on every key field, whose values combine into keys
    ``f1:v1,f2:v2`` as the writer builds them (``KeyGenerator.record_keys``). Values are the
    filters' own, cast to the column type, so they stringify as the written keys did."""
    from hoodie_ray.keygen import KeyGenerator

    cfg = tbl.table_config
    fields = cfg.record_key_fields
    if not fields or not cfg.populate_meta_fields:
        return None, "the table has no record key fields"
    kg_type = cfg.keygen_type
    if kg_type in ("CUSTOM", "UNKNOWN"):
        return None, f"key generator {kg_type} is not supported for record-key lookups"
    if kg_type is None:
        kg_type = "COMPLEX" if len(fields) > 1 or len(cfg.partition_fields) > 1 else "SIMPLE"
    if kg_type == "COMPLEX" and len(fields) == 1:
        # writers disagree on the key of one complex field ("f:v" or "v", HUDI-7001)
        return None, "a complex key generator over one record key field"
    kg = KeyGenerator(
        "COMPLEX" if kg_type == "COMPLEX" else "SIMPLE", tuple(fields), (), False, False
    )
    values: dict[str, list[Any]] = {}
    for f in filters:
        if f.field in fields and f.field not in values and f.op in ("=", "IN"):
            vals = [f.value] if f.op == "=" else list(f.value)
            # a complex key writes a null field as "__null__"; a simple key is never null
            values[f.field] = vals if kg.complex_key else [v for v in vals if v.is_valid]
    missing = [k for k in fields if k not in values]
    if missing:
        return None, f"no = / IN filter on record key field(s) {', '.join(missing)}"
    total = 1
    for k in fields:
        total *= len(values[k])
    if total > MAX_RECORD_INDEX_LOOKUP_KEYS:
        return None, f"{total} keys to look up (more than {MAX_RECORD_INDEX_LOOKUP_KEYS})"
    if total == 0:
        return [], ""
    import itertools

    combos = list(itertools.product(*(values[k] for k in fields)))
    if kg.complex_key:
        # keys of fields all null or empty are refused by the writer: none to look up
        combos = [c for c in combos if any(v.is_valid and v.as_py() != "" for v in c)]
        if not combos:
            return [], ""
    cols = {k: pa.array([c[i] for c in combos], schema.field(k).type) for i, k in enumerate(fields)}
    try:
        keys = kg.record_keys(pa.table(cols))
    except HoodieQueryError:
        raise
    except Exception as e:  # a value no written key can have (an empty simple key...)
        return None, f"the filter values make no record key: {e}"
    return sorted(set(keys.to_pylist())), ""


def _prune_by_record_index(
    tbl: HoodieTable,
    slices: list[SliceSpec],
    query: _Query,
    latest: bool,
    stats: dict[str, Any],
) -> list[SliceSpec]:
    """Point lookups: keep only the file groups the metadata table's record index names for
    the record keys the filters pin down (none when no key is indexed). The index describes
    the latest snapshot, so time travel, incremental and tables without it scan as before;
    ``stats`` records the lookup or why it was skipped."""
    if not query.filters or not slices:
        return slices
    if not (tbl.uses_metadata_table and RECORD_INDEX in tbl.metadata_partitions):
        if any(f.field in tbl.table_config.record_key_fields for f in query.filters):
            stats["record_index_skipped"] = "the table keeps no record index"
        return slices
    keys, why = record_key_lookup(tbl, query.filters, query.schema)
    if keys is None:
        stats["record_index_skipped"] = why
        return slices
    if not latest:
        stats["record_index_skipped"] = (
            "not a snapshot of the latest commit (the index locates each key's latest copy)"
        )
        return slices
    located: dict[str, tuple[str, str]] = {}
    if keys:
        lookup = tbl.metadata_table.refresh().record_index_lookup(keys)
        cost = LookupCost.of(
            "record_index", len(keys), lookup.blocks, [s.size_bytes for s in slices]
        )
        stats["lookup_cost"] = cost.as_dict()
        if not cost.use_index:
            stats["record_index_skipped"] = cost.describe()
            return slices
        located = lookup.locations()
    groups = set(located.values())
    stats["record_index"] = {"keys": len(keys), "found": len(located)}
    return [s for s in slices if (s.partition_path, s.file_id) in groups]


def _secondary_index_of(tbl: HoodieTable, fields: set[str]) -> dict[str, IndexDefinition]:
    """Filtered field -> the secondary index over it (its definition; its name is its MDT
    partition), for the table's completed secondary indexes with a one-field definition."""
    from hoodie_ray.metadata.layout import INDEX_DEFS_PROPERTY, SECONDARY_INDEX_PREFIX
    from hoodie_ray.metadata.secondary_index import index_definitions

    built = [p for p in tbl.metadata_partitions if p.startswith(SECONDARY_INDEX_PREFIX)]
    if not built:
        return {}
    rel = tbl.table_config.props.get(INDEX_DEFS_PROPERTY, "").strip()
    out: dict[str, IndexDefinition] = {}
    for name, d in index_definitions(tbl.storage, rel).items():
        one = d.source_fields[0] if len(d.source_fields) == 1 else None
        if name in built and d.is_secondary and one in fields:
            out.setdefault(str(one), d)
    return out


#: The secondary-index definition version whose keys for a null value are not confirmed.
NULL_UNKNOWN_VERSION = "V1"


def _prune_by_secondary_index(
    tbl: HoodieTable,
    slices: list[SliceSpec],
    query: _Query,
    latest: bool,
    stats: dict[str, Any],
) -> list[SliceSpec]:
    """Lookups by an indexed column: ``=`` / ``IN`` on the field of a secondary index names
    the record keys that hold those values (the index's entries), and the record index
    names their file groups: only those are planned. Like the record index, it describes
    the latest snapshot; ``stats`` records the lookup or why it was skipped."""
    from hoodie_ray.metadata.secondary_index import java_strings

    if not query.filters or not slices or not tbl.uses_metadata_table:
        return slices
    eq = [f for f in query.filters if f.op in ("=", "IN")]
    index_of = _secondary_index_of(tbl, {f.field for f in eq})
    # Version 2 indexes key a null value as the NUL character (the Java v9 sample); what
    # version 1 did with nulls is not confirmed: an IN list holding a null is scanned there
    chosen = next(
        (
            f
            for f in eq
            if f.field in index_of
            and (not f.matches_null or index_of[f.field].version != NULL_UNKNOWN_VERSION)
        ),
        None,
    )
    if chosen is None:
        if any(f.field in index_of for f in eq):
            stats["secondary_index_skipped"] = (
                "the values include a null, which a version 1 index may not hold"
            )
        return slices
    part = index_of[chosen.field].index_name
    if not latest:
        stats["secondary_index_skipped"] = (
            "not a snapshot of the latest commit (the index describes the latest one)"
        )
        return slices
    if RECORD_INDEX not in tbl.metadata_partitions:
        stats["secondary_index_skipped"] = "the table keeps no record index to locate the keys"
        return slices
    values = (
        chosen.value if chosen.op == "IN" else pa.array([chosen.value.as_py()], chosen.value.type)
    )
    if len(values) > MAX_RECORD_INDEX_LOOKUP_KEYS:
        stats["secondary_index_skipped"] = f"{len(values)} values to look up"
        return slices
    mdt = tbl.metadata_table.refresh()
    sizes = [s.size_bytes for s in slices]
    si_lookup = mdt.secondary_index_lookup(part, java_strings(values, chosen.field))
    # each value names at least one file group: no cheaper than that, the index loses
    floor = LookupCost.of(part, len(values), si_lookup.blocks, sizes)
    if not floor.use_index:
        stats["lookup_cost"] = floor.as_dict()
        stats["secondary_index_skipped"] = floor.describe()
        return slices
    keys = si_lookup.record_keys()
    if len(keys) > MAX_RECORD_INDEX_LOOKUP_KEYS:
        stats["secondary_index_skipped"] = f"{len(keys)} record keys to locate"
        return slices
    located: dict[str, tuple[str, str]] = {}
    if keys:
        ri_lookup = mdt.record_index_lookup(keys)
        # what is left to read once the secondary index is read
        cost = LookupCost.of(part, len(keys), ri_lookup.blocks, sizes)
        stats["lookup_cost"] = cost.as_dict()
        if not cost.use_index:
            stats["secondary_index_skipped"] = cost.describe()
            return slices
        located = ri_lookup.locations()
    groups = set(located.values())
    stats["secondary_index"] = {
        "index": part,
        "field": chosen.field,
        "values": len(values),
        "keys": len(keys),
        "found": len(located),
    }
    return [s for s in slices if (s.partition_path, s.file_id) in groups]


def _prune_by_column_stats(
    tbl: HoodieTable, slices: list[SliceSpec], filters: list[Filter]
) -> list[SliceSpec]:
    """Drop file slices the metadata table's column statistics rule out: a merged record comes
    from one of the slice's files, so a slice none of whose files (base or log) holds a value
    a filter accepts holds no matching record. Files without statistics are kept."""
    if not filters or not slices or not tbl.uses_metadata_table:
        return slices
    if COLUMN_STATS not in tbl.metadata_partitions:
        return slices
    wanted = [
        (s.partition_path, n, f.field)
        for s in slices
        for n in ([s.base_file] if s.base_file else []) + list(s.log_files)
        for f in filters
    ]
    ranges = tbl.metadata_table.column_ranges(wanted)
    out = []
    for s in slices:
        names = ([s.base_file] if s.base_file else []) + list(s.log_files)
        keep = True
        for f in filters:
            if not any(
                (s.partition_path, n, f.field) not in ranges
                or f.may_match(*ranges[(s.partition_path, n, f.field)])
                for n in names
            ):
                keep = False
                break
        if keep:
            out.append(s)
    return out


# -- snapshot slices -----------------------------------------------------------------------------


#: The latest slices of recent snapshot plans of tables listed through their metadata
#: table, by what decides them (see _view_key): a process reading one table again (a
#: dashboard, a lookup service, a stream's polls) groups its files once per table state, as
#: Hudi's Java keeps its file-system view per meta client. Such a listing follows from the
#: two timelines alone; a storage listing also sees files no commit names, so it is not kept.
VIEW_SLICES = SizedLru(32 << 20, max_entry=8 << 20)
_SLICE_BYTES = 256  # a SliceSpec with its names, about
_INSTANT_BYTES = 200  # an instant's tuple in a key, about


def _options_key(options: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """Storage options as a key: secrets masked, and only values that print the same each
    time (an object's repr may not, which would make a key per read)."""
    plain = {k: v for k, v in (options or {}).items() if isinstance(v, str | int | float | bool)}
    return tuple(sorted(redact_options(plain).items()))


def _view_key(tbl: HoodieTable, query_instant: str) -> tuple[Any, ...]:
    """What the latest slices as of ``query_instant`` follow from on a table listed through
    its metadata table: the storage, the table's layout and the two timelines."""
    cfg = tbl.table_config
    mdt = tbl.metadata_table.refresh().timeline
    return (
        type(tbl.storage).__name__,
        tbl.storage.base_uri,
        _options_key(tbl.storage_options),
        cfg.table_version,
        tuple(cfg.partition_fields),
        str(getattr(cfg, "base_file_format", "") or ""),
        query_instant,
        tbl.active_timeline.state_key(),
        mdt.state_key(),
    )


def _view_slices(tbl: HoodieTable, query_instant: str, keep: bool = False) -> list[SliceSpec]:
    """The latest slices as of ``query_instant``; ``keep``: through :data:`VIEW_SLICES`
    where the metadata table lists the files (and only for the latest commit: the cleaner
    never removes its slices' files, while an older instant's may go before its clean
    completes)."""
    key = _view_key(tbl, query_instant) if keep and tbl.uses_metadata_table else None
    kept = VIEW_SLICES.get(key) if key is not None else None
    if kept is None:
        # listed through the metadata table when the table keeps one (refreshed by the key)
        view = tbl.view(refresh_metadata=key is None)
        kept = tuple(SliceSpec.of(s) for s in view.latest_file_slices(as_of=query_instant))
        if key is not None:
            instants = len(key[-1]) + len(key[-2])
            VIEW_SLICES.put(key, kept, _SLICE_BYTES * (len(kept) + 1) + _INSTANT_BYTES * instants)
    return list(kept)


def _snapshot_slices(tbl: HoodieTable, query_instant: str, check_cleaned: bool) -> list[SliceSpec]:
    if check_cleaned:
        retention.check_retained(tbl, query_instant, "time travel to")
    slices = _view_slices(tbl, query_instant, keep=not check_cleaned)
    if check_cleaned:
        retention.check_not_cleaned(tbl, query_instant, slices)
    return sorted(slices, key=lambda s: (s.partition_path, s.file_id))


# -- incremental slices --------------------------------------------------------------------------


@dataclass
class _Group:
    partition_path: str
    file_id: str
    bases: dict[str, str] = field(default_factory=dict)  # base instant -> file name
    logs: set[str] = field(default_factory=set)


def _incremental_slices(tbl: HoodieTable, rng: InstantRange) -> list[SliceSpec]:
    """hudi-rs 0.5.0's incremental file slices: file groups named by the write stats of the
    commits in the range (minus groups replaced in the range), each at its latest slice."""
    commits = [i for i in tbl.commits() if rng.contains(i.timestamp)]
    groups: dict[tuple[str, str], _Group] = {}
    replaced: set[tuple[str, str]] = set()
    for inst in commits:
        meta = tbl.metadata(inst)
        for part, stat in meta.iter_write_stats():
            if not stat.file_id:
                raise HoodieCorruptedDataError(
                    f"commit metadata of instant {inst.timestamp}: a write stat has no fileId"
                )
            g = groups.setdefault((part, stat.file_id), _Group(part, stat.file_id))
            if stat.base_file:
                _add_base(g, stat.base_file)
                for name in stat.log_files or []:
                    g.logs.add(name)
            else:
                fname = stat.file_name
                if not fname:
                    raise HoodieCorruptedDataError(
                        f"commit metadata of instant {inst.timestamp}: a write stat has no path"
                    )
                if fname.startswith("."):
                    g.logs.add(fname)
                    for extra in stat.log_files or []:
                        g.logs.add(extra)
                else:
                    _add_base(g, fname)
        if inst.action == Action.REPLACE_COMMIT:
            for part, ids in meta.replaced_file_ids().items():
                replaced.update((part, i) for i in ids)
    completion = tbl.completion_map() if tbl.completion_time_slicing else None
    keys = sorted(k for k in groups if k not in replaced)
    listed = _listed_slices(tbl, keys, rng.end, completion)
    out: list[SliceSpec] = []
    for key in keys:
        s = listed.get(key) or _latest_slice(groups[key], rng.end, completion)
        if s is not None:
            out.append(s)
    return out


def _listed_slices(
    tbl: HoodieTable,
    keys: list[tuple[str, str]],
    end: str | None,
    completion: dict[str, str] | None,
) -> dict[tuple[str, str], SliceSpec]:
    """The storage view's slice of each file group at the end of an incremental range.

    Files are visible when their instant is at or before ``end`` -- by completion time for
    table versions 8+. Reading the listed slice (not only the files the write stats name) lets
    a rollback block written later remove its target, as hudi-rs does.
    """
    if not keys or end is None:
        return {}
    view = tbl.view()
    parts = sorted({p for p, _ in keys})
    wanted = set(keys)
    out: dict[tuple[str, str], SliceSpec] = {}
    groups = view.all_file_groups(
        parts, as_of=None if completion is not None else end, include_replaced=True
    )
    for fg in groups:
        key = (fg.partition_path, fg.file_id)
        if key not in wanted:
            continue
        if completion is None:
            s = fg.latest_slice(end)
            if s is not None and not s.is_empty:
                out[key] = SliceSpec.of(s)
            continue

        def visible(ts: str) -> bool:
            return completion.get(ts, ts) <= end

        cands = [k for k in fg.slices if visible(k)]
        if not cands:
            continue
        s = fg.slices[max(cands)]
        logs = []
        for name in s.log_files:
            parsed = parse_log_file_name(name)
            if parsed is not None and visible(parsed.instant):
                logs.append(name)
        base = s.base_file if s.base_file and visible(s.base_instant) else None
        if base or logs:
            out[key] = SliceSpec(s.partition_path, s.file_id, s.base_instant, base, tuple(logs))
    return out


def _add_base(g: _Group, name: str) -> None:
    parsed = parse_base_file_name(name)
    if parsed is None:
        raise HoodieCorruptedDataError(
            f"commit metadata names a base file {name!r} that does not parse"
        )
    g.bases[parsed.instant] = name


def _latest_slice(
    g: _Group, end: str | None, completion: dict[str, str] | None
) -> SliceSpec | None:
    logs = []
    for name in g.logs:
        parsed = parse_log_file_name(name)
        if parsed is None or parsed.is_cdc:
            continue
        ts = parsed.instant
        pos = completion.get(ts, ts) if completion is not None else ts
        logs.append(((pos, parsed.version, parsed.write_token), ts, name))
    logs.sort()
    bases = sorted(b for b in g.bases if end is None or b <= end)
    if not bases:
        if not logs:
            return None
        return SliceSpec(g.partition_path, g.file_id, logs[0][1], None, tuple(n for *_k, n in logs))
    base = bases[-1]
    if completion is not None:
        mine = [n for (k, _ts, n) in logs if k[0] >= base]
    else:
        # A v6 log file belongs to the slice with the largest base instant <= its instant.
        mine = [
            n for (_k, ts, n) in logs if max((b for b in bases if b <= ts), default=None) == base
        ]
    return SliceSpec(g.partition_path, g.file_id, base, g.bases[base], tuple(mine))
