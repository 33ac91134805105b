"""Keeping the metadata table in step with the data table (Hudi's
``HoodieBackedTableMetadataWriter``).

Every data action at instant ``T`` becomes an MDT delta commit at the same instant time,
completed *before* the data instant completes (spec/metadata-table.md 5.1): a crash between the
two leaves an MDT delta commit whose data instant is pending, which readers skip
(:meth:`MetadataTable.valid_instant`) and the next writer rolls back with the data instant.
Each MDT delta commit writes one new log file per touched MDT file group
(``.<fileId>_<T>.log.1_<token>``) holding one HFile data block and, for keyed indexes, a
delete block.

After the data instant completes the MDT's own services run (5.3): a compaction once
``hoodie.metadata.compact.max.delta.commits`` delta commits followed the last one (one base
HFile per file group, merged), then a clean of the slices that compaction replaced once
``hoodie.metadata.cleaner.commits.retained`` delta commits followed it.

What each data action writes (5.2): commits, delta commits, compactions and replace commits
list the files their write stats name (the larger size wins); a clean lists its deleted files
as tombstones; a rollback first removes the rolled-back instant's MDT delta commit, then
records the deleted files as tombstones at the rollback instant.
"""

from __future__ import annotations

import bisect
import functools
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_ray.avro.schema import avro_to_arrow_schema
from hoodie_ray.config.options import WriteConfig
from hoodie_ray.config.table_config import PROPERTIES_FILE, HoodieTableConfig
from hoodie_ray.exceptions import (
    HoodieCommitStateUnknownError,
    HoodieCorruptedDataError,
    HoodieUnsupportedError,
)
from hoodie_ray.file_group.naming import (
    base_file_name,
    log_file_name,
    parse_base_file_name,
    parse_log_file_name,
    partition_metadata_bytes,
)
from hoodie_ray.hfile import build_bloom_filter, write_hfile, write_hfile_arrays
from hoodie_ray.hfile.writer import now_ms
from hoodie_ray.log_format.blocks import (
    DataBlock,
    DeleteBlock,
    HeaderMetadataType,
    HFileDataBlock,
)
from hoodie_ray.log_format.reader import read_log_file
from hoodie_ray.log_format.writer import LogWriter
from hoodie_ray.metadata import records as rec
from hoodie_ray.metadata.bloom_filters import BLOOM_FILTER_FILE_GROUPS
from hoodie_ray.metadata.column_stats import (
    column_stats_records,
    column_stats_tombstones,
    columns_to_index,
    partition_stats_records,
)
from hoodie_ray.metadata.layout import (
    BLOOM_FILTERS,
    COLUMN_STATS,
    FILES,
    HFILE_EXTENSION,
    INDEX_DEFS_PROPERTY,
    INIT_INSTANT_PREFIX,
    INIT_WRITE_TOKEN,
    METADATA_TABLE_PATH,
    PARTITION_STATS,
    PARTITIONS_INFLIGHT_PROPERTY,
    PARTITIONS_PROPERTY,
    RECORD_INDEX,
    SECONDARY_INDEX_PREFIX,
    completed_partitions,
    inflight_partitions,
    is_init_instant,
    join_partitions,
    metadata_table_props,
)
from hoodie_ray.metadata.reader import (
    MetadataTable,
    list_data_files,
    newest_of_each_key,
    partition_of_key,
)
from hoodie_ray.metadata.records import decode_value
from hoodie_ray.metadata.secondary_index import (
    INDEX_DEFS_DEFAULT_PATH,
    SECONDARY_INDEX_TYPE,
    IndexDefinition,
    index_definitions,
    java_string_array,
    java_strings,
    save_index_definitions,
    secondary_index_changes,
    secondary_index_columns,
    secondary_index_file_group,
    secondary_index_groups,
    secondary_index_record,
)
from hoodie_ray.metadata_writer.bloom_filters import (
    clean_bloom_records,
    commit_bloom_records,
    initial_bloom_records,
)
from hoodie_ray.storage import Storage, join
from hoodie_ray.table import HoodieTable
from hoodie_ray.threads import kept_pool
from hoodie_ray.timeline import plans
from hoodie_ray.timeline.archive import LSMTimeline, archive_instants, instants_to_archive
from hoodie_ray.timeline.instant import Action, Instant, State, new_instant_time
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat
from hoodie_ray.timeline.plans import (
    HoodieCleanMetadata,
    HoodieCleanPartitionMetadata,
    HoodieCompactionOperation,
    HoodieCompactionPlan,
    HoodieRollbackMetadata,
)
from hoodie_ray.timeline.timeline import ActiveTimeline

if TYPE_CHECKING:
    from hoodie_ray.reader.index_bootstrap import MapChunks

__all__ = [
    "MetadataWriteConfig",
    "MetadataWriter",
    "metadata_enabled_for",
    "metadata_writer",
]

log = logging.getLogger("hoodie_ray")

#: Spark-style write tokens: any digits do for readers.
LOG_WRITE_TOKEN = "0-1-0"
BASE_WRITE_TOKEN = "0-2-0"
#: The ``files`` partition's init instant (spec 5.5: the first init suffix on a base of zeros).
FILES_INIT_INSTANT = "00000000000000000"
UPSERT_PREPPED = "UPSERT_PREPPED"
BLOOM_META_BLOCK = "bloomFilter"
BLOOM_TYPE_CODE = b"DYNAMIC_V0"
#: Record-index file groups: at least 10 (Java's min.filegroup.count), one more per 4M keys.
RECORD_INDEX_MIN_GROUPS = 10
RECORD_INDEX_KEYS_PER_GROUP = 4_000_000
#: Java's hoodie.metadata.index.column.stats.file.group.count default.
COLUMN_STATS_GROUPS = 2
BULK_INSERT_PREPPED = "BULK_INSERT_PREPPED"


@dataclass(frozen=True)
class MetadataWriteConfig:
    """What a writer decides about the metadata table (from the options registry: the
    defaults are the registry's, through :class:`WriteConfig`'s)."""

    enable: bool | None = WriteConfig.metadata_enable
    compact_max_delta_commits: int = WriteConfig.metadata_compact_max_delta_commits
    compact_index_min_log_ratio: float = WriteConfig.metadata_compact_index_min_log_ratio
    #: ``hoodie.metadata.compact.async`` where it applies (a single writer)
    compact_async: bool = WriteConfig.metadata_compact_async
    compact_index_max_delta_commits: int = WriteConfig.metadata_compact_index_max_delta_commits
    clean_retain_commits: int = WriteConfig.metadata_clean_retain_commits
    archive: bool = WriteConfig.archive_automatic
    keep_min_commits: int = WriteConfig.keep_min_commits
    keep_max_commits: int = WriteConfig.keep_max_commits
    timeline_compaction_batch_size: int = WriteConfig.timeline_compaction_batch_size

    @classmethod
    def of(cls, wc: WriteConfig | None) -> MetadataWriteConfig:
        wc = wc or WriteConfig()
        return cls(
            enable=wc.metadata_enable,
            compact_max_delta_commits=wc.metadata_compact_max_delta_commits,
            compact_index_min_log_ratio=wc.metadata_compact_index_min_log_ratio,
            compact_async=wc.metadata_compact_async and wc.concurrency_mode == "single_writer",
            compact_index_max_delta_commits=wc.metadata_compact_index_max_delta_commits,
            clean_retain_commits=wc.metadata_clean_retain_commits,
            archive=wc.archive_automatic,
            keep_min_commits=wc.keep_min_commits,
            keep_max_commits=wc.keep_max_commits,
            timeline_compaction_batch_size=wc.timeline_compaction_batch_size,
        )


def metadata_enabled_for(table_version: int, enable: bool | None) -> bool:
    """``hoodie.metadata.enable`` resolved: Hudi 1.x's default (on) for table versions 8+;
    off for version 6 (whose writer keeps an existing one when unset: v6.py)."""
    if enable is None:
        return table_version >= 8
    return enable


#: MDT partitions this writer maintains (and every ``secondary_index_<name>`` with a
#: definition: :func:`is_maintained`).
MAINTAINED_PARTITIONS = frozenset(
    {FILES, RECORD_INDEX, COLUMN_STATS, PARTITION_STATS, BLOOM_FILTERS}
)


def is_maintained(partition: str) -> bool:
    """True for an MDT partition this writer keeps in step with the data table."""
    return partition in MAINTAINED_PARTITIONS or partition.startswith(SECONDARY_INDEX_PREFIX)


def _key_file_group(partition: str, key: str, groups: int) -> int:
    """The file group of an MDT key: a secondary-index entry goes by its value (all entries of
    one value share a group), every other key by its own hash."""
    if groups == 1:
        return 0
    if partition.startswith(SECONDARY_INDEX_PREFIX):
        return secondary_index_file_group(key, groups)
    return rec.key_to_file_group_index(key, groups)


def check_metadata_table_writable(cfg: HoodieTableConfig, enable: bool | None, path: str) -> None:
    """Refuse a write that would leave a metadata table stale, before anything is written.

    Raises:
        HoodieUnsupportedError: an MDT partition this writer does not maintain (on version 6
            tables anything but ``files``), named, with the command that drops it.
    """
    listed = completed_partitions(cfg) + inflight_partitions(cfg)
    if cfg.table_version < 8:
        check_v6_metadata_table_writable(listed, enable, path)
        return
    if enable is False:
        return  # the writer drops it
    for p in listed:
        if p.startswith(SECONDARY_INDEX_PREFIX) and not cfg.props.get(INDEX_DEFS_PROPERTY):
            raise HoodieUnsupportedError(
                f"{path}: the metadata table's {p} index has no definition "
                f"({INDEX_DEFS_PROPERTY} is not set), so hoodie_ray cannot maintain it; drop it "
                f"with `hoodie-ray metadata drop {path} --partition {p}`"
            )
        if not is_maintained(p):
            raise HoodieUnsupportedError(
                f"{path}: the metadata table's {p} index is not maintained by hoodie_ray, so "
                f"writing would leave it stale; drop it with "
                f"`hoodie-ray metadata drop {path} --partition {p}` (or write with "
                "hoodie.metadata.enable=false to drop the whole metadata table)"
            )


@dataclass
class _Changes:
    """The records one data action adds to the MDT, by MDT partition."""

    upserts: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    deletes: dict[str, set[str]] = field(default_factory=dict)
    #: record-index upserts, column-wise (encoded values, no record dicts)
    columns: dict[str, rec.RecordIndexColumns] = field(default_factory=dict)

    def put(self, partition: str, key: str, record: dict[str, Any]) -> None:
        self.upserts.setdefault(partition, {})[key] = record

    def is_empty(self) -> bool:
        return (
            not any(self.upserts.values())
            and not any(self.deletes.values())
            and not any(len(c) for c in self.columns.values())
        )


