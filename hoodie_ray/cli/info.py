"""What the read-only CLI subcommands show, as plain documents (the JSON of ``--output json``).

Each function takes a loaded :class:`~hoodie_ray.table.HoodieTable` and returns dicts and lists
of strings and numbers only; the text tables are rendered from the same documents.
"""

from __future__ import annotations

from typing import Any

from hoodie_ray.cli.output import instant_to_iso
from hoodie_ray.exceptions import HoodieError, HoodieQueryError
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.metadata import HoodieCommitMetadata
from hoodie_ray.timeline.plans import HoodieCompactionPlan

__all__ = [
    "commits_doc",
    "compaction_result_doc",
    "compactions_doc",
    "fsview_doc",
    "table_summary",
    "timeline_doc",
]

_NEW_FILE = (None, "", "null")


def table_summary(t: HoodieTable, path: str) -> dict[str, Any]:
    """Name, type and version of the table: the head of every document."""
    cfg = t.table_config
    return {
        "path": path,
        "name": cfg.name,
        "type": cfg.table_type,
        "version": cfg.table_version,
    }


def _instant_doc(i: Instant) -> dict[str, Any]:
    return {
        "instant": i.timestamp,
        "action": i.action,
        "state": i.state.value,
        "completion_time": i.completion_time,
        "requested_at": instant_to_iso(i.timestamp),
    }


def timeline_doc(t: HoodieTable, archived: bool = False) -> list[dict[str, Any]]:
    """Every instant of the active timeline, oldest first; with ``archived``, the archived
    instants before them (``"archived": true``)."""
    out = []
    if archived:
        out = [
            {**_instant_doc(a.instant), "archived": True} for a in t.archived_timeline.instants()
        ]
    return out + [{**_instant_doc(i), "archived": False} for i in t.timeline]


def _commit_metadata(
    t: HoodieTable, inst: Instant, data: bytes | None = None
) -> HoodieCommitMetadata:
    tl = t.active_timeline
    raw = tl.read_details(inst) if data is None else data
    return HoodieCommitMetadata.from_bytes(raw, tl.layout_version, inst)


def _commit_stats(meta: HoodieCommitMetadata) -> dict[str, Any]:
    stats = meta.write_stats()
    partitions = sorted(p for p, s in meta.partition_to_write_stats.items() if s)
    return {
        "operation": meta.operation_type,
        "partitions": partitions,
        "num_partitions": len(partitions),
        "files_added": sum(1 for s in stats if s.prev_commit in _NEW_FILE),
        "files_updated": sum(1 for s in stats if s.prev_commit not in _NEW_FILE),
        "records_written": sum(s.num_writes for s in stats),
        "inserts": sum(s.num_inserts for s in stats),
        "updates": sum(s.num_update_writes for s in stats),
        "deletes": sum(s.num_deletes for s in stats),
        "bytes_written": sum(s.total_write_bytes for s in stats),
        "errors": sum(s.total_write_errors for s in stats),
    }


def archived_commit_count(t: HoodieTable) -> int:
    """Commits, deltacommits and replacecommits on the archived timeline."""
    return sum(1 for a in t.archived_timeline.instants() if a.action in Action.COMMIT_ACTIONS)


def commits_doc(
    t: HoodieTable, limit: int | None = None, archived: bool = False
) -> list[dict[str, Any]]:
    """Completed commits, deltacommits and replacecommits, newest first, with their write stats.

    ``limit`` keeps the newest ``limit`` (all when None or 0); ``archived`` adds the archived
    commits after the active ones (``"archived": true``).
    """
    commits: list[tuple[Instant, bytes | None]] = [
        (i, None) for i in reversed(t.active_timeline.completed_commits())
    ]
    if archived and (not limit or len(commits) < limit):
        commits += [
            (a.instant, a.metadata or b"")
            for a in reversed(t.archived_timeline.instants())
            if a.action in Action.COMMIT_ACTIONS
        ]
    if limit:
        commits = commits[:limit]
    out = []
    for inst, data in commits:
        doc = _instant_doc(inst)
        doc.pop("state")
        doc["archived"] = data is not None
        doc.update(_commit_stats(_commit_metadata(t, inst, data)))
        out.append(doc)
    return out


def compaction_result_doc(t: HoodieTable, instant: str) -> dict[str, Any]:
    """What the completed compaction ``instant`` wrote: file groups, partitions, records."""
    inst = t.active_timeline.get(instant, Action.COMMIT)
    if inst is None or not inst.is_completed:
        raise HoodieQueryError(f"compaction {instant} is not a completed commit")
    meta = _commit_metadata(t, inst)
    stats = _commit_stats(meta)
    return {
        "file_groups": len(meta.write_stats()),
        "partitions": stats["partitions"],
        "records_written": stats["records_written"],
        "bytes_written": stats["bytes_written"],
    }


