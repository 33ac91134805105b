"""Table version 9 (Hudi 1.1) writes: new tables, appends to Java-written ones, table services.

hudi-rs (the oracle) reads the model after every step; the ``hoodie.properties`` hoodie_ray
writes for a new version 9 table is compared key by key with the ones Java 1.1 wrote in the
sample tables of ../shared/tables.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hoodie_ray as hr
from hoodie_ray.api import compact
from hoodie_ray.config.table_config import HoodieTableConfig
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.job.maintenance import clean
from hoodie_ray.log_format.blocks import BlockType
from hoodie_ray.log_format.reader import read_log_file
from hoodie_ray.meta import META_FIELDS
from hoodie_ray.storage import LocalStorage
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action
from hoodie_ray.timeline.timeline import ActiveTimeline
from hoodie_ray.write import commit as commit_mod
from tests.conftest import extract_sample_table, hudi_rs_read
from tests.write.model import OPTIONS, SMALL_FILES, TableModel, Workload, to_arrow

V9_OPTIONS = {
    **OPTIONS,
    **SMALL_FILES,
    "hoodie.write.table.version": "9",
    "compaction.delta_commits": "3",
    "clean.retain_commits": "2",
    "archive.min_commits": "4",
    "archive.max_commits": "6",
}


def _props(path: Path) -> dict[str, str]:
    return dict(HoodieTableConfig.load(LocalStorage(str(path))).props)


# -- hoodie.properties, key by key against Java 1.1 ----------------------------------------------

#: Keys where a new hoodie_ray table and the Java sample differ, with the reason.
_ONLY_OURS = {
    # Java's default is LOCAL (HoodieTableConfig.TIMELINE_TIMEZONE) and Spark SQL leaves it
    # out; hoodie_ray makes its instant times in UTC and records that, as for versions 6 and 8
    "hoodie.table.timeline.timezone": "UTC",
}
_ONLY_JAVA = {
    # the metadata table and its index definitions: hoodie_ray writes neither (yet)
    "hoodie.table.metadata.partitions",
    "hoodie.table.metadata.partitions.inflight",
    "hoodie.table.index.defs.path",
}
#: Same key, a value that depends on how the schema was written, compared field by field.
_SCHEMA_KEY = "hoodie.table.create.schema"


def _java_v9_layout(name: str) -> dict[str, str]:
    """The write options that make a table laid out like the Java sample ``name``."""
    if name == "sample_mor_avro_v9_txns_nonpart_nometa":
        return {
            "hoodie.table.name": "v9_txns_mor_nonpart_nometa",
            "hoodie.datasource.write.recordkey.field": "txn_id",
        }
    return {
        "hoodie.table.name": "v9_txns_mor_complex_meta",
        "hoodie.datasource.write.recordkey.field": "txn_id,account_id",
        "hoodie.datasource.write.partitionpath.field": "region",
    }


@pytest.mark.parametrize(
    "name", ["sample_mor_avro_v9_txns_nonpart_nometa", "sample_mor_avro_v9_txns_complex_meta"]
)
def test_new_table_properties_are_the_keys_java_1_1_writes(tmp_path, name):
    java_root = extract_sample_table(name, tmp_path / "java")
    java = _props(java_root)
    assert java["hoodie.table.version"] == "9"
    layout = _java_v9_layout(name)
    data = hudi_rs_read(java_root)
    data = data.drop_columns([c for c in META_FIELDS if c in data.column_names])
    ours_path = tmp_path / "ours"
    HoodieWriteClient(
        str(ours_path),
        {
            **layout,
            "precombine.field": "txn_ts",
            "table.type": "MERGE_ON_READ",
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.write.table.version": "9",
            # the Java table it is compared with has no metadata table
            "hoodie.metadata.enable": "false",
        },
    ).write(data)
    ours = _props(ours_path)
    only_java = set(java) - set(ours)
    only_ours = set(ours) - set(java)
    assert only_java <= _ONLY_JAVA, f"keys Java 1.1 writes and hoodie_ray does not: {only_java}"
    assert {k: ours[k] for k in only_ours} == _ONLY_OURS
    for key in sorted(set(java) & set(ours) - {_SCHEMA_KEY}):
        # the checksum too: same database and table name
        assert ours[key] == java[key], f"{key}: ours {ours[key]!r} != Java's {java[key]!r}"
    # the create schema: the same fields in the same order (hoodie_ray writes nullable unions
    # null-first with a null default; Java 1.1's Spark writer puts the type first)
    ours_fields = [f["name"] for f in json.loads(ours[_SCHEMA_KEY])["fields"]]
    java_fields = [f["name"] for f in json.loads(java[_SCHEMA_KEY])["fields"]]
    assert ours_fields == java_fields
    # the version 8 names are gone: ordering field, payload class, merge strategy id
    for key in (
        "hoodie.table.precombine.field",
        "hoodie.compaction.payload.class",
        "hoodie.record.merge.strategy.id",
    ):
        assert key not in ours and key not in java
    # and hudi-rs reads what was written
    got = hudi_rs_read(ours_path).sort_by("txn_id").select(data.column_names)
    assert got.to_pylist() == data.sort_by("txn_id").to_pylist()


# -- the model, through every table service ------------------------------------------------------


class Boom(Exception):
    pass


def _fail_next_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next write dies after writing its files: no completion, and no rollback."""

    def dead(*_a, **_k):
        raise Boom("writer died")

    monkeypatch.setattr(commit_mod.CommitProtocol, "rollback", lambda self, i: dead())
    monkeypatch.setattr(ActiveTimeline, "complete", dead)


