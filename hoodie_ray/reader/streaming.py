"""A streaming read: follow a table as it is written, one batch per new commit.

``hr.read_stream(path, ...)`` is Flink's streaming source (``read.streaming.enabled``) as an
iterator: each :class:`StreamBatch` holds one commit's rows (``latest_state``: the records the
commit wrote, as an incremental query of that commit alone returns them) or its changes
(``cdc``: :mod:`hoodie_ray.reader.cdc`), in commit order. Every batch carries a
:attr:`StreamBatch.position`; a reader opened with ``after=position`` goes on with the next
commit, so a consumer that stores the position with what it made of the batch resumes
exactly once after a crash.

Order and completeness, as Flink's ``IncrementalInputSplits`` of Hudi 1.x: on table versions
8+ commits are taken in completion-time order and the position is a completion time (a
commit that completes later always comes later, whatever its requested time); on version 6
they are taken in requested-time order, and the reader never goes past an instant that is
still pending (it may complete later with an earlier requested time), so none is skipped.
Compaction and clustering commits rewrite records without changing them: they move the
position but yield no batch (``read.streaming.skip_compaction`` / ``skip_clustering``, on by
default in Flink too).

What it cannot do, it says: a position older than the active timeline (the commits after it
were archived) raises :class:`~hoodie_ray.exceptions.HoodieTimelineError`; a commit whose file
slices were cleaned before it was read raises :class:`~hoodie_ray.exceptions.HoodieQueryError`
(Flink skips those files silently).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hoodie_ray.exceptions import HoodieQueryError, HoodieTimelineError
from hoodie_ray.file_group.view import FileSystemView
from hoodie_ray.reader.cdc import REWRITE_OPERATIONS, ChangeReader
from hoodie_ray.reader.query import (
    _incremental_format,
    _timestamp,
    plan_file_slices,
)
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.archive import LSMTimeline
from hoodie_ray.timeline.instant import Action, Instant

__all__ = ["HoodieStreamReader", "StreamBatch"]

_REWRITE_ACTIONS = frozenset({Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING})


@dataclass(frozen=True)
class StreamBatch:
    """One commit of a streaming read.

    Attributes:
        instant: the commit's instant (requested) time.
        completion_time: its completion time (table versions 8+; the instant time on 6).
        position: pass it as ``after=`` to a new reader to go on after this commit.
        table: the commit's rows (``latest_state``) or changes (``cdc``): a
            ``pyarrow.Table``, or a ``ray.data.Dataset`` read by Ray tasks with
            ``engine="ray"``.
    """

    instant: str
    completion_time: str
    position: str
    table: Any


class HoodieStreamReader:
    """Follow a table commit by commit (Flink's streaming read; see the module doc): an
    iterator of :class:`StreamBatch`, one per commit that changed records.

    Args:
        path: the table's base path.
        start: the first commit to read (inclusive; an instant time, or ``"earliest"``);
            default: the latest commit, then what follows (Flink's ``read.start-commit``).
        after: a :attr:`StreamBatch.position` to resume after (exclusive).
        incremental_format: ``"latest_state"`` (the rows each commit wrote), ``"cdc"``
            (its changes: ``op``, ``ts_ms``, ``before``, ``after``) or ``"changelog"``
            (its records unmerged, with ``_hoodie_operation``: Flink's streaming read of a
            ``changelog.enabled`` table).
        cdc_image_format: ``"struct"`` or ``"json"`` images for ``cdc``.
        columns: the columns of ``latest_state`` batches (default: all).
        poll_interval_s: None: stop once caught up; else poll forever, sleeping this long
            between polls that found nothing.
        storage_options: credentials/endpoint for object stores.

    Example::

        for batch in hr.read_stream("/data/trips", start="earliest"):
            sink(batch.table)
            save(batch.position)            # resume: hr.read_stream(path, after=saved)
    """

    def __init__(
        self,
        path: str | HoodieTable,
        start: str | None = None,
        after: str | None = None,
        *,
        incremental_format: str = "latest_state",
        cdc_image_format: str = "struct",
        columns: list[str] | None = None,
        poll_interval_s: float | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        if start is not None and after is not None:
            raise HoodieQueryError("give start (inclusive) or after (a position), not both")
        self.tbl = (
            path if isinstance(path, HoodieTable) else HoodieTable.load(path, storage_options)
        )
        self.format = _incremental_format(incremental_format)
        if self.format == "cdc" and columns is not None:
            raise HoodieQueryError("a CDC stream returns whole change rows: columns do not apply")
        self.image_format = cdc_image_format
        self.columns = columns
        self.poll_interval_s = poll_interval_s
        self._by_completion = self.tbl.completion_time_slicing
        self._closed = False
        self.position: str | None = None  # the last commit returned (or skipped), exclusive
        self._archived_newest: tuple[int, str | None] | None = None  # history version, time
        self._from_earliest = start is not None and str(start).strip().lower() == "earliest"
        if after is not None:
            self.position = _timestamp(after, "after")
        elif start is None:
            latest = self._ordered()[-1:]  # Flink: the latest commit first, then what follows
            self.position = self._before(latest[0]) if latest else None
        elif str(start).strip().lower() != "earliest":
            ts = _timestamp(start, "start")
            earlier = [i for i in self._ordered() if self._pos(i) < ts]
            self.position = self._pos(earlier[-1]) if earlier else None
            self._check_active(ts)
        if self.position is not None:
            self._check_active(self.position)

    # -- iteration -------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[StreamBatch]:
        while not self._closed:
            got = False
            for batch in self.poll():
                got = True
                yield batch
                if self._closed:
                    return
            if not got:
                if self.poll_interval_s is None:
                    return
                time.sleep(self.poll_interval_s)

    def close(self) -> None:
        """Stop iterating (after the batch being consumed)."""
        self._closed = True

    def poll(self) -> Iterator[StreamBatch]:
        """The batches of the commits completed since the position, one at a time (the
        position moves past each as it is yielded, and past commits that yield none)."""
        self.tbl.refresh()
        if self.position is not None:
            self._check_active(self.position)  # archival may have run since the last poll
        elif self._from_earliest and self.tbl.has_archived_instants():
            # from the first commit: the archived ones would be skipped (even when the
            # earliest active commit is a compaction, which yields no batch)
            raise HoodieTimelineError(
                f"a streaming read of {self.tbl.base_uri} from its earliest commit would skip "
                "commits that were archived; start at or after the earliest active instant, "
                "or read a snapshot first"
            )
        cdc = ChangeReader(self.tbl, self.image_format) if self.format == "cdc" else None
        view = self.tbl.view()  # one listing a poll, for every commit it reads
        for inst in self._ready():
            meta = self.tbl.metadata(inst)
            op = (meta.operation_type or "").upper()
            pos = self._pos(inst)
            if op in REWRITE_OPERATIONS:
                self.position = pos
                continue
            self._check_not_cleaned(inst, view)
            data = self._read(inst, cdc, self.position, pos)
            self.position = pos
            yield StreamBatch(inst.timestamp, inst.completion_time or inst.timestamp, pos, data)

    def _read(self, inst: Instant, cdc: ChangeReader | None, begin: str | None, end: str) -> Any:
        """One commit's batch: its changes (``cdc``), or the incremental query of
        ``(begin, end]`` (that commit alone, in the reader's order)."""
        if cdc is not None:
            return cdc.changes(inst)
        return plan_file_slices(
            self.tbl,
            "incremental",
            begin=begin,
            end=end,
            columns=self.columns,
            changelog=self.format == "changelog",
        ).read_all()

    # -- the commits -----------------------------------------------------------------------------
    def _pos(self, inst: Instant) -> str:
        return (inst.completion_time or inst.timestamp) if self._by_completion else inst.timestamp

    def _ordered(self) -> list[Instant]:
        return sorted(self.tbl.commits(), key=lambda i: (self._pos(i), i.timestamp))

    def _before(self, inst: Instant) -> str | None:
        earlier = [self._pos(i) for i in self._ordered() if self._pos(i) < self._pos(inst)]
        return earlier[-1] if earlier else None

    def _ready(self) -> list[Instant]:
        """The commits after the position that can be read now, in order: on version 6 none
        at or after the earliest pending write (it may complete with an earlier time)."""
        out = [i for i in self._ordered() if self.position is None or self._pos(i) > self.position]
        if not self._by_completion:
            # a pending compaction or clustering plan yields no batch: nothing to wait for
            # (a clustering's is a replacecommit on version 6: only an overwrite's counts)
            rewrites = {i.timestamp for i in self.tbl.pending_clusterings()}
            pending = [
                i.timestamp
                for i in self.tbl.active_timeline.pending_commits()
                if i.action not in _REWRITE_ACTIONS and i.timestamp not in rewrites
            ]
            if pending:
                out = [i for i in out if i.timestamp < min(pending)]
        return out

    def _check_active(self, position: str) -> None:
        """Commits after ``position`` must all be on the active timeline."""
        commits = self.tbl.commits()
        first = commits[0].timestamp if commits else None
        if first is None:
            return
        arch = self.tbl.archived_timeline
        if isinstance(arch, LSMTimeline):
            # version 8+ positions are completion times: a write that straddled a compaction
            # may have been archived (requested before the first active commit) yet completed
            # after the position
            newest = (
                self._newest_archived_completion(arch)
                if self._by_completion
                else max((hi for _, hi in arch.file_ranges()), default=None)
            )
            archived_after = newest is not None and newest > position
        else:
            archived_after = position < first and bool(arch.file_names())
        if archived_after:
            raise HoodieTimelineError(
                f"a streaming read of {self.tbl.base_uri} after {position} would skip commits "
                f"that were archived (the earliest active instant is {first}); start at or "
                "after it, or read a snapshot first"
            )

    def _newest_archived_completion(self, arch: LSMTimeline) -> str | None:
        """:meth:`LSMTimeline.newest_completion_time`, read again only when the history
        changed (each poll checks it)."""
        version = arch.latest_version()
        if self._archived_newest is None or self._archived_newest[0] != version:
            self._archived_newest = (version, arch.newest_completion_time())
        return self._archived_newest[1]

    def _check_not_cleaned(self, inst: Instant, view: FileSystemView) -> None:
        """The file slices of commit ``inst`` are still there (else its rows are lost)."""
        meta = self.tbl.metadata(inst)
        wanted = {(p, s.file_id) for p, s in meta.iter_write_stats() if s.file_id}
        if not wanted:
            return
        slices = view.latest_file_slices(
            as_of=inst.timestamp, partitions=sorted({p for p, _ in wanted})
        )
        present = {(s.partition_path, s.file_id) for s in slices}
        replaced = {(p, f) for p, ids in meta.replaced_file_ids().items() for f in ids}
        missing = sorted(wanted - present - replaced)
        if missing:
            raise HoodieQueryError(
                f"commit {inst.timestamp} of {self.tbl.base_uri} cannot be read any more: the "
                f"file slices it wrote were cleaned (e.g. file group {missing[0][1]} in "
                f"partition {missing[0][0]!r}); the stream fell behind the cleaner "
                "(hoodie.cleaner.commits.retained)"
            )
