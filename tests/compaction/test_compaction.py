"""Compaction: plans, inline and offline runs, async beside writers, failures, clean."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import fastavro
import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.api import compact
from hoodie_ray.compaction.api import CompactionService
from hoodie_ray.file_group.naming import parse_log_file_name
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.ray.runtime import job_table
from hoodie_ray.storage import open_storage
from hoodie_ray.timeline.instant import Action
from tests.conftest import hudi_rs_read
from tests.write.model import (
    SCHEMA,
    TableModel,
    Workload,
    hudi_rs_snapshot,
    model_options,
    to_arrow,
)

COMPACT_OPTS = model_options({"compaction.delta_commits": "3", "clean.retain_commits": "4"})


#: The writers plan no compaction: the tests plan and run it themselves.
NO_SCHEDULE = model_options({"compaction.schedule.enabled": "false"})
#: Compaction on one compactor actor beside the stream writer (one assigner).
ASYNC_COMPACTION = {
    "write.bucket_assign.tasks": "1",
    "compaction.async.enabled": "true",
    "compaction.tasks": "1",
}


def _table_to_compact(path, seed: int, commits: int = 1, rows: int = 30) -> pa.Table:
    """Every key of a workload written, then ``commits`` upserts of ``rows`` rows, with no
    compaction planned; returns the snapshot hudi-rs reads."""
    wl = Workload(seed=seed)
    HoodieWriteClient(str(path), NO_SCHEDULE).write(to_arrow(wl.rows_for(wl.keys), True))
    for _ in range(commits):
        HoodieWriteClient(str(path), NO_SCHEDULE).write(to_arrow(wl.upserts(rows), True))
    return hudi_rs_snapshot(path)


def _compactions(path) -> list[str]:
    t = hr.HoodieTable.load(str(path))
    return [
        i.timestamp
        for i in t.timeline
        if i.action == Action.COMMIT and i.state.value == "COMPLETED"
    ]


def test_inline_compaction_keeps_the_model(tmp_path):
    path = tmp_path / "t"
    model, wl = TableModel(), Workload(seed=21)
    for i in range(10):
        rows = wl.rows_for(wl.keys[:30]) if i == 0 else wl.upserts(15)
        model.write(path, COMPACT_OPTS, "upsert", rows)
        model.assert_hudi_rs_reads(path, f"commit {i}")
    done = _compactions(path)
    assert len(done) >= 2
    # the plan is Avro with the field names of Hudi's HoodieCompactionPlan
    plan_file = path / ".hoodie" / f"{done[-1]}.compaction.requested"
    with open(plan_file, "rb") as f:
        reader = fastavro.reader(f)
        names = [fl["name"] for fl in reader.writer_schema["fields"]]
        plan = next(iter(reader))
    assert names[:3] == ["operations", "extraMetadata", "version"]
    assert {
        "baseInstantTime",
        "deltaFilePaths",
        "dataFilePath",
        "fileId",
        "partitionPath",
        "metrics",
    } <= set(plan["operations"][0])
    # compacted base files keep each record's original commit time
    snap = hudi_rs_read(path)
    assert set(snap.column("_hoodie_commit_time").to_pylist()) - set(done), (
        "commit times were rewritten"
    )


def test_offline_compact_then_read_optimized_equals_snapshot(tmp_path):
    path = tmp_path / "t"
    before = _table_to_compact(path, seed=4, commits=3, rows=20)
    instant = compact(str(path)).instant
    assert instant is not None
    after = hudi_rs_snapshot(path)
    assert after.to_pylist() == before.to_pylist()
    ro = hudi_rs_read(path, **{"hoodie.read.use.read_optimized.mode": "true"})
    assert ro.num_rows == after.num_rows
    assert compact(str(path)).instant is None  # nothing left to compact


def test_failed_compaction_rolls_back_and_retries(tmp_path, monkeypatch):
    path = tmp_path / "t"
    before = _table_to_compact(path, seed=8).to_pylist()
    import hoodie_ray.compaction.api as api

    calls = {"n": 0}
    real = api.execute_operation

    def flaky(task):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("injected failure")
        return real(task)

    monkeypatch.setattr(api, "execute_operation", flaky)
    with pytest.raises(hr.HoodieCompactionError, match="injected"):
        compact(str(path))
    pending = CompactionService.open(str(path)).pending()
    assert len(pending) == 1  # back to requested, its files gone
    assert hudi_rs_snapshot(path).to_pylist() == before
    monkeypatch.setattr(api, "execute_operation", real)
    assert compact(str(path)).instant == pending[0]  # the retry runs the same plan
    assert hudi_rs_snapshot(path).to_pylist() == before
    assert CompactionService.open(str(path)).pending() == []


def test_compacted_base_file_columns_and_file_names(tmp_path):
    import pyarrow.parquet as pq

    from hoodie_ray.meta import META_FIELDS

    path = tmp_path / "t"
    before = _table_to_compact(path, seed=5).to_pylist()
    instant = compact(str(path)).instant
    assert instant is not None
    written = [p for p in path.rglob(f"*_{instant}.parquet") if ".hoodie" not in p.parts]
    assert written
    previous = pq.read_schema(next(p for p in path.rglob("*.parquet") if p not in written))
    for p in written:
        t = pq.read_table(p)
        # the compaction never reads _hoodie_file_name, and writes it with the new name
        assert t.schema.names == previous.names
        assert t.schema.names[: len(META_FIELDS)] == list(META_FIELDS)
        assert set(t.column("_hoodie_file_name").to_pylist()) == {p.name}
    assert hudi_rs_snapshot(path).to_pylist() == before


def test_compaction_failing_while_writing_leaves_nothing(tmp_path, monkeypatch):
    import hoodie_ray.compaction.execute as execute

    path = tmp_path / "t"
    before = _table_to_compact(path, seed=6).to_pylist()
    real = execute.iter_file_slice

    def failing(*args, **kwargs):
        yield from real(*args, **kwargs)
        raise OSError("injected failure after the rows")

    monkeypatch.setattr(execute, "iter_file_slice", failing)
    with pytest.raises(hr.HoodieCompactionError, match="injected"):
        compact(str(path))
    (pending,) = CompactionService.open(str(path)).pending()
    # the file streamed so far is gone with the rollback
    assert not [p for p in path.rglob(f"*{pending}*") if ".hoodie" not in p.parts]
    assert hudi_rs_snapshot(path).to_pylist() == before
    monkeypatch.setattr(execute, "iter_file_slice", real)
    assert compact(str(path)).instant == pending
    assert hudi_rs_snapshot(path).to_pylist() == before


def test_clean_keeps_retained_slices_and_time_travel(tmp_path):
    path = tmp_path / "t"
    opts = model_options({"compaction.delta_commits": "2", "clean.retain_commits": "3"})
    wl = Workload(seed=2)
    for i in range(9):
        rows = wl.rows_for(wl.keys[:20]) if i == 0 else wl.upserts(10)
        HoodieWriteClient(str(path), opts).write(to_arrow(rows, True))
    t = hr.HoodieTable.load(str(path))
    cleans = [i for i in t.timeline if i.action == "clean"]
    assert cleans, "no clean ran"
    commits = [
        i.timestamp
        for i in t.timeline
        if i.action in ("deltacommit", "commit") and i.state.value == "COMPLETED"
    ]
    # time travel to a retained commit works (hudi-rs and hoodie_ray) ...
    hudi_rs_read(path, **{"hoodie.read.as.of.timestamp": commits[-2]})
    assert hr.read(str(path), as_of=commits[-2]).num_rows > 0
    # ... to a cleaned one fails clearly
    with pytest.raises((hr.HoodieQueryError, hr.HoodieTimelineError), match="clean"):
        hr.read(str(path), as_of=commits[0])
    for g in t.view().all_file_groups():
        assert len(g.all_slices()) <= 3


@pytest.mark.ray
@pytest.mark.parametrize("version", [pytest.param("6", marks=pytest.mark.slow), "8"])
def test_async_compaction_readers_always_see_the_model(ray_session, tmp_path, version):
    path = tmp_path / "t"
    opts = model_options(
        ASYNC_COMPACTION, {"write.tasks": "2", "compaction.delta_commits": "3"}, version=version
    )
    model, wl = TableModel(), Workload(seed=30)
    states: list[list[dict]] = []
    stop = threading.Event()
    errors: list[str] = []

    def poll():
        while not stop.is_set():
            try:
                got = hudi_rs_snapshot(path).to_pylist()
            except Exception:
                continue  # table not created yet
            if got and got not in states:
                errors.append(f"a reader saw a state that was never committed ({len(got)} rows)")
                return
            time.sleep(0.02)  # leave the writers and the compactor some CPU (suite time)

    reader = None
    with hr.HoodieStreamWriter(str(path), opts) as w:
        # 8 checkpoints, more while fewer than two compactions completed beside the stream
        # (how many complete in 8 depends on the machine's load; 30 took ~35 s here, the
        # poller's hudi-rs reads sharing the 2 cores)
        for i in range(45):
            if i >= 8 and len(_compactions(path)) >= 2:
                break
            rows = wl.rows_for(wl.keys[:30]) if i == 0 else wl.upserts(10)
            w.write(to_arrow(rows, True))
            model.upsert(rows)
            states.append(model.as_table().to_pylist())
            w.checkpoint()
            if reader is None:
                reader = threading.Thread(target=poll, daemon=True)
                reader.start()
            assert hudi_rs_snapshot(path).to_pylist() == states[-1], f"checkpoint {i}"
    stop.set()
    reader.join(timeout=30)
    assert not errors, errors[0]
    assert hudi_rs_snapshot(path).to_pylist() == states[-1]
    assert len(_compactions(path)) >= 2
    t = hr.HoodieTable.load(str(path))
    assert [
        i for i in t.timeline if i.state.value != "COMPLETED" and i.action != "compaction"
    ] == []


@pytest.mark.ray
# suite time: a failed compaction rolled back and its plan retried runs in CI in
# test_failed_compaction_rolls_back_and_retries; compactor actors beside a stream in
# test_async_compaction_readers_always_see_the_model[8]
@pytest.mark.slow
def test_killed_compactor_is_rolled_back_and_retried(ray_session, tmp_path):
    import ray

    path = tmp_path / "t"
    opts = model_options(ASYNC_COMPACTION, {"write.tasks": "1", "compaction.delta_commits": "2"})
    model, wl = TableModel(), Workload(seed=31)
    killed = 0
    compactor = f"{job_table('model', str(path))}/compactor-0"
    with hr.HoodieStreamWriter(str(path), opts) as w:
        for i in range(12):
            rows = wl.rows_for(wl.keys[:30]) if i == 0 else wl.upserts(10)
            w.write(to_arrow(rows, True))
            model.upsert(rows)
            w.checkpoint()
            if killed < 2 and CompactionService.open(str(path)).pending():
                try:
                    ray.kill(ray.get_actor(compactor, namespace="hoodie_ray"), no_restart=True)
                    killed += 1
                except ValueError:
                    pass  # already finished
            model.assert_hudi_rs_reads(path, f"checkpoint {i}")
    assert killed >= 1
    model.assert_hudi_rs_reads(path)
    assert len(_compactions(path)) >= 1


def _v6_table_with_logs_after_a_plan(path, java_names: bool) -> tuple[TableModel, str]:
    """A version-6 MOR table, a compaction planned (not run), then an upsert; with
    ``java_names`` its log files renamed as a Java writer names them (the plan's instant as
    their base instant: they open the slice the compaction starts)."""
    opts = model_options({"compaction.schedule.enabled": "false"}, version="6")
    model, wl = TableModel(), Workload(seed=31)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys))
    model.write(path, opts, "upsert", wl.upserts(20))
    planned = CompactionService.open(str(path)).schedule(force=True)
    assert planned is not None
    before = set(path.glob("*/.*.log.*"))
    model.write(path, opts, "upsert", wl.upserts(20))
    after_plan = set(path.glob("*/.*.log.*")) - before
    assert after_plan
    for log in after_plan if java_names else []:
        name = parse_log_file_name(log.name)
        assert name is not None
        log.rename(log.with_name(replace(name, instant=planned, version=1).name))
    return model, planned


def _read_ours(path) -> list[dict]:
    # hudi-rs 0.5 reads a version-6 slice of a pending compaction without the slice before it;
    # this package's reader joins them, as Java's does
    return hr.read(str(path)).select(SCHEMA.names).sort_by("key").cast(SCHEMA).to_pylist()


@pytest.mark.parametrize("fails_in", ["execute", "commit", "copy"])
def test_a_failed_compaction_undoes_only_its_own_files_on_version_6(
    tmp_path, monkeypatch, fails_in
):
    """Undoing a failed execution deletes the base files it wrote and the logs it carried over
    into its slice (``commit``; ``copy``: one cut short), never the logs a Java writer wrote
    there after the plan (``execute``: they carry the plan's instant too)."""
    path = tmp_path / "t"
    model, planned = _v6_table_with_logs_after_a_plan(path, java_names=fails_in == "execute")
    java_logs = {p.name for p in path.glob(f"*/.*_{planned}.log.*")}
    assert _read_ours(path) == model.as_table().to_pylist()
    import hoodie_ray.compaction.api as api

    def failing(*args, **kwargs):
        raise OSError("injected failure")

    if fails_in == "execute":
        monkeypatch.setattr(api, "execute_operation", failing)
    elif fails_in == "commit":  # after the carry-over, as the commit completes
        monkeypatch.setattr(api.ActiveTimeline, "complete", failing)
    else:  # a carried-over copy cut short
        storage_type = type(open_storage(str(path)))
        write_bytes = storage_type.write_bytes

        def half_written(self, rel, data):
            write_bytes(self, rel, data[: len(data) // 2])
            raise OSError("injected failure")

        monkeypatch.setattr(storage_type, "write_bytes", half_written)
    with pytest.raises(hr.HoodieCompactionError, match="injected"):
        compact(str(path))
    assert {p.name for p in path.glob(f"[!.]*/*{planned}*")} == java_logs
    assert _read_ours(path) == model.as_table().to_pylist(), "after the failed compaction"
    monkeypatch.undo()
    assert compact(str(path)).instant == planned
    model.assert_hudi_rs_reads(path, "after the retried compaction")


def test_logs_carried_into_the_new_slice_are_listed_in_the_metadata_table(tmp_path):
    """Version 6 with a metadata table: the logs written after a plan are copied into the
    slice the compaction starts; the ``files`` partition lists the copies (the validator
    compares it with storage), and after the clean of the old slice every row still reads."""
    from tests.write.model import V6_MDT

    path = tmp_path / "t"
    opts = model_options(V6_MDT, {"compaction.schedule.enabled": "false"}, version="6")
    model, wl = TableModel(), Workload(seed=32)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys))
    model.write(path, opts, "upsert", wl.upserts(20))
    planned = CompactionService.open(str(path)).schedule(force=True)
    model.write(path, opts, "upsert", wl.upserts(20))
    assert compact(str(path), opts).instant == planned
    assert hr.validate_metadata(str(path)) == []
    assert list(path.glob(f"*/.*_{planned}.log.*")), "no log was carried over"
    for _ in range(2):
        model.write(path, opts, "upsert", wl.upserts(5))
    hr.clean(str(path), {**opts, "clean.retain_commits": "1"})
    assert hr.validate_metadata(str(path)) == []
    model.assert_hudi_rs_reads(path, "after the clean")
