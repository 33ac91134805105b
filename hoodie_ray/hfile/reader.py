"""Reading HFile v3, native ``hudi-io`` and HBase dialects (metadata-table spec section 2).

The reader parses the trailer, then the load-on-open section it points to: the root data index
(followed down through intermediate and leaf index blocks when ``numDataIndexLevels > 1``), the
meta index and the file info. Data blocks are found through the index, decompressed one at a
time and split into rows and values with one ``struct.unpack_from`` and two slices per entry.
Index keys may be row-only (``int16 len | row``, native) or full HBase KeyValue keys (HBase
dialect, possibly shortened "fake" keys between blocks); only their row part is compared.
:meth:`HFileReader.columns` gives every entry as two Arrow columns with no Python object per
entry: one walk of each block's entry offsets (compiled, ``hfile/_jit.py``, where numba runs
and the file is large or numba already loaded; a plain loop otherwise), the row and value bytes
gathered by numpy.
"""

from __future__ import annotations

import hashlib
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieUnsupportedError
from hoodie_ray.hfile._format import (
    BLOCK_HEADER,
    CODEC_GZ,
    CODEC_NAMES,
    CODEC_NONE,
    FI_KEY_VALUE_VERSION,
    FI_LAST_KEY,
    FI_MAX_MEMSTORE_TS,
    FI_MAX_TAGS_LEN,
    HEADER_SIZE,
    I32,
    KEY_VALUE_VERSION_WITH_MVCC,
    KV_HEAD,
    MAJOR_VERSION,
    OFFSET_SIZE,
    PBUF_MAGIC,
    TRAILER_SIZE,
    U16,
    FormatError,
    HFileBlockType,
    TrailerField,
    decode_varint,
    decode_vlong,
    gzip_decompress,
    proto_fields,
)
from hoodie_ray.hfile._format import use_kernel as _use_kernel
from hoodie_ray.lru import SizedLru

__all__ = ["HFileReader", "HFileTrailer"]

_MAX_INDEX_LEVELS = 16
_KEY_VALUE_LENS = struct.Struct(">II")
_DECODE_ERRORS = (FormatError, struct.error, IndexError, ValueError, OverflowError)


@dataclass(frozen=True)
class HFileTrailer:
    """The fields of an HFile's ``TrailerProto`` (spec 2.7), plus the version bytes."""

    major_version: int
    minor_version: int
    file_info_offset: int
    load_on_open_data_offset: int
    uncompressed_data_index_size: int | None
    total_uncompressed_bytes: int | None
    data_index_count: int
    meta_index_count: int
    entry_count: int
    num_data_index_levels: int
    first_data_block_offset: int | None
    last_data_block_offset: int | None
    comparator_class_name: str | None
    compression_codec: int


#: blocks asked for at most this many keys are searched in place, not split (get_many)
_FEW_KEYS = 64


