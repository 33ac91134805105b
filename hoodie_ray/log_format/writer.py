"""Appending blocks to log files ``.<fileId>_<instant>.log.<version>_<writeToken>``.

:class:`LogWriter` writes whole serialized blocks in one storage call per
:meth:`~LogWriter.append_blocks`, so a crash leaves at most one partial block at the end of a
file, which readers detect and skip (spec §4.7). On storage that can append (local files) the
blocks are appended to the current file; on storage that cannot (object stores) every write
creates a new file version with a put-if-absent. The writer moves to the next version
("rolls over") when the current file has reached ``max_file_size``, when it does not end on a
block boundary (a crash left a partial block: appending after it would make Java readers
reject the block before it), when storage may not append to it (a file with other hard links:
the blocks would also land in the other names, maybe outside the table), or when the name is
taken. A named pipe, socket or device in the way is refused (``HoodiePathError``), not passed.

File naming belongs to the caller: it passes the current file name and, for rolling over, a
``next_name(version) -> file name`` function (by default the version number inside the name is
replaced, keeping the rest).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hoodie_ray.exceptions import HoodieInputError, HoodieIOError
from hoodie_ray.log_format.blocks import MAGIC, LogBlock, serialize_block
from hoodie_ray.storage import Storage, join

#: Java's default ``hoodie.logfile.max.size`` (1 GiB).
DEFAULT_MAX_LOG_FILE_SIZE = 1024 * 1024 * 1024
_LOG_VERSION_RE = re.compile(r"^(\..+\.log\.)(\d+)((?:_.*)?)$")
_MAX_ROLLS = 1000

NextName = Callable[[int], str]


def log_version_of(file_name: str) -> int:
    """The version number in a log file name (``.f_i.log.<version>_token``)."""
    m = _LOG_VERSION_RE.match(file_name)
    if not m:
        raise HoodieInputError(f"not a log file name: {file_name!r}")
    return int(m.group(2))


def replace_version(file_name: str) -> NextName:
    """A ``next_name`` that puts another version number into ``file_name``, keeping the rest."""
    m = _LOG_VERSION_RE.match(file_name)
    if not m:
        raise HoodieInputError(f"not a log file name: {file_name!r}")
    head, tail = m.group(1), m.group(3)
    return lambda version: f"{head}{version}{tail}"


@dataclass(frozen=True)
class LogAppendResult:
    """Where one :meth:`LogWriter.append_blocks` call put its bytes (for write stats).

    Attributes:
        path: the log file, relative to the table's base path.
        file_name: its name.
        version: its log version.
        offset: byte offset in the file where the first block starts.
        size: bytes written.
        file_size: size of the file after the write.
        block_offsets: the offset of each block written.
    """

    path: str
    file_name: str
    version: int
    offset: int
    size: int
    file_size: int
    block_offsets: tuple[int, ...]


class LogWriter:
    """Writes blocks into the log files of one file group.

    Args:
        storage: the table's storage.
        partition_path: partition directory relative to the base path ("" if none).
        file_name: the log file to write first (may exist already, then it is appended to).
        version: its log version; parsed from ``file_name`` when omitted.
        next_name: ``version -> file name`` for rolling over; default :func:`replace_version`.
        max_file_size: roll over once the file has at least this many bytes.
        table_version: table version the blocks are framed for (6 allows header keys 0-3).
        append: append to existing files; default ``storage.supports_append``. Without it every
            write goes to a new version created with put-if-absent.
    """

    def __init__(
        self,
        storage: Storage,
        partition_path: str,
        file_name: str,
        *,
        version: int | None = None,
        next_name: NextName | None = None,
        max_file_size: int = DEFAULT_MAX_LOG_FILE_SIZE,
        table_version: int = 6,
        append: bool | None = None,
    ) -> None:
        self.storage = storage
        self.partition_path = partition_path
        self.file_name = file_name
        self.version = log_version_of(file_name) if version is None else version
        self.next_name = next_name
        self.max_file_size = max_file_size
        self.table_version = table_version
        self.append = storage.supports_append if append is None else append
        if self.append and not storage.supports_append:
            raise HoodieInputError(f"{storage!r} cannot append to files")

    @property
    def path(self) -> str:
        """The current log file, relative to the base path."""
        return join(self.partition_path, self.file_name)

    def roll_over(self) -> None:
        """Move to the next log version (its name from ``next_name``)."""
        nxt = self.next_name or replace_version(self.file_name)
        self.version += 1
        self.file_name = nxt(self.version)

    def append_blocks(self, blocks: Sequence[LogBlock]) -> LogAppendResult:
        """Serialize ``blocks`` and write them into one log file with one storage call.

        Sets each block's ``offset``/``size``. Raises :class:`HoodieIOError` when no file
        version could be written.
        """
        if not blocks:
            raise HoodieInputError("append_blocks needs at least one block")
        pieces = [serialize_block(b, table_version=self.table_version) for b in blocks]
        data = b"".join(pieces)
        for _ in range(_MAX_ROLLS):
            path = self.path
            if self.append:
                if self.storage.exists(path):
                    size = self.storage.size(path)
                    if size >= self.max_file_size or not self._ends_on_block(path, size):
                        self.roll_over()
                        continue
                offset = self.storage.append(path, data)
            else:
                if self.storage.exists(path) or not self.storage.create_new(path, data):
                    self.roll_over()
                    continue
                offset = 0
            result = self._result(path, offset, blocks, pieces)
            if result.file_size >= self.max_file_size:
                self.roll_over()
            return result
        raise HoodieIOError(f"no writable log file version after {_MAX_ROLLS} attempts: {path}")

    def append_block(self, block: LogBlock) -> LogAppendResult:
        """:meth:`append_blocks` of one block."""
        return self.append_blocks([block])

    def _result(
        self, path: str, offset: int, blocks: Sequence[LogBlock], pieces: Sequence[bytes]
    ) -> LogAppendResult:
        offsets = []
        at = offset
        for b, raw in zip(blocks, pieces, strict=True):
            b.offset, b.size, b.source = at, len(raw), self.storage.uri(path)
            offsets.append(at)
            at += len(raw)
        return LogAppendResult(
            path=path,
            file_name=self.file_name,
            version=self.version,
            offset=offset,
            size=at - offset,
            file_size=at,
            block_offsets=tuple(offsets),
        )

    def _ends_on_block(self, path: str, size: int) -> bool:
        return ends_on_block(self.storage, path, size)


def ends_on_block(storage: Storage, path: str, size: int) -> bool:
    """Whether blocks may be appended to the file of ``size`` bytes at ``path``: storage may
    append to it (:meth:`Storage.appendable`: no other hard link) and it ends right after a
    complete block (its reverse pointer checks out).

    Appending after a torn tail could make Java readers see the previous good block as corrupt,
    and appending to a hard-linked file writes into its other names too, so appenders roll a new
    log version instead.
    """
    if not storage.appendable(path):
        return False
    if size == 0:
        return True
    if size < len(MAGIC) + 8 + 8:
        return False
    with storage.open_input(path) as f:
        f.seek(size - 8)
        tail = f.read(8)
        if len(tail) != 8:
            return False
        (pointer,) = struct.unpack(">q", tail)
        start = size - 8 - pointer
        if pointer < 0 or start < 0:
            return False
        f.seek(start)
        return bytes(f.read(len(MAGIC))) == MAGIC
