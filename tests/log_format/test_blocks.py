"""Block framing and contents (hoodie_ray.log_format.blocks), byte by byte."""

from __future__ import annotations

import datetime as dt
import decimal
import struct

import pyarrow as pa
import pytest

from hoodie_ray.avro.schema import arrow_to_avro_schema, schema_to_json
from hoodie_ray.exceptions import (
    HoodieCorruptedDataError,
    HoodieInputError,
    HoodieUnsupportedError,
)
from hoodie_ray.log_format import (
    MAGIC,
    AvroDataBlock,
    BlockType,
    CommandBlock,
    CommandBlockType,
    DeleteBlock,
    HeaderMetadataType,
    ParquetDataBlock,
    read_log_bytes,
    serialize_block,
)
from hoodie_ray.log_format.blocks import decode_avro_blocks
from tests.log_format.helpers import fastavro_block_records, fastavro_delete_keys

H = HeaderMetadataType


def test_enum_codes():
    assert [int(b) for b in BlockType] == list(range(7))
    assert BlockType.PARQUET_DATA == 5 and BlockType.CDC_DATA == 6
    assert [h.name for h in HeaderMetadataType][:4] == [
        "INSTANT_TIME",
        "TARGET_INSTANT_TIME",
        "SCHEMA",
        "COMMAND_BLOCK_TYPE",
    ]
    assert int(HeaderMetadataType.BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS) == 8
    assert int(CommandBlockType.ROLLBACK) == 0


def _records() -> tuple[pa.Table, dict]:
    table = pa.table(
        {
            "_hoodie_commit_time": ["20250101000000000"] * 3,
            "_hoodie_commit_seqno": [f"20250101000000000_0_{i}" for i in range(3)],
            "_hoodie_record_key": ["k1", "k2", "k3"],
            "_hoodie_partition_path": ["p=1", "p=1", "p=1"],
            "_hoodie_file_name": ["f-0"] * 3,
            "ts": pa.array([1, 2, None], pa.int64()),
            "name": ["a", None, "ü"],
        }
    )
    return table, arrow_to_avro_schema(table.schema, "t", with_meta=True)


def test_frame_layout_matches_spec():
    table, schema = _records()
    block = AvroDataBlock.from_records(table, "20250101000000000", schema)
    raw = serialize_block(block)
    assert raw[:6] == MAGIC
    (block_length,) = struct.unpack_from(">q", raw, 6)
    assert block_length == len(raw) - 14
    assert struct.unpack_from(">ii", raw, 14) == (1, 3)
    (count,) = struct.unpack_from(">i", raw, 22)
    assert count == 2
    assert struct.unpack_from(">ii", raw, 26) == (0, 17)
    assert raw[34:51] == b"20250101000000000"
    key, n = struct.unpack_from(">ii", raw, 51)
    assert key == 2 and raw[59 : 59 + n].decode() == schema_to_json(schema)
    p = 59 + n
    (content_len,) = struct.unpack_from(">q", raw, p)
    content = raw[p + 8 : p + 8 + content_len]
    assert struct.unpack_from(">ii", content, 0) == (3, 3)
    assert raw[p + 8 + content_len : p + 12 + content_len] == b"\x00\x00\x00\x00"
    (pointer,) = struct.unpack_from(">q", raw, len(raw) - 8)
    assert pointer == block_length + 6 == len(raw) - 8
    ref = fastavro_block_records(content, schema_to_json(schema))
    assert ref == table.to_pylist()


def test_avro_block_roundtrip_is_lazy():
    table, schema = _records()
    raw = serialize_block(AvroDataBlock.from_records(table, "20250101000000000", schema))
    (block,) = read_log_bytes(raw, "mem.log")
    assert isinstance(block, AvroDataBlock) and not block.is_decoded
    assert block.num_records == 3 and not block.is_decoded
    assert block.read(["name"]).to_pylist() == [{"name": "a"}, {"name": None}, {"name": "ü"}]
    assert block.records.equals(table)
    assert block.instant_time == "20250101000000000"
    assert serialize_block(block) == raw


def test_parquet_block_roundtrip_and_types():
    table, schema = _records()
    table = table.set_column(5, "ts", pa.array([1, 2, None], pa.int32()))  # coerced to long
    raw = serialize_block(ParquetDataBlock.from_records(table, "20250101000000000", schema))
    (block,) = read_log_bytes(raw)
    assert isinstance(block, ParquetDataBlock)
    assert block.content[:4] == b"PAR1"
    assert block.records["ts"].type == pa.int64()
    assert block.records.to_pylist() == table.to_pylist()
    assert block.num_records == 3


