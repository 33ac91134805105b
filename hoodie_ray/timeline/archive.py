"""Timeline archival: which instants leave the active timeline, and the archived timeline they go to.

Names from Hudi: ``HoodieTimelineArchiver`` (here :func:`instants_to_archive` decides and the
job layer drives), ``LSMTimelineWriter`` / ``LSMTimeline`` (here :class:`LSMTimeline`, table
versions 8+) and ``HoodieArchivedTimeline`` v1 (here :class:`ArchivedLogTimeline`, table
version 6). Both archived timelines hold one :class:`ArchivedInstant` per completed action.

Selection (``TimelineArchiverV2.getInstantsToArchive``): nothing until the completed commits
(commit, deltacommit, replacecommit; a compaction completes as a commit) exceed
``hoodie.keep.max.commits``; then the oldest down to ``hoodie.keep.min.commits``, but only those
requested before every one of:

* the newest completed commit older than the earliest pending write (a pending instant stays
  inside the active timeline, so its files never fall behind the archival boundary);
* the earliest commit the latest clean retains (cleaning and time travel still need it);
* the first savepoint;
* the first replacecommit at or after that retained commit (its replaced file groups may not
  be cleaned yet: archiving it would bring them back), or older but with files of a replaced
  file group still in storage (hoodie_ray's cleaner deletes old slices, not the replaced file
  groups Java's ``CleanPlanner.getReplacedFilesEligibleToClean`` deletes: a Java-written
  clustering stays on the active timeline until they are gone);
* merge-on-read: the latest compaction while fewer than ``compaction.delta_commits`` delta
  commits follow it (the scheduler counts them on the active timeline).

Completed cleans and rollbacks older than the last archived commit go with them. Every file of
an archived instant (requested, inflight, completed) leaves the active timeline together, after
the archive holds the instant (:meth:`ActiveTimeline.remove_archived` orders the deletes).

LSM timeline layout (``.hoodie/timeline/history/``): ``<min>_<max>_<layer>.parquet`` files of
``HoodieLSMTimelineInstant`` rows (one per completed action: instant time, completion time,
action, the completed file's bytes as ``metadata``, the plan's bytes as ``plan``, version 1),
``manifest_<N>`` (Jackson-pretty JSON ``{"files": [{"fileName", "fileLen"}]}``: the files that
make up snapshot N) and ``_version_`` (N in decimal). A write adds one layer-0 file and a new
manifest; every ``hoodie.timeline.compaction.batch.size`` files of a layer merge into one of
the next; manifests beyond the newest three and files none of them lists are deleted. Readers
see only the files of the latest manifest, so a write killed at any point leaves the previous
snapshot, and a re-run of the same archival finds its file already committed and skips it.
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieError, HoodieTimelineError
from hoodie_ray.log_format.blocks import (
    BLOCK_CONTENT_VERSION,
    AvroDataBlock,
    HeaderMetadataType,
    serialize_block,
)
from hoodie_ray.log_format.reader import LogReader
from hoodie_ray.storage import Storage, check_relative, join
from hoodie_ray.timeline.avro_io import is_avro_container, read_single_record
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.metadata import (
    COMMIT_METADATA_SCHEMA,
    REPLACE_COMMIT_METADATA_SCHEMA,
    HoodieCommitMetadata,
)
from hoodie_ray.timeline.plans import (
    CLEAN_METADATA_SCHEMA,
    CLEANER_PLAN_SCHEMA,
    COMPACTION_PLAN_SCHEMA,
    ROLLBACK_METADATA_SCHEMA,
    HoodieCleanMetadata,
)
from hoodie_ray.timeline.timeline import ActiveTimeline

__all__ = [
    "ARCHIVED_META_ENTRY_SCHEMA",
    "ArchivedInstant",
    "ArchivedLogTimeline",
    "ArchivedTimeline",
    "LSMTimeline",
    "active_action",
    "archive_instants",
    "instants_to_archive",
]

LSM_INSTANT_VERSION = 1  # LSMTimeline.LSM_TIMELINE_INSTANT_VERSION_1
VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
RETAINED_MANIFESTS = 3  # hoodie.timeline.manifest.retained.versions
_DATA_FILE_RE = re.compile(r"^(\d+)_(\d+)_(\d)\.parquet$")
_MANIFEST_RE = re.compile(r"^manifest_(\d+)$")
_NS = "org.apache.hudi.avro.model"

_LSM_AVRO_SCHEMA = {
    "type": "record",
    "name": "HoodieLSMTimelineInstant",
    "namespace": _NS,
    "fields": [
        {"name": "instantTime", "type": ["null", "string"], "default": None},
        {"name": "completionTime", "type": ["null", "string"], "default": None},
        {"name": "action", "type": ["null", "string"], "default": None},
        {"name": "metadata", "type": ["null", "bytes"], "default": None},
        {"name": "plan", "type": ["null", "bytes"], "default": None},
        {"name": "version", "type": "int", "default": LSM_INSTANT_VERSION},
    ],
}
_LSM_ARROW_SCHEMA = pa.schema(
    [
        pa.field("instantTime", pa.string()),
        pa.field("completionTime", pa.string()),
        pa.field("action", pa.string()),
        pa.field("metadata", pa.binary()),
        pa.field("plan", pa.binary()),
        pa.field("version", pa.int32(), nullable=False),
    ],
    metadata={"parquet.avro.schema": json.dumps(_LSM_AVRO_SCHEMA, separators=(",", ":"))},
)

# the pending actions whose requested (or inflight) file is a plan worth keeping
_PLAN_ACTIONS = frozenset(
    {
        Action.CLEAN,
        Action.COMPACTION,
        Action.LOG_COMPACTION,
        Action.REPLACE_COMMIT,
        Action.CLUSTERING,
    }
)
_INFLIGHT_PLANS = frozenset({Action.REPLACE_COMMIT, Action.CLUSTERING})


@dataclass(frozen=True)
class ArchivedInstant:
    """One completed action on the archived timeline.

    ``action`` is the completed action (a compaction shows as ``commit`` with its plan in
    ``plan``); ``metadata`` is the completed instant file's bytes, ``plan`` the plan's bytes
    (clean, compaction, clustering and replace actions), both as the active timeline held them.
    """

    instant_time: str
    action: str
    completion_time: str | None
    metadata: bytes | None = None
    plan: bytes | None = None

    @property
    def instant(self) -> Instant:
        """The completed :class:`Instant` this entry stands for."""
        return Instant(self.instant_time, self.action, State.COMPLETED, self.completion_time)


# -- selection ------------------------------------------------------------------------------------


def _latest_clean_retains(tl: ActiveTimeline) -> str | None:
    """``earliestCommitToRetain`` of the latest completed clean, or None."""
    for inst in reversed(tl.find([Action.CLEAN], [State.COMPLETED])):
        data = tl.read_details(inst)
        if not data:
            continue
        meta = HoodieCleanMetadata.from_bytes(data, f"clean {inst.timestamp}")
        return meta.earliest_commit_to_retain or None
    return None


def _replaced_files_remain(tl: ActiveTimeline, inst: Instant) -> bool:
    """Whether a file group the completed replacecommit ``inst`` replaced still has a base or
    log file in storage (unreadable metadata counts as yes: archival then keeps the instant)."""
    try:
        data = tl.read_details(inst)
        if not data:
            return False
        replaced = HoodieCommitMetadata.from_bytes(data, tl.layout_version, inst)
        for partition, ids in replaced.replaced_file_ids().items():
            for name in tl.storage.list_file_names(check_relative(partition)):
                fid = name[1:] if name.startswith(".") else name  # log files start with "."
                if fid.split("_", 1)[0] in ids:
                    return True
    except HoodieError:
        return True
    return False


def instants_to_archive(
    tl: ActiveTimeline,
    keep_min: int,
    keep_max: int,
    *,
    is_mor: bool = False,
    compaction_delta_commits: int | None = None,
    retain_from: str | None = None,
) -> list[Instant]:
    """The completed instants to move to the archived timeline now, oldest first (see the
    module docstring for the rules); empty while the commits stay within ``keep_max``.
    ``retain_from``: an instant the caller needs kept, with every later one (the metadata
    table's bound)."""
    commits = tl.completed_commits()
    if len(commits) <= keep_max:
        return []
    bounds: list[str] = [retain_from] if retain_from is not None else []
    pending = tl.pending_commits()
    if pending:
        first_pending = pending[0].timestamp
        before = [c.timestamp for c in commits if c.timestamp < first_pending]
        bounds.append(before[-1] if before else first_pending)
    retained = _latest_clean_retains(tl)
    if retained:
        bounds.append(retained)
    savepoints = tl.find([Action.SAVEPOINT])
    if savepoints:
        bounds.append(savepoints[0].timestamp)
    replaces = [
        i.timestamp
        for i in tl.instants
        if i.comparable_action == Action.REPLACE_COMMIT
        and (
            retained is None
            or i.timestamp >= retained
            or (i.state is State.COMPLETED and _replaced_files_remain(tl, i))
        )
    ]
    if replaces:
        bounds.append(replaces[0])
    if is_mor and compaction_delta_commits:
        compactions = [c for c in commits if c.action == Action.COMMIT]
        since = compactions[-1].timestamp if compactions else ""
        deltas = [c for c in commits if c.action == Action.DELTA_COMMIT and c.timestamp > since]
        if len(deltas) < compaction_delta_commits:
            bounds.append(since or (deltas[0].timestamp if deltas else commits[-1].timestamp))
    bound = min(bounds) if bounds else None
    chosen = [c for c in commits[: len(commits) - keep_min] if bound is None or c.timestamp < bound]
    if not chosen:
        return []
    last = chosen[-1].timestamp
    others = [
        i for i in tl.find([Action.CLEAN, Action.ROLLBACK], [State.COMPLETED]) if i.timestamp < last
    ]
    return sorted(chosen + others, key=lambda i: (i.timestamp, i.comparable_action))


def active_action(tl: ActiveTimeline, inst: Instant) -> ArchivedInstant:
    """The archived entry of the completed ``inst``: its completed file's bytes as metadata and,
    for actions with a plan, the inflight file's bytes if any, else the requested file's."""
    if not inst.is_completed:
        raise HoodieTimelineError(f"instant {inst} is not completed: it cannot be archived")
    metadata = tl.read_details(inst) or None
    plan: bytes | None = None
    for cand in tl.pending_files_of(inst):
        if cand.action in _PLAN_ACTIONS:
            data = tl.read_details(cand)
            # a replace's inflight file (the clustering plan) wins; others keep the requested
            if data and (plan is None or (cand.is_inflight and cand.action in _INFLIGHT_PLANS)):
                plan = data
    return ArchivedInstant(inst.timestamp, inst.action, inst.completion_time, metadata, plan)


# -- the LSM timeline (table versions 8+) ---------------------------------------------------------


def _manifest_json(files: Sequence[tuple[str, int]]) -> bytes:
    """Jackson's default pretty printer's rendering of ``HoodieLSMTimelineManifest``."""
    if not files:
        return b'{\n  "files" : [ ]\n}'
    items = ", ".join(
        f'{{\n    "fileName" : {json.dumps(n)},\n    "fileLen" : {int(size)}\n  }}'
        for n, size in files
    )
    return f'{{\n  "files" : [ {items} ]\n}}'.encode()


def _layer(name: str) -> int:
    m = _DATA_FILE_RE.match(name)
    return int(m.group(3)) if m else 0


class LSMTimeline:
    """The LSM archived timeline of a table version 8+ table.

    Args:
        storage: the table's storage.
        path: the history folder relative to the base path (``.hoodie/timeline/history``).
    """

    def __init__(self, storage: Storage, path: str) -> None:
        self.storage = storage
        self.path = path

    def _rel(self, name: str) -> str:
        return join(self.path, name)

    # -- snapshot ---------------------------------------------------------------------------------
    def latest_version(self) -> int:
        """The latest manifest's number: ``_version_``'s, else the largest listed; 0 if none."""
        if self.storage.exists(self._rel(VERSION_FILE)):
            text = self.storage.read_bytes(self._rel(VERSION_FILE)).decode("utf-8", "replace")
            if text.strip().isdigit():
                return int(text.strip())
        versions = [
            int(m.group(1))
            for n in self.storage.list_file_names(self.path)
            if (m := _MANIFEST_RE.match(n))
        ]
        return max(versions, default=0)

    def manifest(self, version: int | None = None) -> list[tuple[str, int]]:
        """(file name, length) of the files snapshot ``version`` (default: the latest) holds."""
        v = self.latest_version() if version is None else version
        if v <= 0:
            return []
        rel = self._rel(f"{MANIFEST_PREFIX}{v}")
        data = self.storage.read_bytes(rel)
        if not data.strip():
            return []
        try:
            doc = json.loads(data)
            return [(str(f["fileName"]), int(f["fileLen"])) for f in doc.get("files") or []]
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise HoodieCorruptedDataError(
                f"archived timeline manifest {self.storage.uri(rel)} is not valid: {e}"
            ) from None

    def _commit_manifest(self, version: int, files: Sequence[tuple[str, int]]) -> int:
        new = version + 1
        rel = self._rel(f"{MANIFEST_PREFIX}{new}")
        self.storage.delete(rel)  # a manifest a killed write left behind
        self.storage.write_atomic(rel, _manifest_json(files))
        self.storage.write_atomic(self._rel(VERSION_FILE), str(new).encode())
        return new

    # -- writing ----------------------------------------------------------------------------------
    def _write_file(self, name: str, rows: Sequence[ArchivedInstant]) -> tuple[str, int]:
        table = pa.table(
            {
                "instantTime": [r.instant_time for r in rows],
                "completionTime": [r.completion_time for r in rows],
                "action": [r.action for r in rows],
                "metadata": [r.metadata for r in rows],
                "plan": [r.plan for r in rows],
                "version": pa.array([LSM_INSTANT_VERSION] * len(rows), pa.int32()),
            },
            schema=_LSM_ARROW_SCHEMA,
        )
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="gzip")
        data = buf.getvalue()
        self.storage.write_bytes(self._rel(name), data)
        return name, len(data)

    def write(self, rows: Sequence[ArchivedInstant], batch_size: int = 10) -> None:
        """Add ``rows`` (sorted by instant time) as one layer-0 file and commit a new manifest;
        then merge full layers and drop what no retained manifest needs. A file of the same
        instants already committed (a re-run after a kill) is not written again."""
        if not rows:
            return
        rows = sorted(rows, key=lambda r: r.instant_time)
        name = f"{rows[0].instant_time}_{rows[-1].instant_time}_0.parquet"
        version = self.latest_version()
        files = self.manifest(version)
        if all(n != name for n, _ in files):
            self.storage.delete(self._rel(name))
            entry = self._write_file(name, rows)
            version = self._commit_manifest(version, [*files, entry])
        self.compact_and_clean(batch_size)

    def compact_and_clean(self, batch_size: int = 10) -> None:
        """Merge the oldest ``batch_size`` files of each full layer into one file of the next
        layer (``LSMTimelineWriter.compactAndClean``), then clean."""
        batch = max(2, batch_size)
        compactions = 0
        layer = 0
        while True:
            version = self.latest_version()
            files = self.manifest(version)
            in_layer = sorted(n for n, _ in files if _layer(n) == layer)
            if len(in_layer) < batch:
                break
            picked = in_layer[:batch]
            rows = self._read_files(picked)
            lo = min(_DATA_FILE_RE.match(n).group(1) for n in picked)  # type: ignore[union-attr]
            hi = max(_DATA_FILE_RE.match(n).group(2) for n in picked)  # type: ignore[union-attr]
            name = f"{lo}_{hi}_{layer + 1}.parquet"
            self.storage.delete(self._rel(name))
            entry = self._write_file(name, rows)
            kept = [f for f in files if f[0] not in set(picked)]
            self._commit_manifest(version, [*kept, entry])
            compactions += 1
            layer += 1
        self.clean(RETAINED_MANIFESTS + compactions)

    def clean(self, keep: int = RETAINED_MANIFESTS) -> None:
        """Delete manifests older than the newest ``keep`` and every data file none of the kept
        manifests lists (files a killed write or a compaction left behind)."""
        names = self.storage.list_file_names(self.path)
        versions = sorted(int(m.group(1)) for n in names if (m := _MANIFEST_RE.match(n)))
        if not versions:
            return
        kept = versions[-keep:]
        needed = {n for v in kept for n, _ in self.manifest(v)}
        for v in versions[:-keep]:
            self.storage.delete(self._rel(f"{MANIFEST_PREFIX}{v}"))
        for n in names:
            if n.endswith(".parquet") and n not in needed:
                self.storage.delete(self._rel(n))

    # -- reading ----------------------------------------------------------------------------------
    def _read_files(self, names: Iterable[str]) -> list[ArchivedInstant]:
        out: list[ArchivedInstant] = []
        for n in names:
            rel = self._rel(n)
            try:
                t = pq.read_table(io.BytesIO(self.storage.read_bytes(rel)), pre_buffer=False)
            except (pa.ArrowInvalid, OSError) as e:
                raise HoodieCorruptedDataError(
                    f"archived timeline file {self.storage.uri(rel)} is not readable: {e}"
                ) from None
            cols = {
                c: t.column(c).to_pylist() if c in t.column_names else [None] * t.num_rows
                for c in ("instantTime", "completionTime", "action", "metadata", "plan")
            }
            for i in range(t.num_rows):
                ts, action = cols["instantTime"][i], cols["action"][i]
                if not ts or not action:
                    raise HoodieCorruptedDataError(
                        f"archived timeline file {self.storage.uri(rel)}: row {i} has no "
                        "instant time or action"
                    )
                out.append(
                    ArchivedInstant(
                        ts, action, cols["completionTime"][i], cols["metadata"][i], cols["plan"][i]
                    )
                )
        return out

    def file_ranges(self) -> list[tuple[str, str]]:
        """(min, max) instant time of each file of the latest snapshot (from the names only)."""
        out = []
        for n, _ in self.manifest():
            m = _DATA_FILE_RE.match(n)
            if m:
                out.append((m.group(1), m.group(2)))
        return out

    def newest_completion_time(self) -> str | None:
        """The greatest completion time in the history file(s) holding the newest archived
        instants (an instant archived last can have completed after instants left active:
        a write that straddled a compaction)."""
        ranges = self.file_ranges()
        if not ranges:
            return None
        newest = max(hi for _, hi in ranges)
        times = self.completion_times_near(newest)
        return max(times.values(), default=None)

    def completion_times_near(self, instant: str) -> dict[str, str]:
        """Instant -> completion time of every instant in the history files whose range
        holds ``instant`` (their two time columns only: what a file-system view needs of an
        archived delta commit, as Java's completion-time view reads it)."""
        out: dict[str, str] = {}
        for n, _ in self.manifest():
            m = _DATA_FILE_RE.match(n)
            if not m or not m.group(1) <= instant <= m.group(2):
                continue
            rel = self._rel(n)
            try:
                pf = pq.ParquetFile(io.BytesIO(self.storage.read_bytes(rel)), pre_buffer=False)
                cols = ["instantTime", "completionTime"]
                if not set(cols) <= set(pf.schema_arrow.names):
                    continue  # no completion times kept there
                t = pf.read(columns=cols)
            except (pa.ArrowInvalid, OSError) as e:
                raise HoodieCorruptedDataError(
                    f"archived timeline file {self.storage.uri(rel)} is not readable: {e}"
                ) from None
            for ts, ct in zip(
                t.column("instantTime").to_pylist(),
                t.column("completionTime").to_pylist(),
                strict=True,
            ):
                if ts and ct:
                    out.setdefault(ts, ct)
        return out

    def instants(self, start: str | None = None, end: str | None = None) -> list[ArchivedInstant]:
        """The archived actions requested in ``[start, end]`` (open where None), oldest first;
        an instant time in several files counts once (``putIfAbsent``, as Java reads it)."""
        names = []
        for n, _ in self.manifest():
            m = _DATA_FILE_RE.match(n)
            if not m:
                continue
            if (start is not None and m.group(2) < start) or (end is not None and m.group(1) > end):
                continue
            names.append(n)
        seen: dict[str, ArchivedInstant] = {}
        for row in self._read_files(sorted(names)):
            if (start is None or row.instant_time >= start) and (
                end is None or row.instant_time <= end
            ):
                seen.setdefault(row.instant_time, row)
        return sorted(seen.values(), key=lambda r: r.instant_time)


