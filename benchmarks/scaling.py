"""Scaling: the mor-q1 base commits through every input path at 1, 2, 4, 8 (16) writers.

    python -m benchmarks.scaling [--quick] [--writers 1,2,4,8] [--assigners N] [--repeat R]
        [--chaining on|off|both] [--blocks N] [--pipelined] [--seed-tasks K] [--warm-commits N]
        [--json]

Paths (``--paths``, all by default):

* ``driver``: ``HoodieStreamWriter.write(pa.Table)`` from this process, batches of
  ``--batch-rows`` (``--blocks N``: each commit in N batches); the driver puts each batch into
  the object store and hands over the reference.
* ``dataset``: one Ray Dataset per commit into one live topology
  (``HoodieStreamWriter.write(ds)``, one checkpoint per commit), in blocks of ``--batch-rows``
  (the driver path's batches; ``--blocks N``: N blocks a commit, as ``map_batches`` or
  ``read_parquet`` over many files make them). The dataset's blocks are in the object store before the commit
  is timed (a pipeline's upstream made them): the section measures hoodie_ray, not how the
  blocks were made.
* ``spark``: one Spark DataFrame per commit (``spark.read.parquet`` of the commit's rows,
  written to Parquet and cached in Spark before the run, one partition per executor) through
  RayDP into the same kind of topology (``--spark-executors``, ``--spark-rows`` per commit:
  the whole commit by default, the rows of the other paths). ``--spark-warmups`` (5)
  untimed hand-offs run before the section, so that it meets the JVMs' JIT settled. Its
  time splits into the hand-off (``write(df)``: the executors' Arrow conversion, all at
  once, and one fetcher actor taking the blocks into the object store) and the checkpoint.

``--pipelined``: each commit's checkpoint is ``checkpoint(wait=False)``: the next commit's input
is routed and buffered while it flushes and commits (chained, the default topology).

``--seed-tasks K``: the first commit (the inserts) is written before the timed section by a
local writer of K tasks, as another engine's table would be: its file groups are homed to
none of the topology's tasks, so most upserted rows cross from the task holding their key to
the task writing their file group (through the checkpoint barrier, or by a plain call between
tasks of one process); the timed section is the other commits.

``--warm-commits N``: the next N commits go through the topology before the timed section, so
that it meets task processes that have run (their imports, kernels and first pages paid), as
a stream's later checkpoints do; the first commit of a fresh topology costs its tasks several
times a later one (route 55-65 ms against 7, assign 80-130 against 15-25, 1 task, 100K rows).

With as many assigners as writers, assigner task i and writer task i run chained in one actor
(``pipeline.operator-chaining``, the default); ``--chaining off`` runs them as separate actors,
``both`` runs each path both ways (the CPU of a chained actor is reported as ``assign-write``).

For each path and writer count (assigners = writers unless ``--assigners``): wall rows/s, the
speed-up over 1 writer, each role's CPU-s (driver, coordinator, assigners, writers, other Ray
workers: Ray Data and RayDP tasks), ``system_cpu_share`` (the kernel's part of the section's
CPU) and ``rows_per_user_cpu_s`` (rows per CPU-s less that part: this VM's fresh pages move the
kernel's part between runs), ``minor_faults_k`` (each role's minor page faults, thousands:
first touches of memory), ``driver_cpu_share`` (driver CPU-s / all CPU-s of the
section), ``assigner_cpu_share`` (assigners' CPU-s / writers'; chained, from the tasks' own
CPU accounting by operator, ``operator_cpu_s``), rows per CPU-s, commit latency p50/p95 and the correctness gate (hudi-rs reads the last-writer-wins dedup of the
input). Peers fed the same commits (``--peers``, optional; a missing peer never fails the
run): delta-rs merge (one process) and pypaimon ``write_ray`` into a primary-key table with
fixed buckets, at each writer count (its own virtual environment, made on first use, in a
child process: :mod:`benchmarks.paimon_peer`).

Runs unchanged on a larger machine: ``--writers 1,2,4,8,16``; no network needed (the pypaimon
peer is skipped where its environment cannot be made).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import (
    CpuMeter,
    CpuUsage,
    GateResult,
    Workload,
    add_option_argument,
    expected_snapshot,
    fmt_num,
    generate_workload,
    iter_batches,
    machine_info,
    percentile,
    ratio,
    split_rows,
    text_table,
    wait_for_ray_idle,
)
from benchmarks.mor_q1 import _gate, _init_ray, delta_merge_peer, hoodie_options, log

PATHS = ("driver", "dataset", "spark")
DEFAULT_WRITERS = (1, 2, 4, 8)
DEFAULT_BATCH_ROWS = 100_000
#: Spark's quick size: rows per commit (the Spark path is measured at this size only).

GOALS = {
    "cpu_w8_vs_w1": ">= 0.8 (issue 38, 2 cores: rows per CPU-s at 8 tasks / at 1, each path)",
    "blocks_64_vs_2": ">= 0.8 (issue 38: rows per CPU-s, --blocks 64 / --blocks 2 runs)",
    "dataset_vs_driver_cpu": ">= 0.9 (2 cores: Dataset path rows per CPU-s / driver path's)",
    "driver_cpu_share": "<= 0.05 on the driver and Dataset paths",
    "assigner_cpu_share": "<= 0.25",
    "dataset_speedup_8": ">= 6 (16 cores: Dataset path at 8 writers / at 1)",
    "dataset_rows_per_s_8": ">= 4M (16 cores)",
}


@dataclass
class PathRun:
    """One path at one writer count."""

    path: str
    writers: int
    assigners: int
    rows: int = 0
    chained: bool = False
    usage: CpuUsage | None = None
    pids: dict[str, int] = field(default_factory=dict)
    commit_s: list[float] = field(default_factory=list)
    convert_s: list[float] = field(default_factory=list)  # Spark: the write call per commit
    phases: list[dict[str, float]] = field(default_factory=list)  # per checkpoint, by phase
    operator_cpu: dict[str, float] = field(default_factory=dict)  # in-task CPU-s by operator
    gate: GateResult | None = None
    error: str | None = None
    repeat: int = 0  # which of --repeat's rounds

    @property
    def label(self) -> str:
        return (
            f"{self.path} w{self.writers} a{self.assigners}"
            + (" chained" if self.chained else "")
            + (f" #{self.repeat + 1}" if self.repeat else "")
        )

    def role_cpu_s(self) -> dict[str, float]:
        """CPU-s by role in the measured section: driver, coordinator, assigner, writer and
        other (Ray Data / RayDP tasks, any other worker)."""
        out = {
            "driver": 0.0,
            "coordinator": 0.0,
            "assigner": 0.0,
            "writer": 0.0,
            "assign-write": 0.0,
            "other": 0.0,
        }
        if self.usage is None:
            return out
        out["driver"] = self.usage.driver_cpu_s
        role_of = {pid: role.rstrip("-0123456789") for role, pid in self.pids.items()}
        for p in self.usage.processes:
            out[role_of.get(p.pid, "other")] += p.cpu_s
        return out

    def role_minor_faults(self) -> dict[str, int]:
        """Minor page faults by role in the measured section (the Ray processes only)."""
        out: dict[str, int] = {}
        if self.usage is None:
            return out
        role_of = {pid: role.rstrip("-0123456789") for role, pid in self.pids.items()}
        for p in self.usage.processes:
            role = role_of.get(p.pid, "other")
            out[role] = out.get(role, 0) + p.minor_faults
        return out

    def assigner_cpu_share(self, cpu: dict[str, float]) -> float | None:
        """Assigning's CPU over writing's: the assigner and writer actors' CPU apart, or
        chained, the tasks' own accounting by operator (input preparation counted with the
        assigner, as an assigner actor does it)."""
        if not self.chained:
            return ratio(cpu["assigner"], cpu["writer"])
        op = self.operator_cpu
        return ratio(op.get("route", 0.0) + op.get("assign", 0.0), op.get("write", 0.0))

    def task_busy_share(self) -> dict[str, float]:
        """Each write task's CPU-s over the section's wall time (1.0: a core busy all along),
        by role name: how much of the run each task worked (tasks sharing a process, task
        slots, as one: ``assign-write-0+2``)."""
        u = self.usage
        if u is None or not u.wall_s:
            return {}
        by_pid = {p.pid: p.cpu_s for p in u.processes}
        roles: dict[int, list[str]] = {}
        for role, pid in sorted(self.pids.items(), key=lambda rp: _role_order(rp[0])):
            if pid in by_pid and role != "coordinator":
                roles.setdefault(pid, []).append(role)
        return {
            names[0] + "".join("+" + r.rsplit("-", 1)[-1] for r in names[1:]): round(
                by_pid[pid] / u.wall_s, 3
            )
            for pid, names in roles.items()
        }

    def figures(self) -> dict[str, Any]:
        u = self.usage
        cpu = self.role_cpu_s()
        total = u.total_cpu_s if u else 0.0
        out: dict[str, Any] = {
            "path": self.path,
            "writers": self.writers,
            "assigners": self.assigners,
            "chained": self.chained,
            "rows": self.rows,
            "repeat": self.repeat,
            "gate": None if self.gate is None else ("pass" if self.gate.passed else "fail"),
            "error": self.error,
        }
        if u is None or self.error:
            return out
        out.update(
            wall_s=round(u.wall_s, 3),
            rows_per_s=round(self.rows / u.wall_s) if u.wall_s else None,
            rows_per_cpu_s=round(self.rows / total) if total else None,
            # the same without the kernel's part, which this VM's fresh pages move from run
            # to run (RESULTS, twenty-sixth session); with the kernel's share beside it
            rows_per_user_cpu_s=round(self.rows / u.user_cpu_s) if u.user_cpu_s else None,
            system_cpu_share=_r(u.system_cpu_s / total if total else None),
            cpu_s={k: round(v, 2) for k, v in cpu.items()},
            # first touches of fresh memory by role, in thousands (this VM's dearest work)
            minor_faults_k={k: round(v / 1000, 1) for k, v in self.role_minor_faults().items()},
            driver_cpu_share=_r(cpu["driver"] / total if total else None),
            assigner_cpu_share=_r(self.assigner_cpu_share(cpu)),
            commit_p50_s=_r(percentile(self.commit_s, 50)),
            commit_p95_s=_r(percentile(self.commit_s, 95)),
            task_busy_share=self.task_busy_share(),
        )
        if self.operator_cpu:
            out["operator_cpu_s"] = {k: round(v, 3) for k, v in self.operator_cpu.items()}
        if self.phases:
            # where a checkpoint's time goes (HoodieStreamWriter.checkpoint_phases): the
            # median of each phase over the section's checkpoints, in milliseconds
            out["phase_p50_ms"] = {
                k: round(1000 * float(percentile([p[k] for p in self.phases], 50) or 0), 1)
                for k in self.phases[0]
            }
        roles = set(self.pids.values())
        others: dict[str, float] = {}
        for p in u.processes:
            if p.pid not in roles and p.cpu_s >= 0.05:
                t = p.title[:40]
                others[t] = others.get(t, 0.0) + p.cpu_s
        # what "other" was (Ray Data / RayDP tasks, executors' JVMs, new workers' start-up)
        out["other_cpu_s"] = {
            t: round(c, 2) for t, c in sorted(others.items(), key=lambda x: -x[1])
        }
        if self.convert_s:
            # in write(): the executors' Spark job and the fetches; then the checkpoint
            out["spark_handoff_s"] = round(sum(self.convert_s), 3)
            out["checkpoint_s"] = round(sum(self.commit_s) - sum(self.convert_s), 3)
        return out


def _role_order(role: str) -> tuple[str, int]:
    """``assign-write-10`` after ``assign-write-9``."""
    head, _, tail = role.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (role, -1)


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(float(v), nd)


def _table_name(path: str, writers: int) -> str:
    return f"scaling_{path}_w{writers}"


def _dataset_inputs(ray: Any, commits: Sequence[pa.Table], blocks: int) -> list[Any]:
    """One materialized Dataset per commit, ``blocks`` blocks each, in the object store."""
    return [
        ray.data.from_arrow_refs([ray.put(p) for p in split_rows(c, blocks)]).materialize()
        for c in commits
    ]


def _spark_inputs(
    commits: Sequence[pa.Table], workdir: Path, executors: int, warmups: int = 1
) -> list[Any]:
    """One Spark DataFrame per commit, read from Parquet (written here, before any timing),
    ``executors`` partitions each (one per executor, so that every executor converts), after
    ``warmups`` hand-offs of them that are not timed."""
    import ray

    from hoodie_ray.ray.inputs import convert_spark
    from hoodie_ray.spark import init_spark

    spark = init_spark("hoodie_ray_scaling", num_executors=executors)
    frames = []
    for i, c in enumerate(commits):
        f = workdir / f"spark_commit_{i:03d}.parquet"
        pq.write_table(c, f)
        df = spark.read.parquet(str(f))
        frames.append(df.repartition(executors).cache() if executors > 1 else df.cache())
        frames[-1].count()  # Spark has the rows: the section measures the hand-off and write
    # warm-up hand-offs (the JVMs' JIT, Ray's workers for the fetch tasks): a stream in
    # steady state, as the Dataset path's topology is started before its section. One is
    # not enough: C2 compiles the conversion over the first few jobs (on 2 cores, 1 warm-up
    # left 3.2 CPU-s of the executor's and 2.3 of the driver's in the 6 timed commits, most
    # of it JIT compiler threads; 6 warm-ups 1.7-2.0 and 1.3-1.55)
    for i in range(max(1, warmups)):
        warm = convert_spark(frames[i % len(frames)])
        ray.get([block for block, _ in warm.parts])
        warm.release()
    return frames


def run_path(
    hr: Any,
    ray: Any,
    path_kind: str,
    workload: Workload,
    expected: pa.Table,
    table_dir: Path,
    writers: int,
    assigners: int,
    batch_rows: int,
    workdir: Path,
    chaining: bool = True,
    blocks: int = 0,
    pipelined: bool = False,
    spark_executors: int = 1,
    spark_warmups: int = 1,
    extra_options: dict[str, str] | None = None,
    seed_tasks: int = 0,
    repeat: int = 0,
    warm_commits: int = 0,
) -> PathRun:
    """Ingest ``workload``'s commits through one input path; gate; figures. ``seed_tasks``:
    the first commit is written before the timed section by a local writer of that many
    tasks (see ``--seed-tasks``), and only the others are timed. ``warm_commits``: the
    next commits go through the topology before the timed section (``--warm-commits``)."""
    seeded = 1 if seed_tasks else 0
    untimed = seeded + warm_commits
    run = PathRun(
        path_kind,
        writers,
        assigners,
        rows=workload.num_rows - sum(c.num_rows for c in workload.commits[:untimed]),
        chained=chaining and assigners == writers,
        repeat=repeat,
    )
    options = hoodie_options(
        workload, "parquet", writers, _table_name(path_kind, writers), 6, assigners
    )
    options["pipeline.operator-chaining"] = str(chaining).lower()
    options.update(extra_options or {})
    # Dataset blocks of the driver path's batch size: both paths hand the topology the same pieces
    if blocks > 0:
        batch_rows = -(-workload.commits[0].num_rows // blocks)
    blocks = max(1, -(-workload.commits[0].num_rows // batch_rows))
    try:
        if path_kind == "dataset":
            inputs: list[Any] = _dataset_inputs(ray, workload.commits, blocks)
        elif path_kind == "spark":
            inputs = _spark_inputs(workload.commits, workdir, spark_executors, spark_warmups)
        else:
            inputs = list(workload.commits)
        if seeded:
            first = {**options, "write.tasks": str(seed_tasks)}
            hr.write(workload.commits[0], str(table_dir), first, engine="local")
            if path_kind == "spark":
                inputs[0].unpersist()
            inputs = inputs[seeded:]
        log(f"{run.label}: {len(inputs)} commits of {workload.commits[0].num_rows} rows ...")
        if warm_commits >= len(inputs):
            raise ValueError(f"--warm-commits {warm_commits} leaves no commit to time")
        with hr.HoodieStreamWriter(str(table_dir), options) as w:

            def feed(item: Any) -> None:
                """One commit's input into the stream, as the path hands it over."""
                if path_kind == "driver":
                    for batch in iter_batches(item, batch_rows):
                        w.write(batch)
                else:  # a Dataset; a DataFrame the executors convert, the fetcher takes
                    w.write(item)

            w.start(workload.schema)
            for item in inputs[:warm_commits]:
                feed(item)
                if w.checkpoint() is None:
                    raise RuntimeError("a warm-up checkpoint committed nothing")
                if path_kind == "spark":
                    item.unpersist()
            wait_for_ray_idle()
            run.pids = dict(w.actor_pids())
            op0 = w.operator_cpu()
            phases0 = len(w.checkpoint_phases())
            handle = None
            with CpuMeter(ray_workers=True) as meter:
                for item in inputs[warm_commits:]:
                    c0 = time.perf_counter()
                    feed(item)
                    if path_kind == "spark":
                        run.convert_s.append(time.perf_counter() - c0)
                    if pipelined:
                        handle = w.checkpoint(wait=False)
                    elif w.checkpoint() is None:
                        raise RuntimeError("checkpoint() returned None after a non-empty commit")
                    run.commit_s.append(time.perf_counter() - c0)
                if handle is not None and handle.result() is None:
                    raise RuntimeError("the last pipelined checkpoint committed nothing")
            run.usage = meter.usage
            run.phases = w.checkpoint_phases()[phases0:]
            # a task restarted in the section counts from zero again: never below zero
            run.operator_cpu = {
                k: max(0.0, v - op0.get(k, 0.0)) for k, v in w.operator_cpu().items()
            }
    except Exception as e:
        run.error = f"{type(e).__name__}: {e}"
        log(f"{run.label} failed: {run.error}")
        return run
    finally:
        if path_kind == "spark":
            with contextlib.suppress(Exception):
                for df in inputs:
                    df.unpersist()
    run.gate = _gate(table_dir, expected, workload, run.label)
    f = run.figures()
    log(
        f"{run.label}: {fmt_num(f.get('rows_per_s'))} rows/s, "
        f"{fmt_num(f.get('rows_per_cpu_s'))} rows/CPU-s, driver share {f.get('driver_cpu_share')}"
    )
    return run


