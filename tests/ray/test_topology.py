"""A writer's actors (``hoodie_ray.ray.topology``): their names, and tasks lost at start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hoodie_ray.config.options import resolve_options
from hoodie_ray.ray.topology import actor_name, assigner_role

BASE = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "k"}
OCC = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.cleaner.policy.failed.writes": "LAZY",
}


def test_roles_name_chained_and_apart_tasks() -> None:
    chained = resolve_options({**BASE, "write.tasks": "2"})
    apart = resolve_options({**BASE, "write.tasks": "2", "pipeline.operator-chaining": "false"})
    assert [assigner_role(chained, i) for i in range(2)] == ["assign-write-0", "assign-write-1"]
    assert [assigner_role(apart, i) for i in range(2)] == ["assigner-0", "assigner-1"]


def test_several_writers_of_one_table_name_their_actors_apart() -> None:
    """One writer: ``<table>/<role>``; under OCC each job's topology has its own names."""
    single = resolve_options(BASE)
    occ = resolve_options({**BASE, **OCC})
    assert actor_name(single, "host:1234:job-a", "t", "coordinator") == "t/coordinator"
    a = actor_name(occ, "host:1234:job-a", "t", "coordinator")
    b = actor_name(occ, "host:1234:job-b", "t", "coordinator")
    assert a == "t/job-a/coordinator" and b == "t/job-b/coordinator"


