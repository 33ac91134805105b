"""Non-blocking concurrency control through HoodieWriteClient: writers of one file group all
commit.

As in test_occ, two clients in one process step by hand (writer A's commit is held while
writer B writes a whole commit), and one test runs two real processes. Every table is read
back with hudi-rs and compared with the model: per key the largest ordering value among the
committed writes (event time), or the last completed write (commit time).

hudi-rs 0.5 lists no file slice of a log-only file group on table version 8 (it reads such a
table as empty), and under NBCC a bucket's file group starts with log files only (as Java's):
tests compact the groups a write created before comparing with hudi-rs, and read log-only
groups with hoodie_ray's reader.
"""

from __future__ import annotations

import pytest

import hoodie_ray as hr
from hoodie_ray.compaction.api import CompactionService
from hoodie_ray.config.options import resolve_options
from hoodie_ray.exceptions import HoodieOptionError
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.log_format.blocks import HeaderMetadataType
from hoodie_ray.log_format.reader import read_log_file
from hoodie_ray.storage import LocalStorage
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action
from hoodie_ray.write.bucket_assigner import nbcc_bucket_file_id
from tests.job.test_occ import _during_commit, _instants, row
from tests.write.model import TableModel, hudi_rs_snapshot, model_options, to_arrow

NBCC = {
    "hoodie.write.concurrency.mode": "non_blocking_concurrency_control",
    "index.type": "BUCKET",
    "hoodie.bucket.index.num.buckets": "2",
}


def _opts(*extra: dict) -> dict:
    return model_options(NBCC, *extra, version="8")


def _seeded(tmp_path, opts: dict) -> tuple[str, TableModel]:
    """Keys a0..a5 in partition a, compacted: every bucket's group has a base file."""
    path, model = str(tmp_path / "t"), TableModel()
    model.write(path, opts, "upsert", [row(f"a{i}", "a", 1, i) for i in range(6)])
    hr.compact(path, opts)
    return path, model


def _single_writer_logs(path: str, part: str) -> None:
    """Each log file holds one writer's blocks (nobody appends to another writer's file)."""
    storage = LocalStorage(path)
    for info in storage.list_dir(part):
        if ".log." in info.name:
            instants = {
                b.header.get(HeaderMetadataType.INSTANT_TIME)
                for b in read_log_file(storage, f"{part}/{info.name}")
            }
            assert len(instants) == 1, (info.name, instants)


@pytest.mark.parametrize(
    "extra, needs",
    [
        ({"table.type": "COPY_ON_WRITE"}, "MERGE_ON_READ"),
        ({"index.type": "FLINK_STATE"}, "index.type=BUCKET"),
        ({"hoodie.write.table.version": "6"}, "table version 8"),
    ],
)
def test_refused_outside_mor_bucket_index_v8(extra, needs):
    with pytest.raises(HoodieOptionError) as err:
        resolve_options({**NBCC, **extra})
    assert "hoodie.write.concurrency.mode=non_blocking_concurrency_control" in str(err.value)
    assert needs in str(err.value)


@pytest.mark.parametrize(
    "created, needs",
    [
        ({"hoodie.write.table.version": "8"}, "index.type=BUCKET"),
        (
            {"index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"},
            "table version 8",
        ),
    ],
    ids=["v8-flink-state-index", "v6-bucket"],
)
def test_refused_on_a_table_it_cannot_write_table_unchanged(tmp_path, created, needs):
    """The table's own type, version and index decide (the options leave them out)."""
    path, model = str(tmp_path / "t"), TableModel()
    model.write(path, model_options(created), "upsert", [row("a1", "a", 1, 1)])
    hoodie = tmp_path / "t" / ".hoodie"
    before = sorted(p.name for p in hoodie.rglob("*") if ".aux" not in p.parts)
    nbcc = model_options({"hoodie.write.concurrency.mode": "non_blocking_concurrency_control"})
    with pytest.raises(HoodieOptionError) as err:
        HoodieWriteClient(path, nbcc).write(to_arrow([row("a1", "a", 2, 2)], True))
    assert needs in str(err.value) and path in str(err.value)
    assert "hoodie.write.concurrency.mode" in str(err.value)
    assert sorted(p.name for p in hoodie.rglob("*") if ".aux" not in p.parts) == before
    model.assert_hudi_rs_reads(path)


def test_two_writers_of_the_same_buckets_both_commit_largest_ordering_wins(tmp_path):
    opts = _opts()
    path, model = _seeded(tmp_path, opts)
    # A holds its commit while B writes: overlapping keys in both buckets; A's ordering values
    # win for a0, a1, B's for a2, a3 (whatever the completion order)
    a_rows = [row("a0", "a", 9, 10), row("a1", "a", 9, 11), row("a2", "a", 2, 12)]
    b_rows = [row("a1", "a", 5, 20), row("a2", "a", 5, 21), row("a3", "a", 5, 22)]
    a, b = HoodieWriteClient(path, opts), HoodieWriteClient(path, opts)
    with _during_commit(lambda: b.write(to_arrow(b_rows, True))) as held:
        res = a.write(to_arrow(a_rows, True))
    assert res.instant == held[0]  # no conflict, no retry
    assert len({i.timestamp for i in _instants(path, Action.DELTA_COMMIT)}) == 3
    assert not _instants(path, Action.ROLLBACK)
    _single_writer_logs(path, "a")
    for batch in (a_rows, b_rows):
        model.upsert(batch)
    model.assert_hudi_rs_reads(path, "both writers' logs in the slices")
    hr.compact(path, opts)
    model.assert_hudi_rs_reads(path, "compacted")
    assert (tmp_path / "t" / ".hoodie" / "metadata").is_dir()
    assert hr.validate_metadata(path) == []


