"""A base file's Parquet footer as the reader keeps it: without its keys' bloom filter.

A Hudi base file's footer carries the bloom filter of its record keys in its key-value
metadata (``org.apache.hudi.bloomfilter``, ~430 KB at Java's defaults), while the rest of a
small file's footer is a few KB. Reading rows never needs the filter (the bloom index reads
footers on its own, :func:`~hoodie_ray.index.bloom_filter.footer_bloom_filter`), so the
reader keeps each footer parsed again without the filter's value: the footer cache
(``file_slice_reader.PARQUET_FOOTERS``) then holds thousands of small files' footers where
it held ~150.

The value is cut from the footer's Thrift compact bytes. pyarrow parses the whole footer
first, which gives the value; the key-value entry's bytes are then known exactly (field
header ``0x18``, the key's varint length and bytes, ``0x18``, the value's varint length and
bytes, the struct's stop ``0x00``), and the cut is made only where those bytes occur exactly
once, so it falls on the entry itself (a value holding a copy of them makes two). The lean
footer is parsed and must equal the whole one but for the emptied value; anything else keeps
the whole footer.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_ray.avro.codec import unsigned_varint
from hoodie_ray.index.bloom_filter import BLOOM_FILTER_FOOTER_KEY, LEGACY_BLOOM_FILTER_FOOTER_KEY

__all__ = [
    "ReadAt",
    "drop_bloom_filters",
    "footer_charge",
    "local_footer",
    "read_footer",
]

#: The last four bytes of a Parquet file with a plain (unencrypted) footer.
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

#: What a parsed footer holds in memory beyond its Thrift bytes: measured ~6 KB a footer and
#: ~0.9-1.5 KB a column chunk (pyarrow 26; 5 to 200 columns, 1 to 50 row groups).
FOOTER_OVERHEAD_BYTES = 8 << 10
COLUMN_CHUNK_BYTES = 1 << 10


def footer_charge(md: pq.FileMetaData) -> int:
    """The bytes a parsed footer is taken to hold in memory (the footer cache's size of it)."""
    chunks = md.num_columns * max(md.num_row_groups, 1)
    return md.serialized_size + FOOTER_OVERHEAD_BYTES + COLUMN_CHUNK_BYTES * chunks


def _footer_bytes(read_at: ReadAt, size: int) -> bytes | None:
    """The Thrift bytes of a file's footer (``size``: the file's) in at most two reads, or
    None where the file's end is not a plain Parquet footer (too short, encrypted, corrupt)."""
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


def _parse(footer: bytes) -> pq.FileMetaData | None:
    try:
        return pq.read_metadata(pa.BufferReader(footer + struct.pack("<I", len(footer)) + MAGIC))
    except (OSError, ValueError, pa.ArrowException):
        return None


def drop_bloom_filters(footer: bytes, kv: Mapping[bytes, bytes]) -> tuple[bytes, list[bytes]]:
    """``footer`` (Thrift bytes whose parse gave the key-value metadata ``kv``) with the
    values of Hudi's bloom filter keys emptied, and the keys whose values were; a key whose
    entry's bytes are not found exactly once is left as it is."""
    emptied = []
    for key, pattern in zip(_KEYS, _PATTERNS, strict=True):
        value = kv.get(key)
        if not value:
            continue
        entry = pattern + unsigned_varint(len(value)) + value + bytes([_STOP])
        at = footer.find(entry)
        if at < 0 or footer.find(entry, at + 1) >= 0:
            continue
        start = at + len(pattern)
        footer = footer[:start] + b"\x00" + footer[at + len(entry) - 1 :]
        emptied.append(key)
    return footer, emptied


def read_footer(read_at: ReadAt, size: int) -> pq.FileMetaData | None:
    """A file's footer (``read_at``: its bytes, ``size``: its size) parsed without its bloom
    filter's value where that is safe (its key kept, empty), else parsed whole; None where
    the file's end is not a plain Parquet footer or does not parse (pyarrow's own open of the
    file then raises what is wrong with it)."""
    raw = _footer_bytes(read_at, size)
    whole = None if raw is None else _parse(raw)
    if raw is None or whole is None:
        return None
    kv = whole.metadata or {}
    footer, emptied = drop_bloom_filters(raw, kv)
    if not emptied:
        return whole
    lean = _parse(footer)
    if lean is None:
        return whole
    expected = {k: (b"" if k in emptied else v) for k, v in kv.items()}
    same = (
        (lean.metadata or {}) == expected
        and lean.num_rows == whole.num_rows
        and lean.num_row_groups == whole.num_row_groups
        and lean.num_columns == whole.num_columns
        and lean.created_by == whole.created_by
    )
    return lean if same else whole


def local_footer(path: str, size: int) -> pq.FileMetaData | None:
    """:func:`read_footer` of a local file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_footer(lambda n, at: os.pread(fd, n, at), size)
    finally:
        os.close(fd)
