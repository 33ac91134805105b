"""HFile v3 reader and writer (hoodie_ray.hfile), against the metadata-table spec section 2 and
the Java-written HFiles of the v9 sample table (base files and HFile log blocks of its MDT)."""

from __future__ import annotations

import base64
import io
import itertools
import json
import random
import struct
import zipfile
import zlib
from pathlib import Path

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from hoodie_ray import jit
from hoodie_ray.exceptions import (
    HoodieCorruptedDataError,
    HoodieInputError,
    HoodieUnsupportedError,
)
from hoodie_ray.hfile import (
    BLOOM_FILTER_META_BLOCK,
    BLOOM_FILTER_TYPE_CODE,
    HFileReader,
    _format,
    bloom_might_contain,
    build_bloom_filter,
    write_hfile,
)
from hoodie_ray.hfile import reader as hr_reader
from hoodie_ray.hfile._format import (
    I64,
    WRITER_FILE_INFO_KEYS,
    decode_vlong,
    encode_varint,
    encode_vlong,
    proto_bytes_field,
    proto_fields,
    proto_varint_field,
)
from hoodie_ray.hfile.bloom import _positions_of
from hoodie_ray.log_format import HFileDataBlock, LogReader
from tests.conftest import SHARED_TABLES

SAMPLE = "sample_mor_avro_v9_txns_complex_meta"
FILES_BASE = "files-0000-0_13-170-402_20260307162643148.hfile"
HEADER = struct.Struct(">8siiqBii")


# -- helpers ----------------------------------------------------------------------------------
def walk_blocks(data: bytes) -> list[tuple[int, bytes, int, int, int, int, int, int]]:
    """(offset, magic, onDiskSizeWithoutHeader, uncompressedSize, prevOffset, checksumType,
    bytesPerChecksum, onDiskDataSizeWithHeader) of every block, following the chain."""
    out = []
    off = 0
    while off < len(data) - 4096:
        fields = HEADER.unpack_from(data, off)
        out.append((off, *fields))
        off += 33 + fields[1]
    assert off == len(data) - 4096, "the block chain must end exactly at the trailer"
    return out


def trailer_fields(data: bytes) -> dict[int, int | bytes]:
    t = data[-4096:]
    assert t[:8] == b'TRABLK"$'
    n = t[8]  # the trailer protobuf is always shorter than 128 bytes here
    return dict(proto_fields(t[9 : 9 + n]))


def payload(data: bytes, off: int) -> bytes:
    _, _, usz, _, _, _, data_end = HEADER.unpack_from(data, off)
    stored = data[off + 33 : off + data_end]
    return stored if len(stored) == usz else zlib.decompress(stored, 47)


def entries(n: int, value_len: int = 30, key_len: int = 12) -> list[tuple[bytes, bytes]]:
    rnd = random.Random(n)
    keys = sorted({f"k{rnd.randrange(10**9):0{key_len}d}".encode() for _ in range(n)})
    return [(k, bytes(rnd.randrange(256) for _ in range(value_len))) for k in keys]


def check_reader(r: HFileReader, expected: list[tuple[bytes, bytes]]) -> None:
    assert r.entry_count == len(expected)
    assert list(r.items()) == expected
    rows, values = r.columns()
    assert rows.type == values.type == pa.large_binary()
    assert list(zip(rows.to_pylist(), values.to_pylist(), strict=True)) == expected
    for k, v in expected:
        assert r.get(k) == v
    assert r.get_many([k for k, _ in expected] + [b"", b"\xff" * 3]) == dict(expected)
    assert r.first_key == (expected[0][0] if expected else None)
    assert r.last_key == (expected[-1][0] if expected else None)


# -- round trips ------------------------------------------------------------------------------
@pytest.mark.parametrize("compression", ["gz", "none"])
def test_round_trip_one_entry(compression: str) -> None:
    data = write_hfile([(b"__all_partitions__", b"v" * 13)], compression=compression)
    r = HFileReader(data, "one.hfile")
    check_reader(r, [(b"__all_partitions__", b"v" * 13)])
    assert r.get(b"__all_partitions_") is None and r.get(b"__all_partitions__x") is None
    assert r.meta_block("bloomFilter") is None
    blocks = walk_blocks(data)
    assert [b[1] for b in blocks] == [b"DATABLK*", b"IDXROOT2", b"IDXROOT2", b"FILEINF2"]
    # spec 2.3: len(row) + len(value) + 21 bytes per entry; spec 2.7: the trailer stores that
    assert blocks[0][3] == 18 + 13 + 21 == trailer_fields(data)[3] == 52
    assert payload(data, 0) == (
        struct.pack(">iiH", 30, 13, 18)
        + b"__all_partitions__\x00\x7f\xff\xff\xff\xff\xff\xff\xff\x04"
        + b"v" * 13
        + b"\x00"
    )


