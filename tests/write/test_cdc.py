"""CDC on write (``hoodie.table.cdc.enabled``): copy-on-write merges write ``.cdc`` log files
as Java's ``HoodieCDCLogger`` does (name, block type, schema per supplemental logging mode,
``cdcStats``), whose records are the commit's changes as the CDC query reads them; the
metadata table lists them, the cleaner deletes them with their slice, and hudi-rs still reads
the tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieOptionError
from hoodie_ray.file_group.naming import parse_log_file_name
from hoodie_ray.log_format import BlockType, HeaderMetadataType, read_log_file
from hoodie_ray.reader import read_table
from hoodie_ray.table import HoodieTable
from tests.conftest import hudi_rs_read


def _opts(version: str, mode: str = "DATA_BEFORE_AFTER", **extra: str) -> dict[str, str]:
    return {
        "hoodie.table.name": "cdcw",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "hoodie.write.table.version": version,
        "table.type": "COPY_ON_WRITE",
        "hoodie.table.cdc.enabled": "true",
        "hoodie.table.cdc.supplemental.logging.mode": mode,
        **extra,
    }


def _write(path: str, opts: dict[str, str], commits: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for c in range(commits):
        keys = [f"k{k:02d}" for k in rng.choice(60, 30, replace=False)]
        batch = pa.table(
            {
                "key": keys,
                "ts": pa.array([c] * 30, pa.int64()),
                "v": rng.random(30),
                "p": [f"p{int(k[1:]) % 2}" for k in keys],
                "_hoodie_is_deleted": pa.array((rng.random(30) < 0.2) & (c > 0)),
            }
        )
        result = hr.HoodieWriteClient(path, opts).write(batch)
        assert result.instant is not None
        out.append(result.instant)
    return out


def _cdc_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob(".*.cdc"))


@pytest.mark.parametrize("version", ["6", "8"])
def test_merges_write_the_changes_the_cdc_query_reads(tmp_path: Path, version: str) -> None:
    path = tmp_path / "t"
    instants = _write(str(path), _opts(version), 4, seed=int(version))
    tbl = HoodieTable.load(str(path))
    assert tbl.table_config.cdc_enabled
    files = _cdc_files(path)
    assert files, "no CDC log file written"
    stats = {}
    for inst in tbl.commits():
        for _part, st in tbl.metadata(inst).iter_write_stats():
            for rel, size in (st.cdc_stats or {}).items():
                stats[rel] = (size, inst.timestamp, st.file_id)
    assert {str(f.relative_to(path)) for f in files} == set(stats)
    for f in files:
        rel = str(f.relative_to(path))
        size, instant, fid = stats[rel]
        assert f.stat().st_size == size
        name = parse_log_file_name(f.name)
        assert name is not None and name.is_cdc and name.version == 1
        assert (name.file_id, name.instant) == (fid, instant)
        [block] = read_log_file(tbl.storage, rel)
        assert block.block_type == BlockType.CDC_DATA
        assert block.header[HeaderMetadataType.INSTANT_TIME] == instant
        schema = json.loads(block.header[HeaderMetadataType.SCHEMA])
        assert [x["name"] for x in schema["fields"]] == ["op", "ts_ms", "before", "after"]
        image = schema["fields"][2]["type"][1]
        assert [x["name"] for x in image["fields"]] == ["key", "ts", "v", "p"]
        # the file holds what the CDC query reads for this commit and file group
        got = read_table(
            str(path),
            query_type="incremental",
            incremental_format="cdc",
            begin=instants[instants.index(instant) - 1],
            end=instant,
        )
        recs = block.records.to_pylist()
        keys = {(r["after"] or r["before"])["key"] for r in recs}
        want = [r for r in got.to_pylist() if (r["after"] or r["before"])["key"] in keys]
        assert sorted(recs, key=str) == sorted(want, key=str)
    assert read_table(str(path)).num_rows == hudi_rs_read(str(path)).num_rows
    if version == "8":
        assert not hr.validate_metadata(str(path))


@pytest.mark.parametrize(
    ("mode", "fields"),
    [("OP_KEY_ONLY", ["op", "record_key"]), ("DATA_BEFORE", ["op", "record_key", "before"])],
)
def test_supplemental_logging_modes(tmp_path: Path, mode: str, fields: list[str]) -> None:
    path = tmp_path / "t"
    _write(str(path), _opts("8", mode), 3, seed=5)
    assert HoodieTable.load(str(path)).table_config.cdc_logging_mode == mode
    [first, *_] = _cdc_files(path)
    [block] = read_log_file(HoodieTable.load(str(path)).storage, str(first.relative_to(path)))
    schema = json.loads(block.header[HeaderMetadataType.SCHEMA])
    assert [x["name"] for x in schema["fields"]] == fields
    assert set(block.records.column("op").to_pylist()) <= {"i", "u", "d"}


def test_clean_takes_the_cdc_files_with_their_slice_and_options_must_match(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t"
    opts = _opts("8")
    _write(str(path), opts, 5, seed=9)
    before = set(_cdc_files(path))
    result = hr.clean(str(path), {**opts, "clean.retain_commits": "1"})
    assert result.files
    after = set(_cdc_files(path))
    deleted = {n for names in result.files.values() for n in names if n.endswith(".cdc")}
    assert deleted and {p.name for p in before - after} == deleted
    assert not hr.validate_metadata(str(path))
    with pytest.raises(HoodieOptionError, match="cdc"):
        hr.HoodieWriteClient(str(path), {**opts, "hoodie.table.cdc.enabled": "false"}).write(
            pa.table({"key": ["k01"], "ts": [9], "v": [0.5], "p": ["p1"]})
        )