# -- the archived log timeline (table version 6) --------------------------------------------------

ARCHIVE_FILE_ID = "commits"
ARCHIVE_WRITE_TOKEN = "1-0-1"  # UNKNOWN_WRITE_TOKEN: the archiver never sets its own
ARCHIVE_BATCH = 10  # hoodie.commits.archival.batch: records per block
_ARCHIVE_FILE_RE = re.compile(r"^\.commits_\.archive\.(\d+)(_[0-9]+-[0-9]+-[0-9]+)?$")


def _named_once(node: Any, defined: set[str], namespace: str = _NS) -> Any:
    """``node`` with every named type after its first definition replaced by its full name
    (one Avro schema may define a name once; Hudi's avsc files refer back by name)."""
    if isinstance(node, list):
        return [_named_once(n, defined, namespace) for n in node]
    if not isinstance(node, dict):
        return node
    if node.get("type") in ("record", "enum", "fixed"):
        ns = node.get("namespace", namespace)
        full = node["name"] if "." in node["name"] else f"{ns}.{node['name']}"
        if full in defined:
            return full
        defined.add(full)
        out = dict(node)
        if "fields" in node:
            out["fields"] = [
                {**f, "type": _named_once(f["type"], defined, ns)} for f in node["fields"]
            ]
        return out
    out = dict(node)
    for key in ("items", "values"):
        if key in node:
            out[key] = _named_once(node[key], defined, namespace)
    return out