class HFileReader:
    """Random and sequential access to the entries of one HFile held in memory.

    ``data`` is the whole file. Opening parses the trailer, the data and meta indexes and the
    file info; entries are decoded one data block at a time when asked for (the last decoded
    block is kept for the next lookup). Bytes that do not decode raise
    :class:`HoodieCorruptedDataError` naming the file; a compression codec other than NONE or
    GZ raises :class:`HoodieUnsupportedError`.
    """

    name: str
    file_info: dict[bytes, bytes]
    entry_count: int
    trailer: HFileTrailer

    def __init__(self, data: bytes | memoryview, name: str = "<hfile>") -> None:
        self.name = name
        view = memoryview(data)
        if view.ndim != 1 or view.format not in ("B", "b", "c"):
            view = view.cast("B")
        self._data = view
        self._cached: tuple[int, list[bytes], list[bytes]] | None = None
        self._inflated: _Inflated | None = None  # the last block read through the cache
        # each cached block's key in INFLATED_BLOCKS by offset: this reader's bytes never
        # change, so a reader kept open (metadata.reader.OPENED_FILES) digests a block once
        self._block_keys: dict[int, tuple[bytes, int]] = {}
        self._last_key: bytes | None = None
        try:
            self._open()
        except _DECODE_ERRORS as e:
            raise self._corrupt(str(e) or type(e).__name__) from None

    # -- public API ------------------------------------------------------------------------
    @property
    def first_key(self) -> bytes | None:
        """The smallest row key, or None for a file without entries."""
        # the first index entry always holds the first block's real first key (the HBase writer
        # only shortens the keys of later blocks)
        return self._index_rows[0] if self._index_rows else None

    @property
    def last_key(self) -> bytes | None:
        """The largest row key, or None for a file without entries."""
        if not self._index_rows:
            return None
        if self._last_key is None:
            rows, _ = self._block(len(self._index_rows) - 1)
            self._last_key = rows[-1] if rows else None
        return self._last_key

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every ``(row key, value)`` in key (file) order."""
        for b in range(len(self._index_rows)):
            rows, values = self._block(b, keep=False)
            yield from zip(rows, values, strict=True)

    def columns(self) -> tuple[pa.Array, pa.Array]:
        """Every row key and value in key (file) order, as two Arrow ``large_binary`` columns
        (the entries of :meth:`items`, split column-wise: no Python object per entry)."""
        compiled = _use_kernel(self.entry_count)
        cols = [self._block_columns(b, compiled) for b in range(len(self._index_rows))]
        return _concat_columns(cols)

    def prefix_columns(self, prefixes: Iterable[bytes]) -> tuple[pa.Array, pa.Array]:
        """:meth:`columns` of the entries whose row key starts with one of ``prefixes``, in
        key order; only the data blocks that may hold such rows are read, and of each only
        the prefix's range of entries is copied out (found by binary search over the block's
        entry spans, which the process's block cache keeps)."""
        compiled = _use_kernel(self.entry_count)
        out: list[tuple[pa.Array, pa.Array]] = []
        for prefix, blocks in self._prefix_blocks(prefixes):
            for b in blocks:
                rows, values = self._block_prefix_columns(b, prefix, compiled)
                if len(rows):
                    out.append((rows, values))
        return _concat_columns(out)

    def _block_prefix_columns(
        self, b: int, prefix: bytes, compiled: bool
    ) -> tuple[pa.Array, pa.Array]:
        """The rows of data block ``b`` that start with ``prefix`` and their values."""
        if not self._fast:
            rows, values = self._block_columns(b, compiled, cached=True)
            hit = pc.starts_with(rows, pattern=prefix)
            return rows.filter(hit), values.filter(hit)
        payload, (row_start, row_len, value_start, value_len) = self._cached_spans(b, compiled)

        def row_at(i: int) -> bytes:
            start = row_start[i]
            return payload[start : start + row_len[i]]

        n = len(row_start)
        lo = bisect_left(range(n), prefix, key=row_at)
        after = _prefix_end(prefix)
        hi = n if after is None else bisect_left(range(n), after, lo=lo, key=row_at)
        buf = np.frombuffer(payload, dtype=np.uint8)
        return (
            _gather(buf, row_start[lo:hi], row_len[lo:hi], compiled),
            _gather(buf, value_start[lo:hi], value_len[lo:hi], compiled),
        )

    def prefix_blocks_for(self, prefixes: Iterable[bytes]) -> dict[int, int]:
        """:meth:`blocks_for` of a :meth:`prefix_columns` lookup."""
        return {b: self._index_sizes[b] for _, bs in self._prefix_blocks(prefixes) for b in bs}

    def _prefix_blocks(self, prefixes: Iterable[bytes]) -> Iterator[tuple[bytes, range]]:
        """Each of ``prefixes`` that no other one extends, in order, with the data blocks
        that may hold rows starting with it."""
        rows_index = self._index_rows
        kept: list[bytes] = []
        for prefix in sorted(set(prefixes)):  # a prefix's extensions sort right after it
            if not (kept and prefix.startswith(kept[-1])):
                kept.append(prefix)
        for prefix in kept:
            # as in scan_prefix: the last block starting below the prefix may hold it; a block
            # whose (possibly shortened) index row is past every prefixed row cannot
            first = max(bisect_left(rows_index, prefix) - 1, 0)
            after = _prefix_end(prefix)
            stop = len(rows_index) if after is None else bisect_left(rows_index, after)
            yield prefix, range(first, stop)

    def _block_columns(
        self, b: int, compiled: bool, cached: bool = False
    ) -> tuple[pa.Array, pa.Array]:
        """Rows and values of data block ``b`` as two ``large_binary`` arrays."""
        offset = self._index_offsets[b]
        try:
            payload = self._read_block(offset, (HFileBlockType.DATA,), f"data block {b}", cached)
            if self._fast:
                buf = np.frombuffer(payload, dtype=np.uint8)
                row_start, row_len, value_start, value_len = self._spans(payload, buf, compiled)
                return (
                    _gather(buf, row_start, row_len, compiled),
                    _gather(buf, value_start, value_len, compiled),
                )
            r_list, v_list = _split_general(payload, self._tags, self._mvcc)
        except FormatError as e:
            raise self._corrupt(str(e)) from None
        except _DECODE_ERRORS as e:
            raise self._corrupt(f"data block {b} at offset {offset}: {e}") from None
        return pa.array(r_list, pa.large_binary()), pa.array(v_list, pa.large_binary())

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or None; reads (at most) the one data block that may hold it."""
        b = self._block_for(key)
        if b < 0:
            return None
        rows, values = self._block(b)
        i = bisect_left(rows, key)
        return values[i] if i < len(rows) and rows[i] == key else None

    def get_many(self, keys: Iterable[bytes]) -> dict[bytes, bytes]:
        """``{key: value}`` for each of ``keys`` present in the file; each data block read once.

        A block asked for few keys (native layout) is not split into rows and values: its
        entry offsets are walked once and each key found by binary search over them."""
        out: dict[bytes, bytes] = {}
        wanted = sorted(set(keys))
        by_block: dict[int, list[bytes]] = {}
        for key in wanted:
            b = self._block_for(key)
            if b >= 0:
                by_block.setdefault(b, []).append(key)
        for b, ks in by_block.items():
            cached = self._cached
            if self._fast and len(ks) <= _FEW_KEYS and not (cached and cached[0] == b):
                self._seek_many(b, ks, out)
                continue
            rows, values = self._block(b)
            for key in ks:
                i = bisect_left(rows, key)
                if i < len(rows) and rows[i] == key:
                    out[key] = values[i]
        return out

    def blocks_for(self, keys: Iterable[bytes]) -> dict[int, int]:
        """``{data block: its size on disk}`` of the blocks a lookup of ``keys`` reads (what
        :meth:`get_many` would read; nothing is read to find them)."""
        out: dict[int, int] = {}
        for key in keys:
            b = self._block_for(key)
            if b >= 0:
                out[b] = self._index_sizes[b]
        return out

    def _seek_many(self, b: int, keys: list[bytes], out: dict[bytes, bytes]) -> None:
        """Find ``keys`` in data block ``b`` by binary search over its entries' row spans
        (found by the compiled walk where numba is loaded, else by the plain one)."""
        payload, spans = self._cached_spans(b, _use_kernel(self.entry_count))
        row_start, row_len, value_start, value_len = spans
        kept = self._inflated if self._inflated and self._inflated.payload is payload else None
        # a key or two are found by the binary search faster than numpy's calls are made
        rows = kept.sortable_rows() if kept is not None and len(keys) >= 4 else None
        if rows is not None:
            keys = _search_sortable(rows, keys, payload, value_start, value_len, out)

        def row_at(i: int) -> bytes:
            start = row_start[i]
            return payload[start : start + row_len[i]]

        n = len(row_start)
        lo = 0
        for key in keys:  # sorted: each search starts where the last one ended
            lo = bisect_left(range(n), key, lo=lo, key=row_at)
            if lo < n and row_at(lo) == key:
                start = int(value_start[lo])
                out[key] = payload[start : start + int(value_len[lo])]

    def _cached_spans(self, b: int, compiled: bool) -> tuple[bytes, _Spans]:
        """Data block ``b`` of a native-layout file, through the process's block cache, and
        its entries' spans (:meth:`_spans`)."""
        offset = self._index_offsets[b]
        try:
            payload = self._read_block(offset, (HFileBlockType.DATA,), f"data block {b}", True)
            return payload, self._spans(payload, None, compiled)
        except FormatError as e:
            raise self._corrupt(str(e)) from None
        except _DECODE_ERRORS as e:
            raise self._corrupt(f"data block {b} at offset {offset}: {e}") from None

    def _spans(self, payload: bytes, buf: np.ndarray | None, compiled: bool) -> _Spans:
        """:func:`_entry_spans` of a native-layout data block (compiled where ``compiled``),
        kept with the block when it came through the process's block cache: the next
        lookup in that block skips the walk."""
        kept = self._inflated if self._inflated and self._inflated.payload is payload else None
        if kept is not None and kept.spans is not None:
            return kept.spans
        spans = None
        if compiled:
            buf = np.frombuffer(payload, dtype=np.uint8) if buf is None else buf
            spans = _entry_spans_compiled(buf, self._fast_extra)
        if spans is None:
            spans = _entry_spans(payload, self._fast_extra)  # raises where it fails
        if kept is not None:
            kept.spans = spans
        return spans

    def scan_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every ``(row key, value)`` whose row key starts with ``prefix``, in key order."""
        n_blocks = len(self._index_rows)
        # the last block starting below the prefix may end with matching rows (bisect_left, so
        # that copies of a row repeated across a block boundary are not skipped)
        first = max(bisect_left(self._index_rows, prefix) - 1, 0)
        for b in range(first, n_blocks):
            rows, values = self._block(b, keep=b == first)
            i = bisect_left(rows, prefix) if b == first else 0
            for j in range(i, len(rows)):
                row = rows[j]
                if not row.startswith(prefix):
                    return
                yield row, values[j]

    def meta_block(self, name: str) -> bytes | None:
        """The raw bytes of the META block called ``name``, or None if there is none."""
        where = self._meta_index.get(name.encode("utf-8"))
        if where is None:
            return None
        try:
            return self._read_block(where[0], (HFileBlockType.META,), f"meta block {name!r}")
        except _DECODE_ERRORS as e:
            raise self._corrupt(str(e)) from None

    @property
    def meta_block_names(self) -> list[str]:
        """Names of the file's META blocks, in index order."""
        return [n.decode("utf-8", "replace") for n in self._meta_index]

    @property
    def data_block_count(self) -> int:
        """Number of data blocks (entries of the bottom index level)."""
        return len(self._index_rows)

    def __repr__(self) -> str:
        return f"HFileReader({self.name!r}, entries={self.entry_count})"

    # -- opening -----------------------------------------------------------------------------
    def _open(self) -> None:
        self.trailer = t = self._read_trailer()
        if t.compression_codec not in (CODEC_GZ, CODEC_NONE):
            codec = CODEC_NAMES.get(t.compression_codec, f"unknown ({t.compression_codec})")
            raise HoodieUnsupportedError(
                f"HFile {self.name} uses compression codec {codec} "
                f"(id {t.compression_codec}); only NONE and GZ are supported"
            )
        self._codec = t.compression_codec
        self.entry_count = t.entry_count
        self._limit = len(self._data) - TRAILER_SIZE  # blocks end before the trailer
        # load-on-open: root data index, meta index, file info
        pos = t.load_on_open_data_offset
        payload, size = self._read_block_sized(pos, (HFileBlockType.ROOT_INDEX,), "root data index")
        keys, offsets, sizes, _ = _root_entries(payload, t.data_index_count)
        if not 1 <= t.num_data_index_levels <= _MAX_INDEX_LEVELS:
            raise FormatError(f"implausible numDataIndexLevels {t.num_data_index_levels}")
        for level in range(t.num_data_index_levels - 1):
            keys, offsets, sizes = self._descend(offsets, level)
        self._index_rows = [_row_of(k) for k in keys]
        self._index_offsets = offsets
        self._index_sizes = sizes
        payload, _ = self._read_block_sized(pos + size, (HFileBlockType.ROOT_INDEX,), "meta index")
        names, m_offsets, m_sizes, _ = _root_entries(payload, t.meta_index_count)
        self._meta_index = {n: (o, s) for n, o, s in zip(names, m_offsets, m_sizes, strict=True)}
        payload, _ = self._read_block_sized(
            t.file_info_offset, (HFileBlockType.FILE_INFO,), "file info"
        )
        self.file_info = _file_info(payload)
        self._configure_kv_layout()
        last = self.file_info.get(FI_LAST_KEY)
        self._last_key = _row_of(last) if last else None
        if self.entry_count and not self._index_rows:
            raise FormatError(f"trailer counts {self.entry_count} entries but no data block")

    def _read_trailer(self) -> HFileTrailer:
        data = self._data
        if len(data) < TRAILER_SIZE:
            raise FormatError(f"{len(data)} bytes, shorter than the {TRAILER_SIZE}-byte trailer")
        start = len(data) - TRAILER_SIZE
        if bytes(data[start : start + 8]) != HFileBlockType.TRAILER:
            raise FormatError("no trailer magic 4096 bytes before the end")
        minor = data[-4]
        major = int.from_bytes(data[-3:], "big")
        if major != MAJOR_VERSION:
            raise HoodieUnsupportedError(
                f"HFile {self.name} has format version {major}.{minor}; only version 3 is supported"
            )
        end = len(data) - 4
        n, pos = decode_varint(data, start + 8, end)
        if pos + n > end:
            raise FormatError("trailer protobuf overruns the trailer")
        f: dict[int, int | bytes] = dict(proto_fields(data[pos : pos + n]))

        def num(field: int, default: int | None = None) -> int:
            v = f.get(field, default)
            if not isinstance(v, int):
                raise FormatError(f"trailer field {field} is missing or not a number")
            return v

        def opt(field: int) -> int | None:
            v = f.get(field)
            if not isinstance(v, int):
                return None
            return v - (1 << 64) if v >= 1 << 63 else v  # int64 -1 is stored as 2**64 - 1

        comparator = f.get(TrailerField.COMPARATOR_CLASS_NAME)
        return HFileTrailer(
            major_version=major,
            minor_version=minor,
            file_info_offset=num(TrailerField.FILE_INFO_OFFSET),
            load_on_open_data_offset=num(TrailerField.LOAD_ON_OPEN_OFFSET),
            uncompressed_data_index_size=opt(TrailerField.UNCOMPRESSED_DATA_INDEX_SIZE),
            total_uncompressed_bytes=opt(TrailerField.TOTAL_UNCOMPRESSED_BYTES),
            data_index_count=num(TrailerField.DATA_INDEX_COUNT, 0),
            meta_index_count=num(TrailerField.META_INDEX_COUNT, 0),
            entry_count=num(TrailerField.ENTRY_COUNT, 0),
            num_data_index_levels=num(TrailerField.NUM_DATA_INDEX_LEVELS, 1),
            first_data_block_offset=opt(TrailerField.FIRST_DATA_BLOCK_OFFSET),
            last_data_block_offset=opt(TrailerField.LAST_DATA_BLOCK_OFFSET),
            comparator_class_name=(
                comparator.decode("utf-8", "replace") if isinstance(comparator, bytes) else None
            ),
            compression_codec=num(TrailerField.COMPRESSION_CODEC, CODEC_NONE),
        )

    def _descend(self, offsets: list[int], level: int) -> tuple[list[bytes], list[int], list[int]]:
        """The entries of the index blocks at ``offsets`` (one level down the index)."""
        keys: list[bytes] = []
        out_offsets: list[int] = []
        out_sizes: list[int] = []
        for off in offsets:
            payload = self._read_block(
                off,
                (HFileBlockType.INTERMEDIATE_INDEX, HFileBlockType.LEAF_INDEX),
                f"index block (level {level + 2})",
            )
            k, o, s = _non_root_entries(payload)
            keys += k
            out_offsets += o
            out_sizes += s
            if len(keys) > len(self._data) // HEADER_SIZE:  # blocks cannot be that many
                raise FormatError(f"index level {level + 2} has more entries than the file blocks")
        return keys, out_offsets, out_sizes

    def _configure_kv_layout(self) -> None:
        """How each key-value ends: optional tags (if ``hfile.MAX_TAGS_LEN`` is present), then
        an MVCC VLong unless ``KEY_VALUE_VERSION`` says otherwise (Hudi's readers assume one)."""
        version = self.file_info.get(FI_KEY_VALUE_VERSION)
        self._mvcc = version is None or (
            len(version) == 4 and I32.unpack(version)[0] == KEY_VALUE_VERSION_WITH_MVCC
        )
        self._tags = FI_MAX_TAGS_LEN in self.file_info
        max_ts = self.file_info.get(FI_MAX_MEMSTORE_TS, b"")
        zero_ts = not any(max_ts)  # all MVCC versions 0 -> each is the single byte 0x00
        self._fast_extra = 1 if self._mvcc else 0
        self._fast = not self._tags and (zero_ts or not self._mvcc)

    # -- blocks ------------------------------------------------------------------------------
    def _corrupt(self, why: str) -> HoodieCorruptedDataError:
        return HoodieCorruptedDataError(f"HFile {self.name} is corrupt: {why}")

    def _read_block_sized(
        self, offset: int, magics: tuple[HFileBlockType, ...], what: str, cached: bool = False
    ) -> tuple[bytes, int]:
        """(uncompressed payload, on-disk size with header) of the block at ``offset``;
        ``cached``: through the process's cache of inflated blocks (point lookups)."""
        data = self._data
        if offset < 0 or offset + HEADER_SIZE > self._limit:
            raise FormatError(f"{what} at offset {offset} lies outside the file's blocks")
        magic, on_disk, size, _prev, _ck_type, _bpc, data_end = BLOCK_HEADER.unpack_from(
            data, offset
        )
        if magic not in magics:
            if magic == HFileBlockType.ENCODED_DATA:
                raise HoodieUnsupportedError(
                    f"HFile {self.name} uses a data block encoding, which is not supported"
                )
            raise FormatError(
                f"{what} at offset {offset}: block magic {magic!r}, not {bytes(magics[0])!r}"
            )
        total = HEADER_SIZE + on_disk
        if (
            on_disk < 0
            or size < 0
            or data_end < HEADER_SIZE
            or data_end > total
            or offset + total > self._limit
        ):
            raise FormatError(f"{what} at offset {offset}: block sizes do not fit the file")
        stored = data[offset + HEADER_SIZE : offset + data_end]
        if self._codec == CODEC_GZ:
            try:
                if cached:
                    key = self._block_keys.get(offset)
                    if key is None:
                        key = self._block_keys[offset] = INFLATED_BLOCKS.key(stored, size)
                    self._inflated = INFLATED_BLOCKS.inflate(stored, size, key)
                    payload = self._inflated.payload
                else:
                    payload = gzip_decompress(stored, size)
            except FormatError as e:
                raise FormatError(f"{what} at offset {offset}: {e}") from None
        else:
            if len(stored) != size:
                raise FormatError(
                    f"{what} at offset {offset}: stored size {len(stored)} is not the "
                    f"uncompressed size {size} of an uncompressed file"
                )
            payload = bytes(stored)
        return payload, total

    def _read_block(
        self, offset: int, magics: tuple[HFileBlockType, ...], what: str, cached: bool = False
    ) -> bytes:
        return self._read_block_sized(offset, magics, what, cached)[0]

    def _block_for(self, key: bytes) -> int:
        """The data block that holds ``key`` if the file has it (-1: before the first key)."""
        return bisect_right(self._index_rows, key) - 1

    def _block(self, b: int, keep: bool = True) -> tuple[list[bytes], list[bytes]]:
        """Rows and values of data block ``b`` (the last one asked for with ``keep`` is cached)."""
        cached = self._cached
        if cached is not None and cached[0] == b:
            return cached[1], cached[2]
        offset = self._index_offsets[b]
        try:
            payload = self._read_block(offset, (HFileBlockType.DATA,), f"data block {b}", keep)
            if self._fast:
                rows, values = _split_fast(payload, self._fast_extra)
            else:
                rows, values = _split_general(payload, self._tags, self._mvcc)
        except FormatError as e:
            raise self._corrupt(str(e)) from None
        except _DECODE_ERRORS as e:
            raise self._corrupt(f"data block {b} at offset {offset}: {e}") from None
        if keep:
            self._cached = (b, rows, values)
        return rows, values