@pytest.mark.parametrize("compression", ["gz", "none"])
def test_round_trip_many_blocks(compression: str) -> None:
    expected = entries(400)
    data = write_hfile(expected, compression=compression, block_size=500)
    r = HFileReader(data, "many.hfile")
    check_reader(r, expected)
    assert r.data_block_count > 20
    # blocks are cut where the next entry would push sum(len(row) + len(value) + 9) past 500
    sizes = [len(k) + len(v) + 9 for k, v in expected]
    blocks = [b for b in walk_blocks(data) if b[1] == b"DATABLK*"]
    assert len(blocks) == r.data_block_count == trailer_fields(data)[5]
    i = 0
    for b in blocks:
        n = 0
        total = 0
        while i + n < len(sizes) and (n == 0 or total + sizes[i + n] <= 500):
            total += sizes[i + n]
            n += 1
        assert b[3] == total + 12 * n  # uncompressed payload: +21 instead of +9 per entry
        i += n
    assert i == len(expected)
    t = trailer_fields(data)
    assert t[9] == 0 and t[10] == blocks[-1][0] and t[7] == 400
    assert t[12] == (1 if compression == "gz" else 2)
    # scans
    prefix = expected[100][0][:6]
    want = [(k, v) for k, v in expected if k.startswith(prefix)]
    assert want and list(r.scan_prefix(prefix)) == want
    assert list(r.scan_prefix(b"")) == expected
    assert list(r.scan_prefix(b"zzz")) == [] and list(r.scan_prefix(b"a")) == []


@pytest.mark.parametrize("compression", ["gz", "none"])
def test_round_trip_long_keys_use_hadoop_vlongs(compression: str) -> None:
    expected = [(bytes([65 + i]) * n, b"v%d" % n) for i, n in enumerate((1, 125, 126, 200, 3000))]
    data = write_hfile(expected, compression=compression, block_size=1)
    r = HFileReader(data, "long.hfile")
    check_reader(r, expected)
    assert r.data_block_count == 5
    blocks = walk_blocks(data)
    root = payload(data, next(b[0] for b in blocks if b[1] == b"IDXROOT2"))
    pos = 0
    for (key, _), block in zip(expected, blocks, strict=False):
        off, size = struct.unpack_from(">qi", root, pos)
        assert (off, size) == (block[0], 33 + block[2])
        n, pos = decode_vlong(root, pos + 12, len(root))
        assert n == len(key) + 2
        assert root[pos : pos + n] == struct.pack(">H", len(key)) + key
        pos += n
    assert pos == len(root)
    # a 127-byte index key (row of 125) is one byte; 128 needs the Hadoop two-byte form
    assert encode_vlong(127) == b"\x7f" and encode_vlong(128) == b"\x8f\x80"
    assert encode_vlong(3002) == b"\x8e\x0b\xba"


