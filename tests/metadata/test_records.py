"""Metadata-table records (hoodie_ray.metadata.records) against Java's rules and the v9 sample.

The sample ``sample_mor_avro_v9_txns_complex_meta`` (written by Hudi Java 1.1 in a UTC-6 zone)
is read in place from ``../shared/tables``; tests that need it skip when it is absent.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieInputError
from hoodie_ray.hfile import HFileReader
from hoodie_ray.log_format import DeleteBlock, HeaderMetadataType, HFileDataBlock, read_log_bytes
from hoodie_ray.metadata import records as R
from tests.conftest import SHARED_TABLES

SAMPLE = "sample_mor_avro_v9_txns_complex_meta"
#: The sample's writer ran in a JVM at UTC-6 (CST) with the default LOCAL timeline zone.
WRITER_ZONE = dt.timezone(dt.timedelta(hours=-6))


# ---------------------------------------------------------------------------------------------
# The sample, read from the zip in place
# ---------------------------------------------------------------------------------------------


class Sample:
    """The v9 sample's files (table-relative path -> bytes) and decoded MDT contents."""

    def __init__(self, zpath: os.PathLike[str] | str) -> None:
        with zipfile.ZipFile(zpath) as z:
            names = [
                n for n in z.namelist() if not n.endswith("/") and not n.startswith("__MACOSX/")
            ]
            root = next(n for n in names if n.endswith(".hoodie/hoodie.properties"))
            prefix = root[: -len(".hoodie/hoodie.properties")]
            self.files = {n[len(prefix) :]: z.read(n) for n in names if n.startswith(prefix)}

    def data_files(self) -> dict[str, str]:
        """Data file name -> its partition path (every partition of the sample is one level)."""
        out = {}
        for p in self.files:
            if p.startswith(".hoodie/"):
                continue
            part, _, name = p.rpartition("/")
            if name.endswith(".parquet") or ".log." in name:
                out[name] = part
        return out

    def mdt_names(self, partition: str) -> list[str]:
        """File names of an MDT partition: base files by instant, then log files by instant."""
        pre = f".hoodie/metadata/{partition}/"
        names = [
            p[len(pre) :] for p in self.files if p.startswith(pre) and "/" not in p[len(pre) :]
        ]

        def order(n: str) -> tuple[int, str]:
            if n.endswith(".hfile"):
                return 0, n.rsplit("_", 1)[1]
            if ".log." in n:
                return 1, n.split("_", 1)[1].split(".log.")[0]
            return 2, n

        return sorted((n for n in names if order(n)[0] < 2), key=order)

    def mdt_bytes(self, partition: str, name: str) -> bytes:
        return self.files[f".hoodie/metadata/{partition}/{name}"]

    def mdt_values(self, partition: str) -> list[tuple[str, str, bytes, str]]:
        """``(MDT file name, key, value, writer schema JSON)`` of every HFile cell of an MDT
        partition, base files first then logs, in instant order."""
        out = []
        for n in self.mdt_names(partition):
            data = self.mdt_bytes(partition, n)
            if n.endswith(".hfile"):
                r = HFileReader(data, n)
                schema = r.file_info[b"schema"].decode()
                out += [(n, k.decode(), v, schema) for k, v in r.items()]
                continue
            for b in read_log_bytes(data, n):
                if isinstance(b, HFileDataBlock):
                    schema = b.header[HeaderMetadataType.SCHEMA]
                    out += [
                        (n, k.decode(), v, schema) for k, v in HFileReader(bytes(b.content)).items()
                    ]
        return out

    def avro(self, path: str) -> dict[str, Any]:
        return next(iter(fastavro.reader(io.BytesIO(self.files[path]))))  # type: ignore[no-any-return]


@lru_cache(maxsize=1)
def _load_sample() -> Sample | None:
    zpath = SHARED_TABLES / f"{SAMPLE}.zip"
    return Sample(zpath) if zpath.is_file() else None


@pytest.fixture(scope="module")
def sample() -> Sample:
    s = _load_sample()
    if s is None:
        pytest.skip(f"../shared/tables/{SAMPLE}.zip is absent (a fresh clone has no ../shared)")
    return s


def _strip_file_name(rec: dict[str, Any]) -> dict[str, Any]:
    """MDT compaction stamps ``_hoodie_file_name`` into base-file values; logs carry null."""
    out = dict(rec)
    out["_hoodie_file_name"] = None
    return out


