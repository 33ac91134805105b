"""A base file's Parquet footer as the reader keeps it: without its keys' bloom filter.

A Hudi base file's footer carries the bloom filter of its record keys in its key-value
metadata (``org.apache.hudi.bloomfilter``, ~430 KB at Java's defaults), while the rest of a
small file's footer is a few KB. Reading rows never needs the filter (the bloom index reads
footers on its own, :func:`~hoodie_ray.index.bloom_filter.footer_bloom_filter`), so the
reader keeps each footer parsed without the filter's value: the footer cache
(``file_slice_reader.PARQUET_FOOTERS``) then holds thousands of small files' footers where
it held ~150.

The value is cut from the footer's Thrift compact bytes, where the entry is the field header
``0x18`` (field 1, binary), the key's varint length and bytes, ``0x18`` (field 2), the
value's varint length and bytes, and the struct's stop ``0x00``. The lean footer is kept
only when (1) the entry's bytes up to its value occur once in the footer, (2) the lean
bytes parse, (3) they hold the key with an empty value, and (4) from the cut to the footer's
end they are exactly the canonical encoding of what the parse holds there: the entry's
stop, the key-value entries after it, ``created_by``, the column orders and the struct's
stop. Key-value metadata is the last part of a footer but those two fields as Java's,
Spark's, Flink's and pyarrow's writers write it, so their footers pass. Values a user
controls are statistics, column names and the record keys' min and max, which Hudi's
writers put in the footer only beside the filter: beside it, a copy of the entry in any of
them makes two and fails (1); in a file without the filter, statistics and names come
before the key-value entries, and a cut in them leaves the writer's own bytes after it,
which fail (4). A footer with anything else at its end (encryption's fields 8 and 9, fields
of newer formats) is parsed whole; so is one that fails any check.
"""

from __future__ import annotations

import itertools
import os
import struct
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_ray.avro.codec import unsigned_varint
from hoodie_ray.hfile._format import FormatError, decode_varint
from hoodie_ray.index.bloom_filter import BLOOM_FILTER_FOOTER_KEY, LEGACY_BLOOM_FILTER_FOOTER_KEY

__all__ = ["ReadAt", "footer_charge", "local_footer", "read_footer"]

#: The last four bytes of a Parquet file with a plain (unencrypted) footer.
MAGIC = b"PAR1"
#: Bytes read from a file's end at first: most footers without a bloom filter fit.
TAIL_BYTES = 64 << 10
#: Thrift compact field header of a ``KeyValue``'s key and value: delta 1, type binary (8).
_BINARY_FIELD = 0x18
_STOP = 0x00
#: Thrift compact type codes of a list and a struct.
_LIST = 0x09
_STRUCT = 0x0C
_KEYS = tuple(k.encode() for k in (BLOOM_FILTER_FOOTER_KEY, LEGACY_BLOOM_FILTER_FOOTER_KEY))
_PATTERNS = tuple(
    bytes([_BINARY_FIELD]) + unsigned_varint(len(k)) + k + bytes([_BINARY_FIELD]) for k in _KEYS
)


#: ``read_at(nbytes, offset)``: a file's bytes (fewer only at its end).
ReadAt = Callable[[int, int], bytes]

#: What a parsed footer holds in memory beyond its Thrift bytes: measured ~6 KB a footer and
#: ~0.9-1.5 KB a column chunk (pyarrow 26; 5 to 200 columns, 1 to 50 row groups).
FOOTER_OVERHEAD_BYTES = 8 << 10
COLUMN_CHUNK_BYTES = 1 << 10


def footer_charge(md: pq.FileMetaData) -> int:
    """The bytes a parsed footer is taken to hold in memory (the footer cache's size of it)."""
    chunks = md.num_columns * max(md.num_row_groups, 1)
    return md.serialized_size + FOOTER_OVERHEAD_BYTES + COLUMN_CHUNK_BYTES * chunks


def _footer_bytes(read_at: ReadAt, size: int, first: int = TAIL_BYTES) -> bytes | None:
    """The Thrift bytes of a file's footer (``size``: the file's) in at most two reads, the
    first of the file's last ``first`` bytes, or None where the file's end is not a plain
    Parquet footer (too short, encrypted, corrupt)."""
    tail = read_at(min(size, first), max(0, size - first))
    if size < 12 or len(tail) < 8 or tail[-4:] != MAGIC:
        return None
    (n,) = struct.unpack("<I", tail[-8:-4])
    if n + 12 > size:
        return None
    if n + 8 <= len(tail):
        return tail[-8 - n : -8]
    if len(tail) == 8:
        footer = read_at(n, size - 8 - n)
    else:
        start = size - 8 - n
        footer = read_at(size - len(tail) - start, start) + tail[:-8]
    return footer if len(footer) == n else None


