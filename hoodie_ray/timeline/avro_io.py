"""Avro Object Container Files holding one record: how Hudi stores plans and 1.x commit metadata.

Java writes timeline metadata with ``DataFileWriter`` (``TimelineMetadataUtils.serializeAvroMetadata``):
the ``Obj\\x01`` magic, a metadata map with only ``avro.schema`` (no ``avro.codec`` entry: codec
null), a 16-byte sync marker, then one block holding one record. :func:`write_single_record`
writes exactly that layout, with the writer schema serialised compactly in the field order
given (the schemas in this package copy the field layout of Java-written files).

:func:`read_single_record` reads such a file defensively -- the bytes are untrusted: sizes are
checked against the data before anything is allocated, the writer schema is limited in size and
depth, arrays of zero-byte items are refused (their item count alone could exhaust memory), and
every decoding failure becomes a :class:`HoodieCorruptedDataError` naming the file.
"""

from __future__ import annotations

import hashlib
import io
import json
import zlib
from typing import Any

import fastavro

from hoodie_ray.avro.codec import zigzag_varint
from hoodie_ray.exceptions import HoodieCorruptedDataError

__all__ = [
    "AVRO_MAGIC",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "is_avro_container",
    "read_single_record",
    "write_single_record",
]

AVRO_MAGIC = b"Obj\x01"
MAX_SCHEMA_BYTES = 1024 * 1024
MAX_SCHEMA_DEPTH = 64
MAX_METADATA_ENTRIES = 64
_SYNC_SIZE = 16
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def is_avro_container(data: bytes) -> bool:
    """True if ``data`` starts with the Avro container magic ``Obj\\x01``."""
    return data[:4] == AVRO_MAGIC


# -- encoding primitives ----------------------------------------------------------------------


def _avro_bytes(b: bytes) -> bytes:
    return zigzag_varint(len(b)) + b


def write_single_record(
    schema: dict[str, Any], record: dict[str, Any], sync: bytes | None = None
) -> bytes:
    """An Avro container file (codec null) with one ``record`` written with ``schema``.

    The header carries the schema as compact JSON in the dict's key order, like Java's
    ``Schema.toString()``. The sync marker defaults to the MD5 of schema and record (Java's is
    random; any 16 bytes are valid), so equal metadata always gives equal bytes and a retried
    commit can be recognised as identical.
    """
    schema_json = json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    parsed = fastavro.parse_schema(schema, _write_hint=False)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, record)
    body = buf.getvalue()
    marker = sync if sync is not None else hashlib.md5(schema_json + body).digest()
    if len(marker) != _SYNC_SIZE:
        raise ValueError("an Avro sync marker has 16 bytes")
    out = bytearray(AVRO_MAGIC)
    out += zigzag_varint(1)  # one metadata entry
    out += _avro_bytes(b"avro.schema") + _avro_bytes(schema_json)
    out += zigzag_varint(0)
    out += marker
    out += zigzag_varint(1) + zigzag_varint(len(body)) + body + marker
    return bytes(out)


# -- decoding ------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def fail(self, why: str) -> HoodieCorruptedDataError:
        return HoodieCorruptedDataError(f"corrupt Avro file {self.what}: {why}")

    def long(self) -> int:
        shift = 0
        acc = 0
        for _ in range(10):
            if self.pos >= len(self.data):
                raise self.fail("truncated")
            b = self.data[self.pos]
            self.pos += 1
            acc |= (b & 0x7F) << shift
            if not b & 0x80:
                return (acc >> 1) ^ -(acc & 1)
            shift += 7
        raise self.fail("varint too long")

    def take(self, n: int) -> bytes:
        if n < 0 or n > len(self.data) - self.pos:
            raise self.fail(f"length {n} exceeds the remaining {len(self.data) - self.pos} bytes")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out


def _schema_depth_ok(node: Any, depth: int, what: str) -> None:
    if depth > MAX_SCHEMA_DEPTH:
        raise HoodieCorruptedDataError(
            f"corrupt Avro file {what}: schema nested deeper than {MAX_SCHEMA_DEPTH}"
        )
    if isinstance(node, dict):
        for v in node.values():
            _schema_depth_ok(v, depth + 1, what)
    elif isinstance(node, list):
        for v in node:
            _schema_depth_ok(v, depth + 1, what)


def _zero_size(node: Any, named: dict[str, Any], seen: frozenset[str]) -> bool:
    """True if values of this schema can encode to zero bytes."""
    if isinstance(node, str):
        if node == "null":
            return True
        if node in _PRIMITIVES:
            return False
        target = named.get(node)
        if target is None or node in seen:
            return False
        return _zero_size(target, named, seen | {node})
    if isinstance(node, list):
        return False  # a union always encodes its branch index
    if isinstance(node, dict):
        t = node.get("type")
        if t == "record" or t == "error":
            return all(
                _zero_size(f.get("type"), named, seen)
                for f in node.get("fields", [])
                if isinstance(f, dict)
            )
        if t == "fixed":
            return node.get("size") == 0
        if t in ("array", "map", "enum"):
            return False
        return _zero_size(t, named, seen)
    return False


