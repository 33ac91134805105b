"""Upgrading version 6 and 8 tables to version 8 or 9: hudi-rs reads the model before, after,
and on."""

from __future__ import annotations

import json

import pytest

import hoodie_ray as hr
from hoodie_ray.config.table_config import HoodieTableConfig
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.storage import LocalStorage
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.timeline import ActiveTimeline
from tests.write.model import (
    OPTIONS,
    TableModel,
    Workload,
    hudi_rs_snapshot,
    model_options,
    to_arrow,
)
from tests.write.test_commit_failures import snapshot_files


def test_upgrade_then_write_in_version_8(tmp_path):
    path = tmp_path / "t"
    opts = model_options({"compaction.delta_commits": "3"})
    model, wl = TableModel(), Workload(seed=12)
    for i in range(5):
        rows = wl.rows_for(wl.keys[:30]) if i == 0 else wl.upserts(12)
        model.write(path, opts, "upsert", rows)
    model.assert_hudi_rs_reads(path)
    steps: list[tuple[int, int]] = []
    instants = len(hr.HoodieTable.load(str(path)).active_timeline.instants)
    assert hr.upgrade(str(path), on_progress=lambda d, t: steps.append((d, t))) == 8
    # progress: each instant copied, then the switch (the 0.x metadata table rebuilt last)
    total = steps[0][1]
    assert steps[0] == (0, total) and steps[-1] == (total, total)
    assert total >= instants + 1 and [d for d, _ in steps] == sorted(d for d, _ in steps)
    cfg = HoodieTableConfig.load(LocalStorage(str(path)))
    assert (cfg.table_version, cfg.timeline_layout_version) == (8, 2)
    assert cfg.props["hoodie.table.initial.version"] == "6"
    assert not list((path / ".hoodie").glob("*.deltacommit"))
    model.assert_hudi_rs_reads(path)
    for i in range(6):  # written in version 8 now (logs named by their delta commit)
        rows = wl.upserts(12)
        model.write(path, opts, "upsert", rows)
        model.assert_hudi_rs_reads(path, f"commit {i} after upgrade")
    assert HoodieTableConfig.load(LocalStorage(str(path))).table_version == 8
    assert hr.upgrade(str(path)) == 8  # idempotent


def test_upgrade_refuses_pending_instants_and_changes_nothing(tmp_path):
    path = tmp_path / "t"
    wl = Workload(seed=1)
    HoodieWriteClient(str(path), OPTIONS).write(to_arrow(wl.rows_for(wl.keys[:10]), True))
    tl = ActiveTimeline(LocalStorage(str(path)), 1)
    tl.create_requested(Instant("20990101000000000", Action.DELTA_COMMIT, State.REQUESTED))
    before = snapshot_files(path)
    with pytest.raises(hr.HoodieTimelineError, match="pending"):
        hr.upgrade(str(path))
    assert snapshot_files(path) == before
    with pytest.raises(hr.HoodieTimelineError, match="pending"):
        hr.upgrade(str(path), to_version=9)
    assert snapshot_files(path) == before
    with pytest.raises(hr.HoodieUnsupportedError):
        hr.upgrade(str(path), to_version=10)
    with pytest.raises(hr.HoodieUnsupportedError, match="'eight'"):
        hr.upgrade(str(path), to_version="eight")
    with pytest.raises(hr.HoodieTimelineError, match="pending"):  # "9" is 9
        hr.upgrade(str(path), to_version="9")


@pytest.mark.parametrize("version", ["7", "10"])
def test_unsupported_write_versions(tmp_path, version):
    with pytest.raises(hr.HoodieOptionError, match="hoodie.write.table.version"):
        HoodieWriteClient(str(tmp_path / "t"), model_options(version=version)).write(
            to_arrow([Workload(1)._row("a")], True)
        )
    assert not (tmp_path / "t").exists()


def test_existing_table_keeps_its_version(tmp_path):
    path = tmp_path / "t"
    HoodieWriteClient(str(path), OPTIONS).write(to_arrow([Workload(1)._row("a")], True))
    HoodieWriteClient(str(path), model_options(version="8")).write(
        to_arrow([Workload(2)._row("b")], True)
    )
    assert (
        HoodieTableConfig.load(LocalStorage(str(path))).table_version == 6
    )  # never upgraded silently


# -- to table version 9 (EightToNineUpgradeHandler) ----------------------------------------------


