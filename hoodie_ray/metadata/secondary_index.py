"""Secondary indexes of the metadata table (``secondary_index_<name>`` partitions, record
type 7) and their definitions in ``.hoodie/.index_defs/index.json``.

An entry maps one record's secondary value to its record key. Its MDT key is
``<escaped secondary value>$<escaped record key>`` (Java's ``SecondaryIndexKeyUtils``): ``\\``,
``$`` and NUL are escaped with a ``\\`` in both parts, and a null value is the single NUL
character. Its value is ``{SecondaryIndexMetadata: {isDeleted: false}}``; a removed entry is a
key of a delete block (Java's ``isDeleted = true`` payload has no insert value, so its append
handle writes it as a delete). All entries of one secondary value live in one file group: the
Java string hash of ``<escaped value>$`` picks it (spec/metadata-table.md 1.4).

A secondary value is the string Java's ``toString()`` gives the engine's value of the field:
strings as they are, integers in decimal, dates as days since the epoch, timestamps as
microseconds since the epoch, booleans ``true`` / ``false``, decimals in plain notation,
floating point numbers as Java's ``Double.toString`` / ``Float.toString``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieUnsupportedError
from hoodie_ray.metadata.layout import SECONDARY_INDEX_PREFIX
from hoodie_ray.metadata.records import (
    RECORD_TYPE_SECONDARY_INDEX,
    RecordIndexColumns,
    encode_records,
    key_to_file_group_index,
)
from hoodie_ray.storage import Storage

__all__ = [
    "INDEX_DEFS_DEFAULT_PATH",
    "SECONDARY_INDEX_TYPE",
    "IndexDefinition",
    "escape_key_part",
    "escape_key_parts",
    "index_definitions",
    "java_string_array",
    "java_strings",
    "save_index_definitions",
    "secondary_index_changes",
    "secondary_index_file_group",
    "secondary_index_key",
    "secondary_index_keys",
    "secondary_index_record",
    "split_secondary_index_key",
    "unescape_key_part",
]

SEPARATOR = "$"
ESCAPE = "\\"
NULL_CHAR = "\x00"
#: Where Java 1.x keeps index definitions (``hoodie.table.index.defs.path``).
INDEX_DEFS_DEFAULT_PATH = ".hoodie/.index_defs/index.json"
SECONDARY_INDEX_TYPE = "secondary_index"
#: Secondary-index file groups: Java sizes them as the record index's (at least 10).
SECONDARY_INDEX_MIN_GROUPS = 10
SECONDARY_INDEX_KEYS_PER_GROUP = 4_000_000


# -- keys ---------------------------------------------------------------------------------------


def escape_key_part(s: str | None) -> str:
    """One part of a secondary-index key, escaped (``None`` is the NUL character)."""
    if s is None:
        return NULL_CHAR
    if ESCAPE not in s and SEPARATOR not in s and NULL_CHAR not in s:
        return s
    return "".join(ESCAPE + c if c in (ESCAPE, SEPARATOR, NULL_CHAR) else c for c in s)


def unescape_key_part(s: str) -> str | None:
    """Inverse of :func:`escape_key_part`."""
    if s == NULL_CHAR:
        return None
    if ESCAPE not in s:
        return s
    out: list[str] = []
    esc = False
    for c in s:
        if esc:
            out.append(c)
            esc = False
        elif c == ESCAPE:
            esc = True
        else:
            out.append(c)
    return "".join(out)


def secondary_index_key(secondary: str | None, record_key: str) -> str:
    """The MDT key of the entry ``secondary -> record_key``."""
    return escape_key_part(secondary) + SEPARATOR + escape_key_part(record_key)


def escape_key_parts(parts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """:func:`escape_key_part` of each string of ``parts`` (``large_string``), column-wise:
    a ``\\`` before each ``\\``, ``$`` and NUL; a null is the NUL character."""
    if isinstance(parts, pa.ChunkedArray):
        parts = parts.combine_chunks()
    out = parts.cast(pa.large_string())
    if _holds_escaped_chars(out):
        for c in (ESCAPE, SEPARATOR, NULL_CHAR):  # the escape character first
            out = pc.replace_substring(out, c, ESCAPE + c)
    return pc.fill_null(out, NULL_CHAR) if out.null_count else out


def _holds_escaped_chars(col: pa.Array) -> bool:
    """Whether any string of ``col`` (``large_string``) holds a ``\\``, ``$`` or NUL: one
    pass over its bytes (UTF-8 never encodes other characters with these bytes)."""
    if not len(col) or col.buffers()[2] is None:
        return False
    offsets = np.frombuffer(col.buffers()[1], dtype=np.int64)
    data = np.frombuffer(col.buffers()[2], dtype=np.uint8)
    span = data[int(offsets[col.offset]) : int(offsets[col.offset + len(col)])]
    return bool(((span == 0x5C) | (span == 0x24) | (span == 0)).any())


def secondary_index_prefixes(secondary: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The ``<escaped value>$`` prefix of each value's entries, column-wise (``large_string``):
    what places them in their file group."""
    none = pa.scalar("", pa.large_string())
    return pc.binary_join_element_wise(
        escape_key_parts(secondary), pa.scalar(SEPARATOR, pa.large_string()), none
    )


