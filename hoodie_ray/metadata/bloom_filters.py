"""The metadata table's ``bloom_filters`` partition (record type 4) as Hudi Java 1.x keeps it.

One record per base file (``HoodieTableMetadataUtil.convertMetadataToBloomFilterRecords``):

* key: ``PartitionIndexID(partition) + FileIndexID(file name)`` (:func:`records.bloom_filter_key`;
  ``.`` for the partition of a non-partitioned table);
* ``BloomFilterMetadata = {type, timestamp, bloomFilter, isDeleted}``: the filter's type code
  (``DYNAMIC_V0``), the instant that wrote the file, the UTF-8 bytes of the footer filter's
  ``serializeToString`` (Base64 text), ``isDeleted = false``.

Commits, delta commits, compactions and replace commits add a record for each base file they
write (log files have none: "delta writes do not change the base file bloom filter entries").
A clean turns each base file it deleted into ``{type: "", timestamp: <clean>, bloomFilter: b"",
isDeleted: true}``. Newer records replace older ones (the bloom filter payload does not merge).
The partition has ``hoodie.metadata.index.bloom.filter.file.group.count`` (4) file groups,
``bloom-filters-000<i>-0``, keys hashed to them as every MDT key.
"""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq

from hoodie_ray.exceptions import HoodieCorruptedDataError
from hoodie_ray.index.bloom_filter import (
    BLOOM_FILTER_FOOTER_KEY,
    BloomFilter,
    footer_bloom_filter,
)
from hoodie_ray.metadata.records import bloom_filter_key
from hoodie_ray.storage import Storage, join

__all__ = [
    "BLOOM_FILTER_FILE_GROUPS",
    "bloom_filter_record",
    "bloom_filter_tombstone",
    "file_bloom_filter",
    "record_bloom_filter",
]

#: Java's ``hoodie.metadata.index.bloom.filter.file.group.count`` default.
BLOOM_FILTER_FILE_GROUPS = 4
_RECORD_TYPE = 4


def _record(partition: str, file_name: str, value: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return bloom_filter_key(partition, file_name), {
        "key": "",
        "type": _RECORD_TYPE,
        "filesystemMetadata": None,
        "BloomFilterMetadata": value,
        "ColumnStatsMetadata": None,
        "recordIndexMetadata": None,
        "SecondaryIndexMetadata": None,
    }


def bloom_filter_record(
    partition: str, file_name: str, instant: str, filter_type: str, serialized: bytes
) -> tuple[str, dict[str, Any]]:
    """``(key, record)`` of base file ``file_name`` in ``partition`` written at ``instant``,
    its filter ``serialized`` as Java's ``serializeToString`` (Base64 text, as bytes)."""
    return _record(
        partition,
        file_name,
        {
            "type": filter_type,
            "timestamp": instant,
            "bloomFilter": bytes(serialized),
            "isDeleted": False,
        },
    )


def bloom_filter_tombstone(
    partition: str, file_name: str, instant: str
) -> tuple[str, dict[str, Any]]:
    """``(key, record)`` marking base file ``file_name``'s filter deleted by clean ``instant``."""
    return _record(
        partition,
        file_name,
        {"type": "", "timestamp": instant, "bloomFilter": b"", "isDeleted": True},
    )


def file_bloom_filter(storage: Storage, partition: str, file_name: str) -> tuple[str, bytes] | None:
    """``(type code, serialized text)`` of the bloom filter in base file ``file_name``'s footer
    (None when it has none, as Java skips such files).

    Raises:
        HoodieCorruptedDataError: the footer's filter does not decode (the file named).
    """
    rel = join(partition, file_name)
    with storage.open_input(rel) as f:
        md = pq.read_metadata(f).metadata
    try:
        bloom = footer_bloom_filter(md)
    except HoodieCorruptedDataError as e:
        raise HoodieCorruptedDataError(f"{storage.uri(rel)}: {e}") from None
    if bloom is None or md is None:
        return None
    text = md.get(BLOOM_FILTER_FOOTER_KEY.encode())  # a 0.x footer's legacy key: re-serialized
    return bloom.filter_type, bytes(text) if text else bloom.serialize_to_string().encode()


def record_bloom_filter(record: dict[str, Any]) -> BloomFilter | None:
    """The filter a live ``bloom_filters`` record holds (None for a tombstone)."""
    value = record.get("BloomFilterMetadata")
    if isinstance(value, tuple):  # as decoded with its record name
        value = value[1]
    if not value or value.get("isDeleted"):
        return None
    return BloomFilter.from_serialized(bytes(value["bloomFilter"]), str(value["type"]))
