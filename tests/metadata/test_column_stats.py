"""Column and partition statistics (hoodie_ray.metadata.column_stats) against Java's rules and
the v9 sample's ``column_stats`` / ``partition_stats`` partitions."""

from __future__ import annotations

import decimal
import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie_ray.exceptions import HoodieInputError
from hoodie_ray.log_format import AvroDataBlock, read_log_bytes
from hoodie_ray.metadata import column_stats as C
from hoodie_ray.metadata import records as R
from tests.metadata.test_records import Sample, _load_sample, _strip_file_name

NS = "org.apache.hudi.avro.model."


@pytest.fixture(scope="module")
def sample() -> Sample:
    s = _load_sample()
    if s is None:
        pytest.skip(
            "../shared/tables/sample_mor_avro_v9_txns_complex_meta.zip is absent "
            "(a fresh clone has no ../shared)"
        )
    return s


def _final_values(sample: Sample, partition: str) -> dict[str, dict[str, Any]]:
    """The newest value of every key of an MDT partition (base file, then logs in order)."""
    out: dict[str, dict[str, Any]] = {}
    for _, key, value, schema in sample.mdt_values(partition):
        out[key] = R.decode_value(value, schema)
    return out


def _bytes(records: list[tuple[str, dict[str, Any]]]) -> dict[str, bytes]:
    return dict(
        zip([k for k, _ in records], R.encode_records([r for _, r in records], 9), strict=True)
    )


def _log_table(sample: Sample, path: str, schema: pa.Schema) -> pa.Table:
    """The records written in a data log file (its Avro data blocks), empty if it only deletes."""
    tables = [b.records for b in read_log_bytes(sample.files[path]) if isinstance(b, AvroDataBlock)]
    return pa.concat_tables(tables) if tables else schema.empty_table()


@pytest.mark.shared
def test_every_data_file_matches_the_sample(sample: Sample) -> None:
    """Base files from their Parquet footers, log files from the records written in them: every
    computed record equals the sample's value byte for byte (base-file values of the compacted
    MDT carry their own file name in ``_hoodie_file_name``, which is set aside)."""
    final = _final_values(sample, "column_stats")
    schema = None
    files = sample.data_files()
    for name in sorted(files, key=lambda n: ".log." in n):  # Parquet first: gives the schema
        part = files[name]
        path = f"{part}/{name}"
        if name.endswith(".parquet"):
            md = pq.ParquetFile(io.BytesIO(sample.files[path])).metadata
            schema = md.schema.to_arrow_schema()
            recs = C.column_stats_records(part, name, parquet_metadata=md, table_version=9)
        else:
            assert schema is not None
            recs = C.column_stats_records(
                part, name, _log_table(sample, path, schema), table_version=9
            )
        assert len(recs) == 16, name
        for key, got in _bytes(recs).items():
            want = R.encode_records([_strip_file_name(final.pop(key))], 9)[0]
            assert got == want, (name, key)
    assert final == {}  # every record of the sample was produced


@pytest.mark.shared
def test_indexed_columns_and_value_types(sample: Sample) -> None:
    path = next(p for p in sample.files if p.endswith("_1-27-53_20260307162628304.parquet"))
    md = pq.ParquetFile(io.BytesIO(sample.files[path])).metadata
    cols = C.columns_to_index(md.schema.to_arrow_schema())
    # as listed in the sample's .hoodie/.index_defs/index.json
    assert cols == [
        "_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key", "txn_id",
        "account_id", "txn_ts", "txn_datetime", "txn_date", "amount", "currency", "txn_type",
        "merchant_name", "is_international", "fee_amount", "txn_metadata", "region",
    ]  # fmt: skip
    recs = dict(C.column_stats_records("region=us", "f.parquet", None, md, table_version=9))
    by_col = {
        r["ColumnStatsMetadata"]["columnName"]: r["ColumnStatsMetadata"] for r in recs.values()
    }
    vt = {
        c: (s["valueType"]["typeOrdinal"], s["valueType"]["additionalInfo"])
        for c, s in by_col.items()
    }
    assert vt["txn_ts"] == (4, None)
    assert vt["txn_datetime"] == (16, None)
    assert vt["txn_date"] == (12, None)
    assert vt["amount"] == (10, "15,2")
    assert vt["fee_amount"] == (10, "10,2")
    assert vt["is_international"] == (2, None)
    assert vt["currency"] == (7, None)
    amount = by_col["amount"]
    assert amount["minValue"] == (NS + "BytesWrapper", {"value": (8999).to_bytes(2, "big")})
    assert amount["maxValue"] == (NS + "BytesWrapper", {"value": (500000).to_bytes(3, "big")})
    assert by_col["fee_amount"]["minValue"] == (NS + "BytesWrapper", {"value": b"\x00"})
    assert by_col["merchant_name"]["valueCount"] == 3 and by_col["merchant_name"]["nullCount"] == 1


