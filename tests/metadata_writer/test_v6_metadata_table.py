"""Version 6 (Hudi 0.x) tables with a metadata table (hoodie_ray/metadata_writer/v6.py): the
``files`` partition kept in the 0.x layout by every action, checked by hudi-rs and by the
validator after every step, and the MDT's files checked against the 0.x layout."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.cli import main
from hoodie_ray.exceptions import HoodieUnsupportedError
from hoodie_ray.hfile import HFileReader
from hoodie_ray.job import maintenance
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.log_format import HFileDataBlock, LogReader
from hoodie_ray.metadata.layout import PARTITIONS_PROPERTY, is_init_instant
from hoodie_ray.metadata_writer.v6 import v6_metadata_schema
from hoodie_ray.table import HoodieTable
from tests.conftest import SHARED_TABLES, hudi_rs_read
from tests.write.model import (
    OPTIONS,
    TableModel,
    Workload,
    model_options,
    to_arrow,
)


def _check(path: str, model: TableModel, step: str) -> None:
    diffs = maintenance.validate_metadata(path)
    assert not diffs, f"{step}: " + "; ".join(map(str, diffs))
    model.assert_hudi_rs_reads(path, f"{step} differs")


def _mdt(path: str) -> Path:
    return Path(path) / ".hoodie" / "metadata"


def _check_layout(path: str) -> None:
    """The 0.x layout: a version 6 MDT with a layout-1 timeline (JSON commit metadata, no
    completion times), v6 log naming (by base instant, versioned) and HBase-dialect HFiles
    holding 0.15's record schema."""
    mdt = _mdt(path)
    props = (mdt / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.version=6" in props and "hoodie.timeline.layout.version=1" in props
    assert not (mdt / ".hoodie" / "timeline").exists()
    instants = [p.name for p in (mdt / ".hoodie").iterdir() if p.is_file()]
    done = [n for n in instants if n.endswith(".deltacommit")]
    assert done and all("_" not in n for n in instants)
    json.loads((mdt / ".hoodie" / sorted(done)[-1]).read_text())  # JSON, not Avro
    schema = json.dumps(v6_metadata_schema(), separators=(",", ":")).encode()
    files = mdt / "files"
    bases = sorted(files.glob("*.hfile"))
    assert bases
    for p in bases:
        data = p.read_bytes()
        assert data[-4:] == b"\x03\x00\x00\x03"  # HBase's trailer version
        r = HFileReader(data, str(p))
        assert json.loads(r.file_info[b"schema"]) == json.loads(schema)
        assert r.meta_block_names == ["bloomFilter"]
    base_instants = {p.name.rsplit("_", 1)[1].removesuffix(".hfile") for p in bases}
    for p in files.glob(".files-*.log.*"):
        assert p.name.split("_")[1].split(".log")[0] in base_instants  # named by the slice
        for b in LogReader(p.read_bytes(), str(p)):
            if isinstance(b, HFileDataBlock):
                assert bytes(b.content)[-4:] == b"\x03\x00\x00\x03"


def test_v6_table_keeps_a_0x_metadata_table_through_every_action(tmp_path: Path) -> None:
    """A version 6 MOR table with hoodie.metadata.enable=true: inserts, upserts, deletes,
    compactions, cleans, archival and the MDT's own compaction (``<instant>001``), clean
    (``<instant>002``) and archival: after each commit hudi-rs equals the model and the validator finds
    nothing."""
    path = str(tmp_path / "t")
    opts = model_options(
        {
            "hoodie.metadata.enable": "true",
            "hoodie.keep.min.commits": "3",
            "hoodie.keep.max.commits": "5",
            "compaction.delta_commits": "3",
            "clean.retain_commits": "2",
            "hoodie.metadata.compact.max.delta.commits": "4",
            "hoodie.metadata.cleaner.commits.retained": "2",
        },
        table_type="MERGE_ON_READ",
        version="6",
        small_files=True,
    )
    client = HoodieWriteClient(path, opts)
    model, wl = TableModel(), Workload(7)
    rows = wl.rows_for(wl.keys[:40])
    client.write(to_arrow(rows, True))
    model.upsert(rows)
    t = HoodieTable.load(path)
    assert t.table_version == 6 and t.config[PARTITIONS_PROPERTY] == "files"
    _check(path, model, "first commit")
    for i in range(9):
        kind, rows = wl.next_commit()
        model.write(path, opts, "delete" if kind == "delete" else "upsert", rows, client)
        _check(path, model, f"commit {i} ({kind})")
    maintenance.clean(path, {"clean.retain_commits": "1"})
    _check(path, model, "clean")
    _check_layout(path)
    t = HoodieTable.load(path)
    actions = {i.action for i in t.metadata_table.timeline.instants}
    assert {"deltacommit", "commit", "clean"} <= actions, actions
    compactions = [i.timestamp for i in t.metadata_table.timeline.instants if i.action == "commit"]
    assert all(len(ts) == 20 and ts.endswith("001") for ts in compactions)
    assert "commit" in {i.action for i in t.timeline}  # a data compaction went through the MDT
    assert t.has_archived_instants()  # the data table archives (.hoodie/archived)
    assert list((_mdt(path) / ".hoodie" / "archived").glob(".commits_.archive.*"))  # the MDT too
    assert len(t.metadata_table.timeline.instants) < 20


def test_init_metadata_on_v6_table_then_rollback(tmp_path: Path, monkeypatch, capsys) -> None:
    """``hoodie-ray metadata init`` / ``hr.init_metadata`` build the 0.x MDT from a listing,
    ``hoodie-ray metadata validate`` finds it in sync; a write that dies after its MDT
    delta commit is rolled back in both by the next writer (its rollback blocks listed)."""
    from hoodie_ray.timeline.timeline import ActiveTimeline

    path = str(tmp_path / "t")
    opts = {**OPTIONS, "table.type": "MERGE_ON_READ"}  # version 6, no MDT by default
    model, wl = TableModel(), Workload(3)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:20]))
    assert not _mdt(path).exists()
    assert main(["metadata", "init", path]) == 0
    assert "metadata table built: files" in capsys.readouterr().out
    assert main(["metadata", "validate", path]) == 0
    assert "metadata table in sync (files)" in capsys.readouterr().out
    assert hr.init_metadata(path) == ["files"]  # rebuilt
    _check(path, model, "after init")
    _check_layout(path)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[10:25]))  # enable unset: kept
    _check(path, model, "write after init")

    real = ActiveTimeline.complete

    def die_on_data_completion(self, instant, content, completion_time=None):  # type: ignore[no-untyped-def]
        if ".hoodie/metadata" not in self.storage.base_uri and instant.action == "deltacommit":
            raise KeyboardInterrupt("writer killed")
        return real(self, instant, content, completion_time)

    monkeypatch.setattr(ActiveTimeline, "complete", die_on_data_completion)
    more = wl.rows_for(wl.keys[20:30])
    with pytest.raises(KeyboardInterrupt):
        HoodieWriteClient(path, opts).write(to_arrow(more, True))
    monkeypatch.setattr(ActiveTimeline, "complete", real)
    # rolled back at once; the dead write's appended blocks and the rollback blocks after them
    # are listed by the rollback's MDT delta commit
    _check(path, model, "after the crash")
    assert any(i.action == "rollback" for i in HoodieTable.load(path).timeline)
    model.write(path, opts, "upsert", more)
    _check(path, model, "after the next write")
    _check_layout(path)
    t = HoodieTable.load(path)
    rollbacks = [i.timestamp for i in t.timeline if i.action == "rollback"]
    assert rollbacks
    mdt_instants = {i.timestamp for i in t.metadata_table.timeline.instants}
    assert set(rollbacks) <= mdt_instants  # each data rollback is an MDT delta commit
    data = {i.timestamp for i in t.timeline}
    deltas = {i.timestamp for i in t.metadata_table.timeline.instants if i.action == "deltacommit"}
    assert {d for d in deltas if not is_init_instant(d)} <= data  # the dead one is gone


