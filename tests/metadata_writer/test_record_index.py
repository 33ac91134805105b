"""The record index built and updated column-wise (``RecordIndexColumns``): the same HFile
bytes and the same changes as the per-record path it replaced (kept here as the model), and
Hudi's key-to-file-group rule checked against the Java sample's record index."""

from __future__ import annotations

import random
import types
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.metadata import records as R
from hoodie_ray.metadata.layout import RECORD_INDEX
from hoodie_ray.metadata_writer import writer as W
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat
from tests.conftest import hudi_rs_read
from tests.write.model import model_options, to_arrow


def _writer(tmp_path: Path) -> W.MetadataWriter:
    path = str(tmp_path / "t")
    HoodieWriteClient(path, model_options(version="8")).write(
        to_arrow([{"key": "a", "p": "x", "ts": 1, "v": 0}], True)
    )
    assert hudi_rs_read(path).column("key").to_pylist() == ["a"]
    return W.MetadataWriter(HoodieTable.load(path))


def _keys(rng: random.Random, n: int) -> list[str]:
    alphabet = "abcXYZ019-_:,é€😀"  # ASCII, two- and three-byte UTF-8, a surrogate pair
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def _entries(rng: random.Random) -> list[tuple[str, str, int, list[str]]]:
    ids = [f"{uuid.UUID(int=rng.getrandbits(128))}-{i}" for i in range(4)]
    ids += [str(uuid.UUID(int=rng.getrandbits(128))), "not-a-uuid-fg"]  # bare, encoding 1
    keys = _keys(rng, 900)
    out = []
    for i, fid in enumerate(ids):
        part = ["2024/01/01", "", "p=é"][i % 3]
        out.append((part, fid, 1_700_000_000_000 + i, keys[i * 150 : (i + 1) * 150]))
    out.append(("2024/01/01", ids[0], 1_700_000_000_000, keys[:40]))  # repeats: the later wins
    out.append(("", ids[1], 1_700_000_000_001, []))
    return out


def _frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    import hoodie_ray.hfile.writer as hw

    monkeypatch.setattr(hw, "time", types.SimpleNamespace(time=lambda: 1_700_000_000.0))


def test_column_wise_record_index_hfiles_are_the_per_record_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Base and log HFiles of every record-index file group, written from columns, are the
    bytes the per-record path (a record dict per key, ``_split_by_file_group``) wrote."""
    _frozen_clock(monkeypatch)
    w = _writer(tmp_path)
    entries = _entries(random.Random(5))
    records: dict[str, dict[str, Any]] = {}
    for part, fid, ms, keys in entries:
        for key in keys:
            k, r = R.record_index_record(key, part, fid, ms)
            records[k] = r
    cols = R.RecordIndexColumns.of_locations(
        [(p, f, ms, pa.array(k, pa.string())) for p, f, ms, k in entries], w.table_version
    )
    assert cols.sorted_unique().to_records() == {
        k: R.encode_records([r], w.table_version)[0] for k, r in records.items()
    }
    old_groups = W._split_by_file_group(records, 10)
    new_groups = cols.split(10)
    assert sum(map(len, old_groups)) == len(records) and all(old_groups)
    for old, new in zip(old_groups, new_groups, strict=True):
        new = new.sorted_unique()
        for base in (True, False):
            assert w._hfile_columns(new, base=base) == w._hfile(old, base=base)
    assert w._hfile_columns(R.RecordIndexColumns.empty(), base=True) == w._hfile({}, base=True)


def _per_record_changes(meta: HoodieCommitMetadata, ms: int) -> tuple[dict, set]:
    """The per-key rule the column-wise code replaced (the model)."""
    upserts: dict[str, bytes] = {}
    placed: set[str] = set()
    gone: set[str] = set()
    for part, stat in meta.iter_write_stats():
        ops = stat.record_key_ops or []
        if not ops or not stat.file_id:
            continue
        keys = pa.concat_arrays([k for k, _ in ops]).to_pylist()
        flags = [g for k, g in ops for _ in range(len(k))]
        for key, gained in dict(zip(keys, flags, strict=True)).items():
            if gained:
                _, r = R.record_index_record(key, part or "", stat.file_id, ms)
                upserts[key] = R.encode_records([r], 8)[0]
                placed.add(key)
            else:
                gone.add(key)
    return upserts, gone - placed


def test_column_wise_record_index_changes_follow_the_per_key_rule(tmp_path: Path) -> None:
    """Keys gained, lost, moved between file groups and partitions, repeated inside one group's
    changes: the column-wise changes are the per-key rule's."""
    w = _writer(tmp_path)
    rng = random.Random(11)
    keys = _keys(rng, 300)
    for trial in range(20):
        stats: dict[str, list[HoodieWriteStat]] = {}
        for g in range(rng.randint(1, 5)):
            ops = [
                (pa.array(rng.sample(keys, rng.randint(0, 40)), pa.string()), rng.random() < 0.6)
                for _ in range(rng.randint(0, 4))
            ]
            fid = f"{uuid.UUID(int=rng.getrandbits(128))}-0" if g != 3 else "plain-id"
            st = HoodieWriteStat(file_id=fid, path=f"p{g % 2}/{fid}.parquet")
            st.record_key_ops = ops
            stats.setdefault(f"p{g % 2}", []).append(st)
        meta = HoodieCommitMetadata(partition_to_write_stats=stats)
        instant = "20260101000000000"
        ch = W._Changes()
        w._record_index_changes(instant, meta, ch)
        ms = R.instant_to_epoch_ms(instant, "LOCAL")
        want_upserts, want_deletes = _per_record_changes(meta, ms)
        got = ch.columns[RECORD_INDEX].to_records() if RECORD_INDEX in ch.columns else {}
        assert got == want_upserts, trial
        assert ch.deletes.get(RECORD_INDEX, set()) == want_deletes, trial


