"""The one options registry, and the frozen typed config every entry point resolves it into.

Users pass ``dict[str, str]`` with the keys Hudi users know (``hoodie.*``) or the Flink-style
short keys; both spellings resolve to one :class:`ConfigOption`. Unknown keys are an error that
names the key and suggests the closest known one. The internals only see :class:`WriteConfig`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from hoodie_ray.exceptions import HoodieOptionError

_MB = 1024 * 1024

#: Write operations that commit a replacecommit (Hudi's ``WriteOperationType`` names, lower).
REPLACE_OPERATIONS = frozenset({"insert_overwrite", "insert_overwrite_table", "delete_partition"})

#: Write operations one running topology switches between from one commit to the next (the
#: assigners and writers run the same for both: rows keyed, located, merged): ``hr.write``'s
#: warm topology serves a delete after upserts, and upserts after it, without a new start.
SWITCHABLE_OPERATIONS = frozenset({"upsert", "delete"})


def _parse_bool(key: str, v: str) -> bool:
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise HoodieOptionError(f"option {key}: expected true or false, got {v!r}")


def _parse_int(key: str, v: str) -> int:
    try:
        return int(str(v).strip())
    except ValueError:
        raise HoodieOptionError(f"option {key}: expected an integer, got {v!r}") from None


def _parse_float(key: str, v: str) -> float:
    try:
        return float(str(v).strip())
    except ValueError:
        raise HoodieOptionError(f"option {key}: expected a number, got {v!r}") from None


_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": _MB, "g": 1024 * _MB, "t": 1024 * 1024 * _MB}


def _size_parser(default_unit: int) -> Callable[[str, str], int]:
    """Sizes: a plain number is in ``default_unit`` (Flink's write.*.size are in MB)."""

    def parse(key: str, v: str) -> int:
        m = _SIZE_RE.match(str(v))
        if not m:
            raise HoodieOptionError(f"option {key}: expected a size such as 256MB, got {v!r}")
        num, unit = float(m.group(1)), (m.group(2) or "").lower()
        mult = default_unit if unit == "" else _UNITS.get(unit[0], 1)
        value = int(num * mult)
        if value < 0:
            raise HoodieOptionError(f"option {key}: must not be negative")
        return value

    return parse


#: hoodie.layout.optimize.strategy's values: clustering's row orders (compaction/layout.py).
LAYOUTS = ("linear", "z-order", "hilbert")


def _choice(*choices: str, upper: bool = True) -> Callable[[str, str], str]:
    def parse(key: str, v: str) -> str:
        s = str(v).strip()
        s = s.upper() if upper else s.lower()
        if s not in choices:
            raise HoodieOptionError(f"option {key}: {v!r} is not one of {', '.join(choices)}")
        return s

    return parse


_PARTIAL_UPDATE_PAYLOAD = "org.apache.hudi.common.model.PartialUpdateAvroPayload"


def _partial_update_mode(key: str, v: str) -> str:
    """``IGNORE_DEFAULTS`` (or, as Flink's ``payload.class``, the 0.x payload class that means
    it), ``FILL_UNAVAILABLE``; ``NONE``: no partial updates."""
    s = str(v).strip()
    if s == _PARTIAL_UPDATE_PAYLOAD or s.upper() == "IGNORE_DEFAULTS":
        return "IGNORE_DEFAULTS"
    if s.upper() in ("NONE", "FILL_UNAVAILABLE"):
        return s.upper()
    raise HoodieOptionError(
        f"option {key}: {v!r} is not supported; use IGNORE_DEFAULTS (partial updates: a null "
        f"field keeps the stored value), FILL_UNAVAILABLE (a string field holding the marker "
        f"value keeps it) or {_PARTIAL_UPDATE_PAYLOAD}"
    )


def _str(key: str, v: str) -> str:
    return str(v).strip()


def _positive(parser: Callable[[str, str], Any]) -> Callable[[str, str], Any]:
    def parse(key: str, v: str) -> Any:
        out = parser(key, v)
        if out <= 0:
            raise HoodieOptionError(f"option {key}: must be positive, got {v!r}")
        return out

    return parse


#: Java's ``Integer.MAX_VALUE``: the largest count an option Hudi reads as an ``int`` takes.
JAVA_INT_MAX = 2**31 - 1


def _java_int(key: str, v: str) -> int:
    """A positive integer Hudi's Java reads as an ``int``."""
    out = _parse_int(key, v)
    if not 0 < out <= JAVA_INT_MAX:
        raise HoodieOptionError(
            f"option {key}: must be an integer in [1, {JAVA_INT_MAX}], got {v!r}"
        )
    return out


def _fraction(key: str, v: str) -> float:
    """A number strictly between 0 and 1 (a rate)."""
    out = _parse_float(key, v)
    if not 0 < out < 1:
        raise HoodieOptionError(f"option {key}: must be within (0, 1), got {v!r}")
    return out


def _non_negative_int(key: str, v: str) -> int:
    out = _parse_int(key, v)
    if out < 0:
        raise HoodieOptionError(f"option {key}: must be an integer >= 0, got {v!r}")
    return out


def _non_negative_float(key: str, v: str) -> float:
    out = _parse_float(key, v)
    if out < 0 or out != out:
        raise HoodieOptionError(f"option {key}: must be a number >= 0, got {v!r}")
    return out


#: ``hoodie.write.lock.provider``: hoodie_ray's own lock (the default) and Hudi's Java providers
#: it implements, by their class names (write/lock_providers.py).
OWN_LOCK_PROVIDER = "hoodie_ray"
FILESYSTEM_LOCK_PROVIDER = "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"
STORAGE_LOCK_PROVIDER = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"
LOCK_PROVIDERS = (OWN_LOCK_PROVIDER, FILESYSTEM_LOCK_PROVIDER, STORAGE_LOCK_PROVIDER)


def _lock_provider(key: str, v: str) -> str:
    s = str(v).strip()
    if s not in LOCK_PROVIDERS:
        raise HoodieOptionError(
            f"option {key}: {v!r} is not a lock provider hoodie_ray implements "
            f"({', '.join(LOCK_PROVIDERS)})"
        )
    return s


@dataclass(frozen=True)
class ConfigOption:
    """One option: canonical key, other accepted spellings, default, parser and doc."""

    key: str
    attr: str
    default: Any
    parse: Callable[[str, str], Any]
    doc: str
    aliases: tuple[str, ...] = ()


OPTIONS: tuple[ConfigOption, ...] = (
    ConfigOption(
        "hoodie.table.name",
        "table_name",
        None,
        _str,
        "Table name; required on the first write.",
        ("table.name",),
    ),
    ConfigOption(
        "hoodie.database.name",
        "database_name",
        "default",
        _str,
        "Database name recorded in hoodie.properties.",
    ),
    ConfigOption(
        "hoodie.datasource.write.recordkey.field",
        "record_key_field",
        None,
        _str,
        "Record key field, or a,b for a complex key.",
        ("recordkey.field", "hoodie.table.recordkey.fields", "primary_key"),
    ),
    ConfigOption(
        "hoodie.datasource.write.partitionpath.field",
        "partition_path_field",
        None,
        _str,
        "Partition field, or a,b; none means non-partitioned.",
        ("partitionpath.field", "hoodie.table.partition.fields", "partition_by"),
    ),
    ConfigOption(
        "hoodie.datasource.write.precombine.field",
        "precombine_field",
        None,
        _str,
        "Ordering field for event-time merging (the highest value wins).",
        (
            "precombine.field",
            "write.precombine.field",
            "hoodie.table.precombine.field",
            "ordering.fields",
            "hoodie.table.ordering.fields",
        ),
    ),
    ConfigOption(
        "hoodie.datasource.write.table.type",
        "table_type",
        "MERGE_ON_READ",
        _choice("MERGE_ON_READ", "COPY_ON_WRITE"),
        "Table type.",
        ("table.type", "hoodie.table.type"),
    ),
    ConfigOption(
        "hoodie.datasource.write.operation",
        "operation",
        "upsert",
        _choice(
            "upsert",
            "insert",
            "bulk_insert",
            "delete",
            "insert_overwrite",
            "insert_overwrite_table",
            "delete_partition",
            upper=False,
        ),
        "Write operation. insert_overwrite replaces the partitions the input touches,"
        " insert_overwrite_table every partition, delete_partition the partitions named by"
        " hoodie.datasource.write.partitions.to.delete (or those the input touches): each"
        " commits a replacecommit.",
        ("write.operation",),
    ),
    ConfigOption(
        "hoodie.datasource.write.partitions.to.delete",
        "partitions_to_delete",
        None,
        _str,
        "delete_partition: comma-separated partition paths; * matches any characters, /"
        " included (2021/*).",
        ("partitions.to.delete",),
    ),
    ConfigOption(
        "hoodie.datasource.write.hive_style_partitioning",
        "hive_style_partitioning",
        False,
        _parse_bool,
        "Write partition directories as field=value.",
        ("hive_style_partitioning",),
    ),
    ConfigOption(
        "hoodie.datasource.write.partitionpath.urlencode",
        "partition_url_encode",
        False,
        _parse_bool,
        "URL-encode partition values in partition paths.",
        ("partitionpath.urlencode",),
    ),
    ConfigOption(
        "hoodie.datasource.write.keygenerator.class",
        "keygen_class",
        None,
        _str,
        "Key generator class; chosen from the fields when absent.",
        ("hoodie.table.keygenerator.class",),
    ),
    ConfigOption(
        "hoodie.datasource.write.keygenerator.type",
        "keygen_type",
        None,
        _choice("SIMPLE", "COMPLEX", "NON_PARTITION", "TIMESTAMP"),
        "Key generator type.",
        ("hoodie.table.keygenerator.type",),
    ),
    ConfigOption(
        "write.partition.format",
        "partition_format",
        None,
        _str,
        "Timestamp partitioning: output date format for a date/timestamp partition field (e.g. yyyyMMdd).",
    ),
    ConfigOption(
        "hoodie.keygen.timebased.timestamp.type",
        "timebased_timestamp_type",
        None,
        _choice(
            "UNIX_TIMESTAMP", "EPOCHMILLISECONDS", "EPOCHMICROSECONDS", "DATE_STRING", "SCALAR"
        ),
        "TimestampBasedKeyGenerator: how the partition field's value is read.",
    ),
    ConfigOption(
        "hoodie.keygen.timebased.output.dateformat",
        "timebased_output_format",
        None,
        _str,
        "TimestampBasedKeyGenerator: output date format (Java SimpleDateFormat pattern).",
    ),
    ConfigOption(
        "hoodie.keygen.timebased.input.dateformat",
        "timebased_input_format",
        None,
        _str,
        "TimestampBasedKeyGenerator: input format for DATE_STRING values.",
    ),
    ConfigOption(
        "hoodie.keygen.timebased.output.timezone",
        "timebased_output_timezone",
        None,
        _str,
        "TimestampBasedKeyGenerator: output timezone (unset: as Java, a DATE_STRING value is "
        "printed in the zone it was read in: the input timezone, else the offset it carries, "
        "else UTC; other values in UTC; write.partition.format: UTC). Kept by a new table.",
    ),
    ConfigOption(
        "hoodie.keygen.timebased.input.timezone",
        "timebased_input_timezone",
        None,
        _str,
        "TimestampBasedKeyGenerator: timezone of DATE_STRING values without an offset (unset: "
        "UTC). Kept by a new table.",
    ),
    ConfigOption(
        "hoodie.keygen.timebased.timezone",
        "timebased_timezone",
        None,
        _str,
        "TimestampBasedKeyGenerator: input and output timezone (over the two above, as in "
        "Java). Kept by a new table; a later write may not change a table's zones.",
    ),
    ConfigOption(
        "hoodie.keygen.timebased.timestamp.scalar.time.unit",
        "timebased_scalar_unit",
        "DAYS",
        _choice("DAYS", "HOURS", "MINUTES", "SECONDS", "MILLISECONDS", "MICROSECONDS"),
        "TimestampBasedKeyGenerator: unit of SCALAR values.",
    ),
    ConfigOption("write.tasks", "write_tasks", 2, _positive(_parse_int), "Writer actors."),
    ConfigOption(
        "write.bucket_assign.tasks",
        "bucket_assign_tasks",
        None,
        _positive(_parse_int),
        "Bucket-assigner actors; defaults to write.tasks.",
    ),
    ConfigOption(
        "pipeline.operator-chaining",
        "operator_chaining",
        True,
        _parse_bool,
        "Run bucket-assigner task i and writer task i in one actor when they are as many "
        "(Flink's operator chaining): an assigner's rows for its own writer stay in process.",
    ),
    ConfigOption(
        "taskmanager.numberOfTaskSlots",
        "task_slots",
        0,
        _non_negative_int,
        "Chained write tasks hosted by one actor process (Flink's task slots: subtasks that "
        "share a TaskManager): several tasks' key indexes and buffers in one process, each "
        "still its own task (its keys, its file groups). 0 (the default): one task a process "
        "while the cluster has a CPU for each, else one process a CPU (task i in process i "
        "% processes). A HoodieDatasink runs one task a process.",
    ),
    ConfigOption(
        "write.batch.size",
        "write_batch_size",
        256 * _MB,
        _positive(_size_parser(_MB)),
        "Per-bucket buffer before a flush (plain numbers in MB).",
    ),
    ConfigOption(
        "write.task.max.size",
        "write_task_max_size",
        1024 * _MB,
        _positive(_size_parser(_MB)),
        "All buffers of one writer before the largest is flushed (plain numbers in MB).",
    ),
    ConfigOption(
        "write.max_inflight_batches",
        "max_inflight_batches",
        4,
        _positive(_parse_int),
        "Batches in flight per actor before the producer waits (backpressure).",
    ),
    ConfigOption(
        "write.batch.rows",
        "write_batch_rows",
        262144,
        _positive(_parse_int),
        "Rows per batch sent to an actor in one call: the driver's rounds of input (small "
        "batches it holds, the rows it routes at once, hr.write's slices of a table) and an "
        "assigner's sends to a writer (this divided by the writers, at least 4,096). Every "
        "call and object costs ~1-2 ms of CPU between the caller, the callee and the object "
        "store, whatever its rows.",
    ),
    ConfigOption(
        "index.type",
        "index_type",
        "FLINK_STATE",
        _choice("FLINK_STATE", "BUCKET"),
        "FLINK_STATE: key index in the bucket assigners; BUCKET: hash buckets, no state.",
        ("hoodie.index.type",),
    ),
    ConfigOption(
        "hoodie.bucket.index.num.buckets",
        "bucket_num",
        4,
        _positive(_parse_int),
        "Buckets per partition with index.type=BUCKET.",
        ("hoodie.bucket.index.num_buckets",),
    ),
    ConfigOption(
        "index.global.enabled",
        "index_global",
        True,
        _parse_bool,
        "A key that changes partition is deleted from the old one.",
    ),
    ConfigOption(
        "cdc.enabled",
        "cdc_enabled",
        False,
        _parse_bool,
        "A new table keeps change data capture (hoodie.table.cdc.enabled): copy-on-write "
        "merges write .cdc log files beside the base files they rewrite, as Java does; a "
        "table property, fixed when the table is created.",
        ("hoodie.table.cdc.enabled",),
    ),
    ConfigOption(
        "cdc.supplemental.logging.mode",
        "cdc_logging_mode",
        "DATA_BEFORE_AFTER",
        _choice("OP_KEY_ONLY", "DATA_BEFORE", "DATA_BEFORE_AFTER"),
        "What the .cdc log files of a CDC table hold: OP_KEY_ONLY (operation and key), "
        "DATA_BEFORE (and the record before), DATA_BEFORE_AFTER (and after: the default).",
        ("hoodie.table.cdc.supplemental.logging.mode",),
    ),
    ConfigOption(
        "hoodie.table.partial.update.mode",
        "partial_update_mode",
        "NONE",
        _partial_update_mode,
        "A new table takes partial updates: a null field of an upsert keeps the stored value "
        "(IGNORE_DEFAULTS; Flink's payload.class PartialUpdateAvroPayload means the same), or "
        "a string field holding hoodie.write.partial.update.unavailable.value does "
        "(FILL_UNAVAILABLE, Debezium's Postgres changes; version 9 only). Recorded as Java "
        "does for the table version: the table property on 9, the payload class on 6 and 8; "
        "fixed when the table is created.",
        ("payload.class", "hoodie.datasource.write.payload.class"),
    ),
    ConfigOption(
        "hoodie.write.partial.update.unavailable.value",
        "partial_update_unavailable_value",
        "__debezium_unavailable_value",
        _str,
        "FILL_UNAVAILABLE's marker: a string column holding it keeps the stored value (Java's "
        "PARTIAL_UPDATE_UNAVAILABLE_VALUE; Debezium's default). Stored in the table when it is "
        "created.",
    ),
    ConfigOption(
        "write.partial.updates",
        "partial_updates",
        False,
        _parse_bool,
        "An upsert batch that lacks some of the table's columns updates only the columns it "
        "has (Spark MERGE INTO's partial updates): a merge-on-read table of version 8+ gets "
        "log blocks of those columns (header IS_PARTIAL), a copy-on-write merge keeps the "
        "stored values of the others; a new key gets nulls. Not with a global index, "
        "changelog mode or a table partial update mode (hoodie.table.partial.update.mode).",
    ),
    ConfigOption(
        "changelog.enabled",
        "changelog_enabled",
        False,
        _parse_bool,
        "Flink's changelog mode on a MERGE_ON_READ table: each change is kept in the logs "
        "with its operation in the _hoodie_operation meta column (I, -U, U, D; Java's "
        "hoodie.allow.operation.metadata.field) instead of being merged within a checkpoint; "
        "snapshot reads and compaction still merge; incremental_format='changelog' reads "
        "every change. An input column _hoodie_operation gives the operations (I, -U, U, D "
        "or Flink's +I, +U, -D); without it, new keys are I, known ones U, deletes D.",
        ("hoodie.allow.operation.metadata.field",),
    ),
    ConfigOption(
        "index.bootstrap.enabled",
        "index_bootstrap",
        True,
        _parse_bool,
        "Load the key index from the table when the assigners start. false (Flink without "
        "restored state): only keys written since the assigners started are known (a restart "
        "after an actor failure forgets them), so an upsert of an "
        "older key may land in another file group (a duplicate) and a delete of one has no "
        "effect; for insert-mostly streams that want a fast start.",
    ),
    ConfigOption(
        "hoodie.parquet.small.file.limit",
        "small_file_limit",
        104857600,
        _size_parser(1),
        "Base files below this size (bytes) take new inserts.",
    ),
    ConfigOption(
        "hoodie.parquet.max.file.size",
        "parquet_max_file_size",
        125829120,
        _positive(_size_parser(1)),
        "Target base file size (bytes); bounds records per new file group.",
    ),
    ConfigOption(
        "hoodie.copyonwrite.record.size.estimate",
        "record_size_estimate",
        1024,
        _positive(_parse_int),
        "Record size (bytes) assumed before any commit gives a measured average.",
    ),
    ConfigOption(
        "hoodie.record.size.estimation.threshold",
        "record_size_estimation_threshold",
        1.0,
        _parse_float,
        "A commit measures the average record size only once it wrote more than this "
        "fraction of hoodie.parquet.small.file.limit (Java's rule: a small commit's bytes are "
        "mostly fixed costs such as the base files' bloom filter footers).",
    ),
    ConfigOption(
        "hoodie.logfile.max.size",
        "logfile_max_size",
        1073741824,
        _positive(_size_parser(1)),
        "Roll to the next log version past this size (bytes).",
    ),
    ConfigOption(
        "hoodie.logfile.data.block.format",
        "log_block_format",
        "avro",
        _choice("avro", "parquet", upper=False),
        "Log data block format.",
    ),
    ConfigOption(
        "hoodie.parquet.compression.codec",
        "parquet_codec",
        "snappy",
        _choice("snappy", "gzip", "zstd", "none", "uncompressed", upper=False),
        "Parquet codec.",
    ),
    ConfigOption(
        "hoodie.parquet.bloom.filter.enabled",
        "parquet_bloom_filter_enabled",
        True,
        _parse_bool,
        "Write Hudi's record-key bloom filter (and its type code) in every base file's footer, "
        "as Java's writers do; false saves its CPU (~1.5 us a key) where no reader uses it.",
    ),
    ConfigOption(
        "hoodie.index.bloom.num_entries",
        "bloom_num_entries",
        60000,
        _java_int,
        "Keys a base file's bloom filter is sized for (a DYNAMIC_V0 filter adds a row of that "
        "size per this many keys).",
    ),
    ConfigOption(
        "hoodie.index.bloom.fpp",
        "bloom_fpp",
        0.000000001,
        _fraction,
        "False-positive rate a base file's bloom filter is sized for (at num_entries keys).",
    ),
    ConfigOption(
        "hoodie.bloom.index.filter.type",
        "bloom_filter_type",
        "DYNAMIC_V0",
        _choice("SIMPLE", "DYNAMIC_V0"),
        "Bloom filter type of base files: DYNAMIC_V0 (rows added as keys grow, up to "
        "hoodie.bloom.index.filter.dynamic.max.entries) or SIMPLE (one fixed vector).",
    ),
    ConfigOption(
        "hoodie.bloom.index.filter.dynamic.max.entries",
        "bloom_max_entries",
        100000,
        _java_int,
        "Keys a DYNAMIC_V0 filter grows rows for; past it, keys go round-robin over the rows.",
    ),
    ConfigOption(
        "compaction.schedule.enabled",
        "compaction_schedule",
        True,
        _parse_bool,
        "Schedule compactions after commits.",
    ),
    ConfigOption(
        "compaction.async.enabled",
        "compaction_async",
        True,
        _parse_bool,
        "Run compaction beside the writers.",
    ),
    ConfigOption(
        "compaction.trigger.strategy",
        "compaction_trigger",
        "num_commits",
        _choice("num_commits", "time_elapsed", "num_and_time", "num_or_time", upper=False),
        "When a compaction is scheduled.",
    ),
    ConfigOption(
        "compaction.delta_commits",
        "compaction_delta_commits",
        5,
        _positive(_parse_int),
        "Delta commits since the last compaction that trigger one.",
    ),
    ConfigOption(
        "compaction.delta_seconds",
        "compaction_delta_seconds",
        3600,
        _positive(_parse_int),
        "Seconds since the last compaction that trigger one.",
    ),
    ConfigOption(
        "hoodie.clustering.inline",
        "clustering_inline",
        False,
        _parse_bool,
        "Schedule and run a clustering after a commit once hoodie.clustering.inline.max.commits"
        " commits completed since the last replacecommit.",
        ("clustering.inline",),
    ),
    ConfigOption(
        "hoodie.clustering.inline.max.commits",
        "clustering_inline_max_commits",
        4,
        _positive(_parse_int),
        "Commits since the last replacecommit that trigger an inline clustering.",
    ),
    ConfigOption(
        "hoodie.clustering.schedule.inline",
        "clustering_schedule",
        False,
        _parse_bool,
        "A stream writer inserting (write.operation=insert, Flink's append mode) schedules a "
        "clustering plan after a commit once hoodie.clustering.async.max.commits commits "
        "completed since the last replacecommit (clustering.async.enabled implies it unless set "
        "false).",
        ("clustering.schedule.enabled",),
    ),
    ConfigOption(
        "hoodie.clustering.async.enabled",
        "clustering_async",
        False,
        _parse_bool,
        "A stream writer inserting (write.operation=insert) runs the clustering plans it "
        "schedules in the background, on its compactor actors, while it goes on writing; each "
        "is committed at the first checkpoint after it finished.",
        ("clustering.async.enabled",),
    ),
    ConfigOption(
        "hoodie.clustering.async.max.commits",
        "clustering_async_max_commits",
        4,
        _positive(_parse_int),
        "Commits since the last replacecommit that trigger a scheduled clustering.",
        ("clustering.delta_commits",),
    ),
    ConfigOption(
        "hoodie.clustering.plan.strategy.small.file.limit",
        "clustering_small_file_limit",
        314572800,
        _size_parser(1),
        "Clustering rewrites file slices whose base file is smaller than this (bytes).",
    ),
    ConfigOption(
        "hoodie.clustering.plan.strategy.target.file.max.bytes",
        "clustering_target_file_max_bytes",
        1073741824,
        _positive(_size_parser(1)),
        "Target size (bytes) of the base files a clustering writes.",
    ),
    ConfigOption(
        "hoodie.clustering.plan.strategy.max.bytes.per.group",
        "clustering_max_bytes_per_group",
        2147483648,
        _positive(_size_parser(1)),
        "Most bytes of file slices in one clustering group (one task).",
    ),
    ConfigOption(
        "hoodie.clustering.plan.strategy.max.num.groups",
        "clustering_max_num_groups",
        30,
        _positive(_parse_int),
        "Most clustering groups in one plan.",
    ),
    ConfigOption(
        "hoodie.clustering.plan.strategy.sort.columns",
        "clustering_sort_columns",
        None,
        _str,
        "Comma-separated columns a clustering sorts each group's rows by (linear order).",
    ),
    ConfigOption(
        "hoodie.layout.optimize.strategy",
        "layout_optimize_strategy",
        "linear",
        _choice(*LAYOUTS, upper=False),
        "How a clustering orders rows by the sort columns: linear (sorted by them in turn), "
        "z-order or hilbert (a space-filling curve over them, as Spark's clustering builds it).",
    ),
    ConfigOption(
        "compaction.tasks",
        "compaction_tasks",
        2,
        _positive(_parse_int),
        "Parallel compaction tasks.",
    ),
    ConfigOption(
        "clean.async.enabled",
        "clean_enabled",
        True,
        _parse_bool,
        "Clean after every commit: delete the file slices clean.retain_commits no longer keeps.",
        ("hoodie.clean.automatic",),
    ),
    ConfigOption(
        "clean.retain_commits",
        "clean_retain_commits",
        30,
        _positive(_parse_int),
        "Commits whose file slices are kept (time travel).",
        ("hoodie.cleaner.commits.retained",),
    ),
    ConfigOption(
        "archive.min_commits",
        "keep_min_commits",
        40,
        _positive(_parse_int),
        "Commits the active timeline keeps after archiving (more than clean.retain_commits).",
        ("hoodie.keep.min.commits",),
    ),
    ConfigOption(
        "archive.max_commits",
        "keep_max_commits",
        50,
        _positive(_parse_int),
        "Commits on the active timeline that trigger archiving down to archive.min_commits.",
        ("hoodie.keep.max.commits",),
    ),
    ConfigOption(
        "hoodie.archive.automatic",
        "archive_automatic",
        True,
        _parse_bool,
        "Archive the oldest instants after commits, once past archive.max_commits.",
    ),
    ConfigOption(
        "hoodie.table.services.enabled",
        "table_services_enabled",
        True,
        _parse_bool,
        "A writer runs the table services after its commits (compaction scheduling and "
        "execution, cleaning, archival, each as its own switches allow); false: they stand "
        "down, and hr.compact / hr.clean / hr.archive run them as their own job.",
    ),
    ConfigOption(
        "hoodie.datasource.write.schema.allow.auto.evolution",
        "schema_auto_evolution",
        True,
        _parse_bool,
        "Let a write evolve the table schema as Hudi's write path does: new nullable columns "
        "and struct fields are added, int -> long -> float -> double widened. false keeps the "
        "schema fixed: such a batch is refused (hoodie_ray's option; Hudi Java has no switch "
        "and always evolves). A narrower batch type is written in the table's type either way.",
        ("write.schema.auto_evolution",),
    ),
    ConfigOption(
        "hoodie.write.set.null.for.missing.columns",
        "set_null_for_missing_columns",
        True,
        _parse_bool,
        "Write nulls for nullable table columns a batch lacks (Hudi's option; its Spark "
        "writer defaults to false, hoodie_ray to true, as a Flink table fills absent columns); "
        "false refuses such a batch. A non-null column is never dropped.",
    ),
    ConfigOption(
        "write.warm_idle_s",
        "warm_idle_s",
        60.0,
        _non_negative_float,
        "hr.write on Ray keeps its topology (and the table's writer lock) this many seconds "
        "after a call, for the next call from this process to the same table with the same "
        "options; 0 stops it after every call.",
    ),
    ConfigOption(
        "write.allow_non_empty_dir",
        "allow_non_empty_dir",
        False,
        _parse_bool,
        "Create a new table in a directory that already holds other files (refused by "
        "default: writing into a non-Hudi directory is more often a wrong path).",
    ),
    ConfigOption(
        "hoodie.timeline.compaction.batch.size",
        "timeline_compaction_batch_size",
        10,
        _positive(_parse_int),
        "Files of one LSM archived-timeline layer (table version 8+) merged into the next.",
    ),
    ConfigOption(
        "hoodie.write.table.version",
        "write_table_version",
        "6",
        _choice("6", "8", "9"),
        "Table version of new tables (6, 8 or 9).",
    ),
    ConfigOption(
        "hoodie.metadata.enable",
        "metadata_enable",
        None,
        _parse_bool,
        "Keep the metadata table (.hoodie/metadata: file listings for readers). Default: "
        "true for table versions 8 and 9 (Hudi 1.x's default); on 6 (0.x's layout) off "
        "unless the table has one. false on a table that has one drops it.",
        ("metadata.enabled",),
    ),
    ConfigOption(
        "hoodie.metadata.record.index.enable",
        "metadata_record_index_enable",
        False,
        _parse_bool,
        "Keep the record index in the metadata table (record key -> file group): writers "
        "then load their key index from it instead of reading every data file. false on a "
        "table that has one drops it.",
    ),
    ConfigOption(
        "hoodie.metadata.index.column.stats.enable",
        "metadata_column_stats_enable",
        False,
        _parse_bool,
        "Keep per-file column statistics in the metadata table (filtered reads skip file "
        "slices they rule out). false on a table that has them drops them.",
    ),
    ConfigOption(
        "hoodie.metadata.index.partition.stats.enable",
        "metadata_partition_stats_enable",
        False,
        _parse_bool,
        "Keep per-partition column statistics in the metadata table (needs the column "
        "statistics). false on a table that has them drops them.",
    ),
    ConfigOption(
        "hoodie.metadata.index.bloom.filter.enable",
        "metadata_bloom_filter_enable",
        False,
        _parse_bool,
        "Keep every base file's bloom filter in the metadata table's bloom_filters partition "
        "(what Spark's bloom index reads with hoodie.bloom.index.use.metadata). false on a "
        "table that has it drops it.",
    ),
    ConfigOption(
        "hoodie.metadata.compact.max.delta.commits",
        "metadata_compact_max_delta_commits",
        10,
        _positive(_parse_int),
        "Compact the metadata table after this many delta commits since its last compaction.",
    ),
    ConfigOption(
        "hoodie.metadata.compact.async",
        "metadata_compact_async",
        False,
        _parse_bool,
        "Run a due metadata-table compaction beside the writes: the commit that triggers it "
        "plans it (its instant requested) and returns; the merge runs on a thread of the "
        "committing process and completes the instant when done, while the job's later "
        "commits log into the next slice. A stream's checkpoints go on meanwhile; a job's "
        "close (each hr.write with engine=local, a stream writer's close) waits for the merge, "
        "so the table's lock is never handed on with a merge running. Only for table "
        "versions 8+ (their logs are named by their own delta commit) and "
        "hoodie.write.concurrency.mode=single_writer; elsewhere the compaction runs inline "
        "as Java's writer runs it. A process that dies mid-merge leaves the plan pending; "
        "the next writer rolls it back.",
    ),
    ConfigOption(
        "hoodie.metadata.compact.index.min.log.ratio",
        "metadata_compact_index_min_log_ratio",
        0.0,
        _non_negative_float,
        "Above 0, a due metadata-table compaction leaves a record-index or secondary-index "
        "file group whose log files hold under this fraction of its base file's bytes (until "
        "hoodie.metadata.compact.index.max.delta.commits delta commits followed its base): "
        "its base file holds every key, so rewriting it every "
        "hoodie.metadata.compact.max.delta.commits costs in proportion to the table, not to "
        "what the commits wrote. 0 (the default) rewrites every file group with logs, as "
        "Hudi's Java writer does. Only for tables no Java writer archives: Java's archival "
        "assumes the latest compaction merged every log, and its readers then skip the logs "
        "of archived instants.",
    ),
    ConfigOption(
        "hoodie.metadata.compact.index.max.delta.commits",
        "metadata_compact_index_max_delta_commits",
        50,
        _positive(_parse_int),
        "With hoodie.metadata.compact.index.min.log.ratio above 0: an index file group is "
        "compacted at the next metadata-table compaction once this many delta commits "
        "completed after its base file, whatever its logs' size (bounds the logs a lookup "
        "merges and how long the data table's archival keeps the instants they name).",
    ),
    ConfigOption(
        "hoodie.metadata.cleaner.commits.retained",
        "metadata_clean_retain_commits",
        3,
        _positive(_parse_int),
        "Metadata-table delta commits after a compaction before the slices it replaced are "
        "cleaned (readers that listed the metadata table before keep their files).",
    ),
    ConfigOption(
        "hoodie.write.lock.heartbeat_interval_ms",
        "lock_heartbeat_ms",
        10000,
        _positive(_parse_int),
        "Heartbeat of the single-writer lock.",
    ),
    ConfigOption(
        "hoodie.write.lock.expire_ms",
        "lock_expire_ms",
        60000,
        _positive(_parse_int),
        "A lock whose heartbeat is older than this is stale and may be taken over.",
    ),
    ConfigOption(
        "hoodie.write.lock.provider",
        "lock_provider",
        OWN_LOCK_PROVIDER,
        _lock_provider,
        "The table lock: hoodie_ray (its own lock file, .hoodie/.aux/hoodie_ray.writer.lock), "
        "or Hudi's org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider (local "
        "file systems) or ...StorageBasedLockProvider (local files, s3://), compatible with "
        "Java writers configured with the same provider.",
    ),
    ConfigOption(
        "hoodie.write.lock.filesystem.path",
        "lock_filesystem_path",
        None,
        _str,
        "FileSystemBasedLockProvider: the folder of its file 'lock' (default: the table's "
        ".hoodie folder, as Java's).",
    ),
    ConfigOption(
        "hoodie.write.lock.filesystem.expire",
        "lock_filesystem_expire_min",
        0,
        _non_negative_int,
        "FileSystemBasedLockProvider: minutes after its last modification that a lock expires "
        "and may be taken over; 0: never (a dead writer's lock file must be deleted by hand).",
    ),
    ConfigOption(
        "hoodie.write.lock.storage.validity.timeout.secs",
        "lock_storage_validity_s",
        300,
        _positive(_parse_int),
        "StorageBasedLockProvider: seconds each acquisition or renewal of the lock is valid "
        "for (at least 10, and 10 x the heartbeat poll).",
    ),
    ConfigOption(
        "hoodie.write.lock.storage.heartbeat.poll.secs",
        "lock_storage_heartbeat_s",
        30,
        _positive(_parse_int),
        "StorageBasedLockProvider: seconds between renewals of a held lock.",
    ),
    ConfigOption(
        "hoodie.write.concurrency.mode",
        "concurrency_mode",
        "single_writer",
        _choice(
            "single_writer",
            "optimistic_concurrency_control",
            "non_blocking_concurrency_control",
            upper=False,
        ),
        "single_writer: one writer holds the table's lock for its whole job; "
        "optimistic_concurrency_control: writers run side by side, take the lock only to start "
        "an instant and to commit, and the later of two commits touching one file group fails "
        "with HoodieWriteConflictError; non_blocking_concurrency_control (MERGE_ON_READ, "
        "index.type=BUCKET, table version 8+): writers take the same short lock turns and all "
        "commit, each appending its own log files to the shared file groups, which readers and "
        "compaction merge by the ordering field.",
    ),
    ConfigOption(
        "hoodie.cleaner.policy.failed.writes",
        "failed_writes_clean_policy",
        "EAGER",
        _choice("EAGER", "LAZY"),
        "EAGER: a writer opening the table rolls back every pending write; LAZY (always under "
        "optimistic_concurrency_control): only those whose heartbeat expired or that have none.",
    ),
    ConfigOption(
        "hoodie.client.heartbeat.interval_in_ms",
        "heartbeat_interval_ms",
        60000,
        _positive(_parse_int),
        "How often a writer touches its instant's heartbeat file (.hoodie/.heartbeat/<instant>).",
    ),
    ConfigOption(
        "hoodie.client.heartbeat.tolerable.misses",
        "heartbeat_tolerable_misses",
        2,
        _positive(_parse_int),
        "An instant's heartbeat older than interval x this many misses has expired: its writer "
        "is taken for dead and the next writer rolls the instant back.",
    ),
    ConfigOption(
        "hoodie.write.num.retries.on.conflict.failures",
        "num_retries_on_conflict",
        0,
        _non_negative_int,
        "Under optimistic_concurrency_control: times a write that lost a conflict is retried "
        "against the table as it is then (a single-process write; on Ray, a checkpoint replayed "
        "from its kept input into a new instant).",
    ),
    ConfigOption(
        "hoodie.write.lock.wait_time_ms",
        "lock_wait_ms",
        60000,
        _positive(_parse_int),
        "Under optimistic_concurrency_control: how long a writer waits for the table lock "
        "another writer holds (to start an instant or commit) before it gives up.",
    ),
    ConfigOption(
        "ray.coordinator.num_cpus",
        "coordinator_cpus",
        None,
        _parse_float,
        "CPUs of the coordinator actor.",
    ),
    ConfigOption(
        "ray.assigner.num_cpus",
        "assigner_cpus",
        None,
        _parse_float,
        "CPUs of each bucket-assigner actor.",
    ),
    ConfigOption(
        "ray.writer.num_cpus", "writer_cpus", None, _parse_float, "CPUs of each writer actor."
    ),
    ConfigOption(
        "ray.compactor.num_cpus", "compactor_cpus", None, _parse_float, "CPUs of each compactor."
    ),
    ConfigOption(
        "ray.writer.memory",
        "writer_memory",
        None,
        _size_parser(1),
        "Memory (bytes) reserved per writer actor.",
    ),
    ConfigOption(
        "ray.assigner.memory",
        "assigner_memory",
        None,
        _size_parser(1),
        "Memory (bytes) reserved per assigner actor.",
    ),
    ConfigOption(
        "ray.arrow.memory_pool",
        "arrow_memory_pool",
        None,
        _choice("jemalloc", "mimalloc", "system", upper=False),
        "Arrow's memory pool for pyarrow's calls in the coordinator, assigner and writer "
        "actors (their processes are their own). Unset: the pool ARROW_DEFAULT_MEMORY_POOL "
        "names, else jemalloc where pyarrow has it. Arrow's C++ allocations (the Parquet "
        "writer's buffers) follow ARROW_DEFAULT_MEMORY_POOL, which hoodie_ray's actor "
        "processes on Linux set before pyarrow loads where it is unset: jemalloc in the "
        "other actors' (the write tasks: with mimalloc, 8 chained tasks on 2 cores spent "
        "0.9 s of 3.4 CPU-s in the kernel, against 0.5 of 2.8 with jemalloc), mimalloc in "
        "the coordinator's (a metadata-table compaction of a 2.2M-key record index: "
        "1.21-1.27 CPU-s against 1.42-1.45 with jemalloc).",
    ),
)

_BY_KEY: dict[str, ConfigOption] = {}
for _opt in OPTIONS:
    for _k in (_opt.key, *_opt.aliases):
        assert _k not in _BY_KEY, _k
        _BY_KEY[_k] = _opt


def lookup(key: str) -> ConfigOption:
    """The option for a key or alias; :class:`HoodieOptionError` with a suggestion if unknown."""
    opt = _BY_KEY.get(key)
    if opt is None:
        close = difflib.get_close_matches(key, list(_BY_KEY), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise HoodieOptionError(f"unknown option {key!r}{hint}")
    return opt


def _default(attr: str) -> Any:
    """The registry's default of the option stored in ``attr`` (the only place defaults live)."""
    return _BY_ATTR[attr].default


_BY_ATTR: dict[str, ConfigOption] = {o.attr: o for o in OPTIONS}


def option_key(attr: str) -> str:
    """The canonical key of the option stored in ``attr`` (as Java and table properties name it)."""
    return _BY_ATTR[attr].key


@dataclass(frozen=True)
class WriteConfig:
    """Every option resolved and typed. Build with :func:`resolve_options`."""

    table_name: str | None = _default("table_name")
    database_name: str = _default("database_name")
    record_key_field: str | None = _default("record_key_field")
    partition_path_field: str | None = _default("partition_path_field")
    precombine_field: str | None = _default("precombine_field")
    table_type: str = _default("table_type")
    operation: str = _default("operation")
    partitions_to_delete: str | None = _default("partitions_to_delete")
    hive_style_partitioning: bool = _default("hive_style_partitioning")
    partition_url_encode: bool = _default("partition_url_encode")
    keygen_class: str | None = _default("keygen_class")
    keygen_type: str | None = _default("keygen_type")
    partition_format: str | None = _default("partition_format")
    timebased_timestamp_type: str | None = _default("timebased_timestamp_type")
    timebased_output_format: str | None = _default("timebased_output_format")
    timebased_input_format: str | None = _default("timebased_input_format")
    timebased_output_timezone: str | None = _default("timebased_output_timezone")
    timebased_input_timezone: str | None = _default("timebased_input_timezone")
    timebased_timezone: str | None = _default("timebased_timezone")
    timebased_scalar_unit: str = _default("timebased_scalar_unit")
    write_tasks: int = _default("write_tasks")
    bucket_assign_tasks: int | None = _default("bucket_assign_tasks")
    operator_chaining: bool = _default("operator_chaining")
    task_slots: int = _default("task_slots")
    write_batch_size: int = _default("write_batch_size")
    write_task_max_size: int = _default("write_task_max_size")
    max_inflight_batches: int = _default("max_inflight_batches")
    write_batch_rows: int = _default("write_batch_rows")
    index_type: str = _default("index_type")
    bucket_num: int = _default("bucket_num")
    index_global: bool = _default("index_global")
    index_bootstrap: bool = _default("index_bootstrap")
    cdc_enabled: bool = _default("cdc_enabled")
    cdc_logging_mode: str = _default("cdc_logging_mode")
    changelog_enabled: bool = _default("changelog_enabled")
    partial_updates: bool = _default("partial_updates")
    partial_update_mode: str = _default("partial_update_mode")
    partial_update_unavailable_value: str = _default("partial_update_unavailable_value")
    small_file_limit: int = _default("small_file_limit")
    parquet_max_file_size: int = _default("parquet_max_file_size")
    record_size_estimate: int = _default("record_size_estimate")
    record_size_estimation_threshold: float = _default("record_size_estimation_threshold")
    logfile_max_size: int = _default("logfile_max_size")
    log_block_format: str = _default("log_block_format")
    parquet_codec: str = _default("parquet_codec")
    parquet_bloom_filter_enabled: bool = _default("parquet_bloom_filter_enabled")
    bloom_num_entries: int = _default("bloom_num_entries")
    bloom_fpp: float = _default("bloom_fpp")
    bloom_filter_type: str = _default("bloom_filter_type")
    bloom_max_entries: int = _default("bloom_max_entries")
    compaction_schedule: bool = _default("compaction_schedule")
    compaction_async: bool = _default("compaction_async")
    compaction_trigger: str = _default("compaction_trigger")
    compaction_delta_commits: int = _default("compaction_delta_commits")
    clustering_inline: bool = _default("clustering_inline")
    clustering_inline_max_commits: int = _default("clustering_inline_max_commits")
    clustering_schedule: bool = _default("clustering_schedule")
    clustering_async: bool = _default("clustering_async")
    clustering_async_max_commits: int = _default("clustering_async_max_commits")
    clustering_small_file_limit: int = _default("clustering_small_file_limit")
    clustering_target_file_max_bytes: int = _default("clustering_target_file_max_bytes")
    clustering_max_bytes_per_group: int = _default("clustering_max_bytes_per_group")
    clustering_max_num_groups: int = _default("clustering_max_num_groups")
    clustering_sort_columns: str | None = _default("clustering_sort_columns")
    layout_optimize_strategy: str = _default("layout_optimize_strategy")
    compaction_delta_seconds: int = _default("compaction_delta_seconds")
    compaction_tasks: int = _default("compaction_tasks")
    clean_enabled: bool = _default("clean_enabled")
    clean_retain_commits: int = _default("clean_retain_commits")
    keep_min_commits: int = _default("keep_min_commits")
    keep_max_commits: int = _default("keep_max_commits")
    archive_automatic: bool = _default("archive_automatic")
    table_services_enabled: bool = _default("table_services_enabled")
    timeline_compaction_batch_size: int = _default("timeline_compaction_batch_size")
    allow_non_empty_dir: bool = _default("allow_non_empty_dir")
    schema_auto_evolution: bool = _default("schema_auto_evolution")
    set_null_for_missing_columns: bool = _default("set_null_for_missing_columns")
    warm_idle_s: float = _default("warm_idle_s")
    write_table_version: str = _default("write_table_version")
    metadata_enable: bool | None = _default("metadata_enable")
    metadata_record_index_enable: bool = _default("metadata_record_index_enable")
    metadata_column_stats_enable: bool = _default("metadata_column_stats_enable")
    metadata_partition_stats_enable: bool = _default("metadata_partition_stats_enable")
    metadata_bloom_filter_enable: bool = _default("metadata_bloom_filter_enable")
    metadata_compact_max_delta_commits: int = _default("metadata_compact_max_delta_commits")
    metadata_compact_index_min_log_ratio: float = _default("metadata_compact_index_min_log_ratio")
    metadata_compact_async: bool = _default("metadata_compact_async")
    metadata_compact_index_max_delta_commits: int = _default(
        "metadata_compact_index_max_delta_commits"
    )
    metadata_clean_retain_commits: int = _default("metadata_clean_retain_commits")
    lock_heartbeat_ms: int = _default("lock_heartbeat_ms")
    lock_expire_ms: int = _default("lock_expire_ms")
    lock_provider: str = _default("lock_provider")
    lock_filesystem_path: str | None = _default("lock_filesystem_path")
    lock_filesystem_expire_min: int = _default("lock_filesystem_expire_min")
    lock_storage_validity_s: int = _default("lock_storage_validity_s")
    lock_storage_heartbeat_s: int = _default("lock_storage_heartbeat_s")
    concurrency_mode: str = _default("concurrency_mode")
    failed_writes_clean_policy: str = _default("failed_writes_clean_policy")
    heartbeat_interval_ms: int = _default("heartbeat_interval_ms")
    heartbeat_tolerable_misses: int = _default("heartbeat_tolerable_misses")
    num_retries_on_conflict: int = _default("num_retries_on_conflict")
    lock_wait_ms: int = _default("lock_wait_ms")
    coordinator_cpus: float | None = _default("coordinator_cpus")
    assigner_cpus: float | None = _default("assigner_cpus")
    writer_cpus: float | None = None
    compactor_cpus: float | None = None
    writer_memory: int | None = _default("writer_memory")
    assigner_memory: int | None = _default("assigner_memory")
    arrow_memory_pool: str | None = _default("arrow_memory_pool")
    explicit: frozenset[str] = field(default_factory=frozenset)
    """Canonical keys the user set (as opposed to defaults)."""

    # -- derived -------------------------------------------------------------------------------
    @property
    def assign_tasks(self) -> int:
        return self.bucket_assign_tasks or self.write_tasks

    @property
    def chained_tasks(self) -> bool:
        """Assigner task i and writer task i run in one actor (``pipeline.operator-chaining``
        with as many assigners as writers)."""
        return self.operator_chaining and self.assign_tasks == self.write_tasks

    @property
    def record_key_fields(self) -> list[str]:
        return _split(self.record_key_field)

    @property
    def partition_fields(self) -> list[str]:
        return _split(self.partition_path_field)

    @property
    def table_version(self) -> int:
        return int(self.write_table_version)

    @property
    def occ(self) -> bool:
        """Several writers on the table (Java's ``supportsMultiWriter``): optimistic or
        non-blocking concurrency control. Both take the table lock for short turns only, keep
        instant heartbeats and roll back failed writes lazily; :attr:`nbcc` tells them apart
        where they differ (the conflict check)."""
        return self.concurrency_mode in (
            "optimistic_concurrency_control",
            "non_blocking_concurrency_control",
        )

    @property
    def nbcc(self) -> bool:
        """Non-blocking concurrency control: writers of one file group all commit."""
        return self.concurrency_mode == "non_blocking_concurrency_control"

    @property
    def replaces(self) -> bool:
        """The operation commits a replacecommit (insert_overwrite, insert_overwrite_table,
        delete_partition): its new file groups replace every file group of the partitions it
        overwrites."""
        return self.operation in REPLACE_OPERATIONS

    @property
    def keys_global(self) -> bool:
        """A record key names one record in the whole table (the global index); with
        ``index.global.enabled=false`` or the bucket index (a bucket per partition), one in
        each partition."""
        return self.index_global and self.index_type != "BUCKET"

    @property
    def inserts_only(self) -> bool:
        """Rows are inserted as they come (no index lookup, no precombine): insert and the
        overwrites; bulk_insert also looks up nothing but folds a key's rows."""
        return self.operation in ("insert", "insert_overwrite", "insert_overwrite_table")

    @property
    def schedules_clustering(self) -> bool:
        """A writer schedules clustering plans after its commits (``clustering.schedule.enabled``,
        implied by ``clustering.async.enabled`` unless set false)."""
        if self.is_set("clustering_schedule"):
            return self.clustering_schedule
        return self.clustering_async

    @property
    def lazy_failed_writes(self) -> bool:
        """Roll back only pending writes whose heartbeat expired (always under OCC)."""
        return self.occ or self.failed_writes_clean_policy == "LAZY"

    def is_set(self, attr: str) -> bool:
        return attr in self.explicit

    def replace(self, **changes: Any) -> WriteConfig:
        import dataclasses

        explicit = set(self.explicit) | set(changes)
        return dataclasses.replace(self, explicit=frozenset(explicit), **changes)

    def as_options(self) -> dict[str, str]:
        """The explicitly set options back as a ``dict[str, str]`` with canonical keys."""
        out: dict[str, str] = {}
        for opt in OPTIONS:
            if opt.attr in self.explicit:
                v = getattr(self, opt.attr)
                out[opt.key] = str(v).lower() if isinstance(v, bool) else str(v)
        return out


_ATTRS = {f.name for f in fields(WriteConfig)}
assert all(o.attr in _ATTRS for o in OPTIONS)


def without_option(options: Mapping[str, Any], attr: str) -> dict[str, Any]:
    """``options`` less every spelling of the option stored in ``attr``."""
    return {k: v for k, v in options.items() if lookup(k).attr != attr}


def _split(v: str | None) -> list[str]:
    return [p.strip() for p in v.split(",") if p.strip()] if v else []


def resolve_options(options: Mapping[str, Any] | WriteConfig | None) -> WriteConfig:
    """Resolve user options (any accepted spelling) into one frozen :class:`WriteConfig`.

    Raises:
        HoodieOptionError: an unknown key (with a close-match suggestion), an invalid value,
            or two spellings of one option with different values.
    """
    if options is None:
        return WriteConfig()
    if isinstance(options, WriteConfig):
        return options
    if not isinstance(options, Mapping):
        raise HoodieOptionError(
            f"options must be a dict of str to str, got {type(options).__name__}"
        )
    values: dict[str, Any] = {}
    seen_from: dict[str, str] = {}
    for key, raw in options.items():
        if not isinstance(key, str):
            raise HoodieOptionError(f"option keys must be strings, got {key!r}")
        opt = lookup(key)
        if raw is None:
            continue
        value = opt.parse(key, raw if isinstance(raw, str) else _to_str(raw))
        if opt.attr in values and values[opt.attr] != value:
            raise HoodieOptionError(
                f"option {key}={raw!r} conflicts with {seen_from[opt.attr]} (same option)"
            )
        values[opt.attr] = value
        seen_from[opt.attr] = key
    wc = WriteConfig(**values, explicit=frozenset(values))
    _check_retention(wc, seen_from)
    _check_concurrency(wc, seen_from)
    _check_lock(wc, seen_from)
    _check_async_clustering(wc, seen_from)
    return wc


def _check_async_clustering(wc: WriteConfig, given: Mapping[str, str]) -> None:
    """Scheduled and asynchronous clustering run beside inserts only, as Flink runs them in
    append mode: an update to a file group under clustering would be refused (Hudi's reject
    update strategy), so an upserting stream would fail its checkpoints. hoodie_ray runs the
    plans a writer schedules in that writer, so the two options go together."""

    def name(attr: str) -> str:
        return given.get(attr) or _BY_ATTR[attr].key

    if wc.clustering_inline and wc.index_type == "BUCKET":
        raise HoodieOptionError(
            f"option {name('clustering_inline')}=true cannot be used with "
            f"{name('index_type')}=BUCKET: a key's file group is fixed by its bucket (Hudi "
            "does not cluster the simple bucket index)"
        )
    if (
        wc.clustering_inline
        and not wc.clustering_async
        and wc.is_set("clustering_async_max_commits")
    ):
        raise HoodieOptionError(
            f"option {name('clustering_async_max_commits')} sets the trigger of async "
            "clustering (Flink's clustering.delta_commits); inline clustering's is "
            f"{_BY_ATTR['clustering_inline_max_commits'].key}"
        )
    if not (wc.clustering_async or wc.clustering_schedule):
        return
    if wc.clustering_async != wc.schedules_clustering or not wc.clustering_async:
        raise HoodieOptionError(
            f"option {name('clustering_schedule')}={str(wc.clustering_schedule).lower()} "
            f"with {name('clustering_async')}={str(wc.clustering_async).lower()}: a writer "
            "runs the clustering plans it schedules, in the background; set both (or "
            f"{name('clustering_async')}=true alone)"
        )
    if wc.occ:
        raise HoodieOptionError(
            f"option {name('clustering_async')}=true needs a single writer, not "
            f"{name('concurrency_mode')}={wc.concurrency_mode}: another writer's clustering "
            "would take a running one for dead and roll it back"
        )
    if wc.index_type == "BUCKET":
        raise HoodieOptionError(
            f"option {name('clustering_async')}=true cannot be used with "
            f"{name('index_type')}=BUCKET: a key's file group is fixed by its bucket (Hudi "
            "does not cluster the simple bucket index)"
        )
    if wc.operation != "insert":
        raise HoodieOptionError(
            f"option {name('clustering_async')}=true needs {name('operation')}=insert (Flink's "
            f"append mode), not {wc.operation}: updates to file groups under clustering are "
            "refused; cluster an upserted table between jobs (hr.cluster) or inline "
            "(hoodie.clustering.inline, single process)"
        )


def _check_retention(wc: WriteConfig, given: Mapping[str, str]) -> None:
    """Archival may never reach what cleaning keeps, and needs room between its bounds (Hudi's
    ``HoodieArchivalConfig`` / Flink's ``archive.*`` checks)."""

    def name(attr: str) -> str:
        return given.get(attr) or _BY_ATTR[attr].key

    if wc.keep_min_commits >= wc.keep_max_commits:
        raise HoodieOptionError(
            f"option {name('keep_min_commits')}={wc.keep_min_commits} must be less than "
            f"{name('keep_max_commits')}={wc.keep_max_commits}"
        )
    if wc.clean_enabled and wc.keep_min_commits <= wc.clean_retain_commits:
        raise HoodieOptionError(
            f"option {name('keep_min_commits')}={wc.keep_min_commits} must be greater than "
            f"{name('clean_retain_commits')}={wc.clean_retain_commits}: archiving instants the "
            "cleaner still retains would break incremental and time-travel reads of them"
        )


def _check_concurrency(wc: WriteConfig, given: Mapping[str, str]) -> None:
    """Several writers need the lazy failed-writes policy (Hudi infers LAZY under OCC): an
    eager one would roll back a live writer's instant."""
    if (
        wc.occ
        and wc.failed_writes_clean_policy == "EAGER"
        and wc.is_set("failed_writes_clean_policy")
    ):
        key = given.get("failed_writes_clean_policy") or _BY_ATTR["failed_writes_clean_policy"].key
        raise HoodieOptionError(
            f"option {key}=EAGER cannot be used with hoodie.write.concurrency.mode="
            f"{wc.concurrency_mode}: it would roll back other writers' live instants "
            "(use LAZY)"
        )
    if wc.nbcc:
        reason = nbcc_refusal(
            wc.table_type if wc.is_set("table_type") else None,
            wc.table_version if wc.is_set("write_table_version") else None,
            wc.index_type if wc.is_set("index_type") else None,
        )
        if reason:
            key = given.get("concurrency_mode") or _BY_ATTR["concurrency_mode"].key
            raise HoodieOptionError(f"option {key}=non_blocking_concurrency_control {reason}")
        if wc.replaces:
            key = given.get("operation") or _BY_ATTR["operation"].key
            raise HoodieOptionError(
                f"option {key}={wc.operation} cannot be used with non-blocking concurrency "
                "control: a bucket's file group is fixed there, and an overwrite writes new "
                "ones (as Java refuses it); write it with "
                "optimistic_concurrency_control"
            )


def nbcc_refusal(
    table_type: str | None, table_version: int | None, index_type: str | None
) -> str | None:
    """Why non-blocking concurrency control cannot write a table of this type, version and
    index (None: it can; a None argument is not checked). As Java's ``HoodieWriteConfig``
    and ``CommonClientUtils.validateTableVersion``: MERGE_ON_READ with the simple bucket index,
    table version 8+ (logs sliced by completion time)."""
    if table_type is not None and table_type != "MERGE_ON_READ":
        return (
            f"needs a MERGE_ON_READ table, not {table_type}: writers of one file group must "
            "each append their own log files"
        )
    if index_type is not None and index_type != "BUCKET":
        return (
            f"needs index.type=BUCKET, not {index_type}: every writer must route a key to the "
            "same file group"
        )
    if table_version is not None and table_version < 8:
        return (
            f"needs table version 8 or later, not {table_version}: logs of concurrent writers "
            "join file slices by completion time"
        )
    return None


def _check_lock(wc: WriteConfig, given: Mapping[str, str]) -> None:
    """The storage-based lock's bounds, as Hudi's ``StorageBasedLockConfig`` checks them: a
    lock valid long enough to survive missed renewals."""

    def name(attr: str) -> str:
        return given.get(attr) or _BY_ATTR[attr].key

    validity, poll = wc.lock_storage_validity_s, wc.lock_storage_heartbeat_s
    if validity < 10:
        raise HoodieOptionError(
            f"option {name('lock_storage_validity_s')}={validity} must be at least 10 seconds"
        )
    if validity < 10 * poll:
        raise HoodieOptionError(
            f"option {name('lock_storage_validity_s')}={validity} must be at least 10 x "
            f"{name('lock_storage_heartbeat_s')}={poll}"
        )


def _to_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def describe_options() -> list[dict[str, str]]:
    """The registry as rows (key, aliases, default, doc), for docs and the CLI."""
    return [
        {"key": o.key, "aliases": ", ".join(o.aliases), "default": str(o.default), "doc": o.doc}
        for o in OPTIONS
    ]