def _collect_named(node: Any, named: dict[str, Any]) -> None:
    if isinstance(node, dict):
        t = node.get("type")
        if t in ("record", "error", "fixed", "enum") and isinstance(node.get("name"), str):
            name = node["name"]
            named[name] = node
            ns = node.get("namespace")
            if isinstance(ns, str) and ns and "." not in name:
                named[f"{ns}.{name}"] = node
        for v in node.values():
            _collect_named(v, named)
    elif isinstance(node, list):
        for v in node:
            _collect_named(v, named)


def _check_arrays(node: Any, named: dict[str, Any], what: str) -> None:
    if isinstance(node, dict):
        if node.get("type") == "array" and _zero_size(node.get("items"), named, frozenset()):
            raise HoodieCorruptedDataError(
                f"corrupt Avro file {what}: array of zero-size items refused"
            )
        for v in node.values():
            _check_arrays(v, named, what)
    elif isinstance(node, list):
        for v in node:
            _check_arrays(v, named, what)


def read_single_record(data: bytes, what: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Decode the first record of an Avro container; returns ``(writer_schema, record)``.

    Args:
        data: the whole file.
        what: the file's name or URI, used in error messages.

    Raises:
        HoodieCorruptedDataError: not an Avro container, or anything about it is malformed.
    """
    r = _Reader(data, what)
    if not is_avro_container(data):
        raise r.fail("no Avro container magic")
    r.pos = 4
    meta = _read_header_metadata(r)
    sync = r.take(_SYNC_SIZE)
    schema, codec = _writer_schema(r, meta)
    block = _read_first_block(r, sync, codec)
    try:
        parsed = fastavro.parse_schema(schema, _write_hint=False)
        record = fastavro.schemaless_reader(io.BytesIO(block), parsed, None)
    except HoodieCorruptedDataError:
        raise
    except (Exception, RecursionError) as e:
        raise r.fail(f"undecodable record ({type(e).__name__}: {e})") from None
    if not isinstance(record, dict):
        raise r.fail("the record is not an Avro record")
    return schema, record


def _read_header_metadata(r: _Reader) -> dict[str, bytes]:
    """The header's metadata map (blocks of key/value pairs, a count of 0 ends it)."""
    meta: dict[str, bytes] = {}
    entries = 0
    while True:
        count = r.long()
        if count == 0:
            return meta
        if count < 0:
            count = -count
            r.long()  # block size in bytes, not needed
        entries += count
        if entries > MAX_METADATA_ENTRIES:
            raise r.fail("too many header metadata entries")
        for _ in range(count):
            key = r.take(r.long())
            value = r.take(r.long())
            meta[key.decode("utf-8", "replace")] = value


def _writer_schema(r: _Reader, meta: dict[str, bytes]) -> tuple[dict[str, Any], str]:
    """The writer schema (parsed, its size, depth and arrays checked) and the codec."""
    raw_schema = meta.get("avro.schema")
    if raw_schema is None:
        raise r.fail("no avro.schema in the header")
    if len(raw_schema) > MAX_SCHEMA_BYTES:
        raise r.fail(f"schema larger than {MAX_SCHEMA_BYTES} bytes")
    codec = meta.get("avro.codec", b"null").decode("utf-8", "replace")
    if codec not in ("null", "deflate"):
        raise r.fail(f"unsupported codec {codec!r}")
    try:
        schema = json.loads(raw_schema.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise r.fail(f"unreadable schema ({type(e).__name__})") from None
    _schema_depth_ok(schema, 0, r.what)
    named: dict[str, Any] = {}
    _collect_named(schema, named)
    _check_arrays(schema, named, r.what)
    return schema, codec


def _read_first_block(r: _Reader, sync: bytes, codec: str) -> bytes:
    """The first data block's bytes, decompressed (a bounded expansion) and sync-checked."""
    count = r.long()
    size = r.long()
    if count < 1:
        raise r.fail("no record in the file")
    block = r.take(size)
    if r.take(_SYNC_SIZE) != sync:
        raise r.fail("sync marker mismatch")
    if codec == "deflate":
        try:
            d = zlib.decompressobj(-15)
            block = d.decompress(block, 16 * len(r.data) + 1024 * 1024)
            if d.unconsumed_tail:
                raise r.fail("deflate block expands beyond the limit")
        except zlib.error as e:
            raise r.fail(f"bad deflate data: {e}") from None
    return block
