"""``HoodieTable``: the one handle every part of hoodie_ray opens a table through.

Opening a table reads ``hoodie.properties`` once and decides the version-specific behaviour
once (timeline layout, log naming, commit-metadata encoding, completion-time slicing); readers,
compaction, cleaning, writers, the CLI and upgrade all hold one of these (hudi-rs's ``Table``,
pyiceberg's ``Table``). The active timeline is loaded lazily and kept: :meth:`refresh` picks up
other processes' instants without re-parsing known ones, and the handle's own transitions go
through the same in-memory timeline.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from hoodie_ray.avro.schema import add_meta_fields_arrow, avro_to_arrow_schema
from hoodie_ray.config.table_config import HoodieTableConfig
from hoodie_ray.exceptions import HoodieError, HoodiePathError, HoodieTableNotFoundError
from hoodie_ray.file_group.view import FileSlice, FileSystemView
from hoodie_ray.meta import META_FIELDS
from hoodie_ray.metadata.layout import completed_partitions, has_metadata_table
from hoodie_ray.metadata.reader import MetadataListing, MetadataTable
from hoodie_ray.storage import Storage, join, open_storage, qualified_path
from hoodie_ray.timeline.archive import ArchivedLogTimeline, ArchivedTimeline, LSMTimeline
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.metadata import HoodieCommitMetadata
from hoodie_ray.timeline.plans import HoodieCleanMetadata, read_avro_metadata
from hoodie_ray.timeline.timeline import ActiveTimeline

__all__ = ["HoodieTable", "resolve_table_schema"]


class HoodieTable:
    """A table: its storage, config, timeline, file-system view and latest schema.

    Build with :meth:`load` (or :meth:`from_storage` when a :class:`Storage` is at hand).

    Example::

        t = hr.HoodieTable.load("/data/trips")
        t.config["hoodie.table.type"]
        [i.timestamp for i in t.timeline]
        t.latest_file_slices()
    """

    def __init__(
        self,
        path: str,
        storage: Storage,
        table_config: HoodieTableConfig,
        storage_options: Mapping[str, Any] | None = None,
        active_timeline: ActiveTimeline | None = None,
    ) -> None:
        self.path = path
        self.storage = storage
        self.table_config = table_config
        self.storage_options = storage_options
        self._timeline = active_timeline
        self._archived: ArchivedTimeline | None = None
        self._archived_completions: dict[str, str | None] = {}  # archived_completion_time
        self._mdt: MetadataTable | None = None
        self._metadata: dict[str, HoodieCommitMetadata] = {}
        self._base_writes: tuple[tuple[str, ...], dict[tuple[str, str], list[str]]] | None = None
        self._schema: pa.Schema | None = None
        self._schema_at: tuple[str, ...] | None = None

    # -- opening -------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str, storage_options: Mapping[str, Any] | None = None) -> HoodieTable:
        """Open the table at ``path``.

        Raises:
            HoodieTableNotFoundError: no ``.hoodie/hoodie.properties`` at ``path``.
        """
        if not isinstance(path, str) or not path:
            raise HoodieTableNotFoundError(f"not a Hudi table path: {path!r}")
        # a relative path made absolute: tasks elsewhere re-open the table from base_uri
        return cls.from_storage(
            open_storage(path, storage_options), storage_options, qualified_path(path)
        )

    @classmethod
    def from_storage(
        cls,
        storage: Storage,
        storage_options: Mapping[str, Any] | None = None,
        path: str | None = None,
    ) -> HoodieTable:
        """Open the table rooted at ``storage`` (reads ``hoodie.properties`` once)."""
        try:
            cfg = HoodieTableConfig.load(storage)
        except HoodieTableNotFoundError:
            if storage.is_file(""):
                raise HoodiePathError(
                    f"{storage.base_uri} is a file, not a table directory"
                ) from None
            raise
        return cls(path or storage.base_uri, storage, cfg, storage_options)

    @property
    def base_uri(self) -> str:
        """The table's base path as it was opened (what tasks re-open storage from)."""
        return self.path

    # -- the version-specific behaviour, decided once ------------------------------------------
    @property
    def table_version(self) -> int:
        return self.table_config.table_version

    @property
    def layout_version(self) -> int:
        """``hoodie.timeline.layout.version``: 1 (``.hoodie/``, JSON metadata) or 2."""
        return self.table_config.timeline_layout_version

    @property
    def completion_time_slicing(self) -> bool:
        """Table version 8+: log files join file slices by completion time, are named by
        their own delta commit, and need no carry-over after a compaction."""
        return self.table_config.completion_time_slicing

    @property
    def is_mor(self) -> bool:
        return self.table_config.is_mor

    @property
    def name(self) -> str:
        return self.table_config.name

    @property
    def config(self) -> dict[str, str]:
        """The table's ``hoodie.properties`` as a dict."""
        return dict(self.table_config.props)

    def commit_metadata_bytes(self, meta: HoodieCommitMetadata) -> bytes:
        """Commit metadata as this table's timeline stores it (JSON in layout 1, Avro in 2)."""
        return meta.to_bytes(self.layout_version)

    # -- timeline ------------------------------------------------------------------------------
    @property
    def active_timeline(self) -> ActiveTimeline:
        """The active timeline, listed on first use and kept up to date by :meth:`refresh`."""
        if self._timeline is None:
            self._timeline = ActiveTimeline.of_table(self.storage, self.table_config).load()
        return self._timeline

    @property
    def timeline(self) -> list[Instant]:
        """Instants of the active timeline, oldest first (``.timestamp``, ``.action``, ``.state``)."""
        return list(self.active_timeline.instants)

    def refresh(self) -> HoodieTable:
        """Pick up instants other processes added or removed (parses new names only)."""
        self.active_timeline.reload()
        return self

    reload = refresh

    @property
    def archived_timeline(self) -> ArchivedTimeline:
        """The archived timeline: the LSM history (table versions 8+) or the archive log files
        under ``.hoodie/archived`` (version 6)."""
        if self._archived is None:
            path = self.table_config.archive_path
            if self.layout_version >= 2:
                self._archived = LSMTimeline(self.storage, path)
            else:
                self._archived = ArchivedLogTimeline(self.storage, path)
        return self._archived

    def has_archived_instants(self) -> bool:
        """True if the table's archived timeline holds anything (one listing)."""
        arch = self.archived_timeline
        if isinstance(arch, LSMTimeline):
            return bool(arch.manifest())
        return bool(arch.file_names())

    def forget(self, instants: list[Instant]) -> None:
        """Drop cached metadata of instants that left the active timeline."""
        for inst in instants:
            self._metadata.pop(inst.timestamp, None)

    def commits(self) -> list[Instant]:
        """Completed commit/deltacommit/replacecommit instants, oldest requested first."""
        return self.active_timeline.completed_commits()

    def earliest_retained_commit(self) -> str | None:
        """The last completed clean's ``earliestCommitToRetain``: the oldest commit whose
        file slices the cleaner kept (a read as of an older one may miss files: Java's
        ``validateTimestampAsOf``); None without a clean or where the clean names none
        (KEEP_LATEST_FILE_VERSIONS)."""
        tl = self.active_timeline
        cleans = tl.find([Action.CLEAN], [State.COMPLETED])
        if not cleans:
            return None
        last = cleans[-1]
        meta = HoodieCleanMetadata.from_bytes(tl.read_details(last), tl.file_name(last))
        return meta.earliest_commit_to_retain or None

    def pending_clusterings(self) -> list[Instant]:
        """Pending clustering instants (on timeline layout 1 a replacecommit whose requested
        plan says ``CLUSTER``; other pending replacecommits are overwrites)."""
        tl = self.active_timeline
        out = []
        for inst in tl.pending():
            if inst.action == Action.CLUSTERING:
                out.append(inst)
            elif inst.action == Action.REPLACE_COMMIT:
                data = tl.read_details(Instant(inst.timestamp, inst.action, State.REQUESTED))
                if (
                    data
                    and read_avro_metadata(data, str(inst))[1].get("operationType") == "CLUSTER"
                ):
                    out.append(inst)
        return out

    def savepointed_commits(self) -> set[str]:
        """The instants of the completed savepoints (their files outlive every clean)."""
        found = self.active_timeline.find([Action.SAVEPOINT], [State.COMPLETED])
        return {i.timestamp for i in found}

    def base_writes(self) -> dict[tuple[str, str], list[str]]:
        """``(partition, file id)`` -> the instants of the active timeline's completed commits
        that wrote a base file of the group, in order (their write stats): a read as of an
        instant must find the slice of the latest of them by then, or its slice was cleaned."""
        done = self.commits()
        # the commits grow at the end and leave from the start (archival) or the end (restore)
        commits = (str(len(done)), done[0].timestamp, done[-1].timestamp) if done else ()
        if self._base_writes is None or self._base_writes[0] != commits:
            out: dict[tuple[str, str], list[str]] = {}
            for inst in done:
                for part, stat in self.metadata(inst).iter_write_stats():
                    if stat.file_id and stat.path and stat.path.endswith(".parquet"):
                        out.setdefault((part, stat.file_id), []).append(inst.timestamp)
            self._base_writes = (commits, out)
        return self._base_writes[1]

    def cleaned(self) -> bool:
        """Whether a clean completed on the active timeline (files of older slices may be
        gone)."""
        return bool(self.active_timeline.find([Action.CLEAN], [State.COMPLETED]))

    def savepoint_may_stand_in(self) -> bool:
        """Whether a read as of an older instant may meet a savepoint's older file slice where
        a cleaner removed the one it needs (stale records, no error): a clean completed and a
        savepoint exists."""
        return self.cleaned() and bool(self.savepointed_commits())

    def metadata(self, inst: Instant) -> HoodieCommitMetadata:
        """The decoded metadata of a completed commit-like instant (cached)."""
        meta = self._metadata.get(inst.timestamp)
        if meta is None:
            tl = self.active_timeline
            meta = HoodieCommitMetadata.from_bytes(tl.read_details(inst), tl.layout_version, inst)
            self._metadata[inst.timestamp] = meta
        return meta

    def completion_map(self) -> dict[str, str]:
        """Requested time -> completion time of every completed commit (layout 2)."""
        return {i.timestamp: i.completion_time or i.timestamp for i in self.commits()}

    # -- schema --------------------------------------------------------------------------------
    @property
    def schema(self) -> pa.Schema | None:
        """The table schema (meta fields first when populated), or None for a schema-less
        table. Resolved again only when the completed commits changed."""
        at = tuple(i.timestamp for i in self.commits()[-1:])
        if self._schema_at != at:
            self._schema = resolve_table_schema(self, self._metadata)
            self._schema_at = at
        return self._schema

    def latest_writes(self) -> Iterator[tuple[Instant, str]]:
        """The completed writes that record a schema, newest completed first (by completion
        time where the timeline keeps it), each with its ``extraMetadata.schema``: the
        table's schema as its writers evolve it. Compactions and clusterings, which carry
        whatever schema they were planned with, are skipped."""
        writes = sorted(self.commits(), key=lambda i: i.completion_time or i.timestamp)
        for inst in reversed(writes):
            meta = self.metadata(inst)
            op = (meta.operation_type or "").upper()
            if meta.compacted or op in _TABLE_SERVICE_OPERATIONS:
                continue
            schema = meta.extra_metadata.get("schema")
            if schema:
                yield inst, schema

    def latest_commit_schema_json(self) -> str | None:
        """The latest completed write's ``extraMetadata.schema`` (Avro JSON,
        :meth:`latest_writes`), else the latest table service's, or None."""
        for _, written in self.latest_writes():
            return written
        for inst in reversed(self.commits()):
            schema = self.metadata(inst).extra_metadata.get("schema")
            if schema:
                return schema
        return None

    # -- metadata table ------------------------------------------------------------------------
    @property
    def uses_metadata_table(self) -> bool:
        """True if listings come from the metadata table's ``files`` partition: table version
        8+ and ``files`` listed complete in ``hoodie.table.metadata.partitions`` (hudi-rs's
        rule; version 6 metadata tables are not read)."""
        return self.table_version >= 8 and has_metadata_table(self.table_config)

    @property
    def metadata_partitions(self) -> list[str]:
        """Metadata-table partitions listed complete (``hoodie.table.metadata.partitions``)."""
        return completed_partitions(self.table_config)

    @property
    def metadata_table(self) -> MetadataTable:
        """The metadata table's read side (``.hoodie/metadata``), kept with this handle."""
        if self._mdt is None:
            self._mdt = MetadataTable(self.storage, self.active_timeline)
        return self._mdt

    def set_table_config(self, config: HoodieTableConfig) -> None:
        """Adopt properties this process just saved (metadata partitions, upgrades)."""
        self.table_config = config

    # -- file system view ----------------------------------------------------------------------
    def view(self, refresh_metadata: bool = True) -> FileSystemView:
        """The file-system view of the table at its current timeline (listed through the
        metadata table when the table keeps one, its timeline reloaded first unless
        ``refresh_metadata`` is false: the caller just did)."""
        listing = None
        if self.uses_metadata_table:
            mdt = self.metadata_table
            listing = MetadataListing(mdt.refresh() if refresh_metadata else mdt)
        return FileSystemView.for_table(
            self.storage,
            self.table_config,
            self.active_timeline,
            listing,
            archived_completion=self.archived_completion_time,
        )

    def storage_view(self, timeline: ActiveTimeline | None = None) -> FileSystemView:
        """A view listed from storage even when the table keeps a metadata table: for finding
        files no commit lists (what an interrupted run left behind); ``timeline``: the one
        to slice by (the active timeline by default; the metadata writer's as a commit will
        leave it)."""
        return FileSystemView.for_table(
            self.storage,
            self.table_config,
            timeline if timeline is not None else self.active_timeline,
            archived_completion=self.archived_completion_time,
        )

    def archived_completion_time(self, instant: str) -> str | None:
        """The completion time of ``instant`` from the archived timeline (version 8+; None
        when it is not there). The time columns of the history files whose range holds it
        are read once and kept (archived instants never change)."""
        if instant not in self._archived_completions:
            arch = self.archived_timeline
            if isinstance(arch, LSMTimeline):
                self._archived_completions.update(arch.completion_times_near(instant))
            self._archived_completions.setdefault(instant, None)
        return self._archived_completions[instant]

    def latest_file_slices(self, as_of: str | None = None) -> list[FileSlice]:
        """The latest file slice of every file group (``.partition_path``, ``.file_id``,
        ``.base_instant``, ``.base_file``, ``.log_files``)."""
        return self.view().latest_file_slices(as_of=as_of)

    def __repr__(self) -> str:
        return f"HoodieTable({self.path!r}, version={self.table_version})"


