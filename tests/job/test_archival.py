"""Archival through the write client: the active timeline stays within hoodie.keep.max.commits,
the archive holds what left it, and hudi-rs and hr.read still read the model."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieTimelineError
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.archive import ArchivedLogTimeline, LSMTimeline
from hoodie_ray.timeline.instant import Action
from tests.write.model import (
    SCHEMA,
    TableModel,
    Workload,
    hudi_rs_snapshot,
    keys_table,
    model_options,
    to_arrow,
)

#: Small bounds, so that a few dozen commits archive several times.
ARCHIVE_OPTIONS = {
    "archive.min_commits": "5",
    "archive.max_commits": "7",
    "clean.retain_commits": "4",
    "compaction.delta_commits": "3",
    "hoodie.timeline.compaction.batch.size": "3",
}


def _hr_snapshot(path: str, **kw) -> pa.Table:
    t = hr.read(path, **kw)
    if t.num_rows == 0:
        return SCHEMA.empty_table()
    return t.select(SCHEMA.names).sort_by("key").cast(SCHEMA)


def _write_commits(path: str, opts: dict, n: int, seed: int = 3) -> tuple[TableModel, list[str]]:
    client = HoodieWriteClient(path, opts)
    model, wl = TableModel(), Workload(seed)
    instants = []
    for i in range(n):
        kind, rows = wl.next_commit()
        if i == 0 or kind == "insert":
            rows = wl.rows_for(wl.keys[:20]) if i == 0 else rows
            kind = "upsert"
        if kind == "delete":
            res = HoodieWriteClient(path, {**opts, "write.operation": "delete"}).write(
                keys_table(rows)
            )
            model.delete_keys([r["key"] for r in rows])
        else:
            res = client.write(to_arrow(rows, True))
            model.upsert(rows)
        instants.append(res.instant)
        if i % 9 == 8:
            assert hudi_rs_snapshot(path).equals(model.as_table()), f"hudi-rs after commit {i}"
    return model, instants


@pytest.mark.parametrize(
    ("table_type", "version"),
    [
        # The archive of each layout (v6 log files, v8 LSM history with a metadata table) and
        # each table type run by default; the other two pairings add no rule of their own.
        # suite time: test_lsm_history_layers_merge_and_old_files_are_cleaned keeps v8 in CI
        pytest.param("MERGE_ON_READ", "8", marks=pytest.mark.slow),
        pytest.param("COPY_ON_WRITE", "6", marks=pytest.mark.slow),
        pytest.param("MERGE_ON_READ", "6", marks=pytest.mark.slow),
        pytest.param("COPY_ON_WRITE", "8", marks=pytest.mark.slow),
    ],
)
def test_archival_keeps_the_timeline_bounded_and_the_table_readable(tmp_path, table_type, version):
    path = str(tmp_path / "t")
    opts = model_options(ARCHIVE_OPTIONS, small_files=True, table_type=table_type, version=version)
    model, instants = _write_commits(path, opts, 40)
    table = HoodieTable.load(path)
    commits = table.commits()
    assert len(commits) <= 7
    archived = table.archived_timeline
    expected = LSMTimeline if version == "8" else ArchivedLogTimeline
    assert isinstance(archived, expected)
    arch = archived.instants()
    arch_times = {a.instant_time for a in arch}
    active_times = {i.timestamp for i in table.timeline}
    assert arch_times, "nothing was archived"
    assert not arch_times & {c.timestamp for c in commits}
    # every write is either still active or archived, and nothing archived is newer than
    # the first active commit
    assert set(instants) <= arch_times | active_times
    assert max(arch_times) < commits[0].timestamp
    if version == "8":
        by_time = {a.instant_time: a for a in arch}
        assert all(a.completion_time and a.metadata for a in by_time.values())
        compactions = [a for a in arch if a.action == Action.COMMIT and a.plan]
        assert compactions or table_type == "COPY_ON_WRITE"
    # the oracle and our reader read the model
    assert hudi_rs_snapshot(path).equals(model.as_table())
    assert _hr_snapshot(path).equals(model.as_table())
    # time travel to an archived instant: a clear error naming the first active instant
    with pytest.raises(HoodieTimelineError, match=commits[0].timestamp):
        hr.read(path, as_of=min(arch_times))
    # an incremental query reaching archived instants: the same
    with pytest.raises(HoodieTimelineError, match=commits[0].timestamp):
        hr.read(path, query_type="incremental", begin=min(arch_times))
    # an incremental query inside the active timeline still works
    hr.read(path, query_type="incremental", begin=commits[-3].timestamp)


def test_lsm_history_layers_merge_and_old_files_are_cleaned(tmp_path):
    path = str(tmp_path / "t")
    opts = model_options(
        ARCHIVE_OPTIONS,
        {"archive.min_commits": "4", "archive.max_commits": "5", "clean.retain_commits": "2"},
        table_type="MERGE_ON_READ",
        version="8",
    )
    model, _ = _write_commits(path, opts, 30, seed=11)  # (suite time: was 60)
    table = HoodieTable.load(path)
    lsm = table.archived_timeline
    assert isinstance(lsm, LSMTimeline)
    files = [n for n, _ in lsm.manifest()]
    assert any(not n.endswith("_0.parquet") for n in files), files  # layers merged
    on_disk = [n for n in table.storage.list_file_names(lsm.path) if n.endswith(".parquet")]
    manifests = [n for n in table.storage.list_file_names(lsm.path) if n.startswith("manifest_")]
    assert len(manifests) <= 4
    assert len(on_disk) < 3 * 4  # unreferenced files are cleaned
    times = [a.instant_time for a in lsm.instants()]
    assert times == sorted(set(times))
    assert hudi_rs_snapshot(path).equals(model.as_table())
