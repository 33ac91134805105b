"""Concurrency: two writers on one table, a writer that lost its lock, readers during writes.

* Two writers racing on one table (threads, each committing in a loop): every write either
  commits or gets HoodieCommitConflictError; the table is the model of exactly the commits
  that succeeded, in commit order.
* A stream writer holds the table: a second stream writer and a single-process writer both get
  HoodieCommitConflictError naming the holder, and the first goes on undisturbed.
* A writer whose heartbeat stalled past the expiry (a long GC pause, a frozen VM) is taken
  over; when it wakes up its commit fails with HoodieCommitConflictError and none of its rows
  ever becomes visible.
* Readers (hoodie_ray and hudi-rs) polling while a writer commits, compacts and cleans only
  ever see committed states.
"""

from __future__ import annotations

import threading
import time

import pytest

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from tests.reliability.common import (
    CRASH_OPTIONS,
    FULL,
    ModelCache,
    assert_no_debris,
    assert_snapshots,
    batch_table,
    batch_writes,
    completed_deltacommits,
    hr_snapshot,
    rs_snapshot,
    vanished_file_error,
    vanished_kind,
)
from tests.reliability.report import record
from tests.write.model import TableModel

CONC_OPTIONS = {**CRASH_OPTIONS, "hoodie.write.lock.heartbeat_interval_ms": "100"}


def racing_rows(wid: int, i: int) -> list[dict]:
    """Writer ``wid``'s batch ``i``, without deletes: the two writers' event times interleave,
    and a delete's tombstone outranks a later-committed but older upsert of its key until a
    compaction drops it -- a timing the dict model does not follow."""
    (rows,) = batch_writes(600 + wid, i, 1)
    return [
        {k: v for k, v in r.items() if k != "_hoodie_is_deleted"} | {"ts": r["ts"] + 5000 * wid}
        for r in rows
        if not r.get("_hoodie_is_deleted")
    ]


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
def test_two_writers_racing(tmp_path):
    path = tmp_path / "t"
    rounds = 40 if FULL else 12
    committed: list[tuple[str, int, int]] = []  # (instant, writer, batch index)
    conflicts = [0, 0]
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(wid: int) -> None:
        try:
            for i in range(rounds):
                rows = racing_rows(wid, i)
                while True:
                    try:
                        res = HoodieWriteClient(str(path), CONC_OPTIONS).write(batch_table(rows))
                        break
                    except hr.HoodieCommitConflictError:
                        with lock:
                            conflicts[wid] += 1
                        time.sleep(0.005)
                with lock:
                    committed.append((res.instant, wid, i))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, repr(errors[0])
    assert sum(conflicts) > 0, "the writers never met: no conflict to check"
    committed.sort()
    assert [c[0] for c in committed] == completed_deltacommits(path)
    model = TableModel()
    for _, wid, i in committed:
        model.upsert(racing_rows(wid, i))
    assert_snapshots(path, model.as_table().to_pylist(), "after two racing writers")
    assert_no_debris(path)
    record(
        "two_writers_racing",
        commits=len(committed),
        conflicts_seen=sum(conflicts),
        corrupted=0,
        lost=0,
    )


@pytest.mark.ray
def test_second_writer_on_a_held_table_fails_clearly(ray_session, tmp_path):
    path = tmp_path / "t"
    model = ModelCache(700, parts=1)
    opts = {**CRASH_OPTIONS, "write.tasks": "1", "write.bucket_assign.tasks": "1"}
    with hr.HoodieStreamWriter(str(path), opts) as w1:
        w1.write(batch_table(batch_writes(700, 0)[0]))
        w1.checkpoint()
        before = hr_snapshot(path)
        w2 = hr.HoodieStreamWriter(str(path), opts)
        with pytest.raises(hr.HoodieCommitConflictError, match="one writer per table"):
            w2.write(batch_table(batch_writes(700, 1)[0]))
        w2.abort()
        with pytest.raises(hr.HoodieCommitConflictError, match="one writer per table"):
            HoodieWriteClient(str(path), opts).write(batch_table(batch_writes(700, 1)[0]))
        assert hr_snapshot(path) == before
        w1.write(batch_table(batch_writes(700, 1)[0]))
        w1.checkpoint()
    assert_snapshots(path, model.rows(2), "the first writer went on")
    record("second_writer_on_a_held_table", clear_errors=2, corrupted=0, lost=0)