def test_v6_partitions_not_kept_in_the_0x_layout_are_refused(tmp_path: Path) -> None:
    """A partition hoodie_ray does not keep in the 0.x layout (0.x has no partition_stats):
    refused, naming the partition and the command that drops it."""
    path = str(tmp_path / "t")
    partition = "partition_stats"
    opts = {**OPTIONS, "hoodie.metadata.enable": "true"}
    HoodieWriteClient(path, opts).write(to_arrow([Workload(1)._row("k1")], True))
    t = HoodieTable.load(path)
    cfg = t.table_config.with_props(**{PARTITIONS_PROPERTY: f"files,{partition}"})
    cfg.save(t.storage)
    with pytest.raises(HoodieUnsupportedError, match=f"metadata drop .* --partition {partition}"):
        HoodieWriteClient(path, opts).write(to_arrow([Workload(1)._row("k2")], True))
    assert (
        HoodieTable.load(path).active_timeline.completed()[-1:]
        == t.active_timeline.completed()[-1:]
    )


@pytest.mark.parametrize(
    "table_type",
    # suite time: merge-on-read covers the log files' statistics too
    ["MERGE_ON_READ", pytest.param("COPY_ON_WRITE", marks=pytest.mark.slow)],
)
def test_v6_column_stats_and_bloom_filters_as_0x_keeps_them(
    tmp_path: Path, table_type: str
) -> None:
    """``column_stats`` and ``bloom_filters`` on a version 6 table, as Hudi 0.14 / 0.15 keep
    them (docs/V6_COLUMN_STATS.md): built from the Parquet base files when enabled (the bloom
    filters stamped with the latest data instant), then kept by every commit (log files'
    statistics from the commit that writes them), a clean's tombstones for base files only,
    kept by the MDT's compaction; records in the 0.x schema (no ``isTightBound``), the five
    meta fields and every column indexed. The validator finds nothing after each step and a
    filtered read equals hudi-rs's."""
    from hoodie_ray.metadata.layout import BLOOM_FILTERS, COLUMN_STATS
    from hoodie_ray.metadata.records import is_deleted_record
    from hoodie_ray.metadata_writer.writer import metadata_writer

    path = str(tmp_path / "t")
    base = model_options(
        {
            "hoodie.metadata.enable": "true",
            "compaction.delta_commits": "3",
            "hoodie.metadata.compact.max.delta.commits": "3",
        },
        table_type=table_type,
        version="6",
        small_files=True,
    )
    client = HoodieWriteClient(path, base)
    model, wl = TableModel(), Workload(11)
    rows = wl.rows_for(wl.keys[:40])
    client.write(to_arrow(rows, True))
    model.upsert(rows)
    kind, rows = wl.next_commit()
    model.write(path, base, "delete" if kind == "delete" else "upsert", rows, client)
    opts = {
        **base,
        "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.metadata.index.bloom.filter.enable": "true",
    }
    client = HoodieWriteClient(path, opts)
    latest = HoodieTable.load(path).active_timeline.completed()[-1].timestamp
    for i in range(4):  # (suite time: was 6)
        kind, rows = wl.next_commit()
        model.write(path, opts, "delete" if kind == "delete" else "upsert", rows, client)
        if i == 0:
            t = HoodieTable.load(path)
            assert {COLUMN_STATS, BLOOM_FILTERS} <= set(t.metadata_partitions)
            blooms = t.metadata_table.records(BLOOM_FILTERS).values()
            stamps = {r["BloomFilterMetadata"]["timestamp"] for r in blooms}
            assert latest in stamps  # the initial build's: the latest data instant
        _check(path, model, f"commit {i} ({kind})")
    maintenance.clean(path, {"clean.retain_commits": "1"})
    _check(path, model, "clean")
    t = HoodieTable.load(path)
    stats = t.metadata_table.records(COLUMN_STATS)
    live = [r["ColumnStatsMetadata"] for r in stats.values() if not is_deleted_record(r)]
    assert live and all("isTightBound" not in cs for cs in live)
    columns = {cs["columnName"] for cs in live}
    meta = {"_hoodie_commit_seqno", "_hoodie_file_name", "_hoodie_commit_time"}
    assert meta <= columns and set(t.schema.names) - {"_hoodie_is_deleted"} <= columns | {
        f.name for f in t.schema if pa.types.is_nested(f.type)
    }
    dead = [r["ColumnStatsMetadata"] for r in stats.values() if is_deleted_record(r)]
    assert dead and all(cs["fileName"].endswith(".parquet") for cs in dead)
    # the MDT's compaction keeps them (0.x), and the validator still finds nothing
    assert metadata_writer(t).compact(force=True) is not None
    t = HoodieTable.load(path)
    after = t.metadata_table.records(COLUMN_STATS)
    assert sum(is_deleted_record(r) for r in after.values()) == len(dead)
    _check(path, model, "MDT compaction")
    key = sorted(model.rows)[3]
    got = hr.read(path, filters=[("key", "=", key)]).column("key").to_pylist()
    assert got == [key]
    # an upgrade rebuilds both in the new layout
    assert hr.upgrade(path, to_version=8) == 8
    t = HoodieTable.load(path)
    assert {COLUMN_STATS, BLOOM_FILTERS} <= set(t.metadata_partitions)
    _check(path, model, "upgraded to 8")


