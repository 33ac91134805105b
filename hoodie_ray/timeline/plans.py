"""Timeline plans and action metadata stored as Avro containers (one record, codec null).

Names from Hudi's ``hudi-common/src/main/avro``: ``HoodieCompactionPlan`` /
``HoodieCompactionOperation`` / ``HoodieCompactionStrategy`` (``T.compaction.requested``),
``HoodieRollbackPlan`` / ``HoodieRollbackRequest`` (``T.rollback.requested``),
``HoodieRollbackMetadata`` (completed rollback), ``HoodieCleanerPlan`` (``T.clean.requested``)
and ``HoodieCleanMetadata`` (completed clean). Writer schemas copy the field layout of
Java-written files (compaction plan: table version 9 sample; rollback: table version 6 sample;
clean: Hudi's avsc files).

Everything read from a plan is untrusted: file names and partition paths go through
:func:`validate_file_name` / :func:`validate_partition_path` before use, so a plan cannot make
the writer touch a file outside the table.
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from typing import Any

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodiePathError
from hoodie_ray.storage import REFUSED_CHARS, check_relative
from hoodie_ray.timeline.avro_io import read_single_record, write_single_record

__all__ = [
    "CLEANER_PLAN_SCHEMA",
    "CLEAN_METADATA_SCHEMA",
    "COMPACTION_PLAN_SCHEMA",
    "REQUESTED_REPLACE_METADATA_SCHEMA",
    "RESTORE_METADATA_SCHEMA",
    "RESTORE_PLAN_SCHEMA",
    "ROLLBACK_METADATA_SCHEMA",
    "ROLLBACK_PLAN_SCHEMA",
    "SAVEPOINT_METADATA_SCHEMA",
    "HoodieActionInstant",
    "HoodieCleanFileInfo",
    "HoodieCleanMetadata",
    "HoodieCleanPartitionMetadata",
    "HoodieCleanerPlan",
    "HoodieClusteringGroup",
    "HoodieClusteringPlan",
    "HoodieCompactionOperation",
    "HoodieCompactionPlan",
    "HoodieCompactionStrategy",
    "HoodieInstantInfo",
    "HoodieRestoreMetadata",
    "HoodieRestorePlan",
    "HoodieRollbackMetadata",
    "HoodieRollbackPartitionMetadata",
    "HoodieRollbackPlan",
    "HoodieRollbackRequest",
    "HoodieSavepointMetadata",
    "HoodieSliceInfo",
    "RollbackRequest",
    "plan_path_to_name",
    "read_avro_metadata",
    "requested_replace_bytes",
    "validate_file_name",
    "validate_partition_path",
]

MAX_PLAN_BYTES = 64 * 1024 * 1024
COMPACTION_PLAN_VERSION = 2  # paths are file names relative to the partition
_NS = "org.apache.hudi.avro.model"


# -- untrusted names ----------------------------------------------------------------------------


def validate_file_name(name: Any, what: str = "plan") -> str:
    """Return ``name`` if it is a plain file name, else raise :class:`HoodiePathError`.

    Refused: non-strings, empty, ``.``/``..``, anything with ``/`` or ``\\``, NUL or another
    control character, names longer than 255 bytes.
    """
    if not isinstance(name, str) or not name:
        raise HoodiePathError(f"invalid file name in {what}: {name!r}")
    if name in (".", "..") or "/" in name or "\\" in name:
        raise HoodiePathError(f"file name in {what} is not a plain name: {name!r}")
    if REFUSED_CHARS.search(name):  # (a backslash is refused above)
        raise HoodiePathError(f"file name in {what} has a control character: {name!r}")
    if len(name.encode("utf-8")) > 255:
        raise HoodiePathError(f"file name in {what} is too long: {name[:40]!r}...")
    return name


def validate_partition_path(path: Any, what: str = "plan") -> str:
    """Return the normalised relative partition path, or raise :class:`HoodiePathError`.

    ``""`` is the non-partitioned base directory. Absolute paths, ``..`` segments, backslashes
    and control characters are refused (see :func:`hoodie_ray.storage.check_relative`).
    """
    if path is None:
        return ""
    if not isinstance(path, str):
        raise HoodiePathError(f"invalid partition path in {what}: {path!r}")
    try:
        return check_relative(path)
    except HoodiePathError as e:
        raise HoodiePathError(f"partition path in {what} refused: {e}") from None


def plan_path_to_name(path: Any, what: str = "plan") -> str:
    """The validated file name at the end of a path or URI written by Java.

    Java's rollback plans and clean metadata carry full paths (``file:/.../name`` or
    ``/.../name``) of the table's original location; only the last segment is meaningful.
    """
    if not isinstance(path, str) or not path:
        raise HoodiePathError(f"invalid path in {what}: {path!r}")
    return validate_file_name(path.rstrip("/").rsplit("/", 1)[-1], what)


# -- schema helpers -----------------------------------------------------------------------------


def _s() -> dict[str, Any]:
    return {"type": "string", "avro.java.string": "String"}


def _arr(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": items}


def _map(values: Any) -> dict[str, Any]:
    return {"type": "map", "values": values, "avro.java.string": "String"}


def _f(name: str, typ: Any, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": typ}
    out.update(kw)
    return out


def _opt(name: str, typ: Any, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": ["null", typ]}
    out.update(kw)
    out["default"] = None
    return out


def _load(data: bytes, what: str, expected: str) -> dict[str, Any]:
    if len(data) > MAX_PLAN_BYTES:
        raise HoodieCorruptedDataError(
            f"corrupt {expected} {what}: larger than {MAX_PLAN_BYTES} bytes"
        )
    schema, record = read_single_record(data, what)
    name = schema.get("name") if isinstance(schema, dict) else None
    if name != expected:
        raise HoodieCorruptedDataError(f"corrupt {expected} {what}: the file holds {name!r}")
    return record


def read_avro_metadata(data: bytes, what: str) -> tuple[str, dict[str, Any]]:
    """Any Avro instant file (clustering plan, index plan...): ``(record name, record)``."""
    if len(data) > MAX_PLAN_BYTES:
        raise HoodieCorruptedDataError(
            f"corrupt Avro file {what}: larger than {MAX_PLAN_BYTES} bytes"
        )
    schema, record = read_single_record(data, what)
    return str(schema.get("name") if isinstance(schema, dict) else ""), record


class _Check:
    """Type checks on decoded records; failures name the file."""

    def __init__(self, what: str, kind: str) -> None:
        self.what = what
        self.kind = kind

    def fail(self, key: str) -> HoodieCorruptedDataError:
        return HoodieCorruptedDataError(f"corrupt {self.kind} {self.what}: bad {key}")

    def str_(self, v: Any, key: str, optional: bool = True) -> str | None:
        if v is None and optional:
            return None
        if not isinstance(v, str):
            raise self.fail(key)
        return v

    def int_(self, v: Any, key: str, default: int | None = None) -> int | None:
        if v is None:
            return default
        if not isinstance(v, int) or isinstance(v, bool):
            raise self.fail(key)
        return v

    def strs(self, v: Any, key: str) -> list[str]:
        if v is None:
            return []
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(key)
        return list(v)

    def str_map(self, v: Any, key: str) -> dict[str, str]:
        if v is None:
            return {}
        if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
            raise self.fail(key)
        return dict(v)

    def long_map(self, v: Any, key: str) -> dict[str, int]:
        if v is None:
            return {}
        if not isinstance(v, dict) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in v.values()
        ):
            raise self.fail(key)
        return dict(v)

    def double_map(self, v: Any, key: str) -> dict[str, float]:
        if v is None:
            return {}
        if not isinstance(v, dict) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in v.values()
        ):
            raise self.fail(key)
        return {k: float(x) for k, x in v.items()}

    def record(self, v: Any, key: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(key)
        return v


# -- compaction plan ----------------------------------------------------------------------------

COMPACTION_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCompactionPlan",
    "namespace": _NS,
    "fields": [
        _opt(
            "operations",
            _arr(
                {
                    "type": "record",
                    "name": "HoodieCompactionOperation",
                    "fields": [
                        _f("baseInstantTime", ["null", _s()]),
                        _opt("deltaFilePaths", _arr(_s())),
                        _opt("dataFilePath", _s()),
                        _f("fileId", ["null", _s()]),
                        _opt("partitionPath", _s()),
                        _opt("metrics", _map("double")),
                        _opt("bootstrapFilePath", _s()),
                    ],
                }
            ),
        ),
        _opt("extraMetadata", _map(_s())),
        _f("version", ["int", "null"], default=1),
        _opt(
            "strategy",
            {
                "type": "record",
                "name": "HoodieCompactionStrategy",
                "fields": [
                    _opt(
                        "compactorClassName",
                        _s(),
                        doc=(
                            "The class name that is provided here should extend "
                            "CompactionExecutionStrategy abstract class, idea is that the plan "
                            "generator will also provide the execution strategy to use."
                        ),
                    ),
                    _opt(
                        "strategyParams",
                        _map(_s()),
                        doc=(
                            "These parameters play a key role in determining which action type "
                            "it is i.e. compaction or logcompaction and it will also include "
                            "configs that determine how compaction needs to be executed."
                        ),
                    ),
                    _f("version", ["int", "null"], default=1),
                ],
            },
        ),
        _f("preserveHoodieMetadata", ["boolean", "null"], default=False),
        _opt("missingSchedulePartitions", _arr(_s())),
    ],
}


@dataclass
class HoodieCompactionStrategy:
    """``HoodieCompactionStrategy``: the execution strategy named by a plan (optional)."""

    compactor_class_name: str | None = None
    strategy_params: dict[str, str] = field(default_factory=dict)
    version: int = 1


@dataclass
class HoodieCompactionOperation:
    """One file slice to compact (``HoodieCompactionOperation``, plan version 2: names only).

    Args:
        base_instant_time: the slice's base instant (the old base file's instant).
        delta_file_paths: the slice's log file names, in order.
        data_file_path: the old base file's name (``None`` for a log-only file group).
        file_id: the file group.
        partition_path: the partition (``""`` when non-partitioned).
        metrics: ``TOTAL_LOG_FILES``, ``TOTAL_LOG_FILES_SIZE``, ``TOTAL_IO_MB``...
        bootstrap_file_path: bootstrap tables only.
    """

    base_instant_time: str
    delta_file_paths: list[str]
    data_file_path: str | None
    file_id: str
    partition_path: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    bootstrap_file_path: str | None = None

    def validate(self, what: str = "compaction plan") -> HoodieCompactionOperation:
        """Check every name against escaping the table; returns ``self``.

        Raises:
            HoodiePathError: a name or partition path is unsafe.
            HoodieCorruptedDataError: the base instant is not an instant time.
        """
        validate_partition_path(self.partition_path, what)
        validate_file_name(self.file_id, what)
        if not self.base_instant_time or not self.base_instant_time.isdigit():
            raise HoodieCorruptedDataError(
                f"corrupt compaction plan {what}: base instant {self.base_instant_time!r}"
            )
        if self.data_file_path is not None:
            validate_file_name(self.data_file_path, what)
        for name in self.delta_file_paths:
            validate_file_name(name, what)
        return self

    def to_avro_obj(self) -> dict[str, Any]:
        return {
            "baseInstantTime": self.base_instant_time,
            "deltaFilePaths": list(self.delta_file_paths),
            "dataFilePath": self.data_file_path,
            "fileId": self.file_id,
            "partitionPath": self.partition_path,
            "metrics": dict(self.metrics),
            "bootstrapFilePath": self.bootstrap_file_path,
        }


@dataclass
class HoodieCompactionPlan:
    """``HoodieCompactionPlan``: the content of ``T.compaction.requested``.

    Example:
        >>> op = HoodieCompactionOperation("20250101000000000", [".f-0_20250101000000000.log.1_0-1-1"],
        ...                                "f-0_0-1-1_20250101000000000.parquet", "f-0", "p")
        >>> HoodieCompactionPlan([op]).to_bytes()[:4]
        b'Obj\\x01'
    """

    operations: list[HoodieCompactionOperation] = field(default_factory=list)
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int = COMPACTION_PLAN_VERSION
    strategy: HoodieCompactionStrategy | None = None
    preserve_hoodie_metadata: bool = False
    missing_schedule_partitions: list[str] = field(default_factory=list)

    def validate(self, what: str = "compaction plan") -> HoodieCompactionPlan:
        """Validate every operation's names (see :meth:`HoodieCompactionOperation.validate`)."""
        for op in self.operations:
            op.validate(what)
        return self

    def to_bytes(self, sync: bytes | None = None) -> bytes:
        """The Avro container Java writes as ``T.compaction.requested``."""
        strategy = None
        if self.strategy is not None:
            strategy = {
                "compactorClassName": self.strategy.compactor_class_name,
                "strategyParams": dict(self.strategy.strategy_params),
                "version": self.strategy.version,
            }
        record = {
            "operations": [op.to_avro_obj() for op in self.operations],
            "extraMetadata": dict(self.extra_metadata),
            "version": self.version,
            "strategy": strategy,
            "preserveHoodieMetadata": self.preserve_hoodie_metadata,
            "missingSchedulePartitions": list(self.missing_schedule_partitions),
        }
        return write_single_record(COMPACTION_PLAN_SCHEMA, record, sync=sync)

    @classmethod
    def from_bytes(
        cls, data: bytes, what: str = "compaction plan", validate: bool = True
    ) -> HoodieCompactionPlan:
        """Parse ``T.compaction.requested``.

        Version-1 plans (full paths) are migrated to file names as Java's
        ``CompactionV2MigrationHandler`` does. With ``validate`` (the default) every name is
        checked (:meth:`validate`).

        Raises:
            HoodieCorruptedDataError: not a compaction plan, or malformed (names the file).
            HoodiePathError: a name in the plan would escape the table.
        """
        rec = _load(data, what, "HoodieCompactionPlan")
        c = _Check(what, "compaction plan")
        version = c.int_(rec.get("version"), "version", 1) or 1
        ops: list[HoodieCompactionOperation] = []
        raw_ops = rec.get("operations") or []
        if not isinstance(raw_ops, list):
            raise c.fail("operations")
        for raw in raw_ops:
            o = c.record(raw, "operation")
            deltas = c.strs(o.get("deltaFilePaths"), "deltaFilePaths")
            data_file = c.str_(o.get("dataFilePath"), "dataFilePath")
            if version < COMPACTION_PLAN_VERSION:
                deltas = [plan_path_to_name(p, what) for p in deltas]
                data_file = plan_path_to_name(data_file, what) if data_file else None
            ops.append(
                HoodieCompactionOperation(
                    base_instant_time=c.str_(o.get("baseInstantTime"), "baseInstantTime") or "",
                    delta_file_paths=deltas,
                    data_file_path=data_file or None,
                    file_id=c.str_(o.get("fileId"), "fileId") or "",
                    partition_path=c.str_(o.get("partitionPath"), "partitionPath") or "",
                    metrics=c.double_map(o.get("metrics"), "metrics"),
                    bootstrap_file_path=c.str_(o.get("bootstrapFilePath"), "bootstrapFilePath"),
                )
            )
        strategy = None
        if rec.get("strategy") is not None:
            s = c.record(rec["strategy"], "strategy")
            strategy = HoodieCompactionStrategy(
                compactor_class_name=c.str_(s.get("compactorClassName"), "compactorClassName"),
                strategy_params=c.str_map(s.get("strategyParams"), "strategyParams"),
                version=c.int_(s.get("version"), "strategy version", 1) or 1,
            )
        preserve = rec.get("preserveHoodieMetadata")
        if preserve is not None and not isinstance(preserve, bool):
            raise c.fail("preserveHoodieMetadata")
        plan = cls(
            operations=ops,
            extra_metadata=c.str_map(rec.get("extraMetadata"), "extraMetadata"),
            version=max(version, COMPACTION_PLAN_VERSION),
            strategy=strategy,
            preserve_hoodie_metadata=bool(preserve),
            missing_schedule_partitions=c.strs(
                rec.get("missingSchedulePartitions"), "missingSchedulePartitions"
            ),
        )
        return plan.validate(what) if validate else plan


