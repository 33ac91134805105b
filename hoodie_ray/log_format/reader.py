"""Reading the blocks of a log file, with Java's corrupt/partial block detection (spec §4.7).

A block is accepted only if its frame is consistent: ``blockLength`` fits in the file, the
reverse pointer at ``blockLength - 8`` after the length field equals ``blockLength + 6``, and
the next six bytes are another ``#HUDI#`` or the end of the file (fewer than six trailing
bytes count as the end, as in Java). Anything else becomes a :class:`CorruptBlock` running from
the bad block's magic to the next ``#HUDI#`` found after it, or to the end of the file. A frame
that passes these checks but whose insides do not parse (unknown version or type, header
counts or lengths that do not fit, content that overruns) is also a corrupt block. No length
read from the file is trusted before it is checked against what remains.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from hoodie_ray.exceptions import HoodieCorruptedDataError
from hoodie_ray.log_format.blocks import (
    LOG_FORMAT_VERSION,
    MAGIC,
    BlockType,
    CorruptBlock,
    Header,
    HeaderMetadataType,
    LogBlock,
    make_block,
)
from hoodie_ray.storage import Storage

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MIN_BLOCK_LENGTH = 4 + 4 + 4 + 8 + 4 + 8  # version, type, empty header, content len, footer, ptr
_MAX_HEADER_ORDINAL = max(HeaderMetadataType)


#: Log files are read whole; past this size a file is refused rather than allocated
#: (writers roll at ``hoodie.logfile.max.size``, 1 GiB by default).
MAX_LOG_FILE_BYTES = 4 * 1024 * 1024 * 1024


class _BadBlock(Exception):
    """Internal: the frame at hand is not a valid block (becomes a CorruptBlock)."""


class LogReader:
    """The blocks of one log file, in file order.

    Build from raw bytes (``LogReader(data, source=name)``) or from a table's storage
    (:meth:`from_storage`). Iterating yields :class:`LogBlock` objects with ``offset``/``size``
    set; data and delete blocks keep their content and decode it only when asked.
    """

    def __init__(self, data: bytes | bytearray | memoryview, source: str = "<bytes>") -> None:
        # bytes (one copy if needed): magic scans use bytes.find, blocks keep zero-copy views
        self.data = data if isinstance(data, bytes) else bytes(data)
        self.source = source

    @classmethod
    def from_storage(cls, storage: Storage, rel_path: str) -> LogReader:
        """A reader of the log file at ``rel_path`` (relative to the table's base path)."""
        size = storage.size(rel_path)
        if size > MAX_LOG_FILE_BYTES:
            raise HoodieCorruptedDataError(
                f"log file {storage.uri(rel_path)} has {size} bytes, more than a log file may hold "
                f"({MAX_LOG_FILE_BYTES})"
            )
        return cls(storage.read_bytes(rel_path), source=storage.uri(rel_path))

    def __iter__(self) -> Iterator[LogBlock]:
        data = self.data
        size = len(data)
        pos = 0
        while pos < size:
            if bytes(data[pos : pos + len(MAGIC)]) != MAGIC:
                if size - pos < len(MAGIC) and pos > 0:
                    # fewer than 6 trailing bytes after a block: Java stops reading there
                    yield self._corrupt(pos, size, "trailing bytes shorter than a block magic")
                    return
                nxt = self._find_magic(pos + 1)
                yield self._corrupt(pos, nxt, "no block magic where a block should start")
                pos = nxt
                continue
            try:
                block, end = self._parse(pos)
            except _BadBlock as e:
                nxt = self._find_magic(pos + len(MAGIC))
                yield self._corrupt(pos, nxt, str(e), content_from=pos + len(MAGIC))
                pos = nxt
                continue
            yield block
            pos = end

    def blocks(self) -> list[LogBlock]:
        """All blocks of the file."""
        return list(self)

    # -- internals --------------------------------------------------------------------------
    def _find_magic(self, start: int) -> int:
        i = self.data.find(MAGIC, start)
        return len(self.data) if i < 0 else i

    def _corrupt(
        self, start: int, stop: int, reason: str, content_from: int | None = None
    ) -> CorruptBlock:
        lo = start if content_from is None else min(content_from, stop)
        b = CorruptBlock(memoryview(self.data)[lo:stop], reason)
        b.offset, b.size, b.source = start, stop - start, self.source
        return b

    def _parse(self, pos: int) -> tuple[LogBlock, int]:
        data = self.data
        size = len(data)
        p = pos + len(MAGIC)
        if p + 8 > size:
            raise _BadBlock("truncated block length")
        (block_length,) = _I64.unpack_from(data, p)
        p += 8
        end = p + block_length
        if block_length < _MIN_BLOCK_LENGTH or end > size:
            raise _BadBlock(f"block length {block_length} does not fit in the file")
        (pointer,) = _I64.unpack_from(data, end - 8)
        if pointer - len(MAGIC) != block_length:
            raise _BadBlock(f"reverse pointer {pointer} does not match block length {block_length}")
        if size - end >= len(MAGIC) and bytes(data[end : end + len(MAGIC)]) != MAGIC:
            raise _BadBlock("no block magic or end of file after the block")
        frame_end = end - 8
        (version,) = _I32.unpack_from(data, p)
        p += 4
        if version != LOG_FORMAT_VERSION:
            raise _BadBlock(f"log format version {version} is not supported")
        (type_ord,) = _I32.unpack_from(data, p)
        p += 4
        if not 0 <= type_ord <= max(BlockType) or type_ord == BlockType.CORRUPT:
            raise _BadBlock(f"unknown block type {type_ord}")
        header, p = self._kv(p, frame_end, "header")
        if p + 8 > frame_end:
            raise _BadBlock("truncated content length")
        (content_len,) = _I64.unpack_from(data, p)
        p += 8
        if content_len < 0 or p + content_len + 4 > frame_end:
            raise _BadBlock(f"content length {content_len} does not fit in the block")
        content = memoryview(data)[p : p + content_len]
        p += content_len
        footer, p = self._kv(p, frame_end, "footer")
        if p != frame_end:
            raise _BadBlock(f"{frame_end - p} unexpected bytes before the reverse pointer")
        try:
            block = make_block(BlockType(type_ord), header, footer, content)
        except HoodieCorruptedDataError as e:
            raise _BadBlock(str(e)) from None
        block.offset, block.size, block.source = pos, end - pos, self.source
        return block, end

    def _kv(self, p: int, limit: int, what: str) -> tuple[Header, int]:
        data = self.data
        if p + 4 > limit:
            raise _BadBlock(f"truncated {what}")
        (count,) = _I32.unpack_from(data, p)
        p += 4
        if count < 0 or count > (limit - p) // 8:
            raise _BadBlock(f"{what} entry count {count} does not fit in the block")
        out: Header = {}
        for _ in range(count):
            key, length = struct.unpack_from(">ii", data, p)
            p += 8
            if not 0 <= key <= _MAX_HEADER_ORDINAL:
                raise _BadBlock(f"unknown {what} key {key}")
            if length < 0 or p + length > limit:
                raise _BadBlock(f"{what} value length {length} does not fit in the block")
            try:
                out[HeaderMetadataType(key)] = bytes(data[p : p + length]).decode("utf-8")
            except UnicodeDecodeError:
                raise _BadBlock(f"{what} value is not UTF-8") from None
            p += length
        return out, p


def read_log_file(storage: Storage, rel_path: str) -> list[LogBlock]:
    """Every block of the log file at ``rel_path`` (see :class:`LogReader`)."""
    return LogReader.from_storage(storage, rel_path).blocks()


def read_log_bytes(data: bytes | bytearray | memoryview, source: str = "<bytes>") -> list[LogBlock]:
    """Every block of a log file given as bytes (``source`` names it in errors)."""
    return LogReader(data, source).blocks()