def _plan_doc(plan: HoodieCompactionPlan) -> dict[str, Any]:
    ops = plan.operations
    log_sizes = [op.metrics.get("TOTAL_LOG_FILES_SIZE") for op in ops]
    return {
        "file_groups": len(ops),
        "partitions": sorted({op.partition_path for op in ops}),
        "base_files": sum(1 for op in ops if op.data_file_path),
        "log_files": sum(len(op.delta_file_paths) for op in ops),
        "log_bytes": (
            int(sum(v for v in log_sizes if v is not None))
            if ops and all(v is not None for v in log_sizes)
            else None
        ),
        "operations": [
            {
                "partition_path": op.partition_path,
                "file_id": op.file_id,
                "base_instant": op.base_instant_time,
                "base_file": op.data_file_path,
                "log_files": list(op.delta_file_paths),
            }
            for op in ops
        ],
    }


def compactions_doc(t: HoodieTable) -> list[dict[str, Any]]:
    """Compactions on the active timeline, pending and completed, oldest first.

    A completed compaction is a completed ``commit`` whose ``compaction.requested`` plan is
    still on the timeline; its commit metadata adds what it wrote.
    """
    tl = t.active_timeline
    out: list[dict[str, Any]] = []
    for inst in tl.instants:
        pending = inst.action == Action.COMPACTION and not inst.is_completed
        requested = Instant(inst.timestamp, Action.COMPACTION, State.REQUESTED)
        if not pending:
            if not (inst.is_completed and inst.action == Action.COMMIT):
                continue
            if not tl.storage.exists(tl.instant_path(requested)):
                continue
        doc = _instant_doc(inst)
        doc["action"] = Action.COMPACTION
        try:
            plan = HoodieCompactionPlan.from_bytes(
                tl.read_details(requested), what=tl.instant_path(requested)
            )
            doc.update(_plan_doc(plan))
        except HoodieError as e:  # one unreadable plan must not hide the others
            doc["error"] = str(e)
        if inst.is_completed:
            stats = _commit_stats(_commit_metadata(t, inst))
            doc["records_written"] = stats["records_written"]
            doc["bytes_written"] = stats["bytes_written"]
        out.append(doc)
    return out


def _partition_path(t: HoodieTable, given: str, known: list[str]) -> str:
    """The table's partition path for ``given``: as it is when the table has it, else
    ``field=value`` segments turned into the table's style (plain values unless hive-style)
    or plain values into ``field=value`` segments, when the fields are the table's."""
    if given in known:
        return given
    fields = t.table_config.partition_fields
    segs = given.strip("/").split("/")
    if len(segs) != len(fields):
        return given
    pairs = [seg.partition("=") for seg in segs]
    if all(sep and k == f for (k, sep, _), f in zip(pairs, fields, strict=True)):
        values = [v for _, _, v in pairs]
    elif not any(sep for _, sep, _ in pairs):
        values = segs
    else:
        return given
    if t.table_config.hive_style:
        return "/".join(f"{f}={v}" for f, v in zip(fields, values, strict=True))
    return "/".join(values)


def fsview_doc(t: HoodieTable, partition: str | None = None) -> list[dict[str, Any]]:
    """The latest file slice of every file group (of one partition if given: its path, or
    ``field=value`` whatever the table's partition style).

    Raises:
        HoodieQueryError: ``partition`` is not a partition of the table.
    """
    view = t.view()
    parts = None
    if partition is not None:
        known = view.list_partitions()
        partition = _partition_path(t, partition, known)
        if partition not in known:
            shown = ", ".join(repr(p) for p in known[:10]) + (", ..." if len(known) > 10 else "")
            raise HoodieQueryError(
                f"no partition {partition!r} in the table (partitions: {shown or 'none'})"
            )
        parts = [partition]
    out = []
    for s in view.latest_file_slices(partitions=parts):
        log_sizes = [s.file_sizes.get(n, 0) for n in s.log_files]
        base_size = s.base_file_size if s.base_file else None
        out.append(
            {
                "partition_path": s.partition_path,
                "file_id": s.file_id,
                "base_instant": s.base_instant,
                "base_file": s.base_file,
                "base_file_bytes": base_size,
                "log_files": list(s.log_files),
                "num_log_files": len(s.log_files),
                "log_bytes": sum(log_sizes),
                "total_bytes": (base_size or 0) + sum(log_sizes),
            }
        )
    return out
