"""Storage access for one table: every path is relative to the table's base path.

Two implementations share one interface:

* :class:`LocalStorage` for the local filesystem (``/path`` or ``file://``), with POSIX
  atomicity: ``write_atomic`` writes a temporary file and renames it; ``create_new`` is
  put-if-absent (an exclusive create for empty content: markers, requested instants; a hard
  link of a written temporary file otherwise), so two processes can never both create one
  instant file.
* :class:`ArrowStorage` for object stores through ``pyarrow.fs`` (``s3://``, ``gs://``, ...).
  A single PUT is atomic on object stores, so ``write_atomic`` writes the object directly;
  ``create_new`` checks for the object first (see docs/ARCHITECTURE.md on object-store commits).

Relative paths are validated (:func:`check_relative`): no ``..`` segment, no absolute path, no
backslash, NUL or control character, so nothing read from a table can reach outside it.
:class:`LocalStorage` also opens nothing but regular files (a named pipe would block the
process, a device could be anything), and never appends to or rewrites in place a file with
more than one hard link (the bytes would land in every name of the file, maybe outside the
table); either is a :class:`HoodiePathError`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlparse

from hoodie_ray.exceptions import HoodieIOError, HoodiePathError

_SECRET_KEY_PARTS = (
    "secret",
    "token",
    "password",
    "session",
    "access_key",
    "credential",
    "key",
    "proxy",
)


# Opening a FIFO blocks until its other end is opened: every open is non-blocking, and the file
# type is checked on the opened descriptor (the name may be replaced between a check and open).
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_OPEN = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)

# Errors that say "this process may not write here" (permissions, a read-only or immutable
# file system, no space left): a write that meets one is a HoodieIOError. Other OSErrors of a
# write (a missing or non-directory parent, an existing file) stay as they are: callers tell
# a concurrent writer or a bad path from them.
_CANNOT_WRITE = frozenset(
    getattr(errno, n) for n in ("EACCES", "EPERM", "EROFS", "ENOSPC", "EDQUOT") if hasattr(errno, n)
)


def _file_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a special file"


#: What a file write takes: bytes, or a list of bytes-like pieces written in order (a log
#: block's framing around its content: megabytes never joined into one fresh buffer).
Payload = bytes | list[Any]


def payload_pieces(data: Payload) -> list[Any]:
    """The pieces of ``data`` (:data:`Payload`), in order."""
    return data if isinstance(data, list) else [data]


#: The most bytes one ``write`` call hands the kernel. A single write of many megabytes cost
#: ~2.2 ms of CPU per MB on a VM whose balloon reports free pages (Firecracker: the page
#: cache's large folios come from memory the host must fault back in), the same bytes in
#: 1 MiB writes ~0.4; elsewhere the extra calls cost nothing measurable.
WRITE_CHUNK_BYTES = 1 << 20


def write_payload(f: IO[bytes], data: Payload) -> None:
    """Write ``data`` (:data:`Payload`) to ``f`` in order, at most :data:`WRITE_CHUNK_BYTES`
    a call."""
    for piece in payload_pieces(data):
        view = memoryview(piece).cast("B")
        for start in range(0, view.nbytes, WRITE_CHUNK_BYTES):
            f.write(view[start : start + WRITE_CHUNK_BYTES])


def payload_size(data: Payload) -> int:
    """The bytes ``data`` (:data:`Payload`) holds."""
    return sum(memoryview(p).nbytes for p in payload_pieces(data))


def _write_synced(path: str, data: bytes) -> None:
    """A new file (never an existing one) holding ``data``, on disk before this returns."""
    with open(path, "xb") as f:
        write_payload(f, data)
        f.flush()
        os.fsync(f.fileno())


@dataclass(frozen=True)
class FileInfo:
    """One directory entry: its name (no directory part), size in bytes, and kind."""

    name: str
    size: int
    is_dir: bool


#: A backslash, or a control character (C0 or DEL): never in a relative path or a file name.
REFUSED_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")


def check_relative(rel: str) -> str:
    """Return ``rel`` normalised (no leading ``./``) or raise :class:`HoodiePathError`.

    A relative path may not be absolute, contain a ``..`` or empty segment, a backslash, a NUL
    or another control character: such a path could resolve outside the table.
    """
    if not isinstance(rel, str):
        raise HoodiePathError(f"path must be a string, got {type(rel).__name__}")
    if rel in ("", "."):
        return ""
    if rel.startswith("/"):
        raise HoodiePathError(f"absolute path not allowed inside a table: {rel!r}")
    if REFUSED_CHARS.search(rel):
        raise HoodiePathError(f"path with a backslash or control character refused: {rel!r}")
    parts = [p for p in rel.split("/") if p != "."]
    for p in parts:
        if p in ("", ".."):
            raise HoodiePathError(f"path escapes or is malformed inside the table: {rel!r}")
    return "/".join(parts)


def join(*parts: str) -> str:
    """Join relative path parts with ``/``, skipping empty parts (non-partitioned tables)."""
    return "/".join(p.strip("/") for p in parts if p not in ("", None))


def redact_options(options: Mapping[str, Any] | None) -> dict[str, str]:
    """A copy of storage options safe to print: values of secret-looking keys are masked."""
    out: dict[str, str] = {}
    for k, v in (options or {}).items():
        lk = k.lower()
        secret = any(p in lk for p in _SECRET_KEY_PARTS) and lk not in (
            "region",
            "endpoint_override",
        )
        out[k] = "***" if secret else str(v)
    return out


class Storage:
    """Filesystem access relative to a table's base path (abstract)."""

    base_uri: str

    def sub(self, rel: str) -> Storage:
        """Storage rooted at ``rel`` below this one (the metadata table under ``.hoodie``)."""
        raise NotImplementedError

    # -- reading -------------------------------------------------------------------------------
    def read_bytes(self, rel: str) -> bytes:
        raise NotImplementedError

    def open_input(self, rel: str) -> IO[bytes]:
        """A seekable binary stream of the file."""
        raise NotImplementedError

    def size(self, rel: str) -> int:
        raise NotImplementedError

    def exists(self, rel: str) -> bool:
        raise NotImplementedError

    def modified_time(self, rel: str) -> float | None:
        """The file's last modification time (seconds since the epoch), None when it is
        missing (Hudi's heartbeats are such times)."""
        raise NotImplementedError

    def is_file(self, rel: str) -> bool:
        """True if ``rel`` exists and is not a directory."""
        raise NotImplementedError

    def list_dir(self, rel: str) -> list[FileInfo]:
        """Entries of a directory; an absent directory lists as empty."""
        raise NotImplementedError

    def list_file_names(self, rel: str) -> list[str]:
        """Names of the files (not directories) in a directory, without their sizes."""
        return [i.name for i in self.list_dir(rel) if not i.is_dir]

    # -- writing -------------------------------------------------------------------------------
    def write_bytes(self, rel: str, data: Payload) -> None:
        """Write (or overwrite) a whole file, creating parent directories. ``data``: bytes, or
        pieces written in order (:data:`Payload`)."""
        raise NotImplementedError

    def write_atomic(self, rel: str, data: bytes) -> None:
        """Write a whole file so no reader ever sees it half-written."""
        raise NotImplementedError

    def create_new(self, rel: str, data: bytes) -> bool:
        """Atomically create a file that must not exist yet; False if it already existed."""
        raise NotImplementedError

    def append(self, rel: str, data: Payload) -> int:
        """Append bytes (or pieces, in order: :data:`Payload`); return the offset they start
        at. Raises if appends are unsupported."""
        raise NotImplementedError

    @property
    def supports_append(self) -> bool:
        return False

    #: Whether a Parquet reader of this storage's files should fetch a row group's column
    #: chunks ahead, coalesced (pyarrow's ``pre_buffer``): worth it where each read is a
    #: request (object stores); where a read is a copy out of the page cache it only adds
    #: a thread hand-off per file (~0.1 ms, a fifth of reading a 2,000-row base file).
    coalesce_reads = True

    def appendable(self, rel: str) -> bool:
        """Whether :meth:`append` may add to ``rel`` as it is now (an absent file counts:
        appending creates it). False where storage cannot append at all."""
        return self.supports_append

    def open_output(self, rel: str) -> IO[bytes]:
        """A binary stream that writes a new file (parents created)."""
        raise NotImplementedError

    def delete(self, rel: str, missing_ok: bool = True) -> None:
        raise NotImplementedError

    def delete_dir(self, rel: str) -> None:
        raise NotImplementedError

    def makedirs(self, rel: str) -> None:
        raise NotImplementedError

    def rename(self, src: str, dst: str) -> None:
        raise NotImplementedError

    # -- helpers -------------------------------------------------------------------------------
    def walk_files(self, rel: str = "", max_depth: int = 64) -> Iterator[str]:
        """Every file below ``rel`` as a relative path (depth first, sorted); a tree deeper
        than ``max_depth`` is refused (it cannot come from a writer)."""
        from hoodie_ray.exceptions import HoodieCorruptedDataError

        stack: list[tuple[str, int]] = [(rel, 0)]
        while stack:
            d, depth = stack.pop()
            if depth > max_depth:
                raise HoodieCorruptedDataError(
                    f"directory tree deeper than {max_depth} under {self.uri(rel)}"
                )
            entries = sorted(self.list_dir(d), key=lambda i: i.name, reverse=True)
            files = [join(d, i.name) for i in entries if not i.is_dir]
            yield from reversed(files)
            stack.extend((join(d, i.name), depth + 1) for i in entries if i.is_dir)

    def uri(self, rel: str) -> str:
        rel = check_relative(rel)
        return self.base_uri.rstrip("/") + ("/" + rel if rel else "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_uri!r})"


class LocalStorage(Storage):
    """The local filesystem."""

    def __init__(self, base_path: str) -> None:
        if base_path.startswith("file://"):
            base_path = base_path[len("file://") :]
        self.root = os.path.abspath(base_path)
        self.base_uri = self.root
        self._real_root = os.path.realpath(self.root)

    def sub(self, rel: str) -> Storage:
        self._abs(rel)  # validated: stays inside this table
        return LocalStorage(os.path.join(self.root, check_relative(rel)))

    def _abs(self, rel: str) -> str:
        return self._abs_lstat(rel)[0]

    def _abs_lstat(self, rel: str) -> tuple[str, os.stat_result | None]:
        """The validated absolute path of ``rel`` and ``os.lstat`` of it where it exists and
        is no symbolic link (None otherwise)."""
        rel = check_relative(rel)
        if not rel:
            return self.root, None
        path = os.path.join(self.root, rel)
        # A symbolic link inside the table (a directory or the file itself) could lead outside
        # it: the resolved path must stay below the resolved base path. Where no component
        # below the base is a link, the path resolves below the base's own resolution: one
        # lstat a component, not os.path.realpath's walk from the filesystem's root.
        cur = self.root
        st: os.stat_result | None = None
        for part in rel.split("/"):
            cur = os.path.join(cur, part)
            try:
                st = os.lstat(cur)
            except OSError:  # absent (or unreadable): as os.path.realpath, nothing to follow
                return path, None
            if stat.S_ISLNK(st.st_mode):
                break
        else:
            return path, st
        real = os.path.realpath(path)
        if not real.startswith(self._real_root + os.sep):
            self._real_root = os.path.realpath(self.root)  # the base may have been created since
            if not real.startswith(self._real_root + os.sep):
                raise HoodiePathError(
                    f"path resolves outside the table through a symbolic link: {rel!r}"
                )
        return path, None

    def local_path(self, rel: str) -> str:
        """The validated absolute local path of ``rel`` (for libraries that open paths).

        A FIFO, socket or device there is refused (:class:`HoodiePathError`); an absent path is
        returned as is, for the caller's open to report.
        """
        return self.local_file(rel)[0]

    def local_file(self, rel: str) -> tuple[str, os.stat_result | None]:
        """:meth:`local_path` and what ``os.stat`` said of it (None: absent or unreadable)."""
        path, st = self._abs_lstat(rel)
        if st is None:
            try:
                st = os.stat(path)
            except OSError:
                return path, None
        self._check_special(rel, st.st_mode)
        return path, st

    # -- checks: regular files only, no writing through another hard link ----------------------
    def _check_special(self, rel: str, mode: int) -> None:
        """Refuse a FIFO, socket or device (directories are left to the caller's open)."""
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            raise HoodiePathError(
                f"refusing {self.uri(rel)}: {_file_kind(mode)}, not a regular file"
            )

    def _check_links(self, rel: str, st: os.stat_result) -> None:
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            raise HoodiePathError(
                f"refusing to write into {self.uri(rel)}: it has {st.st_nlink} hard links, so "
                "the bytes would also land in another file, possibly outside the table"
            )

    def _open_fd(self, rel: str, path: str, flags: int, *, in_place: bool) -> int:
        """Open ``path`` (``rel`` validated) and return the descriptor: a regular file, or a
        directory for the caller's I/O to fail on. ``in_place``: the caller writes into an
        existing file, so a file with other hard links is refused as well."""
        try:
            st: os.stat_result | None = os.stat(path)
        except FileNotFoundError:
            if not flags & os.O_CREAT:
                raise
            st = None
        if st is not None:
            # Before opening: opening a device may have effects of its own.
            self._check_special(rel, st.st_mode)
            if in_place:
                self._check_links(rel, st)
        try:
            fd = os.open(path, flags | _O_NONBLOCK | _O_OPEN, 0o666)
        except OSError as e:
            if e.errno == errno.ENXIO:  # a FIFO without reader, or a socket, put there since
                raise HoodiePathError(
                    f"refusing {self.uri(rel)}: a special file, not a regular file"
                ) from None
            raise
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            self._check_special(rel, st.st_mode)
            if in_place:
                self._check_links(rel, st)
            if _O_NONBLOCK:
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read_bytes(self, rel: str) -> bytes:
        path = self._abs(rel)
        try:
            with os.fdopen(self._open_fd(rel, path, os.O_RDONLY, in_place=False), "rb") as f:
                return f.read()
        except FileNotFoundError as e:
            raise HoodieIOError(f"file not found: {self.uri(rel)}") from e
        except OSError as e:
            raise HoodieIOError(f"cannot read {self.uri(rel)}: {e.strerror}") from e

    def open_input(self, rel: str) -> IO[bytes]:
        path = self._abs(rel)
        try:
            return os.fdopen(self._open_fd(rel, path, os.O_RDONLY, in_place=False), "rb")
        except OSError as e:
            raise HoodieIOError(f"cannot open {self.uri(rel)}: {e.strerror}") from e

    def size(self, rel: str) -> int:
        try:
            st = os.stat(self._abs(rel))
        except OSError as e:
            raise HoodieIOError(f"cannot stat {self.uri(rel)}: {e.strerror}") from e
        self._check_special(rel, st.st_mode)
        return st.st_size

    def exists(self, rel: str) -> bool:
        return os.path.exists(self._abs(rel))

    def modified_time(self, rel: str) -> float | None:
        try:
            return os.stat(self._abs(rel)).st_mtime
        except FileNotFoundError:
            return None
        except OSError as e:
            raise HoodieIOError(f"cannot stat {self.uri(rel)}: {e.strerror}") from e

    def is_file(self, rel: str) -> bool:
        path = self._abs(rel)
        return os.path.lexists(path) and not os.path.isdir(path)

    def list_dir(self, rel: str) -> list[FileInfo]:
        path = self._abs(rel)
        out: list[FileInfo] = []
        try:
            with os.scandir(path) as it:
                for e in it:
                    if e.is_symlink():
                        continue  # a link could point outside the table
                    try:
                        is_dir = e.is_dir(follow_symlinks=False)
                        size = 0 if is_dir else e.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:
                        continue  # deleted while listing (a concurrent rollback or clean)
                    out.append(FileInfo(e.name, size, is_dir))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as e:
            raise HoodieIOError(f"cannot list {self.uri(rel)}: {e.strerror}") from e
        return out

    def list_file_names(self, rel: str) -> list[str]:
        # No stat per entry: the timeline lists names only, and directories stay small.
        try:
            with os.scandir(self._abs(rel)) as it:
                return [
                    e.name for e in it if not e.is_symlink() and not e.is_dir(follow_symlinks=False)
                ]
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as e:
            raise HoodieIOError(f"cannot list {self.uri(rel)}: {e.strerror}") from e

    @contextlib.contextmanager
    def _writing(self, what: str, rel: str) -> Iterator[None]:
        """Turn a "may not write here" error of the block into a :class:`HoodieIOError` naming
        what was tried, the path, and the file the system refused when it is another one (a
        temporary file, a parent folder)."""
        try:
            yield
        except OSError as e:
            if e.errno not in _CANNOT_WRITE:
                raise
            path = self._abs(rel)
            refused = f" ({e.filename})" if e.filename and e.filename != path else ""
            raise HoodieIOError(f"cannot {what} {self.uri(rel)}: {e.strerror or e}{refused}") from e

    def makedirs(self, rel: str) -> None:
        with self._writing("create the folder", rel):
            os.makedirs(self._abs(rel), exist_ok=True)

    def _parent(self, path: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)

    def _rewrite(self, rel: str) -> IO[bytes]:
        """An empty regular file at ``rel`` to write (parents created), truncated only once it
        is known to be a regular file with no other hard link."""
        path = self._abs(rel)
        self._parent(path)
        fd = self._open_fd(rel, path, os.O_WRONLY | os.O_CREAT, in_place=True)
        try:
            os.ftruncate(fd, 0)
            return os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            raise

    def write_bytes(self, rel: str, data: Payload) -> None:
        with self._writing("write", rel), self._rewrite(rel) as f:
            write_payload(f, data)

    def _temp_for(self, path: str) -> str:
        d, name = os.path.split(path)
        return os.path.join(d, f".{name}.{uuid.uuid4().hex}.tmp")

    def write_atomic(self, rel: str, data: bytes) -> None:
        path = self._abs(rel)
        with self._writing("write", rel):
            self._parent(path)
            tmp = self._temp_for(path)
            try:
                _write_synced(tmp, data)
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)

    def create_new(self, rel: str, data: bytes) -> bool:
        path = self._abs(rel)
        with self._writing("create", rel):
            self._parent(path)
            if not data:
                # Nothing to be seen half-written (a marker): one exclusive create, which
                # refuses any existing entry, a symbolic link included.
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_OPEN, 0o666)
                except FileExistsError:
                    return False
                os.close(fd)
                return True
            tmp = self._temp_for(path)
            try:
                _write_synced(tmp, data)
                try:
                    os.link(tmp, path)  # fails if path exists: put-if-absent, and atomic
                except FileExistsError:
                    return False
                return True
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)

    coalesce_reads = False

    @property
    def supports_append(self) -> bool:
        return True

    def appendable(self, rel: str) -> bool:
        """False for a file with other hard links (and where appends are unsupported);
        :class:`HoodiePathError` for a FIFO, socket or device."""
        if not self.supports_append:
            return False
        try:
            st = os.stat(self._abs(rel))
        except FileNotFoundError:
            return True
        except OSError as e:
            raise HoodieIOError(f"cannot stat {self.uri(rel)}: {e.strerror}") from e
        self._check_special(rel, st.st_mode)
        return stat.S_ISREG(st.st_mode) and st.st_nlink == 1

    def append(self, rel: str, data: Payload) -> int:
        """Append to a regular file with a single link (created if absent); anything else is
        a :class:`HoodiePathError` naming the path."""
        path = self._abs(rel)
        with self._writing("append to", rel):
            self._parent(path)
            fd = self._open_fd(rel, path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, in_place=True)
            with os.fdopen(fd, "ab") as f:
                offset = f.tell()
                write_payload(f, data)
                f.flush()
        return offset

    def open_output(self, rel: str) -> IO[bytes]:
        with self._writing("write", rel):
            return self._rewrite(rel)

    def delete(self, rel: str, missing_ok: bool = True) -> None:
        try:
            with self._writing("delete", rel):
                os.unlink(self._abs(rel))
        except FileNotFoundError:
            if not missing_ok:
                raise HoodieIOError(f"cannot delete, not found: {self.uri(rel)}") from None

    def delete_dir(self, rel: str) -> None:
        import shutil

        path = self._abs(rel)
        if check_relative(rel) == "":
            raise HoodiePathError("refusing to delete the table's base path")
        shutil.rmtree(path, ignore_errors=True)

    def rename(self, src: str, dst: str) -> None:
        d = self._abs(dst)
        with self._writing(f"rename {self.uri(src)} to", dst):
            self._parent(d)
            os.replace(self._abs(src), d)


