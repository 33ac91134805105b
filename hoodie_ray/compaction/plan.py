"""Compaction triggers and plans."""

from __future__ import annotations

import datetime as _dt

from hoodie_ray.config.options import WriteConfig
from hoodie_ray.file_group.view import FileSlice
from hoodie_ray.storage import Storage
from hoodie_ray.timeline.instant import Action, Instant, State, parse_instant_time
from hoodie_ray.timeline.plans import HoodieCompactionOperation, HoodieCompactionPlan
from hoodie_ray.timeline.timeline import ActiveTimeline


def last_compaction(timeline: ActiveTimeline) -> Instant | None:
    """The latest completed compaction (a ``commit`` on a MERGE_ON_READ timeline)."""
    done = [i for i in timeline.completed() if i.action == Action.COMMIT]
    return done[-1] if done else None


def trigger_fires(
    timeline: ActiveTimeline, wc: WriteConfig, now: _dt.datetime | None = None
) -> bool:
    """Does ``compaction.trigger.strategy`` call for a compaction now?"""
    last = last_compaction(timeline)
    since = last.timestamp if last else ""
    deltas = [
        i for i in timeline.completed() if i.action == Action.DELTA_COMMIT and i.timestamp > since
    ]
    if not deltas:
        return False
    num_ok = len(deltas) >= wc.compaction_delta_commits
    start = last.timestamp if last else deltas[0].timestamp
    now = now or _dt.datetime.now(_dt.timezone.utc)
    started = parse_instant_time(start)
    if started.tzinfo is None:
        started = started.replace(tzinfo=_dt.timezone.utc)  # instants are UTC
    elapsed = (now - started).total_seconds()
    time_ok = elapsed >= wc.compaction_delta_seconds
    strategy = wc.compaction_trigger
    if strategy == "num_commits":
        return num_ok
    if strategy == "time_elapsed":
        return time_ok
    if strategy == "num_and_time":
        return num_ok and time_ok
    return num_ok or time_ok  # num_or_time


def frozen_log_files(timeline: ActiveTimeline) -> set[tuple[str, str]]:
    """``(partition, log file name)`` of every pending compaction plan: writers must not append."""
    out: set[tuple[str, str]] = set()
    for inst in timeline.pending_compactions():
        plan = read_plan(timeline, inst)
        for op in plan.operations or []:
            for name in op.delta_file_paths or []:
                out.add((op.partition_path or "", name))
    return out


def pending_file_groups(timeline: ActiveTimeline) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for inst in timeline.pending_compactions():
        for op in read_plan(timeline, inst).operations or []:
            out.add((op.partition_path or "", op.file_id))
    return out


def read_plan(timeline: ActiveTimeline, inst: Instant) -> HoodieCompactionPlan:
    requested = Instant(inst.timestamp, Action.COMPACTION, State.REQUESTED)
    data = timeline.read_details(requested)
    return HoodieCompactionPlan.from_bytes(data, what=timeline.file_name(requested))


def build_plan(
    storage: Storage, slices: list[FileSlice], exclude: set[tuple[str, str]]
) -> HoodieCompactionPlan:
    """One operation per latest slice with log files (groups of pending plans excluded)."""
    ops = []
    for s in slices:
        if not s.log_files or (s.partition_path, s.file_id) in exclude:
            continue
        sizes = s.file_sizes or {}
        log_size = float(sum(sizes.get(n, 0) for n in s.log_files))
        base_size = float(sizes.get(s.base_file, 0)) if s.base_file else 0.0
        mb = 1024.0 * 1024.0
        ops.append(
            HoodieCompactionOperation(
                base_instant_time=s.base_instant,
                delta_file_paths=list(s.log_files),
                data_file_path=s.base_file,
                file_id=s.file_id,
                partition_path=s.partition_path,
                metrics={
                    "TOTAL_LOG_FILES": float(len(s.log_files)),
                    "TOTAL_LOG_FILES_SIZE": log_size,
                    "TOTAL_IO_READ_MB": (log_size + base_size) / mb,
                    "TOTAL_IO_WRITE_MB": base_size / mb,
                    "TOTAL_IO_MB": (log_size + 2 * base_size) / mb,
                },
            )
        )
    return HoodieCompactionPlan(operations=ops)
