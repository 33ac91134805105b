"""The log-block gates of spec §6.4, in order, on synthetic block lists."""

from __future__ import annotations

from hoodie_ray.reader.log_scan import (
    COMMAND,
    CORRUPT,
    DATA,
    DELETE,
    CommitGate,
    InstantRange,
    ScannedBlock,
    admitted_blocks,
)


def data(ts: str, f: str = "log.1") -> ScannedBlock:
    return ScannedBlock(DATA, f, instant=ts)


def delete(ts: str, f: str = "log.1") -> ScannedBlock:
    return ScannedBlock(DELETE, f, instant=ts)


def rollback(ts: str, target: str, f: str = "log.1") -> ScannedBlock:
    return ScannedBlock(COMMAND, f, instant=ts, target_instant=target, command_type="0")


def ids(blocks: list[ScannedBlock]) -> list[tuple[str, str | None]]:
    return [(b.kind, b.instant) for b in blocks]


def test_corrupt_and_future_blocks_are_skipped() -> None:
    blocks = [data("1"), ScannedBlock(CORRUPT, "log.1"), data("3"), delete("2")]
    out = admitted_blocks(blocks, end_instant="2", commit_gate=None, instant_range=None)
    assert ids(out) == [(DATA, "1"), (DELETE, "2")]


def test_commit_gate_with_archival_boundary() -> None:
    gate = CommitGate(
        completed=frozenset({"5", "7"}), pending=frozenset({"6", "8"}), first_active="4"
    )
    assert [gate.admits(t) for t in ["3", "4", "5", "6", "7", "8", "9"]] == [
        True,  # older than the first active instant: archived, so committed
        False,
        True,
        False,  # pending
        True,
        False,
        False,  # not on the timeline
    ]
    blocks = [data("3"), data("6"), data("7"), data("9")]
    out = admitted_blocks(blocks, end_instant=None, commit_gate=gate, instant_range=None)
    assert ids(out) == [(DATA, "3"), (DATA, "7")]


def test_instant_range_with_and_without_completion_times() -> None:
    rng = InstantRange("2", "4")
    assert [rng.contains(t) for t in "12345"] == [False, False, True, True, False]
    by_completion = InstantRange("20", "40", {"1": "25", "2": "45", "3": "35"})
    assert [by_completion.contains(t) for t in "1234"] == [True, False, True, False]
    blocks = [data("1"), data("2"), data("3")]
    out = admitted_blocks(blocks, end_instant=None, commit_gate=None, instant_range=by_completion)
    assert ids(out) == [(DATA, "1"), (DATA, "3")]


def test_rollback_removes_every_block_of_its_target_in_any_file() -> None:
    blocks = [
        data("2", "log.1"),
        delete("2", "log.1"),
        data("3", "log.1"),
        rollback("4", "2", "log.2"),
        data("2", "log.2"),  # after the rollback block: removed too (targets collected first)
        data("5", "log.3"),
    ]
    out = admitted_blocks(blocks, end_instant="5", commit_gate=None, instant_range=None)
    assert ids(out) == [(DATA, "3"), (DATA, "5")]


def test_rollback_blocks_apply_even_beyond_the_query_end() -> None:
    blocks = [data("2"), rollback("9", "2", "log.2")]
    assert admitted_blocks(blocks, end_instant="3", commit_gate=None, instant_range=None) == []


def test_blocks_are_grouped_by_instant_in_first_seen_order() -> None:
    blocks = [data("2", "a"), data("1", "a"), delete("2", "b"), data("1", "b")]
    out = admitted_blocks(blocks, end_instant=None, commit_gate=None, instant_range=None)
    assert [(b.kind, b.instant, b.file_name) for b in out] == [
        (DATA, "2", "a"),
        (DELETE, "2", "b"),
        (DATA, "1", "a"),
        (DATA, "1", "b"),
    ]