def _stand_in(name: str) -> dict[str, Any]:
    # a type hoodie_ray never archives (the branch is always null): named as Hudi names it,
    # with one optional field so that readers resolve it lazily and never reach it
    return {
        "type": "record",
        "name": name,
        "namespace": _NS,
        "fields": [{"name": "version", "type": ["int", "null"], "default": 1}],
    }


def _archived_meta_entry_schema() -> dict[str, Any]:
    def opt(name: str, typ: Any) -> dict[str, Any]:
        return {"name": name, "type": ["null", typ], "default": None}

    fields = [
        opt("hoodieCommitMetadata", COMMIT_METADATA_SCHEMA),
        opt("hoodieCleanMetadata", CLEAN_METADATA_SCHEMA),
        opt("hoodieCompactionMetadata", _stand_in("HoodieCompactionMetadata")),
        opt("hoodieRollbackMetadata", ROLLBACK_METADATA_SCHEMA),
        opt("hoodieSavePointMetadata", _stand_in("HoodieSavepointMetadata")),
        opt("commitTime", "string"),
        opt("actionType", "string"),
        {"name": "version", "type": ["int", "null"], "default": 1},
        opt("hoodieCompactionPlan", COMPACTION_PLAN_SCHEMA),
        opt("hoodieCleanerPlan", CLEANER_PLAN_SCHEMA),
        opt("actionState", "string"),
        opt("hoodieReplaceCommitMetadata", REPLACE_COMMIT_METADATA_SCHEMA),
        opt("hoodieRequestedReplaceMetadata", _stand_in("HoodieRequestedReplaceMetadata")),
        opt("HoodieInflightReplaceMetadata", f"{_NS}.HoodieCommitMetadata"),
        opt("hoodieIndexCommitMetadata", _stand_in("HoodieIndexCommitMetadata")),
        opt("stateTransitionTime", "string"),
    ]
    schema = {
        "type": "record",
        "name": "HoodieArchivedMetaEntry",
        "namespace": _NS,
        "fields": fields,
    }
    return _named_once(schema, set())


