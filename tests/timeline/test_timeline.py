from __future__ import annotations

import re
from pathlib import Path

import pytest

from hoodie_ray.exceptions import (
    HoodieCommitConflictError,
    HoodieCorruptedDataError,
    HoodieTimelineError,
)
from hoodie_ray.storage import LocalStorage
from hoodie_ray.timeline import timeline as timeline_mod
from hoodie_ray.timeline.instant import Action, Instant, InstantTimeGenerator, State
from hoodie_ray.timeline.timeline import ActiveTimeline
from tests.conftest import SAMPLE_TABLE_PARAMS
from tests.timeline.conftest import read_props

R, INF, D = State.REQUESTED, State.INFLIGHT, State.COMPLETED


def load(root: Path) -> ActiveTimeline:
    layout = int(read_props(root)["hoodie.timeline.layout.version"])
    return ActiveTimeline(LocalStorage(str(root)), layout)


@pytest.mark.parametrize("table", SAMPLE_TABLE_PARAMS)
def test_sample_timelines_load(table: str, shared_sample) -> None:
    tl = load(shared_sample(table))
    keys = [(i.timestamp, i.comparable_action) for i in tl.instants]
    assert len(keys) == len(set(keys))
    assert tl.instants == sorted(tl.instants)
    for inst in tl.completed_commits():
        assert tl.is_committed(inst.timestamp)
        assert (inst.completion_time is not None) == (tl.layout_version == 2)
        assert tl.completion_time(inst.timestamp) == inst.completion_time
        assert tl.read_details(inst)  # every sample's completed commit has content
    if table.endswith("v6_empty"):
        assert tl.instants == [] and tl.last_completed() is None and tl.earliest_active() is None


def test_v9_timeline_details(shared_sample) -> None:
    tl = load(shared_sample("sample_mor_avro_v9_txns_nonpart_nometa"))
    commits = tl.completed_commits()
    assert len(commits) == 12 and tl.pending() == []
    comp = tl.get("20260307135936824")
    assert comp == Instant("20260307135936824", Action.COMMIT, D, "20260307135937377")
    assert tl.get("20260307135936824", Action.COMPACTION) == comp
    assert tl.get("20260307135937430").action == Action.REPLACE_COMMIT
    assert tl.last_completed().timestamp == "20260307135937880"
    assert tl.last_completed_by_completion_time().completion_time == "20260307135938081"
    assert tl.max_completion_time() == "20260307135938081"
    assert tl.earliest_active() == "20260307135926671"
    assert tl.is_committed("20200101000000000")  # before the active timeline: archived
    assert not tl.is_committed("20990101000000000")
    assert tl.contains("20260307135937430") and not tl.contains("20260307135937431")


def test_v9_meta_timeline_has_indexing_and_clustering(shared_sample) -> None:
    tl = load(shared_sample("sample_mor_avro_v9_txns_complex_meta"))
    actions = {i.action for i in tl.completed()}
    assert {Action.DELTA_COMMIT, Action.COMMIT, Action.REPLACE_COMMIT, Action.INDEXING} <= actions
    # the clustering instant's requested/inflight files collapse into its completed replacecommit
    assert tl.get("20260307162649840").action == Action.REPLACE_COMMIT
    assert tl.find([Action.INDEXING], [D])[0].completion_time == "20260307162653301"


def test_v6_rollback_timeline(shared_sample) -> None:
    tl = load(shared_sample("sample_mor_parquet_v6_nonpartitioned_rollback"))
    rb = tl.get("20250126040936578")
    assert rb == Instant("20250126040936578", Action.ROLLBACK, D)
    assert [i.timestamp for i in tl.completed_commits()] == [
        "20250126040823628",
        "20250126060846931",
    ]
    assert not tl.is_committed("20250126040826878")  # the rolled-back instant


def _fresh(tmp_path: Path, layout: int) -> ActiveTimeline:
    (tmp_path / ".hoodie").mkdir()
    return ActiveTimeline(LocalStorage(str(tmp_path)), layout)


