"""The table services on request (hr.compact, hr.clean, hr.archive, each with a dry run) on a
table with completed and pending instants: each reports what it did (or would do), holds the
writer lock, keeps the metadata table in step (versions 8+), and hudi-rs reads the model
after each."""

from __future__ import annotations

from pathlib import Path

import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieCommitConflictError
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.job.maintenance import schedule_compaction
from hoodie_ray.table import HoodieTable
from hoodie_ray.write.commit import CommitProtocol
from hoodie_ray.write.lock import LOCK_PATH, WriterLock
from tests.write.model import TableModel, Workload, hudi_rs_snapshot, model_options, to_arrow

#: Writers run no table service of their own: only the calls under test do.
WRITE_OPTIONS = model_options(
    {
        "compaction.schedule.enabled": "false",
        "clean.async.enabled": "false",
        "hoodie.archive.automatic": "false",
        "hoodie.metadata.compact.max.delta.commits": "3",
    },
    table_type="MERGE_ON_READ",
)
#: What the services keep, given to the calls.
SERVICE_OPTIONS = {
    "clean.retain_commits": "2",
    "archive.min_commits": "3",
    "archive.max_commits": "4",
    "compaction.schedule.enabled": "false",
}


def _files(path: Path) -> set[str]:
    """Data files in storage (relative paths), the metadata table and .hoodie left out."""
    return {
        str(p.relative_to(path))
        for p in path.rglob("*")
        if p.is_file() and ".hoodie" not in p.parts and not p.name.startswith(".hoodie_partition")
    }


def _instants(path: Path) -> list[tuple[str, str, str]]:
    t = HoodieTable.load(str(path))
    return [(i.timestamp, i.action, i.state.value) for i in t.active_timeline.instants]


def _check(path: Path, model: TableModel, what: str) -> None:
    assert hudi_rs_snapshot(path).equals(model.as_table()), f"hudi-rs after {what}"
    if HoodieTable.load(str(path)).uses_metadata_table:
        assert hr.validate_metadata(str(path)) == [], f"metadata table after {what}"


class _Writes:
    def __init__(self, path: Path, version: str) -> None:
        self.path = path
        self.opts = {**WRITE_OPTIONS, "hoodie.write.table.version": version}
        self.model, self.wl = TableModel(), Workload(11, keys=12, partitions=("a", "b"))
        self.commits: list[str] = []

    def upsert(self, n: int) -> None:
        rows = self.wl.rows_for(self.wl.keys[:n])
        res = HoodieWriteClient(str(self.path), self.opts).write(to_arrow(rows, True))
        self.model.upsert(rows)
        assert res.instant is not None
        self.commits.append(res.instant)


