"""Writing HFile v3 (metadata-table spec sections 2.1-2.8) in both dialects: the native
``hudi-io`` one of Hudi 1.x (:func:`write_hfile`) and the HBase one that Hudi 0.x (and the
HBase-backed writer of early 1.x, e.g. the MDT files of hudi-rs's v8 sample) writes through
HBase 2.4's ``HFileWriterImpl`` (:func:`write_hbase_hfile`, the spec's "HBase dialect" notes).

One pipeline writes both; what the dialects do differently is a :class:`Dialect`, and the two
are its constants :data:`NATIVE` and :data:`HBASE`. The file is built in memory, block by
block, in the order ``HFileWriterImpl`` writes: data blocks, meta blocks, then the
load-on-open section (data root index, meta root index, file info) and the fixed 4096-byte
trailer. Only single-level data indexes are written.

Nothing runs Python per entry or per byte: ``*_arrays`` take the entries as Arrow columns
(the record index's millions of keys) and each data block's payload is a slice of KeyValues
one Arrow kernel assembled (from ``(key, value)`` pairs, C-level list slicing interleaves
them); GZ payloads are deflated on threads, and CRC32C checksums of all blocks are computed in
one call once their sizes are known (:func:`~hoodie_ray.hfile.checksum.crc32c_chunks`).
"""

from __future__ import annotations

import operator
import os
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice, repeat

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.exceptions import HoodieInputError, HoodieUnsupportedError
from hoodie_ray.hfile._format import (
    BLOCK_HEADER,
    BYTES_PER_CHECKSUM,
    CHECKSUM_NULL,
    CHECKSUM_SIZE,
    CODEC_GZ,
    CODEC_NONE,
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
    OFFSET_SIZE,
    PBUF_MAGIC,
    TRAILER_SIZE,
    U16,
    WRITER_FILE_INFO_KEYS,
    HFileBlockType,
    TrailerField,
    checksum_bytes,
    encode_varint,
    encode_vlong,
    gzip_compress,
    proto_bytes_field,
    proto_varint_field,
)
from hoodie_ray.hfile._format import use_kernel as _use_kernel
from hoodie_ray.hfile.checksum import crc32c_chunks
from hoodie_ray.jit import read_only
from hoodie_ray.threads import map_in_pool

__all__ = [
    "HBASE",
    "NATIVE",
    "Dialect",
    "write_hbase_hfile",
    "write_hbase_hfile_arrays",
    "write_hfile",
    "write_hfile_arrays",
]

_CODECS = {"gz": CODEC_GZ, "gzip": CODEC_GZ, "none": CODEC_NONE}
_KV_HEAD_PACK = struct.Struct(">iiH").pack
_MAX_ROW_LEN = 0x7FFF
_MAX_VALUE_LEN = 0x7FFFFFFF - 64
_MVCC_ZERO = b"\x00"

#: HBase's ChecksumType.CRC32C code.
CHECKSUM_CRC32C = 2
#: The trailer's last four bytes: minor version 0 in one byte, major 3 in three.
NATIVE_VERSION_BYTES = b"\x00\x00\x00\x03"
#: HFile v3 minor version 3 (checksums in blocks), major 3, as HBase 2.x writes them.
HBASE_VERSION_BYTES = b"\x03\x00\x00\x03"
#: hfile.index.block.max.size: HBase writes a multi-level index past this.
MAX_INDEX_CHUNK = 128 * 1024
#: A "first on row" key's tail: no family, timestamp Long.MAX_VALUE, type Maximum (255).
_FIRST_ON_ROW_TAIL = b"\x00" + I64.pack(0x7FFFFFFFFFFFFFFF) + b"\xff"


@dataclass(frozen=True)
class Dialect:
    """What an HFile dialect writes its own way; everything else is common to both: the
    KeyValues (no family, timestamp ``Long.MAX_VALUE``, type Put, MVCC version 0), block
    headers and compression, the order of sections, index entries, the file info keys and
    the trailer's other fields. The fields, by the part of the file they shape:

    * block checksums: ``checksum_type`` NULL (zero bytes) or CRC32C (type 2, over every
      16 KiB of header + stored payload); ``chained_prev_offsets``: each block's
      ``prevBlockOffset`` is the offset of the previous block *of the same type* (-1 for the
      first), else -1 in every block;
    * data block cuts: a block's KeyValues are counted as ``row + value + cell_overhead``
      bytes each; it ends before the entry that would cross the block size, or with
      ``crossing_cell_stays`` once they reach it (the entry that crosses it stays in it);
    * index keys: ``rowLength row`` followed by ``key_tail`` (row-only keys, or full KeyValue
      keys ``rowLength row familyLength timestamp type``), each data block under its first
      row, or with ``midpoint_index_keys`` every block after the first under the shortest row
      between the previous block's last row and its first row (HBase's ``getMidpoint``) as a
      "first on row" key (type Maximum, 255); ``max_index_chunk``: refuse an index HBase would
      split into levels;
    * file info: ``sorted_file_info`` by unsigned bytes (HBase's ``FileInfo`` is a sorted map),
      else in the iteration order of Java's ``HashMap``; ``hfile.LASTKEY`` the last row's key
      as the index keys are (``empty_last_key`` in a file without entries, ``None``: no
      entry); ``hfile.AVG_KEY_LEN`` over rows plus ``avg_key_overhead`` bytes each. (The
      creation time defaults differ in the writer functions: now, or 0 as Hudi 0.x leaves it.)
    * trailer: ``total_uncompressed_bytes`` (every block but the data root index, with
      headers, plus the trailer) written or not; ``uncompressedDataIndexSize`` the root
      index's size with ``root_index_size``, else all KeyValues' bytes; ``lastDataBlockOffset``
      ``empty_last_data_block_offset`` in a file without entries; ``version`` the last four
      bytes (the dialects differ in the minor).
    """

    checksum_type: int
    chained_prev_offsets: bool
    cell_overhead: int
    crossing_cell_stays: bool
    key_tail: bytes
    midpoint_index_keys: bool
    max_index_chunk: int | None
    sorted_file_info: bool
    empty_last_key: bytes | None
    avg_key_overhead: int
    total_uncompressed_bytes: bool
    root_index_size: bool
    empty_last_data_block_offset: int
    version: bytes


