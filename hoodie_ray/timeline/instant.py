"""Instants: their states, actions, file names (layouts 1 and 2) and instant-time generation.

Names from Hudi: ``HoodieInstant`` (here :class:`Instant`), ``State``, the action words of
``HoodieTimeline`` and ``HoodieInstantTimeGenerator``.

File names (spec §2.2):

* layout 1 (table version 6): ``T.action.requested``, ``T.action.inflight``, ``T.action`` --
  except that a commit's inflight file is ``T.inflight`` and a compaction completes as
  ``T.commit`` (log compaction as ``T.deltacommit``); clustering shares replacecommit names.
* layout 2 (table versions 8 and 9): pending files as in layout 1 except that clustering has its
  own ``T.clustering.requested`` / ``T.clustering.inflight``; a completed instant is
  ``T_C.action`` with ``C`` its completion time (compaction -> ``commit``, log compaction ->
  ``deltacommit``, clustering -> ``replacecommit``).
"""

from __future__ import annotations

import datetime as _dt
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from hoodie_ray.exceptions import HoodieTimelineError

LAYOUT_VERSION_1 = 1
LAYOUT_VERSION_2 = 2


class State(str, Enum):
    """The state of an instant; ordered REQUESTED < INFLIGHT < COMPLETED."""

    REQUESTED = "REQUESTED"
    INFLIGHT = "INFLIGHT"
    COMPLETED = "COMPLETED"

    @property
    def rank(self) -> int:
        """0, 1, 2 for requested, inflight, completed: the most advanced state wins."""
        return _STATE_RANK[self]


_STATE_RANK = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}


class Action:
    """The action words of Hudi's timeline (``HoodieTimeline.*_ACTION``)."""

    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    REPLACE_COMMIT = "replacecommit"
    CLUSTERING = "clustering"
    ROLLBACK = "rollback"
    CLEAN = "clean"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"
    INDEXING = "indexing"
    SCHEMA_COMMIT = "schemacommit"

    ALL: frozenset[str] = frozenset(
        {
            COMMIT,
            DELTA_COMMIT,
            COMPACTION,
            LOG_COMPACTION,
            REPLACE_COMMIT,
            CLUSTERING,
            ROLLBACK,
            CLEAN,
            SAVEPOINT,
            RESTORE,
            INDEXING,
            SCHEMA_COMMIT,
        }
    )
    #: Completed actions that write data files readers must see.
    COMMIT_ACTIONS: frozenset[str] = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT})

    @staticmethod
    def comparable(action: str) -> str:
        """The action an instant has once completed (``getComparableAction`` in Hudi).

        A compaction completes as a commit, a log compaction as a deltacommit and a
        clustering as a replacecommit, so the pending and the completed files of one
        instant group together.
        """
        return _COMPARABLE.get(action, action)


_COMPARABLE = {
    Action.COMPACTION: Action.COMMIT,
    Action.LOG_COMPACTION: Action.DELTA_COMMIT,
    Action.CLUSTERING: Action.REPLACE_COMMIT,
}

_TIMESTAMP_RE = re.compile(r"^[0-9]+$")


