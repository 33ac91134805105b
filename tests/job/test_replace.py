"""Replace operations (insert_overwrite, insert_overwrite_table, delete_partition): random
sequences of upserts, deletes, overwrites and partition deletes read back with hudi-rs as a
model says, on table versions 6 and 8, MOR and COW, the metadata table validating."""

from __future__ import annotations

import copy
import logging
import random

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.job.maintenance import clean, validate_metadata
from hoodie_ray.job.replace import match_partitions, parse_partitions
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.metadata import HoodieCommitMetadata
from tests.write.model import (
    V6_MDT,
    V8_MDT,
    TableModel,
    Workload,
    hudi_rs_snapshot,
    model_options,
    to_arrow,
)


def test_match_partitions_wildcards_as_java_resolves_them():
    parts = ["2024/01/01", "2024/01/02", "2024/02/01", "2025/01/01", "a"]
    assert match_partitions(["2024/*/01"], parts) == ["2024/01/01", "2024/02/01"]
    assert match_partitions(["2024/*", "a"], parts) == [*parts[:3], "a"]  # * spans segments
    assert match_partitions(["*"], parts) == parts
    assert match_partitions(["b"], parts) == ["b"]  # named: listed, nothing to replace
    assert match_partitions(["2024.01*"], parts) == []  # the rest is literal
    assert parse_partitions(" a, /b/ ,,") == ["a", "b"]
    with pytest.raises(hr.HoodieOptionError, match="partitions.to.delete"):
        match_partitions([], parts)


