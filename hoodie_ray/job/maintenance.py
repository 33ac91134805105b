"""Table maintenance run on its own: the table services (compaction, cleaning, archival) and
the metadata table's, outside a write job.

Single writer (the default): each takes the table's writer lock for its whole run, so it never
runs beside a live writer. Under optimistic concurrency control
(``hoodie.write.concurrency.mode=optimistic_concurrency_control``, as the table's writers are
configured) they run beside live writers, as Hudi's async table services do: the lock is taken
only in short turns -- a compaction is scheduled in one (over completed writes only), executed
without it and committed in another; a clean (after rolling back writes whose heartbeat
expired) and an archival each take one -- and a compaction's instant heartbeats while it runs,
so no writer or other service runs it too. The services are
the ones writers run after their commits (one definition: ``CompactionService``,
``compaction/clean.py``, ``job/archival.py``); each returns a small result saying what it did,
or with ``dry_run`` what it would do (then nothing is written).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from hoodie_ray.compaction.api import CompactionService, Executor, local_executor
from hoodie_ray.compaction.clean import (
    earliest_commit_to_retain,
    files_to_clean,
    finish_pending_cleans,
)
from hoodie_ray.compaction.clustering import ClusteringExecutor, cluster_table
from hoodie_ray.compaction.execute import CompactionTask
from hoodie_ray.config.options import WriteConfig, resolve_options
from hoodie_ray.config.table_config import BUCKET_NUM_PROPERTY
from hoodie_ray.exceptions import (
    HoodieCompactionError,
    HoodieError,
    HoodieInputError,
    HoodieOptionError,
    HoodieUnsupportedError,
)
from hoodie_ray.job.archival import archivable_instants, archive_table, nothing_to_archive_reason
from hoodie_ray.job.savepoint import check_no_pending_restore
from hoodie_ray.meta import RECORD_KEY
from hoodie_ray.metadata.layout import FILES, RECORD_INDEX
from hoodie_ray.metadata_writer.validate import (
    MetadataDifference,
    record_index_differences,
    validate_metadata_table,
)
from hoodie_ray.metadata_writer.writer import (
    MetadataWriteConfig,
    check_metadata_table_writable,
    metadata_writer,
)
from hoodie_ray.reader.index_bootstrap import bootstrap_entries
from hoodie_ray.storage import Storage
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat
from hoodie_ray.timeline.plans import HoodieCompactionPlan
from hoodie_ray.write.commit import CommitProtocol
from hoodie_ray.write.heartbeat import HeartbeatClient
from hoodie_ray.write.lock import TableLock
from hoodie_ray.write.lock_providers import open_lock

__all__ = [
    "ArchiveResult",
    "CleanResult",
    "CompactionResult",
    "CompactionSlice",
    "archive",
    "clean",
    "compact",
    "drop_compaction",
    "drop_metadata",
    "init_metadata",
    "run_compaction",
    "schedule_compaction",
    "validate_metadata",
]


# -- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionSlice:
    """One file slice of a compaction plan: the base file (None for a log-only group) and the
    log files merged into the group's new base file."""

    partition_path: str
    file_id: str
    base_instant: str
    base_file: str | None
    log_files: tuple[str, ...]


@dataclass(frozen=True)
class CompactionResult:
    """What :func:`compact` did, or would do (``dry_run``).

    Attributes:
        instant: the compaction instant run (a pending plan's, or the one this call scheduled);
            None when there was nothing to compact, and in a dry run that would schedule a new
            plan (its instant is chosen when it is written).
        slices: the plan's file slices (empty: nothing to compact).
        scheduled: the plan is new (scheduled by this call, or in a dry run it would be), not a
            pending one.
        dry_run: nothing was written.
    """

    instant: str | None
    slices: tuple[CompactionSlice, ...] = ()
    scheduled: bool = False
    dry_run: bool = False


@dataclass(frozen=True)
class ClusteringResult:
    """What :func:`cluster` did, or would do (``dry_run``).

    Attributes:
        instant: the clustering's replacecommit; None when nothing was worth clustering, and
            in a dry run.
        groups: per group, the ``(partition, file id)`` of its input slices.
        files_written: the new base files (partition-relative paths).
        dry_run: nothing was written.
    """

    instant: str | None
    groups: tuple[tuple[tuple[str, str], ...], ...] = ()
    files_written: tuple[str, ...] = ()
    dry_run: bool = False

    @property
    def num_slices(self) -> int:
        return sum(len(g) for g in self.groups)


