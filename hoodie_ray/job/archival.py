"""When and how far to archive: the job-level policy over :mod:`hoodie_ray.timeline.archive`."""

from __future__ import annotations

import logging

from hoodie_ray.config.options import WriteConfig
from hoodie_ray.metadata.layout import has_metadata_table
from hoodie_ray.metadata_writer.writer import metadata_writer
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.archive import archive_instants, instants_to_archive
from hoodie_ray.timeline.instant import Instant

__all__ = ["archivable_instants", "archive_table"]

log = logging.getLogger("hoodie_ray")


def archivable_instants(table: HoodieTable, wc: WriteConfig) -> list[Instant]:
    """The instants :func:`archive_table` would archive now, oldest first: none while the
    active timeline holds at most ``hoodie.keep.max.commits`` completed commits, else down to
    ``hoodie.keep.min.commits`` within the limits
    :func:`~hoodie_ray.timeline.archive.instants_to_archive` keeps.

    With a metadata table (any table version), as Hudi's ``TimelineArchiverV2`` (and 0.x's
    archiver): nothing until the metadata table has compacted once, then only instants
    before the first commit that completed after its latest compaction (its log blocks name
    the data instants they belong to, judged against the data table's active timeline), or
    after the base of an index file group that compaction left with its logs
    (``MetadataWriter.compacted_through``)."""
    tl = table.active_timeline
    tl.reload()
    if len(tl.completed_commits()) <= wc.keep_max_commits:
        return []
    retain_from = None
    if has_metadata_table(table.table_config):  # v6 too (0.x's archiver has the same bound)
        compacted = metadata_writer(table).compacted_through()
        if compacted is None:
            return []
        after = [
            c for c in tl.completed_commits() if (c.completion_time or c.timestamp) > compacted
        ]
        retain_from = min(c.timestamp for c in after) if after else None
    delta_rule = (
        table.is_mor
        and wc.compaction_schedule
        and wc.compaction_trigger in ("num_commits", "num_and_time")
    )
    return instants_to_archive(
        tl,
        wc.keep_min_commits,
        wc.keep_max_commits,
        is_mor=table.is_mor,
        compaction_delta_commits=wc.compaction_delta_commits if delta_rule else None,
        retain_from=retain_from,
    )


def nothing_to_archive_reason(table: HoodieTable, wc: WriteConfig) -> str:
    """Why :func:`archivable_instants` named no instant, in a user's words."""
    tl = table.active_timeline
    n = len(tl.completed_commits())
    if n <= wc.keep_max_commits:
        return (
            f"{n} completed commit(s) on the active timeline; archival starts past "
            f"hoodie.keep.max.commits={wc.keep_max_commits}"
        )
    mdt = has_metadata_table(table.table_config)
    if mdt and metadata_writer(table).compacted_through() is None:
        return "the metadata table has not compacted yet: its logs still name every instant"
    return (
        "the oldest instants are still needed (a pending write or compaction, commits "
        "cleaning has yet to retain, or the metadata table's uncompacted logs)"
    )


def archive_table(table: HoodieTable, wc: WriteConfig) -> list[Instant]:
    """Archive the instants :func:`archivable_instants` names (the archived timeline is
    written before any instant file is deleted); those instants."""
    chosen = archivable_instants(table, wc)
    if not chosen:
        return []
    archive_instants(
        table.active_timeline, table.archived_timeline, chosen, wc.timeline_compaction_batch_size
    )
    table.forget(chosen)
    log.info(
        "archived %d instants of %s (%s .. %s)",
        len(chosen),
        table.base_uri,
        chosen[0].timestamp,
        chosen[-1].timestamp,
    )
    return chosen
