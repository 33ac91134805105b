"""The commit protocol: start an instant, commit it atomically, roll it back.

* start: ``T.<action>.requested`` (put-if-absent, so two writers can never share an instant),
  then ``T.<action>.inflight``;
* commit: the completed instant file, written atomically (temp + rename), carrying the write
  stats and ``extraMetadata.schema``; then the markers are removed;
* rollback: every file the instant created is deleted (found through its markers and by name);
  where it appended to a log file that existed before, a rollback command block is appended
  (table version 6); a ``.rollback`` instant records it; the instant's files are removed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hoodie_ray.exceptions import (
    HoodieCommitConflictError,
    HoodieCommitStateUnknownError,
    HoodieError,
    HoodieTimelineError,
)
from hoodie_ray.file_group.naming import (
    log_file_name,
    parse_base_file_name,
    parse_log_file_name,
)
from hoodie_ray.metadata_writer.writer import metadata_writer
from hoodie_ray.storage import FileInfo, Storage, check_relative, join
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action, Instant, State, new_instant_time
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat
from hoodie_ray.timeline.timeline import ActiveTimeline
from hoodie_ray.write import logs
from hoodie_ray.write.heartbeat import heartbeat_path
from hoodie_ray.write.stream_writer import TEMP_DIR, marker_path

if TYPE_CHECKING:
    from hoodie_ray.timeline.plans import HoodieRollbackMetadata

WRITE_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


def is_write(timeline: ActiveTimeline, inst: Instant) -> bool:
    """Is ``inst`` a write (commit, deltacommit, or a replacecommit of an insert overwrite or
    a partition delete)? A pending replacecommit whose requested file holds a clustering plan
    is a clustering (table version 6 names it so; 8+ has its own action): a table service,
    not a write, left to its engine."""
    if inst.action not in WRITE_ACTIONS:
        return False
    if inst.action != Action.REPLACE_COMMIT or inst.is_completed:
        return True
    from hoodie_ray.timeline.plans import read_avro_metadata

    requested = Instant(inst.timestamp, inst.action, State.REQUESTED)
    try:
        data = timeline.read_details(requested)
        if not data:
            return True
        _, record = read_avro_metadata(data, timeline.file_name(requested))
    except HoodieError:
        return False  # unreadable: not ours to roll back
    return not record.get("clusteringPlan") and record.get("operationType") != "CLUSTER"


@dataclass(frozen=True)
class RollbackResult:
    instant: str
    rollback_instant: str
    deleted_files: tuple[str, ...]
    command_blocks: tuple[str, ...]


class CommitProtocol:
    """Timeline transitions of one writer on one table."""

    def __init__(self, table: HoodieTable) -> None:
        self.table = table
        self.storage = table.storage
        self.table_config = table.table_config
        self.timeline = table.active_timeline
        self.timeline.load()

    @property
    def write_action(self) -> str:
        return Action.DELTA_COMMIT if self.table_config.is_mor else Action.COMMIT

    def new_instant_time(self) -> str:
        self.timeline.reload()
        last = max((i.timestamp for i in self.timeline.instants), default=None)
        if self.table_config.timeline_layout_version >= 2:
            comps = [i.completion_time for i in self.timeline.instants if i.completion_time]
            if comps:
                last = max([last or "", *comps])
        return new_instant_time(last)

    def start(self, action: str | None = None, requested: bytes = b"") -> str:
        """A new instant, requested (with ``requested`` as its content) then inflight;
        returns its time."""
        action = action or self.write_action
        for _ in range(5):
            ts = self.new_instant_time()
            inst = Instant(ts, action, State.REQUESTED)
            try:
                self.timeline.create_requested(inst, requested)
            except HoodieCommitConflictError:
                time.sleep(0.002)  # another process took this time: take a later one
                continue
            self.timeline.transition_to_inflight(inst)
            return ts
        raise HoodieTimelineError(f"could not start a new instant on {self.storage.base_uri}")

    def commit(
        self,
        instant: str,
        stats: Iterable[HoodieWriteStat],
        *,
        schema_json: str,
        operation_type: str,
        action: str | None = None,
        compacted: bool = False,
        extra_metadata: dict[str, str] | None = None,
        replaced: dict[str, list[str]] | None = None,
    ) -> HoodieCommitMetadata:
        """Write the completed instant atomically, then drop the markers. ``replaced``: a
        replacecommit's ``partitionToReplaceFileIds``."""
        action = action or self.write_action
        by_part: dict[str, list[HoodieWriteStat]] = {}
        for st in stats:
            by_part.setdefault(st.partition_path or "", []).append(st)
        extra = {"schema": schema_json}
        extra.update(extra_metadata or {})
        meta = HoodieCommitMetadata(
            partition_to_write_stats=by_part,
            compacted=compacted,
            extra_metadata=extra,
            operation_type=operation_type,
            partition_to_replace_file_ids=replaced,
        )
        inst = Instant(instant, action, State.INFLIGHT)
        content = self.table.commit_metadata_bytes(meta)
        prior = self.timeline.completed_content(inst)
        if prior is not None:
            # committed already (a retry whose first try landed): the metadata table holds
            # that commit, and must not take another's files under its instant
            if prior == content:
                return meta
            raise HoodieCommitConflictError(
                f"instant {instant} is already completed with other content; the metadata "
                "table was left as that commit made it"
            )
        mdt = metadata_writer(self.table)
        mdt.update_commit(instant, meta)  # the metadata table first (spec 5.1)
        try:
            self.timeline.complete(inst, content)
        except OSError as e:  # the rename may or may not have happened
            raise HoodieCommitStateUnknownError(
                f"commit of {instant} on {self.storage.base_uri} failed while completing: {e}"
            ) from e
        self.storage.delete_dir(join(TEMP_DIR, instant))
        mdt.run_table_services()
        return meta

    # -- rollback ------------------------------------------------------------------------------
    def pending_writes(self) -> list[Instant]:
        self.timeline.reload()
        return [i for i in self.timeline.pending() if is_write(self.timeline, i)]

    def rollback_pending_writes(
        self, is_live: Callable[[str], bool] | None = None
    ) -> list[RollbackResult]:
        """Finish rollbacks a dead writer left pending, then roll back every pending
        commit/deltacommit (newest first) -- Hudi's EAGER failed-writes policy -- or, with
        ``is_live`` (the LAZY policy), only those whose writer is not live (an expired or
        missing heartbeat); their heartbeat files go with them.

        Last, drop the marker folders of instants that are not pending: a writer that died
        after completing or rolling back an instant, before deleting its markers, leaves them
        behind, and nothing else would ever remove them."""
        self.finish_pending_rollbacks()
        failed = [
            i
            for i in sorted(self.pending_writes(), reverse=True)
            if is_live is None or not is_live(i.timestamp)
        ]
        done = []
        for i in failed:
            done.append(self.rollback(i.timestamp))
            self.storage.delete(heartbeat_path(i.timestamp))
        pending = {i.timestamp for i in self.pending_writes()}
        for info in self.storage.list_dir(TEMP_DIR):
            if info.is_dir and info.name not in pending:
                self.storage.delete_dir(join(TEMP_DIR, info.name))
        return done

    def finish_pending_rollbacks(self) -> list[str]:
        """Re-run pending rollbacks from their plans (every step is idempotent) and complete them."""
        from hoodie_ray.timeline.plans import (
            HoodieInstantInfo,
            HoodieRollbackMetadata,
            HoodieRollbackPlan,
        )

        self.timeline.reload()
        done = []
        for inst in [i for i in self.timeline.pending() if i.action == Action.ROLLBACK]:
            req = Instant(inst.timestamp, Action.ROLLBACK, State.REQUESTED)
            plan = HoodieRollbackPlan.from_bytes(
                self.timeline.read_details(req), self.timeline.file_name(req)
            )
            target = plan.instant_to_rollback
            # Files of the target are found again (markers and names): deleting is idempotent.
            files = self._files_of(target)
            per_part: dict[str, list[str]] = {}
            for rel, io_type in sorted(files.items()):
                if not self.storage.exists(rel):
                    continue
                part, _, name = rel.rpartition("/")
                other, rolled_back = (
                    logs.rollback_scan(self.storage, rel, target)
                    if io_type == "APPEND" and not self.table_config.completion_time_slicing
                    else (False, False)
                )
                if other:
                    if not rolled_back:
                        logs.append_rollback_block(
                            self.storage, rel, self.table_config, inst.timestamp, target
                        )
                else:
                    self.storage.delete(rel)
                    per_part.setdefault(part, []).append(name)
            if inst.state is State.REQUESTED:
                self.timeline.transition_to_inflight(req)
            meta = HoodieRollbackMetadata(
                start_rollback_time=inst.timestamp,
                commits_rollback=[target],
                partition_deleted_files=per_part,
                instants_rollback=[HoodieInstantInfo(target, plan.action)],
            )
            metadata_writer(self.table).update_rollback(inst.timestamp, meta)
            self.timeline.complete(
                Instant(inst.timestamp, Action.ROLLBACK, State.INFLIGHT), meta.to_bytes()
            )
            for t in [
                i
                for i in self.timeline.instants
                if i.timestamp == target and i.state is not State.COMPLETED
            ]:
                self.timeline.delete_pending(t)
            self.storage.delete_dir(join(TEMP_DIR, target))
            done.append(inst.timestamp)
        return done

    def rollback(self, instant: str, *, known_only: bool = False) -> RollbackResult:
        """Undo a pending or failed write instant: never a completed one, nor one older than
        the active timeline's first commit (archived, or never written: its files, named by
        it, are committed data). ``known_only`` (a user's rollback, as Java's finds the
        instant on the active timeline first): such an instant, or one neither on the active
        timeline nor with markers, is refused; the writers' recovery (of instants they began)
        cleans what such an instant left."""
        self.timeline.reload()
        matches = [i for i in self.timeline.instants if i.timestamp == instant]
        if not matches and known_only:
            if self.timeline.is_committed(instant):
                raise HoodieTimelineError(
                    f"instant {instant} is older than the first commit on the active timeline "
                    f"of {self.storage.base_uri} ({self.timeline.earliest_active()}): archived "
                    "or never written, and committed data is never rolled back"
                )
            if next(self.storage.walk_files(join(TEMP_DIR, instant)), None) is None:
                raise HoodieTimelineError(
                    f"instant {instant} is not on the active timeline of "
                    f"{self.storage.base_uri} and left no markers: nothing to roll back"
                )
        if not matches:
            # Files may exist without an instant (crash between marker and requested): clean them.
            return self._rollback_files(instant, Action.DELTA_COMMIT, None)
        inst = matches[0]
        if inst.state is State.COMPLETED:
            raise HoodieTimelineError(
                f"instant {instant} is completed; rolling back completed commits is not supported"
            )
        if known_only and inst.action in _NOT_ROLLED_BACK:
            # a restore half way through is finished by running it again, a clean finishes
            # (its deletes are of files no one reads): rolled back, they were forgotten
            raise HoodieTimelineError(
                f"instant {instant} is a pending {inst.action}, not a write: it is finished, "
                "never rolled back (a restore by running hr.restore again)"
            )
        return self._rollback_files(instant, inst.action, inst)

    def _rollback_files(self, instant: str, action: str, inst: Instant | None) -> RollbackResult:
        from hoodie_ray.timeline.plans import HoodieRollbackPlan, RollbackRequest

        targets = self._files_of(instant)
        rb_ts = self.new_instant_time()
        requests: list[RollbackRequest] = []
        for rel in sorted(targets):
            part, _, name = rel.rpartition("/")
            requests.append(
                RollbackRequest(partition_path=part, file_id=_file_id(name), files_to_delete=[name])
            )
        plan = HoodieRollbackPlan(instant_to_rollback=instant, action=action, requests=requests)
        rb_req = Instant(rb_ts, Action.ROLLBACK, State.REQUESTED)
        self.timeline.create_requested(rb_req, plan.to_bytes())
        self.timeline.transition_to_inflight(rb_req)
        meta, appended = self.undo_files(instant, action, targets, rb_ts)
        deleted = [
            join(p, n) for p, pm in meta.partition_metadata.items() for n in pm.success_delete_files
        ]
        metadata_writer(self.table).update_rollback(rb_ts, meta)
        self.timeline.complete(Instant(rb_ts, Action.ROLLBACK, State.INFLIGHT), meta.to_bytes())
        if inst is not None:
            self.timeline.delete_pending(inst)
        self.storage.delete_dir(join(TEMP_DIR, instant))
        return RollbackResult(instant, rb_ts, tuple(deleted), tuple(appended))

    def undo_files(
        self, instant: str, action: str, targets: dict[str, str], rb_ts: str
    ) -> tuple[HoodieRollbackMetadata, list[str]]:
        """Undo what ``instant`` wrote to ``targets`` (path -> marker IO type): each file it
        created is deleted; a version-6 log file it appended to that holds other instants'
        blocks gets a rollback command block (stamped ``rb_ts``). Idempotent: gone files are
        skipped, and a log already ending with the block is left. The rollback metadata of
        what was done, and the logs that got a block."""
        from hoodie_ray.timeline.plans import (
            HoodieInstantInfo,
            HoodieRollbackMetadata,
            HoodieRollbackPartitionMetadata,
        )

        per_part: dict[str, list[str]] = {}
        appended: list[str] = []
        listed: dict[str, list[FileInfo]] = {}  # partitions listed for carried copies
        for rel, io_type in sorted(targets.items()):
            if not self.storage.exists(rel):
                continue
            name = rel.rpartition("/")[2]
            shared = io_type == "APPEND" and self._may_share_log(name, instant)
            # v6: a compaction that completed since may have carried this log's blocks into
            # its slice; each copy is undone too (else its blocks read again, as committed,
            # once archival passes ``instant``)
            copies = logs.carried_copies(self.storage, rel, listed) if shared else []
            for path in [rel, *copies]:
                if path != rel and not logs.holds_blocks_of(self.storage, path, instant):
                    continue
                other, rolled_back = (
                    logs.rollback_scan(self.storage, path, instant) if shared else (False, False)
                )
                if other:
                    if not rolled_back:
                        logs.append_rollback_block(
                            self.storage, path, self.table_config, rb_ts, instant
                        )
                    appended.append(path)
                else:
                    self.storage.delete(path)
                    part, _, gone = path.rpartition("/")
                    per_part.setdefault(part, []).append(gone)
        meta = HoodieRollbackMetadata(
            start_rollback_time=rb_ts,
            commits_rollback=[instant],
            partition_deleted_files=per_part,
            instants_rollback=[HoodieInstantInfo(instant, action)],
        )
        for rel in appended:  # v6: the logs that now end with a rollback block, by size
            part = rel.rpartition("/")[0]
            pm = meta.partition_metadata.setdefault(part, HoodieRollbackPartitionMetadata(part))
            pm.rollback_log_files[self.storage.uri(rel)] = self.storage.size(rel)
        return meta, appended

    def _may_share_log(self, name: str, instant: str) -> bool:
        """Whether the log file ``name`` that ``instant`` appended to may hold other instants'
        blocks: any on version 6, where a slice's writes share its logs; on version 8+ one a
        table upgraded from 6 still has (named by another instant), as each write's own log
        is named by its instant there."""
        if not self.table_config.completion_time_slicing:
            return True
        log = parse_log_file_name(name)
        return log is None or log.instant != instant

    def files_written(self, instant: str) -> dict[str, str]:
        """Every data file ``instant`` created or appended to (path -> IO type): its markers,
        the files named by it, and, completed, the files its commit metadata names (a
        version-6 log file as APPEND: other instants' blocks may share it)."""
        out = self._files_of(instant)
        inst = self.timeline.get(instant)
        if inst is not None and inst.is_completed and inst.action in WRITE_ACTIONS:
            meta = self.table.metadata(inst)
            for path in meta.written_paths():
                rel = check_relative(path)
                log = parse_log_file_name(rel.rpartition("/")[2])
                if log is not None and not log.is_cdc:  # a .cdc file is its instant's alone
                    out.setdefault(rel, "APPEND")
                else:
                    out.setdefault(rel, "CREATE")
        return out

    def _files_of(self, instant: str) -> dict[str, str]:
        """Data files an instant created or appended: its markers, plus files named by it."""
        out: dict[str, str] = {}
        mroot = join(TEMP_DIR, instant)
        for rel in self.storage.walk_files(mroot):
            sub = rel[len(mroot) + 1 :]
            if ".marker." not in sub:
                continue
            path, _, io_type = sub.rpartition(".marker.")
            if path.startswith(".hoodie") or not _file_id(path.rpartition("/")[2]):
                continue  # a marker must name a data file of the table, never metadata
            if io_type in ("CREATE", "MERGE") and not _named_by(path.rpartition("/")[2], instant):
                continue  # what an instant creates carries its time: a stray marker, not ours
            out[path] = io_type
        # Defensive: base files, (v8) log files and .cdc files carrying the instant, without
        # markers.
        for part in _partition_dirs(self.storage):
            for info in self.storage.list_dir(part):
                if info.is_dir:
                    continue
                b = parse_base_file_name(info.name)
                if b is not None and b.instant == instant:
                    out.setdefault(join(part, info.name), "CREATE")
                lf = parse_log_file_name(info.name)
                if (
                    lf is not None
                    and lf.instant == instant
                    and (self.table_config.completion_time_slicing or lf.is_cdc)
                ):
                    out.setdefault(join(part, info.name), "CREATE")
        return out