@dataclass(frozen=True)
class CleanResult:
    """What :func:`clean` deleted, or would delete (``dry_run``).

    Attributes:
        instant: the completed ``.clean`` instant; None when nothing was deleted, and in a
            dry run.
        earliest_commit_to_retain: the oldest commit whose file slices are kept (time travel
            to it still works); None when the table has no more than ``clean.retain_commits``
            commits.
        files: partition -> file names deleted (or that would be).
        failed: partition -> file names whose delete failed (they stay listed in the clean).
        finished: cleans a writer that died left pending, finished first.
        dry_run: nothing was deleted or written.
        rolled_back: pending writes whose heartbeat expired, rolled back first (optimistic
            concurrency control only).
    """

    instant: str | None
    earliest_commit_to_retain: str | None
    files: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, list[str]] = field(default_factory=dict)
    finished: tuple[str, ...] = ()
    dry_run: bool = False
    rolled_back: tuple[str, ...] = ()

    @property
    def num_files(self) -> int:
        """How many files were deleted (or would be)."""
        return sum(len(v) for v in self.files.values())


@dataclass(frozen=True)
class ArchiveResult:
    """What :func:`archive` moved, or would move (``dry_run``), from the active timeline to the
    archived one: ``instants`` as (instant time, action) pairs, oldest first."""

    instants: tuple[tuple[str, str], ...] = ()
    dry_run: bool = False
    reason: str = ""  # when no instant moves: why


def _lock(svc: CompactionService) -> TableLock:
    return open_lock(svc.storage, svc.wc)


class _ServiceLock:
    """The table lock as a table service holds it. Single writer: for the whole run (``with``);
    several writers (OCC): only for each :meth:`turn`, waiting while a writer's turn holds it
    (``hoodie.write.lock.wait_time_ms``)."""

    def __init__(self, storage: Storage, wc: WriteConfig) -> None:
        self.wc = wc
        self.lock = open_lock(storage, wc)

    def __enter__(self) -> _ServiceLock:
        if not self.wc.occ:
            self.lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.wc.occ:
            self.lock.release()

    @contextmanager
    def turn(self) -> Iterator[None]:
        if not self.wc.occ:
            self.lock.check()
            yield
            return
        self.lock.acquire_waiting(self.wc.lock_wait_ms)
        try:
            yield
        finally:
            self.lock.release()


@contextmanager
def _one_turn(storage: Storage, wc: WriteConfig, dry_run: bool) -> Iterator[None]:
    """One turn of the table's lock for a service (:class:`_ServiceLock`); none for a dry
    run, which writes nothing (taking the lock writes its file, or takes over a dead
    writer's)."""
    if dry_run:
        yield
        return
    with _ServiceLock(storage, wc) as turns, turns.turn():
        yield


def _not_restoring(table: HoodieTable) -> None:
    """A table service refuses a table a restore did not finish (as writers do): run now, it
    would bake the writes the restore is rolling back into new files (a compaction's base
    file kept them once the restore finished), or drop what the restore still needs."""
    table.active_timeline.reload()
    check_no_pending_restore(table)


def _heartbeats(storage: Storage, wc: WriteConfig) -> HeartbeatClient:
    return HeartbeatClient(storage, wc.heartbeat_interval_ms, wc.heartbeat_tolerable_misses)


def _slices(plan: HoodieCompactionPlan) -> tuple[CompactionSlice, ...]:
    return tuple(
        CompactionSlice(
            op.partition_path or "",
            op.file_id,
            op.base_instant_time,
            op.data_file_path,
            tuple(op.delta_file_paths or []),
        )
        for op in plan.operations or []
    )


# -- compaction ----------------------------------------------------------------------------------


def schedule_compaction(
    path: str, options: Any = None, storage_options: Any = None, force: bool = False
) -> str | None:
    """Schedule a compaction of the table at ``path``; the plan's instant, or None."""
    return CompactionService.open(path, options, storage_options).schedule(force=force)


def run_compaction(
    path: str,
    instant: str,
    options: Any = None,
    storage_options: Any = None,
    executor: Executor = local_executor,
) -> HoodieCommitMetadata:
    """Execute and commit the pending compaction ``instant``."""
    return CompactionService.open(path, options, storage_options).run(instant, executor)


