"""``hoodie.metadata.compact.async``: the metadata table's compaction merged beside the writes.

The commit that makes the compaction due plans it and returns; the merge runs on the
process's compaction thread while later commits log into the next slice. Held mid-merge (a
fault: the merge waits), every reader sees the model: hudi-rs, the validator, hoodie_ray's
record-index lookups.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from pathlib import Path

import pytest

import hoodie_ray as hr
from hoodie_ray.config.options import resolve_options
from hoodie_ray.job import coordinator, maintenance
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.metadata_writer import writer as mw
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action, State, format_instant_time, parse_instant_time
from hoodie_ray.write.commit import CommitProtocol
from tests.write.model import TableModel, Workload, model_options


def _opts(version: str = "8", **extra: str) -> dict:
    return model_options(
        {
            "hoodie.metadata.record.index.enable": "true",
            "hoodie.metadata.compact.max.delta.commits": "2",
            "hoodie.metadata.compact.async": "true",
            **extra,
        },
        table_type="MERGE_ON_READ",
        version=version,
    )


def _check(path: str, model: TableModel, step: str) -> None:
    diffs = maintenance.validate_metadata(path)
    assert not diffs, f"{step}: " + "; ".join(map(str, diffs))
    model.assert_hudi_rs_reads(path, f"{step}: hudi-rs differs")
    got = hr.read(path).sort_by("_hoodie_record_key")
    assert got.num_rows == len(model.rows), step


def _mdt_compactions(path: str) -> dict[str, State]:
    """The MDT's compactions: pending ones, and completed ones (a ``commit`` there)."""
    tl = HoodieTable.load(path).metadata_table.timeline
    return {
        i.timestamp: i.state for i in tl.instants if i.action in (Action.COMPACTION, Action.COMMIT)
    }


def _upsert(path, opts, client, model, wl, keys):
    rows = wl.rows_for(keys)
    model.write(path, opts, "upsert", rows, client)
    return rows


@pytest.mark.parametrize(
    ("version", "held_at"),
    [("8", "merge"), ("9", "merge"), ("8", "completion"), ("9", "completion")],
)
def test_commits_beside_a_held_compaction_read_right_before_and_after_it(
    tmp_path: Path, monkeypatch, version: str, held_at: str
) -> None:
    """Held before its merge (no new base file yet) or before its completion (every new
    base file written, the instant still inflight). The client closes its job after each
    write, and a close waits for the merge (the lock's next holder would roll it back); a
    stream's coordinator keeps its job across commits, which the test stands in for."""
    path = str(tmp_path / "t")
    opts = _opts(version)
    monkeypatch.setattr(coordinator, "finish_compaction_beside", lambda table: None)
    # (and opens it again for each write, where the MDT's partitions are checked)
    monkeypatch.setattr(mw.MetadataWriter, "_settle_beside", lambda self: None)
    release = threading.Event()
    merging = threading.Event()

    def hold() -> None:
        merging.set()
        assert release.wait(60)

    if held_at == "merge":
        execute = mw.MetadataWriter._execute_compaction

        def held(self, ts, ops):
            hold()
            execute(self, ts, ops)

        monkeypatch.setattr(mw.MetadataWriter, "_execute_compaction", held)
    else:
        metadata = mw.MetadataWriter._commit_metadata

        def held_meta(self, stats, op, **kw):
            if op == "COMPACT":
                hold()
            return metadata(self, stats, op, **kw)

        monkeypatch.setattr(mw.MetadataWriter, "_commit_metadata", held_meta)
    model, wl = TableModel(), Workload(41)
    client = HoodieWriteClient(path, opts)
    _upsert(path, opts, client, model, wl, wl.keys[:30])  # the MDT's inits and this: due
    assert merging.wait(60)
    pending = _mdt_compactions(path)
    assert list(pending.values()) == [State.INFLIGHT], pending
    uri = HoodieTable.load(path).metadata_table.storage.uri("")
    assert mw.running_compaction_beside(uri) == next(iter(pending))
    # a write begun before the plan (as a pipelined checkpoint's is) and committed beside
    # it: its MDT logs are named before the plan's instant and complete after it
    planned = next(iter(pending))
    early = format_instant_time(parse_instant_time(planned) - dt.timedelta(milliseconds=1))
    first = iter([early])
    fresh = CommitProtocol.new_instant_time
    monkeypatch.setattr(
        CommitProtocol, "new_instant_time", lambda self: next(first, None) or fresh(self)
    )
    for i in range(4):  # new keys and updates, each logged beside the plan
        _upsert(path, opts, client, model, wl, wl.keys[25 + 5 * i : 45 + 5 * i])
        if i == 0:
            assert early in {
                i.timestamp for i in HoodieTable.load(path).active_timeline.completed()
            }
        _check(path, model, f"commit {i} beside the held compaction")
        # a point lookup through the record index finds a key first written beside it
        key = wl.keys[40 + 5 * i]
        hit = hr.read(path, filters=[("key", "=", key)])
        assert hit.column("ts").to_pylist() == [model.rows[key]["ts"]], key
    assert _mdt_compactions(path) == pending  # one at a time: none planned beside it
    release.set()
    mw.wait_for_compaction_beside(uri)
    assert list(_mdt_compactions(path).values()) == [State.COMPLETED]
    _check(path, model, "the compaction completed")
    _upsert(path, opts, client, model, wl, wl.keys[:10])
    _upsert(path, opts, client, model, wl, wl.keys[50:60])
    mw.wait_for_compaction_beside(uri)
    assert len(_mdt_compactions(path)) == 2
    _check(path, model, "the next compaction")


