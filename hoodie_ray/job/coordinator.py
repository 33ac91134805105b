"""The coordinator core (Flink ``StreamWriteOperatorCoordinator``), without Ray.

It owns the job's table-level decisions: creating the table, the writer lock, recovery from
the timeline (rolling back what a dead writer left pending), handing out instants, the write
profile for the assigners, committing the write statuses of a checkpoint, and after each commit
when to compact, clean and archive. The Ray coordinator actor holds one and forwards to it; the
compaction runner (in this process, or Ray's compactor pool) is handed in from above.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from hoodie_ray.avro.schema import arrow_to_avro_schema
from hoodie_ray.compaction.api import CompactionService, local_executor
from hoodie_ray.compaction.clustering import (
    ClusteringTask,
    cluster_table,
    clustering_due,
    clustering_file_groups,
    clustering_tasks,
    commit_clustering,
    execute_group,
    local_clustering_executor,
    start_clustering,
)
from hoodie_ray.compaction.execute import CompactionTask
from hoodie_ray.compaction.plan import frozen_log_files
from hoodie_ray.config.options import SWITCHABLE_OPERATIONS, WriteConfig, resolve_options
from hoodie_ray.config.table_config import BUCKET_NUM_PROPERTY, HoodieTableConfig
from hoodie_ray.exceptions import (
    HoodieError,
    HoodieOptionError,
    HoodieSchemaEvolutionConflictError,
    HoodieTableNotFoundError,
    HoodieUnsupportedError,
    HoodieWriteConflictError,
    HoodieWriteError,
)
from hoodie_ray.file_group.view import FileSlice, FileSystemView
from hoodie_ray.job.archival import archive_table
from hoodie_ray.job.conflict import (
    TxnStart,
    conflicts_of,
    describe_conflicts,
    file_groups,
    is_compaction,
)
from hoodie_ray.job.replace import REPLACE_OPERATION_TYPES, replaced_file_ids, written_partitions
from hoodie_ray.job.savepoint import check_no_pending_restore
from hoodie_ray.job.schema_conflict import (
    SchemaChoice,
    canonical,
    choose_schema,
    data_schema_of,
    describe_change,
    merged_schema,
    with_fields_of,
)
from hoodie_ray.job.setup import (
    TableSetup,
    bucket_options_for_table,
    check_bucket_layout,
    check_changelog_mode,
    check_concurrency_mode,
    check_new_table_location,
    check_options_match_table,
    check_partial_updates,
    create_table,
    fixed_schema_fields,
    keygen_for,
    latest_commit_schema,
    remove_unborn_table,
    table_exists,
)
from hoodie_ray.meta import META_PREFIX, OPERATION
from hoodie_ray.metadata.layout import (
    BLOOM_FILTERS,
    COLUMN_STATS,
    INDEX_DEFS_PROPERTY,
    PARTITION_STATS,
    RECORD_INDEX,
    inflight_partitions,
)
from hoodie_ray.metadata.secondary_index import index_definitions
from hoodie_ray.metadata_writer.writer import (
    MetadataWriteConfig,
    check_metadata_table_writable,
    finish_compaction_beside,
    metadata_writer,
)
from hoodie_ray.reader.index_bootstrap import MapChunks
from hoodie_ray.storage import Storage, open_storage
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action
from hoodie_ray.timeline.metadata import HoodieWriteStat
from hoodie_ray.timeline.plans import requested_replace_bytes
from hoodie_ray.write.bucket_assigner import (
    LOG_TO_PARQUET_RATIO,
    AssignerConfig,
    SmallFile,
    WriteProfile,
    plan_writers,
    writer_of_groups,
)
from hoodie_ray.write.commit import CommitProtocol, relocate_superseded_logs
from hoodie_ray.write.context import WriteContext
from hoodie_ray.write.heartbeat import HeartbeatClient
from hoodie_ray.write.lock import ProcessId
from hoodie_ray.write.lock_providers import open_lock
from hoodie_ray.write.records import normalise_schema

log = logging.getLogger("hoodie_ray")


OPERATION_TYPES = {
    "upsert": "UPSERT",
    "insert": "INSERT",
    "bulk_insert": "BULK_INSERT",
    "delete": "DELETE",
    **REPLACE_OPERATION_TYPES,
}


@dataclass(frozen=True)
class TableServices:
    """What the table services did after a commit: compactions committed (inline, or a
    background one that finished) and started in the background, the clean, the instants
    archived."""

    compacted: tuple[str, ...] = ()
    compaction_started: str | None = None
    cleaned: str | None = None
    archived: int = 0
    clustered: str | None = None


@dataclass(frozen=True)
class CommitResult:
    """What one commit wrote (and the table services it set off, once they ran)."""

    instant: str | None
    num_inserts: int = 0
    num_updates: int = 0
    num_deletes: int = 0
    num_files: int = 0
    num_writes: int = 0
    services: TableServices = TableServices()

    @classmethod
    def from_stats(cls, instant: str | None, stats: list[HoodieWriteStat]) -> CommitResult:
        return cls(
            instant=instant,
            num_inserts=sum(s.num_inserts for s in stats),
            num_updates=sum(s.num_update_writes for s in stats),
            num_deletes=sum(s.num_deletes for s in stats),
            num_files=len({s.path for s in stats}),
            num_writes=sum(s.num_writes for s in stats),
        )


def write_profile(
    table: HoodieTable,
    wc: WriteConfig,
    slices: list[FileSlice],
    sizes: dict[tuple[str, str], int],
) -> WriteProfile:
    """Average record size from the latest commits that wrote enough bytes to measure it
    (``hoodie.record.size.estimation.threshold`` x the small-file limit, as Java's
    ``averageBytesPerRecord``), and the small file groups."""
    avg = wc.record_size_estimate
    threshold = wc.record_size_estimation_threshold * wc.small_file_limit
    for inst in reversed(table.commits()[-5:]):
        meta = table.metadata(inst)
        stats = [s for ss in meta.partition_to_write_stats.values() for s in ss]
        nbytes = sum(s.total_write_bytes for s in stats if s.num_writes)
        nrec = sum(s.num_writes for s in stats if s.num_writes)
        if nrec > 0 and nbytes > threshold:
            avg = max(1, nbytes // nrec)
            break
    small: dict[str, list[SmallFile]] = {}
    busy = clustering_file_groups(table)  # inserts never pad a group a clustering rewrites
    for s in slices:
        if (s.partition_path, s.file_id) in busy:
            continue
        size = sizes.get((s.partition_path, s.file_id), 0)
        if size < wc.small_file_limit:
            small.setdefault(s.partition_path, []).append(SmallFile(s.file_id, size))
    plan = (
        plan_writers(group_loads(table, slices), wc.write_tasks, wc.index_type == "BUCKET")
        if wc.write_tasks > 1
        else {}
    )
    return WriteProfile(avg_record_size=avg, small_files=small, writer_plan=plan)


LOAD_COMMITS = 3  # recent write commits whose per-group records predict the next checkpoint's
_SERVICE_OPERATIONS = frozenset({"COMPACT", "LOG_COMPACT", "CLUSTER"})
#: file slices from which a record-index build at open is spread (Coordinator.index_map):
#: below, starting tasks costs more than reading the slices here
SPREAD_INDEX_BUILD_SLICES = 16


def group_loads(table: HoodieTable, slices: list[FileSlice]) -> dict[tuple[str, str], float]:
    """Records each live file group took in the last :data:`LOAD_COMMITS` write commits,
    halving per commit back (table services excluded): the load the writer plan packs.
    Read from the timeline, so a restarted coordinator plans as the lost one did."""
    live = {(s.partition_path, s.file_id) for s in slices}
    loads: dict[tuple[str, str], float] = {}
    weight = 1.0
    for inst in reversed(table.commits()):
        if weight < 0.5 ** (LOAD_COMMITS - 1):
            break
        meta = table.metadata(inst)
        if (meta.operation_type or "").upper() in _SERVICE_OPERATIONS:
            continue
        for stats in meta.partition_to_write_stats.values():
            for st in stats:
                g = (st.partition_path or "", st.file_id)
                if g in live:
                    loads[g] = loads.get(g, 0.0) + weight * (st.num_writes + st.num_deletes)
        weight /= 2
    return loads


def slice_sizes(storage: Storage, slices: list[FileSlice]) -> dict[tuple[str, str], int]:
    """Base size plus log sizes scaled by Hudi's log-to-parquet ratio, per file group."""
    out: dict[tuple[str, str], int] = {}
    sizes_by_dir: dict[str, dict[str, int]] = {}
    for s in slices:
        d = sizes_by_dir.get(s.partition_path)
        if d is None:
            d = sizes_by_dir[s.partition_path] = {
                i.name: i.size for i in storage.list_dir(s.partition_path)
            }
        base = d.get(s.base_file, 0) if s.base_file else 0
        logs = sum(d.get(n, 0) for n in s.log_files)
        out[(s.partition_path, s.file_id)] = int(base + LOG_TO_PARQUET_RATIO * logs)
    return out