def test_command_block_bytes_match_java_sample_layout():
    raw = serialize_block(CommandBlock.rollback("20250126040936578", "20250126040826878"))
    assert len(raw) == 105  # the Java-written rollback block of the sample table is 105 bytes
    (block,) = read_log_bytes(raw)
    assert isinstance(block, CommandBlock) and block.is_rollback
    assert block.target_instant_time == "20250126040826878"
    assert list(block.header) == [H.INSTANT_TIME, H.COMMAND_BLOCK_TYPE, H.TARGET_INSTANT_TIME]


def test_default_delete_block_bytes():
    block = DeleteBlock({H.INSTANT_TIME: "1"}, ["k1", "k2"], "p=1")
    content = b"".join(bytes(p) for p in block.content_pieces())
    datum = (
        b"\x04" + (b"\x02\x04k1\x02\x06p=1\x04\x00") + (b"\x02\x04k2\x02\x06p=1\x04\x00") + b"\x00"
    )
    assert content == struct.pack(">ii", 3, len(datum)) + datum
    empty = DeleteBlock({H.INSTANT_TIME: "1"}, [], None)
    assert b"".join(bytes(p) for p in empty.content_pieces()) == struct.pack(">ii", 3, 1) + b"\x00"


@pytest.mark.parametrize(
    ("values", "kind", "expected"),
    [
        (pa.array([True, False]), 1, [True, False]),
        (pa.array([7, -3], pa.int32()), 2, [7, -3]),
        (pa.array([2**40, -1], pa.int64()), 3, [2**40, -1]),
        (pa.array([1.5, -2.0], pa.float32()), 4, [1.5, -2.0]),
        (pa.array([1.25, 1e300], pa.float64()), 5, [1.25, 1e300]),
        (pa.array([b"\x00", b"ab"]), 6, [b"\x00", b"ab"]),
        (pa.array(["x", "üñ"]), 7, ["x", "üñ"]),
        (
            pa.array([dt.date(2024, 1, 2), dt.date(1960, 1, 1)]),
            8,
            [dt.date(2024, 1, 2), dt.date(1960, 1, 1)],
        ),
        (
            pa.array(
                [decimal.Decimal("1.5"), decimal.Decimal("-0.000000000000001")],
                pa.decimal128(20, 15),
            ),
            9,
            [decimal.Decimal("1.500000000000000"), decimal.Decimal("-0.000000000000001")],
        ),
        (
            pa.array([dt.time(1, 2, 3, 4), dt.time(0)], pa.time64("us")),
            10,
            [dt.time(1, 2, 3, 4), dt.time(0)],
        ),
        (
            pa.array([0, 1_700_000_000_000_000], pa.timestamp("us", tz="UTC")),
            11,
            [
                dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc),
                dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc),
            ],
        ),
    ],
)
def test_delete_ordering_wrappers_roundtrip(values, kind, expected):
    keys = ["a", "b"]
    block = DeleteBlock({H.INSTANT_TIME: "1"}, keys, ["p", None], values)
    raw = serialize_block(block)
    (back,) = read_log_bytes(raw)
    assert isinstance(back, DeleteBlock)
    assert back.record_keys.to_pylist() == keys
    assert back.partition_paths.to_pylist() == ["p", None]
    assert back.ordering_kinds.tolist() == [kind, kind]
    assert back.ordering_values == expected
    # fastavro (with logical types) agrees on the wire format
    ref = fastavro_delete_keys(bytes(back.content))
    assert [r[0] for r in ref] == keys
    if kind not in (4,):
        assert [r[2] for r in ref] == expected
    assert back.ordering_array().to_pylist() == expected


def test_delete_nulls_become_default_int_wrapper():
    block = DeleteBlock(
        {H.INSTANT_TIME: "1"}, ["a", "b", "c"], "p", pa.array([None, 5, None], pa.int64())
    )
    (back,) = read_log_bytes(serialize_block(block))
    assert back.ordering_kinds.tolist() == [2, 3, 2]
    assert back.ordering_values == [0, 5, 0]
    assert back.is_default_ordering.tolist() == [True, False, True]
    assert back.ordering_array().to_pylist() == [None, 5, None]
    assert block.is_default_ordering.tolist() == [True, False, True]


def test_delete_input_errors():
    with pytest.raises(HoodieInputError):
        DeleteBlock({H.INSTANT_TIME: "1"}, ["a", None], "p")
    with pytest.raises(HoodieInputError):
        DeleteBlock({H.INSTANT_TIME: "1"}, ["a"], ["p", "q"])
    with pytest.raises(HoodieInputError):
        serialize_block(DeleteBlock({H.INSTANT_TIME: "1"}, ["a"], "p", pa.array([[1]])))