def secondary_index_keys(
    secondary: pa.Array | pa.ChunkedArray, record_keys: pa.Array | pa.ChunkedArray
) -> pa.Array:
    """:func:`secondary_index_key` of each pair ``(secondary[i], record_keys[i])``,
    column-wise (``large_string``)."""
    return _join_keys(secondary_index_prefixes(secondary), record_keys)


def _join_keys(prefixes: pa.Array, record_keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``<escaped value>$`` prefixes joined with their escaped record keys."""
    none = pa.scalar("", pa.large_string())
    return pc.binary_join_element_wise(prefixes, escape_key_parts(record_keys), none)


def secondary_index_columns(values: pa.Table, table_version: int) -> RecordIndexColumns:
    """The live entries of a secondary index column-wise, from a table of unique ``key``
    (record key) and ``value`` (its Java string): each placed by its ``<value>$`` prefix,
    all with the one value a live entry has."""
    prefixes = secondary_index_prefixes(values.column("value"))
    keys = _join_keys(prefixes, values.column("key"))  # the values escaped once
    live = encode_records([secondary_index_record(None, "")[1]], table_version)[0]
    return RecordIndexColumns(keys, np.zeros(len(keys), np.int32), [live], prefixes)


def secondary_index_changes(old: pa.Table, new: pa.Table) -> tuple[pa.Array, pa.Array]:
    """The entries one action adds and removes, from each record key's secondary value before
    (``old``) and after (``new``) it: tables of unique ``key`` (record key) and ``value``
    (secondary value or null) columns. A key whose value is new or changed gains the entry of
    its new value, one whose value changed loses its old one, one that is gone loses its entry
    (a null value is a value: null to null is no change); an entry both gained and lost is only
    gained. Returns ``(added keys, removed keys)`` as MDT keys (:func:`secondary_index_keys`),
    column-wise: each new key's old value found by an Arrow hash lookup (``index_in``), no
    Python object per record key."""
    old_keys, was_all = _large(old.column("key")), _large(old.column("value"))
    new_keys, now = _large(new.column("key")), _large(new.column("value"))
    at = pc.index_in(new_keys, value_set=old_keys)  # each new key's row in old, null if none
    in_old = pc.is_valid(at)
    was = was_all.take(at)
    same = pc.and_(
        in_old,
        pc.or_(pc.fill_null(pc.equal(was, now), False), pc.and_(pc.is_null(was), pc.is_null(now))),
    )
    changed = pc.invert(same)
    lose = pc.and_(in_old, changed)  # changed: the old value's entry goes
    gone = pc.invert(pc.is_in(old_keys, value_set=new_keys))  # left the group(s)
    added = secondary_index_keys(now.filter(changed), new_keys.filter(changed))
    removed = pa.concat_arrays(
        [
            secondary_index_keys(was.filter(lose), new_keys.filter(lose)),
            secondary_index_keys(was_all.filter(gone), old_keys.filter(gone)),
        ]
    )
    if len(added) and len(removed):
        removed = removed.filter(pc.invert(pc.is_in(removed, value_set=added)))
    return added, removed


def _large(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks else pa.array([], col.type)
    return col.cast(pa.large_string())


def _separator_at(key: str) -> int:
    esc = False
    for i, c in enumerate(key):
        if c == ESCAPE and not esc:
            esc = True
        elif c == SEPARATOR and not esc:
            return i
        else:
            esc = False
    raise HoodieCorruptedDataError(f"secondary index key {key!r} has no unescaped '$'")


def split_secondary_index_key(key: str) -> tuple[str | None, str]:
    """``(secondary value, record key)`` of an MDT secondary-index key."""
    at = _separator_at(key)
    rk = unescape_key_part(key[at + 1 :])
    return unescape_key_part(key[:at]), rk if rk is not None else ""


def secondary_index_file_group(key: str, num_groups: int) -> int:
    """The file group of an entry: the Java hash of its ``<escaped value>$`` prefix."""
    return key_to_file_group_index(key[: _separator_at(key) + 1], num_groups)


def secondary_index_record(
    secondary: str | None, record_key: str, deleted: bool = False
) -> tuple[str, dict[str, Any]]:
    """``(key, HoodieMetadataRecord)`` of one entry (``createSecondaryIndexRecord``)."""
    return secondary_index_key(secondary, record_key), {
        "key": "",
        "type": RECORD_TYPE_SECONDARY_INDEX,
        "filesystemMetadata": None,
        "BloomFilterMetadata": None,
        "ColumnStatsMetadata": None,
        "recordIndexMetadata": None,
        "SecondaryIndexMetadata": {"isDeleted": bool(deleted)},
    }


def secondary_index_groups(num_keys: int) -> int:
    """How many file groups a new secondary index gets for ``num_keys`` entries."""
    return max(SECONDARY_INDEX_MIN_GROUPS, -(-num_keys // SECONDARY_INDEX_KEYS_PER_GROUP))


# -- values -------------------------------------------------------------------------------------


def _java_float_text(text: str, value: float) -> str:
    """Java's ``Double.toString`` layout of a shortest round-trip ``text`` of ``value``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exp = Decimal(text).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exp = int(exp) + len("".join(map(str, digits))) - len(ds)  # value = ds * 10**exp
    point = len(ds) + exp  # digits before the decimal point
    minus = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{minus}0.{'0' * -point}{ds}"
        if point >= len(ds):
            return f"{minus}{ds}{'0' * (point - len(ds))}.0"
        return f"{minus}{ds[:point]}.{ds[point:]}"
    return f"{minus}{ds[0]}.{ds[1:] or '0'}E{point - 1}"


def java_string_array(values: pa.Array | pa.ChunkedArray, field_name: str) -> pa.Array:
    """:func:`java_strings` as an Arrow ``large_string`` array: column-wise for strings,
    integers, booleans, dates and timestamps (decimals and floating point numbers through
    their Python values).

    Raises:
        HoodieUnsupportedError: as :func:`java_strings`.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    t = values.type
    if pa.types.is_dictionary(t):
        values = values.dictionary_decode()
        t = values.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t):
        return pc.cast(values, pa.large_string())
    if pa.types.is_boolean(t):
        return pc.if_else(values, "true", "false").cast(pa.large_string())
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        days = pc.cast(pc.cast(values, pa.date32()), pa.int32())
        return pc.cast(days, pa.large_string())
    if pa.types.is_timestamp(t):
        micros = pc.cast(pc.cast(values, pa.timestamp("us", t.tz)), pa.int64())
        return pc.cast(micros, pa.large_string())
    return pa.array(java_strings(values, field_name), pa.large_string())


def java_strings(values: pa.Array | pa.ChunkedArray, field_name: str) -> list[str | None]:
    """Each value of one column as Java's ``toString()`` of the engine value (None for null).

    Raises:
        HoodieUnsupportedError: a column type whose Java string this writer does not know
            (binary, nested, ...), naming the field.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    t = values.type
    if pa.types.is_dictionary(t):
        values = values.dictionary_decode()
        t = values.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return list(values.to_pylist())
    if pa.types.is_integer(t):
        return list(pc.cast(values, pa.string()).to_pylist())
    if pa.types.is_boolean(t):
        return ["true" if v else "false" if v is not None else None for v in values.to_pylist()]
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        days = pc.cast(pc.cast(values, pa.date32()), pa.int32())
        return list(pc.cast(days, pa.string()).to_pylist())
    if pa.types.is_timestamp(t):
        micros = pc.cast(pc.cast(values, pa.timestamp("us", t.tz)), pa.int64())
        return list(pc.cast(micros, pa.string()).to_pylist())
    if pa.types.is_decimal(t):
        return [None if v is None else format(v, "f") for v in values.to_pylist()]
    if pa.types.is_floating(t):
        single = pa.types.is_float32(t) or pa.types.is_float16(t)
        out: list[str | None] = []
        for v in values.to_pylist():
            if v is None:
                out.append(None)
            else:
                text = str(np.float32(v)) if single else repr(float(v))
                out.append(_java_float_text(text, float(v)))
        return out
    raise HoodieUnsupportedError(
        f"secondary index on field {field_name!r} of type {t}: hoodie_ray indexes strings, "
        "integers, booleans, dates, timestamps, decimals and floating point numbers"
    )


# -- definitions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexDefinition:
    """One entry of ``index.json`` (Java's ``HoodieIndexDefinition``)."""

    index_name: str
    index_type: str
    index_function: str = ""
    source_fields: tuple[str, ...] = ()
    index_options: Mapping[str, str] = field(default_factory=dict)
    version: str = "V2"

    @property
    def is_secondary(self) -> bool:
        return self.index_type == SECONDARY_INDEX_TYPE or self.index_name.startswith(
            SECONDARY_INDEX_PREFIX
        )

    @property
    def source_field(self) -> str:
        """The one field a secondary index indexes."""
        if len(self.source_fields) != 1:
            raise HoodieUnsupportedError(
                f"index {self.index_name}: a secondary index over "
                f"{len(self.source_fields)} fields ({', '.join(self.source_fields)}); "
                "hoodie_ray maintains secondary indexes of one field"
            )
        return self.source_fields[0]

    @classmethod
    def of_json(cls, name: str, d: Mapping[str, Any]) -> IndexDefinition:
        return cls(
            index_name=str(d.get("indexName") or name),
            index_type=str(d.get("indexType") or ""),
            index_function=str(d.get("indexFunction") or ""),
            source_fields=tuple(str(f) for f in d.get("sourceFields") or ()),
            index_options={str(k): str(v) for k, v in (d.get("indexOptions") or {}).items()},
            version=str(d.get("version") or "V1"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "indexName": self.index_name,
            "indexType": self.index_type,
            "indexFunction": self.index_function,
            "sourceFields": list(self.source_fields),
            "indexOptions": dict(self.index_options),
            "version": self.version,
        }


def _load_doc(storage: Storage, rel: str) -> dict[str, Any]:
    try:
        doc = json.loads(storage.read_bytes(rel))
    except ValueError as e:
        raise HoodieCorruptedDataError(f"{storage.uri(rel)}: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("indexDefinitions", {}), dict):
        raise HoodieCorruptedDataError(f"{storage.uri(rel)}: no indexDefinitions object")
    return doc


def index_definitions(storage: Storage, rel: str | None) -> dict[str, IndexDefinition]:
    """Index name -> definition from the data table's ``index.json`` at ``rel`` ({} without
    one)."""
    if not rel or not storage.exists(rel):
        return {}
    defs = _load_doc(storage, rel).get("indexDefinitions") or {}
    return {
        str(name): IndexDefinition.of_json(str(name), d)
        for name, d in defs.items()
        if isinstance(d, dict)
    }


def save_index_definitions(
    storage: Storage, rel: str, put: Iterable[IndexDefinition] = (), drop: Iterable[str] = ()
) -> None:
    """Add (or replace) and remove definitions in ``index.json``, keeping every other entry
    (and field) as it was; written atomically."""
    doc = _load_doc(storage, rel) if storage.exists(rel) else {"indexDefinitions": {}}
    defs = doc.setdefault("indexDefinitions", {})
    for d in put:
        defs[d.index_name] = d.to_json()
    for name in drop:
        defs.pop(name, None)
    storage.write_atomic(rel, json.dumps(doc, indent=2).encode())
