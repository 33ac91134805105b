"""Failures between commit steps, bad input, small files, a second writer: the table stays right."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.storage import LocalStorage
from hoodie_ray.timeline.timeline import ActiveTimeline
from hoodie_ray.write import commit as commit_mod
from hoodie_ray.write import stream_writer as sw
from hoodie_ray.write.lock import WriterLock
from tests.conftest import hudi_rs_read
from tests.write.model import OPTIONS, Workload, hudi_rs_snapshot, model_options, to_arrow


def snapshot_files(root: Path) -> dict[str, str]:
    """Every file under the table (the lock file aside) with a hash of its bytes."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".aux" not in p.parts:
            out[str(p.relative_to(root))] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out


class Boom(Exception):
    pass


def _seed_table(path: Path) -> Workload:
    wl = Workload(seed=3)
    HoodieWriteClient(str(path), OPTIONS).write(to_arrow(wl.rows_for(wl.keys[:20]), True))
    HoodieWriteClient(str(path), OPTIONS).write(to_arrow(wl.rows_for(wl.keys[10:30]), True))
    return wl


@pytest.mark.parametrize(
    "step", ["after_first_file", "after_all_files", "before_complete", "after_inflight"]
)
def test_failure_between_commit_steps_leaves_table_as_before(tmp_path, monkeypatch, step):
    path = tmp_path / "t"
    wl = _seed_table(path)
    before = hudi_rs_snapshot(path).to_pylist()
    rows = wl.rows_for(wl.keys[5:40])

    if step == "after_first_file":
        real = sw.StreamWriteFunction._append_to_log

        def fail_append(self, *a, **k):
            real(self, *a, **k)
            raise Boom("after the first data file")

        monkeypatch.setattr(sw.StreamWriteFunction, "_append_to_log", fail_append)
    elif step == "after_all_files":
        real_flush = sw.StreamWriteFunction.flush_all

        def fail_flush(self):
            real_flush(self)
            raise Boom("after all data files")

        monkeypatch.setattr(sw.StreamWriteFunction, "flush_all", fail_flush)
    elif step == "before_complete":

        def fail_complete(self, *a, **k):
            raise Boom("before the completed instant")

        monkeypatch.setattr(ActiveTimeline, "complete", fail_complete)
    else:
        real_inflight = ActiveTimeline.transition_to_inflight

        def fail_inflight(self, *a, **k):
            real_inflight(self, *a, **k)
            raise Boom("after the inflight instant")

        monkeypatch.setattr(ActiveTimeline, "transition_to_inflight", fail_inflight)
    with pytest.raises(Boom):
        HoodieWriteClient(str(path), OPTIONS).write(to_arrow(rows, True))
    monkeypatch.undo()
    assert hudi_rs_snapshot(path).to_pylist() == before
    assert hr.read(str(path)).num_rows == len(before)
    # the next write succeeds and nothing is left pending
    HoodieWriteClient(str(path), OPTIONS).write(to_arrow(rows, True))
    t = hr.HoodieTable.load(str(path))
    assert all(i.state.value == "COMPLETED" for i in t.timeline)
    assert hudi_rs_snapshot(path).num_rows >= len(before)


def test_crash_leaves_pending_instant_rolled_back_by_next_writer(tmp_path, monkeypatch):
    path = tmp_path / "t"
    wl = _seed_table(path)
    before = hudi_rs_snapshot(path).to_pylist()
    # simulate a dead writer: the rollback of the failed instant fails too
    monkeypatch.setattr(
        commit_mod.CommitProtocol, "rollback", lambda self, i: (_ for _ in ()).throw(Boom("dead"))
    )
    monkeypatch.setattr(
        ActiveTimeline,
        "complete",
        lambda self, *a, **k: (_ for _ in ()).throw(Boom("dead")),
    )
    with pytest.raises(Boom):
        HoodieWriteClient(str(path), OPTIONS).write(to_arrow(wl.rows_for(wl.keys), True))
    monkeypatch.undo()
    pending = [i for i in hr.HoodieTable.load(str(path)).timeline if i.state.value != "COMPLETED"]
    assert pending, "the failed instant should be left pending"
    assert hudi_rs_snapshot(path).to_pylist() == before  # readers ignore the pending write
    HoodieWriteClient(str(path), OPTIONS).write(to_arrow([wl._row("k001")], True))
    timeline = hr.HoodieTable.load(str(path)).timeline
    assert all(i.state.value == "COMPLETED" for i in timeline)
    assert any(i.action == "rollback" for i in timeline)


