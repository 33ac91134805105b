from __future__ import annotations

import datetime as dt
import itertools
import os

import pytest

from hoodie_ray.exceptions import HoodieTimelineError
from hoodie_ray.timeline.instant import (
    Action,
    Instant,
    InstantTimeGenerator,
    State,
    format_instant_time,
    instant_file_name,
    new_instant_time,
    parse_instant_file_name,
    parse_instant_time,
)
from tests.conftest import SAMPLE_TABLE_PARAMS
from tests.timeline.conftest import read_props

T, C = "20250101000000000", "20250101000000123"
R, INF, D = State.REQUESTED, State.INFLIGHT, State.COMPLETED

# (action, state, layout 1 name, layout 2 name) -- spec §2.2
NAMES = [
    (Action.COMMIT, R, f"{T}.commit.requested", f"{T}.commit.requested"),
    (Action.COMMIT, INF, f"{T}.inflight", f"{T}.inflight"),
    (Action.COMMIT, D, f"{T}.commit", f"{T}_{C}.commit"),
    (Action.DELTA_COMMIT, R, f"{T}.deltacommit.requested", f"{T}.deltacommit.requested"),
    (Action.DELTA_COMMIT, INF, f"{T}.deltacommit.inflight", f"{T}.deltacommit.inflight"),
    (Action.DELTA_COMMIT, D, f"{T}.deltacommit", f"{T}_{C}.deltacommit"),
    (Action.COMPACTION, R, f"{T}.compaction.requested", f"{T}.compaction.requested"),
    (Action.COMPACTION, INF, f"{T}.compaction.inflight", f"{T}.compaction.inflight"),
    (Action.COMPACTION, D, f"{T}.commit", f"{T}_{C}.commit"),
    (Action.LOG_COMPACTION, R, f"{T}.logcompaction.requested", f"{T}.logcompaction.requested"),
    (Action.LOG_COMPACTION, D, f"{T}.deltacommit", f"{T}_{C}.deltacommit"),
    (Action.REPLACE_COMMIT, R, f"{T}.replacecommit.requested", f"{T}.replacecommit.requested"),
    (Action.REPLACE_COMMIT, INF, f"{T}.replacecommit.inflight", f"{T}.replacecommit.inflight"),
    (Action.REPLACE_COMMIT, D, f"{T}.replacecommit", f"{T}_{C}.replacecommit"),
    (Action.CLUSTERING, R, f"{T}.replacecommit.requested", f"{T}.clustering.requested"),
    (Action.CLUSTERING, INF, f"{T}.replacecommit.inflight", f"{T}.clustering.inflight"),
    (Action.CLUSTERING, D, f"{T}.replacecommit", f"{T}_{C}.replacecommit"),
    (Action.ROLLBACK, R, f"{T}.rollback.requested", f"{T}.rollback.requested"),
    (Action.ROLLBACK, D, f"{T}.rollback", f"{T}_{C}.rollback"),
    (Action.CLEAN, INF, f"{T}.clean.inflight", f"{T}.clean.inflight"),
    (Action.CLEAN, D, f"{T}.clean", f"{T}_{C}.clean"),
    (Action.SAVEPOINT, INF, f"{T}.savepoint.inflight", f"{T}.savepoint.inflight"),
    (Action.SAVEPOINT, D, f"{T}.savepoint", f"{T}_{C}.savepoint"),
    (Action.RESTORE, R, f"{T}.restore.requested", f"{T}.restore.requested"),
    (Action.INDEXING, R, f"{T}.indexing.requested", f"{T}.indexing.requested"),
    (Action.INDEXING, D, f"{T}.indexing", f"{T}_{C}.indexing"),
]


@pytest.mark.parametrize(("action", "state", "v1", "v2"), NAMES)
def test_file_names_and_parsing(action: str, state: State, v1: str, v2: str) -> None:
    inst = Instant(T, action, state, C if state is D else None)
    assert instant_file_name(inst, 1) == v1
    assert inst.file_name(2) == v2
    for layout, name in ((1, v1), (2, v2)):
        parsed = parse_instant_file_name(name, layout)
        assert parsed is not None
        assert parsed.timestamp == T and parsed.state is state
        # completed compaction/clustering read back as their completed action
        assert parsed.comparable_action == Action.comparable(action)
        assert parsed.completion_time == (C if state is D and layout == 2 else None)
        assert instant_file_name(parsed, layout) == name