# -- rollback plan and metadata ---------------------------------------------------------------

_INSTANT_INFO = {
    "type": "record",
    "name": "HoodieInstantInfo",
    "fields": [_f("commitTime", _s()), _f("action", _s())],
}

ROLLBACK_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRollbackPlan",
    "namespace": _NS,
    "fields": [
        _opt("instantToRollback", _INSTANT_INFO, doc="Hoodie instant that needs to be rolled back"),
        _opt(
            "RollbackRequests",
            _arr(
                {
                    "type": "record",
                    "name": "HoodieRollbackRequest",
                    "fields": [
                        _f("partitionPath", _s()),
                        _opt("fileId", _s()),
                        _opt("latestBaseInstant", _s()),
                        _f(
                            "filesToBeDeleted",
                            {"type": "array", "items": _s(), "default": []},
                            default=[],
                        ),
                        _opt("logBlocksToBeDeleted", _map("long")),
                    ],
                }
            ),
        ),
        _f("version", ["int", "null"], default=1),
    ],
}

ROLLBACK_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRollbackMetadata",
    "namespace": _NS,
    "fields": [
        _f("startRollbackTime", _s()),
        _f("timeTakenInMillis", "long"),
        _f("totalFilesDeleted", "int"),
        _f("commitsRollback", _arr(_s())),
        _f(
            "partitionMetadata",
            _map(
                {
                    "type": "record",
                    "name": "HoodieRollbackPartitionMetadata",
                    "fields": [
                        _f("partitionPath", _s()),
                        _f("successDeleteFiles", _arr(_s())),
                        _f("failedDeleteFiles", _arr(_s())),
                        _opt("rollbackLogFiles", _map("long")),
                        _opt("logFilesFromFailedCommit", _map("long")),
                    ],
                }
            ),
        ),
        _f("version", ["int", "null"], default=1),
        _f(
            "instantsRollback",
            {"type": "array", "items": _INSTANT_INFO, "default": []},
            default=[],
        ),
    ],
}


