"""Index bootstrap: the live record keys of each latest file slice (merged view, keys only)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from hoodie_ray.reader import read_table
from hoodie_ray.reader.index_bootstrap import bootstrap_entries
from hoodie_ray.table import HoodieTable
from tests.conftest import SAMPLE_TABLE_PARAMS
from tests.reader.builder import TableBuilder

SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def entries(root: str) -> list[tuple[str, str, list[str]]]:
    table = HoodieTable.load(root)
    slices = table.latest_file_slices()
    return [(p, f, k.to_pylist()) for p, f, k in bootstrap_entries(table, slices)]


@pytest.mark.shared
@pytest.mark.parametrize("name", SAMPLE_TABLE_PARAMS)
def test_keys_are_the_snapshot_keys(sample_table, name: str) -> None:
    root = str(sample_table(name))
    snap = read_table(root)
    got = entries(root)
    if "_hoodie_record_key" not in snap.schema.names:
        assert got == []  # no meta fields: no keys to load
        return
    keys = [k for _p, _f, ks in got for k in ks]
    assert len(keys) == len(set(keys))
    assert sorted(keys) == sorted(snap.column("_hoodie_record_key").to_pylist())
    by_group = {(p, f): set(ks) for p, f, ks in got}
    for r in snap.select(["_hoodie_record_key", "_hoodie_partition_path"]).to_pylist():
        assert any(
            r["_hoodie_record_key"] in ks
            for (p, _f), ks in by_group.items()
            if p == r["_hoodie_partition_path"]
        )


def test_deletes_and_log_inserts(tmp_path: Path) -> None:
    b = TableBuilder(tmp_path / "t", SCHEMA, partition_field=None)
    c1 = b.begin()
    base = c1.base_file(
        "",
        "f1-0",
        pa.table({"key": ["a", "b", "c"], "ts": [1, 1, 1], "v": list("xyz")}, schema=SCHEMA),
    )
    c1.log_file(
        "",
        "f2-0",
        [
            c1.data_block(
                pa.table({"key": ["l1"], "ts": [1], "v": ["l"]}, schema=SCHEMA), "", "f2-0"
            )
        ],
    )
    c1.complete()
    c2 = b.begin()
    c2.log_file(
        "",
        "f1-0",
        [
            c2.data_block(
                pa.table({"key": ["d"], "ts": [1], "v": ["n"]}, schema=SCHEMA), "", "f1-0"
            ),
            c2.delete_block(["b"], ""),
        ],
        base_instant=c1.instant,
        base_file=base,
    )
    c2.complete()
    got = {(p, f): sorted(ks) for p, f, ks in entries(str(b.root))}
    assert got == {("", "f1-0"): ["a", "c", "d"], ("", "f2-0"): ["l1"]}