class ArrowStorage(Storage):
    """Object stores and other filesystems through ``pyarrow.fs``."""

    def __init__(self, base_uri: str, storage_options: Mapping[str, Any] | None = None) -> None:
        import pyarrow.fs as pafs

        self.base_uri = base_uri.rstrip("/")
        self._options_redacted = redact_options(storage_options)
        self._options = dict(storage_options or {})
        parsed = urlparse(base_uri)
        try:
            if parsed.scheme == "s3" and storage_options:
                fs: pafs.FileSystem = pafs.S3FileSystem(**dict(storage_options))
                self._root = (parsed.netloc + parsed.path).rstrip("/")
            else:
                fs, root = pafs.FileSystem.from_uri(base_uri)
                self._root = root.rstrip("/")
        except Exception as e:  # pyarrow raises several types; keep secrets out of the text
            raise HoodieIOError(
                f"cannot open storage for {self.base_uri}: {type(e).__name__}"
            ) from None
        self.fs = fs

    def sub(self, rel: str) -> Storage:
        child = object.__new__(ArrowStorage)
        child.base_uri = self.uri(check_relative(rel))
        child._options_redacted = self._options_redacted
        child._options = self._options
        child._root = self._abs(rel)
        child.fs = self.fs
        return child

    def _abs(self, rel: str) -> str:
        rel = check_relative(rel)
        return f"{self._root}/{rel}" if rel else self._root

    @property
    def storage_options(self) -> Mapping[str, Any]:
        """The options this storage was opened with (credentials included: never print them;
        ``repr`` shows them redacted). The lock providers' own clients reuse them."""
        return self._options

    def _wrap(self, what: str, rel: str, e: Exception) -> HoodieIOError:
        return HoodieIOError(f"cannot {what} {self.uri(rel)}: {type(e).__name__}: {e}")

    def read_bytes(self, rel: str) -> bytes:
        try:
            with self.fs.open_input_stream(self._abs(rel)) as f:
                return bytes(f.read())
        except FileNotFoundError as e:
            raise HoodieIOError(f"file not found: {self.uri(rel)}") from e
        except OSError as e:
            raise self._wrap("read", rel, e) from e

    def open_input(self, rel: str) -> IO[bytes]:
        try:
            return self.fs.open_input_file(self._abs(rel))  # type: ignore[return-value]
        except OSError as e:
            raise self._wrap("open", rel, e) from e

    def size(self, rel: str) -> int:
        import pyarrow.fs as pafs

        info = self.fs.get_file_info(self._abs(rel))
        if info.type == pafs.FileType.NotFound:
            raise HoodieIOError(f"file not found: {self.uri(rel)}")
        return int(info.size or 0)

    def modified_time(self, rel: str) -> float | None:
        import pyarrow.fs as pafs

        info = self.fs.get_file_info(self._abs(rel))
        if info.type == pafs.FileType.NotFound or info.mtime is None:
            return None
        return float(info.mtime.timestamp())

    def exists(self, rel: str) -> bool:
        import pyarrow.fs as pafs

        return bool(self.fs.get_file_info(self._abs(rel)).type != pafs.FileType.NotFound)

    def is_file(self, rel: str) -> bool:
        import pyarrow.fs as pafs

        return bool(self.fs.get_file_info(self._abs(rel)).type == pafs.FileType.File)

    def list_dir(self, rel: str) -> list[FileInfo]:
        import pyarrow.fs as pafs

        sel = pafs.FileSelector(self._abs(rel), allow_not_found=True, recursive=False)
        try:
            infos = self.fs.get_file_info(sel)
        except OSError as e:
            raise self._wrap("list", rel, e) from e
        return [
            FileInfo(i.base_name, int(i.size or 0), i.type == pafs.FileType.Directory)
            for i in infos
        ]

    def makedirs(self, rel: str) -> None:
        try:
            self.fs.create_dir(self._abs(rel), recursive=True)
        except OSError as e:
            raise self._wrap("create", rel, e) from e

    def write_bytes(self, rel: str, data: Payload) -> None:
        try:
            with self.fs.open_output_stream(self._abs(rel)) as f:
                for piece in payload_pieces(data):
                    f.write(piece)
        except OSError as e:
            raise self._wrap("write", rel, e) from e

    def write_atomic(self, rel: str, data: bytes) -> None:
        # One PUT is atomic on object stores: readers see the old object or the whole new one.
        self.write_bytes(rel, data)

    def create_new(self, rel: str, data: bytes) -> bool:
        # Object stores without conditional writes: check, then PUT. The table lock
        # (write/lock.py) guarantees a single writer, so the check cannot race another writer.
        if self.exists(rel):
            return False
        self.write_bytes(rel, data)
        return True

    def append(self, rel: str, data: Payload) -> int:
        raise HoodieIOError(f"appends are not supported on {self.base_uri}")

    def open_output(self, rel: str) -> IO[bytes]:
        return self.fs.open_output_stream(self._abs(rel))  # type: ignore[return-value]

    def delete(self, rel: str, missing_ok: bool = True) -> None:
        try:
            self.fs.delete_file(self._abs(rel))
        except FileNotFoundError:
            if not missing_ok:
                raise HoodieIOError(f"cannot delete, not found: {self.uri(rel)}") from None
        except OSError as e:
            if missing_ok and not self.exists(rel):
                return
            raise self._wrap("delete", rel, e) from e

    def delete_dir(self, rel: str) -> None:
        if check_relative(rel) == "":
            raise HoodiePathError("refusing to delete the table's base path")
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_dir(self._abs(rel))

    def rename(self, src: str, dst: str) -> None:
        self.fs.move(self._abs(src), self._abs(dst))

    def __repr__(self) -> str:
        return f"ArrowStorage({self.base_uri!r}, options={self._options_redacted!r})"


def qualified_path(path: str) -> str:
    """A plain local table path made absolute here (``file://`` and object-store URIs as they
    are): a path handed to Ray workers must mean there what it means to the caller, and a
    worker's working directory is its job's (a ``runtime_env`` working_dir), not the
    driver's."""
    if isinstance(path, str) and path and urlparse(path).scheme == "":
        return os.path.abspath(path)
    return path


def open_storage(path: str, storage_options: Mapping[str, Any] | None = None) -> Storage:
    """Storage for a table path: local for plain paths and ``file://``, pyarrow.fs otherwise."""
    if not isinstance(path, str) or not path:
        raise HoodiePathError("table path must be a non-empty string")
    parsed = urlparse(path)
    scheme = parsed.scheme
    if scheme and "@" in parsed.netloc:
        # Table paths appear in messages, reprs and logs: credentials belong in storage_options.
        raise HoodiePathError(
            f"a table URI may not carry credentials (user:secret@): pass them in "
            f"storage_options ({scheme}://{parsed.netloc.rpartition('@')[2]}{parsed.path})"
        )
    if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
        return LocalStorage(path)
    return ArrowStorage(path, storage_options)
