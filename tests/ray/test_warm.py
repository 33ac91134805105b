"""hr.write on Ray keeps its topology warm between calls from one process: the next call to the
same table with the same options is one checkpoint of it; anything else that needs the table,
or other options, stops it first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.ray import parking, stream
from hoodie_ray.storage import LocalStorage
from hoodie_ray.write.lock import LOCK_PATH, WriterLock
from tests.conftest import hudi_rs_read

pytestmark = pytest.mark.ray

OPTIONS = {
    "hoodie.table.name": "warm",
    "hoodie.datasource.write.recordkey.field": "id",
    "precombine.field": "ts",
    "write.tasks": "1",
}


def _rows(ids: list[str], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids)})


def _until_dead(actor: object) -> None:
    """Return once calls to a killed actor fail (``ray.kill`` only asks the cluster to)."""
    import ray

    for _ in range(10_000):
        try:
            ray.get(actor.pid.remote(), timeout=60)  # type: ignore[attr-defined]
        except ray.exceptions.RayActorError:
            return
    raise AssertionError("the killed actor still answers")


def _parked() -> parking.Parked | None:
    with parking._parked_lock:
        return next(iter(parking._parked.values()), None)


@pytest.mark.slow  # suite time: test_dataset_stream's warm hr.write test reuses a topology in CI
def test_the_next_call_reuses_the_topology_and_others_take_the_table_back(
    ray_session, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    try:
        hr.write(_rows(["a", "b"], 1), path, OPTIONS)
        first = _parked()
        assert first is not None and first.timer is not None
        assert first.timer.interval == 60.0  # write.warm_idle_s
        coordinator = first.writer.actors["coordinator"]
        # parked: the lock is held (a writer of another process would be refused)
        owner = json.loads((tmp_path / "t" / LOCK_PATH).read_text())["owner"]
        assert owner
        hr.write(_rows(["b", "c"], 2), path, OPTIONS)
        again = _parked()
        assert again is not None and again.writer.actors["coordinator"] == coordinator
        assert sorted(hr.read(path).column("id").to_pylist()) == ["a", "b", "c"]
        # a single-process writer of this process takes the table: the topology stops first
        hr.HoodieWriteClient(path, OPTIONS).write(_rows(["d"], 3))
        assert _parked() is None
        # other options: a new topology, the old one stopped
        hr.write(_rows(["e"], 4), path, OPTIONS)
        one = _parked()
        hr.write(_rows(["f"], 5), path, {**OPTIONS, "write.batch.size": "64"})
        two = _parked()
        assert one is not None and two is not None and two is not one and one.writer._closed
        # the idle timeout stops it and releases the lock
        assert two.timer is not None
        two.timer.function(*two.timer.args)  # what the timer does when it fires
        assert _parked() is None and two.writer._closed
        assert not (tmp_path / "t" / LOCK_PATH).exists()
        assert sorted(hr.read(path).column("id").to_pylist()) == ["a", "b", "c", "d", "e", "f"]
    finally:
        stream.release_warm_writers()


def test_a_delete_between_upserts_is_a_commit_of_the_warm_topology(
    ray_session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``write.operation=delete`` after upserts with otherwise the same options: the same
    coordinator commits it as a DELETE, and the upserts after it as UPSERTs; hudi-rs reads
    what the three commits leave."""
    path = str(tmp_path / "t")
    try:
        hr.write(_rows(["a", "b", "c"], 1), path, OPTIONS)
        first = _parked()
        assert first is not None
        coordinator = first.writer.actors["coordinator"]
        deleted = hr.write(_rows(["b"], 2), path, {**OPTIONS, "write.operation": "delete"})
        hr.write(_rows(["c", "d"], 3), path, OPTIONS)
        last = _parked()
        assert last is not None and last.writer is first.writer
        assert last.writer.actors["coordinator"] == coordinator
        table = hr.HoodieTable.load(path)
        ops = {i.timestamp: table.metadata(i).operation_type for i in table.commits()}
        assert list(ops.values()) == ["UPSERT", "DELETE", "UPSERT"]
        assert ops[deleted.instant] == "DELETE"
        got = hudi_rs_read(path)
        assert sorted(zip(got["id"].to_pylist(), got["ts"].to_pylist(), strict=True)) == [
            ("a", 1),
            ("c", 3),
            ("d", 3),
        ]
        # its coordinator dies while parked: the next call (a delete: the switch finds it
        # gone) starts a new topology, which the dead coordinator's lock does not refuse
        import ray

        ray.kill(coordinator, no_restart=True)
        _until_dead(coordinator)  # the kill is asynchronous: else the switch may reach it
        hr.write(_rows(["d"], 4), path, {**OPTIONS, "write.operation": "delete"})
        last = _parked()
        assert last is not None and last.writer is not first.writer
        assert sorted(hudi_rs_read(path)["id"].to_pylist()) == ["a", "c"]
        # a switch that fails (here: interrupted) stops the topology it took out of the cache
        with monkeypatch.context() as m:
            m.setattr(stream.HoodieStreamWriter, "_switch_operation", _interrupted)
            with pytest.raises(KeyboardInterrupt):
                hr.write(_rows(["a"], 5), path, OPTIONS)
        assert _parked() is None and last.writer._closed
        assert not (tmp_path / "t" / LOCK_PATH).exists()
    finally:
        stream.release_warm_writers()