@dataclass
class Results:
    workload: dict[str, Any]
    runs: list[PathRun] = field(default_factory=list)
    peers: list[dict[str, Any]] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)

    def gate(self) -> bool:
        return all(r.gate is not None and r.gate.passed for r in self.runs if not r.error)

    def rows(self) -> list[dict[str, Any]]:
        out = []
        base: dict[str, float] = {}
        for r in self.runs:  # a round's 1-writer run first (rounds alternate the order)
            if r.writers == 1 and r.figures().get("rows_per_s"):
                base[f"{r.path}/{r.chained}/{r.repeat}"] = r.figures()["rows_per_s"]
        for r in self.runs:
            f = r.figures()
            rate = f.get("rows_per_s")
            f["speedup_vs_1"] = _r(ratio(rate, base.get(f"{r.path}/{r.chained}/{r.repeat}")))
            out.append(f)
        return out

    def summary(self) -> dict[str, Any]:
        rows = self.rows()

        def matching(path: str, writers: int) -> list[dict[str, Any]]:
            # the chained runs where there are both (the default topology)
            found = [f for f in rows if f["path"] == path and f["writers"] == writers]
            chained = [f for f in found if f.get("chained")]
            return chained or found

        def pick(path: str, writers: int, key: str) -> Any:
            # the median over --repeat's rounds (a number; else the first round's value)
            values = [f.get(key) for f in matching(path, writers)]
            numbers = [v for v in values if isinstance(v, (int, float)) and v is not None]
            if not numbers:
                return values[0] if values else None
            return _r(statistics.median(numbers)) if len(numbers) > 1 else numbers[0]

        ws = sorted({f["writers"] for f in rows})
        top = max(ws, default=None)
        out: dict[str, Any] = {}
        for w in ws:
            out[f"dataset_vs_driver_cpu_w{w}"] = _r(
                ratio(pick("dataset", w, "rows_per_cpu_s"), pick("driver", w, "rows_per_cpu_s"))
            )
        for path in PATHS:
            if top is not None and top != 1:
                for key, prefix in (("rows_per_cpu_s", ""), ("rows_per_user_cpu_s", "user_")):
                    name = f"{prefix}cpu_w{top}_vs_w1_{path}"
                    out[name] = _r(ratio(pick(path, top, key), pick(path, 1, key)))
                    pairs = {
                        (f["repeat"], f["writers"]): f.get(key)
                        for f in matching(path, top) + matching(path, 1)
                    }
                    rounds = sorted({r for r, _ in pairs})
                    if len(rounds) > 1:  # each round's own ratio: the spread the median hides
                        out[f"{name}_each"] = [
                            _r(ratio(pairs.get((r, top)), pairs.get((r, 1)))) for r in rounds
                        ]
            shares = [pick(path, w, "driver_cpu_share") for w in ws]
            shares = [s for s in shares if s is not None]
            if shares:
                out[f"driver_cpu_share_max_{path}"] = max(shares)
            if top is not None:
                out[f"speedup_{path}_w{top}"] = pick(path, top, "speedup_vs_1")
                out[f"rows_per_s_{path}_w{top}"] = pick(path, top, "rows_per_s")
            a = [pick(path, w, "assigner_cpu_share") for w in ws]
            a = [s for s in a if s is not None]
            if a:
                out[f"assigner_cpu_share_max_{path}"] = max(a)
        for p in self.peers:
            if p.get("rows_per_s") and p.get("writers") == top:
                mine = pick("dataset", top, "rows_per_s")
                out[f"dataset_vs_{p['key']}_w{top}"] = _r(ratio(mine, p["rows_per_s"]))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": "scaling",
            "gate": "pass" if self.gate() else "fail",
            "workload": self.workload,
            "machine": self.machine,
            "goals": GOALS,
            "summary": self.summary(),
            "runs": self.rows(),
            "peers": self.peers,
        }


