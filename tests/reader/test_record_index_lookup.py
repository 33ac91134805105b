"""Point lookups by record key served by the metadata table's record index: the same rows as a
full scan (hudi-rs the oracle), only the file groups the index names are opened, keys the index
does not hold open no data file, and every other read falls back to the full plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.metadata.reader import OPENED_FILES
from hoodie_ray.reader.query import plan_file_slices
from hoodie_ray.storage import LocalStorage
from tests.conftest import hudi_rs_read
from tests.write.model import TableModel, Workload, model_options, to_arrow

RI = {"hoodie.metadata.record.index.enable": "true"}


def write_lookup_table(path: str, extra: dict[str, str], seed: int = 7) -> TableModel:
    """A MOR v8 table over several file groups: inserts, upserts with partition moves,
    deletes (the model applies the same)."""
    opts = model_options(extra, table_type="MERGE_ON_READ", version="8", small_files=True)
    model, wl = TableModel(), Workload(seed, keys=120)
    client = HoodieWriteClient(path, opts)
    for rows in (
        wl.rows_for(wl.keys[:80]),
        wl.rows_for(wl.keys[60:120]),  # updates (some move partition) and inserts
        [{**wl._row(k), "_hoodie_is_deleted": True, "ts": 10**9} for k in wl.keys[:5]],
    ):
        client.write(to_arrow(rows, True))
        model.upsert(rows)
    return model


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, TableModel]:
    path = str(tmp_path_factory.mktemp("ri") / "t")
    return path, write_lookup_table(path, RI)


def _oracle(path: str, keys: list[str]) -> list[dict[str, Any]]:
    """hudi-rs's full snapshot, filtered here."""
    full = hudi_rs_read(path)
    return _rows(full.filter(pc.is_in(full["key"], pa.array(keys, pa.string()))))


def _rows(t: pa.Table) -> list[dict[str, Any]]:
    cols = ["_hoodie_record_key", "_hoodie_partition_path", "key", "p", "ts", "v", "s"]
    return sorted(t.select(cols).to_pylist(), key=lambda r: r["key"])


class _Opened:
    """Records the files a read opens: LocalStorage's open_input, read_bytes, local_path and
    local_file (what Parquet base files are opened by) wrapped to count only; they still open
    the file."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        for name in ("open_input", "read_bytes", "local_path", "local_file"):
            real = getattr(LocalStorage, name)

            def wrapped(storage: LocalStorage, rel: str, _real: Any = real) -> Any:
                self.paths.append(storage.uri(rel))
                return _real(storage, rel)

            monkeypatch.setattr(LocalStorage, name, wrapped)

    def data_files(self) -> list[str]:
        return [p for p in self.paths if "/.hoodie/" not in p and not p.endswith(".properties")]

    def record_index_files(self) -> list[str]:
        return [p for p in self.paths if "/.hoodie/metadata/record_index/" in p]


def _file_group(name: str) -> str:
    """The file id in a data file name (base ``<id>_<token>_<ts>.parquet``, log ``.<id>_...``)."""
    return name.rsplit("/", 1)[-1].lstrip(".").split("_", 1)[0]


@pytest.mark.parametrize("op", ["=", "in"])
def test_a_lookup_reads_only_the_named_file_groups(
    table: tuple[str, TableModel], monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    path, model = table
    wanted = ["k070"] if op == "=" else ["k002", "k010", "k070", "k119", "absent"]
    filters = [("key", "=", wanted[0])] if op == "=" else [("key", "IN", wanted)]
    full_plan = plan_file_slices(path)
    OPENED_FILES.clear()  # what this lookup opens, not what an earlier one kept open
    opened = _Opened(monkeypatch)
    plan = plan_file_slices(path, filters=filters)
    got = hr.read(path, filters=filters)
    monkeypatch.undo()
    assert _rows(got) == _oracle(path, wanted)
    assert sorted(r["key"] for r in _rows(got)) == sorted(k for k in wanted if k in model.rows)
    live = [k for k in wanted if k in model.rows]
    planned = {s.file_id for s in plan.slices}
    assert plan.stats["pruned_by"] == ["record_index"]
    assert plan.stats["record_index"] == {"keys": len(wanted), "found": len(live)}
    assert plan.stats["file_groups_total"] == len(full_plan.slices) > len(planned) >= 1
    assert plan.stats["file_groups_planned"] == len(planned)
    # the data files opened belong to the planned file groups only, and every one was read
    assert {_file_group(p) for p in opened.data_files()} == planned
    # the record index: only the file groups the keys hash to
    from hoodie_ray.metadata.records import key_to_file_group_indexes

    groups = {f"record-index-{g:04d}-0" for g in key_to_file_group_indexes(wanted, 10).tolist()}
    assert opened.record_index_files()
    assert {_file_group(p) for p in opened.record_index_files()} <= groups


def test_a_lookup_dearer_than_the_scan_is_not_taken(
    table: tuple[str, TableModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every key of the table in one IN list, with index blocks made dear (this table's are
    a few KB): the planner expects most file groups to be read after the index blocks, so
    it scans (and says why); the rows are the same. One key still takes the index."""
    from hoodie_ray.reader import lookup_cost

    path, model = table
    wanted = sorted(model.rows)
    with monkeypatch.context() as m:
        m.setattr(lookup_cost, "INDEX_BYTE_WEIGHT", 100_000.0)
        plan = plan_file_slices(path, filters=[("key", "IN", wanted)])
    cost = plan.stats["lookup_cost"]
    assert not cost["use_index"] and cost["keys"] == len(wanted)
    assert cost["lookup_bytes"] >= cost["scan_bytes"] > 0 and cost["index_blocks"] >= 1
    assert "record_index" not in plan.stats["pruned_by"]
    assert plan.stats["record_index_skipped"].startswith("record_index: ")
    assert "the scan is cheaper" in plan.stats["record_index_skipped"]
    assert len(plan.slices) == plan.stats["file_groups_total"]
    assert _rows(hr.read(path, filters=[("key", "IN", wanted)])) == _oracle(path, wanted)
    # one key: the index
    one = plan_file_slices(path, filters=[("key", "=", wanted[0])]).stats["lookup_cost"]
    assert one["use_index"] and "the index is cheaper" in one["why"]