def _interrupted(*args: object) -> None:
    raise KeyboardInterrupt


def test_a_parked_topology_commits_its_compaction_once_it_finished(
    ray_session, tmp_path: Path
) -> None:
    """OCC: a compaction a write starts beside the writes is committed once its compactors
    finish, while the topology sits parked, not at the next call (as Flink's compaction commit
    sink does): its plan does not hold back another process's services meanwhile."""
    import time

    path = str(tmp_path / "t")
    opts = {
        **OPTIONS,
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "compaction.async.enabled": "true",
        "compaction.delta_commits": "2",
    }
    try:
        hr.write(_rows(["a", "b"], 1), path, opts)
        result = hr.write(_rows(["b", "c"], 2), path, opts)
        started = result.services.compaction_started
        assert started is not None and _parked() is not None
        deadline = time.monotonic() + 120
        table = hr.HoodieTable.load(path)
        while started in {i.timestamp for i in table.active_timeline.pending_compactions()}:
            assert time.monotonic() < deadline, "the parked topology never committed it"
            time.sleep(0.05)
            table = table.refresh()
        assert started in {i.timestamp for i in table.commits()}
        assert _parked() is not None  # no call came in between
        got = hudi_rs_read(path)
        assert sorted(zip(got["id"].to_pylist(), got["ts"].to_pylist(), strict=True)) == [
            ("a", 1),
            ("b", 2),
            ("c", 2),
        ]
        # the next call reports it with its own services
        assert hr.write(_rows(["d"], 3), path, opts).services.compacted == (started,)
    finally:
        stream.release_warm_writers()


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
def test_zero_idle_stops_after_each_call_and_a_failed_call_stops_it(
    ray_session, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    try:
        hr.write(_rows(["a"], 1), path, {**OPTIONS, "write.warm_idle_s": "0"})
        assert _parked() is None and not (tmp_path / "t" / LOCK_PATH).exists()
        hr.write(_rows(["a"], 2), path, OPTIONS)
        assert _parked() is not None
        with pytest.raises(hr.HoodieSchemaError):
            hr.write(pa.table({"nokey": [1]}), path, OPTIONS)
        assert _parked() is None and not (tmp_path / "t" / LOCK_PATH).exists()
        with pytest.raises(hr.HoodieOptionError):
            hr.write(_rows(["a"], 3), path, {**OPTIONS, "write.warm_idle_s": "-1"})
    finally:
        stream.release_warm_writers()


CHILD = """
import json, sys
import pyarrow as pa
import ray
import hoodie_ray as hr

path, options = sys.argv[1], json.loads(sys.argv[2])
ray.init()  # RAY_ADDRESS: the tests' Ray
hr.write(pa.table({"id": ["a", "b"], "ts": [1, 1]}), path, options)  # parked, with the lock
assert hr.read(path).num_rows == 2
ray.shutdown()  # as Ray's docs teach; then the script ends
"""


# suite time (a process of its own): a parked topology whose Ray is gone releases its lock in
# CI in test_a_parked_topology_whose_ray_is_gone_releases_the_lock_it_owned
@pytest.mark.slow
def test_a_script_that_shuts_ray_down_leaves_the_table_to_the_next_writer(
    ray_session, tmp_path: Path
) -> None:
    """``hr.write`` on Ray, ``ray.shutdown()``, exit: the parked topology's lock went with it,
    so the next writer (here one of another process, single-process) is not refused."""
    path = tmp_path / "t"
    env = {**os.environ, "RAY_ADDRESS": ray_session.get_runtime_context().gcs_address}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
    )
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), json.dumps(OPTIONS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (path / LOCK_PATH).exists()
    hr.write(_rows(["b", "c"], 2), str(path), OPTIONS, engine="local")
    got = hudi_rs_read(path)
    assert sorted(zip(got["id"].to_pylist(), got["ts"].to_pylist(), strict=True)) == [
        ("a", 1),
        ("b", 2),
        ("c", 2),
    ]


def test_a_parked_topology_whose_ray_is_gone_releases_the_lock_it_owned(tmp_path: Path) -> None:
    """Ray went down without the parked topology being stopped first (``from ray import
    shutdown``, a Ray that crashed or restarted): its coordinator's lock is released by the
    driver, which knows the owner id, when the topology is stopped (idle timer, exit, another
    writer of this process) -- only while the lock is still that owner's."""
    storage = LocalStorage(str(tmp_path))
    held = WriterLock(storage, heartbeat_ms=60_000).acquire()  # the dead coordinator's lock
    held._stop.set()  # its heartbeat died with it
    writer = stream.HoodieStreamWriter(str(tmp_path), {"hoodie.table.name": "t"})
    writer.owner = "other"
    gone = parking.Parked(writer, storage.base_uri, "key", session="a Ray shut down")
    parking.stop_parked(gone)
    assert (tmp_path / LOCK_PATH).exists()  # not its owner's lock: left alone
    writer.owner = held.owner
    parking.stop_parked(gone)
    assert not (tmp_path / LOCK_PATH).exists() and writer.closed
    WriterLock(storage).acquire().release()


def test_a_task_lost_while_parked_costs_an_insert_no_duplicate(ray_session, tmp_path: Path) -> None:
    """A parked topology lost a task host: the next ``hr.write`` finds it as it routes its
    blocks, and its first block's instant start fails. The recovery replays the blocks kept so
    far and the rest follow once: an insert (no precombine to hide a second copy) writes each
    row once."""
    import ray

    path = str(tmp_path / "t")
    # every insert opens a file group of its own: a second copy is a second row of a base file
    opts = {
        **OPTIONS,
        "write.tasks": "2",
        "write.operation": "insert",
        "hoodie.parquet.small.file.limit": "1",
    }
    try:
        hr.write(_rows(["a", "b"], 1), path, opts)
        parked = _parked()
        assert parked is not None
        victim = parked.writer.actors["writer-1"]
        ray.kill(victim, no_restart=True)
        _until_dead(victim)
        blocks = [_rows([f"k{b}-{i}" for i in range(50)], 2) for b in range(4)]
        hr.write(ray.data.from_arrow(blocks), path, opts)
    finally:
        stream.release_warm_writers()
    got = hudi_rs_read(path)["id"].to_pylist()
    want = ["a", "b"] + [f"k{b}-{i}" for b in range(4) for i in range(50)]
    assert sorted(got) == sorted(want)
