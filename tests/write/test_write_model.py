"""The write core's model test: random commits, hudi-rs reads exactly the model after each."""

from __future__ import annotations

import pytest

from hoodie_ray.job.client import HoodieWriteClient
from tests.write.model import (
    OPTIONS,
    SMALL_FILES,
    TableModel,
    Workload,
    hudi_rs_snapshot,
    keys_table,
    to_arrow,
)


def run_model(path, options, commits: int, seed: int) -> None:
    model = TableModel()
    wl = Workload(seed)
    for i in range(commits):
        kind, rows = wl.next_commit()
        if i == 0:
            kind, rows = "upsert", [wl._row(k) for k in wl.keys[:30]]
        if kind == "delete":
            res = HoodieWriteClient(str(path), {**options, "write.operation": "delete"}).write(
                keys_table(rows)
            )
            model.delete_keys([r["key"] for r in rows])
        elif kind == "insert":
            res = HoodieWriteClient(str(path), {**options, "write.operation": "insert"}).write(
                to_arrow(rows, False)
            )
            model.insert_new(rows)
        else:
            res = HoodieWriteClient(str(path), options).write(to_arrow(rows, True))
            model.upsert(rows)
        got = hudi_rs_snapshot(path)
        want = model.as_table()
        assert got.to_pylist() == want.to_pylist(), (
            f"commit {i} ({kind}, instant {res.instant}) differs"
        )


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
@pytest.mark.parametrize("block_format", ["avro", "parquet"])
def test_model_random_commits(tmp_path, table_type, block_format):
    if table_type == "COPY_ON_WRITE" and block_format == "parquet":
        pytest.skip("log block format does not apply to COPY_ON_WRITE")
    opts = {
        **OPTIONS,
        "table.type": table_type,
        "hoodie.logfile.data.block.format": block_format,
        **SMALL_FILES,
    }
    run_model(tmp_path / "t", opts, commits=22, seed=hash(table_type + block_format) % 1000)


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_model_random_commits_table_version_8(tmp_path, table_type):
    opts = {
        **OPTIONS,
        "table.type": table_type,
        "hoodie.write.table.version": "8",
        **SMALL_FILES,
        "compaction.delta_commits": "4",
    }
    run_model(tmp_path / "t", opts, commits=20, seed=8)
    from hoodie_ray.config.table_config import HoodieTableConfig
    from hoodie_ray.storage import LocalStorage

    cfg = HoodieTableConfig.load(LocalStorage(str(tmp_path / "t")))
    assert (cfg.table_version, cfg.timeline_layout_version) == (8, 2)
    assert any(
        (tmp_path / "t" / ".hoodie" / "timeline").glob(
            "*_*.deltacommit" if table_type == "MERGE_ON_READ" else "*_*.commit"
        )
    )