ARCHIVED_META_ENTRY_SCHEMA: dict[str, Any] = _archived_meta_entry_schema()
_ENTRY_SCHEMA_JSON = json.dumps(ARCHIVED_META_ENTRY_SCHEMA, separators=(",", ":"))
_ENTRY_PARSED = fastavro.parse_schema(ARCHIVED_META_ENTRY_SCHEMA)


class _ArchiveBlock(AvroDataBlock):
    """An Avro data block of the archived timeline: SCHEMA is its only header."""

    _required_header: ClassVar[tuple[HeaderMetadataType, ...]] = (HeaderMetadataType.SCHEMA,)


def _avro_record(data: bytes, what: str) -> dict[str, Any] | None:
    """The record of a plan or metadata file stored as an Avro container, else None."""
    if not is_avro_container(data):
        return None
    return read_single_record(data, what)[1]


def _entry_record(tl: ActiveTimeline, inst: Instant) -> dict[str, Any]:
    """``HoodieArchivedMetaEntry`` of one instant file (``MetadataConversionUtils``)."""
    rec: dict[str, Any] = {
        "commitTime": inst.timestamp,
        "actionType": inst.action,
        "actionState": inst.state.value,
        "version": 1,
    }
    data = tl.read_details(inst)
    if not data:
        return rec
    what = tl.storage.uri(tl.instant_path(inst))
    action, done = inst.action, inst.is_completed
    if done and action in (Action.COMMIT, Action.DELTA_COMMIT):
        meta = HoodieCommitMetadata.from_bytes(data, tl.layout_version, inst)
        rec["hoodieCommitMetadata"] = meta.to_avro_obj()
    elif done and action == Action.REPLACE_COMMIT:
        meta = HoodieCommitMetadata.from_bytes(data, tl.layout_version, inst)
        rec["hoodieReplaceCommitMetadata"] = meta.to_avro_obj()
    elif action == Action.CLEAN:
        rec["hoodieCleanMetadata" if done else "hoodieCleanerPlan"] = _avro_record(data, what)
    elif done and action == Action.ROLLBACK:
        rec["hoodieRollbackMetadata"] = _avro_record(data, what)
    elif inst.is_requested and action == Action.COMPACTION:
        rec["hoodieCompactionPlan"] = _avro_record(data, what)
    return rec


