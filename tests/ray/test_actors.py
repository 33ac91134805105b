"""The write topology's actors (hoodie_ray/ray/actors.py): chained assigner + writer tasks."""

from __future__ import annotations

from typing import Any

import pytest

import hoodie_ray as hr
from tests.write.model import OPTIONS, SMALL_FILES, TableModel, Workload, to_arrow

pytestmark = pytest.mark.ray


def _one_task_table(tmp_path: Any, seed: int) -> tuple[TableModel, Workload, Any, dict[str, str]]:
    """A table of 60 keys written by one local task (the home writer of a file group is its
    file id's, whoever wrote it, so a wider topology's tasks tag most found keys for another
    task's writer): the model, the workload, the path and the one-task options."""
    model, wl = TableModel(), Workload(seed=seed)
    first = wl.rows_for(wl.keys[:60])
    path = tmp_path / "t"
    one = {**OPTIONS, **SMALL_FILES, "write.tasks": "1"}
    hr.write(to_arrow(first, True), str(path), one, engine="local")
    model.upsert(first)
    return model, wl, path, one


def _upsert_sync_then_pipelined(w: Any, model: TableModel, wl: Workload, path: Any) -> None:
    """Two checkpoints of 40 upserts, synchronous then pipelined (``wait=False``); hudi-rs reads
    the model after each."""
    for i in range(2):
        rows = wl.upserts(40)
        w.write(to_arrow(rows, True))
        if i % 2:
            assert w.checkpoint(wait=False).result() is not None
        else:
            assert w.checkpoint() is not None
        model.upsert(rows)
        model.assert_hudi_rs_reads(path, f"checkpoint {i}")


def test_chained_tasks_send_other_tasks_rows_to_their_peers(ray_session, tmp_path, monkeypatch):
    """A table one writer wrote, upserted by three chained tasks: most found keys sit in file
    groups whose home writer is another task's, so each task holds those rows until the
    checkpoint's barrier hands them to the driver (one object a task), which gives every
    task the others' objects with its flush; one checkpoint synchronous, one pipelined
    (``wait=False``). hudi-rs reads the model after each checkpoint. (The
    unchained topology of as
    many assigners as writers runs where a test sets ``pipeline.operator-chaining=false``;
    fewer assigners than writers never chain.)"""
    from hoodie_ray.ray.stream import HoodieStreamWriter

    crossed: list[int] = []  # rows held for a peer at each checkpoint that took the barrier
    barrier_and_finish = HoodieStreamWriter._barrier_and_finish

    def spy(self: HoodieStreamWriter) -> Any:
        crossed.append(self._peer_rows)
        return barrier_and_finish(self)

    monkeypatch.setattr(HoodieStreamWriter, "_barrier_and_finish", spy)
    model, wl, path, one = _one_task_table(tmp_path, 23)
    with hr.HoodieStreamWriter(str(path), {**one, "write.tasks": "3"}) as w:
        w.start()
        pids = w.actor_pids()
        assert set(pids) == {"coordinator", *(f"assign-write-{i}" for i in range(3))}
        assert w.actors["assigner-2"] == w.actors["writer-2"]
        if ray_session.cluster_resources().get("CPU", 0) == 2:
            # more tasks than CPUs: tasks 0 and 2 share a process (task slots), and rows
            # still cross between the hosts' tasks through the barrier
            assert pids["assign-write-0"] == pids["assign-write-2"] != pids["assign-write-1"]
        _upsert_sync_then_pipelined(w, model, wl, path)
        assert crossed and max(crossed) > 0, "no row crossed tasks"
        # a chained task's CPU, told apart by operator (what its process's CPU cannot say)
        cpu = w.operator_cpu()
        assert set(cpu) == {"route", "assign", "write"}
        assert cpu["assign"] > 0 and cpu["write"] > 0 and cpu["route"] > 0


def test_co_hosted_tasks_hand_each_other_rows_without_a_barrier(ray_session, tmp_path, monkeypatch):
    """The table of the test above, upserted by three chained tasks in one process
    (``taskmanager.numberOfTaskSlots=3``): rows tagged for another task's writer go to it by
    a plain call as they are tagged: no row is held for a peer, so the synchronous checkpoint
    takes no barrier, the pipelined one's hands nothing over; hudi-rs reads the model after
    each checkpoint."""
    import ray

    from hoodie_ray.ray.stream import HoodieStreamWriter

    held: list[int] = []  # rows held for a peer at each barrier (only pipelined ones take it)
    barrier_and_finish = HoodieStreamWriter._barrier_and_finish

    def spy(self: HoodieStreamWriter) -> Any:
        barriers, stats = barrier_and_finish(self)
        held.append(sum(ray.get([count for count, _ in barriers])))
        return barriers, stats

    monkeypatch.setattr(HoodieStreamWriter, "_barrier_and_finish", spy)
    model, wl, path, one = _one_task_table(tmp_path, 23)
    options = {**one, "write.tasks": "3", "taskmanager.numberOfTaskSlots": "3"}
    with hr.HoodieStreamWriter(str(path), options) as w:
        w.start()
        assert len(set(w.actor_pids().values())) == 2  # the coordinator, one task host
        _upsert_sync_then_pipelined(w, model, wl, path)
    assert held == [0]


