"""Upgrading a table to version 8 or 9 (Hudi 1.0 / 1.1), the way Hudi's upgrade does it.

No pending instant may exist (Java's upgrade to 8 and to 9 first rolls back failed writes and
runs a compaction, ``UpgradeDowngrade.UPGRADE_HANDLERS_REQUIRING_ROLLBACK_AND_COMPACT``;
hoodie_ray leaves both to the caller and refuses a table with pending instants).

Version 6 -> 8: the active timeline moves to ``.hoodie/timeline/`` (layout 2): completed
instants get a completion time in their names (their requested time: unique and increasing, so
a version-6 log named by its slice's base instant attaches to the same slice under the
completion-time rule), commit metadata is rewritten as Avro, requested and inflight files are
copied. Then ``hoodie.properties`` switches atomically (readers see the whole old table or the
whole new one), and the old instant files are removed.

Version 8 -> 9 changes ``hoodie.properties`` only (``EightToNineUpgradeHandler``): the timeline,
the log format and the commit metadata of version 9 are those of version 8. Version 6 -> 9 is
both steps with one switch of ``hoodie.properties``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

from hoodie_ray.config.options import resolve_options
from hoodie_ray.config.table_config import (
    COMMIT_TIME_STRATEGY_ID,
    DEFAULT_PAYLOAD,
    EVENT_TIME_PAYLOAD,
    EVENT_TIME_STRATEGY_ID,
    LEGACY_PAYLOAD_KEY,
    ORDERING_FIELDS_KEY,
    OVERWRITE_PAYLOAD,
    PARTIAL_UPDATE_MODE_KEY,
    PARTIAL_UPDATE_PAYLOAD,
    PAYLOAD_KEY,
    PRECOMBINE_FIELD_KEY,
    PROPERTIES_FILE,
    HoodieTableConfig,
    MergeMode,
    partial_update_props,
)
from hoodie_ray.exceptions import HoodieTimelineError, HoodieUnsupportedError
from hoodie_ray.metadata.layout import (
    INDEX_DEFS_PROPERTY,
    METADATA_TABLE_PATH,
    completed_partitions,
    has_metadata_table,
    inflight_partitions,
)
from hoodie_ray.metadata.reader import load_metadata_config
from hoodie_ray.metadata.secondary_index import index_definitions
from hoodie_ray.metadata_writer.writer import (
    MAINTAINED_PARTITIONS,
    MetadataWriteConfig,
    metadata_writer,
)
from hoodie_ray.storage import Storage, join
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.metadata import HoodieCommitMetadata
from hoodie_ray.write.lock_providers import open_lock

_JSON_ACTIONS = {Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT}
UPGRADE_TARGETS = (8, 9)
_STRATEGY_KEYS = ("hoodie.record.merge.strategy.id", "hoodie.compaction.record.merger.strategy")


def upgrade(
    path: str,
    to_version: int | str = 8,
    *,
    storage_options: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> int:
    """Upgrade the table at ``path`` to table version ``to_version`` (8 or 9); returns the
    table's version afterwards (a table already at ``to_version`` is left as it is). Runs
    under the table lock (``options`` may name its provider, ``hoodie.write.lock.provider``).
    ``on_progress(done, total)``: called as the upgrade's steps complete (each instant of a
    version 6 timeline copied, the switch, the metadata table's rebuild or compaction).

    Raises:
        HoodieUnsupportedError: a target other than 8 or 9, a table that is not version 6 or 8
            (or 9, for ``to_version=9``), a downgrade, or (to 9) merge settings, a metadata table
            or a key generator the version 9 upgrade cannot carry over.
        HoodieTimelineError: the table has pending instants (finish or roll them back first).

    Example::

        hr.upgrade("/data/trips")                 # 6 -> 8
        hr.upgrade("/data/trips", to_version=9)   # 6 or 8 -> 9
    """
    # "8", as an option value or the CLI gives it, is 8
    if (
        isinstance(to_version, str)
        and to_version.strip().isascii()
        and to_version.strip().isdigit()
    ) or (isinstance(to_version, numbers.Integral) and not isinstance(to_version, bool)):
        target = int(to_version)
    else:
        target = -1
    if target not in UPGRADE_TARGETS:
        raise HoodieUnsupportedError(
            f"upgrade to table version {to_version!r} is not supported (8 or 9)"
        )
    to_version = target
    table = HoodieTable.load(path, storage_options)
    storage = table.storage
    with open_lock(storage, resolve_options(options)):
        table = HoodieTable.from_storage(storage, storage_options, path)  # read under the lock
        version = table.table_config.table_version
        if version == to_version:
            return version
        _check_upgradable(table, path, to_version)
        _switch_version(table, to_version, storage_options, path, on_progress or _quiet)
        return to_version


def _quiet(done: int, total: int) -> None:
    """No progress shown (the default of ``upgrade``)."""


def _check_upgradable(table: HoodieTable, path: str, to_version: int) -> None:
    """Refuse a downgrade, a version other than 6 or 8, pending instants, and (to 9) what
    the version 9 upgrade cannot carry over."""
    cfg = table.table_config
    version = cfg.table_version
    if version > to_version:
        raise HoodieUnsupportedError(
            f"{path} is table version {version}: hoodie_ray does not downgrade tables"
        )
    if version not in (6, 8):
        raise HoodieUnsupportedError(
            f"cannot upgrade table version {version} of {path} to {to_version}"
        )
    pending = [i for i in table.active_timeline.instants if i.state is not State.COMPLETED]
    if pending:
        raise HoodieTimelineError(
            f"cannot upgrade {path}: pending instants {', '.join(str(i) for i in pending)}; "
            "finish or roll them back first"
        )
    if to_version == 9:
        check_eight_to_nine(cfg, path, table.storage)


def _switch_version(
    table: HoodieTable,
    to_version: int,
    storage_options: dict[str, Any] | None,
    path: str,
    on_progress: Callable[[int, int], None],
) -> None:
    """Move the table to ``to_version`` (checked): the v6 timeline copied to layout 2, the
    metadata table's properties, then the table's in one atomic rename (the switch), then
    the old timeline files deleted; to 9, the metadata table recompacted."""
    storage = table.storage
    rebuild = False
    indexes: set[str] = set()
    if table.table_config.table_version == 6 and (
        has_metadata_table(table.table_config) or storage.exists(METADATA_TABLE_PATH)
    ):
        # a 0.x metadata table is not carried over: dropped, then rebuilt in the new layout
        # with the indexes it had
        rebuild = has_metadata_table(table.table_config)
        indexes = set(completed_partitions(table.table_config))
        metadata_writer(table).drop()
    cfg = table.table_config
    props = six_to_eight_props(cfg) if cfg.table_version == 6 else dict(cfg.props)
    if to_version == 9:
        props = eight_to_nine_props(props)
    recompact = to_version == 9 and has_metadata_table(HoodieTableConfig(props))
    moved: list[str] = []
    copies = len(table.active_timeline.instants) if cfg.table_version == 6 else 0
    total = copies + 1 + int(recompact) + int(rebuild)
    on_progress(0, total)
    if cfg.table_version == 6:
        moved = _move_timeline_to_layout_2(table, lambda n: on_progress(n, total))
    if to_version == 9:
        mdt = storage.sub(METADATA_TABLE_PATH)
        if mdt.exists(PROPERTIES_FILE):  # the metadata table moves first (spec 1.2)
            mcfg = load_metadata_config(mdt)
            HoodieTableConfig({**mcfg.props, "hoodie.table.version": "9"}).save(mdt)
    HoodieTableConfig(props).save(storage)  # the switch: one atomic rename
    for name in moved:
        storage.delete(join(".hoodie", name))
    done = copies + 1
    on_progress(done, total)
    if recompact:
        upgraded = HoodieTable.from_storage(storage, storage_options, path)
        metadata_writer(upgraded).compact(force=True)
        done += 1
        on_progress(done, total)
    if rebuild:
        upgraded = HoodieTable.from_storage(storage, storage_options, path)
        w = metadata_writer(upgraded, MetadataWriteConfig(enable=True))
        w.initialize()
        w.initialize_indexes(indexes)
        on_progress(total, total)


def _move_timeline_to_layout_2(
    table: HoodieTable, copied: Callable[[int], None] | None = None
) -> list[str]:
    """Copy every instant of a layout-1 timeline into ``.hoodie/timeline/`` (layout 2);
    returns the names of the old files (deleted once ``hoodie.properties`` has switched).
    ``copied(n)``: after each instant, how many are done."""
    storage = table.storage
    old = table.active_timeline
    new_dir = join(".hoodie", "timeline")
    storage.makedirs(new_dir)
    moved: list[str] = []
    for n, inst in enumerate(old.instants, 1):
        requested = Instant(inst.timestamp, inst.action, State.REQUESTED)
        inflight = Instant(inst.timestamp, inst.action, State.INFLIGHT)
        for aux in (requested, inflight):
            name1 = old.file_name(aux)
            if storage.exists(join(".hoodie", name1)):
                content = storage.read_bytes(join(".hoodie", name1))
                if aux.state is State.INFLIGHT and Action.comparable(inst.action) in _JSON_ACTIONS:
                    content = b""  # layout 2 inflight metadata is Avro; empty is accepted
                storage.write_atomic(join(new_dir, aux.file_name(2)), content)
                moved.append(name1)
        data = old.read_details(inst)
        if Action.comparable(inst.action) in _JSON_ACTIONS:
            meta = HoodieCommitMetadata.from_bytes(data, 1, inst)
            data = meta.to_avro()
        done = Instant(inst.timestamp, inst.action, State.COMPLETED, completion_time=inst.timestamp)
        storage.write_atomic(join(new_dir, done.file_name(2)), data)
        moved.append(old.file_name(inst))
        if copied is not None:
            copied(n)
    return moved


def six_to_eight_props(cfg: HoodieTableConfig) -> dict[str, str]:
    """The ``hoodie.properties`` of a version 6 table once upgraded to version 8."""
    props = dict(cfg.props)
    props.update(
        {
            "hoodie.table.version": "8",
            "hoodie.timeline.layout.version": "2",
            "hoodie.timeline.path": "timeline",
            "hoodie.timeline.history.path": "history",
            "hoodie.table.initial.version": props.get("hoodie.table.initial.version", "6"),
        }
    )
    kg = cfg.keygen_type
    if kg and kg != "UNKNOWN":
        props["hoodie.table.keygenerator.type"] = kg
    mode = cfg.merge_mode
    props["hoodie.record.merge.mode"] = mode.value
    props["hoodie.record.merge.strategy.id"] = (
        EVENT_TIME_STRATEGY_ID if mode is MergeMode.EVENT_TIME_ORDERING else COMMIT_TIME_STRATEGY_ID
    )
    if _payload(cfg.props) == PARTIAL_UPDATE_PAYLOAD:  # a payload of its own: CUSTOM on 8
        props.update(partial_update_props(8))
    props.pop("hoodie.compaction.record.merger.strategy", None)
    return props


def _payload(props: Mapping[str, str]) -> str:
    return (
        props.get(PAYLOAD_KEY) or props.get("hoodie.datasource.write.payload.class") or ""
    ).strip()


def check_eight_to_nine(cfg: HoodieTableConfig, path: str, storage: Storage | None = None) -> None:
    """Refuse what hoodie_ray's version 9 upgrade does not carry over.

    Java's ``EightToNineUpgradeHandler`` also maps the payload classes of CDC and other partial
    updates (AWS DMS, Debezium, ``OverwriteNonDefaults...``) onto merge properties and
    partial-update modes, and versions the index definitions of the metadata table; hoodie_ray
    reads and writes neither, so such tables are refused (``PartialUpdateAvroPayload`` is
    carried over: :func:`eight_to_nine_props`). So
    is (as Java does by default) a complex key generator with a single record key field:
    Java 0.14.1 to 1.0.2 wrote its keys without the ``field:`` prefix that version 9 requires
    (HUDI-7001, ``KeyGenUtils.encodeSingleKeyFieldNameForComplexKeyGen``).
    """
    payload = _payload(cfg.props)
    known = (DEFAULT_PAYLOAD, EVENT_TIME_PAYLOAD, OVERWRITE_PAYLOAD, PARTIAL_UPDATE_PAYLOAD)
    if payload and payload not in known:
        raise HoodieUnsupportedError(
            f"cannot upgrade {path} to table version 9: payload class {payload} is not "
            "supported (DefaultHoodieRecordPayload, EventTimeAvroPayload, "
            "OverwriteWithLatestAvroPayload, PartialUpdateAvroPayload)"
        )
    mode = (cfg.props.get("hoodie.record.merge.mode") or "").strip().upper()
    if payload == PARTIAL_UPDATE_PAYLOAD and mode == "CUSTOM":
        mode = ""  # (version 8's record of the payload: mapped onto a partial update mode)
    if mode and mode not in MergeMode.__members__:
        raise HoodieUnsupportedError(
            f"cannot upgrade {path} to table version 9: hoodie.record.merge.mode={mode}"
        )
    listed = completed_partitions(cfg) + inflight_partitions(cfg)
    rel = (cfg.props.get(INDEX_DEFS_PROPERTY) or "").strip()
    if storage is None:  # unread: any definitions file may define an index
        defined = [rel] if rel else []
    else:  # a file whose every index was dropped defines none
        defined = sorted(index_definitions(storage, rel))
    foreign = [p for p in listed if p not in MAINTAINED_PARTITIONS and p not in defined]
    if foreign or defined:
        how = [f"hoodie-ray metadata drop-index {path} {name}" for name in defined]
        how += [f"hoodie-ray metadata drop {path} --partition {name}" for name in foreign]
        raise HoodieUnsupportedError(
            f"cannot upgrade {path} to table version 9: its metadata table has indexes whose "
            "definitions the version 9 upgrade versions anew, which hoodie_ray does not do "
            f"({', '.join(defined + foreign)}); drop them first ({'; '.join(how)}) and "
            "create them again after the upgrade"
        )
    if cfg.keygen_type == "COMPLEX" and len(cfg.record_key_fields) == 1:
        raise HoodieUnsupportedError(
            f"cannot upgrade {path} to table version 9: a complex key generator with a single "
            "record key field may hold keys without the 'field:' prefix version 9 requires "
            "(HUDI-7001); Java refuses this upgrade too"
        )


def eight_to_nine_props(props: Mapping[str, str]) -> dict[str, str]:
    """``hoodie.properties`` of a version 8 table once upgraded to version 9, as Java's
    ``EightToNineUpgradeHandler`` changes them (for the merge settings hoodie_ray supports,
    :func:`check_eight_to_nine`):

    * a built-in merge mode (not CUSTOM) keeps ``hoodie.record.merge.mode`` and loses
      ``hoodie.record.merge.strategy.id`` (``reconcileMergeModeConfig``); an
      ``EventTimeAvroPayload`` table gets ``EVENT_TIME_ORDERING``;
    * the payload class moves from ``hoodie.compaction.payload.class`` to
      ``hoodie.table.legacy.payload.class`` (``reconcilePayloadClassConfig``, for the classes
      of ``UpgradeDowngradeUtils.PAYLOAD_CLASSES_TO_HANDLE``);
    * the ordering field moves from ``hoodie.table.precombine.field`` to
      ``hoodie.table.ordering.fields`` (``reconcileOrderingFieldsConfig``);
    * ``PartialUpdateAvroPayload`` (``CUSTOM`` with the payload strategy on version 8) becomes
      ``EVENT_TIME_ORDERING`` with ``hoodie.table.partial.update.mode=IGNORE_DEFAULTS``
      (``EightToNineUpgradeHandler``'s payload mapping);
    * ``hoodie.table.version=9``; the timeline layout stays 2.
    """
    out = dict(props)
    payload = _payload(props)
    mode = (props.get("hoodie.record.merge.mode") or "").strip().upper()
    if payload in (EVENT_TIME_PAYLOAD, PARTIAL_UPDATE_PAYLOAD):
        out["hoodie.record.merge.mode"] = MergeMode.EVENT_TIME_ORDERING.value
        mode = MergeMode.EVENT_TIME_ORDERING.value
    if payload == PARTIAL_UPDATE_PAYLOAD:
        out[PARTIAL_UPDATE_MODE_KEY] = "IGNORE_DEFAULTS"
    if mode != "CUSTOM":
        for key in _STRATEGY_KEYS:
            out.pop(key, None)
    if payload in (DEFAULT_PAYLOAD, EVENT_TIME_PAYLOAD, OVERWRITE_PAYLOAD, PARTIAL_UPDATE_PAYLOAD):
        out[LEGACY_PAYLOAD_KEY] = payload
        out.pop(PAYLOAD_KEY, None)
    ordering = (props.get(ORDERING_FIELDS_KEY) or props.get(PRECOMBINE_FIELD_KEY) or "").strip()
    if ordering:
        out[ORDERING_FIELDS_KEY] = ordering
        out.pop(PRECOMBINE_FIELD_KEY, None)
    out["hoodie.table.version"] = "9"
    out["hoodie.timeline.layout.version"] = "2"
    return out