def test_hadoop_vlong_vectors() -> None:
    vectors = {
        0: "00",
        127: "7f",
        -112: "90",
        -113: "8770",
        128: "8f80",
        255: "8fff",
        256: "8e0100",
        -257: "860100",
        2**31: "8c80000000",
        -(2**63): "807fffffffffffffff",
    }
    for value, hexed in vectors.items():
        assert encode_vlong(value).hex() == hexed, value
        assert decode_vlong(bytes.fromhex(hexed), 0, len(hexed) // 2) == (value, len(hexed) // 2)


def test_meta_blocks_and_file_info() -> None:
    bloom = bytes(range(256)) * 40
    data = write_hfile(
        [(b"a", b"1"), (b"b", b"22")],
        file_info={b"schema": b"{}", b"extra": b"x"},
        meta_blocks={"bloomFilter": bloom, "another": b""},
        create_time_ms=1234,
    )
    r = HFileReader(data, "meta.hfile")
    assert r.meta_block("bloomFilter") == bloom and r.meta_block("another") == b""
    assert r.meta_block("nope") is None
    assert r.meta_block_names == ["another", "bloomFilter"]
    assert r.file_info == {
        b"MAX_MEMSTORE_TS_KEY": bytes(8),
        b"KEY_VALUE_VERSION": b"\x00\x00\x00\x01",
        b"hfile.LASTKEY": b"\x00\x01b",
        b"hfile.AVG_KEY_LEN": b"\x00\x00\x00\x01",
        b"hfile.AVG_VALUE_LEN": b"\x00\x00\x00\x01",
        b"hfile.CREATE_TIME_TS": I64.pack(1234),
        b"schema": b"{}",
        b"extra": b"x",
    }
    assert [b[1] for b in walk_blocks(data)] == [
        b"DATABLK*",
        b"METABLKc",
        b"METABLKc",
        b"IDXROOT2",
        b"IDXROOT2",
        b"FILEINF2",
    ]
    assert trailer_fields(data)[6] == 2


def test_empty_file_only_when_allowed() -> None:
    with pytest.raises(HoodieInputError, match="at least one entry"):
        write_hfile([])
    data = write_hfile([], allow_empty=True, meta_blocks={"bloomFilter": b"b"})
    r = HFileReader(data, "empty.hfile")
    check_reader(r, [])
    assert list(r.scan_prefix(b"")) == [] and r.get(b"a") is None
    t = trailer_fields(data)
    assert t[9] == 2**64 - 1 and t[10] == 0 and t[5] == 0  # firstDataBlockOffset -1 as Java
    assert r.trailer.first_data_block_offset == -1
    assert r.file_info[b"hfile.LASTKEY"] == b""


# -- input errors -----------------------------------------------------------------------------
def test_keys_must_be_strictly_ascending() -> None:
    with pytest.raises(HoodieInputError, match=r"key 2 b'b' sorts before"):
        write_hfile([(b"a", b""), (b"c", b""), (b"b", b""), (b"a", b"")])
    with pytest.raises(HoodieInputError, match=r"key 1 b'a' repeats"):
        write_hfile([(b"a", b"1"), (b"a", b"2")])
    # unsigned byte order: 0x7f < 0x80
    data = write_hfile([(b"\x00", b""), (b"\x7f", b""), (b"\x80", b""), (b"\xff", b"")])
    assert [k for k, _ in HFileReader(data).items()] == [b"\x00", b"\x7f", b"\x80", b"\xff"]


def test_bad_arguments() -> None:
    with pytest.raises(HoodieInputError, match="compression"):
        write_hfile([(b"a", b"")], compression="snappy")
    with pytest.raises(HoodieInputError, match="block_size"):
        write_hfile([(b"a", b"")], block_size=0)
    with pytest.raises(HoodieInputError, match="set by the writer"):
        write_hfile([(b"a", b"")], file_info={b"hfile.LASTKEY": b""})
    with pytest.raises(HoodieInputError, match="must be bytes"):
        write_hfile([("a", b"")])  # type: ignore[list-item]
    with pytest.raises(HoodieInputError, match="more than 32767"):
        write_hfile([(b"a" * 40000, b"")])
    with pytest.raises(HoodieInputError, match="pairs"):
        write_hfile([b"a"])  # type: ignore[list-item]
    # bytes-like keys and values are accepted
    data = write_hfile([(bytearray(b"a"), memoryview(b"v"))])  # type: ignore[list-item]
    assert list(HFileReader(data).items()) == [(b"a", b"v")]


# -- corrupt input ----------------------------------------------------------------------------
def _small_file(compression: str = "gz") -> bytes:
    return write_hfile(
        entries(60), compression=compression, block_size=400, meta_blocks={"m": b"meta" * 50}
    )


def _exercise(r: HFileReader) -> None:
    for k, _ in r.items():
        r.get(k)
    for compiled in (False, True) if jit.enabled() else (False,):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(hr_reader, "_use_kernel", lambda entries, c=compiled: c)
            r.columns()
    r.get_many([b"k0", b"k5"])
    list(r.scan_prefix(b"k00"))
    r.meta_block("m")
    _ = r.last_key


@pytest.mark.parametrize(
    "cut",
    [
        lambda d: b"",
        lambda d: d[:100],
        lambda d: d[:-1],
        lambda d: d[1:],
        lambda d: d[: len(d) // 2] + d[len(d) // 2 + 7 :],
        lambda d: d[:-4096] + b"X" + d[-4095:],
    ],
)
def test_truncated_or_shifted_files_are_corrupt(cut) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(HoodieCorruptedDataError, match=r"HFile bad\.hfile"):
        _exercise(HFileReader(cut(_small_file()), "bad.hfile"))


def test_corrupt_data_block_named_on_read() -> None:
    data = bytearray(_small_file())
    data[60:70] = b"\x00" * 10  # inside the first block's deflate stream
    r = HFileReader(bytes(data), "blk.hfile")
    with pytest.raises(HoodieCorruptedDataError, match=r"blk\.hfile.*data block 0"):
        list(r.items())


def test_unsupported_version_and_codec() -> None:
    data = bytearray(_small_file())
    bad_version = bytes(data[:-4]) + b"\x00\x00\x00\x02"
    with pytest.raises(HoodieUnsupportedError, match=r"v2\.hfile.*version 2"):
        HFileReader(bad_version, "v2.hfile")
    t = len(data) - 4096
    codec_at = bytes(data[t:]).index(proto_varint_field(12, 1)) + t
    data[codec_at + 1] = 3  # compressionCodec SNAPPY
    with pytest.raises(HoodieUnsupportedError, match=r"snappy\.hfile.*SNAPPY"):
        HFileReader(bytes(data), "snappy.hfile")


@pytest.mark.parametrize("compression", ["gz", "none"])
def test_random_damage_never_leaks_raw_errors(compression: str) -> None:
    good = _small_file(compression)
    rnd = random.Random(7)
    for _ in range(150):
        data = bytearray(good)
        how = rnd.randrange(3)
        if how == 0:
            for _ in range(rnd.randrange(1, 4)):
                data[rnd.randrange(len(data))] = rnd.randrange(256)
        elif how == 1:  # damage the load-on-open section or the trailer
            pos = rnd.randrange(len(data) - 4096 - 300, len(data) - 4000)
            data[pos] ^= 1 << rnd.randrange(8)
        else:
            del data[rnd.randrange(len(data)) :]
        try:
            _exercise(HFileReader(bytes(data), "fuzz.hfile"))
        except (HoodieCorruptedDataError, HoodieUnsupportedError) as e:
            assert "fuzz.hfile" in str(e)


# -- HBase dialect: full KeyValue keys, CRC32C checksums, multi-level index, tags, MVCC ----------
def _hbase_block(magic: bytes, raw: bytes, prev: int) -> bytes:
    comp = zlib.compressobj(6, zlib.DEFLATED, 31)  # a gzip member as zlib writes it (OS byte 3)
    stored = comp.compress(raw) + comp.flush()
    data_size = 33 + len(stored)
    n_check = 4 * -(-data_size // 16384)
    head = HEADER.pack(magic, len(stored) + n_check, len(raw), prev, 2, 16384, data_size)
    return head + stored + b"\xc3" * n_check  # checksum values are not verified


def _full_key(row: bytes, ts: int = 1700000000000, kind: int = 4) -> bytes:
    return struct.pack(">H", len(row)) + row + b"\x02cf" + b"qual" + struct.pack(">qB", ts, kind)


def _non_root(items: list[tuple[int, int, bytes]]) -> bytes:
    bodies = [struct.pack(">qi", off, size) + key for off, size, key in items]
    rel = [0]
    for b in bodies:
        rel.append(rel[-1] + len(b))
    return struct.pack(f">i{len(rel)}i", len(items), *rel) + b"".join(bodies)


def hbase_file(kvs: list[tuple[bytes, bytes]], per_block: int, fanout: int, levels: int) -> bytes:
    """An HFile laid out as HBase 2.x writes it (enough of it for a reader)."""
    out = b""
    prev = -1
    index: list[tuple[int, int, bytes]] = []
    last_row = b""
    for i in range(0, len(kvs), per_block):
        chunk = kvs[i : i + per_block]
        body = b""
        for j, (row, value) in enumerate(chunk):
            key = _full_key(row)
            tags = b"\x00\x03\x00\x01\x07" if j % 2 else b""
            mvcc = encode_vlong(300 + j if j % 3 else 0)
            body += struct.pack(">ii", len(key), len(value)) + key + value
            body += struct.pack(">H", len(tags)) + tags + mvcc
        first = chunk[0][0]
        # a shortened "fake" key: the shortest prefix of the first row above the previous row
        fake = next(first[:n] for n in range(1, len(first) + 1) if first[:n] > last_row)
        index_key = _full_key(first if i == 0 else fake, ts=2**63 - 1, kind=255)
        block = _hbase_block(b"DATABLK*", body, prev)
        index.append((len(out), len(block), index_key))
        prev = len(out)
        out += block
        last_row = chunk[-1][0]
    for level in range(levels - 1):
        magic = b"IDXLEAF2" if level == 0 else b"IDXINTE2"
        upper = []
        for i in range(0, len(index), fanout):
            group = index[i : i + fanout]
            block = _hbase_block(magic, _non_root(group), -1)
            upper.append((len(out), len(block), group[0][2]))
            out += block
        index = upper
    meta = _hbase_block(b"METABLKc", b"bloom bytes", -1)
    meta_off = len(out)
    out += meta
    load_on_open = len(out)
    root = b"".join(struct.pack(">qi", o, s) + encode_vlong(len(k)) + k for o, s, k in index)
    root += struct.pack(">qii", 0, 0, 0)  # mid-key metadata, skipped by readers
    out += _hbase_block(b"IDXROOT2", root, -1)
    meta_key = b"bloomFilter"
    meta_index = struct.pack(">qi", meta_off, len(meta)) + encode_vlong(len(meta_key)) + meta_key
    out += _hbase_block(b"IDXROOT2", meta_index, -1)
    info = {
        b"KEY_VALUE_VERSION": b"\x00\x00\x00\x01",
        b"MAX_MEMSTORE_TS_KEY": I64.pack(400),
        b"hfile.MAX_TAGS_LEN": b"\x00\x00\x00\x05",
        b"hfile.LASTKEY": _full_key(kvs[-1][0]),
    }
    body = b"".join(
        proto_bytes_field(1, proto_bytes_field(1, k) + proto_bytes_field(2, v))
        for k, v in info.items()
    )
    file_info_off = len(out)
    out += _hbase_block(b"FILEINF2", b"PBUF" + encode_varint(len(body)) + body, -1)
    proto = b"".join(
        [
            proto_varint_field(1, file_info_off),
            proto_varint_field(2, load_on_open),
            proto_varint_field(3, 999),
            proto_varint_field(4, 12345),
            proto_varint_field(5, len(index)),
            proto_varint_field(6, 1),
            proto_varint_field(7, len(kvs)),
            proto_varint_field(8, levels),
            proto_varint_field(9, 0),
            proto_varint_field(10, 0),
            proto_bytes_field(11, b"org.apache.hadoop.hbase.CellComparatorImpl"),
            proto_varint_field(12, 1),
        ]
    )
    head = b'TRABLK"$' + encode_varint(len(proto)) + proto
    return out + head + bytes(4092 - len(head)) + b"\x03\x00\x00\x03"


@pytest.mark.parametrize("levels", [1, 2, 3])
def test_hbase_dialect_multi_level_index(levels: int) -> None:
    kvs = [(b"key-%05d" % i, b"value-%d" % i * (i % 4)) for i in range(0, 3000, 3)]
    data = hbase_file(kvs, per_block=7, fanout=4, levels=levels)
    r = HFileReader(data, "hbase.hfile")
    assert r.trailer.num_data_index_levels == levels and r.trailer.minor_version == 3
    assert r.data_block_count == -(-len(kvs) // 7)
    check_reader(r, kvs)
    assert r.get(b"key-00001") is None and r.get(b"key-0001") is None  # between / fake keys
    assert list(r.scan_prefix(b"key-001")) == [kv for kv in kvs if kv[0].startswith(b"key-001")]
    assert r.meta_block("bloomFilter") == b"bloom bytes"


# -- the Java-written sample ------------------------------------------------------------------
@pytest.fixture(scope="module")
def sample_hfiles(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, bytes]]:
    """(name, bytes) of every HFile of the sample's MDT: base files, then log-block contents."""
    zpath = SHARED_TABLES / f"{SAMPLE}.zip"
    if not zpath.is_file():
        pytest.skip(f"../shared/tables/{SAMPLE}.zip is absent (a fresh clone has no ../shared)")
    dest = tmp_path_factory.mktemp("hfile_sample")
    with zipfile.ZipFile(zpath) as z:
        z.extractall(dest, [m for m in z.namelist() if "/.hoodie/metadata/" in m])
    mdt = next(dest.rglob(".hoodie/metadata"))
    out = [(str(p.relative_to(mdt)), p.read_bytes()) for p in sorted(mdt.rglob("*.hfile"))]
    for p in sorted(mdt.rglob(".*.log.*")):
        for i, block in enumerate(LogReader(p.read_bytes(), str(p))):
            if isinstance(block, HFileDataBlock):
                out.append((f"{p.relative_to(mdt)}#{i}", bytes(block.content)))
    return out


def test_sample_hfiles_parse(sample_hfiles: list[tuple[str, bytes]]) -> None:
    base = [n for n, _ in sample_hfiles if n.endswith(".hfile")]
    assert len(base) == 29 and len(sample_hfiles) == 29 + 77
    total = 0
    for name, data in sample_hfiles:
        r = HFileReader(data, name)
        items = list(r.items())
        assert len(items) == r.entry_count == r.trailer.entry_count, name
        keys = [k for k, _ in items]
        assert all(a < b for a, b in itertools.pairwise(keys)), name
        for k, v in items:
            assert r.get(k) == v, (name, k)
        assert r.get_many(keys) == dict(items)
        assert b"schema" in r.file_info, name
        assert r.first_key == (keys[0] if keys else None) and r.last_key == (
            keys[-1] if keys else None
        )
        assert r.meta_block_names == (["bloomFilter"] if name.endswith(".hfile") else [])
        assert (
            r.trailer.comparator_class_name == "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
        )
        total += len(items)
    assert total > 100


def test_sample_values_are_exact_avro(sample_hfiles: list[tuple[str, bytes]]) -> None:
    for name, data in sample_hfiles:
        r = HFileReader(data, name)
        schema = fastavro.parse_schema(json.loads(r.file_info[b"schema"]))
        for key, value in r.items():
            buf = io.BytesIO(value)
            record = fastavro.schemaless_reader(buf, schema, None)
            assert buf.tell() == len(value), (name, key)
            # spec 3.1: the Avro "key" is always written empty; the HFile row holds the key
            assert isinstance(record, dict) and record["key"] == "", (name, key)


def test_sample_files_base_file_layout(sample_hfiles: list[tuple[str, bytes]]) -> None:
    data = dict(sample_hfiles)[f"files/{FILES_BASE}"]
    blocks = walk_blocks(data)
    assert [(o, m, odsw, usz) for o, m, odsw, usz, *_ in blocks] == [
        (0, b"DATABLK*", 390, 1039),
        (423, b"METABLKc", 548, 71940),
        (1004, b"IDXROOT2", 50, 33),
        (1087, b"IDXROOT2", 45, 24),
        (1165, b"FILEINF2", 2102, 9208),
    ]
    assert len(data) - 4096 == 3300
    t = trailer_fields(data)
    assert t == {
        1: 1165,
        2: 1004,
        3: 1039,
        5: 1,
        6: 1,
        7: 4,
        8: 1,
        9: 0,
        10: 0,
        11: b"org.apache.hudi.io.storage.HoodieHBaseKVComparator",
        12: 1,
    }


def _rewrite(r: HFileReader) -> bytes:
    return write_hfile(
        list(r.items()),
        file_info={k: v for k, v in r.file_info.items() if k not in WRITER_FILE_INFO_KEYS},
        meta_blocks={n: r.meta_block(n) or b"" for n in r.meta_block_names},
        create_time_ms=I64.unpack(r.file_info[b"hfile.CREATE_TIME_TS"])[0],
        allow_empty=True,
    )


def test_rewriting_sample_files_reproduces_them(
    sample_hfiles: list[tuple[str, bytes]], java_deflate: None
) -> None:
    """Every Java-written HFile of the sample, re-written from its entries, file info and meta
    blocks, comes out byte for byte the same (same deflate level, header fields, index
    encoding, HashMap order of the file info entries, trailer)."""
    for name, data in sample_hfiles:
        r = HFileReader(data, name)
        out = _rewrite(r)
        again = HFileReader(out, name)
        assert list(again.items()) == list(r.items()) and again.file_info == r.file_info
        assert out == data, name


def test_rewritten_files_base_file_has_native_layout(
    sample_hfiles: list[tuple[str, bytes]], java_deflate: None
) -> None:
    """The structure of a re-written file, checked field by field against spec 2.1-2.7."""
    r = HFileReader(dict(sample_hfiles)[f"files/{FILES_BASE}"], FILES_BASE)
    out = _rewrite(r)
    blocks = walk_blocks(out)
    for off, magic, odsw, _usz, prev, ck_type, bpc, data_end in blocks:
        assert (prev, ck_type, bpc) == (-1, 0, 16384), magic
        assert odsw == data_end - 33 + 4 * -(-data_end // 16384)
        assert out[off + data_end : off + 33 + odsw] == b"\x00\x00\x00\x00"
    assert [(b[0], b[1], b[3]) for b in blocks] == [
        (0, b"DATABLK*", 1039),
        (423, b"METABLKc", 71940),
        (1004, b"IDXROOT2", 33),
        (1087, b"IDXROOT2", 24),
        (1165, b"FILEINF2", 9208),
    ]
    root = payload(out, 1004)
    assert root == struct.pack(">qi", 0, 423) + b"\x14\x00\x12__all_partitions__"
    assert payload(out, 1087) == struct.pack(">qi", 423, 581) + b"\x0bbloomFilter"
    info = payload(out, 1165)
    assert info[:4] == b"PBUF"
    assert out[-4:] == b"\x00\x00\x00\x03"
    assert trailer_fields(out) == trailer_fields(
        r_data := dict(sample_hfiles)[f"files/{FILES_BASE}"]
    )
    assert set(HFileReader(out).file_info) == set(HFileReader(r_data).file_info)


def test_sample_log_hfiles_have_empty_meta_index(sample_hfiles: list[tuple[str, bytes]]) -> None:
    for name, data in sample_hfiles:
        if name.endswith(".hfile"):
            continue
        blocks = walk_blocks(data)
        assert [b[1] for b in blocks][-3:] == [b"IDXROOT2", b"IDXROOT2", b"FILEINF2"]
        meta_index = blocks[-2]
        assert meta_index[3] == 0 and meta_index[2] == 24  # empty gzip member + 4 checksum bytes
        assert trailer_fields(data)[6] == 0


def test_reader_accepts_memoryview_and_tmp_file(tmp_path: Path) -> None:
    data = write_hfile(entries(10))
    (tmp_path / "x.hfile").write_bytes(data)
    r = HFileReader(memoryview((tmp_path / "x.hfile").read_bytes()), "x.hfile")
    check_reader(r, entries(10))


# -- bloom filter META block ------------------------------------------------------------------
def test_sample_bloom_filters_are_rebuilt_byte_for_byte(
    sample_hfiles: list[tuple[str, bytes]],
) -> None:
    bases = [(n, d) for n, d in sample_hfiles if n.endswith(".hfile")]
    for name, data in bases:
        r = HFileReader(data, name)
        assert r.file_info[b"bloomFilterTypeCode"] == BLOOM_FILTER_TYPE_CODE
        stored = r.meta_block(BLOOM_FILTER_META_BLOCK)
        assert stored is not None
        keys = [k for k, _ in r.items()]
        assert build_bloom_filter(keys) == stored, name
        assert all(bloom_might_contain(stored, k) for k in keys), name
        assert not any(bloom_might_contain(stored, k + b"#absent") for k in keys), name


def test_bloom_filter_rows_fill_then_round_robin() -> None:
    keys = [b"key-%04d" % i for i in range(100)]
    ser = build_bloom_filter(keys, num_entries=10, fpp=0.01, max_entries=30)
    raw = base64.b64decode(ser)
    version, nb_hash, hash_type, bits = struct.unpack_from(">iiBi", raw)
    nr, current, rows = struct.unpack_from(">iii", raw, 13)
    assert (version, hash_type, nr, rows) == (-1, 1, 10, 3)
    assert (bits, nb_hash) == (96, 7)  # ceil(-10 ln 0.01 / ln2^2), ceil(96 / 10 ln 2)
    assert current == 100 - 2 * 10  # never reset once the three rows exist
    assert len(raw) == 25 + 3 * (13 + 12)
    assert all(bloom_might_contain(ser, k) for k in keys)
    assert all(bloom_might_contain(raw, k) for k in keys)  # binary form accepted too
    small = build_bloom_filter(keys[:5])
    assert all(bloom_might_contain(small, k) for k in keys[:5])
    assert not any(bloom_might_contain(small, k) for k in keys[5:])
    empty = build_bloom_filter([])
    assert struct.unpack_from(">iii", base64.b64decode(empty), 13) == (10000, 0, 1)
    assert not bloom_might_contain(empty, b"a")


def test_bloom_bits_are_the_union_of_each_keys_scalar_positions() -> None:
    rnd = random.Random(5)
    keys = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 23))) for _ in range(500)]
    raw = base64.b64decode(build_bloom_filter(keys))
    bits = np.unpackbits(np.frombuffer(raw, np.uint8, offset=38), bitorder="little")[:431328]
    want = np.zeros(431328, np.uint8)
    for key in keys:
        want[_positions_of(key, 30, 431328)] = 1
    assert (bits == want).all()