@pytest.mark.ray
def test_two_tables_of_one_name_are_written_at_once(ray_session, tmp_path):
    """``trips`` in two databases: two stream writers in one cluster, each its own actors
    (their names carry a tag of the table's path; the second was refused as "another job"),
    while a second writer of the same table, its path spelled with a trailing slash, is."""
    opts = {**CRASH_OPTIONS, "write.tasks": "1", "write.bucket_assign.tasks": "1"}
    east, west = tmp_path / "east" / "t", tmp_path / "west" / "t"
    model = ModelCache(701, parts=1)
    with hr.HoodieStreamWriter(str(east), opts) as a, hr.HoodieStreamWriter(str(west), opts) as b:
        for w in (a, b):
            w.write(batch_table(batch_writes(701, 0)[0]))
            w.checkpoint()
        again = hr.HoodieStreamWriter(str(east) + "/", opts)
        with pytest.raises(hr.HoodieCommitConflictError, match="one writer per table"):
            again.write(batch_table(batch_writes(701, 1)[0]))
        again.abort()
    for path in (east, west):
        assert_snapshots(path, model.rows(1), "each table its own rows")


def test_writer_that_lost_its_lock_cannot_commit(tmp_path):
    """Steps of HoodieWriteClient.write by hand, with a stall between flush and commit."""
    from hoodie_ray.job.client import build_assigner, prepare_input
    from hoodie_ray.job.coordinator import Coordinator
    from hoodie_ray.write.records import precombine
    from hoodie_ray.write.stream_writer import StreamWriteFunction

    path = tmp_path / "t"
    opts = {
        **CRASH_OPTIONS,
        "hoodie.write.lock.expire_ms": "300",
        "hoodie.write.lock.heartbeat_interval_ms": "50",
    }
    model = ModelCache(800)
    HoodieWriteClient(str(path), opts).write(batch_table(batch_writes(800, 0)[0]))

    # Writer A: everything up to the commit.
    stale_rows = [dict(r, v=-1, s="never visible") for r in batch_writes(800, 1)[0]]
    table = batch_table(stale_rows)
    a = Coordinator(str(path), opts)
    setup = a.open(table.schema)
    prepared = prepare_input(setup, table, a.wc)
    rows = precombine(prepared.table, setup.context.ordering_field)
    slices = a.latest_slices()
    assert a.table is not None
    assigner = build_assigner(
        a.table,
        a.assigner_config(0, 1),
        a.profile(slices),
        slices,
    )
    writer = StreamWriteFunction(setup.context, task_id=0)
    instant = a.start_instant()
    writer.start_instant(instant, {(s.partition_path, s.file_id): s for s in slices}, set())
    writer.write(assigner.assign(rows))
    stats = writer.flush_all()

    # A stalls: its heartbeat stops; past the expiry, writer B takes the table over.
    a.lock._stop.set()
    time.sleep(0.5)
    HoodieWriteClient(str(path), opts).write(batch_table(batch_writes(800, 1)[0]))
    assert_snapshots(path, model.rows(2), "B took over and committed")

    # A wakes up: its commit must fail, and nothing of it may show.
    with pytest.raises(hr.HoodieCommitConflictError, match="lost the writer lock"):
        a.commit(instant, stats)
    writer.abort()
    a.abandon(instant)
    a.close()
    assert_snapshots(path, model.rows(2), "after the stale writer gave up")
    assert all(r["s"] != "never visible" for r in hr_snapshot(path))
    HoodieWriteClient(str(path), opts).write(batch_table(batch_writes(800, 2)[0]))
    assert_snapshots(path, model.rows(3), "writing goes on")
    assert_no_debris(path)
    record("stale_writer_fenced", clear_errors=1, corrupted=0, lost=0)


