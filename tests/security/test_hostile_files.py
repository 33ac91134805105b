"""Hostile files are bounded: sizes, counts and lengths read from a table are checked first.

Each test plants one hostile file in a real table -- a log block claiming 2^40 bytes, an Avro
record count or string length of 2^31, a deeply nested or huge Avro schema, an Avro container
with a bogus block size, sparse 1 TiB metadata files -- then runs a snapshot read, an upsert and
a compaction. Each either works (a corrupt log block is skipped, as Java skips it) or fails with
a HoodieError; none raises anything else, allocates more than a few MiB for the hostile value
(tracemalloc and RSS, sampled while it runs) or takes more than a few seconds.
"""

from __future__ import annotations

import copy
import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.api import compact
from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieError
from hoodie_ray.log_format import MAGIC, read_log_bytes
from hoodie_ray.log_format.blocks import LOG_FORMAT_VERSION, AvroDataBlock, HeaderMetadataType
from hoodie_ray.timeline.plans import HoodieCompactionOperation, HoodieCompactionPlan
from tests.security import bounded, rows, write

MAX_TRACED = 48 << 20  # Python/numpy allocations of a whole operation on a tiny table
MAX_RSS_GROWTH = 256 << 20
MAX_SECONDS = 10.0

INSTANT = HeaderMetadataType.INSTANT_TIME
SCHEMA = HeaderMetadataType.SCHEMA


def zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b, z = z & 0x7F, z >> 7
        out.append(b | (0x80 if z else 0))
        if not z:
            return bytes(out)


def frame(
    header: dict[int, str],
    content: bytes,
    *,
    block_type: int = 3,
    block_length: int | None = None,
    content_length: int | None = None,
    header_count: int | None = None,
) -> bytes:
    """A log block framed by hand, so that any field can lie."""
    kv = [struct.pack(">i", len(header) if header_count is None else header_count)]
    for k, v in header.items():
        raw = v.encode()
        kv.append(struct.pack(">ii", int(k), len(raw)) + raw)
    clen = len(content) if content_length is None else content_length
    body = (
        struct.pack(">ii", LOG_FORMAT_VERSION, block_type)
        + b"".join(kv)
        + struct.pack(">q", clen)
        + content
        + struct.pack(">i", 0)
    )
    real = len(body) + 8
    return (
        MAGIC
        + struct.pack(">q", real if block_length is None else block_length)
        + body
        + struct.pack(">q", real + len(MAGIC))
    )


def avro_content(records: list[bytes], count: int | None = None) -> bytes:
    head = struct.pack(">ii", 3, len(records) if count is None else count)
    return head + b"".join(struct.pack(">i", len(r)) + r for r in records)


class Table:
    """A two-commit MOR table whose partition ``a`` has a base file and one log file."""

    def __init__(self, root: Path) -> None:
        self.base = root / "table"
        write(self.base, rows(["k1", "k2", "k3"], ["a", "a", "b"]))
        write(self.base, rows(["k1", "k3"], ["a", "b"], ts=2, v=10.0))
        self.log = next((self.base / "a").glob(".*.log.*"))
        self.good_log = self.log.read_bytes()
        block = next(b for b in read_log_bytes(self.good_log) if isinstance(b, AvroDataBlock))
        self.instant = block.header[INSTANT]
        self.schema = block.header[SCHEMA]
        self.expected = self.read_pairs()

    def read_pairs(self) -> dict[str, float]:
        t = hr.read(str(self.base))
        return dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))

    def header(self, schema: str | None = None) -> dict[int, str]:
        return {INSTANT: self.instant, SCHEMA: schema or self.schema}

    def operations(self) -> dict[str, Callable[[], Any]]:
        p = str(self.base)
        return {
            "snapshot": lambda: hr.read(p),
            "upsert": lambda: write(self.base, rows(["k2"], ["a"], ts=5, v=50.0)),
            "compact": lambda: compact(p),
        }


def run_bounded(table: Table) -> dict[str, Any]:
    """Every operation: a result or a HoodieError, within the memory and time bounds."""
    outcomes: dict[str, Any] = {}
    for name, fn in table.operations().items():
        result, error, traced, rss, seconds = bounded(fn)
        if error is not None and not isinstance(error, HoodieError):
            raise AssertionError(f"{name}: not a HoodieError") from error
        assert traced < MAX_TRACED, f"{name}: {traced >> 20} MiB traced"
        assert rss < MAX_RSS_GROWTH, f"{name}: RSS grew {rss >> 20} MiB"
        assert seconds < MAX_SECONDS, f"{name}: {seconds:.1f}s"
        outcomes[name] = error if error is not None else result
    return outcomes


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Table:
    return Table(tmp_path_factory.mktemp("template"))


