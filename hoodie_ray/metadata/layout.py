"""Where the metadata table lives and how the data table names its partitions.

The metadata table (MDT) is a Merge-On-Read table of its own under ``.hoodie/metadata``, with
HFile base files and HFile log blocks. The data table's ``hoodie.properties`` lists the MDT
partitions that are complete (``hoodie.table.metadata.partitions``) and those being built
(``...partitions.inflight``); readers use a partition only when it is listed complete
(spec/metadata-table.md 1.2, 1.3).
"""

from __future__ import annotations

from collections.abc import Mapping

from hoodie_ray.config.table_config import (
    PAYLOAD_BASED_STRATEGY_ID,
    HoodieTableConfig,
    table_checksum,
)

METADATA_TABLE_PATH = ".hoodie/metadata"
PARTITIONS_PROPERTY = "hoodie.table.metadata.partitions"
PARTITIONS_INFLIGHT_PROPERTY = "hoodie.table.metadata.partitions.inflight"
INDEX_DEFS_PROPERTY = "hoodie.table.index.defs.path"
METADATA_PAYLOAD = "org.apache.hudi.metadata.HoodieMetadataPayload"
METADATA_KEYGEN_TYPE = "HOODIE_TABLE_METADATA"
METADATA_RECORD_KEY = "key"
HFILE_EXTENSION = ".hfile"
#: Instant times of MDT partition initialisations start with 14 zeros
#: (``00000000000000000`` files, ``...001`` column_stats, ...; spec 5.5).
INIT_INSTANT_PREFIX = "0" * 14
#: 0.x's partition-initialisation suffix (``PARTITION_INITIALIZATION_TIME_SUFFIX``, ``010``;
#: ``011`` ... for the next partitions) on a 17-digit instant: 20 digits.
V6_INIT_SUFFIX = "010"
V6_INIT_INSTANT_LENGTH = 20
#: Write token of the empty log that brings an MDT file group into being (spec 1.5).
INIT_WRITE_TOKEN = "0-0-0"

FILES = "files"
COLUMN_STATS = "column_stats"
PARTITION_STATS = "partition_stats"
RECORD_INDEX = "record_index"
BLOOM_FILTERS = "bloom_filters"
SECONDARY_INDEX_PREFIX = "secondary_index_"
EXPRESSION_INDEX_PREFIX = "expr_index_"


def split_partitions(value: str | None) -> list[str]:
    """A comma-separated partition list, in order, without empties."""
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def join_partitions(parts: list[str] | set[str]) -> str:
    """The comma-separated form Java writes (sorted)."""
    return ",".join(sorted(set(parts)))


def completed_partitions(cfg: HoodieTableConfig) -> list[str]:
    """MDT partitions the data table lists as complete."""
    return split_partitions(cfg.props.get(PARTITIONS_PROPERTY))


def inflight_partitions(cfg: HoodieTableConfig) -> list[str]:
    """MDT partitions whose initialisation started and did not finish."""
    return split_partitions(cfg.props.get(PARTITIONS_INFLIGHT_PROPERTY))


def has_metadata_table(cfg: HoodieTableConfig) -> bool:
    """True if the data table says its MDT holds a complete ``files`` partition."""
    return FILES in completed_partitions(cfg)


def metadata_table_props(data: Mapping[str, str], table_version: int) -> dict[str, str]:
    """``hoodie.properties`` of the MDT of the data table with properties ``data`` (spec 1.2)."""
    name = data.get("hoodie.table.name", "table")
    props = {
        "hoodie.table.name": f"{name}_metadata",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": str(table_version),
        "hoodie.table.initial.version": str(table_version),
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.table.recordkey.fields": METADATA_RECORD_KEY,
        "hoodie.table.keygenerator.type": METADATA_KEYGEN_TYPE,
        "hoodie.populate.meta.fields": "false",
        "hoodie.compaction.payload.class": METADATA_PAYLOAD,
        "hoodie.record.merge.mode": "CUSTOM",
        "hoodie.record.merge.strategy.id": PAYLOAD_BASED_STRATEGY_ID,
        "hoodie.timeline.layout.version": "2",
        "hoodie.timeline.path": "timeline",
        "hoodie.timeline.history.path": "history",
        "hoodie.archivelog.folder": "history",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.timeline.timezone": data.get("hoodie.table.timeline.timezone", "UTC"),
        "hoodie.database.name": data.get("hoodie.database.name", "default"),
    }
    props["hoodie.table.checksum"] = table_checksum(props)
    return props


def is_init_instant(ts: str) -> bool:
    """True for the instant of an MDT partition initialisation: 1.x's ``00000000000000xyz``
    (spec 5.5), and 0.14 / 0.15's ``<data instant><010 + n>``, 20 digits, which
    ``HoodieTableMetadataUtil.isValidInstant`` counts as valid (``createIndexInitTimestamp``:
    the latest completed data instant, or 14 zeros on an empty table, plus ``010``, ``011``,
    ...)."""
    return ts.startswith(INIT_INSTANT_PREFIX) or (
        len(ts) == V6_INIT_INSTANT_LENGTH and ts.isdigit() and ts[-3:] >= V6_INIT_SUFFIX
    )
