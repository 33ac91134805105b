"""Compaction on Ray: a pool of compactor actors (``<table>/compactor-<i>``) and executors."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import ray

from hoodie_ray.compaction.clustering import ClusteringTask, execute_group
from hoodie_ray.compaction.execute import CompactionTask, execute_operation
from hoodie_ray.config.options import WriteConfig
from hoodie_ray.exceptions import HoodieError
from hoodie_ray.ray import metrics
from hoodie_ray.ray.runtime import NAMESPACE, actor_resources, job_table
from hoodie_ray.timeline.metadata import HoodieWriteStat

log = logging.getLogger("hoodie_ray")

#: How long the coordinator's record-index build waits for one Ray task before it reads the
#: rest of the slices itself (ray_task_map_when_free)
WHEN_FREE_PATIENCE_S = 120.0


@ray.remote
class CompactorActor:
    """Merges file slices into new base files (Flink CompactOperator)."""

    def __init__(self, table: str = "", task_id: int = 0) -> None:
        self.table, self.task_id = table, task_id  # the metrics tags

    def execute(self, task: CompactionTask) -> HoodieWriteStat:
        stat = execute_operation(task)
        metrics.count_compacted(
            self.table, self.task_id, 1, int(getattr(stat, "total_write_bytes", 0) or 0)
        )
        return stat

    def cluster(self, task: ClusteringTask) -> list[HoodieWriteStat]:
        """Rewrite one clustering group (async clustering beside a stream writer)."""
        return cluster_group(task, self.task_id)

    def pid(self) -> int:
        return os.getpid()


class CompactorPool:
    """``compaction.tasks`` compactor actors; operations are spread round robin. ``table``:
    the prefix of their names (``<job_table>`` or ``<job_table>/<job>``), ``table_name``: the
    table's name their metrics carry."""

    def __init__(self, wc: WriteConfig, table: str, table_name: str) -> None:
        self.wc = wc
        self.table = table
        self.table_name = table_name
        self.actors: list[Any] = []

    def _ensure(self) -> None:
        if self.actors:
            return
        opts = actor_resources("compactor", self.wc, check=False)
        for i in range(self.wc.compaction_tasks):
            name = f"{self.table}/compactor-{i}"
            try:
                ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
            except ValueError:
                pass
            self.actors.append(
                CompactorActor.options(  # type: ignore[attr-defined]
                    name=name, namespace=NAMESPACE, max_restarts=0, **opts
                ).remote(self.table_name, i)
            )

    def submit(self, tasks: list[CompactionTask]) -> list[Any]:
        """Start the tasks; their object references (the handle :meth:`poll` takes)."""
        self._ensure()
        return [self.actors[i % len(self.actors)].execute.remote(t) for i, t in enumerate(tasks)]

    def submit_clustering(self, tasks: list[ClusteringTask]) -> list[Any]:
        """Start clustering tasks, spread as :meth:`submit`'s; their stats come from
        :meth:`poll`."""
        self._ensure()
        return [self.actors[i % len(self.actors)].cluster.remote(t) for i, t in enumerate(tasks)]

    def poll(self, refs: list[Any], wait: bool) -> list[HoodieWriteStat] | None:
        """The stats once every task finished (None while any runs); raises if one failed.
        The coordinator's :class:`~hoodie_ray.job.coordinator.CompactionRunner`."""
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=None if wait else 0)
        if len(ready) < len(refs):
            return None
        return list(ray.get(refs))

    def when_done(self, refs: list[Any], callback: Callable[[], Any]) -> None:
        """Call ``callback`` from a daemon thread once every task of ``refs`` (a handle of
        :meth:`submit` or :meth:`submit_clustering`) finished or failed."""

        def wait() -> None:
            try:
                ray.wait(refs, num_returns=len(refs), fetch_local=False)
                callback()
            except Exception as e:  # the job is closing (its actor or Ray went away)
                log.debug("hoodie_ray: compaction watch ended: %s", e)

        threading.Thread(target=wait, name="hoodie-compaction-watch", daemon=True).start()

    def reset(self) -> None:
        """After a failure: drop the actors; the next submit starts fresh ones."""
        self.shutdown()

    def shutdown(self) -> None:
        for a in self.actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:
                pass
        self.actors = []