@pytest.fixture
def table(template: Table, tmp_path: Path) -> Table:
    """A fresh copy of the template table (copying is much faster than writing)."""
    shutil.copytree(template.base, tmp_path / "table")
    t = copy.copy(template)
    t.base = tmp_path / "table"
    t.log = t.base / template.log.relative_to(template.base)
    return t


# -- log blocks ----------------------------------------------------------------------------------


def test_log_block_claiming_2_40_bytes(table: Table) -> None:
    """An unfinished frame whose length claims 1 TiB: a corrupt block, skipped like Java."""
    with open(table.log, "ab") as f:
        f.write(MAGIC + struct.pack(">q", 2**40) + struct.pack(">ii", 1, 3) + b"\0" * 64)
    out = run_bounded(table)
    assert isinstance(out["snapshot"], pa.Table)
    assert table.read_pairs() == {**table.expected, "k2": 50.0}  # after the upsert and compaction


LYING_FRAMES: dict[str, Callable[[Table], bytes]] = {
    "block_length_2_40": lambda t: frame(t.header(), avro_content([]), block_length=2**40),
    "content_length_2_40": lambda t: frame(t.header(), avro_content([]), content_length=2**40),
    "header_count_2_31": lambda t: frame(t.header(), avro_content([]), header_count=2**31 - 1),
    "header_value_2_31": lambda t: (
        MAGIC
        + struct.pack(">q", 36)
        + struct.pack(">iii", 1, 3, 1)
        + struct.pack(">ii", 0, 2**31 - 1)
        + b"\0" * 16
        + struct.pack(">q", 42)
    ),
    "negative_length": lambda t: frame(t.header(), avro_content([]), block_length=-(2**62)),
}


@pytest.mark.parametrize("kind", list(LYING_FRAMES))
def test_lying_frames_are_corrupt_blocks(table: Table, kind: str) -> None:
    table.log.write_bytes(table.good_log + LYING_FRAMES[kind](table))
    out = run_bounded(table)
    assert isinstance(out["snapshot"], pa.Table), out["snapshot"]
    got = out["snapshot"]
    assert dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)) == (
        table.expected
    )


def _string_record(length: int) -> bytes:
    """``_hoodie_commit_time`` (union branch 1: string) claiming ``length`` bytes."""
    return b"\x02" + zigzag(length) + b"x" * 16


def _deep_schema(depth: int) -> str:
    return '{"type":"array","items":' * depth + '"int"' + "}" * depth


def _wide_schema(fields: int) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": "wide",
            "fields": [{"name": f"f{i}", "type": "int"} for i in range(fields)],
        }
    )


def _null_array_schema() -> str:
    return json.dumps(
        {
            "type": "record",
            "name": "r",
            "fields": [{"name": "a", "type": {"type": "array", "items": "null"}}],
        }
    )


HOSTILE_CONTENT: dict[str, Callable[[Table], bytes]] = {
    "record_count_2_31": lambda t: frame(
        t.header(), avro_content([_string_record(1)], count=2**31 - 1)
    ),
    "string_length_2_31": lambda t: frame(t.header(), avro_content([_string_record(2**31)])),
    "string_length_2_62": lambda t: frame(t.header(), avro_content([_string_record(2**62)])),
    "record_length_2_31": lambda t: frame(
        t.header(), struct.pack(">iii", 3, 1, 2**31 - 1) + b"\x02" * 32
    ),
    "deep_schema": lambda t: frame(t.header(_deep_schema(100_000)), avro_content([b"\0"])),
    "huge_schema": lambda t: frame(t.header(_wide_schema(200_000)), avro_content([b"\0"])),
    "array_of_nulls_2_40": lambda t: frame(
        t.header(_null_array_schema()), avro_content([zigzag(2**40) + b"\0"])
    ),
    "delete_block_2_31_keys": lambda t: frame(
        {INSTANT: t.instant},
        struct.pack(">ii", 3, 9) + zigzag(2**31) + b"\x02\x02\x02\x02",
        block_type=1,
    ),
}


@pytest.mark.parametrize("kind", list(HOSTILE_CONTENT))
def test_hostile_block_content_is_refused(table: Table, kind: str) -> None:
    """A well-framed block of a committed instant whose content lies: a HoodieError, bounded."""
    table.log.write_bytes(table.good_log + HOSTILE_CONTENT[kind](table))
    out = run_bounded(table)
    assert isinstance(out["snapshot"], HoodieError), out["snapshot"]
    if "schema" not in kind:
        assert str(table.log.name) in str(out["snapshot"])  # names the file


def test_deep_schema_in_commit_metadata(table: Table) -> None:
    """A hostile extraMetadata.schema: the schema comes from the base files instead."""
    hoodie = table.base / ".hoodie"
    last = max(hoodie.glob("*.deltacommit"))
    meta = json.loads(last.read_text())
    meta["extraMetadata"]["schema"] = _deep_schema(100_000)
    last.write_text(json.dumps(meta))
    out = run_bounded(table)
    snap = out["snapshot"]
    assert isinstance(snap, pa.Table), snap
    got = dict(zip(snap.column("id").to_pylist(), snap.column("v").to_pylist(), strict=True))
    assert got == table.expected