def test_commit_time_ordering_the_last_completed_write_wins(tmp_path):
    opts = _opts({"precombine.field": None})  # no ordering field: commit-time ordering
    path, _ = _seeded(tmp_path, opts)
    a_rows = [row("a1", "a", 9, 10), row("a2", "a", 9, 11)]
    b_rows = [row("a1", "a", 1, 20), row("a3", "a", 1, 21)]
    a, b = HoodieWriteClient(path, opts), HoodieWriteClient(path, opts)
    with _during_commit(lambda: b.write(to_arrow(b_rows, True))):
        a.write(to_arrow(a_rows, True))  # requested first, completed last
    expected = {f"a{i}": (1, i) for i in range(6)}
    for batch in (b_rows, a_rows):  # completion order
        expected.update({r["key"]: (r["ts"], r["v"]) for r in batch})
    # hoodie_ray's reader orders a v8 slice's logs by completion time; hudi-rs 0.5 by the
    # instant in their names (B's here), so it is compared once the compactor merged them
    got = {
        r["key"]: (r["ts"], r["v"]) for r in hr.read(path).select(["key", "ts", "v"]).to_pylist()
    }
    assert got == expected
    hr.compact(path, opts)
    got = {r["key"]: (r["ts"], r["v"]) for r in hudi_rs_snapshot(path).to_pylist()}
    assert got == expected


def test_first_writes_of_a_bucket_land_in_its_one_file_group(tmp_path):
    """Two writers creating a bucket's file group at once: the same fixed file id, a log file
    each, no base file (Java's NBCC bucket ids and log-only inserts)."""
    opts = _opts()
    path, model = str(tmp_path / "t"), TableModel()
    model.write(path, opts, "upsert", [row("b0", "b", 1, 0)])  # the table, in partition b
    a_rows = [row(f"a{i}", "a", 3, i) for i in range(4)]
    b_rows = [row(f"a{i}", "a", 2 if i < 2 else 4, 10 + i) for i in range(4)]
    a, b = HoodieWriteClient(path, opts), HoodieWriteClient(path, opts)
    with _during_commit(lambda: b.write(to_arrow(b_rows, True))):
        a.write(to_arrow(a_rows, True))
    names = sorted(p.name for p in (tmp_path / "t" / "a").iterdir())
    assert not [n for n in names if n.endswith(".parquet")]
    ids = {
        s.file_id for s in HoodieTable.load(path).latest_file_slices() if s.partition_path == "a"
    }
    assert ids == {nbcc_bucket_file_id(0), nbcc_bucket_file_id(1)}
    assert len([n for n in names if ".log." in n]) == 4  # one per writer and bucket
    _single_writer_logs(path, "a")
    for batch in (a_rows, b_rows):
        model.upsert(batch)
    got = hr.read(path).select(["key", "p", "ts", "v", "s"]).sort_by("key")
    assert got.to_pylist() == model.as_table().to_pylist()
    hr.compact(path, opts)  # base files: hudi-rs reads the groups now
    model.assert_hudi_rs_reads(path)
    assert hr.validate_metadata(path) == []


def test_compaction_beside_a_write_in_flight_plans_only_completed_delta_commits(tmp_path):
    """B's inline compaction runs while A's write is in flight: it plans B's log, not A's, and
    does not wait; A's log completes after the plan's instant and joins the new slice."""
    opts = _opts()
    path, model = _seeded(tmp_path, opts)
    b_opts = {**opts, "compaction.delta_commits": "1"}
    a_rows = [row("a1", "a", 7, 10), row("a4", "a", 7, 11)]
    b_rows = [row("a1", "a", 5, 20), row("a5", "a", 5, 21)]
    a, b = HoodieWriteClient(path, opts), HoodieWriteClient(path, b_opts)
    b_result: list = []
    with _during_commit(lambda: b_result.append(b.write(to_arrow(b_rows, True)))) as held:
        a.write(to_arrow(a_rows, True))
    compacted = b_result[0].services.compacted
    assert len(compacted) == 1 and compacted[0] > held[0]  # planned beside A's pending write
    plan = CompactionService.open(path, opts).read_plan(compacted[0])
    planned_logs = {n for op in plan.operations or [] for n in op.delta_file_paths}
    assert planned_logs and [n for n in planned_logs if b_result[0].instant in n]
    assert not [n for n in planned_logs if held[0] in n]
    planned = {op.file_id for op in plan.operations or []}
    joined = [
        s
        for s in HoodieTable.load(path).latest_file_slices()
        if s.file_id in planned and any(held[0] in n for n in s.log_files)
    ]
    assert joined and all(s.base_instant == compacted[0] for s in joined)  # the new slice
    for batch in (a_rows, b_rows):
        model.upsert(batch)
    model.assert_hudi_rs_reads(path)
    assert hr.validate_metadata(path) == []


def test_two_processes_upserting_the_same_keys_all_commit(tmp_path):
    from tests.reliability.test_concurrency import _occ_processes

    opts = _opts()
    path, model = _seeded(tmp_path, opts)

    def rows(w: int, b: int) -> list[dict]:
        ts = 10 * b + w + 1  # unique per batch
        return [row(f"a{k}", "a", ts, 100 * w + b) for k in range(w, 6, 1 + w)]

    batches = [[rows(w, b) for b in (1, 2, 3)] for w in (0, 1)]
    results = _occ_processes(path, opts, batches)
    assert all(not str(r).startswith("conflict") for res in results for r in res), results
    committed = {i.timestamp for i in _instants(path, Action.DELTA_COMMIT) if i.is_completed}
    assert {r for res in results for r in res} <= committed
    for w in (0, 1):
        for batch in batches[w]:
            model.upsert(batch)
    model.assert_hudi_rs_reads(path)
    assert hr.validate_metadata(path) == []
