"""The single-process write path, and the table-level pieces every writer shares.

:class:`HoodieWriteClient` drives the pure core classes in one process: the same bucket
assignment, buffering, handles and commit protocol the Ray actors run. It is what the tests use
and what users call when they do not want Ray (``hr.write(..., engine="local")``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from hoodie_ray.avro.schema import arrow_to_avro_schema, avro_to_arrow_schema
from hoodie_ray.config.options import WriteConfig, resolve_options
from hoodie_ray.config.table_config import (
    BUCKET_NUM_PROPERTY,
    PROPERTIES_FILE,
    HoodieTableConfig,
    new_table_props,
)
from hoodie_ray.exceptions import HoodieOptionError
from hoodie_ray.file_group.view import FileSlice
from hoodie_ray.keygen import KeyGenerator, TimestampFormat, choose_key_generator
from hoodie_ray.storage import Storage
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat
from hoodie_ray.write.bucket_assigner import (
    AssignerConfig,
    BucketAssigner,
    SmallFile,
    WriteProfile,
)
from hoodie_ray.write.commit import CommitProtocol
from hoodie_ray.write.records import normalise_schema, precombine, prepare_batch, to_arrow
from hoodie_ray.write.stream_writer import StreamWriteFunction

OPERATION_TYPES = {
    "upsert": "UPSERT",
    "insert": "INSERT",
    "bulk_insert": "BULK_INSERT",
    "delete": "DELETE",
}


@dataclass(frozen=True)
class CommitResult:
    """What one commit wrote."""

    instant: str | None
    num_inserts: int = 0
    num_updates: int = 0
    num_deletes: int = 0
    num_files: int = 0
    num_writes: int = 0

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


# -- table-level helpers -----------------------------------------------------------------------


def table_exists(storage: Storage) -> bool:
    return storage.exists(PROPERTIES_FILE)


def keygen_for(table_config: HoodieTableConfig, wc: WriteConfig, schema: pa.Schema) -> KeyGenerator:
    """The key generator recorded in the table config (written by us or by Java)."""
    kg_type = table_config.keygen_type
    if kg_type in (None, "UNKNOWN"):
        kg_type = None
    if kg_type == "CUSTOM":
        from hoodie_ray.exceptions import HoodieUnsupportedError

        raise HoodieUnsupportedError("CustomKeyGenerator tables are not supported for writes")
    ts = None
    if kg_type == "TIMESTAMP":
        props = table_config.props
        fmt = props.get("hoodie.keygen.timebased.output.dateformat") or wc.timebased_output_format
        if not fmt:
            raise HoodieOptionError(
                "timestamp key generator without hoodie.keygen.timebased.output.dateformat"
            )
        ts = TimestampFormat(
            output_format=fmt,
            timestamp_type=props.get("hoodie.keygen.timebased.timestamp.type")
            or wc.timebased_timestamp_type,
            input_format=props.get("hoodie.keygen.timebased.input.dateformat")
            or wc.timebased_input_format,
            timezone=props.get("hoodie.keygen.timebased.output.timezone")
            or wc.timebased_output_timezone,
            scalar_unit=props.get("hoodie.keygen.timebased.timestamp.scalar.time.unit")
            or wc.timebased_scalar_unit,
        )
    return choose_key_generator(
        schema,
        table_config.record_key_fields,
        table_config.partition_fields,
        hive_style=table_config.hive_style,
        url_encode=table_config.url_encode,
        keygen_type=kg_type,
        timestamp=ts,
    )


def _timestamp_format(wc: WriteConfig, schema: pa.Schema) -> TimestampFormat | None:
    """Timestamp partitioning, as Flink configures it from ``write.partition.format``."""
    fmt = wc.timebased_output_format or wc.partition_format
    if not fmt or len(wc.partition_fields) != 1:
        return None
    t = (
        schema.field(wc.partition_fields[0]).type
        if wc.partition_fields[0] in schema.names
        else None
    )
    if wc.timebased_output_format is None and not (
        t is not None and (pa.types.is_timestamp(t) or pa.types.is_date(t))
    ):
        return None
    return TimestampFormat(
        output_format=fmt,
        timestamp_type=wc.timebased_timestamp_type,
        input_format=wc.timebased_input_format,
        timezone=wc.timebased_output_timezone,
        scalar_unit=wc.timebased_scalar_unit,
    )


def create_table(storage: Storage, wc: WriteConfig, data_schema: pa.Schema) -> HoodieTableConfig:
    """Create ``.hoodie/`` with the property set of a new table (spec §1.4)."""
    if not wc.table_name:
        raise HoodieOptionError("option hoodie.table.name is required to create a table")
    if not wc.record_key_fields:
        raise HoodieOptionError(
            "option hoodie.datasource.write.recordkey.field is required to create a table"
        )
    schema = normalise_schema(data_schema)
    ts = _timestamp_format(wc, schema)
    keygen_type = wc.keygen_type
    if wc.keygen_class:
        from hoodie_ray.config.table_config import KEYGEN_TYPE_BY_CLASS

        keygen_type = KEYGEN_TYPE_BY_CLASS.get(wc.keygen_class)
        if keygen_type is None or keygen_type == "CUSTOM":
            raise HoodieOptionError(
                f"option hoodie.datasource.write.keygenerator.class={wc.keygen_class} is not supported"
            )
    kg = choose_key_generator(
        schema,
        wc.record_key_fields,
        wc.partition_fields,
        hive_style=wc.hive_style_partitioning,
        url_encode=wc.partition_url_encode,
        keygen_type=keygen_type,
        timestamp=ts,
    )
    if wc.precombine_field and wc.precombine_field not in schema.names:
        from hoodie_ray.exceptions import HoodieSchemaError

        raise HoodieSchemaError(f"Field {wc.precombine_field} does not exist (precombine field)")
    extra = {}
    if ts is not None:
        extra = {
            "hoodie.keygen.timebased.output.dateformat": ts.output_format,
            "hoodie.keygen.timebased.output.timezone": ts.timezone,
        }
        if ts.timestamp_type:
            extra["hoodie.keygen.timebased.timestamp.type"] = ts.timestamp_type
        if ts.input_format:
            extra["hoodie.keygen.timebased.input.dateformat"] = ts.input_format
    if wc.index_type == "BUCKET":
        extra[BUCKET_NUM_PROPERTY] = str(wc.bucket_num)
    create_schema = json.dumps(
        arrow_to_avro_schema(schema, wc.table_name, with_meta=False), separators=(",", ":")
    )
    props = new_table_props(
        table_name=wc.table_name,
        table_type=wc.table_type,
        record_key_fields=wc.record_key_fields,
        partition_fields=wc.partition_fields,
        ordering_field=wc.precombine_field,
        keygen_type=kg.keygen_type,
        hive_style=wc.hive_style_partitioning,
        url_encode=wc.partition_url_encode,
        table_version=wc.table_version,
        create_schema=create_schema,
        database=wc.database_name,
        extra=extra,
    )
    cfg = HoodieTableConfig(props)
    storage.makedirs(".hoodie")
    if cfg.timeline_layout_version >= 2:
        storage.makedirs(cfg.timeline_path)
    if not storage.create_new(PROPERTIES_FILE, cfg.to_properties_text().encode("utf-8")):
        return HoodieTableConfig.load(storage)  # another process created it first
    return cfg


def check_options_match_table(cfg: HoodieTableConfig, wc: WriteConfig) -> None:
    """Options may not change what defines an existing table (keys, partitions, type...)."""

    def differs(attr: str, table_value: Any, given: Any) -> bool:
        return wc.is_set(attr) and given != table_value

    problems = []
    if differs("record_key_field", cfg.record_key_fields, wc.record_key_fields):
        problems.append(
            f"record key fields {wc.record_key_fields} != table's {cfg.record_key_fields}"
        )
    if differs("partition_path_field", cfg.partition_fields, wc.partition_fields):
        problems.append(f"partition fields {wc.partition_fields} != table's {cfg.partition_fields}")
    if differs("table_type", cfg.table_type, wc.table_type):
        problems.append(f"table type {wc.table_type} != table's {cfg.table_type}")
    if differs("precombine_field", cfg.ordering_field, wc.precombine_field):
        problems.append(f"precombine field {wc.precombine_field} != table's {cfg.ordering_field}")
    if differs("hive_style_partitioning", cfg.hive_style, wc.hive_style_partitioning):
        problems.append("hive_style_partitioning differs from the table's")
    if differs("partition_url_encode", cfg.url_encode, wc.partition_url_encode):
        problems.append("partitionpath.urlencode differs from the table's")
    if wc.is_set("table_name") and wc.table_name != cfg.name:
        problems.append(f"table name {wc.table_name} != table's {cfg.name}")
    if problems:
        raise HoodieOptionError("options conflict with the existing table: " + "; ".join(problems))


def latest_commit_schema(protocol: CommitProtocol) -> pa.Schema | None:
    """The table's data schema from the latest completed write (``extraMetadata.schema``)."""
    tl = protocol.timeline
    for inst in reversed(tl.completed_commits()):
        meta = HoodieCommitMetadata.from_bytes(tl.read_details(inst), tl.layout_version, inst)
        schema = meta.extra_metadata.get("schema") if meta.extra_metadata else None
        if schema:
            return avro_to_arrow_schema(schema)
    create = protocol.table_config.create_schema
    return avro_to_arrow_schema(create) if create else None


