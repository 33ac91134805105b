"""The metadata table's ``bloom_filters`` partition: one record per base file with its footer's
filter, kept through upserts, deletes, compaction and clean (tombstones), built on request, and
checked by the validator; hudi-rs reads the model throughout."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import hoodie_ray as hr
from hoodie_ray.file_group.naming import parse_base_file_name
from hoodie_ray.index.bloom_filter import BLOOM_FILTER_FOOTER_KEY, BloomFilterSpec
from hoodie_ray.job import maintenance
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.metadata import records as rec
from hoodie_ray.metadata.bloom_filters import record_bloom_filter
from hoodie_ray.metadata.layout import BLOOM_FILTERS, METADATA_TABLE_PATH
from hoodie_ray.table import HoodieTable
from tests.write.model import TableModel, Workload, model_options, to_arrow

BLOOM_ON = {"hoodie.metadata.index.bloom.filter.enable": "true"}


def _check(path: str, model: TableModel, step: str) -> None:
    diffs = maintenance.validate_metadata(path)
    assert not diffs, f"{step}: " + "; ".join(map(str, diffs))
    model.assert_hudi_rs_reads(path, f"{step} differs")


def _bloom_records(path: str) -> dict[str, dict]:
    return HoodieTable.load(path).metadata_table.refresh().records(BLOOM_FILTERS)


def test_bloom_filters_kept_through_upserts_compaction_and_clean(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    opts = model_options(
        BLOOM_ON,
        {
            "compaction.delta_commits": "2",
            "clean.retain_commits": "1",
            # the MDT's own compaction drops tombstones: kept here to see the clean's
            "hoodie.metadata.compact.max.delta.commits": "50",
        },
        table_type="MERGE_ON_READ",
        version="8",
        small_files=True,
    )
    client = HoodieWriteClient(path, opts)
    model, wl = TableModel(), Workload(41, keys=80)
    rows = wl.rows_for(wl.keys[:60])
    client.write(to_arrow(rows, True))
    model.upsert(rows)
    t = HoodieTable.load(path)
    assert BLOOM_FILTERS in t.metadata_partitions
    names = [p.name for p in (Path(path) / METADATA_TABLE_PATH / BLOOM_FILTERS).iterdir()]
    groups = {n.lstrip(".").split("_")[0] for n in names if "bloom-filters-" in n}
    assert groups == {f"bloom-filters-000{i}-0" for i in range(4)}  # Java's 4 file groups
    _check(path, model, "first commit")
    for i in range(5):  # (suite time: was 8)
        kind, rows = wl.next_commit()
        model.write(path, opts, "delete" if kind == "delete" else "upsert", rows, client)
        _check(path, model, f"commit {i} ({kind})")
    maintenance.clean(path, {"clean.retain_commits": "1"})
    _check(path, model, "clean")
    t = HoodieTable.load(path)
    assert t.active_timeline.find(["commit"], ["COMPLETED"]), "no compaction ran"
    records = _bloom_records(path)
    live = {k: r for k, r in records.items() if not rec.is_deleted_record(r)}
    gone = {k for k, r in records.items() if rec.is_deleted_record(r)}
    assert gone, "the clean left no tombstone"
    listing = t.metadata_table.files_listing()
    base_files = [(p, n) for p, names in listing.items() for n in names if parse_base_file_name(n)]
    assert len(live) == len(base_files)
    for part, name in base_files:
        r = live[rec.bloom_filter_key(part, name)]
        md = pq.read_metadata(Path(path) / part / name).metadata
        value = r["BloomFilterMetadata"]
        assert value["type"] == "DYNAMIC_V0" and not value["isDeleted"]
        assert value["timestamp"] == parse_base_file_name(name).instant
        assert value["bloomFilter"] == md[BLOOM_FILTER_FOOTER_KEY.encode()]
        keys = pq.read_table(Path(path) / part / name, columns=["_hoodie_record_key"]).column(0)
        assert record_bloom_filter(r).might_contain_many(keys).all()
    for k in gone:
        assert records[k]["BloomFilterMetadata"] == {
            "type": "",
            "timestamp": records[k]["BloomFilterMetadata"]["timestamp"],
            "bloomFilter": b"",
            "isDeleted": True,
        }


@pytest.mark.parametrize("how", ["hoodie-ray metadata init --bloom-filters", "write option"])
def test_bloom_filters_built_on_request_validated_and_dropped(tmp_path: Path, how: str) -> None:
    path = str(tmp_path / "t")
    opts = model_options(version="9", small_files=True)
    model, wl = TableModel(), Workload(43, keys=50)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys))
    kind, rows = wl.next_commit()
    model.write(path, opts, kind, rows)
    if how.startswith("hoodie-ray"):
        from hoodie_ray.cli import main

        assert main(["metadata", "init", path, "--bloom-filters"]) == 0
        parts = HoodieTable.load(path).metadata_partitions
    else:
        model.write(path, {**opts, **BLOOM_ON}, "upsert", wl.rows_for(wl.keys[:5]))
        parts = HoodieTable.load(path).metadata_partitions
    assert BLOOM_FILTERS in parts
    _check(path, model, "built")
    records = _bloom_records(path)
    assert records and not any(rec.is_deleted_record(r) for r in records.values())
    # a file whose footer filter differs from its record is named by the validator
    t = HoodieTable.load(path)
    part, name = next(
        (p, n)
        for p, names in t.metadata_table.files_listing().items()
        for n in names
        if parse_base_file_name(n)
    )
    f = Path(path) / part / name
    keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0)
    other = BloomFilterSpec(num_entries=100, fpp=0.01).build(keys).serialize_to_string()
    original = f.read_bytes()
    md = dict(pq.read_metadata(f).metadata)
    md[BLOOM_FILTER_FOOTER_KEY.encode()] = other.encode()
    pq.write_table(pq.read_table(f).replace_schema_metadata(md), f)
    diffs = [str(d) for d in maintenance.validate_metadata(path) if d.partition == BLOOM_FILTERS]
    where = f"{part}/{name}" if part else name
    assert diffs == [f"bloom_filters: {where}: bloom filter differs from the footer's"]
    f.write_bytes(original)
    # turned off: dropped
    off = {**opts, "hoodie.metadata.index.bloom.filter.enable": "false"}
    model.write(path, off, "upsert", wl.rows_for(wl.keys[:3]))
    assert BLOOM_FILTERS not in HoodieTable.load(path).metadata_partitions
    _check(path, model, "dropped")


def test_java_table_gets_bloom_filters_from_its_java_footers(tmp_path: Path) -> None:
    """The v9 Java sample (metadata table, compaction, clustering): ``bloom_filters`` built from
    Java's own footers holds them byte for byte, and stays valid through an append."""
    from hoodie_ray.meta import META_FIELDS
    from tests.conftest import extract_sample_table, hudi_rs_read

    root = extract_sample_table("sample_mor_avro_v9_txns_complex_meta", tmp_path / "java")
    calls: list[tuple[int, int]] = []
    parts = hr.init_metadata(
        str(root), options=BLOOM_ON, on_progress=lambda d, n: calls.append((d, n))
    )
    assert BLOOM_FILTERS in parts
    assert not maintenance.validate_metadata(str(root))
    t = HoodieTable.load(str(root))
    records = _bloom_records(str(root))
    assert calls and calls == [(d, calls[0][1]) for d in range(1, calls[0][1] + 1)]  # per footer
    checked = 0
    for part, names in t.metadata_table.files_listing().items():
        for name in names:
            b = parse_base_file_name(name)
            if b is None or not t.active_timeline.is_committed(b.instant):
                continue
            md = pq.read_metadata(root / part / name).metadata
            value = records[rec.bloom_filter_key(part, name)]["BloomFilterMetadata"]
            assert value["bloomFilter"] == md[BLOOM_FILTER_FOOTER_KEY.encode()]
            checked += 1
    assert checked >= 5 and calls[-1] == (checked, checked)  # one progress call a footer
    data = hudi_rs_read(root)
    expected = data.num_rows
    data = data.drop_columns([c for c in META_FIELDS if c in data.column_names]).slice(0, 1)
    HoodieWriteClient(str(root)).write(data)
    assert not maintenance.validate_metadata(str(root))
    assert hudi_rs_read(root).num_rows == expected
