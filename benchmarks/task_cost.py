"""Task cost: what a chained task's kernels cost per checkpoint as the topology widens, no Ray.

    python -m benchmarks.task_cost [--tasks 1,8] [--rows N] [--blocks B] [--repeat R]
        [--seed-tasks K] [--json]

The ``scaling`` benchmark's commits (mor-q1 ``base --quick``: 200K keys, 6 commits of 100K
rows, each commit in ``--blocks`` input blocks) written through ``--tasks`` chained
:class:`~hoodie_ray.ray.actors.AssignWriteTask` objects in this one process, driven as the
driver drives a topology of task slots (begin, route by shares, assign, finish, commit), with
no Ray in between: every task is co-hosted with every other one. ``--rows N`` cuts each
commit to its first N rows, where the kernels' fixed costs per task and checkpoint dominate.

Each width writes its own table by default: the first commit's inserts make one file group a
task, so a width's upserts write as many log blocks a checkpoint as it has tasks (Flink's
layout), and the widths differ in their tables as much as in their topologies. ``--seed-tasks
K`` has K tasks write the first commit for every width, so that every width meets the same
table (K file groups, homed to no width's tasks: most rows cross tasks, by plain call here).

One untimed width runs first (the process's imports, kernels and first pages), then
``--repeat`` rounds of every width in alternating order; each width keeps its best round.

Figures per width: rows per CPU-s of this process over the commits after the first (the first
creates the file groups and is not counted), the ratio to the first width (issue 38's
``rows per CPU-s at 8 tasks >= 0.8x at 1``, less Ray's share), and per stage the CPU
milliseconds all tasks together spent in it a checkpoint (inclusive thread CPU; a stage called
inside another counts in both), beside the calls: where a wider topology's extra CPU goes.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.common import Workload, generate_workload, machine_info, print_report
from benchmarks.mor_q1 import hoodie_options
from hoodie_ray.config.options import resolve_options
from hoodie_ray.job import client
from hoodie_ray.job.coordinator import Coordinator
from hoodie_ray.ray.actors import AssignWriteTask

#: The stages timed: (module, attribute path). A module-level function is timed where the
#: callers' modules bound it too.
STAGES: tuple[tuple[str, str], ...] = (
    ("hoodie_ray.job.client", "route_pieces"),
    ("hoodie_ray.write.routing", "split_rows"),
    ("hoodie_ray.ray.actors", "AssignTask.assign"),
    ("hoodie_ray.write.bucket_assigner", "BucketAssigner.assign_batch"),
    ("hoodie_ray.write.routing", "split_by_writer"),
    ("hoodie_ray.ray.actors", "WriteTask.write_rows"),
    ("hoodie_ray.write.buffer", "WriteBuffer.add"),
    ("hoodie_ray.ray.actors", "AssignTask.finish"),
    ("hoodie_ray.write.stream_writer", "StreamWriteFunction._precombine"),
    ("hoodie_ray.write.base_file", "with_meta_columns"),
    ("hoodie_ray.log_format.blocks", "serialize_block_pieces"),
    ("hoodie_ray.write.stream_writer", "StreamWriteFunction._add_blocks"),
    ("hoodie_ray.write.stream_writer", "StreamWriteFunction._marker"),
    ("hoodie_ray.job.coordinator", "Coordinator.commit"),
)


class StageTimer:
    """Inclusive thread CPU of the :data:`STAGES`, while :attr:`on`."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.on = False
        self._undo: list[tuple[Any, str, Any]] = []

    def _wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        depth = [0]

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.on or depth[0]:
                return fn(*args, **kwargs)
            depth[0] += 1
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[label] += time.thread_time() - t0
                self.calls[label] += 1
                depth[0] -= 1

        return timed

    @contextmanager
    def installed(self) -> Iterator[StageTimer]:
        import sys

        for module_name, path in STAGES:
            owner: Any = importlib.import_module(module_name)
            *outer, name = path.split(".")
            for part in outer:
                owner = getattr(owner, part)
            fn = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
            if fn is None:  # code of another commit (an A/B run) may lack a stage
                continue
            timed = self._wrap(path, fn)
            targets = [owner]
            if not outer:  # a function: also where other modules imported it
                targets += [
                    m
                    for m in list(sys.modules.values())
                    if m is not None
                    and m is not owner
                    and m.__name__.startswith("hoodie_ray")
                    and getattr(m, name, None) is fn
                ]
            for t in targets:
                self._undo.append((t, name, fn))
                setattr(t, name, timed)
        try:
            yield self
        finally:
            for t, name, fn in reversed(self._undo):
                setattr(t, name, fn)
            self._undo.clear()