def test_keys_the_index_does_not_hold_open_no_data_file(
    table: tuple[str, TableModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, model = table
    deleted = "k001"
    assert deleted not in model.rows
    opened = _Opened(monkeypatch)
    got = hr.read(path, filters=[("key", "IN", [deleted, "nope"])])
    plan = plan_file_slices(path, filters=[("key", "=", "nope")])
    monkeypatch.undo()
    assert got.num_rows == 0
    assert got.schema.names == hudi_rs_read(path).schema.names
    assert opened.data_files() == []
    assert plan.slices == [] and plan.stats["record_index"] == {"keys": 1, "found": 0}


def test_other_reads_fall_back_to_the_full_plan(
    table: tuple[str, TableModel], tmp_path: Path
) -> None:
    path, _ = table
    total = len(plan_file_slices(path).slices)
    cases = {
        "no = / IN filter on record key field(s) key": [("key", ">", "k050")],
        "the filter values make no record key": [("key", "=", "")],
    }
    for why, filters in cases.items():
        plan = plan_file_slices(path, filters=filters)
        assert len(plan.slices) == total and "record_index" not in plan.stats["pruned_by"]
        assert plan.stats["record_index_skipped"].startswith(why)
        got, full = hr.read(path, filters=filters), hudi_rs_read(path)
        assert _rows(got) == _rows(full.filter(filters_mask(full, filters)))
    ro = plan_file_slices(path, "read_optimized", filters=[("key", "=", "k070")])
    assert "not a snapshot" in ro.stats["record_index_skipped"]
    plain = str(tmp_path / "plain")  # a table without a record index
    write_lookup_table(plain, {})
    plan = plan_file_slices(plain, filters=[("key", "=", "k070")])
    assert plan.stats["record_index_skipped"] == "the table keeps no record index"
    assert len(plan.slices) == plan.stats["file_groups_total"]
    assert _rows(hr.read(plain, filters=[("key", "=", "k070")])) == _oracle(plain, ["k070"])


def filters_mask(t: pa.Table, filters: list[tuple[str, str, str]]) -> pa.Array:
    ((field, op, value),) = filters
    fn = {">": pc.greater, "=": pc.equal}[op]
    return pc.fill_null(fn(t[field], value), False)


def test_complex_keys_need_every_key_field(
    shared_sample: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Java v9 sample (ComplexKeyGenerator over txn_id, account_id, with a record index):
    equality on both fields is a lookup with a full scan's rows; on one field it falls back."""
    from hoodie_ray.reader import query

    root = str(shared_sample("sample_mor_avro_v9_txns_complex_meta"))
    full = hudi_rs_read(root)
    row = full.slice(0, 1).to_pylist()[0]
    both = [("txn_id", "=", row["txn_id"]), ("account_id", "=", row["account_id"])]
    # the sample's column statistics of the key fields leave one file group, which the
    # planner then reads without the index: off, so that the lookup runs
    real = query._prune_by_column_stats
    monkeypatch.setattr(query, "_prune_by_column_stats", lambda tbl, slices, f: slices)
    plan = plan_file_slices(root, filters=both)
    monkeypatch.setattr(query, "_prune_by_column_stats", real)
    assert plan.stats["pruned_by"] == ["record_index"]
    assert plan.stats["record_index"] == {"keys": 1, "found": 1}
    assert len(plan.slices) == 1 < plan.stats["file_groups_total"]
    got = hr.read(root, filters=both)
    assert got.column("_hoodie_record_key").to_pylist() == [row["_hoodie_record_key"]]
    one = plan_file_slices(root, filters=both[:1])
    assert one.stats["record_index_skipped"] == (
        "no = / IN filter on record key field(s) account_id"
    )
    expect = full.filter(pc.equal(full["txn_id"], row["txn_id"]))
    assert hr.read(root, filters=both[:1]).num_rows == expect.num_rows


def test_repeated_lookups_reuse_the_index_files_and_see_every_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record-index files a lookup opened, and its listing of their partition, are kept
    for the next lookup (it reads and lists none of them again), and a write since (new log
    files) is seen at once: hudi-rs the oracle after every write."""
    path = str(tmp_path / "t")
    opts = model_options(RI, table_type="MERGE_ON_READ", version="8", small_files=True)
    wl = Workload(11, keys=60)
    client = HoodieWriteClient(path, opts)
    wanted = [wl.keys[i] for i in (0, 7, 25, 33, 41, 59)]
    filters = [("key", "IN", wanted)]
    OPENED_FILES.clear()
    for rows in (
        wl.rows_for(wl.keys[:40]),
        wl.rows_for(wl.keys[20:60]),  # updates (some move partition) and inserts
        [{**wl._row(k), "_hoodie_is_deleted": True, "ts": 10**9} for k in wanted[:2]],
    ):
        client.write(to_arrow(rows, True))
        assert plan_file_slices(path, filters=filters).stats["pruned_by"] == ["record_index"]
        assert _rows(hr.read(path, filters=filters)) == _oracle(path, wanted)
        opened = _Opened(monkeypatch)
        listed: list[str] = []
        real_list = LocalStorage.list_dir

        def list_dir(
            storage: LocalStorage, rel: str, _seen: list[str] = listed, _real: Any = real_list
        ) -> Any:
            _seen.append(storage.uri(rel))
            return _real(storage, rel)

        monkeypatch.setattr(LocalStorage, "list_dir", list_dir)
        assert _rows(hr.read(path, filters=filters)) == _oracle(path, wanted)
        monkeypatch.undo()
        assert not opened.record_index_files()
        assert not [p for p in listed if "/.hoodie/metadata/record_index" in p]


def test_a_complex_key_with_a_null_field_is_looked_up(tmp_path: Path) -> None:
    """A complex key writes a null field as ``__null__``: ``IN`` a list holding a null on that
    field looks that key up, with a full scan's rows."""
    from hoodie_ray.reader import query
    from hoodie_ray.reader.filters import parse_filters

    path = str(tmp_path / "t")
    opts = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id,g",
        "precombine.field": "ts",
        "hoodie.write.table.version": "8",
        **RI,
    }
    n = 40
    rows = pa.table(
        {
            "id": [f"k{i % 20}" for i in range(n)],
            "g": [None if i < 20 else "x" for i in range(n)],
            "ts": [1] * n,
        }
    )
    hr.write(rows, path, opts, engine="local")
    flt = [("id", "IN", ["k3", "k4"]), ("g", "IN", [None])]
    schema = hr.read(path).schema
    keys = query.record_key_lookup(hr.HoodieTable.load(path), parse_filters(flt, schema), schema)
    assert keys == (["id:k3,g:__null__", "id:k4,g:__null__"], "")
    # a combination of fields all null makes no key the writer allows: the others are looked up
    both_null = [("id", "IN", ["k3", None]), ("g", "IN", [None])]
    keys = query.record_key_lookup(
        hr.HoodieTable.load(path), parse_filters(both_null, schema), schema
    )
    assert keys == (["id:k3,g:__null__"], "")
    got = hr.read(path, filters=flt)
    assert sorted(got["_hoodie_record_key"].to_pylist()) == ["id:k3,g:__null__", "id:k4,g:__null__"]
    mixed = hr.read(path, filters=[("id", "=", "k3"), ("g", "IN", [None, "x"])])
    assert sorted(mixed["_hoodie_record_key"].to_pylist()) == ["id:k3,g:__null__", "id:k3,g:x"]