@pytest.mark.slow  # suite time: the fault tests kill chained tasks (writer-0, assigner-1) in CI
def test_a_chained_task_lost_after_handing_over_its_writes(ray_session, tmp_path, monkeypatch):
    """A chained task dies after the checkpoint barrier handed the driver the rows it held
    for its peers: the topology restarts, the open instant is rolled back and the
    checkpoint's input replayed; nothing lost, nothing twice."""
    import ray

    from hoodie_ray.ray.stream import HoodieStreamWriter

    barrier_and_finish = HoodieStreamWriter._barrier_and_finish
    killed: list[int] = []

    def kill_a_sender(self):
        barriers, finish = barrier_and_finish(self)
        counts = ray.get([count for count, _ in barriers])
        if not killed and any(counts):
            killed.append(next(i for i, n in enumerate(counts) if n))
            ray.kill(self.actors[f"assigner-{killed[0]}"], no_restart=True)  # hosted: its host
        return barriers, finish

    monkeypatch.setattr(HoodieStreamWriter, "_barrier_and_finish", kill_a_sender)
    model, wl, path, one = _one_task_table(tmp_path, 29)
    with hr.HoodieStreamWriter(str(path), {**one, "write.tasks": "3"}) as w:
        for _ in range(2):
            rows = wl.upserts(40)
            w.write(to_arrow(rows, True))
            assert w.checkpoint() is not None
            model.upsert(rows)
    assert killed, "no task held rows for a peer"
    model.assert_hudi_rs_reads(path)


def test_operator_cpu_counts_a_nested_section_in_its_own_operator_only() -> None:
    import time

    from hoodie_ray.ray.actors import OperatorCpu

    def spin(s: float) -> None:
        t0 = time.process_time()
        while time.process_time() - t0 < s:
            pass

    cpu = OperatorCpu()
    with cpu.section("assign"):
        spin(0.02)
        with cpu.section("write"):
            spin(0.03)
    assert 0.02 <= cpu.seconds["assign"] < 0.03 + 0.01
    assert 0.03 <= cpu.seconds["write"] < 0.04
    assert cpu.seconds["route"] == 0.0


def test_routed_parts_give_each_task_its_part_through_a_pickle() -> None:
    """A route call's parts in one buffer (:class:`RoutedParts`): each task reads back its
    part exactly (an empty one keeps its schema; dictionary columns and schema metadata
    survive), after the pickling Ray does, with no copy of the buffer's bytes."""
    import pickle

    import pyarrow as pa

    from hoodie_ray.ray.actors import RoutedParts

    schema = pa.schema(
        [("key", pa.string()), ("p", pa.dictionary(pa.int32(), pa.string())), ("v", pa.float64())],
        metadata={b"m": b"1"},
    )
    full = pa.table(
        {
            "key": [f"k{i}" for i in range(10)],
            "p": pa.array(["a", "b"] * 5).dictionary_encode(),
            "v": [float(i) for i in range(10)],
        },
        schema=schema,
    )
    parts = [full.slice(0, 4), full.slice(4, 0), full.slice(4, 6)]
    packed = RoutedParts.of(parts)
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(packed, protocol=5, buffer_callback=buffers.append)
    back = pickle.loads(data, buffers=buffers)
    assert buffers and len(data) < 1000  # the bytes travel out of band
    for i, part in enumerate(parts):
        got = back.part(i)
        assert got.schema == schema and got.schema.metadata == schema.metadata
        assert got.equals(part)


