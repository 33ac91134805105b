"""Shared helpers of the log-format tests: reference decoders and a tiny slice merger."""

from __future__ import annotations

import io
import json
import re
import struct
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq

from hoodie_ray.log_format import CommandBlock, CorruptBlock, DataBlock, DeleteBlock, read_log_file
from hoodie_ray.log_format.blocks import delete_record_list_schema
from hoodie_ray.storage import LocalStorage


def properties(root: Path) -> dict[str, str]:
    out = {}
    for line in (root / ".hoodie" / "hoodie.properties").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k] = re.sub(r"\\(.)", r"\1", v)
    return out


def completed_instants(root: Path) -> set[str]:
    """Requested times of completed commits/deltacommits/replacecommits (v6 and v8+ layouts)."""
    out = set()
    for d in (root / ".hoodie", root / ".hoodie" / "timeline"):
        if d.is_dir():
            for p in d.iterdir():
                m = re.match(r"^(\d+)(?:_\d+)?\.(commit|deltacommit|replacecommit)$", p.name)
                if m:
                    out.add(m.group(1))
    return out


def log_files(root: Path) -> list[Path]:
    """Every log file below ``root`` (metadata table included)."""
    return sorted(p for p in root.rglob(".*") if re.search(r"\.log\.\d+", p.name) and p.is_file())


def fastavro_block_records(content: bytes, schema_json: str) -> list[dict[str, Any]]:
    """Records of Avro data block content, decoded one by one with fastavro (the reference)."""
    parsed = fastavro.parse_schema(json.loads(schema_json))
    version, count = struct.unpack_from(">ii", content, 0)
    assert version == 3
    p = 8
    out = []
    for _ in range(count):
        (n,) = struct.unpack_from(">i", content, p)
        p += 4
        out.append(fastavro.schemaless_reader(io.BytesIO(content[p : p + n]), parsed, None))
        p += n
    assert p == len(content)
    return out


def fastavro_delete_keys(content: bytes) -> list[tuple[str | None, str | None, Any]]:
    """(key, partition, ordering value) of delete block content, decoded with fastavro."""
    version, n = struct.unpack_from(">ii", content, 0)
    assert version == 3
    parsed = fastavro.parse_schema(delete_record_list_schema(True))
    datum = fastavro.schemaless_reader(io.BytesIO(content[8 : 8 + n]), parsed, None)
    return [
        (
            d["recordKey"],
            d["partitionPath"],
            None if d["orderingVal"] is None else d["orderingVal"]["value"],
        )
        for d in datum["deleteRecordList"]
    ]


def merge_slice(root: Path, base_rel: str | None, log_rels: list[str]) -> dict[str, dict[str, Any]]:
    """The records of one file slice after applying its log blocks (spec §6), keyed by record key.

    Event-time ordering when the table says so (v8+ merge mode or a v6 event-time payload),
    else commit-time ordering; blocks of instants that are not completed, rolled back or
    corrupt are skipped.
    """
    props = properties(root)
    ordering = props.get("hoodie.table.ordering.fields") or props.get(
        "hoodie.table.precombine.field"
    )
    event = props.get("hoodie.record.merge.mode") == "EVENT_TIME_ORDERING" or any(
        p in props.get("hoodie.compaction.payload.class", "")
        for p in ("DefaultHoodieRecordPayload", "EventTimeAvroPayload")
    )
    done = completed_instants(root)
    storage = LocalStorage(str(root))
    state: dict[str, dict[str, Any]] = {}
    if base_rel:
        for r in pq.read_table(root / base_rel).to_pylist():
            state[r["_hoodie_record_key"]] = r
    blocks = [b for rel in log_rels for b in read_log_file(storage, rel)]
    rolled_back = {b.target_instant_time for b in blocks if isinstance(b, CommandBlock)}
    for b in blocks:
        if isinstance(b, CorruptBlock | CommandBlock):
            continue
        if b.instant_time not in done or b.instant_time in rolled_back:
            continue
        if isinstance(b, DataBlock):
            for r in b.records.to_pylist():
                k = r["_hoodie_record_key"]
                old = state.get(k)
                if (
                    old is None
                    or not event
                    or r[ordering] is None
                    or old[ordering] is None
                    or r[ordering] >= old[ordering]
                ):
                    state[k] = r
        elif isinstance(b, DeleteBlock):
            for k, default, v in zip(
                b.record_keys.to_pylist(), b.is_default_ordering, b.ordering_values, strict=True
            ):
                old = state.get(k)
                if old is None:
                    continue
                if default or not event or old[ordering] is None or not old[ordering] > v:
                    del state[k]
    return state
