"""The coordinator's core (hoodie_ray/job/coordinator.py): what it hands each writer task."""

from __future__ import annotations

import dataclasses

import pytest

from hoodie_ray.config.options import resolve_options
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.job.coordinator import Coordinator
from hoodie_ray.table import HoodieTable
from hoodie_ray.write.bucket_assigner import writer_of_groups
from tests.write.model import OPTIONS, SMALL_FILES, Workload, to_arrow


@pytest.mark.parametrize("bucket", [False, True], ids=["simple", "bucket"])
def test_each_writer_gets_the_slices_of_the_groups_routed_to_it(tmp_path, bucket):
    """Split by the same rule the assigners route by (home writers, or the checkpoint's writer
    plan where it names a group): every slice goes to exactly one writer, the one its rows go
    to, so a writer never meets rows of a group whose slice it was not given."""
    extra = (
        {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "8"} if bucket else {}
    )
    options = {**OPTIONS, **SMALL_FILES, **extra}
    wl = Workload(seed=5)
    HoodieWriteClient(str(tmp_path), options).write(to_arrow(wl.rows_for(wl.keys[:200]), True))
    coord = Coordinator(str(tmp_path), resolve_options(options), None)
    coord.open(None)
    try:
        slices = coord.latest_slices()
        assert len(slices) > 3
        profile = coord.profile(slices)
        groups = [s.file_group_id for s in slices]
        plans = [profile.writer_plan, {groups[0]: 2, groups[1]: 2}]  # home split; a plan
        for plan in plans:
            prof = dataclasses.replace(profile, writer_plan=plan)
            split = coord.slices_by_writer(slices, prof, 3)
            want = writer_of_groups(groups, 3, plan, bucket)
            assert sorted(s.file_group_id for part in split for s in part) == sorted(groups)
            for j, part in enumerate(split):
                assert all(want[groups.index(s.file_group_id)] == j for s in part)
        assert coord.slices_by_writer(slices, profile, 1) == [slices]
    finally:
        coord.close()


def test_a_running_coordinator_switches_between_upsert_and_delete_only(tmp_path):
    """``switch_operation``: upsert <-> delete changes the setup the tasks get (its write
    config's operation); any other operation is refused, naming both, the setup unchanged."""
    from hoodie_ray.exceptions import HoodieOptionError

    wl = Workload(seed=3)
    HoodieWriteClient(str(tmp_path), OPTIONS).write(to_arrow(wl.rows_for(wl.keys[:20]), True))
    coord = Coordinator(str(tmp_path), resolve_options(OPTIONS), None)
    coord.open(None)
    try:
        setup = coord.switch_operation("delete")
        assert setup.context.write_config.operation == coord.wc.operation == "delete"
        with pytest.raises(HoodieOptionError, match="from write.operation delete to insert"):
            coord.switch_operation("insert")
        assert coord.setup is setup
        assert coord.switch_operation("upsert").context.write_config.operation == "upsert"
    finally:
        coord.close()


def test_a_long_running_coordinator_keeps_the_columns_another_writer_added(tmp_path):
    """OCC: a coordinator opened before another writer added a column commits that writer's
    schema, and a schema its driver evolves later from its older view keeps the column."""
    import pyarrow as pa

    opts = {**OPTIONS, "hoodie.write.concurrency.mode": "optimistic_concurrency_control"}
    wl = Workload(seed=4)
    seed = to_arrow(wl.rows_for(wl.keys[:10]), True)
    HoodieWriteClient(str(tmp_path), opts).write(seed)
    coord = Coordinator(str(tmp_path), resolve_options(opts), None)
    old = coord.open(None).context.data_schema
    try:
        more = to_arrow(wl.rows_for(wl.keys[10:12]), True)
        more = more.append_column("c", pa.array(["x", "y"]))
        HoodieWriteClient(str(tmp_path), opts).write(more)
        instant = coord.start_instant()
        coord.commit(instant, [])
        assert "c" in coord.setup.context.data_schema.names
        latest = HoodieTable.load(str(tmp_path))
        assert latest.commits()[-1].timestamp == instant and "c" in latest.schema.names
        # the driver evolves from what it knew at open (no c): c stays, d joins
        evolved = coord.refix_schema(old.append(pa.field("d", pa.float64())))
        assert evolved.context.data_schema.names[-2:] == ["d", "c"]
    finally:
        coord.close()