def _instant(name: str) -> str:
    if name.endswith(".parquet"):
        return name.rsplit("_", 1)[1][: -len(".parquet")]
    return name.split("_")[1].split(".log.")[0]


def _file_id(name: str) -> str:
    return name.split("_")[0] if name.endswith(".parquet") else name[1:].split("_")[0]


@pytest.mark.shared
def test_partition_stats_match_the_sample(sample: Sample) -> None:
    """Every partition_stats record Java wrote at instant T aggregates the column stats of the
    files in the partition's latest file slices at T: the newest base file of each file group
    up to T and the log files after it. File groups a replacecommit replaced drop out only
    after it: the replacecommit's own records still count them (clustering ``...49840`` wrote
    8 values for region=apac, its 4 new rows plus the 4 rows of the 2 groups it replaced), so
    Java's partition stats are not exact right after a clustering or insert_overwrite."""
    by_file: dict[str, list[dict[str, Any]]] = {}
    for rec in _final_values(sample, "column_stats").values():
        cs = rec["ColumnStatsMetadata"]
        by_file.setdefault(cs["fileName"], []).append(cs)
    files = sample.data_files()
    replaced_at: dict[str, str] = {}
    for p in sample.files:
        if p.startswith(".hoodie/timeline/") and p.endswith(".replacecommit"):
            at = p.rsplit("/", 1)[1].split("_")[0]
            for ids in sample.avro(p)["partitionToReplaceFileIds"].values():
                replaced_at.update(dict.fromkeys(ids, at))

    def slice_files(part: str, t: str) -> list[str]:
        groups: dict[str, list[str]] = {}
        for n, p in files.items():
            fid = _file_id(n)
            if p == part and _instant(n) <= t and replaced_at.get(fid, "~") >= t:
                groups.setdefault(fid, []).append(n)
        out = []
        for names in groups.values():
            base = max((n for n in names if n.endswith(".parquet")), key=_instant, default=None)
            since = _instant(base) if base else ""
            out += [n for n in names if n == base or (".log." in n and _instant(n) >= since)]
        return out

    checked = 0
    for mdt_file, key, value, schema in sample.mdt_values("partition_stats"):
        rec = R.decode_value(value, schema)
        cs = rec["ColumnStatsMetadata"]
        assert cs["isTightBound"] is True
        if not mdt_file.startswith("."):
            continue  # the MDT compaction's base file: merged log records, checked below
        t = mdt_file.split("_")[1].split(".log.")[0]
        part = cs["fileName"]
        stats = [
            s
            for n in slice_files(part, t)
            for s in by_file[n]
            if s["columnName"] == cs["columnName"]
        ]
        ((k, built),) = C.partition_stats_records(part, stats, 9)
        assert k == key
        assert R.encode_records([built], 9) == R.encode_records([rec], 9), (
            t,
            part,
            cs["columnName"],
        )
        checked += 1
    assert checked == 19 * 16
    # partition_stats records are tight bound: the newest replaces older ones when merged
    final = _final_values(sample, "partition_stats")
    newest: dict[str, dict[str, Any]] = {}
    for _, key, value, schema in sample.mdt_values("partition_stats"):
        rec = R.decode_value(value, schema)
        newest[key] = C.merge_column_stats(newest[key], rec) if key in newest else rec
    assert {k: _strip_file_name(v) for k, v in newest.items()} == {
        k: _strip_file_name(v) for k, v in final.items()
    }