_Spans = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclass
class _Inflated:
    """One cached inflated block, with its entries' spans once a lookup walked them."""

    payload: bytes
    spans: _Spans | None = None
    # its row keys as one fixed-width array (numpy bytes), for blocks sought again; False:
    # not sortable so (a row ending in a NUL byte, which the padding would hide)
    rows: np.ndarray | bool | None = None
    seeks: int = 0

    def sortable_rows(self) -> np.ndarray | None:
        """The block's row keys, NUL-padded to one width, from its second seek on (the
        first is served by binary search over the spans: a block sought once does not pay
        for the array)."""
        self.seeks += 1
        if self.rows is None and self.spans is not None and self.seeks > 1:
            self.rows = _padded_rows(self.payload, self.spans[0], self.spans[1])
        return self.rows if isinstance(self.rows, np.ndarray) else None


class _InflatedBlocks:
    """The process's cache of inflated GZ blocks read by point lookups (the metadata table's
    record and secondary index lookups read the same few blocks query after query), keyed by
    a digest of the compressed bytes and the size, so that a block is never served for other
    bytes, whatever file they came from; least recently used out past ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self._blocks = SizedLru(max_bytes)

    @staticmethod
    def key(stored: bytes | memoryview, size: int) -> tuple[bytes, int]:
        """The cache key of a block's compressed bytes."""
        return (hashlib.sha256(stored).digest(), size)

    def inflate(
        self, stored: bytes | memoryview, size: int, key: tuple[bytes, int] | None = None
    ) -> _Inflated:
        """``gzip_decompress(stored, size)``, from the cache when these bytes were inflated
        (a block's cost counts twice its payload: spans kept with it are about as large);
        ``key``: :meth:`key` of ``stored``, where the caller knows it already."""
        key = key or self.key(stored, size)
        found: _Inflated | None = self._blocks.get(key)
        if found is not None:
            return found
        block = _Inflated(gzip_decompress(stored, size))
        self._blocks.put(key, block, 2 * len(block.payload))
        return block

    def clear(self) -> None:
        self._blocks.clear()