@dataclass(frozen=True)
class HoodieInstantInfo:
    """``HoodieInstantInfo``: an instant time and its action."""

    commit_time: str
    action: str


@dataclass
class HoodieRollbackRequest:
    """``HoodieRollbackRequest``: what to undo in one file group.

    Args:
        partition_path: the partition (``""`` when non-partitioned).
        file_id: the file group (``""`` when files of several groups are deleted).
        latest_base_instant: the group's base instant when log blocks are rolled back.
        files_to_delete: ``filesToBeDeleted``: names (Java writes full paths; see
            :meth:`file_names`).
        log_blocks_to_delete: ``logBlocksToBeDeleted``: log file -> size, for rollback blocks.
    """

    partition_path: str
    file_id: str = ""
    latest_base_instant: str = ""
    files_to_delete: list[str] = field(default_factory=list)
    log_blocks_to_delete: dict[str, int] = field(default_factory=dict)

    def file_names(self, what: str = "rollback plan") -> list[str]:
        """The validated names of ``files_to_delete`` (full paths reduced to their names)."""
        return [plan_path_to_name(p, what) for p in self.files_to_delete]

    def to_avro_obj(self) -> dict[str, Any]:
        return {
            "partitionPath": self.partition_path,
            "fileId": self.file_id,
            "latestBaseInstant": self.latest_base_instant,
            "filesToBeDeleted": list(self.files_to_delete),
            "logBlocksToBeDeleted": dict(self.log_blocks_to_delete),
        }


RollbackRequest = HoodieRollbackRequest