def _dash(v: Any) -> Any:
    return "-" if v is None else v


def render(res: Results) -> str:
    headers = [
        "path",
        "w",
        "a",
        "chain",
        "rows/s",
        "x1",
        "rows/CPU-s",
        "sys",
        "driver",
        "coord",
        "assign",
        "write",
        "other",
        "drv share",
        "asg share",
        "p95 s",
        "gate",
    ]
    body = []
    for f in res.rows():
        c = f.get("cpu_s") or {}
        body.append(
            [
                f["path"],
                f["writers"],
                f["assigners"],
                "y" if f.get("chained") else "n",
                fmt_num(f.get("rows_per_s")),
                f.get("speedup_vs_1"),
                fmt_num(f.get("rows_per_cpu_s")),
                f.get("system_cpu_share"),
                c.get("driver"),
                c.get("coordinator"),
                c.get("assigner") or c.get("assign-write"),
                c.get("writer") if not f.get("chained") else "(chained)",
                c.get("other"),
                f.get("driver_cpu_share"),
                # chained: from the tasks' own accounting by operator (sections only)
                f.get("assigner_cpu_share"),
                f.get("commit_p95_s"),
                f.get("gate") or f.get("error"),
            ]
        )
    lines = [text_table(headers, [[_dash(v) for v in row] for row in body])]
    for f in res.rows():
        if f.get("phase_p50_ms"):
            ph = ", ".join(f"{k} {v}" for k, v in f["phase_p50_ms"].items())
            lines.append(f"{f['path']} w{f['writers']}: checkpoint phases p50 (ms): {ph}")
        if f.get("task_busy_share"):
            busy = ", ".join(f"{k} {v}" for k, v in f["task_busy_share"].items())
            lines.append(f"{f['path']} w{f['writers']}: task busy share of the wall time: {busy}")
    for p in res.peers:
        lines.append(
            f"peer {p.get('name')} w{p.get('writers', '-')}: {fmt_num(p.get('rows_per_s'))} rows/s"
            + (f" ({p['error']})" if p.get("error") else f", gate {p.get('gate')}")
        )
    lines.append(json.dumps(res.summary(), indent=1))
    return "\n".join(lines)


