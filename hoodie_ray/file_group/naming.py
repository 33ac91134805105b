"""File names of a Hudi table: file ids, write tokens, base files, log files, partition metadata.

Names from Hudi's ``FSUtils`` (``createNewFileId``, ``makeWriteToken``, ``makeBaseFileName``,
``makeLogFileName``) and ``HoodiePartitionMetadata``. Formats (spec §3.1, §3.4)::

    base file   <fileId>_<writeToken>_<instant>.parquet
    log file    .<fileId>_<instant>.log.<version>_<writeToken>[.cdc]
    write token <taskPartitionId>-<stageId>-<taskAttemptId>     (digits only)
    file id     <uuid4>-<n>

The instant in a base file name is the requested time of the commit that wrote it; in a log
file name it is the base instant of the slice (table version 6) or the requested time of the
deltacommit that wrote it (versions 8 and 9).
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
import uuid
from dataclasses import dataclass

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieInputError
from hoodie_ray.storage import Storage, check_relative, join

#: ``.hoodie_partition_metadata``: the marker file of every partition directory.
PARTITION_METAFILE = ".hoodie_partition_metadata"
#: Extensions of base files (``HoodieFileFormat``).
BASE_FILE_EXTENSIONS = (".parquet", ".orc", ".hfile", ".lance")
LOG_EXTENSION = "log"

_DIGITS = re.compile(r"^[0-9]+$")
_FILE_ID = re.compile(r"^[A-Za-z0-9-]+$")
_TOKEN = re.compile(r"^[0-9]+-[0-9]+-[0-9]+$")
_LOG_REST = re.compile(
    r"^(?P<instant>[0-9]+)\.(?P<ext>log|archive)\.(?P<version>[0-9]+)"
    r"(?:_(?P<token>[0-9]+-[0-9]+-[0-9]+))?(?P<cdc>\.cdc)?$"
)


def new_file_id() -> str:
    """A new file id ``<uuid4>-0`` (``FSUtils.createNewFileId``)."""
    return f"{uuid.uuid4()}-0"


def make_write_token(task_partition_id: int, stage_id: int, attempt_id: int) -> str:
    """``<taskPartitionId>-<stageId>-<taskAttemptId>``; all three non-negative integers."""
    parts = (task_partition_id, stage_id, attempt_id)
    if not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts):
        raise HoodieInputError(f"write token parts must be non-negative integers: {parts}")
    return f"{task_partition_id}-{stage_id}-{attempt_id}"


def _check_parts(file_id: str, instant: str, write_token: str | None) -> None:
    if not isinstance(file_id, str) or not _FILE_ID.match(file_id):
        raise HoodieInputError(f"invalid file id {file_id!r} (letters, digits and '-' only)")
    if not isinstance(instant, str) or not _DIGITS.match(instant):
        raise HoodieInputError(f"invalid instant time {instant!r}")
    if write_token is not None and not _TOKEN.match(write_token):
        raise HoodieInputError(f"invalid write token {write_token!r}")


def base_file_name(file_id: str, write_token: str, instant: str, ext: str = ".parquet") -> str:
    """``<fileId>_<writeToken>_<instant><ext>`` (``FSUtils.makeBaseFileName``).

    Example:
        >>> base_file_name("f1-0", "0-1-2", "20250101000000000")
        'f1-0_0-1-2_20250101000000000.parquet'
    """
    _check_parts(file_id, instant, write_token)
    if not ext.startswith(".") or not re.match(r"^\.[A-Za-z0-9]+$", ext):
        raise HoodieInputError(f"invalid base file extension {ext!r}")
    return f"{file_id}_{write_token}_{instant}{ext}"


def log_file_name(file_id: str, instant: str, version: int, write_token: str) -> str:
    """``.<fileId>_<instant>.log.<version>_<writeToken>`` (``FSUtils.makeLogFileName``).

    Example:
        >>> log_file_name("f1-0", "20250101000000000", 1, "0-1-2")
        '.f1-0_20250101000000000.log.1_0-1-2'
    """
    _check_parts(file_id, instant, write_token)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise HoodieInputError(f"log version must be an integer >= 1, got {version!r}")
    return f".{file_id}_{instant}.{LOG_EXTENSION}.{version}_{write_token}"


@dataclass(frozen=True)
class BaseFileName:
    """The parts of a base file name."""

    file_id: str
    write_token: str
    instant: str
    extension: str  # with the dot, e.g. ".parquet"

    @property
    def name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant}{self.extension}"


@dataclass(frozen=True)
class LogFileName:
    """The parts of a log file name. ``write_token`` is ``""`` for legacy names without one."""

    file_id: str
    instant: str
    version: int
    write_token: str
    extension: str = LOG_EXTENSION  # "log" (or "archive" for archived-timeline logs)
    is_cdc: bool = False

    @property
    def name(self) -> str:
        token = f"_{self.write_token}" if self.write_token else ""
        cdc = ".cdc" if self.is_cdc else ""
        return f".{self.file_id}_{self.instant}.{self.extension}.{self.version}{token}{cdc}"

    def sort_key(self) -> tuple[str, int, str]:
        """Hudi's log file order: instant in the name, then version, then write token."""
        return (self.instant, self.version, self.write_token)


def parse_base_file_name(name: str) -> BaseFileName | None:
    """Parse ``<fileId>_<writeToken>_<instant>.<ext>``; ``None`` if ``name`` is not one.

    Never raises. Only the known base-file extensions are accepted.
    """
    if not isinstance(name, str):
        return None
    return _parse_base_file_name(name)