def _base_file_schema(storage: Storage, rel: str) -> pa.Schema | None:
    import pyarrow.parquet as pq

    if not rel.endswith(".parquet") or not storage.exists(rel):
        return None
    with storage.open_input(rel) as f:
        return pq.read_schema(f)


#: Operation types of commits a table service completes (not a writer's schema change).
_TABLE_SERVICE_OPERATIONS = frozenset({"COMPACT", "LOG_COMPACT", "CLUSTER"})

#: Writer schemas of commit files already decoded in this process, by a digest of the file's
#: bytes (a commit's metadata is parsed whole, write stats and all, to find it): reads of a
#: table whose latest commit did not change skip the parse.
_COMMIT_SCHEMAS: dict[tuple[bytes, int], str] = {}
_COMMIT_SCHEMAS_KEPT = 256
_COMMIT_SCHEMAS_LOCK = threading.Lock()


@functools.lru_cache(maxsize=64)
def _arrow_or_none(avro: str | None) -> pa.Schema | None:
    """The Arrow schema of a commit's writer schema, or None (none, or one that does not
    convert: the next fallback is tried); kept per text (each read's planning resolves the
    same latest commit's schema)."""
    if not avro:
        return None
    try:
        return avro_to_arrow_schema(avro)
    except HoodieError:
        return None


