"""Compaction on Ray: a pool of compactor actors (``<table>/compactor-<i>``) and executors."""

from __future__ import annotations

import os
from typing import Any

import ray

from hoodie_ray.compaction.execute import CompactionTask, execute_operation
from hoodie_ray.config.options import WriteConfig
from hoodie_ray.ray.runtime import NAMESPACE, actor_resources
from hoodie_ray.timeline.metadata import HoodieWriteStat


@ray.remote
class CompactorActor:
    """Merges file slices into new base files (Flink CompactOperator)."""

    def execute(self, task: CompactionTask) -> HoodieWriteStat:
        return execute_operation(task)

    def pid(self) -> int:
        return os.getpid()


class CompactorPool:
    """``compaction.tasks`` compactor actors; operations are spread round robin."""

    def __init__(self, wc: WriteConfig, table: str) -> None:
        self.wc = wc
        self.table = table
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
                ).remote()
            )

    def submit(self, tasks: list[CompactionTask]) -> list[Any]:
        self._ensure()
        return [self.actors[i % len(self.actors)].execute.remote(t) for i, t in enumerate(tasks)]

    def shutdown(self) -> None:
        for a in self.actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:
                pass
        self.actors = []


def ray_executor(wc: WriteConfig, table: str) -> Any:
    """An executor for :func:`hoodie_ray.compaction.compact` that runs on a compactor pool."""

    def run(tasks: list[CompactionTask]) -> list[HoodieWriteStat]:
        from hoodie_ray.ray.runtime import ensure_ray

        ensure_ray()
        pool = CompactorPool(wc, table)
        try:
            return list(ray.get(pool.submit(tasks)))
        finally:
            pool.shutdown()

    return run