@pytest.mark.parametrize("version", ["6", "8"])
def test_compact_clean_archive_on_request(tmp_path: Path, version: str) -> None:
    path = tmp_path / "t"
    w = _Writes(path, version)
    w.upsert(12)
    w.upsert(5)
    first = hr.compact(str(path))
    assert first.instant is not None and first.scheduled and not first.dry_run
    w.upsert(5)
    w.upsert(4)

    # compact, dry run: the plan a new compaction would run; nothing written
    before = _instants(path)
    dry = hr.compact(str(path), dry_run=True)
    assert dry.dry_run and dry.scheduled and dry.instant is None
    view = {
        (s.partition_path, s.file_id): s for s in HoodieTable.load(str(path)).latest_file_slices()
    }
    with_logs = {k for k, s in view.items() if s.log_files}
    assert {(s.partition_path, s.file_id) for s in dry.slices} == with_logs
    for s in dry.slices:
        live = view[(s.partition_path, s.file_id)]
        assert (s.base_instant, s.base_file, list(s.log_files)) == (
            live.base_instant,
            live.base_file,
            list(live.log_files),
        )
    assert _instants(path) == before
    done = hr.compact(str(path))
    assert done.instant is not None and done.slices == dry.slices
    _check(path, w.model, "compaction")
    w.upsert(3)

    # pending instants: a compaction plan, and the write of a writer that died
    pending_plan = schedule_compaction(str(path), force=True)
    assert pending_plan is not None
    dead = CommitProtocol(HoodieTable.load(str(path))).start()

    # compact, dry run: the pending plan would run first
    dry = hr.compact(str(path), dry_run=True)
    assert dry.instant == pending_plan and not dry.scheduled and dry.slices

    # clean: the slices older than the 2nd latest commit (the last compaction) go
    files = _files(path)
    dry_clean = hr.clean(str(path), SERVICE_OPTIONS, dry_run=True)
    assert dry_clean.instant is None and dry_clean.earliest_commit_to_retain == done.instant
    assert _files(path) == files and _instants(path)[-1][0] == dead
    expected: set[str] = set()
    for group in HoodieTable.load(str(path)).view().all_file_groups():
        for s in group.all_slices():
            if s.base_instant < done.instant:
                names = ([s.base_file] if s.base_file else []) + list(s.log_files)
                expected |= {f"{s.partition_path}/{n}" for n in names}
    assert expected
    listed = {f"{p}/{n}" for p, names in dry_clean.files.items() for n in names}
    assert listed == expected and dry_clean.num_files == len(expected)

    cleaned = hr.clean(str(path), SERVICE_OPTIONS)
    assert cleaned.instant is not None and not cleaned.dry_run and not cleaned.failed
    assert cleaned.files == dry_clean.files
    assert cleaned.earliest_commit_to_retain == done.instant
    assert files - _files(path) == expected
    tl = HoodieTable.load(str(path)).active_timeline
    assert tl.get(cleaned.instant).is_completed and not tl.get(dead).is_completed
    _check(path, w.model, "clean")
    again = hr.clean(str(path), SERVICE_OPTIONS)
    assert again.instant is None and again.files == {}

    # archive: past 4 completed commits, down to 3, never reaching what the clean retains
    dry_archive = hr.archive(str(path), SERVICE_OPTIONS, dry_run=True)
    assert dry_archive.dry_run and dry_archive.instants
    before = _instants(path)
    assert hr.archive(str(path), SERVICE_OPTIONS, dry_run=True) == dry_archive
    assert _instants(path) == before
    archived = hr.archive(str(path), SERVICE_OPTIONS)
    assert archived.instants == dry_archive.instants and not archived.dry_run
    times = {ts for ts, _ in archived.instants}
    assert all(ts < done.instant for ts in times)
    assert {a for _, a in archived.instants} >= {"deltacommit", "commit"}
    active = {ts for ts, _, _ in _instants(path)}
    assert not times & active and {dead, pending_plan, cleaned.instant} <= active
    t = HoodieTable.load(str(path))
    assert times <= {i.instant_time for i in t.archived_timeline.instants()}
    _check(path, w.model, "archival")
    assert hr.archive(str(path), SERVICE_OPTIONS).instants == ()

    # the pending plan still runs; the dead write is rolled back by the next writer
    assert hr.compact(str(path)).instant == pending_plan
    _check(path, w.model, "the pending compaction")
    w.upsert(6)
    _check(path, w.model, "a write after the services")


def test_clean_never_retains_past_a_pending_compaction(tmp_path: Path) -> None:
    """Hudi's rule: the earliest retained commit is not later than the earliest pending
    write or compaction (its plan names older slices)."""
    path = tmp_path / "t"
    w = _Writes(path, "6")
    w.upsert(12)
    w.upsert(4)
    assert hr.compact(str(path)).instant is not None
    w.upsert(4)
    plan = schedule_compaction(str(path), force=True)
    assert plan is not None
    w.upsert(3)
    w.upsert(3)
    res = hr.clean(str(path), {"clean.retain_commits": "1"}, dry_run=True)
    assert res.earliest_commit_to_retain == w.commits[2]  # the last commit before the plan
    res = hr.clean(str(path), {"clean.retain_commits": "1"})
    assert res.earliest_commit_to_retain == w.commits[2] and res.num_files > 0
    _check(path, w.model, "clean")
    assert hr.compact(str(path)).instant == plan
    _check(path, w.model, "the plan")


def test_services_take_the_writer_lock(tmp_path: Path) -> None:
    path = tmp_path / "t"
    w = _Writes(path, "8")
    w.upsert(6)
    w.upsert(3)
    storage = HoodieTable.load(str(path)).storage
    with WriterLock(storage):
        held = storage.read_bytes(LOCK_PATH)
        for call in (hr.clean, hr.archive, hr.compact, hr.cluster):
            with pytest.raises(HoodieCommitConflictError):
                call(str(path))
            call(str(path), dry_run=True)  # reads only: takes no lock, writes no lock file
            assert storage.read_bytes(LOCK_PATH) == held
    assert hr.compact(str(path), dry_run=True).slices