#: Hudi 1.x's ``hudi-io`` writer (byte for byte as Java writes it).
NATIVE = Dialect(
    checksum_type=CHECKSUM_NULL,
    chained_prev_offsets=False,
    cell_overhead=9,
    crossing_cell_stays=False,
    key_tail=b"",
    midpoint_index_keys=False,
    max_index_chunk=None,
    sorted_file_info=False,
    empty_last_key=b"",  # Java's addKeyLength: no length prefix for the empty last key
    avg_key_overhead=0,
    total_uncompressed_bytes=False,
    root_index_size=False,
    empty_last_data_block_offset=0,
    version=NATIVE_VERSION_BYTES,
)

#: HBase 2.4's ``HFileWriterImpl`` under Hudi 0.x's ``HoodieAvroHFileWriter`` and
#: ``HoodieHFileDataBlock`` (byte for byte as HBase writes it).
HBASE = Dialect(
    checksum_type=CHECKSUM_CRC32C,
    chained_prev_offsets=True,
    cell_overhead=KEY_OVERHEAD + 9,
    crossing_cell_stays=True,
    key_tail=KEY_TAIL,
    midpoint_index_keys=True,
    max_index_chunk=MAX_INDEX_CHUNK,
    sorted_file_info=True,
    empty_last_key=None,
    avg_key_overhead=KEY_OVERHEAD,
    total_uncompressed_bytes=True,
    root_index_size=True,
    empty_last_data_block_offset=-1,
    version=HBASE_VERSION_BYTES,
)


def write_hfile(
    entries: Sequence[tuple[bytes, bytes]],
    *,
    file_info: Mapping[bytes, bytes] | None = None,
    meta_blocks: Mapping[str, bytes] | None = None,
    compression: str = "gz",
    block_size: int = 1 << 20,
    create_time_ms: int | None = None,
    allow_empty: bool = False,
) -> bytes:
    """The bytes of a native-dialect HFile v3 (what Hudi 1.x's ``hudi-io`` writer produces).

    ``entries`` are ``(row key, value)`` pairs, non-empty and strictly ascending by unsigned
    bytes (a :class:`HoodieInputError` names the first key out of order or repeated). Each is
    stored as an HBase KeyValue with no family, timestamp ``Long.MAX_VALUE``, type Put and a
    one-byte MVCC version 0 (spec 2.3). Data blocks are cut when the next entry would push
    ``sum(len(row) + len(value) + 9)`` above ``block_size`` (spec 2.2).

    ``file_info`` entries are added to the writer's own six (``MAX_MEMSTORE_TS_KEY``,
    ``KEY_VALUE_VERSION``, ``hfile.LASTKEY``, ``hfile.AVG_KEY_LEN``, ``hfile.AVG_VALUE_LEN``,
    ``hfile.CREATE_TIME_TS``), which they may not replace. ``meta_blocks`` maps a block name
    (e.g. ``"bloomFilter"``) to its raw bytes; one META block is written per name, in name
    order. ``compression`` is ``"gz"`` or ``"none"`` and applies to every block payload.
    ``create_time_ms`` (epoch millis) defaults to now.

    ``allow_empty=True`` accepts no entries and writes what Java writes then (seen in the
    record-index base files of the v9 sample): no data block, an empty data index,
    ``firstDataBlockOffset`` -1, ``lastDataBlockOffset`` 0 and an empty ``hfile.LASTKEY``.
    """
    kv = _KeyValues.of(entries, allow_empty)
    codec = _check_codec(compression, block_size)
    return _write(
        NATIVE, kv, codec, file_info, meta_blocks, block_size, create_time_ms, COMPARATOR_CLASS_NAME
    )


