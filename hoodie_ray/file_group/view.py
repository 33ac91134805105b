"""The file-system view: partitions, file groups and file slices of a table, from storage listing.

Names from Hudi: ``FileSlice``, ``HoodieFileGroup`` (here :class:`FileGroup`) and
``HoodieTableFileSystemView`` (here :class:`FileSystemView`). Rules (spec §2.5, §2.6, §3.3):

* Files whose instant is not committed are dropped: a base file needs a completed
  commit/deltacommit/replacecommit (a completed compaction counts) at its instant, or an instant
  older than the first instant of the active timeline (the archival boundary).
* Table version 6: a log file names the base instant of its slice; it is kept when that instant
  is committed, and joins the slice with the largest committed base instant <= that instant.
  Logs named with a *pending compaction* instant (written by Java after the compaction was
  scheduled) are kept and join the previous slice, as Java's
  ``getLatestMergedFileSlicesBeforeOrOn`` merges them (hudi-rs 0.5.0 drops them until the
  compaction completes; see ``merge_pending_compaction_logs``).
* Table versions 8/9: a log file names the deltacommit that wrote it; it is kept only when
  that deltacommit completed, and joins the slice with the largest base instant <= the
  deltacommit's completion time.
* Log files are ordered by (instant in the name, version, write token) in version 6 and by
  (completion time, version, write token) in versions 8/9; CDC logs are left out.
* File groups replaced by completed replacecommits (``partitionToReplaceFileIds``) are excluded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hoodie_ray.config.table_config import uses_completion_time
from hoodie_ray.file_group.naming import (
    BASE_FILE_EXTENSIONS,
    PARTITION_METAFILE,
    parse_base_file_name,
    parse_log_file_name,
)
from hoodie_ray.storage import FileInfo, Storage, check_relative, join
from hoodie_ray.timeline.metadata import HoodieCommitMetadata
from hoodie_ray.timeline.timeline import ActiveTimeline

__all__ = ["FileGroup", "FileListing", "FileSlice", "FileSystemView"]

_EXCLUDED_TOP_DIRS = frozenset({"_delta_log"})
MAX_PARTITION_DEPTH = 32


class FileListing(Protocol):
    """A source of partitions and their files other than storage listings."""

    def list_partitions(self) -> list[str]: ...

    def list_files(self, partition: str) -> list[FileInfo]: ...


@dataclass(frozen=True)
class FileSlice:
    """One file slice: a base instant, an optional base file and its log files (names).

    Args:
        partition_path: ``""`` for a non-partitioned table.
        file_id: the file group's id.
        base_instant: the slice's key: the base file's instant, or for a log-only slice the
            instant of its first log file.
        base_file: the base file's name, or ``None``.
        log_files: log file names in the order readers apply them.
        file_sizes: name -> size in bytes, from the listing (not part of equality).
    """

    partition_path: str
    file_id: str
    base_instant: str
    base_file: str | None = None
    log_files: list[str] = field(default_factory=list)
    file_sizes: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def file_group_id(self) -> tuple[str, str]:
        """``(partition_path, file_id)``."""
        return (self.partition_path, self.file_id)

    @property
    def base_file_path(self) -> str | None:
        """The base file's path relative to the table's base path."""
        return join(self.partition_path, self.base_file) if self.base_file else None

    @property
    def log_file_paths(self) -> list[str]:
        """The log files' paths relative to the table's base path, in order."""
        return [join(self.partition_path, n) for n in self.log_files]

    @property
    def base_file_size(self) -> int:
        """The base file's size (0 without a base file or when unknown)."""
        return self.file_sizes.get(self.base_file, 0) if self.base_file else 0

    @property
    def total_log_size(self) -> int:
        """Sum of the log files' sizes (0 when unknown)."""
        return sum(self.file_sizes.get(n, 0) for n in self.log_files)

    @property
    def is_empty(self) -> bool:
        return self.base_file is None and not self.log_files

    def __hash__(self) -> int:
        return hash(
            (
                self.partition_path,
                self.file_id,
                self.base_instant,
                self.base_file,
                tuple(self.log_files),
            )
        )