def compact(
    path: str,
    options: dict[str, Any] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    executor: Executor | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    dry_run: bool = False,
) -> CompactionResult:
    """Compact the table now (offline): run the earliest pending plan, else schedule one and run it.

    ``on_progress(done, total)`` is called as file slices are compacted (for progress bars).

    Single writer: takes the table's writer lock for the whole run, so it never runs beside a
    live writer, and a table with a write in flight (a writer that died: its next writer rolls
    it back) gets no new plan, as after commits. Under optimistic concurrency control
    (``hoodie.write.concurrency.mode=optimistic_concurrency_control``) it runs beside live
    writers: the plan (over completed writes only) is scheduled in one short turn of the lock,
    executed without it and committed in another; a pending plan whose instant heartbeats
    (another process runs it) is left alone. ``executor`` runs the operations (default: one
    after another in this process; ``hr.compact(engine="ray")`` hands in a Ray one).
    ``dry_run``: only say which plan would run and its file slices (a new plan is built, not
    written).

    Example::

        hr.compact("/data/trips").instant
    """
    svc = CompactionService.open(path, options, storage_options)
    executor = executor or local_executor
    if on_progress is not None and not dry_run:
        executor = _reporting(executor, on_progress)
    if svc.wc.occ:
        return _compact_beside_writers(svc, executor, dry_run)
    with nullcontext() if dry_run else _lock(svc):
        _not_restoring(svc.table)
        pending = svc.pending()
        if pending:
            instant: str | None = pending[0]
            plan = svc.read_plan(pending[0])
        elif dry_run:
            new_plan = svc.plan(force=True)
            if new_plan is None:
                return CompactionResult(None, dry_run=True)
            return CompactionResult(None, _slices(new_plan), scheduled=True, dry_run=True)
        else:
            instant = svc.schedule(force=True)
            if instant is None:
                return CompactionResult(None)
            plan = svc.read_plan(instant)
        result = CompactionResult(instant, _slices(plan), scheduled=not pending, dry_run=dry_run)
        if dry_run:
            return result
        assert instant is not None
        svc.run(instant, executor)
        return result


