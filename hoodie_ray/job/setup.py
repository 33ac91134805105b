"""Table setup for a write job: create the table, check options against it, fix the context.

The job layer's first step (Flink's ``StreamWriteOperatorCoordinator`` start and
``HoodieTableFactory``): everything decided once per job and handed, resolved, to every task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from hoodie_ray.avro.schema import arrow_to_avro_schema, avro_to_arrow_schema
from hoodie_ray.config.options import WriteConfig, nbcc_refusal, option_key
from hoodie_ray.config.table_config import (
    BUCKET_NUM_PROPERTY,
    CDC_ENABLED_KEY,
    CDC_MODE_KEY,
    KEYGEN_TYPE_BY_CLASS,
    PARTIAL_UPDATE_MODE_KEY,
    PROPERTIES_FILE,
    HoodieTableConfig,
    new_table_props,
    partial_update_props,
)
from hoodie_ray.exceptions import (
    HoodieIOError,
    HoodieOptionError,
    HoodiePathError,
    HoodieSchemaError,
    HoodieTableNotFoundError,
    HoodieUnsupportedError,
)
from hoodie_ray.file_group.view import FileSlice
from hoodie_ray.keygen import KeyGenerator, TimestampFormat, choose_key_generator
from hoodie_ray.metadata.layout import METADATA_TABLE_PATH
from hoodie_ray.storage import Storage
from hoodie_ray.table import HoodieTable
from hoodie_ray.write.context import WriteContext
from hoodie_ray.write.lock import LOCK_PATH
from hoodie_ray.write.records import normalise_schema


@dataclass(frozen=True)
class TableSetup:
    """What every task of a write job needs to know about the table (picklable)."""

    context: WriteContext
    keygen: KeyGenerator
    schema_fixed: bool  # False until the first commit fixes the data schema

    @property
    def table_config(self) -> HoodieTableConfig:
        return self.context.table_config


def table_exists(storage: Storage) -> bool:
    return storage.exists(PROPERTIES_FILE)


#: What a table's first write leaves in ``.hoodie`` before its first instant: the table's
#: properties (and their backup), hoodie_ray's writer lock and the metadata table.
_UNBORN_FILES = (PROPERTIES_FILE, PROPERTIES_FILE + ".backup", LOCK_PATH)


#: A completed rollback's timeline files (either layout): what rolling back a first write
#: that wrote nothing leaves (an empty Dataset through the sink).
_ROLLBACK_FILE = re.compile(r"(?:^|/)\d+(?:_\d+)?\.rollback(?:\.requested|\.inflight)?$")


def remove_unborn_table(storage: Storage) -> bool:
    """Remove the ``.hoodie`` folder of a table whose first write was refused before it
    opened an instant (a bad schema, a null key), or was rolled back having written nothing:
    the path is left as the user gave it, not holding a table with no commits. Anything else
    there (another instant, a data or metadata table file, another engine's auxiliary file)
    keeps it. The caller holds the table's lock and created the table itself. True when it
    was removed."""
    if not storage.exists(".hoodie"):
        return False
    if any(entry.name != ".hoodie" for entry in storage.list_dir("")):
        return False
    for name in storage.walk_files(".hoodie"):
        # the metadata table made with the table (its bootstrap of no files) goes with it
        if (
            name not in _UNBORN_FILES
            and not name.startswith(METADATA_TABLE_PATH + "/")
            and not _ROLLBACK_FILE.search(name)
        ):
            return False
    storage.delete_dir(".hoodie")
    return True


@dataclass(frozen=True)
class _KeyLayout:
    """What a key generator is built from besides its type: the record key and partition
    fields, and how partition paths are written (Hudi's key generator properties)."""

    record_key_fields: list[str]
    partition_fields: list[str]
    hive_style: bool
    url_encode: bool

    @classmethod
    def of_table(cls, cfg: HoodieTableConfig) -> _KeyLayout:
        return cls(cfg.record_key_fields, cfg.partition_fields, cfg.hive_style, cfg.url_encode)

    @classmethod
    def of_options(cls, wc: WriteConfig) -> _KeyLayout:
        return cls(
            wc.record_key_fields,
            wc.partition_fields,
            wc.hive_style_partitioning,
            wc.partition_url_encode,
        )

    def key_generator(
        self, schema: pa.Schema, keygen_type: str | None, ts: TimestampFormat | None
    ) -> KeyGenerator:
        return choose_key_generator(
            schema,
            self.record_key_fields,
            self.partition_fields,
            hive_style=self.hive_style,
            url_encode=self.url_encode,
            keygen_type=keygen_type,
            timestamp=ts,
        )


def keygen_for(table_config: HoodieTableConfig, wc: WriteConfig, schema: pa.Schema) -> KeyGenerator:
    """The key generator recorded in the table config (written by us or by Java)."""
    kg_type = table_config.keygen_type
    if kg_type in (None, "UNKNOWN"):
        kg_type = None
    if kg_type == "CUSTOM":
        raise HoodieUnsupportedError("CustomKeyGenerator tables are not supported for writes")
    ts = _table_timestamp_format(table_config, wc) if kg_type == "TIMESTAMP" else None
    return _KeyLayout.of_table(table_config).key_generator(schema, kg_type, ts)


#: Java's timestamp key generator properties (``timezone`` is both zones, over the others).
TIMEBASED_TIMEZONE = option_key("timebased_timezone")
TIMEBASED_INPUT_TIMEZONE = option_key("timebased_input_timezone")
TIMEBASED_OUTPUT_TIMEZONE = option_key("timebased_output_timezone")
_TIMEBASED_ZONE_KEYS = (TIMEBASED_TIMEZONE, TIMEBASED_INPUT_TIMEZONE, TIMEBASED_OUTPUT_TIMEZONE)
_TIMEBASED_OUTPUT_FORMAT = option_key("timebased_output_format")
_TIMEBASED_PROPS = {
    attr: option_key(attr)
    for attr in ("timebased_timestamp_type", "timebased_input_format", "timebased_scalar_unit")
}
_UTC_NAMES = frozenset(("UTC", "GMT", "Z", "UCT", "ETC/UTC", "ETC/GMT", "ETC/UCT", "ZULU"))


def timebased_zones(props: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The (input, output) zones Java's ``HoodieDateTimeParser`` takes from these properties:
    ``timezone``, where present, is both; else ``input.timezone`` and ``output.timezone``. An
    empty or absent one is None: values without an offset are read in UTC (Java's JVM
    default), and each value is printed in the zone it was read in (see TimestampFormat)."""

    def zone(key: str) -> str | None:
        value = props.get(TIMEBASED_TIMEZONE if TIMEBASED_TIMEZONE in props else key)
        return (value or "").strip() or None

    return zone(TIMEBASED_INPUT_TIMEZONE), zone(TIMEBASED_OUTPUT_TIMEZONE)


def _given_zones(wc: WriteConfig) -> dict[str, str]:
    """The zone properties this write's options set (an empty value sets none)."""
    given = wc.as_options()
    return {k: given[k] for k in _TIMEBASED_ZONE_KEYS if given.get(k, "").strip()}


def _records_timebased_keygen(props: Mapping[str, str]) -> bool:
    """A table made by hoodie_ray, or by Java since it keeps these properties, records its
    timestamp key generator: a zone property it lacks was not set. An older Java table's
    writers pass them with every write."""
    return _TIMEBASED_OUTPUT_FORMAT in props


def _same_zones(a: tuple[str | None, str | None], b: tuple[str | None, str | None]) -> bool:
    """Whether two (input, output) zone pairs partition every value alike: an unset input
    zone reads values without an offset as UTC, so with an output zone set it is UTC (unset
    output zones differ: each value is printed in the zone it was read in)."""

    def norm(zones: tuple[str | None, str | None]) -> list[str | None]:
        out = ["UTC" if z is not None and z.upper() in _UTC_NAMES else z for z in zones]
        if out[1] is not None and out[0] is None:
            out[0] = "UTC"
        return out

    return norm(a) == norm(b)


def _table_timestamp_format(table_config: HoodieTableConfig, wc: WriteConfig) -> TimestampFormat:
    """A timestamp key generator's settings: the table's properties, else the options (the
    zones of a table that records its key generator are its own only, as every writer since
    its first has partitioned by them: :func:`check_options_match_table` refuses others)."""
    props = table_config.props
    fmt = props.get(_TIMEBASED_OUTPUT_FORMAT) or wc.timebased_output_format
    if not fmt:
        raise HoodieOptionError(f"timestamp key generator without {_TIMEBASED_OUTPUT_FORMAT}")
    if _records_timebased_keygen(props):
        input_zone, output_zone = timebased_zones(props)
    else:  # Java's writers: their options over the table's properties
        input_zone, output_zone = timebased_zones({**props, **_given_zones(wc)})
    keys = _TIMEBASED_PROPS
    return TimestampFormat(
        output_format=fmt,
        timestamp_type=props.get(keys["timebased_timestamp_type"]) or wc.timebased_timestamp_type,
        input_format=props.get(keys["timebased_input_format"]) or wc.timebased_input_format,
        timezone=output_zone,
        scalar_unit=props.get(keys["timebased_scalar_unit"]) or wc.timebased_scalar_unit,
        input_timezone=input_zone,
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
    input_zone, output_zone = timebased_zones(_given_zones(wc))
    if wc.timebased_output_format is None:
        output_zone = output_zone or "UTC"  # Flink's output.timezone
    return TimestampFormat(
        output_format=fmt,
        timestamp_type=wc.timebased_timestamp_type,
        input_format=wc.timebased_input_format,
        timezone=output_zone,
        scalar_unit=wc.timebased_scalar_unit,
        input_timezone=input_zone,
    )


def _timebased_zone_props(wc: WriteConfig, ts: TimestampFormat) -> dict[str, str]:
    """The zone properties a new table keeps: those its options set, as Java keeps them
    (``HoodieTableConfig.PERSISTED_CONFIG_LIST``), so that every later writer, Java's too,
    reads the same zones; Flink's UTC output where ``write.partition.format`` set none."""
    props = _given_zones(wc)
    if ts.timezone is not None and timebased_zones(props)[1] is None:
        props[TIMEBASED_OUTPUT_TIMEZONE] = ts.timezone
    return props


def check_new_table_location(storage: Storage, wc: WriteConfig) -> None:
    """Refuse to create a table where there should be none: at a path that is a file (or
    under one), or in a directory that already holds other files unless
    ``write.allow_non_empty_dir`` says so.

    Raises:
        HoodiePathError: the path is a file, or cannot be a directory.
        HoodieTableNotFoundError: the directory holds files but no table.
    """
    where = storage.base_uri
    try:
        # .hoodie/ alone: another writer is creating the table right now
        entries = [e for e in storage.list_dir("") if e.name != ".hoodie"]
    except HoodieIOError as e:
        raise HoodiePathError(f"cannot create a table at {where}: {e}") from None
    if not entries:
        try:
            storage.makedirs("")
        except (NotADirectoryError, FileExistsError):
            what = "it is a file" if storage.exists("") else "a part of the path is a file"
            raise HoodiePathError(
                f"cannot create a table at {where}: {what}, not a directory"
            ) from None
    if entries and not wc.allow_non_empty_dir:
        shown = ", ".join(sorted(e.name for e in entries)[:5])
        more = f" and {len(entries) - 5} more" if len(entries) > 5 else ""
        raise HoodieTableNotFoundError(
            f"{where} holds files ({shown}{more}) but no Hudi table (.hoodie/): refusing to "
            "create a table among them; check the path, or set write.allow_non_empty_dir=true "
            "to create the table there anyway"
        )


def create_table(storage: Storage, wc: WriteConfig, data_schema: pa.Schema) -> HoodieTableConfig:
    """Create ``.hoodie/`` with the property set of a new table (spec §1.4).

    Raises:
        HoodiePathError / HoodieTableNotFoundError: see :func:`check_new_table_location`.
    """
    cfg = _new_table_config(wc, data_schema)
    check_new_table_location(storage, wc)
    try:
        storage.makedirs(".hoodie")
    except (NotADirectoryError, FileExistsError):
        raise HoodiePathError(
            f"cannot create a table at {storage.base_uri}: a part of the path is a file"
        ) from None
    if cfg.timeline_layout_version >= 2:
        storage.makedirs(cfg.timeline_path)
    if not storage.create_new(PROPERTIES_FILE, cfg.to_properties_text().encode("utf-8")):
        return HoodieTableConfig.load(storage)  # another process created it first
    return cfg


def _new_table_config(wc: WriteConfig, data_schema: pa.Schema) -> HoodieTableConfig:
    """The table config a new table written with ``wc`` and ``data_schema`` starts with
    (nothing written): its key generator chosen, its options checked against the schema."""
    if not wc.table_name:
        raise HoodieOptionError("option hoodie.table.name is required to create a table")
    if not wc.record_key_fields:
        raise HoodieOptionError(
            "option hoodie.datasource.write.recordkey.field is required to create a table"
        )
    schema = normalise_schema(data_schema)
    ts = _timestamp_format(wc, schema)
    kg = _KeyLayout.of_options(wc).key_generator(schema, _keygen_type_option(wc), ts)
    if wc.precombine_field and wc.precombine_field not in schema.names:
        raise HoodieSchemaError(f"Field {wc.precombine_field} does not exist (precombine field)")
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
        extra=_key_and_index_props(wc, ts),
    )
    return HoodieTableConfig(props)


def _keygen_type_option(wc: WriteConfig) -> str | None:
    """The key generator type the options ask for (its class, else its type), or None."""
    if not wc.keygen_class:
        return wc.keygen_type
    keygen_type = KEYGEN_TYPE_BY_CLASS.get(wc.keygen_class)
    if keygen_type is None or keygen_type == "CUSTOM":
        raise HoodieOptionError(
            f"option hoodie.datasource.write.keygenerator.class={wc.keygen_class} is not supported"
        )
    return keygen_type


def _key_and_index_props(wc: WriteConfig, ts: TimestampFormat | None) -> dict[str, str]:
    """A new table's timestamp key generator, bucket index and CDC properties."""
    extra = {}
    if ts is not None:
        extra = {_TIMEBASED_OUTPUT_FORMAT: ts.output_format, **_timebased_zone_props(wc, ts)}
        if ts.timestamp_type:
            extra[_TIMEBASED_PROPS["timebased_timestamp_type"]] = ts.timestamp_type
        if ts.input_format:
            extra[_TIMEBASED_PROPS["timebased_input_format"]] = ts.input_format
    if wc.index_type == "BUCKET":
        extra[BUCKET_NUM_PROPERTY] = str(wc.bucket_num)
    if wc.cdc_enabled:
        extra[CDC_ENABLED_KEY] = "true"
        extra[CDC_MODE_KEY] = wc.cdc_logging_mode
    if wc.partial_update_mode != "NONE":
        try:
            extra.update(
                partial_update_props(
                    wc.table_version, wc.partial_update_mode, wc.partial_update_unavailable_value
                )
            )
        except HoodieUnsupportedError as e:
            raise HoodieOptionError(f"option {PARTIAL_UPDATE_MODE_KEY}: {e}") from None
    return extra


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
    if differs("cdc_enabled", cfg.cdc_enabled, wc.cdc_enabled):
        problems.append(f"{CDC_ENABLED_KEY}={wc.cdc_enabled} != table's {cfg.cdc_enabled}")
    partial = cfg.partial_update_mode
    if differs("partial_update_mode", partial, wc.partial_update_mode):
        problems.append(f"{PARTIAL_UPDATE_MODE_KEY}={wc.partial_update_mode} != table's {partial}")
    marker = cfg.unavailable_value
    if marker is not None and differs(
        "partial_update_unavailable_value", marker, wc.partial_update_unavailable_value
    ):
        problems.append(
            f"hoodie.write.partial.update.unavailable.value={wc.partial_update_unavailable_value}"
            f" != table's {marker}"
        )
    if cfg.cdc_enabled and differs("cdc_logging_mode", cfg.cdc_logging_mode, wc.cdc_logging_mode):
        problems.append(f"{CDC_MODE_KEY}={wc.cdc_logging_mode} != table's {cfg.cdc_logging_mode}")
    if wc.is_set("table_name") and wc.table_name != cfg.name:
        problems.append(f"table name {wc.table_name} != table's {cfg.name}")
    table_keygen = cfg.keygen_type
    if table_keygen not in (None, "UNKNOWN") and (wc.keygen_class or wc.keygen_type):
        given = KEYGEN_TYPE_BY_CLASS.get(wc.keygen_class) if wc.keygen_class else wc.keygen_type
        if given is not None and given != table_keygen:
            # as Java refuses: the table's key generator makes its keys and partition paths
            problems.append(
                f"key generator {wc.keygen_class or wc.keygen_type} != table's {table_keygen}"
            )
    zones = _timebased_zones_problem(cfg, wc)
    if zones:
        problems.append(zones)
    if problems:
        raise HoodieOptionError("options conflict with the existing table: " + "; ".join(problems))


def _timebased_zones_problem(cfg: HoodieTableConfig, wc: WriteConfig) -> str | None:
    """Zone options that would change the zones a timestamp key generator table partitions
    by (the same value would go to another partition than earlier writes put it in). Java
    refuses a property that differs from the table's, and takes one the table lacks; here
    what counts is the zones the options and the table's properties give together."""
    given = _given_zones(wc)
    props = cfg.props
    if not given or cfg.keygen_type != "TIMESTAMP" or not _records_timebased_keygen(props):
        return None
    table_zones = timebased_zones(props)
    zones = timebased_zones({**props, **given})
    if _same_zones(zones, table_zones):
        return None
    shown = ", ".join(f"{k}={v}" for k, v in given.items())
    kept = {k: props[k] for k in _TIMEBASED_ZONE_KEYS if k in props} or "none"
    return (
        f"{shown} makes the timestamp key generator's (input, output) zones {zones}, not "
        f"the table's {table_zones} (its zone properties: {kept}; None: UTC in, each value "
        "out in the zone it was read in); the same value would go to another partition"
    )


def check_changelog_mode(wc: WriteConfig, cfg: HoodieTableConfig | None, path: str) -> None:
    """Changelog mode keeps each change in merge-on-read logs: a copy-on-write table (its
    own type, or the options' for a table about to be created) merges every write into its
    base files, so the option is refused there rather than silently doing nothing."""
    if not wc.changelog_enabled:
        return
    table_type = cfg.table_type if cfg is not None else wc.table_type
    if table_type != "MERGE_ON_READ":
        raise HoodieOptionError(
            f"changelog.enabled=true needs a MERGE_ON_READ table; {path} is {table_type}, "
            "whose writes merge every change into the base files (hoodie.table.cdc.enabled "
            "keeps the changes of a copy-on-write table)"
        )


def check_partial_updates(wc: WriteConfig, cfg: HoodieTableConfig | None, path: str) -> None:
    """``write.partial.updates`` where Spark's MERGE INTO writes partial updates
    (``MergeIntoHoodieTableCommand.isPartialUpdateActionForMOR``): upserts, no global index on
    a partitioned table (a key moving partition needs its whole record), no table partial update mode (its own
    rule says what a missing value is), not with changelog mode; merge-on-read needs table
    version 8+ (``CommonClientUtils.validateTableVersion``: no ``IS_PARTIAL`` blocks before)."""
    if not wc.partial_updates:
        return
    table_type = cfg.table_type if cfg is not None else wc.table_type
    version = cfg.table_version if cfg is not None else wc.table_version
    reason = None
    if wc.operation not in ("upsert", "delete"):
        reason = f"updates existing keys: operation {wc.operation} is not an upsert"
    elif wc.index_global and (cfg.partition_fields if cfg is not None else wc.partition_fields):
        reason = (
            "needs index.global.enabled=false on a partitioned table (a key moving partition "
            "would need its whole record)"
        )
    elif wc.changelog_enabled:
        reason = "does not go with changelog.enabled"
    elif cfg is not None and cfg.partial_update:
        reason = (
            f"does not go with the table's {PARTIAL_UPDATE_MODE_KEY}={cfg.partial_update_mode}, "
            "whose rule already says which values an update keeps"
        )
    elif wc.partial_update_mode != "NONE":
        reason = f"does not go with {PARTIAL_UPDATE_MODE_KEY}={wc.partial_update_mode}"
    elif table_type == "MERGE_ON_READ" and version < 8:
        reason = (
            f"needs table version 8+ on MERGE_ON_READ ({path} is version {version}: its logs "
            "have no partial blocks)"
        )
    if reason:
        raise HoodieOptionError(f"{path}: option write.partial.updates=true {reason}")


def check_concurrency_mode(wc: WriteConfig, cfg: HoodieTableConfig | None, path: str) -> None:
    """Non-blocking concurrency control writes only MERGE_ON_READ tables of version 8+ with
    the bucket index: the table's own (``cfg``), or for a table about to be created the
    options'. Raises :class:`HoodieOptionError` naming the option and the reason, before
    anything is written."""
    if not wc.nbcc:
        return
    if cfg is None:
        reason = nbcc_refusal(wc.table_type, wc.table_version, wc.index_type)
    else:
        bucket = cfg.props.get(BUCKET_NUM_PROPERTY) is not None
        reason = nbcc_refusal(
            cfg.table_type, cfg.table_version, "BUCKET" if bucket else wc.index_type
        )
    if reason:
        raise HoodieOptionError(
            f"{path}: option hoodie.write.concurrency.mode=non_blocking_concurrency_control "
            + reason
        )


def fixed_schema_fields(cfg: HoodieTableConfig) -> list[str]:
    """The fields whose type schema evolution never changes: the record key, partition and
    ordering fields."""
    fixed = [*cfg.record_key_fields, *cfg.partition_fields]
    if cfg.ordering_field:
        fixed.append(cfg.ordering_field)
    return fixed


def latest_commit_schema(table: HoodieTable) -> pa.Schema | None:
    """The table's data schema from the latest completed write (``extraMetadata.schema`` of
    :meth:`~hoodie_ray.table.HoodieTable.latest_writes`: by completion time, table services
    aside, the order several writers' schema changes are judged in), else
    ``hoodie.table.create.schema``."""
    for _, schema in table.latest_writes():
        return avro_to_arrow_schema(schema)
    create = table.table_config.create_schema
    return avro_to_arrow_schema(create) if create else None


def bucket_options_for_table(wc: WriteConfig, stored: str, path: str) -> WriteConfig:
    """A table created with the bucket index records its bucket count; it stays a bucket
    table of that count. Options that leave the index out get it from the table; options that
    say otherwise are refused (another index type would put keys outside their buckets, and
    a larger count passes the layout check: every existing bucket id is below it)."""
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


def check_bucket_layout(slices: list[FileSlice], bucket_num: int, path: str) -> None:
    """The bucket index finds a key's file group by hashing it: every file group of the table
    must be a bucket below ``bucket_num``. Writing with the bucket index to a table written
    by the state index (or with another bucket count) would duplicate keys."""
    for s in slices:
        fid = s.file_id
        if not (len(fid) > 9 and fid[:8].isdigit() and fid[8] == "-" and int(fid[:8]) < bucket_num):
            raise HoodieOptionError(
                f"index.type=BUCKET with hoodie.bucket.index.num.buckets={bucket_num} does not "
                f"match {path}: file group {fid} (partition {s.partition_path!r}) is not one of "
                "its buckets; the index type and bucket count of a table cannot change"
            )