def test_a_writer_that_lost_its_lock_leaves_its_instant_to_the_new_holder(tmp_path):
    """A writer that lost the lock never rolls its instant back itself: the table is its new
    holder's (here caught between taking the lock and its recovery), whose recovery does."""
    from hoodie_ray.job.coordinator import Coordinator
    from hoodie_ray.storage import open_storage
    from hoodie_ray.write.lock import WriterLock

    path = tmp_path / "t"
    model = ModelCache(300)
    HoodieWriteClient(str(path), CRASH_OPTIONS).write(batch_table(batch_writes(300, 0)[0]))
    a = Coordinator(str(path), CRASH_OPTIONS)
    a.open(batch_table(batch_writes(300, 1)[0]).schema)
    stale = a.start_instant()
    assert a.lock.release_owned()  # A's lock goes (as when its job's driver saw it gone)

    def timeline() -> list[tuple]:
        return [(i.timestamp, i.action, i.state) for i in hr.HoodieTable.load(str(path)).timeline]

    before = timeline()
    with WriterLock(open_storage(str(path))):  # B holds the table, not yet recovered
        a.abandon(stale)
        assert timeline() == before, "A rolled back in a table B holds"
        with pytest.raises(hr.HoodieCommitConflictError, match="lost the writer lock"):
            a.rollback(stale)
    a.close()
    HoodieWriteClient(str(path), CRASH_OPTIONS).write(batch_table(batch_writes(300, 1)[0]))
    assert_snapshots(path, model.rows(2), "the next holder rolled the stale instant back")
    assert stale not in {t for t, _, _ in timeline()}
    assert_no_debris(path)


# suite time: readers beside async compaction are checked in CI by
# tests/compaction/test_compaction.py::test_async_compaction_readers_always_see_the_model[8]
@pytest.mark.slow
def test_readers_during_writes_compaction_and_clean_see_committed_states(tmp_path):
    path = tmp_path / "t"
    commits = 45 if FULL else 15
    model = ModelCache(900)
    seen: dict[str, list[int]] = {"hr": [], "hudi-rs": []}
    bad: list[str] = []
    read_errors: list[str] = []
    vanished: list[str] = []
    stop = threading.Event()
    index = {}

    def key(rows: list[dict]) -> tuple:
        return tuple(tuple(sorted(r.items())) for r in rows)

    def poll(name: str, fn) -> None:
        while not stop.is_set():
            if not (path / ".hoodie" / "hoodie.properties").exists():
                time.sleep(0.01)
                continue
            try:
                rows = fn(path)
            except Exception as e:
                if vanished_file_error(e):
                    vanished.append(f"{name}: {vanished_kind(e)}")
                else:
                    read_errors.append(f"{name}: {type(e).__name__}: {e}"[:300])
                continue
            n = index.get(key(rows), -1)  # every state the commits can publish is known
            if n == -1:
                bad.append(f"{name} saw {len(rows)} rows: never committed")
            seen[name].append(n)

    for i in range(commits + 1):
        index[key(model.rows(i))] = i
    readers = [
        threading.Thread(target=poll, args=("hr", hr_snapshot), daemon=True),
        threading.Thread(target=poll, args=("hudi-rs", rs_snapshot), daemon=True),
    ]
    for t in readers:
        t.start()
    for i in range(commits):
        HoodieWriteClient(str(path), CRASH_OPTIONS).write(batch_table(batch_writes(900, i)[0]))
    time.sleep(0.2)
    stop.set()
    for t in readers:
        t.join(timeout=60)
    assert not bad, bad[0]
    assert_snapshots(path, model.rows(commits), "at the end")
    for name, ns in seen.items():
        assert ns == sorted(ns), f"{name} went back in time"
    record(
        "readers_during_writes",
        commits=commits,
        reads={k: len(v) for k, v in seen.items()},
        distinct_states_seen={k: len(set(v)) for k, v in seen.items()},
        read_errors=len(read_errors),
        reads_failed_on_a_deleted_file=len(vanished),
        read_error_examples=read_errors[:3],
        uncommitted_states_seen=0,
    )
    assert not read_errors, read_errors[:3]