def test_bloom_bad_input() -> None:
    with pytest.raises(HoodieCorruptedDataError):
        bloom_might_contain(b"not base64!", b"a")
    with pytest.raises(HoodieCorruptedDataError):
        bloom_might_contain(base64.b64encode(b"\xff\xff\xff\xff\x00"), b"a")
    with pytest.raises(HoodieInputError):
        build_bloom_filter([b"a", b""])


@pytest.mark.parametrize("compiled", [False, True])
def test_get_many_searches_blocks_in_place_or_splits_them_alike(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Few keys per block are found by binary search over the block's entry spans (from the
    compiled walk or the plain loop), many by splitting it: the same answers, present and
    absent keys, at block edges too."""
    import random

    from hoodie_ray.hfile import reader as hr_reader

    if compiled and not jit.enabled():
        pytest.skip("numba is not available (HOODIE_RAY_NO_JIT or not installed)")
    monkeypatch.setattr(hr_reader, "_use_kernel", lambda entries: compiled)
    rng = random.Random(9)
    keys = sorted({rng.randbytes(rng.randint(1, 12)) for _ in range(3000)})
    entries = [(k, rng.randbytes(rng.randint(0, 30))) for k in keys]
    r = HFileReader(write_hfile(entries, block_size=2000))
    assert r.data_block_count > 10
    firsts = [r._index_rows[b] for b in range(r.data_block_count)]
    for n in (1, 5, 40, 200, 3000):
        asked = [*rng.sample(keys, min(n, len(keys))), b"", b"\xff" * 13, b"\x00"]
        asked += rng.sample(firsts, 3) + [k + b"\x00" for k in rng.sample(keys, 3)]
        want = {k: v for k, v in entries if k in set(asked)}
        assert r.get_many(asked) == want
        assert HFileReader(write_hfile(entries, block_size=2000)).get_many(asked) == want
    assert hr_reader._FEW_KEYS < 200  # both paths ran


def test_blocks_sought_again_are_searched_as_one_padded_array(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cached block's second seek finds its keys in a NUL-padded array of its rows (one
    ``searchsorted``): the answers are the binary search's, for keys that end in NUL bytes,
    run past every row, share a padded form with a row or hold bytes over 0x7f; a block
    with a row ending in NUL, or one long row among short ones, keeps the binary search."""
    cache = hr_reader._InflatedBlocks(8 << 20)
    monkeypatch.setattr(hr_reader, "INFLATED_BLOCKS", cache)
    rng = random.Random(5)
    for odd in ("", "nul", "long"):
        keys = {rng.randbytes(rng.randint(1, 9)).rstrip(b"\0") or b"x" for _ in range(4000)}
        if odd == "nul":
            keys |= {k + b"\0" for k in rng.sample(sorted(keys), 40)}
        if odd == "long":
            keys |= {k + b"\x01" * 150 for k in rng.sample(sorted(keys), 10)}
        entries = [(k, b"v" + k) for k in sorted(keys)]
        data = write_hfile(entries, block_size=3000)
        present = rng.sample(sorted(keys), 300)  # ~9 a block: searched in place
        asked = present + [k + b"\0" for k in present[:10]] + [b"\xff" * 12, b"\x80"]
        asked += [k[:-1] for k in present[10:20] if len(k) > 1]
        asked += [k for k in keys if len(k) > 100]
        want = {k: v for k, v in entries if k in set(asked)}
        for _ in range(3):
            assert HFileReader(data).get_many(asked) == want
        padded = [b.rows for b, _ in cache._blocks._items.values() if b.rows is not None]
        assert padded
        if odd:
            assert any(r is False for r in padded)
        else:
            assert all(isinstance(r, np.ndarray) for r in padded)
        cache.clear()


