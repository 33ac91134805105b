"""Pipelined checkpoints (``checkpoint(wait=False)``): the next instant's input is routed and
buffered while a checkpoint flushes and commits; exactly-once as for synchronous ones. (Rows
crossing tasks at a pipelined barrier: tests/ray/test_actors.py; under OCC:
tests/ray/test_occ_stream.py; on two nodes: tests/ray/test_multinode.py.)"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

import hoodie_ray as hr
from tests.write.model import (
    OPTIONS,
    TableModel,
    hudi_rs_snapshot,
    to_arrow,
    upsert_commits,
)

pytestmark = pytest.mark.ray

TOPOLOGY = {"write.tasks": "2", "write.bucket_assign.tasks": "2"}


# suite time: pipelined checkpoints commit in order and read as the model in CI in
# test_a_task_killed_while_one_checkpoint_commits_and_the_next_buffers
@pytest.mark.slow
def test_pipelined_checkpoints_write_what_synchronous_ones_write(ray_session, tmp_path):
    """The commits of ``test_stream_writer_model_many_checkpoints`` (tests/ray/
    test_stream_writer.py: the same seed, written there with synchronous checkpoints and read
    back as this model), each checkpoint pipelined behind the next one's input: hudi-rs reads
    the model, one instant per checkpoint, in order."""
    commits = upsert_commits(5, 3)
    model = TableModel()
    for rows in commits:
        model.upsert(rows)
    handles = []
    with hr.HoodieStreamWriter(str(tmp_path / "piped"), {**OPTIONS, **TOPOLOGY}) as w:
        for rows in commits:
            w.write(to_arrow(rows[: len(rows) // 2], True))
            w.write(to_arrow(rows[len(rows) // 2 :], True))
            handles.append(w.checkpoint(wait=False))
        instants = [h.result() for h in handles]
        assert w.checkpoint(wait=False).result() is None  # nothing written since
    assert len(set(instants)) == len(commits) and instants == sorted(instants)
    assert all(h.done() for h in handles)
    model.assert_hudi_rs_reads(tmp_path / "piped", "pipelined")


def test_a_task_killed_while_one_checkpoint_commits_and_the_next_buffers(
    ray_session, tmp_path, caplog
):
    """Kill a task after checkpoint n was sent off and n+1's input written: n is replayed and
    committed (or found committed), then n+1's input is replayed into a new instant; every
    row once."""
    import ray

    path = tmp_path / "t"
    first, n, n1 = upsert_commits(9, 3)
    model = TableModel()
    with hr.HoodieStreamWriter(str(path), {**OPTIONS, **TOPOLOGY}) as w:
        w.write(to_arrow(first, True))
        assert w.checkpoint() is not None
        model.upsert(first)
        w.write(to_arrow(n, True))
        victim = w.actors["writer-1"]
        # held busy (not waited for) so that n's flush on it cannot be done when it dies
        victim.__ray_call__.remote(lambda _: time.sleep(2))
        handle = w.checkpoint(wait=False)
        w.write(to_arrow(n1, True))
        ray.kill(victim, no_restart=True)
        assert handle.result() is not None
        model.upsert(n)
        model.assert_hudi_rs_reads(path, "checkpoint n after the kill")
        assert w.checkpoint() is not None
        model.upsert(n1)
        model.assert_hudi_rs_reads(path, "and n+1")
    table = hr.HoodieTable.load(str(path))
    assert not [i for i in table.active_timeline.reload().instants if not i.is_completed]
    # the kill met the checkpoint in flight (its flush had not run), not a later one
    assert "pipelined checkpoint lost an actor" in caplog.text


def test_an_interrupted_replay_of_a_lost_checkpoint_keeps_the_input_behind_it(
    ray_session, tmp_path, monkeypatch
):
    """Ctrl-C while a pipelined checkpoint that lost an actor is replayed: the input written
    behind it (kept aside until sent again) is recovered with it by the next call; it was
    dropped, though write() had accepted it."""
    import ray

    from hoodie_ray.ray import stream

    path = tmp_path / "t"
    first, n, n1, n2 = upsert_commits(10, 4)
    model = TableModel()
    real = stream.HoodieStreamWriter._checkpoint_once
    armed: list[bool] = []

    def interrupted_once(self):
        if armed:
            armed.clear()
            raise KeyboardInterrupt  # as the failed checkpoint's replay begins
        return real(self)

    monkeypatch.setattr(stream.HoodieStreamWriter, "_checkpoint_once", interrupted_once)
    with hr.HoodieStreamWriter(str(path), {**OPTIONS, **TOPOLOGY}) as w:
        w.write(to_arrow(first, True))
        assert w.checkpoint() is not None
        w.write(to_arrow(n, True))
        victim = w.actors["writer-0"]
        # held busy (not waited for) so that the checkpoint cannot be done when it dies
        victim.__ray_call__.remote(lambda _: time.sleep(2))
        w.checkpoint(wait=False)
        w.write(to_arrow(n1, True))  # accepted, behind the checkpoint in flight
        ray.kill(victim, no_restart=True)
        armed.append(True)
        with pytest.raises(KeyboardInterrupt):
            w.checkpoint()
        assert not armed
        w.write(to_arrow(n2, True))
    for rows in (first, n, n1, n2):
        model.upsert(rows)
    model.assert_hudi_rs_reads(path, "after the interrupted replay")


def test_a_coordinator_lost_before_it_began_the_instant_behind_a_checkpoint(ray_session, tmp_path):
    """The input written behind a pipelined checkpoint goes into an instant begun by
    reference; the coordinator dies before it ran that start. Recovery takes the reference
    as no instant (it asked the new coordinator about the dead one's reference, failed four
    times and dropped the input), and the input commits once."""
    import ray

    path = tmp_path / "t"
    first, n, n1 = upsert_commits(13, 3)
    model = TableModel()
    with hr.HoodieStreamWriter(str(path), {**OPTIONS, **TOPOLOGY}) as w:
        w.write(to_arrow(first, True))
        assert w.checkpoint() is not None
        model.upsert(first)
        w.write(to_arrow(n, True))
        handle = w.checkpoint(wait=False)  # n's commit is queued on the coordinator
        coordinator = w.actors["coordinator"]
        coordinator.__ray_call__.remote(lambda _: time.sleep(3))  # then this, then n+1's start
        w.write(to_arrow(n1, True))  # n+1 begun by reference, behind the sleep
        assert handle.result() is not None
        model.upsert(n)
        ray.kill(coordinator, no_restart=True)
        assert w.checkpoint() is not None
        model.upsert(n1)
    model.assert_hudi_rs_reads(path, "after the coordinator was lost")
    table = hr.HoodieTable.load(str(path))
    assert not [i for i in table.active_timeline.reload().instants if not i.is_completed]


# suite time: a refused row fails its checkpoint and leaves nothing in CI in
# tests/ray/test_dataset_stream.py::test_a_refused_row_fails_its_checkpoint_and_the_stream_goes_on;
# a pipelined checkpoint's failure with the one behind it: the kill test above
@pytest.mark.slow
def test_a_refused_row_fails_the_pipelined_checkpoint_and_the_one_behind_it(ray_session, tmp_path):
    """A null key in checkpoint n: its commit never runs, the instant begun behind it is
    rolled back too, and the error is raised as itself; the table is as before."""
    path = tmp_path / "t"
    commits = upsert_commits(11, 2)
    model = TableModel()
    with hr.HoodieStreamWriter(str(path), {**OPTIONS, **TOPOLOGY}) as w:
        w.write(to_arrow(commits[0], True))
        assert w.checkpoint() is not None
        model.upsert(commits[0])
        bad = to_arrow(commits[1], True)
        bad = bad.set_column(0, "key", pa.array([None, *bad.column("key").to_pylist()[1:]]))
        w.write(bad)
        handle = w.checkpoint(wait=False)
        w.write(to_arrow(commits[1], True))
        with pytest.raises(hr.HoodieInputError, match="null or empty"):
            handle.result()
        assert w.checkpoint() is None  # the input behind it went with it
    model.assert_hudi_rs_reads(path, "refused")
    assert hudi_rs_snapshot(path).num_rows == len(model.rows)
    table = hr.HoodieTable.load(str(path))
    assert not [i for i in table.active_timeline.reload().instants if not i.is_completed]
