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
    # the write task's error, as itself (it was Ray's RayTaskError(HoodieSchemaError))
    with pytest.raises(hr.HoodieSchemaError, match="ts"):
        bad.write_datasink(hr.HoodieDatasink(path, OPTIONS))
    assert hudi_rs_snapshot(path).to_pylist() == before
    assert all(
        x.state.value == "COMPLETED"
        for x in hr.HoodieTable.load(path).timeline
        if x.action == "deltacommit"
    )


def test_an_empty_dataset_commits_nothing(ray_session, tmp_path):
    """An empty Dataset through the sink made a commit of nothing (a new table created for
    it): as ``hr.write`` and ``checkpoint()``, no commit and no table."""
    import ray

    path = tmp_path / "t"
    empty = ray.data.from_arrow(
        pa.table({"key": ["a"], "p": ["a"], "ts": [1], "v": [1], "s": ["s"]})
    )
    empty = empty.filter(lambda r: False)
    empty.write_datasink(hr.HoodieDatasink(str(path), OPTIONS))
    assert not (path / ".hoodie").exists()
    hr.write(to_arrow([Workload(1)._row("a")], False), str(path), OPTIONS, engine="local")
    empty.write_datasink(hr.HoodieDatasink(str(path), OPTIONS))
    timeline = hr.HoodieTable.load(str(path)).timeline
    assert [x.action for x in timeline if x.is_completed and x.action != "rollback"] == [
        "deltacommit"
    ]
    assert hudi_rs_snapshot(path).num_rows == 1


def test_a_relative_path_means_the_drivers_directory(ray_session, tmp_path, monkeypatch):
    """A relative table path was resolved in each Ray worker's working directory (a job's
    ``runtime_env`` working_dir, not the driver's): ``hr.write`` of a Dataset and the sink
    wrote the table there, reported success, and ``read_ray`` failed on files it could not
    find. Here the driver moves to another directory after Ray started; the tables are
    where the driver's relative path says, and ``read_ray(columns=[])`` is refused as
    ``hr.read`` refuses it (it read every column)."""
    import ray

    monkeypatch.chdir(tmp_path)
    rows = to_arrow([Workload(1)._row(k) for k in ("a", "b")], False)
    hr.write(ray.data.from_arrow(rows), "by_write", OPTIONS)
    ray.data.from_arrow(rows).write_datasink(hr.HoodieDatasink("by_sink", OPTIONS))
    for name in ("by_write", "by_sink"):
        assert hudi_rs_snapshot(tmp_path / name).num_rows == 2, name
        assert hr.read_ray(name).count() == 2
    with pytest.raises(hr.HoodieQueryError, match="columns"):
        hr.read_ray("by_write", columns=[])
    # compaction on Ray: its tasks opened the table's files in their own directory
    hr.write(rows, "by_write", OPTIONS, engine="local")  # the same keys again: a log file
    assert hr.compact("by_write", OPTIONS, engine="ray").instant is not None
    assert hudi_rs_snapshot(tmp_path / "by_write").num_rows == 2


def test_a_retried_write_task_fails_the_write_instead_of_writing_twice(ray_session, tmp_path):
    """Ray runs a write task again when its worker dies, and the rows its first attempt sent
    stayed in the open instant: with inserts they were committed twice. The second attempt
    of a task is refused (HoodieWriteError naming it); the write rolls back, nothing is
    committed."""
    from ray.data._internal.execution.interfaces import TaskContext

    path = str(tmp_path / "t")
    hr.write(to_arrow([Workload(1)._row("a")], False), path, OPTIONS, engine="local")
    before = hudi_rs_snapshot(path).to_pylist()
    rows = to_arrow([Workload(2)._row(k) for k in ("b", "c")], False)
    sink = hr.HoodieDatasink(path, {**OPTIONS, "write.operation": "insert"})
    sink.on_write_start(rows.schema)
    ctx = TaskContext(task_idx=3, op_name="Write")
    sink.write([rows], ctx)  # the first attempt, whose worker then died
    with pytest.raises(hr.HoodieWriteError, match="write task 3 of the Dataset ran again"):
        sink.write([rows], ctx)
    sink.on_write_failed(RuntimeError("the write failed"))  # what Ray Data calls then
    assert hudi_rs_snapshot(path).to_pylist() == before


def test_a_retried_upsert_task_is_folded_by_key(ray_session, tmp_path):
    """An upsert folds a retried task's rows with its first attempt's by key, as before:
    the second attempt is not refused there."""
    from ray.data._internal.execution.interfaces import TaskContext

    path = str(tmp_path / "t")
    rows = to_arrow([Workload(2)._row(k) for k in ("b", "c")], False)
    sink = hr.HoodieDatasink(path, OPTIONS)
    sink.on_write_start(rows.schema)
    ctx = TaskContext(task_idx=0, op_name="Write")
    sink.write([rows], ctx)
    sink.write([rows], ctx)
    sink.on_write_failed(RuntimeError("stopped here"))


def test_a_read_parquet_dataset_through_the_sink(ray_session, tmp_path):
    """Ray Data gives ``on_write_start`` the schema of the input before the maps fused into
    the write (``read_parquet``'s is its file listing's: ``__path``...): into an existing
    table the blocks are written in the table's schema (it was "the batch lacks column
    key"); a new table is refused with what to do (``schema=``), and with it written."""
    import pyarrow.parquet as pq
    import ray

    files = tmp_path / "in"
    files.mkdir()
    for i in range(2):
        rows = to_arrow([Workload(3)._row(f"k{i}{j}") for j in range(5)], False)
        pq.write_table(rows, files / f"part-{i}.parquet")
    path = str(tmp_path / "t")
    hr.write(to_arrow([Workload(1)._row("a")], False), path, OPTIONS, engine="local")
    ray.data.read_parquet(str(files)).write_datasink(hr.HoodieDatasink(path, OPTIONS))
    assert hudi_rs_snapshot(path).num_rows == 11
    new = str(tmp_path / "new")
    with pytest.raises(hr.HoodieSchemaError, match="pass schema=ds.schema"):
        ray.data.read_parquet(str(files)).write_datasink(hr.HoodieDatasink(new, OPTIONS))
    ds = ray.data.read_parquet(str(files))
    ds.write_datasink(hr.HoodieDatasink(new, OPTIONS, schema=ds.schema().base_schema))
    assert hudi_rs_snapshot(new).num_rows == 10