#: Inflated blocks of point lookups kept per process (64 MiB: ~64 record-index blocks).
INFLATED_BLOCKS = _InflatedBlocks(64 << 20)


def _padded_rows(payload: bytes, row_start: np.ndarray, row_len: np.ndarray) -> np.ndarray | bool:
    """Rows ``[row_start, row_start + row_len)`` of ``payload`` as a NUL-padded fixed-width
    bytes array, in the block's (ascending) order; False where a row ends in a NUL byte (its
    padded copy would equal a shorter row's), the block has no rows, or the padded rows
    would take more bytes than the block (rows of very uneven lengths)."""
    n = len(row_start)
    if not n:
        return False
    buf = np.frombuffer(payload, dtype=np.uint8)
    if (row_len == 0).any() or buf[row_start + row_len - 1].min() == 0:
        return False
    width = int(row_len.max())
    if n * width > len(payload):  # a few long rows among short ones: padding would outweigh
        return False
    cols = np.arange(width, dtype=np.int64)
    inside = cols[None, :] < row_len[:, None]
    padded = np.zeros((n, width), dtype=np.uint8)
    padded[inside] = buf[(row_start[:, None] + cols[None, :])[inside]]
    return padded.view(f"S{width}").reshape(n)


def _search_sortable(
    rows: np.ndarray,
    keys: list[bytes],
    payload: bytes,
    value_start: np.ndarray,
    value_len: np.ndarray,
    out: dict[bytes, bytes],
) -> list[bytes]:
    """Find ``keys`` in a block's padded ``rows`` (:func:`_padded_rows`) with one
    ``searchsorted``, putting each found key's value in ``out``; returns the keys this
    cannot decide (those ending in a NUL byte), for the binary search over spans."""
    width = rows.dtype.itemsize
    plain = [k for k in keys if k and k[-1] and len(k) <= width]
    # a key longer than every row, or empty, is in no row; one ending in NUL is left over
    rest = [k for k in keys if k and not k[-1] and len(k) <= width]
    if plain:
        sought = np.array(plain, dtype=rows.dtype)
        at = np.searchsorted(rows, sought)
        inside = at < len(rows)
        hit = np.zeros(len(plain), dtype=bool)
        hit[inside] = rows[at[inside]] == sought[inside]
        for j in np.flatnonzero(hit).tolist():
            i = int(at[j])
            start = int(value_start[i])
            out[plain[j]] = payload[start : start + int(value_len[i])]
    return rest


