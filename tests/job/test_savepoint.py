"""Savepoints and restore: a table restored to a savepoint after upserts, deletes,
overwrites, partition deletes, compactions and cleans reads as it did then (hudi-rs), its
metadata table validates, and a restore that died is finished by running it again."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import hoodie_ray as hr
from hoodie_ray.job import savepoint as savepoint_mod
from hoodie_ray.job.maintenance import validate_metadata
from hoodie_ray.table import HoodieTable
from tests.write.model import V6_MDT, V8_MDT, TableModel, Workload, hudi_rs_snapshot, model_options

SERVICES = {
    "hoodie.cleaner.commits.retained": "2",
    "compaction.delta_commits": "2",
    "hoodie.keep.min.commits": "3",
    "hoodie.keep.max.commits": "4",
}


def _reads(path, model: TableModel, step: str) -> None:
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist(), step


@pytest.mark.parametrize(
    ("table_type", "version"),
    [
        ("MERGE_ON_READ", "8"),
        ("MERGE_ON_READ", "6"),
        pytest.param("COPY_ON_WRITE", "8", marks=pytest.mark.slow),  # suite time
    ],
    ids=["mor-v8", "mor-v6", "cow-v8"],
)
def test_restore_brings_back_the_savepoint(tmp_path, table_type, version):
    """Writes, a savepoint, then writes of every kind with compactions, cleans and archival
    beside them (the savepoint's files survive the cleans); the restore reads as the
    savepoint did, the metadata table validates, and the table takes writes after it."""
    path = tmp_path / "t"
    opts = model_options(
        V8_MDT if version == "8" else V6_MDT,
        SERVICES,
        table_type=table_type,
        version=version,
        small_files=True,
    )
    model, wl = TableModel(), Workload(seed=31 + int(version))
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:30]))
    for _ in range(2):
        model.write(path, opts, *wl.next_commit())
    point = hr.savepoint(str(path), comments="before the bad job")
    saved = copy.deepcopy(model)
    kinds = []
    for i in range(8):
        kind, rows = wl.next_commit() if i % 3 else wl.replace_commit(model)
        if kind == "insert":
            rows = [dict(r, key="i" + r["key"]) for r in rows]
        model.write(path, opts, kind, rows)
        kinds.append(kind)
    table = HoodieTable.load(str(path))
    assert any(i.action == "clean" for i in table.timeline), "the cleaner ran meanwhile"
    assert [s.instant for s in hr.savepoints(str(path))] == [point]
    res = hr.restore(str(path), point)
    assert res.savepoint == point and len(res.rolled_back) >= 8
    _reads(path, saved, "restored")
    assert validate_metadata(str(path)) == []
    table = HoodieTable.load(str(path))
    later = [i for i in table.timeline if i.timestamp > point and i.action not in ("clean",)]
    assert [(i.action, i.state.value) for i in later] == [("restore", "COMPLETED")]
    # time travel to the savepoint reads it too
    model = saved
    rows = wl.rows_for(wl.keys[:10])
    model.write(path, opts, "upsert", rows)
    _reads(path, model, "written after the restore")
    assert validate_metadata(str(path)) == []


@pytest.mark.parametrize("to_version", ["8", "9"])
def test_a_restore_past_an_upgrade_keeps_the_blocks_older_writes_left_in_version_6_logs(
    tmp_path, to_version
):
    """A version-6 slice's writes share its log file. Upgraded to 8+, a restore to a savepoint
    taken before the upgrade rolls back a write that appended to such a log: the log keeps
    the savepoint's blocks (a rollback command block ends it), it is not deleted."""
    path = tmp_path / "t"
    opts = model_options({"compaction.schedule.enabled": "false"}, version="6")
    model, wl = TableModel(), Workload(seed=40)
    model.write(path, opts, "insert", wl.rows_for(wl.keys[:20]))
    model.write(path, opts, "upsert", wl.upserts(8))
    point = hr.savepoint(str(path))
    saved = copy.deepcopy(model)
    model.write(path, opts, "upsert", wl.upserts(8))
    hr.upgrade(str(path), to_version=to_version)
    res = hr.restore(str(path), point)
    assert len(res.rolled_back) == 1
    _reads(path, saved, "restored")
    assert sorted(r["key"] for r in hr.read(str(path)).to_pylist()) == sorted(
        r["key"] for r in saved.as_table().to_pylist()
    )
    model = saved
    model.write(path, {**opts, "hoodie.write.table.version": to_version}, "upsert", wl.upserts(5))
    _reads(path, model, "written after the restore")


def test_a_restore_that_died_is_finished_by_running_it_again(tmp_path, monkeypatch):
    """A restore killed half way leaves its plan pending: writers refuse the table (naming the
    savepoint), and running the restore again finishes it."""
    path = tmp_path / "t"
    opts = model_options(V8_MDT, table_type="MERGE_ON_READ", version="8")
    model, wl = TableModel(), Workload(seed=41)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:30]))
    point = hr.savepoint(str(path))
    saved = copy.deepcopy(model)
    for _ in range(3):
        model.write(path, opts, "upsert", wl.rows_for(wl.keys[:8]))
    real = savepoint_mod._roll_back
    calls = []

    def dies_second(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("killed")
        return real(*a, **k)

    with monkeypatch.context() as m:
        m.setattr(savepoint_mod, "_roll_back", dies_second)
        with pytest.raises(OSError):
            hr.restore(str(path), point)
    with pytest.raises(hr.HoodieTimelineError, match=f"restore to savepoint {point}"):
        model.write(path, opts, "upsert", wl.rows_for(wl.keys[:3]))
    # the table services refuse it too: a compaction ran now baked the writes the restore
    # rolls back into a new base file, which the finished restore kept
    p = str(path)
    services = {
        "compact": lambda: hr.compact(p, opts),
        "compact dry run": lambda: hr.compact(p, opts, dry_run=True),
        "cluster": lambda: hr.cluster(p, opts),
        "clean": lambda: hr.clean(p, opts),
        "archive": lambda: hr.archive(p, opts),
        "create_index": lambda: hr.create_index(p, "ts_idx", "ts"),
        "init_metadata": lambda: hr.init_metadata(p),
        # a rollback too, of the restore itself (it was forgotten, half done) or of a write
        "rollback of the restore": lambda: hr.rollback(p, pending_restore_instant()),
    }

    def pending_restore_instant() -> str:
        table = HoodieTable.load(p)
        return next(i.timestamp for i in table.active_timeline.pending() if i.action == "restore")

    for name, run in services.items():
        with pytest.raises(hr.HoodieTimelineError, match=f"restore to savepoint {point}"):
            run()
            pytest.fail(f"{name} ran on a table a restore did not finish")
    hr.restore(str(path), point)
    _reads(path, saved, "finished")
    assert validate_metadata(str(path)) == []


def test_a_restore_waits_for_writes_whose_heartbeat_is_live(tmp_path):
    """OCC: a restore that would roll back a write still running (its heartbeat beats) is
    refused, naming it, the table unchanged; once that writer is gone (no heartbeat) the
    restore rolls the write back with the rest."""
    from hoodie_ray.config.options import resolve_options
    from hoodie_ray.job.coordinator import Coordinator
    from tests.write.test_commit_failures import snapshot_files

    path = tmp_path / "t"
    opts = model_options(
        {"hoodie.write.concurrency.mode": "optimistic_concurrency_control"}, version="8"
    )
    model, wl = TableModel(), Workload(seed=44)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:20]))
    point = hr.savepoint(str(path))
    saved = copy.deepcopy(model)
    model.write(path, opts, "upsert", wl.upserts(5))
    writer = Coordinator(str(path), resolve_options(opts), None)  # a writer mid-checkpoint
    writer.open(None)
    running = writer.start_instant()
    try:
        before = snapshot_files(path)
        with pytest.raises(hr.HoodieTimelineError, match=f"{running} \\(deltacommit\\)"):
            hr.restore(str(path), point, options=opts)
        assert snapshot_files(path) == before
    finally:
        writer.close()  # its heartbeat expires (close leaves the file: deleted here)
    (path / ".hoodie" / ".heartbeat" / running).unlink()
    res = hr.restore(str(path), point, options=opts)
    assert (running, "deltacommit") in res.rolled_back
    _reads(path, saved, "restored")