def test_v6_decimals_are_rescaled_to_the_wrapper_as_java_does() -> None:
    """0.x indexes every column, decimals of any scale: a value is rescaled to
    DecimalWrapper's decimal(30,15) (``tryUpcastDecimal``), and one that would need rounding
    is refused, as Java refuses it."""
    from decimal import Decimal

    from hoodie_ray.exceptions import HoodieInputError
    from hoodie_ray.metadata.column_stats import column_stats_records
    from hoodie_ray.metadata.records import encode_records

    t = pa.table({"d": pa.array([Decimal("1.5"), Decimal("-2.25")], pa.decimal128(38, 18))})
    recs = column_stats_records("", "f.log", table=t, table_version=6, columns=["d"])
    [(_, r)] = recs
    assert r["ColumnStatsMetadata"]["minValue"][1]["value"] == Decimal("-2.25")
    assert encode_records([r], 6)
    fine = pa.table({"d": pa.array([Decimal("1.0000000000000001")], pa.decimal128(38, 18))})
    with pytest.raises(HoodieInputError, match="decimal"):
        column_stats_records("", "f.log", table=fine, table_version=6, columns=["d"])


def test_java_v6_sample_gets_a_metadata_table(tmp_path: Path) -> None:
    """A Java-written v6 sample (no MDT in any sample: Spark wrote them with
    hoodie.metadata.enable=false) gets a 0.x MDT from ``init_metadata``, then is appended to."""
    zpath = SHARED_TABLES / "trips_mor_avro_v6_trips_8i1u.zip"
    if not zpath.is_file():
        pytest.skip(f"{zpath} is absent (a fresh clone has no ../shared)")
    with zipfile.ZipFile(zpath) as z:
        z.extractall(tmp_path)
    root = next(
        p.parent.parent
        for p in tmp_path.rglob(".hoodie/hoodie.properties")
        if ".hoodie/metadata" not in p.as_posix() and "__MACOSX" not in p.as_posix()
    )
    path = str(root)
    before = hudi_rs_read(path).to_pylist()
    assert hr.init_metadata(path) == ["files"]
    assert maintenance.validate_metadata(path) == []
    _check_layout(path)
    row = {k: v for k, v in before[0].items() if not k.startswith("_hoodie")}
    row["fare"] = 99.0
    row["ts"] = int(row["ts"]) + 1
    HoodieWriteClient(path, {"hoodie.datasource.write.precombine.field": "ts"}).write(
        pa.Table.from_pylist([row])
    )
    assert maintenance.validate_metadata(path) == []
    want = {r["uuid"]: {k: v for k, v in r.items() if not k.startswith("_hoodie")} for r in before}
    want[row["uuid"]] = row
    got = {
        r["uuid"]: {k: v for k, v in r.items() if not k.startswith("_hoodie")}
        for r in hudi_rs_read(path).to_pylist()
    }
    assert got == want


