"""Upgrading a table from version 6 to version 8 (Hudi 1.x), the way Hudi's upgrade does it.

No pending instant may exist. The active timeline moves to ``.hoodie/timeline/`` (layout 2):
completed instants get a completion time in their names (their requested time: unique and
increasing, so a version-6 log named by its slice's base instant attaches to the same slice
under the completion-time rule), commit metadata is rewritten as Avro, requested and inflight
files are copied. Then ``hoodie.properties`` switches atomically (readers see the whole old
table or the whole new one), and the old instant files are removed.
"""

from __future__ import annotations

from typing import Any

from hoodie_ray.config.table_config import (
    COMMIT_TIME_STRATEGY_ID,
    EVENT_TIME_STRATEGY_ID,
    HoodieTableConfig,
    MergeMode,
)
from hoodie_ray.exceptions import HoodieTimelineError, HoodieUnsupportedError
from hoodie_ray.storage import join
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.metadata import HoodieCommitMetadata
from hoodie_ray.write.lock import WriterLock

_JSON_ACTIONS = {Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT}


def upgrade(
    path: str, *, storage_options: dict[str, Any] | None = None, to_version: int = 8
) -> int:
    """Upgrade the table at ``path`` to table version 8; returns the new version.

    Raises:
        HoodieUnsupportedError: a target other than 8, or a table that is not version 6 or 8.
        HoodieTimelineError: the table has pending instants (finish or roll them back first).

    Example::

        hr.upgrade("/data/trips")
    """
    if to_version != 8:
        raise HoodieUnsupportedError(
            f"upgrade to table version {to_version} is not supported (8 only)"
        )
    table = HoodieTable.load(path, storage_options)
    storage = table.storage
    with WriterLock(storage):
        table = HoodieTable.from_storage(storage, storage_options, path)  # read under the lock
        cfg = table.table_config
        if cfg.table_version == 8:
            return 8
        if cfg.table_version != 6:
            raise HoodieUnsupportedError(
                f"cannot upgrade table version {cfg.table_version} of {path} to 8"
            )
        old = table.active_timeline
        pending = [i for i in old.instants if i.state is not State.COMPLETED]
        if pending:
            raise HoodieTimelineError(
                f"cannot upgrade {path}: pending instants {', '.join(str(i) for i in pending)}; "
                "finish or roll them back first"
            )
        new_dir = join(".hoodie", "timeline")
        storage.makedirs(new_dir)
        moved: list[str] = []
        for inst in old.instants:
            requested = Instant(inst.timestamp, inst.action, State.REQUESTED)
            inflight = Instant(inst.timestamp, inst.action, State.INFLIGHT)
            for aux in (requested, inflight):
                name1 = old.file_name(aux)
                if storage.exists(join(".hoodie", name1)):
                    content = storage.read_bytes(join(".hoodie", name1))
                    if (
                        aux.state is State.INFLIGHT
                        and Action.comparable(inst.action) in _JSON_ACTIONS
                    ):
                        content = b""  # layout 2 inflight metadata is Avro; empty is accepted
                    storage.write_atomic(join(new_dir, aux.file_name(2)), content)
                    moved.append(name1)
            data = old.read_details(inst)
            if Action.comparable(inst.action) in _JSON_ACTIONS:
                meta = HoodieCommitMetadata.from_bytes(data, 1, inst)
                data = meta.to_avro()
            done = Instant(
                inst.timestamp, inst.action, State.COMPLETED, completion_time=inst.timestamp
            )
            storage.write_atomic(join(new_dir, done.file_name(2)), data)
            moved.append(old.file_name(inst))
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
            EVENT_TIME_STRATEGY_ID
            if mode is MergeMode.EVENT_TIME_ORDERING
            else COMMIT_TIME_STRATEGY_ID
        )
        props.pop("hoodie.compaction.record.merger.strategy", None)
        HoodieTableConfig(props).save(storage)  # the switch: one atomic rename
        for name in moved:
            storage.delete(join(".hoodie", name))
        return 8