@dataclass
class HoodieRollbackPlan:
    """``HoodieRollbackPlan``: the content of ``T.rollback.requested``.

    Args:
        instant_to_rollback: the requested time of the instant being rolled back.
        action: its action (``deltacommit``, ``commit``...).
        requests: one request per file group (or per set of files to delete).
    """

    instant_to_rollback: str
    action: str
    requests: list[HoodieRollbackRequest] = field(default_factory=list)
    version: int = 1

    def validate(self, what: str = "rollback plan") -> HoodieRollbackPlan:
        """Check partition paths and file names; returns ``self``."""
        for r in self.requests:
            validate_partition_path(r.partition_path, what)
            r.file_names(what)
            for p in r.log_blocks_to_delete:
                plan_path_to_name(p, what)
        return self

    def to_bytes(self, sync: bytes | None = None) -> bytes:
        record = {
            "instantToRollback": {"commitTime": self.instant_to_rollback, "action": self.action},
            "RollbackRequests": [r.to_avro_obj() for r in self.requests],
            "version": self.version,
        }
        return write_single_record(ROLLBACK_PLAN_SCHEMA, record, sync=sync)

    @classmethod
    def from_bytes(
        cls, data: bytes, what: str = "rollback plan", validate: bool = True
    ) -> HoodieRollbackPlan:
        """Parse ``T.rollback.requested`` (with ``validate``, names are checked)."""
        rec = _load(data, what, "HoodieRollbackPlan")
        c = _Check(what, "rollback plan")
        info = rec.get("instantToRollback")
        ts = action = ""
        if info is not None:
            info = c.record(info, "instantToRollback")
            ts = c.str_(info.get("commitTime"), "commitTime", optional=False) or ""
            action = c.str_(info.get("action"), "action", optional=False) or ""
        reqs = []
        raw = rec.get("RollbackRequests") or []
        if not isinstance(raw, list):
            raise c.fail("RollbackRequests")
        for r in raw:
            r = c.record(r, "RollbackRequest")
            reqs.append(
                HoodieRollbackRequest(
                    partition_path=c.str_(r.get("partitionPath"), "partitionPath", optional=False)
                    or "",
                    file_id=c.str_(r.get("fileId"), "fileId") or "",
                    latest_base_instant=c.str_(r.get("latestBaseInstant"), "latestBaseInstant")
                    or "",
                    files_to_delete=c.strs(r.get("filesToBeDeleted"), "filesToBeDeleted"),
                    log_blocks_to_delete=c.long_map(
                        r.get("logBlocksToBeDeleted"), "logBlocksToBeDeleted"
                    ),
                )
            )
        plan = cls(ts, action, reqs, c.int_(rec.get("version"), "version", 1) or 1)
        return plan.validate(what) if validate else plan


@dataclass
class HoodieRollbackPartitionMetadata:
    """``HoodieRollbackPartitionMetadata``: what a rollback did in one partition."""

    partition_path: str
    success_delete_files: list[str] = field(default_factory=list)
    failed_delete_files: list[str] = field(default_factory=list)
    rollback_log_files: dict[str, int] = field(default_factory=dict)
    log_files_from_failed_commit: dict[str, int] = field(default_factory=dict)

    def to_avro_obj(self) -> dict[str, Any]:
        return {
            "partitionPath": self.partition_path,
            "successDeleteFiles": list(self.success_delete_files),
            "failedDeleteFiles": list(self.failed_delete_files),
            "rollbackLogFiles": dict(self.rollback_log_files),
            "logFilesFromFailedCommit": dict(self.log_files_from_failed_commit),
        }


@dataclass
class HoodieRollbackMetadata:
    """``HoodieRollbackMetadata``: the content of a completed rollback instant.

    Args:
        start_rollback_time: the rollback's own instant time.
        commits_rollback: instant times rolled back.
        partition_metadata: partition -> what was deleted / appended there.
        instants_rollback: ``HoodieInstantInfo`` (or ``(time, action)`` pairs) rolled back.
        time_taken_in_millis: duration.
        total_files_deleted: defaults to the number of successfully deleted files.
        partition_deleted_files: shortcut: partition -> deleted file names, merged into
            ``partition_metadata``.
    """

    start_rollback_time: str
    commits_rollback: list[str] = field(default_factory=list)
    partition_metadata: dict[str, HoodieRollbackPartitionMetadata] = field(default_factory=dict)
    instants_rollback: list[HoodieInstantInfo] = field(default_factory=list)
    time_taken_in_millis: int = 0
    total_files_deleted: int | None = None
    version: int = 1
    partition_deleted_files: InitVar[dict[str, list[str]] | None] = None

    def __post_init__(self, partition_deleted_files: dict[str, list[str]] | None) -> None:
        for part, names in (partition_deleted_files or {}).items():
            pm = self.partition_metadata.setdefault(part, HoodieRollbackPartitionMetadata(part))
            pm.success_delete_files.extend(names)
        self.instants_rollback = [
            i if isinstance(i, HoodieInstantInfo) else HoodieInstantInfo(str(i[0]), str(i[1]))
            for i in self.instants_rollback
        ]
        if self.total_files_deleted is None:
            self.total_files_deleted = sum(
                len(pm.success_delete_files) for pm in self.partition_metadata.values()
            )

    def to_bytes(self, sync: bytes | None = None) -> bytes:
        record = {
            "startRollbackTime": self.start_rollback_time,
            "timeTakenInMillis": self.time_taken_in_millis,
            "totalFilesDeleted": self.total_files_deleted or 0,
            "commitsRollback": list(self.commits_rollback),
            "partitionMetadata": {p: m.to_avro_obj() for p, m in self.partition_metadata.items()},
            "version": self.version,
            "instantsRollback": [
                {"commitTime": i.commit_time, "action": i.action} for i in self.instants_rollback
            ],
        }
        return write_single_record(ROLLBACK_METADATA_SCHEMA, record, sync=sync)

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "rollback metadata") -> HoodieRollbackMetadata:
        """Parse a completed rollback instant."""
        rec = _load(data, what, "HoodieRollbackMetadata")
        c = _Check(what, "rollback metadata")
        parts: dict[str, HoodieRollbackPartitionMetadata] = {}
        raw = rec.get("partitionMetadata") or {}
        if not isinstance(raw, dict):
            raise c.fail("partitionMetadata")
        for key, pm in raw.items():
            pm = c.record(pm, "partitionMetadata")
            parts[key] = HoodieRollbackPartitionMetadata(
                partition_path=c.str_(pm.get("partitionPath"), "partitionPath") or "",
                success_delete_files=c.strs(pm.get("successDeleteFiles"), "successDeleteFiles"),
                failed_delete_files=c.strs(pm.get("failedDeleteFiles"), "failedDeleteFiles"),
                rollback_log_files=c.long_map(pm.get("rollbackLogFiles"), "rollbackLogFiles"),
                log_files_from_failed_commit=c.long_map(
                    pm.get("logFilesFromFailedCommit"), "logFilesFromFailedCommit"
                ),
            )
        infos = []
        raw_infos = rec.get("instantsRollback") or []
        if not isinstance(raw_infos, list):
            raise c.fail("instantsRollback")
        for i in raw_infos:
            i = c.record(i, "instantsRollback")
            infos.append(
                HoodieInstantInfo(
                    c.str_(i.get("commitTime"), "commitTime", optional=False) or "",
                    c.str_(i.get("action"), "action", optional=False) or "",
                )
            )
        return cls(
            start_rollback_time=c.str_(
                rec.get("startRollbackTime"), "startRollbackTime", optional=False
            )
            or "",
            commits_rollback=c.strs(rec.get("commitsRollback"), "commitsRollback"),
            partition_metadata=parts,
            instants_rollback=infos,
            time_taken_in_millis=c.int_(rec.get("timeTakenInMillis"), "timeTakenInMillis", 0) or 0,
            total_files_deleted=c.int_(rec.get("totalFilesDeleted"), "totalFilesDeleted", 0) or 0,
            version=c.int_(rec.get("version"), "version", 1) or 1,
        )