@pytest.mark.parametrize("to_version", [8, 9])
def test_upgrade_rebuilds_the_metadata_table_in_the_new_layout(
    tmp_path: Path, to_version: int
) -> None:
    """``hr.upgrade`` of a v6 table with a 0.x MDT: the MDT is rebuilt in the 1.x layout
    (hudi-rs then lists the table through it), and writes keep it."""
    path = str(tmp_path / "t")
    opts = {**OPTIONS, "table.type": "MERGE_ON_READ", "hoodie.metadata.enable": "true"}
    model, wl = TableModel(), Workload(5)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:20]))
    _check_layout(path)
    assert hr.upgrade(path, to_version=to_version) == to_version
    t = HoodieTable.load(path)
    assert t.table_version == to_version and t.config[PARTITIONS_PROPERTY] == "files"
    props = (_mdt(path) / ".hoodie" / "hoodie.properties").read_text()
    assert f"hoodie.table.version={to_version}" in props
    assert (_mdt(path) / ".hoodie" / "timeline").is_dir()
    _check(path, model, "after the upgrade")
    v8 = {k: v for k, v in opts.items() if k != "hoodie.write.table.version"}
    model.write(path, v8, "upsert", wl.rows_for(wl.keys[10:30]))
    _check(path, model, "write after the upgrade")