def write_hfile_arrays(
    rows: pa.Array | pa.ChunkedArray,
    values: pa.Array | pa.ChunkedArray,
    *,
    file_info: Mapping[bytes, bytes] | None = None,
    meta_blocks: Mapping[str, bytes] | None = None,
    compression: str = "gz",
    block_size: int = 1 << 20,
    create_time_ms: int | None = None,
    allow_empty: bool = False,
) -> bytes:
    """:func:`write_hfile` over two Arrow columns: row keys and values (string or binary,
    values also dictionary-encoded; no nulls, the same length; keys strictly ascending by
    unsigned bytes). The bytes are those :func:`write_hfile` writes for the same entries;
    the KeyValues are assembled by Arrow kernels or, for dictionary-encoded values, by a
    compiled one (no Python object per entry)."""
    kv = _ArrowKeyValues.of(rows, values, allow_empty)
    codec = _check_codec(compression, block_size)
    return _write(
        NATIVE, kv, codec, file_info, meta_blocks, block_size, create_time_ms, COMPARATOR_CLASS_NAME
    )


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
    ``HoodieHFileDataBlock`` write them through HBase 2.4 (:data:`HBASE`).

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
        HoodieUnsupportedError: a data index that HBase would split into levels (about 3,000
            data blocks: one of :data:`MAX_INDEX_CHUNK` bytes).
    """
    codec = _check_codec(compression, block_size)
    kv = _KeyValues.of(entries, allow_empty)
    return _write(HBASE, kv, codec, file_info, meta_blocks, block_size, create_time_ms, comparator)


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
    binary, values also dictionary-encoded; no nulls, the same length; keys strictly
    ascending by unsigned bytes). The same bytes as :func:`write_hbase_hfile` writes for the
    same entries, with no Python object per entry: the KeyValues are assembled as
    :func:`write_hfile_arrays` assembles them, each data block's payload is a slice of them.

    Raises:
        HoodieInputError: columns of another type or length, nulls, keys out of order, bad
            arguments (named).
        HoodieUnsupportedError: a data index that HBase would split into levels.
    """
    codec = _check_codec(compression, block_size)
    kv = _ArrowKeyValues.of(rows, values, allow_empty)
    return _write(HBASE, kv, codec, file_info, meta_blocks, block_size, create_time_ms, comparator)


def _write(
    dialect: Dialect,
    kv: _KeyValues | _ArrowKeyValues,
    codec: int,
    file_info: Mapping[bytes, bytes] | None,
    meta_blocks: Mapping[str, bytes] | None,
    block_size: int,
    create_time_ms: int | None,
    comparator: bytes,
) -> bytes:
    """The file of ``kv`` in ``dialect`` (arguments checked here but for the entries and the
    codec, which each writer checks in its own order)."""
    extra_info = _check_file_info(file_info)
    metas = _check_meta_blocks(meta_blocks)
    if not isinstance(comparator, bytes) or not comparator:
        raise HoodieInputError("HFile comparator class name must be non-empty bytes")
    sizes = kv.row_lens + kv.value_lens + dialect.cell_overhead
    bounds = _block_bounds(sizes, block_size, crossing_stays=dialect.crossing_cell_stays)
    index_keys = _data_index_keys(dialect, kv, bounds)  # may refuse before any block is built
    out = _Output(dialect, codec)
    data_index = out.data_blocks(kv, bounds, index_keys)
    meta_index = [out.add(HFileBlockType.META, raw, name) for name, raw in metas]
    load_on_open = out.offset
    root = b"".join(data_index)
    out.add(HFileBlockType.ROOT_INDEX, root, counted=False)
    out.add(HFileBlockType.ROOT_INDEX, b"".join(meta_index))
    file_info_offset = out.offset
    info = _file_info(dialect, kv, extra_info, create_time_ms)
    out.add(
        HFileBlockType.FILE_INFO, _file_info_payload(info, sorted_keys=dialect.sorted_file_info)
    )
    fields: dict[TrailerField, int | bytes] = {
        TrailerField.FILE_INFO_OFFSET: file_info_offset,
        TrailerField.LOAD_ON_OPEN_OFFSET: load_on_open,
        TrailerField.UNCOMPRESSED_DATA_INDEX_SIZE: (
            len(root) if dialect.root_index_size else _data_size(kv.row_lens, kv.value_lens)
        ),
    }
    if dialect.total_uncompressed_bytes:
        fields[TrailerField.TOTAL_UNCOMPRESSED_BYTES] = out.uncompressed_total + TRAILER_SIZE
    fields |= {
        TrailerField.DATA_INDEX_COUNT: len(data_index),
        TrailerField.META_INDEX_COUNT: len(meta_index),
        TrailerField.ENTRY_COUNT: kv.count,
        TrailerField.NUM_DATA_INDEX_LEVELS: 1,
        TrailerField.FIRST_DATA_BLOCK_OFFSET: 0 if kv.count else -1,
        TrailerField.LAST_DATA_BLOCK_OFFSET: out.last_data_block_offset,
        TrailerField.COMPARATOR_CLASS_NAME: comparator,
        TrailerField.COMPRESSION_CODEC: codec,
    }
    return out.finish(_trailer(fields, dialect.version))