# -- clean plan and metadata ------------------------------------------------------------------

CLEANER_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanerPlan",
    "namespace": _NS,
    "fields": [
        _opt(
            "earliestInstantToRetain",
            {
                "type": "record",
                "name": "HoodieActionInstant",
                "fields": [_f("timestamp", _s()), _f("action", _s()), _f("state", _s())],
            },
        ),
        _f("policy", _s()),
        _opt("filesToBeDeletedPerPartition", _map(_arr(_s()))),
        _f("version", ["int", "null"], default=1),
        _opt(
            "filePathsToBeDeletedPerPartition",
            _map(
                _arr(
                    {
                        "type": "record",
                        "name": "HoodieCleanFileInfo",
                        "fields": [_opt("filePath", _s()), _opt("isBootstrapBaseFile", "boolean")],
                    }
                )
            ),
            doc="This field replaces the field filesToBeDeletedPerPartition",
        ),
        _opt("partitionsToBeDeleted", _arr(_s()), doc="partitions to be deleted"),
    ],
}

CLEAN_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanMetadata",
    "namespace": _NS,
    "fields": [
        _f("policy", _s(), default=""),
        _f("startCleanTime", _s()),
        _f("timeTakenInMillis", "long"),
        _f("totalFilesDeleted", "int"),
        _f("earliestCommitToRetain", _s()),
        _f("lastCompletedCommitTimestamp", _s(), default=""),
        _f(
            "partitionMetadata",
            _map(
                {
                    "type": "record",
                    "name": "HoodieCleanPartitionMetadata",
                    "fields": [
                        _f("partitionPath", _s()),
                        _f("policy", _s()),
                        _f("deletePathPatterns", _arr(_s())),
                        _f("successDeleteFiles", _arr(_s())),
                        _f("failedDeleteFiles", _arr(_s())),
                        _opt("isPartitionDeleted", "boolean"),
                    ],
                }
            ),
        ),
        _f("version", ["int", "null"], default=1),
        _opt("bootstrapPartitionMetadata", _map("HoodieCleanPartitionMetadata")),
    ],
}


@dataclass(frozen=True)
class HoodieActionInstant:
    """``HoodieActionInstant``: timestamp, action and state of an instant."""

    timestamp: str
    action: str
    state: str


@dataclass(frozen=True)
class HoodieCleanFileInfo:
    """``HoodieCleanFileInfo``: a file a clean will delete."""

    file_path: str | None
    is_bootstrap_base_file: bool | None = False


@dataclass
class HoodieCleanerPlan:
    """``HoodieCleanerPlan``: the content of ``T.clean.requested`` (version 2)."""

    policy: str
    earliest_instant_to_retain: HoodieActionInstant | None = None
    file_paths_to_be_deleted_per_partition: dict[str, list[HoodieCleanFileInfo]] = field(
        default_factory=dict
    )
    partitions_to_be_deleted: list[str] = field(default_factory=list)
    files_to_be_deleted_per_partition: dict[str, list[str]] | None = None
    version: int = 2

    def to_bytes(self, sync: bytes | None = None) -> bytes:
        e = self.earliest_instant_to_retain
        record = {
            "earliestInstantToRetain": (
                {"timestamp": e.timestamp, "action": e.action, "state": e.state} if e else None
            ),
            "policy": self.policy,
            "filesToBeDeletedPerPartition": self.files_to_be_deleted_per_partition,
            "version": self.version,
            "filePathsToBeDeletedPerPartition": {
                p: [
                    {"filePath": f.file_path, "isBootstrapBaseFile": f.is_bootstrap_base_file}
                    for f in fs
                ]
                for p, fs in self.file_paths_to_be_deleted_per_partition.items()
            },
            "partitionsToBeDeleted": list(self.partitions_to_be_deleted),
        }
        return write_single_record(CLEANER_PLAN_SCHEMA, record, sync=sync)

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "clean plan") -> HoodieCleanerPlan:
        """Parse ``T.clean.requested``; partition paths are validated."""
        rec = _load(data, what, "HoodieCleanerPlan")
        c = _Check(what, "clean plan")
        e = rec.get("earliestInstantToRetain")
        earliest = None
        if e is not None:
            e = c.record(e, "earliestInstantToRetain")
            earliest = HoodieActionInstant(
                c.str_(e.get("timestamp"), "timestamp", optional=False) or "",
                c.str_(e.get("action"), "action", optional=False) or "",
                c.str_(e.get("state"), "state", optional=False) or "",
            )
        files: dict[str, list[HoodieCleanFileInfo]] = {}
        raw = rec.get("filePathsToBeDeletedPerPartition") or {}
        if not isinstance(raw, dict):
            raise c.fail("filePathsToBeDeletedPerPartition")
        for part, infos in raw.items():
            validate_partition_path(part, what)
            if not isinstance(infos, list):
                raise c.fail("filePathsToBeDeletedPerPartition")
            lst = []
            for i in infos:
                i = c.record(i, "HoodieCleanFileInfo")
                boot = i.get("isBootstrapBaseFile")
                if boot is not None and not isinstance(boot, bool):
                    raise c.fail("isBootstrapBaseFile")
                lst.append(HoodieCleanFileInfo(c.str_(i.get("filePath"), "filePath"), boot))
            files[part] = lst
        legacy = rec.get("filesToBeDeletedPerPartition")
        legacy_files = None
        if legacy is not None:
            if not isinstance(legacy, dict):
                raise c.fail("filesToBeDeletedPerPartition")
            legacy_files = {p: c.strs(v, "filesToBeDeletedPerPartition") for p, v in legacy.items()}
        parts_deleted = c.strs(rec.get("partitionsToBeDeleted"), "partitionsToBeDeleted")
        for p in parts_deleted:
            validate_partition_path(p, what)
        return cls(
            policy=c.str_(rec.get("policy"), "policy", optional=False) or "",
            earliest_instant_to_retain=earliest,
            file_paths_to_be_deleted_per_partition=files,
            partitions_to_be_deleted=parts_deleted,
            files_to_be_deleted_per_partition=legacy_files,
            version=c.int_(rec.get("version"), "version", 1) or 1,
        )


