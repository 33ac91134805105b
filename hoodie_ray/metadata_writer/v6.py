"""The metadata table of a table version 6 (Hudi 0.x) data table, in the 0.x layout.

The same writer as :class:`~hoodie_ray.metadata_writer.writer.MetadataWriter` (one MDT delta
commit per data action at the data instant's time, completed first; rollbacks, compaction,
clean and archival of the MDT), with what Hudi 0.14 / 0.15 does differently:

* the MDT is a version 6 table: timeline layout 1 (``.hoodie/metadata/.hoodie/<instant>.
  deltacommit``, no completion times), JSON commit metadata, archived instants in
  ``.hoodie/metadata/.hoodie/archived`` log files, ``hoodie.properties`` as 0.x's
  ``HoodieBackedTableMetadataWriter.initializeMetaClient`` sets it;
* log files are named by the base instant of their file slice and versioned
  (``.files-0000-0_<base>.log.<n>_<token>``): each MDT delta commit writes the next version;
* HFiles (base files and the content of HFile log blocks) are written by HBase's writer
  (:func:`~hoodie_ray.hfile.write_hbase_hfile`: CRC32C, full-key indexes, creation time 0);
* the record schema is 0.15's ``HoodieMetadataRecord`` (no ``SecondaryIndexMetadata``, no
  record-index ``position``, no column-stats ``isTightBound``: fields 1.0 added);
* the MDT's own compaction and clean are named after the latest MDT delta commit:
  ``<instant>001`` and ``<instant>002``.

Only the ``files`` partition is maintained; a version 6 table whose MDT lists another partition
(0.x's ``column_stats``, ``bloom_filters``, ``record_index``) is refused, naming it and the
command that drops it (:func:`check_v6_metadata_table_writable`).

Not confirmed from Java sources (written from memory of 0.14 / 0.15, see docs): the init
instant, which Java names ``<latest data instant>010`` on a table with history
(``00000000000000010`` on an empty one) and hoodie_ray always names ``00000000000000010``
(readers count every ``00000000000000xyz`` instant as an initialisation).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from hoodie_ray.config.table_config import HoodieTableConfig, table_checksum
from hoodie_ray.file_group.naming import log_file_name, parse_log_file_name
from hoodie_ray.hfile import build_bloom_filter, write_hbase_hfile
from hoodie_ray.log_format.reader import read_log_file
from hoodie_ray.metadata import records as rec
from hoodie_ray.metadata.layout import (
    METADATA_PAYLOAD,
    METADATA_RECORD_KEY,
    inflight_partitions,
)
from hoodie_ray.metadata_writer.writer import (
    BLOOM_META_BLOCK,
    BLOOM_TYPE_CODE,
    LOG_WRITE_TOKEN,
    V6_MAINTAINED_PARTITIONS,
    MetadataWriter,
    check_v6_metadata_table_writable,
    register_layout_1_writer,
)
from hoodie_ray.storage import join
from hoodie_ray.timeline.archive import ArchivedLogTimeline
from hoodie_ray.timeline.instant import Action, State
from hoodie_ray.timeline.metadata import HoodieCommitMetadata
from hoodie_ray.timeline.timeline import ActiveTimeline

__all__ = [
    "V6_MAINTAINED_PARTITIONS",
    "V6MetadataWriter",
    "check_v6_metadata_table_writable",
    "v6_metadata_schema",
    "v6_metadata_schema_json",
    "v6_metadata_table_props",
]

#: MDT partitions kept on version 6 tables.
#: 0.x: SOLO_COMMIT_TIMESTAMP + the partition-initialisation suffix 010.
V6_FILES_INIT_INSTANT = "00000000000000010"
#: 0.x's MDT compaction / clean instants: the latest delta commit + these suffixes.
COMPACTION_SUFFIX = "001"
CLEAN_SUFFIX = "002"
METADATA_KEYGEN_CLASS = "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator"
#: 1.0 additions absent from 0.15's HoodieMetadata.avsc: top-level and nested field names.
_ADDED_IN_1_0 = {"SecondaryIndexMetadata", "position", "isTightBound"}


def _strip(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _strip(v) for k, v in schema.items()}
        if isinstance(out.get("fields"), list):
            out["fields"] = [f for f in out["fields"] if f.get("name") not in _ADDED_IN_1_0]
        return out
    if isinstance(schema, list):
        return [_strip(s) for s in schema]
    return schema


@lru_cache(maxsize=2)
def v6_metadata_schema_json(meta_fields: bool = True) -> str:
    """0.15's ``HoodieMetadataRecord`` writer schema (with the ``_hoodie_*`` fields, as the
    MDT writer stores it): the v8 schema without the fields 1.0 added."""
    return json.dumps(
        _strip(rec.metadata_schema(8, meta_fields)), separators=(",", ":"), ensure_ascii=False
    )


def v6_metadata_schema(meta_fields: bool = True) -> dict[str, Any]:
    """:func:`v6_metadata_schema_json` parsed (a fresh copy)."""
    return copy.deepcopy(json.loads(v6_metadata_schema_json(meta_fields)))  # type: ignore[no-any-return]


def v6_metadata_table_props(data: Mapping[str, str]) -> dict[str, str]:
    """``hoodie.properties`` of the 0.x MDT of the data table with properties ``data``."""
    name = data.get("hoodie.table.name", "table")
    props = {
        "hoodie.table.name": f"{name}_metadata",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": "6",
        "hoodie.timeline.layout.version": "1",
        "hoodie.archivelog.folder": "archived",
        "hoodie.compaction.payload.class": METADATA_PAYLOAD,
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.table.recordkey.fields": METADATA_RECORD_KEY,
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.keygenerator.class": METADATA_KEYGEN_CLASS,
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.timeline.timezone": data.get("hoodie.table.timeline.timezone", "LOCAL"),
    }
    props["hoodie.table.checksum"] = table_checksum(props)
    return props


@register_layout_1_writer
class V6MetadataWriter(MetadataWriter):
    """The metadata table of a version 6 table, in the 0.x layout (``files`` only)."""

    files_init_instant = V6_FILES_INIT_INSTANT

    @property
    def schema_json(self) -> str:
        return v6_metadata_schema_json()

    def mdt_props(self) -> dict[str, str]:
        return v6_metadata_table_props(self.table.config)

    def sync_with_config(self) -> None:
        """``hoodie.metadata.enable`` on a version 6 table: true builds a missing MDT, false
        drops it, unset keeps what the table has (0.x tables have one only when asked)."""
        if self.config.enable is None:
            if inflight_partitions(self.table.table_config) and not self.enabled:
                self.initialize()  # a half-built MDT: finish it
            return
        super().sync_with_config()

    def _hfile(self, records: Mapping[str, dict[str, Any]], *, base: bool) -> bytes:
        keys = sorted(records, key=lambda k: k.encode())
        values = rec.encode_records([records[k] for k in keys], v6_metadata_schema())
        info = {b"schema": self.schema_json.encode()}
        rows = [k.encode() for k in keys]
        meta: dict[str, bytes] = {}
        if base:
            meta[BLOOM_META_BLOCK] = build_bloom_filter(rows)
            info[b"bloomFilterTypeCode"] = BLOOM_TYPE_CODE
            info[b"minRecordKey"] = rows[0] if rows else b""
            info[b"maxRecordKey"] = rows[-1] if rows else b""
        return write_hbase_hfile(
            list(zip(rows, values, strict=True)),
            file_info=info,
            meta_blocks=meta,
            allow_empty=base,
        )

    def _commit_bytes(self, meta: HoodieCommitMetadata) -> bytes:
        return meta.to_bytes(1)

    def _service_instant(self, tl: ActiveTimeline, action: str = Action.COMPACTION) -> str:
        """0.x: the latest completed MDT delta commit + ``001`` (compaction) or ``002``
        (clean); a fresh time where that instant is taken."""
        done = [i.timestamp for i in tl.find([Action.DELTA_COMMIT], [State.COMPLETED])]
        if done:
            ts = max(done) + (CLEAN_SUFFIX if action == Action.CLEAN else COMPACTION_SUFFIX)
            if not tl.contains(ts) and all(i.timestamp < ts for i in tl.instants):
                return ts
        return super()._service_instant(tl, action)

    def compact(self, force: bool = False) -> str | None:
        """0.x's ``compactIfNecessary``: no compaction while a data instant before the latest
        MDT delta commit is pending (its delta commit's log would stay in the replaced slice:
        v6 logs join slices by name, not by completion time)."""
        tl = self.timeline.reload()
        done = [i.timestamp for i in tl.find([Action.DELTA_COMMIT], [State.COMPLETED])]
        latest = max(done, default="")
        data = self.table.active_timeline.reload()
        if any(i.timestamp < latest for i in data.pending()):
            return None
        return super().compact(force)

    def _log_name(self, part: str, fid: str, instant: str, base_instants: Mapping[str, str]) -> str:
        """The next log version of the group's latest slice (named by its base instant)."""
        names = self.storage.list_file_names(part)
        base = base_instants.get(fid, "")
        logs = [lg for n in names if (lg := parse_log_file_name(n)) and lg.file_id == fid]
        if not base and logs:
            base = min(lg.instant for lg in logs)
        base = base or instant
        version = max((lg.version for lg in logs if lg.instant == base), default=0) + 1
        return log_file_name(fid, base, version, LOG_WRITE_TOKEN)

    def rollback_instant(self, ts: str) -> None:
        """Remove MDT delta commit ``ts`` and the log files it wrote (found by their blocks'
        instant time: v6 logs are named by their slice)."""
        tl = self.timeline.reload()
        inst = tl.get(ts, Action.DELTA_COMMIT)
        if inst is None:
            return
        for part in self._mdt_partition_dirs():
            for n in self.storage.list_file_names(part):
                if parse_log_file_name(n) is None:
                    continue
                rel = join(part, n)
                if {b.instant_time for b in read_log_file(self.storage, rel)} == {ts}:
                    self.storage.delete(rel)
        tl.delete_instant(inst)

    def _archived_timeline(self, mcfg: HoodieTableConfig) -> Any:
        return ArchivedLogTimeline(self.storage, mcfg.archive_path)
