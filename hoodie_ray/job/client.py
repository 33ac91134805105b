"""The single-process write path: :class:`HoodieWriteClient`.

It drives the same operators the Ray actors hold (bucket assignment, buffering, handles, the
commit protocol) in one process, under the same job-level coordinator. It is what the tests use
and what users call when they do not want Ray (``hr.write(..., engine="local")``).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.config.options import WriteConfig, resolve_options
from hoodie_ray.exceptions import HoodieIOError, HoodieWriteConflictError
from hoodie_ray.file_group.view import FileSlice
from hoodie_ray.job.coordinator import CommitResult, Coordinator
from hoodie_ray.job.replace import (
    check_no_pending_services,
    match_partitions,
    parse_partitions,
)
from hoodie_ray.job.setup import TableSetup, fixed_schema_fields
from hoodie_ray.meta import META_PREFIX
from hoodie_ray.metadata.layout import RECORD_INDEX
from hoodie_ray.reader.index_bootstrap import bootstrap_entries, bootstrap_entries_with_ordering
from hoodie_ray.storage import join
from hoodie_ray.table import HoodieTable
from hoodie_ray.write.bucket_assigner import (
    AssignerConfig,
    BucketAssigner,
    WriteProfile,
    record_tasks,
)
from hoodie_ray.write.records import (
    PreparedBatch,
    check_ordering_field,
    check_schema_compatible,
    normalise_schema,
    normalise_table,
    precombine,
    prepare_batch,
    to_arrow,
)
from hoodie_ray.write.routing import split_rows
from hoodie_ray.write.schema_evolution import EvolutionPolicy, evolve_schema
from hoodie_ray.write.stream_writer import StreamWriteFunction

log = logging.getLogger("hoodie_ray")

#: Times a key-index bootstrap lists its file groups again when a file it listed went away
BOOTSTRAP_RELISTS = 3


def build_assigner(
    table: HoodieTable,
    config: AssignerConfig,
    profile: WriteProfile,
    slices: list[FileSlice],
) -> BucketAssigner:
    """A bucket assigner with its key index loaded from the table (Flink index bootstrap).

    The slices are listed before the index is read, outside the table's lock under optimistic
    concurrency control: a file may go meanwhile (a write in flight rolled back, a clean after
    a compaction, a version 6 log a write moved into a compaction's slice). The same file
    groups are then listed again, up to :data:`BOOTSTRAP_RELISTS` times."""
    for relist in range(BOOTSTRAP_RELISTS + 1):
        try:
            return _build_assigner(table, config, profile, slices)
        except HoodieIOError:
            gone = next((f for f in _slice_files(slices) if not table.storage.exists(f)), None)
            if gone is None or relist == BOOTSTRAP_RELISTS:
                raise
            log.info("hoodie_ray: %s went away while the key index was read; listing again", gone)
            table = table.refresh()
            groups = {(s.partition_path, s.file_id) for s in slices}
            fresh = table.view().latest_file_slices(partitions=sorted({p for p, _ in groups}))
            slices = [s for s in fresh if (s.partition_path, s.file_id) in groups]
            lost = groups - {(s.partition_path, s.file_id) for s in slices}
            if lost:
                # replaced meanwhile (an overwrite, a clustering): their keys live in groups
                # this task was not given, so an index without them would insert them again
                part, fid = sorted(lost)[0]
                raise HoodieWriteConflictError(
                    f"{table.base_uri}: file group {fid} of partition {part!r} was replaced "
                    "while this write read its key index (another writer's replacecommit); "
                    "write again: the next write starts from the table as it is now"
                ) from None
    raise AssertionError("unreachable")


def _slice_files(slices: list[FileSlice]) -> list[str]:
    return [
        join(s.partition_path, name)
        for s in slices
        for name in ([s.base_file] if s.base_file else []) + list(s.log_files)
    ]


def _build_assigner(
    table: HoodieTable,
    config: AssignerConfig,
    profile: WriteProfile,
    slices: list[FileSlice],
) -> BucketAssigner:
    assigner = BucketAssigner(config, profile)
    assigner.forget_deleted_keys = (
        table.uses_metadata_table and RECORD_INDEX in table.metadata_partitions
    )
    if config.overwrite:
        pass  # new file groups only: nothing to look up
    elif config.index_type == "BUCKET":
        assigner.set_bucket_file_ids((s.partition_path, s.file_id) for s in slices)
    elif not config.append_mode and config.index_bootstrap and slices:
        ordering = table.table_config.ordering_field
        schema = table.schema
        if (
            config.compares_moves
            and table.uses_metadata_table
            and RECORD_INDEX in table.metadata_partitions
            and schema is not None
            and ordering in schema.names
        ):
            # keys from the record index; ordering values read per file group when needed
            assigner.bootstrap_without_ordering(
                bootstrap_entries(table, slices),
                schema.field(ordering).type,
                lambda part, fid: _group_ordering(table, part, fid),
            )
        else:
            assigner.bootstrap(
                bootstrap_entries_with_ordering(table, slices, with_ordering=config.compares_moves)
            )
    return assigner


def _group_ordering(table: HoodieTable, part: str, fid: str) -> tuple[pa.Array, pa.Array]:
    """Live keys of one file group and their ordering values, read from its latest slice."""
    fs = table.refresh().view().latest_file_slice(part, fid)
    if fs is not None:
        for _, _, keys, ords in bootstrap_entries_with_ordering(
            table, [fs], use_record_index=False
        ):
            if ords is not None:
                return keys, ords
    return pa.array([], pa.string()), pa.array([], pa.int64())


def evolution_policy(setup: TableSetup, wc: WriteConfig) -> EvolutionPolicy:
    """What a batch may change in the table schema: Hudi's schema evolution on write, except
    for the types of the record key, partition and ordering fields."""
    policy = EvolutionPolicy.of(wc, fixed_schema_fields(setup.table_config))
    if wc.partial_updates:  # a partial update's batch lacks columns by design
        policy = dataclasses.replace(policy, set_null_for_missing=True)
    return policy


def prepare_input(setup: TableSetup, table: pa.Table, wc: WriteConfig) -> PreparedBatch:
    """Keys, partitions and delete flags of an input batch, checked against the table schema.

    The batch's :attr:`~hoodie_ray.write.records.PreparedBatch.data_schema` is the schema it
    is written with: when it differs from ``setup.context.data_schema`` the batch evolves the
    table schema, and the caller hands the new schema to the coordinator
    (``Coordinator.refix_schema``) and to the writers before the batch reaches them.
    """
    ctx = setup.context
    return prepare_batch(
        table,
        setup.keygen,
        ordering_field=ctx.ordering_field,
        operation=wc.operation,
        data_schema=ctx.data_schema if setup.schema_fixed or wc.operation == "delete" else None,
        evolution=evolution_policy(setup, wc),
        changelog=wc.changelog_enabled,
        partial=wc.partial_updates,
    )


def input_data_schema(
    setup: TableSetup, input_schema: pa.Schema, wc: WriteConfig, *, decides: bool
) -> pa.Schema:
    """The data schema a batch of ``input_schema`` is written with, from its schema alone
    (what :func:`prepare_input` gives as ``data_schema``, without touching a row).

    ``decides``: the batch is a new table's first and decides its schema. Raises
    :class:`~hoodie_ray.exceptions.HoodieSchemaError` for a batch the table schema refuses, so
    a driver refuses it before any row is sent."""
    ctx = setup.context
    if wc.operation == "delete":
        return ctx.data_schema
    if decides:
        target = normalise_schema(input_schema)
    else:
        table_schema = pa.schema([f for f in ctx.data_schema if not f.name.startswith(META_PREFIX)])
        batch_schema = normalise_schema(input_schema, keep_null=True)
        target = evolve_schema(table_schema, batch_schema, evolution_policy(setup, wc))
    check_ordering_field(target, ctx.ordering_field)
    return target


def route_input(
    setup: TableSetup, block: Any, num_tasks: int, rows: tuple[int, int] | None = None
) -> list[pa.Table]:
    """An input block (Arrow, pandas, a Ray Data block; ``rows``: the ``[start, stop)`` slice
    of it that is the input) prepared against the table schema ``setup`` fixes and split by
    assigner task: what a write task does with its input before the bucket assigners see it.

    The schema the batch evolves the table to was set up front (:func:`input_data_schema`);
    a block whose columns disagree with it (another block of the same dataset, say) is refused.
    """
    return route_pieces(setup, [(block, rows)], num_tasks)


def route_pieces(
    setup: TableSetup, pieces: list[tuple[Any, tuple[int, int] | None]], num_tasks: int
) -> list[pa.Table]:
    """:func:`route_input` of several input pieces (a block and its ``[start, stop)`` slice, or
    None for all of it) at once, in order: one call's fixed costs (the preparation's compute
    calls, the split) are paid once for all of them, so small blocks cost what large ones do.
    Pieces whose Arrow schemas differ are prepared apart and their parts joined."""
    tables = []
    for block, rows in pieces:
        t = to_arrow(block)
        tables.append(t if rows is None else t.slice(rows[0], rows[1] - rows[0]))
    runs: list[list[pa.Table]] = []  # consecutive tables of one schema
    for t in tables:
        if runs and runs[-1][0].schema.equals(t.schema):
            runs[-1].append(t)
        else:
            runs.append([t])
    routed = [
        _route_table(
            setup, run[0] if len(run) == 1 else pa.concat_tables(run).combine_chunks(), num_tasks
        )
        for run in runs
    ]
    if len(routed) == 1:
        return routed[0]
    return [
        pa.concat_tables([r[i] for r in routed], promote_options="permissive")
        for i in range(num_tasks)
    ]


def _route_table(setup: TableSetup, table: pa.Table, num_tasks: int) -> list[pa.Table]:
    fixed = setup if setup.schema_fixed else dataclasses.replace(setup, schema_fixed=True)
    wc = setup.context.write_config
    prepared = prepare_input(fixed, table, wc)
    if not prepared.data_schema.equals(setup.context.data_schema):
        check_schema_compatible(prepared.data_schema, setup.context.data_schema)
    out = prepared.table
    if num_tasks == 1:
        return [out]
    tasks = record_tasks(out, num_tasks, wc, setup.keygen.record_key_fields)
    return split_rows(out, tasks, num_tasks)


class HoodieWriteClient:
    """Writes one table from one process: one :meth:`write` call is one commit.

    The client keeps its bucket assigner (the key index) between :meth:`write` calls, as a
    Flink bucket-assign task keeps it between checkpoints. It is reused only while the
    timeline is exactly as this client left it; any instant another process added, rolled back
    or archived meanwhile, or a write that failed after assigning its rows, makes the next call
    bootstrap it from the table. Like Flink's state index, a kept index remembers the file
    group of a deleted key, so a later upsert of it goes there and meets the delete (under
    event-time ordering an older upsert loses to it); a bootstrapped index only knows live keys.
    """

    def __init__(
        self,
        path: str,
        options: dict[str, Any] | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.path = path
        self.options = options
        self.storage_options = storage_options
        self.wc = resolve_options(options)
        self._assigner: BucketAssigner | None = None
        self._assigner_timeline: tuple[Any, ...] | None = None
        self._table: HoodieTable | None = None

    @staticmethod
    def _timeline_state(coord: Any, reload: bool, own: str | None = None) -> tuple[Any, ...]:
        assert coord.protocol is not None
        timeline = coord.protocol.timeline
        instants = (timeline.reload() if reload else timeline).instants
        return tuple(i for i in instants if i.timestamp != own)

    def _assigner_for(
        self, coord: Any, setup: Any, slices: list[FileSlice], own: str | None = None
    ) -> BucketAssigner:
        """The cached assigner when the timeline is as this client left it (``own``: this
        write's instant, already started under OCC), else a new one. ``slices`` were just
        listed, so the coordinator's timeline is current."""
        profile = coord.profile(slices)
        cached, self._assigner = self._assigner, None
        if cached is not None and self._assigner_timeline == self._timeline_state(
            coord, False, own
        ):
            cached.reset_profile(profile)
            return cached
        assert coord.protocol is not None
        assert coord.table is not None
        return build_assigner(
            coord.table,
            coord.assigner_config(0, 1),
            profile,
            slices,
        )

    def write(self, data: Any) -> CommitResult:
        """Write a pyarrow Table/RecordBatch or pandas DataFrame as one commit.

        Under optimistic concurrency control
        (``hoodie.write.concurrency.mode=optimistic_concurrency_control``) a write that
        conflicts with another writer's commit is rolled back and retried from the table as it
        is then, ``hoodie.write.num.retries.on.conflict.failures`` times, before its
        :class:`~hoodie_ray.exceptions.HoodieWriteConflictError` is raised.
        """
        if data is None and self.wc.operation in ("delete_partition", "insert_overwrite_table"):
            table = pa.table({})  # partitions from the option / every partition
        else:
            table = to_arrow(data)
        retries = self.wc.num_retries_on_conflict if self.wc.occ else 0
        op = self.wc.operation
        no_data = op == "delete_partition" or (
            op == "insert_overwrite_table" and not table.num_rows
        )
        once = self._replace_partitions if no_data else self._write_once
        for attempt in range(retries + 1):
            try:
                return once(table)
            except HoodieWriteConflictError:
                self._assigner = None  # rebuilt from the table the other writer changed
                if attempt == retries:
                    raise
        raise AssertionError("unreachable")

    def _write_once(self, table: pa.Table) -> CommitResult:
        wc = self.wc
        coord = Coordinator(self.path, wc, self.storage_options, table=self._table)
        coord.inline_clustering = True  # its assigner is dropped after one
        setup = coord.open(table.schema)
        self._table = coord.table
        ok = False
        try:
            prepared = prepare_input(setup, table, wc)
            if not prepared.data_schema.equals(setup.context.data_schema):
                # a new table's first batch decides its schema; a later one may evolve it
                setup = coord.refix_schema(prepared.data_schema)
            if prepared.num_rows == 0:
                ok = True
                return CommitResult(None)
            rows = prepared.table
            unfolded = (
                wc.changelog_enabled
                or wc.partial_updates
                or setup.context.table_config.partial_update
            )
            if wc.operation in ("upsert", "delete") and not unfolded:  # (the writers fold)
                rows = precombine(
                    rows, setup.context.ordering_field, by_partition=not wc.keys_global
                )
            # OCC: the instant first, so that the conflict check covers every commit the
            # slices read below may have missed
            early = coord.start_instant() if wc.occ else None
            try:
                slices = coord.latest_slices()
                assigner = self._assigner_for(coord, setup, slices, early)
                tagged = assigner.assign(rows)
            except BaseException:
                if early is not None:
                    coord.abandon(early)
                raise
            writer = StreamWriteFunction(setup.context, task_id=0)
            instant = early if early is not None else coord.start_instant()
            try:
                writer.start_instant(
                    instant, {(s.partition_path, s.file_id): s for s in slices}, coord.frozen_logs()
                )
                writer.write(tagged)
                stats = writer.flush_all()
                result = coord.commit(instant, stats)
            except BaseException:
                writer.abort()
                coord.abandon(instant)
                raise
            # Inline compaction (a single process has no background to run it in), cleaning
            # and archival. A plan left pending by a writer that died runs first; without this
            # it stays pending forever, and no new plan is ever scheduled.
            coord.after_commit(None, run_pending=wc.compaction_schedule)
            assigner.checkpoint_done()
            self._assigner_timeline = self._timeline_state(coord, True)
            # an overwrite's (or a clustering's) replaced groups are in no kept index
            replaced = wc.replaces or coord.last_services.clustered is not None
            self._assigner = None if replaced else assigner
            ok = True
            return dataclasses.replace(result, services=coord.last_services)
        finally:
            coord.close(discard_unborn=not ok)  # a refused first write leaves no table

    def _replace_partitions(self, table: pa.Table) -> CommitResult:
        """A replacecommit that writes no data. ``delete_partition``: every file group of the
        partitions ``hoodie.datasource.write.partitions.to.delete`` names (``*`` a wildcard),
        or of those ``table``'s rows fall in, replaced; ``insert_overwrite_table`` of no rows:
        every file group (the table truncated)."""
        coord = Coordinator(self.path, self.wc, self.storage_options, table=self._table)
        coord.open(None)
        self._table = coord.table
        ok = False
        try:
            if self.wc.operation == "insert_overwrite_table":
                result = self._replace_without_data(coord, None)
                ok = True
                return result
            patterns = parse_partitions(self.wc.partitions_to_delete)
            if not patterns and table.num_rows:
                assert coord.setup is not None
                parts = coord.setup.keygen.partition_paths(normalise_table(table))
                patterns = [str(p) for p in pc.unique(parts).to_pylist()]
            partitions = match_partitions(patterns, coord.view().list_partitions())
            if not partitions:  # Java commits it too (nothing replaced); a typo should show
                log.warning(
                    "hoodie_ray: delete_partition of %s matches no partition of %s: the "
                    "replacecommit replaces nothing",
                    ", ".join(patterns),
                    self.path,
                )
            assert coord.table is not None
            check_no_pending_services(coord.table, partitions)
            result = self._replace_without_data(coord, partitions)
            ok = True
            return result
        finally:
            coord.close(discard_unborn=not ok)

    def _replace_without_data(
        self, coord: Coordinator, partitions: list[str] | None
    ) -> CommitResult:
        """A replacecommit of no data: ``partitions`` (None: every one) replaced."""
        instant = coord.start_instant()
        try:
            result = coord.commit(instant, [], partitions=partitions)
        except BaseException:
            coord.abandon(instant)
            raise
        coord.after_commit(None, run_pending=self.wc.compaction_schedule)
        self._assigner = None
        return dataclasses.replace(result, services=coord.last_services)
