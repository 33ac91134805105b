"""Clustering: small file slices rewritten into fewer base files (sorted when asked), committed
as a replacecommit; hudi-rs reads the same rows, the metadata table validates, writes after it
land in the new groups, a clustering that died is rolled back by the next one."""

from __future__ import annotations

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import hoodie_ray as hr
from hoodie_ray.compaction import clustering as clustering_mod
from hoodie_ray.compaction.layout import layout_order
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.job.maintenance import validate_metadata
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.plans import HoodieClusteringPlan
from tests.write.model import V6_MDT, V8_MDT, TableModel, Workload, hudi_rs_snapshot, model_options

#: Every insert commit opens new file groups (no small-file packing): many small slices.
MANY_FILES = {"hoodie.parquet.small.file.limit": "0", "compaction.delta_commits": "3"}


def _small_table(path, opts, seed: int, commits: int = 5) -> tuple[TableModel, Workload]:
    model, wl = TableModel(), Workload(seed=seed)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:20]))
    for i in range(commits):
        rows = wl.rows_for(wl.keys[20 + 8 * i : 28 + 8 * i]) if 28 + 8 * i <= 60 else []
        if rows:
            model.write(path, opts, "upsert", rows)
        model.write(path, opts, *wl.next_commit())
    return model, wl


def _groups(path) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in HoodieTable.load(str(path)).view().latest_file_slices():
        out[s.partition_path] = out.get(s.partition_path, 0) + 1
    return out


@pytest.mark.parametrize(
    ("table_type", "version"),
    [
        ("MERGE_ON_READ", "8"),
        ("MERGE_ON_READ", "6"),
        pytest.param("COPY_ON_WRITE", "8", marks=pytest.mark.slow),  # suite time
    ],
    ids=["mor-v8", "mor-v6", "cow-v8"],
)
def test_clustering_merges_small_slices_and_reads_the_same(tmp_path, table_type, version):
    path = tmp_path / "t"
    opts = model_options(
        V8_MDT if version == "8" else V6_MDT, MANY_FILES, table_type=table_type, version=version
    )
    model, wl = _small_table(path, opts, seed=51 + int(version))
    before = _groups(path)
    assert max(before.values()) > 1
    dry = hr.cluster(str(path), opts, dry_run=True)
    assert dry.instant is None and dry.num_slices == sum(before.values())
    res = hr.cluster(str(path), opts)
    assert res.instant is not None and res.files_written
    assert _groups(path) == {p: 1 for p in before}, "one group per partition now"
    table = HoodieTable.load(str(path))
    inst = next(i for i in table.timeline if i.timestamp == res.instant)
    assert inst.action == "replacecommit" and table.metadata(inst).operation_type == "CLUSTER"
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    assert validate_metadata(str(path)) == []
    for _ in range(3):  # writes after it go to the new groups
        model.write(path, opts, *wl.next_commit())
        assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    assert validate_metadata(str(path)) == []
    assert hr.cluster(str(path), opts, dry_run=True).num_slices <= sum(_groups(path).values())


def test_clustering_sorts_by_the_sort_columns(tmp_path):
    """With sort columns each new base file holds its rows in their order; the plan records
    them, as Java's strategy params do."""
    path = tmp_path / "t"
    opts = model_options(MANY_FILES, table_type="MERGE_ON_READ", version="8")
    model, _ = _small_table(path, opts, seed=61)
    sort = {"hoodie.clustering.plan.strategy.sort.columns": "s,ts"}
    calls: list[tuple[int, int]] = []
    res = hr.cluster(str(path), {**opts, **sort}, on_progress=lambda d, t: calls.append((d, t)))
    assert calls == [(i + 1, len(res.groups)) for i in range(len(res.groups))]
    table = HoodieTable.load(str(path))
    done = next(i for i in table.active_timeline.instants if i.timestamp == res.instant)
    plan = clustering_mod.read_clustering_plan(table, done)
    assert isinstance(plan, HoodieClusteringPlan) and plan.sort_columns == ("s", "ts")
    for rel in res.files_written:
        t = pq.read_table(path / rel)
        order = pc.sort_indices(t, [("s", "ascending"), ("ts", "ascending")])
        assert order.to_pylist() == list(range(t.num_rows)), rel
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()


@pytest.mark.parametrize("layout", ["z-order", pytest.param("hilbert", marks=pytest.mark.slow)])
def test_clustering_orders_rows_along_a_space_filling_curve(tmp_path, layout):
    """``hoodie.layout.optimize.strategy``: each new base file holds its rows in the curve's
    order over the sort columns; the plan records the layout; hudi-rs reads the same rows."""
    path = tmp_path / "t"
    opts = model_options(V8_MDT, MANY_FILES, table_type="MERGE_ON_READ", version="8")
    model, wl = _small_table(path, opts, seed=67)
    given = {
        "hoodie.clustering.plan.strategy.sort.columns": "ts,v",
        "hoodie.layout.optimize.strategy": layout,
    }
    res = hr.cluster(str(path), {**opts, **given})
    table = HoodieTable.load(str(path))
    done = next(i for i in table.active_timeline.instants if i.timestamp == res.instant)
    plan = clustering_mod.read_clustering_plan(table, done)
    assert plan.sort_columns == ("ts", "v") and plan.layout == layout
    for rel in res.files_written:
        t = pq.read_table(path / rel)
        assert layout_order(t, ["ts", "v"], layout).tolist() == list(range(t.num_rows)), rel
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    assert validate_metadata(str(path)) == []
    model.write(path, opts, *wl.next_commit())  # writes after it land in the new groups
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    # a sort column the table lacks is refused before anything is scheduled
    before = sorted(p.name for p in (path / ".hoodie").iterdir())
    bad = {**given, "hoodie.clustering.plan.strategy.sort.columns": "ts,nope"}
    with pytest.raises(hr.HoodieUnsupportedError, match="'nope' is not a column"):
        hr.cluster(str(path), {**opts, **bad})
    # and so is it in a dry run, which said what a run would rewrite
    with pytest.raises(hr.HoodieUnsupportedError, match="'nope' is not a column"):
        hr.cluster(str(path), {**opts, **bad}, dry_run=True)
    assert sorted(p.name for p in (path / ".hoodie").iterdir()) == before


