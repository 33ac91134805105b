"""The table config: ``.hoodie/hoodie.properties``.

Read and written in Java's ``Properties`` format (Hudi's Java writer uses ``Properties.store``),
with the ``hoodie.table.checksum`` Java computes: CRC32 of ``"<database>.<table>"``.
"""

from __future__ import annotations

import datetime as _dt
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from hoodie_ray.exceptions import (
    HoodieCorruptedDataError,
    HoodieIOError,
    HoodieTableNotFoundError,
    HoodieUnsupportedError,
)
from hoodie_ray.lru import SizedLru
from hoodie_ray.storage import Storage

METAFOLDER = ".hoodie"
DEFAULT_TIMELINE_FOLDER = "timeline"
DEFAULT_HISTORY_FOLDER = "history"
DEFAULT_ARCHIVE_FOLDER = "archived"
PROPERTIES_FILE = ".hoodie/hoodie.properties"
SUPPORTED_READ_VERSIONS = (6, 8, 9)
SUPPORTED_WRITE_VERSIONS = (6, 8, 9)
# Hudi keeps the bucket count in writer options only; hoodie_ray also records it in the
# properties of a table it creates with the bucket index, so a changed count is refused.
BUCKET_NUM_PROPERTY = "hoodie.bucket.index.num.buckets"

# Merge strategy ids (HoodieRecordMerger) and payload classes, mapped onto behaviours.
EVENT_TIME_STRATEGY_ID = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_TIME_STRATEGY_ID = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
PAYLOAD_BASED_STRATEGY_ID = "00000000-0000-0000-0000-000000000000"
CUSTOM_STRATEGY_ID = "1897ef5f-18bc-4557-939c-9d6a8afd1519"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
EVENT_TIME_PAYLOAD = "org.apache.hudi.common.model.EventTimeAvroPayload"
OVERWRITE_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
# Table version 9 (Hudi 1.1) renames the ordering field and retires the payload class of the
# built-in merge modes (HoodieTableConfig.ORDERING_FIELDS / LEGACY_PAYLOAD_CLASS_NAME).
ORDERING_FIELDS_KEY = "hoodie.table.ordering.fields"
PRECOMBINE_FIELD_KEY = "hoodie.table.precombine.field"
LEGACY_PAYLOAD_KEY = "hoodie.table.legacy.payload.class"
PAYLOAD_KEY = "hoodie.compaction.payload.class"
#: Partial updates: 0.x's payload class, and Hudi 1.1's table property (docs/CDC.md).
PARTIAL_UPDATE_PAYLOAD = "org.apache.hudi.common.model.PartialUpdateAvroPayload"
PARTIAL_UPDATE_MODE_KEY = "hoodie.table.partial.update.mode"
#: ``FILL_UNAVAILABLE``'s marker value, stored with the merge property prefix. Java stores
#: ``RECORD_MERGE_PROPERTY_PREFIX + PARTIAL_UPDATE_UNAVAILABLE_VALUE`` (``HoodieTableConfig``:
#: table creation and ``EightToNineUpgradeHandler`` write
#: ``hoodie.record.merge.property.hoodie.write.partial.update.unavailable.value``); hudi-rs 0.5
#: reads ``<prefix>partial.update.unavailable.value`` only. hoodie_ray writes both (Java's
#: merge handlers look up their own key only) and reads either, Java's first.
UNAVAILABLE_VALUE_KEYS = (
    "hoodie.record.merge.property.hoodie.write.partial.update.unavailable.value",
    "hoodie.record.merge.property.partial.update.unavailable.value",
    "hoodie.write.partial.update.unavailable.value",
)
#: ``HoodieTableConfig.DEBEZIUM_UNAVAILABLE_VALUE``: the marker Debezium's Postgres connector puts
#: in a column it did not capture.
DEBEZIUM_UNAVAILABLE_VALUE = "__debezium_unavailable_value"
#: Change data capture (Java ``HoodieTableConfig.CDC_ENABLED`` / ``CDC_SUPPLEMENTAL_LOGGING_MODE``).
CDC_ENABLED_KEY = "hoodie.table.cdc.enabled"
CDC_MODE_KEY = "hoodie.table.cdc.supplemental.logging.mode"
#: ``HoodieCDCSupplementalLoggingMode``, the names 1.x stores.
CDC_LOGGING_MODES = ("OP_KEY_ONLY", "DATA_BEFORE", "DATA_BEFORE_AFTER")
MERGE_PROPERTY_PREFIX = "hoodie.record.merge.property."