# ---------------------------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------------------------


def _union_names(t: Any) -> list[str]:
    return [b if isinstance(b, str) else b.get("name", b.get("type")) for b in t]


def test_schema_versions_differ_only_in_value_type_and_array_wrapper() -> None:
    v8, v9 = R.metadata_schema(8), R.metadata_schema(9)
    assert len(R.metadata_schema_json(9)) == 8910
    assert len(R.metadata_schema_json(8)) == 7969
    names = [f["name"] for f in v9["fields"]]
    assert names == [
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
        "key",
        "type",
        "filesystemMetadata",
        "BloomFilterMetadata",
        "ColumnStatsMetadata",
        "recordIndexMetadata",
        "SecondaryIndexMetadata",
    ]
    cs9 = v9["fields"][9]["type"][1]
    cs8 = v8["fields"][9]["type"][1]
    assert [f["name"] for f in cs9["fields"]][-1] == "valueType"
    assert "valueType" not in [f["name"] for f in cs8["fields"]]
    assert _union_names(cs9["fields"][2]["type"])[-1] == "ArrayWrapper"
    assert _union_names(cs8["fields"][3]["type"]) == ["null", *R.WRAPPER_NAMES]
    # with those two removed, v9 is v8
    cs9["fields"] = [f for f in cs9["fields"] if f["name"] != "valueType"]
    for f in cs9["fields"][2:4]:
        f["type"] = [b for b in f["type"] if _union_names([b])[0] != "ArrayWrapper"]
    assert v9 == v8
    for v in (6, 8, 9):
        fastavro.parse_schema(R.metadata_schema(v))
    with pytest.raises(HoodieInputError):
        R.metadata_schema(7)


def test_v6_schema_is_v8_without_what_1_0_added() -> None:
    """Table version 6 (Hudi 0.14 / 0.15): no ``SecondaryIndexMetadata``, no record-index
    ``position``, no column-stats ``isTightBound``, no ``LocalDateWrapper`` branch (12)."""
    v6, v8 = R.metadata_schema(6), R.metadata_schema(8)
    assert [f["name"] for f in v6["fields"]] == [f["name"] for f in v8["fields"]][:-1]
    cs6, cs8 = v6["fields"][9]["type"][1], v8["fields"][9]["type"][1]
    assert [f["name"] for f in cs6["fields"]] == [
        f["name"] for f in cs8["fields"] if f["name"] != "isTightBound"
    ]
    for f in cs6["fields"][2:4]:
        assert _union_names(f["type"]) == ["null", *R.WRAPPER_NAMES[:-1]]
        assert len(f["type"]) == 12
    ri6, ri8 = v6["fields"][10]["type"][1], v8["fields"][10]["type"][1]
    assert [f["name"] for f in ri6["fields"]] == [f["name"] for f in ri8["fields"]][:-1]
    # a record-index value: v8's without its two trailing nulls (position, secondary index)
    v6_value = R.record_index_value("p", "f1", 1, 6)
    assert R.record_index_value("p", "f1", 1, 8) == v6_value + b"\x00\x00"


#: The v8 and v9 schema JSON (with meta fields) as the package wrote them before the schemas
#: became data tables; v9 is also Java's, byte for byte (test_v9_schema_is_the_one_java_wrote).
_PINNED_SCHEMAS = Path(__file__).parent / "data" / "metadata_record_schemas.json"


@pytest.mark.parametrize("version", [8, 9])
def test_schema_json_is_pinned_byte_for_byte(version: int) -> None:
    pinned = json.loads(_PINNED_SCHEMAS.read_text())[str(version)]
    assert R.metadata_schema_json(version) == pinned
    # without meta fields: the same record less its first five fields, in Java's compact JSON
    schema = json.loads(pinned)
    schema["fields"] = schema["fields"][5:]
    assert R.metadata_schema_json(version, meta_fields=False) == json.dumps(
        schema, separators=(",", ":"), ensure_ascii=False
    )