@dataclass(frozen=True)
class _KeyValues:
    """The checked entries: row keys, values and their lengths (int64 arrays)."""

    rows: list[bytes]
    values: list[bytes]
    row_lens: np.ndarray
    value_lens: np.ndarray

    @property
    def count(self) -> int:
        return len(self.rows)

    def row(self, i: int) -> bytes:
        return self.rows[i]

    def payload(self, a: int, b: int) -> bytes:
        """The KeyValues of entries ``[a, b)``: one data block's payload."""
        return _data_payload(
            self.rows[a:b], self.values[a:b], self.row_lens[a:b], self.value_lens[a:b]
        )

    @classmethod
    def of(cls, entries: Sequence[tuple[bytes, bytes]], allow_empty: bool) -> _KeyValues:
        rows, values = _split_entries(entries, allow_empty)
        row_lens = np.array(list(map(len, rows)), dtype=np.int64)
        value_lens = np.array(list(map(len, values)), dtype=np.int64)
        _check_lengths(rows, values, row_lens, value_lens)
        _check_sorted(rows)
        return cls(rows, values, row_lens, value_lens)


_HEAD_DTYPE = np.dtype([("key", ">i4"), ("value", ">i4"), ("row", ">u2")])


class _ArrowKeyValues:
    """The checked entries as Arrow columns and their KeyValues in one buffer, so a data
    block's payload is a slice of it. Values that come dictionary-encoded (an index's few
    distinct values) are assembled by the compiled kernel where it runs, each distinct
    value's bytes once; otherwise one Arrow kernel (``binary_join_element_wise``) joins the
    columns."""

    def __init__(
        self,
        rows: pa.Array,
        data: np.ndarray,
        offsets: np.ndarray,
        row_lens: np.ndarray,
        value_lens: np.ndarray,
    ):
        self._rows = rows
        self._data = data  # uint8: every KeyValue, one after the other
        self._offsets = offsets  # int64, count + 1
        self.row_lens = row_lens
        self.value_lens = value_lens

    @classmethod
    def of(
        cls, rows: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray, allow_empty: bool
    ) -> _ArrowKeyValues:
        rows = _as_large_binary(rows, "row key")
        coded = _coded_values(values)
        if coded is None:
            plain: pa.Array | None = _as_large_binary(values, "value")
            value_lens = _lengths(plain)
        else:
            plain, value_lens = None, _lengths(coded[0])[coded[1]]
        n = len(rows)
        if len(values) != n:
            raise HoodieInputError(
                f"HFile columns differ in length: {n} keys, {len(values)} values"
            )
        if not n and not allow_empty:
            raise HoodieInputError("an HFile needs at least one entry (got none)")
        row_lens = _lengths(rows)
        if n:
            if int(row_lens.max()) > _MAX_ROW_LEN:
                i = int(np.argmax(row_lens > _MAX_ROW_LEN))
                r = rows[i].as_py()
                raise HoodieInputError(
                    f"HFile row key {_show(r)} has {len(r)} bytes, more than {_MAX_ROW_LEN}"
                )
            if int(value_lens.max()) > _MAX_VALUE_LEN:
                i = int(np.argmax(value_lens > _MAX_VALUE_LEN))
                raise HoodieInputError(f"HFile value of key {_show(rows[i].as_py())} is too large")
        if coded is not None and n and _use_kernel(n):
            data, offsets, bad = _assembled(rows, row_lens, value_lens, *coded)
            if bad >= 0:
                _not_ascending(rows, bad)
            return cls(rows, data, offsets, row_lens, value_lens)
        if n > 1:
            ok = pc.greater(rows.slice(1), rows.slice(0, n - 1)).to_numpy(zero_copy_only=False)
            if not ok.all():
                _not_ascending(rows, int(np.argmin(ok)) + 1)
        if coded is not None:
            plain = coded[0].take(pa.array(coded[1]))
        heads = np.empty(n, dtype=_HEAD_DTYPE)
        heads["key"] = row_lens + KEY_OVERHEAD
        heads["value"] = value_lens
        heads["row"] = row_lens
        head_col = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(_HEAD_DTYPE.itemsize), n, [None, pa.py_buffer(heads.tobytes())]
        ).cast(pa.large_binary())
        kvs = pc.binary_join_element_wise(
            head_col,
            rows,
            pa.scalar(KEY_TAIL, pa.large_binary()),
            plain,
            pa.scalar(_MVCC_ZERO, pa.large_binary()),
            pa.scalar(b"", pa.large_binary()),  # the separator
        )
        if not n:
            return cls(rows, np.zeros(0, np.uint8), np.zeros(1, np.int64), row_lens, value_lens)
        bufs = kvs.buffers()
        offsets = np.frombuffer(bufs[1], dtype=np.int64)[kvs.offset : kvs.offset + n + 1]
        return cls(rows, np.frombuffer(bufs[2], dtype=np.uint8), offsets, row_lens, value_lens)

    @property
    def count(self) -> int:
        return len(self._offsets) - 1

    def row(self, i: int) -> bytes:
        v = self._rows[i].as_py()
        assert isinstance(v, bytes)
        return v

    def payload(self, a: int, b: int) -> bytes:
        """The KeyValues of entries ``[a, b)``: one data block's payload."""
        start, stop = int(self._offsets[a]), int(self._offsets[b])
        return self._data[start:stop].tobytes()


def _data_size(row_lens: np.ndarray, value_lens: np.ndarray) -> int:
    """Bytes of all KeyValues (the trailer's uncompressedDataIndexSize, as Java fills it)."""
    return int(row_lens.sum() + value_lens.sum()) + len(row_lens) * (KEY_OVERHEAD + 9)


