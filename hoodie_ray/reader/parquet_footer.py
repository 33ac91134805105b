"""A base file's Parquet footer as the reader keeps it: without its keys' bloom filter.

A Hudi base file's footer carries the bloom filter of its record keys in its key-value
metadata (``org.apache.hudi.bloomfilter``, ~430 KB at Java's defaults), while the rest of a
small file's footer is a few KB. Reading rows never needs the filter (the bloom index reads
footers on its own, :func:`~hoodie_ray.index.bloom_filter.footer_bloom_filter`), so the
reader parses the footer with the filter's value cut out of the Thrift bytes: the footer
cache (``file_slice_reader.PARQUET_FOOTERS``) then holds thousands of footers where it held
~150, and a first read skips parsing the filter.

The cut is made on the Thrift compact bytes, where a ``KeyValue`` is the field header
``0x18`` (field 1, binary), the key's varint length and bytes, ``0x18`` (field 2, binary),
the value's varint length and bytes, then the struct's stop ``0x00``. The value is replaced by
an empty one. Key-value metadata is the footer's last variable-size part before
``created_by``, so the last occurrence of a key's bytes is the key-value entry. Anything that
does not have that exact shape, or whose parse does not agree, is left to pyarrow's own
parse of the whole footer (:func:`lean_footer` returns None).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_ray.avro.codec import unsigned_varint
from hoodie_ray.hfile._format import FormatError, decode_varint
from hoodie_ray.index.bloom_filter import BLOOM_FILTER_FOOTER_KEY, LEGACY_BLOOM_FILTER_FOOTER_KEY

__all__ = ["ReadAt", "drop_bloom_filters", "lean_footer", "local_lean_footer"]

MAGIC = b"PAR1"
#: Bytes read from a file's end at first: most footers without a bloom filter fit.
TAIL_BYTES = 64 << 10
#: Thrift compact field header of a ``KeyValue``'s key and value: delta 1, type binary (8).
_BINARY_FIELD = 0x18
_STOP = 0x00
_KEYS = tuple(k.encode() for k in (BLOOM_FILTER_FOOTER_KEY, LEGACY_BLOOM_FILTER_FOOTER_KEY))
_PATTERNS = tuple(
    bytes([_BINARY_FIELD]) + unsigned_varint(len(k)) + k + bytes([_BINARY_FIELD]) for k in _KEYS
)


#: ``read_at(nbytes, offset)``: a file's bytes (fewer only at its end).
ReadAt = Callable[[int, int], bytes]


def _cut(footer: bytes, pattern: bytes) -> tuple[int, int] | None:
    """``(start, end)``: the span of a value in ``footer`` (its varint length and bytes)
    after the last occurrence of ``pattern`` (a key-value entry's bytes up to the value's
    length); None where there is none or the length is not a varint."""
    at = footer.rfind(pattern)
    if at < 1:
        return None
    start = at + len(pattern)
    try:
        length, value_at = decode_varint(footer, start, len(footer))
    except FormatError:
        return None
    return start, value_at + length


def drop_bloom_filters(footer: bytes) -> tuple[bytes, tuple[bytes, ...]]:
    """``footer`` (a FileMetaData's Thrift compact bytes) with the values of Hudi's bloom
    filter keys emptied, and the keys emptied; ``(footer, ())`` where none has the shape of
    a key-value entry."""
    emptied = []
    for key, pattern in zip(_KEYS, _PATTERNS, strict=True):
        span = _cut(footer, pattern)
        if span is None:
            continue
        start, end = span
        if end >= len(footer) or footer[end] != _STOP:
            continue
        footer = footer[:start] + b"\x00" + footer[end:]
        emptied.append(key)
    return footer, tuple(emptied)


def _footer_bytes(read_at: ReadAt, size: int) -> bytes | None:
    """The Thrift bytes of a file's footer (``size``: the file's) in at most two reads, or
    None where the file's end is not a plain Parquet footer (too short, encrypted, corrupt).
    The whole footer is read: only the last occurrence of an entry's bytes is known to be the
    entry (a column's statistics or names before it may hold the same bytes)."""
    tail = read_at(min(size, TAIL_BYTES), max(0, size - TAIL_BYTES))
    if len(tail) < 12 or tail[-4:] != MAGIC:
        return None
    (n,) = struct.unpack("<I", tail[-8:-4])
    if n + 12 > size:
        return None
    if n + 8 <= len(tail):
        return tail[-8 - n : -8]
    first = size - 8 - n
    head = read_at(size - len(tail) - first, first)
    footer = head + tail[:-8]
    return footer if len(footer) == n else None


def lean_footer(read_at: ReadAt, size: int) -> pq.FileMetaData | None:
    """A file's footer (``read_at``: its bytes, ``size``: its size) parsed without its bloom
    filter's value (its key kept, empty), or None where that cannot be done safely
    (pyarrow's whole parse of the file is then what the caller uses, and what raises for a
    corrupt file)."""
    raw = _footer_bytes(read_at, size)
    if raw is None:
        return None
    lean, emptied = drop_bloom_filters(raw)
    try:
        md = pq.read_metadata(pa.BufferReader(lean + struct.pack("<I", len(lean)) + MAGIC))
    except (OSError, ValueError, pa.ArrowException):
        return None
    kv = md.metadata or {}
    # a cut anywhere but in the key-value entry would not parse back to the emptied key
    if any(kv.get(k) != b"" for k in emptied):
        return None
    return md


def local_lean_footer(path: str, size: int) -> pq.FileMetaData | None:
    """:func:`lean_footer` of a local file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return lean_footer(lambda n, at: os.pread(fd, n, at), size)
    finally:
        os.close(fd)