def _compare_schema(ours: Any, java: Any, path: str) -> None:
    """Field by field: names, types, union branch order, docs, defaults."""
    assert type(ours) is type(java), path
    if isinstance(java, dict):
        assert list(ours) == list(java), f"{path}: keys {list(ours)} != {list(java)}"
        for k in java:
            sub = f"{path}.{java.get('name', k)}" if k == "fields" else f"{path}/{k}"
            _compare_schema(ours[k], java[k], sub)
    elif isinstance(java, list):
        assert len(ours) == len(java), f"{path}: {len(ours)} != {len(java)} entries"
        for i, (a, b) in enumerate(zip(ours, java, strict=True)):
            _compare_schema(a, b, f"{path}[{i}]")
    else:
        assert ours == java, f"{path}: {ours!r} != {java!r}"


@pytest.mark.shared
def test_v9_schema_is_the_one_java_wrote(sample: Sample) -> None:
    seen = set()
    for part in ("files", "column_stats", "partition_stats", "record_index"):
        for n in sample.mdt_names(part):
            data = sample.mdt_bytes(part, n)
            if n.endswith(".hfile"):
                seen.add(HFileReader(data).file_info[b"schema"].decode())
            else:
                for b in read_log_bytes(data):
                    if HeaderMetadataType.SCHEMA in b.header:
                        seen.add(b.header[HeaderMetadataType.SCHEMA])
    assert len(seen) == 1
    java = seen.pop()
    _compare_schema(R.metadata_schema(9), json.loads(java), "HoodieMetadataRecord")
    assert R.metadata_schema_json(9) == java  # byte for byte
    # MDT commit metadata carries the schema without the meta fields
    commit = sample.avro(
        ".hoodie/metadata/.hoodie/timeline/20260307162628304_20260307162632564.deltacommit"
    )
    assert R.metadata_schema_json(9, meta_fields=False) == commit["extraMetadata"]["schema"]


# ---------------------------------------------------------------------------------------------
# Hashing: file groups and index ids
# ---------------------------------------------------------------------------------------------


def test_file_group_ids() -> None:
    assert R.file_group_id(R.MetadataPartitionType.FILES, 0) == "files-0000-0"
    assert R.file_group_id("record_index", 3) == "record-index-0003-0"
    assert R.file_group_id(R.MetadataPartitionType.COLUMN_STATS, 1) == "col-stats-0001-0"
    assert R.file_group_id("partition_stats", 0) == "partition-stats-0000-0"
    assert R.file_group_id("bloom_filters", 12) == "bloom-filters-0012-0"
    assert (
        R.file_group_id("secondary_index_merchant_idx", 6) == "secondary-index-merchant-idx-0006-0"
    )
    assert R.MetadataPartitionType.RECORD_INDEX.record_type == 5
    assert R.MetadataPartitionType.from_record_type(1) is R.MetadataPartitionType.FILES
    assert R.MetadataPartitionType.from_record_type(6) is R.MetadataPartitionType.PARTITION_STATS
    with pytest.raises(HoodieInputError):
        R.file_group_id("files", 10000)


def test_java_string_hash() -> None:
    assert R.java_string_hash("") == 0
    assert R.java_string_hash("a") == 97
    assert R.java_string_hash("hello") == 99162322
    assert R.java_string_hash("\U0001d11e") == 31 * 0xD834 + 0xDD1E  # two UTF-16 code units
    assert R.java_string_hash("polygenelubricants") == -(2**31)
    # Math.abs(Integer.MIN_VALUE) stays negative in Java: abs(MIN % 10) = 8
    assert R.key_to_file_group_index("polygenelubricants", 10) == 8
    assert R.key_to_file_group_index("txn_id:TXN-008,account_id:ACC-F", 10) == 0
    assert R.key_to_file_group_index("Spotify$", 10) == 0
    assert R.key_to_file_group_index("19737$", 10) == 3
    assert R.key_to_file_group_index("\x00$", 10) == 6