def test_header_validation_per_table_version():
    table, schema = _records()
    block = AvroDataBlock.from_records(table, "1", schema, {H.BLOCK_IDENTIFIER: "0,1"})
    with pytest.raises(HoodieUnsupportedError, match="BLOCK_IDENTIFIER"):
        serialize_block(block, table_version=6)
    raw = serialize_block(block, table_version=8)
    (back,) = read_log_bytes(raw)
    assert back.header[H.BLOCK_IDENTIFIER] == "0,1"
    with pytest.raises(HoodieInputError, match="SCHEMA"):
        serialize_block(AvroDataBlock({H.INSTANT_TIME: "1"}, table))
    with pytest.raises(HoodieInputError, match="TARGET_INSTANT_TIME"):
        serialize_block(CommandBlock({H.INSTANT_TIME: "1", H.COMMAND_BLOCK_TYPE: "0"}))
    with pytest.raises(HoodieInputError):
        AvroDataBlock({99: "x"}, table)


def test_dictionary_choice_of_small_blocks_is_reused_for_blocks_up_to_twice_their_size():
    from hoodie_ray.log_format import blocks

    blocks._dictionary_choices.clear()
    n = 300  # a block of a flush over many file groups: under the 1,024-row sample

    def block(rows: int, tag: str) -> pa.Table:
        return pa.table(
            {
                "key": [f"{tag}-{i}" for i in range(rows)],  # unique: plain
                "p": [f"p{i % 4}" for i in range(rows)],  # repeats: dictionary
            }
        )

    assert blocks.dictionary_columns(block(n, "a")) == ["p"]
    schema = block(n, "a").schema
    assert blocks._dictionary_choices[schema][1:] == (blocks.DICTIONARY_CHOICE_REUSE, n)
    # the next blocks of the schema up to twice the sample reuse it: "key" would now repeat
    repeated_keys = pa.table({"key": ["k"] * n, "p": [f"p{i}" for i in range(n)]})
    assert blocks.dictionary_columns(repeated_keys) == ["p"]
    assert blocks._dictionary_choices[schema][1] == blocks.DICTIONARY_CHOICE_REUSE - 1
    # a block over twice as large is sampled again
    big = pa.table({"key": ["k"] * (3 * n), "p": [f"p{i}" for i in range(3 * n)]})
    assert blocks.dictionary_columns(big) == ["key"]
    assert blocks._dictionary_choices[schema][2] == 3 * n
    blocks._dictionary_choices.clear()


def _avro_blocks(n: int) -> list[AvroDataBlock]:
    table, schema = _records()
    raw = b"".join(
        serialize_block(AvroDataBlock.from_records(table, f"2025010100000000{i}", schema))
        for i in range(n)
    )
    blocks = read_log_bytes(raw, "mem.log")
    assert all(isinstance(b, AvroDataBlock) for b in blocks)
    return blocks  # type: ignore[return-value]


def test_avro_blocks_of_one_schema_decode_as_one():
    """A streaming writer's many small blocks: decoded together, the blocks' records in order,
    as decoding each gives."""
    blocks = _avro_blocks(5)
    alone = pa.concat_tables([b.read() for b in blocks])
    assert decode_avro_blocks(blocks).equals(alone)
    assert decode_avro_blocks(blocks, ["name", "ts"]).equals(alone.select(["name", "ts"]))
    assert not any(b.is_decoded for b in blocks)


def test_a_faulty_block_decoded_with_others_names_itself():
    blocks = _avro_blocks(3)
    content = bytearray(blocks[1].content)  # type: ignore[arg-type]
    content[8:12] = struct.pack(">i", 1 << 30)  # the first record's length runs past the block
    blocks[1]._content = bytes(content)
    with pytest.raises(HoodieCorruptedDataError, match=r"mem\.log \(block at byte \d+\)") as e:
        decode_avro_blocks(blocks)
    assert f"byte {blocks[1].offset})" in str(e.value)


def test_blocks_of_other_writer_schemas_are_not_decoded_together():
    blocks = _avro_blocks(2)
    table, _ = _records()
    other = arrow_to_avro_schema(table.drop_columns(["name"]).schema, "t", with_meta=True)
    (third,) = read_log_bytes(
        serialize_block(
            AvroDataBlock.from_records(table.drop_columns(["name"]), "20250102000000000", other)
        ),
        "mem.log",
    )
    with pytest.raises(ValueError, match="different writer schemas"):
        decode_avro_blocks([*blocks, third])  # type: ignore[list-item]