def resolve_table_schema(
    table: HoodieTable, metadata_of: dict[str, HoodieCommitMetadata] | None = None
) -> pa.Schema | None:
    """The table's Arrow schema (meta fields first when the table populates them).

    The latest completed commit's ``extraMetadata.schema`` (Avro, without meta fields) with the
    meta fields prepended (spec §2.4; hudi-rs ``schema/resolver.rs``); fallbacks, in order: the
    schema of a base file the latest commit wrote, then ``hoodie.table.create.schema``.
    ``metadata_of`` caches decoded commit metadata by instant time. None for a table with no
    usable schema at all (an empty table without ``hoodie.table.create.schema``).
    """
    metadata_of = metadata_of if metadata_of is not None else {}
    storage, config, timeline = table.storage, table.table_config, table.active_timeline
    schema: pa.Schema | None = None
    for inst in reversed(timeline.completed_commits()):
        meta = metadata_of.get(inst.timestamp)
        writer_schema = meta.schema if meta is not None else None
        if meta is None:
            data = timeline.read_details(inst)
            key = (hashlib.sha256(data).digest(), timeline.layout_version)
            writer_schema = _COMMIT_SCHEMAS.get(key)
            if writer_schema is None:
                meta = HoodieCommitMetadata.from_bytes(data, timeline.layout_version, inst)
                metadata_of[inst.timestamp] = meta
                writer_schema = meta.schema
                if writer_schema:
                    with _COMMIT_SCHEMAS_LOCK:
                        _COMMIT_SCHEMAS[key] = writer_schema
                        while len(_COMMIT_SCHEMAS) > _COMMIT_SCHEMAS_KEPT:
                            _COMMIT_SCHEMAS.pop(next(iter(_COMMIT_SCHEMAS)))
        schema = _arrow_or_none(writer_schema)
        if schema is not None:
            break
        if meta is None:  # its schema came from the cache and did not convert
            meta = HoodieCommitMetadata.from_bytes(
                timeline.read_details(inst), timeline.layout_version, inst
            )
        for part, stat in meta.iter_write_stats():
            for rel in (stat.path, join(part, stat.base_file) if stat.base_file else None):
                if rel:
                    schema = _base_file_schema(storage, rel)
                    if schema is not None:
                        break
            if schema is not None:
                break
        if schema is not None:
            schema = pa.schema([f for f in schema if f.name not in META_FIELDS])
            break
    if schema is None and config.create_schema:
        try:
            schema = avro_to_arrow_schema(config.create_schema)
        except HoodieError:
            schema = None
    if schema is None:
        return None
    if config.populate_meta_fields:
        schema = add_meta_fields_arrow(schema)
    else:
        schema = pa.schema([f for f in schema if f.name not in META_FIELDS])
    return pa.schema([f.with_nullable(True) for f in schema])