class CompactionRunner(Protocol):
    """Runs compaction tasks in the background (Ray's compactor pool is one)."""

    def submit(self, tasks: list[CompactionTask]) -> Any:
        """Start the tasks; a handle for :meth:`poll`."""

    def poll(self, handle: Any, wait: bool) -> list[HoodieWriteStat] | None:
        """The tasks' stats when all finished (None while running; ``wait`` blocks); raises
        if any failed."""

    def reset(self) -> None:
        """Drop the workers after a failure (the next submit starts fresh ones)."""

    def submit_clustering(self, tasks: list[ClusteringTask]) -> Any:
        """Start clustering tasks (each a group's rewrite); a handle for :meth:`poll`, which
        gives each task's stats."""


def _identity(cfg: HoodieTableConfig) -> tuple[str | None, ...]:
    """What makes a table this one and not another made at the same path: the properties
    set once at its creation."""
    keys = (
        "hoodie.table.name",
        "hoodie.table.type",
        "hoodie.table.recordkey.fields",
        "hoodie.table.partition.fields",
        "hoodie.table.create.schema",
        "hoodie.table.initial.version",
    )
    return tuple(cfg.props.get(k) for k in keys)


class Coordinator:
    """Table setup, instants, commits and rollbacks of one write job."""

    def __init__(
        self,
        path: str,
        options: dict[str, Any] | WriteConfig | None = None,
        storage_options: dict[str, Any] | None = None,
        lock_owner: str | None = None,
        table: HoodieTable | None = None,
        lock_job: ProcessId | None = None,
    ) -> None:
        self.path = path
        self.wc = resolve_options(options)
        self.storage: Storage = (
            table.storage if table is not None else open_storage(path, storage_options)
        )
        # the provider hoodie.write.lock.provider names (hoodie_ray's own lock by default)
        self.lock = open_lock(self.storage, self.wc, owner=lock_owner, job=lock_job)
        self._created = False  # this job created the table (no other writer had it)
        # the table's identity at open while it has no commit (see start_instant)
        self._born_as: tuple[str | None, ...] | None = None
        # Instant heartbeats under the lazy failed-writes policy (always under OCC): the next
        # writer rolls back only instants whose heartbeat expired
        self.heartbeats = (
            HeartbeatClient(
                self.storage, self.wc.heartbeat_interval_ms, self.wc.heartbeat_tolerable_misses
            )
            if self.wc.lazy_failed_writes
            else None
        )
        self._lock_depth = 0  # OCC: nesting of _locked blocks holding the lock
        self._txn: dict[str, TxnStart] = {}  # OCC: what each open instant knew at its start
        # OCC: the completed instants the job's key index reflects (mark_loaded, own commits)
        self._loaded: set[str] | None = None
        self._rolled_back: set[str] = set()
        # OCC: the table's data schema when this job last read it (its open, its own last
        # commit), canonical (job/schema_conflict.py); None before the table had one
        self._schema_seen: pa.Schema | None = None
        self._own_last: str | None = None  # this job's last commit
        self._canonical: tuple[pa.Schema, pa.Schema] | None = None  # (data schema, canonical)
        self.table: HoodieTable | None = None
        # a handle kept from an earlier job on this table: its timeline is reused (refreshed,
        # not re-parsed) as long as hoodie.properties is unchanged
        self._reuse = table
        self.protocol: CommitProtocol | None = None
        self.setup: TableSetup | None = None
        self.commit_latencies: list[float] = []
        self.storage_options = storage_options
        self._compaction: CompactionService | None = None
        self._running: tuple[str, Any] | None = None  # background compaction: instant, handle
        self._started: dict[str, float] = {}
        # the Ray Data write tasks (ds.write_datasink) that sent rows into the open instant
        self._input_tasks: set[int] = set()
        self._done: list[str] = []  # compactions committed since the last after_commit's report
        self._clustered_between: str | None = None  # a clustering commit_finished committed
        self._cleaned: str | None = None
        self.last_services = TableServices()  # what the last after_commit did
        self.inline_clustering = False  # the caller drops its key index after a clustering
        # async clustering (clustering.async.enabled): instant, plan, the runner's handle
        self._clustering: tuple[str, Any, Any] | None = None
        # spreads the reading of a large table's slices when the record index is built at
        # open (the Ray coordinator passes Ray tasks); None reads them here
        self.index_map: MapChunks | None = None

    # -- setup ---------------------------------------------------------------------------------
    def open(self, input_schema: pa.Schema | None) -> TableSetup:
        """Take the lock, create the table if needed, recover, and fix the write context.

        Single writer: the lock is the job's until :meth:`close`. Optimistic concurrency
        control: it is held only while the table is set up and recovered (and later, briefly,
        to start an instant and to commit); recovery then rolls back only pending writes whose
        heartbeat expired."""
        if not table_exists(self.storage):
            # before the lock: its file would leave .hoodie/ behind in a refused directory
            check_new_table_location(self.storage, self.wc)
        if self.wc.occ:
            with self._locked():
                try:
                    return self._open(input_schema)
                except BaseException:
                    self._discard_unborn()
                    raise
        self.lock.acquire()
        try:
            return self._open(input_schema)
        except BaseException:
            self._discard_unborn()
            self.lock.release()
            raise

    def _discard_unborn(self) -> None:
        """Remove the ``.hoodie`` of a table this job created and wrote no instant to
        (:func:`~hoodie_ray.job.setup.remove_unborn_table`), under the lock. Under OCC
        another writer may have opened it since: its next instant finds the table gone and
        refuses (:meth:`start_instant`)."""
        if not self._created:
            return
        try:
            with self._locked():  # single writer: still ours; OCC: one turn
                remove_unborn_table(self.storage)
        except HoodieError:
            pass  # the lock was lost, or storage refused: leave it

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The table lock around a block that changes the timeline. Single writer: the job
        holds it; check it is still ours. OCC: take it (waiting up to
        ``hoodie.write.lock.wait_time_ms`` for another writer's turn), released at the end of
        the outermost block."""
        if not self.wc.occ:
            self.lock.check()
            yield
            return
        if self._lock_depth == 0:
            self._acquire_waiting()
        self._lock_depth += 1
        try:
            yield
        finally:
            self._lock_depth -= 1
            if self._lock_depth == 0:
                self.lock.release()

    def _acquire_waiting(self) -> None:
        self.lock.acquire_waiting(self.wc.lock_wait_ms)  # another writer's short turn: wait

    def _sync_record_index(self, table: HoodieTable, wc: WriteConfig) -> None:
        """Build the record index and the column / partition statistics when asked for and
        missing; drop them when explicitly turned off."""
        w = metadata_writer(table)
        if not w.enabled:
            return
        has = RECORD_INDEX in w.partitions
        dropping = wc.is_set("metadata_record_index_enable") and not wc.metadata_record_index_enable
        if (has or wc.metadata_record_index_enable) and not dropping and not wc.keys_global:
            # one location per key: a non-global index may hold a key in two partitions, and
            # bucket writes do not tell new keys from updates
            raise HoodieUnsupportedError(
                f"{self.path}: the metadata table's record index needs the global index "
                f"(index.global.enabled=true, index.type=FLINK_STATE); drop it with "
                f"`hoodie-ray metadata drop {self.path} --partition record_index` to write "
                "with this index"
            )
        if wc.metadata_record_index_enable and not has:
            slices = table.latest_file_slices()
            spread = self.index_map if len(slices) >= SPREAD_INDEX_BUILD_SLICES else None
            w.build_record_index(slices, map_chunks=spread)
        elif (
            has
            and wc.is_set("metadata_record_index_enable")
            and not wc.metadata_record_index_enable
        ):
            w.drop_partition(RECORD_INDEX)
        for part, attr in (
            (PARTITION_STATS, "metadata_partition_stats_enable"),
            (COLUMN_STATS, "metadata_column_stats_enable"),
        ):
            if part in w.partitions and wc.is_set(attr) and not getattr(wc, attr):
                w.drop_partition(part)
        if PARTITION_STATS in w.partitions and COLUMN_STATS not in w.partitions:
            # kept from the column statistics' changes: without them it would go stale
            w.drop_partition(PARTITION_STATS)
        wants_partition_stats = wc.metadata_partition_stats_enable  # needs column stats
        if wants_partition_stats and table.table_version < 8:
            raise HoodieOptionError(
                f"{self.path} (table version 6): hoodie.metadata.index.partition.stats.enable"
                " needs table version 8+ (0.x metadata tables have no partition_stats); "
                "upgrade with `hoodie-ray upgrade`"
            )
        wants_column_stats = wc.metadata_column_stats_enable or wants_partition_stats
        if COLUMN_STATS not in w.partitions and wants_column_stats:
            w.initialize_column_stats(wants_partition_stats)
        elif wants_partition_stats and PARTITION_STATS not in w.partitions:
            w.drop_partition(COLUMN_STATS)  # rebuilt with the partition statistics
            w.initialize_column_stats(True)
        self._sync_bloom_filters(w, wc)
        self._sync_secondary_indexes(w, table)

    def _sync_secondary_indexes(self, w: Any, table: HoodieTable) -> None:
        """Secondary indexes ``index.json`` defines that the metadata table lacks (it was
        dropped, ``hoodie.metadata.enable=false``, and made again) are built again from the
        files, as ``hr.create_index`` builds them; one that cannot be (its column gone) is left
        to the user, with a warning."""
        rel = table.table_config.props.get(INDEX_DEFS_PROPERTY, "").strip()
        if not rel:
            return
        listed = set(w.partitions) | set(inflight_partitions(table.table_config))
        for part, d in sorted(index_definitions(table.storage, rel).items()):
            if not d.is_secondary or part in listed:
                continue
            try:
                w.initialize_secondary_index(part, d.source_field)
            except HoodieError as e:
                log.warning("hoodie_ray: secondary index %s not built again: %s", part, e)

    @staticmethod
    def _sync_bloom_filters(w: Any, wc: WriteConfig) -> None:
        """Build ``bloom_filters`` when asked for and missing; drop it when turned off."""
        has = BLOOM_FILTERS in w.partitions
        if (
            has
            and wc.is_set("metadata_bloom_filter_enable")
            and not wc.metadata_bloom_filter_enable
        ):
            w.drop_partition(BLOOM_FILTERS)
        elif wc.metadata_bloom_filter_enable and not has:
            w.initialize_bloom_filters()

    def _open(self, input_schema: pa.Schema | None) -> TableSetup:
        wc = self.wc
        if not table_exists(self.storage):
            if input_schema is None:
                raise HoodieTableNotFoundError(f"no Hudi table at {self.path}")
            if wc.operation == "delete":
                raise HoodieTableNotFoundError(f"cannot delete from {self.path}: no table there")
            check_concurrency_mode(wc, None, self.path)
            check_changelog_mode(wc, None, self.path)
            check_partial_updates(wc, None, self.path)
            self._created = True  # what it leaves if refused part way is removed
            create_table(self.storage, wc, input_schema)
        table = HoodieTable.from_storage(self.storage, self.storage_options, self.path)
        if self._reuse is not None and self._reuse.table_config.props == table.table_config.props:
            table = self._reuse.refresh()
        self.table = table
        cfg = table.table_config
        # a table with no commit yet may be removed by the writer that created it (its first
        # write refused) and made again by another: this write must not go on into that one
        self._born_as = None if table.commits() else _identity(cfg)
        check_options_match_table(cfg, wc)
        check_concurrency_mode(wc, cfg, self.path)
        check_changelog_mode(wc, cfg, self.path)
        check_partial_updates(wc, cfg, self.path)
        unsupported = cfg.write_unsupported_reason()
        if unsupported:
            raise HoodieUnsupportedError(
                f"{self.path}: hoodie_ray cannot write a table with {unsupported}"
            )
        check_metadata_table_writable(cfg, wc.metadata_enable, self.path)
        if not cfg.populate_meta_fields:
            raise HoodieUnsupportedError(
                f"{self.path}: writes to tables without meta fields are not supported"
            )
        check_no_pending_restore(table)
        self.protocol = CommitProtocol(table)
        metadata_writer(table, MetadataWriteConfig.of(wc))
        hb = self.heartbeats
        self.protocol.rollback_pending_writes(
            (lambda instant: not hb.is_expired(instant)) if hb is not None else None
        )
        metadata_writer(table).sync_with_config()
        self._sync_record_index(table, wc)
        cfg = table.table_config  # the metadata partitions may have changed
        stored_buckets = cfg.props.get(BUCKET_NUM_PROPERTY)
        if stored_buckets is not None:
            wc = self.wc = bucket_options_for_table(wc, stored_buckets, self.path)
        if wc.index_type == "BUCKET":
            check_bucket_layout(self.latest_slices(), wc.bucket_num, self.path)
        table_schema = latest_commit_schema(table)
        fixed = table_schema is not None and bool(table.commits())
        if table_schema is None:
            if input_schema is None:
                raise HoodieTableNotFoundError(
                    f"{self.path} has no schema yet and no input was given"
                )
            table_schema = normalise_schema(input_schema)
        data_schema = pa.schema([f for f in table_schema if not f.name.startswith(META_PREFIX)])
        keygen = keygen_for(cfg, self.wc, data_schema)
        avro = arrow_to_avro_schema(
            data_schema, cfg.name, with_meta=True, with_operation=wc.changelog_enabled
        )
        keeps = wc.changelog_enabled or OPERATION in table_schema.names
        ctx = WriteContext(self.storage, cfg, self.wc, data_schema, avro, keeps)
        self.setup = TableSetup(ctx, keygen, fixed)
        self._schema_seen = canonical(data_schema, cfg.name) if fixed and wc.occ else None
        return self.setup

    def refix_schema(self, data_schema: pa.Schema) -> TableSetup:
        """The data schema the next commit records: before the first commit of a new table
        the first batch decides it; a later batch may evolve it (``prepare_input``)."""
        assert self.setup is not None
        if self.setup.schema_fixed:
            # evolved from what the driver knew: columns this job took from another
            # writer's commit since (_resolve_schema) stay, whatever the driver knew
            data_schema = with_fields_of(data_schema, self.setup.context.data_schema)
        return self._set_data_schema(data_schema)

    def _set_data_schema(self, data_schema: pa.Schema) -> TableSetup:
        assert self.setup is not None
        ctx = self.setup.context
        avro = arrow_to_avro_schema(
            data_schema, ctx.table_config.name, with_meta=True, with_operation=ctx.changelog
        )
        new_ctx = dataclasses.replace(ctx, data_schema=data_schema, avro_schema=avro)
        self.setup = TableSetup(new_ctx, self.setup.keygen, self.setup.schema_fixed)
        return self.setup

    def switch_operation(self, operation: str) -> TableSetup:
        """The commits from the next one on are ``operation``'s (its ``operationType``, and
        the assigners prepare input for it): upsert and delete only
        (:data:`~hoodie_ray.config.options.SWITCHABLE_OPERATIONS`), between checkpoints."""
        assert self.setup is not None
        if {operation, self.wc.operation} - SWITCHABLE_OPERATIONS:
            raise HoodieOptionError(
                f"a running writer of {self.path} cannot switch from write.operation "
                f"{self.wc.operation} to {operation} (only between "
                f"{' and '.join(sorted(SWITCHABLE_OPERATIONS))})"
            )
        self.wc = self.wc.replace(operation=operation)
        ctx = dataclasses.replace(self.setup.context, write_config=self.wc)
        self.setup = TableSetup(ctx, self.setup.keygen, self.setup.schema_fixed)
        return self.setup

    # -- per checkpoint ------------------------------------------------------------------------
    def view(self) -> FileSystemView:
        assert self.table is not None
        return self.table.refresh().view()

    def latest_slices(self) -> list[FileSlice]:
        return self.view().latest_file_slices()

    def profile(self, slices: list[FileSlice] | None = None) -> WriteProfile:
        assert self.table is not None
        slices = self.latest_slices() if slices is None else slices
        return write_profile(self.table, self.wc, slices, slice_sizes(self.storage, slices))

    def slices_by_writer(
        self, slices: list[FileSlice], profile: WriteProfile, num_writers: int
    ) -> list[list[FileSlice]]:
        """The file slices each writer task needs: those of the file groups routed to it
        (:func:`~hoodie_ray.write.bucket_assigner.writer_of_groups` under the checkpoint's
        writer plan, as the assigners route). Each writer then reads 1/n of the listing per
        checkpoint, not all of it: the listing grows with the table, the writers with the
        width."""
        if num_writers <= 1:
            return [slices]
        groups = [s.file_group_id for s in slices]
        owner = writer_of_groups(
            groups, num_writers, profile.writer_plan, self.wc.index_type == "BUCKET"
        )
        out: list[list[FileSlice]] = [[] for _ in range(num_writers)]
        for s, w in zip(slices, owner.tolist(), strict=True):
            out[w].append(s)
        return out

    def assigner_config(self, task_id: int, num_tasks: int) -> AssignerConfig:
        cfg = self.table.table_config if self.table is not None else None
        # the bucket index hashes the fields the keys are made of: the key generator's, else
        # the table's, else the options'
        key_fields = tuple(
            (self.setup.keygen.record_key_fields if self.setup is not None else ())
            or (cfg.record_key_fields if cfg is not None else ())
            or self.wc.record_key_fields
        )
        if cfg is None:
            return AssignerConfig.of(self.wc, task_id, num_tasks, record_key_fields=key_fields)
        assert self.table is not None
        return AssignerConfig.of(
            self.wc,
            task_id,
            num_tasks,
            cfg.ordering_field,
            merge_mode=cfg.merge_mode,
            partitioned=bool(cfg.partition_fields),
            record_index=self.wc.metadata_record_index_enable
            or RECORD_INDEX in self.table.metadata_partitions,
            unfolded=self.wc.changelog_enabled or cfg.partial_update or self.wc.partial_updates,
            record_key_fields=key_fields,
        )

    def start_instant(self) -> str:
        """A new instant (requested -> inflight) for the next checkpoint, with its heartbeat
        under the lazy failed-writes policy. Under OCC the timeline and file slices a write
        reads must be read after this (the conflict check covers what completed since)."""
        assert self.protocol is not None
        with self._locked():
            # the writer that created it failed before its first commit and removed it (and
            # another may have made it again since, as another table)
            if self._born_as is not None and self.wc.occ and self._born_as != self._identity_now():
                raise HoodieTableNotFoundError(
                    f"{self.path}: the table was removed since this write opened it (the "
                    "writer that created it failed before its first commit); write again"
                )
            if self.wc.replaces:  # Java's requested file of an overwrite / partition delete
                op = "DELETE_PARTITION" if self.wc.operation == "delete_partition" else None
                instant = self.protocol.start(Action.REPLACE_COMMIT, requested_replace_bytes(op))
            else:
                instant = self.protocol.start()
            if self.heartbeats is not None:
                self.heartbeats.start(instant)
            if self.wc.occ:
                done = frozenset(i.timestamp for i in self.protocol.timeline.completed())
                self._txn[instant] = TxnStart(instant, done)
        self._started[instant] = time.monotonic()
        self._input_tasks = set()
        return instant

    def claim_input_task(self, task: int) -> None:
        """A Ray Data write task (``ds.write_datasink``) is about to send its rows into the
        open instant. Where that task did before (Ray ran it again after its worker died),
        the rows its first attempt sent may be in the instant already: an upsert or a delete
        folds them with the second attempt's by key (as before), but an insert would write
        them twice (no fold before an insert, as Hudi's ``hoodie.combine.before.insert``
        default), so there the write is refused.

        Raises:
            HoodieWriteError: naming the task; the write fails and is rolled back.
        """
        if task in self._input_tasks and self.wc.operation not in ("upsert", "delete"):
            raise HoodieWriteError(
                f"{self.path}: write task {task} of the Dataset ran again (Ray retried it after "
                f"its worker died) and rows of its first attempt may be in the instant already "
                f"({self.wc.operation} folds no duplicates): the write is rolled back; write "
                "the Dataset again"
            )
        self._input_tasks.add(task)

    def _identity_now(self) -> tuple[str | None, ...] | None:
        if not table_exists(self.storage):
            return None
        return _identity(HoodieTableConfig.load(self.storage))

    def mark_loaded(self) -> None:
        """OCC: the job's assigners load their key index from the table as it is now (call
        before the slices they load are listed); :meth:`written_by_others` is relative to it."""
        assert self.table is not None
        tl = self.table.refresh().active_timeline
        self._loaded = {i.timestamp for i in tl.completed()}

    def written_by_others(self) -> list[str]:
        """OCC: writes another writer completed since :meth:`mark_loaded` (compactions, cleans
        and rollbacks leave every key where it was and do not count; this job's own commits
        are added as they land). A key index loaded before them may miss keys they wrote: the
        job reloads it. Empty without OCC, or before any :meth:`mark_loaded`; under NBCC only
        replacecommits count."""
        if not self.wc.occ or self._loaded is None:
            return []
        assert self.table is not None
        table = self.table.refresh()
        completed = table.active_timeline.completed()
        self._loaded.intersection_update(i.timestamp for i in completed)  # archived ones go
        out = []
        for inst in completed:
            if inst.timestamp in self._loaded:
                continue
            # Under NBCC a key's bucket and its file group are fixed (the bucket index), so
            # another writer's delta commits move no key: only a replacecommit counts.
            writes = (
                (Action.REPLACE_COMMIT,)
                if self.wc.nbcc
                else (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
            )
            if inst.action in writes and not is_compaction(inst, table.metadata(inst)):
                out.append(inst.timestamp)
            else:
                self._loaded.add(inst.timestamp)  # no write: checked once
        return out

    def commit(
        self,
        instant: str,
        stats: list[HoodieWriteStat],
        partitions: list[str] | None = None,
    ) -> CommitResult:
        """Write the completed instant with the statuses of every writer.

        A replace operation's commit (``write.operation`` insert_overwrite,
        insert_overwrite_table, delete_partition) replaces the file groups of the partitions
        it overwrites (``partitions``: delete_partition's, else those ``stats`` write, or every
        one for insert_overwrite_table), read now, under the lock (:mod:`~hoodie_ray.job.replace`).

        Under OCC, first (under the lock) the conflict check: when a write that completed
        since this instant started, or a table-service plan scheduled since, touches one of
        its file groups, the instant is rolled back and :class:`HoodieWriteConflictError`
        names the other instants and the file groups."""
        assert self.protocol is not None and self.setup is not None
        with self._locked():
            replaced = self._replaced(stats, partitions)
            self._check_pending_clustering(instant, stats)
            self._check_conflicts(instant, stats, replaced)
            self._resolve_schema(instant)
            if self._compacted_since(instant):
                assert self.table is not None
                stats = relocate_superseded_logs(self.table, instant, stats)
            if self.wc.occ:
                # a turn that stalled past the lock's expiry (taken over meanwhile) commits
                # nothing: the instant stays pending for its new holder's recovery
                self.lock.check()
            self._commit(instant, stats, replaced)
            if self.heartbeats is not None:
                self.heartbeats.stop(instant)
        self._txn.pop(instant, None)
        self._born_as = None  # a table with a commit is never removed as unborn
        if self._loaded is not None:
            self._loaded.add(instant)  # the job's key index took this commit's keys itself
        return CommitResult.from_stats(instant, stats)

    def _replaced(
        self, stats: list[HoodieWriteStat], partitions: list[str] | None
    ) -> dict[str, list[str]] | None:
        """A replace operation's ``partitionToReplaceFileIds`` (None for other writes)."""
        if not self.wc.replaces:
            return None
        if partitions is None and self.wc.operation != "insert_overwrite_table":
            partitions = written_partitions(stats)
        return replaced_file_ids(self.view(), partitions, stats)

    def _check_pending_clustering(self, instant: str, stats: list[HoodieWriteStat]) -> None:
        """Refuse a write to file groups a pending clustering rewrites (Java's default
        SparkRejectUpdateStrategy): the clustering's commit would replace them, and the write
        with them. The instant is rolled back."""
        assert self.table is not None
        table = self.table.refresh()
        busy = clustering_file_groups(table)
        if not busy:
            return
        hit = sorted(file_groups(stats) & set(busy))
        if not hit:
            return
        self.rollback(instant)
        plans = ", ".join(sorted({busy[g] for g in hit}))
        raise HoodieWriteConflictError(
            f"{self.path}: write {instant} updates file groups pending clustering {plans} "
            f"rewrites ({', '.join(f'{p}/{f}' for p, f in hit[:3])}); {instant} was rolled "
            f"back. Let the clustering finish (one of hoodie_ray's that died: `hoodie-ray "
            f"cluster {self.path}` rolls it back)"
        )

    def _compacted_since(self, instant: str) -> bool:
        """OCC, table version 6: did a compaction complete since ``instant`` started (its logs
        may then be in a superseded slice)? Call after the conflict check reloaded the
        timeline."""
        start = self._txn.get(instant)
        if start is None or self.table is None or self.table.completion_time_slicing:
            return False
        return any(
            i.action == Action.COMMIT and i.timestamp not in start.completed
            for i in self.table.active_timeline.completed()
        )

    def _check_conflicts(
        self,
        instant: str,
        stats: list[HoodieWriteStat],
        replaced: dict[str, list[str]] | None = None,
    ) -> None:
        start = self._txn.get(instant)
        if not self.wc.occ or start is None:
            return
        assert self.table is not None
        self.table.refresh()
        # NBCC: writers of one file group all commit (Java resolves conflicts there only for
        # bulk inserts, which write base files); replace and clustering still conflict
        nbcc = self.wc.nbcc and self.wc.operation != "bulk_insert"
        conflicts = conflicts_of(
            self.table, start, stats, writes_conflict=not nbcc, replaced=replaced
        )
        if not conflicts:
            return
        self.rollback(instant)
        raise HoodieWriteConflictError(
            f"{self.path}: write {instant} conflicts with "
            + describe_conflicts(conflicts)
            + f"; {instant} was rolled back"
        )

    def _resolve_schema(self, instant: str) -> None:
        """OCC: the schema this commit records, when another writer's commit since this job
        last read the table changed it (job/schema_conflict.py, Java's RFC-82 rules): theirs
        where only they changed it (kept for this job's later commits too), a conflict
        where both did, differently: the instant is rolled back and
        :class:`HoodieSchemaEvolutionConflictError` says what each changed (this job then
        writes both, so a replay or retry commits both). Call after the conflict check
        reloaded the timeline."""
        if not self.wc.occ or instant not in self._txn:
            return
        assert self.table is not None and self.setup is not None
        now: pa.Schema | None = None
        other = ""
        for inst, text in self.table.latest_writes():
            if inst.timestamp == self._own_last:
                return  # nobody wrote since this job's last commit
            now = data_schema_of(text)
            if now is not None:
                other = inst.timestamp
                break
        if now is None:
            return
        ctx = self.setup.context
        now = canonical(now, ctx.table_config.name)
        ours = self._canonical_data_schema()
        seen = self._schema_seen
        choice = choose_schema(seen, ours, now)
        if choice is SchemaChoice.OURS:
            return
        if choice is SchemaChoice.THEIRS:
            log.info(
                "%s: %s changed the table schema since this writer read it (%s): commit %s "
                "records it",
                self.path,
                other,
                describe_change(seen, now),
                instant,
            )
            self._set_data_schema(now)
            return
        try:
            both: pa.Schema | None = merged_schema(now, ours, fixed_schema_fields(ctx.table_config))
        except HoodieError:
            both = None  # no schema holds both: a retry is refused again
        if both is not None:
            self._schema_seen = now
            self._set_data_schema(both)
        self.rollback(instant)
        raise HoodieSchemaEvolutionConflictError(
            f"{self.path}: write {instant} changes the table schema "
            f"({describe_change(seen, ours)}) while {other}, committed since this writer read "
            f"the table, changed it ({describe_change(seen, now)}); {instant} was rolled back. "
            + (
                "A retry (hoodie.write.num.retries.on.conflict.failures) writes both changes"
                if both is not None
                else "The two schemas cannot be merged: write with the table's schema"
            )
        )

    def _canonical_data_schema(self) -> pa.Schema:
        """:func:`~hoodie_ray.job.schema_conflict.canonical` of this job's data schema (kept
        while the schema is the same object)."""
        assert self.setup is not None
        ctx = self.setup.context
        kept = self._canonical
        if kept is None or kept[0] is not ctx.data_schema:
            kept = self._canonical = (
                ctx.data_schema,
                canonical(ctx.data_schema, ctx.table_config.name),
            )
        return kept[1]

    def _commit(
        self,
        instant: str,
        stats: list[HoodieWriteStat],
        replaced: dict[str, list[str]] | None = None,
    ) -> None:
        assert self.protocol is not None and self.setup is not None
        ctx = self.setup.context
        schema_json = json.dumps(
            arrow_to_avro_schema(
                ctx.data_schema,
                ctx.table_config.name,
                with_meta=False,
                with_operation=ctx.keeps_operation,
            ),
            separators=(",", ":"),
        )
        self.protocol.commit(
            instant,
            stats,
            schema_json=schema_json,
            operation_type=OPERATION_TYPES[self.wc.operation],
            action=Action.REPLACE_COMMIT if replaced is not None else None,
            replaced=replaced,
        )
        started = self._started.pop(instant, None)
        if started is not None:
            self.commit_latencies.append(time.monotonic() - started)
        self.setup = TableSetup(ctx, self.setup.keygen, True)
        self._own_last = instant
        if self.wc.occ:
            self._schema_seen = self._canonical_data_schema()

    def is_completed(self, instant: str) -> bool:
        """Did ``instant`` complete (after a lost coordinator: did its commit land)?"""
        assert self.table is not None
        return any(i.timestamp == instant for i in self.table.refresh().active_timeline.completed())

    def rollback(self, instant: str) -> None:
        """Roll back this writer's ``instant``; refused (HoodieCommitConflictError) once the lock
        is lost: the table is then its new holder's, whose recovery rolls the instant back."""
        assert self.protocol is not None
        with self._locked():
            self._started.pop(instant, None)
            self._txn.pop(instant, None)
            self.protocol.rollback(instant)
            self._rolled_back.add(instant)
            if self.heartbeats is not None:
                self.heartbeats.stop(instant)

    def abandon(self, instant: str) -> None:
        """Best effort rollback (left pending for the next holder if it fails or the lock is
        lost)."""
        if instant in self._rolled_back:
            return  # the conflict check rolled it back already
        try:
            self.rollback(instant)
        except Exception:
            pass

    # -- compaction, cleaning and archival ------------------------------------------------------
    def compaction_service(self) -> CompactionService:
        assert self.table is not None
        if self._compaction is None:
            self._compaction = CompactionService(self.table, self.wc)
        return self._compaction

    def frozen_logs(self) -> set[tuple[str, str]]:
        """Log files covered by pending compaction plans (writers must not append to them)."""
        assert self.table is not None
        return frozen_log_files(self.table.active_timeline)

    def schedule_compaction(self) -> str | None:
        """After a commit: a new plan if enabled, the trigger fires and none is pending."""
        assert self.table is not None
        if not (self.table.is_mor and self.wc.compaction_schedule):
            return None
        svc = self.compaction_service()
        if svc.pending():
            return None
        # NBCC: other writers' delta commits go on beside the plan, which covers the completed
        # ones only (a log completing after the plan's instant joins the next slice)
        return svc.schedule(beside_writes=self.wc.nbcc)

    def pending_compactions(self) -> list[str]:
        return self.compaction_service().pending()

    def pending_clusterings(self) -> int:
        """Clusterings scheduled on the table and not committed (any job's)."""
        assert self.table is not None
        return len(self.table.pending_clusterings())

    def compaction_tasks(self, instant: str) -> list[Any]:
        return self.compaction_service().tasks(instant)

    def commit_compaction(self, instant: str, stats: list[HoodieWriteStat]) -> None:
        """Commit an executed compaction (between checkpoints)."""
        with self._locked():
            self.compaction_service().commit(instant, stats)
        self._done.append(instant)

    def rollback_compaction(self, instant: str) -> None:
        with self._locked():  # OCC: its own turn when not in the barrier's
            self.compaction_service().rollback_inflight(instant)

    def run_compaction(self, instant: str) -> None:
        """Execute and commit a compaction in this process (inline compaction)."""
        with self._locked():
            self.compaction_service().run(instant, local_executor)
        self._done.append(instant)

    def clean(self) -> str | None:
        """Clean after a commit (``hoodie.clean.automatic``, as Hudi cleans after every
        commit): the file slices the last ``clean.retain_commits`` commits do not read; the
        clean instant, or None."""
        if not self.wc.clean_enabled:
            return None
        with self._locked():
            meta = self.compaction_service().clean()
        cleaned = meta.start_clean_time if meta is not None else None
        self._cleaned = cleaned or self._cleaned
        return cleaned

    def after_commit(
        self, runner: CompactionRunner | None = None, *, run_pending: bool = True
    ) -> int:
        """The table services at a checkpoint barrier, after its commit (Hudi's post-commit):
        commit a finished background compaction, run or start the next one, clean (after every
        commit, as Hudi's ``hoodie.clean.automatic``), then archive.

        ``runner`` runs compactions in the background when ``compaction.async.enabled``
        (without one they run inline); ``run_pending=False`` leaves plans another process
        scheduled alone when this job does not schedule compactions. Returns the number of
        compactions still pending. Errors propagate: the caller decides whether a failed table
        service fails the write.

        With ``hoodie.table.services.enabled=false`` every service stands down (the table's
        services run as their own job: ``hr.compact`` / ``hr.clean`` / ``hr.archive``).
        """
        # compactions and a clustering committed since the last barrier (commit_finished) are
        # reported with this one's
        self._cleaned = None
        if not self.wc.table_services_enabled:
            self._done, self._clustered_between = [], None
            self.last_services = TableServices()
            return 0
        started = self._running[0] if self._running is not None else None
        # OCC: the table services run in one turn of the lock (a single writer holds it)
        with self._locked() if self.wc.occ else nullcontext():
            pending = self._compaction_step(runner, run_pending)
            clustered = (
                self._clustering_step()
                or self._async_clustering_step(runner)
                or self._clustered_between
            )
            self.clean()
            archived = self.archive()
        now = self._running[0] if self._running is not None else None
        self.last_services = TableServices(
            compacted=tuple(self._done),
            compaction_started=now if now != started else None,
            cleaned=self._cleaned,
            archived=len(archived),
            clustered=clustered,
        )
        self._done, self._clustered_between = [], None
        return pending

    def _clustering_step(self) -> str | None:
        """Inline clustering (``hoodie.clustering.inline``) once it is due, for the callers
        that keep no key index across it (:attr:`inline_clustering`: the single-process
        client, which drops its index after one); never beside a background compaction."""
        if not (self.wc.clustering_inline and self.inline_clustering) or self._running:
            return None
        assert self.table is not None
        table = self.table.refresh()
        if not clustering_due(table, self.wc):
            return None
        instant, _, _ = cluster_table(table, self.wc)
        return instant

    def _async_clustering_step(self, runner: CompactionRunner | None) -> str | None:
        """Flink's async clustering beside an inserting stream (``clustering.async.enabled``):
        commit the clustering that finished in the background (its instant), else schedule
        the next one once ``clustering.delta_commits`` commits completed since the last
        replacecommit and start it on ``runner`` (without one it runs here, now). The
        inserts after it never pad its file groups (:func:`write_profile`) and compaction
        plans leave them out. A single writer's pending clustering it is not running died
        with an earlier job, and is rolled back first."""
        if self._clustering is not None:
            return self._finish_clustering(runner, wait=False)
        if not (self.wc.clustering_async and self.wc.schedules_clustering):
            return None
        assert self.table is not None
        table = self.table.refresh()
        # a single writer's: one pending now died with an earlier job (or this job's lost
        # coordinator), and its groups stay out of compaction until it is rolled back
        for dead in table.pending_clusterings():
            self.rollback(dead.timestamp)
        if not clustering_due(table, self.wc, self.wc.clustering_async_max_commits):
            return None
        started = start_clustering(table, self.wc)
        if started is None:
            return None
        instant, plan = started
        try:
            tasks = clustering_tasks(table, instant, plan, self.wc)
            if runner is None:
                stats = [st for g in local_clustering_executor(execute_group, tasks) for st in g]
                commit_clustering(table, instant, plan, stats)
                return instant
            self._clustering = (instant, plan, runner.submit_clustering(tasks))
        except BaseException:
            self._clustering = None
            self.rollback(instant)
            raise
        return None

    def _finish_clustering(self, runner: CompactionRunner | None, wait: bool) -> str | None:
        """Commit the background clustering if it finished (its instant); roll it back if it
        failed (None, as while it runs)."""
        assert self._clustering is not None and runner is not None
        instant, plan, handle = self._clustering
        try:
            done: Any = runner.poll(handle, wait)  # each task's list of stats
        except Exception as e:
            self._clustering = None
            log.warning("hoodie_ray: clustering %s failed, rolled back: %s", instant, e)
            self.rollback(instant)
            if self._running is None:  # fresh workers, unless a compaction runs on them
                runner.reset()
            return None
        if done is None:
            return None
        self._clustering = None
        assert self.table is not None
        try:
            with self._locked():
                commit_clustering(
                    self.table.refresh(), instant, plan, [st for g in done for st in g]
                )
        except BaseException:
            try:
                self.rollback(instant)
            except Exception:
                pass  # left pending: this writer's next clustering step rolls it back
            raise
        return instant

    def _compaction_step(self, runner: CompactionRunner | None, run_pending: bool) -> int:
        if self._running is not None and self._finish_running(runner, wait=False) is None:
            return 1
        pending = self.pending_compactions() if run_pending else []
        if self.wc.occ and self.heartbeats is not None:
            # a plan another process is running (its heartbeat beats) is left to it
            hb = self.heartbeats
            pending = [p for p in pending if hb.is_expired(p)]
        instant = pending[0] if pending else self.schedule_compaction()
        if instant is None:
            return 0
        if runner is None or not self.wc.compaction_async:
            self.run_compaction(instant)
            return 0
        # its heartbeat keeps another process's service from running it too, until it is
        # committed or rolled back (the job may idle between checkpoints meanwhile: parked)
        if self.heartbeats is not None:
            self.heartbeats.start(instant)
        try:
            self._running = (instant, runner.submit(self.compaction_tasks(instant)))
        except BaseException:
            if self.heartbeats is not None:
                self.heartbeats.stop(instant)
            raise
        return 1

    def _finish_running(self, runner: CompactionRunner | None, wait: bool) -> bool | None:
        """Commit the background compaction if it finished (True), roll it back if it failed
        (False); None while it runs."""
        assert self._running is not None and runner is not None
        instant, handle = self._running
        try:
            stats = runner.poll(handle, wait)
        except Exception:
            # a compactor failed or died: undo, and retry on fresh workers
            self._running = None
            try:
                self.rollback_compaction(instant)
            finally:
                self._stop_beat(instant)
            runner.reset()
            return False
        if stats is None:
            return None
        self._running = None
        try:
            self.commit_compaction(instant, stats)
        finally:
            self._stop_beat(instant)
        return True

    def _stop_beat(self, instant: str) -> None:
        if self.heartbeats is not None:
            self.heartbeats.stop(instant)

    def background_handles(self) -> list[Any]:
        """The runner's handles of the compaction and clustering running in the background."""
        out = [self._running[1]] if self._running is not None else []
        if self._clustering is not None:
            out.append(self._clustering[2])
        return out

    def commit_finished(self, runner: CompactionRunner | None) -> list[str]:
        """Between checkpoints: commit the background compaction and clustering that
        finished, as Flink's compaction commit sink does once every operation reported, not
        at the next checkpoint's barrier (a job parked between writes would keep them pending
        meanwhile: a pending plan holds back cleans, archival and partition deletes). Nothing
        while one of this job's instants is open: its barrier commits them. The instants
        committed; :meth:`after_commit` reports them with the next checkpoint's services."""
        if runner is None or self._started or not self.wc.table_services_enabled:
            return []
        if self._running is None and self._clustering is None:
            return []
        # OCC: the lock first, one turn: a wait that times out leaves the finished work for
        # the next barrier, not polled and dropped
        with self._locked():
            return self._commit_finished(runner)

    def _commit_finished(self, runner: CompactionRunner) -> list[str]:
        committed = []
        if self._running is not None:
            instant = self._running[0]
            if self._finish_running(runner, wait=False):
                committed.append(instant)
        if self._clustering is not None:
            clustered = self._finish_clustering(runner, wait=False)
            if clustered is not None:
                self._clustered_between = clustered
                committed.append(clustered)
        return committed

    def finish_compaction(self, runner: CompactionRunner | None) -> None:
        """Wait for a running background compaction and clustering and commit them, and for
        the metadata table's compaction beside the writes (the job is closing: a merge
        killed with its process would be rolled back by the next writer)."""
        try:
            if self._running is not None:
                self._finish_running(runner, wait=True)
        finally:
            try:
                if self._clustering is not None:
                    self._finish_clustering(runner, wait=True)
            finally:
                if self.table is not None:
                    finish_compaction_beside(self.table)

    def archive(self) -> list[str]:
        """Archive the oldest instants once the active timeline is past
        ``hoodie.keep.max.commits`` (when ``hoodie.archive.automatic``); the archived instants."""
        assert self.table is not None
        if not self.wc.archive_automatic:
            return []
        with self._locked():
            return [i.timestamp for i in archive_table(self.table, self.wc)]

    def close(self, discard_unborn: bool = False) -> None:
        """Release the table; ``discard_unborn``: the job failed, so a table it created and
        never committed to is removed first. A metadata-table compaction this process merges
        beside the writes finishes first: the next holder of the lock would roll it back."""
        if self.table is not None:
            finish_compaction_beside(self.table)
        if discard_unborn:
            self._discard_unborn()
        if self.heartbeats is not None:
            self.heartbeats.close()
        self.lock.release()