def test_java_record_index_keys_hash_to_their_file_group_and_values_encode_alike(
    shared_sample: Any,
) -> None:
    """Every key of the Java v9 sample's record index lies in the file group the vectorised
    key hash names, and its value is the bytes ``record_index_value`` encodes for it."""
    root = shared_sample("sample_mor_avro_v9_txns_complex_meta")
    mdt = HoodieTable.load(str(root)).metadata_table
    slices = mdt.file_slices(RECORD_INDEX)
    seen = 0
    for s in slices:
        got = mdt.slice_records(s)
        keys = pa.array(sorted(got), pa.string())
        groups = R.RecordIndexColumns(keys, R.np.zeros(len(keys), R.np.int32), [b""])
        want = int(s.file_id.split("-")[2])
        assert set(groups.file_group_indexes(len(slices)).tolist()) <= {want}
        for value, schema in got.values():
            part, fid, ms = R.decode_record_index(R.decode_value(value, schema))
            assert R.record_index_value(part, fid, ms, 9) == bytes(value)
            seen += 1
    assert seen > 0


def test_record_index_compaction_writes_the_per_record_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An MDT compaction of record-index slices (base + logs with upserts, moves, deletes)
    re-encodes each distinct value once; the base HFile is the per-record path's bytes."""
    from tests.write.model import TableModel, Workload

    _frozen_clock(monkeypatch)
    path = str(tmp_path / "t")
    opts = model_options(
        {"hoodie.metadata.record.index.enable": "true"},
        table_type="MERGE_ON_READ",
        version="8",
        small_files=True,
    )
    wl, model = Workload(23, keys=90), TableModel()
    client = HoodieWriteClient(path, opts)
    for rows in (
        wl.rows_for(wl.keys[:60]),
        wl.rows_for(wl.keys[40:90]),
        [{**wl._row(k), "_hoodie_is_deleted": True, "ts": 10**9} for k in wl.keys[:7]],
    ):
        client.write(to_arrow(rows, True))
        model.upsert(rows)
    w = W.MetadataWriter(HoodieTable.load(path))
    mdt = w.reader()
    slices = [fs for fs in mdt.file_slices(RECORD_INDEX) if fs.log_files]
    assert slices
    name = "record-index-0000-0_0-2-0_20990101000000000.hfile"
    for fs in slices:
        merged = w._merged_slice(mdt, RECORD_INDEX, fs)
        for r in merged.values():
            r["_hoodie_file_name"] = name
        cols = w._merged_index_columns(mdt, fs, name)
        assert len(cols) == len(merged) and len(cols.values) < max(2, len(merged))
        assert w._hfile_columns(cols, base=True) == w._hfile(merged, base=True)
    live = {k for fs in mdt.file_slices(RECORD_INDEX) for k in mdt.slice_records(fs)}
    assert live == set(model.rows)
    # the writers' key-index bootstrap: the keys of each data file group, as its files say
    from hoodie_ray.reader.index_bootstrap import bootstrap_entries

    table = HoodieTable.load(path)
    files = bootstrap_entries(table, table.view().latest_file_slices(), use_record_index=False)
    by_group = {(p, f): sorted(k.to_pylist()) for p, f, k in files if len(k)}
    assert len(by_group) > 1
    located = mdt.record_index_by_file_group()
    assert {g: sorted(ks) for g, ks in located.items()} == by_group
    assert w.compact(force=True) is not None
    from hoodie_ray.job import maintenance

    assert maintenance.validate_metadata(path) == []
    assert sorted(hudi_rs_read(path).column("key").to_pylist()) == sorted(model.rows)