@dataclass
class HoodieCleanPartitionMetadata:
    """``HoodieCleanPartitionMetadata``: what a clean did in one partition."""

    partition_path: str
    policy: str = ""
    delete_path_patterns: list[str] = field(default_factory=list)
    success_delete_files: list[str] = field(default_factory=list)
    failed_delete_files: list[str] = field(default_factory=list)
    is_partition_deleted: bool | None = None

    def to_avro_obj(self) -> dict[str, Any]:
        return {
            "partitionPath": self.partition_path,
            "policy": self.policy,
            "deletePathPatterns": list(self.delete_path_patterns),
            "successDeleteFiles": list(self.success_delete_files),
            "failedDeleteFiles": list(self.failed_delete_files),
            "isPartitionDeleted": self.is_partition_deleted,
        }

    @classmethod
    def from_obj(cls, obj: Any, c: _Check) -> HoodieCleanPartitionMetadata:
        o = c.record(obj, "partitionMetadata")
        deleted = o.get("isPartitionDeleted")
        if deleted is not None and not isinstance(deleted, bool):
            raise c.fail("isPartitionDeleted")
        return cls(
            partition_path=c.str_(o.get("partitionPath"), "partitionPath", optional=False) or "",
            policy=c.str_(o.get("policy"), "policy") or "",
            delete_path_patterns=c.strs(o.get("deletePathPatterns"), "deletePathPatterns"),
            success_delete_files=c.strs(o.get("successDeleteFiles"), "successDeleteFiles"),
            failed_delete_files=c.strs(o.get("failedDeleteFiles"), "failedDeleteFiles"),
            is_partition_deleted=deleted,
        )


@dataclass
class HoodieCleanMetadata:
    """``HoodieCleanMetadata``: the content of a completed clean instant (version 2)."""

    start_clean_time: str
    earliest_commit_to_retain: str
    policy: str = ""
    time_taken_in_millis: int = 0
    total_files_deleted: int = 0
    last_completed_commit_timestamp: str = ""
    partition_metadata: dict[str, HoodieCleanPartitionMetadata] = field(default_factory=dict)
    version: int = 2
    bootstrap_partition_metadata: dict[str, HoodieCleanPartitionMetadata] | None = None

    def to_bytes(self, sync: bytes | None = None) -> bytes:
        record = {
            "policy": self.policy,
            "startCleanTime": self.start_clean_time,
            "timeTakenInMillis": self.time_taken_in_millis,
            "totalFilesDeleted": self.total_files_deleted,
            "earliestCommitToRetain": self.earliest_commit_to_retain,
            "lastCompletedCommitTimestamp": self.last_completed_commit_timestamp,
            "partitionMetadata": {p: m.to_avro_obj() for p, m in self.partition_metadata.items()},
            "version": self.version,
            "bootstrapPartitionMetadata": (
                {p: m.to_avro_obj() for p, m in self.bootstrap_partition_metadata.items()}
                if self.bootstrap_partition_metadata is not None
                else None
            ),
        }
        return write_single_record(CLEAN_METADATA_SCHEMA, record, sync=sync)

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "clean metadata") -> HoodieCleanMetadata:
        """Parse a completed clean instant."""
        rec = _load(data, what, "HoodieCleanMetadata")
        c = _Check(what, "clean metadata")

        def parts(raw: Any, key: str) -> dict[str, HoodieCleanPartitionMetadata]:
            if not isinstance(raw, dict):
                raise c.fail(key)
            return {p: HoodieCleanPartitionMetadata.from_obj(v, c) for p, v in raw.items()}

        boot = rec.get("bootstrapPartitionMetadata")
        return cls(
            start_clean_time=c.str_(rec.get("startCleanTime"), "startCleanTime", optional=False)
            or "",
            earliest_commit_to_retain=c.str_(
                rec.get("earliestCommitToRetain"), "earliestCommitToRetain"
            )
            or "",
            policy=c.str_(rec.get("policy"), "policy") or "",
            time_taken_in_millis=c.int_(rec.get("timeTakenInMillis"), "timeTakenInMillis", 0) or 0,
            total_files_deleted=c.int_(rec.get("totalFilesDeleted"), "totalFilesDeleted", 0) or 0,
            last_completed_commit_timestamp=c.str_(
                rec.get("lastCompletedCommitTimestamp"), "lastCompletedCommitTimestamp"
            )
            or "",
            partition_metadata=parts(rec.get("partitionMetadata") or {}, "partitionMetadata"),
            version=c.int_(rec.get("version"), "version", 1) or 1,
            bootstrap_partition_metadata=(
                parts(boot, "bootstrapPartitionMetadata") if boot is not None else None
            ),
        )


# -- savepoints and restores ----------------------------------------------------------------------

SAVEPOINT_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieSavepointMetadata",
    "namespace": _NS,
    "fields": [
        _f("savepointedBy", _s()),
        _f("savepointedAt", "long"),
        _f("comments", _s()),
        _f(
            "partitionMetadata",
            _map(
                {
                    "type": "record",
                    "name": "HoodieSavepointPartitionMetadata",
                    "fields": [
                        _f("partitionPath", _s()),
                        _f("savepointDataFile", _arr(_s())),
                    ],
                }
            ),
        ),
        _f("version", ["int", "null"], default=1),
    ],
}