@dataclass(frozen=True)
class Instant:
    """One instant of the timeline: requested time, action, state, completion time.

    ``timestamp`` is the requested (begin) time ``yyyyMMddHHmmssSSS``; ``completion_time``
    is known for completed instants of timeline layout 2 only. Instants sort by timestamp,
    then by comparable action, then by state (Hudi's ``COMPARATOR``).

    Example:
        >>> Instant("20250101000000000", Action.DELTA_COMMIT, State.REQUESTED).file_name(1)
        '20250101000000000.deltacommit.requested'
    """

    timestamp: str
    action: str
    state: State = State.COMPLETED
    completion_time: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.timestamp, str) or not _TIMESTAMP_RE.match(self.timestamp):
            raise HoodieTimelineError(f"invalid instant time {self.timestamp!r}")
        if self.action not in Action.ALL:
            raise HoodieTimelineError(f"unknown timeline action {self.action!r}")
        if not isinstance(self.state, State):
            object.__setattr__(self, "state", State(self.state))
        if self.completion_time is not None and not _TIMESTAMP_RE.match(self.completion_time):
            raise HoodieTimelineError(f"invalid completion time {self.completion_time!r}")

    # -- ordering ----------------------------------------------------------------------------
    def _key(self) -> tuple[str, str, int]:
        return (self.timestamp, Action.comparable(self.action), self.state.rank)

    def __lt__(self, other: Instant) -> bool:
        return self._key() < other._key()

    def __le__(self, other: Instant) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: Instant) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: Instant) -> bool:
        return self._key() >= other._key()

    # -- state helpers -----------------------------------------------------------------------
    @property
    def is_requested(self) -> bool:
        return self.state is State.REQUESTED

    @property
    def is_inflight(self) -> bool:
        return self.state is State.INFLIGHT

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def comparable_action(self) -> str:
        """The action this instant has once completed (see :meth:`Action.comparable`)."""
        return Action.comparable(self.action)

    def with_state(self, state: State, completion_time: str | None = None) -> Instant:
        """This instant in another state; completing maps the action to its completed word."""
        if state is State.COMPLETED:
            return Instant(self.timestamp, Action.comparable(self.action), state, completion_time)
        return Instant(self.timestamp, self.action, state, None)

    def file_name(self, layout_version: int) -> str:
        """The instant's file name in the given timeline layout (1 or 2)."""
        return instant_file_name(self, layout_version)

    def __str__(self) -> str:
        tail = f"__{self.completion_time}" if self.completion_time else ""
        return f"[{self.timestamp}__{self.action}__{self.state.value}{tail}]"


# -- file names ---------------------------------------------------------------------------------


def _check_layout(layout_version: int) -> None:
    if layout_version not in (LAYOUT_VERSION_1, LAYOUT_VERSION_2):
        raise HoodieTimelineError(f"unsupported timeline layout version {layout_version}")


def instant_file_name(instant: Instant, layout_version: int) -> str:
    """The file name of ``instant`` in timeline layout 1 (v6) or 2 (v8/v9), spec §2.2."""
    _check_layout(layout_version)
    ts, action = instant.timestamp, instant.action
    if instant.state is State.COMPLETED:
        word = Action.comparable(action)
        if layout_version == LAYOUT_VERSION_1:
            return f"{ts}.{word}"
        if not instant.completion_time:
            raise HoodieTimelineError(
                f"a completed instant needs a completion time in timeline layout 2: {instant}"
            )
        return f"{ts}_{instant.completion_time}.{word}"
    if action == Action.CLUSTERING and layout_version == LAYOUT_VERSION_1:
        action = Action.REPLACE_COMMIT  # 0.x: clustering shares the replacecommit names
    if action == Action.SAVEPOINT:
        return f"{ts}.savepoint.inflight"  # savepoints have no requested file
    if action == Action.COMMIT and instant.state is State.INFLIGHT:
        return f"{ts}.inflight"  # historical: a commit's inflight file has no action word
    suffix = "requested" if instant.state is State.REQUESTED else "inflight"
    return f"{ts}.{action}.{suffix}"


_NAME_RE = re.compile(r"^([0-9]+)(?:_([0-9]+))?\.([a-z]+)(?:\.([a-z]+))?$")