def test_markers_removed_by_a_takeover_are_a_commit_conflict(tmp_path, monkeypatch):
    """Writer A stalled past the lock expiry; B took over and rolled A's instant back, deleting
    ``.hoodie/.temp/<instant>`` between A making the marker's folder and creating the marker
    in it. A must fail with HoodieCommitConflictError saying so (it used to die of a raw
    FileNotFoundError), and the table must be as before."""
    import os
    import shutil

    path = tmp_path / "t"
    model = ModelCache(810)
    HoodieWriteClient(str(path), CRASH_OPTIONS).write(batch_table(batch_writes(810, 0)[0]))
    real_open = os.open
    removed: list[str] = []

    def open_(file, flags, *args, **kwargs):
        parts = os.fspath(file).split(os.sep)
        if not removed and ".temp" in parts and ".marker." in parts[-1]:
            instant_dir = os.sep.join(parts[: parts.index(".temp") + 2])
            shutil.rmtree(instant_dir)  # what B's recovery does (CommitProtocol.rollback)
            removed.append(instant_dir)
        return real_open(file, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    with pytest.raises(hr.HoodieCommitConflictError, match="markers of instant .* were removed"):
        HoodieWriteClient(str(path), CRASH_OPTIONS).write(batch_table(batch_writes(810, 1)[0]))
    monkeypatch.undo()
    assert removed
    assert_snapshots(path, model.rows(1), "the writer whose markers vanished committed nothing")
    HoodieWriteClient(str(path), CRASH_OPTIONS).write(batch_table(batch_writes(810, 1)[0]))
    assert_snapshots(path, model.rows(2), "writing goes on")
    assert_no_debris(path)


_OCC_WORKER = """
import json, sys
import pyarrow as pa
from hoodie_ray.exceptions import HoodieWriteConflictError
from hoodie_ray.job.client import HoodieWriteClient

path, options, batches = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
client = HoodieWriteClient(path, options)
out = []
for rows in batches:
    try:
        out.append(client.write(pa.Table.from_pylist(rows)).instant)
    except HoodieWriteConflictError as e:
        out.append("conflict: " + str(e))
print(json.dumps(out))
"""


def _occ_processes(path, options: dict, batches_by_writer: list[list[list[dict]]]) -> list[list]:
    """Run one process per writer, all at once, each writing its batches with its own
    HoodieWriteClient; the committed instant (or the conflict) of each batch, per writer."""
    import json
    import os
    import subprocess
    import sys

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OCC_WORKER, str(path), json.dumps(options), json.dumps(b)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=os.environ.copy(),
        )
        for b in batches_by_writer
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-3000:]
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
    return results


def test_occ_two_processes_disjoint_then_overlapping(tmp_path):
    """Two processes under optimistic concurrency control: on disjoint partitions both commit
    every batch; on the same keys each batch commits or fails with HoodieWriteConflictError,
    and hudi-rs reads exactly the model of the batches that committed."""
    from tests.write.model import model_options

    path = tmp_path / "t"
    opts = model_options({"hoodie.write.concurrency.mode": "optimistic_concurrency_control"})
    model = TableModel()

    def rows(w: int, b: int, part: str, keys: range) -> list[dict]:
        ts = 10 * b + w + 1  # unique per batch: the event-time model needs no tie rule
        return [{"key": f"k{k}", "p": part, "ts": ts, "v": w, "s": f"{w}/{b}"} for k in keys]

    model.write(path, opts, "upsert", rows(0, 0, "p0", range(0, 4)) + rows(0, 0, "p1", range(4, 8)))
    disjoint = [[rows(w, b, f"p{w}", range(4 * w, 4 * w + 4)) for b in (1, 2, 3)] for w in (0, 1)]
    results = _occ_processes(path, opts, disjoint)
    assert all(not str(r).startswith("conflict") for res in results for r in res), results
    for w in (0, 1):
        for batch in disjoint[w]:
            model.upsert(batch)
    model.assert_hudi_rs_reads(path, "disjoint partitions")

    overlap = [[rows(w, b, "p0", range(0, 4)) for b in (4, 5, 6)] for w in (0, 1)]
    results = _occ_processes(path, opts, overlap)
    committed = []
    for w in (0, 1):
        for batch, res in zip(overlap[w], results[w], strict=True):
            assert res is not None
            if res.startswith("conflict"):
                assert "HoodieWriteConflictError" not in res and "p0/" in res
            else:
                committed.append((res, batch))
    for _, batch in sorted(committed, key=lambda c: c[0]):
        model.upsert(batch)
    model.assert_hudi_rs_reads(path, f"overlapping keys, {len(committed)} of 6 committed")
    instants = set(completed_deltacommits(path))
    assert {c[0] for c in committed} <= instants
    assert not list((path / ".hoodie" / ".heartbeat").iterdir())
