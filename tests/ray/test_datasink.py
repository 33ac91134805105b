from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_ray as hr
from tests.write.model import OPTIONS, TableModel, Workload, hudi_rs_snapshot, to_arrow

pytestmark = pytest.mark.ray


@pytest.mark.parametrize(
    "writes", [1, pytest.param(2, marks=pytest.mark.slow)], ids=["local-then-sink", "sink-twice"]
)
def test_datasink_one_commit_per_write(ray_session, tmp_path, writes):
    """Each ``write_datasink`` one commit; in the CI suite the table's first commit is a local
    write (suite time: a datasink write starts its own topology)."""
    import ray

    path = str(tmp_path / "t")
    model, wl = TableModel(), Workload(seed=4)
    for i in range(2):
        rows = wl.rows_for(wl.keys) if i == 0 else wl.rows_for(wl.keys[::2])
        if i < 2 - writes:
            hr.write(to_arrow(rows, False), path, OPTIONS, engine="local")
            model.upsert(rows)
            continue
        ds = ray.data.from_arrow(to_arrow(rows, False)).repartition(3)
        sink = hr.HoodieDatasink(
            path, {**OPTIONS, "write.tasks": "2", "write.bucket_assign.tasks": "2"}
        )
        ds.write_datasink(sink)
        model.upsert(rows)
        model.assert_hudi_rs_reads(path)
    commits = [x for x in hr.HoodieTable.load(path).timeline if x.action == "deltacommit"]
    assert len(commits) == 2 and all(x.state.value == "COMPLETED" for x in commits)


def test_datasink_bad_input_commits_nothing(ray_session, tmp_path):
    import ray

    path = str(tmp_path / "t")
    hr.write(to_arrow([Workload(1)._row("a")], False), path, OPTIONS, engine="local")
    before = hudi_rs_snapshot(path).to_pylist()
    bad = ray.data.from_arrow(
        pa.table({"key": ["b"], "p": ["a"], "ts": ["x"], "v": [1], "s": ["s"]})
    )
    with pytest.raises(Exception):  # noqa: B017 - Ray wraps the HoodieSchemaError of the write task
        bad.write_datasink(hr.HoodieDatasink(path, OPTIONS))
    assert hudi_rs_snapshot(path).to_pylist() == before
    assert all(
        x.state.value == "COMPLETED"
        for x in hr.HoodieTable.load(path).timeline
        if x.action == "deltacommit"
    )
