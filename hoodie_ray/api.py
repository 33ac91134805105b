"""Top-level functions of the public API: ``write``, ``compact``, ``rollback`` (``clean`` and
``archive`` are the job layer's own, :mod:`hoodie_ray.job.maintenance`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from hoodie_ray.config.options import resolve_options
from hoodie_ray.exceptions import HoodieOptionError
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.job.coordinator import CommitResult
from hoodie_ray.job.maintenance import ClusteringResult, CompactionResult
from hoodie_ray.reader.streaming import HoodieStreamReader
from hoodie_ray.write.records import is_ray_dataset, is_spark_dataframe


def write(
    data: Any,
    path: str,
    options: dict[str, Any] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    engine: str = "ray",
) -> CommitResult:
    """Write ``data`` to the Hudi table at ``path`` as one commit.

    Args:
        data: a ``pyarrow.Table`` or ``RecordBatch``, a ``pandas.DataFrame``, a
            ``ray.data.Dataset``, or a Spark DataFrame from a RayDP session.
        path: the table's base path (local path, ``file://`` or ``s3://...``).
        options: Hudi options (``hoodie.*`` keys or Flink short keys), see the options table.
        storage_options: credentials and endpoint for object stores (never logged).
        engine: ``"ray"`` (default; the actor topology on the running or an embedded local Ray
            cluster, or ``RAY_ADDRESS``) or ``"local"`` (this process, no Ray).

    Returns:
        The :class:`CommitResult` of the commit (``instant`` is None when nothing was written).

    Example::

        hr.write(table, "/tmp/trips", {"hoodie.table.name": "trips",
                 "hoodie.datasource.write.recordkey.field": "uuid", "precombine.field": "ts"})
    """
    if engine not in ("ray", "local"):
        raise HoodieOptionError(f"engine must be 'ray' or 'local', got {engine!r}")
    wc = resolve_options(options)
    if wc.operation == "delete_partition" or (
        wc.operation == "insert_overwrite_table" and _is_empty(data)
    ):
        # a replacecommit of no data: the partitions (from the option, or the input's rows)
        # are the only work, done here
        engine = "local"
    if engine == "ray":
        from hoodie_ray.ray.stream import write_warm

        # every input kind goes through the warm topology; the driver hands over references
        result = write_warm(data, path, options, storage_options=storage_options)
        if result.instant is None and wc.operation == "insert_overwrite_table":
            # no rows (a Dataset's or Spark DataFrame's emptiness shows only as it is read):
            # the overwrite of every partition with nothing still truncates the table
            return HoodieWriteClient(path, options, storage_options).write(None)
        return result
    if is_spark_dataframe(data):
        from hoodie_ray.spark import spark_to_arrow

        data = spark_to_arrow(data)
    if is_ray_dataset(data):
        from hoodie_ray.ray.inputs import dataset_table

        data = dataset_table(data)
        # no rows: nothing to write, but an overwrite of the table truncates it
        if data is None and wc.operation != "insert_overwrite_table":
            return CommitResult(None)
    return HoodieWriteClient(path, options, storage_options).write(data)


def _is_empty(data: Any) -> bool:
    """An Arrow table or batch, or a pandas DataFrame, of no rows (other inputs: False)."""
    if data is None:
        return True
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return data.num_rows == 0
    return type(data).__module__.startswith("pandas") and bool(getattr(data, "empty", False))


def compact(
    path: str,
    options: dict[str, Any] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    engine: str = "local",
    on_progress: Callable[[int, int], None] | None = None,
    dry_run: bool = False,
) -> CompactionResult:
    """Compact the table now (offline): run the earliest pending plan, else schedule one and run it.

    Takes the table's writer lock, so it never runs beside a live writer; under optimistic
    concurrency control only in short turns, beside live writers (see
    :func:`hoodie_ray.job.maintenance.compact`). ``engine="ray"`` fans
    the operations out over Ray tasks (``compaction.tasks`` at a time). ``on_progress(done,
    total)`` is called as file slices are compacted (for progress bars). ``dry_run``: only say
    which plan would run (nothing is written). Returns a :class:`CompactionResult`: the
    compaction instant (None when no file slice has log files) and the plan's file slices.

    Example::

        hr.compact("/data/trips").instant
    """
    from hoodie_ray.job import maintenance

    if engine not in ("ray", "local"):
        raise HoodieOptionError(f"engine must be 'ray' or 'local', got {engine!r}")
    executor = None
    if engine == "ray" and not dry_run:
        from hoodie_ray.config.options import resolve_options
        from hoodie_ray.ray.compactor import ray_executor
        from hoodie_ray.table import HoodieTable

        name = HoodieTable.load(path, storage_options).name
        executor = ray_executor(resolve_options(options), name, path)
    return maintenance.compact(
        path,
        options,
        storage_options=storage_options,
        executor=executor,
        on_progress=on_progress,
        dry_run=dry_run,
    )


def cluster(
    path: str,
    options: dict[str, Any] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    engine: str = "local",
    dry_run: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> ClusteringResult:
    """Cluster the table now: small file slices rewritten into fewer, larger base files
    (ordered by ``hoodie.clustering.plan.strategy.sort.columns`` when set, in
    ``hoodie.layout.optimize.strategy`` order), committed as a replacecommit
    (:func:`hoodie_ray.job.maintenance.cluster`). ``engine="ray"`` rewrites the groups as Ray
    tasks (one per group, across the cluster). ``dry_run``: only say which file slices would be
    rewritten. ``on_progress(done, total)`` is called as groups are rewritten (for progress
    bars).

    Example::

        hr.cluster("/data/trips", engine="ray").instant
    """
    from hoodie_ray.job import maintenance

    if engine not in ("ray", "local"):
        raise HoodieOptionError(f"engine must be 'ray' or 'local', got {engine!r}")
    executor = None
    if engine == "ray" and not dry_run:
        from hoodie_ray.ray.compactor import ray_clustering_executor

        executor = ray_clustering_executor
    return maintenance.cluster(
        path,
        options,
        storage_options=storage_options,
        executor=executor,
        dry_run=dry_run,
        on_progress=on_progress,
    )


def read_stream(
    path: str,
    start: str | None = None,
    after: str | None = None,
    *,
    engine: str = "local",
    **kwargs: Any,
) -> HoodieStreamReader:
    """Follow a table commit by commit (Flink's streaming read):
    :class:`~hoodie_ray.reader.streaming.HoodieStreamReader`, whose arguments it takes.
    ``engine="ray"``: each batch's ``table`` is a ``ray.data.Dataset`` read by Ray tasks
    (the commits are still chosen in this process).

    Example::

        for batch in hr.read_stream("/data/trips", start="earliest"):
            sink(batch.table)
            save(batch.position)            # resume: hr.read_stream(path, after=saved)
    """
    if engine not in ("ray", "local"):
        raise HoodieOptionError(f"engine must be 'ray' or 'local', got {engine!r}")
    if engine == "ray":
        from hoodie_ray.ray.datasource import RayStreamReader

        return RayStreamReader(path, start, after, **kwargs)
    return HoodieStreamReader(path, start, after, **kwargs)


def create_index(
    path: str,
    name: str,
    column: str,
    *,
    kind: str = "secondary",
    storage_options: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    engine: str = "local",
) -> str:
    """Build index ``name`` over ``column`` from the table's current snapshot and keep it
    from then on: a secondary index, or with ``kind="record_index"`` the record index
    (:func:`hoodie_ray.job.maintenance.create_index`: the arguments, the errors); the
    metadata-table partition's name. ``engine="ray"`` reads the file slices in Ray tasks
    (about four a CPU, one CPU each) on the running or an embedded local Ray; the index
    files are the same bytes either way.

    Example::

        hr.create_index("/data/txns", "merchant_idx", "merchant_name", engine="ray")
        hr.create_index("/data/txns", "record_index", "txn_id", kind="record_index", engine="ray")
    """
    from hoodie_ray.job import maintenance

    if engine not in ("ray", "local"):
        raise HoodieOptionError(f"engine must be 'ray' or 'local', got {engine!r}")
    map_chunks = None
    if engine == "ray":
        from hoodie_ray.ray.compactor import ray_task_map

        map_chunks = ray_task_map
    return maintenance.create_index(
        path,
        name,
        column,
        kind=kind,
        storage_options=storage_options,
        options=options,
        on_progress=on_progress,
        map_chunks=map_chunks,
    )


def rollback(
    path: str,
    instant: str,
    *,
    storage_options: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
) -> str:
    """Roll back a pending or failed write instant under the table lock (``options`` may name
    its provider, ``hoodie.write.lock.provider``); returns the rollback instant."""
    from hoodie_ray.config.options import resolve_options
    from hoodie_ray.job.savepoint import check_no_pending_restore
    from hoodie_ray.table import HoodieTable
    from hoodie_ray.write.commit import CommitProtocol
    from hoodie_ray.write.lock_providers import open_lock

    table = HoodieTable.load(path, storage_options)
    with open_lock(table.storage, resolve_options(options)):
        check_no_pending_restore(table)  # the restore rolls back what it must itself
        return CommitProtocol(table).rollback(instant, known_only=True).rollback_instant
