"""Cleaning: delete file slices no retained commit needs (KEEP_LATEST_COMMITS).

The earliest retained commit E is the ``clean.retain_commits``-th latest completed commit. In
each file group the slice a snapshot at E reads, and every newer slice, is kept; older slices
(base file and log files) are deleted. A ``.clean`` instant records what was deleted, and its
``earliestCommitToRetain`` tells readers that time travel before E is no longer possible.

E is never later than the earliest pending write or compaction. Beside several writers a
pending write (one with a heartbeat) also keeps the slice it started from, which may be older
than the one E reads: a compaction requested before the write started may have completed
after it (:func:`_read_by_write`).
"""

from __future__ import annotations

import time

from hoodie_ray.file_group.naming import parse_base_file_name, parse_log_file_name
from hoodie_ray.file_group.view import FileSlice, FileSystemView
from hoodie_ray.metadata_writer.writer import metadata_writer
from hoodie_ray.storage import join
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action, Instant, State, new_instant_time
from hoodie_ray.timeline.plans import (
    HoodieActionInstant,
    HoodieCleanerPlan,
    HoodieCleanFileInfo,
    HoodieCleanMetadata,
    HoodieCleanPartitionMetadata,
    HoodieSavepointMetadata,
)
from hoodie_ray.timeline.timeline import ActiveTimeline
from hoodie_ray.write.heartbeat import heartbeat_path

POLICY = "KEEP_LATEST_COMMITS"


def earliest_commit_to_retain(table: HoodieTable, retain: int) -> str | None:
    """The earliest commit a clean keeping the last ``retain`` completed commits must retain
    (None: no more than ``retain`` commits, nothing to clean).

    As Hudi's ``CleanerUtils.getEarliestCommitToRetain`` (KEEP_LATEST_COMMITS): never later than
    the earliest pending write or compaction, whose files and plan may need older slices; then
    the last completed commit before it (None when there is none)."""
    tl = table.active_timeline
    commits = tl.completed_commits()
    if len(commits) <= retain:
        return None
    earliest = commits[-retain].timestamp
    pending = tl.pending_commits()
    if pending and earliest > pending[0].timestamp:
        before = [c.timestamp for c in commits if c.timestamp < pending[0].timestamp]
        return before[-1] if before else None
    return earliest


def savepointed_files(table: HoodieTable) -> set[tuple[str, str]]:
    """``(partition, file name)`` of every file a completed savepoint holds."""
    tl = table.active_timeline
    out: set[tuple[str, str]] = set()
    for inst in tl.find([Action.SAVEPOINT], [State.COMPLETED]):
        what = tl.file_name(inst)
        out |= HoodieSavepointMetadata.from_bytes(tl.read_details(inst), what).file_names()
    return out


def files_to_clean(table: HoodieTable, retain: int) -> tuple[str | None, dict[str, list[str]]]:
    """(earliest retained commit, partition -> file names to delete), keeping the slices the
    last ``retain`` completed commits read (:func:`earliest_commit_to_retain`), and every
    slice a savepoint holds a file of (Java's ``isFileSliceExistInSavepointedFiles``)."""
    table.active_timeline.reload()
    earliest = earliest_commit_to_retain(table, retain)
    if earliest is None:
        return None, {}
    tl = table.active_timeline
    kept = savepointed_files(table)

    def held(s: FileSlice) -> bool:
        names = ([s.base_file] if s.base_file else []) + list(s.log_files)
        return any((s.partition_path, n) in kept for n in names)

    # writes that may be live: a heartbeat file (several writers); a single writer's pending
    # write is a dead writer's, which its next writer rolls back
    writes = [
        i
        for i in tl.pending()
        if i.action in _WRITES and table.storage.exists(heartbeat_path(i.timestamp))
    ]
    first_write = writes[0].timestamp if writes else None
    view = table.view()
    out: dict[str, list[str]] = {}
    for group in view.all_file_groups():
        slices = sorted(group.all_slices(), key=lambda s: s.base_instant or "")
        if len(slices) <= 1:
            continue
        # the slice a snapshot at the earliest retained commit reads: keep it and newer ones
        keep_from = 0
        for i, s in enumerate(slices):
            if (s.base_instant or "") <= earliest:
                keep_from = i
        if first_write is not None:
            keep_from = min(keep_from, _read_by_write(tl, slices, first_write))
        for s in slices[:keep_from]:
            if held(s):
                continue
            names = ([s.base_file] if s.base_file else []) + list(s.log_files)
            out.setdefault(s.partition_path, []).extend(names)
    # file groups a replacecommit before the earliest retained commit replaced: no retained
    # commit reads them (Java's CleanPlanner.getReplacedFilesEligibleToClean); all their files go
    gone: set[tuple[str, str]] = set()
    for inst in tl.completed_commits():
        if inst.action == Action.REPLACE_COMMIT and inst.timestamp < earliest:
            for part, ids in table.metadata(inst).replaced_file_ids().items():
                gone.update((part, f) for f in ids)
    if gone:
        parts = sorted({p for p, _ in gone})
        for group in view.all_file_groups(parts, include_replaced=True):
            if group.file_group_id in gone:
                for s in group.all_slices():
                    if held(s):
                        continue
                    names = ([s.base_file] if s.base_file else []) + list(s.log_files)
                    out.setdefault(s.partition_path, []).extend(names)
    if table.table_config.cdc_enabled:
        _with_cdc_files(view, out)
    return earliest, {p: sorted(set(n)) for p, n in out.items() if n}


