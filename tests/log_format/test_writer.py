"""LogWriter, and round trips: blocks we write are read back identically by us and by hudi-rs."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hoodie_ray.avro.schema import META_FIELDS, avro_to_arrow_schema
from hoodie_ray.exceptions import HoodieInputError
from hoodie_ray.log_format import (
    AvroDataBlock,
    CommandBlock,
    DataBlock,
    DeleteBlock,
    HeaderMetadataType,
    LogWriter,
    ParquetDataBlock,
    log_version_of,
    read_log_file,
    replace_version,
    serialize_block,
)
from hoodie_ray.storage import LocalStorage
from tests.conftest import hudi_rs_read
from tests.log_format.helpers import merge_slice

H = HeaderMetadataType

# -- LogWriter mechanics ------------------------------------------------------------------------


class NoAppendStorage(LocalStorage):
    """Local storage that behaves like an object store (no appends)."""

    @property
    def supports_append(self) -> bool:
        return False


NAME = ".f1-0_20250101000000000.log.1_0-1-1"


def _cmd(i: int) -> CommandBlock:
    return CommandBlock.rollback(f"2025010100000000{i}", "20250101000000000")


def test_version_helpers():
    assert log_version_of(NAME) == 1
    assert replace_version(NAME)(7) == ".f1-0_20250101000000000.log.7_0-1-1"
    assert replace_version(".f1-0_1.log.3")(4) == ".f1-0_1.log.4"
    with pytest.raises(HoodieInputError):
        log_version_of("base_0-1-1_1.parquet")


def test_append_and_roll_on_size(tmp_path):
    storage = LocalStorage(str(tmp_path))
    w = LogWriter(storage, "p", NAME, max_file_size=250)
    r1 = w.append_blocks([_cmd(1)])
    r2 = w.append_blocks([_cmd(2)])
    assert (r1.offset, r1.size, r1.file_size) == (0, 105, 105)
    assert (r2.offset, r2.version, r2.file_size) == (105, 1, 210)
    r3 = w.append_blocks([_cmd(3), _cmd(4)])  # 210 < 250: still appended; then rolled
    assert r3.version == 1 and r3.block_offsets == (210, 315)
    assert w.version == 2 and w.file_name == ".f1-0_20250101000000000.log.2_0-1-1"
    r4 = w.append_block(_cmd(5))
    assert (r4.path, r4.offset) == ("p/.f1-0_20250101000000000.log.2_0-1-1", 0)
    blocks = read_log_file(storage, r3.path)
    assert [b.offset for b in blocks] == [0, 105, 210, 315]
    assert [b.instant_time for b in blocks] == [f"2025010100000000{i}" for i in range(1, 5)]


def test_existing_file_appended_or_rolled(tmp_path):
    storage = LocalStorage(str(tmp_path))
    storage.write_bytes(f"p/{NAME}", serialize_block(_cmd(1)))
    r = LogWriter(storage, "p", NAME).append_block(_cmd(2))
    assert (r.version, r.offset) == (1, 105)
    # a partial block at the end: appending after it would hide the block before it from
    # Java readers, so the writer moves to the next version
    storage.append(f"p/{NAME}", serialize_block(_cmd(3))[:50])
    r = LogWriter(storage, "p", NAME).append_block(_cmd(4))
    assert (r.version, r.offset) == (2, 0)


def test_no_append_storage_writes_new_versions(tmp_path):
    storage = NoAppendStorage(str(tmp_path))
    w = LogWriter(storage, "", NAME)
    r1 = w.append_block(_cmd(1))
    r2 = w.append_block(_cmd(2))
    assert (r1.path, r1.version, r2.version) == (NAME, 1, 2)
    names = sorted(p.name for p in Path(tmp_path).iterdir())
    assert names == [NAME, NAME.replace("log.1", "log.2")]
    custom = LogWriter(
        storage, "", NAME, next_name=lambda v: f".f1-0_20250101000000000.log.{v}_9-9-9"
    )
    assert custom.append_block(_cmd(3)).file_name == ".f1-0_20250101000000000.log.2_9-9-9"
    with pytest.raises(HoodieInputError):
        LogWriter(storage, "", NAME, append=True)
    with pytest.raises(HoodieInputError):
        w.append_blocks([])


# -- round trips through hudi-rs ----------------------------------------------------------------

TRIPS = "trips_mor_avro_v6_trips_8i1u"
TRIPS_PART = "city=san_francisco"
TRIPS_FILE_ID = "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"
TRIPS_LOG = f".{TRIPS_FILE_ID}_20250331030642808.log.1_0-26-85"
TRIPS_DELTA = "20250331030645735"  # a completed deltacommit of the sample


def _java_block(root: Path, rel: str) -> DataBlock:
    block = read_log_file(LocalStorage(str(root)), rel)[0]
    assert isinstance(block, DataBlock)
    return block


def _slice_check(root: Path, partition: str, file_id: str) -> None:
    """hudi-rs' read of the file slice equals base + our decoded blocks merged (spec §6)."""
    from hudi import HudiFileGroupReader, HudiTable

    (s,) = [s for s in HudiTable(str(root)).get_file_slices() if s.file_id == file_id]
    got = HudiFileGroupReader(str(root)).read_file_slice(s)
    mine = merge_slice(root, s.base_file_relative_path() or None, s.log_files_relative_paths())
    got_rows = {r["_hoodie_record_key"]: r for r in got.to_pylist()}
    assert {k: {c: v[c] for c in got.schema.names} for k, v in mine.items()} == got_rows
    assert all(f"{partition}/" in p or not partition for p in s.log_files_relative_paths())


