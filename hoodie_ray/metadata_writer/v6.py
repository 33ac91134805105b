"""The metadata table of a table version 6 (Hudi 0.x) data table, in the 0.x layout.

The same writer as :class:`~hoodie_ray.metadata_writer.writer.MetadataWriter` (one MDT delta
commit per data action at the data instant's time, completed first; rollbacks, compaction,
clean and archival of the MDT), with what Hudi 0.14 / 0.15 does differently. Each point was
checked against apache/hudi's Java sources of the 0.14.x / 0.15 line (class.method named):

* the MDT is a version 6 table: timeline layout 1 (``.hoodie/metadata/.hoodie/<instant>.
  deltacommit``, no completion times), JSON commit metadata, archived instants in
  ``.hoodie/metadata/.hoodie/archived`` log files, ``hoodie.properties`` as
  ``HoodieBackedTableMetadataWriter.initializeMetaClient`` builds it (:func:`v6_metadata_table_props`);
* file groups are ``files-0000-0``, ``record-index-0000-0``, ... (``HoodieTableMetadataUtil
  .getFileIDForFileGroup``: ``<prefix><index:04d>-0``); ``files`` has one
  (``initializeFilesPartition``);
* a partition is initialised at the latest completed data instant (14 zeros on an empty
  table) plus ``010``, ``011``, ... for the next free one (``HoodieBackedTableMetadataWriter
  .initializeIfNeeded`` / ``generateUniqueCommitInstantTime``, ``HoodieTableMetadataUtil
  .createIndexInitTimestamp``); 0.x readers count such instants as valid (``isValidInstant``);
* log files are named by the base instant of their file slice and versioned
  (``.files-0000-0_<base>.log.<n>_<token>``); each MDT delta commit writes the next version, as
  ``HoodieLogFormatWriter`` rolls over on a file system without append (``StorageSchemes``:
  ``file``, ``s3``, ``gs``, ...; HDFS appends instead);
* HFiles (base files and the content of HFile log blocks) are written by HBase's writer
  (:func:`~hoodie_ray.hfile.write_hbase_hfile`: CRC32C, full-key indexes, creation time 0);
  a base file carries ``HoodieAvroHFileWriter``'s file info (``schema``; ``minRecordKey`` /
  ``maxRecordKey``, empty for an empty file; ``bloomFilterTypeCode``) and its ``bloomFilter``
  meta block; a log block's HFile only ``schema`` (``HoodieHFileDataBlock.serializeRecords``);
  the ``key`` field of each value is blanked, the key being the cell's row;
* the record schema is 0.x's ``HoodieMetadataRecord``: 1.x's without the fields 1.0 added
  (``SecondaryIndexMetadata``, record-index ``position``, column-stats ``isTightBound``) and
  without the ``LocalDateWrapper`` branch of ``minValue`` / ``maxValue`` (0.x: 12 branches);
* the MDT's own compaction and clean are named after the latest completed MDT delta commit:
  ``<instant>001`` and ``<instant>002`` (``HoodieTableMetadataUtil.createCompactionTimestamp``
  / ``createCleanTimestamp``, called by ``HoodieBackedTableMetadataWriter.compactIfNecessary``
  / ``cleanIfNecessary``).

The ``files``, ``record_index``, ``column_stats`` and ``bloom_filters`` partitions are
maintained. Column statistics and bloom filters as 0.14 / 0.15 keep them (facts with their
sources: docs/V6_COLUMN_STATS.md): the v6 record schema (no ``isTightBound``, V1 wrappers); the
five meta fields and every top-level column indexed (nested ones: no record from a Parquet
footer, null min/max from log records); built from the Parquet base files only, the bloom
filters stamped with the initialisation's instant; a clean writes column-stats tombstones for
deleted Parquet base files only; rollbacks write ``files`` records only; the MDT compaction
keeps tombstones. The record index as 0.14 keeps
it: ``record-index-<i>-0`` file groups, as many as ``estimateFileGroupCount`` gives with 0.14's
defaults (:meth:`V6MetadataWriter.record_index_groups`), keys hashed to them by
``mapRecordKeyToFileGroupIndex`` (1.x's hash), values in the 0.x schema (no ``position``),
deletes in delete blocks. A location's ``instantTime`` is the writing instant (0.14's
``HoodieBackedTableMetadataWriter.getRecordIndexUpdates``: a written record's new location
"refers to the current commit"); the initial build's, the slice's base instant
(``readRecordKeysFromBaseFiles``). A version 6 table whose MDT lists another partition is
refused, naming it and the command that drops it (:func:`check_v6_metadata_table_writable`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from hoodie_ray.avro.schema import avro_to_arrow_schema
from hoodie_ray.config.table_config import HoodieTableConfig, table_checksum
from hoodie_ray.exceptions import HoodieUnsupportedError
from hoodie_ray.file_group.naming import log_file_name, parse_base_file_name, parse_log_file_name
from hoodie_ray.hfile import build_bloom_filter, write_hbase_hfile, write_hbase_hfile_arrays
from hoodie_ray.log_format.reader import read_log_file
from hoodie_ray.metadata import records as rec
from hoodie_ray.metadata.column_stats import columns_to_index_v6
from hoodie_ray.metadata.layout import (
    METADATA_PAYLOAD,
    METADATA_RECORD_KEY,
    V6_INIT_SUFFIX,
    inflight_partitions,
)
from hoodie_ray.metadata_writer.writer import (
    BLOOM_META_BLOCK,
    BLOOM_TYPE_CODE,
    LOG_WRITE_TOKEN,
    V6_MAINTAINED_PARTITIONS,
    MetadataWriter,
    check_v6_metadata_table_writable,
    register_layout_1_writer,
)
from hoodie_ray.storage import join
from hoodie_ray.timeline.archive import ArchivedLogTimeline
from hoodie_ray.timeline.instant import Action, State
from hoodie_ray.timeline.metadata import HoodieCommitMetadata
from hoodie_ray.timeline.timeline import ActiveTimeline

__all__ = [
    "V6_MAINTAINED_PARTITIONS",
    "V6MetadataWriter",
    "check_v6_metadata_table_writable",
    "v6_metadata_schema",
    "v6_metadata_schema_json",
    "v6_metadata_table_props",
]

#: 0.x's ``SOLO_COMMIT_TIMESTAMP``: the base of the init instant on a table with no commit.
SOLO_COMMIT_TIMESTAMP = "0" * 14
#: 0.x's MDT compaction / clean instants: the latest delta commit + these suffixes.
COMPACTION_SUFFIX = "001"
CLEAN_SUFFIX = "002"
#: 0.14's record-index sizing defaults (``HoodieMetadataConfig``; the average record size is
#: ``HoodieBackedTableMetadataWriter.RECORD_INDEX_AVERAGE_RECORD_SIZE``).
RI_MIN_GROUPS = 10
RI_MAX_GROUPS = 10_000
RI_GROWTH_FACTOR = 2.0
RI_MAX_GROUP_BYTES = 1 << 30
RI_AVERAGE_RECORD_BYTES = 48
METADATA_KEYGEN_CLASS = "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator"


def v6_metadata_schema_json(meta_fields: bool = True) -> str:
    """0.x's ``HoodieMetadataRecord`` writer schema (with the ``_hoodie_*`` fields, as the
    MDT writer stores it): :func:`~hoodie_ray.metadata.records.metadata_schema_json` of table
    version 6, the v8 schema without the fields and the union branch 1.0 added."""
    return rec.metadata_schema_json(6, meta_fields)


def v6_metadata_schema(meta_fields: bool = True) -> dict[str, Any]:
    """:func:`v6_metadata_schema_json` parsed (a fresh copy)."""
    return rec.metadata_schema(6, meta_fields)


def v6_metadata_table_props(data: Mapping[str, str]) -> dict[str, str]:
    """``hoodie.properties`` of the 0.x MDT of the data table with properties ``data``.

    What ``HoodieBackedTableMetadataWriter.initializeMetaClient`` sets (table type, name,
    archive folder, payload class, HFILE, record key ``key``, populate meta fields false, key
    generator) and ``HoodieTableMetaClient.PropertyBuilder.build`` adds (version 6), the
    layout version and checksum ``HoodieTableConfig.create`` adds; no timeline time zone
    (nothing sets one). ``hoodie.datasource.write.drop.partition.columns=false`` is kept
    unconfirmed: 0.14's ``HoodieTableConfig.create`` was not found."""
    name = data.get("hoodie.table.name", "table")
    props = {
        "hoodie.table.name": f"{name}_metadata",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": "6",
        "hoodie.timeline.layout.version": "1",
        "hoodie.archivelog.folder": "archived",
        "hoodie.compaction.payload.class": METADATA_PAYLOAD,
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.table.recordkey.fields": METADATA_RECORD_KEY,
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.keygenerator.class": METADATA_KEYGEN_CLASS,
        "hoodie.datasource.write.drop.partition.columns": "false",
    }
    props["hoodie.table.checksum"] = table_checksum(props)
    return props