@pytest.mark.parametrize("layout", [1, 2])
def test_write_transitions(tmp_path: Path, layout: int) -> None:
    tl = _fresh(tmp_path, layout)
    tdir = tmp_path / ".hoodie" / ("timeline" if layout == 2 else "")
    t1 = "20250101000000000"
    req = tl.create_requested(Instant(t1, Action.DELTA_COMMIT, R))
    assert (tdir / f"{t1}.deltacommit.requested").read_bytes() == b""
    assert tl.pending() == [req]
    with pytest.raises(HoodieCommitConflictError):
        tl.create_requested(Instant(t1, Action.DELTA_COMMIT, R))
    with pytest.raises(HoodieCommitConflictError):  # any action at that time conflicts
        tl.create_requested(Instant(t1, Action.COMMIT, R))
    infl = tl.transition_to_inflight(req, b"{}")
    assert infl.state is INF and (tdir / f"{t1}.deltacommit.inflight").read_bytes() == b"{}"
    tl.transition_to_inflight(req, b"{}")  # idempotent
    done = tl.complete(infl, b"content")
    assert done.is_completed and tl.is_committed(t1)
    if layout == 1:
        assert done.completion_time is None
        assert (tdir / f"{t1}.deltacommit").read_bytes() == b"content"
    else:
        assert done.completion_time is not None and done.completion_time > t1
        assert (tdir / f"{t1}_{done.completion_time}.deltacommit").read_bytes() == b"content"
    assert tl.complete(infl, b"content") == done  # a retry with the same content is a no-op
    with pytest.raises(HoodieCommitConflictError):
        tl.complete(infl, b"other")
    with pytest.raises(HoodieTimelineError):
        tl.transition_to_inflight(req)
    with pytest.raises(HoodieTimelineError):
        tl.delete_pending(req)
    # a fresh timeline sees the same state; no temporary files are left behind
    again = ActiveTimeline(LocalStorage(str(tmp_path)), layout)
    assert again.instants == [done] and again.read_details(done) == b"content"
    assert not [p for p in tdir.iterdir() if p.name.startswith(".")]


def test_layout2_completion_times_are_unique_and_increasing(tmp_path: Path) -> None:
    (tmp_path / ".hoodie").mkdir()
    tl = ActiveTimeline(LocalStorage(str(tmp_path)), 2, time_generator=InstantTimeGenerator())
    tdir = tmp_path / ".hoodie" / "timeline"
    tdir.mkdir()
    # another writer completed an instant with a completion time in the future
    (tdir / "20250101000000000_29990101000000000.deltacommit").write_bytes(b"")
    tl.reload()
    inst = tl.create_requested(Instant("20250102000000000", Action.DELTA_COMMIT, R))
    done = tl.complete(tl.transition_to_inflight(inst), b"x")
    assert done.completion_time > "29990101000000000"
    with pytest.raises(HoodieTimelineError):
        t3 = tl.create_requested(Instant("20250103000000000", Action.DELTA_COMMIT, R))
        tl.complete(t3, b"x", completion_time="20250103000000001")  # not after the others
    completion_times = [i.completion_time for i in tl.completed()]
    assert len(completion_times) == len(set(completion_times))


@pytest.mark.parametrize("layout", [1, 2])
def test_compaction_completes_as_commit(tmp_path: Path, layout: int) -> None:
    tl = _fresh(tmp_path, layout)
    t = "20250101000000000"
    req = tl.create_requested(Instant(t, Action.COMPACTION, R), b"plan")
    assert tl.is_pending_compaction(t) and not tl.is_committed(t)
    infl = tl.transition_to_inflight(req)
    assert tl.read_details(infl) == b""
    done = tl.complete(infl, b"meta")
    assert done.action == Action.COMMIT and tl.is_committed(t)
    assert not tl.is_pending_compaction(t)
    assert tl.read_details(Instant(t, Action.COMPACTION, R)) == b"plan"
    names = sorted(
        p.name for p in (tmp_path / ".hoodie" / ("timeline" if layout == 2 else "")).iterdir()
    )
    assert f"{t}.compaction.requested" in names and f"{t}.compaction.inflight" in names


def test_commit_inflight_name_and_delete_pending(tmp_path: Path) -> None:
    tl = _fresh(tmp_path, 1)
    t = "20250101000000000"
    inst = tl.transition_to_inflight(tl.create_requested(Instant(t, Action.COMMIT, R)))
    hoodie = tmp_path / ".hoodie"
    assert (hoodie / f"{t}.inflight").exists() and (hoodie / f"{t}.commit.requested").exists()
    tl.delete_pending(inst)
    assert (
        not (hoodie / f"{t}.inflight").exists() and not (hoodie / f"{t}.commit.requested").exists()
    )
    assert tl.instants == [] and ActiveTimeline(LocalStorage(str(tmp_path)), 1).instants == []
    with pytest.raises(HoodieTimelineError):
        tl.complete(Instant(t, Action.COMMIT, INF), b"x")  # nothing pending any more


