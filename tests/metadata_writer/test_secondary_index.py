"""Secondary indexes of the metadata table: Java's two indexes of the version 9 sample decoded,
kept in step through upserts that change indexed values, deletes, new keys and a compaction
(each step: the validator finds nothing, hudi-rs reads the model), built and dropped by
hr.create_index / hr.drop_index."""

from __future__ import annotations

import datetime as dt
import types
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hoodie_ray as hr
from hoodie_ray.hfile import writer as hfile_writer
from hoodie_ray.job import maintenance
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.log_format.blocks import DeleteBlock
from hoodie_ray.log_format.reader import read_log_file
from hoodie_ray.meta import META_FIELDS
from hoodie_ray.metadata import secondary_index as si
from hoodie_ray.metadata.layout import PARTITIONS_INFLIGHT_PROPERTY, PARTITIONS_PROPERTY
from hoodie_ray.metadata_writer.writer import metadata_writer
from hoodie_ray.table import HoodieTable
from tests.conftest import extract_sample_table, hudi_rs_read

JAVA = "sample_mor_avro_v9_txns_complex_meta"
MERCHANT = "secondary_index_merchant_idx"
TXN_DATE = "secondary_index_txn_date_idx"
EPOCH = dt.date(1970, 1, 1)


# -- keys and values ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["Spotify", "a$b", "c\\d", "\\$", "x\x00y", "", "$", None],
)
def test_keys_escape_separator_escape_and_nul_and_split_back(value):
    rk = "txn_id:T$1,account_id:A\\B"
    key = si.secondary_index_key(value, rk)
    assert si.split_secondary_index_key(key) == (value, rk)
    prefix = key[: len(si.escape_key_part(value)) + 1]
    assert prefix.endswith("$") and si.secondary_index_file_group(key, 10) == (
        si.secondary_index_file_group(prefix + "other", 10)
    )


def test_key_encoding_is_javas():
    assert si.secondary_index_key("a$b", "k") == "a\\$b$k"
    assert si.secondary_index_key("c\\d", "k$1") == "c\\\\d$k\\$1"
    assert si.secondary_index_key(None, "k") == "\x00$k"
    assert si.secondary_index_key("\x00", "k") == "\\\x00$k"


def test_values_are_javas_strings():
    j = si.java_strings
    assert j(pa.array(["x", None]), "f") == ["x", None]
    assert j(pa.array([-3, 7], pa.int64()), "f") == ["-3", "7"]
    assert j(pa.array([True, False, None]), "f") == ["true", "false", None]
    assert j(pa.array([dt.date(2024, 1, 15)]), "f") == ["19737"]
    assert j(pa.array([1_000_000], pa.timestamp("ms")), "f") == ["1000000000"]
    assert j(pa.array([25.0, 1e7, 1.5e-4, 0.001, -0.0, 123456.75]), "f") == [
        "25.0",
        "1.0E7",
        "1.5E-4",
        "0.001",
        "-0.0",
        "123456.75",
    ]
    assert j(pa.array([0.1], pa.float32()), "f") == ["0.1"]
    from decimal import Decimal

    assert j(pa.array([Decimal("12.50")], pa.decimal128(10, 2)), "f") == ["12.50"]
    with pytest.raises(hr.HoodieUnsupportedError, match="'blob'"):
        j(pa.array([b"x"]), "blob")


# -- the Java sample ------------------------------------------------------------------------------


def _rows(t: pa.Table) -> dict[tuple[str, str], dict]:
    t = t.drop_columns([c for c in META_FIELDS if c in t.column_names])
    return {(r["txn_id"], r["account_id"]): r for r in t.to_pylist()}


def _rk(row: dict) -> str:
    return f"txn_id:{row['txn_id']},account_id:{row['account_id']}"


def _model_index(rows: dict, field: str) -> set[str]:
    """The index the model says: one entry per live record, Java's string of its value."""
    out = set()
    for r in rows.values():
        v = r[field]
        if isinstance(v, dt.date):
            v = str((v - EPOCH).days)
        out.add(si.secondary_index_key(v, _rk(r)))
    return out


