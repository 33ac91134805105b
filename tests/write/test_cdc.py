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
from hoodie_ray.exceptions import HoodieOptionError, HoodieQueryError
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


def _w(path: str, opts: dict[str, str], keys: list[str], ts: int, **kw: object) -> str:
    deleted = kw.pop("deleted", None)
    cols: dict[str, object] = {
        "key": keys,
        "ts": pa.array([ts] * len(keys), pa.int64()),
        "v": [f"{k}@{ts}" for k in keys],
        "p": ["p0"] * len(keys),
    }
    if deleted is not None:
        cols["_hoodie_is_deleted"] = pa.array(deleted)
    result = hr.HoodieWriteClient(path, {**opts, **kw}).write(pa.table(cols))  # type: ignore[arg-type]
    assert result.instant is not None
    return result.instant


def _cdc(path: str, begin: str | None = None) -> list[tuple[str, str, str | None, str | None]]:
    t = read_table(path, query_type="incremental", incremental_format="cdc", begin=begin)
    return [
        (
            r["op"],
            (r["after"] or r["before"])["key"],
            (r["before"] or {}).get("v"),
            (r["after"] or {}).get("v"),
        )
        for r in t.to_pylist()
    ]


def test_several_merges_of_a_group_in_one_instant(tmp_path: Path) -> None:
    """One flush per row: the .cdc file holds the instant's changes from the base file it
    started from, and the group's one stat names that base file's commit and counts every
    merge."""
    from hoodie_ray.write.stream_writer import StreamWriteFunction

    path = str(tmp_path / "t")
    opts = {**_opts("8", "OP_KEY_ONLY"), "write.batch.size": "1b"}
    _w(path, opts, ["a", "b", "c"], 1)
    first = HoodieTable.load(path).commits()[-1].timestamp
    orig = StreamWriteFunction.write

    def row_by_row(self: StreamWriteFunction, tagged: pa.Table) -> None:
        for i in range(tagged.num_rows):
            orig(self, tagged.slice(i, 1))

    StreamWriteFunction.write = row_by_row  # type: ignore[method-assign]
    try:
        _w(path, opts, ["a", "b", "d"], 2, deleted=[False, True, False])
    finally:
        StreamWriteFunction.write = orig  # type: ignore[method-assign]
    tbl = HoodieTable.load(path)
    [(_, st)] = list(tbl.metadata(tbl.commits()[-1]).iter_write_stats())
    assert st.prev_commit == first and st.num_deletes == 1 and st.cdc_stats
    [rel] = st.cdc_stats
    [block] = read_log_file(tbl.storage, rel)
    ops = sorted((r["op"], r["record_key"]) for r in block.records.to_pylist())
    assert ops == [("d", "b"), ("i", "d"), ("u", "a")]
    assert sorted(_cdc(path, begin=first)) == [
        ("d", "b", "b@1", None),
        ("i", "d", None, "d@2"),
        ("u", "a", "a@1", "a@2"),
    ]


def test_a_merge_that_changes_nothing_still_writes_its_cdc_file(tmp_path: Path) -> None:
    """An upsert whose ordering value loses: Java's CDC reader wants a .cdc file for every
    merge of an earlier base file (it refuses the commit otherwise); this one holds no change."""
    path = str(tmp_path / "t")
    opts = _opts("8")
    _w(path, opts, ["a", "b"], 5)
    _w(path, opts, ["a"], 1)
    tbl = HoodieTable.load(path)
    [(_, st)] = list(tbl.metadata(tbl.commits()[-1]).iter_write_stats())
    [rel] = st.cdc_stats
    [block] = read_log_file(tbl.storage, rel)
    assert block.records.num_rows == 0
    assert _cdc(path, begin=tbl.commits()[0].timestamp) == []


def test_duplicate_keys_in_a_group_pair_up_by_sequence_number(tmp_path: Path) -> None:
    """Inserts skip the index, so a group can hold a key twice: its records are told apart by
    their commit sequence numbers (a delete of one of the two is one delete)."""
    path = str(tmp_path / "t")
    opts = _opts("8")
    c1 = _w(path, opts, ["a", "b"], 1)
    _w(path, opts, ["a", "a"], 2, **{"write.operation": "insert"})
    c3 = _w(path, opts, ["a"], 3)
    changes = _cdc(path, begin=c1)
    assert sorted(c[0] for c in changes) == ["i", "u", "u"]
    _w(path, opts, ["a"], 4, deleted=[True])
    assert [c[:2] for c in _cdc(path, begin=c3)] == [("d", "a")]