@pytest.mark.parametrize(
    "name",
    [
        "hoodie.properties",
        "archived",
        ".aux",
        ".temp",
        "metadata",
        ".schema",
        "history",
        f".{T}.commit.abc123.tmp",
        f"{T}.commit.requested.crc",
        f"{T}.unknown",
        f"{T}.commit.done",
        f"{T}.compaction",
        "x.commit",
        f"{T}_.commit",
        "",
    ],
)
def test_non_instant_files_are_skipped(name: str) -> None:
    assert parse_instant_file_name(name, 1) is None
    assert parse_instant_file_name(name, 2) is None


def test_layout_specific_names_are_skipped() -> None:
    assert parse_instant_file_name(f"{T}_{C}.commit", 1) is None  # layout-2 name in layout 1
    assert parse_instant_file_name(f"{T}.commit", 2) is None  # legacy completed name
    assert parse_instant_file_name(f"{T}.clustering.requested", 1) is None


def test_completed_layout2_needs_completion_time() -> None:
    with pytest.raises(HoodieTimelineError):
        instant_file_name(Instant(T, Action.COMMIT, D), 2)
    with pytest.raises(HoodieTimelineError):
        instant_file_name(Instant(T, Action.COMMIT, D), 3)


def test_instant_validation_and_ordering() -> None:
    with pytest.raises(HoodieTimelineError):
        Instant("2025-01-01", Action.COMMIT)
    with pytest.raises(HoodieTimelineError):
        Instant(T, "merge")
    a = Instant("20250101000000001", Action.DELTA_COMMIT, R)
    b = Instant("20250101000000002", Action.COMMIT, D)
    c = Instant("20250101000000002", Action.COMPACTION, INF)
    assert sorted([b, c, a]) == [a, c, b]
    assert a < b and b > c and a <= a and b >= b
    assert c.with_state(D, C) == Instant("20250101000000002", Action.COMMIT, D, C)


@pytest.mark.parametrize("table", SAMPLE_TABLE_PARAMS)
def test_every_sample_instant_file_parses(table: str, shared_sample) -> None:
    root = shared_sample(table)
    layout = int(read_props(root)["hoodie.timeline.layout.version"])
    tdir = root / ".hoodie" / ("timeline" if layout == 2 else "")
    names = [n for n in os.listdir(tdir) if (tdir / n).is_file()]
    instant_like = [n for n in names if n[:1].isdigit()]
    for n in instant_like:
        inst = parse_instant_file_name(n, layout)
        assert inst is not None, n
        assert inst.file_name(layout) == n
    for n in set(names) - set(instant_like):
        assert parse_instant_file_name(n, layout) is None


def test_instant_time_format_round_trip() -> None:
    when = dt.datetime(2025, 3, 31, 3, 6, 42, 808000)
    assert format_instant_time(when) == "20250331030642808"
    assert parse_instant_time("20250331030642808") == when
    assert parse_instant_time("20250331030642") == when.replace(microsecond=0)
    aware = dt.datetime(2025, 3, 31, 5, 6, 42, 808000, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert format_instant_time(aware) == "20250331030642808"
    with pytest.raises(HoodieTimelineError):
        parse_instant_time("2025")


def test_new_instant_time_strictly_increasing_tight_loop() -> None:
    times = [new_instant_time() for _ in range(10_000)]
    assert all(len(t) == 17 and t.isdigit() for t in times)
    assert all(a < b for a, b in itertools.pairwise(times))


def test_generator_bumps_on_stuck_or_backward_clock() -> None:
    now = [dt.datetime(2025, 1, 1, 0, 0, 0, 999000, tzinfo=dt.timezone.utc)]
    gen = InstantTimeGenerator(clock=lambda: now[0])
    assert gen.next() == "20250101000000999"
    assert gen.next() == "20250101000001000"  # same millisecond: bumped, carrying into seconds
    now[0] = now[0] - dt.timedelta(hours=1)  # clock went backwards
    assert gen.next() == "20250101000001001"
    # strictly after a given instant, even a far-future or legacy 14-digit one
    assert gen.next(after="20300101000000000") == "20300101000000001"
    assert gen.next(after="20400101000000") == "20400101000000001"
    with pytest.raises(HoodieTimelineError):
        gen.next(after="not-a-time")


def test_new_instant_time_after_argument() -> None:
    soon = format_instant_time(dt.datetime.now(dt.timezone.utc) + dt.timedelta(milliseconds=5))
    t = new_instant_time(after=soon)
    assert t > soon and len(t) == 17
    assert new_instant_time() > t  # the process-wide generator never goes back