def _with_meta(rows: pa.Table, instant: str, file_id: str) -> pa.Table:
    n = rows.num_rows
    meta = {
        "_hoodie_commit_time": pa.array([instant] * n),
        "_hoodie_commit_seqno": pa.array([f"{instant}_0_{100 + i}" for i in range(n)]),
        "_hoodie_file_name": pa.array([file_id] * n),
    }
    for name, col in meta.items():
        rows = rows.set_column(rows.schema.get_field_index(name), name, col)
    return rows


def _rows(table: pa.Table, key_col: str, keys: list[str]) -> pa.Table:
    return table.filter(pc.is_in(table[key_col], pa.array(keys)))


@pytest.mark.shared
def test_avro_block_appended_is_read_by_hudi_rs(sample_table):
    root = sample_table(TRIPS)
    storage = LocalStorage(str(root))
    java = _java_block(root, f"{TRIPS_PART}/{TRIPS_LOG}")
    before = hudi_rs_read(root)
    schema = java.arrow_schema
    upd = _rows(before, "rider", ["rider-E", "rider-C"]).select(schema.names).cast(schema)
    upd = upd.set_column(schema.get_field_index("fare"), "fare", pa.array([1.5, -2.25]))
    new = upd.slice(0, 1)
    for col, val in (
        ("_hoodie_record_key", "new-key-1"),
        ("uuid", "new-key-1"),
        ("rider", "rider-N"),
    ):
        new = new.set_column(schema.get_field_index(col), col, pa.array([val]))
    records = _with_meta(pa.concat_tables([upd, new]), TRIPS_DELTA, TRIPS_FILE_ID)
    block = AvroDataBlock.from_records(records, TRIPS_DELTA, java.schema_json)
    result = LogWriter(storage, TRIPS_PART, TRIPS_LOG).append_block(block)
    assert result.offset == 1148 and result.version == 1

    back = read_log_file(storage, result.path)
    assert [b.offset for b in back] == [0, 1148]
    assert back[1].records.equals(records)

    after = hudi_rs_read(root)
    assert after.num_rows == before.num_rows + 1
    got = {r["rider"]: r for r in after.to_pylist()}
    assert got["rider-E"]["fare"] == 1.5 and got["rider-C"]["fare"] == -2.25
    assert got["rider-N"]["_hoodie_record_key"] == "new-key-1"
    assert got["rider-E"]["_hoodie_commit_seqno"] == f"{TRIPS_DELTA}_0_100"
    _slice_check(root, TRIPS_PART, TRIPS_FILE_ID)


