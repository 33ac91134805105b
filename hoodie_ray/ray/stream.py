"""The driver of the Ray write topology: :class:`HoodieStreamWriter` and :func:`write_warm`,
the checkpoint protocol over the actors :class:`~hoodie_ray.ray.topology.WriteTopology` starts.

Input blocks go by reference from the driver (or Ray's object store, for a Dataset) to the
assigner actors in rounds (:func:`~hoodie_ray.write.routing.round_rows` rows, or what is left
at a checkpoint): a round is cut into shares (:func:`~hoodie_ray.write.routing.cut_shares`),
each routed by one assigner, which prepares its pieces (keys, partition paths) and splits them
by assigner (hash of the record key, or of the bucket) -> each assigner tags its rows of the
round and sends them on to the writer actors itself (by file group, in batches: the writer
outbox), never through the driver -> write statuses -> coordinator, which commits at each
checkpoint. The driver submits a call per router and per assigner and round, however many
blocks the round came in, and at a checkpoint waits for the assigners' last sends
(``flush_writers``) before the writers flush.

Exactly-once: the driver keeps the input of the open checkpoint (object references) until its
commit is on disk. If any actor dies before or during a checkpoint, the whole topology is
restarted (every actor rebuilds its state from the table), the open instant is rolled back and
the kept input replayed; ``checkpoint()`` then returns a committed instant holding every record
once. When recovery keeps failing, a :class:`HoodieWriteError` says so and nothing is committed.

Optimistic concurrency control (``hoodie.write.concurrency.mode=optimistic_concurrency_control``):
the coordinator takes the table lock only for its short turns (open, an instant's start, a
commit with its conflict check and table services), never between them, so another writer
commits beside the topology, and a warm ``hr.write`` topology holds no lock while parked. A
checkpoint that starts after another writer's commit reloads the assigners' key index first
(the topology restarts its assigners and writers from the table). A checkpoint whose commit
conflicts (:class:`HoodieWriteConflictError`: its instant was rolled back in the same lock turn)
is replayed from the kept input into a new instant on a topology reloaded from the table, up to
``hoodie.write.num.retries.on.conflict.failures`` times; then the error is raised and nothing
of that checkpoint is in the table.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, overload

import pyarrow as pa
import ray
from ray.exceptions import GetTimeoutError, ObjectLostError, RayActorError, RayTaskError

from hoodie_ray.config.options import lookup, resolve_options, without_option
from hoodie_ray.exceptions import (
    HoodieError,
    HoodieSchemaError,
    HoodieWriteConflictError,
    HoodieWriteError,
)
from hoodie_ray.job.client import input_data_schema
from hoodie_ray.job.coordinator import CommitResult
from hoodie_ray.job.setup import TableSetup
from hoodie_ray.ray.actors import Pieces, fan_out
from hoodie_ray.ray.calls import (
    Conflicted,
    TopologyLost,
    drain,
    instant_name,
    is_actor_loss,
    unwrap,
)
from hoodie_ray.ray.inputs import (
    Input,
    block_schemas,
    input_blocks,
    put_table,
    quiet_ray_data_console,
    release_spark_frames,
)
from hoodie_ray.ray.parking import (
    Parked,
    options_key,
    park,
    release_warm_writers,
    session,
    stop_parked,
    unpark,
)
from hoodie_ray.ray.runtime import ensure_ray, refuse_inline_clustering
from hoodie_ray.ray.topology import WriteTopology
from hoodie_ray.storage import qualified_path
from hoodie_ray.write.lock import ProcessId, new_owner_id
from hoodie_ray.write.records import is_ray_dataset, to_arrow
from hoodie_ray.write.routing import cut_shares, round_rows

log = logging.getLogger("hoodie_ray")
MAX_RECOVERIES = 3


@dataclass
class _Flight:
    """A pipelined checkpoint (``checkpoint(wait=False)``) whose flush and commit run while
    the driver goes on; its input is kept until the commit is known."""

    instant: Any  # the instant, or the reference the coordinator will resolve it from
    inputs: list[Input]
    frames: list[Any]  # its Spark DataFrames, released once it is settled
    commit: Any  # ObjectRef of its CommitResult
    calls: list[Any]  # its input's calls, barrier and flush calls (fetched if it fails)
    routed: list[tuple[Any, list[Any]]]
    followed: bool = False  # the next instant's begin calls wait for this commit
    result: CommitResult | None = None


class CheckpointHandle:
    """What ``checkpoint(wait=False)`` returns: the checkpoint flushes and commits while the
    pipeline writes on. :meth:`result` waits for its commit and gives its instant (None
    when there was nothing to commit); a failure is raised there, or by the writer's next
    ``checkpoint``, as a synchronous checkpoint's would be."""

    def __init__(
        self, writer: HoodieStreamWriter, flight: _Flight | None, instant: str | None = None
    ) -> None:
        self._writer = writer
        self._flight = flight
        self._instant = instant

    def done(self) -> bool:
        """True once the commit is settled (no wait)."""
        f = self._flight
        if f is None or f.result is not None or self._writer._flight is not f:
            return True
        ready, _ = ray.wait([f.commit], timeout=0)
        return bool(ready)

    def result(self) -> str | None:
        """Wait for the commit; its instant."""
        f = self._flight
        if f is None:
            return self._instant
        if self._writer._flight is f:
            self._writer._wait_flight()
        return f.result.instant if f.result is not None else None


#: The phases of a checkpoint timed by :meth:`HoodieStreamWriter.checkpoint_phases`.
CHECKPOINT_PHASES = ("begin", "input", "align", "flush", "commit")


def _started(instant: Any) -> str | None:
    """An instant the driver holds, or None where it is the reference of a start that never
    ran (pipelined: its coordinator died first; a new coordinator rolls back any it began)."""
    if not isinstance(instant, ray.ObjectRef):
        return instant
    try:
        return str(ray.get(instant, timeout=30))
    except Exception:
        return None


