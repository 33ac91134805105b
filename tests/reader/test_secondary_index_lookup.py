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
