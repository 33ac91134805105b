"""The Ray actors of the write topology: thin holders of one core object each.

* ``<table>/coordinator``: :class:`~hoodie_ray.job.coordinator.Coordinator`
* ``<table>/assigner-<i>``: :class:`~hoodie_ray.write.bucket_assigner.BucketAssigner`
* ``<table>/writer-<i>``: :class:`~hoodie_ray.write.stream_writer.StreamWriteFunction`
* ``<table>/assign-write-<i>``: both of task ``i`` in one process, Flink's operator chaining
  (``pipeline.operator-chaining``, when assigners and writers are as many): an assigner's rows
  for its own (home) writer never leave the process

Each actor class is a thin Ray wrapper of a plain task class (:class:`AssignTask`,
:class:`WriteTask`, :class:`AssignWriteTask`).

Every actor rebuilds its state from the table when it starts, so a restarted actor is as good
as the one it replaces; the driver replays the input of the open checkpoint after a failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
import time
from collections.abc import Collection, Iterator
from typing import Any

import pyarrow as pa
import ray

from hoodie_ray.file_group.view import FileSlice
from hoodie_ray.job.client import build_assigner, route_pieces
from hoodie_ray.job.coordinator import Coordinator
from hoodie_ray.job.setup import TableSetup
from hoodie_ray.ray import metrics
from hoodie_ray.ray.calls import RoutedPartLost
from hoodie_ray.ray.compactor import CompactorPool, ray_task_map_when_free
from hoodie_ray.ray.runtime import job_table, set_actor_memory_pool
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.metadata import HoodieWriteStat
from hoodie_ray.write.bucket_assigner import AssignerConfig, WriteProfile
from hoodie_ray.write.context import WriteContext
from hoodie_ray.write.lock import ProcessId
from hoodie_ray.write.records import warm_up
from hoodie_ray.write.routing import WriterOutbox, outbox_rows, split_by_writer
from hoodie_ray.write.stream_writer import StreamWriteFunction

#: The input pieces of a route call: ``(i, rows)``, the ``[start, stop)`` rows (None: all)
#: of the call's i-th block argument.
Pieces = list[tuple[int, tuple[int, int] | None]]


def _write_stream(sink: Any, table: pa.Table) -> None:
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)


@dataclasses.dataclass(frozen=True)
class RoutedParts:
    """Tables for tasks as Arrow IPC streams in one buffer: one object in Ray's object store
    for all of them (creating one costs ~2 ms of CPU here, whatever its size), written and
    read by Arrow in C++ (Ray's own Arrow serialisation walks every column in Python). A
    route call's parts, one per assigner task (:meth:`of`), and the rows a chained task held
    for its peers' writers at a checkpoint's barrier, any number per peer (:meth:`of_held`:
    on a table another topology wrote most rows cross tasks). Each task is handed the whole
    object and reads its own with no copy. ``streams``: ``(task, start, end)`` of each
    table's stream in ``data``."""

    streams: tuple[tuple[int, int, int], ...]
    data: pa.Buffer
    #: the tasks whose parts stayed in the process that made this object (``pid``), under
    #: ``token`` in its :data:`_KEPT` (:meth:`of` with ``local``)
    kept: tuple[int, ...] = ()
    pid: int = 0
    token: int = 0

    @classmethod
    def of(cls, parts: list[pa.Table], local: Collection[int] = ()) -> RoutedParts:
        """The ``i``-th part for task ``i``. The parts of the ``local`` tasks (those living in
        this process) stay here and never enter the object: their tasks take them from this
        process's :data:`_KEPT` (Ray's object store faults in fresh pages for every object
        it holds, ~1.4 ms a MB: on two task hosts half a route call's rows skip it)."""
        kept = tuple(i for i in sorted(set(local)) if 0 <= i < len(parts))
        packed = cls.of_held({i: [p] for i, p in enumerate(parts) if i not in kept})
        if not kept:
            return packed
        token = next(_KEPT_TOKENS)
        _KEPT[token] = {i: parts[i] for i in kept}
        return dataclasses.replace(packed, kept=kept, pid=os.getpid(), token=token)

    @classmethod
    def of_held(cls, held: dict[int, list[pa.Table]]) -> RoutedParts:
        """The tables held for each task, in order. The streams are sized first (a dry run
        that copies nothing) and written into one buffer of that size: a growing buffer
        would copy them again each time it doubles, into fresh pages (cold pages made
        packing a route call's 6 MB cost 10-20 ms, not 2)."""
        order = [(task, t) for task, tables in sorted(held.items()) for t in tables]
        streams = []
        start = 0
        for task, t in order:
            sizer = pa.MockOutputStream()
            _write_stream(sizer, t)
            streams.append((task, start, start + sizer.size()))
            start += sizer.size()
        data = pa.allocate_buffer(start)
        sink = pa.FixedSizeBufferWriter(data)
        for _, t in order:
            _write_stream(sink, t)
        return cls(tuple(streams), data)

    def tables(self, task: int) -> list[pa.Table]:
        """The tables for ``task``, in the order they were given."""
        return [
            pa.ipc.open_stream(self.data.slice(start, end - start)).read_all()
            for t, start, end in self.streams
            if t == task
        ]

    def part(self, i: int) -> pa.Table:
        """Task ``i``'s part (:meth:`of`); a kept one is taken once, in the process that
        routed it (elsewhere, or taken already: :class:`RoutedPartLost`)."""
        if i in self.kept:
            parts = _KEPT.get(self.token) if os.getpid() == self.pid else None
            if parts is None or i not in parts:
                raise RoutedPartLost(
                    f"task {i}'s routed rows stayed in process {self.pid}, which it is not in"
                )
            table = parts.pop(i)
            if not parts:
                del _KEPT[self.token]
            return table
        (table,) = self.tables(i)
        return table


#: Routed parts kept in the process that routed them, for the tasks living there
#: (:meth:`RoutedParts.of`), by token. A process runs its calls in the driver's order and the
#: driver routes a checkpoint's input before its barrier, so at a barrier every part routed
#: before was taken, but a failed attempt's: :func:`drop_kept_parts` then.
_KEPT: dict[int, dict[int, pa.Table]] = {}
_KEPT_TOKENS = itertools.count(1)


def drop_kept_parts() -> None:
    """Forget the routed parts kept in this process (a checkpoint's barrier)."""
    _KEPT.clear()


#: The operators whose CPU a task accounts (:class:`OperatorCpu`): preparing input (keys,
#: partition paths), assigning buckets, buffering and writing.
OPERATORS = ("route", "assign", "write")


class OperatorCpu:
    """CPU seconds of one task's work by operator (:data:`OPERATORS`): what a chained task
    spent assigning and what writing, which its process's CPU cannot tell apart. A section
    inside another (the home writer's ``write`` called from ``assign``) counts in its own
    operator only. Process CPU (Arrow's threads count), read at each section's ends."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(OPERATORS, 0.0)
        self._inner: list[float] = []

    @contextlib.contextmanager
    def section(self, op: str) -> Iterator[None]:
        t0 = time.process_time()
        self._inner.append(0.0)
        try:
            yield
        finally:
            spent = time.process_time() - t0
            self.seconds[op] += spent - self._inner.pop()
            if self._inner:
                self._inner[-1] += spent


@ray.remote
class CoordinatorActor:
    """Hands out instants, commits checkpoints, recovers the table on start."""

    def __init__(
        self,
        path: str,
        options: Any,
        storage_options: Any,
        lock_owner: str,
        lock_job: ProcessId | None = None,
    ) -> None:
        self.core = Coordinator(
            path, options, storage_options, lock_owner=lock_owner, lock_job=lock_job
        )
        set_actor_memory_pool(self.core.wc.arrow_memory_pool)
        self.core.index_map = ray_task_map_when_free
        self.table = ""
        self._job = lock_owner.rsplit(":", 1)[-1]  # under OCC part of the compactors' names
        self._pool: CompactorPool | None = None
        self._watched: list[Any] = []  # background handles a thread waits on (commit_finished)

    def open(self, input_schema: pa.Schema | None) -> TableSetup:
        setup = self.core.open(input_schema)
        self.table = setup.table_config.name
        return setup

    def setup(self) -> TableSetup | None:
        return self.core.setup

    def claim_input_task(self, task: int) -> None:
        self.core.claim_input_task(task)

    def refix_schema(self, data_schema: pa.Schema) -> TableSetup:
        return self.core.refix_schema(data_schema)

    def switch_operation(self, operation: str) -> TableSetup:
        return self.core.switch_operation(operation)

    def start_checkpoint(self, num_writers: int) -> tuple[Any, ...]:
        """A new instant, the write profile its assigners start from, the frozen log files,
        (OCC) the writes other writers completed since the assigners loaded their key index,
        then the file slices of each of the ``num_writers`` writers (``num_returns=4 +
        num_writers``: each writer fetches its own). Under OCC the instant is started first:
        the conflict check at commit covers whatever completed after the slices were listed."""
        others: list[str] = []
        if self.core.wc.occ:
            instant = self.core.start_instant()
            others = self.core.written_by_others()
            slices = self.core.latest_slices()
            profile = self.core.profile(slices)
        else:
            slices = self.core.latest_slices()
            profile = self.core.profile(slices)
            instant = self.core.start_instant()
        per_writer = self.core.slices_by_writer(slices, profile, num_writers)
        return (instant, profile, self.core.frozen_logs(), others, *per_writer)

    def split_slices(self, slices: list[FileSlice], profile: WriteProfile, num_writers: int) -> Any:
        """``slices`` split by writer task (``num_returns=num_writers``)."""
        per_writer = self.core.slices_by_writer(slices, profile, num_writers)
        return tuple(per_writer) if num_writers > 1 else per_writer[0]

    def mark_loaded(self) -> None:
        """OCC: the assigners (re)load their key index from the table as it is now."""
        self.core.mark_loaded()

    def latest_slices(self) -> list[FileSlice]:
        return self.core.latest_slices()

    def profile(self) -> WriteProfile:
        return self.core.profile()

    def assigner_config(self, task_id: int, num_tasks: int) -> AssignerConfig:
        return self.core.assigner_config(task_id, num_tasks)

    def commit(self, instant: str, stats: list[HoodieWriteStat]) -> Any:
        """Commit a checkpoint; then, at this barrier, the table services the core decides
        (a finished compaction committed, the next one run or started, cleaning, archival)."""
        result = self.core.commit(instant, stats)
        metrics.record_commit(
            self.table, self.core.commit_latencies[-1] if self.core.commit_latencies else 0.0
        )
        try:
            pending = self.core.after_commit(self._runner())
        except Exception as e:  # a table-service failure never fails the write; it is retried
            logging.getLogger("hoodie_ray").warning("table services failed: %s", e)
            return result
        finally:
            self._watch_background()
        metrics.gauge_pending_compactions(self.table, pending)
        metrics.gauge_pending_clusterings(self.table, self.core.pending_clusterings())
        return dataclasses.replace(result, services=self.core.last_services)

    def _watch_background(self) -> None:
        """Have a background compaction or clustering started at a barrier call
        :meth:`commit_finished` once its tasks are done, so it commits then, not at the next
        barrier (a parked topology may idle for minutes)."""
        handles = self.core.background_handles()
        self._watched = [w for w in self._watched if any(w is h for h in handles)]
        if self._pool is None:
            return
        me = ray.get_runtime_context().current_actor
        for handle in handles:
            if not any(handle is w for w in self._watched):
                self._watched.append(handle)
                self._pool.when_done(handle, me.commit_finished.remote)

    def commit_finished(self) -> None:
        """Commit the background compaction and clustering that finished, between
        checkpoints (:meth:`Coordinator.commit_finished`)."""
        try:
            changed = bool(self.core.commit_finished(self._pool))
        except Exception as e:  # as at a barrier: retried by the next checkpoint's services
            logging.getLogger("hoodie_ray").warning("table services failed: %s", e)
            changed = True  # rolled back
        self._watch_background()
        if changed:
            metrics.gauge_pending_compactions(self.table, len(self.core.pending_compactions()))
            metrics.gauge_pending_clusterings(self.table, self.core.pending_clusterings())

    def commit_flight(self, instant: str, num_tasks: int, *results: Any) -> Any:
        """A pipelined checkpoint's commit (:meth:`commit`): ``results`` are the write
        statuses of its ``num_tasks`` tasks, then the results of its input's calls. Ray
        resolves them all before this runs, so a failed call fails the commit unrun:
        nothing of a checkpoint whose input failed is committed."""
        return self.commit(instant, [s for stats in results[:num_tasks] for s in stats])

    def record_phases(self, phases: dict[str, float]) -> None:
        """The driver's timing of the last checkpoint, into the phase histogram."""
        metrics.record_checkpoint_phases(self.table, phases)

    def _runner(self) -> CompactorPool:
        if self._pool is None:
            # under OCC another job's topology may write this table: its compactors are its own
            table = job_table(self.table, self.core.path)
            name = f"{table}/{self._job}" if self.core.wc.occ else table
            self._pool = CompactorPool(self.core.wc, name, self.table)
        return self._pool

    def finish_compaction(self) -> None:
        """Wait for a running compaction and commit it (the writer is closing)."""
        try:
            self.core.finish_compaction(self._pool)
        finally:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None

    def is_completed(self, instant: str) -> bool:
        return self.core.is_completed(instant)

    def rollback(self, instant: str) -> None:
        self.core.rollback(instant)

    def commit_latencies(self) -> list[float]:
        return list(self.core.commit_latencies)

    def close(self, discard_unborn: bool = False) -> None:
        self.core.close(discard_unborn)

    def pid(self) -> int:
        return os.getpid()


class _AccountedTask:
    """A task whose CPU is accounted by operator (:class:`OperatorCpu`)."""

    cpu: OperatorCpu

    def operator_cpu(self) -> dict[str, float]:
        """CPU seconds this task spent per operator so far (:class:`OperatorCpu`)."""
        return dict(self.cpu.seconds)


class AssignTask(_AccountedTask):
    """Holds the key index of one assigner task; tags rows, splits them by writer and sends
    them on to the writers itself (in batches: :class:`~hoodie_ray.write.routing.WriterOutbox`),
    so the driver submits no call per writer. ``local``: the writer task living in this
    process (chained), which gets its rows by a plain call."""

    def __init__(
        self,
        setup: TableSetup,
        config: AssignerConfig,
        profile: WriteProfile,
        slices: list[FileSlice],
        writers: list[Any],
        local: WriteTask | None = None,
    ) -> None:
        ctx = setup.context
        set_actor_memory_pool(ctx.write_config.arrow_memory_pool)
        warm_up()  # compiled index kernels loaded at start, not in the first batch
        self.cpu = OperatorCpu()  # chained: replaces WriteTask's, unused until the first call
        table = HoodieTable(ctx.storage.base_uri, ctx.storage, ctx.table_config)
        t0 = time.perf_counter()
        self.core = build_assigner(table, config, profile, slices)
        self.bootstrap_s = time.perf_counter() - t0  # the key index loaded from the table
        self.table = ctx.table_config.name
        self.setup = setup
        self.task_id = config.task_id
        self.writers = writers
        self._local = local
        self._bucket_index = config.index_type == "BUCKET"
        wc = ctx.write_config
        self.outbox = WriterOutbox(len(writers), outbox_rows(wc.write_batch_rows, len(writers)))
        self._sent: list[Any] = []  # write calls to the writers not yet known to be done
        self._peer_held: dict[int, list[pa.Table]] = {}  # chained: rows for peers' writers
        #: chained tasks hosted in this process (task slots), by task id: their writers get
        #: this task's rows for them by a plain call as they are tagged, never at a barrier
        self.co_hosted: dict[int, Any] = {}
        self._max_sent = wc.max_inflight_batches * len(writers)
        self._gauge_at = 0.0
        self._index_counted = False
        self._gauge_index()

    def _gauge_index(self, every_s: float = 0.0) -> None:
        """The index-size gauge set to the index's key count (counting walks the index: after
        a batch, at most once every ``every_s`` seconds; at a checkpoint's barrier where a
        batch since was not counted, so an idle writer's gauge is not left behind)."""
        now = time.monotonic()
        if now - self._gauge_at >= every_s:
            self._gauge_at = now
            self._index_counted = True
            metrics.gauge_index_size(self.table, self.task_id, len(self.core.index))

    def _gauge_uncounted(self) -> None:
        """At a checkpoint's barrier: the gauge set where a batch since its last count changed
        the index (the count after a batch is at most once a second)."""
        if not self._index_counted:
            self._gauge_index()

    def set_setup(self, setup: TableSetup) -> None:
        """The table schema evolved: input routed from now on is prepared against it."""
        self.setup = setup

    def route(self, pieces: Pieces, num_tasks: int, *blocks: Any) -> Any:
        """Input pieces prepared and split by assigner task (:class:`RoutedParts`), then their
        row count (``num_returns=2``; the count is what a driver waits on to learn that the
        input was accepted without fetching it): the per-row work of the input (normalising,
        keys, partition paths) runs here, in the assigners, never in the driver
        (:func:`~hoodie_ray.job.client.route_pieces`). ``pieces``: ``(i, rows)``, the
        ``[start, stop)`` rows of ``blocks[i]`` (None: all of them), in input order."""
        with self.cpu.section("route"):
            parts = route_pieces(self.setup, [(blocks[i], rows) for i, rows in pieces], num_tasks)
            # the parts of the tasks in this process stay here; Ray's object store holds the rest
            packed = RoutedParts.of(parts, local={self.task_id, *self.co_hosted})
        return packed, sum(p.num_rows for p in parts)

    def route_assign(self, pieces: Pieces, *blocks: Any) -> tuple[int, int]:
        """The one-assigner topology: input pieces prepared and assigned in one call."""
        with self.cpu.section("route"):
            (prepared,) = route_pieces(self.setup, [(blocks[i], rows) for i, rows in pieces], 1)
        return self.assign(prepared)

    def assign(self, *batches: pa.Table | RoutedParts) -> tuple[int, int]:
        """Tag rows (parts routed from one or more input blocks, in arrival order) and send
        them on to the writers (when their outbox is full); the rows, and those of them
        tagged for another task's writer (chained: the driver's barrier waits for those).
        A :class:`RoutedParts` gives this task's part."""
        batches = tuple(b.part(self.task_id) if isinstance(b, RoutedParts) else b for b in batches)
        if len(batches) == 1:
            batch = batches[0]
        else:
            try:
                batch = pa.concat_tables(batches)
            except pa.ArrowInvalid:  # parts prepared before and after a schema change
                each = [self.assign(b) for b in batches]
                return sum(r for r, _ in each), sum(p for _, p in each)
        with self.cpu.section("assign"):
            return self._assign(batch)

    def _assign(self, batch: pa.Table) -> tuple[int, int]:
        tagged = self.core.assign_batch(batch)
        metrics.count_records(self.table, "assigner", batch.num_rows, tagged.num_rows, self.task_id)
        self._index_counted = False
        self._gauge_index(every_s=1.0)
        parts = split_by_writer(
            tagged, len(self.writers), self.core.profile.writer_plan, self._bucket_index
        )
        for j, peer in self.co_hosted.items():
            if j != self.task_id and parts[j].num_rows:
                # Calls reach a host's tasks in the driver's order, so the peer has begun
                # this instant and has not flushed it: its writer takes the rows now (one
                # key's rows all come from one assigner task, in order).
                with self.cpu.section("write"):
                    peer.write_rows(parts[j])
                parts[j] = parts[j].slice(0, 0)
        self._send(self.outbox.add(parts))
        home = parts[self.task_id].num_rows if self._local is not None else tagged.num_rows
        elsewhere = sum(p.num_rows for p in parts) - home
        return batch.num_rows, elsewhere

    def flush_writers(self) -> list[Any]:
        """Send what the outbox holds; the write calls still in flight, which the driver
        waits for (the checkpoint barrier: the writers flush next). A chained task must not
        wait for them itself: its peer may be waiting for this task's writer."""
        drop_kept_parts()
        self._gauge_uncounted()
        self._send(self.outbox.drain())
        held, self._peer_held = self._peer_held, {}
        for j, tables in held.items():
            self._sent.append(self.writers[j].write.remote(*tables))
        sent, self._sent = self._sent, []
        if self._local is None:
            ray.get(sent)
            return []
        return sent

    def finish(self, *peer_rows: RoutedParts | None) -> list[HoodieWriteStat]:
        """Chained, the barrier and the flush in one call: the outbox drained into the home
        writer, the rows other tasks tagged for it (``peer_rows``: their :meth:`barrier`
        parts, or none where the driver knows there are none) written, then the flush; the
        write statuses."""
        assert self._local is not None
        drop_kept_parts()
        self._gauge_uncounted()
        self._send(self.outbox.drain())
        assert not self._peer_held, "finish() with rows held for a peer: barrier() first"
        rows = [t for part in peer_rows if part is not None for t in part.tables(self.task_id)]
        if rows:
            self._local.write(*rows)
        return self._local.flush()

    def barrier(self) -> tuple[int, RoutedParts | None]:
        """Chained, a checkpoint's barrier where rows crossed tasks: the outbox drained into
        the home writer, and the rows held for the peers returned in one object (None: none)
        with their count (``num_returns=2``: the count is what the driver waits on), for the
        driver to hand to every peer's :meth:`finish`."""
        self._send(self.outbox.drain())
        held, self._peer_held = self._peer_held, {}
        rows = sum(t.num_rows for tables in held.values() for t in tables)
        return rows, RoutedParts.of_held(held) if held else None

    def _send(self, due: list[tuple[int, list[pa.Table]]]) -> None:
        for j, tables in due:
            if self._local is not None and j == self.task_id:
                self._local.write(*tables)  # chained: the home writer is in this process
            elif self._local is not None:
                # chained: a peer's rows wait for the checkpoint barrier (flush_writers sends
                # them, barrier hands them to the driver), so nothing reaches a peer's writer
                # but in the order the driver gives its calls
                self._peer_held.setdefault(j, []).extend(tables)
            else:
                self._sent.append(self.writers[j].write.remote(*tables))
        if len(self._sent) > self._max_sent:  # backpressure: the writers lag behind
            if self._local is not None:
                # chained peers never block on each other (a cycle would deadlock): only
                # the finished calls are dropped, and their failures surface
                done, self._sent = ray.wait(self._sent, num_returns=len(self._sent), timeout=0)
            else:
                done, self._sent = ray.wait(
                    self._sent, num_returns=len(self._sent) - self._max_sent
                )
            ray.get(done)  # a writer's failure surfaces here

    def start_checkpoint(self, profile: WriteProfile) -> None:
        self.core.reset_profile(profile)

    def checkpoint_done(self) -> None:
        self.core.checkpoint_done()
        self._gauge_uncounted()  # the barrier counted it: the index is as it left it

    def index_stats(self) -> dict[str, int]:
        """Keys in this task's key index, the bytes they take (``KeyIndex.nbytes``) and the
        milliseconds this actor took to build its assigner (index bootstrap included)."""
        return {
            "keys": len(self.core.index),
            "bytes": self.core.index.nbytes(),
            "bootstrap_ms": round(self.bootstrap_s * 1000),
        }

    def pid(self) -> int:
        return os.getpid()


class WriteTask(_AccountedTask):
    """Buffers and writes the file groups routed to one writer task."""

    def __init__(self, context: WriteContext, task_id: int, attempt: int) -> None:
        set_actor_memory_pool(context.write_config.arrow_memory_pool)
        warm_up()  # compiled kernels (the base files' bloom filters) loaded at start
        self.write_fn = StreamWriteFunction(context, task_id, attempt)
        self.table = context.table_config.name
        self.cpu = OperatorCpu()

    def start_instant(
        self, instant: str, slices: list[FileSlice], frozen: set[tuple[str, str]]
    ) -> None:
        self.write_fn.start_instant(
            instant, {(s.partition_path, s.file_id): s for s in slices}, frozen
        )

    def set_context(self, context: WriteContext) -> None:
        """The table schema evolved (see ``HoodieStreamWriter._evolve``)."""
        self.write_fn.set_context(context)

    def write(self, *tables: pa.Table) -> int:
        with self.cpu.section("write"):
            return self.write_rows(*tables)

    def write_rows(self, *tables: pa.Table) -> int:
        """:meth:`write` with no CPU accounting of its own: a co-hosted task that calls it
        counts the CPU in its own ``write`` section."""
        n = 0
        for t in tables:
            if t.num_rows:
                self.write_fn.write(t)
                n += t.num_rows
        metrics.count_records(self.table, "writer", n, 0, self.write_fn.task_id)
        metrics.gauge_buffered(self.table, self.write_fn.task_id, self.write_fn.buffered_bytes)
        return n

    def flush(self) -> list[HoodieWriteStat]:
        with self.cpu.section("write"):
            stats = self.write_fn.flush_all()
        metrics.record_flush(self.table, self.write_fn.task_id, stats)
        metrics.gauge_buffered(self.table, self.write_fn.task_id, self.write_fn.buffered_bytes)
        return stats

    def abort(self) -> None:
        self.write_fn.abort()

    def pid(self) -> int:
        return os.getpid()


class AssignWriteTask(AssignTask, WriteTask):
    """Assigner task ``i`` and writer task ``i`` in one process (Flink's operator chaining):
    the rows an assigner tags for its home writer (all of them on a table this topology
    wrote, see :func:`~hoodie_ray.write.bucket_assigner.home_writers`) go to the writer by a
    plain call, with no object, no remote call and half the actors; so do rows for the
    writer of a task hosted in the same process (``co_hosted``). Rows for another task's
    writer (a table another parallelism wrote) are held for the checkpoint's barrier."""

    def __init__(
        self,
        setup: TableSetup,
        config: AssignerConfig,
        profile: WriteProfile,
        slices: list[FileSlice],
        num_tasks: int,
        attempt: int,
    ) -> None:
        WriteTask.__init__(self, setup.context, config.task_id, attempt)
        AssignTask.__init__(self, setup, config, profile, slices, [None] * num_tasks, local=self)

    def set_peers(self, tasks: list[Any]) -> None:
        """The handles of every chained task, this one's included (unused: its rows stay)."""
        self.writers = list(tasks)

    def begin(
        self,
        committed: bool,
        profile: WriteProfile,
        instant: str,
        frozen: set[tuple[str, str]],
        slices: list[FileSlice],
    ) -> None:
        """A checkpoint's start in one call: the last checkpoint's index state kept when it
        committed (``checkpoint_done``), the new write profile, the writer's new instant
        (``slices``, this task's own argument, last: :func:`fan_out`)."""
        if committed:
            self.checkpoint_done()
        self.start_checkpoint(profile)
        self.start_instant(instant, slices, frozen)


class _StartedLater:
    """An actor created with no arguments, so that Ray starts its process at once: the imports
    and the compiled kernels (~2.5 s of CPU here) overlap the coordinator's start and its
    opening of the table, which every task's state comes from; :meth:`start` then runs the
    task class's constructor (the class after this one in the actor's bases) with its
    arguments. The driver waits for every task's ``start`` before any other call reaches a
    task, so no peer's call can find one unstarted."""

    def __init__(self) -> None:
        warm_up()

    def start(self, *args: Any) -> None:
        """The task's constructor: :class:`AssignTask`'s, :class:`WriteTask`'s or
        :class:`AssignWriteTask`'s arguments."""
        super().__init__(*args)


@ray.remote
class AssignerActor(_StartedLater, AssignTask):
    """``<table>/assigner-<i>``: :class:`AssignTask` as a Ray actor."""


@ray.remote
class WriterActor(_StartedLater, WriteTask):
    """``<table>/writer-<i>``: :class:`WriteTask` as a Ray actor."""


@ray.remote
class AssignWriteActor(_StartedLater, AssignWriteTask):
    """``<table>/assign-write-<i>``: :class:`AssignWriteTask` as a Ray actor."""


@ray.remote
class TaskHostActor:
    """``<table>/task-host-<h>``: several chained write tasks in one process (Flink's task
    slots, ``taskmanager.numberOfTaskSlots``): each slot an :class:`AssignWriteTask` of its own
    (its key index, its writer's buffers), the calls for slot ``i`` run by :meth:`call` in the
    order the driver gave them. A process lost loses its slots together; the topology is
    rebuilt as for any lost task."""

    def __init__(self) -> None:
        warm_up()
        self.slots: dict[int, AssignWriteTask] = {}

    def call(self, slot: int, method: str, *args: Any) -> Any:
        """Task ``slot``'s ``method`` (``start``: its constructor)."""
        if method == "start":
            task = self.slots[slot] = AssignWriteTask(*args)
            task.co_hosted = self.slots  # every slot started before any task's first row
            return None
        return getattr(self.slots[slot], method)(*args)

    def fan(self, method: str, slots: tuple[int, ...], returns: int, own: bool, *args: Any) -> Any:
        """``method`` of each of ``slots`` in turn, in one call (:func:`fan_out`): each slot
        is given ``args``, or with ``own`` the arguments before the last ``len(slots)`` and
        then its own one of those. The results, ``returns`` a slot, in slot order (the call's
        ``num_returns``). Arguments every slot shares are resolved once for all of them."""
        out: list[Any] = []
        for slot, slot_args in zip(slots, fan_arguments(args, len(slots), own), strict=True):
            result = getattr(self.slots[slot], method)(*slot_args)
            out.extend(result if returns > 1 else (result,))
        return tuple(out) if len(out) > 1 else out[0]

    def pid(self) -> int:
        return os.getpid()


class _SlotMethod:
    """``handle.method`` of a hosted task: ``.remote(...)`` and ``.options(...).remote(...)``
    as on an actor's method."""

    def __init__(self, host: Any, slot: int, method: str, options: dict[str, Any]) -> None:
        self._host, self._slot, self._method, self._options = host, slot, method, options

    def options(self, **options: Any) -> _SlotMethod:
        return _SlotMethod(self._host, self._slot, self._method, {**self._options, **options})

    def remote(self, *args: Any) -> Any:
        call = self._host.call.options(**self._options) if self._options else self._host.call
        return call.remote(self._slot, self._method, *args)


class SlotHandle:
    """A hosted task's handle (:class:`TaskHostActor`, slot ``slot``): its methods are called
    as an actor's are, so the checkpoint protocol addresses a task the same way, hosted or
    not."""

    def __init__(self, host: Any, slot: int) -> None:
        self.host = host
        self.slot = slot

    def __getattr__(self, method: str) -> _SlotMethod:
        if method.startswith("__"):
            raise AttributeError(method)
        return _SlotMethod(self.host, self.slot, method, {})

    def __reduce__(self) -> tuple[Any, ...]:
        return (SlotHandle, (self.host, self.slot))


def fan_arguments(args: tuple[Any, ...], slots: int, own: bool) -> list[tuple[Any, ...]]:
    """Each of ``slots`` slots' arguments in a :meth:`TaskHostActor.fan` call: ``args``, or
    with ``own`` the arguments before the last ``slots`` and then the slot's own one of those."""
    if not own:
        return [args] * slots
    shared, mine = args[: len(args) - slots], args[len(args) - slots :]
    return [(*shared, m) for m in mine]


def fan_out(
    tasks: list[Any],
    method: str,
    *shared: Any,
    own: list[Any] | None = None,
    returns: int = 1,
) -> list[Any]:
    """``tasks[i].method.remote(*shared, own[i])`` for every task (``own``: one argument of
    each task's own, else none), the references of each task's results (``returns`` of them
    a task: a list of them, as ``.options(num_returns=returns)`` gives). Tasks that share a
    host (:class:`SlotHandle`) are called in one :meth:`TaskHostActor.fan` call a host, in
    task order: a host's calls, and their shared arguments' fetching and decoding, are paid
    once for its slots, not once a slot."""
    out: list[Any] = [None] * len(tasks)
    by_host: dict[Any, list[int]] = {}
    for i, t in enumerate(tasks):
        if isinstance(t, SlotHandle):
            by_host.setdefault(t.host, []).append(i)
            continue
        call = getattr(t, method)
        if returns > 1:
            call = call.options(num_returns=returns)
        out[i] = call.remote(*shared, *((own[i],) if own is not None else ()))
    for host, idx in by_host.items():
        slots = tuple(tasks[i].slot for i in idx)
        n = returns * len(idx)
        call = host.fan.options(num_returns=n) if n > 1 else host.fan
        mine = [own[i] for i in idx] if own is not None else []
        refs = call.remote(method, slots, returns, own is not None, *shared, *mine)
        refs = list(refs) if n > 1 else [refs]
        for k, i in enumerate(idx):
            got = refs[k * returns : (k + 1) * returns]
            out[i] = got if returns > 1 else got[0]
    return out
