"""The actors of one stream writer: :class:`WriteTopology`.

A topology is a coordinator actor and the write tasks: one ``AssignWriteActor`` per task
where assigners and writers are chained (``pipeline.operator-chaining``, the default with as
many assigners as writers), else assigner actors and writer actors. This module names them,
starts them from the table's state, replaces them and stops them; what they are asked to do,
and when, is the checkpoint protocol's (:mod:`hoodie_ray.ray.stream`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

import ray
from ray.exceptions import ActorDiedError, GetTimeoutError, RayActorError, RayTaskError

from hoodie_ray.config.options import WriteConfig
from hoodie_ray.exceptions import HoodieCommitConflictError, HoodieError
from hoodie_ray.job.setup import TableSetup
from hoodie_ray.ray.actors import (
    AssignerActor,
    AssignWriteActor,
    CoordinatorActor,
    SlotHandle,
    TaskHostActor,
    WriterActor,
)
from hoodie_ray.ray.calls import TopologyLost, unwrap
from hoodie_ray.ray.metrics import CHAINED_ACTOR
from hoodie_ray.ray.runtime import NAMESPACE, actor_resources, job_table
from hoodie_ray.storage import open_storage
from hoodie_ray.table import HoodieTable
from hoodie_ray.write.lock import ProcessId
from hoodie_ray.write.lock_providers import open_lock

log = logging.getLogger("hoodie_ray")


def assigner_role(wc: WriteConfig, task_id: int) -> str:
    """The role part of assigner task ``task_id``'s actor name: ``assign-write-<i>`` when it
    is chained with writer task i (:attr:`WriteConfig.chained_tasks`), else ``assigner-<i>``."""
    return f"{CHAINED_ACTOR}-{task_id}" if wc.chained_tasks else f"assigner-{task_id}"


def actor_name(wc: WriteConfig, owner: str, table: str, role: str) -> str:
    """A write job's actor: ``<table>/<role>``; with several writers (OCC, NBCC)
    ``<table>/<job>/<role>``, so their topologies on one table sit side by side in one cluster,
    each with its own names. ``table``: :func:`~hoodie_ray.ray.runtime.job_table`'s."""
    if wc.occ:
        return f"{table}/{owner.rsplit(':', 1)[-1]}/{role}"
    return f"{table}/{role}"