@pytest.mark.parametrize(
    ("table_type", "version", "mdt"),
    [
        ("MERGE_ON_READ", "8", True),
        pytest.param("COPY_ON_WRITE", "8", False, marks=pytest.mark.slow),  # suite time
        pytest.param("MERGE_ON_READ", "6", True, marks=pytest.mark.slow),
        pytest.param("COPY_ON_WRITE", "6", True, marks=pytest.mark.slow),
    ],
    ids=["mor-v8-mdt", "cow-v8", "mor-v6-mdt", "cow-v6-mdt"],
)
def test_random_replace_operations_read_as_the_model(tmp_path, table_type, version, mdt):
    """Upserts, deletes, inserts, overwrites, table overwrites and partition deletes in random
    order, each by a new client, with clusterings, savepoints and restores (to the newest
    savepoint, then deleted) among them: after every step hudi-rs (which lists v8 tables
    through the metadata table) reads the model, and the metadata table validates."""
    path = tmp_path / "t"
    opts = model_options(
        {"hoodie.metadata.enable": "false"} if not mdt else V8_MDT if version == "8" else V6_MDT,
        {"hoodie.cleaner.commits.retained": "3", "compaction.delta_commits": "3"},
        table_type=table_type,
        version=version,
        small_files=True,
    )
    model, wl = TableModel(), Workload(seed={"6": 11, "8": 12}[version] + len(table_type))
    rng = random.Random(wl.rng.random())
    kinds = []
    points: list[tuple[str, dict]] = []  # savepoints, oldest first, with the model then
    services = ["replace"] * 5 + ["cluster", "savepoint", "savepoint"]
    rng.shuffle(services)
    services.append("restore")  # after a savepoint
    for i in range(2 * len(services) + 1):
        kind, rows = wl.next_commit() if i % 2 == 0 else wl.replace_commit(model)
        if i == 0:
            kind, rows = "upsert", wl.rows_for(wl.keys[:30])
        elif i % 2 and services[i // 2] != "replace":
            kind = services[i // 2]
        if kind == "cluster":
            hr.cluster(str(path), opts)
        elif kind == "savepoint":
            latest = HoodieTable.load(str(path)).active_timeline.completed_commits()[-1]
            if not points or points[-1][0] != latest.timestamp:
                points.append((hr.savepoint(str(path)), copy.deepcopy(model.rows)))
        elif kind == "restore":
            if points:
                at, rows_then = points.pop()
                hr.restore(str(path), at)
                hr.delete_savepoint(str(path), at)
                model.rows = copy.deepcopy(rows_then)
        else:
            if kind == "insert":  # model inserts are fresh keys, kept apart from overwrites'
                rows = [dict(r, key="i" + r["key"]) for r in rows]
            model.write(path, opts, kind, rows)
        kinds.append(kind)
        assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist(), (i, kind)
        if mdt:
            assert validate_metadata(str(path)) == [], (i, kind)
    assert {"cluster", "savepoint", "restore"} <= set(kinds)
    assert {"insert_overwrite", "insert_overwrite_table", "delete_partition"} & set(kinds)
    table = HoodieTable.load(str(path))
    # every replacecommit completed (a restore may have removed them all)
    assert all(i.is_completed for i in table.timeline if i.action == "replacecommit")


def test_insert_overwrite_commit_names_the_replaced_groups(tmp_path):
    """An insert_overwrite writes new file groups only, and its replacecommit lists every
    group the partitions it writes held before (and no other partition's)."""
    path = tmp_path / "t"
    opts = model_options(table_type="MERGE_ON_READ", version="8")
    wl = Workload(seed=3)
    rows = wl.rows_for(wl.keys[:20])
    HoodieWriteClient(str(path), opts).write(to_arrow(rows, True))
    before = HoodieTable.load(str(path)).view().latest_file_slices()
    new = [dict(r, p="a") for r in rows[:3]]
    res = HoodieWriteClient(str(path), {**opts, "write.operation": "insert_overwrite"}).write(
        to_arrow(new, False)
    )
    table = HoodieTable.load(str(path))
    inst = next(i for i in table.timeline if i.timestamp == res.instant)
    assert inst.action == "replacecommit"
    meta: HoodieCommitMetadata = table.metadata(inst)
    assert meta.operation_type == "INSERT_OVERWRITE"
    assert meta.partition_to_replace_file_ids == {
        "a": sorted(s.file_id for s in before if s.partition_path == "a")
    }
    assert not meta.file_ids() & {s.file_id for s in before}
    assert res.num_inserts == 3
    # the requested file as Java 1.x writes an overwrite's: a plan-less, all-null record
    from hoodie_ray.timeline.instant import Instant, State
    from hoodie_ray.timeline.plans import read_avro_metadata

    tl = table.active_timeline
    req = Instant(res.instant, "replacecommit", State.REQUESTED)
    name, record = read_avro_metadata(tl.read_details(req), "requested")
    assert name == "HoodieRequestedReplaceMetadata"
    assert record == {
        "operationType": None,
        "clusteringPlan": None,
        "extraMetadata": None,
        "version": None,
    }


def test_delete_partition_from_input_rows_and_truncate(tmp_path):
    """delete_partition without the option takes the partitions of the input's rows; an
    insert_overwrite_table of no rows empties the table (hudi-rs reads nothing)."""
    path = tmp_path / "t"
    opts = model_options(V8_MDT, table_type="MERGE_ON_READ", version="8")
    model, wl = TableModel(), Workload(seed=5)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:30]))
    rows = [r for r in model.rows.values() if r["p"] == "b"][:1]
    HoodieWriteClient(str(path), {**opts, "write.operation": "delete_partition"}).write(
        to_arrow(rows, False)
    )
    model.delete_partitions(["b"])
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    res = hr.write(None, str(path), {**opts, "write.operation": "insert_overwrite_table"})
    assert res.instant is not None
    assert hudi_rs_snapshot(path).num_rows == 0
    assert validate_metadata(str(path)) == []
    # the next upsert writes into an empty table: every row is an insert
    res = model.write(path, opts, "upsert", wl.rows_for(wl.keys[:5]))
    assert res.num_inserts == 5


