"""Ray Datasets into a live topology: HoodieStreamWriter.write(ds) over checkpoints and warm
hr.write(ds) keep their actors and key index, give the table the driver path gives, lose
nothing when an actor dies, and refuse bad input as the HoodieError itself."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import hoodie_ray as hr
from tests.fixtures_ray import checkpoint_with_kill
from tests.write.model import (
    OPTIONS,
    TableModel,
    Workload,
    hudi_rs_snapshot,
    to_arrow,
    upsert_commits,
)

pytestmark = pytest.mark.ray

TOPOLOGY = {"write.tasks": "2", "write.bucket_assign.tasks": "2"}


def _dataset(ray, rows: list[dict], blocks: int = 3):
    """A dataset of several blocks made by Ray tasks (as a pipeline's would be)."""
    t = to_arrow(rows, True)
    step = max(1, -(-t.num_rows // blocks))
    return ray.data.from_arrow_refs(
        [ray.put(t.slice(i, step)) for i in range(0, t.num_rows, step)]
    ).materialize()


# suite time (two topologies): Datasets through a stream writer read as the model in CI in
# tests/ray/test_dataset_inputs.py::test_every_dataset_constructor_through_the_stream_writer, the
# actors kept and an empty Dataset committing nothing in test_warm_hr_write_of_datasets_keeps_the_
# topology; an unchained topology in tests/compaction/test_compaction.py (async compaction)
@pytest.mark.slow
def test_dataset_stream_keeps_actors_and_matches_the_driver_path(ray_session, tmp_path):
    ray = ray_session
    commits = upsert_commits(21, 3)  # suite time (was 4): two checkpoints after the first
    model = TableModel()
    by_driver, by_dataset = tmp_path / "driver", tmp_path / "dataset"
    with (
        hr.HoodieStreamWriter(
            # unchained (separate assigner and writer actors): both topologies, one model
            str(by_driver),
            {
                **OPTIONS,
                **TOPOLOGY,
                "hoodie.table.name": "driver",
                "pipeline.operator-chaining": "false",
            },
        ) as d,
        hr.HoodieStreamWriter(str(by_dataset), {**OPTIONS, **TOPOLOGY}) as w,
    ):
        for i, rows in enumerate(commits):
            d.write(to_arrow(rows, True))
            d.checkpoint()
            w.write(_dataset(ray, rows))
            assert w.checkpoint() is not None
            if i == 0:
                pids, boot = w.actor_pids(), [s["bootstrap_ms"] for s in w.index_stats()]
            model.upsert(rows)
            want = model.as_table().to_pylist()
            assert hudi_rs_snapshot(by_dataset).to_pylist() == want, f"checkpoint {i}"
            assert hudi_rs_snapshot(by_driver).to_pylist() == want, f"checkpoint {i}"
        # the same actors (no restart) and key index (no bootstrap after the first) throughout
        assert w.actor_pids() == pids
        assert [s["bootstrap_ms"] for s in w.index_stats()] == boot
        assert sum(s["keys"] for s in w.index_stats()) >= len(model.rows)
        empty = ray.data.from_arrow(to_arrow(commits[0], True).slice(0, 0))
        w.write(empty)
        assert w.checkpoint() is None  # nothing to write: no instant


def test_warm_hr_write_of_datasets_keeps_the_topology(ray_session, tmp_path):
    from hoodie_ray.ray.parking import _parked, release_warm_writers

    ray = ray_session
    path = str(tmp_path / "t")
    model = TableModel()
    pids = None
    try:
        # suite time: 2 writes (was 3): the second already finds the first's topology
        for rows in upsert_commits(22, 2):
            assert hr.write(_dataset(ray, rows, 2), path, OPTIONS).instant is not None
            model.upsert(rows)
            (parked,) = _parked.values()
            now = parked.writer.actor_pids()
            assert pids is None or now == pids  # one topology for every write
            pids = now
        model.assert_hudi_rs_reads(tmp_path / "t")
        n = len(hr.HoodieTable.load(path).timeline)
        empty = ray.data.from_arrow(to_arrow(upsert_commits(22, 1)[0], True).slice(0, 0))
        assert hr.write(empty, path, OPTIONS).instant is None
        assert len(hr.HoodieTable.load(path).timeline) == n  # no instant for zero rows

        # another writer (of another process: its own owner id) is refused while the topology
        # is warm, and told how to stop it; nothing is started
        from hoodie_ray.config.options import resolve_options
        from hoodie_ray.ray.topology import WriteTopology
        from hoodie_ray.write.lock import ProcessId, new_owner_id

        other = WriteTopology(
            path, OPTIONS, None, resolve_options(OPTIONS), new_owner_id(), ProcessId.current()
        )
        with pytest.raises(hr.HoodieCommitConflictError, match=r"release_warm_writers\(\)"):
            other.new_coordinator()
        assert other.coord is None
    finally:
        release_warm_writers()


# Suite time (~28 s on 2 cores: three topology restarts): the replay of kept input after a lost
# actor is the same for every input kind, and the suite kills actors at every phase with Arrow
# input (tests/ray/test_pipelined.py, tests/reliability/test_faults.py).
@pytest.mark.slow
def test_actor_killed_mid_dataset_write_loses_nothing(ray_session, tmp_path):
    ray = ray_session
    path = tmp_path / "t"
    rng = random.Random(5)
    model = TableModel()
    roles = ["assigner-1", "writer-0", "coordinator"]
    with hr.HoodieStreamWriter(str(path), {**OPTIONS, **TOPOLOGY}) as w:
        for i, rows in enumerate(upsert_commits(23, 4)):
            w.write(_dataset(ray, rows))
            model.upsert(rows)
            if i == 0:
                w.checkpoint()
                continue
            checkpoint_with_kill(w, w.actors[roles[i - 1]], rng.choice(["before", "during"]), rng)
            model.assert_hudi_rs_reads(path, i)


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
def test_bad_dataset_rows_fail_as_themselves(ray_session, tmp_path):
    ray = ray_session
    path = str(tmp_path / "t")
    hr.write(to_arrow([Workload(1)._row("a")], False), path, OPTIONS)
    before = hudi_rs_snapshot(tmp_path / "t").to_pylist()
    instants = [(i.timestamp, i.action, i.state) for i in hr.HoodieTable.load(path).timeline]
    good = to_arrow([Workload(1)._row("b")], False)
    null_key = good.set_column(0, "key", pa.array([None], pa.string()))
    ds = ray.data.from_arrow([good, null_key])
    with pytest.raises(hr.HoodieInputError, match="key") as e:
        hr.write(ds, path, OPTIONS)
    assert type(e.value).__module__.startswith("hoodie_ray")
    assert "Traceback" not in str(e.value) and len(str(e.value)) < 500
    # blocks of one dataset whose column types conflict: the schema error names the column
    s = good.set_column(4, "s", pa.array([1.5]))
    with pytest.raises(hr.HoodieSchemaError, match=r"\bs\b"):
        hr.write(ray.data.from_arrow([good, s]), path, OPTIONS)
    assert hudi_rs_snapshot(tmp_path / "t").to_pylist() == before
    # refused before an instant was opened: not even a rollback in the timeline
    assert [
        (i.timestamp, i.action, i.state) for i in hr.HoodieTable.load(path).timeline
    ] == instants


def test_a_refused_row_fails_its_checkpoint_and_the_stream_goes_on(ray_session, tmp_path):
    """A refused row fails its checkpoint; the stream goes on, then a lazy Dataset (a read, a
    map, still to execute) streams into the open checkpoint: its Ray Data tasks get CPUs while
    the topology's actors hold theirs. (Suite time: one topology for both, which were two
    tests.)"""
    ray = ray_session
    path = tmp_path / "t"
    first, second, third = upsert_commits(24, 3)
    model = TableModel()
    with hr.HoodieStreamWriter(str(path), {**OPTIONS, **TOPOLOGY}) as w:
        w.write(to_arrow(first, True))
        bad = to_arrow(first[:2], True)
        bad = bad.set_column(0, "key", pa.array([None, "x"], pa.string()))
        with pytest.raises(hr.HoodieInputError, match="key"):
            w.write(bad)
            w.checkpoint()
        assert not path.exists() or hudi_rs_snapshot(path).num_rows == 0
        # the stream goes on from the table as it is: the failed checkpoint left nothing
        w.write(to_arrow(second, True))
        assert w.checkpoint() is not None
        model.upsert(second)
        model.assert_hudi_rs_reads(path, "after the refused checkpoint")

        table = to_arrow(third, True)

        def rows_of(batch: pa.Table) -> pa.Table:
            ids = batch.column("id").to_pylist()
            return table.take(pa.array(ids))

        ds = ray.data.range(table.num_rows, override_num_blocks=3).map_batches(
            rows_of, batch_format="pyarrow"
        )
        w.write(ds)
        assert w.checkpoint() is not None
        model.upsert(third)
    model.assert_hudi_rs_reads(path, "the lazy dataset")