def test_savepoint_refusals_and_delete(tmp_path):
    """A savepoint of an instant that is not a completed commit, a restore to a missing one or
    past a newer one are refused with the table unchanged; a deleted savepoint lets the
    cleaner take its files."""
    path = tmp_path / "t"
    opts = model_options(
        {"hoodie.cleaner.commits.retained": "1", "hoodie.metadata.enable": "false"},
        table_type="COPY_ON_WRITE",
        version="8",
    )
    model, wl = TableModel(), Workload(seed=43)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:30]))
    first = hr.savepoint(str(path))
    old = {p.name for p in path.rglob("*.parquet")}
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:30]))
    second = hr.savepoint(str(path), user="me")
    with pytest.raises(hr.HoodieTimelineError, match="not a completed commit"):
        hr.savepoint(str(path), "20000101000000000")
    with pytest.raises(hr.HoodieTimelineError, match="savepointed already"):
        hr.savepoint(str(path), second)
    with pytest.raises(hr.HoodieTimelineError, match="newer savepoints"):
        hr.restore(str(path), first)
    with pytest.raises(hr.HoodieTimelineError, match="no savepoint at"):
        hr.restore(str(path), "20000101000000000")
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:30]))
    assert old <= {p.name for p in path.rglob("*.parquet")}, "the savepoint keeps its files"
    hr.delete_savepoint(str(path), first)
    assert [s.instant for s in hr.savepoints(str(path))] == [second]
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:30]))
    assert not old & {p.name for p in path.rglob("*.parquet")}, "cleaned once deleted"
    _reads(path, model, "after")


