"""Which instants archival takes (``instants_to_archive``), the order it deletes their files in,
and the two archived timelines' formats read back."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hoodie_ray.storage import LocalStorage
from hoodie_ray.timeline.archive import (
    ArchivedInstant,
    ArchivedLogTimeline,
    LSMTimeline,
    archive_instants,
    instants_to_archive,
)
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.plans import HoodieCleanMetadata
from hoodie_ray.timeline.timeline import ActiveTimeline

R = State.REQUESTED


def _ts(i: int, sub: int = 0) -> str:
    return f"2025010100{i:04d}{sub:03d}"


def _timeline(tmp_path: Path, layout: int = 2) -> ActiveTimeline:
    (tmp_path / ".hoodie").mkdir(exist_ok=True)
    return ActiveTimeline(LocalStorage(str(tmp_path)), layout)


def _commit(tl: ActiveTimeline, i: int, action: str = Action.DELTA_COMMIT) -> Instant:
    inst = tl.create_requested(Instant(_ts(i), action, R))
    tl.transition_to_inflight(inst)
    return tl.complete(inst, b"")


def _clean(tl: ActiveTimeline, i: int, retain: int) -> None:
    inst = tl.create_requested(Instant(_ts(i), Action.CLEAN, R))
    tl.transition_to_inflight(inst)
    meta = HoodieCleanMetadata(start_clean_time=_ts(i), earliest_commit_to_retain=_ts(retain))
    tl.complete(inst, meta.to_bytes())


def test_nothing_until_past_keep_max_then_down_to_keep_min(tmp_path: Path) -> None:
    tl = _timeline(tmp_path)
    for i in range(1, 8):
        _commit(tl, i)
    assert instants_to_archive(tl, 3, 7) == []
    _commit(tl, 8)
    chosen = instants_to_archive(tl, 3, 7)
    assert [i.timestamp for i in chosen] == [_ts(i) for i in range(1, 6)]


def test_stops_before_pending_clean_retention_savepoint_and_replace(tmp_path: Path) -> None:
    tl = _timeline(tmp_path)
    for i in range(1, 20):
        _commit(tl, i)
    pending = tl.create_requested(Instant(_ts(30), Action.DELTA_COMMIT, R))
    assert len(instants_to_archive(tl, 3, 7)) == 16
    # a pending write older than most commits: stop one completed commit before it
    tl.delete_pending(pending)
    pending = tl.create_requested(Instant(_ts(9, 500), Action.COMPACTION, R))
    assert [i.timestamp for i in instants_to_archive(tl, 3, 7)][-1] < _ts(9)
    tl.delete_pending(pending)
    # the latest clean's earliest retained commit
    _clean(tl, 21, retain=6)
    chosen = instants_to_archive(tl, 3, 7)
    assert max(i.timestamp for i in chosen) < _ts(6)
    # completed cleans and rollbacks older than the last archived commit go with them
    assert all(i.action != Action.CLEAN for i in chosen)
    _clean(tl, 22, retain=15)
    chosen = instants_to_archive(tl, 3, 7)
    assert Instant(_ts(21), Action.CLEAN, State.COMPLETED) not in chosen  # newer than them
    # a savepoint
    tl.storage.write_bytes(".hoodie/timeline/" + f"{_ts(4)}.savepoint.inflight", b"")
    tl.load()
    assert max(i.timestamp for i in instants_to_archive(tl, 3, 7)) < _ts(4)


def test_mor_keeps_the_last_compaction_until_enough_delta_commits_follow(tmp_path: Path) -> None:
    tl = _timeline(tmp_path)
    for i in range(1, 10):
        _commit(tl, i)
    _commit(tl, 10, Action.COMMIT)  # a compaction completes as a commit
    _commit(tl, 11)
    chosen = instants_to_archive(tl, 2, 5, is_mor=True, compaction_delta_commits=3)
    assert chosen and max(i.timestamp for i in chosen) < _ts(10)
    assert [i.timestamp for i in instants_to_archive(tl, 2, 5)][-1] == _ts(9)


@pytest.mark.parametrize("layout", [1, 2])
def test_archive_writes_then_deletes_and_a_rerun_after_a_kill_is_harmless(
    tmp_path: Path, layout: int
) -> None:
    tl = _timeline(tmp_path, layout)
    for i in range(1, 12):
        _commit(tl, i)
    storage = tl.storage
    archived: LSMTimeline | ArchivedLogTimeline = (
        LSMTimeline(storage, ".hoodie/timeline/history")
        if layout == 2
        else ArchivedLogTimeline(storage, ".hoodie/archived")
    )
    chosen = instants_to_archive(tl, 3, 7)
    # killed after the archive was written, before any instant file was deleted
    if isinstance(archived, LSMTimeline):
        from hoodie_ray.timeline.archive import active_action

        archived.write([active_action(tl, i) for i in chosen])
    else:
        archived.write_instants(tl, chosen)
    fresh = ActiveTimeline(storage, layout)
    assert len(fresh.completed_commits()) == 11
    archive_instants(fresh, archived, instants_to_archive(fresh, 3, 7))
    assert [i.timestamp for i in ActiveTimeline(storage, layout).completed_commits()] == [
        _ts(i) for i in range(9, 12)
    ]
    got = archived.instants()
    assert [a.instant_time for a in got] == [_ts(i) for i in range(1, 9)]
    assert all(a.action == Action.DELTA_COMMIT for a in got)
    if isinstance(archived, LSMTimeline):
        assert all(a.completion_time for a in got)


def test_lsm_files_manifest_and_version_as_java_writes_them(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    lsm = LSMTimeline(storage, "h")
    rows = [
        ArchivedInstant(
            _ts(i), Action.COMMIT, _ts(i + 50), b"meta%d" % i, b"plan" if i == 2 else None
        )
        for i in range(1, 4)
    ]
    lsm.write(rows)
    name = f"{_ts(1)}_{_ts(3)}_0.parquet"
    assert (tmp_path / "h" / "_version_").read_bytes() == b"1"
    manifest = (tmp_path / "h" / "manifest_1").read_text()
    assert json.loads(manifest) == {
        "files": [{"fileName": name, "fileLen": (tmp_path / "h" / name).stat().st_size}]
    }
    assert manifest.startswith('{\n  "files" : [ {\n    "fileName" : ')
    pf = pq.ParquetFile(tmp_path / "h" / name)
    assert pf.schema_arrow.names == [
        "instantTime",
        "completionTime",
        "action",
        "metadata",
        "plan",
        "version",
    ]
    assert not pf.schema_arrow.field("version").nullable
    assert b"parquet.avro.schema" in pf.metadata.metadata
    assert lsm.instants() == rows
    # the same rows again (a re-run after a kill): no second file, no second manifest
    lsm.write(rows)
    assert lsm.latest_version() == 1


def test_lsm_reader_ignores_files_outside_the_manifest(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    lsm = LSMTimeline(storage, "h")
    lsm.write([ArchivedInstant(_ts(1), Action.COMMIT, _ts(2), b"m")])
    # a killed write left a data file and a manifest without a _version_ update
    (tmp_path / "h" / f"{_ts(5)}_{_ts(6)}_0.parquet").write_bytes(b"torn")
    assert [a.instant_time for a in lsm.instants()] == [_ts(1)]
    lsm.write([ArchivedInstant(_ts(5), Action.COMMIT, _ts(7), b"m")])
    assert [a.instant_time for a in lsm.instants()] == [_ts(1), _ts(5)]
