from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hoodie_ray.file_group.view import FileSlice, FileSystemView
from hoodie_ray.storage import LocalStorage
from hoodie_ray.timeline.timeline import ActiveTimeline
from tests.conftest import SAMPLE_TABLE_PARAMS
from tests.timeline.conftest import read_props

V6 = "trips_mor_avro_v6_trips_8i1u"
V9 = "sample_mor_avro_v9_txns_nonpart_nometa"
V9_META = "sample_mor_avro_v9_txns_complex_meta"
SF = "city=san_francisco"
SF_FID = "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"
SF_BASE = f"{SF_FID}_0-13-60_20250331030642808.parquet"
SF_LOG = f".{SF_FID}_20250331030642808.log.1_0-26-85"
NP_FID = "1900ff60-ed76-4f51-823b-dbcb27f05a0c-0"


def view_of(root: Path, **kw) -> FileSystemView:
    props = read_props(root)
    fields = [
        f.split(":")[0] for f in props.get("hoodie.table.partition.fields", "").split(",") if f
    ]
    st = LocalStorage(str(root))
    tl = ActiveTimeline(st, int(props["hoodie.timeline.layout.version"]))
    return FileSystemView(st, tl, int(props["hoodie.table.version"]), fields, **kw)


def ours(root: Path, as_of: str | None = None, **kw) -> list[tuple]:
    return [
        (s.partition_path, s.file_id, s.base_instant, s.base_file or "", list(s.log_files))
        for s in view_of(root, **kw).latest_file_slices(as_of=as_of)
    ]


def hudi_rs_slices(root: Path, as_of: str | None = None) -> list[tuple]:
    from hudi import HudiReadOptions, HudiTable

    t = HudiTable(str(root))
    slices = (
        t.get_file_slices(HudiReadOptions().with_as_of_timestamp(as_of))
        if as_of
        else t.get_file_slices()
    )
    return sorted(
        (
            s.partition_path,
            s.file_id,
            s.creation_instant_time,
            s.base_file_name,
            list(s.log_file_names),
        )
        for s in slices
    )


@pytest.mark.parametrize("table", SAMPLE_TABLE_PARAMS)
def test_latest_file_slices_match_hudi_rs(table: str, shared_sample) -> None:
    root = shared_sample(table)
    assert ours(root) == hudi_rs_slices(root)


def test_for_table_with_table_config(shared_sample) -> None:
    from hoodie_ray.config.table_config import HoodieTableConfig

    root = shared_sample(V9_META)
    st = LocalStorage(str(root))
    cfg = HoodieTableConfig.load(st)
    view = FileSystemView.for_table(st, cfg, ActiveTimeline(st, cfg.timeline_layout_version))
    got = [(s.partition_path, s.file_id) for s in view.latest_file_slices()]
    assert got == [(p, f) for p, f, *_ in hudi_rs_slices(root)]


def test_replaced_file_groups_are_excluded(shared_sample) -> None:
    view = view_of(shared_sample(V9_META))
    replaced = view.replaced_file_groups()
    assert ("region=eu", "b8e869ac-cc1a-42c6-acf1-d54d56dfeda2-0") in replaced  # insert overwrite
    assert ("region=us", "39cc539f-61e9-4996-8096-4d89715c4142-0") in replaced  # clustering
    latest = {(s.partition_path, s.file_id) for s in view.latest_file_slices()}
    assert not latest & replaced
    everything = {fg.file_group_id for fg in view.all_file_groups(include_replaced=True)}
    assert replaced <= everything
    # before the clustering only the insert-overwrite had replaced anything
    assert view.replaced_file_groups(as_of="20260307162649839") == {
        ("region=eu", "b8e869ac-cc1a-42c6-acf1-d54d56dfeda2-0"),
        ("region=eu", "5dc94328-3d16-4d4f-bdf7-977f328da8fb-0"),
    }


def test_v9_logs_bind_by_completion_time_and_compaction_makes_a_new_slice(shared_sample) -> None:
    view = view_of(shared_sample(V9))
    [fg] = [g for g in view.all_file_groups(include_replaced=True) if g.file_id == NP_FID]
    old, new = fg.all_slices()
    assert old.base_instant == "20260307135926671" and len(old.log_files) == 5
    assert old.log_files == sorted(old.log_files)  # completion order == name order here
    assert new.base_instant == "20260307135936824" and new.log_files == []
    assert new.base_file_size > 0 and old.total_log_size > 0
    assert fg.latest_slice(as_of="20260307135936823") == old