def _encode_entries(records: Sequence[dict[str, Any]]) -> bytes:
    parts = [struct.pack(">ii", BLOCK_CONTENT_VERSION, len(records))]
    for rec in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, _ENTRY_PARSED, rec)
        body = buf.getvalue()
        parts.append(struct.pack(">i", len(body)))
        parts.append(body)
    return b"".join(parts)


class ArchivedLogTimeline:
    """The archived timeline of a table version 6 table: ``.hoodie/archived/``.

    Each archival writes a new log file ``.commits_.archive.<N>_1-0-1`` (as Java does on
    storage without append) of Avro data blocks whose records are ``HoodieArchivedMetaEntry``:
    one per instant file (requested, inflight, completed), with ``actionState`` and the
    decoded metadata or plan (commit metadata converted from the active timeline's JSON to
    Avro). A file torn by a kill is ignored block by block; the next archival writes the
    instants again and readers count each (instant, action, state) once.
    """

    def __init__(self, storage: Storage, path: str) -> None:
        self.storage = storage
        self.path = path
        self._next_version: int | None = None

    def file_names(self) -> list[str]:
        """The archive files, oldest version first."""
        found = [
            (int(m.group(1)), n)
            for n in self.storage.list_file_names(self.path)
            if (m := _ARCHIVE_FILE_RE.match(n))
        ]
        return [n for _, n in sorted(found)]

    def write_instants(self, tl: ActiveTimeline, instants: Sequence[Instant]) -> None:
        """Archive every file of ``instants`` into one new archive log file."""
        records = []
        for inst in sorted(instants, key=lambda i: (i.timestamp, i.comparable_action)):
            for f in [*tl.pending_files_of(inst), inst]:
                records.append(_entry_record(tl, f))
        if not records:
            return
        blocks = [
            _ArchiveBlock(
                {HeaderMetadataType.SCHEMA: _ENTRY_SCHEMA_JSON},
                content=_encode_entries(records[i : i + ARCHIVE_BATCH]),
            )
            for i in range(0, len(records), ARCHIVE_BATCH)
        ]
        data = b"".join(serialize_block(b, table_version=6) for b in blocks)
        self.storage.makedirs(self.path)
        for _ in range(3):
            if self._next_version is None:
                names = self.file_names()
                last = _ARCHIVE_FILE_RE.match(names[-1]) if names else None
                self._next_version = int(last.group(1)) + 1 if last else 1
            name = f".{ARCHIVE_FILE_ID}_.archive.{self._next_version}_{ARCHIVE_WRITE_TOKEN}"
            self._next_version += 1
            if self.storage.create_new(join(self.path, name), data):
                return
            self._next_version = None  # someone else wrote that version: list again
        raise HoodieTimelineError(f"could not create a new archive file under {self.path}")

    def records(self) -> list[dict[str, Any]]:
        """Every archived entry (corrupt blocks skipped), in file order."""
        out: list[dict[str, Any]] = []
        schemas: dict[str, Any] = {}  # every block of an archive carries the same schema
        for name in self.file_names():
            rel = join(self.path, name)
            for block in LogReader.from_storage(self.storage, rel):
                if not isinstance(block, AvroDataBlock):
                    continue
                content = block.content
                if content is None:
                    continue
                text = block.header[HeaderMetadataType.SCHEMA]
                schema = schemas.get(text)
                if schema is None:
                    schema = schemas[text] = fastavro.parse_schema(json.loads(text))
                buf = io.BytesIO(bytes(content))
                _version, count = struct.unpack(">ii", buf.read(8))
                for _ in range(count):
                    (size,) = struct.unpack(">i", buf.read(4))
                    rec = fastavro.schemaless_reader(io.BytesIO(buf.read(size)), schema, None)
                    if isinstance(rec, dict):
                        out.append(rec)
        return out

    def instants(self, start: str | None = None, end: str | None = None) -> list[ArchivedInstant]:
        """The completed archived actions requested in ``[start, end]``, oldest first; a
        commit's metadata comes back as the JSON the active timeline held."""
        seen: dict[tuple[str, str], ArchivedInstant] = {}
        for rec in self.records():
            ts, action = rec.get("commitTime"), rec.get("actionType")
            if not ts or not action or (rec.get("actionState") or "COMPLETED") != "COMPLETED":
                continue
            if (start is not None and ts < start) or (end is not None and ts > end):
                continue
            meta = rec.get("hoodieCommitMetadata") or rec.get("hoodieReplaceCommitMetadata")
            data = (
                HoodieCommitMetadata.from_obj(meta, f"archived {action} {ts}").to_json()
                if isinstance(meta, dict)
                else None
            )
            seen.setdefault((ts, action), ArchivedInstant(ts, action, None, data))
        return sorted(seen.values(), key=lambda r: (r.instant_time, r.action))


ArchivedTimeline = LSMTimeline | ArchivedLogTimeline


def archive_instants(
    tl: ActiveTimeline,
    archived: ArchivedTimeline,
    instants: Sequence[Instant],
    batch_size: int = 10,
) -> None:
    """Write ``instants`` to ``archived``, then delete their files from the active timeline
    (in that order: a kill in between leaves them in both, and the next archival writes them
    again; readers count each once)."""
    if not instants:
        return
    tl.load()
    if isinstance(archived, LSMTimeline):
        archived.write([active_action(tl, i) for i in instants], batch_size)
    else:
        archived.write_instants(tl, instants)
    tl.remove_archived(instants)
