"""When and how far to archive: the job-level policy over :mod:`hoodie_ray.timeline.archive`."""

from __future__ import annotations

from hoodie_ray.config.options import WriteConfig
from hoodie_ray.table import HoodieTable

__all__ = ["archive_table"]


def archive_table(table: HoodieTable, wc: WriteConfig) -> list[str]:
    """Archive ``table``'s oldest instants if its active timeline is past
    ``hoodie.keep.max.commits``; the archived instant times."""
    return []