def write_profile(
    protocol: CommitProtocol,
    wc: WriteConfig,
    slices: list[FileSlice],
    sizes: dict[tuple[str, str], int],
) -> WriteProfile:
    """Average record size from the latest commits, and the small file groups."""
    avg = wc.record_size_estimate
    tl = protocol.timeline
    for inst in reversed(tl.completed_commits()[-5:]):
        meta = HoodieCommitMetadata.from_bytes(tl.read_details(inst), tl.layout_version, inst)
        stats = [s for ss in meta.partition_to_write_stats.values() for s in ss]
        nbytes = sum(s.total_write_bytes for s in stats if s.num_writes)
        nrec = sum(s.num_writes for s in stats if s.num_writes)
        if nrec > 0 and nbytes > 0:
            avg = max(1, nbytes // nrec)
            break
    small: dict[str, list[SmallFile]] = {}
    for s in slices:
        size = sizes.get((s.partition_path, s.file_id), 0)
        if size < wc.small_file_limit:
            small.setdefault(s.partition_path, []).append(SmallFile(s.file_id, size))
    return WriteProfile(avg_record_size=avg, small_files=small)


def slice_sizes(storage: Storage, slices: list[FileSlice]) -> dict[tuple[str, str], int]:
    """Base size plus log sizes scaled by Hudi's log-to-parquet ratio, per file group."""
    from hoodie_ray.write.bucket_assigner import LOG_TO_PARQUET_RATIO

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


def build_assigner(
    setup_storage: Storage,
    table_config: HoodieTableConfig,
    timeline: Any,
    config: AssignerConfig,
    profile: WriteProfile,
    slices: list[FileSlice],
) -> BucketAssigner:
    """A bucket assigner with its key index loaded from the table (Flink index bootstrap)."""
    from hoodie_ray.reader.index_bootstrap import bootstrap_entries

    assigner = BucketAssigner(config, profile)
    if config.index_type == "BUCKET":
        assigner.set_bucket_file_ids((s.partition_path, s.file_id) for s in slices)
    elif not config.append_mode and config.index_bootstrap and slices:
        assigner.bootstrap(bootstrap_entries(setup_storage, table_config, timeline, slices))
    return assigner


def prepare_input(setup: Any, table: pa.Table, wc: WriteConfig) -> Any:
    """Keys, partitions and delete flags of an input batch, checked against the table schema."""
    ctx = setup.context
    return prepare_batch(
        table,
        setup.keygen,
        ordering_field=ctx.ordering_field,
        operation=wc.operation,
        data_schema=ctx.data_schema if setup.schema_fixed or wc.operation == "delete" else None,
    )


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

    @staticmethod
    def _timeline_state(coord: Any, reload: bool) -> tuple[Any, ...]:
        assert coord.protocol is not None
        timeline = coord.protocol.timeline
        return tuple((timeline.reload() if reload else timeline).instants)

    def _assigner_for(self, coord: Any, setup: Any, slices: list[FileSlice]) -> BucketAssigner:
        """The cached assigner when the timeline is as this client left it, else a new one.
        ``slices`` were just listed, so the coordinator's timeline is current."""
        profile = coord.profile(slices)
        cached, self._assigner = self._assigner, None
        if cached is not None and self._assigner_timeline == self._timeline_state(coord, False):
            cached.reset_profile(profile)
            return cached
        assert coord.protocol is not None
        return build_assigner(
            coord.storage,
            setup.table_config,
            coord.protocol.timeline,
            coord.assigner_config(0, 1),
            profile,
            slices,
        )

    def write(self, data: Any) -> CommitResult:
        """Write a pyarrow Table/RecordBatch or pandas DataFrame as one commit."""
        from hoodie_ray.write.coordinator import Coordinator

        table = to_arrow(data)
        wc = self.wc
        coord = Coordinator(self.path, wc, self.storage_options)
        setup = coord.open(table.schema)
        try:
            prepared = prepare_input(setup, table, wc)
            if not setup.schema_fixed:
                setup = coord.refix_schema(
                    pa.schema(
                        [f for f in prepared.table.schema if f.name in prepared.data_columns()]
                    )
                )
            if prepared.num_rows == 0:
                return CommitResult(None)
            rows = prepared.table
            if wc.operation in ("upsert", "delete"):
                rows = precombine(rows, setup.context.ordering_field)
            slices = coord.latest_slices()
            assigner = self._assigner_for(coord, setup, slices)
            tagged = assigner.assign(rows)
            writer = StreamWriteFunction(setup.context, task_id=0)
            instant = coord.start_instant()
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
            # Inline compaction (a single process has no background to run it in). A plan left
            # pending by a writer that died runs first; without this it stays pending forever,
            # and no new plan is ever scheduled (one pending plan blocks scheduling).
            pending = coord.pending_compactions() if wc.compaction_schedule else []
            scheduled = pending[0] if pending else coord.schedule_compaction()
            if scheduled is not None:
                coord.run_compaction(scheduled)
            assigner.checkpoint_done()
            self._assigner_timeline = self._timeline_state(coord, True)
            self._assigner = assigner
            return result
        finally:
            coord.close()
