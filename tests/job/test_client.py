"""HoodieWriteClient across calls: the key index kept between writes, and when it is not."""

from __future__ import annotations

import random

import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieError
from hoodie_ray.job.client import HoodieWriteClient
from tests.write.model import OPTIONS, TableModel, Workload, model_options, to_arrow


@pytest.mark.parametrize(
    ("table_type", "version"),
    [
        pytest.param("MERGE_ON_READ", "6", marks=pytest.mark.slow),  # suite time
        ("MERGE_ON_READ", "8"),
        pytest.param("COPY_ON_WRITE", "6", marks=pytest.mark.slow),  # suite time
    ],
)
def test_one_client_many_writes_with_other_writers_between(tmp_path, table_type, version):
    """One long-lived upsert client; now and then another client deletes or inserts. hudi-rs
    reads the model after every commit; the client reuses its index only when nobody else
    wrote since its last commit."""
    path = str(tmp_path / "t")
    opts = model_options(
        {"compaction.delta_commits": "3", "clean.retain_commits": "2"},
        table_type=table_type,
        version=version,
        small_files=True,
    )
    client = HoodieWriteClient(path, opts)
    model, wl, rnd = TableModel(), Workload(31), random.Random(5)
    reused = rebuilt = 0
    for i in range(10):  # (suite time: was 18)
        kind, rows = wl.next_commit()
        if i == 0:
            kind, rows = "upsert", wl.rows_for(wl.keys[:30])
        other = kind in ("delete", "insert") and rnd.random() < 0.7
        if not other:
            kind = "upsert"
            rows = [r if "p" in r else wl._row(r["key"]) for r in rows]
        before = client._assigner if kind == "upsert" else None
        model.write(path, opts, kind, rows, client)  # an upsert through ``client``
        if before is not None:
            if client._assigner is before:
                reused += 1
            else:
                rebuilt += 1
        model.assert_hudi_rs_reads(path, f"commit {i} ({kind}) differs")
    assert reused >= 3 and rebuilt >= 1, (reused, rebuilt)


def test_a_failed_write_drops_the_kept_index(tmp_path, monkeypatch):
    """A write that fails after its rows were assigned (the index already holds its new keys)
    drops the kept index; bad input fails before assignment and leaves it as it was. Either
    way the next write is right."""
    from hoodie_ray.write.stream_writer import StreamWriteFunction

    path = str(tmp_path / "t")
    client = HoodieWriteClient(path, OPTIONS)
    model, wl = TableModel(), Workload(3)
    first = wl.rows_for(wl.keys[:20])
    client.write(to_arrow(first, True))
    model.upsert(first)
    kept = client._assigner
    with pytest.raises(HoodieError):
        client.write(to_arrow(first, True).drop_columns(["key"]))
    assert client._assigner is kept

    class Boom(Exception):
        pass

    def fail(self):
        raise Boom("disk full")

    with monkeypatch.context() as m:
        m.setattr(StreamWriteFunction, "flush_all", fail)
        with pytest.raises(Boom):
            client.write(to_arrow([dict(wl._row("k001"), key="brand-new")], True))
    assert client._assigner is None
    again = wl.rows_for(wl.keys[10:40])
    client.write(to_arrow(again, True))
    model.upsert(again)
    model.assert_hudi_rs_reads(path)


def test_bucket_count_of_a_bucket_index_table_cannot_change(tmp_path):
    """The count is recorded when the table is created; a larger count (which the file ids
    alone cannot reveal) is refused before anything is written; the table reads on."""
    from hoodie_ray.exceptions import HoodieOptionError

    path = str(tmp_path / "t")
    opts = model_options({"index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"})
    model, wl = TableModel(), Workload(9)
    # one partition: the bucket index is per partition (a key never moves)
    rows = [dict(wl._row(k), p="a") for k in wl.keys[:40]]
    model.write(path, opts, "upsert", rows)
    props = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.bucket.index.num.buckets=2\n" in props
    before = sorted(p.name for p in (tmp_path / "t").rglob("*"))
    more = [dict(wl._row(k), p="a") for k in wl.keys[:40]]
    for n in ("4", "1"):
        with pytest.raises(HoodieOptionError, match="num.buckets"):
            HoodieWriteClient(path, {**opts, "hoodie.bucket.index.num.buckets": n}).write(
                to_arrow(more, True)
            )
    assert sorted(p.name for p in (tmp_path / "t").rglob("*")) == before
    with pytest.raises(HoodieOptionError, match="index type"):
        HoodieWriteClient(path, model_options({"index.type": "FLINK_STATE"})).write(
            to_arrow(more, True)
        )
    assert sorted(p.name for p in (tmp_path / "t").rglob("*")) == before
    model.write(path, opts, "upsert", more)
    # Options that leave the index out write the table as the bucket table it is: new keys
    # land in their buckets, so a later bucket-index writer finds them (no duplicates).
    fresh = [dict(wl._row(k), p="a", key=f"n{i}") for i, k in enumerate(wl.keys[:20])]
    model.write(path, OPTIONS, "upsert", fresh)
    again = [dict(r, ts=r["ts"] + 1000, v=1) for r in fresh]
    model.write(path, opts, "upsert", again)
    model.assert_hudi_rs_reads(path)
    assert all(
        p.name.lstrip(".")[:8] in ("00000000", "00000001")
        for p in (tmp_path / "t" / "a").iterdir()
        if not p.name.startswith(".hoodie_partition")
    )