@pytest.mark.parametrize(
    "bad",
    [
        (
            "null key",
            pa.table(
                {
                    "key": pa.array([None, "a"], pa.string()),
                    "p": ["a", "a"],
                    "ts": [1, 2],
                    "v": [1, 2],
                    "s": ["x", "y"],
                }
            ),
        ),
        ("missing ordering field", pa.table({"key": ["a"], "p": ["a"], "v": [1], "s": ["x"]})),
        ("changed type", pa.table({"key": ["a"], "p": ["a"], "ts": [1], "v": ["one"], "s": ["x"]})),
        (
            "unsupported key type",
            pa.table({"key": [[1]], "p": ["a"], "ts": [1], "v": [1], "s": ["x"]}),
        ),
    ],
    ids=lambda b: b[0],
)
def test_bad_input_names_the_problem_and_changes_nothing(tmp_path, bad):
    path = tmp_path / "t"
    _seed_table(path)
    before = snapshot_files(path)
    with pytest.raises(hr.HoodieError) as ei:
        HoodieWriteClient(str(path), OPTIONS).write(bad[1])
    assert any(w in str(ei.value) for w in ("key", "ts", "column s", "column v", "field")), str(
        ei.value
    )
    assert snapshot_files(path) == before


def test_unknown_option_changes_nothing(tmp_path):
    path = tmp_path / "t"
    _seed_table(path)
    before = snapshot_files(path)
    with pytest.raises(hr.HoodieOptionError, match="hoodie.datasource.write.recordkey.fields"):
        HoodieWriteClient(
            str(path), {**OPTIONS, "hoodie.datasource.write.recordkey.fields": "key"}
        ).write(to_arrow([Workload(1)._row("a")], True))
    assert snapshot_files(path) == before


def test_small_files_take_inserts_before_new_groups(tmp_path):
    path = tmp_path / "t"
    # (limits above the ~430 KB bloom filter footer every base file carries at Java's
    # defaults; the first commit is below the limit, so the estimate, not its bytes per
    # record, sizes the small group's room: Java's record size estimation threshold)
    small_files = {
        "hoodie.parquet.small.file.limit": "1000000",
        "hoodie.parquet.max.file.size": "2000000",
        "hoodie.copyonwrite.record.size.estimate": "1000",
    }
    opts = model_options(small_files)
    opts.pop("hoodie.datasource.write.partitionpath.field")  # not partitioned

    def batch(lo, hi):
        return pa.table(
            {
                "key": [f"k{i:05d}" for i in range(lo, hi)],
                "p": ["a"] * (hi - lo),
                "ts": list(range(lo, hi)),
                "v": list(range(lo, hi)),
                "s": ["x"] * (hi - lo),
            }
        )

    HoodieWriteClient(str(path), opts).write(batch(0, 50))  # one small file group
    groups = {s.file_id for s in hr.HoodieTable.load(str(path)).latest_file_slices()}
    assert len(groups) == 1
    HoodieWriteClient(str(path), opts).write(batch(50, 100))  # fits in the small group
    groups2 = {s.file_id for s in hr.HoodieTable.load(str(path)).latest_file_slices()}
    assert groups2 == groups
    assert hudi_rs_snapshot(path).num_rows == 100