@dataclass
class FileGroup:
    """A file group: its slices keyed by base instant (``HoodieFileGroup``)."""

    partition_path: str
    file_id: str
    slices: dict[str, FileSlice] = field(default_factory=dict)

    @property
    def file_group_id(self) -> tuple[str, str]:
        return (self.partition_path, self.file_id)

    def all_slices(self) -> list[FileSlice]:
        """Every slice, oldest base instant first."""
        return [self.slices[k] for k in sorted(self.slices)]

    def latest_slice(self, as_of: str | None = None) -> FileSlice | None:
        """The slice with the greatest base instant <= ``as_of`` (any when ``as_of`` is None)."""
        keys = [k for k in self.slices if as_of is None or k <= as_of]
        return self.slices[max(keys)] if keys else None


@dataclass
class _Log:
    name: str
    instant: str
    version: int
    token: str
    order_time: str  # name instant (v6) or completion time (v8+)
    archived: bool = False  # v8+: its instant is archived (order_time is then its request time)


@dataclass
class _Group:
    bases: dict[str, str] = field(default_factory=dict)  # base instant -> base file name
    logs: list[_Log] = field(default_factory=list)


class FileSystemView:
    """File groups and slices of a table, built from a storage listing and the timeline.

    Args:
        storage: storage rooted at the table's base path.
        timeline: the loaded active timeline.
        table_version: 6, 8 or 9 (decides how log files bind to slices).
        partition_fields: the table's partition fields; empty means non-partitioned (only the
            base path is listed, as hudi-rs does).
        base_file_extensions: extensions that make a base file (default: all Hudi formats).
        merge_pending_compaction_logs: table version 6: keep logs named with a pending
            compaction's instant and merge them into the previous slice (Java); False drops
            them (hudi-rs 0.5.0).
        listing: where partitions and files come from instead of storage listings (an object
            with ``list_partitions()`` and ``list_files(partition)``: the metadata table's
            ``files`` partition).

    Example:
        >>> view = FileSystemView(storage, timeline, 6, ["city"])        # doctest: +SKIP
        >>> [s.base_file for s in view.latest_file_slices()]              # doctest: +SKIP
    """

    def __init__(
        self,
        storage: Storage,
        timeline: ActiveTimeline,
        table_version: int,
        partition_fields: Sequence[str] = (),
        *,
        base_file_extensions: Sequence[str] | None = None,
        merge_pending_compaction_logs: bool = True,
        listing: FileListing | None = None,
        archived_completion: Callable[[str], str | None] | None = None,
    ) -> None:
        self.storage = storage
        self.timeline = timeline
        # v8+: the completion time of an archived instant (the archived timeline keeps it)
        self.archived_completion = archived_completion
        self.table_version = int(table_version)
        self.partition_fields = list(partition_fields)
        self.base_file_extensions = tuple(base_file_extensions or BASE_FILE_EXTENSIONS)
        self.merge_pending_compaction_logs = merge_pending_compaction_logs
        self.listing = listing
        self._partitions: list[str] | None = None
        self._listing: dict[str, list[FileInfo]] = {}
        self._replace_meta: dict[str, HoodieCommitMetadata] = {}

    @classmethod
    def for_table(
        cls,
        storage: Storage,
        table_config: Any,
        timeline: ActiveTimeline,
        listing: FileListing | None = None,
        archived_completion: Callable[[str], str | None] | None = None,
    ) -> FileSystemView:
        """A view from a ``HoodieTableConfig`` (uses ``table_version``, ``partition_fields`` and
        ``base_file_format``); ``archived_completion``: the completion time of an archived
        instant (table versions 8+)."""
        fmt = str(getattr(table_config, "base_file_format", "") or "").lower()
        exts = (f".{fmt}",) if fmt and f".{fmt}" in BASE_FILE_EXTENSIONS else None
        return cls(
            storage,
            timeline,
            table_config.table_version,
            list(table_config.partition_fields),
            base_file_extensions=exts,
            listing=listing,
            archived_completion=archived_completion,
        )

    @property
    def uses_completion_time(self) -> bool:
        """True for table versions 8+: logs bind to slices by completion time."""
        return uses_completion_time(self.table_version)

    def refresh(self) -> FileSystemView:
        """Forget cached listings (the timeline is not reloaded)."""
        self._partitions = None
        self._listing.clear()
        self._replace_meta.clear()
        return self

    # -- listing -------------------------------------------------------------------------------
    def list_partitions(self) -> list[str]:
        """Partition paths, sorted; ``[""]`` for a non-partitioned table.

        A partition is a directory holding ``.hoodie_partition_metadata`` (Java's rule), or a
        leaf directory without it (hudi-rs lists leaf directories). ``.hoodie``, other dot
        directories and a top-level ``_delta_log`` are skipped.
        """
        if self._partitions is None:
            if not self.partition_fields:
                self._partitions = [""]
            elif self.listing is not None:
                self._partitions = sorted(self.listing.list_partitions())
            else:
                out: list[str] = []
                self._walk("", 0, out)
                self._partitions = sorted(out)
        return list(self._partitions)

    def _walk(self, rel: str, depth: int, out: list[str]) -> None:
        infos = self.list_files(rel, include_dirs=True)
        dirs = [i.name for i in infos if i.is_dir and not i.name.startswith(".")]
        if rel == "":
            dirs = [d for d in dirs if d not in _EXCLUDED_TOP_DIRS]
        if rel:
            has_meta = any(not i.is_dir and i.name == PARTITION_METAFILE for i in infos)
            if has_meta or not dirs:
                out.append(rel)
                return
        if depth >= MAX_PARTITION_DEPTH:
            return
        for d in sorted(dirs):
            self._walk(join(rel, d), depth + 1, out)

    def list_files(self, partition_path: str, include_dirs: bool = False) -> list[FileInfo]:
        """Entries of a partition directory (cached), files only unless ``include_dirs``."""
        rel = check_relative(partition_path)
        infos = self._listing.get(rel)
        if infos is None:
            if self.listing is not None:
                infos = self._listing[rel] = self.listing.list_files(rel)
            else:
                infos = self._listing[rel] = self.storage.list_dir(rel)
        return list(infos) if include_dirs else [i for i in infos if not i.is_dir]

    # -- timeline-derived ----------------------------------------------------------------------
    def replaced_file_groups(self, as_of: str | None = None) -> set[tuple[str, str]]:
        """``(partition, file id)`` replaced by completed replacecommits requested <= ``as_of``."""
        out: set[tuple[str, str]] = set()
        for inst in self.timeline.completed_commits():
            if inst.action != "replacecommit" or (as_of is not None and inst.timestamp > as_of):
                continue
            meta = self._replace_meta.get(inst.timestamp)
            if meta is None:
                meta = HoodieCommitMetadata.from_bytes(
                    self.timeline.read_details(inst), self.timeline.layout_version, inst
                )
                self._replace_meta[inst.timestamp] = meta
            for part, ids in meta.replaced_file_ids().items():
                out.update((part, fid) for fid in ids)
        return out

    def _base_visible(self, ts: str, as_of: str | None) -> bool:
        return (as_of is None or ts <= as_of) and self.timeline.is_committed(ts)

    # -- building ------------------------------------------------------------------------------
    def _partition_groups(self, partition: str, as_of: str | None) -> dict[str, FileGroup]:
        tl = self.timeline
        groups: dict[str, _Group] = {}
        sizes: dict[str, int] = {}
        for info in self.list_files(partition):
            name = info.name
            if name.startswith(PARTITION_METAFILE):
                continue
            base = parse_base_file_name(name)
            if base is not None:
                if base.extension not in self.base_file_extensions:
                    continue
                if not self._base_visible(base.instant, as_of):
                    continue
                groups.setdefault(base.file_id, _Group()).bases[base.instant] = name
                sizes[name] = info.size
                continue
            log = parse_log_file_name(name)
            if log is None or log.extension != "log" or log.is_cdc:
                continue
            if as_of is not None and log.instant > as_of:
                continue
            archived = False
            if self.uses_completion_time:
                completion = tl.completion_time(log.instant)
                if completion is None:
                    if not tl.is_committed(log.instant):
                        continue
                    completion, archived = log.instant, True  # older than the active timeline
                order_time = completion
            else:
                keep = tl.is_committed(log.instant) or (
                    self.merge_pending_compaction_logs and tl.is_pending_compaction(log.instant)
                )
                if not keep:
                    continue
                order_time = log.instant
            groups.setdefault(log.file_id, _Group()).logs.append(
                _Log(name, log.instant, log.version, log.write_token, order_time, archived)
            )
            sizes[name] = info.size

        out: dict[str, FileGroup] = {}
        for file_id, g in groups.items():
            out[file_id] = self._build_group(partition, file_id, g, sizes)
        return out

    def _build_group(
        self, partition: str, file_id: str, g: _Group, sizes: dict[str, int]
    ) -> FileGroup:
        keys = sorted(g.bases)
        members: dict[str, list[_Log]] = {k: [] for k in keys}
        if keys and self.archived_completion is not None:
            for lg in g.logs:
                if lg.archived and keys[-1] > lg.instant:
                    # requested before a later base: the slice it joined depends on when it
                    # completed (before or after that compaction's plan), which only the
                    # archived timeline still tells (as Java's completion-time view reads it)
                    lg.order_time = self.archived_completion(lg.instant) or lg.instant
                    lg.archived = False
        for lg in sorted(g.logs, key=lambda x: (x.order_time, x.version, x.token, x.name)):
            # v6: largest base instant <= the instant in the name;
            # v8+: largest base instant <= the deltacommit's completion time.
            target = max((k for k in keys if k <= lg.order_time), default=None)
            if target is None:
                # no base at or before it: a log-only slice keyed by the log's own instant
                target = lg.instant
                if target not in members:
                    members[target] = []
                    keys = sorted(members)
            members[target].append(lg)
        fg = FileGroup(partition, file_id)
        for key in sorted(members):
            logs = members[key]
            names = [lg.name for lg in logs]
            base = g.bases.get(key)
            fs = {n: sizes.get(n, 0) for n in ([base] if base else []) + names}
            fg.slices[key] = FileSlice(partition, file_id, key, base, names, fs)
        return fg

    def all_file_groups(
        self,
        partitions: Iterable[str] | None = None,
        *,
        as_of: str | None = None,
        include_replaced: bool = False,
    ) -> list[FileGroup]:
        """Every file group with all its committed slices, sorted by (partition, file id)."""
        parts = (
            self.list_partitions()
            if partitions is None
            else [check_relative(p) for p in partitions]
        )
        replaced = set() if include_replaced else self.replaced_file_groups(as_of)
        out: list[FileGroup] = []
        for part in sorted(set(parts)):
            for fid, fg in sorted(self._partition_groups(part, as_of).items()):
                if (part, fid) in replaced:
                    continue
                out.append(fg)
        return out

    def latest_file_slices(
        self, as_of: str | None = None, partitions: Iterable[str] | None = None
    ) -> list[FileSlice]:
        """The latest committed slice of every file group not replaced, as of ``as_of``.

        Sorted by (partition path, file id). ``as_of`` is an instant time: files of later
        instants are left out.
        """
        out: list[FileSlice] = []
        for fg in self.all_file_groups(partitions, as_of=as_of):
            s = fg.latest_slice(as_of)
            if s is not None and not s.is_empty:
                out.append(s)
        return out

    def latest_file_slice(
        self, partition_path: str, file_id: str, as_of: str | None = None
    ) -> FileSlice | None:
        """The latest slice of one file group (``None`` if absent or replaced)."""
        for s in self.latest_file_slices(as_of, [partition_path]):
            if s.file_id == file_id:
                return s
        return None