def parse_instant_file_name(name: str, layout_version: int) -> Instant | None:
    """Parse a file of the timeline directory; ``None`` for anything that is not an instant.

    Files that are not instants (``hoodie.properties``, ``archived``, ``.aux``, temporary
    files, ``.crc`` files...) give ``None``. So do names of the other layout: a completed
    ``T_C.x`` in layout 1 and a completed ``T.x`` without completion time in layout 2 (hudi-rs
    ignores both; Java would read the latter as a "legacy" instant).
    """
    _check_layout(layout_version)
    m = _NAME_RE.match(name)
    if m is None:
        return None
    ts, completion, word, suffix = m.groups()
    if word == "inflight" and suffix is None and completion is None:
        return Instant(ts, Action.COMMIT, State.INFLIGHT)
    if word not in Action.ALL:
        return None
    if suffix is None:
        if word in _COMPARABLE:  # compaction/clustering/logcompaction never complete as such
            return None
        if layout_version == LAYOUT_VERSION_1:
            if completion is not None:
                return None
            return Instant(ts, word, State.COMPLETED)
        if completion is None:
            return None
        return Instant(ts, word, State.COMPLETED, completion)
    if completion is not None:
        return None
    if suffix == "requested":
        state = State.REQUESTED
    elif suffix == "inflight":
        state = State.INFLIGHT
    else:
        return None
    if word == Action.CLUSTERING and layout_version == LAYOUT_VERSION_1:
        return None
    return Instant(ts, word, state)


# -- instant times --------------------------------------------------------------------------

_INSTANT_FMT_LEN = 17


def format_instant_time(when: _dt.datetime) -> str:
    """``yyyyMMddHHmmssSSS`` of a datetime (converted to UTC when timezone-aware)."""
    if when.tzinfo is not None:
        when = when.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return when.strftime("%Y%m%d%H%M%S") + f"{when.microsecond // 1000:03d}"


def parse_instant_time(ts: str) -> _dt.datetime:
    """A naive datetime (UTC by this library's convention) of a 14- or 17-digit instant time."""
    if not _TIMESTAMP_RE.match(ts) or len(ts) not in (14, 17):
        raise HoodieTimelineError(f"invalid instant time {ts!r}")
    try:
        base = _dt.datetime.strptime(ts[:14], "%Y%m%d%H%M%S")
    except ValueError as e:
        raise HoodieTimelineError(f"invalid instant time {ts!r}") from e
    millis = int(ts[14:17]) if len(ts) == 17 else 0
    return base + _dt.timedelta(milliseconds=millis)


def _floor17(ts: str) -> str:
    """The first 17 digits of an instant time (14-digit legacy times padded with zeros)."""
    return ts[:_INSTANT_FMT_LEN].ljust(_INSTANT_FMT_LEN, "0")


class InstantTimeGenerator:
    """Strictly increasing UTC instant times ``yyyyMMddHHmmssSSS`` (``HoodieInstantTimeGenerator``).

    Each time returned is greater than the ``after`` argument and than every time this
    generator returned before; when the clock has not moved on (or went backwards) the time is
    bumped by one millisecond. Thread-safe.
    """

    def __init__(self, clock: Callable[[], _dt.datetime] | None = None) -> None:
        self._clock = clock or (lambda: _dt.datetime.now(_dt.timezone.utc))
        self._lock = threading.Lock()
        self._last: str | None = None

    def next(self, after: str | None = None) -> str:
        """A new instant time strictly greater than ``after`` and than any earlier result."""
        if after is not None and not _TIMESTAMP_RE.match(after):
            raise HoodieTimelineError(f"invalid instant time {after!r}")
        with self._lock:
            candidate = format_instant_time(self._clock())
            floors = [t for t in (self._last, after) if t]
            if floors:
                floor = max(_floor17(t) for t in floors)
                if candidate <= floor:
                    bumped = parse_instant_time(floor) + _dt.timedelta(milliseconds=1)
                    candidate = format_instant_time(bumped)
            self._last = candidate
            return candidate


_DEFAULT_GENERATOR = InstantTimeGenerator()


def new_instant_time(after: str | None = None) -> str:
    """A new UTC instant time, strictly greater than ``after`` and than any earlier one made here.

    Example:
        >>> a = new_instant_time(); b = new_instant_time(); a < b and len(b) == 17
        True
    """
    return _DEFAULT_GENERATOR.next(after)
