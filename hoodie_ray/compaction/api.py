"""Scheduling, running and committing compactions; cleaning old file slices."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hoodie_ray.compaction.execute import CompactionTask, compaction_context, execute_operation
from hoodie_ray.compaction.plan import (
    build_plan,
    last_compaction,
    pending_file_groups,
    read_plan,
    trigger_fires,
)
from hoodie_ray.config.options import WriteConfig, resolve_options
from hoodie_ray.config.table_config import HoodieTableConfig
from hoodie_ray.exceptions import HoodieCompactionError, HoodieError
from hoodie_ray.file_group.naming import log_file_name, parse_base_file_name, parse_log_file_name
from hoodie_ray.file_group.view import FileSystemView
from hoodie_ray.storage import Storage, join, open_storage
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat
from hoodie_ray.timeline.plans import HoodieCompactionPlan
from hoodie_ray.timeline.timeline import ActiveTimeline

#: Runs a list of tasks and returns their write stats (raises if any failed).
Executor = Callable[[list[CompactionTask]], list[HoodieWriteStat]]


def local_executor(tasks: list[CompactionTask]) -> list[HoodieWriteStat]:
    """Run the operations one after another in this process."""
    return [execute_operation(t) for t in tasks]


@dataclass
class CompactionService:
    """Compaction and cleaning of one table (held by the coordinator, or used offline)."""

    path: str
    storage: Storage
    table_config: HoodieTableConfig
    timeline: ActiveTimeline
    wc: WriteConfig
    storage_options: dict[str, Any] | None = field(default=None, repr=False)  # credentials
    last_schedule_check: float = field(default_factory=time.monotonic)

    @classmethod
    def open(cls, path: str, options: Any = None, storage_options: Any = None) -> CompactionService:
        storage = open_storage(path, storage_options)
        cfg = HoodieTableConfig.load(storage)
        tl = cfg.open_timeline(storage)
        return cls(path, storage, cfg, tl, resolve_options(options), storage_options)

    # -- schedule ------------------------------------------------------------------------------
    def schedule(self, force: bool = False) -> str | None:
        """Write a compaction plan if the trigger fires (or ``force``); its instant, or None."""
        if not self.table_config.is_mor:
            return None
        self.timeline.reload()
        if not force and not trigger_fires(self.timeline, self.wc):
            return None
        if any(
            i.action in (Action.COMMIT, Action.DELTA_COMMIT)
            for i in self.timeline.pending_commits()
        ):
            return None  # a write is in flight: schedule after it
        view = FileSystemView.for_table(self.storage, self.table_config, self.timeline)
        plan = build_plan(
            self.storage, view.latest_file_slices(), pending_file_groups(self.timeline)
        )
        if not plan.operations:
            return None
        from hoodie_ray.timeline.instant import new_instant_time

        last = max(
            [i.timestamp for i in self.timeline.instants]
            + [self.timeline.max_completion_time() or ""]
        )
        instant = new_instant_time(last or None)
        self.timeline.create_requested(
            Instant(instant, Action.COMPACTION, State.REQUESTED), plan.to_bytes()
        )
        return instant

    def pending(self) -> list[str]:
        self.timeline.reload()
        return [i.timestamp for i in self.timeline.pending_compactions()]

    # -- execute and commit --------------------------------------------------------------------
    def tasks(self, instant: str) -> list[CompactionTask]:
        """Move the plan to inflight and return one task per operation."""
        self.timeline.reload()
        inst = self.timeline.get(instant, Action.COMPACTION)
        if inst is None:
            raise HoodieCompactionError(f"no pending compaction {instant} on {self.path}")
        plan = read_plan(self.timeline, inst)
        if inst.state is State.REQUESTED:
            self.timeline.transition_to_inflight(
                Instant(instant, Action.COMPACTION, State.REQUESTED)
            )
        ctx, avro_json = compaction_context(self.path, instant, self.storage_options)
        return [
            CompactionTask(ctx, instant, op, i, avro_json, self.wc.parquet_codec)
            for i, op in enumerate(plan.operations or [])
        ]

    def commit(self, instant: str, stats: list[HoodieWriteStat]) -> HoodieCommitMetadata:
        """Carry post-plan logs over (v6), then write ``<instant>.commit`` atomically."""
        self.timeline.reload()
        inst = self.timeline.get(instant, Action.COMPACTION)
        if inst is None:
            raise HoodieCompactionError(f"compaction {instant} is not pending on {self.path}")
        plan = read_plan(self.timeline, inst)
        if self.table_config.table_version < 8:
            self._carry_over_logs(instant, plan)
        by_part: dict[str, list[HoodieWriteStat]] = {}
        for st in stats:
            by_part.setdefault(st.partition_path or "", []).append(st)
        schema = _latest_schema(self.timeline)
        meta = HoodieCommitMetadata(
            partition_to_write_stats=by_part,
            compacted=True,
            extra_metadata={"schema": schema} if schema else {},
            operation_type="COMPACT",
        )
        content = meta.to_bytes(self.table_config.timeline_layout_version)
        self.timeline.complete(Instant(instant, Action.COMPACTION, State.INFLIGHT), content)
        return meta

    def _carry_over_logs(self, instant: str, plan: HoodieCompactionPlan) -> None:
        """Copy the log files written after the plan into the new slice (named by ``instant``)."""
        view = FileSystemView.for_table(self.storage, self.table_config, self.timeline)
        slices = {(s.partition_path, s.file_id): s for s in view.latest_file_slices()}
        for op in plan.operations or []:
            part = op.partition_path or ""
            s = slices.get((part, op.file_id))
            if s is None:
                continue
            planned = set(op.delta_file_paths or [])
            version = 0
            for name in s.log_files:
                if name in planned:
                    continue
                lf = parse_log_file_name(name)
                if lf is None or lf.instant != (op.base_instant_time or lf.instant):
                    continue
                version += 1
                dst = log_file_name(op.file_id, instant, version, lf.write_token or "0-0-0")
                data = self.storage.read_bytes(join(part, name))
                self.storage.write_bytes(join(part, dst), data)

    def rollback_inflight(self, instant: str) -> None:
        """Undo a failed execution: delete the files named by ``instant``, back to requested."""
        self.timeline.reload()
        inst = self.timeline.get(instant, Action.COMPACTION)
        if inst is None or inst.state is State.COMPLETED:
            return
        plan = read_plan(self.timeline, inst)
        for part in {op.partition_path or "" for op in plan.operations or []}:
            for info in self.storage.list_dir(part):
                b = parse_base_file_name(info.name)
                lf = parse_log_file_name(info.name)
                if (b is not None and b.instant == instant) or (
                    lf is not None and lf.instant == instant
                ):
                    self.storage.delete(join(part, info.name))
        if inst.state is State.INFLIGHT:
            inflight = Instant(instant, Action.COMPACTION, State.INFLIGHT)
            self.storage.delete(self.timeline.instant_path(inflight))
        self.timeline.reload()

    def run(self, instant: str, executor: Executor = local_executor) -> HoodieCommitMetadata:
        """Execute and commit one compaction; roll it back to requested if anything fails."""
        try:
            stats = executor(self.tasks(instant))
            return self.commit(instant, stats)
        except BaseException as e:
            self.rollback_inflight(instant)
            if isinstance(e, HoodieError):
                raise
            raise HoodieCompactionError(f"compaction {instant} of {self.path} failed: {e}") from e

    # -- clean ---------------------------------------------------------------------------------
    def clean(self) -> str | None:
        """Delete file slices older than the last ``clean.retain_commits`` commits need."""
        from hoodie_ray.compaction.clean import clean_table

        return clean_table(self)


def _latest_schema(timeline: ActiveTimeline) -> str | None:
    for inst in reversed(timeline.completed_commits()):
        meta = HoodieCommitMetadata.from_bytes(
            timeline.read_details(inst), timeline.layout_version, inst
        )
        if meta.extra_metadata.get("schema"):
            return meta.extra_metadata["schema"]
    return None


def schedule_compaction(
    path: str, options: Any = None, storage_options: Any = None, force: bool = False
) -> str | None:
    """Schedule a compaction of the table at ``path``; the plan's instant, or None."""
    return CompactionService.open(path, options, storage_options).schedule(force=force)


