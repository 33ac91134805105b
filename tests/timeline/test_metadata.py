from __future__ import annotations

import io
import json
import re
from pathlib import Path

import fastavro
import pytest

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieError
from hoodie_ray.storage import LocalStorage
from hoodie_ray.timeline.avro_io import read_single_record, write_single_record
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.metadata import (
    COMMIT_METADATA_SCHEMA,
    HoodieCommitMetadata,
    HoodieRuntimeStats,
    HoodieWriteStat,
    jackson_pretty,
)
from hoodie_ray.timeline.timeline import ActiveTimeline
from tests.conftest import SAMPLE_TABLE_PARAMS, hudi_rs_read, sort_by_key
from tests.timeline.conftest import read_props

COMMIT_LIKE = {Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT}


def timeline_of(root: Path) -> ActiveTimeline:
    layout = int(read_props(root)["hoodie.timeline.layout.version"])
    return ActiveTimeline(LocalStorage(str(root)), layout)


def commit_metadata_files(root: Path) -> list[Path]:
    """Completed commit-like instants and commit/deltacommit inflight files (metadata inside)."""
    layout = int(read_props(root)["hoodie.timeline.layout.version"])
    tdir = root / ".hoodie" / ("timeline" if layout == 2 else "")
    out = []
    for p in sorted(tdir.iterdir()):
        name = p.name
        if not p.is_file() or not name[:1].isdigit() or name.endswith(".requested"):
            continue
        word = name.split(".")[1]
        if word in COMMIT_LIKE | {"inflight"}:
            out.append(p)
    return out


@pytest.mark.parametrize("table", SAMPLE_TABLE_PARAMS)
def test_commit_metadata_round_trips_byte_for_byte(table: str, shared_sample) -> None:
    root = shared_sample(table)
    tl = timeline_of(root)
    for path in commit_metadata_files(root):
        data = path.read_bytes()
        meta = HoodieCommitMetadata.from_bytes(data, tl.layout_version, path.name)
        if not data:
            assert meta == HoodieCommitMetadata()
        elif tl.layout_version == 1:
            assert meta.to_json() == data, path.name
        else:
            assert meta.to_avro(sync=data[-16:]) == data, path.name
            # the header schema is Java's, field for field
            schema, _ = read_single_record(data, path.name)
            expected = "HoodieReplaceCommitMetadata" if meta.is_replace else "HoodieCommitMetadata"
            assert schema["name"] == expected
    for inst in tl.completed_commits():
        meta = HoodieCommitMetadata.from_bytes(tl.read_details(inst), tl.layout_version, inst)
        assert meta.schema and json.loads(meta.schema)["type"] == "record"
        assert meta.file_ids()
        for part, stat in meta.iter_write_stats():
            assert stat.partition_path in (part, None)


def test_v6_delta_stat_fields(shared_sample) -> None:
    root = shared_sample("trips_mor_avro_v6_trips_8i1u")
    meta = HoodieCommitMetadata.from_json(
        (root / ".hoodie/20250331030645735.deltacommit").read_bytes()
    )
    [stat] = meta.write_stats()
    assert stat.is_delta and stat.log_version == 1 and stat.log_offset == 0
    assert (
        stat.base_file == "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_0-13-60_20250331030642808.parquet"
    )
    assert stat.runtime_stats == HoodieRuntimeStats(0, 0, 296)
    assert meta.operation_type == "UPSERT_PREPPED" and not meta.compacted
    assert meta.partition_file_ids() == {"city=san_francisco": {stat.file_id}}


def test_java_json_field_sets() -> None:
    base = HoodieWriteStat(file_id="f-0", path="p/f.parquet", prev_commit="null", num_writes=1)
    keys = list(base.to_json_obj())
    assert keys[:4] == ["fileId", "path", "cdcStats", "prevCommit"]
    assert keys[-1] == "runtimeStats" and len(keys) == 23
    delta = HoodieWriteStat(file_id="f-0", log_files=[".f-0_1.log.1_0-1-1"], log_version=1)
    dkeys = list(delta.to_json_obj())
    assert dkeys[23:] == ["logVersion", "logOffset", "baseFile", "logFiles", "recordsStats"]
    assert delta.to_json_obj()["recordsStats"] == {"val": None}
    # Avro records carry every field of the 1.x writer schema
    stat_fields = COMMIT_METADATA_SCHEMA["fields"][0]["type"][1]["values"]["items"]["fields"]
    assert list(base.to_avro_obj()) == [f["name"] for f in stat_fields]