#: Pending instants a user's rollback refuses: not writes (their own runs finish them).
_NOT_ROLLED_BACK = frozenset(
    {Action.RESTORE, Action.ROLLBACK, Action.CLEAN, Action.SAVEPOINT, Action.INDEXING}
)


def _named_by(name: str, instant: str) -> bool:
    """Does the file name carry ``instant`` (base files; log files of table version 8+)?"""
    b = parse_base_file_name(name)
    if b is not None:
        return b.instant == instant
    lf = parse_log_file_name(name)
    return lf is not None and lf.instant == instant


def _file_id(name: str) -> str:
    b = parse_base_file_name(name)
    if b is not None:
        return b.file_id
    lf = parse_log_file_name(name)
    return lf.file_id if lf is not None else ""


def _partition_dirs(storage: Storage, rel: str = "", depth: int = 0) -> list[str]:
    """Every directory of the table except the meta folder (bounded depth)."""
    out = [rel]
    if depth > 8:
        return out
    for info in storage.list_dir(rel):
        if info.is_dir and not (rel == "" and info.name.startswith(".hoodie")):
            out.extend(_partition_dirs(storage, join(rel, info.name), depth + 1))
    return out


# -- several writers: the files of writes in flight, logs a compaction superseded --------------


def pending_write_files(table: HoodieTable) -> set[tuple[str, str]]:
    """``(partition, file name)`` of every data file a pending write (commit, deltacommit)
    created or appended, read from its markers (each written before its file). Read it after
    the listing it is checked against: a file listed then has its marker already."""
    out: set[tuple[str, str]] = set()
    storage = table.storage
    for inst in table.active_timeline.pending():
        if not is_write(table.active_timeline, inst):
            continue
        root = join(TEMP_DIR, inst.timestamp)
        for rel in storage.walk_files(root):
            sub = rel[len(root) + 1 :]
            if ".marker." not in sub:
                continue
            part, _, name = sub.rpartition(".marker.")[0].rpartition("/")
            out.add((part, name))
    return out