class HoodieStreamWriter:
    """Streaming writes: one delta commit per :meth:`checkpoint`, Flink's checkpoint model.

    Example::

        with hr.HoodieStreamWriter("/tmp/t", {"hoodie.table.name": "t",
                "hoodie.datasource.write.recordkey.field": "id", "precombine.field": "ts"}) as w:
            w.write(batch)
            instant = w.checkpoint()

    Leaving the block checkpoints what is left and stops the actors.
    """

    def __init__(
        self,
        path: str,
        options: dict[str, Any] | None = None,
        *,
        storage_options: dict[str, Any] | None = None,
        ray_address: str | None = None,
    ) -> None:
        self.path = qualified_path(path)
        self.options = dict(options or {})
        self.wc = resolve_options(self.options)
        refuse_inline_clustering(self.wc)
        self.storage_options = storage_options
        self.ray_address = ray_address
        self.num_writers = self.wc.write_tasks
        self.num_assigners = self.wc.assign_tasks
        # assigner task i and writer task i in one actor (pipeline.operator-chaining)
        self.chained = self.wc.chained_tasks
        self._job = ProcessId.current()  # the driver: its lock is dead once this process is
        self._setup: TableSetup | None = None
        # the actors: coordinator and write tasks (their names, starts, stops)
        self._topo = WriteTopology(
            self.path, self.options, storage_options, self.wc, new_owner_id(), self._job
        )
        self._instant: str | None = None
        self._inputs: list[Input] = []  # the open checkpoint's input (object refs)
        self._spark_frames: list[Any] = []  # Spark conversions of the open checkpoint
        self._next_router = 0  # the assigner that routes the next share of input
        # the task actors' generation (one a (re)start): routed parts keep some rows in the
        # routing process, so rows routed by an earlier generation are routed again
        self._generation = 0
        # input of the open checkpoint not yet routed: routed a round at a time (_send_round)
        self._pending: list[Input] = []
        self._pending_rows = 0
        self._round_rows = round_rows(self.wc.write_batch_rows, self.num_assigners)
        # small Arrow batches written, kept in the driver until a batch's worth (_hold)
        self._held: list[pa.Table] = []
        self._held_rows = 0
        # the last input schema accepted, and the setup it was accepted against
        self._accepted: tuple[pa.Schema, TableSetup] | None = None
        self._route_width = 1  # routers per round at most: the cluster's CPUs, <= assigners
        self._workers_stale = False  # restart assigners and writers before the next instant
        self._inflight: list[Any] = []
        # the row counts of the open checkpoint's route calls, never fetched unless it fails
        self._routed: list[tuple[Any, list[Any]]] = []  # (row count, parts) of each call
        self._peer_rows = 0  # rows of the open checkpoint an assigner tagged for another task
        self._closed = False
        self.results: list[CommitResult] = []
        # seconds each checkpoint spent per phase (:meth:`checkpoint_phases`)
        self._phases: list[dict[str, float]] = []
        self._phase_calls: list[Any] = []
        self._begin_s = 0.0  # the open instant's start
        self._pending_done: list[Any] = []  # the assigners' last checkpoint_done calls
        self._committed = False  # chained: the next begin keeps the last checkpoint's index
        self._flight: _Flight | None = None  # the pipelined checkpoint still committing
        self._stale_instants: list[Any] = []  # started instants recovery must roll back
        # a step stopped part way (an interrupt, an unexpected error): the next one recovers
        # first, as after a lost actor (the open instant committed, or rolled back and replayed)
        self._interrupted = False
        #: input accepted but not yet kept in the open checkpoint: what was written behind a
        #: failed pipelined checkpoint while it is replayed (:meth:`_resend` sends it on)
        self._behind: list[Input] = []

    # -- public API ----------------------------------------------------------------------------
    def __enter__(self) -> HoodieStreamWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def start(self, schema: pa.Schema | None = None) -> None:
        """Start the actors now instead of at the first :meth:`write`.

        ``schema`` is the input's Arrow schema; it is needed when the table does not exist
        yet. A benchmark or a service that wants its first checkpoint to cost what the others
        cost calls this first (actor processes take seconds to start). Idempotent.
        """
        if self._closed:
            raise HoodieWriteError("start after close")
        if self._setup is None:
            self._start(schema)

    def write(self, data: Any) -> None:
        """Send input into the open checkpoint: a pyarrow Table/RecordBatch, a pandas
        DataFrame, a Ray Dataset or a Spark DataFrame of a RayDP session.

        The driver only hands over object references: a Dataset's blocks go from Ray's object
        store to the assigners as they are, an Arrow table or DataFrame is put there once
        (Arrow batches smaller than a round are held and put a ``write.batch.rows`` at a
        time). Input is routed a round of rows at a time, by as many tasks as the round has
        rows for (:func:`~hoodie_ray.write.routing.cut_shares`). The per-row work
        (normalising, record keys, partition paths, the split by assigner) runs in the
        assigner actors. The schema is checked here, from the input's schema alone; a
        row the table refuses (a null key, say) fails the open checkpoint: it is rolled back
        and the error raised by this call or the next ``write``/``checkpoint``.
        """
        if self._closed:
            raise HoodieWriteError("write after close")
        self._settle_interrupted()
        if isinstance(data, (pa.Table, pa.RecordBatch)) and data.num_rows < self._round_rows:
            self._hold(to_arrow(data))
            return
        self._put_held()  # earlier input goes first
        blocks = input_blocks(data, self._spark_frames)
        if is_ray_dataset(data) and (self._setup is None or not self._setup.schema_fixed):
            blocks = self._typed_nulls(blocks)
        for schema, item in blocks:
            self._write_item(schema, item)

    def _typed_nulls(
        self, blocks: Iterator[tuple[pa.Schema, Input]]
    ) -> Iterator[tuple[pa.Schema, Input]]:
        """A new table's first Dataset blocks, their all-null columns typed by the blocks
        after them: a block whose schema has a null column is held (its reference only) with
        the ones after it until they give the column a type, the Dataset ends or a round's
        rows are held (a column null that long is decided as such: a string one), and all of
        them go with the schema they unify to. The first block decides a new table's schema,
        and a null column would be a string one, later blocks' numbers stored as text."""
        for schema, item in blocks:
            if not any(pa.types.is_null(f.type) for f in schema):
                yield schema, item
                continue
            held = [item]
            held_rows = item.num_rows or 0
            unified = schema
            for later_schema, later in blocks:
                if held_rows >= self._round_rows:
                    blocks = itertools.chain([(later_schema, later)], blocks)
                    break  # bounded: the Dataset streams on
                try:
                    both = pa.unify_schemas([unified, later_schema], promote_options="permissive")
                except (pa.ArrowInvalid, pa.ArrowTypeError):
                    # not one schema: the held go with theirs, this one with its own
                    blocks = itertools.chain([(later_schema, later)], blocks)
                    break
                unified = both
                held.append(later)
                held_rows += later.num_rows or 0
                if not any(pa.types.is_null(f.type) for f in unified):
                    break
            for i in held:
                yield unified, i
            yield from blocks
            return

    def _hold(self, table: pa.Table) -> None:
        """A small Arrow batch, kept in the driver with the ones before it until a batch's
        worth is there (``write.batch.rows``), then put into the object store as one: a put
        and its reference cost the same for ten rows as for a batch."""
        if not table.num_rows:
            return
        self._settle_for_occ()
        if self._held and not self._held[0].schema.equals(table.schema):
            self._put_held()
        self._accept_schema(table.schema, pending=len(self._held))
        if self._instant is None:  # the instant starts with the first input (see _send)
            self._run(self._begin_instant)
        self._held.append(table)
        self._held_rows += table.num_rows
        if self._held_rows >= self.wc.write_batch_rows:
            self._put_held()

    def _put_held(self) -> None:
        """The small batches :meth:`_hold` kept, into the open checkpoint as one input."""
        if not self._held:
            return
        held, self._held, self._held_rows = self._held, [], 0
        item = put_table(held[0] if len(held) == 1 else pa.concat_tables(held))
        self._inputs.append(item)
        self._run(lambda: self._send(item))

    def _write_item(self, schema: pa.Schema, item: Input) -> None:
        self._settle_for_occ()
        self._accept_schema(schema)
        self._inputs.append(item)
        self._run(lambda: self._send(item))

    def _write_whole(self, data: Any, batch_rows: int | None = None) -> None:
        """Write ``data`` into the open checkpoint, every block of it prepared before any is
        assigned: a row the table refuses (a null key) fails this call before an instant is
        opened for it, and nothing of ``data`` enters the checkpoint (``hr.write``'s path).
        The prepared blocks wait in the object store meanwhile."""
        if self._closed:
            raise HoodieWriteError("write after close")
        self._settle_interrupted()
        self._put_held()
        self._wait_flight()
        items: list[Input] = []
        nulls = False
        for schema, item in input_blocks(data, self._spark_frames, batch_rows):
            self._accept_schema(schema, pending=len(items))
            items.append(item)
            nulls = nulls or any(pa.types.is_null(f.type) for f in schema)
        if not items:
            return
        probed = is_ray_dataset(data) and nulls
        if probed:
            # Ray Data gives every block the first one's schema where they differ: an all-null
            # column of the first block would decide a new table's type (string), and later
            # blocks' numbers would be stored as text
            self._accept_block_schemas(items)
        if self._pending:
            self._run(self._send_round)  # earlier input goes first
        try:
            self._route_whole(items)
        except HoodieSchemaError:
            if probed or not is_ray_dataset(data):
                raise
            # a block whose schema is not the one Ray Data said (an int column of the first
            # block, a float one of a later, say): the blocks' own schemas, then again
            self._accept_block_schemas(items)
            self._route_whole(items)

    def _accept_block_schemas(self, items: list[Input]) -> None:
        """Accept the schema the blocks of ``items`` have together, each block asked where
        it lies (:func:`block_schemas`): unified as Arrow's permissive promotion does (a
        null column takes the type of the blocks that have one, int64 and double widen to
        double), or, where they cannot be unified, each block's in turn."""
        schemas = block_schemas(items)
        try:
            unified = [pa.unify_schemas(schemas, promote_options="permissive")]
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            unified = schemas
        for schema in unified:
            self._accept_schema(schema)

    def _route_whole(self, items: list[Input]) -> None:
        """Route every block of ``items`` (before the instant opens), then send them into it."""
        rounds: list[list[Input]] = [[]]
        rows = 0
        for item in items:
            if rows >= self._round_rows:
                rounds.append([])
                rows = 0
            rounds[-1].append(item)
            rows += item.num_rows or 0
        generation = self._generation
        routed = [self._route(r) for r in rounds]
        counts = [count for calls in routed for count, _ in calls]
        lost = False
        try:
            ray.get(counts)
        except (RayActorError, RayTaskError) as e:
            if not is_actor_loss(e):
                drain([], [call for calls in routed for call in calls])
                raise unwrap(e) from None
            lost = True  # an assigner died: the items go the way of any write (replayed)
            drain([], [call for calls in routed for call in calls], timeout=0)
        if lost:
            self._resend(items)
        else:
            self._inputs.extend(items)
            self._run(lambda: self._send_routed(routed, rounds, generation))

    def _send_routed(
        self, routed: list[list[tuple[Any, list[Any]]]], rounds: list[list[Input]], generation: int
    ) -> None:
        """Rounds routed already (their route calls' row counts and parts, by the task actors
        of ``generation``) to the assigners. Where the instant's start restarted the actors
        (OCC: another writer committed), the rounds are routed again: the parts a router
        kept for the tasks of its process are gone with it."""
        if self._instant is None:
            self._begin_instant()
        if self._generation != generation:
            routed = [self._route(r) for r in rounds]
        for calls in routed:
            self._routed.extend(calls)
            self._assign_round([packed for _, (packed,) in calls])

    def _accept_schema(self, schema: pa.Schema, pending: int = 0) -> None:
        """Start the topology on the first input and fix or evolve the table schema for an
        input of ``schema`` (``pending``: inputs accepted but not yet sent)."""
        if self._setup is None:
            self._start(schema)
        assert self._setup is not None
        # A new table's first batch decides its schema; every later batch is written with the
        # schema it evolves the table's to (columns added, types widened), or is refused here.
        decides = (
            not self._setup.schema_fixed
            and self._instant is None
            and not self._inputs
            and not pending
        )
        seen = self._accepted
        if not decides and seen is not None and seen[1] is self._setup and seen[0].equals(schema):
            return  # the blocks of one input share a schema: checked once per setup
        data_schema = input_data_schema(self._setup, schema, self.wc, decides=decides)
        if not data_schema.equals(self._setup.context.data_schema):
            if decides:
                self._setup = ray.get(self._coord.refix_schema.remote(data_schema))
                self._start_tasks()
            else:
                self._evolve(data_schema)
        self._accepted = (schema, self._setup)

    def _evolve(self, data_schema: pa.Schema) -> None:
        """The table schema evolves: the coordinator records it at the next commit, the
        assigners prepare and the writers write everything from now on in it (rows they
        buffered already, and replayed rows of the old schema, get nulls for the new columns).
        Each actor gets it before any row of the new schema: one caller's calls to an actor
        run in order."""
        assert self._setup is not None
        self._put_held()  # input of the old schema goes before the change
        self._run(self._send_round)
        self._setup = ray.get(self._coord.refix_schema.remote(data_schema))
        self._send_setup()

    def _send_setup(self) -> None:
        """The coordinator's new setup to every task (before any row that needs it: one
        caller's calls to an actor run in order)."""
        assert self._setup is not None
        ray.get(
            [a.set_setup.remote(self._setup) for a in self._assigners]
            + [w.set_context.remote(self._setup.context) for w in self._writers]
        )

    def _switch_operation(self, operation: str) -> None:
        """Commit as ``operation`` from the next checkpoint on (``hr.write``'s warm topology:
        upsert <-> delete, :data:`~hoodie_ray.config.options.SWITCHABLE_OPERATIONS`), between
        checkpoints: the coordinator, the assigners and the writers take it before any row of
        it, and an actor started again later starts with it. Raises what the coordinator
        refuses (another operation) and a lost coordinator's error; a task lost meanwhile is
        started again by the next checkpoint."""
        if operation == self.wc.operation:
            return
        assert self._instant is None and not self._inputs and not self._held
        assert self._flight is None
        options = without_option(self.options, "operation")
        options[lookup("write.operation").key] = operation
        wc = resolve_options(options)
        if self._setup is not None:
            try:
                self._setup = ray.get(self._coord.switch_operation.remote(operation))
            except RayTaskError as e:
                raise unwrap(e) from None
        self.options, self.wc = options, wc
        self._topo.options, self._topo.wc = options, wc
        self._accepted = None
        if self._setup is not None and not self._workers_stale:
            try:
                self._send_setup()
            except (RayActorError, RayTaskError):
                self._workers_stale = True  # the next checkpoint starts them with the setup

    def _evolve_to(self, input_schema: pa.Schema | None) -> None:
        """Before a write whose input schema is known up front (a Ray Dataset's): evolve the
        table schema to it now, so that every write task writes into that schema."""
        setup = self._setup
        if setup is None or not isinstance(input_schema, pa.Schema) or not setup.schema_fixed:
            return
        target = input_data_schema(setup, input_schema, self.wc, decides=False)
        if not target.equals(setup.context.data_schema):
            self._evolve(target)

    @overload
    def checkpoint(self, wait: Literal[True] = True) -> str | None: ...

    @overload
    def checkpoint(self, wait: Literal[False]) -> CheckpointHandle: ...

    def checkpoint(self, wait: bool = True) -> str | CheckpointHandle | None:
        """Commit everything written since the last checkpoint; the instant, or None if empty.

        ``wait=False`` pipelines it (Flink's checkpoints do not stop the stream): the writers
        flush and the coordinator commits while this returns at once with a
        :class:`CheckpointHandle`, and what is written next is routed, assigned and buffered
        into the next instant meanwhile. One checkpoint is in flight at a time (the next
        ``checkpoint`` waits for it); commits stay in order, and a failure is recovered or
        raised exactly as for a synchronous checkpoint (a lost actor: both checkpoints'
        input replayed, each once; under OCC a lost conflict replays it into a new
        instant, then the input behind it). Pipelined where assigners and writers are chained
        (elsewhere it commits before it returns); under OCC the first write behind it waits
        for its commit (the next instant's start must know what other writers committed)."""
        self._settle_interrupted()
        self._put_held()
        self._wait_flight()
        if not self._inputs:
            self._release_spark_frames()  # DataFrames of zero rows
            return None if wait else CheckpointHandle(self, None)
        if not wait and self.chained:
            flight = self._run(self._checkpoint_async)
            if isinstance(flight, _Flight):
                self._flight = flight
                return CheckpointHandle(self, flight)
            result = flight  # recovered and committed on the way
        else:
            result = self._run(self._checkpoint_once)
        self._inputs = []
        self._release_spark_frames()
        self.results.append(result)
        return result.instant if wait else CheckpointHandle(self, None, result.instant)

    def _checkpoint_async(self) -> _Flight:
        """Send the open checkpoint's last input, its barrier, flushes and commit, and return
        without waiting: each task runs them in the order the driver gave them, before the
        next instant's calls, and the commit runs once every call it depends on succeeded."""
        if self._instant is None:
            self._begin_instant()
        self._send_round()
        nt = len(self._assigners)
        if nt == 1:
            barriers: list[Any] = []
            stats = [self._assigners[0].finish.remote()]
        else:
            barriers, stats = self._barrier_and_finish()
        calls = self._inflight
        commit = self._coord.commit_flight.remote(self._instant, nt, *stats, *calls)
        flight = _Flight(
            self._instant,
            self._inputs,
            self._spark_frames,
            commit,
            calls + stats,
            self._routed + barriers,
        )
        self._inflight, self._routed, self._inputs, self._spark_frames = [], [], [], []
        self._instant = None
        self._committed = False  # the next begin has the commit as an argument
        self._setup = TableSetup(self._setup.context, self._setup.keygen, True)  # type: ignore[union-attr]
        return flight

    def _barrier_and_finish(self) -> tuple[list[tuple[Any, list[Any]]], list[Any]]:
        """Chained tasks whose rows crossed: each task's barrier (the rows it holds for its
        peers in other processes, one object), then each task's flush with the objects: the
        barriers as ``(row count, [object])`` pairs, and the flush calls (one call a task
        host and phase, :func:`~hoodie_ray.ray.actors.fan_out`)."""
        tasks = self._assigners
        held = fan_out(tasks, "barrier", returns=2)
        # a task's own barrier object holds nothing for it: every task is given all of them
        stats = fan_out(tasks, "finish", *[parts for _, parts in held])
        return [(count, [parts]) for count, parts in held], stats

    def _settle_for_occ(self) -> None:
        """Under OCC the next instant's start decides whether the key index must be reloaded
        (another writer committed meanwhile), which needs the checkpoint in flight committed:
        it is settled before the first input behind it, not before the checkpoint returns."""
        if self._flight is not None and self.wc.occ:
            self._wait_flight()

    def _wait_flight(self) -> None:
        """Settle the pipelined checkpoint, if any: its result recorded, or its failure
        recovered (replayed, then the open input after it) or raised."""
        f = self._flight
        if f is None:
            return
        try:
            result = ray.get(f.commit)
        except (RayActorError, RayTaskError, ObjectLostError, GetTimeoutError) as e:
            self._flight = None
            self._flight_failed(f, e)
            return
        # (an interrupt above keeps it in flight: the next wait or close settles it)
        self._flight = None
        self._settled(f, result)

    def _settled(self, f: _Flight, result: CommitResult) -> None:
        f.result = result
        self.results.append(result)
        if not f.followed:
            self._committed = True  # the next begin runs checkpoint_done
        self._release_spark_frames(f.frames)

    def _flight_failed(self, f: _Flight, e: BaseException) -> None:
        """The pipelined checkpoint failed. A lost actor: the open instant (begun behind it)
        is rolled back, the checkpoint's input replayed and committed, then the open input
        replayed into a new instant. Anything else (a refused row): neither is committed."""
        drain(f.calls, f.routed, timeout=30)
        if is_actor_loss(e) or isinstance(e, (ObjectLostError, GetTimeoutError)):
            log.warning(
                "hoodie_ray: a pipelined checkpoint lost an actor (%s); restarting the topology "
                "and replaying it, then the input written behind it",
                e,
            )
            self._replay_flight(f, lost=True)
            return
        err = unwrap(e)
        if isinstance(err, HoodieWriteConflictError):
            # OCC: the coordinator rolled n back in its conflict check; replayed into a new
            # instant on a reloaded topology (up to the retries), then the open input
            log.warning("hoodie_ray: %s; replaying the checkpoint into a new instant", err)
            self._replay_flight(f, lost=False)
            return
        self._fail_instant()  # the open instant, begun behind it
        self._release_spark_frames(f.frames)
        if self._coord is not None:
            with contextlib.suppress(Exception):
                ray.get(self._coord.rollback.remote(f.instant), timeout=120)
        raise err from None

    def _replay_flight(self, f: _Flight, *, lost: bool) -> None:
        """The failed pipelined checkpoint ``f`` replayed synchronously (``lost``: an actor
        was lost, else it lost an OCC conflict and the coordinator rolled it back) after the
        instant begun behind it is rolled back, then the input written behind it replayed
        into a new open instant."""
        open_frames = self._spark_frames
        # kept on the writer until sent again: a replay interrupted part way recovers them too
        self._behind[:0] = self._inputs
        self._stale_instants = [self._instant] if self._instant is not None else []
        self._instant = f.instant if lost else None
        self._inputs, self._spark_frames = f.inputs, f.frames
        if lost:
            result = self._run(self._checkpoint_once, recover=True)
        else:
            result = self._run(self._checkpoint_once, conflicts=1)
        self._release_spark_frames()
        f.result = result
        self.results.append(result)
        self._inputs, self._spark_frames = [], open_frames
        self._resend([])

    def _resend(self, items: list[Input]) -> None:
        """Send ``items``, after any input still waiting to be sent again (:attr:`_behind`),
        into the open checkpoint, one by one, each kept in its input just before it is sent:
        a recovery on the way replays those kept so far, the rest follow once (sent all at
        once, they went twice: an insert's rows were written twice)."""
        self._behind.extend(items)
        while self._behind:
            item = self._behind[0]
            self._inputs.append(item)
            del self._behind[0]
            self._run(lambda item=item: self._send(item))

    def _release_spark_frames(self, frames: list[Any] | None = None) -> None:
        """Spark DataFrames written are committed or dropped: their conversions' caches go
        (``frames``: those of a settled pipelined checkpoint; by default the open checkpoint's)."""
        if frames is None:
            frames, self._spark_frames = self._spark_frames, []
        release_spark_frames(frames)

    def close(self) -> None:
        """Checkpoint what is left, then stop the actors and release the table."""
        if self._closed:
            return
        try:
            self.checkpoint()
        except BaseException:
            self._shutdown(rollback=True, failed=True)
            raise
        self._shutdown(rollback=True)

    def abort(self) -> None:
        """Drop the open checkpoint (rolled back) and stop. A new table this writer created
        and never committed to is removed (its first write was refused)."""
        self._shutdown(rollback=True, failed=True)

    @property
    def closed(self) -> bool:
        """True once closed or aborted: no more writes."""
        return self._closed

    def abandon(self) -> None:
        """Ray went away under this writer (its actors are gone with it): nothing can be
        stopped or rolled back, but the table's lock file their coordinator held would refuse
        every other writer until its heartbeat expires; this driver knows the lock's owner id
        and releases it (a parked ``hr.write`` topology whose Ray was shut down)."""
        self._closed = True
        self._topo.release_lock()

    @property
    def last_result(self) -> CommitResult | None:
        return self.results[-1] if self.results else None

    def checkpoint_phases(self) -> list[dict[str, float]]:
        """Seconds each committed checkpoint spent in each phase, as the driver saw them
        (:data:`CHECKPOINT_PHASES`): ``begin`` (the coordinator's new instant and the
        actors' start), ``input`` (waiting for the input still being routed and assigned),
        ``align`` (the assigners' last rows reaching the writers; 0 where, chained, every row
        stayed in its task: that barrier is then part of ``flush``), ``flush`` (the writers
        writing their files) and ``commit`` (the coordinator's commit). Where the time of a
        checkpoint goes as the topology widens."""
        return [dict(p) for p in self._phases]

    def commit_latencies(self) -> list[float]:
        if self._coord is None:
            return []
        return list(ray.get(self._coord.commit_latencies.remote()))

    def actor_pids(self) -> dict[str, int]:
        """Process ids of the actors (for monitoring and benchmarks)."""
        return self._topo.actor_pids()

    def operator_cpu(self) -> dict[str, float]:
        """CPU seconds the write tasks spent so far per operator, summed over tasks:
        ``route`` (preparing input: keys, partition paths), ``assign`` (bucket assigning),
        ``write`` (buffering, log blocks and base files); a chained task's share of each,
        which its process's CPU cannot tell apart. Counted from each task's start (a
        restarted task starts again). For monitoring and benchmarks."""
        return self._topo.operator_cpu()

    def index_stats(self) -> list[dict[str, int]]:
        """Per assigner task: the keys in its key index, their bytes in memory and the
        milliseconds its bootstrap took (``keys``, ``bytes``, ``bootstrap_ms``); empty before
        the actors start. For monitoring and benchmarks."""
        return self._topo.index_stats()

    @property
    def actors(self) -> dict[str, Any]:
        """The actor handles by role name, e.g. ``writer-0`` (fault tests use these; chained,
        ``assigner-i`` and ``writer-i`` are the same actor)."""
        return self._topo.actors()

    # -- topology ------------------------------------------------------------------------------
    @property
    def owner(self) -> str:
        """The owner id of this writer's lock and actor names (a datasink sets its own before
        the actors start, so that its write tasks find them by name)."""
        return self._topo.owner

    @owner.setter
    def owner(self, value: str) -> None:
        self._topo.owner = value

    @property
    def _coord(self) -> Any:
        return self._topo.coord

    @property
    def _assigners(self) -> list[Any]:
        return self._topo.assigners

    @property
    def _writers(self) -> list[Any]:
        return self._topo.writers

    def _start(self, schema: pa.Schema | None) -> None:
        from hoodie_ray.storage import open_storage

        open_storage(self.path, self.storage_options)  # a bad path fails here, as a HoodieError
        release_warm_writers()  # the process's idle topology gives its resources (and lock) up
        ensure_ray(self.ray_address)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self._route_width = max(1, min(self.num_assigners, cpus))
        coord = self._topo.new_coordinator()
        try:
            self._topo.spawn_workers()  # their processes start while the coordinator opens
            self._setup = ray.get(coord.open.remote(schema))
        except BaseException as e:
            self._topo.stop_workers()
            ray.kill(coord, no_restart=True)
            self._topo.coord = None
            if isinstance(e, RayTaskError):
                raise unwrap(e) from None
            raise
        self._start_tasks()

    def _start_tasks(self) -> None:
        """Start the tasks outside a checkpoint (the writer's start, a new table's schema):
        one lost while it starts leaves them stale, and the first checkpoint starts them
        again with the recovery of a lost actor."""
        try:
            self._restart_workers()
        except (RayActorError, TopologyLost) as e:
            log.warning("hoodie_ray: a write task of %s was lost at its start: %s", self.path, e)

    def _restart_workers(self) -> tuple[Any, Any]:
        """(Re)create assigners and writers from the table's current state; the references of
        the file slices and write profile they were made from. The driver's checkpoint state
        that lived in the old ones goes with them."""
        self._pending_done = []  # calls to the assigners being replaced
        self._committed = False
        self._workers_stale = True  # until every task has started
        self._generation += 1
        assert self._setup is not None
        started = self._topo.start_workers(self._setup)
        self._workers_stale = False
        self._instant = None
        return started

    def _begin_instant(self) -> None:
        t0 = time.perf_counter()
        if self._workers_stale:
            # a failed checkpoint left rows in the assigners' key indexes and writers' buffers
            self._restart_workers()
        # The file slices and the write profile go from the coordinator to the actors by
        # reference: the driver never holds them (their size grows with the table).
        nw = self.num_writers
        instant_ref, profile, frozen, others, *slices = self._coord.start_checkpoint.options(
            num_returns=4 + nw
        ).remote(nw)
        flight = self._flight
        if flight is not None and self.chained and not self.wc.occ:
            # Pipelined: the tasks begin the instant once the checkpoint before it commits
            # (its result is an argument Ray waits for), and the driver does not wait: the
            # instant is its reference until someone needs it.
            self._instant = instant_ref
            flight.followed = True
            self._committed = False
            self._inflight.extend(
                fan_out(
                    self._assigners,
                    "begin",
                    flight.commit,
                    profile,
                    instant_ref,
                    frozen,
                    own=slices,
                )
            )
            self._begin_s = time.perf_counter() - t0
            return
        try:
            instant = ray.get(instant_ref)
        except BaseException:
            # every return holds the error: fetched, not logged as "Unhandled error"s
            drain([profile, frozen, others, *slices], timeout=5)
            raise
        # Known before the actors hear of it: if one of them is lost now, recovery rolls the
        # instant back (else it stays pending, and a pending write blocks compaction).
        self._instant = instant
        if self.wc.occ:
            written = ray.get(others)
            if written:
                # OCC: another writer committed since the assigners loaded their key index
                # (its keys, its file groups): reload it, after this instant's start, so the
                # conflict check covers whatever completes after the reload
                log.info(
                    "hoodie_ray: %s written by another writer (%s): reloading the topology",
                    self.path,
                    ", ".join(written),
                )
                every, profile = self._restart_workers()
                slices = self._coord.split_slices.options(num_returns=nw).remote(every, profile, nw)
                slices = slices if nw > 1 else [slices]
                self._instant = instant
        done, self._pending_done = self._pending_done, []
        if self.chained:
            committed, self._committed = self._committed, False
            ray.get(
                fan_out(self._assigners, "begin", committed, profile, instant, frozen, own=slices)
            )
        else:
            ray.get(
                done
                + [a.start_checkpoint.remote(profile) for a in self._assigners]
                + [
                    w.start_instant.remote(instant, slices[j], frozen)
                    for j, w in enumerate(self._writers)
                ]
            )
        self._begin_s = time.perf_counter() - t0

    def _send(self, item: Input) -> None:
        """Input for the open checkpoint: kept until a round's worth of rows
        (:func:`~hoodie_ray.write.routing.round_rows`) is there, then routed (non-blocking,
        bounded). The driver passes references only. The instant starts with the first
        input (under OCC its start is what later commits are checked against)."""
        if self._instant is None:
            self._begin_instant()
        self._pending.append(item)
        self._pending_rows += item.num_rows or 0
        if self._pending_rows >= self._round_rows:
            self._send_round()

    def _send_round(self) -> None:
        """Route the input collected so far through the assigners to the writers: a call per
        router and per assigner, however many blocks it came in."""
        items, self._pending, self._pending_rows = self._pending, [], 0
        if not items:
            return
        if self._instant is None:
            self._begin_instant()
        if self.num_assigners == 1:
            for pieces, refs in self._shares(items):
                self._track(self._assigners[0].route_assign.remote(pieces, *refs))
            return
        calls = self._route(items)
        self._routed.extend(calls)
        self._assign_round([packed for _, (packed,) in calls])

    def _shares(self, items: list[Input]) -> list[tuple[Pieces, list[Any]]]:
        """The round cut into one share per router (:func:`cut_shares`): each as the route
        call's pieces and its block arguments (each block once)."""
        out = []
        for share in cut_shares([(it.rows, it.num_rows) for it in items], self._route_width):
            refs: list[Any] = []
            slot: dict[int, int] = {}
            pieces: Pieces = []
            for i, rows in share:
                if i not in slot:
                    slot[i] = len(refs)
                    refs.append(items[i].ref)
                pieces.append((slot[i], rows))
            out.append((pieces, refs))
        return out

    def _route(self, items: list[Input]) -> list[tuple[Any, list[Any]]]:
        """Route calls for a round of input, one per share, the routers in turn: the row
        count and the parts of each call (one
        :class:`~hoodie_ray.ray.actors.RoutedParts` object; every assigner takes its own
        part of it)."""
        na = self.num_assigners
        calls = []
        for pieces, refs in self._shares(items):
            router = self._assigners[self._next_router]
            self._next_router = (self._next_router + 1) % na
            packed, count = router.route.options(num_returns=2).remote(pieces, na, *refs)
            calls.append((count, [packed]))
        return calls

    def _assign_round(self, packed: list[Any]) -> None:
        """A round's route calls' parts to the assigners, each taking its own part of every
        object (which send their tagged rows on to the writers): one call a task host, or an
        assigner actor (:func:`~hoodie_ray.ray.actors.fan_out`)."""
        for ref in fan_out(self._assigners, "assign", *packed):
            self._track(ref)

    def _track(self, ref: Any) -> None:
        """An assigner call in flight (bounded: the driver waits when too many are)."""
        self._inflight.append(ref)
        na = self.num_assigners
        limit = self.wc.max_inflight_batches * max(1, na)
        if len(self._inflight) > limit:
            done, self._inflight = ray.wait(self._inflight, num_returns=len(self._inflight) - limit)
            self._note_assigned(ray.get(done))

    def _note_assigned(self, results: list[Any]) -> None:
        """Assign calls' results: (rows, rows tagged for another task's writer)."""
        self._peer_rows += sum(r[1] for r in results if isinstance(r, (tuple, list)))

    def _await_sent(self, in_flight: list[list[Any]]) -> None:
        """Wait for the write calls the assigners sent and handed over (chained tasks never
        wait for a peer themselves)."""
        try:
            ray.get([ref for refs in in_flight for ref in refs])
        except ObjectLostError as e:
            # the task that made a write call died after handing its reference over
            raise TopologyLost(self._instant or "") from e

    def _checkpoint_once(self) -> CommitResult:
        if self._instant is None:
            self._begin_instant()
        marks = [time.perf_counter()]
        self._send_round()
        self._note_assigned(ray.get(self._inflight))
        self._inflight = []
        self._routed = []
        marks.append(time.perf_counter())
        if self.chained and not self._peer_rows:
            # every row stayed in its task: the barrier and the flush are one call a task
            marks.append(marks[-1])
            stats_lists = self._gather(fan_out(self._assigners, "finish"))
        elif self.chained:
            # rows crossed tasks: they go to their writers through the driver's calls
            barriers, finish = self._barrier_and_finish()
            try:
                ray.get([count for count, _ in barriers])
                marks.append(time.perf_counter())
                stats_lists = ray.get(finish)
            except (RayActorError, RayTaskError, ObjectLostError) as e:
                drain(finish, barriers, timeout=30)
                if isinstance(e, ObjectLostError):
                    raise TopologyLost(self._instant or "") from e
                raise
        else:
            # the assigners' last rows to the writers, and every write they sent, done
            self._await_sent(ray.get([a.flush_writers.remote() for a in self._assigners]))
            marks.append(time.perf_counter())
            stats_lists = self._gather([w.flush.remote() for w in self._writers])
        self._peer_rows = 0
        marks.append(time.perf_counter())
        stats = [s for ss in stats_lists for s in ss]
        instant = self._instant
        assert instant is not None
        try:
            result = ray.get(self._coord.commit.remote(instant, stats))
        except (RayActorError, RayTaskError) as e:
            if is_actor_loss(e):
                raise TopologyLost(instant) from e
            err = unwrap(e)
            if isinstance(err, HoodieWriteConflictError):
                raise Conflicted(err) from None
            raise
        marks.append(time.perf_counter())
        steps = [b - a for a, b in itertools.pairwise(marks)]
        self._phases.append(dict(zip(CHECKPOINT_PHASES, [self._begin_s, *steps], strict=True)))
        # the metrics call is not waited for; its reference is kept so that a coordinator
        # lost meanwhile is no "Unhandled error" (drained at the next checkpoint and at exit)
        self._phase_calls = drain(self._phase_calls, timeout=0)
        self._phase_calls.append(self._coord.record_phases.remote(self._phases[-1]))
        self._instant = None
        # Not waited for: each assigner runs it before the next checkpoint's start (one
        # caller's calls to an actor run in order), and its result is checked there.
        if self.chained:
            self._committed = True  # the next begin call runs checkpoint_done
        else:
            self._pending_done = [a.checkpoint_done.remote() for a in self._assigners]
        self._setup = TableSetup(self._setup.context, self._setup.keygen, True)  # type: ignore[union-attr]
        return result

    @staticmethod
    def _gather(calls: list[Any]) -> list[Any]:
        """The results of a checkpoint's flush calls; where one failed, every other one is
        fetched before the error is raised (an unfetched error is an "Unhandled error")."""
        try:
            return ray.get(calls)
        except (RayActorError, RayTaskError, ObjectLostError):
            drain(calls, timeout=30)
            raise

    def _run(self, fn: Any, recover: bool = False, conflicts: int = 0) -> Any:
        """Run a step; on actor loss restart the topology, replay the open input, retry. Under
        OCC a checkpoint that lost a conflict is replayed into a new instant
        (``hoodie.write.num.retries.on.conflict.failures`` times). ``recover``: an actor was
        lost already, ``conflicts``: the checkpoint lost that many conflicts already (a
        pipelined checkpoint's): recover or replay first."""
        losses = 0
        replay = conflicts > 0
        retyped = False
        is_checkpoint = fn in (self._checkpoint_once, self._checkpoint_async)
        while True:
            try:
                if recover:
                    recover = False
                    committed = self._recover()
                    if committed is not None:
                        return committed
                    if not is_checkpoint:
                        return None  # the replay re-sent this batch too
                if replay:
                    replay = False
                    self._replay_after_conflict()
                    if not is_checkpoint:
                        return None  # the replay re-sent this batch too
                return fn()
            except (Conflicted, HoodieWriteConflictError) as c:
                if isinstance(c, Conflicted):
                    # the coordinator rolled the instant back in its conflict check's lock turn
                    error: BaseException = c.error
                else:
                    # raised as the tasks started (their key index met a file group another
                    # writer replaced meanwhile, build_assigner): the instant is still ours
                    error = unwrap(c)  # raised in a task: Ray's error is also the class
                    self._abandon_instant()
                self._instant = None
                conflicts += 1
                retries = self.wc.num_retries_on_conflict
                if conflicts > retries:
                    self._fail_instant()
                    raise HoodieWriteConflictError(
                        f"{error} (the checkpoint's input was written {conflicts} time(s): "
                        f"hoodie.write.num.retries.on.conflict.failures={retries}; nothing of "
                        "it was committed)"
                    ) from None
                log.warning("hoodie_ray: %s; replaying the checkpoint into a new instant", error)
                replay = True
            except (RayActorError, RayTaskError, GetTimeoutError, TopologyLost) as e:
                if not (is_actor_loss(e) or isinstance(e, TopologyLost)):
                    if not retyped and self._retyped(unwrap(e)):
                        retyped = replay = True  # the open input again, in its own types
                        continue
                    self._fail_instant()
                    raise unwrap(e) from None
                losses += 1
                if losses > MAX_RECOVERIES:
                    self._fail_instant()
                    raise HoodieWriteError(
                        f"write topology of {self.path} lost actors {losses} times in a row; "
                        "nothing of the open checkpoint was committed"
                    ) from e
                log.warning("hoodie_ray: actor lost (%s); restarting the topology and replaying", e)
                recover = True
            except HoodieError:
                self._fail_instant()
                raise
            except BaseException:
                # stopped part way (Ctrl-C, say): where the instant is, is unknown (flushed?
                # committed?); finishing it as it is would commit it again, without its files
                self._interrupted = True
                raise

    def _retyped(self, error: BaseException) -> bool:
        """A task refused a block of the open checkpoint for its schema: where the blocks'
        own schemas are not the one accepted for them (Ray Data gives a ``map_batches``
        block the first block's schema: a later one's NaN makes its int column a double),
        the open instant is rolled back and the schema they have together accepted, for the
        caller to send them again. False where their schemas are what was accepted (the
        refusal stands, as it does behind a pipelined checkpoint still in flight)."""
        if (
            not isinstance(error, HoodieSchemaError)
            or not self._inputs
            or self._accepted is None
            or self._flight is not None
        ):
            return False
        try:
            schemas = block_schemas(self._inputs)
        except Exception:
            return False
        if all(s.equals(self._accepted[0]) for s in schemas):
            return False
        self._drop_pending()
        with contextlib.suppress(Exception):  # no writer flushes into the rolled back instant
            ray.get([w.abort.remote() for w in self._writers], timeout=60)
        self._abandon_instant()
        try:
            self._accept_block_schemas(self._inputs)
        except HoodieError:
            self._fail_instant()
            raise
        return True

    def _settle_interrupted(self) -> None:
        """After a step stopped part way (Ctrl-C): the open instant recovered before any new
        input is kept, as after a lost actor: found committed (its result recorded) or rolled
        back and its kept input replayed. Recovered later, a commit found complete dropped
        the input kept since (its rows were never written)."""
        if not self._interrupted:
            return
        self._interrupted = False
        committed = self._run(lambda: None, recover=True)
        if committed is not None:
            self.results.append(committed)
            self._release_spark_frames()
        self._resend([])  # input a stopped replay had not sent again yet

    def _recover(self) -> CommitResult | None:
        """Restart every actor, roll back the open instant (unless it committed), replay input."""
        instant = _started(self._instant)
        # only the calls done are fetched (their errors, else "Unhandled error"s): a call to a
        # lost actor's peer may wait for that actor's replacement
        drain(self._inflight, self._routed, timeout=0)
        self._inflight, self._routed = [], []
        self._pending, self._pending_rows = [], 0
        self._peer_rows = 0
        # The surviving assigners and writers go first: a writer still running its last flush
        # would otherwise write files (or append log blocks) of the instant being rolled back.
        self._topo.stop_workers()
        coord_alive = True
        try:
            ray.get(self._coord.pid.remote(), timeout=30)
        except Exception:
            coord_alive = False
        stale, self._stale_instants = self._stale_instants, []
        if coord_alive:
            for s in stale:  # begun behind a pipelined checkpoint; its input is replayed later
                with contextlib.suppress(Exception):
                    ray.get(self._coord.rollback.remote(s), timeout=120)
        if not coord_alive:
            ray.kill(self._coord, no_restart=True)
            self._topo.new_coordinator()
            setup = ray.get(self._coord.open.remote(None))  # rolls back what was pending
            if self._setup is not None and not setup.context.data_schema.equals(
                self._setup.context.data_schema
            ):
                # the first batch's schema, or one the open checkpoint evolved the table to
                setup = ray.get(self._coord.refix_schema.remote(self._setup.context.data_schema))
            self._setup = setup
        elif instant is not None:
            if ray.get(self._coord.is_completed.remote(instant)):
                self._instant = None
                self._restart_workers()
                self._inputs = []
                return CommitResult(instant_name(instant))
            ray.get(self._coord.rollback.remote(instant))
        if instant is not None and not coord_alive:
            # The new coordinator rolled back pending instants on open, unless it had committed.
            completed = ray.get(self._coord.is_completed.remote(instant))
            if completed:
                self._restart_workers()
                self._inputs = []
                return CommitResult(instant_name(instant))
            if self.wc.occ:
                # the lazy policy kept it (its heartbeat has not expired yet): it is ours
                ray.get(self._coord.rollback.remote(instant))
        self._instant = None  # rolled back: not again if the tasks' start fails
        self._restart_workers()
        for item in list(self._inputs):
            self._send(item)
        return None

    def _replay_after_conflict(self) -> None:
        """After a lost conflict: the assigners and writers start again from the table as the
        other writer left it (key index, small files, file slices), and the checkpoint's kept
        input is sent again; it goes into a new instant."""
        assert self._instant is None
        self._drop_pending()
        self._topo.stop_workers()
        stale, self._stale_instants = self._stale_instants, []
        for s in stale:  # begun behind a pipelined checkpoint; its input is replayed later
            with contextlib.suppress(Exception):
                ray.get(self._coord.rollback.remote(s), timeout=120)
        self._restart_workers()
        for item in list(self._inputs):
            self._send(item)

    def _drop_pending(self) -> None:
        """Forget the calls and routed parts of a failed attempt, fetching each first: Ray logs
        an error no one fetched as an "Unhandled error" with a traceback when its reference
        goes, and a refused row's error is already raised by then, as itself."""
        drain(self._inflight, self._routed)
        self._inflight, self._routed = [], []
        self._pending, self._pending_rows = [], 0
        self._peer_rows = 0

    def _abandon_instant(self) -> None:
        """Roll back the open instant before anything was written into it (best effort: one
        left pending is rolled back by the next writer)."""
        if self._instant is not None and self._coord is not None:
            with contextlib.suppress(Exception):
                ray.get(self._coord.rollback.remote(self._instant), timeout=120)
        self._instant = None

    def _fail_instant(self) -> None:
        self._drop_pending()
        self._workers_stale = bool(self._assigners)
        if self._instant is not None and self._coord is not None:
            try:
                ray.get([w.abort.remote() for w in self._writers], timeout=60)
            except Exception:
                pass
            try:
                ray.get(self._coord.rollback.remote(self._instant), timeout=120)
            except Exception:
                pass  # left pending: rolled back by the next writer
        self._instant = None
        self._inputs, self._behind = [], []
        self._held, self._held_rows = [], 0
        self._release_spark_frames()

    def _shutdown(self, rollback: bool, failed: bool = False) -> None:
        if self._closed:
            return
        if self._flight is not None:  # a pipelined checkpoint settles first (or rolls back)
            with contextlib.suppress(Exception):
                self._wait_flight()
        self._closed = True
        if rollback and self._instant is not None:
            self._fail_instant()
        self._topo.stop(discard_unborn=failed)
        drain(self._phase_calls, timeout=5)
        self._phase_calls = []
        self._release_spark_frames()
        self._topo.release_names()