def test_no_mdt_compaction_while_an_older_data_instant_is_pending(tmp_path: Path) -> None:
    """0.x's rule: the MDT does not compact while a data instant older than its latest delta
    commit is pending; it does once that instant is gone."""
    from hoodie_ray.metadata_writer.writer import metadata_writer
    from hoodie_ray.timeline.instant import Action, Instant, State

    path = str(tmp_path / "t")
    opts = {**OPTIONS, "table.type": "MERGE_ON_READ", "hoodie.metadata.enable": "true"}
    model, wl = TableModel(), Workload(5)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:10]))
    t = HoodieTable.load(path)
    first = t.active_timeline.completed_commits()[0].timestamp
    pending = Instant(str(int(first) - 1), Action.DELTA_COMMIT, State.REQUESTED)
    t.active_timeline.create_requested(pending, b"")
    w = metadata_writer(t)
    assert w.compact() is None
    t.active_timeline.delete_instant(pending)
    ts = w.compact()
    assert ts is not None and ts == first + "001"
    _check(path, model, "after the MDT compaction")


def test_v6_init_instant_is_the_latest_data_instant_plus_010(tmp_path: Path) -> None:
    """0.14 / 0.15's ``initializeIfNeeded``: a table with no commit gets its MDT at
    ``SOLO_COMMIT_TIMESTAMP + 010``; one with history at its latest completed instant + 010
    (``createIndexInitTimestamp``), a rebuild too; each data commit after it is read back."""
    path = str(tmp_path / "t")
    opts = {**OPTIONS, "table.type": "MERGE_ON_READ", "hoodie.metadata.enable": "true"}
    model, wl = TableModel(), Workload(11)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:10]))
    t = HoodieTable.load(path)
    deltas = [i.timestamp for i in t.metadata_table.timeline.instants]
    assert deltas[0] == "00000000000000010"  # initialised before the first commit
    _check(path, model, "first commit")

    plain = {**OPTIONS, "table.type": "MERGE_ON_READ"}
    path2 = str(tmp_path / "t2")
    model2 = TableModel()
    model2.write(path2, plain, "upsert", wl.rows_for(wl.keys[:10]))
    model2.write(path2, plain, "upsert", wl.rows_for(wl.keys[5:15]))
    latest = HoodieTable.load(path2).active_timeline.completed()[-1].timestamp
    assert hr.init_metadata(path2) == ["files"]
    t2 = HoodieTable.load(path2)
    init = [i.timestamp for i in t2.metadata_table.timeline.instants]
    assert init == [latest + "010"]
    assert is_init_instant(init[0]) and len(init[0]) == 20
    files = sorted(p.name for p in (_mdt(path2) / "files").iterdir())
    assert f"files-0000-0_0-2-0_{latest}010.hfile" in files
    _check(path2, model2, "after init")
    model2.write(path2, plain, "upsert", wl.rows_for(wl.keys[12:20]))
    _check(path2, model2, "write after init")
    _check_layout(path2)
    model2.write(path2, plain, "delete", wl.rows_for(wl.keys[:3]))
    _check(path2, model2, "delete after init")


