"""Optimistic concurrency control on the Ray path: a HoodieStreamWriter (or a warm ``hr.write``
topology) and a single-process backfill (HoodieWriteClient) on one table.

The backfill commits between the stream's ``write`` (its instant is open, its rows assigned)
and its ``checkpoint``, as a second process would. The stream's coordinator takes the table
lock only for its short turns, so the backfill never waits for it; a conflicted checkpoint is
replayed into a new instant, or raises with nothing of it in the table. Every table is read
back with hudi-rs and compared with the model of the commits that landed."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieWriteConflictError
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.ray import parking, stream
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action
from hoodie_ray.write.lock import LOCK_PATH
from tests.conftest import hudi_rs_read
from tests.write.model import TableModel, model_options, to_arrow

pytestmark = pytest.mark.ray

OCC = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    # a writer that kept the lock between its turns fails these tests in seconds, not minutes
    "hoodie.write.lock.wait_time_ms": "3000",
    "write.tasks": "1",
}


#: Every insert opens a new file group: a key the stream's index missed would be written twice
#: (in a group of its own), not merged into the small file group the other writer put it in.
NO_SMALL_FILES = {"hoodie.parquet.small.file.limit": "1"}


def row(key: str, p: str, ts: int, v: int) -> dict:
    return {"key": key, "p": p, "ts": ts, "v": v, "s": f"{key}@{ts}"}


def _seeded(tmp_path, *extra: dict, version: str | None = None) -> tuple[str, dict, TableModel]:
    """Four keys in each of partitions a and b, committed by a backfill client."""
    path, model = str(tmp_path / "t"), TableModel()
    opts = model_options(OCC, *extra, version=version)
    rows = [row(f"a{i}", "a", 1, i) for i in range(4)] + [row(f"b{i}", "b", 1, i) for i in range(4)]
    model.write(path, opts, "upsert", rows)
    return path, opts, model


def _instants(path: str, action: str | None = None) -> list:
    tl = HoodieTable.load(path).active_timeline.reload()
    return [i for i in tl.instants if action is None or i.action == action]


def _no_pending(path: str) -> None:
    assert [i.timestamp for i in _instants(path) if not i.is_completed] == []


# suite time: a backfill commits while the stream's instant is open in
# test_conflicted_checkpoint_is_replayed_and_commits[8]; the key index reloaded after another
# writer's commit in test_warm_topology_holds_no_lock_between_writes; disjoint writes never
# conflict in tests/job/test_occ.py
@pytest.mark.slow
def test_stream_and_backfill_on_disjoint_partitions_both_commit(ray_session, tmp_path):
    path, opts, model = _seeded(tmp_path, NO_SMALL_FILES)
    stream_rows = [row("a1", "a", 2, 10), row("a7", "a", 2, 11)]
    backfill = [row(f"b{i}", "b", 3, 20 + i) for i in range(6)]  # b4, b5: new keys
    with hr.HoodieStreamWriter(path, opts) as w:
        w.write(to_arrow(stream_rows, True))  # the stream's instant is open now
        # the backfill takes the lock for its turns while the stream's instant is in flight
        done = HoodieWriteClient(path, opts).write(to_arrow(backfill, True)).instant
        instant = w.checkpoint()
        assert instant is not None and done is not None and instant < done
        model.upsert(backfill)
        model.upsert(stream_rows)
        model.assert_hudi_rs_reads(path, "disjoint")
        # the next checkpoint starts after the backfill's commit: the stream's key index is
        # reloaded, so b5 (a key only the backfill wrote) is an update, not a second copy
        more = [row("b5", "b", 4, 30), row("a2", "a", 4, 31)]
        w.write(to_arrow(more, True))
        assert w.checkpoint() is not None
        model.upsert(more)
    model.assert_hudi_rs_reads(path, "after the reload")
    assert not _instants(path, Action.ROLLBACK)
    _no_pending(path)


@pytest.mark.parametrize("version", ["8", pytest.param("6", marks=pytest.mark.slow)])
def test_conflicted_checkpoint_is_replayed_and_commits(ray_session, tmp_path, version):
    path, opts, model = _seeded(
        tmp_path, {"hoodie.write.num.retries.on.conflict.failures": "1"}, version=version
    )
    stream_rows = [row("a1", "a", 5, 10), row("a9", "a", 5, 11), row("c0", "c", 5, 12)]
    backfill = [row("a1", "a", 3, 20), row("a0", "a", 3, 21), row("a8", "a", 3, 22)]
    with hr.HoodieStreamWriter(path, opts) as w:
        w.write(to_arrow(stream_rows, True))
        first = w._instant
        assert first is not None
        other = HoodieWriteClient(path, opts).write(to_arrow(backfill, True)).instant
        instant = w.checkpoint()  # conflicts on a1's file group: rolled back, replayed
    assert instant is not None and instant != first
    model.upsert(backfill)
    model.upsert(stream_rows)
    model.assert_hudi_rs_reads(path, "replayed")
    completed = {i.timestamp for i in _instants(path) if i.is_completed}
    assert {other, instant} <= completed and first not in completed
    assert len(_instants(path, Action.ROLLBACK)) == 1
    _no_pending(path)
    assert hr.validate_metadata(path) == []  # empty where the table has no metadata table


@pytest.mark.slow  # suite time: the replayed-conflict test raises the same error path in CI
def test_conflict_without_retries_raises_and_commits_nothing(ray_session, tmp_path):
    path, opts, model = _seeded(tmp_path)  # hoodie.write.num.retries.on.conflict.failures=0
    stream_rows = [row("a1", "a", 5, 10), row("z0", "z", 5, 11)]
    backfill = [row("a1", "a", 3, 20)]
    with hr.HoodieStreamWriter(path, opts) as w:
        w.write(to_arrow(stream_rows, True))
        first = w._instant
        other = HoodieWriteClient(path, opts).write(to_arrow(backfill, True)).instant
        with pytest.raises(HoodieWriteConflictError) as err:
            w.checkpoint()
        msg = str(err.value)
        assert first in msg and other in msg and "a/" in msg  # both instants, the file group
        assert "hoodie.write.num.retries.on.conflict.failures=0" in msg
        model.upsert(backfill)  # nothing of the stream's checkpoint, z0 included
        model.assert_hudi_rs_reads(path, "conflicted")
        _no_pending(path)
        # the writer goes on from the table as the backfill left it
        again = [row("a1", "a", 6, 30)]
        w.write(to_arrow(again, True))
        assert w.checkpoint() is not None
        model.upsert(again)
    model.assert_hudi_rs_reads(path, "after the conflict")
    _no_pending(path)


def test_warm_topology_holds_no_lock_between_writes(ray_session, tmp_path):
    path, opts, model = _seeded(tmp_path, NO_SMALL_FILES)
    lock = tmp_path / "t" / LOCK_PATH
    try:
        first = [row("a1", "a", 2, 10)]
        hr.write(to_arrow(first, True), path, opts)  # on Ray; the topology is parked
        model.upsert(first)
        parked = parking._parked.get(next(iter(parking._parked), ""))
        assert parked is not None and not parked.writer._closed
        coordinator = parked.writer.actors["coordinator"]
        assert not lock.exists()  # parked, and the table's lock is free
        # another writer of this process commits in between: the topology stays parked
        backfill = [row("b1", "b", 3, 20), row("b8", "b", 3, 21)]
        model.write(path, opts, "upsert", backfill)
        again = parking._parked.get(next(iter(parking._parked), ""))
        assert again is parked and not parked.writer._closed
        # ... and another adds a column the parked topology never saw
        added = [row("b5", "b", 3, 22)]
        HoodieWriteClient(path, opts).write(
            to_arrow(added, True).append_column("c", pa.array(["new"]))
        )
        model.upsert(added)
        # the next call is a checkpoint of the same topology, which reloads its key index
        # from the table the backfill changed: b8 is updated, not written twice; its commit
        # records the schema with c (readers still see it)
        second = [row("b8", "b", 4, 30), row("a2", "a", 4, 31)]
        hr.write(to_arrow(second, True), path, opts)
        model.upsert(second)
        assert parked.writer.actors["coordinator"] == coordinator
        assert not lock.exists()
        model.assert_hudi_rs_reads(path, "warm")
        assert "c" in HoodieTable.load(path).schema.names
        # a column of its own, evolved from its view without c: the commit keeps both
        third = [row("a3", "a", 5, 32)]
        hr.write(to_arrow(third, True).append_column("d", pa.array([1.5])), path, opts)
        model.upsert(third)
        got = hudi_rs_read(path)
        cols = (got[n].to_pylist() for n in ("key", "c", "d"))
        extra = {k: (c, d) for k, c, d in zip(*cols, strict=True)}
        assert extra["b5"] == ("new", None) and extra["a3"] == (None, 1.5)
        assert parked.writer.actors["coordinator"] == coordinator
    finally:
        stream.release_warm_writers()
    _no_pending(path)


def test_a_key_index_that_met_a_replaced_group_is_read_again_and_the_input_sent_once(
    ray_session, tmp_path, monkeypatch
):
    """The tasks' key index, reloaded at an instant's start after another writer's commit,
    met a file group replaced while it read it (``build_assigner``'s
    ``HoodieWriteConflictError``, injected here: its timing is another process's): the
    instant is rolled back and the tasks start again, as for a conflicted commit (up to
    ``hoodie.write.num.retries.on.conflict.failures``), and each block of the warm
    ``hr.write`` goes into the new instant once (an insert into file groups of its own: a
    second copy would be a second row)."""
    from hoodie_ray.ray.topology import WriteTopology

    retry = {"hoodie.write.num.retries.on.conflict.failures": "1"}
    path, opts, model = _seeded(tmp_path, NO_SMALL_FILES, retry)
    inserts = {**opts, "write.operation": "insert"}
    try:
        first = [row("c0", "c", 2, 10)]
        hr.write(to_arrow(first, True), path, inserts)  # parked; its key index loaded
        model.upsert(first)
        backfill = [row("b1", "b", 3, 20)]
        model.write(path, opts, "upsert", backfill)  # the next instant reloads the index
        real, starts = WriteTopology.start_workers, []

        def replaced_once(self, setup):
            starts.append(setup)
            if len(starts) == 1:
                raise HoodieWriteConflictError("file group x of partition 'a' was replaced")
            return real(self, setup)

        monkeypatch.setattr(WriteTopology, "start_workers", replaced_once)
        blocks = [[row(f"n{b}-{i}", "n", 4, i) for i in range(20)] for b in range(3)]
        import ray

        data = ray.data.from_arrow([to_arrow(rows, True) for rows in blocks])
        assert hr.write(data, path, inserts).instant is not None
        assert len(starts) == 2
        model.upsert([r for rows in blocks for r in rows])
        model.assert_hudi_rs_reads(path, "read again")
    finally:
        stream.release_warm_writers()
    assert len(_instants(path, Action.ROLLBACK)) == 1  # the instant the failed start began
    _no_pending(path)


@pytest.mark.slow  # two topologies' start-ups; the replay itself is tested above
def test_two_stream_writers_on_one_table_in_one_cluster(ray_session, tmp_path):
    """Two jobs' topologies side by side (their actors named by job): on a shared file group
    the later committer replays its checkpoint and commits."""
    small = {f"ray.{r}.num_cpus": "0.1" for r in ("coordinator", "assigner", "writer")}
    retry = {"hoodie.write.num.retries.on.conflict.failures": "1"}
    path, opts, model = _seeded(tmp_path, small, retry)
    with hr.HoodieStreamWriter(path, opts) as a, hr.HoodieStreamWriter(path, opts) as b:
        a_rows, b_rows = [row("a2", "a", 3, 11)], [row("a2", "a", 4, 21), row("b2", "b", 4, 22)]
        a.write(to_arrow(a_rows, True))
        b.write(to_arrow(b_rows, True))
        first = b._instant
        assert a.checkpoint() is not None
        assert b.checkpoint() not in (None, first)  # conflicted on a2's group, replayed
        model.upsert(a_rows)
        model.upsert(b_rows)
    model.assert_hudi_rs_reads(path, "shared file group")
    assert len(_instants(path, Action.ROLLBACK)) == 1
    _no_pending(path)


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
def test_lost_coordinator_instant_is_rolled_back_not_left_to_its_heartbeat(ray_session, tmp_path):
    """Under OCC a new coordinator's recovery keeps pending writes whose heartbeat is live,
    the lost coordinator's own instant too: the driver rolls that one back itself, and the
    checkpoint's input is replayed into a new instant."""
    import ray

    path, opts, model = _seeded(tmp_path)
    rows = [row("a1", "a", 2, 10), row("c1", "c", 2, 11)]
    with hr.HoodieStreamWriter(path, opts) as w:
        w.write(to_arrow(rows, True))
        lost = w._instant
        ray.kill(w.actors["coordinator"], no_restart=True)
        instant = w.checkpoint()
    assert instant not in (None, lost)
    model.upsert(rows)
    model.assert_hudi_rs_reads(path)
    _no_pending(path)
    assert len(_instants(path, Action.ROLLBACK)) == 1
    assert not (tmp_path / "t" / ".hoodie" / ".heartbeat" / str(lost)).exists()


# A table-service process: compact, clean and archive in turn until the stop file appears,
# then one last round; prints what it did as one JSON line.
_SERVICES = """
import json, os, sys
import hoodie_ray as hr

path, options, stop = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
done = {"compactions": 0, "cleaned": 0, "archived": 0, "rounds": 0}
while True:
    last = os.path.exists(stop)
    done["compactions"] += hr.compact(path, options).instant is not None
    done["cleaned"] += hr.clean(path, options).num_files
    done["archived"] += len(hr.archive(path, options).instants)
    done["rounds"] += 1
    if last:
        break
print(json.dumps(done), flush=True)
"""


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
def test_table_services_from_another_process_beside_a_stream_writer(ray_session, tmp_path):
    """A HoodieStreamWriter under OCC with its own services off makes 20 checkpoints while
    another process compacts, cleans and archives the table in a loop: every checkpoint
    commits, no key is lost or doubled (hudi-rs equals the model), nothing is left pending,
    the metadata table validates clean."""
    import json
    import os
    import subprocess
    import sys

    keep = {
        "clean.retain_commits": "2",
        "hoodie.keep.min.commits": "4",
        "hoodie.keep.max.commits": "6",
        "compaction.delta_commits": "1",
    }
    path, opts, model = _seeded(tmp_path, keep, version="8")
    stop = tmp_path / "stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVICES, path, json.dumps(opts), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        writer_opts = {**opts, "hoodie.table.services.enabled": "false"}
        with hr.HoodieStreamWriter(path, writer_opts) as w:
            for c in range(20):
                rows = [row(f"{p}{(c + i) % 6}", p, 2 + c, c) for p in "ab" for i in range(3)]
                w.write(to_arrow(rows, True))
                model.upsert(rows)
                assert w.checkpoint() is not None
        stop.touch()
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    done = json.loads(out.strip().splitlines()[-1])
    assert done["compactions"] > 0 and done["rounds"] > 1, done
    model.assert_hudi_rs_reads(path)
    _no_pending(path)
    assert not _instants(path, Action.ROLLBACK)
    assert hr.validate_metadata(path) == []


# suite time: the conflict replay runs in CI in test_conflicted_checkpoint_is_replayed_and_commits[8],
# a pipelined checkpoint recovered before the one behind it in
# tests/ray/test_pipelined.py::test_a_task_killed_while_one_checkpoint_commits_and_the_next_buffers
@pytest.mark.slow
def test_a_pipelined_checkpoint_that_loses_a_conflict_is_replayed_before_the_one_behind(
    ray_session, tmp_path
):
    """OCC: checkpoint n is sent off (``wait=False``) after a backfill committed to its file
    group; n+1's input is written behind it. n's commit loses the conflict (rolled back), is
    replayed into a new instant, and n+1 then commits after it: every row once, in order."""
    path, opts, model = _seeded(
        tmp_path, {"hoodie.write.num.retries.on.conflict.failures": "1"}, version="8"
    )
    stream_rows = [row("a1", "a", 5, 10), row("a9", "a", 5, 11)]
    backfill = [row("a1", "a", 3, 20), row("a0", "a", 3, 21)]
    behind = [row("a0", "a", 6, 30), row("b2", "b", 6, 31)]
    with hr.HoodieStreamWriter(path, opts) as w:
        w.write(to_arrow(stream_rows, True))
        first = w._instant
        other = HoodieWriteClient(path, opts).write(to_arrow(backfill, True)).instant
        handle = w.checkpoint(wait=False)
        w.write(to_arrow(behind, True))  # settles n first: its conflict, replay and commit
        replayed = handle.result()
        last = w.checkpoint()
    assert replayed is not None and replayed != first and replayed < last
    model.upsert(backfill)
    model.upsert(stream_rows)
    model.upsert(behind)
    model.assert_hudi_rs_reads(path, "replayed, then the checkpoint behind it")
    completed = {i.timestamp for i in _instants(path) if i.is_completed}
    assert {other, replayed, last} <= completed and first not in completed
    _no_pending(path)