def _check(root: Path, expected: dict, step: str) -> None:
    diffs = maintenance.validate_metadata(str(root))
    assert not diffs, f"{step}: " + "; ".join(str(d)[:300] for d in diffs[:5])
    assert _rows(hudi_rs_read(root)) == expected, f"{step}: hudi-rs differs"
    mdt = HoodieTable.load(str(root)).metadata_table
    for part, field in ((MERCHANT, "merchant_name"), (TXN_DATE, "txn_date")):
        assert set(mdt.records(part)) == _model_index(expected, field), f"{step}: {part}"


def test_javas_secondary_indexes_decode_as_documented(tmp_path):
    root = extract_sample_table(JAVA, tmp_path / "java")
    expected = _rows(hudi_rs_read(root))
    table = HoodieTable.load(str(root))
    mdt = table.metadata_table
    defs = si.index_definitions(table.storage, ".hoodie/.index_defs/index.json")
    assert defs[MERCHANT].source_fields == ("merchant_name",) and defs[MERCHANT].is_secondary
    assert defs[TXN_DATE].source_field == "txn_date" and defs[TXN_DATE].version == "V2"
    assert not defs["record_index"].is_secondary
    for part, field in ((MERCHANT, "merchant_name"), (TXN_DATE, "txn_date")):
        slices = mdt.file_slices(part)
        prefix = part.replace("_", "-")
        assert [s.file_id for s in slices] == [f"{prefix}-{i:04d}-0" for i in range(10)]
        seen = set()
        for s in slices:
            for key, (value, _) in mdt.slice_records(s).items():
                assert si.secondary_index_file_group(key, 10) == int(s.file_id[-6:-2]), key
                assert value == bytes.fromhex("0000000000000e000000000200")  # isDeleted false
                seen.add(key)
        assert seen == _model_index(expected, field)
    assert "\x00$txn_id:TXN-003,account_id:ACC-A" in mdt.records(MERCHANT)  # a null value
    # untouched, the validator rebuilds both indexes equal to Java's
    assert not [d for d in maintenance.validate_metadata(str(root)) if "secondary" in d.partition]


