"""``WriteContext``: what every write task knows about the table (picklable)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from hoodie_ray.config.options import WriteConfig
from hoodie_ray.config.table_config import HoodieTableConfig, MergeMode
from hoodie_ray.metadata.layout import COLUMN_STATS, completed_partitions, inflight_partitions
from hoodie_ray.storage import Storage

__all__ = ["WriteContext"]


@dataclass
class WriteContext:
    """Everything a writer needs about the table; picklable (no open handles)."""

    storage: Storage
    table_config: HoodieTableConfig
    write_config: WriteConfig
    data_schema: pa.Schema
    avro_schema: dict[str, Any]  # full record schema, meta fields included
    #: The commits' table schema names ``_hoodie_operation``: changelog mode, now or before
    #: (readers that take the table schema from the commit see the operations only then).
    keeps_operation: bool = False

    @property
    def table_version(self) -> int:
        return self.table_config.table_version

    @property
    def completion_time_slicing(self) -> bool:
        """Table version 8+ behaviour (see :attr:`HoodieTableConfig.completion_time_slicing`)."""
        return self.table_config.completion_time_slicing

    @property
    def ordering_field(self) -> str | None:
        return self.table_config.ordering_field

    @property
    def merge_mode(self) -> MergeMode:
        return self.table_config.merge_mode

    @property
    def is_mor(self) -> bool:
        return self.table_config.is_mor

    @property
    def log_stats_per_commit(self) -> bool:
        """A version 6 table whose metadata table keeps (or builds) ``column_stats``: 0.x
        computes a log file's statistics over the blocks one commit appended
        (``HoodieAppendHandle.processAppendResult``), so a commit never appends to another's
        log file."""
        cfg = self.table_config
        if cfg.table_version >= 8:
            return False
        listed = completed_partitions(cfg) + inflight_partitions(cfg)
        return COLUMN_STATS in listed or self.write_config.metadata_column_stats_enable

    @property
    def changelog(self) -> bool:
        """Flink's changelog mode (``changelog.enabled``, merge-on-read only): every change
        kept in the logs with its ``_hoodie_operation``."""
        return self.write_config.changelog_enabled and self.is_mor
