"""The active timeline: the instant files of ``.hoodie/`` (layout 1) or ``.hoodie/timeline/`` (layout 2).

Names from Hudi: ``HoodieActiveTimeline`` (here :class:`ActiveTimeline`). Loading keeps one
instant per (requested time, comparable action) at its most advanced state, as Hudi's
``TimelineLayout.filterHoodieInstants`` does. Transitions write whole files atomically
(``Storage.create_new`` / ``Storage.write_atomic``), so a reader never sees a half-written
instant file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hoodie_ray.config.table_config import DEFAULT_TIMELINE_FOLDER, METAFOLDER, HoodieTableConfig
from hoodie_ray.exceptions import (
    HoodieCommitConflictError,
    HoodieCorruptedDataError,
    HoodieTimelineError,
)
from hoodie_ray.storage import Storage, join
from hoodie_ray.timeline.instant import (
    LAYOUT_VERSION_1,
    LAYOUT_VERSION_2,
    Action,
    Instant,
    InstantTimeGenerator,
    State,
    instant_file_name,
    new_instant_time,
    parse_instant_file_name,
)

__all__ = ["MAX_INSTANT_FILE_BYTES", "ActiveTimeline"]

#: Instant files larger than this are refused as corrupt (they are kilobytes in practice).
MAX_INSTANT_FILE_BYTES = 64 * 1024 * 1024


def _sort_key(inst: Instant) -> tuple[str, str, int]:
    return (inst.timestamp, Action.comparable(inst.action), inst.state.rank)


class ActiveTimeline:
    """The active timeline of one table.

    Args:
        storage: storage rooted at the table's base path.
        layout_version: ``hoodie.timeline.layout.version`` (1 for table version 6, 2 for 8/9).
        timeline_folder: ``hoodie.timeline.path`` for layout 2 (default ``timeline``).
        load: list the timeline now (else call :meth:`load`).
        time_generator: where completion times come from (default: the process-wide
            :func:`~hoodie_ray.timeline.instant.new_instant_time`).

    Example:
        >>> tl = ActiveTimeline(open_storage("/data/t"), layout_version=1)  # doctest: +SKIP
        >>> tl.last_completed()                                             # doctest: +SKIP
    """

    def __init__(
        self,
        storage: Storage,
        layout_version: int,
        *,
        timeline_folder: str = DEFAULT_TIMELINE_FOLDER,
        load: bool = True,
        time_generator: InstantTimeGenerator | None = None,
    ) -> None:
        if layout_version not in (LAYOUT_VERSION_1, LAYOUT_VERSION_2):
            raise HoodieTimelineError(f"unsupported timeline layout version {layout_version}")
        self.storage = storage
        self.layout_version = layout_version
        self._new_time = time_generator.next if time_generator is not None else new_instant_time
        if layout_version == LAYOUT_VERSION_1:
            self.timeline_dir = METAFOLDER
        else:
            self.timeline_dir = join(METAFOLDER, timeline_folder)
        # (timestamp, comparable action) -> the instant at its most advanced state
        self._by_key: dict[tuple[str, str], Instant] = {}
        # every file name seen in the timeline folder -> its parsed instant (None: not one);
        # a reload parses only names it has not seen, so its cost does not grow with history
        self._names: dict[str, Instant | None] = {}
        # as_if_completed: the content a pending instant's completed file will hold
        self._pending_details: dict[str, bytes] = {}
        self._instants: list[Instant] = []
        self._sorted = True
        if load:
            self.load()

    @classmethod
    def of_table(cls, storage: Storage, table_config: HoodieTableConfig) -> ActiveTimeline:
        """The (not yet listed) active timeline of a table: layout and folder from its config."""
        return cls(
            storage,
            table_config.timeline_layout_version,
            timeline_folder=table_config.timeline_folder,
            load=False,
        )

    # -- loading -----------------------------------------------------------------------------
    def load(self) -> ActiveTimeline:
        """List the timeline folder and bring the instants up to date; returns ``self``.

        Names seen before are not parsed again: only instant files added or removed by
        others since the last listing change the in-memory timeline.
        """
        names = self.storage.list_file_names(self.timeline_dir)
        known = self._names
        added = [n for n in names if n not in known]
        removed = len(known) + len(added) != len(names)
        for n in added:
            known[n] = parse_instant_file_name(n, self.layout_version)
        if removed:
            present = set(names)
            for n in [n for n in known if n not in present]:
                del known[n]
            self._by_key = {}
            for inst in known.values():
                if inst is not None:
                    self._merge(self._by_key, inst)
            self._sorted = False
        else:
            for n in added:
                inst = known[n]
                if inst is not None:
                    self._note(inst)
        return self

    def reload(self) -> ActiveTimeline:
        """Same as :meth:`load`: pick up instants written (or removed) by others."""
        return self.load()

    @staticmethod
    def _merge(by_key: dict[tuple[str, str], Instant], inst: Instant) -> bool:
        key = (inst.timestamp, inst.comparable_action)
        old = by_key.get(key)
        if old is None or inst.state.rank > old.state.rank:
            by_key[key] = inst
            return True
        return False

    def _note(self, inst: Instant) -> None:
        """Merge one instant known to be on storage into the in-memory timeline."""
        if self._merge(self._by_key, inst):
            self._sorted = False

    def _written(self, inst: Instant) -> None:
        """This timeline wrote ``inst``'s file: record it without listing."""
        self._names[self.file_name(inst)] = inst
        self._note(inst)

    @property
    def _sorted_instants(self) -> list[Instant]:
        if not self._sorted:
            # one key per instant (Hudi's COMPARATOR), not a rich comparison per pair
            self._instants = sorted(self._by_key.values(), key=_sort_key)
            self._sorted = True
        return self._instants

    # -- accessors ---------------------------------------------------------------------------
    @property
    def instants(self) -> list[Instant]:
        """Every instant, oldest first, each at its most advanced state."""
        return list(self._sorted_instants)

    def state_key(self) -> tuple[Any, ...]:
        """Every instant at its state, as a key of what follows from the timeline: any
        commit, rollback, clean, archival or state change (an old pending compaction
        completing included) gives another key."""
        return tuple(
            (i.timestamp, i.action, i.state, i.completion_time) for i in self._sorted_instants
        )

    def completed(self) -> list[Instant]:
        """Completed instants of every action, oldest first."""
        return [i for i in self._sorted_instants if i.is_completed]

    def pending(self) -> list[Instant]:
        """Requested or inflight instants of every action, oldest first."""
        return [i for i in self._sorted_instants if not i.is_completed]

    def completed_commits(self) -> list[Instant]:
        """Completed commit, deltacommit and replacecommit instants (compactions show as commit)."""
        return [
            i for i in self._sorted_instants if i.is_completed and i.action in Action.COMMIT_ACTIONS
        ]

    def pending_compactions(self) -> list[Instant]:
        """Requested or inflight compaction instants, oldest first."""
        return [
            i for i in self._sorted_instants if not i.is_completed and i.action == Action.COMPACTION
        ]

    def pending_commits(self) -> list[Instant]:
        """Pending instants that write data: commit, deltacommit, replacecommit, compaction,
        log compaction, clustering."""
        writes = Action.COMMIT_ACTIONS | {
            Action.COMPACTION,
            Action.LOG_COMPACTION,
            Action.CLUSTERING,
        }
        return [i for i in self._sorted_instants if not i.is_completed and i.action in writes]

    def last_completed(self) -> Instant | None:
        """The completed commit-like instant with the greatest requested time, or ``None``."""
        commits = self.completed_commits()
        return commits[-1] if commits else None

    def last_completed_by_completion_time(self) -> Instant | None:
        """In layout 2, the completed commit-like instant that completed last."""
        commits = self.completed_commits()
        if not commits:
            return None
        return max(commits, key=lambda i: (i.completion_time or i.timestamp, i.timestamp))

    def earliest_active(self) -> str | None:
        """The requested time of the first commit, deltacommit or replacecommit on the active
        timeline, in any state -- the archival boundary.

        Pending instants count (a failed write older than every completed commit must not make
        its files look archived-and-committed), other actions (clean, rollback, compaction
        plans...) do not: that is how hudi-rs 0.5.0 draws the boundary.
        """
        for inst in self._sorted_instants:
            if inst.action in Action.COMMIT_ACTIONS:
                return inst.timestamp
        return None

    def is_committed(self, ts: str) -> bool:
        """True if data written at ``ts`` is committed.

        That is: ``ts`` is a completed commit, deltacommit or replacecommit (a completed
        compaction counts: it completes as a commit), or ``ts`` is older than
        :meth:`earliest_active` -- the archival boundary (spec §2.5; Java's
        ``containsOrBeforeTimelineStarts``, hudi-rs's listing filter).
        """
        for action in Action.COMMIT_ACTIONS:
            inst = self._by_key.get((ts, action))
            if inst is not None and inst.is_completed:
                return True
        first = self.earliest_active()
        return first is not None and ts < first

    def is_pending_compaction(self, ts: str) -> bool:
        """True if ``ts`` is a requested or inflight compaction."""
        inst = self._by_key.get((ts, Action.COMMIT))
        return inst is not None and inst.action == Action.COMPACTION and not inst.is_completed

    def completion_time(self, ts: str) -> str | None:
        """The completion time of the completed instant requested at ``ts`` (layout 2), else None.

        Commit-like instants win when several actions share the requested time.
        """
        for action in (*sorted(Action.COMMIT_ACTIONS), *sorted(Action.ALL)):
            inst = self._by_key.get((ts, action))
            if inst is not None and inst.is_completed:
                return inst.completion_time
        return None

    def contains(self, ts: str) -> bool:
        """True if any instant (any action, any state) has requested time ``ts``."""
        return any(key[0] == ts for key in self._by_key)

    def get(self, ts: str, action: str | None = None) -> Instant | None:
        """The instant requested at ``ts`` (of ``action`` or its comparable action if given)."""
        if action is not None:
            return self._by_key.get((ts, Action.comparable(action)))
        found = [i for (t, _), i in self._by_key.items() if t == ts]
        return min(found) if found else None

    def find(self, actions: Iterable[str], states: Iterable[State] | None = None) -> list[Instant]:
        """Instants whose action is one of ``actions`` (and state one of ``states``)."""
        acts = set(actions)
        sts = set(states) if states is not None else None
        return [
            i for i in self._sorted_instants if i.action in acts and (sts is None or i.state in sts)
        ]

    def max_completion_time(self) -> str | None:
        """The greatest completion time on the timeline (layout 2), or ``None``."""
        times = [i.completion_time for i in self._sorted_instants if i.completion_time]
        return max(times) if times else None

    # -- file access -------------------------------------------------------------------------
    def file_name(self, instant: Instant) -> str:
        """The file name of ``instant`` in this timeline's layout."""
        return instant_file_name(instant, self.layout_version)

    def instant_path(self, instant: Instant) -> str:
        """The path of ``instant``'s file, relative to the table's base path."""
        return join(self.timeline_dir, self.file_name(instant))

    def read_details(self, instant: Instant) -> bytes:
        """The content of ``instant``'s file (commit metadata, plan...).

        Raises:
            HoodieCorruptedDataError: the file is larger than :data:`MAX_INSTANT_FILE_BYTES`.
            HoodieIOError: the file cannot be read.
        """
        if instant.is_completed and instant.timestamp in self._pending_details:
            return self._pending_details[instant.timestamp]
        rel = self.instant_path(instant)
        size = self.storage.size(rel)
        if size > MAX_INSTANT_FILE_BYTES:
            raise HoodieCorruptedDataError(
                f"instant file {self.storage.uri(rel)} is {size} bytes, "
                f"over the {MAX_INSTANT_FILE_BYTES}-byte limit"
            )
        data = self.storage.read_bytes(rel)
        if len(data) > MAX_INSTANT_FILE_BYTES:
            raise HoodieCorruptedDataError(f"instant file {self.storage.uri(rel)} is too large")
        return data

    def _files_of(self, instant: Instant) -> list[Instant]:
        """The files of ``instant``'s (requested time, comparable action) found on storage.

        No listing: the pending files are checked by name, and so is the completed file in
        layout 1; in layout 2 its name holds a completion time, so a completed file is known
        from this timeline's own state (one writer per table: nobody else completes ours).
        """
        known = self._by_key.get((instant.timestamp, instant.comparable_action))
        done = self._completed_file(instant, known)
        pending_action = (
            known.action
            if known is not None and not known.is_completed
            else (instant.action if not instant.is_completed else instant.comparable_action)
        )
        out = []
        for state in (State.REQUESTED, State.INFLIGHT):
            if state is State.REQUESTED and pending_action == Action.SAVEPOINT:
                continue
            cand = Instant(instant.timestamp, pending_action, state)
            if self.storage.exists(self.instant_path(cand)):
                out.append(cand)
        if done is not None:
            out.append(done)
        return out

    def _completed_file(self, instant: Instant, known: Instant | None) -> Instant | None:
        """``instant``'s completed file where it exists (see :meth:`_files_of`): one check by
        name in layout 1, this timeline's own state in layout 2."""
        if known is not None and known.is_completed:
            done = known
        else:
            done = Instant(instant.timestamp, instant.comparable_action, State.COMPLETED)
        if (
            self.layout_version == LAYOUT_VERSION_1 or done.completion_time
        ) and self.storage.exists(self.instant_path(done)):
            return done
        return None

    def _forget(self, names: Iterable[str]) -> None:
        """Instant files this timeline deleted: drop them and recompute their keys."""
        for n in names:
            self._names.pop(n, None)
        by_key: dict[tuple[str, str], Instant] = {}
        for inst in self._names.values():
            if inst is not None:
                self._merge(by_key, inst)
        self._by_key = by_key
        self._sorted = False

    # -- transitions -------------------------------------------------------------------------
    def create_requested(self, instant: Instant, content: bytes = b"") -> Instant:
        """Write ``instant``'s requested file; put-if-absent.

        Raises:
            HoodieCommitConflictError: an instant with this requested time already exists.
        """
        req = instant.with_state(State.REQUESTED) if not instant.is_requested else instant
        if req.action == Action.SAVEPOINT:
            raise HoodieTimelineError("savepoints have no requested state")
        existing = [i for (t, _), i in self._by_key.items() if t == req.timestamp]
        if existing:
            raise HoodieCommitConflictError(
                f"instant {req.timestamp} already exists on the timeline of "
                f"{self.storage.base_uri}: {', '.join(str(i) for i in sorted(existing))}"
            )
        if not self.storage.create_new(self.instant_path(req), content):
            raise HoodieCommitConflictError(
                f"instant file {self.storage.uri(self.instant_path(req))} was created concurrently"
            )
        self._written(req)
        return req

    def create_inflight(self, instant: Instant, content: bytes = b"") -> Instant:
        """Write the inflight file of an action that has no requested state (a savepoint,
        whose time is the savepointed commit's); put-if-absent.

        Raises:
            HoodieCommitConflictError: the instant exists already.
        """
        infl = instant.with_state(State.INFLIGHT)
        if self._files_of(infl) or not self.storage.create_new(self.instant_path(infl), content):
            raise HoodieCommitConflictError(
                f"instant {infl.timestamp} ({infl.action}) already exists on the timeline of "
                f"{self.storage.base_uri}"
            )
        self._written(infl)
        return infl

    def transition_to_inflight(self, instant: Instant, content: bytes = b"") -> Instant:
        """Write ``instant``'s inflight file (the requested file must exist); idempotent.

        Raises:
            HoodieTimelineError: the instant is not requested, or already completed.
        """
        infl = instant.with_state(State.INFLIGHT)
        files = self._files_of(infl)
        if any(i.is_completed for i in files):
            raise HoodieTimelineError(f"instant {infl.timestamp} is already completed")
        if not files:
            raise HoodieTimelineError(
                f"instant {infl.timestamp} ({infl.action}) is not requested on the timeline"
            )
        self.storage.write_atomic(self.instant_path(infl), content)
        self._written(infl)
        return infl

    def completed_content(self, instant: Instant) -> bytes | None:
        """The content of ``instant``'s completed file, or None while it is not completed (the
        files :meth:`complete` checks, found the same way)."""
        known = self._by_key.get((instant.timestamp, instant.comparable_action))
        done = self._completed_file(instant, known)
        return self.storage.read_bytes(self.instant_path(done)) if done is not None else None

    def complete(
        self, instant: Instant, content: bytes, completion_time: str | None = None
    ) -> Instant:
        """Write ``instant``'s completed file atomically (put-if-absent) and return it.

        In layout 2 the file is ``T_C.action`` with ``C`` a new completion time greater than
        every completion time and instant time on the timeline (or ``completion_time`` if
        given, which must satisfy the same rule). Completing again with identical content is a
        no-op (retries are idempotent). The pending files are checked on storage first: an
        instant another writer rolled back (after taking over the lock) cannot complete.

        Raises:
            HoodieTimelineError: the instant is not pending on the timeline.
            HoodieCommitConflictError: the instant was completed with different content.
        """
        files = self._files_of(instant)
        done = [i for i in files if i.is_completed]
        if done:
            prior = done[0]
            if self.storage.read_bytes(self.instant_path(prior)) == content:
                self._written(prior)
                return prior
            raise HoodieCommitConflictError(
                f"instant {instant.timestamp} is already completed with other content"
            )
        if not files:
            raise HoodieTimelineError(
                f"instant {instant.timestamp} ({instant.action}) is not pending on the timeline"
            )
        ct: str | None = None
        if self.layout_version == LAYOUT_VERSION_2:
            floor = max(
                [
                    t
                    for t in (self.max_completion_time(), self._max_timestamp(), instant.timestamp)
                    if t
                ]
            )
            if completion_time is not None:
                if completion_time <= floor:
                    raise HoodieTimelineError(
                        f"completion time {completion_time} is not after {floor}"
                    )
                ct = completion_time
            else:
                ct = self._new_time(floor)
        done_inst = instant.with_state(State.COMPLETED, ct)
        if not self.storage.create_new(self.instant_path(done_inst), content):
            raise HoodieCommitConflictError(
                f"instant file {self.storage.uri(self.instant_path(done_inst))} already exists"
            )
        self._written(done_inst)
        return done_inst

    def _max_timestamp(self) -> str | None:
        return self._sorted_instants[-1].timestamp if self._sorted_instants else None

    def delete_pending(self, instant: Instant) -> None:
        """Delete ``instant``'s inflight then requested files (a failed, rolled-back write).

        Raises:
            HoodieTimelineError: the instant is completed.
        """
        files = self._files_of(instant)
        if any(i.is_completed for i in files):
            raise HoodieTimelineError(
                f"instant {instant.timestamp} is completed; refusing to delete its pending files"
            )
        gone = []
        for state in (State.INFLIGHT, State.REQUESTED):
            for f in files:
                if f.state is state:
                    self.storage.delete(self.instant_path(f))
                    gone.append(self.file_name(f))
        self._by_key.pop((instant.timestamp, instant.comparable_action), None)
        self._forget(gone)

    def as_if_completed(self, instant: Instant, details: bytes | None = None) -> ActiveTimeline:
        """A copy of this timeline on which pending ``instant`` is completed (in memory only,
        completion time after everything): the file-system view a commit is about to make,
        for what must be written before it completes (the metadata table's statistics).
        ``details``: the completed file's content, which :meth:`read_details` gives (a
        replacecommit's replaced file groups)."""
        import copy

        out = copy.copy(self)
        out._by_key = dict(self._by_key)
        out._names = dict(self._names)
        out._pending_details = dict(self._pending_details)
        if details is not None:
            out._pending_details[instant.timestamp] = details
        floor = max(t for t in (self.max_completion_time(), self._max_timestamp(), "0") if t)
        done = instant.with_state(State.COMPLETED, self._new_time(floor))
        out._names[f"<pending completion of {instant.timestamp}>"] = done
        out._note(done)
        return out

    def delete_instant(self, instant: Instant) -> None:
        """Delete every file of ``instant`` seen by the last listing, the completed file first
        (readers stop seeing it before its pending states go): how a metadata table drops a
        delta commit of a rolled-back data instant."""
        key = (instant.timestamp, instant.comparable_action)
        files = [
            i
            for i in self._names.values()
            if i is not None and (i.timestamp, i.comparable_action) == key
        ]
        order = {State.COMPLETED: 0, State.INFLIGHT: 1, State.REQUESTED: 2}
        gone = []
        for f in sorted(files, key=lambda i: order[i.state]):
            self.storage.delete(self.instant_path(f))
            gone.append(self.file_name(f))
        self._forget(gone)

    def pending_files_of(self, instant: Instant) -> list[Instant]:
        """The requested and inflight files of ``instant`` seen by the last listing (an
        instant's states are merged into one on the timeline; archival needs each file)."""
        key = (instant.timestamp, instant.comparable_action)
        return sorted(
            (
                i
                for i in self._names.values()
                if i is not None
                and not i.is_completed
                and (i.timestamp, i.comparable_action) == key
            ),
            key=_sort_key,
        )

    def remove_archived(self, instants: Sequence[Instant]) -> None:
        """Delete the files of ``instants`` (already written to the archived timeline).

        Oldest instant first, and each instant's requested and inflight files before its
        completed file: a kill at any point leaves the active timeline a contiguous suffix of
        the history in which no archived instant looks pending (a pending-looking instant
        would be rolled back by the next writer). The files are those of the last listing
        (:meth:`load` first when others may have written).

        Raises:
            HoodieTimelineError: one of ``instants`` is not completed.
        """
        files: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for name, inst in self._names.items():
            if inst is not None:
                files.setdefault((inst.timestamp, inst.comparable_action), []).append(
                    (inst.state.rank, name)
                )
        gone: list[str] = []
        try:
            for inst in sorted(instants, key=_sort_key):
                if not inst.is_completed:
                    raise HoodieTimelineError(f"instant {inst} is not completed: not archived")
                for _, name in sorted(files.get((inst.timestamp, inst.comparable_action), [])):
                    self.storage.delete(join(self.timeline_dir, name))
                    gone.append(name)
        finally:
            self._forget(gone)

    def __repr__(self) -> str:
        return (
            f"ActiveTimeline({self.storage.base_uri!r}, layout={self.layout_version}, "
            f"instants={len(self._sorted_instants)})"
        )