def test_upserts_deletes_and_compaction_keep_the_secondary_indexes(tmp_path, monkeypatch):
    root = extract_sample_table(JAVA, tmp_path / "java")
    base = hudi_rs_read(root)
    expected = _rows(base)
    data = base.drop_columns([c for c in META_FIELDS if c in base.column_names])

    # 1. upserts: new merchants (with '$', '\\' and a null), one new date; a new key
    upd = data.slice(0, 4)
    upd = upd.set_column(
        upd.schema.get_field_index("txn_ts"), "txn_ts", pc.add(upd.column("txn_ts"), 1000)
    )
    upd = upd.set_column(
        upd.schema.get_field_index("merchant_name"),
        "merchant_name",
        pa.array(["a$b", None, "c\\d", upd.column("merchant_name")[3].as_py()]),
    )
    upd = upd.set_column(
        upd.schema.get_field_index("txn_date"),
        "txn_date",
        pa.array([dt.date(2025, 2, 1), *upd.column("txn_date").to_pylist()[1:]], pa.date32()),
    )
    new = data.slice(5, 1)
    new = new.set_column(new.schema.get_field_index("txn_id"), "txn_id", pa.array(["TXN-NEW"]))
    batch = pa.concat_tables([upd, new])
    res = HoodieWriteClient(str(root)).write(batch)
    for r in batch.to_pylist():
        expected[(r["txn_id"], r["account_id"])] = r
    _check(root, expected, "upserts")
    # the old entries went as delete-block keys of this delta commit, in their value's group
    old = upd.to_pylist()[0]
    was = next(r for r in data.to_pylist() if r["txn_id"] == old["txn_id"])
    gone_key = si.secondary_index_key(was["merchant_name"], _rk(was))
    group = si.secondary_index_file_group(gone_key, 10)
    mdt_dir = root / ".hoodie" / "metadata" / MERCHANT
    logs = [p.name for p in mdt_dir.iterdir() if res.instant in p.name]
    assert any(f"-{group:04d}-0_" in n for n in logs)
    table = HoodieTable.load(str(root))
    deleted = [
        k
        for n in logs
        for b in read_log_file(table.storage.sub(".hoodie/metadata"), f"{MERCHANT}/{n}")
        if isinstance(b, DeleteBlock)
        for k in b.record_keys.to_pylist()
    ]
    assert gone_key in deleted

    # 2. deletes (one Java record, the new one)
    gone = [upd.to_pylist()[1], new.to_pylist()[0]]
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

    # 3. a compaction writes nothing to the indexes
    mdt_files = {p: sorted(p.iterdir()) for p in (mdt_dir, mdt_dir.parent / TXN_DATE)}
    assert maintenance.compact(str(root)).instant is not None
    assert {p: sorted(p.iterdir()) for p in mdt_files} == mdt_files
    _check(root, expected, "compaction")

    # 4. upserts after it: a value changed back, one changed to another record's value
    again = upd.slice(2, 2)
    again = again.set_column(
        again.schema.get_field_index("txn_ts"), "txn_ts", pc.add(again.column("txn_ts"), 1000)
    )
    again = again.set_column(
        again.schema.get_field_index("merchant_name"),
        "merchant_name",
        pa.array([data.column("merchant_name")[2].as_py(), "Spotify"]),
    )
    HoodieWriteClient(str(root)).write(again)
    for r in again.to_pylist():
        expected[(r["txn_id"], r["account_id"])] = r
    _check(root, expected, "upserts after compaction")

    # 5. the metadata table compacts itself too: the indexes read the same. Their slices are
    # compacted column-wise, each distinct value encoded once: the per-record path's bytes
    w_table = HoodieTable.load(str(root))
    from hoodie_ray.metadata_writer.writer import metadata_writer

    w = metadata_writer(w_table)
    mdt = w.reader()
    name = "secondary-index-merchant-idx-0000-0_0-2-0_20990101000000000.hfile"
    with_logs = [fs for fs in mdt.file_slices(MERCHANT) if fs.log_files]
    assert with_logs
    import hoodie_ray.hfile.writer as hw

    with monkeypatch.context() as m:  # the HFiles' creation time, frozen
        m.setattr(hw, "time", types.SimpleNamespace(time=lambda: 1_700_000_000.0))
        for fs in with_logs:
            merged = w._merged_slice(mdt, MERCHANT, fs)
            for r in merged.values():
                r["_hoodie_file_name"] = name
            cols = w._merged_index_columns(mdt, fs, name)
            assert len(cols) == len(merged) and len(set(cols.values)) <= 1  # all alike
            assert w._hfile_columns(cols, base=True) == w._hfile(merged, base=True)
    assert w.compact() is not None
    _check(root, expected, "metadata table compaction")


def test_a_stale_secondary_index_is_found_by_the_validator(tmp_path):
    root = extract_sample_table(JAVA, tmp_path / "java")
    mdt_dir = root / ".hoodie" / "metadata" / MERCHANT
    victim = next(p for p in sorted(mdt_dir.iterdir()) if p.name.endswith(".hfile"))
    victim.unlink()  # its group now lists nothing: the entries are missing
    diffs = [d for d in maintenance.validate_metadata(str(root)) if d.partition == MERCHANT]
    assert diffs and all(d.problem == "entry missing" for d in diffs)


