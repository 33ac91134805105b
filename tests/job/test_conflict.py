"""The OCC conflict rule (job/conflict.py) on hand-built timelines."""

from __future__ import annotations

from hoodie_ray.job.conflict import (
    Conflict,
    TxnStart,
    candidates,
    describe_conflicts,
    file_groups,
    find_conflicts,
    is_compaction,
)
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat

T0, T1, T2, T3, T4 = (f"2025010100000{i}000" for i in range(5))


def done(ts: str, action: str = Action.DELTA_COMMIT, completion: str | None = None) -> Instant:
    return Instant(ts, action, State.COMPLETED, completion)


def test_v6_candidates_are_the_writes_not_completed_at_start():
    start = TxnStart(T2, frozenset({T0}))
    timeline = [
        done(T0),  # known at start
        done(T1),  # older instant that completed after our start
        Instant(T2, Action.DELTA_COMMIT, State.INFLIGHT),  # ours
        done(T3),
        done(T4, Action.CLEAN),  # not a write
        Instant("20250101000005000", Action.DELTA_COMMIT, State.INFLIGHT),  # still writing
    ]
    assert [i.timestamp for i in candidates(timeline, start, by_completion_time=False)] == [
        T1,
        T3,
    ]


def test_v8_candidates_by_completion_time():
    start = TxnStart(T2, frozenset())
    timeline = [
        done(T0, completion=T1),  # completed before we started
        done(T1, completion=T3),  # requested before us, completed after
        done(T3, completion=T4),
        done(T4, Action.REPLACE_COMMIT, completion="20250101000005000"),
    ]
    got = candidates(timeline, start, by_completion_time=True)
    assert [i.timestamp for i in got] == [T1, T3, T4]


def test_pending_plans_count_only_when_scheduled_after_the_start():
    start = TxnStart(T2, frozenset())
    timeline = [
        Instant(T1, Action.COMPACTION, State.REQUESTED),  # known when we started
        Instant(T3, Action.COMPACTION, State.REQUESTED),
        Instant(T4, Action.CLUSTERING, State.INFLIGHT),
        Instant("20250101000005000", Action.ROLLBACK, State.INFLIGHT),
    ]
    got = candidates(timeline, start, by_completion_time=True)
    assert [(i.timestamp, i.action) for i in got] == [
        (T3, Action.COMPACTION),
        (T4, Action.CLUSTERING),
    ]


def test_conflict_only_on_a_shared_file_group():
    own = file_groups(
        [
            HoodieWriteStat(file_id="f1", partition_path="a"),
            HoodieWriteStat(file_id="new", partition_path="a"),  # an insert's new group
        ]
    )
    others = [
        (done(T3), {("b", "f1"), ("a", "f2")}),  # same file id, other partition: no conflict
        (done(T1), {("a", "f1"), ("a", "f3")}),
        (Instant(T4, Action.COMPACTION, State.REQUESTED), {("a", "f1")}),
    ]
    got = find_conflicts(own, others)
    assert [(c.instant, c.file_groups, c.pending) for c in got] == [
        (T1, (("a", "f1"),), False),
        (T4, (("a", "f1"),), True),
    ]
    assert "a/f1" in got[0].describe() and T1 in got[0].describe()


def test_inserts_into_new_file_groups_never_conflict():
    own = {("a", "fresh-1"), ("a", "fresh-2")}
    assert find_conflicts(own, [(done(T3), {("a", "f1"), ("a", "fresh-3")})]) == []


def test_compactions_never_conflict():
    """Hudi's resolveConflict: a pending compaction plan, or a commit whose metadata says
    COMPACT, is no conflict; a clustering plan and a write's commit are."""
    compaction = HoodieCommitMetadata(compacted=True, operation_type="COMPACT")
    upsert = HoodieCommitMetadata(operation_type="UPSERT")
    assert is_compaction(Instant(T3, Action.COMPACTION, State.REQUESTED))
    assert is_compaction(Instant(T3, Action.LOG_COMPACTION, State.INFLIGHT))
    assert is_compaction(done(T3, Action.COMMIT), compaction)
    assert is_compaction(done(T3, Action.COMMIT), HoodieCommitMetadata(operation_type="COMPACT"))
    assert not is_compaction(done(T3, Action.COMMIT), upsert)
    assert not is_compaction(done(T3, Action.COMMIT))
    assert not is_compaction(Instant(T3, Action.CLUSTERING, State.REQUESTED))


def test_nbcc_candidates_are_replace_and_clustering_only():
    """Non-blocking concurrency control: delta commits and compactions on the same file
    groups are no candidates; a replacecommit or a clustering plan still is."""
    start = TxnStart(T1, frozenset())
    timeline = [
        done(T2, completion=T3),
        done(T3, Action.COMMIT, completion=T4),  # a compaction's commit
        done(T3, Action.REPLACE_COMMIT, completion=T4),
        Instant(T4, Action.CLUSTERING, State.REQUESTED),
        Instant(T4, Action.COMPACTION, State.REQUESTED),
    ]
    got = candidates(timeline, start, by_completion_time=True, writes_conflict=False)
    assert [(i.timestamp, i.action) for i in got] == [
        (T3, Action.REPLACE_COMMIT),
        (T4, Action.CLUSTERING),
    ]


def test_conflicts_with_the_same_file_groups_are_described_once():
    """Four instants on the same two file groups: the groups named once, the message short."""
    groups = (("2026/11/28", "1f4e6c1a-5b0e-4c62-9d55-3c1d6e2f0a11-0"), ("", "f2"))
    conflicts = [Conflict(f"2026112812000{i}000", "deltacommit", groups) for i in range(4)]
    conflicts.append(Conflict(T4, "compaction", (("a", "f9"),), pending=True))
    text = describe_conflicts(conflicts)
    assert text.count(groups[0][1]) == 1 and text.count("f2") == 1
    assert "20261128120000000, 20261128120001000, 20261128120002000 and 1 more" in text
    assert "(deltacommit, completed) on file groups" in text
    assert f"{T4} (compaction, pending plan) on file group a/f9" in text
    assert len(text) < 300
