"""hoodie_ray: write and read Apache Hudi Merge-On-Read tables from Ray.

The public surface (see docs/ and the README)::

    import hoodie_ray as hr
    hr.write(data, path, options)                 # one commit
    with hr.HoodieStreamWriter(path, options) as w:
        w.write(batch); w.checkpoint()            # one delta commit per checkpoint
    hr.read(path)                                 # merge-on-read snapshot as pyarrow.Table
    hr.compact(path); hr.clean(path); hr.archive(path)   # table services (dry_run=True)
    hr.HoodieTable.load(path).latest_file_slices()

Ray and Spark are imported only when a name that needs them is used.
"""

from __future__ import annotations

from typing import Any

# first: in hoodie_ray's actor processes, Arrow's default pool is named before pyarrow loads
from hoodie_ray.ray import process as _process  # noqa: F401

# isort: split

from hoodie_ray.api import rollback, write
from hoodie_ray.exceptions import (
    HoodieCommitConflictError,
    HoodieCommitStateUnknownError,
    HoodieCompactionError,
    HoodieCorruptedDataError,
    HoodieError,
    HoodieInputError,
    HoodieIOError,
    HoodieOptionError,
    HoodiePathError,
    HoodieQueryError,
    HoodieSchemaError,
    HoodieSchemaEvolutionConflictError,
    HoodieTableNotFoundError,
    HoodieTimelineError,
    HoodieUnsupportedError,
    HoodieWriteConflictError,
    HoodieWriteError,
)
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.job.coordinator import CommitResult
from hoodie_ray.table import HoodieTable

__version__ = "0.1.0"

_LAZY = {
    "HoodieStreamWriter": ("hoodie_ray.ray.stream", "HoodieStreamWriter"),
    "CheckpointHandle": ("hoodie_ray.ray.stream", "CheckpointHandle"),
    "HoodieDatasink": ("hoodie_ray.ray.datasink", "HoodieDatasink"),
    "read": ("hoodie_ray.reader.query", "read"),
    "read_stream": ("hoodie_ray.api", "read_stream"),
    "HoodieStreamReader": ("hoodie_ray.reader.streaming", "HoodieStreamReader"),
    "StreamBatch": ("hoodie_ray.reader.streaming", "StreamBatch"),
    "read_ray": ("hoodie_ray.ray.datasource", "read_ray"),
    "read_spark": ("hoodie_ray.spark", "read_spark"),
    "init_spark": ("hoodie_ray.spark", "init_spark"),
    "install_dashboard": ("hoodie_ray.ray.dashboard", "install_dashboard"),
    "compact": ("hoodie_ray.api", "compact"),
    "clean": ("hoodie_ray.job.maintenance", "clean"),
    "archive": ("hoodie_ray.job.maintenance", "archive"),
    "CompactionResult": ("hoodie_ray.job.maintenance", "CompactionResult"),
    "cluster": ("hoodie_ray.api", "cluster"),
    "ClusteringResult": ("hoodie_ray.job.maintenance", "ClusteringResult"),
    "CleanResult": ("hoodie_ray.job.maintenance", "CleanResult"),
    "ArchiveResult": ("hoodie_ray.job.maintenance", "ArchiveResult"),
    "upgrade": ("hoodie_ray.upgrade_table", "upgrade"),
    "init_metadata": ("hoodie_ray.job.maintenance", "init_metadata"),
    "drop_metadata": ("hoodie_ray.job.maintenance", "drop_metadata"),
    "create_index": ("hoodie_ray.api", "create_index"),
    "drop_index": ("hoodie_ray.job.maintenance", "drop_index"),
    "validate_metadata": ("hoodie_ray.job.maintenance", "validate_metadata"),
    "savepoint": ("hoodie_ray.job.savepoint", "savepoint"),
    "savepoints": ("hoodie_ray.job.savepoint", "savepoints"),
    "delete_savepoint": ("hoodie_ray.job.savepoint", "delete_savepoint"),
    "restore": ("hoodie_ray.job.savepoint", "restore"),
    "SavepointInfo": ("hoodie_ray.job.savepoint", "SavepointInfo"),
    "RestoreResult": ("hoodie_ray.job.savepoint", "RestoreResult"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hoodie_ray' has no attribute {name!r}")


__all__ = [
    "ArchiveResult",
    "CheckpointHandle",
    "CleanResult",
    "ClusteringResult",
    "CommitResult",
    "CompactionResult",
    "HoodieCommitConflictError",
    "HoodieCommitStateUnknownError",
    "HoodieCompactionError",
    "HoodieCorruptedDataError",
    "HoodieDatasink",
    "HoodieError",
    "HoodieIOError",
    "HoodieInputError",
    "HoodieOptionError",
    "HoodiePathError",
    "HoodieQueryError",
    "HoodieSchemaError",
    "HoodieSchemaEvolutionConflictError",
    "HoodieStreamReader",
    "HoodieStreamWriter",
    "HoodieTable",
    "HoodieTableNotFoundError",
    "HoodieTimelineError",
    "HoodieUnsupportedError",
    "HoodieWriteClient",
    "HoodieWriteConflictError",
    "HoodieWriteError",
    "RestoreResult",
    "SavepointInfo",
    "StreamBatch",
    "archive",
    "clean",
    "cluster",
    "compact",
    "create_index",
    "delete_savepoint",
    "drop_index",
    "drop_metadata",
    "init_metadata",
    "init_spark",
    "install_dashboard",
    "read",
    "read_ray",
    "read_spark",
    "read_stream",
    "restore",
    "rollback",
    "savepoint",
    "savepoints",
    "upgrade",
    "validate_metadata",
    "write",
]