def test_is_init_instant_knows_both_layouts() -> None:
    assert is_init_instant("00000000000000000")  # 1.x files
    assert is_init_instant("00000000000000010")  # 0.x on an empty table
    assert is_init_instant("20240101010101123010") and is_init_instant("20240101010101123011")
    assert not is_init_instant("20240101010101123")  # a data instant
    assert not is_init_instant("20240101010101123001")  # an MDT compaction
    assert not is_init_instant("20240101010101123002")  # an MDT clean
    assert not is_init_instant("20240101010101123010001")  # a compaction after an init


def test_v6_schema_and_properties_are_0x_ones() -> None:
    """0.x's ``HoodieMetadataRecord``: 11 fields with the meta fields, column stats without
    ``isTightBound``, ``minValue`` / ``maxValue`` of 12 branches (no ``LocalDateWrapper``),
    record index without ``position``; ``hoodie.properties`` as ``initializeMetaClient`` sets
    it (no time zone)."""
    from hoodie_ray.metadata_writer.v6 import v6_metadata_table_props

    schema = v6_metadata_schema()
    fields = {f["name"]: f for f in schema["fields"]}
    assert len(fields) == 11 and "SecondaryIndexMetadata" not in fields
    cs = fields["ColumnStatsMetadata"]["type"][1]
    assert [f["name"] for f in cs["fields"]] == [
        "fileName",
        "columnName",
        "minValue",
        "maxValue",
        "valueCount",
        "nullCount",
        "totalSize",
        "totalUncompressedSize",
        "isDeleted",
    ]
    by_name = {f["name"]: f for f in cs["fields"]}
    assert len(by_name["minValue"]["type"]) == 12 and len(by_name["maxValue"]["type"]) == 12
    assert "LocalDateWrapper" not in json.dumps(schema)
    ri = fields["recordIndexMetadata"]["type"][1]
    assert [f["name"] for f in ri["fields"]] == [
        "partitionName",
        "fileIdHighBits",
        "fileIdLowBits",
        "fileIndex",
        "fileId",
        "instantTime",
        "fileIdEncoding",
    ]
    props = v6_metadata_table_props(
        {"hoodie.table.name": "trips", "hoodie.table.timeline.timezone": "UTC"}
    )
    assert set(props) == {
        "hoodie.table.name",
        "hoodie.table.type",
        "hoodie.table.version",
        "hoodie.timeline.layout.version",
        "hoodie.archivelog.folder",
        "hoodie.compaction.payload.class",
        "hoodie.table.base.file.format",
        "hoodie.table.recordkey.fields",
        "hoodie.populate.meta.fields",
        "hoodie.table.keygenerator.class",
        "hoodie.datasource.write.drop.partition.columns",
        "hoodie.table.checksum",
    }
    assert props["hoodie.table.name"] == "trips_metadata"
    assert props["hoodie.table.recordkey.fields"] == "key"


def _record_index_layout(path: str) -> None:
    """0.x's record index: file groups ``record-index-000i-0`` (at least 10), HBase-dialect
    HFiles in the 0.x schema (no ``position``), logs named by their slice."""
    from hoodie_ray.metadata.records import decode_value

    ri = _mdt(path) / "record_index"
    bases = sorted(ri.glob("*.hfile"))
    assert bases
    fids = {p.name.split("_")[0] for p in bases} | {
        p.name[1:].split("_")[0] for p in ri.glob(".record-index-*.log.*")
    }
    assert len(fids) >= 10 and all(f.startswith("record-index-") and f.endswith("-0") for f in fids)
    schema = json.dumps(v6_metadata_schema(), separators=(",", ":"))
    for p in bases:
        data = p.read_bytes()
        assert data[-4:] == b"\x03\x00\x00\x03"  # HBase's trailer version
        r = HFileReader(data, str(p))
        assert json.loads(r.file_info[b"schema"]) == json.loads(schema)
        for _, v in r.items():
            info = decode_value(v, schema)["recordIndexMetadata"]
            assert "position" not in info and info["fileIdEncoding"] in (0, 1)
    base_instants = {p.name.rsplit("_", 1)[1].removesuffix(".hfile") for p in bases}
    for p in ri.glob(".record-index-*.log.*"):
        assert p.name.split("_")[1].split(".log")[0] in base_instants