@pytest.mark.shared
def test_delete_block_in_a_new_log_version_is_read_by_hudi_rs(sample_table):
    root = sample_table(TRIPS)
    storage = LocalStorage(str(root))
    before = hudi_rs_read(root)
    victim = _rows(before, "rider", ["rider-A"])["_hoodie_record_key"].to_pylist()
    block = DeleteBlock(
        {
            H.INSTANT_TIME: TRIPS_DELTA,
            H.SCHEMA: _java_block(root, f"{TRIPS_PART}/{TRIPS_LOG}").schema_json,
        },
        victim,
        TRIPS_PART,
    )
    w = LogWriter(
        NoAppendStorage(str(root)),
        TRIPS_PART,
        TRIPS_LOG,
        next_name=replace_version(TRIPS_LOG.replace("0-26-85", "0-30-90")),
    )
    result = w.append_block(block)
    assert result.version == 2 and result.file_name.endswith(".log.2_0-30-90")
    (back,) = read_log_file(storage, result.path)
    assert isinstance(back, DeleteBlock) and back.record_keys.to_pylist() == victim
    after = hudi_rs_read(root)
    assert after.num_rows == before.num_rows - 1
    assert victim[0] not in after["_hoodie_record_key"].to_pylist()
    _slice_check(root, TRIPS_PART, TRIPS_FILE_ID)


@pytest.mark.shared
def test_rollback_block_is_honoured_by_hudi_rs(sample_table):
    root = sample_table(TRIPS)
    storage = LocalStorage(str(root))
    fare = {r["rider"]: r["fare"] for r in hudi_rs_read(root).to_pylist()}
    assert fare["rider-D"] == 25.0  # the Java update of the sample
    result = LogWriter(storage, TRIPS_PART, TRIPS_LOG).append_block(
        CommandBlock.rollback("20250331030650000", TRIPS_DELTA)
    )
    back = read_log_file(storage, result.path)
    assert isinstance(back[-1], CommandBlock) and back[-1].target_instant_time == TRIPS_DELTA
    fare = {r["rider"]: r["fare"] for r in hudi_rs_read(root).to_pylist()}
    assert fare["rider-D"] == 33.9  # back to the base file's value
    _slice_check(root, TRIPS_PART, TRIPS_FILE_ID)


@pytest.mark.shared
def test_event_time_ordering_with_long_wrapper_deletes(sample_table):
    """With an event-time payload, LongWrapper ordering values compare with the ts field."""
    root = sample_table(TRIPS)
    props = root / ".hoodie" / "hoodie.properties"
    props.write_text(
        re.sub(
            r"hoodie\.compaction\.payload\.class=.*",
            "hoodie.compaction.payload.class=org.apache.hudi.common.model.DefaultHoodieRecordPayload",
            props.read_text(),
        )
    )
    storage = LocalStorage(str(root))
    java = _java_block(root, f"{TRIPS_PART}/{TRIPS_LOG}")
    before = hudi_rs_read(root)
    rows = {r["rider"]: r for r in before.to_pylist()}
    e, c, a = rows["rider-E"], rows["rider-C"], rows["rider-A"]
    # a late update (smaller ts) of rider-E loses; an update of rider-C with a larger ts wins
    upd = (
        _rows(before, "rider", ["rider-E", "rider-C"])
        .select(java.arrow_schema.names)
        .cast(java.arrow_schema)
    )
    upd = upd.sort_by("rider")  # rider-C, rider-E
    upd = upd.set_column(
        upd.schema.get_field_index("ts"), "ts", pa.array([c["ts"] + 10, e["ts"] - 10])
    )
    upd = upd.set_column(upd.schema.get_field_index("fare"), "fare", pa.array([7.0, 8.0]))
    deletes = DeleteBlock(
        {H.INSTANT_TIME: TRIPS_DELTA, H.SCHEMA: java.schema_json},
        [a["_hoodie_record_key"], rows["rider-D"]["_hoodie_record_key"]],
        TRIPS_PART,
        pa.array([a["ts"] - 1, rows["rider-D"]["ts"] + 1], pa.int64()),  # A survives, D is deleted
    )
    LogWriter(storage, TRIPS_PART, TRIPS_LOG).append_blocks(
        [
            AvroDataBlock.from_records(
                _with_meta(upd, TRIPS_DELTA, TRIPS_FILE_ID), TRIPS_DELTA, java.schema_json
            ),
            deletes,
        ]
    )
    after = {r["rider"]: r for r in hudi_rs_read(root).to_pylist()}
    assert after["rider-C"]["fare"] == 7.0
    assert after["rider-E"]["fare"] == e["fare"]
    assert "rider-A" in after and "rider-D" not in after
    _slice_check(root, TRIPS_PART, TRIPS_FILE_ID)


