"""Table maintenance run on its own: compaction and cleaning outside a write job.

Each takes the table's writer lock, so it never runs beside a live writer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hoodie_ray.compaction.api import CompactionService, Executor, local_executor
from hoodie_ray.compaction.execute import CompactionTask
from hoodie_ray.metadata.layout import FILES, RECORD_INDEX
from hoodie_ray.metadata.validate import (
    MetadataDifference,
    record_index_differences,
    validate_metadata_table,
)
from hoodie_ray.metadata.writer import (
    MetadataWriteConfig,
    check_metadata_table_writable,
    metadata_writer,
)
from hoodie_ray.reader.index_bootstrap import bootstrap_entries
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat
from hoodie_ray.write.commit import CommitProtocol
from hoodie_ray.write.lock import WriterLock

__all__ = [
    "clean",
    "compact",
    "drop_compaction",
    "drop_metadata",
    "init_metadata",
    "run_compaction",
    "schedule_compaction",
    "validate_metadata",
]


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
) -> str | None:
    """Compact the table now (offline): run the earliest pending plan, else schedule one and run it.

    ``on_progress(done, total)`` is called as file slices are compacted (for progress bars).

    Takes the table's writer lock, so it never runs beside a live writer. ``executor`` runs
    the operations (default: one after another in this process; ``hr.compact(engine="ray")``
    hands in a Ray one). Returns the compaction instant, or None when no file slice has log
    files.

    Example::

        hr.compact("/data/trips")
    """
    svc = CompactionService.open(path, options, storage_options)
    executor = executor or local_executor
    with WriterLock(
        svc.storage, heartbeat_ms=svc.wc.lock_heartbeat_ms, expire_ms=svc.wc.lock_expire_ms
    ):
        pending = svc.pending()
        instant = pending[0] if pending else svc.schedule(force=True)
        if instant is None:
            return None
        if on_progress is not None:
            executor = _reporting(executor, on_progress)
        svc.run(instant, executor)
        return instant


def drop_compaction(
    path: str, instant: str, options: Any = None, storage_options: Any = None
) -> list[str]:
    """Drop the pending compaction plan ``instant`` of the table at ``path``, holding the
    table's writer lock (see :meth:`CompactionService.drop`); the data files deleted.

    Example::

        drop_compaction("/data/trips", "20250101000000000")
    """
    svc = CompactionService.open(path, options, storage_options)
    with WriterLock(
        svc.storage, heartbeat_ms=svc.wc.lock_heartbeat_ms, expire_ms=svc.wc.lock_expire_ms
    ):
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


def clean(
    path: str,
    options: dict[str, Any] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
) -> str | None:
    """Clean old file slices now; the clean instant, or None when nothing was deleted."""
    svc = CompactionService.open(path, options, storage_options)
    with WriterLock(svc.storage):
        return svc.clean()


def init_metadata(path: str, *, storage_options: dict[str, Any] | None = None) -> list[str]:
    """Build the metadata table of the table at ``path`` from a listing of its files (an
    existing one is rebuilt), under the writer lock; the MDT partitions it now holds.

    Example::

        hr.init_metadata("/data/trips")
    """
    table = HoodieTable.load(path, storage_options)
    check_metadata_table_writable(table.table_config, True, path)
    with WriterLock(table.storage):
        CommitProtocol(table).rollback_pending_writes()
        w = metadata_writer(table, MetadataWriteConfig(enable=True))
        w.drop()
        w.initialize()
        return w.partitions


def drop_metadata(
    path: str,
    *,
    partition: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> list[str]:
    """Delete the metadata table of the table at ``path`` (or only its MDT ``partition``, an
    index such as ``column_stats``), under the writer lock; the MDT partitions left.

    Example::

        hr.drop_metadata("/data/trips")
    """
    table = HoodieTable.load(path, storage_options)
    with WriterLock(table.storage):
        w = metadata_writer(table)
        if partition is None or partition == FILES:
            w.drop()
        else:
            w.drop_partition(partition)
        return w.partitions


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