# every listing of a table parses the same names again (a query plans from a listing)
@functools.lru_cache(maxsize=16384)
def _parse_base_file_name(name: str) -> BaseFileName | None:
    if name.startswith(".") or "/" in name:
        return None
    ext = next((e for e in BASE_FILE_EXTENSIONS if name.endswith(e)), None)
    if ext is None:
        return None
    parts = name[: -len(ext)].split("_")
    if len(parts) != 3:
        return None
    file_id, token, instant = parts
    if not file_id or not _FILE_ID.match(file_id) or not token or not _DIGITS.match(instant):
        return None
    return BaseFileName(file_id, token, instant, ext)


def parse_log_file_name(name: str) -> LogFileName | None:
    """Parse ``.<fileId>_<instant>.log.<version>_<writeToken>[.cdc]``; ``None`` otherwise.

    Never raises.
    """
    if not isinstance(name, str):
        return None
    return _parse_log_file_name(name)


@functools.lru_cache(maxsize=16384)
def _parse_log_file_name(name: str) -> LogFileName | None:
    if not name.startswith(".") or "/" in name:
        return None
    file_id, sep, rest = name[1:].partition("_")
    if not sep or not file_id or not _FILE_ID.match(file_id):
        return None
    m = _LOG_REST.match(rest)
    if m is None:
        return None
    return LogFileName(
        file_id=file_id,
        instant=m.group("instant"),
        version=int(m.group("version")),
        write_token=m.group("token") or "",
        extension=m.group("ext"),
        is_cdc=m.group("cdc") is not None,
    )


def is_base_file(name: str) -> bool:
    """True if ``name`` parses as a base file name."""
    return parse_base_file_name(name) is not None


def is_log_file(name: str) -> bool:
    """True if ``name`` parses as a (data or CDC) log file name with the ``log`` extension."""
    lf = parse_log_file_name(name)
    return lf is not None and lf.extension == LOG_EXTENSION


# -- partition metadata ---------------------------------------------------------------------


@dataclass(frozen=True)
class HoodiePartitionMetadata:
    """The content of ``.hoodie_partition_metadata``."""

    commit_time: str
    partition_depth: int


def _java_date(now: _dt.datetime) -> str:
    """``java.util.Date.toString()`` in UTC: ``Sun Jul 13 01:05:36 UTC 2025``."""
    days = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    months = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    return (
        f"{days[now.weekday()]} {months[now.month - 1]} {now.day:02d} "
        f"{now.hour:02d}:{now.minute:02d}:{now.second:02d} UTC {now.year}"
    )


def _depth_of(partition_path: str) -> int:
    rel = check_relative(partition_path)
    return len(rel.split("/")) if rel else 0


def partition_metadata_bytes(
    commit_time: str, partition_depth: int, now: _dt.datetime | None = None
) -> bytes:
    """The bytes Java writes to ``.hoodie_partition_metadata`` (``Properties.store`` format).

    Example:
        >>> partition_metadata_bytes("20250101000000000", 1).decode().splitlines()[2:]
        ['commitTime=20250101000000000', 'partitionDepth=1']
    """
    if not _DIGITS.match(commit_time):
        raise HoodieInputError(f"invalid instant time {commit_time!r}")
    when = now or _dt.datetime.now(_dt.timezone.utc)
    if when.tzinfo is not None:
        when = when.astimezone(_dt.timezone.utc)
    return (
        f"#partition metadata\n#{_java_date(when)}\n"
        f"commitTime={commit_time}\npartitionDepth={int(partition_depth)}\n"
    ).encode()


def write_partition_metadata(
    storage: Storage,
    partition_path: str,
    commit_time: str,
    partition_depth: int | None = None,
) -> bool:
    """Create ``<partition>/.hoodie_partition_metadata`` unless it exists (put-if-absent).

    ``partition_depth`` defaults to the number of path segments (``0`` for the base path of a
    non-partitioned table). Returns True if this call created the file.
    """
    depth = _depth_of(partition_path) if partition_depth is None else partition_depth
    rel = join(check_relative(partition_path), PARTITION_METAFILE)
    if storage.exists(rel):
        return False
    return storage.create_new(rel, partition_metadata_bytes(commit_time, depth))


def read_partition_metadata(
    storage: Storage, partition_path: str
) -> HoodiePartitionMetadata | None:
    """Read ``<partition>/.hoodie_partition_metadata``; ``None`` if the file is absent.

    Raises:
        HoodieCorruptedDataError: the file exists but lacks ``commitTime``/``partitionDepth``.
    """
    rel = join(check_relative(partition_path), PARTITION_METAFILE)
    if not storage.exists(rel):
        return None
    data = storage.read_bytes(rel)
    if len(data) > 64 * 1024:
        raise HoodieCorruptedDataError(f"partition metadata {storage.uri(rel)} is too large")
    props: dict[str, str] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                k, _, v = line.partition(sep)
                props[k.strip()] = v.strip()
                break
    commit, depth = props.get("commitTime", ""), props.get("partitionDepth", "")
    if not _DIGITS.match(commit) or not depth.isdigit():
        raise HoodieCorruptedDataError(
            f"partition metadata {storage.uri(rel)} lacks commitTime/partitionDepth"
        )
    return HoodiePartitionMetadata(commit, int(depth))