class WriteTopology:
    """The coordinator and write-task actors of one writer of ``path``.

    ``coord`` is the coordinator's handle (None until :meth:`new_coordinator`);
    ``assigners`` and ``writers`` the tasks' (chained, the same actors in both lists);
    ``attempt`` counts the starts of the tasks (a writer's write token carries it)."""

    def __init__(
        self,
        path: str,
        options: dict[str, Any],
        storage_options: dict[str, Any] | None,
        wc: WriteConfig,
        owner: str,
        job: ProcessId,
    ) -> None:
        self.path = path
        self.options = options
        self.storage_options = storage_options
        self.wc = wc
        self.owner = owner
        self.job = job
        self.chained = wc.chained_tasks
        self.num_writers = wc.write_tasks
        self.num_assigners = wc.assign_tasks
        self.coord: Any = None
        self.assigners: list[Any] = []
        self.writers: list[Any] = []
        self.hosts: list[Any] = []  # task-host actors (taskmanager.numberOfTaskSlots > 1)
        self.attempt = 0
        self._owned_names: set[str] = set()
        self._spawned = False  # task actors created empty, not started yet
        self._name: str | None = None

    # -- names ---------------------------------------------------------------------------------
    def _table_name(self) -> str:
        """The table part of the actors' names (:func:`job_table`), read once (the
        coordinator's and every task's start name it)."""
        if self._name is None:
            try:
                name = HoodieTable.load(self.path, self.storage_options).name
            except HoodieError:
                name = self.wc.table_name or "table"
            self._name = job_table(name, self.path)
        return self._name

    def _unique(self, table: str, role: str) -> str:
        """Actor name ``<table>@<path tag>/<role>``.

        Our actors are owned by this driver (not detached), so a live actor of that name that
        this writer did not create belongs to another live write job on the same table: that is
        a conflict, never something to kill. Our own (being replaced in a recovery) is replaced.
        """
        name = actor_name(self.wc, self.owner, table, role)
        try:
            old = ray.get_actor(name, namespace=NAMESPACE)
            if name not in self._owned_names:
                raise HoodieCommitConflictError(
                    f"table {self.path} is being written by another job in this Ray cluster "
                    f"(actor {name} is alive); one writer per table. It may be a stream "
                    "writer, or the topology hr.write keeps warm after it returns "
                    "(write.warm_idle_s): hoodie_ray.ray.stream.release_warm_writers() in "
                    "that process stops it"
                )
            ray.kill(old, no_restart=True)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    ray.get_actor(name, namespace=NAMESPACE)
                    time.sleep(0.05)
                except ValueError:
                    break
        except ValueError:
            pass
        self._owned_names.add(name)
        return name

    def release_names(self, timeout: float = 30.0) -> None:
        """Wait until our actors' names are free (ray.kill is asynchronous), so the next writer
        of this table does not mistake them for a live job."""
        deadline = time.monotonic() + timeout
        for name in sorted(self._owned_names):
            while time.monotonic() < deadline:
                try:
                    handle = ray.get_actor(name, namespace=NAMESPACE)
                except ValueError:
                    break
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)
                time.sleep(0.02)
        self._owned_names.clear()

    # -- the coordinator -----------------------------------------------------------------------
    def new_coordinator(self) -> Any:
        """A new coordinator actor (the old one, if any, is the caller's to kill)."""
        self.coord = CoordinatorActor.options(  # type: ignore[attr-defined]
            name=self._unique(self._table_name(), "coordinator"),
            namespace=NAMESPACE,
            **actor_resources("coordinator", self.wc),
        ).remote(self.path, self.options, self.storage_options, self.owner, self.job)
        return self.coord

    # -- the write tasks -----------------------------------------------------------------------
    def worker_actors(self) -> list[Any]:
        """The assigner and writer actors, each once (chained, a task is both; hosted, the
        processes that host the tasks)."""
        if self.hosts:
            return list(self.hosts)
        return list(self.assigners) if self.chained else self.assigners + self.writers

    def task_hosts(self) -> int:
        """Processes that host the chained tasks (``taskmanager.numberOfTaskSlots`` tasks
        each; 0: one task a process while the cluster has a CPU for each, else one process a
        CPU: processes in turn on a core cost each other's caches, and Ray's calls, more CPU a
        row than tasks sharing a process). As many as tasks: no hosts, an actor a task."""
        n = self.num_writers
        if not self.chained or n <= 1:
            return n
        if self.wc.task_slots:
            return -(-n // self.wc.task_slots)
        cpus = int(ray.cluster_resources().get("CPU", 0))
        return n if cpus <= 0 else min(n, cpus)

    def stop_workers(self, timeout: float = 60.0) -> None:
        """Kill the assigners and writers and wait until each is dead (not just told to die)."""
        old = self.worker_actors()
        self.assigners, self.writers, self.hosts = [], [], []
        self._spawned = False
        _kill_and_wait(old, timeout)

    def spawn_workers(self) -> None:
        """Create the task actors empty (the old ones, if any, killed), so that Ray starts their
        processes while the coordinator opens the table: each imports hoodie_ray and loads the
        compiled kernels (~2.5 s of CPU here) at the same time as the coordinator does.
        :meth:`start_workers` gives them their state."""
        for a in self.worker_actors():
            ray.kill(a, no_restart=True)
        self.assigners, self.writers, self.hosts = [], [], []
        self.attempt += 1
        table = self._table_name()
        # SPREAD: a multi-node cluster gets assigners and writers on every node.
        a_opts = {**actor_resources("assigner", self.wc), "scheduling_strategy": "SPREAD"}
        w_opts = {**actor_resources("writer", self.wc), "scheduling_strategy": "SPREAD"}
        # appended one by one: a name refused part-way leaves the ones made so far to stop
        if self.chained:
            # one actor per task, sized as its assigner and writer together
            opts = dict(a_opts)
            for k in ("num_cpus", "memory"):
                if k in a_opts or k in w_opts:
                    opts[k] = a_opts.get(k, 0) + w_opts.get(k, 0)
            n_hosts = self.task_hosts()
            if n_hosts < self.num_writers:
                # task i in host i % hosts, each host sized as the tasks it holds together
                for h in range(n_hosts):
                    held = len(range(h, self.num_writers, n_hosts))
                    sized = {r: v * held for r, v in opts.items() if r in ("num_cpus", "memory")}
                    self.hosts.append(
                        TaskHostActor.options(  # type: ignore[attr-defined]
                            name=self._unique(table, f"task-host-{h}"),
                            namespace=NAMESPACE,
                            **{**opts, **sized},
                        ).remote()
                    )
            for i in range(self.num_writers):
                task = (
                    SlotHandle(self.hosts[i % n_hosts], i)
                    if self.hosts
                    else AssignWriteActor.options(  # type: ignore[attr-defined]
                        name=self._unique(table, assigner_role(self.wc, i)),
                        namespace=NAMESPACE,
                        **opts,
                    ).remote()
                )
                self.assigners.append(task)
                self.writers.append(task)
        else:
            for i in range(self.num_writers):
                self.writers.append(
                    WriterActor.options(  # type: ignore[attr-defined]
                        name=self._unique(table, f"writer-{i}"), namespace=NAMESPACE, **w_opts
                    ).remote()
                )
            for i in range(self.num_assigners):
                self.assigners.append(
                    AssignerActor.options(  # type: ignore[attr-defined]
                        name=self._unique(table, f"assigner-{i}"), namespace=NAMESPACE, **a_opts
                    ).remote()
                )
        self._spawned = True

    def start_workers(self, setup: TableSetup) -> tuple[Any, Any]:
        """Give the task actors their state from the table's current state (new ones, the old
        ones killed, unless :meth:`spawn_workers` made them since the last start); the
        references of the file slices and write profile they were made from. Returns once every
        task has started; a task's error is raised as itself."""
        if not self._spawned:
            self.spawn_workers()
        self._spawned = False
        if self.wc.occ:
            self.coord.mark_loaded.remote()  # runs before latest_slices: calls run in order
        slices, profile = self.coord.latest_slices.remote(), self.coord.profile.remote()
        cfgs = [
            self.coord.assigner_config.remote(i, self.num_assigners)
            for i in range(self.num_assigners)
        ]
        if self.chained:
            n = self.num_writers
            starts = [
                t.start.remote(setup, cfgs[i], profile, slices, n, self.attempt)
                for i, t in enumerate(self.assigners)
            ]
        else:
            starts = [
                w.start.remote(setup.context, i, self.attempt) for i, w in enumerate(self.writers)
            ]
            starts += [
                a.start.remote(setup, cfgs[i], profile, slices, self.writers)
                for i, a in enumerate(self.assigners)
            ]
        try:
            ray.get(starts)
        except RayTaskError as e:
            err = unwrap(e)
            if isinstance(err, HoodieError):
                raise err from None
            # not the table's fault (a read that failed, say): retried as a lost actor's
            # start is, as when the state was built in the actor's constructor
            raise TopologyLost("") from e
        if self.chained:
            for t in self.assigners:
                t.set_peers.remote(self.assigners)
        return slices, profile

    # -- stopping ------------------------------------------------------------------------------
    def stop(self, discard_unborn: bool) -> None:
        """Kill the tasks, let the coordinator finish its compaction and close (releasing the
        table; ``discard_unborn``: a new table nothing was committed to is removed), kill it."""
        for a in self.worker_actors():
            with contextlib.suppress(Exception):
                ray.kill(a, no_restart=True)
        if self.coord is not None:
            with contextlib.suppress(Exception):
                ray.get(self.coord.finish_compaction.remote(), timeout=600)
            try:
                ray.get(self.coord.close.remote(discard_unborn=discard_unborn), timeout=60)
            except Exception:
                # It died holding the table's lock, or its close failed or outlasted its
                # budget (a merge beside the writes still running): once Ray confirms it dead
                # (what it left pending, the next writer rolls back), this driver, which knows
                # the owner, deletes the lock rather than leave the table refused until the
                # heartbeat expires. One only unreachable may still commit: its lock stays.
                if _kill_and_wait([self.coord], 60.0):
                    self.release_lock()
            ray.kill(self.coord, no_restart=True)
        self.assigners, self.writers, self.coord, self.hosts = [], [], None, []
        self._spawned = False

    def release_lock(self) -> None:
        """Delete the table's lock file if its owner is this topology's (a dead coordinator's
        lock would refuse every next writer until its heartbeat expired)."""
        try:
            storage = open_storage(self.path, self.storage_options)
            open_lock(storage, self.wc, owner=self.owner).release_owned()
        except Exception as e:  # the heartbeat's expiry frees the table all the same
            log.warning("releasing the writer lock of %s failed: %s", self.path, e)

    # -- monitoring ----------------------------------------------------------------------------
    def actor_pids(self) -> dict[str, int]:
        """Process ids of the actors by role name."""
        out = {"coordinator": ray.get(self.coord.pid.remote())} if self.coord else {}
        if self.chained:
            for i, t in enumerate(self.assigners):
                out[assigner_role(self.wc, i)] = ray.get(t.pid.remote())
            return out
        for i, a in enumerate(self.assigners):
            out[f"assigner-{i}"] = ray.get(a.pid.remote())
        for i, w in enumerate(self.writers):
            out[f"writer-{i}"] = ray.get(w.pid.remote())
        return out

    def operator_cpu(self) -> dict[str, float]:
        """CPU seconds the tasks spent so far per operator, summed over tasks."""
        tasks = list(self.assigners) + ([] if self.chained else list(self.writers))
        out: dict[str, float] = {}
        for cpu in ray.get([t.operator_cpu.remote() for t in tasks]):
            for op, s in cpu.items():
                out[op] = out.get(op, 0.0) + s
        return out

    def index_stats(self) -> list[dict[str, int]]:
        """Per assigner task: its key index's keys, bytes and bootstrap milliseconds."""
        return list(ray.get([a.index_stats.remote() for a in self.assigners]))

    def actors(self) -> dict[str, Any]:
        """The actor handles by role name (chained, ``assigner-i`` and ``writer-i`` are the
        same actor; hosted, the actor that hosts task i)."""

        def actor(h: Any) -> Any:
            return h.host if isinstance(h, SlotHandle) else h

        out = {"coordinator": self.coord}
        out.update({f"assigner-{i}": actor(a) for i, a in enumerate(self.assigners)})
        out.update({f"writer-{i}": actor(w) for i, w in enumerate(self.writers)})
        return out


def _kill_and_wait(actors: list[Any], timeout: float) -> bool:
    """Kill ``actors`` and wait (up to ``timeout`` seconds in all) until each is dead, not
    just told to die. True when Ray confirmed every death (``ActorDiedError``); an actor
    only unreachable (``ActorUnavailableError``, another ``RayActorError``) may still run."""
    for a in actors:
        with contextlib.suppress(Exception):
            ray.kill(a, no_restart=True)
    deadline = time.monotonic() + timeout
    confirmed = 0
    for a in actors:
        while time.monotonic() < deadline:
            try:
                ray.get(a.pid.remote(), timeout=5)
            except ActorDiedError:
                confirmed += 1
                break
            except RayActorError:
                break  # gone from here, its death not confirmed
            except GetTimeoutError:
                pass  # still finishing a task: killed, not yet gone
            with contextlib.suppress(Exception):
                ray.kill(a, no_restart=True)
            time.sleep(0.05)
    return confirmed == len(actors)
