"""``HoodieTable``: a table's config, timeline and file slices, read-only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hoodie_ray.config.table_config import HoodieTableConfig
from hoodie_ray.file_group.view import FileSlice, FileSystemView
from hoodie_ray.storage import Storage, open_storage
from hoodie_ray.timeline.instant import Instant
from hoodie_ray.timeline.timeline import ActiveTimeline


@dataclass
class HoodieTable:
    """A loaded table. Build with :meth:`load`.

    Example::

        t = hr.HoodieTable.load("/data/trips")
        t.config["hoodie.table.type"]
        [i.timestamp for i in t.timeline]
        t.latest_file_slices()
    """

    path: str
    storage: Storage
    table_config: HoodieTableConfig
    active_timeline: ActiveTimeline

    @classmethod
    def load(cls, path: str, storage_options: dict[str, Any] | None = None) -> HoodieTable:
        """Open the table at ``path``; raises :class:`HoodieTableNotFoundError` if there is none."""
        storage = open_storage(path, storage_options)
        cfg = HoodieTableConfig.load(storage)
        tl = cfg.open_timeline(storage)
        tl.load()
        return cls(path, storage, cfg, tl)

    @property
    def config(self) -> dict[str, str]:
        """The table's ``hoodie.properties`` as a dict."""
        return dict(self.table_config.props)

    @property
    def name(self) -> str:
        return self.table_config.name

    @property
    def timeline(self) -> list[Instant]:
        """Instants of the active timeline, oldest first (``.timestamp``, ``.action``, ``.state``)."""
        return list(self.active_timeline.instants)

    def view(self) -> FileSystemView:
        return FileSystemView.for_table(self.storage, self.table_config, self.active_timeline)

    def latest_file_slices(self, as_of: str | None = None) -> list[FileSlice]:
        """The latest file slice of every file group (``.partition_path``, ``.file_id``,
        ``.base_instant``, ``.base_file``, ``.log_files``)."""
        return self.view().latest_file_slices(as_of=as_of)

    def reload(self) -> HoodieTable:
        self.active_timeline.reload()
        return self
