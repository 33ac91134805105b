"""Savepoints and restore (Hudi's ``savepoint`` and ``restore`` actions).

* A savepoint of completed commit ``T`` is ``T.savepoint`` (an empty ``T.savepoint.inflight``,
  then the completed file with Java's ``HoodieSavepointMetadata``): the files of the table's
  latest file slices as of ``T``, base and log files. The cleaner keeps every slice a
  savepoint holds a file of, and archival stops at the first savepoint, so the table as of
  ``T`` stays readable (time travel) and restorable. ``T`` must still be readable: not older
  than the earliest commit the last clean retained.
* A restore to savepoint ``T`` is ``R.restore`` (``R`` a new instant): its plan
  (``HoodieRestorePlan``) lists every write after ``T`` -- commits, delta commits,
  replacecommits, compactions, clusterings, completed or pending -- newest first; each is
  rolled back (the files it created deleted, a version-6 log it appended to holding earlier
  blocks given a rollback command block, its instant files deleted), then rollback instants
  after ``T`` go, the metadata table is rebuilt from the restored listing, and ``R`` completes
  with each rollback in its ``HoodieRestoreMetadata``. Every step is idempotent: a restore
  that died is finished by running it again (writers refuse the table meanwhile), which
  re-reads the pending plan. A restore past a newer savepoint is refused (delete it first),
  as Java refuses it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from hoodie_ray.compaction.api import CompactionService
from hoodie_ray.config.options import WriteConfig, resolve_options
from hoodie_ray.exceptions import HoodieTimelineError
from hoodie_ray.file_group.naming import parse_log_file_name
from hoodie_ray.job.conflict import is_compaction
from hoodie_ray.metadata_writer.writer import metadata_writer
from hoodie_ray.storage import join
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.plans import (
    HoodieInstantInfo,
    HoodieRestoreMetadata,
    HoodieRestorePlan,
    HoodieRollbackMetadata,
    HoodieSavepointMetadata,
)
from hoodie_ray.write.commit import CommitProtocol
from hoodie_ray.write.heartbeat import HeartbeatClient, heartbeat_path
from hoodie_ray.write.lock_providers import open_lock
from hoodie_ray.write.logs import holds_blocks_of
from hoodie_ray.write.stream_writer import TEMP_DIR

#: What a restore rolls back after its savepoint (Hudi's write timeline).
RESTORED_ACTIONS = frozenset(
    {
        Action.COMMIT,
        Action.DELTA_COMMIT,
        Action.REPLACE_COMMIT,
        Action.COMPACTION,
        Action.LOG_COMPACTION,
        Action.CLUSTERING,
    }
)


@dataclass(frozen=True)
class SavepointInfo:
    """One savepoint: its instant (the savepointed commit's), who took it and when (epoch
    ms), the comment, and how many files it holds."""

    instant: str
    savepointed_by: str
    savepointed_at: int
    comments: str
    files: int


@dataclass(frozen=True)
class RestoreResult:
    """What a restore did: its instant, the savepoint it restored, and the instants it rolled
    back (newest first, as ``(instant, action)``)."""

    instant: str
    savepoint: str
    rolled_back: tuple[tuple[str, str], ...]


def _lock(table: HoodieTable, options: dict[str, Any] | None) -> Any:
    return open_lock(table.storage, resolve_options(options))


def savepoint(
    path: str,
    instant: str | None = None,
    *,
    user: str = "",
    comments: str = "",
    options: dict[str, Any] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> str:
    """Savepoint completed commit ``instant`` (default: the latest) of the table at ``path``:
    cleaning keeps its files and archival stops at it, so :func:`restore` can bring the table
    back to it. Returns the savepointed instant.

    Raises:
        HoodieTimelineError: ``instant`` is not a completed commit, is older than the earliest
            commit the last clean retained (its files may be gone), or is savepointed already.

    Example::

        hr.savepoint("/data/trips")                      # the latest commit
        hr.restore("/data/trips", "20261129083000123")   # back to it after a bad job
    """
    table = HoodieTable.load(path, storage_options)
    with _lock(table, options):
        tl = table.refresh().active_timeline
        commits = {i.timestamp: i for i in tl.completed_commits()}
        if instant is None:
            if not commits:
                raise HoodieTimelineError(f"{path}: no completed commit to savepoint")
            instant = max(commits)
        if instant not in commits:
            raise HoodieTimelineError(
                f"{path}: cannot savepoint {instant}: not a completed commit on the active timeline"
            )
        retained = table.earliest_retained_commit()
        if retained is not None and instant < retained:
            raise HoodieTimelineError(
                f"{path}: cannot savepoint {instant}: the last clean retained commits from "
                f"{retained} only (older files may be gone)"
            )
        if tl.get(instant, Action.SAVEPOINT) is not None:
            raise HoodieTimelineError(f"{path}: {instant} is savepointed already")
        files: dict[str, list[str]] = {}
        for s in table.view().latest_file_slices(as_of=instant):
            names = ([s.base_file] if s.base_file else []) + list(s.log_files)
            files.setdefault(s.partition_path, []).extend(names)
        meta = HoodieSavepointMetadata(
            savepointed_by=user,
            savepointed_at=int(time.time() * 1000),
            comments=comments,
            partition_files={p: sorted(n) for p, n in sorted(files.items())},
        )
        inst = tl.create_inflight(Instant(instant, Action.SAVEPOINT, State.INFLIGHT))
        tl.complete(inst, meta.to_bytes())
    return instant


def savepoints(path: str, *, storage_options: dict[str, Any] | None = None) -> list[SavepointInfo]:
    """The table's completed savepoints, oldest first."""
    table = HoodieTable.load(path, storage_options)
    tl = table.active_timeline
    out = []
    for inst in tl.find([Action.SAVEPOINT], [State.COMPLETED]):
        meta = HoodieSavepointMetadata.from_bytes(tl.read_details(inst), tl.file_name(inst))
        out.append(
            SavepointInfo(
                inst.timestamp,
                meta.savepointed_by,
                meta.savepointed_at,
                meta.comments,
                len(meta.file_names()),
            )
        )
    return out