def _with_cdc_files(view: FileSystemView, out: dict[str, list[str]]) -> None:
    """A CDC table's cleaned slices take their ``.cdc`` log files with them (Java's
    CleanPlanner deletes a slice's log files when CDC is on, whatever the table type): those
    of the base files' file group and instant."""
    for part, names in out.items():
        slices = set()
        for n in names:
            base = parse_base_file_name(n)
            if base is not None:
                slices.add((base.file_id, base.instant))
        if not slices:
            continue
        for info in view.list_files(part):
            log = parse_log_file_name(info.name)
            if log is not None and log.is_cdc and (log.file_id, log.instant) in slices:
                names.append(info.name)


#: Pending actions whose writer reads the slices it started from (and appends to them).
_WRITES = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT})


def _read_by_write(tl: ActiveTimeline, slices: list[FileSlice], write: str) -> int:
    """The index (in ``slices``, oldest first) of the slice the pending ``write`` may have
    started from: the latest one whose base completed before it was requested. A compaction
    requested before the write may have completed after it started (several writers): its
    instant time says nothing of that, its completion time (table version 8+) does; without
    one (version 6) the slice before it is kept too."""
    before = [i for i, s in enumerate(slices) if (s.base_instant or "") < write]
    if not before:
        return 0
    j = before[-1]
    completed = tl.completion_time(slices[j].base_instant or "")
    if j > 0 and (completed is None or completed >= write):
        j -= 1
    return j


def finish_pending_cleans(table: HoodieTable) -> list[str]:
    """Finish the cleans a writer that died left requested or inflight (as Java does before
    a new clean): delete what their plans list, then complete them. Their instants."""
    from hoodie_ray.storage import check_relative

    tl = table.active_timeline
    tl.reload()
    done = []
    for inst in [i for i in tl.pending() if i.action == Action.CLEAN]:
        start = time.monotonic()
        req = Instant(inst.timestamp, Action.CLEAN, State.REQUESTED)
        plan = HoodieCleanerPlan.from_bytes(tl.read_details(req), what=tl.file_name(req))
        if inst.state is State.REQUESTED:
            tl.transition_to_inflight(req)
        partitions: dict[str, HoodieCleanPartitionMetadata] = {}
        deleted = 0
        for part, infos in plan.file_paths_to_be_deleted_per_partition.items():
            pm = partitions[part] = HoodieCleanPartitionMetadata(part, plan.policy or POLICY)
            for info in infos:
                name = (info.file_path or "").rstrip("/").rsplit("/", 1)[-1]
                if not name:
                    continue
                rel = check_relative(join(part, name))
                try:
                    table.storage.delete(rel)  # missing_ok: deleted before the crash
                    pm.success_delete_files.append(name)
                    deleted += 1
                except Exception:
                    pm.failed_delete_files.append(name)
                pm.delete_path_patterns.append(name)
        commits = tl.completed_commits()
        e = plan.earliest_instant_to_retain
        meta = HoodieCleanMetadata(
            start_clean_time=inst.timestamp,
            earliest_commit_to_retain=e.timestamp if e else "",
            policy=plan.policy or POLICY,
            time_taken_in_millis=int((time.monotonic() - start) * 1000),
            total_files_deleted=deleted,
            last_completed_commit_timestamp=commits[-1].timestamp if commits else "",
            partition_metadata=partitions,
        )
        metadata_writer(table).update_clean(inst.timestamp, meta)
        tl.complete(Instant(inst.timestamp, Action.CLEAN, State.INFLIGHT), meta.to_bytes())
        done.append(inst.timestamp)
    return done


def clean_table(table: HoodieTable, retain: int) -> HoodieCleanMetadata | None:
    """Plan, delete and record a clean; what it deleted (the completed clean instant's
    metadata: ``start_clean_time`` is the instant), or None when there was nothing to delete.

    Cleans left pending by a writer that died are finished first. The metadata table (table
    versions 8+) records the deleted files before the clean instant completes."""
    finish_pending_cleans(table)
    earliest, files = files_to_clean(table, retain)
    if earliest is None or not files:
        return None
    tl = table.active_timeline
    start = time.monotonic()
    last = max([i.timestamp for i in tl.instants] + [tl.max_completion_time() or ""])
    instant = new_instant_time(last or None)
    earliest_inst = tl.get(earliest)
    plan = HoodieCleanerPlan(
        policy=POLICY,
        earliest_instant_to_retain=HoodieActionInstant(
            earliest,
            earliest_inst.action if earliest_inst else Action.DELTA_COMMIT,
            State.COMPLETED.value,
        ),
        file_paths_to_be_deleted_per_partition={
            p: [HoodieCleanFileInfo(table.storage.uri(join(p, n)), False) for n in names]
            for p, names in files.items()
        },
    )
    req = Instant(instant, Action.CLEAN, State.REQUESTED)
    tl.create_requested(req, plan.to_bytes())
    tl.transition_to_inflight(req)
    partitions: dict[str, HoodieCleanPartitionMetadata] = {}
    deleted = 0
    for part, names in files.items():
        pm = partitions[part] = HoodieCleanPartitionMetadata(part, POLICY)
        for n in names:
            rel = join(part, n)
            try:
                table.storage.delete(rel)
                pm.success_delete_files.append(n)
                deleted += 1
            except Exception:
                pm.failed_delete_files.append(n)
        pm.delete_path_patterns = list(names)
    last_commit = tl.completed_commits()[-1].timestamp
    meta = HoodieCleanMetadata(
        start_clean_time=instant,
        earliest_commit_to_retain=earliest,
        policy=POLICY,
        time_taken_in_millis=int((time.monotonic() - start) * 1000),
        total_files_deleted=deleted,
        last_completed_commit_timestamp=last_commit,
        partition_metadata=partitions,
    )
    metadata_writer(table).update_clean(instant, meta)
    tl.complete(Instant(instant, Action.CLEAN, State.INFLIGHT), meta.to_bytes())
    return meta