def test_v6_log_versions_in_order(shared_sample) -> None:
    root = shared_sample("sample_mor_parquet_v6_nonpartitioned_rollback")
    [s] = view_of(root).latest_file_slices()
    assert [n.split(".log.")[1][0] for n in s.log_files] == ["1", "2", "3"]
    assert s.log_file_paths == s.log_files  # non-partitioned: paths are names


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _touch(path: Path, data: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


# Synthetic histories on copies of the samples; hudi-rs is the oracle.
def _inflight_base(r: Path) -> None:
    _touch(r / ".hoodie/20260101000000000.deltacommit.requested")
    _touch(r / ".hoodie/20260101000000000.deltacommit.inflight")
    shutil.copy(r / SF / SF_BASE, r / SF / "aaaa-0_0-1-1_20260101000000000.parquet")


def _archived_base(r: Path) -> None:
    shutil.copy(r / SF / SF_BASE, r / SF / "bbbb-0_0-1-1_20200101000000000.parquet")


def _base_after_old_failed_write(r: Path) -> None:
    _touch(r / ".hoodie/20240101000000000.deltacommit.inflight")
    _touch(r / ".hoodie/20231201000000000.clean")
    shutil.copy(r / SF / SF_BASE, r / SF / "cccc-0_0-1-1_20240601000000000.parquet")
    shutil.copy(r / SF / SF_BASE, r / SF / "dddd-0_0-1-1_20231215000000000.parquet")


def _uncommitted_v6_log(r: Path) -> None:
    _touch(r / ".hoodie/20260101000000000.deltacommit.requested")
    shutil.copy(r / SF / SF_LOG, r / SF / f".{SF_FID}_20260101000000000.log.1_0-1-1")


def _v6_log_only_group(r: Path) -> None:
    shutil.copy(r / SF / SF_LOG, r / SF / ".eeee-0_20250331030645735.log.1_0-1-1")


def _v6_more_log_versions(r: Path) -> None:
    for name in ("log.10_0-1-1", "log.2_0-1-1", "log.2_1-1-1"):
        shutil.copy(r / SF / SF_LOG, r / SF / f".{SF_FID}_20250331030642808.{name}")


def _v6_cdc_and_junk(r: Path) -> None:
    shutil.copy(r / SF / SF_LOG, r / SF / f".{SF_FID}_20250331030642808.log.2_0-1-1.cdc")
    _touch(r / SF / "notes.txt")
    _touch(r / SF / f".{SF_BASE}.crc")


@pytest.mark.parametrize(
    "mutate",
    [
        _inflight_base,
        _archived_base,
        _base_after_old_failed_write,
        _uncommitted_v6_log,
        _v6_log_only_group,
        _v6_more_log_versions,
        _v6_cdc_and_junk,
    ],
)
def test_v6_histories_match_hudi_rs(mutate, sample_table, tmp_path: Path) -> None:
    root = _copy(sample_table(V6), tmp_path / "t")
    mutate(root)
    # hudi-rs 0.5.0 lists CDC logs (``….cdc``) as ordinary log files; CDC blocks are not table
    # data, so we leave them out of slices.
    theirs = [(*t[:4], [n for n in t[4] if not n.endswith(".cdc")]) for t in hudi_rs_slices(root)]
    assert ours(root) == theirs


def _uncommitted_v9_log(r: Path) -> None:
    _touch(r / ".hoodie/timeline/20270101000000000.deltacommit.requested")
    shutil.copy(
        r / f".{NP_FID}_20260307135929444.log.1_0-8-11",
        r / ".318f797b-9c1e-4e35-9c55-b17c1b8ca9a8-0_20270101000000000.log.1_0-1-1",
    )


def _v9_log_only_group(r: Path) -> None:
    shutil.copy(
        r / f".{NP_FID}_20260307135929444.log.1_0-8-11", r / ".ffff-0_20260307135937880.log.1_0-1-1"
    )


def _v9_log_on_latest_base(r: Path) -> None:
    shutil.copy(
        r / f".{NP_FID}_20260307135929444.log.1_0-8-11",
        r / ".318f797b-9c1e-4e35-9c55-b17c1b8ca9a8-0_20260307135937880.log.2_0-1-1",
    )


@pytest.mark.parametrize(
    "mutate", [_uncommitted_v9_log, _v9_log_only_group, _v9_log_on_latest_base]
)
def test_v9_histories_match_hudi_rs(mutate, sample_table, tmp_path: Path) -> None:
    root = _copy(sample_table(V9), tmp_path / "t")
    mutate(root)
    assert ours(root) == hudi_rs_slices(root)


def test_v9_log_requested_before_a_base_but_completed_after_joins_it(
    sample_table, tmp_path: Path
) -> None:
    root = _copy(sample_table(V9), tmp_path / "t")
    tdir = root / ".hoodie" / "timeline"
    # a deltacommit requested before the compaction (…36824) that completed after it
    _touch(tdir / "20260307135936800.deltacommit.requested")
    _touch(tdir / "20260307135936800_20260307135937000.deltacommit")
    late = f".{NP_FID}_20260307135936800.log.1_0-1-1"
    shutil.copy(root / f".{NP_FID}_20260307135929444.log.1_0-8-11", root / late)
    [fg] = [g for g in view_of(root).all_file_groups(include_replaced=True) if g.file_id == NP_FID]
    old, new = fg.all_slices()
    assert late not in old.log_files and new.log_files == [late]


def test_v6_pending_compaction_logs_merge_into_previous_slice(sample_table, tmp_path: Path) -> None:
    root = _copy(sample_table(V6), tmp_path / "t")
    _touch(root / ".hoodie/20250401000000000.compaction.requested")
    _touch(root / ".hoodie/20250401000000000.compaction.inflight")
    # the compaction's new base is being written: not visible yet
    shutil.copy(root / SF / SF_BASE, root / SF / f"{SF_FID}_0-1-1_20250401000000000.parquet")
    late = f".{SF_FID}_20250401000000000.log.1_0-1-1"
    shutil.copy(root / SF / SF_LOG, root / SF / late)
    java_like = view_of(root).latest_file_slice(SF, SF_FID)
    assert java_like == FileSlice(SF, SF_FID, "20250331030642808", SF_BASE, [SF_LOG, late])
    # hudi-rs 0.5.0 ignores compaction instants: such logs stay invisible until it completes
    assert ours(root, merge_pending_compaction_logs=False) == hudi_rs_slices(root)


@pytest.mark.parametrize("as_of", ["20250331030642807", "20250331030642808", "20250331030645735"])
def test_v6_as_of_matches_hudi_rs(as_of: str, shared_sample) -> None:
    root = shared_sample(V6)
    assert ours(root, as_of) == hudi_rs_slices(root, as_of)


@pytest.mark.parametrize(
    ("table", "as_of"),
    [
        (V9, "20260307135926671"),
        (V9, "20260307135933015"),
        (V9, "20260307135936824"),
        (V9, "20260307135937430"),
        (V9_META, "20260307162636727"),
        (V9_META, "20260307162649840"),
    ],
)
def test_v9_as_of(table: str, as_of: str, shared_sample) -> None:
    root = shared_sample(table)
    mine, theirs = ours(root, as_of), hudi_rs_slices(root, as_of)
    assert [m[:4] for m in mine] == [t[:4] for t in theirs]
    for m, t in zip(mine, theirs, strict=True):
        # hudi-rs keeps later log files and skips their blocks when reading; we leave them out
        assert set(m[4]) <= set(t[4])
        assert all(n.split("_")[1].split(".")[0] <= as_of for n in m[4])


def test_partition_listing(shared_sample, tmp_path: Path) -> None:
    assert view_of(
        shared_sample("sample_cow_v6_timebasedkeygen_nonhivestyle")
    ).list_partitions() == [
        "2023/04/01/12",
        "2023/04/02/12",
        "2023/04/03/12",
        "2023/04/04/13",
    ]
    assert view_of(shared_sample("sample_cow_v6_complexkeygen_hivestyle")).list_partitions() == [
        "byteField=10/shortField=300",
        "byteField=20/shortField=100",
        "byteField=30/shortField=100",
    ]
    assert view_of(shared_sample(V9)).list_partitions() == [""]
    root = _copy(shared_sample(V6), tmp_path / "t")
    (root / "city=new").mkdir()  # a leaf without the marker file still counts (hudi-rs)
    (root / "city=chennai" / ".staging").mkdir()
    (root / "_delta_log").mkdir()
    (root / ".spark").mkdir()
    assert view_of(root).list_partitions() == [
        "city=chennai",
        "city=new",
        "city=san_francisco",
        "city=sao_paulo",
    ]
    assert view_of(root).latest_file_slices(partitions=["city=new"]) == []


def test_slice_helpers(shared_sample) -> None:
    view = view_of(shared_sample(V6))
    s = view.latest_file_slice(SF, SF_FID)
    assert s is not None and s.base_file_path == f"{SF}/{SF_BASE}"
    assert s.log_file_paths == [f"{SF}/{SF_LOG}"] and s.file_group_id == (SF, SF_FID)
    assert s.base_file_size > 0 and s.total_log_size > 0 and not s.is_empty
    assert hash(s) == hash(FileSlice(SF, SF_FID, s.base_instant, SF_BASE, [SF_LOG]))
    assert view.latest_file_slice(SF, "nope") is None