def test_jackson_pretty_layout() -> None:
    text = jackson_pretty({"a": [{"b": 1}, {"c": None}], "e": {}, "f": [], "g": ["x", "y"]})
    assert text == (
        '{\n  "a" : [ {\n    "b" : 1\n  }, {\n    "c" : null\n  } ],\n'
        '  "e" : { },\n  "f" : [ ],\n  "g" : [ "x", "y" ]\n}'
    )
    assert jackson_pretty({"s": 'q"\\\n\u00e9'}) == '{\n  "s" : "q\\"\\\\\\n\u00e9"\n}'
    # subclasses and other scalars as their base types; keys as strings
    from collections import OrderedDict

    mixed = OrderedDict([(1, (True, False, None)), ("f", [1.5, -0.0, "\x01\u2028"])])
    assert jackson_pretty(mixed) == (
        '{\n  "1" : [ true, false, null ],\n  "f" : [ 1.5, -0.0, "\\u0001\u2028" ]\n}'
    )


def test_replace_commit_metadata(shared_sample) -> None:
    root = shared_sample("sample_mor_avro_v9_txns_complex_meta")
    tl = timeline_of(root)
    overwrite = tl.get("20260307162644914")
    meta = HoodieCommitMetadata.from_bytes(tl.read_details(overwrite), 2, overwrite)
    assert meta.is_replace and meta.operation_type == "INSERT_OVERWRITE"
    assert meta.replaced_file_ids() == {
        "region=eu": {
            "b8e869ac-cc1a-42c6-acf1-d54d56dfeda2-0",
            "5dc94328-3d16-4d4f-bdf7-977f328da8fb-0",
        }
    }
    # JSON form of a replacecommit puts partitionToReplaceFileIds last, as Java 0.x does
    assert list(json.loads(meta.to_json())) == [
        "partitionToWriteStats",
        "compacted",
        "extraMetadata",
        "operationType",
        "partitionToReplaceFileIds",
    ]
    again = HoodieCommitMetadata.from_avro(meta.to_avro())
    assert again == meta


def test_round_trip_of_built_metadata() -> None:
    stat = HoodieWriteStat(
        file_id="f-0",
        path="p/.f-0_20250101000000000.log.1_0-1-1",
        partition_path="p",
        prev_commit="20250101000000000",
        num_writes=2,
        num_update_writes=1,
        num_deletes=1,
        total_write_bytes=100,
        file_size_in_bytes=100,
        base_file="",
        log_files=[".f-0_20250101000000000.log.1_0-1-1"],
        log_version=1,
        log_offset=0,
        cdc_stats={"x": 1},
        runtime_stats=HoodieRuntimeStats(1, 2, 3),
    )
    meta = HoodieCommitMetadata({"p": [stat]}, False, {"schema": "{}"}, "UPSERT")
    assert HoodieCommitMetadata.from_avro(meta.to_avro()) == meta
    assert HoodieCommitMetadata.from_bytes(meta.to_bytes(2)) == meta
    assert HoodieCommitMetadata.from_bytes(meta.to_bytes(1)) == meta
    rec = next(iter(fastavro.reader(io.BytesIO(meta.to_avro()))))  # plain fastavro reads it
    assert rec["partitionToWriteStats"]["p"][0]["logFiles"] == stat.log_files
    assert HoodieCommitMetadata.from_bytes(b"") == HoodieCommitMetadata()
    assert HoodieCommitMetadata.from_bytes(b"  \n") == HoodieCommitMetadata()


def _rewrite_completed(root: Path, fn) -> int:
    tl = timeline_of(root)
    n = 0
    for inst in tl.completed_commits():
        path = root / tl.instant_path(inst)
        meta = HoodieCommitMetadata.from_bytes(path.read_bytes(), tl.layout_version, inst)
        path.write_bytes(fn(meta, tl.layout_version))
        n += 1
    return n