def _parquet(table: pa.Table, **kw: Any) -> Any:
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)
    return pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata


def _stats(records: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {r["ColumnStatsMetadata"]["columnName"]: r["ColumnStatsMetadata"] for _, r in records}


def test_parquet_row_groups_merge_and_all_null_chunks() -> None:
    t = pa.table(
        {
            "s": pa.array(["m", "b", None, "z", "c", None], pa.string()),
            "n": pa.array([None, None, None, None, None, None], pa.int64()),
            "t": pa.array([None] * 6, pa.string()),
            "d": pa.array(
                [decimal.Decimal("-1.50"), None, decimal.Decimal("2.25"), None, None, None],
                pa.decimal128(9, 2),
            ),
        }
    )
    md = _parquet(t, row_group_size=2)
    assert md.num_row_groups == 3
    s = _stats(
        C.column_stats_records(
            "p", "f.parquet", None, md, table_version=9, columns=["s", "n", "t", "d"]
        )
    )
    assert s["s"]["minValue"] == (NS + "StringWrapper", {"value": "b"})
    assert s["s"]["maxValue"] == (NS + "StringWrapper", {"value": "z"})
    assert (s["s"]["valueCount"], s["s"]["nullCount"]) == (6, 2)
    sizes = [md.row_group(g).column(0).total_compressed_size for g in range(3)]
    assert s["s"]["totalSize"] == sum(sizes)
    # parquet-mr statistics without min/max keep their defaults: 0 for INT64, null for BINARY
    assert s["n"]["minValue"] == (NS + "LongWrapper", {"value": 0})
    assert s["t"]["minValue"] is None and s["t"]["nullCount"] == 6
    # decimals: unscaled two's complement at the column's scale, ordered numerically
    assert s["d"]["minValue"] == (
        NS + "BytesWrapper",
        {"value": (-150).to_bytes(2, "big", signed=True)},
    )
    assert s["d"]["maxValue"] == (
        NS + "BytesWrapper",
        {"value": (225).to_bytes(2, "big", signed=True)},
    )
    # no statistics at all: every value counted null
    md = _parquet(t.select(["s"]), write_statistics=False)
    (rec,) = C.column_stats_records("p", "f.parquet", None, md, table_version=9, columns=["s"])
    cs = rec[1]["ColumnStatsMetadata"]
    assert cs["minValue"] is None and cs["nullCount"] == cs["valueCount"] == 6


def test_log_records_ranges() -> None:
    t = pa.table(
        {
            "_hoodie_commit_time": ["2", "1", "3"],
            "b": pa.array([b"\x7f", b"\x80", None], pa.binary()),
            "x": pa.array([2.5, None, -0.0], pa.float64()),
            "ts": pa.array([3_000_000, 1_000_000, None], pa.timestamp("us", tz="UTC")),
            "ms": pa.array([3, 1, 2], pa.timestamp("ms", tz="UTC")),
            "day": pa.array([19737, None, 19000], pa.date32()),
            "d": pa.array(
                [decimal.Decimal("-0.01"), decimal.Decimal("123456789012.34"), None],
                pa.decimal128(14, 2),
            ),
            "nested": pa.array([[1], [2], None], pa.list_(pa.int64())),
        }
    )
    cols = C.columns_to_index(t.schema, populate_meta_fields=False)
    assert cols == ["b", "x", "ts", "ms", "day", "d"]
    s = _stats(
        C.column_stats_records(
            "p", ".f.log.1_0-1-1", t, table_version=9, columns=["_hoodie_commit_time", *cols]
        )
    )
    assert s["_hoodie_commit_time"]["minValue"] == (NS + "StringWrapper", {"value": "1"})
    # Avro compares bytes as signed (ByteBuffer.compareTo): 0x80 < 0x7f
    assert s["b"]["minValue"] == (NS + "BytesWrapper", {"value": b"\x80"})
    assert s["b"]["valueType"]["typeOrdinal"] == 8
    assert s["x"]["minValue"] == (NS + "DoubleWrapper", {"value": -0.0})
    assert s["ts"]["maxValue"] == (NS + "LongWrapper", {"value": 3_000_000})
    assert s["ts"]["valueType"]["typeOrdinal"] == 16
    assert s["ms"]["valueType"]["typeOrdinal"] == 15
    assert s["day"]["minValue"] == (NS + "IntWrapper", {"value": 19000})
    assert s["d"]["minValue"] == (NS + "BytesWrapper", {"value": b"\xff"})
    assert s["d"]["maxValue"] == (
        NS + "BytesWrapper",
        {"value": (12345678901234).to_bytes(6, "big")},
    )
    assert s["d"]["valueType"] == {"typeOrdinal": 10, "additionalInfo": "14,2"}
    for c in s.values():
        assert (c["valueCount"], c["totalSize"], c["totalUncompressedSize"]) == (3, 0, 0)
    assert s["ts"]["nullCount"] == 1
    # a delete-only log file: empty ranges of value type NULL
    e = _stats(
        C.column_stats_records(
            "p", ".g.log.1_0-1-1", t.schema.empty_table(), table_version=9, columns=cols
        )
    )
    assert all(
        c["minValue"] is None and c["valueCount"] == 0 and c["valueType"]["typeOrdinal"] == 1
        for c in e.values()
    )


def test_table_version_8_form() -> None:
    t = pa.table(
        {
            "day": pa.array([19737, 19000], pa.date32()),
            "d": pa.array([decimal.Decimal("1.50"), decimal.Decimal("-2.25")], pa.decimal128(9, 2)),
            "s": ["a", "b"],
            "ts": pa.array([5, 6], pa.timestamp("us", tz="UTC")),
        }
    )
    md = _parquet(t)
    for recs in (
        C.column_stats_records("p", "f.parquet", None, md, table_version=8, columns=t.column_names),
        C.column_stats_records("p", ".f.log.1", t, table_version=8, columns=t.column_names),
    ):
        s = _stats(recs)
        assert all("valueType" not in c for c in s.values())
        assert s["day"]["minValue"] == (NS + "DateWrapper", {"value": 19000})
        assert s["d"]["minValue"] == (NS + "DecimalWrapper", {"value": decimal.Decimal("-2.25")})
        assert s["s"]["maxValue"] == (NS + "StringWrapper", {"value": "b"})
        assert s["ts"]["maxValue"] == (NS + "LongWrapper", {"value": 6})
        enc = R.encode_records([r for _, r in recs], 8)
        back = R.decode_value(enc[1], 8)["ColumnStatsMetadata"]
        assert back["minValue"] == (
            NS + "DecimalWrapper",
            {"value": decimal.Decimal("-2.250000000000000")},
        )
    # the decimal is stored rescaled to decimal(30,15): unscaled -2.25e15 as two's complement
    raw = R.encode_records([recs[1][1]], 8)[0]
    assert (-2_250_000_000_000_000).to_bytes(7, "big", signed=True) in raw


def test_columns_to_index() -> None:
    fields = [pa.field(n, pa.string()) for n in ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                                   "_hoodie_partition_path", "_hoodie_file_name")]  # fmt: skip
    fields += [pa.field(f"c{i}", pa.int64()) for i in range(40)]
    fields += [
        pa.field("wide", pa.decimal128(20, 4)),  # 20 + (15 - 4) > 30: not indexed
        pa.field("st", pa.struct([("a", pa.int32())])),
        pa.field("m", pa.map_(pa.string(), pa.int32())),
    ]
    schema = pa.schema(fields)
    cols = C.columns_to_index(schema)
    assert cols[:3] == list(C.META_COLUMNS_TO_INDEX)
    assert cols[3:] == [f"c{i}" for i in range(32)]
    assert C.columns_to_index(schema, populate_meta_fields=False, max_columns=2) == ["c0", "c1"]
    assert C.columns_to_index(schema, column_list=["c39", "wide", "_hoodie_record_key", "c1"]) == [
        *C.META_COLUMNS_TO_INDEX, "c39", "c1",
    ]  # fmt: skip
    assert "wide" in C.columns_to_index(pa.schema([pa.field("wide", pa.decimal128(30, 15))]))
    with pytest.raises(HoodieInputError):
        C.columns_to_index(schema, column_list=["nope"])