def run_peers(
    kinds: Sequence[str], workload: Workload, writers: Sequence[int], workdir: Path, timeout: float
) -> list[dict[str, Any]]:
    """The optional peers; each failure is reported in its entry, never raised."""
    out: list[dict[str, Any]] = []
    if "delta" in kinds:
        try:
            m = delta_merge_peer(workload, workdir)
            out.append(
                {
                    "key": "delta_merge",
                    "name": "delta-rs merge",
                    "writers": 1,
                    "rows_per_s": round(m.rows_per_s) if m.rows_per_s else None,
                    "rows_per_cpu_s": round(m.rows_per_cpu_s) if m.rows_per_cpu_s else None,
                    "final_rows": m.extra.get("final_rows"),
                    "gate": "pass" if m.extra.get("final_rows") == workload.num_keys else "fail",
                }
            )
        except Exception as e:
            out.append({"key": "delta_merge", "name": "delta-rs merge", "error": str(e)})
    if "paimon" in kinds:
        try:
            from benchmarks.paimon_peer import ensure_paimon_venv, run_paimon_peer
        except ImportError as e:
            out.append({"key": "paimon", "name": "pypaimon write_ray", "error": str(e)})
            return out
        if ensure_paimon_venv() is None:
            out.append({"key": "paimon", "name": "pypaimon write_ray", "error": "no environment"})
            return out
        files = []
        for i, c in enumerate(workload.commits):
            f = workdir / f"paimon_commit_{i:03d}.parquet"
            pq.write_table(c, f)
            files.append(f)
        for w in writers:
            res = run_paimon_peer(
                files,
                workdir / f"paimon_w{w}",
                writers=w,
                buckets=max(w, 1) * 2,
                timeout_s=timeout,
            )
            out.append({"key": "paimon", "writers": w, **res})
    return out