def test_index_bootstrap_disabled_starts_with_an_empty_index(tmp_path):
    """index.bootstrap.enabled=false (Flink without restored state): the table's keys are not
    loaded; keys this client writes are known from then on. New keys read back right."""
    path = str(tmp_path / "t")
    model, wl = TableModel(), Workload(4)
    first = wl.rows_for(wl.keys[:30])
    model.write(path, OPTIONS, "upsert", first)
    client = HoodieWriteClient(path, model_options({"index.bootstrap.enabled": "false"}))
    fresh = [dict(wl._row(k), key=f"z{i}") for i, k in enumerate(wl.keys[:5])]
    client.write(to_arrow(fresh, True))
    model.upsert(fresh)
    assert client._assigner is not None and len(client._assigner.index) == 5
    model.assert_hudi_rs_reads(path)
    default = HoodieWriteClient(path, OPTIONS)
    default.write(to_arrow(fresh[:1], True))
    assert default._assigner is not None and len(default._assigner.index) == 35


@pytest.mark.parametrize("version", ["6", "8"])
@pytest.mark.parametrize("automatic", [True, False])
def test_writes_clean_after_every_commit(tmp_path, version, automatic):
    """As Hudi's ``hoodie.clean.automatic``: each commit is followed by a clean that keeps the
    file slices of the last ``clean.retain_commits`` commits (here a copy-on-write table, where
    every commit writes new slices and no compaction ever runs)."""
    from hoodie_ray.table import HoodieTable

    path = str(tmp_path / "t")
    opts = model_options(
        {"clean.retain_commits": "2", "hoodie.clean.automatic": str(automatic).lower()},
        table_type="COPY_ON_WRITE",
        version=version,
    )
    model, wl = TableModel(), Workload(3, keys=8, partitions=("a",))
    cleans = []
    for i in range(4):
        rows = wl.rows_for(wl.keys)
        res = HoodieWriteClient(path, opts).write(to_arrow(rows, True))
        model.upsert(rows)
        model.assert_hudi_rs_reads(path, f"hudi-rs after commit {i}")
        cleans.append(res.services.cleaned)
        groups = HoodieTable.load(path).view().all_file_groups()
        slices = max(len(g.all_slices()) for g in groups)
        assert slices == (min(i + 1, 2) if automatic else i + 1), f"slices after commit {i}"
    assert (cleans[2] is not None and cleans[3] is not None) == automatic
    assert cleans[:2] == [None, None]


@pytest.mark.parametrize("gone", ["rolled-back-log", "cleaned-slice", "replaced-group"])
def test_a_key_index_read_while_its_files_go_lists_them_again(tmp_path, gone):
    """The assigner lists the slices, then reads their keys (outside the lock under OCC):
    a file listed may go meanwhile. A log of a write in flight that is rolled back, or a
    whole slice a clean removes after a compaction: the same file groups are listed again,
    and the index holds every live key. A group another writer replaced meanwhile is a
    conflict (its keys now live in groups this task was not given)."""
    import shutil

    from hoodie_ray.config.options import resolve_options
    from hoodie_ray.job.client import build_assigner
    from hoodie_ray.job.coordinator import Coordinator

    path = tmp_path / "t"
    opts = model_options(
        {
            "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
            "compaction.schedule.enabled": "false",
            "clean.retain_commits": "1",
        },
        version="6",
    )
    model, wl = TableModel(), Workload(seed=9)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:40]))
    model.write(path, opts, "upsert", wl.upserts(10))
    coord = Coordinator(str(path), resolve_options(opts), None)
    coord.open(None)
    try:
        slices = coord.latest_slices()
        profile, config = coord.profile(slices), coord.assigner_config(0, 1)
        table = coord.table
        assert table is not None
        if gone != "cleaned-slice":
            # a write in flight appended a log, listed with the slice; then rolled back
            s = next(s for s in slices if s.log_files)
            src = path / s.partition_path / s.log_files[-1]
            extra = src.with_name(src.name.replace(".log.1_", ".log.9_"))
            shutil.copyfile(src, extra)
            slices = table.refresh().view().latest_file_slices()
            assert any(extra.name in x.log_files for x in slices)
            if gone == "replaced-group":  # and another writer overwrote that partition
                rows = [r for r in wl.rows_for(wl.keys[:40]) if r["p"] == s.partition_path]
                overwrite = {**opts, "write.operation": "insert_overwrite"}
                HoodieWriteClient(str(path), overwrite).write(to_arrow(rows[:2], True))
            extra.unlink()
            if gone == "replaced-group":
                with pytest.raises(hr.HoodieWriteConflictError, match="was replaced"):
                    build_assigner(table, config, profile, slices)
                return
        else:
            model.write(path, opts, "upsert", wl.upserts(10))
            hr.compact(str(path), opts)
            model.write(path, opts, "upsert", wl.upserts(10))
            hr.clean(str(path), opts)
            assert not all((path / s.partition_path / s.base_file).exists() for s in slices)
        assigner = build_assigner(table, config, profile, slices)
        assert len(assigner.index) == len(model.as_table())
    finally:
        coord.close()