def ray_executor(wc: WriteConfig, table: str, path: str) -> Any:
    """An executor for ``hr.compact(engine="ray")`` that runs on a compactor pool."""

    def run(tasks: list[CompactionTask]) -> list[HoodieWriteStat]:
        from hoodie_ray.ray.runtime import ensure_ray

        ensure_ray()
        pool = CompactorPool(wc, job_table(table, path), table)
        try:
            return [_get_as_itself(ref) for ref in pool.submit(tasks)]
        finally:
            pool.shutdown()

    return run


def cluster_group(
    task: ClusteringTask,
    task_id: int = 0,
    rewrite: Callable[[ClusteringTask], list[HoodieWriteStat]] = execute_group,
) -> list[HoodieWriteStat]:
    """Rewrite one clustering group on Ray (``rewrite``), counted in the metrics (tagged by
    the table)."""
    stats = rewrite(task)
    nbytes = sum(int(getattr(st, "total_write_bytes", 0) or 0) for st in stats)
    metrics.count_clustered(task.table, task_id, 1, nbytes)
    return stats


def ray_clustering_executor(
    fn: Callable[[ClusteringTask], list[HoodieWriteStat]], tasks: list[ClusteringTask]
) -> Iterator[list[HoodieWriteStat]]:
    """``hr.cluster(engine="ray")``: each clustering group rewritten by ``fn`` in a Ray task
    (one core each, counted in the metrics: :func:`cluster_group`), spread over the cluster;
    their stats in task order, each as it is ready."""
    return ray_task_map(cluster_group, [(t, 0, fn) for t in tasks])


def ray_task_map(fn: Callable[..., Any], args: list[tuple[Any, ...]]) -> Iterator[Any]:
    """``fn(*a)`` for each of ``args`` as a Ray task (one core each) on the running or an
    embedded local Ray, all submitted at once; the results in order, each as it is ready
    (``hr.cluster`` and ``hr.create_index`` with ``engine="ray"``). A task's error is raised
    as itself."""
    from hoodie_ray.ray.runtime import ensure_ray

    ensure_ray()
    remote = ray.remote(num_cpus=1)(fn)
    refs = [remote.remote(*a) for a in args]
    done = 0
    try:
        for ref in refs:
            yield _get_as_itself(ref)
            done += 1
    finally:
        for ref in refs[done + 1 :]:  # a failure or a caller that stopped: the rest stop too
            ray.cancel(ref)


def ray_task_map_when_free(
    fn: Callable[..., Any], args: list[tuple[Any, ...]], *, patience_s: float = WHEN_FREE_PATIENCE_S
) -> Iterator[Any]:
    """``fn(*a)`` for each of ``args``, the results in order: as Ray tasks (one core each, at
    most as many at once as the nodes have whole CPUs free) when some node has a CPU free and
    there is more than one call, else here in turn; the coordinator's record-index build,
    which must not wait on CPUs another job holds. A task that has not finished within
    ``patience_s`` is cancelled with the rest, which then run here. A task's error is raised
    as itself."""
    from hoodie_ray.ray.runtime import _nodes_available

    width = sum(int(n.get("CPU", 0.0) + 1e-9) for n in _nodes_available(ray))
    if len(args) < 2 or width < 1:
        return (fn(*a) for a in args)
    return _windowed_task_map(fn, args, width, patience_s)


def _windowed_task_map(
    fn: Callable[..., Any], args: list[tuple[Any, ...]], width: int, patience_s: float
) -> Iterator[Any]:
    remote = ray.remote(num_cpus=1)(fn)
    refs: list[Any] = []
    done = 0  # results handed out: their tasks are finished, never cancelled
    try:
        for i in range(len(args)):
            while len(refs) < len(args) and len(refs) - i < width:
                refs.append(remote.remote(*args[len(refs)]))
            ready, _ = ray.wait([refs[i]], timeout=patience_s)
            if not ready:  # no CPU came free (another job took it) or a slow task: here
                for ref in refs[i:]:
                    ray.cancel(ref)
                del refs[i:]
                yield from (fn(*a) for a in args[i:])
                return
            yield _get_as_itself(refs[i])
            done = i + 1
    finally:
        # a failure or a caller that stopped: the tasks not yet handed out stop. Not the
        # finished ones: cancelling them does nothing useful, and once (a CI run) the
        # coordinator, whose only tasks these are and which cancelled them all here, died in
        # Ray's owner code: task_manager.cc, "Tried to complete task that was not pending"
        for ref in refs[done:]:
            ray.cancel(ref)


def _get_as_itself(ref: Any) -> Any:
    """``ray.get(ref)``; a task's HoodieError raised as itself, not inside a RayTaskError."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, HoodieError):
            raise cause from None
        raise