# -- restores and version 6 compactions that carried logs into their slice -------------------


def _v6_plan_then(path, model, wl, opts):
    """A version 6 table (no compaction scheduled by its writers) and a compaction planned;
    its instant."""
    from hoodie_ray.compaction.api import CompactionService

    model.write(path, opts, "upsert", wl.rows_for(wl.keys))
    model.write(path, opts, "upsert", wl.upserts(20))
    planned = CompactionService.open(str(path)).schedule(force=True)
    assert planned is not None
    return planned


def test_a_restore_past_a_v6_compaction_deletes_the_logs_it_carried(tmp_path):
    """The compaction copied the log written after its plan into its slice; a restore to a
    savepoint before the plan rolls both back: the copy goes too (nothing named by the
    compaction is left), and the table reads as the savepoint did."""
    path = tmp_path / "t"
    opts = model_options(V6_MDT, {"compaction.schedule.enabled": "false"}, version="6")
    model, wl = TableModel(), Workload(seed=45)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys))
    point = hr.savepoint(str(path))
    saved = copy.deepcopy(model)
    from hoodie_ray.compaction.api import CompactionService

    model.write(path, opts, "upsert", wl.upserts(20))
    planned = CompactionService.open(str(path)).schedule(force=True)
    model.write(path, opts, "upsert", wl.upserts(20))  # after the plan: carried over
    assert hr.compact(str(path), opts).instant == planned
    assert list(path.glob(f"*/.*_{planned}.log.*"))
    hr.restore(str(path), point)
    assert not list(path.glob(f"*/*{planned}*")) and not list(path.glob(f"*/.*{planned}*"))
    _reads(path, saved, "restored")
    assert validate_metadata(str(path)) == []


@pytest.mark.parametrize("appended", [False, True], ids=["copy", "copy-appended-to"])
def test_a_rolled_back_write_stays_rolled_back_in_the_copy_a_compaction_carried(tmp_path, appended):
    """A write after a plan (D) is rolled back by a restore that keeps the compaction, which
    had carried D's blocks into its slice: the copy gets D's rollback block too (also when a
    later write appended to the copy, the new slice's latest log), so once the savepoint is
    gone and archival passes D (blocks older than the active timeline read as committed) D's
    rows still do not come back."""
    path = tmp_path / "t"
    opts = model_options(
        {
            "compaction.schedule.enabled": "false",
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
            "clean.retain_commits": "1",
        },
        version="6",
    )
    model, wl = TableModel(), Workload(seed=46)
    planned = _v6_plan_then(path, model, wl, opts)
    model.write(path, opts, "upsert", wl.upserts(20))  # after the plan, kept
    point = hr.savepoint(str(path))
    saved = copy.deepcopy(model)
    model.write(path, opts, "upsert", wl.upserts(20))  # D: after the plan, rolled back
    assert hr.compact(str(path), opts).instant == planned
    if appended:
        model.write(path, opts, "upsert", wl.upserts(20))  # appends to the copies
    hr.restore(str(path), point)
    _reads(path, saved, "restored")
    hr.delete_savepoint(str(path), point)
    model = saved
    for _ in range(6):
        model.write(path, opts, "upsert", wl.upserts(3))
        hr.clean(str(path), opts)
        hr.archive(str(path), opts)
    first = min(i.timestamp for i in HoodieTable.load(str(path)).active_timeline.instants)
    assert first > point, "archival did not pass the rolled-back write"
    _reads(path, model, "after archival")
    assert sorted(map(str, hr.read(str(path)).select(["key", "ts", "v"]).to_pylist())) == sorted(
        map(str, model.as_table().select(["key", "ts", "v"]).to_pylist())
    )