def cluster(
    path: str,
    options: dict[str, Any] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    executor: ClusteringExecutor | None = None,
    dry_run: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> ClusteringResult:
    """Cluster the table now (:mod:`hoodie_ray.compaction.clustering`): its small file slices
    rewritten into fewer base files (sorted by
    ``hoodie.clustering.plan.strategy.sort.columns`` when set), committed as a replacecommit,
    under the table's writer lock for the whole run (never beside a live writer); a clustering
    that died is rolled back first. ``executor`` runs the groups (default: in this process;
    ``hr.cluster(engine="ray")`` hands in Ray tasks). ``dry_run``: only say which file slices
    a plan would rewrite. ``on_progress(done, total)`` is called as groups are rewritten.

    Example::

        hr.cluster("/data/trips", {"hoodie.clustering.plan.strategy.sort.columns": "ts"})
    """
    table = HoodieTable.load(path, storage_options)
    wc = resolve_options(options)
    with nullcontext() if dry_run else open_lock(table.storage, wc):  # a dry run writes none
        _not_restoring(table)
        if not dry_run:
            CommitProtocol(table).rollback_pending_writes()
        instant, plan, stats = cluster_table(table, wc, executor, dry_run, on_progress)
    groups = tuple(
        tuple((s.partition_path, s.file_id) for s in g.slices)
        for g in (plan.groups if plan else [])
    )
    return ClusteringResult(instant, groups, tuple(st.path or "" for st in stats), dry_run)


def _compact_beside_writers(
    svc: CompactionService, executor: Executor, dry_run: bool
) -> CompactionResult:
    """:func:`compact` beside live writers (OCC): schedule in one lock turn (a pending plan no
    live process runs, else a new plan over completed writes), execute without the lock, commit
    in another turn; the compaction instant heartbeats from its first turn to its end."""
    turns = _ServiceLock(svc.storage, svc.wc)
    hb = _heartbeats(svc.storage, svc.wc)
    instant: str | None = None
    try:
        with nullcontext() if dry_run else turns.turn():  # a dry run writes no lock file
            _not_restoring(svc.table)
            free = [p for p in svc.pending() if hb.is_expired(p)]
            if free:
                instant = free[0]
                plan = svc.read_plan(instant)
            elif dry_run:
                new_plan = svc.plan(force=True, beside_writes=True)
                if new_plan is None:
                    return CompactionResult(None, dry_run=True)
                return CompactionResult(None, _slices(new_plan), scheduled=True, dry_run=True)
            else:
                instant = svc.schedule(force=True, beside_writes=True)
                if instant is None:
                    return CompactionResult(None)
                plan = svc.read_plan(instant)
            result = CompactionResult(instant, _slices(plan), scheduled=not free, dry_run=dry_run)
            if dry_run:
                instant = None  # nothing of ours to stop
                return result
            hb.start(instant)
            tasks = svc.tasks(instant)
        try:
            stats = executor(tasks)
        except BaseException as e:
            with turns.turn():
                svc.rollback_inflight(instant)
            if isinstance(e, HoodieError):
                raise
            raise HoodieCompactionError(f"compaction {instant} of {svc.path} failed: {e}") from e
        with turns.turn():
            svc.commit(instant, stats)
        return result
    finally:
        if instant is not None:
            hb.stop(instant)
        hb.close()


def drop_compaction(
    path: str, instant: str, options: Any = None, storage_options: Any = None
) -> list[str]:
    """Drop the pending compaction plan ``instant`` of the table at ``path``, holding the
    table's writer lock (see :meth:`CompactionService.drop`); the data files deleted.

    Example::

        drop_compaction("/data/trips", "20250101000000000")
    """
    svc = CompactionService.open(path, options, storage_options)
    with _lock(svc):
        _not_restoring(svc.table)
        return svc.drop(instant)


def _reporting(executor: Executor, on_progress: Callable[[int, int], None]) -> Executor:
    """Run the tasks in small groups through ``executor``, reporting after each group."""

    def run(tasks: list[CompactionTask]) -> list[HoodieWriteStat]:
        total, out = len(tasks), []
        on_progress(0, total)
        step = max(1, total // 20)
        for i in range(0, total, step):
            out.extend(executor(tasks[i : i + step]))
            on_progress(len(out), total)
        return out

    return run


# -- cleaning and archival -----------------------------------------------------------------------


def clean(
    path: str,
    options: dict[str, Any] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    dry_run: bool = False,
) -> CleanResult:
    """Clean the table now: delete the file slices the last ``clean.retain_commits`` (30)
    completed commits do not read (Hudi's KEEP_LATEST_COMMITS; writers run the same clean
    after every commit), recorded as a ``.clean`` instant (and in the metadata table, table
    versions 8+, before that instant completes).

    Takes the table's writer lock (under optimistic concurrency control one short turn, beside
    live writers; pending writes whose heartbeat expired are rolled back first, Hudi's LAZY
    failed-writes policy). The earliest retained commit is never later than the earliest
    pending write or compaction, so no slice a write in flight reads or appends to is deleted.
    Cleans a writer that died left pending are finished first. ``dry_run``: only say what
    would be deleted.

    Example::

        hr.clean("/data/trips", {"clean.retain_commits": "10"}).files
    """
    svc = CompactionService.open(path, options, storage_options)
    retain = svc.wc.clean_retain_commits
    with _one_turn(svc.storage, svc.wc, dry_run):
        _not_restoring(svc.table)
        if dry_run:
            earliest, files = files_to_clean(svc.table, retain)
            return CleanResult(None, earliest, files, dry_run=True)
        rolled_back: tuple[str, ...] = ()
        if svc.wc.occ:
            hb = _heartbeats(svc.storage, svc.wc)
            done = CommitProtocol(svc.table).rollback_pending_writes(
                lambda instant: not hb.is_expired(instant)
            )
            rolled_back = tuple(r.instant for r in done)
        finished = tuple(finish_pending_cleans(svc.table))
        meta = svc.clean()
        if meta is None:
            earliest = earliest_commit_to_retain(svc.table, retain)
            return CleanResult(None, earliest, finished=finished, rolled_back=rolled_back)
        parts = meta.partition_metadata
        return CleanResult(
            meta.start_clean_time,
            meta.earliest_commit_to_retain or None,
            {p: list(m.success_delete_files) for p, m in parts.items() if m.success_delete_files},
            {p: list(m.failed_delete_files) for p, m in parts.items() if m.failed_delete_files},
            finished,
            rolled_back=rolled_back,
        )


def archive(
    path: str,
    options: dict[str, Any] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    dry_run: bool = False,
) -> ArchiveResult:
    """Archive the table now: past ``hoodie.keep.max.commits`` (50) completed commits on the
    active timeline, move the oldest instants to the archived timeline down to
    ``hoodie.keep.min.commits`` (40), keeping what cleaning, pending instants and the metadata
    table still need (the rules writers apply after every commit).

    Takes the table's writer lock (under optimistic concurrency control one short turn, beside
    live writers). Never past a pending write or the earliest pending compaction.
    ``dry_run``: only say which instants would move.

    Example::

        hr.archive("/data/trips").instants
    """
    table = HoodieTable.load(path, storage_options)
    wc = resolve_options(options)
    with _one_turn(table.storage, wc, dry_run):
        _not_restoring(table)
        chosen = archivable_instants(table, wc) if dry_run else archive_table(table, wc)
        reason = "" if chosen else nothing_to_archive_reason(table, wc)
        return ArchiveResult(tuple((i.timestamp, i.action) for i in chosen), dry_run, reason)


# -- the metadata table ----------------------------------------------------------------------------


def init_metadata(
    path: str,
    *,
    storage_options: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Build the metadata table of the table at ``path`` from a listing of its files (an
    existing one is rebuilt), under the table lock (``options`` may name its provider,
    ``hoodie.write.lock.provider``); the MDT partitions it now holds. With
    ``hoodie.metadata.index.bloom.filter.enable=true`` in ``options`` it also builds the
    ``bloom_filters`` partition from the base files' footers, calling ``on_progress(done,
    total)`` after each footer read (for progress bars; quiet by default).

    Example::

        hr.init_metadata("/data/trips", options={"hoodie.metadata.index.bloom.filter.enable": "true"})
    """
    table = HoodieTable.load(path, storage_options)
    check_metadata_table_writable(table.table_config, True, path)
    wc = resolve_options(options)
    with open_lock(table.storage, wc):
        _not_restoring(table)
        CommitProtocol(table).rollback_pending_writes()
        w = metadata_writer(table, MetadataWriteConfig(enable=True))
        w.drop()
        w.initialize()
        if wc.metadata_bloom_filter_enable:
            w.initialize_bloom_filters(on_progress)
        return w.partitions


def drop_metadata(
    path: str,
    *,
    partition: str | None = None,
    storage_options: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
) -> list[str]:
    """Delete the metadata table of the table at ``path`` (or only its MDT ``partition``, an
    index such as ``column_stats``), under the table lock (``options`` may name its provider,
    ``hoodie.write.lock.provider``); the MDT partitions left. A partition the metadata table
    does not have is a :class:`~hoodie_ray.exceptions.HoodieOptionError`, nothing changed.

    Example::

        hr.drop_metadata("/data/trips")
    """
    table = HoodieTable.load(path, storage_options)
    with open_lock(table.storage, resolve_options(options)):
        _not_restoring(table)
        w = metadata_writer(table)
        if partition is None or partition == FILES:
            w.drop()
        elif not w.knows_partition(partition):
            raise HoodieOptionError(
                f"{path}: the metadata table has no partition {partition!r} (partitions: "
                f"{', '.join(w.partitions) or 'none'}); nothing was dropped"
            )
        else:
            w.drop_partition(partition)
        return w.partitions


def create_index(
    path: str,
    name: str,
    column: str,
    *,
    kind: str = "secondary",
    storage_options: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    map_chunks: Callable[[Callable[..., Any], list[tuple[Any, ...]]], Iterable[Any]] | None = None,
) -> str:
    """Build index ``name`` over ``column`` in the metadata table of the table at ``path``
    from its current snapshot, under the writer lock, and keep it from then on; the MDT
    partition's name.

    ``kind="secondary"``: a secondary index (its definition goes to
    ``.hoodie/.index_defs/index.json``; the partition is ``secondary_index_<name>``).
    ``kind="record_index"``: the record index (``name`` is ``record_index``, ``column`` the
    table's record key field(s), comma-separated), built from every live key of the latest
    file slices; writers keep it from then on (they need the global index, as Hudi's do).

    ``options`` may name the lock provider (``hoodie.write.lock.provider``).
    ``on_progress(done, total)`` is called as the file slices are read (for progress bars;
    quiet by default). ``map_chunks`` spreads the reading of the file slices
    (``hr.create_index(engine="ray")`` passes Ray tasks); the index files are written here,
    the same bytes either way.

    Example::

        hr.create_index("/data/txns", "merchant_idx", "merchant_name")
        hr.create_index("/data/txns", "record_index", "txn_id", kind="record_index")

    Raises:
        HoodieUnsupportedError: ``kind`` is neither, the table keeps no metadata table, the
            index exists already, the column's type cannot be indexed, or (a record index)
            the table is written with the bucket index.
        HoodieInputError: a record index named otherwise, or over other fields than the
            record key's.
    """
    from hoodie_ray.metadata.layout import SECONDARY_INDEX_PREFIX, completed_partitions

    if kind not in ("secondary", RECORD_INDEX):
        raise HoodieUnsupportedError(
            f"index kind {kind!r}: hoodie_ray builds 'secondary' and 'record_index' indexes"
        )
    table = HoodieTable.load(path, storage_options)
    if kind == RECORD_INDEX:
        _check_record_index_args(table, name, column)
        partition = RECORD_INDEX
    else:
        partition = (
            name if name.startswith(SECONDARY_INDEX_PREFIX) else SECONDARY_INDEX_PREFIX + name
        )
    with open_lock(table.storage, resolve_options(options)):
        _not_restoring(table)
        CommitProtocol(table).rollback_pending_writes()
        w = metadata_writer(table)
        if not w.enabled:
            raise HoodieUnsupportedError(
                f"{path} keeps no metadata table: build it first (`hoodie-ray metadata init {path}`)"
            )
        if partition in completed_partitions(table.table_config):
            raise HoodieUnsupportedError(f"{path}: index {partition} exists already")
        if kind == RECORD_INDEX:
            w.initialize_indexes([RECORD_INDEX], on_progress, map_chunks)
            return RECORD_INDEX
        return w.initialize_secondary_index(partition, column, on_progress, map_chunks)


def _check_record_index_args(table: HoodieTable, name: str, column: str) -> None:
    """A record index is named ``record_index`` and is over the record key's fields."""
    if name != RECORD_INDEX:
        raise HoodieInputError(
            f"the record index's name is {RECORD_INDEX!r} (its metadata-table partition), "
            f"not {name!r}"
        )
    # a table whose keys are generated names none: its index is over the meta field
    key_fields = table.table_config.record_key_fields or [RECORD_KEY]
    if [f.strip() for f in column.split(",")] != key_fields:
        raise HoodieInputError(
            f"a record index is over the record key: column {column!r} is not the table's "
            f"record key field(s) {','.join(key_fields)!r} (hoodie.table.recordkey.fields)"
        )
    if not table.table_config.populate_meta_fields:
        raise HoodieUnsupportedError(
            f"{table.path}: a record index needs the record-key meta field "
            "(hoodie.populate.meta.fields=false)"
        )
    if BUCKET_NUM_PROPERTY in table.table_config.props:
        raise HoodieUnsupportedError(
            f"{table.path} is written with the bucket index ({BUCKET_NUM_PROPERTY}), which "
            "cannot keep a record index: writes tell no new keys from updates"
        )


def drop_index(
    path: str,
    name: str,
    *,
    storage_options: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
) -> list[str]:
    """Drop secondary index ``name`` (``merchant_idx`` or ``secondary_index_merchant_idx``)
    of the table at ``path``: its MDT partition and its definition; the MDT partitions left."""
    from hoodie_ray.metadata.layout import SECONDARY_INDEX_PREFIX

    partition = name if name.startswith(SECONDARY_INDEX_PREFIX) else SECONDARY_INDEX_PREFIX + name
    return drop_metadata(
        path, partition=partition, storage_options=storage_options, options=options
    )


def validate_metadata(
    path: str, *, storage_options: dict[str, Any] | None = None
) -> list[MetadataDifference]:
    """Compare the metadata table of the table at ``path`` with the table itself; every
    difference found (empty: in sync). Reads only; takes no lock.

    Example::

        assert not hr.validate_metadata("/data/trips")
    """
    table = HoodieTable.load(path, storage_options)
    out = validate_metadata_table(table)
    if RECORD_INDEX in table.metadata_partitions and table.metadata_table.exists():
        slices = table.latest_file_slices()
        out += record_index_differences(
            table, bootstrap_entries(table, slices, use_record_index=False)
        )
    return out