def _concat_columns(cols: list[tuple[pa.Array, pa.Array]]) -> tuple[pa.Array, pa.Array]:
    if not cols:
        empty = pa.array([], pa.large_binary())
        return empty, empty
    if len(cols) == 1:
        return cols[0]
    return pa.concat_arrays([c[0] for c in cols]), pa.concat_arrays([c[1] for c in cols])


def _prefix_end(prefix: bytes) -> bytes | None:
    """The smallest byte string above every string that starts with ``prefix`` (None: none,
    the prefix is all 0xFF bytes)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


# -- payload decoders ----------------------------------------------------------------------------
def _split_fast(payload: bytes, extra: int) -> tuple[list[bytes], list[bytes]]:
    """Rows and values of a data block whose key-values end with ``extra`` fixed bytes."""
    rows: list[bytes] = []
    values: list[bytes] = []
    add_row = rows.append
    add_value = values.append
    unpack = KV_HEAD.unpack_from
    pos = 0
    end = len(payload)
    while pos < end:
        key_len, value_len, row_len = unpack(payload, pos)
        if key_len < row_len + 2:
            raise FormatError(f"key-value at block position {pos}: row longer than its key")
        start = pos + 10
        add_row(payload[start : start + row_len])
        start = pos + 8 + key_len
        pos = start + value_len
        add_value(payload[start:pos])
        pos += extra
    if pos != end:
        raise FormatError("the last key-value overruns its data block")
    return rows, values


def _entry_spans_compiled(
    buf: np.ndarray, extra: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The compiled :func:`_entry_spans`; None when the block does not decode (the plain
    loop then raises its error)."""
    from hoodie_ray.hfile import _jit

    cap = len(buf) // 10 + 1  # every KeyValue has at least its 10-byte head
    out = [np.empty(cap, dtype=np.int64) for _ in range(4)]
    n = _jit.entry_spans(buf, extra, *out)
    if n < 0:
        return None
    row_start, row_len, value_start, value_len = (a[:n] for a in out)
    return row_start, row_len, value_start, value_len


