"""The write topology on Ray: model tests through hr.write and HoodieStreamWriter, faults, bad input."""

from __future__ import annotations

import os
import random

import pyarrow as pa
import pytest

import hoodie_ray as hr
from tests.fixtures_ray import checkpoint_with_kill
from tests.write.model import (
    OPTIONS,
    TableModel,
    Workload,
    model_options,
    to_arrow,
    upsert_commits,
)

pytestmark = pytest.mark.ray

TOPOLOGY = {"write.tasks": "2", "write.bucket_assign.tasks": "2"}


def _no_pending(path) -> None:
    from hoodie_ray.ray.stream import release_warm_writers

    release_warm_writers()  # a warm hr.write topology may still run its async compaction
    t = hr.HoodieTable.load(str(path))
    assert [i for i in t.timeline if i.state.value != "COMPLETED"] == []


def test_hr_write_model(ray_session, tmp_path):
    path = tmp_path / "t"
    model, wl = TableModel(), Workload(seed=11)
    # suite time: 4 writes (was 6), a compaction every 3 (was 5): one still runs beside the
    # warm topology, and a write follows it
    opts = {**OPTIONS, **TOPOLOGY, "compaction.delta_commits": "3"}
    for i in range(5):
        kind, rows = wl.next_commit()
        if i == 0:
            kind, rows = "upsert", wl.rows_for(wl.keys[:30])
        if kind != "upsert":
            continue
        hr.write(to_arrow(rows, True), str(path), opts)
        model.upsert(rows)
        model.assert_hudi_rs_reads(path, f"commit {i}")
    _no_pending(path)


