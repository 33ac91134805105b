"""HoodieTable: the one handle (config read once, version behaviour, kept timeline, schema)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieTableNotFoundError
from hoodie_ray.table import HoodieTable

OPTIONS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "k",
    "precombine.field": "ts",
}


def rows(keys: list[str], ts: int) -> pa.Table:
    return pa.table({"k": keys, "ts": [ts] * len(keys), "v": [f"{k}{ts}" for k in keys]})


@pytest.mark.parametrize("version", ["6", "8"])
def test_handle_decides_the_version_behaviour_once(tmp_path: Path, version: str) -> None:
    path = str(tmp_path / "t")
    opts = {**OPTIONS, "hoodie.write.table.version": version}
    client = hr.HoodieWriteClient(path, opts)
    client.write(rows(["a", "b"], 1))
    t = HoodieTable.load(path)
    assert t.table_version == int(version) and t.name == "t" and t.is_mor
    assert t.completion_time_slicing == (version == "8")
    assert t.layout_version == (2 if version == "8" else 1)
    assert t.config["hoodie.table.version"] == version
    assert [i.action for i in t.timeline] == ["deltacommit"]
    assert t.schema is not None and t.schema.names[-3:] == ["k", "ts", "v"]
    # the kept timeline follows other writers on refresh, the schema with it
    client.write(pa.table({"k": ["c"], "ts": [2], "v": ["c2"]}))
    assert len(t.commits()) == 1
    assert len(t.refresh().commits()) == 2
    assert t.latest_commit_schema_json() is not None
    slices = t.latest_file_slices()
    assert slices and all(s.log_files or s.base_file for s in slices)


def test_missing_table(tmp_path: Path) -> None:
    with pytest.raises(HoodieTableNotFoundError):
        HoodieTable.load(str(tmp_path / "none"))
    with pytest.raises(HoodieTableNotFoundError):
        HoodieTable.load("")


def test_client_keeps_its_table_handle(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    client = hr.HoodieWriteClient(path, OPTIONS)
    client.write(rows(["a"], 1))
    first = client._table
    client.write(rows(["b"], 2))
    assert client._table is first  # refreshed, not re-opened
    assert hr.read(path).num_rows == 2