@register_layout_1_writer
class V6MetadataWriter(MetadataWriter):
    """The metadata table of a version 6 table, in the 0.x layout (``files``,
    ``record_index``, ``column_stats``, ``bloom_filters``)."""

    def init_instant(self, partition: str, first_suffix: int) -> str:
        """0.x: the latest completed data instant (``SOLO_COMMIT_TIMESTAMP`` on a table with
        none) plus ``010``, or the next suffix where that instant is taken in the MDT
        (``generateUniqueCommitInstantTime``)."""
        base = self._latest_data_instant()
        tl = self.timeline.reload()
        return next(
            ts for n in range(int(V6_INIT_SUFFIX), 1000) if not tl.contains(ts := f"{base}{n:03d}")
        )

    def record_index_groups(self, keys: int) -> int:
        """0.x's ``HoodieTableMetadataUtil.estimateFileGroupCount`` with 0.14's defaults
        (``hoodie.metadata.record.index.min.filegroup.count`` 10, ``max.filegroup.count``
        10000, ``growth.factor`` 2.0, ``max.filegroup.size`` 1 GiB over
        ``RECORD_INDEX_AVERAGE_RECORD_SIZE`` 48 bytes)."""
        expected = math.ceil(keys * RI_GROWTH_FACTOR)
        estimate = expected // (RI_MAX_GROUP_BYTES // RI_AVERAGE_RECORD_BYTES)
        if estimate >= RI_MAX_GROUPS:
            return RI_MAX_GROUPS
        return RI_MIN_GROUPS if estimate <= RI_MIN_GROUPS else max(1, estimate)

    def mdt_props(self) -> dict[str, str]:
        return v6_metadata_table_props(self.table.config)

    def sync_with_config(self) -> None:
        """``hoodie.metadata.enable`` on a version 6 table: true builds a missing MDT, false
        drops it, unset keeps what the table has (0.x tables have one only when asked)."""
        if self.config.enable is None:
            if inflight_partitions(self.table.table_config) and not self.enabled:
                self.initialize()  # a half-built MDT: finish it
            return
        super().sync_with_config()

    def _hfile(self, records: Mapping[str, dict[str, Any]], *, base: bool) -> bytes:
        keys = sorted(records, key=lambda k: k.encode())
        values = rec.encode_records([records[k] for k in keys], self.table_version)
        return self._hbase_hfile([k.encode() for k in keys], values, base=base)

    def _hfile_columns(self, cols: rec.RecordIndexColumns, *, base: bool) -> bytes:
        """Record-index entries (sorted, unique keys) in an HBase-dialect HFile, column-wise
        (:func:`~hoodie_ray.hfile.write_hbase_hfile_arrays`: no Python object per key); the
        bytes :meth:`_hfile` writes for the same records."""
        return hbase_hfile_columns(self.schema_json.encode(), cols, base=base)

    def base_hfile_columns(self) -> Callable[[rec.RecordIndexColumns], bytes]:
        """:meth:`MetadataWriter.base_hfile_columns` in the HBase dialect (creation time 0,
        as Hudi 0.x leaves it)."""
        return functools.partial(hbase_hfile_columns, self.schema_json.encode())

    def _hbase_hfile(self, rows: list[bytes], values: list[bytes], *, base: bool) -> bytes:
        info, meta = hbase_file_info(self.schema_json.encode(), rows, base=base)
        return write_hbase_hfile(
            list(zip(rows, values, strict=True)),
            file_info=info,
            meta_blocks=meta,
            allow_empty=base,
        )

    # -- column_stats and bloom_filters as 0.14 / 0.15 keep them (docs/V6_COLUMN_STATS.md) --
    #: 0.x's MDT compaction keeps ``isDeleted`` column-stats and bloom-filter values (its
    #: ``HoodieMetadataPayload`` marks only absent records deleted; HUDI-8371 came after 0.15).
    compaction_drops_tombstones = False

    def indexed_columns(self, schema_json: str | None = None) -> list[str]:
        """0.x's ``getColumnsToIndex`` without a configured list: the five meta fields, then
        every top-level field of the commit's schema (``schema_json``) or the table's."""
        schema = avro_to_arrow_schema(schema_json) if schema_json else self.table.schema
        if schema is None:
            return []
        return columns_to_index_v6(
            schema, populate_meta_fields=self.table.table_config.populate_meta_fields
        )

    def initial_column_stats_of(self, name: str) -> bool:
        """0.x builds ``column_stats`` from Parquet base files only
        (``convertFilesToColumnStatsRecords`` keeps ``isBaseFile && endsWith(".parquet")``);
        log files get statistics only from the commits that write them."""
        b = parse_base_file_name(name)
        return (
            b is not None
            and name.endswith(".parquet")
            and self.table.active_timeline.is_committed(b.instant)
        )

    def initial_bloom_stamp(self) -> str | None:
        """0.x stamps every initial bloom filter with the initialisation's instant, the
        latest completed data instant (``initializeBloomFiltersPartition(initializationTime)``)."""
        return self._latest_data_instant()

    def _latest_data_instant(self) -> str:
        """0.x's ``initializationTime``: the latest completed data instant (any action), or
        ``SOLO_COMMIT_TIMESTAMP`` on a table with none."""
        done = self.table.active_timeline.reload().completed()
        return done[-1].timestamp if done else SOLO_COMMIT_TIMESTAMP

    def tombstones_column_stats_of(self, file_name: str) -> bool:
        """0.x's clean writes column-stats tombstones for deleted Parquet base files only
        (``convertMetadataToColumnStatsRecords(HoodieCleanMetadata)``)."""
        return parse_base_file_name(file_name) is not None and file_name.endswith(".parquet")

    def initialize_column_stats(self, with_partition_stats: bool) -> None:
        if with_partition_stats:
            raise HoodieUnsupportedError(
                f"{self.table.base_uri} (table version 6): 0.x metadata tables have no "
                "partition_stats; hoodie.metadata.index.partition.stats.enable needs table "
                "version 8+ (`hoodie-ray upgrade`)"
            )
        super().initialize_column_stats(False)

    def _commit_bytes(self, meta: HoodieCommitMetadata) -> bytes:
        return meta.to_bytes(1)

    def _service_instant(self, tl: ActiveTimeline, action: str = Action.COMPACTION) -> str:
        """0.x: the latest completed MDT delta commit + ``001`` (compaction) or ``002``
        (clean); a fresh time where that instant is taken."""
        done = [i.timestamp for i in tl.find([Action.DELTA_COMMIT], [State.COMPLETED])]
        if done:
            ts = max(done) + (CLEAN_SUFFIX if action == Action.CLEAN else COMPACTION_SUFFIX)
            if not tl.contains(ts) and all(i.timestamp < ts for i in tl.instants):
                return ts
        return super()._service_instant(tl, action)

    def compact(self, force: bool = False, *, scheduled: bool = False) -> str | None:
        """0.x's ``compactIfNecessary``: no compaction while a data instant before the latest
        MDT delta commit is pending (its delta commit's log would stay in the replaced slice:
        v6 logs join slices by name, not by completion time)."""
        tl = self.timeline.reload()
        done = [i.timestamp for i in tl.find([Action.DELTA_COMMIT], [State.COMPLETED])]
        latest = max(done, default="")
        data = self.table.active_timeline.reload()
        if any(i.timestamp < latest for i in data.pending()):
            return None
        return super().compact(force, scheduled=scheduled)

    def _log_name(self, part: str, fid: str, instant: str, base_instants: Mapping[str, str]) -> str:
        """The next log version of the group's latest slice (named by its base instant)."""
        names = self.storage.list_file_names(part)
        base = base_instants.get(fid, "")
        logs = [lg for n in names if (lg := parse_log_file_name(n)) and lg.file_id == fid]
        if not base and logs:
            base = min(lg.instant for lg in logs)
        base = base or instant
        version = max((lg.version for lg in logs if lg.instant == base), default=0) + 1
        return log_file_name(fid, base, version, LOG_WRITE_TOKEN)

    def rollback_instant(self, ts: str) -> None:
        """Remove MDT delta commit ``ts`` and the log files it wrote (found by their blocks'
        instant time: v6 logs are named by their slice)."""
        tl = self.timeline.reload()
        inst = tl.get(ts, Action.DELTA_COMMIT)
        if inst is None:
            return
        for part in self._mdt_partition_dirs():
            for n in self.storage.list_file_names(part):
                if parse_log_file_name(n) is None:
                    continue
                rel = join(part, n)
                if {b.instant_time for b in read_log_file(self.storage, rel)} == {ts}:
                    self.storage.delete(rel)
        tl.delete_instant(inst)

    def _archived_timeline(self, mcfg: HoodieTableConfig) -> Any:
        return ArchivedLogTimeline(self.storage, mcfg.archive_path)