@pytest.mark.parametrize(
    "table_type", ["MERGE_ON_READ", pytest.param("COPY_ON_WRITE", marks=pytest.mark.slow)]
)
def test_model_on_version_9(tmp_path, monkeypatch, table_type):
    """Inserts, upserts, deletes, compactions, cleans, archival and the rollback of a failed
    write on a new version 9 table: hudi-rs reads the model after every step."""
    path = tmp_path / "t"
    opts = {**V9_OPTIONS, "table.type": table_type}
    model, wl = TableModel(), Workload(seed=9)
    failed: list = []
    rolled_back: list = []
    seen: set[str] = set()  # completed actions, archived ones included
    for i in range(16):  # (suite time: was 26; every assertion below still holds)
        kind, rows = wl.next_commit()
        if i == 0:
            kind, rows = "upsert", wl.rows_for(wl.keys[:30])
        if i == 12:  # a writer dies mid-write; the next one rolls its instant back
            _fail_next_write(monkeypatch)
            with pytest.raises(Boom):
                HoodieWriteClient(str(path), opts).write(to_arrow(rows, True))
            monkeypatch.undo()
            failed = [
                i for i in HoodieTable.load(str(path)).timeline if i.state.value != "COMPLETED"
            ]
            assert failed, "the failed write should be left pending"
            model.assert_hudi_rs_reads(path)
            continue
        model.write(path, opts, kind, rows)
        model.assert_hudi_rs_reads(path, f"commit {i} ({kind}) differs")
        if i % 8 == 7:  # a clean on its own (COPY_ON_WRITE cleans only this way)
            clean(str(path), opts)
            model.assert_hudi_rs_reads(path)
        timeline = HoodieTable.load(str(path)).timeline
        seen |= {x.action for x in timeline if x.state.value == "COMPLETED"}
        if failed and not rolled_back:  # the next writer rolled the failed instant back
            rolled_back = [x for x in timeline if x.action == "rollback"]
            assert rolled_back and rolled_back[0].state.value == "COMPLETED"
            assert failed[0].timestamp not in {x.timestamp for x in timeline}
    assert failed and rolled_back
    table = HoodieTable.load(str(path))
    assert (table.table_version, table.layout_version) == (9, 2)
    props = table.table_config.props
    assert props["hoodie.table.ordering.fields"] == "ts"
    assert "hoodie.table.precombine.field" not in props  # no table service brought it back
    assert all(i.state.value == "COMPLETED" for i in table.timeline)
    assert "clean" in seen, "no clean ran"
    if table_type == "MERGE_ON_READ":
        assert Action.COMMIT in seen, "no compaction ran"
        # version 8+ logs: named by their own delta commit, rolled back by deletion (no
        # command blocks)
        logs = list(path.rglob(".*.log.*"))
        assert logs
        for log in logs:
            blocks = read_log_file(LocalStorage(str(path)), str(log.relative_to(path)))
            assert all(b.block_type is not BlockType.COMMAND for b in blocks)
    archived = {a.instant_time for a in table.archived_timeline.instants()}
    assert archived, "nothing was archived"
    assert (path / ".hoodie" / "timeline" / "history").is_dir()
    # hoodie_ray's own reader agrees
    got = hr.read(str(path)).select(model.as_table().column_names).sort_by("key")
    assert got.cast(model.as_table().schema).to_pylist() == model.as_table().to_pylist()