def relocate_superseded_logs(
    table: HoodieTable, instant: str, stats: list[HoodieWriteStat]
) -> list[HoodieWriteStat]:
    """Table version 6, several writers: move the log files of write ``instant`` that a
    compaction completed since its start left in a superseded file slice into the group's
    latest slice; the stats, updated. Call under the table lock, just before the commit.

    A version-6 log file is named by the base instant of the slice it belongs to. A write that
    read its slices before a compaction was scheduled names its logs by the old slice; when that
    compaction completes first, its commit carries over only logs of completed writes, so these
    would stay behind the new base file, never read. Each is copied into the latest slice
    (named by its base instant, after that slice's logs, a marker first so a rollback finds
    it), the old file deleted, and its stat pointed at the copy: the log joins the new slice
    as on table version 8+ by completion time (and as Java's writers name logs by the slice a
    pending compaction starts)."""
    if table.completion_time_slicing:
        return stats
    by_part: dict[str, list[HoodieWriteStat]] = {}
    for st in stats:
        if st.is_delta and st.log_files and st.file_id:
            by_part.setdefault(st.partition_path or "", []).append(st)
    if not by_part:
        return stats
    table.active_timeline.reload()
    view = table.storage_view()
    storage = table.storage
    for part, part_stats in by_part.items():
        latest = {s.file_id: s for s in view.latest_file_slices(partitions=[part])}
        for st in part_stats:
            slc = latest.get(st.file_id or "")
            name = (st.log_files or [""])[0]
            lf = parse_log_file_name(name)
            if slc is None or lf is None or name in slc.log_files:
                continue
            base = slc.base_instant
            versions = [
                p.version
                for p in map(parse_log_file_name, slc.log_files)
                if p is not None and p.instant == base
            ]
            new = log_file_name(lf.file_id, base, max(versions, default=0) + 1, lf.write_token)
            storage.write_bytes(marker_path(instant, part, new, "APPEND"), b"")
            storage.write_bytes(join(part, new), storage.read_bytes(join(part, name)))
            storage.delete(join(part, name))
            st.path = join(part, new)
            st.log_files = [new]
            st.log_version = max(versions, default=0) + 1
            st.prev_commit = base
            st.base_file = slc.base_file or ""
    return stats