def _as_large_binary(col: pa.Array | pa.ChunkedArray, what: str) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if not isinstance(col, pa.Array) or not (
        pa.types.is_binary(col.type)
        or pa.types.is_large_binary(col.type)
        or pa.types.is_string(col.type)
        or pa.types.is_large_string(col.type)
    ):
        raise HoodieInputError(f"HFile {what}s must be an Arrow string or binary array")
    if col.null_count:
        raise HoodieInputError(f"HFile {what}s may not be null")
    return col.cast(pa.large_binary())


def _coded_values(values: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray] | None:
    """A dictionary-encoded value column as ``(distinct values as large_binary, each entry's
    code)``; None for a plain column."""
    if isinstance(values, pa.ChunkedArray):
        if not pa.types.is_dictionary(values.type):
            return None
        values = values.unify_dictionaries().combine_chunks()
    if not isinstance(values, pa.DictionaryArray):
        return None
    if values.null_count:
        raise HoodieInputError("HFile values may not be null")
    distinct = _as_large_binary(values.dictionary, "value")
    return distinct, values.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _assembled(
    rows: pa.Array,
    row_lens: np.ndarray,
    value_lens: np.ndarray,
    distinct: pa.Array,
    codes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The compiled assembly of :class:`_ArrowKeyValues`: ``(KeyValue bytes, their offsets,
    the first entry whose row is not above the one before it or -1)``. Each distinct value
    is joined to the key tail and MVCC byte once; the kernel copies one such piece per
    entry after its head and row."""
    from hoodie_ray.hfile import _jit

    pieces = pc.binary_join_element_wise(
        pa.scalar(KEY_TAIL, pa.large_binary()),
        distinct,
        pa.scalar(_MVCC_ZERO, pa.large_binary()),
        pa.scalar(b"", pa.large_binary()),
    )
    blob, blob_offsets = _buffers(pieces)
    row_data, row_offsets = _buffers(rows)
    offsets = np.zeros(len(row_lens) + 1, dtype=np.int64)
    np.cumsum(row_lens + value_lens + (KEY_OVERHEAD + 8 + len(_MVCC_ZERO)), out=offsets[1:])
    # from Arrow's pool, which keeps freed memory: a fresh page costs more than the copy
    data = np.frombuffer(pa.allocate_buffer(int(offsets[-1])), dtype=np.uint8)
    extra = len(KEY_TAIL) + len(_MVCC_ZERO)
    bad = _jit.key_values(
        row_data,
        row_offsets,
        blob,
        blob_offsets,
        read_only(codes),
        KEY_OVERHEAD,
        extra,
        offsets,
        data,
    )
    return data, offsets, int(bad)


def _buffers(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A large_binary column's data (uint8, read-only) and its offsets rebased to it."""
    bufs = col.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[col.offset : col.offset + len(col) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(1, np.uint8)
    base = int(offsets[0])
    return read_only(data[base:]), read_only(offsets - base if base else offsets)


def _not_ascending(rows: pa.Array, i: int) -> None:
    """Raise the error of row key ``i`` not above row key ``i - 1``."""
    a, b = rows[i - 1].as_py(), rows[i].as_py()
    how = "repeats" if a == b else "sorts before"
    raise HoodieInputError(
        f"HFile keys must be strictly ascending: key {i} {_show(b)} {how} "
        f"the key before it {_show(a)}"
    )


def now_ms() -> int:
    """Epoch milliseconds now: an HFile's ``hfile.CREATE_TIME_TS`` when none is given."""
    return int(time.time() * 1000)


def _lengths(col: pa.Array) -> np.ndarray:
    if not len(col):
        return np.zeros(0, dtype=np.int64)
    offsets = np.frombuffer(col.buffers()[1], dtype=np.int64)[
        col.offset : col.offset + len(col) + 1
    ]
    return np.diff(offsets)


class _Output:
    """The blocks written so far (header and stored payload; their checksums are added for
    all blocks at once by :meth:`finish`), the offset of the next one, the previous offset of
    each block type, the running ``totalUncompressedBytes``. Sections come in the order of
    ``HFileWriterImpl``: data blocks, meta blocks, the load-on-open section, the trailer."""

    def __init__(self, dialect: Dialect, codec: int) -> None:
        self.dialect = dialect
        self.codec = codec
        self.bodies: list[bytes] = []
        self.offset = 0
        self.prev: dict[bytes, int] = {}
        self.uncompressed_total = 0
        self.last_data_block_offset = dialect.empty_last_data_block_offset

    def add(
        self, magic: bytes, payload: bytes, index_key: bytes = b"", *, counted: bool = True
    ) -> bytes:
        """Write one block of ``payload``; return its root-index entry under ``index_key``."""
        stored = _stored(payload, self.codec)
        return self.add_stored(magic, stored, len(payload), index_key, counted=counted)

    def add_stored(
        self,
        magic: bytes,
        stored: bytes,
        raw_len: int,
        index_key: bytes = b"",
        *,
        counted: bool = True,
    ) -> bytes:
        """Write one block of a payload of ``raw_len`` bytes stored as ``stored``; return its
        root-index entry (offset, on-disk size with header and checksums, ``index_key``).
        ``counted``: its header and payload count in ``totalUncompressedBytes``."""
        data_size = HEADER_SIZE + len(stored)
        on_disk = data_size + checksum_bytes(data_size)
        offset = self.offset
        prev = self.prev.get(magic, -1) if self.dialect.chained_prev_offsets else -1
        header = block_header(magic, stored, raw_len, prev, self.dialect.checksum_type)
        self.bodies.append(header + stored)
        self.prev[magic] = offset
        if magic == HFileBlockType.DATA:
            self.last_data_block_offset = offset
        self.offset += on_disk
        if counted:
            self.uncompressed_total += HEADER_SIZE + raw_len
        return _index_entry(offset, on_disk, index_key)

    def data_blocks(
        self, kv: _KeyValues | _ArrowKeyValues, bounds: list[tuple[int, int]], keys: list[bytes]
    ) -> list[bytes]:
        """Write the data blocks of entries ``[start, stop)`` each; return the data index (each
        block under its key of ``keys``)."""
        data = _stored_data(kv, bounds, self.codec)
        return [
            self.add_stored(HFileBlockType.DATA, stored, raw_len, key)
            for key, (raw_len, stored) in zip(keys, data, strict=True)
        ]

    def finish(self, trailer: bytes) -> bytes:
        """The file: each block followed by its checksum bytes, 4 per ``BYTES_PER_CHECKSUM``
        chunk of it (CRC32C: all chunks of all blocks checksummed in one call; NULL: zeros),
        then ``trailer``."""
        sizes = np.fromiter(map(len, self.bodies), dtype=np.int64, count=len(self.bodies))
        chunks = -(-sizes // BYTES_PER_CHECKSUM)
        if self.dialect.checksum_type == CHECKSUM_CRC32C:
            body_starts = np.cumsum(sizes) - sizes
            first_chunk = np.cumsum(chunks) - chunks
            owner = np.repeat(np.arange(len(sizes)), chunks)
            within = (np.arange(int(chunks.sum())) - first_chunk[owner]) * BYTES_PER_CHECKSUM
            lens = np.minimum(sizes[owner] - within, BYTES_PER_CHECKSUM)
            buf = np.frombuffer(b"".join(self.bodies), dtype=np.uint8)
            sums = crc32c_chunks(buf, body_starts[owner] + within, lens).astype(">u4").tobytes()
        else:
            sums = bytes(int(chunks.sum()) * CHECKSUM_SIZE)
        ends = np.cumsum(chunks * CHECKSUM_SIZE)
        starts = (ends - chunks * CHECKSUM_SIZE).tolist()
        pieces: list[bytes] = [b""] * (2 * len(self.bodies) + 1)
        pieces[0:-1:2] = self.bodies
        pieces[1::2] = [sums[a:b] for a, b in zip(starts, ends.tolist(), strict=True)]
        pieces[-1] = trailer
        self.bodies = []
        return b"".join(pieces)


def _data_index_keys(
    dialect: Dialect, kv: _KeyValues | _ArrowKeyValues, bounds: list[tuple[int, int]]
) -> list[bytes]:
    """Each data block's root-index key (one per block, not per entry): the first under its
    first row's key, every later one under the same or (``midpoint_index_keys``) under the
    midpoint row before it; refused (before any block is built) where HBase's index would
    reach ``max_index_chunk`` with blocks still to come and so grow a level."""
    keys: list[bytes] = []
    index_size = 8  # InlineBlockWriter's non-root chunk: 4 x (entries + 2) + entries' bytes
    limit = dialect.max_index_chunk
    for i, (a, _) in enumerate(bounds):
        if i and dialect.midpoint_index_keys:
            key = _row_key(_midpoint_row(kv.row(a - 1), kv.row(a)), _FIRST_ON_ROW_TAIL)
        else:
            key = _row_key(kv.row(a), dialect.key_tail)
        keys.append(key)
        index_size += 4 + 12 + len(key)
        if limit is not None and i < len(bounds) - 1 and index_size >= limit and len(keys) >= 16:
            raise HoodieUnsupportedError(
                f"an HBase-dialect HFile of {kv.count} entries in {len(bounds)}+ data blocks "
                "needs a multi-level block index, which hoodie_ray does not write (use a "
                "larger block size)"
            )
    return keys


def _row_key(row: bytes, tail: bytes) -> bytes:
    """``rowLength row`` + ``tail``: a row-only key (no tail) or a full KeyValue key."""
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


def _trailer(fields: Mapping[TrailerField, int | bytes], version: bytes) -> bytes:
    """The fixed-size trailer: magic, varint length, ``TrailerProto`` (fields in the order
    given), zero padding, then the ``version`` bytes."""
    proto = b"".join(
        proto_bytes_field(f, v) if isinstance(v, bytes) else proto_varint_field(f, v)
        for f, v in fields.items()
    )
    head = HFileBlockType.TRAILER + encode_varint(len(proto)) + proto
    return head + bytes(TRAILER_SIZE - 4 - len(head)) + version


def _check_codec(compression: str, block_size: int) -> int:
    codec = _CODECS.get(compression.lower()) if isinstance(compression, str) else None
    if codec is None:
        raise HoodieInputError(f"HFile compression must be 'gz' or 'none', not {compression!r}")
    if not isinstance(block_size, int) or block_size <= 0:
        raise HoodieInputError(f"HFile block_size must be a positive integer, not {block_size!r}")
    return codec


# -- input checks --------------------------------------------------------------------------------
def _as_bytes(x: object, what: str, i: int) -> bytes:
    if isinstance(x, bytes):
        return x
    if isinstance(x, bytearray | memoryview):
        return bytes(x)
    raise HoodieInputError(f"HFile entry {i}: the {what} must be bytes, not {type(x).__name__}")


def _split_entries(
    entries: Sequence[tuple[bytes, bytes]], allow_empty: bool
) -> tuple[list[bytes], list[bytes]]:
    try:
        rows = [e[0] for e in entries]
        values = [e[1] for e in entries]
    except (TypeError, IndexError, KeyError):
        raise HoodieInputError("HFile entries must be (row key, value) pairs") from None
    if not rows and not allow_empty:
        raise HoodieInputError("an HFile needs at least one entry (got none)")
    if not all(map(isinstance, rows, repeat(bytes))):
        rows = [_as_bytes(r, "row key", i) for i, r in enumerate(rows)]
    if not all(map(isinstance, values, repeat(bytes))):
        values = [_as_bytes(v, "value", i) for i, v in enumerate(values)]
    return rows, values


def _check_lengths(
    rows: list[bytes], values: list[bytes], row_lens: np.ndarray, value_lens: np.ndarray
) -> None:
    if not rows:
        return
    if int(row_lens.max()) > _MAX_ROW_LEN:
        i = int(np.argmax(row_lens > _MAX_ROW_LEN))
        raise HoodieInputError(
            f"HFile row key {_show(rows[i])} has {len(rows[i])} bytes, more than {_MAX_ROW_LEN}"
        )
    if int(value_lens.max()) > _MAX_VALUE_LEN:
        i = int(np.argmax(value_lens > _MAX_VALUE_LEN))
        raise HoodieInputError(f"HFile value of key {_show(rows[i])} is too large")


def _check_sorted(rows: list[bytes]) -> None:
    if all(map(operator.lt, rows, islice(rows, 1, None))):
        return
    for i in range(1, len(rows)):
        if not rows[i - 1] < rows[i]:
            how = "repeats" if rows[i - 1] == rows[i] else "sorts before"
            raise HoodieInputError(
                f"HFile keys must be strictly ascending: key {i} {_show(rows[i])} {how} "
                f"the key before it {_show(rows[i - 1])}"
            )


def _check_file_info(file_info: Mapping[bytes, bytes] | None) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for k, v in (file_info or {}).items():
        if not isinstance(k, bytes) or not isinstance(v, bytes | bytearray | memoryview):
            raise HoodieInputError(f"HFile file info entries must be bytes -> bytes ({k!r})")
        if k in WRITER_FILE_INFO_KEYS:
            raise HoodieInputError(f"HFile file info key {k!r} is set by the writer itself")
        out[k] = bytes(v)
    return out


def _check_meta_blocks(meta_blocks: Mapping[str, bytes] | None) -> list[tuple[bytes, bytes]]:
    out = []
    for name, raw in (meta_blocks or {}).items():
        if not isinstance(name, str) or not name:
            raise HoodieInputError(f"HFile meta block names must be non-empty strings ({name!r})")
        if not isinstance(raw, bytes | bytearray | memoryview):
            raise HoodieInputError(f"HFile meta block {name!r} must be bytes")
        out.append((name.encode("utf-8"), bytes(raw)))
    out.sort()
    return out


def _show(key: bytes, limit: int = 80) -> str:
    return repr(key if len(key) <= limit else key[:limit] + b"...")


# -- building blocks -----------------------------------------------------------------------------
def _block_bounds(
    sizes: np.ndarray, block_size: int, *, crossing_stays: bool = False
) -> list[tuple[int, int]]:
    """[start, stop) of each data block, at least one entry each (keys are unique, so no run
    of equal keys to keep): the longest run whose summed sizes fit in ``block_size`` (the
    native writer cuts before the entry that would cross it), or with ``crossing_stays`` the
    shortest run that reaches it (HBase finishes a block before the next cell once its cells
    reach the size, so the cell that crosses it stays)."""
    cum = np.cumsum(sizes)
    n = len(sizes)
    bounds = []
    start = 0
    while start < n:
        base = int(cum[start - 1]) if start else 0
        if crossing_stays:
            stop = min(int(np.searchsorted(cum, base + block_size, side="left")) + 1, n)
        else:
            stop = max(int(np.searchsorted(cum, base + block_size, side="right")), start + 1)
        bounds.append((start, stop))
        start = stop
    return bounds


def _stored_data(
    kv: _KeyValues | _ArrowKeyValues, bounds: list[tuple[int, int]], codec: int
) -> list[tuple[int, bytes]]:
    """``(payload length, stored payload)`` of each data block. GZ payloads are deflated on
    worker threads (zlib releases the GIL) while the next ones are assembled; the bytes do
    not depend on the threads."""
    payloads = (kv.payload(a, b) for a, b in bounds)
    if codec != CODEC_GZ or len(bounds) < 2 or (os.cpu_count() or 1) < 2:
        return [(len(p), _stored(p, codec)) for p in payloads]
    return map_in_pool(lambda p: (len(p), _stored(p, codec)), payloads)


def _stored(payload: bytes, codec: int) -> bytes:
    """A block's payload as stored: deflated for GZ."""
    return gzip_compress(payload) if codec == CODEC_GZ else payload


def _data_payload(
    rows: list[bytes], values: list[bytes], row_lens: np.ndarray, value_lens: np.ndarray
) -> bytes:
    """The KeyValues of one data block, interleaved with C-level list slicing (no per-entry
    Python code): ``keyLength valueLength rowLength | row | KEY_TAIL | value | MVCC 0``."""
    m = len(rows)
    heads = list(
        map(
            _KV_HEAD_PACK,
            (row_lens + KEY_OVERHEAD).tolist(),
            value_lens.tolist(),
            row_lens.tolist(),
        )
    )
    pieces: list[bytes] = [b""] * (5 * m)
    pieces[0::5] = heads
    pieces[1::5] = rows
    pieces[2::5] = [KEY_TAIL] * m
    pieces[3::5] = values
    pieces[4::5] = [_MVCC_ZERO] * m
    return b"".join(pieces)


def block_header(magic: bytes, stored: bytes, raw_len: int, prev: int, checksum: int) -> bytes:
    """The 33-byte header of a block whose payload of ``raw_len`` bytes is stored as
    ``stored``, followed by ``checksum`` bytes of checksum type ``checksum`` (both dialects)."""
    data_size = HEADER_SIZE + len(stored)
    return BLOCK_HEADER.pack(
        magic,
        len(stored) + checksum_bytes(data_size),
        raw_len,
        prev,
        checksum,
        BYTES_PER_CHECKSUM,
        data_size,
    )


def _index_entry(offset: int, on_disk_size: int, key: bytes) -> bytes:
    return b"".join((OFFSET_SIZE.pack(offset, on_disk_size), encode_vlong(len(key)), key))


def _file_info(
    dialect: Dialect,
    kv: _KeyValues | _ArrowKeyValues,
    extra_info: Mapping[bytes, bytes],
    create_time_ms: int | None,
) -> dict[bytes, bytes]:
    """The file info in the native writer's insertion order: ``MAX_MEMSTORE_TS_KEY`` at open,
    the caller's entries, the rest at close (it decides the order of colliding keys in the
    emulated ``HashMap``, :func:`_java_hashmap_order`; HBase's are sorted)."""
    n = kv.count
    last_key = _row_key(kv.row(n - 1), dialect.key_tail) if n else dialect.empty_last_key
    if create_time_ms is None:
        create_time_ms = now_ms()
    info = {FI_MAX_MEMSTORE_TS: I64.pack(0), **extra_info}
    if last_key is not None:
        info[FI_LAST_KEY] = last_key
    key_bytes = int(kv.row_lens.sum()) + dialect.avg_key_overhead * n
    info[FI_AVG_KEY_LEN] = I32.pack(key_bytes // n if n else 0)
    info[FI_CREATE_TIME] = I64.pack(create_time_ms)
    info[FI_AVG_VALUE_LEN] = I32.pack(int(kv.value_lens.sum()) // n if n else 0)
    info[FI_KEY_VALUE_VERSION] = I32.pack(KEY_VALUE_VERSION_WITH_MVCC)
    return info


def _file_info_payload(info: Mapping[bytes, bytes], *, sorted_keys: bool = False) -> bytes:
    """``PBUF`` + varint length + ``InfoProto`` (one ``BytesBytesPair`` per entry), entries in
    the iteration order of the Java ``HashMap<String, byte[]>`` that the native
    ``HFileFileInfoBlock`` fills, or (``sorted_keys``) by their unsigned bytes as HBase's
    sorted ``FileInfo`` map keeps them: byte for byte as each dialect writes the block."""
    order = sorted(info) if sorted_keys else _java_hashmap_order(list(info))
    body = b"".join(
        proto_bytes_field(1, proto_bytes_field(1, k) + proto_bytes_field(2, info[k])) for k in order
    )
    return PBUF_MAGIC + encode_varint(len(body)) + body


def _java_string_hash(key: bytes) -> int:
    """``String.hashCode`` of ``key`` decoded as UTF-8 (over UTF-16 code units), as int32."""
    h = 0
    units = key.decode("utf-8", "surrogateescape").encode("utf-16-be", "surrogatepass")
    for (u,) in struct.iter_unpack(">H", units):
        h = (31 * h + u) & 0xFFFFFFFF
    return h


def _java_hashmap_order(keys: list[bytes]) -> list[bytes]:
    """Iteration order of a ``java.util.HashMap`` after putting ``keys`` in this order: by
    bucket ``(h ^ h >>> 16) & (capacity - 1)``, then insertion order (resizing keeps it);
    capacity starts at 16 and doubles whenever the size passes 3/4 of it."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2
    spread = [(h ^ (h >> 16)) & (capacity - 1) for h in map(_java_string_hash, keys)]
    order = sorted(range(len(keys)), key=lambda i: (spread[i], i))
    return [keys[i] for i in order]