@pytest.mark.parametrize("compiled", [False, True])
def test_record_index_compaction_files_are_the_per_record_paths_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    """The files an MDT compaction writes for the record index (slices merged column-wise:
    HFiles split into Arrow columns, the newest copy of each key by a stable sort, values
    dictionary-encoded) are byte for byte what the per-record path writes from
    ``slice_records`` (clock frozen), with the compiled HFile walk and with the plain loop;
    keys deleted and written again, moved and updated in later delta commits included."""
    from hoodie_ray import jit
    from hoodie_ray.file_group.naming import parse_base_file_name
    from hoodie_ray.hfile import reader as hr_reader
    from tests.write.model import TableModel, Workload

    if compiled and not jit.enabled():
        pytest.skip("numba is not available (HOODIE_RAY_NO_JIT or not installed)")
    monkeypatch.setattr(hr_reader, "_use_kernel", lambda entries: compiled)
    _frozen_clock(monkeypatch)
    path = str(tmp_path / "t")
    opts = model_options(
        {
            "hoodie.metadata.record.index.enable": "true",
            "hoodie.metadata.compact.max.delta.commits": "100",
        },
        table_type="MERGE_ON_READ",
        version="8",
        small_files=True,
    )
    wl, model = Workload(31, keys=120), TableModel()
    client = HoodieWriteClient(path, opts)
    for rows in (
        wl.rows_for(wl.keys[:80]),
        [{**wl._row(k), "_hoodie_is_deleted": True, "ts": 10**9} for k in wl.keys[:10]],
        wl.rows_for(wl.keys[5:120]),  # keys 5-9 come back, 80-119 are new
        [{**wl._row(k), "_hoodie_is_deleted": True, "ts": 10**9} for k in wl.keys[100:104]],
    ):
        client.write(to_arrow(rows, True))
        model.upsert(rows)
    w = W.MetadataWriter(HoodieTable.load(path))
    mdt = w.reader()
    expected: dict[str, bytes] = {}  # file id -> the per-record path's base file
    for fs in mdt.file_slices(RECORD_INDEX):
        records = mdt.slice_records(fs)
        sc = mdt.slice_columns(fs)  # the same newest entries, sorted by key bytes
        assert sc.keys.to_pylist() == sorted(k.encode() for k in records)
        got = zip(sc.keys.to_pylist(), sc.values.to_pylist(), sc.schema_ids.tolist(), strict=True)
        assert {k.decode(): (v, sc.schemas[i]) for k, v, i in got} == records
        if not fs.log_files:
            continue
        merged = {k: R.decode_value(v, schema) for k, (v, schema) in records.items()}
        live = {k: r for k, r in merged.items() if not R.is_deleted_record(r)}
        expected[fs.file_id] = live  # type: ignore[assignment]
    assert len(expected) > 1
    ts = w.compact()
    assert ts is not None
    rdir = Path(path) / ".hoodie" / "metadata" / RECORD_INDEX
    seen = 0
    for f in rdir.glob(f"*_{ts}.hfile"):
        fid = parse_base_file_name(f.name).file_id
        live = expected[fid]  # type: ignore[assignment]
        for r in live.values():  # type: ignore[attr-defined]
            r["_hoodie_file_name"] = f.name
        assert f.read_bytes() == w._hfile(live, base=True)  # type: ignore[arg-type]
        seen += 1
    assert seen == len(expected)
    assert sorted(hudi_rs_read(path).column("key").to_pylist()) == sorted(model.rows)
    located = W.MetadataWriter(HoodieTable.load(path)).reader().record_index_by_file_group()
    assert sorted(k for ks in located.values() for k in ks) == sorted(model.rows)