def test_v6_record_index_through_upserts_deletes_and_compactions(tmp_path: Path) -> None:
    """A version 6 MOR table keeping 0.x's record index (``record_index``) beside ``files``:
    built at the first write, kept by upserts, deletes, data and MDT compactions and cleans;
    after each commit hudi-rs equals the model and the validator (which checks every key's
    location) finds nothing."""
    path = str(tmp_path / "t")
    opts = model_options(
        {
            "hoodie.metadata.enable": "true",
            "hoodie.metadata.record.index.enable": "true",
            "compaction.delta_commits": "2",
            "hoodie.metadata.compact.max.delta.commits": "3",
            "hoodie.metadata.cleaner.commits.retained": "1",
        },
        table_type="MERGE_ON_READ",
        version="6",
        small_files=True,
    )
    client = HoodieWriteClient(path, opts)
    model, wl = TableModel(), Workload(23)
    rows = wl.rows_for(wl.keys[:40])
    client.write(to_arrow(rows, True))
    model.upsert(rows)
    t = HoodieTable.load(path)
    assert t.table_version == 6 and t.metadata_partitions == ["files", "record_index"]
    init = [i.timestamp for i in t.metadata_table.timeline.instants]
    assert init[:2] == ["00000000000000010", "00000000000000011"]  # files, then record_index
    _check(path, model, "first commit")
    for i in range(7):
        kind, rows = wl.next_commit()
        model.write(path, opts, "delete" if kind == "delete" else "upsert", rows, client)
        _check(path, model, f"commit {i} ({kind})")
    _check_layout(path)
    _record_index_layout(path)
    t = HoodieTable.load(path)
    compactions = [i.timestamp for i in t.metadata_table.timeline.instants if i.action == "commit"]
    assert compactions and all(ts.endswith("001") for ts in compactions)
    assert "commit" in {i.action for i in t.timeline}  # a data compaction
    assert maintenance.validate_metadata(path) == []
    # the validator did read the index: against no live key, every model key is reported
    from hoodie_ray.metadata_writer.validate import record_index_differences

    assert len(record_index_differences(t, [])) == len(model.rows)


