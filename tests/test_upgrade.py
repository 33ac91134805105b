"""Upgrading version 6 tables to version 8: hudi-rs reads the model before, after, and on."""

from __future__ import annotations

import pytest

import hoodie_ray as hr
from hoodie_ray.config.table_config import HoodieTableConfig
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.storage import LocalStorage
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.timeline import ActiveTimeline
from tests.write.model import OPTIONS, TableModel, Workload, hudi_rs_snapshot, to_arrow
from tests.write.test_commit_failures import snapshot_files


def _upserts(wl, n):
    rows = []
    while len(rows) < n:
        kind, more = wl.next_commit()
        if kind == "upsert":
            rows += more
    return rows


def test_upgrade_then_write_in_version_8(tmp_path):
    path = tmp_path / "t"
    opts = {**OPTIONS, "compaction.delta_commits": "3"}
    model, wl = TableModel(), Workload(seed=12)
    for i in range(5):
        rows = [wl._row(k) for k in wl.keys[:30]] if i == 0 else _upserts(wl, 12)
        HoodieWriteClient(str(path), opts).write(to_arrow(rows, True))
        model.upsert(rows)
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    assert hr.upgrade(str(path)) == 8
    cfg = HoodieTableConfig.load(LocalStorage(str(path)))
    assert (cfg.table_version, cfg.timeline_layout_version) == (8, 2)
    assert cfg.props["hoodie.table.initial.version"] == "6"
    assert not list((path / ".hoodie").glob("*.deltacommit"))
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    for i in range(6):  # written in version 8 now (logs named by their delta commit)
        rows = _upserts(wl, 12)
        HoodieWriteClient(str(path), opts).write(to_arrow(rows, True))
        model.upsert(rows)
        assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist(), (
            f"commit {i} after upgrade"
        )
    assert HoodieTableConfig.load(LocalStorage(str(path))).table_version == 8
    assert hr.upgrade(str(path)) == 8  # idempotent


def test_upgrade_refuses_pending_instants_and_changes_nothing(tmp_path):
    path = tmp_path / "t"
    wl = Workload(seed=1)
    HoodieWriteClient(str(path), OPTIONS).write(to_arrow([wl._row(k) for k in wl.keys[:10]], True))
    tl = ActiveTimeline(LocalStorage(str(path)), 1)
    tl.create_requested(Instant("20990101000000000", Action.DELTA_COMMIT, State.REQUESTED))
    before = snapshot_files(path)
    with pytest.raises(hr.HoodieTimelineError, match="pending"):
        hr.upgrade(str(path))
    assert snapshot_files(path) == before
    with pytest.raises(hr.HoodieUnsupportedError):
        hr.upgrade(str(path), to_version=9)


@pytest.mark.parametrize("version", ["7", "10", "9"])
def test_unsupported_write_versions(tmp_path, version):
    with pytest.raises(hr.HoodieOptionError, match="hoodie.write.table.version"):
        HoodieWriteClient(
            str(tmp_path / "t"), {**OPTIONS, "hoodie.write.table.version": version}
        ).write(to_arrow([Workload(1)._row("a")], True))
    assert not (tmp_path / "t").exists()


def test_existing_table_keeps_its_version(tmp_path):
    path = tmp_path / "t"
    HoodieWriteClient(str(path), OPTIONS).write(to_arrow([Workload(1)._row("a")], True))
    HoodieWriteClient(str(path), {**OPTIONS, "hoodie.write.table.version": "8"}).write(
        to_arrow([Workload(2)._row("b")], True)
    )
    assert (
        HoodieTableConfig.load(LocalStorage(str(path))).table_version == 6
    )  # never upgraded silently
