from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.ray.datasource import pack_slices
from tests.write.model import Workload, model_options, to_arrow


def test_pack_slices_balances_and_caps():
    class S:
        def __init__(self, n, size):
            self.base_file, self.log_files, self.file_sizes = f"b{n}", [], {f"b{n}": size}

    slices = [S(i, size) for i, size in enumerate([100, 1, 1, 1, 50, 50])]
    groups = pack_slices(slices, 3)
    assert len(groups) == 3 and sorted(len(g) for g in groups) == [1, 2, 3]
    assert len(pack_slices(slices, 100)) == 6


@pytest.mark.ray
def test_read_ray_many_slices_equals_read(ray_session, tmp_path):
    path = str(tmp_path / "t")
    opts = model_options(
        {
            "hoodie.parquet.max.file.size": "4096",
            "hoodie.copyonwrite.record.size.estimate": "200",
            "compaction.schedule.enabled": "false",
        }
    )
    wl = Workload(seed=1, keys=120)
    HoodieWriteClient(path, opts).write(to_arrow(wl.rows_for(wl.keys), True))
    HoodieWriteClient(path, opts).write(to_arrow(wl.rows_for(wl.keys[::3]), True))
    assert len(hr.HoodieTable.load(path).latest_file_slices()) >= 4
    import ray

    ds = hr.read_ray(path)
    refs = ds.to_arrow_refs()
    assert len(refs) >= 2, "one read task per group of slices"
    got = pa.concat_tables(ray.get(refs))
    want = hr.read(path)
    assert got.sort_by("key").to_pylist() == want.sort_by("key").to_pylist()
    sub = pa.concat_tables(ray.get(hr.read_ray(path, columns=["key", "v"]).to_arrow_refs()))
    assert sub.column_names == ["key", "v"] and sub.num_rows == want.num_rows
    # a CDC read: the file groups' changes spread over the read tasks, the same rows as hr.read
    cdc = {"query_type": "incremental", "incremental_format": "cdc"}
    refs = hr.read_ray(path, **cdc).to_arrow_refs()
    assert len(refs) >= 2
    got = pa.concat_tables(ray.get(refs))
    want = hr.read(path, **cdc)
    assert got.num_rows == want.num_rows > 0
    assert sorted(map(str, got.to_pylist())) == sorted(map(str, want.to_pylist()))
    # a streaming read on Ray: each commit's batch a Dataset, the rows the local reader's
    for fmt in ("latest_state", "cdc"):
        local = list(hr.read_stream(path, start="earliest", incremental_format=fmt))
        on_ray = list(hr.read_stream(path, start="earliest", incremental_format=fmt, engine="ray"))
        assert [b.position for b in on_ray] == [b.position for b in local] and len(local) == 2
        for a, b in zip(on_ray, local, strict=True):
            rows = pa.concat_tables(ray.get(a.table.to_arrow_refs())).to_pylist()
            assert sorted(map(str, rows)) == sorted(map(str, b.table.to_pylist()))


@pytest.mark.ray
def test_read_ray_point_lookup_plans_only_the_indexed_file_groups(ray_session, tmp_path):
    """read_ray plans a record-key lookup as hr.read does: the record index's file groups."""
    import ray

    from hoodie_ray.ray.datasource import HoodieDatasource
    from tests.conftest import hudi_rs_read
    from tests.reader.test_record_index_lookup import RI, write_lookup_table

    path = str(tmp_path / "t")
    write_lookup_table(path, RI)
    filters = [("key", "in", ["k010", "k070", "absent"])]
    src = HoodieDatasource(path, filters=filters)
    assert src.plan.stats["pruned_by"] == ["record_index"]
    assert src.plan.stats["record_index"] == {"keys": 3, "found": 2}
    assert len(src.plan.slices) < src.plan.stats["file_groups_total"]
    got = pa.concat_tables(ray.get(hr.read_ray(path, filters=filters).to_arrow_refs()))
    full = hudi_rs_read(path)
    want = full.filter(pa.compute.is_in(full["key"], pa.array(["k010", "k070"])))
    cols = ["_hoodie_record_key", "key", "p", "ts", "v", "s"]
    assert got.select(cols).sort_by("key").to_pylist() == (
        want.select(cols).sort_by("key").to_pylist()
    )