# -- Avro containers (timeline metadata and plans) -----------------------------------------------


def _bogus_block_size(container: bytes, size: int) -> bytes:
    """The container with its (single) data block claiming ``size`` bytes."""
    sync = container[-16:]
    start = container.index(sync) + 16  # end of the header
    count = zigzag(1)
    assert container[start : start + len(count)] == count
    p = start + len(count)
    # skip the real size varint
    q = p
    while container[q] & 0x80:
        q += 1
    return container[:p] + zigzag(size) + container[q + 1 :]


def _plan(table: Table) -> bytes:
    fid = table.log.name[1:].split("_")[0]
    base_file = next((table.base / "a").glob("*.parquet")).name
    op = HoodieCompactionOperation(
        table.instant[:0] + base_file.rsplit("_", 1)[1].split(".")[0],
        [table.log.name],
        base_file,
        fid,
        "a",
    )
    return HoodieCompactionPlan([op]).to_bytes()


@pytest.mark.parametrize("size", [2**40, 2**62, -1])
def test_compaction_plan_with_bogus_block_size(table: Table, size: int) -> None:
    plan = _bogus_block_size(_plan(table), size)
    with pytest.raises(HoodieCorruptedDataError):
        HoodieCompactionPlan.from_bytes(plan)
    (table.base / ".hoodie" / "29990101000000000.compaction.requested").write_bytes(plan)
    out = run_bounded(table)
    assert isinstance(out["compact"], HoodieCorruptedDataError), out["compact"]


def test_v8_commit_file_with_bogus_block_size(tmp_path: Path) -> None:
    base = tmp_path / "t8"
    v8 = {"hoodie.write.table.version": "8"}
    write(base, rows(["k1"], ["a"]), **v8)
    write(base, rows(["k1"], ["a"], ts=2), **v8)
    last = max((base / ".hoodie" / "timeline").glob("*.deltacommit"))
    last.write_bytes(_bogus_block_size(last.read_bytes(), 2**40))
    _, error, traced, rss, _ = bounded(lambda: hr.read(str(base)))
    assert isinstance(error, HoodieCorruptedDataError), error
    assert last.name in str(error)
    assert traced < MAX_TRACED and rss < MAX_RSS_GROWTH


def test_avro_container_header_lies(table: Table) -> None:
    """Metadata entry counts and key lengths of 2^40, and an array-of-nulls writer schema."""
    good = _plan(table)
    cases = [
        b"Obj\x01" + zigzag(2**40) + b"\0" * 64,
        b"Obj\x01" + zigzag(1) + zigzag(2**40) + b"\0" * 64,
        b"Obj\x01" + zigzag(-(2**40)) + zigzag(2**40) + b"\0" * 64,
    ]
    schema = json.dumps({"type": "array", "items": "null"}).encode()
    header = zigzag(1) + zigzag(11) + b"avro.schema" + zigzag(len(schema)) + schema + zigzag(0)
    sync = good[-16:]
    cases.append(b"Obj\x01" + header + sync + zigzag(1) + zigzag(6) + zigzag(2**40) + b"\0" * 5)
    for data in cases:
        _, error, traced, _, seconds = bounded(lambda d=data: HoodieCompactionPlan.from_bytes(d))
        assert isinstance(error, HoodieCorruptedDataError), error
        assert traced < MAX_TRACED and seconds < MAX_SECONDS


# -- files that really are huge (sparse) -----------------------------------------------------------


def _sparse(path: Path, size: int = 2**40) -> None:
    with open(path, "ab") as f:
        f.truncate(size)


@pytest.mark.parametrize("which", ["hoodie.properties", "instant", "lock"])
def test_sparse_1_tib_metadata_files_are_not_read(table: Table, which: str) -> None:
    hoodie = table.base / ".hoodie"
    if which == "hoodie.properties":
        target = hoodie / "hoodie.properties"
    elif which == "instant":
        target = max(hoodie.glob("*.deltacommit"))
    else:
        target = hoodie / ".aux" / "hoodie_ray.writer.lock"
        target.parent.mkdir(parents=True, exist_ok=True)
    try:
        _sparse(target)
    except OSError as e:  # a file system without sparse files
        pytest.skip(f"no sparse 1 TiB file here: {e}")
    out = run_bounded(table)
    if which == "lock":  # an unreadable lock is a stale lock: the writer takes it over
        assert not isinstance(out["upsert"], HoodieError), out["upsert"]
    else:
        assert isinstance(out["snapshot"], HoodieCorruptedDataError), out["snapshot"]