@pytest.mark.parametrize(
    ("upgrade", "keep_w", "dies"),
    [(None, True, False), ("8", True, False), (None, False, False), (None, False, True)],
    ids=["v6-kept", "upgraded-kept", "v6-rolled-back", "v6-rolled-back-restore-died"],
)
def test_a_restore_past_a_compaction_gives_back_the_log_a_write_moved_into_it(
    tmp_path, monkeypatch, upgrade, keep_w, dies
):
    """OCC on version 6: write W is in flight while another writer commits (then a
    savepoint) and a compaction runs beside it; W commits after the compaction, moving its
    log into the compaction's slice. A restore past the compaction moves that log back to the
    slice before it: W, when older than the savepoint, keeps its rows (they were deleted with
    the compaction's files, or left in a slice no reader lists); when W is rolled back too, its
    rows go, for good (also when the restore died between the two and ran again: W's rollback
    finds its log where it went), after the savepoint is deleted and archival passes W."""
    from hoodie_ray.job.client import HoodieWriteClient
    from hoodie_ray.job.coordinator import Coordinator
    from tests.write.model import to_arrow

    path = str(tmp_path / "t")
    opts = model_options(
        {
            "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
            "compaction.schedule.enabled": "false",
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
            "clean.retain_commits": "1",
        },
        version="6",
    )

    def row(key, p, ts, v):
        return {"key": key, "p": p, "ts": ts, "v": v, "s": f"{key}@{ts}"}

    def write(rows):
        HoodieWriteClient(path, opts).write(to_arrow(rows, True))

    write([row(f"{p}{i}", p, 1, i) for p in "ab" for i in range(4)])
    write([row("a0", "a", 2, 100)])  # a log in a's group, for the compaction
    before_w = None if keep_w else hr.savepoint(path)
    real = Coordinator.commit
    seen: dict[str, str] = {}

    def commit(self, instant, stats, partitions=None):
        if not seen:
            seen["w"] = instant
            write([row("b0", "b", 3, 300)])  # another writer, partition b
            seen["point"] = hr.savepoint(path) if keep_w else ""
            seen["compaction"] = hr.compact(path, opts).instant or ""
        return real(self, instant, stats, partitions)

    monkeypatch.setattr(Coordinator, "commit", commit)
    write([row("a1", "a", 4, 400)])  # W
    monkeypatch.setattr(Coordinator, "commit", real)
    assert seen["w"] < seen["compaction"] and list(
        Path(path).glob(f"a/.*_{seen['compaction']}.log.*")
    )
    if upgrade:
        hr.upgrade(path, to_version=upgrade)
    point = seen["point"] if keep_w else before_w
    if dies:  # killed after the compaction's rollback, before W's
        real_roll_back = savepoint_mod._roll_back

        def killed(table, protocol, info):
            if info.commit_time == seen["w"]:
                raise OSError("killed")
            return real_roll_back(table, protocol, info)

        with monkeypatch.context() as m:
            m.setattr(savepoint_mod, "_roll_back", killed)
            with pytest.raises(OSError):
                hr.restore(path, point)
    hr.restore(path, point)
    want = {
        **{f"{p}{i}": i for p in "ab" for i in range(4)},
        "a0": 100,
        **({"b0": 300, "a1": 400} if keep_w else {}),
    }
    got = {r["key"]: r["v"] for r in hudi_rs_snapshot(path).to_pylist()}
    assert got == want
    assert {r["key"]: r["v"] for r in hr.read(path).to_pylist()} == got
    if not keep_w:
        hr.delete_savepoint(path, point)
        for i in range(5):
            write([row("b1", "b", 10 + i, i)])
            hr.clean(path, opts)
            hr.archive(path, opts)
        want["b1"] = 4
        first = min(i.timestamp for i in HoodieTable.load(path).active_timeline.instants)
        assert first > seen["w"], "archival did not pass W"
        assert {r["key"]: r["v"] for r in hr.read(path).to_pylist()} == want