def test_async_clustering_options_on_the_single_process_path_cluster_at_the_barrier(tmp_path):
    """Without Ray's compactor actors the plan a writer schedules (clustering.async.enabled,
    every clustering.delta_commits inserts) runs at once, after the commit."""
    path = tmp_path / "t"
    opts = model_options(
        V8_MDT,
        MANY_FILES,
        {
            "write.operation": "insert",
            "clustering.async.enabled": "true",
            "clustering.delta_commits": "2",
        },
        table_type="MERGE_ON_READ",
        version="8",
    )
    model, wl = TableModel(), Workload(seed=73)
    clustered = []
    for i in range(4):
        res = model.write(path, opts, "insert", wl.rows_for(wl.keys[8 * i : 8 * i + 8]))
        clustered.append(res.services.clustered)
    assert [c is not None for c in clustered] == [False, True, False, True]
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    assert validate_metadata(str(path)) == []


def test_bucket_index_tables_are_not_clustered(tmp_path):
    path = tmp_path / "t"
    opts = model_options(
        {"index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"},
        table_type="MERGE_ON_READ",
        version="8",
    )
    model, wl = TableModel(), Workload(seed=79)
    for _ in range(2):
        model.write(path, opts, "upsert", wl.upserts(6) if model.rows else wl.rows_for(wl.keys[:6]))
    before = sorted(p.name for p in (path / ".hoodie").iterdir())
    with pytest.raises(hr.HoodieUnsupportedError, match="bucket index"):
        hr.cluster(str(path), {k: v for k, v in opts.items() if k != "index.type"})
    assert sorted(p.name for p in (path / ".hoodie").iterdir()) == before


def test_inline_clustering_in_the_write_client(tmp_path):
    """hoodie.clustering.inline clusters every clustering.inline.max.commits commits; the
    client's kept key index is dropped after one, so later upserts find their keys."""
    path = tmp_path / "t"
    opts = model_options(
        V8_MDT,
        MANY_FILES,
        {"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "3"},
        table_type="MERGE_ON_READ",
        version="8",
    )
    model, wl = TableModel(), Workload(seed=71)
    client = HoodieWriteClient(str(path), opts)
    clustered = []
    for i in range(7):
        rows = wl.rows_for(wl.keys[:20]) if i == 0 else wl.upserts(10)
        res = model.write(path, opts, "upsert", rows, client=client)
        clustered.append(res.services.clustered)
        assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist(), i
    assert [c is not None for c in clustered].count(True) >= 1
    assert validate_metadata(str(path)) == []
    with pytest.raises(hr.HoodieOptionError, match="clustering.inline"):
        hr.HoodieStreamWriter(str(path), opts)


def test_a_clustering_that_died_is_rolled_back_by_the_next(tmp_path, monkeypatch):
    """A clustering killed after writing files (no commit, no rollback) leaves a pending
    plan: a write updating its file groups is refused and rolled back (Java's reject-update
    strategy), and the next clustering rolls it back and clusters the table as it is then."""
    from hoodie_ray.write.commit import CommitProtocol

    path = tmp_path / "t"
    opts = model_options(V8_MDT, MANY_FILES, table_type="MERGE_ON_READ", version="8")
    model, wl = _small_table(path, opts, seed=81)

    def dies(*_a, **_k):
        raise OSError("killed")

    with monkeypatch.context() as m:
        m.setattr(CommitProtocol, "commit", dies)
        m.setattr(CommitProtocol, "rollback", dies)
        with pytest.raises(OSError):
            hr.cluster(str(path), opts)
    table = HoodieTable.load(str(path))
    assert [i.action for i in table.timeline if not i.is_completed] == ["clustering"]
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    with pytest.raises(hr.HoodieWriteConflictError, match="pending clustering"):
        model.write(path, opts, "upsert", wl.rows_for(wl.keys[:5]))
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    res = hr.cluster(str(path), opts)
    assert res.instant is not None
    table = HoodieTable.load(str(path))
    assert all(i.is_completed for i in table.timeline)
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:5]))
    assert hudi_rs_snapshot(path).to_pylist() == model.as_table().to_pylist()
    assert validate_metadata(str(path)) == []


def test_java_v9_table_is_clustered(tmp_path):
    """The Java table (metadata table, secondary indexes, a Java clustering) is clustered by
    hoodie_ray: hudi-rs reads the same rows, the metadata table validates."""
    from tests.conftest import extract_sample_table, hudi_rs_read

    root = extract_sample_table("sample_mor_avro_v9_txns_complex_meta", tmp_path / "java")
    key = "_hoodie_record_key"
    before = hudi_rs_read(root).sort_by(key)
    res = hr.cluster(str(root), {"hoodie.clustering.plan.strategy.sort.columns": "txn_id"})
    assert res.instant is not None
    after = hudi_rs_read(root).sort_by(key)
    cols = [c for c in before.column_names if c != "_hoodie_file_name"]
    assert after.select(cols).to_pylist() == before.select(cols).to_pylist()
    assert validate_metadata(str(root)) == []
