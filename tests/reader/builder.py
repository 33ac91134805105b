"""A small, fully controlled Hudi MOR table builder for reader tests (and the read benchmark).

It writes exactly the files a test asks for -- base Parquet files with meta columns, log files
made of Avro/Parquet data blocks, delete blocks (any ordering-value wrapper), rollback command
blocks or a truncated (corrupt) block, and completed or pending instants -- so every merge rule
and gate can be checked against hudi-rs. Table version 6 (JSON timeline) and 8 (Avro timeline,
completion times, log files named by their deltacommit).
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_ray.avro.schema import arrow_to_avro_schema
from hoodie_ray.config.table_config import (
    COMMIT_TIME_STRATEGY_ID,
    DEFAULT_PAYLOAD,
    EVENT_TIME_STRATEGY_ID,
    OVERWRITE_PAYLOAD,
    HoodieTableConfig,
    new_table_props,
)
from hoodie_ray.meta import META_FIELDS
from hoodie_ray.storage import open_storage
from hoodie_ray.timeline.instant import Action, Instant, State, format_instant_time
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat
from hoodie_ray.timeline.timeline import ActiveTimeline

META = list(META_FIELDS)
MAGIC = b"#HUDI#"
_WRAPPERS = [
    ("BooleanWrapper", "boolean"),
    ("IntWrapper", "int"),
    ("LongWrapper", "long"),
    ("FloatWrapper", "float"),
    ("DoubleWrapper", "double"),
    ("BytesWrapper", "bytes"),
    ("StringWrapper", "string"),
    ("DateWrapper", "int"),
    ("DecimalWrapper", "bytes"),
    ("TimeMicrosWrapper", "long"),
    ("TimestampMicrosWrapper", "long"),
]
_NS = "org.apache.hudi.avro.model"
DELETE_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "HoodieDeleteRecordList",
        "namespace": _NS,
        "fields": [
            {
                "name": "deleteRecordList",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieDeleteRecord",
                        "fields": [
                            {"name": "recordKey", "type": ["null", "string"], "default": None},
                            {"name": "partitionPath", "type": ["null", "string"], "default": None},
                            {
                                "name": "orderingVal",
                                "type": [
                                    "null",
                                    *[
                                        {
                                            "type": "record",
                                            "name": n,
                                            "fields": [{"name": "value", "type": t}],
                                        }
                                        for n, t in _WRAPPERS
                                    ],
                                ],
                                "default": None,
                            },
                        ],
                    },
                },
            }
        ],
    }
)


# -- blocks ---------------------------------------------------------------------------------------


def frame_block(block_type: int, header: dict[int, str], content: bytes) -> bytes:
    """One log block (format version 1), spec §4.1."""
    h = struct.pack(">i", len(header))
    for k, v in header.items():
        b = v.encode("utf-8")
        h += struct.pack(">ii", k, len(b)) + b
    footer = struct.pack(">i", 0)
    block_len = 4 + 4 + len(h) + 8 + len(content) + len(footer) + 8
    return (
        MAGIC
        + struct.pack(">q", block_len)
        + struct.pack(">ii", 1, block_type)
        + h
        + struct.pack(">q", len(content))
        + content
        + footer
        + struct.pack(">q", block_len + 6)
    )


def avro_data_block(instant: str, records: pa.Table, avro_schema: dict[str, Any]) -> bytes:
    parsed = fastavro.parse_schema(avro_schema)
    body = io.BytesIO()
    rows = records.to_pylist()
    body.write(struct.pack(">ii", 3, len(rows)))
    for r in rows:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, r)
        b = buf.getvalue()
        body.write(struct.pack(">i", len(b)) + b)
    return frame_block(3, {0: instant, 2: json.dumps(avro_schema)}, body.getvalue())


def parquet_data_block(instant: str, records: pa.Table, avro_schema: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(records, buf)
    return frame_block(5, {0: instant, 2: json.dumps(avro_schema)}, buf.getvalue())


def delete_block(
    instant: str,
    keys: list[str],
    partitions: list[str],
    ordering: list[tuple[str, Any] | None],
    avro_schema: dict[str, Any],
) -> bytes:
    """``ordering``: ``None`` (null) or ``(wrapper name, value)``, e.g. ``("IntWrapper", 0)``."""
    recs = []
    for k, p, o in zip(keys, partitions, ordering, strict=True):
        ov = None if o is None else (f"{_NS}.{o[0]}", {"value": o[1]})
        recs.append({"recordKey": k, "partitionPath": p, "orderingVal": ov})
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, DELETE_SCHEMA, {"deleteRecordList": recs})
    b = buf.getvalue()
    content = struct.pack(">ii", 3, len(b)) + b
    return frame_block(1, {0: instant, 2: json.dumps(avro_schema)}, content)


def rollback_block(instant: str, target: str) -> bytes:
    return frame_block(0, {0: instant, 1: target, 3: "0"}, b"")


# -- the table ------------------------------------------------------------------------------------


@dataclass
class Commit:
    """One instant being written: collect files, then :meth:`complete` (or leave it pending)."""

    builder: TableBuilder
    instant: str
    action: str = Action.DELTA_COMMIT
    stats: dict[str, list[HoodieWriteStat]] = field(default_factory=dict)
    replaced: dict[str, list[str]] | None = None
    _seq: int = 0

    # -- records -------------------------------------------------------------------------------
    def with_meta(self, data: pa.Table, partition: str, file_name: str) -> pa.Table:
        b = self.builder
        n = data.num_rows
        keys = data.column(b.key).cast(pa.string())
        seq = [f"{self.instant}_0_{self._seq + i}" for i in range(n)]
        self._seq += n
        cols = [
            pa.array([self.instant] * n, pa.string()),
            pa.array(seq, pa.string()),
            keys,
            pa.array([partition] * n, pa.string()),
            pa.array([file_name] * n, pa.string()),
        ]
        meta = pa.table(dict(zip(META, cols, strict=True)))
        for name in data.schema.names:
            meta = meta.append_column(data.schema.field(name), data.column(name))
        return meta

    def base_file(self, partition: str, file_id: str, data: pa.Table, **pq_kw: Any) -> str:
        """Write a base file of ``data`` (user columns); returns its name."""
        name = f"{file_id}_0-1-0_{self.instant}.parquet"
        table = self.with_meta(data, partition, name)
        path = self.builder.root / partition / name if partition else self.builder.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path, **pq_kw)
        self.builder.write_partition_meta(partition, self.instant)
        self.stats.setdefault(partition, []).append(
            HoodieWriteStat(
                file_id=file_id,
                path=f"{partition}/{name}" if partition else name,
                prev_commit="null",
                num_writes=data.num_rows,
                num_inserts=data.num_rows,
                partition_path=partition,
                file_size_in_bytes=path.stat().st_size,
                total_write_bytes=path.stat().st_size,
            )
        )
        return name

    def log_records(self, data: pa.Table, partition: str, file_id: str) -> pa.Table:
        return self.with_meta(data, partition, file_id)

    def log_file(
        self,
        partition: str,
        file_id: str,
        blocks: list[bytes],
        *,
        base_instant: str | None = None,
        base_file: str = "",
        version: int | None = None,
        token: str = "0-2-0",
    ) -> str:
        """Write a log file of ready-made blocks; v6 names it by ``base_instant``."""
        b = self.builder
        ts = self.instant if b.version >= 8 else (base_instant or self.instant)
        d = b.root / partition if partition else b.root
        d.mkdir(parents=True, exist_ok=True)
        if version is None:
            existing = [
                int(p.name.split(".log.")[1].split("_")[0])
                for p in d.glob(f".{file_id}_{ts}.log.*")
            ]
            version = max(existing, default=0) + 1
        name = f".{file_id}_{ts}.log.{version}_{token}"
        data = b"".join(blocks)
        (d / name).write_bytes(data)
        b.write_partition_meta(partition, self.instant)
        self.stats.setdefault(partition, []).append(
            HoodieWriteStat(
                file_id=file_id,
                path=f"{partition}/{name}" if partition else name,
                prev_commit=(base_instant or "null") if b.version < 8 else self.instant,
                num_update_writes=1,
                partition_path=partition,
                file_size_in_bytes=len(data),
                total_write_bytes=len(data),
                log_version=version,
                log_offset=0,
                base_file=base_file if b.version < 8 else "",
                log_files=[name],
            )
        )
        return name

    # -- blocks bound to this instant -------------------------------------------------------------
    def data_block(self, data: pa.Table, partition: str, file_id: str, fmt: str = "avro") -> bytes:
        recs = self.log_records(data, partition, file_id)
        schema = self.builder.avro_schema(recs.schema)
        if fmt == "parquet":
            return parquet_data_block(self.instant, recs, schema)
        return avro_data_block(self.instant, recs, schema)

    def delete_block(
        self, keys: list[str], partition: str, ordering: list[tuple[str, Any] | None] | None = None
    ) -> bytes:
        ordering = ordering if ordering is not None else [("IntWrapper", 0)] * len(keys)
        return delete_block(
            self.instant,
            keys,
            [partition] * len(keys),
            ordering,
            self.builder.avro_schema(self.builder.full_schema),
        )

    def rollback_block(self, target: str) -> bytes:
        return rollback_block(self.instant, target)

    # -- timeline ------------------------------------------------------------------------------
    def complete(self) -> str:
        b = self.builder
        meta = HoodieCommitMetadata(
            partition_to_write_stats=self.stats,
            extra_metadata={"schema": json.dumps(b.avro_schema(b.data_schema, with_meta=False))},
            operation_type="UPSERT",
            partition_to_replace_file_ids=self.replaced,
        )
        inst = Instant(self.instant, self.action, State.INFLIGHT)
        completion = b.next_instant() if b.version >= 8 else None
        b.timeline.complete(inst, meta.to_bytes(b.timeline.layout_version), completion)
        return self.instant


class TableBuilder:
    """Builds one MOR table under ``root`` (table version 6 or 8).

    Args:
        data_schema: the user columns (record key column ``key`` and ordering column
            ``ordering`` among them).
        merge_mode: ``EVENT_TIME_ORDERING`` (DefaultHoodieRecordPayload) or
            ``COMMIT_TIME_ORDERING`` (OverwriteWithLatestAvroPayload).
    """

    def __init__(
        self,
        root: Path,
        data_schema: pa.Schema,
        *,
        name: str = "t",
        key: str = "key",
        ordering: str | None = "ts",
        partition_field: str | None = None,
        version: int = 6,
        merge_mode: str = "EVENT_TIME_ORDERING",
        start: _dt.datetime | None = None,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.data_schema = data_schema
        self.name = name
        self.key = key
        self.version = version
        props = new_table_props(
            table_name=name,
            table_type="MERGE_ON_READ",
            record_key_fields=[key],
            partition_fields=[partition_field] if partition_field else [],
            ordering_field=ordering,
            keygen_type="SIMPLE" if partition_field else "NON_PARTITION",
            hive_style=False,
            url_encode=False,
            table_version=version,
        )
        event = merge_mode == "EVENT_TIME_ORDERING"
        if version < 8:
            props["hoodie.compaction.payload.class"] = (
                DEFAULT_PAYLOAD if event else OVERWRITE_PAYLOAD
            )
        else:
            props["hoodie.record.merge.mode"] = merge_mode
            props["hoodie.record.merge.strategy.id"] = (
                EVENT_TIME_STRATEGY_ID if event else COMMIT_TIME_STRATEGY_ID
            )
            props["hoodie.compaction.payload.class"] = (
                DEFAULT_PAYLOAD if event else OVERWRITE_PAYLOAD
            )
        self.storage = open_storage(str(self.root))
        cfg = HoodieTableConfig(props)
        cfg.save(self.storage)
        self.config = cfg
        self.timeline = ActiveTimeline(self.storage, cfg.timeline_layout_version)
        self._clock = start or _dt.datetime(2025, 1, 1, 0, 0, 0)
        self.full_schema = pa.schema([pa.field(m, pa.string()) for m in META] + list(data_schema))

    def next_instant(self) -> str:
        self._clock += _dt.timedelta(seconds=1)
        return format_instant_time(self._clock)

    def avro_schema(self, schema: pa.Schema, with_meta: bool = True) -> dict[str, Any]:
        data = pa.schema([f for f in schema if f.name not in META])
        return arrow_to_avro_schema(data, self.name, with_meta=with_meta)

    def write_partition_meta(self, partition: str, instant: str) -> None:
        d = self.root / partition if partition else self.root
        p = d / ".hoodie_partition_metadata"
        if not p.exists():
            depth = len(partition.split("/")) if partition else 0
            p.write_text(f"#partition metadata\ncommitTime={instant}\npartitionDepth={depth}\n")

    def begin(self, action: str = Action.DELTA_COMMIT, instant: str | None = None) -> Commit:
        ts = instant or self.next_instant()
        inst = Instant(ts, action, State.REQUESTED)
        self.timeline.create_requested(inst)
        self.timeline.transition_to_inflight(inst)
        return Commit(self, ts, action)