def delete_savepoint(
    path: str,
    instant: str,
    *,
    options: dict[str, Any] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> None:
    """Delete savepoint ``instant`` (its completed file first, then the inflight one): the
    next clean may delete the files it held.

    Raises:
        HoodieTimelineError: no savepoint at ``instant``.
    """
    table = HoodieTable.load(path, storage_options)
    with _lock(table, options):
        tl = table.refresh().active_timeline
        inst = tl.get(instant, Action.SAVEPOINT)
        if inst is None:
            raise HoodieTimelineError(f"{path}: no savepoint at {instant}")
        tl.delete_instant(inst)


def pending_restore(table: HoodieTable) -> tuple[Instant, HoodieRestorePlan] | None:
    """A restore that started and did not finish, and its plan."""
    tl = table.active_timeline
    for inst in tl.pending():
        if inst.action == Action.RESTORE:
            req = Instant(inst.timestamp, Action.RESTORE, State.REQUESTED)
            return inst, HoodieRestorePlan.from_bytes(tl.read_details(req), tl.file_name(req))
    return None


def check_no_pending_restore(table: HoodieTable) -> None:
    """Refuse to write a table a restore is half way through (its plan's instants are being
    rolled back).

    Raises:
        HoodieTimelineError: naming the savepoint and how to finish the restore.
    """
    found = pending_restore(table)
    if found is not None:
        inst, plan = found
        raise HoodieTimelineError(
            f"{table.base_uri}: a restore to savepoint {plan.savepoint} ({inst.timestamp}) did "
            f"not finish; finish it first: hr.restore({table.base_uri!r}, {plan.savepoint!r})"
        )


def restore(
    path: str,
    instant: str,
    *,
    options: dict[str, Any] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> RestoreResult:
    """Restore the table at ``path`` to savepoint ``instant``: every write after it rolled
    back, the metadata table rebuilt (see the module's description). Safe to run again after
    a crash: a pending restore to the same savepoint is finished.

    Raises:
        HoodieTimelineError: no savepoint at ``instant``; a newer savepoint exists; a pending
            restore to another savepoint must be finished first.
    """
    table = HoodieTable.load(path, storage_options)
    with _lock(table, options):
        tl = table.refresh().active_timeline
        protocol = CommitProtocol(table)
        found = pending_restore(table)
        if found is not None:
            rinst, plan = found
            if plan.savepoint not in (None, instant):
                raise HoodieTimelineError(
                    f"{path}: a restore to savepoint {plan.savepoint} is pending "
                    f"({rinst.timestamp}); finish it first: hr.restore({path!r}, "
                    f"{plan.savepoint!r})"
                )
        else:
            plan = _plan(table, path, instant)
            _check_no_live_writes(table, path, plan, resolve_options(options))
            rts = protocol.new_instant_time()
            rinst = Instant(rts, Action.RESTORE, State.REQUESTED)
            tl.create_requested(rinst, plan.to_bytes())
            rinst = tl.transition_to_inflight(rinst)
        rollbacks: dict[str, HoodieRollbackMetadata] = {}
        for info in plan.instants:
            rollbacks[info.commit_time] = _roll_back(table, protocol, info)
        tl.reload()
        for inst in tl.find([Action.ROLLBACK]):
            if inst.timestamp > instant and inst.timestamp < rinst.timestamp:
                tl.delete_instant(inst)  # as Java: rollbacks after the savepoint go
        w = metadata_writer(table)
        if w.enabled:
            w.rebuild()
        meta = HoodieRestoreMetadata(rinst.timestamp, rollbacks, list(plan.instants))
        tl.complete(rinst.with_state(State.INFLIGHT), meta.to_bytes())
        return RestoreResult(
            rinst.timestamp,
            instant,
            tuple((i.commit_time, i.action) for i in plan.instants),
        )


def _plan(table: HoodieTable, path: str, instant: str) -> HoodieRestorePlan:
    tl = table.active_timeline
    points = [i.timestamp for i in tl.find([Action.SAVEPOINT], [State.COMPLETED])]
    if instant not in points:
        raise HoodieTimelineError(
            f"{path}: no savepoint at {instant} to restore (savepoints: "
            f"{', '.join(points) or 'none'}); create one with hr.savepoint"
        )
    newer = [p for p in points if p > instant]
    if newer:
        raise HoodieTimelineError(
            f"{path}: cannot restore to {instant}: newer savepoints {', '.join(newer)} would "
            "be rolled back; delete them first (hoodie-ray savepoint delete)"
        )
    after = [i for i in tl.instants if i.action in RESTORED_ACTIONS and i.timestamp > instant]
    after.sort(key=lambda i: i.timestamp, reverse=True)
    return HoodieRestorePlan(
        [HoodieInstantInfo(i.timestamp, i.action) for i in after], savepoint=instant
    )


def _moved_back(table: HoodieTable, instant: str, targets: dict[str, str]) -> dict[str, str]:
    """``targets`` with each log file that is gone replaced by the logs of its file group and
    write token holding ``instant``'s blocks: a restore moved it back out of the slice of a
    compaction it rolled back (:meth:`CompactionService.unwind_logs`), this run or one that
    died before this write's turn came."""
    out = dict(targets)
    for rel, io in targets.items():
        gone = parse_log_file_name(rel.rpartition("/")[2])
        if gone is None or gone.is_cdc or table.storage.exists(rel):
            continue
        part = rel.rpartition("/")[0]
        for f in table.storage.list_dir(part):
            lf = parse_log_file_name(f.name)
            path = join(part, f.name) if part else f.name
            if (
                lf is not None
                and not lf.is_cdc
                and lf.file_id == gone.file_id
                and lf.write_token == gone.write_token
                and path not in out
                and holds_blocks_of(table.storage, path, instant)
            ):
                out[path] = io
    return out


def _check_no_live_writes(
    table: HoodieTable, path: str, plan: HoodieRestorePlan, wc: WriteConfig
) -> None:
    """Refuse a restore that would roll back an instant whose writer is still running (its
    heartbeat beats: another writer under optimistic concurrency control, a compaction beside
    the writes): that writer would then fail, its rows lost."""
    done = {i.timestamp for i in table.active_timeline.completed()}
    beats = HeartbeatClient(table.storage, wc.heartbeat_interval_ms, wc.heartbeat_tolerable_misses)
    live = [
        f"{i.commit_time} ({i.action})"
        for i in plan.instants
        if i.commit_time not in done and not beats.is_expired(i.commit_time)
    ]
    if live:
        raise HoodieTimelineError(
            f"{path}: cannot restore while writes after the savepoint are running: "
            f"{', '.join(live)} (their heartbeats are live); stop their writers, or wait "
            f"{wc.heartbeat_interval_ms * wc.heartbeat_tolerable_misses // 1000} s after they "
            "died"
        )


def _roll_back(
    table: HoodieTable, protocol: CommitProtocol, info: HoodieInstantInfo
) -> HoodieRollbackMetadata:
    """Undo one instant of a restore (completed or pending; gone already: what is left of it
    by name), then delete its instant files."""
    tl = table.active_timeline.reload()
    ts = info.commit_time
    inst = tl.get(ts, info.action)
    if inst is not None and inst.is_completed and is_compaction(inst, table.metadata(inst)):
        # the logs of other writes it carried or that moved into its slice go back first
        CompactionService(table, resolve_options(None)).unwind_logs(ts)
    rb_ts = protocol.new_instant_time()
    targets = _moved_back(table, ts, protocol.files_written(ts))
    meta, _ = protocol.undo_files(ts, info.action, targets, rb_ts)
    if inst is not None:
        tl.delete_instant(inst)
    table.storage.delete_dir(join(TEMP_DIR, ts))
    table.storage.delete(heartbeat_path(ts))
    return meta


__all__ = [
    "RestoreResult",
    "SavepointInfo",
    "check_no_pending_restore",
    "delete_savepoint",
    "pending_restore",
    "restore",
    "savepoint",
    "savepoints",
]