RICH = "sample_mor_parquet_v6_nonpartitioned"
RICH_FILE_ID = "d206069c-22c8-4532-b9ea-3cf4282342c4-0"
RICH_LOG = f".{RICH_FILE_ID}_20250117083125837.log.1_0-33-43"
RICH_DELTA = "20250117083136333"


@pytest.mark.shared
def test_parquet_and_rich_avro_blocks_are_read_by_hudi_rs(sample_table):
    """Decimals, dates, timestamps, binary, array<struct>, map<string,struct>, nested structs,
    written once as a Parquet block and once as an Avro block."""
    root = sample_table(RICH)
    storage = LocalStorage(str(root))
    java = _java_block(root, RICH_LOG)
    schema = avro_to_arrow_schema(java.schema_json)
    before = hudi_rs_read(root)
    keyed = {r["_hoodie_record_key"]: r for r in before.to_pylist()}
    assert {"2", "3"} <= set(keyed)
    rows2 = _rows(before, "_hoodie_record_key", ["2"]).select(schema.names).cast(schema)
    rows2 = rows2.set_column(schema.get_field_index("name"), "name", pa.array(["Bob-parquet"]))
    rows3 = _rows(before, "_hoodie_record_key", ["3"]).select(schema.names).cast(schema)
    rows3 = rows3.set_column(schema.get_field_index("name"), "name", pa.array(["Carol-avro"]))
    rows3 = rows3.set_column(
        schema.get_field_index("arrayField"),
        "arrayField",
        pa.array(
            [[{"arr_struct_f1": "x", "arr_struct_f2": None}, None]], schema.field("arrayField").type
        ),
    )
    rows3 = rows3.set_column(
        schema.get_field_index("mapField"),
        "mapField",
        pa.array(
            [
                [
                    ("k", {"map_field_value_struct_f1": -1.0, "map_field_value_struct_f2": None}),
                    ("z", None),
                ]
            ],
            schema.field("mapField").type,
        ),
    )
    pq_block = ParquetDataBlock.from_records(
        _with_meta(rows2, RICH_DELTA, RICH_FILE_ID), RICH_DELTA, java.schema_json
    )
    av_block = AvroDataBlock.from_records(
        _with_meta(rows3, RICH_DELTA, RICH_FILE_ID), RICH_DELTA, java.schema_json
    )
    result = LogWriter(storage, "", RICH_LOG).append_blocks([pq_block, av_block])
    back = read_log_file(storage, result.path)
    assert [type(b).__name__ for b in back] == [
        "ParquetDataBlock",
        "ParquetDataBlock",
        "AvroDataBlock",
    ]
    assert back[1].records.equals(_with_meta(rows2, RICH_DELTA, RICH_FILE_ID))
    assert back[2].records.equals(_with_meta(rows3, RICH_DELTA, RICH_FILE_ID))

    after = {r["_hoodie_record_key"]: r for r in hudi_rs_read(root).to_pylist()}
    assert after["2"]["name"] == "Bob-parquet" and after["3"]["name"] == "Carol-avro"
    assert after["3"]["arrayField"] == [{"arr_struct_f1": "x", "arr_struct_f2": None}, None]
    assert after["3"]["mapField"] == [
        ("k", {"map_field_value_struct_f1": -1.0, "map_field_value_struct_f2": None}),
        ("z", None),
    ]
    for key in ("2", "3"):
        for col in schema.names:
            if col in (*META_FIELDS, "name", "arrayField", "mapField"):
                continue
            assert after[key][col] == keyed[key][col], (key, col)
    _slice_check(root, "", RICH_FILE_ID)