def test_delete_partition_needs_partitions(tmp_path, caplog):
    path = tmp_path / "t"
    opts = model_options(table_type="MERGE_ON_READ", version="8")
    wl = Workload(seed=6)
    HoodieWriteClient(str(path), opts).write(to_arrow(wl.rows_for(wl.keys[:5]), True))
    n = len(HoodieTable.load(str(path)).timeline)
    with pytest.raises(hr.HoodieOptionError, match="partitions.to.delete"):
        HoodieWriteClient(str(path), {**opts, "write.operation": "delete_partition"}).write(
            pa.table({"key": pa.array([], pa.string())})
        )
    assert len(HoodieTable.load(str(path)).timeline) == n
    # patterns that match nothing: an empty replacecommit, as Java makes, and a warning
    caplog.set_level(logging.WARNING, logger="hoodie_ray")
    miss = {**opts, "write.operation": "delete_partition", "partitions.to.delete": "2023/*"}
    res = HoodieWriteClient(str(path), miss).write(pa.table({"key": pa.array([], pa.string())}))
    assert res.instant is not None and hudi_rs_snapshot(path).num_rows == 5
    assert "2023/* matches no partition" in caplog.text


def test_clean_deletes_replaced_groups_after_retention(tmp_path):
    """Replaced file groups keep their files while retained commits may read them; once the
    replacecommit is older than the earliest retained commit, a clean deletes them."""
    path = tmp_path / "t"
    opts = model_options(
        {"hoodie.clean.automatic": "false", "hoodie.cleaner.commits.retained": "2"},
        table_type="COPY_ON_WRITE",
        version="8",
    )
    model, wl = TableModel(), Workload(seed=8)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:30]))
    old = {
        (s.partition_path, s.base_file)
        for s in HoodieTable.load(str(path)).view().latest_file_slices()
    }
    model.write(path, opts, "insert_overwrite_table", wl.rows_for(wl.keys[:4]))
    for _ in range(3):
        model.write(path, opts, "upsert", wl.rows_for(wl.keys[:4]))
    clean(str(path), opts)
    left = {(p, n) for p, n in old if (path / p / n).exists()}
    assert not left
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()


def test_delete_partition_refused_under_a_pending_compaction(tmp_path):
    """A pending compaction plan over a partition refuses its delete (the plan would write its
    groups back) and the table is unchanged; once it ran, the delete goes through."""
    from hoodie_ray.job.maintenance import compact, schedule_compaction

    path = tmp_path / "t"
    opts = model_options(
        {"compaction.schedule.enabled": "false"}, table_type="MERGE_ON_READ", version="8"
    )
    model, wl = TableModel(), Workload(seed=9)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:30]))
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:30]))
    assert schedule_compaction(str(path), opts, force=True) is not None
    n = len(HoodieTable.load(str(path)).timeline)
    with pytest.raises(hr.HoodieUnsupportedError, match="pending table services"):
        model.write(path, opts, "delete_partition", [{"p": "a"}])
    assert len(HoodieTable.load(str(path)).timeline) == n
    model.delete_partitions([])  # nothing happened
    compact(str(path), opts)
    model.write(path, opts, "delete_partition", [{"p": "a"}])
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()


def test_replace_operations_refused_under_nbcc():
    from hoodie_ray.config.options import resolve_options

    nbcc = {
        "hoodie.write.concurrency.mode": "non_blocking_concurrency_control",
        "index.type": "BUCKET",
        "table.type": "MERGE_ON_READ",
    }
    with pytest.raises(hr.HoodieOptionError, match="delete_partition cannot be used with non-"):
        resolve_options({**nbcc, "write.operation": "delete_partition"})


