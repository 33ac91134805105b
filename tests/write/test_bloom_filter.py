"""Every base file hoodie_ray writes carries Hudi's footer as Java's writers do: the record
keys' bloom filter (keys in row order), its type code and the min / max record key -- new file
groups, merges (copy-on-write), small-file packing and compaction output alike."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import hoodie_ray as hr
from hoodie_ray.index.bloom_filter import (
    BLOOM_FILTER_FOOTER_KEY,
    BLOOM_TYPE_CODE_FOOTER_KEY,
    MAX_RECORD_KEY_FOOTER_KEY,
    MIN_RECORD_KEY_FOOTER_KEY,
    SIMPLE,
    BloomFilterSpec,
    footer_bloom_filter,
)
from hoodie_ray.table import HoodieTable
from tests.write.model import TableModel, Workload, model_options


def _base_files(path: str) -> list[Path]:
    return [p for p in sorted(Path(path).rglob("*.parquet")) if ".hoodie" not in p.parts]


def _check_footers(path: str, spec: BloomFilterSpec | None) -> int:
    """Each base file's footer is the one rebuilt from its keys; the number checked."""
    files = _base_files(path)
    for f in files:
        md = pq.read_metadata(f).metadata
        keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0)
        if len(keys):
            assert md[MIN_RECORD_KEY_FOOTER_KEY.encode()].decode() == min(keys.to_pylist())
            assert md[MAX_RECORD_KEY_FOOTER_KEY.encode()].decode() == max(keys.to_pylist())
        if spec is None:
            assert BLOOM_FILTER_FOOTER_KEY.encode() not in md, f.name
            continue
        want = spec.build(keys)
        assert md[BLOOM_FILTER_FOOTER_KEY.encode()] == want.serialize_to_string().encode(), f
        code = md.get(BLOOM_TYPE_CODE_FOOTER_KEY.encode())
        assert code == (None if spec.filter_type == SIMPLE else spec.filter_type.encode())
        got = footer_bloom_filter(md)
        assert got is not None and got.might_contain_many(keys).all()
    return len(files)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_written_and_compacted_base_files_carry_javas_footer(tmp_path: Path, table_type: str):
    path = str(tmp_path / "t")
    opts = model_options(
        {"compaction.delta_commits": "2", "compaction.schedule.enabled": "false"},
        table_type=table_type,
        small_files=True,
    )
    model, wl = TableModel(), Workload(11, keys=120)
    model.write(path, opts, "upsert", wl.rows_for(wl.keys[:90]))
    for _ in range(3):
        kind, rows = wl.next_commit()
        model.write(path, opts, kind, rows)
    if table_type == "MERGE_ON_READ":
        before = {p.name for p in _base_files(path)}
        assert hr.compact(path, opts).slices
        assert {p.name for p in _base_files(path)} - before  # compaction wrote base files
    assert _check_footers(path, BloomFilterSpec()) >= 3
    model.assert_hudi_rs_reads(path, "after the writes")


def test_bloom_options_are_followed(tmp_path: Path):
    """SIMPLE filters of the asked size (no type code, as Java writes them); none at all with
    hoodie.parquet.bloom.filter.enabled=false (the key range stays)."""
    simple = {
        "hoodie.bloom.index.filter.type": "SIMPLE",
        "hoodie.index.bloom.num_entries": "500",
        "hoodie.index.bloom.fpp": "0.001",
    }
    model, wl = TableModel(), Workload(12, keys=60)
    path = str(tmp_path / "simple")
    model.write(path, model_options(simple), "upsert", wl.rows_for(wl.keys))
    spec = BloomFilterSpec(num_entries=500, fpp=0.001, filter_type=SIMPLE)
    assert _check_footers(path, spec)
    model.assert_hudi_rs_reads(path, "SIMPLE filters")
    off = str(tmp_path / "off")
    model2 = TableModel()
    model2.write(
        off,
        model_options({"hoodie.parquet.bloom.filter.enabled": "false"}),
        "upsert",
        wl.rows_for(wl.keys),
    )
    assert _check_footers(off, None)
    model2.assert_hudi_rs_reads(off, "no filters")
    assert HoodieTable.load(off).latest_file_slices()