def test_scheduled_compaction_leaves_index_groups_with_small_logs(tmp_path: Path) -> None:
    """With ``min.log.ratio`` set, a scheduled MDT compaction rewrites ``files`` but leaves
    record-index and secondary-index file groups whose logs are small against their base files until
    ``max.delta.commits`` delta commits followed their base, also when later commits (updates
    in place) give them no more logs; the data table's archival keeps the instants their
    logs name meanwhile, and goes on after; every step validates and reads right in hudi-rs
    and through the record index."""
    from hoodie_ray.file_group.naming import parse_log_file_name
    from hoodie_ray.metadata.layout import FILES
    from hoodie_ray.metadata_writer.validate import validate_metadata_table
    from tests.write.model import TableModel, Workload

    path = str(tmp_path / "t")
    opts = model_options(
        {
            "hoodie.metadata.record.index.enable": "true",
            "hoodie.metadata.compact.max.delta.commits": "3",
            "hoodie.metadata.compact.index.min.log.ratio": "100",
            "hoodie.metadata.compact.index.max.delta.commits": "7",
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
            "hoodie.cleaner.commits.retained": "1",
        },
        table_type="MERGE_ON_READ",
        version="8",
    )
    wl, model = Workload(7, keys=400), TableModel()
    client = HoodieWriteClient(path, opts)
    first = wl.rows_for(wl.keys[:300])
    client.write(to_arrow(first, True))
    model.upsert(first)
    index = hr.create_index(path, "s_idx", "s")  # a secondary index is left alike
    start = HoodieTable.load(path).active_timeline.earliest_active()
    deferred = deferred_secondary = False
    for c in range(12):
        if c < 3:  # new keys and moves: every record-index group gets logs
            rows = wl.rows_for(wl.keys[300 + 10 * c : 310 + 10 * c] + wl.keys[c : c + 20])
        else:  # updates in place: no record-index change, no new logs
            rows = [{**model.rows[k], "ts": 10**6 + c} for k in sorted(model.rows)[:30]]
        client.write(to_arrow(rows, True))
        model.upsert(rows)
        table = HoodieTable.load(path)
        w = W.MetadataWriter(table)
        last = w.latest_compaction_time()
        mdt = w.reader()
        ri = mdt.file_slices(RECORD_INDEX)
        files_compacted = last and all(fs.base_instant == last for fs in mdt.file_slices(FILES))
        if files_compacted and any(fs.log_files and fs.base_instant < last for fs in ri):
            deferred = True
            through = w.compacted_through()
            assert through is not None and last is not None and through < last
        deferred_secondary |= bool(
            files_compacted
            and any(fs.log_files and fs.base_instant < last for fs in mdt.file_slices(index))
        )
        # the data instants the logs name stay on the active timeline (never archived)
        named = {parse_log_file_name(n).instant for fs in ri for n in fs.log_files}
        assert named <= {i.timestamp for i in table.active_timeline.reload().instants}
        assert validate_metadata_table(table) == []
        located = mdt.record_index_by_file_group()
        assert sorted(k for ks in located.values() for k in ks) == sorted(model.rows)
        assert sorted(hudi_rs_read(path).column("key").to_pylist()) == sorted(model.rows)
        got = hr.read(path, filters=[("s", "=", "x")]).column("key").to_pylist()
        assert sorted(got) == sorted(k for k, r in model.rows.items() if r["s"] == "x")
    assert deferred and deferred_secondary
    # the groups that got no more logs were compacted all the same, and archival went on
    w = W.MetadataWriter(HoodieTable.load(path))
    assert w.compacted_through() == w.latest_compaction_time()
    assert HoodieTable.load(path).active_timeline.earliest_active() > start


