from __future__ import annotations

import re
from pathlib import Path

import pytest

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodiePathError
from hoodie_ray.timeline.plans import (
    HoodieActionInstant,
    HoodieCleanerPlan,
    HoodieCleanFileInfo,
    HoodieCleanMetadata,
    HoodieCleanPartitionMetadata,
    HoodieCompactionOperation,
    HoodieCompactionPlan,
    HoodieCompactionStrategy,
    HoodieInstantInfo,
    HoodieRollbackMetadata,
    HoodieRollbackPlan,
    RollbackRequest,
    plan_path_to_name,
    read_avro_metadata,
    validate_file_name,
    validate_partition_path,
)

V9_TABLES = ["sample_mor_avro_v9_txns_complex_meta", "sample_mor_avro_v9_txns_nonpart_nometa"]
ROLLBACK = "sample_mor_parquet_v6_nonpartitioned_rollback"


@pytest.mark.parametrize("table", V9_TABLES)
def test_v9_compaction_plans_parse_and_round_trip(table: str, shared_sample) -> None:
    tdir = shared_sample(table) / ".hoodie" / "timeline"
    plans = sorted(tdir.glob("*.compaction.requested"))
    assert plans
    for path in plans:
        data = path.read_bytes()
        plan = HoodieCompactionPlan.from_bytes(data, path.name)
        assert plan.version == 2 and plan.operations
        for op in plan.operations:
            assert op.data_file_path and op.data_file_path.startswith(op.file_id)
            assert all(n.startswith("." + op.file_id) for n in op.delta_file_paths)
            assert op.metrics["TOTAL_LOG_FILES"] == len(op.delta_file_paths)
        assert plan.to_bytes(sync=data[-16:]) == data  # Java's field layout, byte for byte


def test_nonpart_compaction_plan_content(shared_sample) -> None:
    path = shared_sample(V9_TABLES[1]) / ".hoodie/timeline/20260307135936824.compaction.requested"
    [op] = HoodieCompactionPlan.from_bytes(path.read_bytes(), path.name).operations
    assert op.partition_path == "" and op.base_instant_time == "20260307135926671"
    assert op.file_id == "1900ff60-ed76-4f51-823b-dbcb27f05a0c-0"
    assert len(op.delta_file_paths) == 5


def test_other_v9_plans_decode(shared_sample) -> None:
    tdir = shared_sample(V9_TABLES[0]) / ".hoodie" / "timeline"
    names = {
        read_avro_metadata(p.read_bytes(), p.name)[0]
        for p in tdir.glob("*.requested")
        if p.stat().st_size
    }
    assert {"HoodieCompactionPlan", "HoodieRequestedReplaceMetadata", "HoodieIndexPlan"} <= names


def test_v6_rollback_plan_and_metadata(shared_sample) -> None:
    hoodie = shared_sample(ROLLBACK) / ".hoodie"
    req = (hoodie / "20250126040936578.rollback.requested").read_bytes()
    plan = HoodieRollbackPlan.from_bytes(req, "20250126040936578.rollback.requested")
    assert (plan.instant_to_rollback, plan.action) == ("20250126040826878", "deltacommit")
    assert plan.requests[0].file_names() == [
        "cd329d8f-0ce4-4654-84ab-2f769aae5034-0_1-33-44_20250126040826878.parquet"
    ]
    assert plan.requests[1].latest_base_instant == "20250126040823628"
    assert list(plan.requests[1].log_blocks_to_delete.values()) == [11828]
    assert plan.to_bytes(sync=req[-16:]) == req
    done = (hoodie / "20250126040936578.rollback").read_bytes()
    meta = HoodieRollbackMetadata.from_bytes(done, "20250126040936578.rollback")
    assert meta.commits_rollback == ["20250126040826878"] and meta.total_files_deleted == 1
    assert meta.instants_rollback == [HoodieInstantInfo("20250126040826878", "deltacommit")]
    assert meta.partition_metadata[""].rollback_log_files
    assert meta.to_bytes(sync=done[-16:]) == done
    assert (hoodie / "20250126040936578.rollback.inflight").read_bytes() == b""


def test_rollback_plan_and_metadata_built_here() -> None:
    plan = HoodieRollbackPlan(
        "20250101000000000",
        "deltacommit",
        [RollbackRequest("p", "f-0", files_to_delete=["f-0_0-1-1_20250101000000000.parquet"])],
    )
    assert HoodieRollbackPlan.from_bytes(plan.to_bytes()) == plan
    meta = HoodieRollbackMetadata(
        start_rollback_time="20250101000000001",
        commits_rollback=["20250101000000000"],
        partition_deleted_files={"p": ["a.parquet", "b.parquet"]},
        instants_rollback=[("20250101000000000", "deltacommit")],
    )
    assert meta.total_files_deleted == 2
    assert meta.partition_metadata["p"].success_delete_files == ["a.parquet", "b.parquet"]
    assert HoodieRollbackMetadata.from_bytes(meta.to_bytes()) == meta