def _file_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


class MetadataWriter:
    """Writes the metadata table of one data table (the writer lock is the caller's).

    Args:
        table: the data table's handle.
        config: compaction and cleaning thresholds of the MDT.
    """

    def __init__(self, table: HoodieTable, config: MetadataWriteConfig | None = None) -> None:
        self.table = table
        self.config = config or MetadataWriteConfig()
        self.storage: Storage = table.storage.sub(METADATA_TABLE_PATH)
        self._timeline: ActiveTimeline | None = None
        self._completing: dict[str, bytes] = {}  # a replacecommit's metadata while it is written

    # -- state --------------------------------------------------------------------------------
    @property
    def table_version(self) -> int:
        return self.table.table_version

    @property
    def enabled(self) -> bool:
        """True if the data table keeps a complete ``files`` partition."""
        return FILES in completed_partitions(self.table.table_config)

    @property
    def partitions(self) -> list[str]:
        return completed_partitions(self.table.table_config)

    @property
    def schema_json(self) -> str:
        return rec.metadata_schema_json(self.table_version)

    def mdt_props(self) -> dict[str, str]:
        """The MDT's ``hoodie.properties`` for this data table."""
        return metadata_table_props(self.table.config, self.table_version)

    @property
    def timeline(self) -> ActiveTimeline:
        if self._timeline is None:
            cfg = HoodieTableConfig(self.mdt_props())
            self._timeline = ActiveTimeline.of_table(self.storage, cfg).load()
        return self._timeline

    def reader(self) -> MetadataTable:
        mdt = self.table.metadata_table
        mdt.refresh()
        return mdt

    def _save_data_props(self, **updates: str) -> None:
        cfg = self.table.table_config.with_props(**updates)
        cfg.save(self.table.storage)
        self.table.set_table_config(cfg)

    # -- lifecycle ----------------------------------------------------------------------------
    def sync_with_config(self) -> None:
        """Bring the MDT in line with ``hoodie.metadata.enable`` for this writer: build it from
        a listing when enabled and missing (or half-built), drop it when disabled."""
        want = metadata_enabled_for(self.table_version, self.config.enable)
        if want and not self.enabled:
            self.initialize()
        elif not want and (
            self.enabled
            or inflight_partitions(self.table.table_config)
            or self.storage.exists(PROPERTIES_FILE)
        ):
            self.drop()

    def drop(self) -> None:
        """Delete the MDT: first the data table stops listing it, then its files go."""
        self._settle_beside()
        cfg = self.table.table_config
        if cfg.props.get(PARTITIONS_PROPERTY) or cfg.props.get(PARTITIONS_INFLIGHT_PROPERTY):
            props = dict(cfg.props)
            props.pop(PARTITIONS_PROPERTY, None)
            props.pop(PARTITIONS_INFLIGHT_PROPERTY, None)
            new = HoodieTableConfig(props)
            new.save(self.table.storage)
            self.table.set_table_config(new)
        self.table.storage.delete_dir(METADATA_TABLE_PATH)
        self._timeline = None
        self.table._mdt = None

    def knows_partition(self, partition: str) -> bool:
        """Is ``partition`` a partition of the metadata table: listed (complete or in flight),
        a folder of it, or an index definition?"""
        cfg = self.table.table_config
        if partition in completed_partitions(cfg) or partition in inflight_partitions(cfg):
            return True
        folder = bool(partition) and "/" not in partition and not partition.startswith(".")
        if folder and self.storage.exists(partition):
            return True
        rel = cfg.props.get(INDEX_DEFS_PROPERTY, "").strip()
        return partition in index_definitions(self.table.storage, rel)

    def drop_partition(self, partition: str) -> None:
        """Stop maintaining MDT partition ``partition`` (an index) and delete its files; the
        ``files`` partition stays."""
        self._settle_beside()
        cfg = self.table.table_config
        self._save_data_props(
            **{
                PARTITIONS_PROPERTY: join_partitions(
                    [p for p in completed_partitions(cfg) if p != partition]
                ),
                PARTITIONS_INFLIGHT_PROPERTY: join_partitions(
                    [p for p in inflight_partitions(cfg) if p != partition]
                ),
            }
        )
        if partition and "/" not in partition and not partition.startswith("."):
            self.storage.delete_dir(partition)
        rel = cfg.props.get(INDEX_DEFS_PROPERTY, "").strip()
        if rel and self.table.storage.exists(rel):
            doc = json.loads(self.table.storage.read_bytes(rel))
            defs = doc.get("indexDefinitions") if isinstance(doc, dict) else None
            if isinstance(defs, dict) and partition in defs:
                del defs[partition]
                self.table.storage.write_atomic(rel, json.dumps(doc, indent=2).encode())

    def initialize(self) -> None:
        """Build the ``files`` partition from a listing of the data table (spec 5.5).

        A half-built MDT (a crash during an earlier initialisation) is deleted first. The data
        table lists ``files`` as in flight while it is built and as complete once the init
        delta commit completed."""
        self._settle_beside()
        if self.storage.exists("") and not self.enabled:
            self.table.storage.delete_dir(METADATA_TABLE_PATH)
            self._timeline = None
        self._save_data_props(**{PARTITIONS_INFLIGHT_PROPERTY: FILES})
        props = self.mdt_props()
        self.storage.makedirs(HoodieTableConfig(props).timeline_path)
        HoodieTableConfig(props).save(self.storage)
        self._timeline = None
        listing = list_data_files(self.table.storage_view())
        ts = self.init_instant(FILES, 0)
        self._start(Instant(ts, Action.DELTA_COMMIT, State.REQUESTED))
        self._partition_folder(FILES, ts)
        records = [rec.all_partitions_record(listing.keys())]
        records += [rec.files_record(p, files) for p, files in sorted(listing.items())]
        files = dict(records)
        stat = self._initial_file_group(FILES, 0, ts, len(files), self._hfile(files, base=True))
        self._complete(ts, [stat], BULK_INSERT_PREPPED)
        self._save_data_props(
            **{PARTITIONS_PROPERTY: join_partitions([FILES]), PARTITIONS_INFLIGHT_PROPERTY: ""}
        )

    def rebuild(self) -> list[str]:
        """Drop the MDT and build it again from a listing of the data table, with the
        partitions it had (record index, statistics, bloom filters, secondary indexes): what a
        restore leaves, once instants the MDT's compactions merged are gone. The partitions
        it now holds."""
        self._settle_beside()
        had = list(self.partitions)
        if not had:
            return []
        secondary = self.secondary_indexes()
        self.drop()
        self.initialize()
        self.initialize_indexes(had)
        for partition, d in sorted(secondary.items()):
            self.initialize_secondary_index(partition, d.source_field)
        return self.partitions

    def initialize_indexes(
        self,
        partitions: Iterable[str],
        on_progress: Callable[[int, int], None] | None = None,
        map_chunks: MapChunks | None = None,
    ) -> None:
        """Build, in a metadata table that has only ``files``, the record index, the column
        (and partition) statistics and the bloom filters among ``partitions``, from the data
        files. The record index: :meth:`build_record_index` of the latest file slices, with
        ``on_progress`` and ``map_chunks``."""
        wanted = set(partitions)
        if RECORD_INDEX in wanted:
            slices = self.table.refresh().view().latest_file_slices()
            self.build_record_index(slices, on_progress, map_chunks)
        if COLUMN_STATS in wanted:
            self.initialize_column_stats(PARTITION_STATS in wanted)
        if BLOOM_FILTERS in wanted:
            self.initialize_bloom_filters()

    def build_record_index(
        self,
        slices: Sequence[Any],
        on_progress: Callable[[int, int], None] | None = None,
        map_chunks: MapChunks | None = None,
    ) -> None:
        """Build the ``record_index`` partition from the live keys of the latest file
        ``slices``, read from the data files (calling ``on_progress(done, total)``), the
        reading and each index file group's encoding spread by ``map_chunks`` when given
        (:func:`~hoodie_ray.reader.index_bootstrap.bootstrap_entries`)."""
        from hoodie_ray.reader.index_bootstrap import bootstrap_entries

        entries = bootstrap_entries(
            self.table,
            slices,
            use_record_index=False,
            map_chunks=map_chunks,
            on_progress=on_progress,
        )
        found = {(p, f): k for p, f, k in entries}
        self.initialize_record_index(
            (
                (s.partition_path, s.file_id, s.base_instant, found.get(s.file_group_id, []))
                for s in slices
            ),
            map_chunks,
        )

    def initialize_record_index(
        self,
        entries: Iterable[tuple[str, str, str, Any]],
        map_groups: MapChunks | None = None,
    ) -> None:
        """Build the ``record_index`` partition from ``(partition, file id, base instant, live
        keys)`` of every latest file slice, in ``max(10, keys / 4M)`` file groups.

        Column-wise: keys stay in Arrow arrays (a list of strings is accepted too), each file
        slice's location is Avro-encoded once, and each file group's base HFile is written
        from its sorted key and value columns, by ``map_groups`` when given (Ray tasks: a
        task sorts and encodes a group, this process writes the files)."""
        self._settle_beside()
        tz = self.table.table_config.props.get("hoodie.table.timeline.timezone", "LOCAL")
        ms_of: dict[str, int] = {}
        located = []
        for part, fid, base_ts, keys in entries:
            if base_ts not in ms_of:
                ms_of[base_ts] = rec.instant_to_epoch_ms(base_ts, tz)
            located.append((part, fid, ms_of[base_ts], keys))
        cols = rec.RecordIndexColumns.of_locations(located, self.table_version)
        groups = self.record_index_groups(len(cols))
        self._initialize_partition(
            RECORD_INDEX, cols, groups, first_suffix=2, map_groups=map_groups
        )

    def record_index_groups(self, keys: int) -> int:
        """The record index's file groups for ``keys`` keys: ``max(10, keys / 4M)``."""
        return max(RECORD_INDEX_MIN_GROUPS, -(-keys // RECORD_INDEX_KEYS_PER_GROUP))

    def initialize_column_stats(self, with_partition_stats: bool) -> None:
        """Build ``column_stats`` (every committed file's statistics, as Java computes them,
        in 2 file groups) and, if asked, ``partition_stats`` (one group) for a table that has
        neither."""
        cols = self.indexed_columns()
        mdt = self.reader()
        records: dict[str, dict[str, Any]] = {}
        for part, files in sorted(mdt.files_listing().items()):
            for name in sorted(files):
                if self.initial_column_stats_of(name):
                    records.update(self.file_column_stats(part, name, cols))
        self._initialize_partition(COLUMN_STATS, records, COLUMN_STATS_GROUPS, first_suffix=1)
        if with_partition_stats:
            view = self.table.view()
            stats: dict[str, dict[str, Any]] = {}
            for part in view.list_partitions():
                names = partition_stats_files(view, part)
                keys = [rec.column_stats_key(c, part, n) for n in names for c in cols]
                found = [records[k] for k in keys if k in records]
                stats.update(partition_stats_records(part, found, self.table_version))
            self._initialize_partition(PARTITION_STATS, stats, 1, first_suffix=3)

    def initial_column_stats_of(self, name: str) -> bool:
        """Is data file ``name`` (listed in ``files``) indexed when ``column_stats`` is built?
        1.x: every committed base and log file."""
        parsed = parse_base_file_name(name) or parse_log_file_name(name)
        return parsed is not None and self.table.active_timeline.is_committed(parsed.instant)

    def initialize_bloom_filters(
        self, on_progress: Callable[[int, int], None] | None = None
    ) -> None:
        """Build ``bloom_filters`` (every committed base file's footer filter, in Java's 4 file
        groups) for a table that has none; ``on_progress(done, total)`` per footer read."""
        listing = self.reader().files_listing()
        records = initial_bloom_records(
            self.table, listing, on_progress, stamp=self.initial_bloom_stamp()
        )
        self._initialize_partition(BLOOM_FILTERS, records, BLOOM_FILTER_FILE_GROUPS, first_suffix=2)

    def initial_bloom_stamp(self) -> str | None:
        """The ``timestamp`` of the bloom filters an initialisation indexes; None (1.x): each
        file's own instant."""
        return None

    def initialize_secondary_index(
        self,
        name: str,
        source_field: str,
        on_progress: Callable[[int, int], None] | None = None,
        map_chunks: MapChunks | None = None,
    ) -> str:
        """Build secondary index ``name`` over ``source_field`` from the latest file slices
        (every live record's value), record its definition in ``index.json`` and list it; the
        MDT partition's name (``secondary_index_<name>``). ``on_progress(done, total)`` as
        the file slices are read; ``map_chunks`` spreads their reading (see
        :meth:`secondary_columns`) and the encoding of the index's file groups."""
        partition = (
            name if name.startswith(SECONDARY_INDEX_PREFIX) else f"{SECONDARY_INDEX_PREFIX}{name}"
        )
        schema = self.table.schema
        if schema is None or source_field not in schema.names:
            raise HoodieUnsupportedError(
                f"{self.table.base_uri}: no field {source_field!r} to index"
                + (f" (fields: {', '.join(schema.names)})" if schema is not None else "")
            )
        java_strings(pa.array([], schema.field(source_field).type), source_field)  # refuses types
        slices = self.table.view().latest_file_slices()
        cols = self.secondary_columns(slices, [source_field], schema, None, on_progress, map_chunks)
        entries = secondary_index_columns(cols[source_field], self.table_version)
        cfg = self.table.table_config
        rel = cfg.props.get(INDEX_DEFS_PROPERTY, "").strip() or INDEX_DEFS_DEFAULT_PATH
        save_index_definitions(
            self.table.storage,
            rel,
            put=[
                IndexDefinition(
                    partition, SECONDARY_INDEX_TYPE, "identity", (source_field,), {}, "V2"
                )
            ],
        )
        if not cfg.props.get(INDEX_DEFS_PROPERTY):
            self._save_data_props(**{INDEX_DEFS_PROPERTY: rel})
        groups = secondary_index_groups(len(entries))
        self._initialize_partition(
            partition, entries, groups, first_suffix=4, map_groups=map_chunks
        )
        return partition

    def _initialize_partition(
        self,
        partition: str,
        records: Mapping[str, dict[str, Any]] | rec.RecordIndexColumns,
        groups: int,
        first_suffix: int,
        map_groups: MapChunks | None = None,
    ) -> None:
        """One MDT partition built in its own init delta commit (spec 5.5): listed in flight,
        base HFiles per file group by the Java key hash (an empty group exists through an
        empty delete block, 4.3), then listed complete. Column-wise entries: each group
        sorted and encoded by :func:`build_group_hfile`, spread by ``map_groups`` when
        given."""
        self._settle_beside()
        inflight = inflight_partitions(self.table.table_config)
        self._save_data_props(
            **{PARTITIONS_INFLIGHT_PROPERTY: join_partitions([*inflight, partition])}
        )
        ts = self.init_instant(partition, first_suffix)
        self._start(Instant(ts, Action.DELTA_COMMIT, State.REQUESTED))
        self._partition_folder(partition, ts)
        if isinstance(records, rec.RecordIndexColumns):
            build = self.base_hfile_columns()
            args = [(build, g) for g in records.split(groups)]
            built: Iterable[tuple[int, bytes | None]] = (
                map_groups(build_group_hfile, args)
                if map_groups is not None
                else (build_group_hfile(*a) for a in args)
            )
        else:
            built = (
                (len(g), self._hfile(g, base=True) if g else None)
                for g in _split_by_file_group(records, groups, partition)
            )
        stats = [
            self._initial_file_group(partition, idx, ts, n, data)
            for idx, (n, data) in enumerate(built)
        ]
        self._complete(ts, stats, BULK_INSERT_PREPPED)
        cfg = self.table.table_config
        self._save_data_props(
            **{
                PARTITIONS_PROPERTY: join_partitions([*completed_partitions(cfg), partition]),
                PARTITIONS_INFLIGHT_PROPERTY: join_partitions(
                    [p for p in inflight_partitions(cfg) if p != partition]
                ),
            }
        )

    def init_instant(self, partition: str, first_suffix: int) -> str:
        """The instant of ``partition``'s initialisation delta commit (spec 5.5): ``files`` at
        ``00000000000000000``, the others at the first free ``00000000000000<xyz>`` from
        ``first_suffix`` (1.x's rule; the 0.x writer has its own)."""
        if partition == FILES:
            return FILES_INIT_INSTANT
        tl = self.timeline.reload()
        return next(
            f"{INIT_INSTANT_PREFIX}{n:03d}"
            for n in range(first_suffix, 1000)
            if not tl.contains(f"{INIT_INSTANT_PREFIX}{n:03d}")
        )

    def _initial_file_group(
        self, partition: str, idx: int, ts: str, records: int, data: bytes | None
    ) -> HoodieWriteStat:
        """File group ``idx`` of a partition being initialised at ``ts``: a base HFile
        ``data`` of ``records`` records, or a log file of one empty delete block when there is
        none."""
        fid = rec.file_group_id(partition, idx)
        if data is not None:
            name = base_file_name(fid, BASE_WRITE_TOKEN, ts, HFILE_EXTENSION)
            self.storage.write_bytes(join(partition, name), data)
            size = len(data)
        else:
            name = log_file_name(fid, ts, 1, INIT_WRITE_TOKEN)
            block = DeleteBlock({HeaderMetadataType.INSTANT_TIME: ts}, [], partition)
            writer = LogWriter(
                self.storage, partition, name, table_version=self.table_version, append=False
            )
            size = writer.append_blocks([block]).size
        return HoodieWriteStat(
            file_id=fid,
            path=join(partition, name),
            prev_commit="null",
            num_writes=records,
            num_inserts=records,
            total_write_bytes=size,
            partition_path=partition,
            file_size_in_bytes=size,
        )

    def _write_base_hfile(self, path: str, records: Mapping[str, dict[str, Any]]) -> int:
        """Write a base HFile of ``records`` at ``path``; its size."""
        data = self._hfile(records, base=True)
        self.storage.write_bytes(path, data)
        return len(data)

    def _start(self, requested: Instant, plan: bytes = b"") -> None:
        """Create an MDT instant requested (with its plan) and move it to inflight."""
        self.timeline.create_requested(requested, plan)
        self.timeline.transition_to_inflight(requested)

    def _service_instant(self, tl: ActiveTimeline, action: str = Action.COMPACTION) -> str:
        """A new instant for an MDT table service (``action``): after every instant and
        completion time on the timeline."""
        last = max([i.timestamp for i in tl.instants] + [tl.max_completion_time() or ""])
        return new_instant_time(last or None)

    def _partition_folder(self, partition: str, ts: str) -> None:
        from hoodie_ray.file_group.naming import PARTITION_METAFILE

        rel = join(partition, PARTITION_METAFILE)
        if not self.storage.exists(rel):
            self.storage.create_new(rel, partition_metadata_bytes(ts, 1))

    # -- records of data actions ----------------------------------------------------------------
    def _files_changes(
        self,
        added: Mapping[str, Mapping[str, int]],
        deleted: Mapping[str, Iterable[str]] | None = None,
    ) -> _Changes:
        ch = _Changes()
        deleted = deleted or {}
        parts = sorted(set(added) | set(deleted))
        if not parts:
            return ch
        key, record = rec.all_partitions_record(parts)
        ch.put(FILES, key, record)
        for p in parts:
            key, record = rec.files_record(p, added.get(p, {}), deleted.get(p, ()))
            ch.put(FILES, key, record)
        return ch

    def commit_changes(
        self,
        instant: str,
        meta: HoodieCommitMetadata,
        also_listed: Mapping[str, Mapping[str, int]] | None = None,
    ) -> _Changes:
        """The MDT records of a commit, delta commit, compaction or replace commit.
        ``also_listed``: files the commit adds that no write stat names (partition -> name ->
        size), listed in ``files`` only."""
        added: dict[str, dict[str, int]] = {}
        for part, stat in meta.iter_write_stats():
            path = stat.path or ""
            if not path:
                continue
            names = added.setdefault(part or "", {})
            n = _file_name(path)
            size = int(stat.file_size_in_bytes or stat.total_write_bytes or 0)
            if size > 0:
                names[n] = max(size, names.get(n, 0))
        # a CDC table's .cdc log files are listed too (Java's
        # HoodieTableMetadataUtil adds each write stat's cdcStats), but are no data files
        listed = {p: dict(names) for p, names in added.items()}
        for part, stat in meta.iter_write_stats():
            for cdc_path, cdc_size in (stat.cdc_stats or {}).items():
                listed.setdefault(part or "", {})[_file_name(cdc_path)] = int(cdc_size)
        for part, sizes in (also_listed or {}).items():
            listed.setdefault(part, {}).update(sizes)
        ch = self._files_changes(listed)
        # the views "after" this commit leave out what a replacecommit replaces
        self._completing = (
            {instant: self.table.commit_metadata_bytes(meta)} if meta.is_replace else {}
        )
        try:
            if RECORD_INDEX in self.partitions:
                self._record_index_changes(instant, meta, ch)
            if COLUMN_STATS in self.partitions:
                written = {(p, n) for p, names in added.items() for n in names}
                self._column_stats_changes(
                    instant,
                    written,
                    ch,
                    meta.extra_metadata.get("schema"),
                    replaced=set(meta.replaced_file_ids()),
                )
            if any(p.startswith(SECONDARY_INDEX_PREFIX) for p in self.partitions):
                self._secondary_index_changes(instant, meta, ch)
        finally:
            self._completing = {}
        if BLOOM_FILTERS in self.partitions:
            files = [(p, n) for p, names in added.items() for n in names]
            for k, r in commit_bloom_records(self.table.storage, instant, files).items():
                ch.put(BLOOM_FILTERS, k, r)
        return ch

    # -- column and partition statistics --------------------------------------------------------
    def indexed_columns(self, schema_json: str | None = None) -> list[str]:
        """The columns ``column_stats`` covers: the index definition's source fields when the
        table has one (Java 1.x writes ``.hoodie/.index_defs/index.json``), else Java's
        default choice over the table schema (``schema_json``: the schema a commit about to
        complete writes, which may add columns)."""
        cs = self.index_definitions().get(COLUMN_STATS) or {}
        fields = cs.get("sourceFields") if isinstance(cs, dict) else None
        if fields:
            return [str(f) for f in fields]
        schema = avro_to_arrow_schema(schema_json) if schema_json else self.table.schema
        return columns_to_index(schema) if schema is not None else []

    def index_definitions(self) -> dict[str, Any]:
        """``indexDefinitions`` of the table's index definitions file ({} without one)."""
        rel = self.table.table_config.props.get(INDEX_DEFS_PROPERTY, "").strip()
        if not rel or not self.table.storage.exists(rel):
            return {}
        try:
            doc = json.loads(self.table.storage.read_bytes(rel))
        except ValueError as e:
            raise HoodieCorruptedDataError(f"{self.table.storage.uri(rel)}: {e}") from None
        defs = doc.get("indexDefinitions") if isinstance(doc, dict) else None
        return defs if isinstance(defs, dict) else {}

    def file_column_stats(
        self, part: str, name: str, columns: Sequence[str]
    ) -> list[tuple[str, dict[str, Any]]]:
        """``column_stats`` records of one data file, computed as Java does: a base file's
        from its Parquet footer, a log file's over the records of its data blocks."""
        rel = join(part, name)
        storage = self.table.storage
        if parse_base_file_name(name) is not None:
            with storage.open_input(rel) as f:
                md = pq.read_metadata(f)
            return column_stats_records(
                part, name, parquet_metadata=md, table_version=self.table_version, columns=columns
            )
        tables = [b.records for b in read_log_file(storage, rel) if isinstance(b, DataBlock)]
        schema = self.table.schema
        if tables:
            data = pa.concat_tables(tables, promote_options="permissive")
        else:
            data = (schema or pa.schema([])).empty_table()
        return column_stats_records(
            part, name, table=data, table_version=self.table_version, columns=columns
        )

    def _column_stats_changes(
        self,
        instant: str,
        written: set[tuple[str, str]],
        ch: _Changes,
        schema_json: str | None,
        replaced: set[str] = frozenset(),  # type: ignore[assignment]
    ) -> None:
        cols = self.indexed_columns(schema_json)
        for part, name in sorted(written):
            for k, r in self.file_column_stats(part, name, cols):
                ch.put(COLUMN_STATS, k, r)
        if PARTITION_STATS in self.partitions:
            self._partition_stats_changes(instant, {p for p, _ in written} | replaced, cols, ch)

    def _timeline_after(self, instant: str) -> ActiveTimeline:
        """The data timeline as it is once pending ``instant`` completes (a replacecommit's
        replaced groups left out)."""
        tl = self.table.active_timeline.reload()
        pending = tl.get(instant)
        if pending is None or pending.is_completed:
            return tl
        return tl.as_if_completed(pending, self._completing.get(instant))

    def _partition_stats_changes(
        self, instant: str, parts: set[str], cols: Sequence[str], ch: _Changes
    ) -> None:
        """Partition statistics of the touched partitions, over the files of their latest file
        slices as they are once ``instant`` completes."""

        tl = self._timeline_after(instant)
        view = self.table.storage_view(tl)
        new = ch.upserts.get(COLUMN_STATS, {})
        mdt = self.reader()
        for part in sorted(parts):
            names = partition_stats_files(view, part)
            keys = [rec.column_stats_key(c, part, n) for n in names for c in cols]
            have = {k: new[k] for k in keys if k in new}
            have.update(mdt.records(COLUMN_STATS, [k for k in keys if k not in have]))
            stats = [have[k] for k in keys if k in have]
            if not names:  # a partition a replacecommit emptied (delete_partition)
                gone = {rec.partition_stats_key(c, part) for c in cols}
                ch.deletes.setdefault(PARTITION_STATS, set()).update(gone)
                continue
            for k, r in partition_stats_records(part, stats, self.table_version):
                ch.put(PARTITION_STATS, k, r)

    def _record_index_changes(self, instant: str, meta: HoodieCommitMetadata, ch: _Changes) -> None:
        """Keys new to a file group get their location; deleted keys leave the index unless
        the same instant put them somewhere else (a partition move). Column-wise: each key's
        last change in each file group decides, and of the groups that gained a key the
        last one written names its location."""
        tz = self.table.table_config.props.get("hoodie.table.timeline.timezone", "LOCAL")
        ms = rec.instant_to_epoch_ms(instant, tz)
        located: list[tuple[str, str, int, pa.Array]] = []
        key_arrays: list[pa.Array] = []
        gained: list[np.ndarray] = []
        group: list[np.ndarray] = []
        for part, stat in meta.iter_write_stats():
            ops = stat.record_key_ops or []
            if not ops or not stat.file_id:
                continue
            g = len(located)
            keys = pa.concat_arrays([k.cast(pa.large_string()) for k, _ in ops])
            located.append((part or "", stat.file_id, ms, keys))
            key_arrays.append(keys)
            gained += [np.full(len(k), bool(f)) for k, f in ops]
            group.append(np.full(len(keys), g, dtype=np.int32))
        replaced = self._replaced_keys(meta)
        if replaced is not None and len(replaced):
            # keys of the groups a replacecommit replaced leave the index, unless it put them
            # somewhere new (their entries below win)
            ch.deletes.setdefault(RECORD_INDEX, set()).update(replaced.to_pylist())
        if not key_arrays:
            return
        keys = pa.concat_arrays(key_arrays)
        n = len(keys)
        if n == 0:
            return
        flags = np.concatenate(gained)
        of = np.concatenate(group)
        order = pc.sort_indices(keys).to_numpy()  # stable: by key, then as written
        ks = keys.take(pa.array(order))
        flags, of = flags[order], of[order]
        new_key = np.ones(n, dtype=bool)
        if n > 1:
            new_key[1:] = ~pc.equal(ks.slice(1), ks.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        run = np.cumsum(new_key) - 1  # the run of equal keys each position belongs to
        last_in_group = np.ones(n, dtype=bool)  # a key's last change in its file group
        last_in_group[:-1] = new_key[1:] | (of[1:] != of[:-1])
        put = last_in_group & flags
        placed = np.zeros(int(run[-1]) + 1, dtype=bool)
        placed[run[put]] = True
        # of the groups that gained a key, the last one written wins (as a dict update would)
        winner = np.zeros(len(placed), dtype=np.int64) - 1
        winner[run[put]] = np.flatnonzero(put)  # later positions overwrite earlier ones
        win = winner[winner >= 0]
        if len(win):
            values, loc_of_group = self._location_values(located)
            put = ks.take(pa.array(win))
            ch.columns[RECORD_INDEX] = rec.RecordIndexColumns(put, loc_of_group[of[win]], values)
            if RECORD_INDEX in ch.deletes:
                ch.deletes[RECORD_INDEX] -= set(put.to_pylist())
        gone = last_in_group & ~flags & ~placed[run]
        if gone.any():
            ch.deletes.setdefault(RECORD_INDEX, set()).update(ks.filter(pa.array(gone)).to_pylist())

    def _replaced_keys(self, meta: HoodieCommitMetadata) -> pa.Array | None:
        """The live record keys of the file groups a replacecommit replaces, read from their
        latest slices as they are before it (Java's record-index update of a replace reads
        them alike); None for other commits."""
        from hoodie_ray.reader.index_bootstrap import bootstrap_entries

        groups = {(p, f) for p, ids in meta.replaced_file_ids().items() for f in ids}
        if not groups:
            return None
        view = self.table.refresh().view()  # the replacecommit is pending: the view before it
        slices = [
            s
            for s in view.latest_file_slices(partitions=sorted({p for p, _ in groups}))
            if (s.partition_path, s.file_id) in groups
        ]
        keys = [
            k.cast(pa.large_string())
            for _, _, k in bootstrap_entries(self.table, slices, use_record_index=False)
        ]
        return pa.concat_arrays(keys) if keys else pa.array([], pa.large_string())

    def _location_values(
        self, located: Sequence[tuple[str, str, int, Any]]
    ) -> tuple[list[bytes], np.ndarray]:
        """The record-index value of each ``(partition, file id, millis, _)`` (one encoding per
        distinct location) and each entry's index into them."""
        values: list[bytes] = []
        index: dict[tuple[str, str, int], int] = {}
        loc = np.empty(len(located), dtype=np.int32)
        for i, (part, fid, ms, _) in enumerate(located):
            at = index.get((part, fid, ms))
            if at is None:
                at = index[(part, fid, ms)] = len(values)
                values.append(rec.record_index_value(part, fid, ms, self.table_version))
            loc[i] = at
        return values, loc

    # -- secondary indexes ----------------------------------------------------------------------
    def secondary_indexes(self) -> dict[str, IndexDefinition]:
        """MDT partition -> definition of every secondary index the data table lists complete.

        Raises:
            HoodieUnsupportedError: a listed secondary index without a definition in
                ``index.json`` (named, with the command that drops it).
        """
        parts = [p for p in self.partitions if p.startswith(SECONDARY_INDEX_PREFIX)]
        if not parts:
            return {}
        rel = self.table.table_config.props.get(INDEX_DEFS_PROPERTY, "").strip()
        defs = index_definitions(self.table.storage, rel)
        out: dict[str, IndexDefinition] = {}
        for p in parts:
            d = defs.get(p)
            if d is None or not d.is_secondary:
                raise HoodieUnsupportedError(
                    f"{self.table.base_uri}: the metadata table's {p} index has no secondary "
                    f"index definition in {rel or INDEX_DEFS_PROPERTY}; drop it with "
                    f"`hoodie-ray metadata drop {self.table.base_uri} --partition {p}`"
                )
            d.source_field  # noqa: B018 -- refuses a definition over several fields
            out[p] = d
        return out

    def secondary_values(
        self,
        slices: Sequence[Any],
        fields: Sequence[str],
        schema: pa.Schema | None,
        end_instant: str | None,
    ) -> dict[str, dict[str, str | None]]:
        """Field -> (record key -> secondary value) over the merged records of ``slices``
        (a field the schema lacks is null for every record): :meth:`secondary_columns` as
        Python dicts."""
        cols = self.secondary_columns(slices, fields, schema, end_instant)
        return {
            f: dict(zip(t.column("key").to_pylist(), t.column("value").to_pylist(), strict=True))
            for f, t in cols.items()
        }

    def secondary_columns(
        self,
        slices: Sequence[Any],
        fields: Sequence[str],
        schema: pa.Schema | None,
        end_instant: str | None,
        on_progress: Callable[[int, int], None] | None = None,
        map_chunks: MapChunks | None = None,
    ) -> dict[str, pa.Table]:
        """Field -> table of unique ``key`` (record key) and ``value`` (its secondary value,
        the Java string; null for a null, and for every record where the schema lacks the
        field) over the merged records of ``slices``, column-wise; a key in several slices
        has its last slice's value. ``on_progress(done, total)`` after each slice read (each
        chunk of slices with ``map_chunks``, which maps :func:`read_secondary_chunk` over
        argument tuples and yields the results in order: ``hr.create_index(engine="ray")``
        runs the chunks as Ray tasks)."""
        from hoodie_ray.meta import META_FIELDS, RECORD_KEY
        from hoodie_ray.reader.file_slice_reader import (
            ReadContext,
            merge_columns,
        )

        none = pa.array([], pa.large_string())
        empty = {f: pa.table({"key": none, "value": none}) for f in fields}
        if schema is None or not slices or not self.table.table_config.populate_meta_fields:
            return empty
        if RECORD_KEY not in schema.names:  # a commit's schema: the meta columns come first
            meta = [pa.field(c, pa.string()) for c in META_FIELDS]
            schema = pa.schema(meta + [f for f in schema if f.name not in META_FIELDS])
        present = [f for f in fields if f in schema.names]
        wanted = merge_columns(self.table, schema) | {RECORD_KEY, *present}
        read_schema = pa.schema([f for f in schema if f.name in wanted])
        ctx = ReadContext.of_table(
            self.table, read_schema, (RECORD_KEY, *present), end_instant=end_instant
        )
        keys: list[pa.Array] = []
        values: dict[str, list[pa.Array]] = {f: [] for f in fields}
        if map_chunks is None:  # here, a slice at a time
            chunks = [[s] for s in slices]
            results: Iterable[Any] = (
                read_secondary_chunk(ctx, c, fields, present, self.table.storage) for c in chunks
            )
        else:  # spread: about four chunks a CPU, in slice order
            per = max(1, -(-len(slices) // (4 * (os.cpu_count() or 1))))
            chunks = [list(slices[i : i + per]) for i in range(0, len(slices), per)]
            results = map_chunks(
                read_secondary_chunk, [(ctx, c, fields, present, None) for c in chunks]
            )
        done = 0
        for chunk, (k, vals) in zip(chunks, results, strict=True):
            if len(k):
                keys.append(k)
                for f in fields:
                    values[f].append(vals[f])
            done += len(chunk)
            if on_progress is not None:
                on_progress(done, len(slices))
        if not keys:
            return empty
        all_keys = pa.concat_arrays(keys)
        take = None
        if len(pc.unique(all_keys)) != len(all_keys):
            take = pa.array(newest_of_each_key(all_keys))
            all_keys = all_keys.take(take)
        out = {}
        for f in fields:
            vals = pa.concat_arrays(values[f])
            out[f] = pa.table({"key": all_keys, "value": vals if take is None else vals.take(take)})
        return out

    def _secondary_index_changes(
        self, instant: str, meta: HoodieCommitMetadata, ch: _Changes
    ) -> None:
        """Java's ``convertWriteStatsToSecondaryIndexRecords``: for every file group the action
        writes (or replaces), the merged records of its slice before and after ``instant``;
        a key new to the group gains an entry, a key whose value changed loses the old one and
        gains the new one, a key that left the group (deleted, or moved) loses its entry. A
        key that moved to another group in the same action keeps it. Compactions change no
        value and write nothing. Compared column-wise (:func:`secondary_index_changes`)."""

        defs = self.secondary_indexes()
        if not defs or meta.compacted or meta.operation_type in ("COMPACT", "LOG_COMPACT"):
            return
        touched: set[tuple[str, str]] = {
            (part or "", stat.file_id)
            for part, stat in meta.iter_write_stats()
            if stat.file_id and stat.path
        }
        for part, ids in meta.replaced_file_ids().items():
            touched |= {(part or "", f) for f in ids}
        if not touched:
            return
        # the MDT delta commit is written while the data instant is pending: the view of
        # the timeline as it is gives each group's slice before it
        after_tl = self._timeline_after(instant)
        before_tl = self.table.active_timeline
        before_view = self.table.storage_view(before_tl)
        after_view = self.table.storage_view(after_tl)
        parts = sorted({p for p, _ in touched})
        before = [
            s
            for s in before_view.latest_file_slices(partitions=parts)
            if (s.partition_path, s.file_id) in touched
        ]
        after = [
            s
            for s in after_view.latest_file_slices(partitions=parts)
            if (s.partition_path, s.file_id) in touched
        ]
        schema_json = meta.extra_metadata.get("schema")
        schema = avro_to_arrow_schema(schema_json) if schema_json else self.table.schema
        fields = sorted({d.source_field for d in defs.values()})
        old = self.secondary_columns(before, fields, self.table.schema or schema, None)
        new = self.secondary_columns(after, fields, schema, instant)
        for p, d in sorted(defs.items()):
            added, removed = secondary_index_changes(old[d.source_field], new[d.source_field])
            if len(added):
                record = secondary_index_record(None, "")[1]  # every live entry's, alike
                upserts = ch.upserts.setdefault(p, {})
                for k in added.to_pylist():
                    upserts[k] = record
            gone = set(removed.to_pylist()) - set(ch.upserts.get(p, {}))
            if gone:
                ch.deletes.setdefault(p, set()).update(gone)

    # -- the MDT delta commit -------------------------------------------------------------------
    def update_commit(
        self,
        instant: str,
        meta: HoodieCommitMetadata,
        also_listed: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        """Write MDT delta commit ``instant`` for a data commit about to complete
        (``also_listed``: :meth:`commit_changes`)."""
        if self.enabled:
            self._write_delta_commit(instant, self.commit_changes(instant, meta, also_listed))

    def update_clean(self, instant: str, meta: HoodieCleanMetadata) -> None:
        """Record a clean: every deleted file becomes a tombstone."""
        if not self.enabled:
            return
        deleted = {
            p: [_file_name(f) for f in pm.success_delete_files]
            for p, pm in meta.partition_metadata.items()
            if pm.success_delete_files
        }
        ch = self._files_changes({}, deleted)
        if COLUMN_STATS in self.partitions:
            cols = self.indexed_columns()
            for p, names in deleted.items():
                for n in names:
                    if not self.tombstones_column_stats_of(n):
                        continue
                    for k, r in column_stats_tombstones(
                        p, n, cols, table_version=self.table_version
                    ):
                        ch.put(COLUMN_STATS, k, r)
        if BLOOM_FILTERS in self.partitions:
            for k, r in clean_bloom_records(instant, deleted).items():
                ch.put(BLOOM_FILTERS, k, r)
        self._write_delta_commit(instant, ch)

    def tombstones_column_stats_of(self, file_name: str) -> bool:
        """Does a clean write ``column_stats`` tombstones for a deleted data file? 1.x: for
        every one, base and log files."""
        return True

    def update_rollback(self, instant: str, meta: HoodieRollbackMetadata) -> None:
        """Record a rollback: remove the rolled-back instants' MDT delta commits, then list the
        deleted files as tombstones (and appended rollback blocks' log sizes) at ``instant``."""
        if not self.enabled:
            return
        for ts in meta.commits_rollback:
            self.rollback_instant(ts)
        deleted: dict[str, list[str]] = {}
        added: dict[str, dict[str, int]] = {}
        for p, pm in meta.partition_metadata.items():
            if pm.success_delete_files:
                deleted[p] = [_file_name(f) for f in pm.success_delete_files]
            for f, size in pm.rollback_log_files.items():
                if size > 0:
                    added.setdefault(p, {})[_file_name(f)] = int(size)
        self._write_delta_commit(instant, self._files_changes(added, deleted))

    def rollback_instant(self, ts: str) -> None:
        """Remove MDT delta commit ``ts`` (pending or completed) and the logs it wrote.

        Safe after an MDT compaction too: compactions merge only delta commits whose data
        instant completed, and a completed data instant is never rolled back."""
        tl = self.timeline.reload()
        inst = tl.get(ts, Action.DELTA_COMMIT)
        if inst is None:
            return
        for part in self._mdt_partition_dirs():
            for n in self.storage.list_file_names(part):
                log = parse_log_file_name(n)
                if log is not None and log.instant == ts:
                    self.storage.delete(join(part, n))
        tl.delete_instant(inst)

    def _mdt_partition_dirs(self) -> list[str]:
        return [
            i.name for i in self.storage.list_dir("") if i.is_dir and not i.name.startswith(".")
        ]

    def _rollback_failed_writes(self) -> None:
        """Eager rollback of what a writer that died left pending in the MDT: delta commits
        (their logs), compactions (their base files), cleans (the slices they were deleting
        are superseded; the next clean takes what is left)."""
        # before the reload: a merge this process ran that completes meanwhile is then seen
        # completed, never pending and not running (its files deleted)
        running = running_compaction_beside(self.storage.uri(""))
        tl = self.timeline.reload()
        data = self.table.active_timeline
        first = data.earliest_active()
        for inst in tl.find([Action.DELTA_COMMIT], [State.COMPLETED]):
            # a delta commit whose data instant vanished (rolled back or dropped elsewhere)
            ts = inst.timestamp
            if (
                not is_init_instant(ts)
                and first is not None
                and ts >= first
                and not data.contains(ts)
            ):
                self.rollback_instant(ts)
        for inst in tl.pending():
            if inst.action == Action.DELTA_COMMIT:
                self.rollback_instant(inst.timestamp)
            elif inst.action == Action.COMPACTION and inst.timestamp == running:
                continue  # this process merges it beside the writes
            elif inst.action in (Action.COMPACTION, Action.CLEAN):
                if inst.action == Action.COMPACTION:
                    for part in self._mdt_partition_dirs():
                        for n in self.storage.list_file_names(part):
                            b = parse_base_file_name(n)
                            if b is not None and b.instant == inst.timestamp:
                                self.storage.delete(join(part, n))
                tl.delete_instant(inst)

    def _write_delta_commit(self, instant: str, changes: _Changes) -> None:
        # an index this writer does not keep would go stale: refuse before writing
        stale = [p for p in self.partitions if not is_maintained(p)]
        if stale:
            raise HoodieUnsupportedError(
                f"{self.table.base_uri}: the metadata table's {', '.join(stale)} index is not "
                f"maintained by hoodie_ray; drop it with `hoodie-ray metadata drop "
                f"{self.table.base_uri} --partition {stale[0]}`"
            )
        tl = self.timeline.reload()
        self._rollback_failed_writes()
        if tl.contains(instant):
            self.rollback_instant(instant)  # a retry of this instant
        self._start(Instant(instant, Action.DELTA_COMMIT, State.REQUESTED))
        stats = []
        for part in sorted(set(changes.upserts) | set(changes.deletes) | set(changes.columns)):
            self._partition_folder(part, instant)
            stats += self._write_logs(part, instant, changes)
        self._complete(instant, stats, UPSERT_PREPPED)

    def _write_logs(self, part: str, instant: str, changes: _Changes) -> list[HoodieWriteStat]:
        groups, base_instants = self._file_groups(part)
        by_group: dict[int, tuple[dict[str, dict[str, Any]], list[str]]] = {}
        for key, record in changes.upserts.get(part, {}).items():
            idx = _key_file_group(part, key, groups)
            by_group.setdefault(idx, ({}, []))[0][key] = record
        column_groups: dict[int, rec.RecordIndexColumns] = {}
        if part in changes.columns:
            for idx, group_cols in enumerate(changes.columns[part].split(groups)):
                if len(group_cols):
                    column_groups[idx] = group_cols.sorted_unique()
                    by_group.setdefault(idx, ({}, []))
        for key in sorted(changes.deletes.get(part, ())):
            idx = _key_file_group(part, key, groups)
            by_group.setdefault(idx, ({}, []))[1].append(key)
        stats = []
        for idx, (upserts, deletes) in sorted(by_group.items()):
            fid = rec.file_group_id(part, idx)
            header = {
                HeaderMetadataType.INSTANT_TIME: instant,
                HeaderMetadataType.SCHEMA: self.schema_json,
            }
            blocks: list[Any] = []
            cols = column_groups.get(idx)
            if cols is not None:
                content = self._hfile_columns(cols, base=False)
                blocks.append(HFileDataBlock(header, content=content))
            elif upserts:
                blocks.append(HFileDataBlock(header, content=self._hfile(upserts, base=False)))
            n_upserts = len(cols) if cols is not None else len(upserts)
            if deletes:
                blocks.append(DeleteBlock(header, deletes, part))
            name = self._log_name(part, fid, instant, base_instants)
            writer = LogWriter(
                self.storage, part, name, table_version=self.table_version, append=False
            )
            res = writer.append_blocks(blocks)
            stats.append(
                HoodieWriteStat(
                    file_id=fid,
                    path=res.path,
                    prev_commit=base_instants.get(fid, "null"),
                    num_writes=n_upserts + len(deletes),
                    num_update_writes=n_upserts,
                    num_deletes=len(deletes),
                    total_write_bytes=res.size,
                    partition_path=part,
                    file_size_in_bytes=res.file_size,
                    log_version=res.version,
                    log_offset=0,
                    base_file="",
                    log_files=[res.file_name],
                    total_log_blocks=len(blocks),
                )
            )
        return stats

    def _log_name(self, part: str, fid: str, instant: str, base_instants: Mapping[str, str]) -> str:
        """The new log file MDT delta commit ``instant`` writes to group ``fid`` (v8+: named
        by the delta commit itself)."""
        return log_file_name(fid, instant, 1, LOG_WRITE_TOKEN)

    def _file_groups(self, part: str) -> tuple[int, dict[str, str]]:
        """From one listing of an MDT partition: how many file groups it has (1 for
        ``files``) and each group's latest base instant (what a log write names as its
        ``prevCommit``, as Java's do)."""
        ids: set[str] = set()
        bases: dict[str, str] = {}
        for n in self.storage.list_file_names(part):
            b = parse_base_file_name(n)
            if b is not None:
                ids.add(b.file_id)
                if b.instant > bases.get(b.file_id, ""):
                    bases[b.file_id] = b.instant
            elif (lg := parse_log_file_name(n)) is not None:
                ids.add(lg.file_id)
        return (1 if part == FILES else max(1, len(ids))), bases

    def _hfile(self, records: Mapping[str, dict[str, Any]], *, base: bool) -> bytes:
        keys = sorted(records, key=lambda k: k.encode())
        values = rec.encode_records(
            [records[k] for k in keys], rec.metadata_schema(self.table_version)
        )
        info = {b"schema": self.schema_json.encode()}
        rows = [k.encode() for k in keys]
        meta: dict[str, bytes] = {}
        if base:
            # base files carry Java's bloom filter of their keys and key range (spec 2.5, 2.6)
            meta[BLOOM_META_BLOCK] = build_bloom_filter(rows)
            info[b"bloomFilterTypeCode"] = BLOOM_TYPE_CODE
            if keys:
                info[b"minRecordKey"] = rows[0]
                info[b"maxRecordKey"] = rows[-1]
        return write_hfile(
            list(zip(rows, values, strict=True)),
            file_info=info,
            meta_blocks=meta,
            allow_empty=base,  # a compacted group may hold no live record (Java's too)
        )

    def _hfile_columns(self, cols: rec.RecordIndexColumns, *, base: bool) -> bytes:
        """:meth:`_hfile` of column-wise entries (sorted, unique keys): the same bytes."""
        return native_hfile_columns(self.schema_json.encode(), None, cols, base=base)

    def base_hfile_columns(self) -> Callable[[rec.RecordIndexColumns], bytes]:
        """A picklable ``(sorted, unique entries) -> base HFile bytes`` of this writer's
        dialect (:meth:`_hfile_columns` with ``base=True``), stamped with one creation time
        (what a Ray task of an index build runs)."""
        return functools.partial(native_hfile_columns, self.schema_json.encode(), now_ms())

    def _commit_metadata(
        self, stats: Sequence[HoodieWriteStat], op: str, compacted: bool = False
    ) -> HoodieCommitMetadata:
        by_part: dict[str, list[HoodieWriteStat]] = {}
        for st in stats:
            by_part.setdefault(st.partition_path or "", []).append(st)
        return HoodieCommitMetadata(
            partition_to_write_stats=by_part,
            compacted=compacted,
            extra_metadata={"schema": self.schema_json},
            operation_type=op,
        )

    def _commit_bytes(self, meta: HoodieCommitMetadata) -> bytes:
        """Commit metadata as the MDT timeline stores it (layout 2: Avro)."""
        return meta.to_bytes(2)

    def _complete(self, instant: str, stats: Sequence[HoodieWriteStat], op: str) -> None:
        meta = self._commit_metadata(stats, op)
        try:
            self.timeline.complete(
                Instant(instant, Action.DELTA_COMMIT, State.INFLIGHT), self._commit_bytes(meta)
            )
        except OSError as e:
            raise HoodieCommitStateUnknownError(
                f"metadata table delta commit {instant} failed while completing: {e}"
            ) from e

    # -- table services of the MDT ------------------------------------------------------------
    def run_table_services(self) -> None:
        """Compact the MDT when due, clean slices compactions replaced, archive. Runs after
        the data instant completed: a failure is logged, not raised (the write is committed;
        what it left pending is rolled back before the next MDT write)."""
        if not self.enabled:
            return
        try:
            self._run_table_services()
        except Exception as e:
            log.warning(
                "metadata table services of %s failed (the commit stands; retried after the "
                "next one): %s",
                self.table.base_uri,
                e,
            )

    def _run_table_services(self) -> None:
        self._rollback_failed_writes()  # reloads the MDT timeline
        if self._delta_commits_since_compaction() >= self.config.compact_max_delta_commits:
            if self._compacts_beside():
                self._compact_beside()
            else:
                self.compact(scheduled=True)
        self.clean()
        if self.config.archive:
            self.archive()

    def archive(self) -> list[str]:
        """Archive the MDT's oldest instants (its LSM history, as the data table's) once past
        ``hoodie.keep.max.commits``, down to ``keep.min``; only instants before its latest
        compaction (their logs are merged into base files) and before the data table's
        earliest active instant (readers judge MDT delta commits by the data timeline)."""
        tl = self.timeline.reload()
        cfg = self.config
        chosen = instants_to_archive(tl, cfg.keep_min_commits, cfg.keep_max_commits, is_mor=True)
        last = self._last_compaction()
        data_first = self.table.active_timeline.earliest_active()
        if last is None or data_first is None:
            return []
        bound = min(last.timestamp, data_first)
        # by completion time too: a delta commit requested before the compaction but completed
        # after it (a long async data compaction) belongs to the compaction's slice
        chosen = [
            i
            for i in chosen
            if i.timestamp < bound and (i.completion_time or i.timestamp) < last.timestamp
        ]
        if not chosen:
            return []
        mcfg = HoodieTableConfig(self.mdt_props())
        archive_instants(
            tl,
            self._archived_timeline(mcfg),
            chosen,
            cfg.timeline_compaction_batch_size,
        )
        return [i.timestamp for i in chosen]

    def _archived_timeline(self, mcfg: HoodieTableConfig) -> Any:
        """Where the MDT's archived instants go (v8+: its LSM history)."""
        return LSMTimeline(self.storage, mcfg.archive_path)

    def latest_compaction_time(self) -> str | None:
        """The instant of the MDT's latest completed compaction (Java's
        ``getLatestCompactionTime``), or None: it never compacted."""
        self.timeline.reload()
        done = [
            i.timestamp
            for i in self.timeline.find([Action.COMMIT], [State.COMPLETED])
            if i.action == Action.COMMIT
        ]
        return max(done) if done else None

    def compacted_through(self) -> str | None:
        """The instant through which every MDT file group's logs are merged into base files:
        the latest compaction, or the base instant of an older slice that still holds logs
        written before it (an index file group a scheduled compaction left for later); None:
        never compacted.
        The data table's archival keeps the instants after it (its log blocks name them)."""
        last = self.latest_compaction_time()
        if last is None:
            return None
        mdt = self.reader()
        older = [
            fs.base_instant
            for part in self.partitions
            for fs in mdt.file_slices(part)
            if fs.base_instant < last and any(_log_instant(n) < last for n in fs.log_files)
        ]
        return min([last, *older])

    def _last_compaction(self) -> Instant | None:
        done = [
            i
            for i in self.timeline.find([Action.COMMIT], [State.COMPLETED])
            if i.action == Action.COMMIT
        ]
        return max(done, key=lambda i: i.completion_time or i.timestamp) if done else None

    def _delta_commits_since_compaction(self) -> int:
        last = self._last_compaction()
        floor = (last.completion_time or last.timestamp) if last else ""
        return sum(
            1
            for i in self.timeline.find([Action.DELTA_COMMIT], [State.COMPLETED])
            if (i.completion_time or i.timestamp) > floor
        )

    def compact(self, force: bool = False, *, scheduled: bool = False) -> str | None:
        """Merge the latest slice of every MDT file group into a new base HFile; the
        compaction instant, or None when there is nothing to compact. ``force`` rewrites
        slices without log files too (an upgrade re-encodes the MDT with the new version's
        record schema: hudi-rs cannot merge a slice whose base and logs differ there).
        ``scheduled`` (the compaction due every ``hoodie.metadata.compact.max.delta.commits``)
        leaves index file groups whose logs are still small against their base files, where
        ``hoodie.metadata.compact.index.min.log.ratio`` asks for it (:meth:`_defers`).
        A compaction of this MDT that this process runs beside the writes
        (``hoodie.metadata.compact.async``) finishes first."""
        self._settle_beside()
        planned = self._schedule_compaction(force, scheduled)
        if planned is None:
            return None
        ts, ops = planned
        self._execute_compaction(ts, ops)
        return ts

    def _schedule_compaction(
        self, force: bool, scheduled: bool
    ) -> tuple[str, list[tuple[str, Any]]] | None:
        """The compaction's plan, requested on the MDT timeline: its instant and the slices it
        merges (those with logs; see :meth:`compact`), or None when there are none."""
        mdt = self.reader()
        tl = self.timeline.reload()
        ts = self._service_instant(tl)
        deltas = sorted(i.timestamp for i in tl.find([Action.DELTA_COMMIT], [State.COMPLETED]))
        ops: list[tuple[str, Any]] = [
            (part, fs)
            for part in self.partitions
            for fs in mdt.file_slices(part)
            if force or (fs.log_files and not (scheduled and self._defers(part, fs, deltas)))
        ]
        if not ops:
            return None
        self._start(Instant(ts, Action.COMPACTION, State.REQUESTED), _compaction_plan(ops))
        return ts, ops

    def _execute_compaction(self, ts: str, ops: Sequence[tuple[str, Any]]) -> None:
        """Write the planned slices' new base files and complete compaction ``ts``."""
        mdt = self.reader()
        stats = [self._compact_slice(mdt, part, fs, ts) for part, fs in ops]
        meta = self._commit_metadata(stats, "COMPACT", compacted=True)
        self.timeline.reload().complete(
            Instant(ts, Action.COMPACTION, State.INFLIGHT), self._commit_bytes(meta)
        )

    def _settle_beside(self) -> None:
        """Wait for this process's compaction beside the writes: what changes the MDT's
        partitions (a drop, an initialisation, a rebuild) must not meet a merge that would
        then write a base file into them, nor an inline compaction plan beside it."""
        wait_for_compaction_beside(self.storage.uri(""))

    def _compacts_beside(self) -> bool:
        """Whether a due compaction runs beside the writes (``hoodie.metadata.compact.async``
        with a single writer, on a version 8+ table: a delta commit names its new log files by
        itself, so they join the slice after the plan without touching a planned file)."""
        return self.config.compact_async and self.table_version >= 8

    def _compact_beside(self) -> str | None:
        """Plan the due compaction and hand its merge to this process's compaction thread;
        its instant, or None (nothing to compact, or one still pending)."""
        uri = self.storage.uri("")
        tl = self.timeline.reload()
        if running_compaction_beside(uri) or tl.find(
            [Action.COMPACTION], [State.REQUESTED, State.INFLIGHT]
        ):
            return None
        planned = self._schedule_compaction(False, True)
        if planned is None:
            return None
        ts, ops = planned
        tbl, config = self.table, self.config
        # its own table handle and writer over a storage of the same root (so a relative path,
        # a later chdir or a custom Storage read the same table): nothing mutable is shared
        # with the committing thread
        storage, options, path = tbl.storage.sub(""), tbl.storage_options, tbl.base_uri

        def merge() -> None:
            from hoodie_ray.table import HoodieTable

            own = HoodieTable.from_storage(storage, options, path)
            MetadataWriter(own, config)._execute_compaction(ts, ops)

        _start_beside(uri, ts, merge)
        return ts

    def _defers(self, part: str, fs: Any, deltas: Sequence[str]) -> bool:
        """True if a scheduled compaction leaves this slice as it is: a record-index or
        secondary-index file group (its base file holds every key of its share of the table)
        whose logs hold under ``hoodie.metadata.compact.index.min.log.ratio`` of its base
        file's bytes, with fewer than ``hoodie.metadata.compact.index.max.delta.commits``
        delta commits (``deltas``, sorted) completed after its base. Rewriting such a group
        every few commits costs in proportion to the table; waiting until its logs reach a
        share of it costs in proportion to what the commits wrote. The bound on delta
        commits also bounds how long the data table's archival waits for the group
        (:meth:`compacted_through`), however few logs it gets."""
        cfg = self.config
        if cfg.compact_index_min_log_ratio <= 0:
            return False
        if not (part == RECORD_INDEX or part.startswith(SECONDARY_INDEX_PREFIX)):
            return False
        base = fs.base_file_size
        if not fs.base_file or not base:
            return False
        after = len(deltas) - bisect.bisect_right(deltas, fs.base_instant)
        if after >= cfg.compact_index_max_delta_commits:
            return False
        return fs.total_log_size < cfg.compact_index_min_log_ratio * base

    def _compact_slice(self, mdt: MetadataTable, part: str, fs: Any, ts: str) -> HoodieWriteStat:
        """The new base HFile of one MDT file slice, compacted at ``ts``."""
        name = base_file_name(fs.file_id, BASE_WRITE_TOKEN, ts, HFILE_EXTENSION)
        if part == RECORD_INDEX or part.startswith(SECONDARY_INDEX_PREFIX):
            cols = self._merged_index_columns(mdt, fs, name)
            data = self._hfile_columns(cols, base=True)
            self.storage.write_bytes(join(part, name), data)
            size, written = len(data), len(cols)
        else:
            merged = self._merged_slice(mdt, part, fs)
            for r in merged.values():
                r["_hoodie_file_name"] = name
            size, written = self._write_base_hfile(join(part, name), merged), len(merged)
        return HoodieWriteStat(
            file_id=fs.file_id,
            path=join(part, name),
            prev_commit=fs.base_instant,
            num_writes=written,
            total_write_bytes=size,
            partition_path=part,
            file_size_in_bytes=size,
            total_log_files_compacted=len(fs.log_files),
        )

    def _merged_index_columns(
        self, mdt: MetadataTable, fs: Any, name: str
    ) -> rec.RecordIndexColumns:
        """The live entries of one record-index or secondary-index file slice, column-wise,
        each value re-encoded as :meth:`_merged_slice` and ``_compact_slice`` would (the
        current schema, ``_hoodie_file_name`` = ``name``), but once per distinct stored value
        (a record index's values are its data file groups, a secondary index's all alike):
        the slice merged by :meth:`MetadataTable.slice_columns`, its values dictionary-encoded
        by Arrow, no Python object per key."""
        sc = mdt.slice_columns(fs)
        values: list[bytes] = []
        loc = np.zeros(len(sc), dtype=np.int32)
        live = np.ones(len(sc), dtype=bool)
        for s_id, schema in enumerate(sc.schemas):
            rows = np.flatnonzero(sc.schema_ids == s_id)
            if not len(rows):
                continue
            same = len(rows) == len(sc)
            stored = sc.values if same else sc.values.take(pa.array(rows))
            codes = pc.dictionary_encode(stored)
            new_at = np.empty(len(codes.dictionary), dtype=np.int32)
            for i, raw in enumerate(codes.dictionary.to_pylist()):
                r = decode_value(raw, schema)
                if rec.is_deleted_record(r):
                    new_at[i] = -1
                else:
                    r["_hoodie_file_name"] = name
                    new_at[i] = len(values)
                    values.append(rec.encode_records([r], self.table_version)[0])
            at = new_at[codes.indices.to_numpy(zero_copy_only=False)]
            loc[rows] = np.maximum(at, 0)
            live[rows] = at >= 0
        cols = rec.RecordIndexColumns(sc.keys.cast(pa.large_string()), loc, values)
        return cols if live.all() else cols.take(np.flatnonzero(live))

    def _merged_slice(self, mdt: MetadataTable, part: str, fs: Any) -> dict[str, dict[str, Any]]:
        """Live records of one MDT file slice, merged (tombstones dropped)."""
        if part == FILES:
            out: dict[str, dict[str, Any]] = {}
            for k, listing in mdt.merged_files(fs).items():
                live = listing.live()
                if k == rec.ALL_PARTITIONS_KEY:
                    out[k] = rec.all_partitions_record(partition_of_key(p) for p in live)[1]
                else:
                    out[k] = rec.files_record(partition_of_key(k), live)[1]
            return out
        merged = {k: decode_value(v, schema) for k, (v, schema) in mdt.slice_records(fs).items()}
        if not self.compaction_drops_tombstones:
            return merged
        return {k: r for k, r in merged.items() if not rec.is_deleted_record(r)}

    #: MDT compaction drops ``isDeleted`` index values (1.x: ``HoodieMetadataPayload
    #: .isDeletedRecord``, HUDI-8371); 0.x keeps them (v6.py).
    compaction_drops_tombstones = True

    def clean(self) -> str | None:
        """Delete the files of MDT slices older than the latest compaction once
        ``clean_retain_commits`` delta commits completed after it; the clean instant or None."""
        last = self._last_compaction()
        if last is None:
            return None
        after = self._delta_commits_since_compaction()
        if after < self.config.clean_retain_commits:
            return None
        doomed = self._files_to_clean(last.timestamp)
        if not doomed:
            return None
        tl = self.timeline
        start = time.monotonic()
        ts = self._service_instant(tl, Action.CLEAN)
        plan = _cleaner_plan(last.timestamp, doomed, self.storage)
        self._start(Instant(ts, Action.CLEAN, State.REQUESTED), plan)
        parts: dict[str, HoodieCleanPartitionMetadata] = {}
        for p, names in doomed.items():
            pm = parts[p] = HoodieCleanPartitionMetadata(p, "KEEP_LATEST_COMMITS")
            for n in names:
                self.storage.delete(join(p, n))
                pm.success_delete_files.append(n)
            pm.delete_path_patterns = list(names)
        meta = HoodieCleanMetadata(
            start_clean_time=ts,
            earliest_commit_to_retain=last.timestamp,
            policy="KEEP_LATEST_COMMITS",
            time_taken_in_millis=int((time.monotonic() - start) * 1000),
            total_files_deleted=sum(len(v) for v in doomed.values()),
            last_completed_commit_timestamp=last.timestamp,
            partition_metadata=parts,
        )
        tl.complete(Instant(ts, Action.CLEAN, State.INFLIGHT), meta.to_bytes())
        return ts

    def _files_to_clean(self, last_compaction: str) -> dict[str, list[str]]:
        """The files of every MDT slice older than ``last_compaction`` but the newest of its
        group, by partition."""
        mdt = self.reader()
        doomed: dict[str, list[str]] = {}
        for part in self._mdt_partition_dirs():
            for fg in mdt.view().all_file_groups([part]):
                # a group the compaction skipped (no logs) keeps its only, newest slice
                for s in fg.all_slices()[:-1]:
                    if s.base_instant < last_compaction:
                        names = ([s.base_file] if s.base_file else []) + list(s.log_files)
                        if names:
                            doomed.setdefault(part, []).extend(names)
        return doomed


def _log_instant(name: str) -> str:
    log = parse_log_file_name(name)
    return log.instant if log is not None else ""


def read_secondary_chunk(
    ctx: Any,
    slices: Sequence[Any],
    fields: Sequence[str],
    present: Sequence[str],
    storage: Storage | None = None,
) -> tuple[pa.Array, dict[str, pa.Array]]:
    """The record keys (``large_string``) of the merged records of ``slices`` and each of
    ``fields``' values as Java strings them (nulls where the schema lacks a field), read
    through ``ctx`` (a :class:`~hoodie_ray.reader.file_slice_reader.ReadContext`)."""
    from hoodie_ray.meta import RECORD_KEY
    from hoodie_ray.reader.file_slice_reader import iter_file_slice

    storage = storage or ctx.storage()
    keys: list[pa.Array] = []
    values: dict[str, list[pa.Array]] = {f: [] for f in fields}
    for s in slices:
        for t in iter_file_slice(ctx, s, storage):
            if not t.num_rows:
                continue
            keys.append(t.column(RECORD_KEY).combine_chunks().cast(pa.large_string()))
            for f in fields:
                values[f].append(
                    java_string_array(t.column(f), f)
                    if f in present
                    else pa.nulls(t.num_rows, pa.large_string())
                )
    none = pa.array([], pa.large_string())
    return (
        pa.concat_arrays(keys) if keys else none,
        {f: pa.concat_arrays(v) if v else none for f, v in values.items()},
    )


def _split_by_file_group(
    records: Mapping[str, dict[str, Any]], groups: int, partition: str = ""
) -> list[dict[str, dict[str, Any]]]:
    """``records`` by the MDT file group of their key (Java's key hash)."""
    by_group: list[dict[str, dict[str, Any]]] = [{} for _ in range(groups)]
    for k, r in records.items():
        by_group[_key_file_group(partition, k, groups)][k] = r
    return by_group


def _compaction_plan(ops: Sequence[tuple[str, Any]]) -> bytes:
    """The compaction plan of MDT file slices ``(partition, slice)``, serialized."""
    plan = HoodieCompactionPlan(
        operations=[
            HoodieCompactionOperation(
                base_instant_time=fs.base_instant,
                delta_file_paths=list(fs.log_files),
                data_file_path=fs.base_file,
                file_id=fs.file_id,
                partition_path=part,
            )
            for part, fs in ops
        ]
    )
    return plan.to_bytes()


def _cleaner_plan(last_compaction: str, doomed: Mapping[str, list[str]], storage: Storage) -> bytes:
    """The KEEP_LATEST_COMMITS cleaner plan deleting ``doomed``, serialized."""
    plan = plans.HoodieCleanerPlan(
        policy="KEEP_LATEST_COMMITS",
        earliest_instant_to_retain=plans.HoodieActionInstant(
            last_compaction, Action.COMMIT, State.COMPLETED.value
        ),
        file_paths_to_be_deleted_per_partition={
            p: [plans.HoodieCleanFileInfo(storage.uri(join(p, n)), False) for n in names]
            for p, names in doomed.items()
        },
    )
    return plan.to_bytes()


def partition_stats_files(view: Any, part: str) -> list[str]:
    """The files a partition's statistics aggregate: those of the latest slice of every file
    group not replaced. (Java computes them while a replace commit is still pending, so its
    partition stats written by a clustering also count the groups it replaced, until the
    partition is written again.)"""
    names: list[str] = []
    for fs in view.latest_file_slices(partitions=[part]):
        names += ([fs.base_file] if fs.base_file else []) + list(fs.log_files)
    return names


_WRITERS: weakref.WeakKeyDictionary[HoodieTable, MetadataWriter] = weakref.WeakKeyDictionary()
#: The writer of version 6 tables' metadata tables (the 0.x layout: metadata_writer/v6.py,
#: which builds on this module and registers itself when the package is imported).
_LAYOUT_1_WRITER: type[MetadataWriter] | None = None


def register_layout_1_writer(cls: type[MetadataWriter]) -> type[MetadataWriter]:
    """Class decorator: ``cls`` writes the metadata tables of version 6 tables."""
    global _LAYOUT_1_WRITER
    _LAYOUT_1_WRITER = cls
    return cls


#: The MDT partitions hoodie_ray keeps in the 0.x layout (version 6 tables).
V6_MAINTAINED_PARTITIONS = frozenset({FILES, RECORD_INDEX, COLUMN_STATS, BLOOM_FILTERS})


def check_v6_metadata_table_writable(listed: list[str], enable: bool | None, path: str) -> None:
    """Refuse to write a version 6 table whose MDT holds a partition hoodie_ray does not keep
    in the 0.x layout (named, with the command that drops it)."""
    for p in listed:
        if p not in V6_MAINTAINED_PARTITIONS:
            raise HoodieUnsupportedError(
                f"{path} (table version 6): the metadata table's {p} index is not maintained "
                f"by hoodie_ray on version 6 tables (only "
                f"{', '.join(sorted(V6_MAINTAINED_PARTITIONS))}), so writing would leave it "
                f"stale; drop it with `hoodie-ray metadata drop {path} --partition {p}`, or the "
                f"whole metadata table with `hoodie-ray metadata drop {path}`, or upgrade the "
                f"table with `hoodie-ray upgrade {path}`"
            )


# -- compactions beside the writes ------------------------------------------------------------
#: the MDT compaction each metadata table (by URI) has running on a compaction thread: the
#: process that runs it (a forked child runs none of its parent's), its instant, its future
_BESIDE: dict[str, tuple[int, str, Future[None]]] = {}
_BESIDE_LOCK = threading.Lock()


def _start_beside(uri: str, instant: str, merge: Callable[[], None]) -> None:
    """Run ``merge`` (compaction ``instant`` of the MDT at ``uri``) on the process's one
    compaction thread (joined at the interpreter's exit, so a script that ends waits for it).
    A failure is logged: the plan stays pending for the next writer's rollback."""

    def run() -> None:
        try:
            merge()
        except Exception as e:
            log.warning(
                "metadata table compaction %s of %s failed beside the writes (the next "
                "writer rolls it back): %s",
                instant,
                uri,
                e,
            )
        finally:
            with _BESIDE_LOCK:
                if _beside(uri) is not None and _BESIDE[uri][1] == instant:
                    del _BESIDE[uri]

    pool = kept_pool("hoodie-mdt-compaction", 1)
    with _BESIDE_LOCK:
        _BESIDE[uri] = (os.getpid(), instant, pool.submit(run))


def _beside(uri: str) -> tuple[str, Future[None]] | None:
    """This process's compaction of the MDT at ``uri``: its instant and future, or None."""
    kept = _BESIDE.get(uri)
    if kept is None or kept[0] != os.getpid():
        return None
    return kept[1], kept[2]


def running_compaction_beside(uri: str) -> str | None:
    """The instant of the compaction this process runs beside the writes on the MDT at
    ``uri``, or None."""
    with _BESIDE_LOCK:
        kept = _beside(uri)
    return kept[0] if kept is not None else None


def wait_for_compaction_beside(uri: str) -> None:
    """Wait until the compaction this process runs beside the writes on the MDT at ``uri``
    (if any) is done."""
    with _BESIDE_LOCK:
        kept = _beside(uri)
    if kept is not None:
        kept[1].result()


def finish_compaction_beside(table: HoodieTable) -> None:
    """Wait for the compaction this process runs beside the writes on ``table``'s metadata
    table (if any): its writer is closing."""
    wait_for_compaction_beside(table.storage.sub(METADATA_TABLE_PATH).uri(""))


def metadata_writer(
    table: HoodieTable, config: MetadataWriteConfig | None = None
) -> MetadataWriter:
    """The one MDT writer of a table handle (``config`` replaces the kept one when given)."""
    w = _WRITERS.get(table)
    if w is None:
        if table.table_version < 8:
            if _LAYOUT_1_WRITER is None:  # the package's __init__ imports v6.py, which sets it
                raise HoodieUnsupportedError("the 0.x metadata-table writer is not loaded")
            w = _WRITERS[table] = _LAYOUT_1_WRITER(table, config)
        else:
            w = _WRITERS[table] = MetadataWriter(table, config)
    elif config is not None:
        w.config = config
    return w


def native_hfile_columns(
    schema_json: bytes,
    create_time_ms: int | None,
    cols: rec.RecordIndexColumns,
    base: bool = True,
) -> bytes:
    """A Hudi 1.x MDT HFile of column-wise entries (sorted, unique keys): a base file carries
    Java's bloom filter of its keys and their range (spec 2.5, 2.6), a log block's content
    only the schema."""
    info = {b"schema": schema_json}
    rows = cols.keys.cast(pa.large_binary())
    meta: dict[str, bytes] = {}
    if base:
        meta[BLOOM_META_BLOCK] = build_bloom_filter(rows)
        info[b"bloomFilterTypeCode"] = BLOOM_TYPE_CODE
        if len(rows):
            info[b"minRecordKey"] = rows[0].as_py()
            info[b"maxRecordKey"] = rows[-1].as_py()
    return write_hfile_arrays(
        rows,
        cols.value_column(),
        file_info=info,
        meta_blocks=meta,
        allow_empty=base,
        create_time_ms=create_time_ms,
    )


def build_group_hfile(
    build: Callable[[rec.RecordIndexColumns], bytes], cols: rec.RecordIndexColumns
) -> tuple[int, bytes | None]:
    """One file group of an index being built: its entries sorted and deduplicated, then
    ``build``'s base HFile of them (None for no entries); the entries' count with it."""
    cols = cols.sorted_unique()
    return len(cols), (build(cols) if len(cols) else None)