@pytest.mark.parametrize("compiled", [False, True])
def test_prefix_columns_are_the_prefixed_entries(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prefix_columns`` gives exactly the entries of ``columns()`` whose row starts with one
    of the prefixes, in key order, whether a prefix's rows fit in one block, run over many,
    start a block, or are absent; a 0xFF prefix has no upper bound."""
    if compiled and not jit.enabled():
        pytest.skip("numba is not available (HOODIE_RAY_NO_JIT or not installed)")
    monkeypatch.setattr(hr_reader, "_use_kernel", lambda entries: compiled)
    rng = random.Random(13)
    groups = [b"a$", b"ab$", b"b", b"m\xff", b"\xff\xff"]
    keys = sorted({g + rng.randbytes(rng.randint(0, 6)) for g in groups for _ in range(400)})
    entries = [(k, rng.randbytes(rng.randint(0, 20))) for k in keys]
    for block_size in (1 << 20, 500):
        r = HFileReader(write_hfile(entries, block_size=block_size))
        cases = [[b"a$"], [b"ab$", b"b"], [b"m\xff"], [b"\xff"], [b"zz", b"a"], [b""], []]
        cases += [[r._index_rows[b] for b in range(0, r.data_block_count, 7)]]
        for prefixes in cases:
            rows, values = r.prefix_columns(prefixes)
            want = [(k, v) for k, v in entries if any(k.startswith(p) for p in prefixes)]
            assert list(zip(rows.to_pylist(), values.to_pylist(), strict=True)) == want


@pytest.mark.parametrize("compiled", [False, True])
def test_columns_split_blocks_alike_compiled_or_not(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``columns()`` gives the entries of ``items()`` through the compiled walk and through
    the plain loop: keys and values of every length (empty values, 2-byte row lengths), many
    blocks, an empty file; a damaged block is corrupt either way."""
    if compiled and not jit.enabled():
        pytest.skip("numba is not available (HOODIE_RAY_NO_JIT or not installed)")
    monkeypatch.setattr(hr_reader, "_use_kernel", lambda entries: compiled)
    rng = random.Random(11)
    keys = sorted({rng.randbytes(rng.randint(1, 300)) for _ in range(2000)})
    entries = [(k, rng.randbytes(rng.choice([0, 1, 7, 700]))) for k in keys]
    for block_size in (1 << 20, 3000):
        r = HFileReader(write_hfile(entries, block_size=block_size), "cols.hfile")
        rows, values = r.columns()
        assert rows.to_pylist() == keys and values.to_pylist() == [v for _, v in entries]
    rows, values = HFileReader(write_hfile([], allow_empty=True)).columns()
    assert len(rows) == len(values) == 0
    raw = _small_file("none")
    r = HFileReader(raw)
    at = raw.index(b"DATABLK*") + 33  # the first KeyValue's key length, made too short
    bad = raw[:at] + b"\x00\x00\x00\x01" + raw[at + 4 :]
    with pytest.raises(HoodieCorruptedDataError, match=r"HFile bad\.hfile is corrupt"):
        HFileReader(bad, "bad.hfile").columns()
    assert len(r.columns()[0]) == r.entry_count


def test_bloom_filter_bytes_are_the_per_key_models() -> None:
    """The filter's rows, bit by bit, as a per-key model sets them (each key's scalar bit
    positions in the row Java's InternalDynamicBloomFilter.add gives it: rows filled in turn,
    then reused round-robin), keys of mixed lengths."""
    rng = random.Random(5)
    keys = [rng.randbytes(rng.choice([3, 8, 13])) for _ in range(257)]
    num, cap = 20, 100
    ser = build_bloom_filter(keys, num_entries=num, fpp=0.01, max_entries=cap)
    raw = base64.b64decode(ser)
    _, nb_hash, _, size = struct.unpack_from(">iiBi", raw)
    max_rows = -(-cap // num)
    rows = [bytearray((size + 7) // 8) for _ in range(max_rows)]
    for j, k in enumerate(keys):
        filled = max_rows * num
        r = j // num if j < filled else (0 if j == filled else (j - filled - 1) % max_rows)
        for p in _positions_of(k, nb_hash, size):
            rows[r][p >> 3] |= 1 << (p & 7)
    assert [
        raw[25 + i * (13 + len(rows[0])) + 13 :][: len(rows[0])] for i in range(max_rows)
    ] == rows


def test_point_lookups_inflate_each_block_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks inflated for point lookups are kept by a digest of their compressed bytes: the
    same lookup on a new reader of the same file inflates nothing; another file whose blocks
    differ is never answered from them; past the cache's size the oldest go."""
    from hoodie_ray.hfile import reader as hr_reader

    cache = hr_reader._InflatedBlocks(1 << 20)
    monkeypatch.setattr(hr_reader, "INFLATED_BLOCKS", cache)
    inflated: list[int] = []
    real = _format.gzip_decompress

    def counting(data: bytes, size: int) -> bytes:
        if size > 1000:  # data blocks (the index and file info are inflated at open)
            inflated.append(size)
        return real(data, size)

    monkeypatch.setattr(hr_reader, "gzip_decompress", counting)
    rng = random.Random(21)
    keys = sorted({rng.randbytes(8) for _ in range(3000)})
    a = write_hfile([(k, b"a" + k) for k in keys], block_size=4000)
    b = write_hfile([(k, b"b" + k) for k in keys], block_size=4000)
    asked = rng.sample(keys, 5)
    assert HFileReader(a).get_many(asked) == {k: b"a" + k for k in asked}
    first = len(inflated)
    assert HFileReader(a).get_many(asked) == {k: b"a" + k for k in asked}
    assert len(inflated) == first  # every data block from the cache
    assert HFileReader(b).get_many(asked) == {k: b"b" + k for k in asked}
    assert len(inflated) > first
    assert cache._blocks.nbytes <= cache._blocks.max_bytes
    small = hr_reader._InflatedBlocks(7000)  # one 3000-byte block (twice that with spans)
    for i in range(5):
        data = bytes([i]) * 3000
        assert small.inflate(_format.gzip_compress(data), 3000).payload == data
    assert len(small._blocks) == 1 and small._blocks.nbytes == 6000


def test_gz_payloads_inflate_with_plain_zlib() -> None:
    """A GZ block from the default deflate (ISA-L where installed) is a gzip member any inflater
    reads, as Java's and hudi-rs's do; Java's deflate is zlib's at level 6."""
    data = b"".join(b"key-%08d|file-%d;" % (i, i % 7) for i in range(20_000))
    member = _format.gzip_compress(data)
    assert zlib.decompress(member, 31) == data
    assert _format.gzip_decompress(member, len(data)) == data
    assert _format.JAVA_DEFLATE(data) == zlib.compress(data, 6)[2:-4]
    assert zlib.decompress(_format.FAST_DEFLATE(data), -15) == data