def test_complex_key_with_one_field_keeps_the_field_name(tmp_path):
    """Version 9 keys a single-field complex key as ``field:value``
    (``KeyGenUtils.encodeSingleKeyFieldNameForComplexKeyGen`` is true from table version 9)."""
    path = tmp_path / "t"
    opts = {**V9_OPTIONS, "hoodie.datasource.write.keygenerator.type": "COMPLEX"}
    HoodieWriteClient(str(path), opts).write(to_arrow([Workload(1)._row("k1")], True))
    assert hudi_rs_read(path).column("_hoodie_record_key").to_pylist() == ["key:k1"]


# -- appending to the Java-written version 9 table -----------------------------------------------

_JAVA_NOMETA = "sample_mor_avro_v9_txns_nonpart_nometa"


def _data_by_key(t: pa.Table) -> dict[str, dict]:
    t = t.drop_columns([c for c in META_FIELDS if c in t.column_names])
    return {r["txn_id"]: r for r in t.to_pylist()}


def _check(root: Path, expected: dict[str, dict], step: str) -> None:
    got = _data_by_key(hudi_rs_read(root))
    assert sorted(got) == sorted(expected), f"{step}: keys differ"
    for k, row in expected.items():
        assert got[k] == row, f"{step}: row {k} differs"


def test_append_upserts_deletes_compaction_clean_archival_to_java_v9_table(tmp_path):
    root = extract_sample_table(_JAVA_NOMETA, tmp_path / "java")
    props_before = _props(root)
    # the table has no metadata table, and keeps none
    opts = {"compaction.schedule.enabled": "false", "hoodie.metadata.enable": "false"}
    base = hudi_rs_read(root)
    data = base.drop_columns([c for c in META_FIELDS if c in base.column_names]).sort_by("txn_id")
    expected = _data_by_key(data)
    assert len(expected) == 14

    # 1. upserts: two rows change (a newer txn_ts), one new key
    upd = data.slice(0, 2)
    upd = upd.set_column(
        upd.schema.get_field_index("merchant_name"),
        "merchant_name",
        pa.array(["hoodie_ray-1", "hoodie_ray-2"]),
    )
    upd = upd.set_column(
        upd.schema.get_field_index("txn_ts"), "txn_ts", pc.add(upd.column("txn_ts"), 1000)
    )
    new = data.slice(2, 1)
    new = new.set_column(new.schema.get_field_index("txn_id"), "txn_id", pa.array(["TXN-NEW-1"]))
    res = HoodieWriteClient(str(root), opts).write(pa.concat_tables([upd, new]))
    for r in pa.concat_tables([upd, new]).to_pylist():
        expected[r["txn_id"]] = r
    _check(root, expected, "upserts")
    # logs of version 9 are named by their own delta commit
    assert list(root.glob(f".*_{res.instant}.log.*"))

    # 2. deletes
    gone = [data.column("txn_id")[3].as_py(), "TXN-NEW-1"]
    HoodieWriteClient(str(root), {**opts, "write.operation": "delete"}).write(
        pa.table({"txn_id": pa.array(gone)})
    )
    for k in gone:
        expected.pop(k)
    _check(root, expected, "deletes")

    # 3. a late record (lower txn_ts than the stored one) loses: event-time ordering
    late = data.slice(4, 1)
    late = late.set_column(
        late.schema.get_field_index("merchant_name"), "merchant_name", pa.array(["too late"])
    )
    late = late.set_column(
        late.schema.get_field_index("txn_ts"), "txn_ts", pc.subtract(late.column("txn_ts"), 10**6)
    )
    HoodieWriteClient(str(root), opts).write(late)
    _check(root, expected, "late record")

    # 4. a compaction of everything
    instant = compact(str(root), opts).instant
    assert instant is not None
    _check(root, expected, "compaction")
    ro = hudi_rs_read(root, **{"hoodie.read.use.read_optimized.mode": "true"})
    assert ro.num_rows == len(expected)

    # 5. and writes after it
    upd2 = data.slice(5, 2)
    upd2 = upd2.set_column(
        upd2.schema.get_field_index("txn_ts"), "txn_ts", pc.add(upd2.column("txn_ts"), 2000)
    )
    upd2 = upd2.set_column(
        upd2.schema.get_field_index("currency"), "currency", pa.array(["CHF", "CHF"])
    )
    HoodieWriteClient(str(root), opts).write(upd2)
    for r in upd2.to_pylist():
        expected[r["txn_id"]] = r
    _check(root, expected, "upserts after compaction")

    # 6. a clean, then archival of the Java instants into the LSM history
    clean(str(root), {**opts, "clean.retain_commits": "2"})
    _check(root, expected, "clean")
    archive_opts = {
        **opts,
        "clean.retain_commits": "2",
        "archive.min_commits": "4",
        "archive.max_commits": "6",
    }
    upd3 = data.slice(7, 1)
    upd3 = upd3.set_column(
        upd3.schema.get_field_index("txn_ts"), "txn_ts", pc.add(upd3.column("txn_ts"), 3000)
    )
    HoodieWriteClient(str(root), archive_opts).write(upd3)
    for r in upd3.to_pylist():
        expected[r["txn_id"]] = r
    _check(root, expected, "archival")
    table = HoodieTable.load(str(root))
    archived = {a.instant_time for a in table.archived_timeline.instants()}
    assert archived and max(archived) < table.commits()[0].timestamp
    # the file groups Java's clustering replaced were cleaned once it was older than the
    # earliest retained commit (Java's CleanPlanner rule), so archival could take it
    assert not list(root.glob("1900ff60-ed76-4f51-823b-dbcb27f05a0c-0_*.parquet"))
    assert "20260307135937430" in archived
    # hoodie_ray never rewrote the Java table's hoodie.properties
    assert _props(root) == props_before
    assert all(i.state.value == "COMPLETED" for i in table.timeline)