def _entry_spans(
    payload: bytes, extra: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where each KeyValue's row and value start in a native-layout data block and how long
    they are (checked as :func:`_split_fast` checks them). The loop only finds where each
    KeyValue starts; its lengths are read back column-wise."""
    offs: list[int] = []
    add = offs.append
    unpack = _KEY_VALUE_LENS.unpack_from
    pos = 0
    end = len(payload)
    step = 8 + extra
    while pos < end:
        key_len, v_len = unpack(payload, pos)
        add(pos)
        pos += step + key_len + v_len
    if pos != end:
        raise FormatError("the last key-value overruns its data block")
    buf = np.frombuffer(payload, dtype=np.uint8)
    at = np.array(offs, dtype=np.int64)
    if len(at) and int(at[-1]) + 10 > end:
        raise FormatError("the last key-value overruns its data block")
    key_len = _be(buf, at, 4)
    value_len = _be(buf, at + 4, 4)
    row_len = _be(buf, at + 8, 2)
    bad = np.flatnonzero(key_len < row_len + 2)
    if len(bad):
        raise FormatError(f"key-value at block position {int(at[bad[0]])}: row longer than its key")
    return at + 10, row_len, at + 8 + key_len, value_len


def _be(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The big-endian unsigned integers of ``width`` bytes at positions ``at`` of ``buf``."""
    out = np.zeros(len(at), dtype=np.int64)
    for i in range(width):
        out <<= 8
        out |= buf[at + i]
    return out


def _gather(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, compiled: bool) -> pa.Array:
    """The byte ranges ``[starts[i], starts[i] + lens[i])`` of ``buf`` as a ``large_binary``
    array."""
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    if compiled:
        from hoodie_ray.hfile import _jit

        data = np.empty(total, dtype=np.uint8)
        _jit.gather(buf, starts, lens, offsets, data)
    else:
        # each output byte's source: its range's start, shifted by its place in the range
        src = np.repeat(starts - offsets[:-1], lens) + np.arange(total, dtype=np.int64)
        data = buf[src]
    return pa.Array.from_buffers(
        pa.large_binary(), len(lens), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _split_general(payload: bytes, tags: bool, mvcc: bool) -> tuple[list[bytes], list[bytes]]:
    """Rows and values of a data block with tags and/or multi-byte MVCC VLongs (HBase's
    dialect: one call per key-value, where :func:`_split_fast` inlines it)."""
    rows: list[bytes] = []
    values: list[bytes] = []
    pos = 0
    end = len(payload)
    while pos < end:
        row, value, pos = _key_value_at(payload, pos)
        rows.append(row)
        values.append(value)
        if tags:
            (n_tags,) = U16.unpack_from(payload, pos)
            pos += 2 + n_tags
        if mvcc:
            _, pos = decode_vlong(payload, pos, end)
    if pos != end:
        raise FormatError("the last key-value overruns its data block")
    return rows, values


def _key_value_at(payload: bytes, pos: int) -> tuple[bytes, bytes, int]:
    """Row, value and end of the KeyValue at ``pos`` (before its tags and MVCC version)."""
    key_len, value_len, row_len = KV_HEAD.unpack_from(payload, pos)
    if key_len < row_len + 2:
        raise FormatError(f"key-value at block position {pos}: row longer than its key")
    value_start = pos + 8 + key_len
    value_end = value_start + value_len
    return payload[pos + 10 : pos + 10 + row_len], payload[value_start:value_end], value_end


def _root_entries(payload: bytes, count: int) -> tuple[list[bytes], list[int], list[int], int]:
    """Keys, block offsets, block sizes of the first ``count`` entries of a root index block,
    and the position after them (HBase may append mid-key metadata, which is skipped)."""
    keys: list[bytes] = []
    offsets: list[int] = []
    sizes: list[int] = []
    end = len(payload)
    if count < 0 or count * 13 > end:
        raise FormatError(f"root index block cannot hold {count} entries")
    pos = 0
    for _ in range(count):
        if pos + 12 > end:
            raise FormatError("root index block is truncated")
        off, size = OFFSET_SIZE.unpack_from(payload, pos)
        n, pos = decode_vlong(payload, pos + 12, end)
        if n < 0 or pos + n > end or off < 0 or size < HEADER_SIZE:
            raise FormatError("root index entry does not fit its block")
        keys.append(payload[pos : pos + n])
        offsets.append(off)
        sizes.append(size)
        pos += n
    return keys, offsets, sizes, pos


def _non_root_entries(payload: bytes) -> tuple[list[bytes], list[int], list[int]]:
    """Entries of a leaf or intermediate index block: ``int32 n``, ``n + 1`` int32 entry
    positions (relative to the end of that list), then ``int64 offset | int32 size | key``."""
    end = len(payload)
    (n,) = I32.unpack_from(payload, 0)
    base = 4 + 4 * (n + 1)
    if n < 0 or base > end:
        raise FormatError(f"index block cannot hold {n} entries")
    rel = struct.unpack_from(f">{n + 1}i", payload, 4)
    keys: list[bytes] = []
    offsets: list[int] = []
    sizes: list[int] = []
    for i in range(n):
        start = base + rel[i]
        stop = base + rel[i + 1]
        if not (base <= start and start + 12 <= stop <= end):
            raise FormatError("index block entry positions are inconsistent")
        off, size = OFFSET_SIZE.unpack_from(payload, start)
        if off < 0 or size < HEADER_SIZE:
            raise FormatError("index block entry points outside the file")
        keys.append(payload[start + 12 : stop])
        offsets.append(off)
        sizes.append(size)
    return keys, offsets, sizes


def _row_of(key: bytes) -> bytes:
    """The row of an index or last key: ``int16 rowLength | row | ...`` (the rest, HBase's
    family, qualifier, timestamp and type, is ignored)."""
    if len(key) < 2:
        raise FormatError(f"key {key!r} is shorter than its row length prefix")
    (n,) = U16.unpack_from(key, 0)
    if 2 + n > len(key):
        raise FormatError(f"key {key[:40]!r} is shorter than its row length {n}")
    return key[2 : 2 + n]


def _file_info(payload: bytes) -> dict[bytes, bytes]:
    """``PBUF`` + varint length + ``InfoProto {repeated BytesBytesPair map_entry = 1}``."""
    if payload[:4] != PBUF_MAGIC:
        raise FormatError("file info block does not start with PBUF")
    n, pos = decode_varint(payload, 4, len(payload))
    if pos + n > len(payload):
        raise FormatError("file info protobuf overruns its block")
    out: dict[bytes, bytes] = {}
    for field, entry in proto_fields(payload[pos : pos + n]):
        if field != 1 or not isinstance(entry, bytes):
            continue
        pair = dict(proto_fields(entry))
        first = pair.get(1, b"")
        second = pair.get(2, b"")
        if not isinstance(first, bytes) or not isinstance(second, bytes):
            raise FormatError("file info entry is not a pair of byte strings")
        out[first] = second
    return out
