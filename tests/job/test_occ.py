"""Optimistic concurrency control through HoodieWriteClient: two writers on one table.

Two clients in one process step by hand: writer A's commit is held while writer B writes a
whole commit (``_during_commit``), as a second process would between A's start and A's
commit. Every table is read back with hudi-rs and compared with the model of the writes that
committed."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.compaction.api import CompactionService
from hoodie_ray.exceptions import HoodieWriteConflictError
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.job.coordinator import Coordinator
from hoodie_ray.log_format.blocks import HeaderMetadataType
from hoodie_ray.log_format.reader import read_log_file
from hoodie_ray.storage import LocalStorage
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action
from hoodie_ray.write.heartbeat import heartbeat_path
from tests.write.model import TableModel, model_options, to_arrow

OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control"}


def row(key: str, p: str, ts: int, v: int) -> dict:
    return {"key": key, "p": p, "ts": ts, "v": v, "s": f"{key}@{ts}"}


@contextlib.contextmanager
def _during_commit(run: Callable[[], None]) -> Iterator[list[str]]:
    """Run ``run`` (another writer's whole write) when the next Coordinator.commit begins,
    before it takes the lock; yields the instants held that way."""
    real = Coordinator.commit
    held: list[str] = []

    def commit(self, instant, stats):  # type: ignore[no-untyped-def]
        if not held:
            held.append(instant)
            run()
        return real(self, instant, stats)

    Coordinator.commit = commit  # type: ignore[method-assign]
    try:
        yield held
    finally:
        Coordinator.commit = real  # type: ignore[method-assign]


def _seeded(tmp_path, opts: dict) -> tuple[str, dict, TableModel]:
    """A table at ``tmp_path/t`` with four keys in each of partitions a and b, written with
    ``opts``; its path, the options and its model."""
    path, model = str(tmp_path / "t"), TableModel()
    rows = [row(f"a{i}", "a", 1, i) for i in range(4)] + [row(f"b{i}", "b", 1, i) for i in range(4)]
    model.write(path, opts, "upsert", rows)
    return path, opts, model


def _instants(path: str, action: str | None = None) -> list:
    tl = HoodieTable.from_storage(LocalStorage(path)).active_timeline.reload()
    return [i for i in tl.instants if action is None or i.action == action]


@pytest.mark.parametrize("version", ["8", "6"])
def test_disjoint_file_groups_both_commit(tmp_path, version):
    path, opts, model = _seeded(tmp_path, model_options(OCC, version=version))
    a_rows = [row("a1", "a", 2, 10), row("a9", "a", 2, 11)]
    b_rows = [row("b1", "b", 3, 20), row("b2", "b", 3, 21)]
    a, b = HoodieWriteClient(path, opts), HoodieWriteClient(path, opts)

    def writer_b() -> None:
        # writer A's instant is pending, its heartbeat live: B's open must keep it
        pending = [i.timestamp for i in _instants(path) if not i.is_completed]
        assert held and pending == held
        b.write(to_arrow(b_rows, True))
        assert [i.timestamp for i in _instants(path) if not i.is_completed] == held

    with _during_commit(writer_b) as held:
        res = a.write(to_arrow(a_rows, True))
    assert res.instant == held[0]
    model.upsert(b_rows)
    model.upsert(a_rows)
    model.assert_hudi_rs_reads(path)
    assert hr.validate_metadata(path) == []  # empty where the table has no metadata table
    assert not _instants(path, Action.ROLLBACK)
    assert not os.listdir(tmp_path / "t" / ".hoodie" / ".heartbeat")


@pytest.mark.parametrize("version", ["8", "6"])
def test_overlapping_file_group_later_committer_fails_table_unchanged(tmp_path, version):
    path, opts, model = _seeded(tmp_path, model_options(OCC, version=version))
    a_rows = [row("a1", "a", 5, 10)]
    b_rows = [row("a1", "a", 3, 20), row("a2", "a", 3, 21)]
    a, b = HoodieWriteClient(path, opts), HoodieWriteClient(path, opts)
    b_instant: list = []

    def writer_b() -> None:
        b_instant.append(b.write(to_arrow(b_rows, True)).instant)

    with _during_commit(writer_b) as held, pytest.raises(HoodieWriteConflictError) as err:
        a.write(to_arrow(a_rows, True))
    msg = str(err.value)
    assert held[0] in msg and b_instant[0] in msg and "a/" in msg  # both instants, the group
    # each log file is one writer's: no appends to a file another writer may hold, and no two
    # writers' new files named alike (version 6 names logs by their slice, not their writer)
    storage = LocalStorage(path)
    for log in (tmp_path / "t" / "a").glob(".*.log.*"):
        writers = {
            b.header.get(HeaderMetadataType.INSTANT_TIME)
            for b in read_log_file(storage, f"a/{log.name}")
        }
        assert len(writers) == 1, (log.name, writers)
    model.upsert(b_rows)  # only B's write committed
    model.assert_hudi_rs_reads(path)
    assert hr.validate_metadata(path) == []
    rolled = _instants(path, Action.ROLLBACK)
    assert len(rolled) == 1
    assert held[0] not in {i.timestamp for i in _instants(path) if i.action != Action.ROLLBACK}
    assert not (tmp_path / "t" / heartbeat_path(held[0])).exists()
    # the loser's client goes on from the table as B left it
    again = [row("a1", "a", 6, 30)]
    a.write(to_arrow(again, True))
    model.upsert(again)
    model.assert_hudi_rs_reads(path)


def test_overlapping_write_succeeds_after_retry(tmp_path):
    path, opts, model = _seeded(
        tmp_path, model_options(OCC, {"hoodie.write.num.retries.on.conflict.failures": "1"})
    )
    a_rows = [row("a1", "a", 5, 10), row("b3", "b", 5, 11)]
    b_rows = [row("a1", "a", 3, 20), row("a0", "a", 3, 21)]
    a, b = HoodieWriteClient(path, opts), HoodieWriteClient(path, opts)
    with _during_commit(lambda: b.write(to_arrow(b_rows, True))) as held:
        res = a.write(to_arrow(a_rows, True))
    assert res.instant != held[0]  # committed on the retry, as a new instant
    model.upsert(b_rows)
    model.upsert(a_rows)
    model.assert_hudi_rs_reads(path)
    assert [i.timestamp for i in _instants(path, Action.ROLLBACK)] and len(
        _instants(path, Action.ROLLBACK)
    ) == 1


def test_inserts_into_new_file_groups_never_conflict(tmp_path):
    path, opts, model = _seeded(tmp_path, model_options(OCC))
    a_rows = [row(f"c{i}", "c", 2, i) for i in range(3)]  # a new partition: new file groups
    b_rows = [row(f"d{i}", "c", 2, i) for i in range(3)]
    a, b = HoodieWriteClient(path, opts), HoodieWriteClient(path, opts)
    with _during_commit(lambda: b.write(to_arrow(b_rows, True))):
        a.write(to_arrow(a_rows, True))
    model.upsert(b_rows)
    model.upsert(a_rows)
    model.assert_hudi_rs_reads(path)


@pytest.mark.parametrize("version", ["8", "6"])
@pytest.mark.parametrize("commits_first", [True, False], ids=["compacted", "scheduled"])
def test_compaction_on_its_file_group_after_its_start_is_no_conflict(
    tmp_path, version, commits_first
):
    """A compaction of a write's file group scheduled (and run, or only scheduled) while the
    write is in flight is no conflict (Hudi: compaction never conflicts), and the write's rows
    stay visible: on version 8 its log joins the new slice by completion time; on version 6
    the write moves its log into the new slice as it commits, or the compaction's commit
    carries it over."""
    path, opts, model = _seeded(tmp_path, model_options(OCC, version=version))
    model.write(path, opts, "upsert", [row("a1", "a", 2, 5)])  # a log file to compact
    done: list = []

    def service() -> None:
        if commits_first:
            done.append(hr.compact(path, opts).instant)
        else:
            done.append(CompactionService.open(path, opts).schedule(True, beside_writes=True))

    rows = [row("a2", "a", 3, 7), row("a1", "a", 3, 8)]
    with _during_commit(service):
        HoodieWriteClient(path, opts).write(to_arrow(rows, True))
    assert done[0] is not None
    if not commits_first:
        hr.compact(path, opts)  # the pending plan runs now (unless the writer ran it inline)
    assert done[0] in {i.timestamp for i in _instants(path) if i.is_completed}
    model.upsert(rows)
    model.assert_hudi_rs_reads(path)
    assert not _instants(path, Action.ROLLBACK)
    assert not [i for i in _instants(path) if not i.is_completed]
    assert hr.validate_metadata(path) == []


def test_a_write_that_straddled_a_compaction_keeps_its_slice_once_archived(tmp_path):
    """Version 8: a write requested before a compaction's plan and completed after it joins
    the compaction's slice (by completion time). Once archival takes the write's instant its
    completion time is read from the archived timeline (as Java's completion-time view does),
    not taken to be its request time: its rows stay, the metadata table's partition
    statistics count them, and the next compaction takes its log. (hudi-rs 0.5 reads the
    older slice then, until that compaction.)"""
    from tests.write.model import V8_MDT

    opts = model_options(
        OCC,
        V8_MDT,
        {
            "hoodie.table.services.enabled": "false",
            "clean.retain_commits": "1",
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
        },
        version="8",
    )
    path, opts, model = _seeded(tmp_path, opts)
    model.write(path, opts, "upsert", [row("a1", "a", 2, 5)])  # a log for the compaction
    done: list = []
    rows = [row("a2", "a", 3, 7), row("a1", "a", 3, 8)]
    with _during_commit(lambda: done.append(hr.compact(path, opts).instant)):
        straddled = HoodieWriteClient(path, opts).write(to_arrow(rows, True)).instant
    assert done[0] is not None and done[0] > straddled
    model.upsert(rows)
    for i in range(6):  # other partitions' commits, then a clean and an archival
        more = [row(f"b{i % 2}", "b", 10 + i, i)]
        model.write(path, opts, "upsert", more)
    hr.clean(path, opts)
    hr.archive(path, opts)
    assert straddled not in {i.timestamp for i in _instants(path)}, "not archived"
    model.write(path, opts, "upsert", [row("a3", "a", 20, 3)])  # partition a's stats again
    assert hr.validate_metadata(path) == []
    got = hr.read(path).select(["key", "p", "ts", "v", "s"]).sort_by("key")
    assert got.to_pylist() == model.as_table().to_pylist()
    took = hr.compact(path, opts)
    assert any(s.file_id and straddled in "".join(s.log_files) for s in took.slices)
    model.assert_hudi_rs_reads(path)


def test_recovery_rolls_back_only_expired_or_missing_heartbeats(tmp_path):
    path, opts, model = _seeded(tmp_path, model_options(OCC))

    def dead_writer() -> str:
        """A writer that started an instant, wrote a file and died (its heartbeat stops)."""
        coord = Coordinator(path, opts)
        coord.open(None)
        instant = coord.start_instant()
        assert coord.heartbeats is not None
        coord.heartbeats.close()  # the process died: nothing beats any more
        return instant

    live, expired, missing = dead_writer(), dead_writer(), dead_writer()
    hb_dir = tmp_path / "t" / ".hoodie" / ".heartbeat"
    old = 1_000_000.0
    os.utime(hb_dir / expired, (old, old))
    os.remove(hb_dir / missing)
    b_rows = [row("b1", "b", 4, 40)]
    model.write(path, opts, "upsert", b_rows)  # its open recovers the table
    pending = [i.timestamp for i in _instants(path) if not i.is_completed]
    assert pending == [live]
    rolled_back = {i.timestamp for i in _instants(path, Action.ROLLBACK)}
    assert len(rolled_back) == 2
    assert sorted(os.listdir(hb_dir)) == [live]
    model.assert_hudi_rs_reads(path)


def test_single_writer_still_rolls_back_every_pending_write(tmp_path):
    path, opts, model = _seeded(tmp_path, model_options())
    coord = Coordinator(path, opts)
    coord.open(None)
    coord.start_instant()
    assert coord.heartbeats is None  # EAGER policy: no heartbeats, as Java
    coord.close()
    model.write(path, opts, "upsert", [row("a1", "a", 2, 1)])
    assert not [i for i in _instants(path) if not i.is_completed]
    assert len(_instants(path, Action.ROLLBACK)) == 1
    assert not (tmp_path / "t" / ".hoodie" / ".heartbeat").exists()
    model.assert_hudi_rs_reads(path)


def _with(rows: list[dict], **extra: object) -> pa.Table:
    """``rows`` with ``extra`` columns (the model's schema, then those)."""
    base = to_arrow(rows, True)
    for name, value in extra.items():
        base = base.append_column(name, pa.array([value] * len(rows)))
    return base


def _read(path: str, *cols: str) -> list[tuple]:
    """hudi-rs's snapshot: the rows' ``key`` and ``cols``, by key."""
    from tests.conftest import hudi_rs_read

    got = hudi_rs_read(path)
    return sorted(zip(*(got[c].to_pylist() for c in ("key", *cols)), strict=True))


@contextlib.contextmanager
def _after_open(run: Callable[[], None]) -> Iterator[None]:
    """Run ``run`` (another writer's whole write) once, right after the next Coordinator
    has read the table (its open), before it starts an instant: a long-running writer's
    view of the table, older than another writer's commit."""
    real = Coordinator.open
    done: list[bool] = []

    def open_(self, input_schema):  # type: ignore[no-untyped-def]
        setup = real(self, input_schema)
        if not done:
            done.append(True)
            run()
        return setup

    Coordinator.open = open_  # type: ignore[method-assign]
    try:
        yield
    finally:
        Coordinator.open = real  # type: ignore[method-assign]


@pytest.mark.parametrize("version", ["8", "6"])
def test_a_column_another_writer_added_since_stays_in_the_table_schema(tmp_path, version):
    """B adds a column after A read the table's schema and before A's instant: A's commit,
    the latest, records B's schema, so readers still see B's column (nulls in A's rows)."""
    path, opts, model = _seeded(tmp_path, model_options(OCC, version=version))
    a_rows, b_rows = [row("a1", "a", 2, 10)], [row("b1", "b", 3, 20)]
    a, b = HoodieWriteClient(path, opts), HoodieWriteClient(path, opts)
    with _after_open(lambda: b.write(_with(b_rows, c="new"))):
        a.write(to_arrow(a_rows, True))
    model.upsert(b_rows)
    model.upsert(a_rows)
    table = HoodieTable.load(path)
    assert "c" in table.schema.names  # the latest commit, A's, records it
    got = _read(path, "ts", "c")
    assert [(k, ts) for k, ts, _ in got] == sorted((k, r["ts"]) for k, r in model.rows.items())
    assert {k: c for k, _, c in got if c is not None} == {"b1": "new"}


def test_writers_that_both_change_the_schema_conflict_and_a_retry_writes_both(tmp_path):
    """A adds column d while B added column c since A read the table: A's instant is rolled
    back with an error naming both changes; with a retry A commits both columns."""
    path, opts, _ = _seeded(tmp_path, model_options(OCC))
    b = HoodieWriteClient(path, opts)
    b_first = _with([row("b1", "b", 3, 20)], c="x")
    with (
        _during_commit(lambda: b.write(b_first)),
        pytest.raises(hr.HoodieSchemaEvolutionConflictError) as err,
    ):
        HoodieWriteClient(path, opts).write(_with([row("a1", "a", 2, 10)], d=1.5))
    assert "adds d" in str(err.value) and "adds c" in str(err.value)
    assert "d" not in HoodieTable.load(path).schema.names  # A's write is not in the table
    # again, now with a retry: B adds c once more from a schema without it (its own read)
    retry = {**opts, "hoodie.write.num.retries.on.conflict.failures": "1"}
    table_then = HoodieTable.load(path).schema
    assert "c" in table_then.names
    with _during_commit(lambda: b.write(_with([row("b2", "b", 4, 30)], c="y", e=7))):
        HoodieWriteClient(path, retry).write(_with([row("a2", "a", 5, 40)], c="z", d=2.5))
    names = HoodieTable.load(path).schema.names
    assert {"c", "d", "e"} <= set(names)
    got = {k: (c, d, e) for k, c, d, e in _read(path, "c", "d", "e")}
    assert got["b1"] == ("x", None, None) and got["b2"] == ("y", None, 7)
    assert got["a2"] == ("z", 2.5, None)


def test_a_schema_change_that_completes_last_is_the_one_the_next_writer_starts_from(tmp_path):
    """v8: A (adds x) starts before B (no change) and completes after it. A's schema is the
    table's by completion time, so a writer C that adds y next, alone, commits both."""
    path, opts, _ = _seeded(tmp_path, model_options(OCC, version="8"))
    b = HoodieWriteClient(path, opts)
    with _during_commit(lambda: b.write(to_arrow([row("b1", "b", 3, 20)], True))):
        HoodieWriteClient(path, opts).write(_with([row("a1", "a", 2, 10)], x=1))
    HoodieWriteClient(path, opts).write(_with([row("a2", "a", 4, 30)], x=2, y="c"))
    assert {"x", "y"} <= set(HoodieTable.load(path).schema.names)
    got = {k: (x, y) for k, x, y in _read(path, "x", "y")}
    assert got["a1"] == (1, None) and got["a2"] == (2, "c") and got["b1"] == (None, None)