@pytest.mark.parametrize("compiled", [False, True])
def test_vectorised_file_group_indexes(compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Java's string hash of many keys, by the compiled kernel and by the numpy passes, is
    the one of each key: non-ASCII and astral characters, empty and long keys, slices."""
    from hoodie_ray import jit

    if compiled and not jit.enabled():
        pytest.skip("numba is not available (HOODIE_RAY_NO_JIT or not installed)")
    monkeypatch.setattr(R, "_use_kernel", lambda n: compiled)
    rng = np.random.default_rng(7)
    alphabet = [*"abcXYZ019:,-_$", "é", "漢", "\U0001d11e", "\x00"]
    keys = ["".join(rng.choice(alphabet, size=rng.integers(0, 60))) for _ in range(300)]
    keys += ["polygenelubricants", "", "x" * 500]
    ascii_keys = [k for k in keys if k.isascii()]
    for n in (1, 2, 10, 7):
        want = [R.key_to_file_group_index(k, n) for k in keys]
        assert R.key_to_file_group_indexes(keys, n).tolist() == want
        assert R.key_to_file_group_indexes(pa.array(keys), n).tolist() == want
        assert R.key_to_file_group_indexes(pa.array(keys, pa.large_string()), n).tolist() == want
        chunked = pa.chunked_array([pa.array(keys[:100]), pa.array(keys[100:])])
        assert R.key_to_file_group_indexes(chunked, n).tolist() == want
        want_ascii = [R.key_to_file_group_index(k, n) for k in ascii_keys]
        arr = pa.array(["pad", *ascii_keys]).slice(1)  # offset slice on the ASCII fast path
        assert R.key_to_file_group_indexes(arr, n).tolist() == want_ascii
    assert R.key_to_file_group_indexes([], 10).tolist() == []
    with pytest.raises(HoodieInputError):
        R.key_to_file_group_indexes(pa.array(["a", None]), 10)


def test_xxhash64_reference_vectors() -> None:
    assert R.xxhash64(b"") == 0xEF46DB3751D8E999
    assert R.xxhash64(b"a") == 0xD24EC4F1A98C6E5B
    assert R.xxhash64(b"Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1


def test_hash_id_puzzle_seed_is_sign_extended() -> None:
    """HashID.HASH_SEED is the Java int 0xdabadaba; passed to XXHash64.hash(..., long seed) it is
    sign-extended to 0xFFFFFFFFDABADABA. With that seed the spec's test vectors come out."""
    assert R.HASH_SEED == 0xFFFFFFFFDABADABA
    assert R.column_index_id("_hoodie_commit_time") == "JBBzUToHtLc="
    assert R.column_index_id("currency") == "/m6lxu4Dh5w="
    assert R.column_index_id("driver") == "AjpJ7N1gBZc="
    assert R.partition_index_id("region=us") == "431THTTwO5Q="
    # the unsigned 32-bit seed does not reproduce them
    unsigned = R.xxhash64(b"currency", 0xDABADABA).to_bytes(8, "big")
    assert R._b64(unsigned) != "/m6lxu4Dh5w="
    assert R.partition_index_id("") == R.column_index_id(".")  # non-partitioned -> "."
    assert R.file_index_id(
        ".39cc539f-61e9-4996-8096-4d89715c4142-0_20260307162634665.log.1_0-52-126"
    ) == ("AX0lK+7wSCzdUS/10hWEqQ==")
    key = R.column_stats_key("currency", "region=us", "f.parquet")
    assert len(key) == 48 and key.startswith("/m6lxu4Dh5w=431THTTwO5Q=")
    assert R.partition_stats_key("currency", "region=us") == "/m6lxu4Dh5w=431THTTwO5Q="
    assert R.bloom_filter_key("region=us", "f.parquet") == "431THTTwO5Q=" + R.file_index_id(
        "f.parquet"
    )


# ---------------------------------------------------------------------------------------------
# Instant times
# ---------------------------------------------------------------------------------------------


def test_instant_to_epoch_ms() -> None:
    assert R.instant_to_epoch_ms("20260307162628304", WRITER_ZONE) == 1772922388304
    assert R.instant_to_epoch_ms("20260307162628304", "UTC") == 1772922388304 - 6 * 3_600_000
    assert R.instant_to_epoch_ms("19700101000000000", "utc") == 0
    # second granularity gets 999 ms; longer MDT instants are cut to 17 digits
    assert R.instant_to_epoch_ms("19700101000001", "UTC") == 1999
    assert R.instant_to_epoch_ms("19700101000000001002", "UTC") == 1
    local = dt.datetime(2026, 3, 7, 16, 26, 28, 304000).astimezone()
    assert R.instant_to_epoch_ms("20260307162628304") == round(local.timestamp() * 1000)
    assert R.instant_to_epoch_ms("20260307162628304", None) == R.instant_to_epoch_ms(
        "20260307162628304", "LOCAL"
    )
    with pytest.raises(HoodieInputError):
        R.instant_to_epoch_ms("2026-03-07", "UTC")
    with pytest.raises(HoodieInputError):
        R.instant_to_epoch_ms("20260307162628304", "Europe/Paris")


def test_instant_to_epoch_ms_dst_like_local_date_time_at_zone() -> None:
    zoneinfo = pytest.importorskip("zoneinfo")
    try:
        chicago = zoneinfo.ZoneInfo("America/Chicago")
    except zoneinfo.ZoneInfoNotFoundError:
        pytest.skip("no time zone database")
    # the sample's zone: CST on 2026-03-07
    assert R.instant_to_epoch_ms("20260307162628304", chicago) == 1772922388304
    # gap (02:00 -> 03:00 on 2026-03-08): Java shifts 02:30 to 03:30 CDT = 08:30Z
    gap = dt.datetime(2026, 3, 8, 8, 30, tzinfo=dt.timezone.utc).timestamp() * 1000
    assert R.instant_to_epoch_ms("20260308023000000", chicago) == gap
    # overlap (01:00-02:00 twice on 2026-11-01): Java takes the earlier offset, CDT
    overlap = dt.datetime(2026, 11, 1, 6, 30, tzinfo=dt.timezone.utc).timestamp() * 1000
    assert R.instant_to_epoch_ms("20261101013000000", chicago) == overlap


# ---------------------------------------------------------------------------------------------
# Record index
# ---------------------------------------------------------------------------------------------


def test_record_index_encodings() -> None:
    key, rec = R.record_index_record(
        "txn_id:TXN-008,account_id:ACC-F",
        "region=apac",
        "dcae9272-b2c6-4f9d-b5b0-760a64ba5c3c-0",
        1772922388304,
    )
    assert key == "txn_id:TXN-008,account_id:ACC-F"
    assert rec["type"] == 5
    assert rec["recordIndexMetadata"] == {
        "partitionName": "region=apac",
        "fileIdHighBits": -2544935718094483555,
        "fileIdLowBits": -5354650169931834308,
        "fileIndex": 0,
        "fileId": "",
        "instantTime": 1772922388304,
        "fileIdEncoding": 0,
        "position": None,
    }
    assert R.decode_record_index(rec) == (
        "region=apac",
        "dcae9272-b2c6-4f9d-b5b0-760a64ba5c3c-0",
        1772922388304,
    )
    # a bare UUID: fileIndex -1, and back
    bare = "dcae9272-b2c6-4f9d-b5b0-760a64ba5c3c"
    _, rec = R.record_index_record("k", "p", bare, 5)
    assert rec["recordIndexMetadata"]["fileIndex"] == R.RECORD_INDEX_MISSING_FILEINDEX_FALLBACK
    assert R.decode_record_index(rec) == ("p", bare, 5)
    # other suffixes
    _, rec = R.record_index_record("k", "", f"{bare}-17", 5)
    assert R.decode_record_index(rec["recordIndexMetadata"]) == ("", f"{bare}-17", 5)
    # non-UUID ids fall back to the raw-string encoding
    for fid in ("files-0000-0", "not-a-uuid", "abc", f"{bare}-x"):
        _, rec = R.record_index_record("k", "p", fid, 7)
        info = rec["recordIndexMetadata"]
        assert (info["fileIdEncoding"], info["fileId"], info["fileIndex"]) == (1, fid, -1)
        assert (info["fileIdHighBits"], info["fileIdLowBits"]) == (-1, -1)
        assert R.decode_record_index(rec) == ("p", fid, 7)
    _, rec = R.record_index_record("k", "p", f"{bare}-0", 7, file_id_encoding=1)
    assert rec["recordIndexMetadata"]["fileIdEncoding"] == 1
    with pytest.raises(HoodieInputError):
        R.record_index_record("k", "p", "abc", 7, file_id_encoding=0)
    with pytest.raises(HoodieCorruptedDataError):
        R.decode_record_index({"type": 5})


@pytest.mark.shared
def test_record_index_values_match_the_sample(sample: Sample) -> None:
    files = sample.data_files()
    instants: dict[tuple[str, str], set[str]] = {}  # (partition, file id) -> instants
    for name, part in files.items():
        if name.endswith(".parquet"):
            fid, inst = name.split("_")[0], name.rsplit("_", 1)[1][:-8]
        else:
            fid, inst = name[1:].split("_")[0], name.split("_")[1].split(".log.")[0]
        instants.setdefault((part, fid), set()).add(inst)
    checked = 0
    for mdt_file, key, value, schema in sample.mdt_values("record_index"):
        got = R.decode_value(value, schema)
        part, fid, millis = R.decode_record_index(got)
        # the entry points at a file group of that partition written at that instant (UTC-6)
        assert millis in {R.instant_to_epoch_ms(i, WRITER_ZONE) for i in instants[(part, fid)]}
        group = int(mdt_file.lstrip(".").split("-")[2])
        assert R.key_to_file_group_index(key, 10) == group
        k, rebuilt = R.record_index_record(key, part, fid, millis)
        assert k == key
        want = R.encode_records([_strip_file_name(got)], 9)[0]
        assert R.encode_records([rebuilt], 9)[0] == want
        if got["_hoodie_file_name"] is None:
            assert R.encode_records([rebuilt], schema)[0] == value  # byte for byte
        checked += 1
    assert checked >= 34


@pytest.mark.shared
def test_delete_blocks_match_the_sample(sample: Sample) -> None:
    blocks = 0
    for part in ("record_index", "secondary_index_merchant_idx", "files"):
        for n in sample.mdt_names(part):
            if n.endswith(".hfile"):
                continue
            for b in read_log_bytes(sample.mdt_bytes(part, n)):
                if not isinstance(b, DeleteBlock):
                    continue
                content = bytes(b.content)  # type: ignore[arg-type]
                pairs = R.decode_delete_record_list(content)
                keys = [k for k, _ in pairs]
                if keys:
                    assert {p for _, p in pairs} == {part}  # the MDT partition, not the data one
                assert R.delete_record_list_bytes(keys, part) == content
                blocks += 1
    assert blocks >= 20
    assert R.delete_record_list_bytes([], "files") == bytes.fromhex("000000030000000100")


def test_delete_record_list_round_trip() -> None:
    data = R.delete_record_list_bytes(["a", "é$b"], "record_index")
    assert R.decode_delete_record_list(data) == [("a", "record_index"), ("é$b", "record_index")]
    # orderingVal is IntWrapper{0}: branch 2 (zigzag 0x04) then int 0
    assert data.endswith(b"\x04\x00\x00")
    with pytest.raises(HoodieCorruptedDataError):
        R.decode_delete_record_list(b"\x00\x00\x00\x02\x00\x00\x00\x00")


# ---------------------------------------------------------------------------------------------
# files partition
# ---------------------------------------------------------------------------------------------


def test_files_records() -> None:
    key, rec = R.all_partitions_record(["region=apac", "region=eu", "region=us"])
    assert key == R.ALL_PARTITIONS_KEY and rec["type"] == 1
    # Java's HashMap order, as in the sample's logs
    assert list(rec["filesystemMetadata"]) == ["region=eu", "region=us", "region=apac"]
    assert rec["filesystemMetadata"]["region=eu"] == {"size": 0, "isDeleted": False}
    key, rec = R.all_partitions_record([""], deleted=["old"])
    assert rec["filesystemMetadata"] == {
        ".": {"size": 0, "isDeleted": False},
        "old": {"size": 0, "isDeleted": True},
    }
    key, rec = R.files_record("", {"a.parquet": 10}, ["b.parquet"])
    assert key == R.NON_PARTITIONED_NAME and rec["type"] == 2
    assert rec["filesystemMetadata"] == {
        "a.parquet": {"size": 10, "isDeleted": False},
        "b.parquet": {"size": 0, "isDeleted": True},
    }
    with pytest.raises(HoodieInputError):
        R.files_record("p", {"empty.parquet": 0})
    with pytest.raises(HoodieInputError):
        R.files_record("p", {"p/a.parquet": 1})
    # many keys: still a permutation, in Java HashMap bucket order
    names = [f"f{i}.parquet" for i in range(100)]
    _, rec = R.files_record("p", dict.fromkeys(names, 1))
    assert sorted(rec["filesystemMetadata"]) == sorted(names)


def test_merge_files_records() -> None:
    def rec(t: int, **m: tuple[int, bool]) -> dict[str, Any]:
        return {
            "key": "",
            "type": t,
            "filesystemMetadata": {
                k.replace("_", "."): {"size": s, "isDeleted": d} for k, (s, d) in m.items()
            },
        }

    older = rec(2, a_parquet=(10, False), b_parquet=(5, False), c_log=(0, True))
    newer = rec(
        2,
        a_parquet=(7, False),
        b_parquet=(0, True),
        c_log=(0, True),
        d_log=(3, False),
        e_log=(0, True),
    )
    got = R.merge_files_records(older, newer)["filesystemMetadata"]
    assert got == {
        "a.parquet": {"size": 10, "isDeleted": False},  # max size
        # b.parquet dropped: tombstone over a live entry
        "c.log": {"size": 0, "isDeleted": True},  # repeated delete keeps the tombstone
        "d.log": {"size": 3, "isDeleted": False},
        "e.log": {"size": 0, "isDeleted": True},  # tombstone without an earlier entry is kept
    }
    # a live entry after a tombstone revives the file
    got = R.merge_files_records(rec(2, x_log=(0, True)), rec(2, x_log=(4, False)))
    assert got["filesystemMetadata"] == {"x.log": {"size": 4, "isDeleted": False}}
    with pytest.raises(HoodieInputError):
        R.merge_files_records(older, rec(2, z_log=(0, False)))
    # partition lists (size 0 is fine there)
    got = R.merge_files_records(rec(1, p1=(0, False)), rec(1, p2=(0, False)))
    assert set(got["filesystemMetadata"]) == {"p1", "p2"} and got["type"] == 1


@pytest.mark.shared
def test_files_partition_matches_the_sample(sample: Sample) -> None:
    values = sample.mdt_values("files")
    # 1. every log record is what all_partitions_record / files_record build, byte for byte
    rebuilt = 0
    for mdt_file, key, value, schema in values:
        got = R.decode_value(value, schema)
        assert got["key"] == ""
        fsm = got["filesystemMetadata"]
        if not mdt_file.startswith("."):
            continue
        if key == R.ALL_PARTITIONS_KEY:
            k, rec = R.all_partitions_record([p for p, i in fsm.items() if not i["isDeleted"]])
        else:
            k, rec = R.files_record(
                key,
                {f: i["size"] for f, i in fsm.items() if not i["isDeleted"]},
                [f for f, i in fsm.items() if i["isDeleted"]],
            )
        assert k == key
        assert R.encode_records([rec], schema)[0] == value
        rebuilt += 1
    assert rebuilt >= 30
    # 2. merging the bootstrap base file and the logs the MDT compaction 20260307162643148 took
    # (all before 20260307162643123, still inflight when it was planned) gives its base file
    compacted = "files-0000-0_13-170-402_20260307162643148.hfile"
    state: dict[str, dict[str, Any]] = {}
    for mdt_file, key, value, schema in values:
        if mdt_file == compacted or "20260307162643123" in mdt_file:
            continue
        inst = mdt_file.split("_", 1)[1].split(".log.")[0] if mdt_file.startswith(".") else "0"
        if inst > "20260307162643148":
            continue
        rec = R.decode_value(value, schema)
        state[key] = R.merge_files_records(state[key], rec) if key in state else rec
    base = {k: R.decode_value(v, s) for f, k, v, s in values if f == compacted}
    assert {k: r["filesystemMetadata"] for k, r in state.items()} == {
        k: r["filesystemMetadata"] for k, r in base.items()
    }
    # 3. the final listing (base file + every later log) is the data table's file listing
    final: dict[str, dict[str, Any]] = {}
    for mdt_file, key, value, schema in values:
        if mdt_file.startswith("files-0000-0_0-5-4"):
            continue  # superseded by the compacted base file
        rec = R.decode_value(value, schema)
        final[key] = R.merge_files_records(final[key], rec) if key in final else rec
    listing: dict[str, dict[str, int]] = {}
    for name, part in sample.data_files().items():
        listing.setdefault(part, {})[name] = len(sample.files[f"{part}/{name}"])
    assert set(final[R.ALL_PARTITIONS_KEY]["filesystemMetadata"]) == set(listing)
    for part, names in listing.items():
        fsm = final[part]["filesystemMetadata"]
        assert {f: i["size"] for f, i in fsm.items() if not i["isDeleted"]} == names


# ---------------------------------------------------------------------------------------------
# Avro values
# ---------------------------------------------------------------------------------------------


def test_encode_decode_round_trip_both_versions() -> None:
    _, rec = R.files_record("p", {"a.parquet": 123})
    rec["key"] = "ignored"  # Java writes "" (the HFile row holds the key)
    stats = {
        "fileName": "f",
        "columnName": "c",
        "minValue": ("LongWrapper", {"value": -5}),
        "maxValue": ("org.apache.hudi.avro.model.LongWrapper", {"value": 9}),
        "valueCount": 2,
        "nullCount": 0,
        "totalSize": 1,
        "totalUncompressedSize": 1,
        "isDeleted": False,
        "isTightBound": False,
    }
    for version in (8, 9):
        cs = dict(stats)
        if version == 9:
            cs["valueType"] = {"typeOrdinal": 4, "additionalInfo": None}
        cs_rec = {"type": 3, "ColumnStatsMetadata": cs}
        enc = R.encode_records([rec, cs_rec], version)
        back = [R.decode_value(v, version) for v in enc]
        assert back[0]["key"] == "" and back[0]["filesystemMetadata"] == rec["filesystemMetadata"]
        assert back[1]["ColumnStatsMetadata"]["maxValue"] == (
            "org.apache.hudi.avro.model.LongWrapper",
            {"value": 9},
        )
        assert R.encode_records(back, R.metadata_schema(version)) == enc
        assert not R.is_deleted_record(back[1])
    with pytest.raises(HoodieCorruptedDataError):
        R.decode_value(enc[0] + b"\x00", 9)
    with pytest.raises(HoodieInputError):
        R.encode_records([{"type": "x"}], 9)
    assert R.is_deleted_record({"SecondaryIndexMetadata": {"isDeleted": True}})


@pytest.mark.shared
def test_every_sample_value_re_encodes_identically(sample: Sample) -> None:
    parts = [
        p.split("/")[2]
        for p in sample.files
        if p.startswith(".hoodie/metadata/") and p.endswith(".hoodie_partition_metadata")
    ]
    assert len(parts) == 6
    n = 0
    for part in parts:
        for _, _key, value, schema in sample.mdt_values(part):
            rec = R.decode_value(value, schema)
            assert rec["key"] == ""
            assert R.encode_records([rec], schema)[0] == value
            n += 1
    assert n > 600


@pytest.mark.shared
def test_index_keys_match_the_sample(sample: Sample) -> None:
    """Every column_stats key is column id + partition id + file id (the partition found in
    the data table's listing); every partition_stats key is column id + partition id; each sits
    in the file group its key hashes to."""
    where = sample.data_files()
    n = 0
    for mdt_file, key, value, schema in sample.mdt_values("column_stats"):
        cs = R.decode_value(value, schema)["ColumnStatsMetadata"]
        part = where[cs["fileName"]]
        assert key == R.column_stats_key(cs["columnName"], part, cs["fileName"])
        assert R.key_to_file_group_index(key, 2) == int(mdt_file.lstrip(".").split("-")[2])
        n += 1
    assert n == 432
    for _, key, value, schema in sample.mdt_values("partition_stats"):
        cs = R.decode_value(value, schema)["ColumnStatsMetadata"]
        assert key == R.partition_stats_key(cs["columnName"], cs["fileName"])
        assert cs["isTightBound"] is True


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="ab\x00é", max_size=12),
            st.text(alphabet="xy", max_size=12).map(lambda s: "prefix-common-" + s),
            st.text(alphabet="0123456789", min_size=9, max_size=9).map(lambda s: "key-" + s),
            st.sampled_from(["", "key-", "key-000000000", "key-0000000000", "key-00000000000x"]),
            st.just(""),
        ),
        max_size=60,
    ),
    st.booleans(),
    st.integers(0, 3),
)
def test_byte_order_is_arrows_stable_sort(keys: list[str], large: bool, cut: int) -> None:
    """The prefix-word sort orders keys as Arrow's stable string sort does (repeats in input
    order; keys that differ only past the word, by their length, by a NUL byte; sliced
    arrays), and says when keys may repeat."""
    pad = ["pad" if keys and keys[0] else ""] * cut  # all-empty keys: no data buffer at all
    arr = pa.array(pad + keys, pa.large_string() if large else pa.string())[cut:]
    order, maybe = R.byte_order(arr)
    assert order.tolist() == pc.sort_indices(arr).to_numpy().tolist()
    if len(set(keys)) < len(keys):
        assert maybe
