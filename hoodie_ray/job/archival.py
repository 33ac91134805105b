"""When and how far to archive: the job-level policy over :mod:`hoodie_ray.timeline.archive`."""

from __future__ import annotations

import logging

from hoodie_ray.config.options import WriteConfig
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.archive import archive_instants, instants_to_archive

__all__ = ["archive_table"]

log = logging.getLogger("hoodie_ray")


def archive_table(table: HoodieTable, wc: WriteConfig) -> list[str]:
    """Archive ``table``'s oldest instants if its active timeline is past
    ``hoodie.keep.max.commits`` (down to ``hoodie.keep.min.commits``, within the limits
    :func:`~hoodie_ray.timeline.archive.instants_to_archive` keeps); the archived instant times.
    """
    tl = table.active_timeline
    if len(tl.completed_commits()) <= wc.keep_max_commits:
        return []
    delta_rule = (
        table.is_mor
        and wc.compaction_schedule
        and wc.compaction_trigger in ("num_commits", "num_and_time")
    )
    chosen = instants_to_archive(
        tl,
        wc.keep_min_commits,
        wc.keep_max_commits,
        is_mor=table.is_mor,
        compaction_delta_commits=wc.compaction_delta_commits if delta_rule else None,
    )
    if not chosen:
        return []
    archive_instants(tl, table.archived_timeline, chosen, wc.timeline_compaction_batch_size)
    table.forget(chosen)
    log.info(
        "archived %d instants of %s (%s .. %s)",
        len(chosen),
        table.base_uri,
        chosen[0].timestamp,
        chosen[-1].timestamp,
    )
    return [i.timestamp for i in chosen]
