"""Writing HFile v3 in the HBase dialect: what Hudi 0.x (and the HBase-backed writer of early
1.x, e.g. the MDT files of hudi-rs's v8 sample) writes through HBase 2.4's ``HFileWriterImpl``
(metadata-table spec 2.2-2.7, the "HBase dialect" notes).

It is the native writer (:mod:`hoodie_ray.hfile.writer`: the KeyValues, the deflating of
data blocks on threads, block headers, index entries, the file info block and the trailer are
its code) with what the dialects do differently named here:

* block checksums: CRC32C (type 2) over every 16 KiB of header + stored payload, and each
  block's ``prevBlockOffset`` is the offset of the previous block *of the same type* (-1 for
  the first);
* data blocks are cut once their KeyValues reach the block size (the entry that crosses it
  stays in the block);
* index keys are full KeyValue keys (``rowLength row familyLength timestamp type``): the first
  data block under its first cell (type Put), every later one under the shortest row between
  the previous block's last row and its first row (HBase's ``getMidpoint``), as a
  "first on row" key (type Maximum, 255);
* file info: entries sorted by their unsigned bytes (HBase's ``FileInfo`` is a sorted map),
  ``hfile.LASTKEY`` the full last key, ``hfile.AVG_KEY_LEN`` over full keys, the creation time
  0 unless given;
* trailer: ``totalUncompressedBytes`` (every block but the data root index, with headers, plus
  the trailer), ``uncompressedDataIndexSize`` is the root index's size, the first and last data
  block offsets -1 in a file without entries, version bytes ``03 00 00 03`` (minor 3).

Only single-level data indexes are written: HBase moves to a multi-level index once the index
reaches 128 KiB (about 3,000 data blocks of 1 MiB), which :func:`write_hbase_hfile` refuses.

Nothing runs Python per entry or per byte: :func:`write_hbase_hfile_arrays` takes the entries
as Arrow columns (the record index's millions of keys), each data block's payload is a slice
of KeyValues one Arrow kernel assembled, GZ payloads are deflated on threads, and the
checksums of all blocks are computed in one call once their sizes are known
(:func:`~hoodie_ray.hfile.checksum.crc32c_chunks`: a compiled kernel or its numpy twin).
:func:`write_hbase_hfile` takes ``(key, value)`` pairs, for small files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from hoodie_ray.exceptions import HoodieInputError, HoodieUnsupportedError
from hoodie_ray.hfile._format import (
    BYTES_PER_CHECKSUM,
    CHECKSUM_SIZE,
    COMPARATOR_CLASS_NAME,
    FI_AVG_KEY_LEN,
    FI_AVG_VALUE_LEN,
    FI_CREATE_TIME,
    FI_KEY_VALUE_VERSION,
    FI_LAST_KEY,
    FI_MAX_MEMSTORE_TS,
    HEADER_SIZE,
    I32,
    I64,
    KEY_OVERHEAD,
    KEY_TAIL,
    KEY_VALUE_VERSION_WITH_MVCC,
    TRAILER_SIZE,
    U16,
    HFileBlockType,
    TrailerField,
    checksum_bytes,
)
from hoodie_ray.hfile.checksum import crc32c, crc32c_chunks
from hoodie_ray.hfile.writer import (
    _ArrowKeyValues,
    _block_bounds,
    _check_codec,
    _check_file_info,
    _check_meta_blocks,
    _file_info_payload,
    _index_entry,
    _KeyValues,
    _stored,
    _stored_data,
    _trailer,
    block_header,
)

__all__ = ["crc32c", "write_hbase_hfile", "write_hbase_hfile_arrays"]

#: HBase's ChecksumType.CRC32C code.
CHECKSUM_CRC32C = 2
#: HFile v3 minor version 3 (checksums in blocks), major 3, as HBase 2.x writes them.
HBASE_VERSION_BYTES = b"\x03\x00\x00\x03"
#: hfile.index.block.max.size: HBase writes a multi-level index past this.
MAX_INDEX_CHUNK = 128 * 1024
#: A "first on row" key's tail: no family, timestamp Long.MAX_VALUE, type Maximum (255).
_FIRST_ON_ROW_TAIL = b"\x00" + I64.pack(0x7FFFFFFFFFFFFFFF) + b"\xff"


def write_hbase_hfile(
    entries: Sequence[tuple[bytes, bytes]],
    *,
    file_info: Mapping[bytes, bytes] | None = None,
    meta_blocks: Mapping[str, bytes] | None = None,
    compression: str = "gz",
    block_size: int = 1 << 20,
    create_time_ms: int = 0,
    comparator: bytes = COMPARATOR_CLASS_NAME,
    allow_empty: bool = False,
) -> bytes:
    """The bytes of an HBase-dialect HFile v3, as Hudi 0.x's ``HoodieAvroHFileWriter`` and
    ``HoodieHFileDataBlock`` write them through HBase 2.4.

    ``entries`` are ``(row key, value)`` pairs strictly ascending by unsigned bytes, each stored
    as a KeyValue with no family, timestamp ``Long.MAX_VALUE``, type Put and MVCC version 0.
    ``file_info`` entries join the writer's own (``MAX_MEMSTORE_TS_KEY``,
    ``KEY_VALUE_VERSION``, ``hfile.LASTKEY``, ``hfile.AVG_KEY_LEN``, ``hfile.AVG_VALUE_LEN``,
    ``hfile.CREATE_TIME_TS``), which they may not replace. ``meta_blocks`` maps names to raw
    bytes, written in name order. ``create_time_ms`` is 0 as Hudi leaves it; ``comparator``
    the trailer's comparator class name. ``allow_empty`` accepts no entries.
    For many entries, :func:`write_hbase_hfile_arrays` takes them column-wise.

    Raises:
        HoodieInputError: entries out of order, bad arguments (named).
        HoodieUnsupportedError: a data index that HBase would split into levels.
    """
    codec = _check_codec(compression, block_size)
    kv = _KeyValues.of(entries, allow_empty)
    return _write(kv, codec, file_info, meta_blocks, block_size, create_time_ms, comparator)


def write_hbase_hfile_arrays(
    rows: pa.Array | pa.ChunkedArray,
    values: pa.Array | pa.ChunkedArray,
    *,
    file_info: Mapping[bytes, bytes] | None = None,
    meta_blocks: Mapping[str, bytes] | None = None,
    compression: str = "gz",
    block_size: int = 1 << 20,
    create_time_ms: int = 0,
    comparator: bytes = COMPARATOR_CLASS_NAME,
    allow_empty: bool = False,
) -> bytes:
    """:func:`write_hbase_hfile` over two Arrow columns: row keys and values (string or
    binary, no nulls, the same length; keys strictly ascending by unsigned bytes). The same
    bytes as :func:`write_hbase_hfile` writes for the same entries, with no Python object per
    entry: the KeyValues are assembled by one Arrow kernel over the columns' buffers, each data
    block's payload is a slice of them.

    Raises:
        HoodieInputError: columns of another type or length, nulls, keys out of order, bad
            arguments (named).
        HoodieUnsupportedError: a data index that HBase would split into levels.
    """
    codec = _check_codec(compression, block_size)
    kv = _ArrowKeyValues.of(rows, values, allow_empty)
    return _write(kv, codec, file_info, meta_blocks, block_size, create_time_ms, comparator)


def _write(
    kv: _KeyValues | _ArrowKeyValues,
    codec: int,
    file_info: Mapping[bytes, bytes] | None,
    meta_blocks: Mapping[str, bytes] | None,
    block_size: int,
    create_time_ms: int,
    comparator: bytes,
) -> bytes:
    extra = _check_file_info(file_info)
    metas = _check_meta_blocks(meta_blocks)
    if not isinstance(comparator, bytes) or not comparator:
        raise HoodieInputError("HFile comparator class name must be non-empty bytes")
    n = kv.count
    sizes = kv.row_lens + kv.value_lens + (KEY_OVERHEAD + 9)
    bounds = _block_bounds(sizes, block_size, crossing_stays=True)
    index_keys = _data_index_keys(kv, bounds)
    out = _Output(codec)
    data_index: list[bytes] = []
    for key, (raw_len, stored) in zip(index_keys, _stored_data(kv, bounds, codec), strict=True):
        offset, size = out.add_stored(HFileBlockType.DATA, stored, raw_len)
        out.last_data = offset
        data_index.append(_index_entry(offset, size, key))
    meta_index = []
    for name, raw in metas:
        offset, size = out.add(HFileBlockType.META, raw)
        meta_index.append(_index_entry(offset, size, name))
    load_on_open = out.offset
    root = b"".join(data_index)
    out.add(HFileBlockType.ROOT_INDEX, root, uncompressed_total=False)
    out.add(HFileBlockType.ROOT_INDEX, b"".join(meta_index))
    file_info_offset = out.offset
    info = {
        FI_MAX_MEMSTORE_TS: I64.pack(0),
        FI_KEY_VALUE_VERSION: I32.pack(KEY_VALUE_VERSION_WITH_MVCC),
        FI_AVG_KEY_LEN: I32.pack((int(kv.row_lens.sum()) + KEY_OVERHEAD * n) // n if n else 0),
        FI_AVG_VALUE_LEN: I32.pack(int(kv.value_lens.sum()) // n if n else 0),
        FI_CREATE_TIME: I64.pack(create_time_ms),
        **extra,
    }
    if n:
        info[FI_LAST_KEY] = _full_key(kv.row(n - 1), KEY_TAIL)
    out.add(HFileBlockType.FILE_INFO, _file_info_payload(info, sorted_keys=True))
    fields: dict[TrailerField, int | bytes] = {
        TrailerField.FILE_INFO_OFFSET: file_info_offset,
        TrailerField.LOAD_ON_OPEN_OFFSET: load_on_open,
        TrailerField.UNCOMPRESSED_DATA_INDEX_SIZE: len(root),
        TrailerField.TOTAL_UNCOMPRESSED_BYTES: out.uncompressed_total + TRAILER_SIZE,
        TrailerField.DATA_INDEX_COUNT: len(data_index),
        TrailerField.META_INDEX_COUNT: len(meta_index),
        TrailerField.ENTRY_COUNT: n,
        TrailerField.NUM_DATA_INDEX_LEVELS: 1,
        TrailerField.FIRST_DATA_BLOCK_OFFSET: 0 if n else -1,
        TrailerField.LAST_DATA_BLOCK_OFFSET: out.last_data if n else -1,
        TrailerField.COMPARATOR_CLASS_NAME: comparator,
        TrailerField.COMPRESSION_CODEC: codec,
    }
    return out.finish(_trailer(fields, HBASE_VERSION_BYTES))


def _data_index_keys(
    kv: _KeyValues | _ArrowKeyValues, bounds: list[tuple[int, int]]
) -> list[bytes]:
    """Each data block's root-index key: the first under its first cell, every later one under
    the midpoint row before it; refused (before any block is built) where HBase's index would
    reach ``MAX_INDEX_CHUNK`` with blocks still to come and so grow a level."""
    keys: list[bytes] = []
    index_size = 8  # InlineBlockWriter's non-root chunk: 4 x (entries + 2) + entries' bytes
    for i, (a, _) in enumerate(bounds):
        if i == 0:
            key = _full_key(kv.row(a), KEY_TAIL)
        else:
            key = _full_key(_midpoint_row(kv.row(a - 1), kv.row(a)), _FIRST_ON_ROW_TAIL)
        keys.append(key)
        index_size += 4 + 12 + len(key)
        if i < len(bounds) - 1 and index_size >= MAX_INDEX_CHUNK and len(keys) >= 16:
            raise HoodieUnsupportedError(
                f"an HBase-dialect HFile of {kv.count} entries in {len(bounds)}+ data blocks "
                "needs a multi-level block index, which hoodie_ray does not write (use a "
                "larger block size)"
            )
    return keys


class _Output:
    """Blocks written so far (header and stored payload; their CRC32C checksums are computed
    for all blocks at once by :meth:`finish`), the previous offset of each block type, the
    running ``totalUncompressedBytes``."""

    def __init__(self, codec: int) -> None:
        self.codec = codec
        self.bodies: list[bytes] = []
        self.offset = 0
        self.prev: dict[bytes, int] = {}
        self.uncompressed_total = 0
        self.last_data = -1

    def add(
        self, magic: bytes, payload: bytes, *, uncompressed_total: bool = True
    ) -> tuple[int, int]:
        """Write one block of ``payload``; its (offset, on-disk size with header)."""
        return self.add_stored(
            magic, _stored(payload, self.codec), len(payload), uncompressed_total=uncompressed_total
        )

    def add_stored(
        self, magic: bytes, stored: bytes, raw_len: int, *, uncompressed_total: bool = True
    ) -> tuple[int, int]:
        """Write one block of a payload of ``raw_len`` bytes stored as ``stored``; its
        (offset, on-disk size with header and checksums)."""
        data_size = HEADER_SIZE + len(stored)
        n_check = checksum_bytes(data_size)
        header = block_header(magic, stored, raw_len, self.prev.get(magic, -1), CHECKSUM_CRC32C)
        offset = self.offset
        self.prev[magic] = offset
        self.bodies.append(header + stored)
        self.offset += data_size + n_check
        if uncompressed_total:
            self.uncompressed_total += HEADER_SIZE + raw_len
        return offset, data_size + n_check

    def finish(self, trailer: bytes) -> bytes:
        """The file: each block followed by the CRC32C of every ``BYTES_PER_CHECKSUM`` chunk
        of it (all chunks of all blocks checksummed in one call), then ``trailer``."""
        sizes = np.fromiter(map(len, self.bodies), dtype=np.int64, count=len(self.bodies))
        chunks = -(-sizes // BYTES_PER_CHECKSUM)
        body_starts = np.cumsum(sizes) - sizes
        first_chunk = np.cumsum(chunks) - chunks
        owner = np.repeat(np.arange(len(sizes)), chunks)
        within = (np.arange(int(chunks.sum())) - first_chunk[owner]) * BYTES_PER_CHECKSUM
        lens = np.minimum(sizes[owner] - within, BYTES_PER_CHECKSUM)
        buf = b"".join(self.bodies)
        crcs = crc32c_chunks(np.frombuffer(buf, dtype=np.uint8), body_starts[owner] + within, lens)
        sums = crcs.astype(">u4").tobytes()
        ends = np.cumsum(chunks * CHECKSUM_SIZE)
        starts = (ends - chunks * CHECKSUM_SIZE).tolist()
        pieces: list[bytes] = [b""] * (2 * len(self.bodies) + 1)
        pieces[0:-1:2] = self.bodies
        pieces[1::2] = [sums[a:b] for a, b in zip(starts, ends.tolist(), strict=True)]
        pieces[-1] = trailer
        self.bodies = []
        return b"".join(pieces)


def _full_key(row: bytes, tail: bytes) -> bytes:
    return U16.pack(len(row)) + row + tail


def _midpoint_row(left: bytes, right: bytes) -> bytes:
    """HBase's ``getMinimumMidpointArray``: the shortest row ``r`` with ``left < r <= right``
    it finds (Java's signed byte arithmetic kept)."""
    m = min(len(left), len(right))
    i = 0
    while i < m and left[i] == right[i]:
        i += 1
    if i >= m:
        return right[: i + 1]
    diff = left[i] - 256 if left[i] >= 128 else left[i]  # Java's signed byte
    if (diff & 0xFF) < 0xFF and diff + 1 < right[i]:
        return left[:i] + bytes([(diff + 1) & 0xFF])
    return right[: i + 1]