def test_java_v9_table_with_metadata_and_secondary_indexes_is_appended_to(tmp_path):
    """The Java table whose metadata table holds secondary indexes takes a write (it was
    refused until they were maintained): the row is there for hudi-rs, which lists through
    the metadata table, and the metadata table, secondary indexes included, validates."""
    from hoodie_ray.job.maintenance import validate_metadata

    root = extract_sample_table("sample_mor_avro_v9_txns_complex_meta", tmp_path / "java")
    before = hudi_rs_read(root)
    data = before.drop_columns([c for c in META_FIELDS if c in before.column_names])
    HoodieWriteClient(str(root)).write(data.slice(0, 1))
    after = hudi_rs_read(root)
    assert after.num_rows == before.num_rows
    assert validate_metadata(str(root)) == []


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"hoodie.table.partial.update.mode": "FILL_UNAVAILABLE"}, "without its marker value"),
        ({"hoodie.record.merge.property.hoodie.payload.delete.field": "Op"}, "delete markers"),
        ({"hoodie.table.ordering.fields": "ts,v"}, "several ordering fields"),
    ],
    ids=["fill-unavailable-without-marker", "merge-properties", "two-ordering-fields"],
)
def test_version_9_merge_settings_hoodie_ray_does_not_apply_are_refused(tmp_path, extra, match):
    """Version 9 merge settings hoodie_ray's writer and compactor do not apply: refused before
    anything is written (Java readers would merge the rows differently)."""
    path = tmp_path / "t"
    wl = Workload(seed=1)
    HoodieWriteClient(str(path), V9_OPTIONS).write(to_arrow(wl.rows_for(wl.keys[:5]), True))
    storage = LocalStorage(str(path))
    HoodieTableConfig.load(storage).with_props(**extra).save(storage)
    instants = len(HoodieTable.load(str(path)).timeline)
    with pytest.raises(hr.HoodieUnsupportedError, match=match):
        HoodieWriteClient(str(path), V9_OPTIONS).write(to_arrow([wl._row("k001")], True))
    assert len(HoodieTable.load(str(path)).timeline) == instants
