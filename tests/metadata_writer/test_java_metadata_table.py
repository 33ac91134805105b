"""Appending to a Java-written version 9 table that keeps a full metadata table (files,
column_stats, partition_stats, record_index, two secondary indexes): every partition hoodie_ray
maintains stays exactly what the data says, and hudi-rs reads the expected rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import hoodie_ray as hr
from hoodie_ray.job import maintenance
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.meta import META_FIELDS
from hoodie_ray.table import HoodieTable
from tests.conftest import extract_sample_table, hudi_rs_read

JAVA = "sample_mor_avro_v9_txns_complex_meta"
SECONDARY = ("secondary_index_merchant_idx", "secondary_index_txn_date_idx")


def _rows(t: pa.Table) -> dict[str, dict]:
    t = t.drop_columns([c for c in META_FIELDS if c in t.column_names])
    return {(r["txn_id"], r["account_id"]): r for r in t.to_pylist()}


def _check(root: Path, expected: dict, step: str) -> None:
    diffs = maintenance.validate_metadata(str(root))
    assert not diffs, f"{step}: " + "; ".join(str(d)[:300] for d in diffs[:5])
    got = _rows(hudi_rs_read(root))
    assert got == expected, f"{step}: hudi-rs differs"


def test_append_upserts_deletes_and_compaction_keep_javas_metadata_table(tmp_path):
    root = extract_sample_table(JAVA, tmp_path / "java")
    base = hudi_rs_read(root)
    expected = _rows(base)
    # The untouched Java table: our reader and validator agree with Java's metadata table.
    # (The partition stats its clustering wrote still count the file groups it replaced,
    # computed while the replace commit was pending: they cover the live files, which is
    # what partition stats must do.)
    assert maintenance.validate_metadata(str(root)) == []

    data = base.drop_columns([c for c in META_FIELDS if c in base.column_names])
    # (secondary indexes are maintained: tests/metadata_writer/test_secondary_index.py)
    for p in SECONDARY:
        left = maintenance.drop_metadata(str(root), partition=p)
        assert p not in left
    index_defs = (root / ".hoodie" / ".index_defs" / "index.json").read_text()
    assert "secondary_index" not in index_defs and "column_stats" in index_defs

    # 1. upserts in every region (newer txn_ts), and a new key
    regions = pc.unique(data.column("region")).to_pylist()
    picks = [data.filter(pc.equal(data.column("region"), r)).slice(0, 1) for r in regions]
    upd = pa.concat_tables(picks)
    upd = upd.set_column(
        upd.schema.get_field_index("txn_ts"), "txn_ts", pc.add(upd.column("txn_ts"), 1000)
    )
    upd = upd.set_column(
        upd.schema.get_field_index("merchant_name"),
        "merchant_name",
        pa.array([f"hoodie_ray-{i}" for i in range(upd.num_rows)]),
    )
    new = data.slice(0, 1)
    new = new.set_column(new.schema.get_field_index("txn_id"), "txn_id", pa.array(["TXN-NEW"]))
    batch = pa.concat_tables([upd, new])
    res = HoodieWriteClient(str(root)).write(batch)
    for r in batch.to_pylist():
        expected[(r["txn_id"], r["account_id"])] = r
    _check(root, expected, "upserts")
    mdt = HoodieTable.load(str(root)).metadata_table
    ours = [i for i in mdt.timeline.instants if i.timestamp == res.instant]
    assert ours and ours[0].is_completed

    # our records have Java's keys and fields (hudi-rs reads our files records on every read
    # above; it cannot open the metadata table's other partitions itself, not even Java's:
    # "not yet implemented: Add support for AvroSchema::Ref")
    new_key = "txn_id:TXN-NEW,account_id:" + new.column("account_id")[0].as_py()
    ri = mdt.records("record_index", [new_key])[new_key]["recordIndexMetadata"]
    java_ri = next(iter(mdt.records("record_index").values()))["recordIndexMetadata"]
    assert set(ri) == set(java_ri) and ri["fileIdEncoding"] == 0
    ours = [(p, n) for p, files in mdt.files_listing().items() for n in files if res.instant in n]
    assert {p for p, _ in ours} == {f"region={r}" for r in regions}
    stats = mdt.records("column_stats")
    by_file: dict[str, dict] = {}
    for key, r in stats.items():
        cs = r["ColumnStatsMetadata"]
        by_file.setdefault(cs["fileName"], {})[cs["columnName"]] = (key, cs)
    java_file = next(n for n in by_file if res.instant not in n and n.endswith(".parquet"))
    for _part, name in ours:
        assert set(by_file[name]) == set(by_file[java_file])  # the same columns
        for col, (key, cs) in by_file[name].items():
            java_key, java_cs = by_file[java_file][col]
            assert len(key) == len(java_key) == 48
            assert set(cs) == set(java_cs)
            assert cs["valueType"]["typeOrdinal"] == java_cs["valueType"]["typeOrdinal"], col
    pstats = mdt.records("partition_stats")
    assert all(r["ColumnStatsMetadata"]["isTightBound"] for r in pstats.values())
    assert {r["ColumnStatsMetadata"]["fileName"] for r in pstats.values()} == {
        f"region={r}" for r in ("apac", "eu", "us")
    }

    # 2. deletes
    gone = [picks[0].to_pylist()[0], new.to_pylist()[0]]
    HoodieWriteClient(str(root), {"write.operation": "delete"}).write(
        pa.table(
            {
                "txn_id": [r["txn_id"] for r in gone],
                "account_id": [r["account_id"] for r in gone],
                "region": [r["region"] for r in gone],
            }
        )
    )
    for r in gone:
        expected.pop((r["txn_id"], r["account_id"]))
    _check(root, expected, "deletes")

    # 3. a compaction of everything, then more upserts
    assert maintenance.compact(str(root)).instant is not None
    _check(root, expected, "compaction")
    again = upd.slice(1)
    again = again.set_column(
        again.schema.get_field_index("txn_ts"), "txn_ts", pc.add(again.column("txn_ts"), 1000)
    )
    HoodieWriteClient(str(root)).write(again)
    for r in again.to_pylist():
        expected[(r["txn_id"], r["account_id"])] = r
    _check(root, expected, "upserts after compaction")


def test_filtered_reads_prune_file_slices_with_column_stats(tmp_path):
    """Java's column statistics rule file slices out of filtered reads; results stay those of
    reading everything and filtering."""
    from hoodie_ray.reader import query
    from hoodie_ray.reader.filters import parse_filters

    root = extract_sample_table(JAVA, tmp_path / "java")
    every = hr.read(str(root))
    table = HoodieTable.load(str(root))
    slices = query._view_slices(table, table.commits()[-1].timestamp)
    top = max(every.column("txn_ts").to_pylist())
    merchant = every.column("merchant_name").to_pylist()[0]
    cases = [
        (("txn_ts", ">", top), 0),
        (("merchant_name", "=", merchant), None),
        (("txn_ts", "<=", top), len(slices)),
    ]
    for flt, kept in cases:
        got = hr.read(str(root), filters=[flt]).column("_hoodie_record_key").to_pylist()
        mask = query.parse_filters([flt], every.schema)[0].mask(every.column(flt[0]))
        want = every.filter(mask).column("_hoodie_record_key").to_pylist()
        assert sorted(got) == sorted(want), flt
        pruned = query._prune_by_column_stats(table, slices, parse_filters([flt], every.schema))
        if kept is not None:
            assert len(pruned) == kept, flt
        else:
            assert 0 < len(pruned) < len(slices), flt


def test_java_partition_stats_cover_the_latest_slices_and_validate(tmp_path):
    """Java merges each new file's statistics into a partition's (counts summed over files
    later superseded): the untouched sample's partition_stats are not a recomputation from
    the latest slices but cover it, which is what the validator checks."""
    from hoodie_ray.job.maintenance import validate_metadata
    from hoodie_ray.metadata_writer.validate import covers

    root = extract_sample_table("sample_mor_avro_v9_txns_complex_meta", tmp_path / "java")
    assert validate_metadata(str(root)) == []
    w = ("org.apache.hudi.avro.model.StringWrapper", {"value": "EUR"})
    x = ("org.apache.hudi.avro.model.StringWrapper", {"value": "USD"})
    want = {"minValue": w, "maxValue": x, "nullCount": 0, "valueCount": 4}
    assert covers({**want, "valueCount": 8}, want)
    assert not covers({**want, "minValue": x}, want)  # would prune EUR away
    assert not covers({**want, "valueCount": 3}, want)
    assert not covers({**want, "minValue": None, "maxValue": None}, want)
    assert covers(
        {**want, "minValue": None, "maxValue": None}, {**want, "minValue": None, "maxValue": None}
    )