def test_routed_parts_of_tasks_in_the_routing_process_stay_there() -> None:
    """The parts of the tasks living in the process that routed them never enter the object
    (``local``): those tasks take them from the process, once each, and the others read
    theirs from the buffer. A kept part asked for in another process, or again, is a
    RoutedPartLost, which the driver takes for an actor loss (restart and replay); a
    checkpoint's barrier drops what a failed attempt left."""
    import dataclasses
    import pickle

    import pyarrow as pa

    from hoodie_ray.ray import actors
    from hoodie_ray.ray.actors import RoutedParts
    from hoodie_ray.ray.calls import RoutedPartLost, is_actor_loss

    full = pa.table({"key": [f"k{i}" for i in range(9)], "v": [float(i) for i in range(9)]})
    parts = [full.slice(0, 3), full.slice(3, 4), full.slice(7, 2)]
    packed = RoutedParts.of(parts, local={0, 2, 5})
    assert packed.kept == (0, 2)
    assert [t for t, _, _ in packed.streams] == [1]  # only task 1's part is in the buffer
    buffers: list[pickle.PickleBuffer] = []
    back = pickle.loads(
        pickle.dumps(packed, protocol=5, buffer_callback=buffers.append), buffers=buffers
    )
    assert [back.part(i).equals(parts[i]) for i in (2, 1, 0)] == [True] * 3
    assert packed.token not in actors._KEPT  # every kept part taken: nothing left behind
    with pytest.raises(RoutedPartLost) as lost:
        back.part(0)
    assert is_actor_loss(lost.value)
    elsewhere = RoutedParts.of(parts, local={1})
    with pytest.raises(RoutedPartLost, match="stayed in process"):
        dataclasses.replace(elsewhere, pid=elsewhere.pid + 1).part(1)
    actors.drop_kept_parts()
    assert actors._KEPT == {}


def test_held_parts_give_each_peer_its_tables_through_a_pickle() -> None:
    """The rows a chained task held for its peers in one buffer (:meth:`RoutedParts.of_held`): each
    peer reads back its tables in order, several per peer and of two schemas (a schema that
    evolved mid-checkpoint), none for a peer it held nothing for; the bytes travel out of band."""
    import pickle

    import pyarrow as pa

    from hoodie_ray.ray.actors import RoutedParts

    a = pa.table({"key": ["k1", "k2"], "v": [1.0, 2.0]})
    b = pa.table({"key": ["k3"], "v": [3.0], "w": ["new"]})
    c = pa.table({"key": ["k4", "k5", "k6"], "v": [4.0, 5.0, 6.0]})
    packed = RoutedParts.of_held({2: [a, b], 0: [c]})
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(packed, protocol=5, buffer_callback=buffers.append)
    back = pickle.loads(data, buffers=buffers)
    assert buffers and len(data) < 1000
    got = back.tables(2)
    assert len(got) == 2 and got[0].equals(a) and got[1].equals(b)
    assert [t.equals(c) for t in back.tables(0)] == [True]
    assert back.tables(1) == []


def test_fan_arguments_give_each_slot_the_shared_ones_then_its_own() -> None:
    """One :meth:`TaskHostActor.fan` call runs a method of several slots: each gets every
    argument, or (``own``) the shared ones then its own one of the last ``slots``."""
    from hoodie_ray.ray.actors import fan_arguments

    assert fan_arguments(("a", "b"), 3, own=False) == [("a", "b")] * 3
    assert fan_arguments(("c", "p", "s0", "s1"), 2, own=True) == [
        ("c", "p", "s0"),
        ("c", "p", "s1"),
    ]
    assert fan_arguments(("s0",), 1, own=True) == [("s0",)]
    assert fan_arguments((), 2, own=False) == [(), ()]


def test_a_chained_task_counts_its_index_at_the_barrier(tmp_path, monkeypatch):
    """The index-size gauge after a checkpoint is the index's key count, though the count
    after a batch comes at most once a second (an idle writer showed the count before its
    last batches, for good). In one process, no Ray: the task's calls as the driver makes
    them."""
    from hoodie_ray.config.options import resolve_options
    from hoodie_ray.job import client
    from hoodie_ray.job.coordinator import Coordinator
    from hoodie_ray.ray import actors, metrics

    gauged: list[int] = []
    monkeypatch.setattr(metrics, "gauge_index_size", lambda table, task, n: gauged.append(n))
    wl = Workload(seed=41)
    rows = to_arrow(wl.rows_for(wl.keys[:50]), True)
    coord = Coordinator(str(tmp_path / "t"), resolve_options(OPTIONS), None, lock_owner="x")
    setup = coord.open(rows.schema)
    try:
        slices = coord.latest_slices()
        profile = coord.profile(slices)
        task = actors.AssignWriteTask(setup, coord.assigner_config(0, 1), profile, [], 1, 0)
        instant = coord.start_instant()
        task.begin(False, profile, instant, coord.frozen_logs(), [])
        for part in (rows.slice(0, 20), rows.slice(20)):  # within a second: one count at most
            task.assign(*client.route_pieces(setup, [(part, None)], 1))
        coord.commit(instant, task.finish())
    finally:
        coord.close()
    assert gauged[-1] == 50, gauged
