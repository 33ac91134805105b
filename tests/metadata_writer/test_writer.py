"""The metadata table kept by every write action, checked by hudi-rs (which lists version 8+
tables through its ``files`` partition) and by the validator after every step."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieUnsupportedError
from hoodie_ray.job import maintenance
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.metadata.layout import METADATA_TABLE_PATH, PARTITIONS_PROPERTY
from hoodie_ray.table import HoodieTable
from tests.write.model import OPTIONS, SMALL_FILES, TableModel, Workload, model_options, to_arrow


def _check(path: str, model: TableModel, step: str) -> None:
    diffs = maintenance.validate_metadata(path)
    assert not diffs, f"{step}: " + "; ".join(map(str, diffs))
    model.assert_hudi_rs_reads(path, f"{step} differs")


def _random_commits(
    path: str, opts: dict, client: HoodieWriteClient, model: TableModel, wl: Workload, n: int
) -> list[dict]:
    """``n`` workload commits, each checked: deletes by key, the others upserted through
    ``client``. Returns the rows of the last one."""
    rows: list[dict] = []
    for i in range(n):
        kind, rows = wl.next_commit()
        model.write(path, opts, "delete" if kind == "delete" else "upsert", rows, client)
        _check(path, model, f"commit {i} ({kind})")
    return rows


def _listing_through_mdt(path: str) -> bool:
    t = HoodieTable.load(path)
    return t.uses_metadata_table and t.view().listing is not None


@pytest.mark.parametrize(
    ("table_type", "version"),
    [
        ("MERGE_ON_READ", "8"),
        ("MERGE_ON_READ", "9"),
        pytest.param("COPY_ON_WRITE", "8", marks=pytest.mark.slow),  # suite time
        ("COPY_ON_WRITE", "9"),
    ],
)
def test_every_action_keeps_the_metadata_table(
    tmp_path: Path, table_type: str, version: str
) -> None:
    """Inserts, upserts, deletes, compactions, cleans, archival, and the metadata table's own
    compaction, clean and archival: after each commit hudi-rs equals the model and the
    validator finds nothing."""
    path = str(tmp_path / "t")
    opts = model_options(
        {
            "hoodie.keep.min.commits": "3",
            "hoodie.keep.max.commits": "5",
            "compaction.delta_commits": "3",
            "clean.retain_commits": "2",
            "hoodie.metadata.compact.max.delta.commits": "4",
            "hoodie.metadata.cleaner.commits.retained": "2",
        },
        table_type=table_type,
        version=version,
        small_files=True,
    )
    client = HoodieWriteClient(path, opts)
    model, wl = TableModel(), Workload(7)
    rows = wl.rows_for(wl.keys[:40])
    client.write(to_arrow(rows, True))
    model.upsert(rows)
    assert _listing_through_mdt(path)
    assert HoodieTable.load(path).config[PARTITIONS_PROPERTY] == "files"
    _check(path, model, "first commit")
    _random_commits(path, opts, client, model, wl, 6)  # (suite time: was 12)
    maintenance.clean(path, {"clean.retain_commits": "1"})  # beyond what writers keep (30)
    _check(path, model, "clean")
    t = HoodieTable.load(path)
    mdt = t.metadata_table
    actions = {i.action for i in mdt.timeline.instants}
    assert {"deltacommit", "commit", "clean"} <= actions, actions
    data_actions = {i.action for i in t.timeline}
    assert "clean" in data_actions
    assert t.has_archived_instants()
    assert (tmp_path / "t" / ".hoodie" / "metadata" / ".hoodie" / "timeline" / "history").is_dir()
    assert len(mdt.timeline.instants) < 20  # the MDT archives its own timeline too
    if table_type == "MERGE_ON_READ":
        assert "commit" in data_actions  # a data compaction went through the MDT too


def test_failed_write_is_rolled_back_in_the_metadata_table(tmp_path: Path, monkeypatch) -> None:
    """A writer that dies after its MDT delta commit completed and before its data instant
    did: readers ignore that delta commit, the next writer rolls both back."""
    from hoodie_ray.timeline.timeline import ActiveTimeline

    path = str(tmp_path / "t")
    opts = {**OPTIONS, "table.type": "MERGE_ON_READ", "hoodie.write.table.version": "8"}
    model, wl = TableModel(), Workload(3)
    rows = wl.rows_for(wl.keys[:20])
    model.write(path, opts, "upsert", rows)

    real = ActiveTimeline.complete

    def die_on_data_completion(self, instant, content, completion_time=None):  # type: ignore[no-untyped-def]
        if METADATA_TABLE_PATH not in self.storage.base_uri and instant.action == "deltacommit":
            raise KeyboardInterrupt("writer killed")
        return real(self, instant, content, completion_time)

    monkeypatch.setattr(ActiveTimeline, "complete", die_on_data_completion)
    more = wl.rows_for(wl.keys[20:30])
    with pytest.raises(KeyboardInterrupt):
        HoodieWriteClient(path, opts).write(to_arrow(more, True))
    monkeypatch.setattr(ActiveTimeline, "complete", real)
    mdt = HoodieTable.load(path).metadata_table
    assert len(mdt.timeline.completed()) == 3  # init, first commit, the orphan
    _check(path, model, "after the crash")  # hudi-rs and the validator skip the orphan
    model.write(path, opts, "upsert", more)
    _check(path, model, "after the next write")
    t = HoodieTable.load(path)
    rolled = [i for i in t.metadata_table.timeline.instants if i.action == "deltacommit"]
    assert len(rolled) == 4  # init, first, the rollback's, the retried write


def test_enable_false_drops_and_init_rebuilds(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    opts = {**OPTIONS, "table.type": "MERGE_ON_READ", "hoodie.write.table.version": "8"}
    model, wl = TableModel(), Workload(5)
    rows = wl.rows_for(wl.keys[:20])
    model.write(path, {**opts, "hoodie.metadata.enable": "false"}, "upsert", rows)
    assert not (tmp_path / "t" / ".hoodie" / "metadata").exists()
    assert maintenance.init_metadata(path) == ["files"]
    _check(path, model, "after init")
    more = wl.rows_for(wl.keys[10:30])
    model.write(path, opts, "upsert", more)
    _check(path, model, "write after init")
    HoodieWriteClient(path, {**opts, "hoodie.metadata.enable": "false"}).write(
        to_arrow(more[:3], True)
    )
    model.upsert(more[:3])
    assert not (tmp_path / "t" / ".hoodie" / "metadata").exists()
    assert PARTITIONS_PROPERTY not in HoodieTable.load(path).config
    model.assert_hudi_rs_reads(path)


def test_a_metadata_table_made_again_builds_the_secondary_indexes_defined(
    tmp_path: Path,
) -> None:
    """A write with the metadata table off drops it; the secondary index definitions stay in
    ``index.json``. The next write with it on builds those indexes again from the files (it
    left them out: lookups scanned, the definitions no longer matched the table)."""
    path = str(tmp_path / "t")
    opts = model_options(version="8")
    model, wl = TableModel(), Workload(7)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:20]))
    hr.create_index(path, "v_idx", "v")
    model.write(path, {**opts, "hoodie.metadata.enable": "false"}, "upsert", wl.upserts(5))
    assert "secondary_index_v_idx" not in HoodieTable.load(path).metadata_partitions
    model.write(path, opts, "upsert", wl.upserts(5))
    assert "secondary_index_v_idx" in HoodieTable.load(path).metadata_partitions
    _check(path, model, "index built again")
    v = next(r["v"] for r in model.rows.values() if r["v"] is not None)
    want = sorted(k for k, r in model.rows.items() if r["v"] == v)
    assert sorted(hr.read(path, filters=[("v", "=", v)]).column("key").to_pylist()) == want


def test_validator_names_each_difference(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    opts = {**OPTIONS, "hoodie.write.table.version": "8"}
    wl = Workload(9)
    HoodieWriteClient(path, opts).write(to_arrow(wl.rows_for(wl.keys[:10]), True))
    assert hr.validate_metadata(path) == []
    t = HoodieTable.load(path)
    part = t.latest_file_slices()[0].partition_path
    fs = t.latest_file_slices()[0]
    victim = fs.base_file or fs.log_files[0]
    (tmp_path / "t" / part / victim).unlink()
    diffs = [str(d) for d in hr.validate_metadata(path)]
    assert diffs == [f"files: {part}/{victim}: listed file does not exist"]


def test_version_6_has_no_metadata_table_by_default(tmp_path: Path) -> None:
    """Version 6 keeps one only when asked (tests/metadata_writer/test_v6_metadata_table.py)."""
    path = str(tmp_path / "t")
    rows = to_arrow([Workload(1)._row("k1")], True)
    HoodieWriteClient(path, OPTIONS).write(rows)  # version 6: no metadata table by default
    assert not (tmp_path / "t" / ".hoodie" / "metadata").exists()


def test_a_random_walk_matches_with_the_metadata_table(tmp_path: Path) -> None:
    """Random upserts and deletes with frequent MDT compactions (every 2 delta commits)."""
    path = str(tmp_path / "t")
    opts = model_options(
        {
            "hoodie.metadata.compact.max.delta.commits": "2",
            "hoodie.metadata.cleaner.commits.retained": "1",
        },
        version="8",
        small_files=True,
    )
    model, wl, rnd = TableModel(), Workload(11), random.Random(2)
    client = HoodieWriteClient(path, opts)
    for _ in range(8):
        rows = wl.rows_for(rnd.sample(wl.keys, 15))
        client.write(to_arrow(rows, True))
        model.upsert(rows)
    _check(path, model, "random walk")


def test_record_index_is_kept_and_loads_the_key_index(tmp_path: Path, monkeypatch) -> None:
    """The record index is built for a table that had none, kept by upserts and deletes
    (checked key by key against the data files), and a new writer loads its key index from it
    without reading a data file."""
    import hoodie_ray.reader.index_bootstrap as ib

    path = str(tmp_path / "t")
    opts = {**OPTIONS, "hoodie.write.table.version": "8", **SMALL_FILES}
    model, wl = TableModel(), Workload(13)
    rows = wl.rows_for(wl.keys[:30])
    model.write(path, opts, "upsert", rows)
    ri = {**opts, "hoodie.metadata.record.index.enable": "true"}
    client = HoodieWriteClient(path, ri)
    rows = _random_commits(path, ri, client, model, wl, 6)
    assert "record_index" in HoodieTable.load(path).metadata_partitions
    table = HoodieTable.load(path)
    slices = table.latest_file_slices()
    from_files = {
        (p, f): sorted(k.to_pylist())
        for p, f, k in ib.bootstrap_entries(table, slices, use_record_index=False)
    }

    def no_file_reads(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("the key index was loaded from data files")

    monkeypatch.setattr(ib, "iter_file_slice", no_file_reads)
    from_index = {(p, f): sorted(k.to_pylist()) for p, f, k in ib.bootstrap_entries(table, slices)}
    assert from_index == from_files
    monkeypatch.undo()
    HoodieWriteClient(path, {**ri, "hoodie.metadata.record.index.enable": "false"}).write(
        to_arrow(rows[:2], True)
    )
    assert "record_index" not in HoodieTable.load(path).metadata_partitions
    model.upsert(rows[:2])
    _check(path, model, "record index dropped")


def test_a_restarted_writer_loads_its_key_index_from_the_record_index(
    tmp_path: Path, monkeypatch
) -> None:
    """Commit-time ordering (no ordering field): a new writer's key index comes from the record
    index alone, and upserts after the restart stay updates (no duplicate keys)."""
    import hoodie_ray.reader.index_bootstrap as ib

    path = str(tmp_path / "t")
    opts = {k: v for k, v in OPTIONS.items() if k != "precombine.field"}
    opts.update({"hoodie.write.table.version": "8", "hoodie.metadata.record.index.enable": "true"})
    wl = Workload(17)
    model = TableModel()
    rows = [{**wl._row(k), "ts": None} for k in wl.keys[:30]]
    model.write(path, opts, "upsert", rows)

    def no_file_reads(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("the key index was loaded from data files")

    monkeypatch.setattr(ib, "iter_file_slice", no_file_reads)
    again = [
        {**wl._row(k), "ts": None, "p": r["p"]}
        for k, r in zip(wl.keys[10:30], rows[10:30], strict=True)
    ]
    model.write(path, opts, "upsert", again)
    monkeypatch.undo()
    _check(path, model, "after the restart")


def test_cli_metadata_commands(tmp_path: Path, capsys) -> None:
    import json

    from hoodie_ray.cli import main

    path = str(tmp_path / "t")
    opts = {**OPTIONS, "hoodie.write.table.version": "8", "hoodie.metadata.enable": "false"}
    HoodieWriteClient(path, opts).write(to_arrow([Workload(2)._row("k1")], True))
    capsys.readouterr()
    assert main(["metadata", "init", path]) == 0
    assert "metadata table built: files" in capsys.readouterr().out
    assert main(["metadata", "validate", path, "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["partitions"] == ["files"] and doc["differences"] == []
    victim = next((tmp_path / "t").glob("*/*.parquet"))
    victim.unlink()
    assert main(["metadata", "validate", path]) == 1
    assert "listed file does not exist" in capsys.readouterr().out
    assert main(["metadata", "drop", path]) == 0
    assert not (tmp_path / "t" / ".hoodie" / "metadata").exists()


@pytest.mark.parametrize("where", ["mdt_delta_commit", "mdt_compaction", "mdt_init"])
def test_a_crash_at_each_metadata_step_heals(tmp_path: Path, monkeypatch, where: str) -> None:
    """A writer killed while writing the metadata table (mid delta commit, mid compaction,
    mid initialisation): the next writer rolls back or rebuilds what it left, and every reader
    sees the committed data."""
    import hoodie_ray.metadata_writer.writer as mw

    path = str(tmp_path / "t")
    opts = model_options({"hoodie.metadata.compact.max.delta.commits": "3"}, version="8")
    model, wl = TableModel(), Workload(23)
    first = wl.rows_for(wl.keys[:20])
    init_opts = {**opts, "hoodie.metadata.enable": "false"} if where == "mdt_init" else opts
    model.write(path, init_opts, "upsert", first)

    real_complete = mw.MetadataWriter._complete
    real_compact = mw.MetadataWriter.compact

    def killed(*a, **k):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt("writer killed")

    if where == "mdt_compaction":

        def compact_then_die(self, force=False, **kw):  # type: ignore[no-untyped-def]
            monkeypatch.setattr(mw, "write_hfile", killed)
            return real_compact(self, force, **kw)

        monkeypatch.setattr(mw.MetadataWriter, "compact", compact_then_die)
    else:
        monkeypatch.setattr(mw.MetadataWriter, "_complete", killed)
    more = wl.rows_for(wl.keys[10:30])
    with pytest.raises(KeyboardInterrupt):
        HoodieWriteClient(path, opts).write(to_arrow(more, True))
    monkeypatch.setattr(mw.MetadataWriter, "_complete", real_complete)
    monkeypatch.setattr(mw.MetadataWriter, "compact", real_compact)
    monkeypatch.undo()
    if where == "mdt_compaction":
        model.upsert(more)  # the data instant had completed
    again = wl.rows_for(wl.keys[25:35])
    model.write(path, opts, "upsert", again)
    _check(path, model, f"after a crash in {where}")
    assert not HoodieTable.load(path).metadata_table.timeline.pending()


def test_column_and_partition_stats_are_built_kept_and_prune_reads(tmp_path: Path) -> None:
    """Turned on for a table that has a metadata table: both indexes are built from the files,
    kept by upserts, deletes and compactions (checked against the files each time), filtered
    reads skip slices, and turning them off drops them."""
    path = str(tmp_path / "t")
    opts = model_options({"compaction.delta_commits": "2"}, version="9", small_files=True)
    model, wl = TableModel(), Workload(29)
    rows = wl.rows_for(wl.keys[:30])
    model.write(path, opts, "upsert", rows)
    stats = {**opts, "hoodie.metadata.index.partition.stats.enable": "true"}
    client = HoodieWriteClient(path, stats)
    _random_commits(path, stats, client, model, wl, 5)
    t = HoodieTable.load(path)
    assert {"column_stats", "partition_stats"} <= set(t.metadata_partitions)
    top = max(r["v"] for r in model.rows.values() if r["v"] is not None)
    got = hr.read(path, filters=[("v", ">", top)])
    assert got.num_rows == 0
    last = [wl._row("k001")]
    # column statistics alone turned off: the partition statistics, kept from them, go too
    # (left, they went stale: the validator found every record unexpected, then old ranges)
    model.write(
        path, {**opts, "hoodie.metadata.index.column.stats.enable": "false"}, "upsert", last
    )
    assert not {"column_stats", "partition_stats"} & set(HoodieTable.load(path).metadata_partitions)
    _check(path, model, "statistics dropped")
    model.write(path, stats, "upsert", [wl._row("k002")])
    assert {"column_stats", "partition_stats"} <= set(HoodieTable.load(path).metadata_partitions)
    _check(path, model, "statistics built again")


def test_restart_with_event_time_moves_reads_only_the_groups_it_needs(
    tmp_path: Path, monkeypatch
) -> None:
    """Global index, event time: a restarted writer takes its keys from the record index and
    reads ordering values only from the file groups of the keys that arrive (as Java's record
    index reads a moved key's old location); older moves still lose."""
    import hoodie_ray.reader.index_bootstrap as ib

    path = str(tmp_path / "t")
    opts = model_options(
        {"hoodie.metadata.record.index.enable": "true"}, version="8", small_files=True
    )
    model, wl = TableModel(), Workload(31, keys=150)
    rows = wl.rows_for(wl.keys)
    model.write(path, opts, "upsert", rows)
    slices = HoodieTable.load(path).latest_file_slices()
    assert len(slices) >= 4
    stored = {k: model.rows[k] for k in wl.keys[:4]}
    other = {"a": "b", "b": "c", "c": "a"}
    batch = [
        {**stored[wl.keys[0]], "p": other[stored[wl.keys[0]]["p"]], "ts": -1},  # older: loses
        {**stored[wl.keys[1]], "p": other[stored[wl.keys[1]]["p"]], "ts": 10**6},  # moves
        {**stored[wl.keys[2]], "v": 7, "ts": 10**6},  # plain update
    ]
    reads = []
    real = ib.iter_file_slice

    def counting(ctx, spec, storage):  # type: ignore[no-untyped-def]
        reads.append(spec.file_id)
        return real(ctx, spec, storage)

    monkeypatch.setattr(ib, "iter_file_slice", counting)
    HoodieWriteClient(path, opts).write(to_arrow(batch, True))
    monkeypatch.undo()
    model.upsert(batch)
    _check(path, model, "moves after a restart")
    assert 1 <= len(set(reads)) <= 3 < len(slices), reads  # the three keys' groups at most


def test_an_added_column_gets_column_statistics(tmp_path: Path) -> None:
    """A commit that adds a column (and widens another) indexes the new column in the files
    it writes; the validator, which recomputes from the files, agrees."""
    path = str(tmp_path / "t")
    opts = {
        "hoodie.table.name": "e",
        "hoodie.datasource.write.recordkey.field": "k",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "hoodie.write.table.version": "9",
        "hoodie.metadata.index.partition.stats.enable": "true",
    }
    first = pa.table(
        {"k": ["a", "b"], "p": ["x", "y"], "ts": [1, 1], "v": pa.array([1, 2], pa.int32())}
    )
    HoodieWriteClient(path, opts).write(first)
    more = pa.table(
        {"k": ["a", "c"], "p": ["x", "y"], "ts": [2, 2], "v": [3, 4], "extra": ["e1", "e2"]}
    )
    HoodieWriteClient(path, opts).write(more)
    assert maintenance.validate_metadata(path) == []
    got = hr.read(path, filters=[("extra", "=", "e2")]).column("k").to_pylist()
    assert got == ["c"]


def test_record_index_survives_compactions_that_skip_it_and_deleted_keys_coming_back(
    tmp_path: Path,
) -> None:
    """Update-only commits write no record-index log, so MDT compactions skip its file groups;
    the MDT clean must keep their only slice. A key deleted and written again is indexed
    again. A non-global index cannot keep a record index."""
    path = str(tmp_path / "t")
    opts = model_options(
        {
            "hoodie.metadata.record.index.enable": "true",
            "hoodie.metadata.compact.max.delta.commits": "2",
            "hoodie.metadata.cleaner.commits.retained": "1",
        },
        table_type="MERGE_ON_READ",
        version="8",
    )
    model, wl = TableModel(), Workload(37)
    rows = wl.rows_for(wl.keys[:20])
    client = HoodieWriteClient(path, opts)
    client.write(to_arrow(rows, True))
    model.upsert(rows)
    for _ in range(6):  # updates in place only
        upd = [{**model.rows[k], "ts": model.rows[k]["ts"] + 1000, "v": 1} for k in wl.keys[:5]]
        client.write(to_arrow(upd, True))
        model.upsert(upd)
    _check(path, model, "update-only commits")
    assert "clean" in {i.action for i in HoodieTable.load(path).metadata_table.timeline.instants}
    key = wl.keys[7]
    gone = [{**model.rows[key], "ts": model.rows[key]["ts"] + 1, "_hoodie_is_deleted": True}]
    client.write(to_arrow(gone, True))
    model.upsert(gone)
    _check(path, model, "delete")
    back = [{**wl._row(key), "ts": gone[0]["ts"] + 1}]
    client.write(to_arrow(back, True))
    model.upsert(back)
    _check(path, model, "the deleted key written again")
    with pytest.raises(HoodieUnsupportedError, match="record index needs the global index"):
        HoodieWriteClient(path, {**opts, "index.global.enabled": "false"}).write(
            to_arrow(back, True)
        )