def hbase_hfile_columns(
    schema_json: bytes, cols: rec.RecordIndexColumns, base: bool = True
) -> bytes:
    """A Hudi 0.x MDT HFile (HBase dialect) of column-wise entries (sorted, unique keys)."""
    rows = cols.keys.cast(pa.large_binary())
    info, meta = hbase_file_info(schema_json, rows, base=base)
    return write_hbase_hfile_arrays(
        rows, cols.value_column(), file_info=info, meta_blocks=meta, allow_empty=base
    )


def hbase_file_info(
    schema_json: bytes, rows: list[bytes] | pa.Array, *, base: bool
) -> tuple[dict[bytes, bytes], dict[str, bytes]]:
    """File info and meta blocks of ``HoodieAvroHFileWriter``'s base file (``schema``,
    ``minRecordKey`` / ``maxRecordKey`` -- empty without keys --, ``bloomFilterTypeCode`` and
    the ``bloomFilter`` meta block) or of ``HoodieHFileDataBlock``'s content (``schema``
    only), for the sorted keys ``rows``."""
    info = {b"schema": schema_json}
    meta: dict[str, bytes] = {}
    if base:
        meta[BLOOM_META_BLOCK] = build_bloom_filter(rows)
        info[b"bloomFilterTypeCode"] = BLOOM_TYPE_CODE
        info[b"minRecordKey"] = _key_bytes(rows, 0)
        info[b"maxRecordKey"] = _key_bytes(rows, -1)
    return info, meta


def _key_bytes(rows: list[bytes] | pa.Array, i: int) -> bytes:
    """Key ``i`` of ``rows`` (a list or an Arrow binary array), empty where there is none."""
    if not len(rows):
        return b""
    key = rows[i] if isinstance(rows, list) else rows[i % len(rows)].as_py()
    assert isinstance(key, bytes)
    return key