def test_archival_boundary_ignores_other_actions(tmp_path: Path) -> None:
    hoodie = tmp_path / ".hoodie"
    hoodie.mkdir()
    (hoodie / "20240101000000000.clean").write_bytes(b"")
    (hoodie / "20240201000000000.deltacommit.inflight").write_bytes(b"")
    (hoodie / "20250101000000000.deltacommit").write_bytes(b"")
    tl = ActiveTimeline(LocalStorage(str(tmp_path)), 1)
    assert tl.earliest_active() == "20240201000000000"
    assert tl.is_committed("20240115000000000")  # before the first write instant
    assert not tl.is_committed("20240201000000000")  # the failed write itself
    assert not tl.is_committed("20240601000000000")
    assert tl.is_committed("20250101000000000")


def test_read_details_refuses_huge_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tl = _fresh(tmp_path, 1)
    (tmp_path / ".hoodie" / "20250101000000000.deltacommit").write_bytes(b"x" * 100)
    tl.reload()
    monkeypatch.setattr(timeline_mod, "MAX_INSTANT_FILE_BYTES", 10)
    with pytest.raises(HoodieCorruptedDataError, match=re.escape("20250101000000000.deltacommit")):
        tl.read_details(tl.instants[0])


def test_unsupported_layout(tmp_path: Path) -> None:
    with pytest.raises(HoodieTimelineError):
        ActiveTimeline(LocalStorage(str(tmp_path)), 3)


def test_layout2_commit_retry_with_same_metadata_is_idempotent(tmp_path: Path) -> None:
    from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat

    tl = _fresh(tmp_path, 2)
    meta = HoodieCommitMetadata(
        {"": [HoodieWriteStat(file_id="f-0")]}, extra_metadata={"schema": "{}"}
    )
    inst = tl.transition_to_inflight(
        tl.create_requested(Instant("20250101000000000", Action.DELTA_COMMIT, R))
    )
    first = tl.complete(inst, meta.to_avro())
    assert meta.to_avro() == meta.to_avro()  # deterministic bytes: a retry is recognised
    assert tl.complete(inst, meta.to_avro()) == first
    assert len(tl.completed()) == 1


class _CountingStorage(LocalStorage):
    """Counts listings and names how many were parsed."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.listings = 0

    def list_file_names(self, rel: str) -> list[str]:
        self.listings += 1
        return super().list_file_names(rel)


@pytest.mark.parametrize("layout", [1, 2])
def test_transitions_do_not_list_and_reload_parses_new_names_only(
    tmp_path: Path, layout: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = _CountingStorage(str(tmp_path))
    tl = ActiveTimeline(st, layout)
    for k in range(30):
        ts = f"202501010000{k:05d}"
        req = tl.create_requested(Instant(ts, Action.DELTA_COMMIT, R))
        tl.transition_to_inflight(req)
        tl.complete(req.with_state(INF), b"{}")
    assert st.listings == 1  # the constructor's load; no transition listed the folder
    assert [i.state for i in tl.instants] == [D] * 30
    parsed: list[str] = []
    real = timeline_mod.parse_instant_file_name

    def spy(name: str, layout_version: int):
        parsed.append(name)
        return real(name, layout_version)

    monkeypatch.setattr(timeline_mod, "parse_instant_file_name", spy)
    other = ActiveTimeline(LocalStorage(str(tmp_path)), layout)  # another process
    other.create_requested(Instant("20250101000099999", Action.CLEAN, R), b"")
    tl.reload()
    assert len(parsed) == 90 + 1  # the other timeline's first load (3 files each), one new name
    assert tl.get("20250101000099999") is not None and len(tl.instants) == 31
    # a removal by another process is seen too
    other.delete_pending(Instant("20250101000099999", Action.CLEAN, R))
    tl.reload()
    assert tl.get("20250101000099999") is None and len(tl.instants) == 30


def test_complete_refuses_an_instant_rolled_back_by_another_writer(tmp_path: Path) -> None:
    st = LocalStorage(str(tmp_path))
    tl = ActiveTimeline(st, 2)
    req = tl.create_requested(Instant("20250101000000001", Action.DELTA_COMMIT, R))
    tl.transition_to_inflight(req)
    ActiveTimeline(LocalStorage(str(tmp_path)), 2).delete_pending(req.with_state(INF))
    with pytest.raises(HoodieTimelineError, match="not pending"):
        tl.complete(req.with_state(INF), b"x")
