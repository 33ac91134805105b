"""The coordinator core (Flink StreamWriteOperatorCoordinator), without Ray.

It owns the table-level decisions: creating the table, the writer lock, recovery from the
timeline (rolling back what a dead writer left pending), handing out instants, the write
profile for the assigners, and committing the write statuses of a checkpoint.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from hoodie_ray.avro.schema import arrow_to_avro_schema
from hoodie_ray.config.options import WriteConfig, resolve_options
from hoodie_ray.config.table_config import BUCKET_NUM_PROPERTY, HoodieTableConfig
from hoodie_ray.exceptions import HoodieTableNotFoundError, HoodieUnsupportedError
from hoodie_ray.file_group.view import FileSlice, FileSystemView
from hoodie_ray.keygen import KeyGenerator
from hoodie_ray.storage import Storage, open_storage
from hoodie_ray.timeline.metadata import HoodieWriteStat
from hoodie_ray.write.bucket_assigner import AssignerConfig, WriteProfile
from hoodie_ray.write.client import (
    OPERATION_TYPES,
    CommitResult,
    check_options_match_table,
    create_table,
    keygen_for,
    latest_commit_schema,
    slice_sizes,
    table_exists,
    write_profile,
)
from hoodie_ray.write.commit import CommitProtocol
from hoodie_ray.write.lock import WriterLock
from hoodie_ray.write.records import normalise_schema
from hoodie_ray.write.stream_writer import WriteContext


@dataclass(frozen=True)
class TableSetup:
    """What every task of a write job needs to know about the table (picklable)."""

    context: WriteContext
    keygen: KeyGenerator
    schema_fixed: bool  # False until the first commit fixes the data schema

    @property
    def table_config(self) -> HoodieTableConfig:
        return self.context.table_config


class Coordinator:
    """Table setup, instants, commits and rollbacks of one write job."""

    def __init__(
        self,
        path: str,
        options: dict[str, Any] | WriteConfig | None = None,
        storage_options: dict[str, Any] | None = None,
        lock_owner: str | None = None,
    ) -> None:
        self.path = path
        self.wc = resolve_options(options)
        self.storage: Storage = open_storage(path, storage_options)
        self.lock = WriterLock(
            self.storage,
            heartbeat_ms=self.wc.lock_heartbeat_ms,
            expire_ms=self.wc.lock_expire_ms,
            owner=lock_owner,
        )
        self.protocol: CommitProtocol | None = None
        self.setup: TableSetup | None = None
        self.commit_latencies: list[float] = []
        self.storage_options = storage_options
        self._compaction: Any = None
        self._started: dict[str, float] = {}

    # -- setup ---------------------------------------------------------------------------------
    def open(self, input_schema: pa.Schema | None) -> TableSetup:
        """Take the lock, create the table if needed, recover, and fix the write context."""
        self.lock.acquire()
        try:
            return self._open(input_schema)
        except BaseException:
            self.lock.release()
            raise

    def _open(self, input_schema: pa.Schema | None) -> TableSetup:
        wc = self.wc
        if not table_exists(self.storage):
            if input_schema is None:
                raise HoodieTableNotFoundError(f"no Hudi table at {self.path}")
            if wc.operation == "delete":
                raise HoodieTableNotFoundError(f"cannot delete from {self.path}: no table there")
            create_table(self.storage, wc, input_schema)
        cfg = HoodieTableConfig.load(self.storage)
        check_options_match_table(cfg, wc)
        if cfg.table_version == 9:
            raise HoodieUnsupportedError(
                f"table version 9 is read-only in hoodie_ray (writes support 6 and 8): {self.path}"
            )
        if cfg.props.get("hoodie.table.metadata.partitions"):
            raise HoodieUnsupportedError(
                f"{self.path} has a metadata table (hoodie.table.metadata.partitions); hoodie_ray "
                "does not maintain it, so writing would leave it stale"
            )
        if not cfg.populate_meta_fields:
            raise HoodieUnsupportedError(
                f"{self.path}: writes to tables without meta fields are not supported"
            )
        self.protocol = CommitProtocol(self.storage, cfg)
        self.protocol.rollback_pending_writes()
        stored_buckets = cfg.props.get(BUCKET_NUM_PROPERTY)
        if stored_buckets is not None:
            wc = self.wc = _bucket_options_for_table(wc, stored_buckets, self.path)
        if wc.index_type == "BUCKET":
            _check_bucket_layout(self.latest_slices(), wc.bucket_num, self.path)
        table_schema = latest_commit_schema(self.protocol)
        fixed = table_schema is not None and bool(self.protocol.timeline.completed_commits())
        if table_schema is None:
            if input_schema is None:
                raise HoodieTableNotFoundError(
                    f"{self.path} has no schema yet and no input was given"
                )
            table_schema = normalise_schema(input_schema)
        data_schema = pa.schema([f for f in table_schema if not f.name.startswith("_hoodie_")])
        keygen = keygen_for(cfg, self.wc, data_schema)
        avro = arrow_to_avro_schema(data_schema, cfg.name, with_meta=True)
        ctx = WriteContext(self.storage, cfg, self.wc, data_schema, avro)
        self.setup = TableSetup(ctx, keygen, fixed)
        return self.setup

    def refix_schema(self, data_schema: pa.Schema) -> TableSetup:
        """Before the first commit of a new table, the first batch decides the schema."""
        assert self.setup is not None
        ctx = self.setup.context
        avro = arrow_to_avro_schema(data_schema, ctx.table_config.name, with_meta=True)
        new_ctx = WriteContext(ctx.storage, ctx.table_config, ctx.write_config, data_schema, avro)
        self.setup = TableSetup(new_ctx, self.setup.keygen, False)
        return self.setup

    # -- per checkpoint ------------------------------------------------------------------------
    def view(self) -> FileSystemView:
        assert self.protocol is not None
        self.protocol.timeline.reload()
        return FileSystemView.for_table(
            self.storage, self.protocol.table_config, self.protocol.timeline
        )

    def latest_slices(self) -> list[FileSlice]:
        return self.view().latest_file_slices()

    def profile(self, slices: list[FileSlice] | None = None) -> WriteProfile:
        assert self.protocol is not None
        slices = self.latest_slices() if slices is None else slices
        return write_profile(self.protocol, self.wc, slices, slice_sizes(self.storage, slices))

    def assigner_config(self, task_id: int, num_tasks: int) -> AssignerConfig:
        wc = self.wc
        return AssignerConfig(
            task_id=task_id,
            num_tasks=num_tasks,
            small_file_limit=wc.small_file_limit,
            max_file_size=wc.parquet_max_file_size,
            index_type=wc.index_type,
            global_index=wc.index_global,
            bucket_num=wc.bucket_num,
            append_mode=wc.operation in ("insert", "bulk_insert"),
            ordering_field=self.protocol.table_config.ordering_field if self.protocol else None,
            index_bootstrap=wc.index_bootstrap,
        )

    def start_instant(self) -> str:
        """A new instant (requested -> inflight) for the next checkpoint."""
        assert self.protocol is not None
        self.lock.check()
        instant = self.protocol.start()
        self._started[instant] = time.monotonic()
        return instant

    def commit(self, instant: str, stats: list[HoodieWriteStat]) -> CommitResult:
        """Write the completed instant with the statuses of every writer."""
        assert self.protocol is not None and self.setup is not None
        self.lock.check()
        ctx = self.setup.context
        schema_json = json.dumps(
            arrow_to_avro_schema(ctx.data_schema, ctx.table_config.name, with_meta=False),
            separators=(",", ":"),
        )
        self.protocol.commit(
            instant,
            stats,
            schema_json=schema_json,
            operation_type=OPERATION_TYPES[self.wc.operation],
        )
        started = self._started.pop(instant, None)
        if started is not None:
            self.commit_latencies.append(time.monotonic() - started)
        self.setup = TableSetup(ctx, self.setup.keygen, True)
        return CommitResult.from_stats(instant, stats)

    def rollback(self, instant: str) -> None:
        assert self.protocol is not None
        self._started.pop(instant, None)
        self.protocol.rollback(instant)

    def abandon(self, instant: str) -> None:
        """Best effort rollback (left pending for the next writer if it fails)."""
        try:
            self.rollback(instant)
        except Exception:
            pass

    # -- compaction and cleaning ---------------------------------------------------------------
    def compaction_service(self) -> Any:
        from hoodie_ray.compaction.api import CompactionService

        assert self.protocol is not None
        if self._compaction is None:
            self._compaction = CompactionService(
                self.path,
                self.storage,
                self.protocol.table_config,
                self.protocol.timeline,
                self.wc,
                self.storage_options,
            )
        return self._compaction

    def frozen_logs(self) -> set[tuple[str, str]]:
        """Log files covered by pending compaction plans (writers must not append to them)."""
        from hoodie_ray.compaction.plan import frozen_log_files

        assert self.protocol is not None
        return frozen_log_files(self.protocol.timeline)

    def schedule_compaction(self) -> str | None:
        """After a commit: a new plan if enabled, the trigger fires and none is pending."""
        assert self.protocol is not None
        if not (self.protocol.table_config.is_mor and self.wc.compaction_schedule):
            return None
        svc = self.compaction_service()
        if svc.pending():
            return None
        return svc.schedule()

    def pending_compactions(self) -> list[str]:
        return self.compaction_service().pending()

    def compaction_tasks(self, instant: str) -> list[Any]:
        return self.compaction_service().tasks(instant)

    def commit_compaction(self, instant: str, stats: list[HoodieWriteStat]) -> None:
        """Commit an executed compaction (between checkpoints), then clean."""
        self.lock.check()
        self.compaction_service().commit(instant, stats)
        self.clean()

    def rollback_compaction(self, instant: str) -> None:
        self.compaction_service().rollback_inflight(instant)

    def run_compaction(self, instant: str, executor: Any = None) -> None:
        """Execute and commit a compaction in this process (inline compaction)."""
        from hoodie_ray.compaction.api import local_executor

        self.lock.check()
        self.compaction_service().run(instant, executor or local_executor)
        self.clean()

    def clean(self) -> str | None:
        if not self.wc.clean_enabled:
            return None
        return self.compaction_service().clean()

    def close(self) -> None:
        self.lock.release()


def _bucket_options_for_table(wc: WriteConfig, stored: str, path: str) -> WriteConfig:
    """A table created with the bucket index records its bucket count; it stays a bucket
    table of that count. Options that leave the index out get it from the table; options that
    say otherwise are refused (another index type would put keys outside their buckets, and
    a larger count passes the layout check: every existing bucket id is below it)."""
    from hoodie_ray.exceptions import HoodieOptionError

    try:
        count = int(stored.strip())
    except ValueError:
        raise HoodieOptionError(
            f"{path}: {BUCKET_NUM_PROPERTY}={stored!r} in hoodie.properties is not a number"
        ) from None
    if wc.is_set("index_type") and wc.index_type != "BUCKET":
        raise HoodieOptionError(
            f"option index.type={wc.index_type} does not match {path}, a bucket-index table "
            f"({BUCKET_NUM_PROPERTY}={count} in its hoodie.properties); the index type of a "
            "table cannot change"
        )
    if wc.is_set("bucket_num") and wc.bucket_num != count:
        raise HoodieOptionError(
            f"option {BUCKET_NUM_PROPERTY}={wc.bucket_num} does not match {path}, whose "
            f"buckets were created with {count}; the bucket count of a table cannot change"
        )
    return wc.replace(index_type="BUCKET", bucket_num=count)


def _check_bucket_layout(slices: list[FileSlice], bucket_num: int, path: str) -> None:
    """The bucket index finds a key's file group by hashing it: every file group of the table
    must be a bucket below ``bucket_num``. Writing with the bucket index to a table written
    by the state index (or with another bucket count) would duplicate keys."""
    from hoodie_ray.exceptions import HoodieOptionError

    for s in slices:
        fid = s.file_id
        if not (len(fid) > 9 and fid[:8].isdigit() and fid[8] == "-" and int(fid[:8]) < bucket_num):
            raise HoodieOptionError(
                f"index.type=BUCKET with hoodie.bucket.index.num.buckets={bucket_num} does not "
                f"match {path}: file group {fid} (partition {s.partition_path!r}) is not one of "
                "its buckets; the index type and bucket count of a table cannot change"
            )