def test_tombstones_and_merging() -> None:
    ((key, rec),) = C.column_stats_tombstones("region=us", "f.parquet", ["amount"])
    assert key == R.column_stats_key("amount", "region=us", "f.parquet")
    cs = rec["ColumnStatsMetadata"]
    assert cs["isDeleted"] is True and cs["minValue"] is None and cs["maxValue"] is None
    assert (cs["valueCount"], cs["nullCount"], cs["totalSize"], cs["totalUncompressedSize"]) == (
        -1,
        -1,
        -1,
        -1,
    )
    assert cs["valueType"] == {"typeOrdinal": 1, "additionalInfo": None}
    assert R.is_deleted_record(rec)
    ((_, rec8),) = C.column_stats_tombstones("p", "f", ["c"], table_version=8)
    assert "valueType" not in rec8["ColumnStatsMetadata"]
    R.encode_records([rec], 9)
    R.encode_records([rec8], 8)

    t1 = pa.table({"s": ["b", "q"], "v": pa.array([5, None], pa.int64())})
    t2 = pa.table({"s": ["a", "c"], "v": pa.array([9, 7], pa.int64())})
    a = _stats(C.column_stats_records("p", "f", t1, table_version=9, columns=["s", "v"]))
    b = _stats(C.column_stats_records("p", "f", t2, table_version=9, columns=["s", "v"]))
    m = C.merge_column_stats(a["s"], b["s"])
    assert m["minValue"][1]["value"] == "a" and m["maxValue"][1]["value"] == "q"
    assert (m["valueCount"], m["nullCount"]) == (4, 0)
    m = C.merge_column_stats(a["v"], b["v"])
    assert (m["minValue"][1]["value"], m["maxValue"][1]["value"], m["nullCount"]) == (5, 9, 1)
    tomb = C.column_stats_tombstones("p", "f", ["s"])[0][1]["ColumnStatsMetadata"]
    assert C.merge_column_stats(a["s"], tomb) == tomb
    assert C.merge_column_stats(tomb, b["s"]) == b["s"]
    tight = dict(b["s"], isTightBound=True)
    assert C.merge_column_stats(a["s"], tight) == tight
    with pytest.raises(HoodieInputError):
        C.merge_column_stats(a["s"], b["v"])
    # partition stats: sums, min of mins; tombstones and empty (delete-only) ranges handled
    empty = _stats(
        C.column_stats_records("p", "g", t1.schema.empty_table(), table_version=9, columns=["s"])
    )["s"]
    ((pkey, prec),) = C.partition_stats_records("p", [empty, a["s"], b["s"], tomb], 9)
    ps = prec["ColumnStatsMetadata"]
    assert pkey == R.partition_stats_key("s", "p") and ps["fileName"] == "p" and ps["isTightBound"]
    assert (ps["minValue"][1]["value"], ps["maxValue"][1]["value"], ps["valueCount"]) == (
        "a",
        "q",
        4,
    )
    assert ps["valueType"]["typeOrdinal"] == 7
    with pytest.raises(HoodieInputError):
        C.column_stats_records("p", "f", table_version=9)
    with pytest.raises(HoodieInputError):
        C.column_stats_records("p", "f", t1, table_version=7)