@pytest.mark.parametrize(
    ("from_version", "table_type"),
    [("6", "MERGE_ON_READ"), ("8", "MERGE_ON_READ"), ("6", "COPY_ON_WRITE")],
)
def test_upgrade_to_version_9_then_write(tmp_path, from_version, table_type):
    path = tmp_path / "t"
    opts = model_options(
        {"compaction.delta_commits": "3"}, table_type=table_type, version=from_version
    )
    model, wl = TableModel(), Workload(seed=19)
    for i in range(5):
        rows = wl.rows_for(wl.keys[:30]) if i == 0 else wl.upserts(12)
        model.write(path, opts, "upsert", rows)
    before_props = HoodieTableConfig.load(LocalStorage(str(path))).props
    model.assert_hudi_rs_reads(path)
    assert hr.upgrade(str(path), 9) == 9  # as api.md calls it: hr.upgrade(path, to_version)
    props = dict(HoodieTableConfig.load(LocalStorage(str(path))).props)
    assert props["hoodie.table.version"] == "9"
    assert props["hoodie.timeline.layout.version"] == "2"
    assert props["hoodie.table.initial.version"] == from_version
    # EightToNineUpgradeHandler: the ordering field under its version 9 name, the payload class
    # kept as the legacy one, no merge strategy id beside a built-in merge mode
    assert props["hoodie.table.ordering.fields"] == "ts"
    assert "hoodie.table.precombine.field" not in props
    assert props["hoodie.table.legacy.payload.class"] == (
        "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    )
    assert "hoodie.compaction.payload.class" not in props
    assert "hoodie.record.merge.strategy.id" not in props
    assert "hoodie.compaction.record.merger.strategy" not in props
    assert props["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    # everything else is as it was (version 6: plus the timeline keys of the layout-2 move)
    untouched = set(before_props) - {
        "hoodie.table.version",
        "hoodie.timeline.layout.version",
        "hoodie.table.precombine.field",
        "hoodie.compaction.payload.class",
        "hoodie.record.merge.strategy.id",
        "hoodie.compaction.record.merger.strategy",
        "hoodie.table.checksum",
    }
    assert {k: props[k] for k in untouched} == {k: before_props[k] for k in untouched}
    assert not list((path / ".hoodie").glob("*.deltacommit"))
    assert not list((path / ".hoodie").glob("*.commit"))
    model.assert_hudi_rs_reads(path)
    for i in range(6):  # written in version 9 now; compactions and cleans run on
        rows = wl.upserts(12)
        model.write(path, opts, "upsert", rows)
        model.assert_hudi_rs_reads(path, f"commit {i} after upgrade")
    assert HoodieTableConfig.load(LocalStorage(str(path))).table_version == 9
    assert hr.upgrade(str(path), to_version=9) == 9  # idempotent
    with pytest.raises(hr.HoodieUnsupportedError, match="downgrade"):
        hr.upgrade(str(path), to_version=8)


def test_upgrade_to_version_9_refuses_a_complex_key_with_one_field(tmp_path):
    """Java refuses it too (HUDI-7001: such keys may lack the 'field:' prefix v9 needs)."""
    path = tmp_path / "t"
    HoodieWriteClient(
        str(path), model_options({"hoodie.datasource.write.keygenerator.type": "COMPLEX"})
    ).write(to_arrow([Workload(1)._row("a")], True))
    before = snapshot_files(path)
    with pytest.raises(hr.HoodieUnsupportedError, match="HUDI-7001"):
        hr.upgrade(str(path), to_version=9)
    assert snapshot_files(path) == before


def test_cli_upgrade_to_version_9(tmp_path, capsys):
    from hoodie_ray.cli import main

    path = tmp_path / "t"
    HoodieWriteClient(str(path), model_options(version="8")).write(
        to_arrow(Workload(1).rows_for(("a", "b")), True)
    )
    before = hudi_rs_snapshot(path).to_pylist()
    capsys.readouterr()
    assert main(["upgrade", str(path), "--to", "9", "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["from_version"], doc["to_version"]) == (8, 9)
    assert hudi_rs_snapshot(path).to_pylist() == before


def test_a_dropped_secondary_index_does_not_block_the_upgrade_to_9(tmp_path):
    """A live secondary index blocks the upgrade to 9, the message naming the command that
    drops it; once dropped (its definitions file left empty) the upgrade goes on: an empty
    ``index.json`` blocked it forever, naming a command that could not help."""
    path = tmp_path / "t"
    opts = model_options({}, version="8")
    model, wl = TableModel(), Workload(seed=23)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:20]))
    hr.create_index(str(path), "v_idx", "ts")
    with pytest.raises(
        hr.HoodieUnsupportedError, match=r"metadata drop-index \S+ secondary_index_v_idx"
    ):
        hr.upgrade(str(path), 9)
    hr.drop_index(str(path), "v_idx")
    assert hr.upgrade(str(path), 9) == 9
    model.write(path, {**opts, "hoodie.write.table.version": "9"}, "upsert", wl.upserts(5))
    model.assert_hudi_rs_reads(path, "upgraded after the index was dropped")