def write_warm(
    data: Any,
    path: str,
    options: dict[str, Any] | None,
    storage_options: dict[str, Any] | None = None,
    ray_address: str | None = None,
) -> CommitResult:
    """One commit of ``data`` (anything :meth:`HoodieStreamWriter.write` takes: Arrow, pandas,
    a Ray Dataset, a Spark DataFrame) through the Ray topology, kept warm for the next call
    from this process for ``write.warm_idle_s`` seconds: actors and key index live on."""
    from hoodie_ray.storage import open_storage

    wc = resolve_options(options)
    idle_s = wc.warm_idle_s
    uri = open_storage(path, storage_options).base_uri
    key = options_key(options, wc.operation, storage_options, ray_address)
    parked = unpark(uri)
    writer: HoodieStreamWriter | None = None
    if parked is not None:
        parked.disarm()
        if parked.key == key and parked.session == session() and not parked.writer.closed:
            kept: HoodieStreamWriter = parked.writer  # type: ignore[assignment]
            try:
                kept._switch_operation(wc.operation)
                writer = kept
            except RayActorError:  # its coordinator is gone: a new topology
                pass
            except BaseException:  # out of the cache already: stopped, not left running
                stop_parked(parked)
                raise
        if writer is None:
            stop_parked(parked)
    if writer is None:
        writer = HoodieStreamWriter(
            path, options, storage_options=storage_options, ray_address=ray_address
        )
    try:
        with quiet_ray_data_console():
            writer._write_whole(data, batch_rows=writer.wc.write_batch_rows)
            instant = writer.checkpoint()
    except BaseException:
        writer.abort()
        raise
    result = writer.last_result if instant is not None else None
    if idle_s > 0 and writer._setup is not None:
        park(Parked(writer, uri, key, session()), idle_s, occ=writer.wc.occ)
    else:
        writer.close()
    return result or CommitResult(None)