def test_other_indexes_are_still_refused_with_their_name(tmp_path):
    root = extract_sample_table(JAVA, tmp_path / "java")
    table = HoodieTable.load(str(root))
    cfg = table.table_config
    parts = cfg.props[PARTITIONS_PROPERTY] + ",expr_index_price"
    cfg.with_props(**{PARTITIONS_PROPERTY: parts}).save(table.storage)
    data = hudi_rs_read(root)
    data = data.drop_columns([c for c in META_FIELDS if c in data.column_names]).slice(0, 1)
    before = sorted(p.name for p in (root / ".hoodie" / "timeline").iterdir())
    with pytest.raises(
        hr.HoodieUnsupportedError, match="expr_index_price.*--partition expr_index_price"
    ):
        HoodieWriteClient(str(root)).write(data)
    assert sorted(p.name for p in (root / ".hoodie" / "timeline").iterdir()) == before


def test_create_index_builds_from_the_snapshot_and_drop_index_removes_it(tmp_path, monkeypatch):
    root = extract_sample_table(JAVA, tmp_path / "java")
    expected = _rows(hudi_rs_read(root))
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(hfile_writer.time, "time", lambda: 1_700_000_000.0)
    part = hr.create_index(
        str(root), "currency_idx", "currency", on_progress=lambda d, t: calls.append((d, t))
    )
    # built column-wise, each base HFile is byte for byte the one of its per-entry records
    table = HoodieTable.load(str(root))
    mdt = table.metadata_table
    slices = mdt.file_slices(part)
    per_group: list[dict] = [{} for _ in slices]
    for key in _model_index(expected, "currency"):
        entry = si.secondary_index_record(*si.split_secondary_index_key(key))[1]
        per_group[si.secondary_index_file_group(key, len(slices))][key] = entry
    w = metadata_writer(table)
    for fs in slices:
        want = per_group[int(fs.file_id[-6:-2])]
        if not want:
            assert fs.base_file is None, fs.file_id  # an empty group: an empty delete block
            continue
        got = mdt.storage.read_bytes(f"{fs.partition_path}/{fs.base_file}")
        assert got == w._hfile(want, base=True), fs.file_id
    assert sum(1 for fs in slices if fs.base_file) > 1
    assert part == "secondary_index_currency_idx"
    total = len(HoodieTable.load(str(root)).view().latest_file_slices())
    assert calls == [(d, total) for d in range(1, total + 1)]  # one call a file slice read
    table = HoodieTable.load(str(root))
    assert part in table.table_config.props[PARTITIONS_PROPERTY].split(",")
    assert not table.table_config.props.get(PARTITIONS_INFLIGHT_PROPERTY)
    defs = si.index_definitions(table.storage, ".hoodie/.index_defs/index.json")
    assert defs[part].source_fields == ("currency",) and defs[MERCHANT].source_field
    assert set(table.metadata_table.records(part)) == _model_index(expected, "currency")
    assert not [d for d in maintenance.validate_metadata(str(root)) if "secondary" in d.partition]
    with pytest.raises(hr.HoodieUnsupportedError, match="exists already"):
        hr.create_index(str(root), "currency_idx", "currency")
    with pytest.raises(hr.HoodieUnsupportedError, match="no field 'nope'"):
        hr.create_index(str(root), "nope_idx", "nope")

    # kept on the next write
    row = next(iter(expected.values()))
    changed = dict(row, currency="XYZ", txn_ts=row["txn_ts"] + 1000)
    schema = hudi_rs_read(root).schema
    schema = pa.schema([f for f in schema if f.name not in META_FIELDS])
    HoodieWriteClient(str(root)).write(pa.Table.from_pylist([changed], schema))
    expected[(row["txn_id"], row["account_id"])] = changed
    assert not [d for d in maintenance.validate_metadata(str(root)) if "secondary" in d.partition]
    assert _rows(hudi_rs_read(root)) == expected
    table = HoodieTable.load(str(root))
    assert set(table.metadata_table.records(part)) == _model_index(expected, "currency")

    left = hr.drop_index(str(root), "currency_idx")
    assert part not in left and MERCHANT in left
    assert part not in (root / ".hoodie" / ".index_defs" / "index.json").read_text()
    assert not (root / ".hoodie" / "metadata" / part).exists()