@dataclass
class HoodieSavepointMetadata:
    """``HoodieSavepointMetadata``: the content of a completed ``T.savepoint``.

    Args:
        savepointed_by: who took it (the caller's word).
        savepointed_at: epoch milliseconds.
        comments: the caller's comment.
        partition_files: partition -> names of the files of its latest file slices at the
            savepointed instant (base and log files, as Hudi 0.14+ lists them): what cleaning
            keeps and a restore reads.
    """

    savepointed_by: str = ""
    savepointed_at: int = 0
    comments: str = ""
    partition_files: dict[str, list[str]] = field(default_factory=dict)
    version: int = 1

    def file_names(self) -> set[tuple[str, str]]:
        """``(partition, file name)`` of every savepointed file."""
        return {(p, n) for p, names in self.partition_files.items() for n in names}

    def to_bytes(self, sync: bytes | None = None) -> bytes:
        record = {
            "savepointedBy": self.savepointed_by,
            "savepointedAt": self.savepointed_at,
            "comments": self.comments,
            "partitionMetadata": {
                p: {"partitionPath": p, "savepointDataFile": list(names)}
                for p, names in self.partition_files.items()
            },
            "version": self.version,
        }
        return write_single_record(SAVEPOINT_METADATA_SCHEMA, record, sync=sync)

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "savepoint") -> HoodieSavepointMetadata:
        """Parse a completed savepoint instant (file names validated)."""
        rec = _load(data, what, "HoodieSavepointMetadata")
        c = _Check(what, "savepoint metadata")
        parts: dict[str, list[str]] = {}
        raw = rec.get("partitionMetadata") or {}
        if not isinstance(raw, dict):
            raise c.fail("partitionMetadata")
        for key, pm in raw.items():
            pm = c.record(pm, "partitionMetadata")
            part = c.str_(pm.get("partitionPath"), "partitionPath") or str(key)
            validate_partition_path(part, what)
            names = c.strs(pm.get("savepointDataFile"), "savepointDataFile")
            parts[part] = [plan_path_to_name(n, what) for n in names]
        return cls(
            savepointed_by=c.str_(rec.get("savepointedBy"), "savepointedBy") or "",
            savepointed_at=c.int_(rec.get("savepointedAt"), "savepointedAt", 0) or 0,
            comments=c.str_(rec.get("comments"), "comments") or "",
            partition_files=parts,
            version=c.int_(rec.get("version"), "version", 1) or 1,
        )


RESTORE_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRestorePlan",
    "namespace": _NS,
    "fields": [
        _f("instantsToRollback", {"type": "array", "items": _INSTANT_INFO}, default=[]),
        _f("version", ["int", "null"], default=2),
        _f("savepointToRestoreTimestamp", ["string", "null"], default=None),
    ],
}

RESTORE_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRestoreMetadata",
    "namespace": _NS,
    "fields": [
        _f("startRestoreTime", _s()),
        _f("timeTakenInMillis", "long"),
        _f("instantsToRollback", _arr(_s())),
        _f(
            "hoodieRestoreMetadata",
            _map(_arr(["null", ROLLBACK_METADATA_SCHEMA])),
        ),
        _f("version", ["int", "null"], default=1),
        _f(
            "restoreInstantInfo",
            {"type": "array", "items": "HoodieInstantInfo"},
            default=[],
        ),
        _opt("extraMetadata", _map(_s())),
    ],
}


@dataclass
class HoodieRestorePlan:
    """``HoodieRestorePlan``: the content of ``T.restore.requested``: the instants a restore
    rolls back, in the order it rolls them back (newest first), and the savepoint it restores."""

    instants: list[HoodieInstantInfo] = field(default_factory=list)
    savepoint: str | None = None
    version: int = 2

    def to_bytes(self, sync: bytes | None = None) -> bytes:
        record = {
            "instantsToRollback": [
                {"commitTime": i.commit_time, "action": i.action} for i in self.instants
            ],
            "version": self.version,
            "savepointToRestoreTimestamp": self.savepoint,
        }
        return write_single_record(RESTORE_PLAN_SCHEMA, record, sync=sync)

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "restore plan") -> HoodieRestorePlan:
        rec = _load(data, what, "HoodieRestorePlan")
        c = _Check(what, "restore plan")
        raw = rec.get("instantsToRollback") or []
        if not isinstance(raw, list):
            raise c.fail("instantsToRollback")
        infos = []
        for i in raw:
            i = c.record(i, "instantsToRollback")
            infos.append(
                HoodieInstantInfo(
                    c.str_(i.get("commitTime"), "commitTime", optional=False) or "",
                    c.str_(i.get("action"), "action", optional=False) or "",
                )
            )
        return cls(
            instants=infos,
            savepoint=c.str_(rec.get("savepointToRestoreTimestamp"), "savepointToRestoreTimestamp"),
            version=c.int_(rec.get("version"), "version", 2) or 2,
        )


@dataclass
class HoodieRestoreMetadata:
    """``HoodieRestoreMetadata``: the content of a completed restore instant: each rolled-back
    instant's rollback (by its requested time)."""

    start_restore_time: str
    rollbacks: dict[str, HoodieRollbackMetadata] = field(default_factory=dict)
    instants: list[HoodieInstantInfo] = field(default_factory=list)
    time_taken_in_millis: int = 0
    version: int = 1

    def to_bytes(self, sync: bytes | None = None) -> bytes:
        rollbacks = {}
        for ts, meta in self.rollbacks.items():
            _, one = read_single_record(meta.to_bytes(), "rollback metadata")
            rollbacks[ts] = [one]
        record = {
            "startRestoreTime": self.start_restore_time,
            "timeTakenInMillis": self.time_taken_in_millis,
            "instantsToRollback": [i.commit_time for i in self.instants],
            "hoodieRestoreMetadata": rollbacks,
            "version": self.version,
            "restoreInstantInfo": [
                {"commitTime": i.commit_time, "action": i.action} for i in self.instants
            ],
            "extraMetadata": None,
        }
        return write_single_record(RESTORE_METADATA_SCHEMA, record, sync=sync)


# -- clustering plan --------------------------------------------------------------------------------

_SLICE_INFO = {
    "type": "record",
    "name": "HoodieSliceInfo",
    "fields": [
        _opt("dataFilePath", _s()),
        _opt("deltaFilePaths", _arr(_s())),
        {"name": "fileId", "type": ["null", _s()]},
        _opt("partitionPath", _s()),
        _opt("bootstrapFilePath", _s()),
        _f("version", ["int", "null"], default=1),
    ],
}

CLUSTERING_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieClusteringPlan",
    "namespace": _NS,
    "fields": [
        _opt(
            "inputGroups",
            _arr(
                {
                    "type": "record",
                    "name": "HoodieClusteringGroup",
                    "fields": [
                        _opt("slices", _arr(_SLICE_INFO)),
                        _opt("metrics", _map("double")),
                        _f("numOutputFileGroups", ["int", "null"], default=1),
                        _f("version", ["int", "null"], default=1),
                    ],
                }
            ),
        ),
        _opt(
            "strategy",
            {
                "type": "record",
                "name": "HoodieClusteringStrategy",
                "fields": [
                    _opt("strategyClassName", _s()),
                    _opt("strategyParams", _map(_s())),
                    _f("version", ["int", "null"], default=1),
                ],
            },
        ),
        _opt("extraMetadata", _map(_s())),
        _f("version", ["int", "null"], default=1),
        _opt("preserveHoodieMetadata", "boolean"),
    ],
}

