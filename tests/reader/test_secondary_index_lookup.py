"""Lookups by an indexed column served by the metadata table's secondary index (the record
keys holding the values) and record index (their file groups), on the Java table that has
both: the same rows as hudi-rs's full scan, only the named file groups' files opened."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hoodie_ray as hr
from hoodie_ray.meta import META_FIELDS
from hoodie_ray.reader.query import plan_file_slices
from tests.conftest import extract_sample_table, hudi_rs_read
from tests.reader.test_record_index_lookup import _file_group, _Opened

JAVA = "sample_mor_avro_v9_txns_complex_meta"


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract_sample_table(JAVA, tmp_path_factory.mktemp("si") / "java")


def _rows(t: pa.Table) -> list[dict]:
    cols = [c for c in t.column_names if c not in META_FIELDS or c == "_hoodie_record_key"]
    return sorted(t.select(cols).to_pylist(), key=lambda r: r["_hoodie_record_key"])


@pytest.mark.parametrize(
    ("field", "op", "values"),
    [
        ("merchant_name", "=", ["Grab"]),
        ("merchant_name", "IN", ["Grab", "Amazon", "nobody"]),
        ("txn_date", "=", [None]),  # filled from the data below: a date column
    ],
    ids=["string-eq", "string-in", "date-eq"],
)
def test_a_lookup_by_an_indexed_column_reads_only_the_named_file_groups(
    java: Path, monkeypatch: pytest.MonkeyPatch, field: str, op: str, values: list
) -> None:
    path = str(java)
    full = hudi_rs_read(path)
    if values == [None]:
        values = [full[field][0].as_py()]
        assert isinstance(values[0], dt.date)
    filters = [(field, op, values[0] if op == "=" else values)]
    expected = full.filter(pc.is_in(full[field], pa.array(values, full[field].type)))
    total = len(plan_file_slices(path).slices)
    opened = _Opened(monkeypatch)
    plan = plan_file_slices(path, filters=filters)
    got = hr.read(path, filters=filters)
    monkeypatch.undo()
    assert _rows(got) == _rows(expected) and expected.num_rows > 0
    si = plan.stats["secondary_index"]
    assert "secondary_index" in plan.stats["pruned_by"]
    assert si["field"] == field and si["keys"] == expected.num_rows == si["found"]
    planned = {s.file_id for s in plan.slices}
    assert 1 <= len(planned) < total
    assert {_file_group(p) for p in opened.data_files()} <= planned


def test_a_value_no_record_holds_opens_no_data_file(
    java: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _Opened(monkeypatch)
    got = hr.read(str(java), filters=[("merchant_name", "=", "nobody at all")])
    plan = plan_file_slices(str(java), filters=[("merchant_name", "=", "nobody at all")])
    monkeypatch.undo()
    assert got.num_rows == 0 and opened.data_files() == []
    assert plan.slices == []
    # the sample's column statistics of merchant_name rule the value out before any lookup
    assert plan.stats["pruned_by"] == ["column_stats"] or plan.stats["secondary_index"]["keys"] == 0


def test_time_travel_and_unindexed_columns_fall_back(java: Path) -> None:
    path = str(java)
    total = len(plan_file_slices(path).slices)
    plan = plan_file_slices(path, filters=[("currency", "=", "USD")])  # no index over it
    assert "secondary_index" not in plan.stats and len(plan.slices) <= total
    first = hr.HoodieTable.load(path).commits()[0].timestamp
    plan = plan_file_slices(path, filters=[("merchant_name", "=", "Grab")], as_of=first)
    assert "latest" in plan.stats["secondary_index_skipped"]


def test_a_null_value_is_looked_up(java: Path) -> None:
    """A version 2 index keys a null value as the NUL character ([S9]: ``txn_id:TXN-003``,
    whose ``merchant_name`` is null): ``IN`` a list holding a null looks it up, with the
    rows a scan gives."""
    path = str(java)
    full = hudi_rs_read(path)
    flt = ("merchant_name", "IN", ["Grab", None])
    plan = plan_file_slices(path, filters=[flt])
    want = full.filter(
        pc.fill_null(pc.is_in(full["merchant_name"], pa.array(["Grab", None])), False)
    )
    assert "secondary_index" in plan.stats["pruned_by"]
    assert plan.stats["secondary_index"]["keys"] == want.num_rows
    assert None in want["merchant_name"].to_pylist()
    assert _rows(hr.read(path, filters=[flt])) == _rows(want)


def test_null_values_of_an_indexed_column_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hoodie_ray's own index holds the null values too; a version 1 definition's nulls are
    not confirmed, so there a null is found by a scan."""
    import json

    path = str(tmp_path / "t")
    opts = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "precombine.field": "ts",
        "hoodie.write.table.version": "8",
        "hoodie.metadata.record.index.enable": "true",
    }
    n = 60
    rows = pa.table(
        {
            "id": [f"k{i}" for i in range(n)],
            "ts": [1] * n,
            "m": [None if i % 11 == 0 else f"m{i % 7}" for i in range(n)],
        }
    )
    hr.write(rows, path, opts, engine="local")
    hr.create_index(path, "m_idx", "m", engine="local")
    cases = ([None], [None, "m3"], ["m3"])

    def check() -> None:
        for values in cases:
            got = hr.read(path, filters=[("m", "IN", values)])
            want = rows.filter(
                pc.fill_null(pc.is_in(rows["m"], pa.array(values, pa.string())), False)
            )
            assert sorted(got["id"].to_pylist()) == sorted(want["id"].to_pylist()), values

    from hoodie_ray.metadata.reader import MetadataTable

    looked_up: list[list] = []
    real = MetadataTable.secondary_index_lookup

    def spy(self, part, values):  # type: ignore[no-untyped-def]
        looked_up.append(list(values))
        return real(self, part, values)

    monkeypatch.setattr(MetadataTable, "secondary_index_lookup", spy)
    check()
    assert [None] in looked_up  # the null itself was looked up
    defs = Path(path) / ".hoodie" / ".index_defs" / "index.json"
    doc = json.loads(defs.read_text())
    for d in doc["indexDefinitions"].values():
        d["version"] = "V1"
    defs.write_text(json.dumps(doc))
    looked_up.clear()
    check()
    assert all(None not in v for v in looked_up)
    plan = plan_file_slices(path, filters=[("m", "IN", [None])])
    assert "version 1" in plan.stats["secondary_index_skipped"]