@pytest.mark.slow  # suite time: eight assigner actors; the cut is checked in tests/write
def test_eight_assigners_take_a_round_of_five_blocks(ray_session, tmp_path):
    """At 8 assigners five blocks go as one round (a route call, then one assign call per
    assigner with its parts): the same rows, in arrival order per key."""
    path = tmp_path / "t"
    model, wl = TableModel(), Workload(seed=17)
    options = {**OPTIONS, "write.tasks": "1", "write.bucket_assign.tasks": "8"}
    with hr.HoodieStreamWriter(str(path), options) as w:
        for i in range(2):
            rows = wl.rows_for(wl.keys[:30]) if i == 0 else []
            while len(rows) < 25:
                kind, more = wl.next_commit()
                if kind == "upsert":
                    rows += more
            for k in range(5):  # five small blocks: one round at the checkpoint
                part = rows[k * len(rows) // 5 : (k + 1) * len(rows) // 5]
                w.write(to_arrow(part, True))
            model.upsert(rows)  # one round: a key's rows fold by ordering value first
            assert w.checkpoint() is not None
    model.assert_hudi_rs_reads(path, "8 assigners")


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
def test_stream_writer_model_many_checkpoints(ray_session, tmp_path):
    path = tmp_path / "t"
    model = TableModel()
    with hr.HoodieStreamWriter(str(path), {**OPTIONS, **TOPOLOGY}) as w:
        for i, rows in enumerate(upsert_commits(5, 8)):
            # two writes per checkpoint: the same key can arrive twice in one instant
            w.write(to_arrow(rows[: len(rows) // 2], True))
            w.write(to_arrow(rows[len(rows) // 2 :], True))
            model.upsert(rows)  # one round: a key's rows fold by ordering value first
            assert w.checkpoint() is not None
            model.assert_hudi_rs_reads(path, f"checkpoint {i}")
        assert w.checkpoint() is None  # nothing written since
        # index_stats: each assigner's key index (every live key; deleted ones may stay)
        stats = w.index_stats()
        assert len(stats) == 2 and sum(s["keys"] for s in stats) >= len(model.rows)
        assert all(s["bytes"] > 0 and s["bootstrap_ms"] >= 0 for s in stats)
    _no_pending(path)


# suite time: both versions slow; CI kills actors in tests/reliability/test_faults.py and
# tests/ray/test_dataset_stream.py
@pytest.mark.parametrize(
    "version",
    [pytest.param("6", marks=pytest.mark.slow), pytest.param("8", marks=pytest.mark.slow)],
)
def test_actor_faults_nothing_lost_nothing_twice(ray_session, tmp_path, version):

    path = tmp_path / "t"
    rng = random.Random(3)
    model, wl = TableModel(), Workload(seed=9)
    kills = []
    opts = {**OPTIONS, **TOPOLOGY, "hoodie.write.table.version": version}
    # each assigner and writer killed once in CI (the coordinator is killed under load in
    # tests/reliability/test_faults.py), every role twice (before and during, as the seed
    # draws) with the full run
    roles = ["assigner-0", "writer-0", "assigner-1", "writer-1", "coordinator"]
    rounds = 10 if os.environ.get("HOODIE_RAY_FULL") else 4
    with hr.HoodieStreamWriter(str(path), opts) as w:
        for i in range(rounds):
            rows = wl.rows_for(wl.keys[:30]) if i == 0 else []
            while len(rows) < 15:
                kind, more = wl.next_commit()
                if kind == "upsert":
                    rows += more
            w.write(to_arrow(rows, True))
            model.upsert(rows)
            role = roles[i % len(roles)]
            handle = w.actors[role]
            when = rng.choice(["before", "during"])
            kills.append((i, role, when))
            checkpoint_with_kill(w, handle, when, rng)
            model.assert_hudi_rs_reads(path, f"after kill {kills[-1]}")
    _no_pending(path)


@pytest.mark.slow  # suite time: four topologies for option errors tests/config checks too
def test_bad_input_fails_before_commit(ray_session, tmp_path):
    path = tmp_path / "t"
    hr.write(to_arrow([Workload(1)._row("a")], False), str(path), OPTIONS)
    before = sorted(p.name for p in path.rglob("*") if ".aux" not in p.parts)
    with pytest.raises(hr.HoodieSchemaError, match="Field key does not exist|key"):
        hr.write(pa.table({"nokey": [1]}), str(path), OPTIONS)
    with pytest.raises(hr.HoodieSchemaError):
        hr.write(
            pa.table({"key": ["a"], "p": ["x"], "ts": ["not a number"], "v": [1], "s": ["s"]}),
            str(path),
            OPTIONS,
        )
    with pytest.raises(hr.HoodieOptionError, match="record key fields"):
        hr.write(
            to_arrow([Workload(1)._row("a")], False),
            str(path),
            {**OPTIONS, "hoodie.datasource.write.recordkey.field": "s"},
        )
    with pytest.raises(hr.HoodieOptionError, match="partition fields"):
        hr.write(
            to_arrow([Workload(1)._row("a")], False),
            str(path),
            {**OPTIONS, "hoodie.datasource.write.partitionpath.field": "s"},
        )

    def listing():
        return sorted(p.name for p in path.rglob("*") if ".aux" not in p.parts)

    assert listing() == [n for n in before if n not in (".aux", "hoodie_ray.writer.lock")]


# suite time: the path rules are tested in tests/job/test_setup.py, and a HoodieError raised in
# an actor reaches hr.write as itself in tests/test_storage.py (folder_refuses_root[ray])
@pytest.mark.slow
def test_bad_table_paths_fail_as_themselves_on_ray(ray_session, tmp_path):
    """A path that is a file, or a directory of other files: the HoodieError itself, never a
    RayTaskError around it, from hr.write and from HoodieStreamWriter."""
    (tmp_path / "file").write_bytes(b"x")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "data.parquet").write_bytes(b"y")
    rows = to_arrow([Workload(1)._row("a")], False)
    with pytest.raises(hr.HoodiePathError, match="not a directory") as e1:
        hr.write(rows, str(tmp_path / "file"), OPTIONS)
    with pytest.raises(hr.HoodieTableNotFoundError, match="allow_non_empty_dir") as e2:
        hr.write(rows, str(tmp_path / "d"), OPTIONS)
    with (
        pytest.raises(hr.HoodiePathError, match="not a directory") as e3,
        hr.HoodieStreamWriter(str(tmp_path / "file" / "sub"), OPTIONS) as w,
    ):
        w.write(rows)
        w.checkpoint()
    for e in (e1, e2, e3):
        assert type(e.value).__module__ == "hoodie_ray.exceptions"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["d", "data.parquet", "file"]


# suite time: both slow; the Ray model tests' workloads carry late records and partition
# moves (tests/write/model.py), and tests/write/test_partition_moves.py has the rules
@pytest.mark.parametrize(
    "version",
    [pytest.param("6", marks=pytest.mark.slow), pytest.param("8", marks=pytest.mark.slow)],
)
def test_late_records_that_move_partition_lose_on_ray(ray_session, tmp_path, version):
    """Global index, event time: through HoodieStreamWriter (async compaction) and hr.write on
    Ray, a record older than its key's stored copy in another partition changes nothing."""
    from tests.write.test_partition_moves import OPTIONS as MOVE_OPTIONS
    from tests.write.test_partition_moves import both, deletes, rows

    path = str(tmp_path / "t")
    opts = {
        **MOVE_OPTIONS,
        **TOPOLOGY,
        "hoodie.write.table.version": version,
        "compaction.async.enabled": "true",
        "compaction.delta_commits": "1",
    }
    with hr.HoodieStreamWriter(path, opts) as w:
        w.write(rows(("k", "p2", 4788, "new"), ("j", "p1", 10, "j1")))
        w.checkpoint()
        w.write(rows(("k", "p1", 4601, "late")))
        w.checkpoint()
        w.write(rows(("j", "p3", 11, "j moves")))
        w.write(rows(("j", "p2", 3, "j late, same checkpoint")))
        w.checkpoint()
    assert both(path) == [("j", "p3", 11, "j moves"), ("k", "p2", 4788, "new")]
    if version != "6":
        return  # hr.write on Ray starts a topology per call: once is enough
    hr.write(rows(("k", "p3", 4000, "late again")), path, opts)
    hr.write(deletes(("j", "p1", 5)), path, opts)
    hr.write(rows(("k", "p3", 5000, "newer")), path, opts)
    assert both(path) == [("j", "p3", 11, "j moves"), ("k", "p3", 5000, "newer")]


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
def test_schema_evolves_on_every_ray_entry_point(ray_session, tmp_path):
    """A new column mid-checkpoint (the writers take the new schema before its rows reach
    them) and between checkpoints, int -> long, a missing column as nulls, a Ray Dataset with a
    new column (evolved before its write tasks start) and a warm hr.write with another: hudi-rs,
    hr.read and hr.read_ray read the model."""
    path = str(tmp_path / "t")
    opts = {**OPTIONS, **TOPOLOGY, "hoodie.write.set.null.for.missing.columns": "true"}

    def rows(keys, ts, **cols):
        return pa.table({"key": keys, "p": ["a"] * len(keys), "ts": [ts] * len(keys), **cols})

    want: dict[str, dict] = {}

    def expect(t: pa.Table) -> None:
        for r in t.to_pylist():
            want[r["key"]] = r

    batches = [
        rows(["k1", "k2", "k3"], 1, v=pa.array([1, 2, 3], pa.int32())),
        rows(["k4"], 2, v=pa.array([4], pa.int32())),  # same checkpoint, first schema ...
        rows(["k1", "k5"], 2, v=pa.array([2**40, 5]), extra=["e1", "e5"]),  # ... then evolved
    ]
    with hr.HoodieStreamWriter(path, opts) as w:
        w.write(batches[0])
        w.checkpoint()
        w.write(batches[1])
        w.write(batches[2])
        w.checkpoint()
        w.write(rows(["k2"], 3, more=[1.5]))  # v and extra missing: nulls; more is new
    for b in (*batches, rows(["k2"], 3, more=[1.5])):
        expect(b)
    import ray

    ds = ray.data.from_arrow(rows(["k6"], 4, v=pa.array([6]), tag=["t6"]))
    hr.write(ds, path, opts)
    expect(rows(["k6"], 4, v=pa.array([6]), tag=["t6"]))
    hr.write(rows(["k3"], 5, v=pa.array([30]), last=[True]), path, opts)  # warm topology
    expect(rows(["k3"], 5, v=pa.array([30]), last=[True]))
    cols = ["key", "p", "ts", "v", "extra", "more", "tag", "last"]
    model = [{c: want[k].get(c) for c in cols} for k in sorted(want)]
    assert hr.read(path, columns=cols).sort_by("key").to_pylist() == model
    blocks = ray.get(hr.read_ray(path, columns=cols).to_arrow_refs())
    assert pa.concat_tables(blocks).sort_by("key").to_pylist() == model
    from tests.conftest import hudi_rs_read

    assert hudi_rs_read(path).select(cols).sort_by("key").to_pylist() == model
    schema = hr.HoodieTable.load(path).schema
    assert schema is not None and schema.field("v").type == pa.int64()
    _no_pending(path)


def test_writers_share_file_groups_of_uneven_load(ray_session, tmp_path):
    """Four bucket file groups taking 50/17/33/0% of the updates: their home writers would
    take 83/17, so every assigner holds the longest-first writer plan of the previous
    checkpoints' loads, and, once the plan has seen an update, both writers take half the
    records. Also: one
    assigner task per bucket (two would each make a file group for the same bucket)."""
    import ray

    from hoodie_ray.index import bucket_ids
    from hoodie_ray.job.coordinator import group_loads
    from hoodie_ray.ray.stream import CHECKPOINT_PHASES
    from hoodie_ray.write.bucket_assigner import plan_writers

    path = tmp_path / "t"
    options = {
        "hoodie.table.name": "skew",
        "hoodie.datasource.write.recordkey.field": "key",
        "precombine.field": "ts",
        "hoodie.index.type": "BUCKET",
        "hoodie.bucket.index.num.buckets": "4",
        **TOPOLOGY,
    }
    keys = pa.array([f"k{i}" for i in range(400)])
    by_bucket = [keys.filter(pa.array(bucket_ids(keys, 4) == b)) for b in range(4)]
    # 24/8/16/0: buckets 0 and 2 share a home writer (non-partitioned: bucket parity), which
    # would take 40 of the 48 updates
    updates = pa.concat_arrays([by_bucket[b][:n] for b, n in enumerate((24, 8, 16, 0))])
    ts, per_writer, plan, before = 0, [], {}, [0, 0]
    with hr.HoodieStreamWriter(str(path), options) as w:
        for i, batch_keys in enumerate((keys, updates, updates, updates)):
            n = len(batch_keys)
            w.write(pa.table({"key": batch_keys, "ts": pa.array(range(ts, ts + n), pa.int64())}))
            ts += n
            held = ray.get(
                [a.__ray_call__.remote(lambda s: s.core.profile.writer_plan) for a in w._assigners]
            )
            assert held == [plan, plan], i
            assert w.checkpoint() is not None
            after = ray.get(
                [x.__ray_call__.remote(lambda s: s.write_fn.records_in) for x in w._writers]
            )
            per_writer.append(sorted(a - b for a, b in zip(after, before, strict=True)))
            before = after
            table = hr.HoodieTable.load(str(path))
            loads = group_loads(table, table.view().latest_file_slices())
            plan = plan_writers(loads, 2, bucket_index=True)
            assert plan or i == 0  # the inserts may be even at home: no plan
        phases = w.checkpoint_phases()
        assert len(phases) == 4  # one per checkpoint, every phase timed
        assert all(set(p) == set(CHECKPOINT_PHASES) and min(p.values()) >= 0 for p in phases)
    assert per_writer[2:] == [[24, 24], [24, 24]], per_writer  # the first plan: inserts


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
def test_overwrites_and_partition_deletes_on_ray(ray_session, tmp_path):
    """A stream writer of insert_overwrite commits a replacecommit per checkpoint (each
    replaces the last one's groups in the partitions it writes); hr.write's delete_partition,
    a warm upsert topology after them and a clustering on Ray read as the model (hudi-rs)."""
    path = tmp_path / "t"
    model, wl = TableModel(), Workload(seed=23)
    rows = wl.rows_for(wl.keys[:30])
    hr.write(to_arrow(rows, True), str(path), {**OPTIONS, **TOPOLOGY})
    model.upsert(rows)
    over = {**OPTIONS, **TOPOLOGY, "write.operation": "insert_overwrite"}
    with hr.HoodieStreamWriter(str(path), over) as w:
        for i in range(2):
            # keys partition a holds, or none holds (an overwrite looks up no index)
            free = [k for k in wl.keys if k not in model.rows or model.rows[k]["p"] == "a"]
            rows = [dict(r, p="a") for r in wl.rows_for(free[i : i + 8])]
            w.write(to_arrow(rows, False))
            assert w.checkpoint() is not None
            model.overwrite(rows, ["a"])
            model.assert_hudi_rs_reads(path, "overwrite")
    hr.write(
        pa.table({"p": ["b"]}),
        str(path),
        {**OPTIONS, "write.operation": "delete_partition", "partitions.to.delete": "b"},
    )
    model.delete_partitions(["b"])
    model.assert_hudi_rs_reads(path, "delete_partition")
    rows = wl.rows_for(wl.keys[:40])
    hr.write(to_arrow(rows, True), str(path), {**OPTIONS, **TOPOLOGY})
    model.upsert(rows)
    model.assert_hudi_rs_reads(path, "upsert after")
    _no_pending(path)  # the warm topology gone: hr.cluster takes the lock
    res = hr.cluster(str(path), OPTIONS, engine="ray")  # a Ray task per group
    assert res.instant is not None and res.files_written
    model.assert_hudi_rs_reads(path, "clustered on Ray")


# suite time: partial updates read as the model in CI in tests/write/test_partial_update.py
# (the same write core the actors run)
@pytest.mark.slow
def test_partial_updates_through_the_topology(ray_session, tmp_path):
    """``write.partial.updates`` on Ray: two writes of one checkpoint carry different columns
    of the same keys; their rows fold per key (a column a row lacks takes the value a row
    before had), and each writer appends a block per column set (``IS_PARTIAL``)."""
    from tests.conftest import hudi_rs_read

    path = str(tmp_path / "t")
    opts = {
        "hoodie.table.name": "partial_ray",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "table.type": "MERGE_ON_READ",
        "hoodie.write.table.version": "9",
        "index.global.enabled": "false",
        "write.partial.updates": "true",
        "compaction.schedule.enabled": "false",
        **TOPOLOGY,
    }
    keys = ["a", "b", "c", "d", "e", "f"]
    with hr.HoodieStreamWriter(path, opts) as w:
        w.write(
            pa.table(
                {
                    "key": keys,
                    "p": ["x", "y"] * 3,
                    "ts": [1] * 6,
                    "u": list(range(6)),
                    "w": [f"{k}1" for k in keys],
                }
            )
        )
        assert w.checkpoint() is not None
        w.write(pa.table({"key": ["a", "b"], "p": ["x", "y"], "ts": [2, 2], "u": [20, 21]}))
        w.write(pa.table({"key": ["a", "c"], "p": ["x", "x"], "ts": [3, 3], "w": ["a3", "c3"]}))
        assert w.checkpoint() is not None
    want = {
        "a": (3, 20, "a3"),
        "b": (2, 21, "b1"),
        "c": (3, 2, "c3"),
        "d": (1, 3, "d1"),
        "e": (1, 4, "e1"),
        "f": (1, 5, "f1"),
    }
    for table in (hr.read(path), hudi_rs_read(path)):
        assert {r["key"]: (r["ts"], r["u"], r["w"]) for r in table.to_pylist()} == want
    _no_pending(path)


def test_metadata_compaction_beside_the_stream_finishes_as_it_closes(ray_session, tmp_path):
    """``hoodie.metadata.compact.async``: the coordinator merges the metadata table's
    compaction on its thread while checkpoints go on; closing the writer waits for it, so
    nothing is left pending for the next writer to roll back."""
    from hoodie_ray.job import maintenance

    path = str(tmp_path / "t")
    model, wl = TableModel(), Workload(seed=29)
    opts = model_options(
        TOPOLOGY,
        {
            "hoodie.metadata.record.index.enable": "true",
            "hoodie.metadata.compact.max.delta.commits": "2",
            "hoodie.metadata.compact.async": "true",
        },
        table_type="MERGE_ON_READ",
        version="8",
    )
    with hr.HoodieStreamWriter(path, opts) as w:
        for i in range(4):
            rows = wl.rows_for(wl.keys[10 * i : 10 * i + 20])
            w.write(to_arrow(rows, True))
            w.checkpoint()
            model.upsert(rows)
            model.assert_hudi_rs_reads(path, f"checkpoint {i}")
    mdt = hr.HoodieTable.load(path).metadata_table.timeline
    actions = {(i.action, i.state.value) for i in mdt.instants}
    assert ("commit", "COMPLETED") in actions  # a compaction completed
    assert [i for i in mdt.instants if i.state.value != "COMPLETED"] == []
    assert maintenance.validate_metadata(path) == []
    model.assert_hudi_rs_reads(path, "closed")


def test_a_checkpoint_interrupted_after_its_flush_commits_once(ray_session, tmp_path, monkeypatch):
    """Ctrl-C while the driver waits for the writers' flush (they flushed): the next call
    recovers first (the instant is rolled back and its input replayed), so the rows commit
    once, with their files. It committed the same instant again with no files, which hid
    the flushed rows from readers listing through the metadata table."""
    from hoodie_ray.ray import stream

    path = tmp_path / "t"
    first, second, third = upsert_commits(5, 3)
    model = TableModel()
    armed = [True]
    real = stream.fan_out

    def interrupted_finish(tasks, method, *args, **kwargs):
        refs = real(tasks, method, *args, **kwargs)
        if method == "finish" and len(model.rows) and armed:
            armed.clear()
            ray_session.get(refs)  # the writers flushed, then the interrupt
            raise KeyboardInterrupt
        return refs

    monkeypatch.setattr(stream, "fan_out", interrupted_finish)
    w = hr.HoodieStreamWriter(str(path), model_options(TOPOLOGY, version="8"))
    try:
        w.write(to_arrow(first, True))
        assert w.checkpoint() is not None
        model.upsert(first)
        w.write(to_arrow(second, True))
        with pytest.raises(KeyboardInterrupt):
            w.checkpoint()
        assert not armed
        w.write(to_arrow(third, True))
    finally:
        w.close()  # second and third: one commit or two, each row once
    model.upsert(second)
    model.upsert(third)
    model.assert_hudi_rs_reads(path, "after the interrupt")
    assert hr.validate_metadata(str(path)) == []


def test_a_checkpoint_interrupted_after_its_commit_keeps_the_next_input(
    ray_session, tmp_path, monkeypatch
):
    """Ctrl-C once the commit landed, while the driver fetches its result: the next write
    finds the instant committed (its result recorded) before it keeps its own input. The
    recovery ran inside that write's step and dropped its rows with the committed input."""
    from hoodie_ray.job.coordinator import CommitResult
    from hoodie_ray.ray import stream

    path = tmp_path / "t"
    first, second, third = upsert_commits(5, 3)
    model = TableModel()
    armed: list[bool] = []

    class InterruptedGet:
        def __getattr__(self, name):
            return getattr(ray_session, name)

        def get(self, refs, *args, **kwargs):
            out = ray_session.get(refs, *args, **kwargs)
            if armed and isinstance(out, CommitResult):
                armed.clear()
                raise KeyboardInterrupt  # the commit is on disk; its result never arrives
            return out

    monkeypatch.setattr(stream, "ray", InterruptedGet())
    w = hr.HoodieStreamWriter(str(path), model_options(TOPOLOGY, version="8"))
    try:
        w.write(to_arrow(first, True))
        assert w.checkpoint() is not None
        w.write(to_arrow(second, True))
        armed.append(True)
        with pytest.raises(KeyboardInterrupt):
            w.checkpoint()
        assert not armed
        w.write(to_arrow(third, True))
        assert len(w.results) == 2  # the interrupted checkpoint's, found committed
    finally:
        w.close()
    for commit in (first, second, third):
        model.upsert(commit)
    model.assert_hudi_rs_reads(path, "after the interrupt")
    assert hr.validate_metadata(str(path)) == []