def test_a_failed_merge_is_rolled_back_by_the_next_commit(tmp_path: Path, monkeypatch) -> None:
    path = str(tmp_path / "t")
    opts = _opts()
    execute = mw.MetadataWriter._execute_compaction
    failures = []

    def broken(self, ts, ops):
        if not failures:
            failures.append(ts)
            part, fs = ops[0]
            self._compact_slice(self.reader(), part, fs, ts)  # one base file written
            raise OSError("disk gone")
        execute(self, ts, ops)

    monkeypatch.setattr(mw.MetadataWriter, "_execute_compaction", broken)
    model, wl = TableModel(), Workload(43)
    client = HoodieWriteClient(path, opts)
    _upsert(path, opts, client, model, wl, wl.keys[:30])  # the MDT's inits and this: due
    uri = HoodieTable.load(path).metadata_table.storage.uri("")
    mw.wait_for_compaction_beside(uri)
    assert failures and _mdt_compactions(path) == {failures[0]: State.INFLIGHT}
    _check(path, model, "the failed merge left pending")
    _upsert(path, opts, client, model, wl, wl.keys[40:50])  # rolls it back, plans anew
    mw.wait_for_compaction_beside(uri)
    done = _mdt_compactions(path)
    assert failures[0] not in done and list(done.values()) == [State.COMPLETED]
    _check(path, model, "after the rollback")


def test_inline_where_it_cannot_run_beside() -> None:
    """Another writer's delta commits would roll the plan back (OCC, NBCC); a 0.x table's
    logs are named by their slice's base instant."""
    on = resolve_options({"hoodie.metadata.compact.async": "true"})
    assert mw.MetadataWriteConfig.of(on).compact_async
    for mode in ("optimistic_concurrency_control", "non_blocking_concurrency_control"):
        wc = dataclasses.replace(on, concurrency_mode=mode)
        assert not mw.MetadataWriteConfig.of(wc).compact_async
    assert not mw.MetadataWriteConfig.of(resolve_options({})).compact_async


def test_a_job_that_closes_waits_for_the_merge(tmp_path: Path, monkeypatch) -> None:
    """A write's close (its lock released) comes after the merge completed: no next writer
    finds it pending. Structural changes of the MDT (a drop) wait for it too."""
    path = str(tmp_path / "t")
    opts = _opts()
    execute = mw.MetadataWriter._execute_compaction
    merged: list[str] = []

    def slow(self, ts, ops):
        threading.Event().wait(0.2)  # the committing thread goes on meanwhile
        execute(self, ts, ops)
        merged.append(ts)

    monkeypatch.setattr(mw.MetadataWriter, "_execute_compaction", slow)
    model, wl = TableModel(), Workload(47)
    client = HoodieWriteClient(path, opts)
    _upsert(path, opts, client, model, wl, wl.keys[:30])  # due: planned, merged beside
    assert merged and _mdt_compactions(path) == {merged[0]: State.COMPLETED}
    _upsert(path, opts, client, model, wl, wl.keys[10:40])
    _check(path, model, "after the merges")


def test_the_merge_reads_the_table_it_was_planned_on(tmp_path: Path, monkeypatch) -> None:
    """A table opened by a relative path: the working directory changes while the merge
    waits, and the merge still completes on that table (it opens its own handle over the
    committing writer's storage root, not the path again)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    opts = _opts()
    monkeypatch.setattr(coordinator, "finish_compaction_beside", lambda table: None)
    start = mw._start_beside
    release, merging, merged = threading.Event(), threading.Event(), []

    def held_start(uri, instant, merge):
        def held() -> None:  # before the merge opens anything
            merging.set()
            assert release.wait(60)
            merge()
            merged.append(instant)

        start(uri, instant, held)

    monkeypatch.setattr(mw, "_start_beside", held_start)
    model, wl = TableModel(), Workload(53)
    client = HoodieWriteClient("t", opts)
    _upsert("t", opts, client, model, wl, wl.keys[:30])  # due: planned, held
    assert merging.wait(60)
    uri = HoodieTable.load("t").metadata_table.storage.uri("")
    monkeypatch.chdir(tmp_path / "b")
    release.set()
    mw.wait_for_compaction_beside(uri)
    path = str(tmp_path / "a" / "t")
    assert merged and _mdt_compactions(path) == {merged[0]: State.COMPLETED}
    _check(path, model, "after the merge")