#: ``--chaining``: the pipeline.operator-chaining settings each path runs with.
CHAINING = {"on": (True,), "off": (False,), "both": (True, False)}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.scaling",
        description="Every input path at 1..N writers: rows/s, speed-up, CPU by role.",
    )
    p.add_argument("--quick", action="store_true", help="mor-q1 --quick sizes (200K keys)")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--writers", default="1,2,4,8", help="writer counts, e.g. 1,2,4,8,16")
    p.add_argument("--assigners", type=int, default=0, help="assigners (0: as many as writers)")
    p.add_argument("--paths", default=",".join(PATHS), help="driver,dataset,spark")
    p.add_argument(
        "--chaining",
        choices=sorted(CHAINING),
        default="on",
        help="assigner i and writer i in one actor (pipeline.operator-chaining): on, off, both",
    )
    p.add_argument(
        "--pipelined", action="store_true", help="checkpoint(wait=False) for every commit"
    )
    p.add_argument("--peers", default="delta,paimon", help="delta,paimon ('' for none)")
    p.add_argument(
        "--spark-rows", type=int, default=0, help="rows per Spark commit (0: the whole commit)"
    )
    p.add_argument(
        "--spark-executors",
        type=int,
        default=1,
        help="RayDP executors (1 CPU each); each commit's DataFrame has one partition per executor",
    )
    p.add_argument(
        "--spark-warmups",
        type=int,
        default=5,
        help="untimed hand-offs before the Spark section (the JVMs' JIT settling)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of every width, alternating their order; the summary's figures are the "
        "medians over the rounds (ratios of medians), with each round's own 8/1 ratio beside",
    )
    p.add_argument("--batch-rows", type=int, default=DEFAULT_BATCH_ROWS)
    p.add_argument("--blocks", type=int, default=0, help="pieces per commit (0: by --batch-rows)")
    p.add_argument(
        "--seed-tasks",
        type=int,
        default=0,
        help="write the first commit untimed with a local writer of this many tasks, as "
        "another engine's table (its file groups homed to none of the topology's tasks: most "
        "upserted rows cross tasks); 0: the topology writes every commit",
    )
    p.add_argument(
        "--warm-commits",
        type=int,
        default=0,
        help="commits written through the topology before the timed section (after "
        "--seed-tasks' one): the section then meets warm task processes, as a long stream does",
    )
    add_option_argument(
        p,
        "a Hudi option for every table hoodie_ray writes (repeatable), added last, e.g. "
        "taskmanager.numberOfTaskSlots=4",
    )
    p.add_argument("--peer-timeout", type=float, default=1800.0)
    hidden = argparse.SUPPRESS
    p.add_argument("--keys", type=int, default=None, help=hidden)
    p.add_argument("--commits", type=int, default=None, help=hidden)
    p.add_argument("--workdir", type=Path, default=None, help=hidden)
    p.add_argument("--seed", type=int, default=20240601, help=hidden)
    args = p.parse_args(argv)
    args.writers = [int(x) for x in args.writers.split(",") if x.strip()]
    args.paths = [x.strip() for x in args.paths.split(",") if x.strip()]
    args.peers = [x.strip() for x in args.peers.split(",") if x.strip()]
    bad = [x for x in args.paths if x not in PATHS]
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if args.warm_commits < 0:
        p.error("--warm-commits must not be negative")
    if bad or not args.writers or min(args.writers) < 1:
        p.error(f"--paths: unknown {bad}" if bad else "--writers must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import ray

    import hoodie_ray as hr

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="hoodie_scaling_"))
    workdir.mkdir(parents=True, exist_ok=True)
    _, started = _init_ray()
    try:
        workload = generate_workload(
            "base", quick=args.quick, seed=args.seed, num_keys=args.keys, num_commits=args.commits
        )
        expected = expected_snapshot(workload)
        res = Results(workload.summary(), machine=machine_info())
        res.workload["blocks_per_commit"] = args.blocks or "by batch rows"
        res.workload["pipelined"] = args.pipelined
        res.workload["seed_tasks"] = args.seed_tasks
        res.workload["warm_commits"] = args.warm_commits
        res.workload["options"] = dict(args.option)
        for kind in args.paths:
            wl, exp = workload, expected
            if kind == "spark" and args.spark_rows:
                wl = _spark_workload(workload, args.spark_rows)
                exp = expected_snapshot(wl)
                res.workload["spark"] = wl.summary()
            if kind == "spark":
                res.workload["spark_executors"] = args.spark_executors
                res.workload["spark_warmups"] = args.spark_warmups
            for chaining, repeat in itertools.product(CHAINING[args.chaining], range(args.repeat)):
                # rounds alternate the widths' order: the machine's drift falls on both ends
                for w in args.writers if repeat % 2 == 0 else list(reversed(args.writers)):
                    table_dir = workdir / f"{kind}_w{w}"
                    run = run_path(
                        hr,
                        ray,
                        kind,
                        wl,
                        exp,
                        table_dir,
                        w,
                        args.assigners or w,
                        args.batch_rows,
                        workdir,
                        chaining,
                        args.blocks,
                        args.pipelined,
                        args.spark_executors,
                        args.spark_warmups,
                        dict(args.option),
                        args.seed_tasks,
                        repeat,
                        args.warm_commits,
                    )
                    res.runs.append(run)
                    shutil.rmtree(table_dir, ignore_errors=True)
        if args.peers:
            res.peers = run_peers(args.peers, workload, args.writers, workdir, args.peer_timeout)
        print(render(res))
        if args.json:
            print(json.dumps(res.to_json()))
        return 0 if res.gate() else 1
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        if started:
            if "spark" in args.paths:  # this run's Spark (on this run's Ray), before Ray goes
                from hoodie_ray.spark import stop_spark

                with contextlib.suppress(Exception):
                    stop_spark()
            ray.shutdown()


def _spark_workload(workload: Workload, rows_per_commit: int) -> Workload:
    """The Spark path's quick size: the first ``rows_per_commit`` rows of each commit."""
    import dataclasses

    commits = tuple(c.slice(0, rows_per_commit) for c in workload.commits)
    keys = pa.concat_tables(commits).column(workload.key_field)
    import pyarrow.compute as pc

    return dataclasses.replace(
        workload, commits=commits, num_keys=len(pc.unique(keys)), description="spark quick size"
    )


if __name__ == "__main__":
    sys.exit(main())