REQUESTED_REPLACE_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRequestedReplaceMetadata",
    "namespace": _NS,
    "fields": [
        _opt("operationType", _s()),
        _opt("clusteringPlan", CLUSTERING_PLAN_SCHEMA),
        _opt("extraMetadata", _map(_s())),
        _f("version", ["int", "null"], default=1),
    ],
}


def requested_replace_bytes(operation_type: str | None = None) -> bytes:
    """The requested file of a replacecommit that is no clustering, as Java 1.x writes it: a
    ``HoodieRequestedReplaceMetadata`` without a plan (an insert overwrite's: every field
    null; a partition delete's: ``operationType`` ``DELETE_PARTITION``, empty extra metadata,
    version 1)."""
    record: dict[str, Any] = {
        "operationType": operation_type,
        "clusteringPlan": None,
        "extraMetadata": {} if operation_type else None,
        "version": 1 if operation_type else None,
    }
    return write_single_record(REQUESTED_REPLACE_METADATA_SCHEMA, record)


#: The execution strategy a plan names (Java's default Spark strategy: sort, then size).
SORT_AND_SIZE_STRATEGY = (
    "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
)
SORT_COLUMNS_PARAM = "hoodie.clustering.plan.strategy.sort.columns"
#: The row order over the sort columns (hoodie_ray records it in the plan's strategy params;
#: Java's executors read it from their own config, and ignore it here).
LAYOUT_PARAM = "hoodie.layout.optimize.strategy"


@dataclass(frozen=True)
class HoodieSliceInfo:
    """One file slice of a clustering group (``dataFilePath`` / ``deltaFilePaths`` as file
    names; Java writes full paths, which :meth:`HoodieClusteringPlan.from_bytes` reduces)."""

    partition_path: str
    file_id: str
    data_file: str | None
    delta_files: tuple[str, ...] = ()


@dataclass
class HoodieClusteringGroup:
    """A clustering group: slices rewritten together into ``num_output_groups`` new groups."""

    slices: list[HoodieSliceInfo]
    num_output_groups: int = 1
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class HoodieClusteringPlan:
    """``HoodieClusteringPlan`` inside the ``HoodieRequestedReplaceMetadata`` of a clustering's
    requested file (operation type ``CLUSTER``)."""

    groups: list[HoodieClusteringGroup]
    sort_columns: tuple[str, ...] = ()
    strategy_class: str = SORT_AND_SIZE_STRATEGY
    preserve_metadata: bool = True
    layout: str | None = None  # None: the executing writer's hoodie.layout.optimize.strategy

    def file_groups(self) -> set[tuple[str, str]]:
        """``(partition, file id)`` of every input slice."""
        return {(s.partition_path, s.file_id) for g in self.groups for s in g.slices}

    def to_bytes(self, base_uri: str = "", sync: bytes | None = None) -> bytes:
        """The requested file's content; ``base_uri`` prefixes file paths as Java writes them
        (full paths)."""

        def full(part: str, name: str) -> str:
            rel = f"{part}/{name}" if part else name
            return f"{base_uri.rstrip('/')}/{rel}" if base_uri else rel

        params = {SORT_COLUMNS_PARAM: ",".join(self.sort_columns)} if self.sort_columns else {}
        if self.sort_columns and self.layout:
            params[LAYOUT_PARAM] = self.layout
        plan = {
            "inputGroups": [
                {
                    "slices": [
                        {
                            "dataFilePath": full(s.partition_path, s.data_file)
                            if s.data_file
                            else "",
                            "deltaFilePaths": [full(s.partition_path, n) for n in s.delta_files],
                            "fileId": s.file_id,
                            "partitionPath": s.partition_path,
                            "bootstrapFilePath": "",
                            "version": 1,
                        }
                        for s in g.slices
                    ],
                    "metrics": dict(g.metrics),
                    "numOutputFileGroups": g.num_output_groups,
                    "version": 1,
                }
                for g in self.groups
            ],
            "strategy": {
                "strategyClassName": self.strategy_class,
                "strategyParams": params,
                "version": 1,
            },
            "extraMetadata": {},
            "version": 1,
            "preserveHoodieMetadata": self.preserve_metadata,
        }
        record = {
            "operationType": "CLUSTER",
            "clusteringPlan": plan,
            "extraMetadata": {},
            "version": 1,
        }
        return write_single_record(REQUESTED_REPLACE_METADATA_SCHEMA, record, sync=sync)

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "clustering plan") -> HoodieClusteringPlan:
        """Parse a clustering's requested file (file paths reduced to validated names)."""
        rec = _load(data, what, "HoodieRequestedReplaceMetadata")
        c = _Check(what, "clustering plan")
        plan = rec.get("clusteringPlan")
        if plan is None:
            raise c.fail("clusteringPlan")
        plan = c.record(plan, "clusteringPlan")
        groups = []
        for g in plan.get("inputGroups") or []:
            g = c.record(g, "inputGroups")
            slices = []
            for sl in g.get("slices") or []:
                sl = c.record(sl, "slices")
                part = c.str_(sl.get("partitionPath"), "partitionPath") or ""
                validate_partition_path(part, what)
                data_path = c.str_(sl.get("dataFilePath"), "dataFilePath") or ""
                slices.append(
                    HoodieSliceInfo(
                        part,
                        c.str_(sl.get("fileId"), "fileId", optional=False) or "",
                        plan_path_to_name(data_path, what) if data_path else None,
                        tuple(
                            plan_path_to_name(p, what)
                            for p in c.strs(sl.get("deltaFilePaths"), "deltaFilePaths")
                        ),
                    )
                )
            groups.append(
                HoodieClusteringGroup(
                    slices, c.int_(g.get("numOutputFileGroups"), "numOutputFileGroups", 1) or 1
                )
            )
        strategy = plan.get("strategy") or {}
        params = (strategy.get("strategyParams") or {}) if isinstance(strategy, dict) else {}
        sort = params.get(SORT_COLUMNS_PARAM) if isinstance(params, dict) else None
        layout = params.get(LAYOUT_PARAM) if isinstance(params, dict) else None
        return cls(
            groups,
            tuple(p.strip() for p in str(sort or "").split(",") if p.strip()),
            str(strategy.get("strategyClassName") or SORT_AND_SIZE_STRATEGY)
            if isinstance(strategy, dict)
            else SORT_AND_SIZE_STRATEGY,
            bool(plan.get("preserveHoodieMetadata", True) is not False),
            str(layout).strip().lower() if layout else None,
        )