# Key generator classes (v6) and types (v8+); a fixed list, nothing is ever imported by name.
KEYGEN_CLASSES = {
    "SIMPLE": "org.apache.hudi.keygen.SimpleKeyGenerator",
    "COMPLEX": "org.apache.hudi.keygen.ComplexKeyGenerator",
    "NON_PARTITION": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    "TIMESTAMP": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
    "CUSTOM": "org.apache.hudi.keygen.CustomKeyGenerator",
}
KEYGEN_TYPE_BY_CLASS = {v: k for k, v in KEYGEN_CLASSES.items()}
KEYGEN_TYPE_BY_CLASS.update(
    {
        "org.apache.hudi.keygen.SimpleAvroKeyGenerator": "SIMPLE",
        "org.apache.hudi.keygen.ComplexAvroKeyGenerator": "COMPLEX",
        "org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator": "NON_PARTITION",
        "org.apache.hudi.keygen.TimestampBasedAvroKeyGenerator": "TIMESTAMP",
        "org.apache.hudi.keygen.CustomAvroKeyGenerator": "CUSTOM",
    }
)


class MergeMode(str, Enum):
    """How a reader picks between two versions of one record key."""

    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"


# -- Java properties format ---------------------------------------------------------------------


def _java_escape(s: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(s):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif ch in "=:#!":
            out.append("\\" + ch)
        elif ch == " " and (i == 0 or is_key):
            out.append("\\ ")
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            if ord(ch) > 0xFFFF:  # Java escapes UTF-16 code units
                v = ord(ch) - 0x10000
                out.append(f"\\u{0xD800 + (v >> 10):04X}\\u{0xDC00 + (v & 0x3FF):04X}")
            else:
                out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def _java_unescape(s: str) -> str:
    if "\\" not in s:
        return s  # nearly every key and value: nothing to undo
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        ch = s[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u" and i + 6 <= n:
            try:
                out.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            except ValueError:
                pass
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    text = "".join(out)
    # Rejoin surrogate pairs produced by \uD83D\uDE00 style escapes.
    return text.encode("utf-16", "surrogatepass").decode("utf-16")


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not buf and (not line or line[0] in "#!"):
            continue
        # A line ending in an odd number of backslashes continues on the next line.
        stripped = line.rstrip("\n")
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            buf += stripped[:-1]
            continue
        lines.append(buf + stripped)
        buf = ""
    if buf:
        lines.append(buf)
    return lines


def parse_java_properties(text: str) -> dict[str, str]:
    """Parse the Java ``Properties`` text format (``load``): separators ``=``, ``:`` or space.
    A new dict each call; the parse of a text is kept (:data:`_PARSED_PROPERTIES`)."""
    hit = _PARSED_PROPERTIES.get(text)
    if hit is None:
        hit = _parse_properties(text)
        _PARSED_PROPERTIES.put(text, hit, len(text))
    return dict(hit)


#: Parses by text: a table's properties are read at every load of the table, and of its
#: metadata table (twice a read's planning). A text over 64 KiB is never kept.
_PARSED_PROPERTIES = SizedLru(4 << 20, max_entry=64 << 10)


def _parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        key_chars: list[str] = []
        while i < n:
            ch = line[i]
            if ch == "\\" and i + 1 < n:
                key_chars.append(line[i : i + 2])
                i += 2
                continue
            if ch in "=: \t\f":
                break
            key_chars.append(ch)
            i += 1
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
            while i < n and line[i] in " \t\f":
                i += 1
        props[_java_unescape("".join(key_chars))] = _java_unescape(line[i:])
    return props


def format_java_properties(props: Mapping[str, str], comment: str | None = None) -> str:
    """Serialise like Java's ``Properties.store``: date comment, then escaped ``key=value``.

    Keys are written sorted, with ``hoodie.table.checksum`` last, so the file is stable.
    """
    now = _dt.datetime.now(_dt.timezone.utc)
    lines = [f"#{comment or 'Properties saved on ' + now.isoformat().replace('+00:00', 'Z')}"]
    lines.append("#" + now.strftime("%a %b %d %H:%M:%S UTC %Y"))
    keys = sorted(k for k in props if k != "hoodie.table.checksum")
    if "hoodie.table.checksum" in props:
        keys.append("hoodie.table.checksum")
    for k in keys:
        lines.append(f"{_java_escape(k, True)}={_java_escape(props[k], False)}")
    return "\n".join(lines) + "\n"


def table_checksum(props: Mapping[str, str]) -> str:
    """CRC32 of ``"<hoodie.database.name>.<hoodie.table.name>"`` as Java computes it."""
    text = f"{props.get('hoodie.database.name', '')}.{props.get('hoodie.table.name', '')}"
    return str(zlib.crc32(text.encode("utf-8")) & 0xFFFFFFFF)


# -- the table config ---------------------------------------------------------------------------


def uses_completion_time(table_version: int) -> bool:
    """The one place that says which table versions slice by completion time (8 and up)."""
    return table_version >= 8


def _bool(v: str | None, default: bool) -> bool:
    if v is None or v.strip() == "":
        return default
    return v.strip().lower() == "true"


def _split_fields(v: str | None) -> list[str]:
    if not v:
        return []
    # v8+ custom key generators append ":SIMPLE" / ":TIMESTAMP" to each partition field.
    return [f.strip().split(":")[0] for f in v.split(",") if f.strip()]


@dataclass(frozen=True)
class HoodieTableConfig:
    """The parsed ``hoodie.properties`` of one table.

    ``props`` holds every key as written; the typed properties below are views over it.
    """

    props: Mapping[str, str] = field(default_factory=dict)

    # -- typed views ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.props.get("hoodie.table.name", "")

    @property
    def database(self) -> str:
        return self.props.get("hoodie.database.name", "")

    @property
    def table_type(self) -> str:
        t = self.props.get("hoodie.table.type", "COPY_ON_WRITE").strip().upper()
        return {"MOR": "MERGE_ON_READ", "COW": "COPY_ON_WRITE"}.get(t, t)

    @property
    def is_mor(self) -> bool:
        return self.table_type == "MERGE_ON_READ"

    @property
    def table_version(self) -> int:
        return int(self.props.get("hoodie.table.version", "0") or 0)

    @property
    def timeline_layout_version(self) -> int:
        default = "2" if self.table_version >= 8 else "1"
        return int(self.props.get("hoodie.timeline.layout.version", default) or default)

    @property
    def completion_time_slicing(self) -> bool:
        """Table version 8+: log files are named by their own delta commit, join file slices
        by completion time (no carry-over after a compaction) and are rolled back by deletion
        rather than by rollback command blocks."""
        return uses_completion_time(self.table_version)

    @property
    def timeline_path(self) -> str:
        """The active timeline directory, relative to the base path."""
        if self.timeline_layout_version >= 2:
            return f"{METAFOLDER}/{self.timeline_folder}"
        return METAFOLDER

    @property
    def timeline_folder(self) -> str:
        """``hoodie.timeline.path`` (layout 2), relative to ``.hoodie``."""
        return self.props.get("hoodie.timeline.path") or DEFAULT_TIMELINE_FOLDER

    @property
    def archive_path(self) -> str:
        """The archived timeline's directory, relative to the base path: layout 2's LSM
        history (``hoodie.timeline.history.path`` under the timeline folder), layout 1's
        ``hoodie.archivelog.folder`` under ``.hoodie``."""
        if self.timeline_layout_version >= 2:
            history = self.props.get("hoodie.timeline.history.path") or DEFAULT_HISTORY_FOLDER
            return f"{METAFOLDER}/{self.timeline_folder}/{history}"
        return (
            f"{METAFOLDER}/{self.props.get('hoodie.archivelog.folder') or DEFAULT_ARCHIVE_FOLDER}"
        )

    @property
    def record_key_fields(self) -> list[str]:
        return _split_fields(self.props.get("hoodie.table.recordkey.fields"))

    @property
    def partition_fields(self) -> list[str]:
        return _split_fields(self.props.get("hoodie.table.partition.fields"))

    @property
    def ordering_fields(self) -> list[str]:
        """``hoodie.table.ordering.fields`` (table version 9), else the older name
        ``hoodie.table.precombine.field``; Java compares several fields in order."""
        v = self.props.get(ORDERING_FIELDS_KEY) or self.props.get(PRECOMBINE_FIELD_KEY)
        return [f.strip() for f in (v or "").split(",") if f.strip()]

    @property
    def ordering_field(self) -> str | None:
        fields = self.ordering_fields
        return fields[0] if fields else None

    def write_unsupported_reason(self) -> str | None:
        """Why hoodie_ray cannot write this table's merge rules, or None.

        Table version 9 can record merge behaviour hoodie_ray's writer and compactor do not
        apply (``HoodieTableConfig`` 1.1: a partial update mode other than ``IGNORE_DEFAULTS`` and
        ``FILL_UNAVAILABLE``, the ``hoodie.record.merge.property.*`` delete markers, several
        ordering fields); Java
        readers would merge the rows hoodie_ray writes differently from hoodie_ray's own model.
        """
        try:
            self.partial_update  # noqa: B018 (a partial update mode it does not apply raises)
        except HoodieUnsupportedError as e:
            return str(e)
        merge_props = sorted(
            k
            for k in self.props
            if k.startswith(MERGE_PROPERTY_PREFIX) and k not in UNAVAILABLE_VALUE_KEYS
        )
        if merge_props:
            return f"merge properties {', '.join(merge_props)} (custom delete markers)"
        if len(self.ordering_fields) > 1:
            return f"several ordering fields ({','.join(self.ordering_fields)})"
        return None

    @property
    def hive_style(self) -> bool:
        return _bool(self.props.get("hoodie.datasource.write.hive_style_partitioning"), False)

    @property
    def url_encode(self) -> bool:
        return _bool(self.props.get("hoodie.datasource.write.partitionpath.urlencode"), False)

    @property
    def cdc_enabled(self) -> bool:
        """``hoodie.table.cdc.enabled``: copy-on-write merges write ``.cdc`` log files."""
        return _bool(self.props.get(CDC_ENABLED_KEY), False)

    @property
    def cdc_logging_mode(self) -> str:
        """``hoodie.table.cdc.supplemental.logging.mode`` (upper case; 0.13 stored it lower
        case, which Java 1.x reads through ``toUpperCase`` as well)."""
        mode = (self.props.get(CDC_MODE_KEY) or "DATA_BEFORE_AFTER").strip().upper()
        if mode not in CDC_LOGGING_MODES:
            raise HoodieUnsupportedError(
                f"{CDC_MODE_KEY}={mode} is not one of {', '.join(CDC_LOGGING_MODES)}"
            )
        return mode

    @property
    def populate_meta_fields(self) -> bool:
        return _bool(self.props.get("hoodie.populate.meta.fields"), True)

    @property
    def base_file_format(self) -> str:
        return self.props.get("hoodie.table.base.file.format", "PARQUET").upper()

    @property
    def keygen_type(self) -> str | None:
        """SIMPLE, COMPLEX, NON_PARTITION, TIMESTAMP, CUSTOM, or None when not recorded."""
        t = self.props.get("hoodie.table.keygenerator.type")
        if t:
            t = t.strip().upper()
            return t if t in KEYGEN_CLASSES else "UNKNOWN"
        cls = self.props.get("hoodie.table.keygenerator.class")
        if cls:
            return KEYGEN_TYPE_BY_CLASS.get(cls.strip(), "UNKNOWN")
        return None

    @property
    def partial_update(self) -> bool:
        """Partial updates: a null field of a newer record keeps the older record's value
        (``hoodie.table.partial.update.mode=IGNORE_DEFAULTS`` on version 9, the payload class
        ``PartialUpdateAvroPayload`` before; :func:`hoodie_ray.merge.partial_merge`), or with
        ``FILL_UNAVAILABLE`` a string field holding :attr:`unavailable_value` does.

        Raises:
            HoodieUnsupportedError: another partial update mode, or ``FILL_UNAVAILABLE``
                without its marker value.
        """
        mode = (self.props.get(PARTIAL_UPDATE_MODE_KEY) or "NONE").strip().upper()
        if mode == "IGNORE_DEFAULTS":
            return True
        if mode == "FILL_UNAVAILABLE":
            if self.unavailable_value is None:
                raise HoodieUnsupportedError(
                    f"{PARTIAL_UPDATE_MODE_KEY}=FILL_UNAVAILABLE without its marker value "
                    f"({UNAVAILABLE_VALUE_KEYS[0]})"
                )
            return True
        if mode != "NONE":
            raise HoodieUnsupportedError(
                f"{PARTIAL_UPDATE_MODE_KEY}={mode} is not supported "
                "(IGNORE_DEFAULTS and FILL_UNAVAILABLE are)"
            )
        return self._payload_class == PARTIAL_UPDATE_PAYLOAD

    @property
    def partial_update_mode(self) -> str:
        """``IGNORE_DEFAULTS``, ``FILL_UNAVAILABLE`` or ``NONE`` (the 0.x payload class counts
        as ``IGNORE_DEFAULTS``)."""
        if not self.partial_update:
            return "NONE"
        return "FILL_UNAVAILABLE" if self.unavailable_value is not None else "IGNORE_DEFAULTS"

    @property
    def unavailable_value(self) -> str | None:
        """``FILL_UNAVAILABLE``'s marker (:data:`UNAVAILABLE_VALUE_KEYS`): a string field equal
        to it keeps the older value; None in the other modes."""
        mode = (self.props.get(PARTIAL_UPDATE_MODE_KEY) or "").strip().upper()
        if mode != "FILL_UNAVAILABLE":
            return None
        return next((self.props[k] for k in UNAVAILABLE_VALUE_KEYS if self.props.get(k)), None)

    @property
    def _payload_class(self) -> str:
        return (
            self.props.get(PAYLOAD_KEY)
            or self.props.get("hoodie.datasource.write.payload.class")
            or self.props.get(LEGACY_PAYLOAD_KEY)
            or ""
        ).strip()

    @property
    def merge_mode(self) -> MergeMode:
        """The merge mode readers apply, resolved as spec §6.1 says (a partial update table
        orders by event time: :attr:`partial_update` says how versions merge)."""
        mode = self.props.get("hoodie.record.merge.mode")
        payload = self._payload_class or None
        if payload == PARTIAL_UPDATE_PAYLOAD:
            return MergeMode.EVENT_TIME_ORDERING
        if self.table_version >= 8 and mode:
            if mode.upper() in MergeMode.__members__:
                return MergeMode(mode.upper())
            raise HoodieUnsupportedError(f"hoodie.record.merge.mode={mode} is not supported")
        strategy = self.props.get("hoodie.record.merge.strategy.id") or self.props.get(
            "hoodie.compaction.record.merger.strategy"
        )
        if self.table_version < 8 and payload:
            payload = payload.strip()
            if payload in (DEFAULT_PAYLOAD, EVENT_TIME_PAYLOAD):
                return MergeMode.EVENT_TIME_ORDERING
            if payload == OVERWRITE_PAYLOAD:
                return MergeMode.COMMIT_TIME_ORDERING
            raise HoodieUnsupportedError(
                f"payload class {payload!r} is not supported; supported: DefaultHoodieRecordPayload, "
                "EventTimeAvroPayload, OverwriteWithLatestAvroPayload"
            )
        if strategy and self.table_version >= 8:
            if strategy == EVENT_TIME_STRATEGY_ID:
                return MergeMode.EVENT_TIME_ORDERING
            if strategy == COMMIT_TIME_STRATEGY_ID:
                return MergeMode.COMMIT_TIME_ORDERING
        if payload:
            if payload.strip() in (DEFAULT_PAYLOAD, EVENT_TIME_PAYLOAD):
                return MergeMode.EVENT_TIME_ORDERING
            if payload.strip() == OVERWRITE_PAYLOAD:
                return MergeMode.COMMIT_TIME_ORDERING
        return (
            MergeMode.EVENT_TIME_ORDERING if self.ordering_field else MergeMode.COMMIT_TIME_ORDERING
        )

    @property
    def create_schema(self) -> str | None:
        return self.props.get("hoodie.table.create.schema")

    # -- I/O -----------------------------------------------------------------------------------
    @classmethod
    def load(cls, storage: Storage) -> HoodieTableConfig:
        """Read and validate ``.hoodie/hoodie.properties``.

        Raises:
            HoodieTableNotFoundError: no properties file.
            HoodieCorruptedDataError: the file cannot be parsed or misses required keys.
            HoodieUnsupportedError: a table version other than 6, 8 or 9.
        """
        if not storage.exists(PROPERTIES_FILE):
            raise HoodieTableNotFoundError(
                f"not a Hudi table (no {PROPERTIES_FILE}): {storage.base_uri}"
            )
        try:
            # size first: a huge (or sparse) file must be refused before it is read
            if storage.size(PROPERTIES_FILE) > 16 * 1024 * 1024:
                raise HoodieCorruptedDataError(
                    f"{storage.uri(PROPERTIES_FILE)} is implausibly large"
                )
            raw = storage.read_bytes(PROPERTIES_FILE)
        except HoodieIOError as e:
            raise HoodieTableNotFoundError(str(e)) from e
        if len(raw) > 16 * 1024 * 1024:
            raise HoodieCorruptedDataError(f"{storage.uri(PROPERTIES_FILE)} is implausibly large")
        try:
            text = raw.decode("latin-1" if b"\\u" in raw else "utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        props = parse_java_properties(text)
        cfg = cls(props)
        cfg.validate(storage.uri(PROPERTIES_FILE))
        return cfg

    def validate(self, where: str) -> None:
        """Check the keys every reader needs; raise naming the file otherwise."""
        for key in ("hoodie.table.name", "hoodie.table.version"):
            if not self.props.get(key, "").strip():
                raise HoodieCorruptedDataError(f"{where}: required key {key} is missing")
        try:
            version = int(self.props["hoodie.table.version"])
        except ValueError:
            raise HoodieCorruptedDataError(
                f"{where}: hoodie.table.version={self.props['hoodie.table.version']!r} is not a number"
            ) from None
        if version not in SUPPORTED_READ_VERSIONS:
            raise HoodieUnsupportedError(
                f"{where}: table version {version} is not supported (supported: 6, 8, 9)"
            )
        if self.table_type not in ("MERGE_ON_READ", "COPY_ON_WRITE"):
            raise HoodieCorruptedDataError(
                f"{where}: unknown hoodie.table.type {self.table_type!r}"
            )
        layout = self.timeline_layout_version
        if (version == 6 and layout != 1) or (version >= 8 and layout != 2):
            raise HoodieUnsupportedError(
                f"{where}: timeline layout {layout} does not match table version {version}"
            )
        checksum = self.props.get("hoodie.table.checksum")
        if checksum and checksum.strip() != table_checksum(self.props):
            raise HoodieCorruptedDataError(
                f"{where}: hoodie.table.checksum {checksum} does not match the table name"
            )
        if self.base_file_format not in ("PARQUET",):
            raise HoodieUnsupportedError(
                f"{where}: base file format {self.base_file_format} is not supported (PARQUET only)"
            )

    def to_properties_text(self) -> str:
        props = dict(self.props)
        props["hoodie.table.checksum"] = table_checksum(props)
        return format_java_properties(props)

    def save(self, storage: Storage) -> None:
        """Write the properties atomically (temp file + rename), checksum recomputed."""
        storage.write_atomic(PROPERTIES_FILE, self.to_properties_text().encode("utf-8"))

    def with_props(self, **updates: str) -> HoodieTableConfig:
        props = dict(self.props)
        props.update(updates)
        return HoodieTableConfig(props)


def new_table_props(
    *,
    table_name: str,
    table_type: str,
    record_key_fields: list[str],
    partition_fields: list[str],
    ordering_field: str | None,
    keygen_type: str,
    hive_style: bool,
    url_encode: bool,
    table_version: int = 6,
    create_schema: str | None = None,
    database: str = "default",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The property set of a new table (spec §1.4, the full set Java writes).

    Version 9 follows what Java 1.1 writes (``HoodieTableMetaClient.TableBuilder.build`` and
    ``HoodieTableConfig.inferMergingConfigsForV9TableCreation``, checked key by key against
    the Java-written sample tables in ``tests/job/test_table_version_9.py``); see
    :func:`_version_9_props` for how it differs from versions 6 and 8.
    """
    if table_version not in SUPPORTED_WRITE_VERSIONS:
        raise HoodieUnsupportedError(
            f"hoodie.write.table.version={table_version} is not supported for new tables "
            "(6, 8 or 9)"
        )
    props = {
        "hoodie.table.name": table_name,
        "hoodie.table.type": table_type,
        "hoodie.table.version": str(table_version),
        "hoodie.timeline.layout.version": "1" if table_version == 6 else "2",
        "hoodie.table.recordkey.fields": ",".join(record_key_fields),
        "hoodie.datasource.write.hive_style_partitioning": str(hive_style).lower(),
        "hoodie.datasource.write.partitionpath.urlencode": str(url_encode).lower(),
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.archivelog.folder": DEFAULT_ARCHIVE_FOLDER,
        "hoodie.table.timeline.timezone": "UTC",
        "hoodie.database.name": database,
    }
    if table_version == 6:
        props.update(_version_6_props(partition_fields, ordering_field, keygen_type))
    elif table_version == 8:
        props.update(_version_8_props(partition_fields, ordering_field, keygen_type))
    else:
        props.update(_version_9_props(partition_fields, ordering_field, keygen_type))
    if create_schema:
        props["hoodie.table.create.schema"] = create_schema
    props.update(extra or {})
    props["hoodie.table.checksum"] = table_checksum(props)
    return props


def partial_update_props(
    table_version: int, mode: str = "IGNORE_DEFAULTS", unavailable_value: str | None = None
) -> dict[str, str]:
    """How a new table records partial updates, as Java records them for its version: the
    table property on 9 (``inferMergingConfigsForV9TableCreation``), the payload class on 6,
    and on 8 the payload class with the ``CUSTOM`` merge mode and the payload-based strategy
    (``SevenToEightUpgradeHandler``). ``FILL_UNAVAILABLE`` (version 9 only) stores its marker
    ``unavailable_value`` under :data:`UNAVAILABLE_VALUE_KEYS`' first two keys."""
    if table_version >= 9:
        props = {PARTIAL_UPDATE_MODE_KEY: mode}
        if mode == "FILL_UNAVAILABLE":
            marker = unavailable_value or DEBEZIUM_UNAVAILABLE_VALUE
            props.update(dict.fromkeys(UNAVAILABLE_VALUE_KEYS[:2], marker))
        return props
    if mode != "IGNORE_DEFAULTS":
        raise HoodieUnsupportedError(
            f"{PARTIAL_UPDATE_MODE_KEY}={mode} needs table version 9 (this table: "
            f"{table_version}; Java keeps partial update modes on version 9 only)"
        )
    props = {PAYLOAD_KEY: PARTIAL_UPDATE_PAYLOAD}
    if table_version == 8:
        props["hoodie.record.merge.mode"] = "CUSTOM"
        props["hoodie.record.merge.strategy.id"] = PAYLOAD_BASED_STRATEGY_ID
    return props


def _merge_mode_of(ordering_field: str | None) -> MergeMode:
    """A new table's merge mode: event time with an ordering field, else commit time."""
    return MergeMode.EVENT_TIME_ORDERING if ordering_field else MergeMode.COMMIT_TIME_ORDERING


def _version_6_8_props(partition_fields: list[str], ordering_field: str | None) -> dict[str, str]:
    """The keys versions 6 and 8 share: partition fields always, precombine field, payload."""
    props = {
        "hoodie.table.partition.fields": ",".join(partition_fields),
        "hoodie.table.base.file.format": "PARQUET",
        "hoodie.populate.meta.fields": "true",
        # No ordering field: the latest write wins (commit-time ordering) in every reader.
        PAYLOAD_KEY: DEFAULT_PAYLOAD if ordering_field else OVERWRITE_PAYLOAD,
    }
    if ordering_field:
        props[PRECOMBINE_FIELD_KEY] = ordering_field
    return props


def _version_6_props(
    partition_fields: list[str], ordering_field: str | None, keygen_type: str
) -> dict[str, str]:
    """Table version 6: the key generator by class, the event-time strategy id always."""
    props = _version_6_8_props(partition_fields, ordering_field)
    props["hoodie.table.keygenerator.class"] = KEYGEN_CLASSES[keygen_type]
    props["hoodie.compaction.record.merger.strategy"] = EVENT_TIME_STRATEGY_ID
    return props


def _version_8_props(
    partition_fields: list[str], ordering_field: str | None, keygen_type: str
) -> dict[str, str]:
    """Table version 8: key generator type, timeline folders, merge mode and strategy id."""
    props = _version_6_8_props(partition_fields, ordering_field)
    props.update(
        {
            "hoodie.table.keygenerator.type": keygen_type,
            "hoodie.table.initial.version": "8",
            "hoodie.timeline.path": DEFAULT_TIMELINE_FOLDER,
            "hoodie.timeline.history.path": DEFAULT_HISTORY_FOLDER,
            "hoodie.record.merge.mode": _merge_mode_of(ordering_field).value,
            "hoodie.record.merge.strategy.id": (
                EVENT_TIME_STRATEGY_ID if ordering_field else COMMIT_TIME_STRATEGY_ID
            ),
        }
    )
    return props


def _version_9_props(
    partition_fields: list[str], ordering_field: str | None, keygen_type: str
) -> dict[str, str]:
    """Table version 9: the keys Java 1.1 writes for a table with a built-in merge mode.

    Differences from versions 6 and 8, each as Java 1.1 does it:

    * ``hoodie.table.ordering.fields`` replaces ``hoodie.table.precombine.field``
      (``TableBuilder.build`` sets ``ORDERING_FIELDS``; ``EightToNineUpgradeHandler``
      moves the old key);
    * no ``hoodie.compaction.payload.class`` and no ``hoodie.record.merge.strategy.id``: a
      built-in merge mode is recorded by ``hoodie.record.merge.mode`` alone (the payload
      classes of those modes are deprecated; ``EightToNineUpgradeHandler`` removes the
      strategy id of non-CUSTOM modes);
    * ``hoodie.table.format=native`` (``HoodieTableConfig.TABLE_FORMAT``);
    * ``hoodie.table.partition.fields`` only for a partitioned table, and no
      ``hoodie.table.base.file.format`` / ``hoodie.populate.meta.fields``: Java writes them
      only when set, and their defaults (PARQUET, true) are what hoodie_ray writes.

    One key Java leaves out is kept: ``hoodie.table.timeline.timezone=UTC``. Java's default
    is LOCAL; hoodie_ray makes its instant times in UTC and says so.
    """
    props = {
        "hoodie.table.initial.version": "9",
        "hoodie.timeline.path": DEFAULT_TIMELINE_FOLDER,
        "hoodie.timeline.history.path": DEFAULT_HISTORY_FOLDER,
        "hoodie.table.format": "native",
        "hoodie.table.keygenerator.type": keygen_type,
        "hoodie.record.merge.mode": _merge_mode_of(ordering_field).value,
    }
    if partition_fields:
        props["hoodie.table.partition.fields"] = ",".join(partition_fields)
    if ordering_field:
        props[ORDERING_FIELDS_KEY] = ordering_field
    return props