def test_create_index_builds_the_record_index_of_an_existing_table(tmp_path: Path) -> None:
    """``hr.create_index(kind="record_index")`` on a table written without one: every live key
    (log inserts and deletes included) located, progress a call a file slice, the validator
    clean, hudi-rs reading the model; later writes keep it; wrong names and columns refused
    with the table unchanged."""
    from hoodie_ray.metadata_writer.validate import validate_metadata_table
    from tests.write.model import TableModel, Workload

    path = str(tmp_path / "t")
    opts = model_options(table_type="MERGE_ON_READ", version="8", small_files=True)
    # suite time: 150 keys (was 300; 115 file slices, 24 of them with logs, was 217 and 48)
    wl, model = Workload(11, keys=150), TableModel()
    client = HoodieWriteClient(path, opts)
    for c in range(3):
        rows = wl.rows_for(wl.keys[40 * c : 40 * c + 60])
        client.write(to_arrow(rows, True))
        model.upsert(rows)
    gone = sorted(model.rows)[:7]
    HoodieWriteClient(path, {**opts, "write.operation": "delete"}).write(
        to_arrow(wl.rows_for(gone), True)
    )
    model.delete_keys(gone)
    before = sorted(p.name for p in (tmp_path / "t/.hoodie/timeline").iterdir())
    with pytest.raises(hr.HoodieInputError, match="name is 'record_index'"):
        hr.create_index(path, "ri", "key", kind="record_index")
    with pytest.raises(hr.HoodieInputError, match="column 'p' is not the table's record key"):
        hr.create_index(path, "record_index", "p", kind="record_index")
    assert sorted(p.name for p in (tmp_path / "t/.hoodie/timeline").iterdir()) == before
    assert RECORD_INDEX not in HoodieTable.load(path).metadata_partitions

    calls: list[tuple[int, int]] = []
    part = hr.create_index(
        path,
        "record_index",
        "key",
        kind="record_index",
        on_progress=lambda d, t: calls.append((d, t)),
    )
    assert part == RECORD_INDEX
    table = HoodieTable.load(path)
    total = len(table.view().latest_file_slices())
    assert total > 1 and calls == [(d, total) for d in range(1, total + 1)]
    assert RECORD_INDEX in table.metadata_partitions
    located = table.metadata_table.record_index_by_file_group()
    assert sorted(k for ks in located.values() for k in ks) == sorted(model.rows)
    assert validate_metadata_table(table) == [] and hr.validate_metadata(path) == []
    with pytest.raises(hr.HoodieUnsupportedError, match="exists already"):
        hr.create_index(path, "record_index", "key", kind="record_index")

    bucket = str(tmp_path / "b")
    HoodieWriteClient(
        bucket, {**opts, "index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"}
    ).write(to_arrow(wl.rows_for(wl.keys[:20]), True))
    with pytest.raises(hr.HoodieUnsupportedError, match="bucket index"):
        hr.create_index(bucket, "record_index", "key", kind="record_index")
    assert RECORD_INDEX not in HoodieTable.load(bucket).metadata_partitions

    rows = wl.rows_for(wl.keys[100:130])  # updates and new keys: the index follows
    HoodieWriteClient(path, opts).write(to_arrow(rows, True))
    model.upsert(rows)
    table = HoodieTable.load(path)
    located = table.metadata_table.record_index_by_file_group()
    assert sorted(k for ks in located.values() for k in ks) == sorted(model.rows)
    assert hr.validate_metadata(path) == []
    assert sorted(hudi_rs_read(path).column("key").to_pylist()) == sorted(model.rows)