def test_v6_sample_gets_a_record_index(tmp_path: Path, capsys) -> None:
    """A Java-written v6 sample: ``init_metadata`` builds the 0.x MDT at its latest instant +
    010, the first write with ``hoodie.metadata.record.index.enable=true`` adds the record
    index at the next free suffix of the same instant (011: ``generateUniqueCommitInstantTime``),
    then an upsert and a delete keep it; hudi-rs reads the expected rows."""
    zpath = SHARED_TABLES / "trips_mor_avro_v6_trips_8i3d.zip"
    if not zpath.is_file():
        pytest.skip(f"{zpath} is absent (a fresh clone has no ../shared)")
    with zipfile.ZipFile(zpath) as z:
        z.extractall(tmp_path)
    root = next(
        p.parent.parent
        for p in tmp_path.rglob(".hoodie/hoodie.properties")
        if ".hoodie/metadata" not in p.as_posix() and "__MACOSX" not in p.as_posix()
    )
    path = str(root)
    before = {r["uuid"]: r for r in hudi_rs_read(path).to_pylist()}
    latest = HoodieTable.load(path).active_timeline.completed()[-1].timestamp
    assert hr.init_metadata(path) == ["files"]
    opts = {
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.metadata.record.index.enable": "true",
        "index.global.enabled": "true",
    }
    want = {
        k: {c: v for c, v in r.items() if not c.startswith("_hoodie")} for k, r in before.items()
    }
    first = next(iter(want.values()))
    row = {**first, "fare": 99.0, "ts": int(first["ts"]) + 1}
    HoodieWriteClient(path, opts).write(pa.Table.from_pylist([row]))
    want[row["uuid"]] = row
    t = HoodieTable.load(path)
    assert t.metadata_partitions == ["files", "record_index"]
    inits = [
        i.timestamp for i in t.metadata_table.timeline.instants if is_init_instant(i.timestamp)
    ]
    assert inits == [latest + "010", latest + "011"]  # no data instant completed between them
    assert maintenance.validate_metadata(path) == []
    gone = sorted(want)[1]
    HoodieWriteClient(path, {**opts, "write.operation": "delete"}).write(
        pa.Table.from_pylist([want.pop(gone)])
    )
    assert main(["metadata", "validate", path]) == 0
    assert "metadata table in sync (files,record_index)" in capsys.readouterr().out
    got = {
        r["uuid"]: {c: v for c, v in r.items() if not c.startswith("_hoodie")}
        for r in hudi_rs_read(path).to_pylist()
    }
    assert got == want
    _record_index_layout(path)


def test_v6_record_index_file_groups_follow_0x_sizing(tmp_path: Path) -> None:
    """The record index's file groups follow 0.14's ``estimateFileGroupCount`` (10 up to
    ~112M keys, then one per ~11.2M, at most 10000)."""
    from hoodie_ray.metadata_writer.writer import metadata_writer

    path = str(tmp_path / "t")
    opts = {**OPTIONS, "hoodie.metadata.enable": "true"}
    HoodieWriteClient(path, opts).write(to_arrow([Workload(1)._row("k1")], True))
    w = metadata_writer(HoodieTable.load(path))
    per_group = (1 << 30) // 48
    assert [w.record_index_groups(n) for n in (0, 1000, 5 * per_group)] == [10, 10, 10]
    assert w.record_index_groups(30 * per_group) == 60  # 2.0 x the keys / 22369621
    assert w.record_index_groups(10**12) == 10_000


def test_v6_record_index_hfiles_column_wise_are_the_record_path_bytes(tmp_path: Path) -> None:
    """The record index's HFiles written column-wise (``_hfile_columns``: Arrow keys and
    values, no Python object per key) are byte for byte those of the per-record path
    (``_hfile``: a record dict per key), as base files (bloom filter, key range; several data
    blocks) and as log-block content, empty base files too."""
    from hoodie_ray.metadata import records as rec
    from hoodie_ray.metadata_writer.writer import metadata_writer

    path = str(tmp_path / "t")
    opts = {**OPTIONS, "hoodie.metadata.enable": "true"}
    HoodieWriteClient(path, opts).write(to_arrow([Workload(1)._row("k1")], True))
    w = metadata_writer(HoodieTable.load(path))
    fids = ["6e1b3a4c-52f0-4c1e-9a7e-0d2f3b4c5d6e-0", "a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d-0"]
    located = [
        ("p1", fids[0], 1_700_000_000_000, [f"key-{i:06d}-é" for i in range(0, 30_000, 2)]),
        ("p2", fids[1], 1_700_000_000_500, [f"key-{i:06d}" for i in range(1, 30_000, 2)]),
    ]
    cols = rec.RecordIndexColumns.of_locations(located, 6).sorted_unique()
    records = {
        k: rec.record_index_record(k, part, fid, ms)[1]
        for part, fid, ms, keys in located
        for k in keys
    }
    for base in (True, False):
        data = w._hfile_columns(cols, base=base)
        assert data == w._hfile(records, base=base)
        r = HFileReader(data)
        assert [k for k, _ in r.items()] == sorted(k.encode() for k in records)
        assert r.trailer.data_index_count >= 2
    empty = rec.RecordIndexColumns.empty()
    assert w._hfile_columns(empty, base=True) == w._hfile({}, base=True)