def test_java_v9_table_takes_overwrites_and_upserts(tmp_path):
    """The Java v9 table with a metadata table, secondary indexes and a clustering
    replacecommit takes an insert_overwrite of one partition, an upsert and a partition
    delete: hudi-rs (listing through the metadata table) reads what the operations say, and
    the metadata table, secondary indexes included, validates."""
    from hoodie_ray.meta import META_FIELDS
    from tests.conftest import extract_sample_table, hudi_rs_read

    root = extract_sample_table("sample_mor_avro_v9_txns_complex_meta", tmp_path / "java")
    data = hudi_rs_read(root)
    data = data.drop_columns([c for c in META_FIELDS if c in data.column_names])
    regions = sorted(set(data.column("region").to_pylist()))
    keep, over = regions[0], regions[-1]
    rows = data.filter(pa.compute.equal(data.column("region"), over)).slice(0, 1)
    rows = rows.set_column(rows.schema.get_field_index("currency"), "currency", pa.array(["CHF"]))
    HoodieWriteClient(str(root), {"write.operation": "insert_overwrite"}).write(rows)
    expected = [r for r in data.to_pylist() if r["region"] != over] + rows.to_pylist()

    def check(step: str) -> None:
        got = hudi_rs_read(root)
        got = got.drop_columns([c for c in META_FIELDS if c in got.column_names])
        assert sorted(map(str, got.to_pylist())) == sorted(map(str, expected)), step
        assert validate_metadata(str(root)) == [], step

    check("insert_overwrite")
    HoodieWriteClient(str(root)).write(rows)  # the same row again: an update of it
    check("upsert")
    HoodieWriteClient(
        str(root),
        {"write.operation": "delete_partition", "partitions.to.delete": f"*{keep}*"},
    ).write(None)
    expected = [r for r in expected if r["region"] != keep]
    check("delete_partition")


def test_a_failed_overwrite_is_rolled_back_by_the_next_writer(tmp_path, monkeypatch):
    """An overwrite that dies after writing its files leaves a pending replacecommit; the next
    writer rolls it back (its files gone, nothing replaced) and the table reads as before."""
    from hoodie_ray.timeline.timeline import ActiveTimeline
    from hoodie_ray.write import commit as commit_mod

    path = tmp_path / "t"
    opts = model_options(V6_MDT, table_type="MERGE_ON_READ", version="6")
    model, wl = TableModel(), Workload(seed=13)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:30]))

    def dead(*_a, **_k):
        raise OSError("writer died")

    with monkeypatch.context() as m:
        m.setattr(commit_mod.CommitProtocol, "rollback", lambda self, i: dead())
        m.setattr(ActiveTimeline, "complete", dead)
        with pytest.raises((OSError, hr.HoodieError)):
            model.write(path, opts, "insert_overwrite_table", wl.rows_for(wl.keys[:3]))
    pending = [i for i in HoodieTable.load(str(path)).timeline if not i.is_completed]
    assert [i.action for i in pending] == ["replacecommit"]
    rows = wl.rows_for(wl.keys[:5])
    model.write(path, opts, "upsert", rows)
    table = HoodieTable.load(str(path))
    assert all(i.is_completed for i in table.timeline)
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    assert validate_metadata(str(path)) == []


def test_incremental_read_of_an_overwrite_gives_its_rows(tmp_path):
    """An incremental read over an insert_overwrite gives the rows it wrote (as Java's
    incremental relation reads a replacecommit's new files), and none of a delete_partition."""
    path = tmp_path / "t"
    # version 6: the range is by requested time (8+ ranges by completion time)
    opts = model_options(table_type="MERGE_ON_READ", version="6")
    model, wl = TableModel(), Workload(seed=14)
    first = model.write(path, opts, "upsert", wl.rows_for(wl.keys[:30]))
    rows = [dict(r, p="a") for r in wl.rows_for(["x1", "x2"])]
    over = model.write(path, opts, "insert_overwrite", rows)
    got = hr.read(str(path), query_type="incremental", begin=first.instant)
    assert sorted(got.column("key").to_pylist()) == ["x1", "x2"]
    model.write(path, opts, "delete_partition", [{"p": "b"}])
    got = hr.read(str(path), query_type="incremental", begin=over.instant)
    assert got.num_rows == 0