def _blocks(commit: pa.Table, blocks: int) -> list[pa.Table]:
    step = -(-commit.num_rows // blocks)
    return [commit.slice(i, step) for i in range(0, commit.num_rows, step)]


def _slots(coord: Coordinator, setup: Any, tasks: int) -> list[AssignWriteTask]:
    """``tasks`` chained tasks over the table as it is, every one co-hosted with the others."""
    slices = coord.latest_slices()
    profile = coord.profile(slices)
    per_task = coord.slices_by_writer(slices, profile, tasks)
    slots = [
        AssignWriteTask(setup, coord.assigner_config(i, tasks), profile, per_task[i], tasks, 0)
        for i in range(tasks)
    ]
    host = dict(enumerate(slots))
    for t in slots:
        t.set_peers(list(slots))
        t.co_hosted = host
    return slots


def replay(
    workload: Workload,
    tasks: int,
    blocks: int,
    workdir: Path,
    timer: StageTimer,
    seed_tasks: int = 0,
) -> dict:
    """The workload's commits through ``tasks`` chained tasks of one process. ``seed_tasks``:
    the first commit (the inserts) is written by that many tasks instead, then the others by
    ``tasks`` new tasks over the table it left (their start, the key index's bootstrap
    included, untimed): every width meets the same table."""
    options = hoodie_options(workload, "parquet", tasks, f"task_cost_{tasks}", 6, tasks)
    coord = Coordinator(str(workdir / f"t{tasks}"), resolve_options(options), None, lock_owner="b")
    setup = coord.open(workload.commits[0].schema)
    slots: list[AssignWriteTask] = []
    cpu = 0.0
    timer.seconds.clear()
    timer.calls.clear()
    try:
        for ci, commit in enumerate(workload.commits):
            # new tasks at the first commit, and again after it where another width seeded it
            fresh = ci == 0 or (ci == 1 and bool(seed_tasks))
            if fresh:
                slots = _slots(coord, setup, (seed_tasks or tasks) if ci == 0 else tasks)
            width = len(slots)
            timer.on = ci > 0
            t0 = time.process_time()
            slices = coord.latest_slices()
            profile = coord.profile(slices)
            instant = coord.start_instant()
            per_task = coord.slices_by_writer(slices, profile, width)
            frozen = coord.frozen_logs()
            for i, t in enumerate(slots):
                t.begin(not fresh, profile, instant, frozen, per_task[i])
            # each block routed by one router (the driver's shares), every part to its task
            routed = [
                client.route_pieces(setup, [(b, None)], width) for b in _blocks(commit, blocks)
            ]
            for i, t in enumerate(slots):
                t.assign(*[parts[i] for parts in routed])
            stats = [s for t in slots for s in t.finish()]
            coord.commit(instant, stats)
            coord.after_commit(None)
            if ci > 0:
                cpu += time.process_time() - t0
    finally:
        timer.on = False
        coord.close()
    rows = sum(c.num_rows for c in workload.commits[1:])
    checkpoints = len(workload.commits) - 1
    return {
        "tasks": tasks,
        "rows": rows,
        "cpu_s": round(cpu, 3),
        "rows_per_cpu_s": round(rows / cpu) if cpu else None,
        "stage_ms_per_checkpoint": {
            k: round(1000 * v / checkpoints, 2) for k, v in timer.seconds.most_common()
        },
        "stage_calls": dict(timer.calls),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default="1,8", help="widths, comma-separated (default 1,8)")
    p.add_argument("--rows", type=int, default=0, help="each commit cut to its first N rows")
    p.add_argument("--blocks", type=int, default=2, help="input blocks a commit (default 2)")
    p.add_argument(
        "--repeat",
        type=int,
        default=2,
        help="rounds of every width, in alternating order after one warm-up; each width's best "
        "kept (default 2)",
    )
    p.add_argument(
        "--seed-tasks",
        type=int,
        default=0,
        help="the first commit written by this many tasks for every width, so that every "
        "width meets the same table (0: each width writes its own, one file group a task)",
    )
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    workload = generate_workload("base", quick=True)
    if args.rows:
        workload = dataclasses.replace(
            workload, commits=[c.slice(0, args.rows) for c in workload.commits]
        )
    widths = [int(w) for w in args.tasks.split(",")]
    timer = StageTimer()
    workdir = Path(tempfile.mkdtemp(prefix="hoodie_ray_task_cost_"))
    try:
        with timer.installed():
            # one untimed width first (imports, kernels, the allocator's first pages), then the
            # rounds in alternating width order, so that neither a cold process nor the
            # machine's drift falls on one width only
            replay(workload, widths[0], args.blocks, workdir / "warm", timer, args.seed_tasks)
            best: dict[int, dict] = {}
            for r in range(args.repeat):
                for w in widths if r % 2 == 0 else list(reversed(widths)):
                    run = replay(
                        workload, w, args.blocks, workdir / f"r{r}w{w}", timer, args.seed_tasks
                    )
                    if w not in best or run["cpu_s"] < best[w]["cpu_s"]:
                        best[w] = run
            runs = [best[w] for w in widths]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    first = runs[0]["rows_per_cpu_s"]
    for run in runs:
        run["vs_first_width"] = round(run["rows_per_cpu_s"] / first, 3) if first else None
    res = {
        "benchmark": "task_cost",
        "workload": {
            "commits": len(workload.commits),
            "rows_per_commit": workload.commits[0].num_rows,
            "blocks": args.blocks,
            "seed_tasks": args.seed_tasks,
        },
        "machine": machine_info(),
        "runs": runs,
    }
    print_report(res, args.json, 100)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