def test_second_writer_gets_a_clear_error(tmp_path):
    path = tmp_path / "t"
    _seed_table(path)
    before = snapshot_files(path)
    holder = WriterLock(LocalStorage(str(path))).acquire()
    try:
        with pytest.raises(hr.HoodieCommitConflictError, match="being written by"):
            HoodieWriteClient(str(path), OPTIONS).write(to_arrow([Workload(1)._row("a")], True))
    finally:
        holder.release()
    assert snapshot_files(path) == before


def test_a_completed_instant_committed_again_leaves_the_metadata_table(tmp_path):
    """A commit of an instant that is completed already (a writer's retry after an interrupt)
    is refused before the metadata table is touched, unless it is the same commit (then a
    no-op): the metadata table's files listing of the instant stays the first commit's, or
    readers listing through it lose the instant's rows."""
    from hoodie_ray.exceptions import HoodieCommitConflictError
    from hoodie_ray.table import HoodieTable
    from hoodie_ray.write.commit import CommitProtocol

    path = tmp_path / "t"
    opts = model_options(version="8")
    wl = Workload(seed=4)
    done = HoodieWriteClient(str(path), opts).write(to_arrow(wl.rows_for(wl.keys[:30]), True))
    assert done.instant is not None
    before = hudi_rs_snapshot(path).to_pylist()
    table = HoodieTable.load(str(path))
    inst = table.active_timeline.reload().get(done.instant)
    assert inst is not None
    schema = table.metadata(inst).extra_metadata["schema"]
    protocol = CommitProtocol(table)
    with pytest.raises(HoodieCommitConflictError, match="already completed"):
        protocol.commit(done.instant, [], schema_json=schema, operation_type="UPSERT")
    assert hudi_rs_snapshot(path).to_pylist() == before
    assert hr.validate_metadata(str(path)) == []


@pytest.mark.parametrize("version", ["6", "8"])
def test_a_rollback_of_an_instant_the_active_timeline_lacks_is_refused(tmp_path, version):
    """``hr.rollback`` of an archived commit deleted its live base file (the files named by an
    instant are rolled back where no timeline file is found: a crash before the requested
    file); of an instant never written it committed an empty rollback. Refused, as Java
    finds the instant on the active timeline first, the table unchanged: an instant older
    than the timeline's first commit (archived, or never written) even with markers naming
    its files, and an unknown one that left no markers."""
    path = tmp_path / "t"
    opts = {
        **OPTIONS,
        "hoodie.write.table.version": version,
        "compaction.delta_commits": "1",
        "clean.retain_commits": "1",
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
    }
    keys = [f"k{i}" for i in range(20)]
    hr.write(
        pa.table({"key": keys, "ts": [1] * 20, "p": ["a"] * 20}), str(path), opts, engine="local"
    )
    first = hr.HoodieTable.load(str(path)).active_timeline.completed_commits()[0].timestamp
    for j in range(8):
        hr.write(
            pa.table({"key": [f"b{j}"], "ts": [2], "p": ["b"]}), str(path), opts, engine="local"
        )
    assert first not in {
        i.timestamp for i in hr.HoodieTable.load(str(path)).active_timeline.instants
    }
    ghost = path / ".hoodie" / ".temp" / first / "a"
    ghost.mkdir(parents=True)
    for f in (path / "a").iterdir():
        if first in f.name:
            (ghost / f"{f.name}.marker.CREATE").write_bytes(b"")
    before = snapshot_files(path)
    want = hudi_rs_read(path).select(["key", "ts", "p"]).sort_by("key")
    assert want.num_rows == 28
    with pytest.raises(hr.HoodieTimelineError, match=f"{first} is older than the first commit"):
        hr.rollback(str(path), first)
    with pytest.raises(hr.HoodieTimelineError, match="left no markers: nothing to roll back"):
        hr.rollback(str(path), "99991231235959999")
    assert snapshot_files(path) == before
    assert hudi_rs_read(path).select(["key", "ts", "p"]).sort_by("key").equals(want)
