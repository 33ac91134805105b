"""Top-level functions of the public API: ``write``, ``read``, ``rollback``."""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa

from hoodie_ray.exceptions import HoodieInputError, HoodieOptionError
from hoodie_ray.write.client import CommitResult, HoodieWriteClient


def _is_ray_dataset(obj: Any) -> bool:
    mod = sys.modules.get("ray.data")
    return mod is not None and isinstance(obj, mod.Dataset)


def _is_spark_dataframe(obj: Any) -> bool:
    mod = sys.modules.get("pyspark.sql")
    return mod is not None and isinstance(obj, mod.DataFrame)


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
    if _is_spark_dataframe(data):
        from hoodie_ray.spark import spark_to_ray

        data = spark_to_ray(data)
    if _is_ray_dataset(data):
        if engine == "local":
            batches = list(data.iter_batches(batch_format="pyarrow"))
            data = pa.concat_tables(batches) if batches else pa.table({})
        else:
            from hoodie_ray.ray.stream import write_dataset

            return write_dataset(data, path, options, storage_options=storage_options)
    if not isinstance(data, (pa.Table, pa.RecordBatch)):
        try:
            import pandas as pd

            if not isinstance(data, pd.DataFrame):
                raise HoodieInputError(f"unsupported input type {type(data).__name__}")
        except ImportError:
            raise HoodieInputError(f"unsupported input type {type(data).__name__}") from None
    if engine == "local":
        return HoodieWriteClient(path, options, storage_options).write(data)
    from hoodie_ray.ray.stream import write_arrow
    from hoodie_ray.write.records import to_arrow

    return write_arrow(to_arrow(data), path, options, storage_options=storage_options)


def rollback(path: str, instant: str, *, storage_options: dict[str, Any] | None = None) -> str:
    """Roll back a pending or failed write instant; returns the rollback instant."""
    from hoodie_ray.config.table_config import HoodieTableConfig
    from hoodie_ray.storage import open_storage
    from hoodie_ray.write.commit import CommitProtocol
    from hoodie_ray.write.lock import WriterLock

    storage = open_storage(path, storage_options)
    cfg = HoodieTableConfig.load(storage)
    with WriterLock(storage):
        return CommitProtocol(storage, cfg).rollback(instant).rollback_instant