@pytest.mark.ray
def test_a_task_lost_while_it_starts_is_started_again_by_the_first_checkpoint(
    ray_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task actors boot while the coordinator opens the table, then get their state: one
    killed before its start is replaced by the first checkpoint (as a lost actor is), and the
    table is the model."""
    import hoodie_ray as hr
    from hoodie_ray.ray.topology import WriteTopology
    from tests.write.model import OPTIONS, TableModel, Workload, to_arrow

    start_workers = WriteTopology.start_workers
    killed: list[Any] = []

    def kill_first(self: WriteTopology, setup: Any) -> Any:
        if not killed:
            killed.append(self.worker_actors()[0])
            ray_session.kill(killed[0], no_restart=True)
        return start_workers(self, setup)

    monkeypatch.setattr(WriteTopology, "start_workers", kill_first)
    model, wl = TableModel(), Workload(seed=31)
    path = tmp_path / "t"
    with hr.HoodieStreamWriter(str(path), {**OPTIONS, "write.tasks": "1"}) as w:
        rows = wl.rows_for(wl.keys[:20])
        w.write(to_arrow(rows, True))
        assert w.checkpoint() is not None
        model.upsert(rows)
        assert killed and w.actors["assigner-0"] != killed[0]
    model.assert_hudi_rs_reads(path)


@pytest.mark.ray
@pytest.mark.slow  # suite time: hosted tasks run in CI in tests/ray/test_actors.py (3 on 2 CPUs)
def test_tasks_share_processes_by_task_slots_and_a_lost_host_loses_nothing(
    ray_session: Any, tmp_path: Path
) -> None:
    """``taskmanager.numberOfTaskSlots``: 4 chained tasks in 2 processes, each task its own
    (its keys, its file groups); a host killed during a checkpoint takes its two tasks with it,
    the topology is rebuilt and the commit replayed: hudi-rs reads the model."""
    import random

    import hoodie_ray as hr
    from tests.fixtures_ray import checkpoint_with_kill
    from tests.write.model import OPTIONS, TableModel, Workload, to_arrow

    model, wl = TableModel(), Workload(seed=37)
    path = tmp_path / "t"
    opts = {**OPTIONS, "write.tasks": "4", "taskmanager.numberOfTaskSlots": "2"}
    rng = random.Random(5)
    with hr.HoodieStreamWriter(str(path), opts) as w:
        for i in range(3):
            rows = wl.rows_for(wl.keys[:40]) if i == 0 else wl.upserts(30)
            w.write(to_arrow(rows, True))
            model.upsert(rows)
            if i == 0:
                pids = w.actor_pids()
                tasks = {pids[f"assign-write-{t}"] for t in range(4)}
                assert len(tasks) == 2 and pids["coordinator"] not in tasks
                assert w.actors["assigner-0"] == w.actors["assigner-2"]  # slots 0 and 2: host 0
                assert w.checkpoint() is not None
            else:
                checkpoint_with_kill(w, w.actors[f"assigner-{i}"], "during", rng)
            model.assert_hudi_rs_reads(path, f"commit {i}")


@pytest.mark.parametrize(
    ("tasks", "cpus", "slots", "hosts"),
    [
        (8, 2, "0", 2),  # auto: a process a CPU
        (9, 8, "0", 8),  # one over: 8 processes, one of them with two tasks
        (2, 2, "0", 2),  # a CPU a task: an actor a task
        (4, 0, "0", 4),  # no CPUs known: an actor a task
        (5, 16, "4", 2),  # set: 4 tasks a process at most
        (1, 1, "3", 1),
    ],
)
def test_task_hosts_follow_the_clusters_cpus_or_the_slots_set(
    monkeypatch: pytest.MonkeyPatch, tasks: int, cpus: int, slots: str, hosts: int
) -> None:
    import ray

    from hoodie_ray.ray.topology import WriteTopology

    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": float(cpus)})
    opts = {**BASE, "write.tasks": str(tasks), "taskmanager.numberOfTaskSlots": slots}
    topo = WriteTopology("/t", opts, None, resolve_options(opts), "o", None)  # type: ignore[arg-type]
    assert topo.task_hosts() == hosts


def test_a_datasink_runs_a_task_an_actor() -> None:
    """Its write tasks find each task's actor by name (they get the sink before it starts)."""
    from hoodie_ray.ray.datasink import HoodieDatasink

    sink = HoodieDatasink("/t", {**BASE, "taskmanager.numberOfTaskSlots": "4"})
    assert resolve_options(sink.options).task_slots == 1


@pytest.mark.ray
def test_a_coordinator_whose_close_fails_is_gone_and_its_lock_released(
    ray_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A close that fails or outlasts its budget (a merge beside the writes still running):
    the stop waits until Ray confirms the coordinator dead, then deletes the lock it owned
    (the next writer rolls back what it left pending) rather than leave the table refused
    until the heartbeat expires. A close that succeeds leaves the lock to the coordinator,
    and so does a death Ray does not confirm."""
    from hoodie_ray.ray.topology import WriteTopology

    @ray_session.remote(num_cpus=0)
    class Coordinator:  # the fault: a coordinator whose close raises (or not)
        def __init__(self, fails: bool) -> None:
            self.fails = fails

        def finish_compaction(self) -> None:
            return None

        def close(self, discard_unborn: bool) -> None:
            if self.fails:
                raise OSError("close failed")

        def pid(self) -> int:
            import os

            return os.getpid()

    from hoodie_ray.ray import topology

    released: list[bool] = []
    monkeypatch.setattr(WriteTopology, "release_lock", lambda self: released.append(True))
    kill_and_wait = topology._kill_and_wait
    # (fails, whether Ray confirms its death): one only unreachable may still commit
    for fails, confirmed in ((False, True), (True, True), (True, False)):
        released.clear()
        monkeypatch.setattr(
            topology,
            "_kill_and_wait",
            lambda actors, timeout, c=confirmed: kill_and_wait(actors, timeout) and c,
        )
        wc = resolve_options(BASE)
        topo = WriteTopology("/nonexistent/t", dict(BASE), None, wc, "owner", None)  # type: ignore[arg-type]
        coord = Coordinator.remote(fails)
        topo.coord = coord
        topo.stop(discard_unborn=False)
        assert released == ([True] if fails and confirmed else []), (fails, confirmed)
        assert kill_and_wait([coord], 30.0)  # gone (a kill is asynchronous: waited for)