def test_clean_plan_and_metadata_round_trip() -> None:
    plan = HoodieCleanerPlan(
        "KEEP_LATEST_COMMITS",
        HoodieActionInstant("20250101000000000", "deltacommit", "COMPLETED"),
        {"p": [HoodieCleanFileInfo("f-0_0-1-1_20240101000000000.parquet", False)]},
        ["old"],
    )
    assert HoodieCleanerPlan.from_bytes(plan.to_bytes()) == plan
    meta = HoodieCleanMetadata(
        start_clean_time="20250102000000000",
        earliest_commit_to_retain="20250101000000000",
        policy="KEEP_LATEST_COMMITS",
        total_files_deleted=1,
        partition_metadata={
            "p": HoodieCleanPartitionMetadata("p", "KEEP_LATEST_COMMITS", ["x"], ["x"])
        },
    )
    assert HoodieCleanMetadata.from_bytes(meta.to_bytes()) == meta
    with pytest.raises(HoodieCorruptedDataError, match=re.escape("c.clean")):
        HoodieCleanMetadata.from_bytes(plan.to_bytes(), "c.clean")  # a plan is not metadata


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("partition_path", "../outside"),
        ("partition_path", "/etc"),
        ("partition_path", "a/../../b"),
        ("data_file_path", "../../x.parquet"),
        ("data_file_path", "a/b.parquet"),
        ("data_file_path", "bad\x00name"),
        ("delta_file_paths", [".."]),
        ("delta_file_paths", ["..\\x"]),
        ("file_id", "../f"),
    ],
)
def test_escaping_names_in_plans_are_refused(field: str, value) -> None:
    op = HoodieCompactionOperation(
        "20250101000000000",
        [".f-0_20250101000000000.log.1_0-1-1"],
        "f-0_0-1-1_20250101000000000.parquet",
        "f-0",
        "p",
    )
    setattr(op, field, value)
    data = HoodieCompactionPlan([op]).to_bytes()
    with pytest.raises(HoodiePathError):
        HoodieCompactionPlan.from_bytes(data, "x.compaction.requested")
    unchecked = HoodieCompactionPlan.from_bytes(data, "x", validate=False)
    assert getattr(unchecked.operations[0], field) == value
    bad_rb = HoodieRollbackPlan(
        "1", "deltacommit", [RollbackRequest("../up", "f", files_to_delete=["x"])]
    )
    with pytest.raises(HoodiePathError):
        HoodieRollbackPlan.from_bytes(bad_rb.to_bytes())


def test_name_validators() -> None:
    assert validate_file_name("f-0_0-1-1_1.parquet") == "f-0_0-1-1_1.parquet"
    for bad in ("", ".", "..", "a/b", "a\\b", "a\nb", None, 3, "x" * 300):
        with pytest.raises(HoodiePathError):
            validate_file_name(bad)
    assert validate_partition_path("./a/b") == "a/b" and validate_partition_path("") == ""
    assert validate_partition_path(None) == ""
    for bad in ("../a", "/a", "a//b", "a/b/", "a\\b", 5):
        with pytest.raises(HoodiePathError):
            validate_partition_path(bad)
    assert plan_path_to_name("file:/opt/t/p/.f_1.log.1_0-1-1") == ".f_1.log.1_0-1-1"
    with pytest.raises(HoodiePathError):
        plan_path_to_name("/opt/t/..")


def test_version1_compaction_plan_paths_become_names() -> None:
    op = HoodieCompactionOperation(
        "20250101000000000",
        ["file:/old/base/p/.f-0_20250101000000000.log.1_0-1-1"],
        "/old/base/p/f-0_0-1-1_20250101000000000.parquet",
        "f-0",
        "p",
    )
    plan = HoodieCompactionPlan([op], version=1, strategy=HoodieCompactionStrategy("X", {"k": "v"}))
    back = HoodieCompactionPlan.from_bytes(plan.to_bytes())
    assert back.version == 2 and back.strategy == plan.strategy
    assert back.operations[0].data_file_path == "f-0_0-1-1_20250101000000000.parquet"
    assert back.operations[0].delta_file_paths == [".f-0_20250101000000000.log.1_0-1-1"]


def test_plan_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from hoodie_ray.timeline import plans

    data = HoodieCompactionPlan().to_bytes()
    monkeypatch.setattr(plans, "MAX_PLAN_BYTES", 10)
    with pytest.raises(HoodieCorruptedDataError, match=re.escape("big.compaction.requested")):
        HoodieCompactionPlan.from_bytes(data, "big.compaction.requested")


def test_not_avro_plan(tmp_path: Path) -> None:
    with pytest.raises(HoodieCorruptedDataError, match=re.escape("p.rollback.requested")):
        HoodieRollbackPlan.from_bytes(b"{}", "p.rollback.requested")
