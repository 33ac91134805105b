"""Checking the metadata table against the data table (``hoodie-ray metadata validate``).

Every difference is named: the MDT partition, the key (data partition or file) and what
differs. The ``files`` partition is compared with a storage listing of the data table, file by
file, counting only files whose instant is committed on the data timeline (the files readers
would keep); sizes must match (base and version 8+ log files are immutable).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hoodie_ray.file_group.naming import parse_base_file_name, parse_log_file_name
from hoodie_ray.metadata import records as rec
from hoodie_ray.metadata.column_stats import partition_stats_records
from hoodie_ray.metadata.layout import (
    BLOOM_FILTERS,
    COLUMN_STATS,
    FILES,
    PARTITION_STATS,
    RECORD_INDEX,
    SECONDARY_INDEX_PREFIX,
    completed_partitions,
)
from hoodie_ray.metadata.reader import list_data_files
from hoodie_ray.metadata.records import encode_records, is_deleted_record
from hoodie_ray.metadata.secondary_index import secondary_index_key
from hoodie_ray.metadata_writer.bloom_filters import initial_bloom_records
from hoodie_ray.metadata_writer.writer import metadata_writer, partition_stats_files
from hoodie_ray.table import HoodieTable

__all__ = ["MetadataDifference", "record_index_differences", "validate_metadata_table"]


@dataclass(frozen=True)
class MetadataDifference:
    """One way the metadata table differs from the data table."""

    partition: str
    """The MDT partition (``files``, ...)."""
    key: str
    """What differs: a data partition, or ``<partition>/<file>``."""
    problem: str

    def __str__(self) -> str:
        return f"{self.partition}: {self.key}: {self.problem}"


def _committed(table: HoodieTable, name: str) -> bool:
    tl = table.active_timeline
    b = parse_base_file_name(name)
    if b is not None:
        return tl.is_committed(b.instant)
    lg = parse_log_file_name(name)
    if lg is None:
        return False
    return tl.is_committed(lg.instant) or tl.completion_time(lg.instant) is not None


def validate_metadata_table(table: HoodieTable) -> list[MetadataDifference]:
    """Differences between the metadata table and the data table (empty: in sync)."""
    table.refresh()
    out: list[MetadataDifference] = []
    parts = completed_partitions(table.table_config)
    if not parts:
        return out
    mdt = table.metadata_table.refresh()
    if not mdt.exists():
        return [MetadataDifference(FILES, ".hoodie/metadata", "the metadata table is missing")]
    if FILES in parts:
        out += _validate_files(table)
    if COLUMN_STATS in parts:
        out += _validate_column_stats(table)
    if PARTITION_STATS in parts:
        out += _validate_partition_stats(table)
    if any(p.startswith(SECONDARY_INDEX_PREFIX) for p in parts):
        out += _validate_secondary_indexes(table)
    if BLOOM_FILTERS in parts:
        out += _validate_bloom_filters(table)
    return out


def _validate_bloom_filters(table: HoodieTable) -> list[MetadataDifference]:
    """Every committed base file the ``files`` partition lists has a ``bloom_filters`` record
    whose filter (type and serialized bytes) is its footer's, and no other file has a live
    one."""
    listing = table.metadata_table.files_listing()
    want = initial_bloom_records(table, listing)
    names = {
        k: f"{part}/{name}" if part else name
        for part, files in listing.items()
        for name in files
        for k in [rec.bloom_filter_key(part, name)]
    }
    have = {
        k: r
        for k, r in table.metadata_table.records(BLOOM_FILTERS).items()
        if not is_deleted_record(r)
    }
    out: list[MetadataDifference] = []
    for k, r in want.items():
        got = have.get(k)
        where = names.get(k, k)
        if got is None:
            out.append(MetadataDifference(BLOOM_FILTERS, where, "entry missing"))
            continue
        w, g = r["BloomFilterMetadata"], _bloom_value(got)
        if str(g.get("type")) != w["type"]:
            out.append(
                MetadataDifference(
                    BLOOM_FILTERS, where, f"type {g.get('type')!r}, footer {w['type']!r}"
                )
            )
        elif bytes(g.get("bloomFilter") or b"") != w["bloomFilter"]:
            out.append(
                MetadataDifference(BLOOM_FILTERS, where, "bloom filter differs from the footer's")
            )
    for k in sorted(set(have) - set(want)):
        out.append(
            MetadataDifference(
                BLOOM_FILTERS, names.get(k, k), "entry for a file that is not a live base file"
            )
        )
    return out


def _bloom_value(record: dict[str, Any]) -> dict[str, Any]:
    value = record.get("BloomFilterMetadata")
    if isinstance(value, tuple):
        value = value[1]
    return value if isinstance(value, dict) else {}


def _validate_secondary_indexes(table: HoodieTable) -> list[MetadataDifference]:
    """Each secondary index holds exactly the entries one rebuilt from the snapshot (every
    live record's value of the indexed field) would."""
    w = metadata_writer(table)
    defs = w.secondary_indexes()
    slices = table.view().latest_file_slices()
    fields = sorted({d.source_field for d in defs.values()})
    values = w.secondary_values(slices, fields, table.schema, None)
    out: list[MetadataDifference] = []
    for part, d in sorted(defs.items()):
        want = {secondary_index_key(v, rk) for rk, v in values[d.source_field].items()}
        have = {
            k for k, r in table.metadata_table.records(part).items() if not is_deleted_record(r)
        }
        for k in sorted(want - have):
            out.append(MetadataDifference(part, repr(k), "entry missing"))
        for k in sorted(have - want):
            out.append(MetadataDifference(part, repr(k), "entry of no live record"))
    return out


def _encoded(records: dict[str, dict[str, Any]], version: int) -> dict[str, bytes]:
    """The records' bytes, without the meta fields (an MDT compaction sets
    ``_hoodie_file_name``; it says nothing about the data)."""
    keys = sorted(records)
    plain = [{k: v for k, v in records[key].items() if not k.startswith("_hoodie")} for key in keys]
    return dict(zip(keys, encode_records(plain, version), strict=True))


def _wrapped(v: Any) -> Any:
    """The Python value of a stats wrapper (``(name, {"value": x})`` or ``{"value": x}``)."""
    if isinstance(v, tuple) and len(v) == 2:
        v = v[1]
    return v.get("value") if isinstance(v, dict) else v


def covers(have: dict[str, Any], want: dict[str, Any]) -> bool:
    """A stored partition statistic no reader can prune wrongly by: its range holds the
    computed one, its null and value counts are at least the computed ones. Java merges each
    new file's statistics into the stored ones (min of mins, max of maxes, sums), so after
    updates its counts take in superseded files too: the ``partition_stats`` of a Java-written
    table need not equal a recomputation from the latest slices, only cover it."""
    try:
        lo_have, hi_have = _wrapped(have.get("minValue")), _wrapped(have.get("maxValue"))
        lo_want, hi_want = _wrapped(want.get("minValue")), _wrapped(want.get("maxValue"))
        if (lo_want is None) != (lo_have is None) or (hi_want is None) != (hi_have is None):
            return lo_want is None and hi_want is None  # nothing but nulls computed
        if lo_want is not None and not lo_have <= lo_want:
            return False
        if hi_want is not None and not hi_have >= hi_want:
            return False
    except TypeError:  # values of different types: not comparable, not covering
        return False
    return int(have.get("nullCount") or 0) >= int(want.get("nullCount") or 0) and int(
        have.get("valueCount") or 0
    ) >= int(want.get("valueCount") or 0)


def _stats_differences(
    partition: str,
    want: dict[str, dict[str, Any]],
    have: dict[str, dict[str, Any]],
    version: int,
    covering: bool = False,
) -> list[MetadataDifference]:
    """Records compared as the bytes this table version encodes them to; with ``covering``
    a stored record whose statistics cover the computed ones (:func:`covers`) is no
    difference."""
    out = []
    a, b = _encoded(want, version), _encoded(have, version)
    for k in sorted(set(a) | set(b)):
        what = (want.get(k) or have.get(k) or {}).get("ColumnStatsMetadata") or {}
        label = f"{k} ({what.get('fileName')}, {what.get('columnName')})"
        if k not in b:
            out.append(MetadataDifference(partition, label, "missing"))
        elif k not in a:
            out.append(MetadataDifference(partition, label, "not expected"))
        elif a[k] != b[k] and not (
            covering
            and covers(have[k]["ColumnStatsMetadata"] or {}, want[k]["ColumnStatsMetadata"] or {})
        ):
            out.append(
                MetadataDifference(
                    partition,
                    label,
                    f"{have[k]['ColumnStatsMetadata']} != computed "
                    f"{want[k]['ColumnStatsMetadata']}",
                )
            )
    return out


def _validate_column_stats(table: HoodieTable) -> list[MetadataDifference]:
    """Every committed file the ``files`` partition lists has the statistics Java would
    compute for it, and no other file has any."""
    w = metadata_writer(table)
    cols = w.indexed_columns()
    have = {
        k: r
        for k, r in table.metadata_table.records(COLUMN_STATS).items()
        if not is_deleted_record(r)
    }
    v6 = table.table_version < 8
    listing = table.metadata_table.files_listing()
    want: dict[str, dict[str, Any]] = {}
    for part, files in listing.items():
        for name in files:
            if not _committed(table, name):
                continue
            recs = w.file_column_stats(part, name, cols)
            if v6 and parse_base_file_name(name) is None:
                # 0.x: a log file has statistics only from the commit that wrote it (none
                # from the initialisation), so only those it has are checked
                recs = [(k, r) for k, r in recs if k in have]
            want.update(recs)
    if v6:
        # 0.x's clean writes no tombstones for log files: their statistics stay
        names = {n for files in listing.values() for n in files}
        have = {k: r for k, r in have.items() if _stats_file(r) in names}
    return _stats_differences(COLUMN_STATS, want, have, table.table_version)


def _stats_file(record: dict[str, Any]) -> str:
    cs = record.get("ColumnStatsMetadata") or {}
    if isinstance(cs, tuple):
        cs = cs[1]
    return str(cs.get("fileName"))


def _validate_partition_stats(table: HoodieTable) -> list[MetadataDifference]:
    """Each partition's statistics aggregate those of its latest file slices."""
    mdt = table.metadata_table
    stats = mdt.records(COLUMN_STATS)
    by_file: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in stats.values():
        cs = r.get("ColumnStatsMetadata") or {}
        by_file.setdefault((str(cs.get("fileName")), str(cs.get("columnName"))), []).append(r)
    want: dict[str, dict[str, Any]] = {}
    by_part: dict[str, list[dict[str, Any]]] = {}
    view = table.view()
    for part in view.list_partitions():
        for name in partition_stats_files(view, part):
            for (fname, _), recs in by_file.items():
                if fname == name:
                    by_part.setdefault(part, []).extend(recs)
    for part, recs in by_part.items():
        want.update(partition_stats_records(part, recs, table.table_version))
    have = mdt.records(PARTITION_STATS)
    return _stats_differences(PARTITION_STATS, want, have, table.table_version, covering=True)


def _validate_files(table: HoodieTable) -> list[MetadataDifference]:
    out: list[MetadataDifference] = []
    mdt = table.metadata_table
    actual: dict[str, dict[str, int]] = {}
    for part, listed in list_data_files(table.storage_view()).items():
        files = {n: size for n, size in listed.items() if _committed(table, n)}
        if files:
            actual[part] = files
    in_mdt = {
        p: {n: s for n, s in files.items() if _committed(table, n)}
        for p, files in mdt.files_listing().items()
    }
    mdt_parts = set(mdt.all_partitions())
    for part in sorted(set(actual) | set(in_mdt)):
        have, want = in_mdt.get(part, {}), actual.get(part, {})
        shown = part or "."
        if want and part not in mdt_parts and table.table_config.partition_fields:
            out.append(
                MetadataDifference(FILES, shown, "partition missing from __all_partitions__")
            )
        for n in sorted(set(want) - set(have)):
            out.append(MetadataDifference(FILES, f"{shown}/{n}", "file not listed"))
        for n in sorted(set(have) - set(want)):
            out.append(MetadataDifference(FILES, f"{shown}/{n}", "listed file does not exist"))
        for n in sorted(set(have) & set(want)):
            if have[n] != want[n]:
                out.append(
                    MetadataDifference(
                        FILES, f"{shown}/{n}", f"size {have[n]} listed, {want[n]} on storage"
                    )
                )
    return out


def record_index_differences(
    table: HoodieTable, live: Iterable[tuple[str, str, Any]]
) -> list[MetadataDifference]:
    """Compare the ``record_index`` partition with ``live``: ``(partition, file id, keys)`` of
    every latest file slice, read from the data files."""
    want: dict[str, tuple[str, str]] = {}
    for part, fid, keys in live:
        for k in keys.to_pylist() if hasattr(keys, "to_pylist") else keys:
            want[k] = (part, fid)
    have = {
        k: (p, f)
        for (p, f), ks in table.metadata_table.record_index_by_file_group().items()
        for k in ks
    }
    out: list[MetadataDifference] = []
    for k in sorted(set(want) - set(have)):
        out.append(MetadataDifference(RECORD_INDEX, k, f"key in {_loc(want[k])} not indexed"))
    for k in sorted(set(have) - set(want)):
        out.append(MetadataDifference(RECORD_INDEX, k, f"indexed at {_loc(have[k])}, not live"))
    for k in sorted(set(have) & set(want)):
        if have[k] != want[k]:
            out.append(
                MetadataDifference(
                    RECORD_INDEX, k, f"indexed at {_loc(have[k])}, lives in {_loc(want[k])}"
                )
            )
    return out


def _loc(loc: tuple[str, str]) -> str:
    return f"{loc[0] or '.'}/{loc[1]}"