def _parse(footer: bytes) -> pq.FileMetaData | None:
    """pyarrow's parse of a footer's Thrift bytes (over a made-up file: the parse that
    checks what it reads), or None where they do not parse."""
    try:
        return pq.read_metadata(pa.BufferReader(footer + struct.pack("<I", len(footer)) + MAGIC))
    except (OSError, ValueError, pa.ArrowException):
        return None


def _canonical_varint(buf: bytes, at: int) -> tuple[int, int]:
    """The varint at ``at`` and the position after it; FormatError where it is not the
    shortest encoding of its value."""
    value, after = decode_varint(buf, at, len(buf))
    if after - at != len(unsigned_varint(value)):
        raise FormatError("a varint longer than its value needs")
    return value, after


def _canonical_tail(lean: bytes, at: int, md: pq.FileMetaData) -> bool:
    """Whether ``lean`` from ``at`` (the first emptied value) to its end is what Java's,
    Spark's, Flink's and pyarrow's writers put there, and what ``md`` (its parse) holds: the
    emptied value and its entry's stop, key-value entries whose values ``md`` has, its
    ``created_by`` (field 6), one column order a leaf column (field 7; older writers write
    none), and the struct's stop as the last byte."""
    kv = md.metadata or {}
    try:
        if lean[at : at + 2] != bytes([0, _STOP]):
            return False
        pos, created = at + 2, None
        while pos < len(lean) and lean[pos] == _BINARY_FIELD:
            n, pos = _canonical_varint(lean, pos + 1)
            first, pos = lean[pos : pos + n], pos + n
            if pos >= len(lean) or lean[pos] != _BINARY_FIELD:
                created = first  # not a key-value entry's value: field 6
                break
            n, pos = _canonical_varint(lean, pos + 1)
            value, pos = lean[pos : pos + n], pos + n
            if pos >= len(lean) or lean[pos] != _STOP or kv.get(first) != value:
                return False
            pos += 1
        if (created or b"") != (md.created_by or "").encode():
            return False
        n = md.num_columns
        size = bytes([n << 4 | _STRUCT]) if n < 15 else bytes([0xF0 | _STRUCT]) + unsigned_varint(n)
        orders = bytes([(0x10 if created else 0x20) | _LIST]) + size + b"\x1c\x00\x00" * n
        if lean.startswith(orders, pos):
            pos += len(orders)
        return pos == len(lean) - 1 and lean[pos] == _STOP
    except (FormatError, UnicodeDecodeError):  # created_by: a string pyarrow decodes as UTF-8
        return False


def _bloom_cuts(footer: bytes) -> list[tuple[int, int, bytes]] | None:
    """``(start, end, key)`` of the value of each bloom filter entry in ``footer`` (its
    varint length and bytes), in the footer's order; None where an entry's leading bytes occur
    more than once or its value does not end an entry."""
    cuts = []
    for key, pattern in zip(_KEYS, _PATTERNS, strict=True):
        at = footer.find(pattern)
        if at < 0:
            continue
        if footer.rfind(pattern) != at:
            return None
        start = at + len(pattern)
        try:
            length, value_at = decode_varint(footer, start, len(footer))
        except FormatError:
            return None
        end = value_at + length
        if end >= len(footer) or footer[end] != _STOP:
            return None
        cuts.append((start, end, key))
    cuts.sort()
    if any(b[0] < a[1] for a, b in itertools.pairwise(cuts)):
        return None  # one entry's value holds the other's bytes
    return cuts


def read_footer(read_at: ReadAt, size: int, first: int = TAIL_BYTES) -> pq.FileMetaData | None:
    """A file's footer (``read_at``: its bytes, ``size``: its size) parsed without its bloom
    filter's value where that is certain to be right (its key kept, empty), else parsed
    whole; None where the file's end is not a plain Parquet footer or does not parse
    (pyarrow's own open of the file then raises what is wrong with it). ``first``: the bytes
    read from the file's end at first (where a read costs a request, enough for most footers
    without a bloom filter; where it is a system call, the length and magic alone)."""
    raw = _footer_bytes(read_at, size, first)
    if raw is None:
        return None
    cuts = _bloom_cuts(raw)
    if not cuts:
        return _parse(raw)
    parts, last = [], 0
    for start, end, _ in cuts:
        parts += [raw[last:start], b"\x00"]
        last = end
    lean = b"".join([*parts, raw[last:]])
    md = _parse(lean)
    if (
        md is None
        or any((md.metadata or {}).get(k) != b"" for _, _, k in cuts)
        or not _canonical_tail(lean, cuts[0][0], md)
    ):
        return _parse(raw)
    return md


def local_footer(path: str, size: int) -> pq.FileMetaData | None:
    """:func:`read_footer` of a local file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_footer(lambda n, at: os.pread(fd, n, at), size, first=8)
    finally:
        os.close(fd)