def run_compaction(
    path: str,
    instant: str,
    options: Any = None,
    storage_options: Any = None,
    executor: Executor = local_executor,
) -> HoodieCommitMetadata:
    """Execute and commit the pending compaction ``instant``."""
    return CompactionService.open(path, options, storage_options).run(instant, executor)


def compact(
    path: str,
    options: dict[str, Any] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    engine: str = "local",
    on_progress: Callable[[int, int], None] | None = None,
) -> str | None:
    """Compact the table now (offline): run the earliest pending plan, else schedule one and run it.

    ``on_progress(done, total)`` is called as file slices are compacted (for progress bars).

    Takes the table's writer lock, so it never runs beside a live writer. ``engine="ray"`` fans
    the operations out over Ray tasks (``compaction.tasks`` at a time). Returns the compaction
    instant, or None when no file slice has log files.

    Example::

        hr.compact("/data/trips")
    """
    from hoodie_ray.write.lock import WriterLock

    svc = CompactionService.open(path, options, storage_options)
    executor: Executor = local_executor
    if engine == "ray":
        from hoodie_ray.ray.compactor import ray_executor

        executor = ray_executor(svc.wc, svc.table_config.name)
    with WriterLock(
        svc.storage, heartbeat_ms=svc.wc.lock_heartbeat_ms, expire_ms=svc.wc.lock_expire_ms
    ):
        pending = svc.pending()
        instant = pending[0] if pending else svc.schedule(force=True)
        if instant is None:
            return None
        if on_progress is not None:
            executor = _reporting(executor, on_progress)
        svc.run(instant, executor)
        return instant


def _reporting(executor: Executor, on_progress: Callable[[int, int], None]) -> Executor:
    """Run the tasks in small groups through ``executor``, reporting after each group."""

    def run(tasks: list[CompactionTask]) -> list[HoodieWriteStat]:
        total, out = len(tasks), []
        on_progress(0, total)
        step = max(1, total // 20)
        for i in range(0, total, step):
            out.extend(executor(tasks[i : i + step]))
            on_progress(len(out), total)
        return out

    return run


def clean(
    path: str,
    options: dict[str, Any] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
) -> str | None:
    """Clean old file slices now; the clean instant, or None when nothing was deleted."""
    from hoodie_ray.write.lock import WriterLock

    svc = CompactionService.open(path, options, storage_options)
    with WriterLock(svc.storage):
        return svc.clean()


def compaction_summary(timeline: ActiveTimeline) -> dict[str, Any]:
    """Pending and last completed compaction instants (for the CLI and metrics)."""
    last = last_compaction(timeline)
    return {
        "pending": [i.timestamp for i in timeline.pending_compactions()],
        "last_completed": last.timestamp if last else None,
    }
