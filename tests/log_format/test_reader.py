"""Corrupt, partial and hostile log files (spec §4.7): never a crash, never a huge allocation."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest

from hoodie_ray.avro.schema import arrow_to_avro_schema
from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieError
from hoodie_ray.log_format import (
    MAGIC,
    AvroDataBlock,
    CommandBlock,
    CorruptBlock,
    DataBlock,
    DeleteBlock,
    HeaderMetadataType,
    LogReader,
    ParquetDataBlock,
    read_log_bytes,
    read_log_file,
    serialize_block,
)
from hoodie_ray.storage import LocalStorage

H = HeaderMetadataType


def _table(n: int = 20) -> pa.Table:
    return pa.table(
        {
            "_hoodie_commit_time": ["20250101000000000"] * n,
            "_hoodie_commit_seqno": [f"s{i}" for i in range(n)],
            "_hoodie_record_key": [f"k{i}" for i in range(n)],
            "_hoodie_partition_path": [""] * n,
            "_hoodie_file_name": ["f-0"] * n,
            "v": pa.array(range(n), pa.int64()),
            "s": [f"value #HUDI# {i}" for i in range(n)],  # the magic inside record data
        }
    )


def _blocks() -> list[bytes]:
    t = _table()
    schema = arrow_to_avro_schema(t.schema, "t", True)
    return [
        serialize_block(AvroDataBlock.from_records(t, "20250101000000000", schema)),
        serialize_block(DeleteBlock({H.INSTANT_TIME: "20250101000000001"}, ["k1", "k2"], "")),
        serialize_block(ParquetDataBlock.from_records(t.slice(0, 5), "20250101000000002", schema)),
        serialize_block(CommandBlock.rollback("20250101000000003", "20250101000000002")),
        serialize_block(AvroDataBlock.from_records(t.slice(3, 4), "20250101000000004", schema)),
    ]


BLOCKS = _blocks()


def _check_prefix(blocks, raw_blocks, k: int, decode: bool = False) -> None:
    at = 0
    for b, raw in zip(blocks[:k], raw_blocks[:k], strict=True):
        assert not isinstance(b, CorruptBlock)
        assert (b.offset, b.size) == (at, len(raw))
        assert serialize_block(b, table_version=8) == raw
        if decode and isinstance(b, DataBlock):
            assert b.records.num_rows == b.num_records
        at += len(raw)


@pytest.mark.parametrize("n_blocks", [1, 2, 3, 4, 5])
def test_truncated_at_every_offset_of_the_last_block(n_blocks):
    raw_blocks = BLOCKS[:n_blocks]
    data = b"".join(raw_blocks)
    start = len(data) - len(raw_blocks[-1])
    for cut in range(start, len(data)):
        blocks = read_log_bytes(data[:cut], "cut.log")
        _check_prefix(blocks, raw_blocks, n_blocks - 1)
        rest = blocks[n_blocks - 1 :]
        if cut == start:
            assert rest == []
        else:
            assert all(isinstance(b, CorruptBlock) for b in rest), (cut, rest)
            assert rest[0].offset == start
            assert sum(b.size for b in rest) == cut - start
    _check_prefix(read_log_bytes(data), raw_blocks, n_blocks, decode=True)


def test_valid_block_after_a_partial_one_is_found():
    a, b, c = BLOCKS[0], BLOCKS[1], BLOCKS[3]
    data = a + b[: len(b) // 2] + c
    blocks = read_log_bytes(data)
    assert [type(x).__name__ for x in blocks] == ["AvroDataBlock", "CorruptBlock", "CommandBlock"]
    assert blocks[1].offset == len(a) and blocks[1].size == len(b) // 2
    assert blocks[2].offset == len(a) + len(b) // 2


def test_garbage_files():
    rng = np.random.default_rng(5)
    for size in (0, 1, 5, 6, 13, 14, 100, 5000):
        junk = rng.integers(0, 256, size, dtype=np.uint8).tobytes().replace(MAGIC, b"xxxxxx")
        blocks = read_log_bytes(junk, "junk.log")
        if size == 0:
            assert blocks == []
        else:
            assert len(blocks) == 1 and isinstance(blocks[0], CorruptBlock)
            assert blocks[0].size == size and blocks[0].source == "junk.log"
    # junk with magics sprinkled in: only corrupt blocks, contiguous cover of the file
    junk = bytearray(rng.integers(0, 256, 4000, dtype=np.uint8).tobytes())
    for at in (0, 17, 500, 3990):
        junk[at : at + 6] = MAGIC
    blocks = read_log_bytes(bytes(junk))
    assert all(isinstance(b, CorruptBlock) for b in blocks)
    assert sum(b.size for b in blocks) == len(junk)


def _frame(body: bytes, block_length: int | None = None, pointer: int | None = None) -> bytes:
    """magic + length + body + pointer, with the length/pointer overridable."""
    bl = len(body) + 8 if block_length is None else block_length
    ptr = bl + 6 if pointer is None else pointer
    return MAGIC + struct.pack(">q", bl) + body + struct.pack(">q", ptr)


def _body(
    version=1, btype=0, header=b"\x00\x00\x00\x00", content=b"", footer=b"\x00\x00\x00\x00"
) -> bytes:
    return (
        struct.pack(">ii", version, btype)
        + header
        + struct.pack(">q", len(content))
        + content
        + footer
    )


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (MAGIC + struct.pack(">q", 2**62) + b"\x00" * 40, "does not fit"),
        (MAGIC + struct.pack(">q", -5) + b"\x00" * 40, "does not fit"),
        (MAGIC + b"\x00\x00", "truncated"),
        (_frame(_body(), pointer=7), "reverse pointer"),
        (_frame(_body(version=0)), "version"),
        (_frame(_body(version=2)), "version"),
        (_frame(_body(btype=2)), "block type"),
        (_frame(_body(btype=7)), "block type"),
        (_frame(_body(header=struct.pack(">i", 2**31 - 1))), "entry count"),
        (_frame(_body(header=struct.pack(">i", -1))), "entry count"),
        (_frame(_body(header=struct.pack(">iii", 1, 9, 0))), "unknown header key"),
        (_frame(_body(header=struct.pack(">iii", 1, 0, 2**30))), "value length"),
        (_frame(_body(header=struct.pack(">iii", 1, 0, 2) + b"\xff\xfe")), "UTF-8"),
        (_frame(_body()[:-4] + b"\x00\x00\x00\x00\x00\x00\x00\x00"), "unexpected bytes"),
        (
            _frame(
                struct.pack(">ii", 1, 0)
                + b"\x00\x00\x00\x00"
                + struct.pack(">q", 2**40)
                + b"\x00" * 4
            ),
            "content length",
        ),
        (_frame(_body()) + b"not a magic", "no block magic"),
    ],
)
def test_hostile_frames_become_corrupt_blocks(raw, reason):
    blocks = read_log_bytes(raw, "bad.log")
    assert isinstance(blocks[0], CorruptBlock)
    assert reason in blocks[0].reason
    assert sum(b.size for b in blocks) == len(raw)


def test_well_framed_block_with_bad_content_raises_naming_the_file():
    t = _table(3)
    schema = arrow_to_avro_schema(t.schema, "t", True)
    raw = bytearray(serialize_block(AvroDataBlock.from_records(t, "1", schema)))
    # the first record's length prefix sits right after version and count
    content_at = raw.index(struct.pack(">ii", 3, 3))
    raw[content_at + 8 : content_at + 12] = struct.pack(">i", 10**6)
    (block,) = read_log_bytes(bytes(raw), "file.log")
    with pytest.raises(HoodieCorruptedDataError, match=r"file\.log"):
        _ = block.records
    bad_delete = _frame(
        _body(
            btype=1,
            header=struct.pack(">iii", 1, 0, 1) + b"1",
            content=struct.pack(">ii", 3, 4) + b"\xff\xff\xff\xff",
        )
    )
    (block,) = read_log_bytes(bad_delete, "del.log")
    with pytest.raises(HoodieCorruptedDataError, match=r"del\.log"):
        _ = block.record_keys
    bad_parquet = _frame(
        _body(
            btype=5,
            header=struct.pack(">iii", 2, 0, 1) + b"1" + struct.pack(">ii", 2, 2) + b"{}",
            content=b"PAR1garbagePAR1",
        )
    )
    (block,) = read_log_bytes(bad_parquet, "pq.log")
    with pytest.raises(HoodieCorruptedDataError, match=r"pq\.log"):
        _ = block.records


@pytest.mark.parametrize("seed", range(3))
def test_mutated_files_never_crash(seed):
    rng = np.random.default_rng(seed)
    data = np.frombuffer(b"".join(BLOCKS), dtype=np.uint8)
    for trial in range(40):
        mutated = data.copy()
        idx = rng.integers(0, len(mutated), 1 + trial % 5)
        mutated[idx] = rng.integers(0, 256, len(idx), dtype=np.uint8)
        for b in read_log_bytes(mutated.tobytes(), "m.log"):
            try:
                if isinstance(b, DataBlock):
                    _ = b.records
                elif isinstance(b, DeleteBlock):
                    _ = (b.record_keys, b.ordering_values)
            except HoodieError:
                pass


def test_reader_from_storage(tmp_path):
    storage = LocalStorage(str(tmp_path))
    storage.write_bytes("p/.f-0_1.log.1_0-0-0", b"".join(BLOCKS))
    blocks = read_log_file(storage, "p/.f-0_1.log.1_0-0-0")
    assert len(blocks) == len(BLOCKS)
    assert blocks[0].source.endswith("p/.f-0_1.log.1_0-0-0")
    reader = LogReader.from_storage(storage, "p/.f-0_1.log.1_0-0-0")
    assert [b.offset for b in reader] == [b.offset for b in blocks]