class _HeldRunner:
    """A compaction runner (the Ray compactor pool's protocol) that executes its tasks at
    once in this process but reports them finished only once ``done`` is set: a compaction
    running in the background for as long as a test needs."""

    def __init__(self) -> None:
        self.done = self.fail = False

    def submit(self, tasks):
        from hoodie_ray.compaction.execute import execute_operation

        return [execute_operation(t) for t in tasks]

    def poll(self, handle, wait):
        if self.fail:
            raise RuntimeError("injected: a compactor died")
        return list(handle) if self.done or wait else None

    def reset(self) -> None:
        pass

    def submit_clustering(self, tasks):
        raise AssertionError("no clustering here")


def _open_beside_compaction(tmp_path, seed: int, extra: dict | None = None) -> tuple:
    """An OCC version 8 table with a log to compact (its writers plan none) and an open
    coordinator that runs compactions beside the writes; the table's model, the options and
    the coordinator."""
    from tests.write.model import TableModel, model_options

    opts = model_options(
        extra or {},
        {
            "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
            "compaction.async.enabled": "true",
            "compaction.delta_commits": "1",
        },
        version="8",
    )
    model, wl = TableModel(), Workload(seed=seed)
    unplanned = {**opts, "compaction.schedule.enabled": "false"}
    model.write(tmp_path, unplanned, "upsert", wl.rows_for(wl.keys[:40]))
    model.write(tmp_path, unplanned, "upsert", wl.upserts(10))
    coord = Coordinator(str(tmp_path), resolve_options(opts), None)
    coord.open(None)
    return model, opts, coord


def test_a_background_compaction_heartbeats_and_commits_between_checkpoints(tmp_path):
    """OCC, compaction beside the writes: the plan the coordinator runs in the background
    heartbeats, so another process's ``hr.compact`` leaves it alone; once it finished it is
    committed between checkpoints (``commit_finished``, as a parked topology's is), not only
    at the next barrier, and the next barrier reports it; hudi-rs then reads the model."""
    import hoodie_ray as hr
    from hoodie_ray.write.heartbeat import HeartbeatClient

    model, opts, coord = _open_beside_compaction(tmp_path, seed=6)
    runner = _HeldRunner()
    try:
        assert coord.after_commit(runner) == 1  # scheduled and started in the background
        (instant,) = coord.pending_compactions()
        assert coord.last_services.compaction_started == instant
        assert coord.commit_finished(runner) == []  # not finished yet
        beats = HeartbeatClient(coord.storage, coord.wc.heartbeat_interval_ms, 2)
        assert not beats.is_expired(instant)
        # another process's service: the running plan is not its to run
        other = hr.compact(str(tmp_path), opts)
        assert other.instant != instant
        assert instant in coord.pending_compactions()

        # a checkpoint open: its barrier commits the compaction, not commit_finished
        runner.done = True
        open_instant = coord.start_instant()
        assert coord.commit_finished(runner) == []
        coord.rollback(open_instant)
        assert coord.commit_finished(runner) == [instant]
        assert instant not in coord.pending_compactions()
        assert beats.is_expired(instant)  # its heartbeat stopped with it
        model.assert_hudi_rs_reads(tmp_path)
        coord.after_commit(runner)
        assert coord.last_services.compacted == (instant,)
        coord.after_commit(runner)
        assert coord.last_services.compacted == ()
    finally:
        coord.close()


def test_a_failed_background_compaction_is_rolled_back_in_a_lock_turn(tmp_path, monkeypatch):
    """OCC: a compaction whose compactor failed, found between checkpoints, is rolled back
    holding the table's lock (its files, the metadata table's delta commit), back to
    requested for the next barrier to run again."""
    from hoodie_ray.compaction.api import CompactionService
    from tests.write.model import V8_MDT

    model, _, coord = _open_beside_compaction(tmp_path, seed=7, extra=V8_MDT)
    depths = []
    real = CompactionService.rollback_inflight

    def recorded(self, instant):
        depths.append(coord._lock_depth)
        return real(self, instant)

    monkeypatch.setattr(CompactionService, "rollback_inflight", recorded)
    runner = _HeldRunner()
    try:
        assert coord.after_commit(runner) == 1
        (instant,) = coord.pending_compactions()
        runner.fail = True
        assert coord.commit_finished(runner) == []
        assert len(depths) == 1 and depths[0] >= 1  # in a turn of the lock
        table = HoodieTable.load(str(tmp_path))
        assert [
            (i.timestamp, i.state.value) for i in table.active_timeline.pending_compactions()
        ] == [(instant, "REQUESTED")]
        runner.fail, runner.done = False, True
        coord.after_commit(runner)  # the next barrier runs it again
        coord.after_commit(runner)
        assert instant in {i.timestamp for i in HoodieTable.load(str(tmp_path)).commits()}
        model.assert_hudi_rs_reads(tmp_path)
    finally:
        coord.close()