@pytest.mark.parametrize(
    "table", ["trips_mor_avro_v6_trips_8i1u", "sample_mor_avro_v9_txns_nonpart_nometa"]
)
def test_hudi_rs_reads_instants_we_wrote(table: str, sample_table) -> None:
    root = sample_table(table)
    before = sort_by_key(hudi_rs_read(root))

    def rebuild(meta: HoodieCommitMetadata, layout: int) -> bytes:
        # a copy built from scratch through the constructors, without Spark's extras
        fresh = HoodieCommitMetadata(
            partition_to_write_stats={
                p: [HoodieWriteStat(**vars(s)) for s in stats]
                for p, stats in meta.partition_to_write_stats.items()
            },
            compacted=meta.compacted,
            extra_metadata={"schema": meta.schema or ""},
            operation_type=meta.operation_type,
            partition_to_replace_file_ids=meta.partition_to_replace_file_ids,
        )
        return fresh.to_bytes(layout)

    assert _rewrite_completed(root, rebuild) > 0
    after = sort_by_key(hudi_rs_read(root))
    assert after.equals(before)


def test_bad_json_names_the_instant_file(tmp_path: Path) -> None:
    hoodie = tmp_path / ".hoodie"
    hoodie.mkdir()
    (hoodie / "20250101000000000.deltacommit").write_bytes(b'{"partitionToWriteStats": [')
    tl = ActiveTimeline(LocalStorage(str(tmp_path)), 1)
    inst = tl.instants[0]
    with pytest.raises(HoodieCorruptedDataError, match=r"20250101000000000\.deltacommit"):
        HoodieCommitMetadata.from_bytes(tl.read_details(inst), 1, inst)
    for bad in (b"[]", b'{"partitionToWriteStats": {"p": [{"numWrites": "x"}]}}', b"\xff\xfe"):
        with pytest.raises(HoodieError, match=re.escape("x.deltacommit")):
            HoodieCommitMetadata.from_bytes(bad, 1, "x.deltacommit")


def _avro_with(
    schema: dict, record_bytes: bytes, block_count: int = 1, size: int | None = None
) -> bytes:
    from hoodie_ray.avro.codec import zigzag_varint as _zigzag
    from hoodie_ray.timeline.avro_io import _avro_bytes

    sync = b"S" * 16
    out = (
        b"Obj\x01"
        + _zigzag(1)
        + _avro_bytes(b"avro.schema")
        + _avro_bytes(json.dumps(schema).encode())
    )
    out += _zigzag(0) + sync
    out += (
        _zigzag(block_count)
        + _zigzag(len(record_bytes) if size is None else size)
        + record_bytes
        + sync
    )
    return out


def test_bad_avro_is_refused_without_unbounded_allocation() -> None:
    name = "20250101000000000_20250101000000001.deltacommit"
    good = HoodieCommitMetadata({"p": [HoodieWriteStat(file_id="f")]}).to_avro()
    cases = {
        "truncated": good[: len(good) // 2],
        "garbage": b"Obj\x01" + b"\xff" * 40,
        "absurd block size": _avro_with(
            {"type": "record", "name": "HoodieCommitMetadata", "fields": []}, b"", size=2**62
        ),
        "deep schema": _avro_with(
            json.loads(
                '{"type":"record","name":"HoodieCommitMetadata","fields":[{"name":"a","type":'
                + "[" * 200
                + '"null"'
                + "]" * 200
                + "}]}"
            ),
            b"",
        ),
        "array of nulls": _avro_with(
            {
                "type": "record",
                "name": "HoodieCommitMetadata",
                "fields": [{"name": "a", "type": {"type": "array", "items": "null"}}],
            },
            b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01",
        ),
        "huge string length": _avro_with(
            {
                "type": "record",
                "name": "HoodieCommitMetadata",
                "fields": [{"name": "a", "type": "string"}],
            },
            b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01abc",
        ),
        "other record": write_single_record({"type": "record", "name": "Other", "fields": []}, {}),
        "no record": _avro_with(
            {"type": "record", "name": "HoodieCommitMetadata", "fields": []}, b"", block_count=0
        ),
    }
    for label, data in cases.items():
        with pytest.raises(HoodieCorruptedDataError, match=name):
            HoodieCommitMetadata.from_bytes(data, 2, name)
        assert label


def test_instant_named_in_errors_via_instant_object() -> None:
    inst = Instant("20250101000000000", Action.DELTA_COMMIT, State.COMPLETED, "20250101000000001")
    with pytest.raises(
        HoodieCorruptedDataError, match=re.escape("20250101000000000_20250101000000001.deltacommit")
    ):
        HoodieCommitMetadata.from_bytes(b"Obj\x01\x00", 2, inst)
