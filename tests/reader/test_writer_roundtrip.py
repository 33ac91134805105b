"""Tables written by our writer read the same with our reader and with hudi-rs: snapshot, and
time travel and incremental at every instant (upserts, ``_hoodie_is_deleted`` deletes,
partitions, table versions 6 and 8, Avro and Parquet log blocks)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from hoodie_ray.config.table_config import HoodieTableConfig
from hoodie_ray.reader import read_table
from hoodie_ray.storage import open_storage
from hoodie_ray.timeline.timeline import ActiveTimeline
from tests.conftest import hudi_rs_read


def view(t: pa.Table | None) -> list[dict]:
    if t is None or t.num_rows == 0:
        return []
    cols = ["_hoodie_record_key", "ts", "v", "p", "_hoodie_commit_time"]
    return sorted(t.select(cols).to_pylist(), key=lambda r: r["_hoodie_record_key"])


@pytest.mark.parametrize(("version", "fmt"), [("6", "avro"), ("8", "parquet")])
def test_writer_tables_match_hudi_rs(tmp_path: Path, version: str, fmt: str) -> None:
    from hoodie_ray.job.client import HoodieWriteClient

    path = str(tmp_path / "t")
    opts = {
        "hoodie.table.name": "w",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "hoodie.write.table.version": version,
        "hoodie.logfile.data.block.format": fmt,
        "compaction.schedule.enabled": "false",
    }
    rng = np.random.default_rng(7)
    for c in range(5):
        keys = rng.choice(120, 50, replace=False)
        HoodieWriteClient(path, opts).write(
            pa.table(
                {
                    "key": pa.array(keys, pa.int64()),
                    "ts": pa.array(rng.integers(0, 30, 50), pa.int64()),
                    "v": pa.array([f"c{c}"] * 50),
                    "p": pa.array([f"p{k % 3}" for k in keys]),
                    "_hoodie_is_deleted": pa.array(rng.random(50) < 0.15),
                }
            )
        )
    assert view(read_table(path)) == view(hudi_rs_read(path))
    storage = open_storage(path)
    cfg = HoodieTableConfig.load(storage)
    prev = None
    for inst in ActiveTimeline(storage, cfg.timeline_layout_version).completed_commits():
        pos = inst.completion_time or inst.timestamp
        tt = hudi_rs_read(path, **{"hoodie.read.as.of.timestamp": inst.timestamp})
        assert view(read_table(path, as_of=inst.timestamp)) == view(tt)
        opts_inc = {"hoodie.read.query.type": "incremental", "hoodie.read.end.timestamp": pos}
        if prev is not None:
            opts_inc["hoodie.read.start.timestamp"] = prev
        mine = read_table(path, query_type="incremental", begin=prev, end=pos)
        assert view(mine) == view(hudi_rs_read(path, **opts_inc))
        prev = pos