def test_restore_takes_the_cdc_files_of_what_it_rolls_back(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    opts = _opts("6")
    c1 = _w(path, opts, ["a", "b"], 1)
    hr.savepoint(path, c1, options=opts)
    _w(path, opts, ["a"], 2)
    assert _cdc_files(tmp_path / "t")
    hr.restore(path, c1, options=opts)
    assert not _cdc_files(tmp_path / "t")


def test_the_cdc_files_are_read_as_they_are(tmp_path: Path) -> None:
    """A CDC table's logged changes are read from its .cdc files (Java's AS_IS case): the
    range reads on after the slices before its commits were cleaned, which inferring the
    changes from those slices could not; once the commits' own slices go, it says so."""
    path = str(tmp_path / "t")
    opts = _opts("8")
    c1 = _w(path, opts, ["a", "b", "c"], 1)
    c2 = _w(path, opts, ["a"], 2)
    _w(path, opts, ["b"], 3, deleted=[True])
    _w(path, opts, ["c"], 4)
    hr.clean(path, {**opts, "clean.retain_commits": "2"})
    assert not list((tmp_path / "t" / "p0").glob(f"*_{c2}.parquet"))  # c3's before: cleaned
    assert _cdc(path, begin=c2)[:1] == [("d", "b", "b@1", None)]
    assert [c[:2] for c in _cdc(path, begin=c2)] == [("d", "b"), ("u", "c")]
    with pytest.raises(HoodieQueryError, match="cleaned"):
        _cdc(path, begin=c1)


def _mor(version: str = "8", mode: str = "DATA_BEFORE_AFTER") -> dict[str, str]:
    return _opts(
        version, mode, **{"table.type": "MERGE_ON_READ", "compaction.schedule.enabled": "false"}
    )


def _logged(path: Path, instant: str) -> list[tuple[str, str, str | None, str | None]]:
    """The changes in the ``.cdc`` files named by ``instant``: (op, key, before v, after v)."""
    tbl = HoodieTable.load(str(path))
    out = []
    for f in _cdc_files(path):
        name = parse_log_file_name(f.name)
        if name is None or name.instant != instant:
            continue
        for block in read_log_file(tbl.storage, str(f.relative_to(path))):
            assert block.header[HeaderMetadataType.INSTANT_TIME] == instant
            for r in block.records.to_pylist():
                if "after" not in r:  # OP_KEY_ONLY
                    out.append((r["op"], r["record_key"], None, None))
                    continue
                assert r["ts_ms"] == instant
                img = r["after"] or r["before"]
                out.append(
                    (r["op"], img["key"], (r["before"] or {}).get("v"), (r["after"] or {}).get("v"))
                )
    return sorted(out)


def test_compaction_logs_the_changes_it_makes(tmp_path: Path) -> None:
    """A merge-on-read CDC table's compaction writes a .cdc file per compacted group (Hudi
    1.1's file-group-reader compaction): a base record a log record replaced is ``u``, one
    the logs deleted ``d``; a log record that lost on ordering logs nothing. The CDC query
    (Spark's: compactions skipped) reads the same changes before and after it, and hudi-rs
    still reads the table."""
    path = tmp_path / "t"
    opts = _mor()
    _w(str(path), opts, ["a", "b", "c", "d"], 1)
    _w(str(path), opts, ["a"], 2)
    _w(str(path), opts, ["b"], 2, deleted=[True])
    _w(str(path), opts, ["c"], 0)  # loses on ordering: the base record stays
    before = _cdc(str(path))
    result = hr.compact(str(path), options=opts)
    assert result.instant is not None
    assert _logged(path, result.instant) == [("d", "b", "b@1", None), ("u", "a", "a@1", "a@2")]
    meta = HoodieTable.load(str(path)).metadata(
        next(i for i in HoodieTable.load(str(path)).commits() if i.timestamp == result.instant)
    )
    stats = {rel for _p, st in meta.iter_write_stats() for rel in (st.cdc_stats or {})}
    assert {str(f.relative_to(path)) for f in _cdc_files(path) if result.instant in f.name} == stats
    assert _cdc(str(path)) == before
    _w(str(path), opts, ["d"], 3)  # the next slice's changes read on
    assert _cdc(str(path))[-1] == ("u", "d", "d@1", "d@3")
    snap = sorted((r["key"], r["v"]) for r in read_table(str(path)).to_pylist())
    assert snap == sorted((r["key"], r["v"]) for r in hudi_rs_read(str(path)).to_pylist())
    assert not hr.validate_metadata(str(path))


@pytest.mark.parametrize(("version", "mode"), [("8", "OP_KEY_ONLY"), ("6", "DATA_BEFORE_AFTER")])
def test_compaction_changes_match_its_base_files(tmp_path: Path, version: str, mode: str) -> None:
    """Random upserts and deletes, then a compaction: its logged changes are the difference
    between each group's base file before and after (by key and sequence number)."""
    path = tmp_path / "t"
    _write(str(path), _mor(version, mode), 4, seed=11)
    tbl = HoodieTable.load(str(path))
    old = {s.file_id: s.base_file for s in tbl.view().latest_file_slices() if s.log_files}
    result = hr.compact(str(path), options=_mor(version, mode))
    assert result.instant is not None
    tbl = HoodieTable.load(str(path))
    want = []
    for s in tbl.view().latest_file_slices():
        if s.file_id not in old:
            continue

        def records(name: str | None, part: str = s.partition_path) -> dict[str, tuple]:
            if name is None:
                return {}
            t = pa.parquet.read_table(str(path / part / name))
            return {r["key"]: (r["_hoodie_commit_seqno"], r["v"]) for r in t.to_pylist()}

        a, b = records(old[s.file_id]), records(s.base_file)
        for k in a.keys() | b.keys():
            if k not in b:
                want.append(("d", k))
            elif k not in a:
                want.append(("i", k))
            elif a[k] != b[k]:
                want.append(("u", k))
    got = [(op, k) for op, k, *_ in _logged(path, result.instant)]
    assert got == sorted(want) and got
    assert len(read_table(str(path))) == len(hudi_rs_read(str(path)))


def test_a_failed_compaction_takes_its_cdc_files_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hoodie_ray.compaction.api import CompactionService

    path = tmp_path / "t"
    opts = _mor()
    _w(str(path), opts, ["a", "b"], 1)
    _w(str(path), opts, ["a"], 2)

    def fail(*_a: object, **_k: object) -> None:
        raise OSError("injected: the commit fails")

    monkeypatch.setattr(CompactionService, "commit", fail)
    with pytest.raises(hr.HoodieError):
        hr.compact(str(path), options=opts)
    assert not _cdc_files(path)
    monkeypatch.undo()
    result = hr.compact(str(path), options=opts)
    assert result.instant is not None and _logged(path, result.instant) == [
        ("u", "a", "a@1", "a@2")
    ]


def test_compaction_of_a_changelog_cdc_table(tmp_path: Path) -> None:
    """Changelog mode keeps ``_hoodie_operation`` in the files: the compaction's change log
    leaves it out of the images, as the CDC schema does."""
    path = tmp_path / "t"
    opts = {**_mor(), "changelog.enabled": "true"}
    _w(str(path), opts, ["a", "b"], 1)
    _w(str(path), opts, ["a"], 2)
    result = hr.compact(str(path), options=opts)
    assert result.instant is not None
    assert _logged(path, result.instant) == [("u", "a", "a@1", "a@2")]


def test_compaction_changes_are_one_row_a_key() -> None:
    """A base file holding a key twice (inserts skip the index) and a log update of it: one
    change for the key, as Java's logger keeps one entry a key."""
    from hoodie_ray.write.cdc import CdcSpec, CompactionChanges

    schema = pa.schema([("key", pa.string()), ("v", pa.string())])
    spec = CdcSpec("DATA_BEFORE_AFTER", schema, {"type": "record", "name": "r", "fields": []}, 8)

    def rows(keys: list[str], seqnos: list[str], v: list[str]) -> pa.Table:
        return pa.table(
            {
                "_hoodie_commit_time": ["1"] * len(keys),
                "_hoodie_commit_seqno": seqnos,
                "_hoodie_record_key": keys,
                "key": keys,
                "v": v,
            }
        )

    changes = CompactionChanges(
        spec, rows(["k", "k", "m"], ["1_0_1", "1_0_2", "1_0_3"], ["a", "b", "m"])
    )
    changes.observe(rows(["k", "m"], ["2_0_1", "1_0_3"], ["c", "m"]))
    got = changes.rows("3").to_pylist()
    assert [(r["op"], r["after"]["v"]) for r in got] == [("u", "c")]
