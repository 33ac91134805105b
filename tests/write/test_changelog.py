"""Flink's changelog mode (``changelog.enabled``): every change of a key is kept in the
merge-on-read logs with its ``_hoodie_operation``, unmerged within a checkpoint; snapshot
reads (ours and hudi-rs's) still merge; ``incremental_format="changelog"`` returns the changes
of every range of commits, against a model of random commits on table versions 6 and 8."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieInputError, HoodieOptionError, HoodieQueryError
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.table import HoodieTable
from tests.conftest import hudi_rs_read

OPTIONS = {
    "hoodie.table.name": "changes",
    "hoodie.datasource.write.recordkey.field": "key",
    "hoodie.datasource.write.partitionpath.field": "p",
    "precombine.field": "ts",
    "table.type": "MERGE_ON_READ",
    "changelog.enabled": "true",
    "compaction.schedule.enabled": "false",
}

Change = tuple[str, str, str, Any, Any]  # instant, key, operation, ts, v


def _part(key: str) -> str:
    return f"p{int(key[1:]) % 2}"


def _commit(path: str, opts: dict[str, str], rows: list[dict[str, Any]], explicit: bool) -> str:
    cols: dict[str, Any] = {
        "key": [r["key"] for r in rows],
        "ts": pa.array([r["ts"] for r in rows], pa.int64()),
        "v": [r["v"] for r in rows],
        "p": [_part(r["key"]) for r in rows],
        "_hoodie_is_deleted": pa.array([r["op"] == "D" for r in rows]),
    }
    if explicit:
        cols["_hoodie_operation"] = [r["op"] for r in rows]
    result = HoodieWriteClient(path, opts).write(pa.table(cols))
    assert result.instant is not None
    return result.instant


def _write_model(path: str, version: str, seed: int) -> tuple[list[Change], dict[str, tuple]]:
    """Six commits of random changes (repeated keys within a commit, -U/U pairs, deletes)
    and one delete by key; the changes as the model says they were written, and the state."""
    opts = {**OPTIONS, "hoodie.write.table.version": version}
    rng = np.random.default_rng(seed)
    state: dict[str, tuple] = {}
    changes: list[Change] = []
    ts = 0
    for c in range(6):
        rows: list[dict[str, Any]] = []
        now = dict(state)
        for _ in range(30):
            key = f"k{int(rng.integers(0, 24)):02d}"
            ts += 1
            if key in now and key in state and rng.random() < 0.25:
                # (a key created and deleted in one checkpoint leaves no change: its
                # delete finds no location, and its rows go with it)
                rows.append({"key": key, "ts": ts, "v": f"d{ts}", "op": "D"})
                del now[key]
                continue
            if key in now and rng.random() < 0.3:  # the before image, then the after
                old_ts, old_v = now[key]
                rows.append({"key": key, "ts": old_ts, "v": old_v, "op": "-U"})
            op = "U" if key in now else "I"
            rows.append({"key": key, "ts": ts, "v": f"c{c}-{ts}", "op": op})
            now[key] = (ts, f"c{c}-{ts}")
        explicit = any(r["op"] == "-U" for r in rows) or c % 2 == 1
        if not explicit:
            rows = [r for r in rows if r["op"] != "-U"]
        instant = _commit(path, opts, rows, explicit)
        changes += [(instant, r["key"], r["op"], r["ts"], r["v"]) for r in rows]
        state = now
    gone = sorted(state)[:3]  # a delete by key: no ordering value, a delete block
    result = HoodieWriteClient(path, {**opts, "hoodie.datasource.write.operation": "delete"}).write(
        pa.table({"key": gone, "p": [_part(k) for k in gone]})
    )
    assert result.instant is not None
    changes += [(result.instant, k, "D", None, None) for k in gone]
    for k in gone:
        del state[k]
    return changes, state


def _changelog(path: str, begin: str | None = None, end: str | None = None) -> list[Change]:
    t = hr.read(
        path, query_type="incremental", begin=begin, end=end, incremental_format="changelog"
    )
    return sorted(
        (
            r["_hoodie_commit_time"],
            r["key"] or r["_hoodie_record_key"],
            r["_hoodie_operation"],
            r["ts"],
            r["v"],
        )
        for r in t.to_pylist()
    )


def _snapshot(t: pa.Table) -> dict[str, tuple]:
    return {r["key"]: (r["ts"], r["v"]) for r in t.select(["key", "ts", "v"]).to_pylist()}


@pytest.mark.parametrize("version", ["6", "8"])
def test_changelog_model(tmp_path: Path, version: str) -> None:
    path = str(tmp_path / "t")
    changes, state = _write_model(path, version, seed=int(version))
    # snapshot reads still merge, ours and hudi-rs's
    assert _snapshot(hr.read(path)) == state
    assert _snapshot(hudi_rs_read(path)) == state
    # every change kept, in every range of commits (positions: completion times on 8+)
    tbl = HoodieTable.load(path)
    commits = tbl.commits()
    pos = [(i.completion_time or i.timestamp) if version != "6" else i.timestamp for i in commits]
    by_instant = dict(zip([i.timestamp for i in commits], pos, strict=True))
    assert _changelog(path) == sorted(changes)
    for a in range(len(pos)):
        for b in range(a, len(pos)):
            begin = pos[a - 1] if a else None
            want = sorted(
                ch
                for ch in changes
                if (begin is None or by_instant[ch[0]] > begin) and by_instant[ch[0]] <= pos[b]
            )
            assert _changelog(path, begin, pos[b]) == want, (a, b)
    # the files keep the operation as Java's sixth meta column; the latest-state incremental
    # query still merges
    latest = hr.read(path, query_type="incremental")
    assert latest.schema.names[5] == "_hoodie_operation"
    assert set(latest.column("_hoodie_operation").to_pylist()) <= {"I", "U"}
    # compaction merges the changes (best effort, as Flink's): the snapshot stays, the
    # base files keep each winner's operation, and a later commit's changes read exactly
    hr.compact(path)
    assert _snapshot(hr.read(path)) == state
    assert _snapshot(hudi_rs_read(path)) == state
    rows = [
        {"key": "k90", "ts": 10_000, "v": "x", "op": "I"},
        {"key": "k90", "ts": 10_001, "v": "y", "op": "U"},
    ]
    instant = _commit(path, {**OPTIONS, "hoodie.write.table.version": version}, rows, False)
    after = hr.read(path, query_type="incremental", begin=max(pos), incremental_format="changelog")
    got = [
        (r["_hoodie_commit_time"], r["key"], r["_hoodie_operation"], r["v"])
        for r in after.to_pylist()
        if r["_hoodie_commit_time"] == instant
    ]
    assert got == [(instant, "k90", "I", "x"), (instant, "k90", "U", "y")]


# suite time: changelog writes and reads (the write core the actors run) in CI in
# test_changelog_model; read_ray and read_stream of other formats in tests/ray/test_datasource.py
@pytest.mark.slow
def test_changelog_on_ray_stream_writer(tmp_path: Path, ray_session: Any) -> None:
    """The Ray topology keeps every change of a checkpoint, routed by every task."""
    path = str(tmp_path / "t")
    opts = {**OPTIONS, "write.tasks": "2", "write.bucket_assign.tasks": "2"}
    with hr.HoodieStreamWriter(path, opts) as w:
        w.write(
            pa.table(
                {
                    "key": ["a", "b", "a", "c"],
                    "ts": [1, 1, 2, 3],
                    "v": ["1", "2", "3", "4"],
                    "p": ["x", "x", "x", "y"],
                }
            )
        )
        w.checkpoint()
        w.write(
            pa.table(
                {
                    "key": ["a", "c", "c"],
                    "ts": [4, 5, 6],
                    "v": ["5", "6", "7"],
                    "p": ["x", "y", "y"],
                    "_hoodie_operation": ["D", "-U", "U"],
                }
            )
        )
        w.checkpoint()
    got = sorted(
        (r["key"], r["_hoodie_operation"], r["v"])
        for r in hr.read(path, query_type="incremental", incremental_format="changelog").to_pylist()
    )
    assert got == sorted(
        [
            ("a", "I", "1"),
            ("b", "I", "2"),
            ("a", "U", "3"),
            ("c", "I", "4"),
            ("a", "D", "5"),
            ("c", "-U", "6"),
            ("c", "U", "7"),
        ]
    )
    assert _snapshot(hudi_rs_read(path)) == {"b": (1, "2"), "c": (6, "7")}
    ds = hr.read_ray(path, query_type="incremental", incremental_format="changelog")
    assert ds.count() == 7
    batches = list(hr.read_stream(path, start="earliest", incremental_format="changelog"))
    assert [b.table.num_rows for b in batches] == [4, 3]
    assert batches[1].table.column("_hoodie_operation").to_pylist().count("D") == 1


def test_changelog_refusals(tmp_path: Path) -> None:
    path = str(tmp_path / "cow")
    with pytest.raises(HoodieOptionError, match="changelog.enabled=true needs a MERGE_ON_READ"):
        HoodieWriteClient(path, {**OPTIONS, "table.type": "COPY_ON_WRITE"}).write(
            pa.table({"key": ["a"], "ts": [1], "v": ["x"], "p": ["x"]})
        )
    assert not (tmp_path / "cow" / ".hoodie" / "hoodie.properties").exists()
    path = str(tmp_path / "mor")
    first = pa.table({"key": ["a"], "ts": [1], "v": ["x"], "p": ["x"]})
    HoodieWriteClient(path, OPTIONS).write(first)
    bad = pa.table(
        {
            "key": ["a", "b"],
            "ts": [2, 2],
            "v": ["y", "z"],
            "p": ["x", "x"],
            "_hoodie_operation": ["U", "upsert"],
        }
    )
    with pytest.raises(HoodieInputError, match=r"column _hoodie_operation: 'UPSERT' \(row 1\)"):
        HoodieWriteClient(path, OPTIONS).write(bad)
    assert len(HoodieTable.load(path).commits()) == 1
    with pytest.raises(HoodieQueryError, match="changelog.*for incremental queries"):
        hr.read(path, incremental_format="changelog")


def test_changelog_partition_moves_and_record_index(tmp_path: Path) -> None:
    """Version 9 with a record index and the global index: a key that moves partition leaves
    a D of its old copy there and its changes in the new one; the index follows the moves and
    deletes (a later write finds every key), and hudi-rs reads what we read, compacted too."""
    path = str(tmp_path / "t")
    opts = {
        **OPTIONS,
        "hoodie.write.table.version": "9",
        "hoodie.metadata.record.index.enable": "true",
        "index.global.enabled": "true",
    }

    def write(keys: list[str], parts: list[str], ts: list[int], deleted: list[bool]) -> None:
        HoodieWriteClient(path, opts).write(
            pa.table(
                {
                    "key": keys,
                    "ts": pa.array(ts, pa.int64()),
                    "v": [f"v{t}" for t in ts],
                    "p": parts,
                    "_hoodie_is_deleted": deleted,
                }
            )
        )

    write(["a", "b", "a", "c"], ["x", "x", "x", "y"], [1, 1, 2, 1], [False] * 4)
    write(["a", "c", "c", "b"], ["y", "y", "y", "x"], [5, 5, 6, 7], [False, False, False, True])
    write(["a", "d"], ["y", "x"], [9, 9], [False, False])
    want = {"a": (9, "v9"), "c": (6, "v6"), "d": (9, "v9")}
    assert _snapshot(hr.read(path)) == want
    assert _snapshot(hudi_rs_read(path)) == want
    got = sorted(
        (r["_hoodie_record_key"], r["_hoodie_partition_path"], r["_hoodie_operation"], r["v"])
        for r in hr.read(path, query_type="incremental", incremental_format="changelog").to_pylist()
    )
    assert got == [
        ("a", "x", "D", None),  # the move's delete of the old copy (no ordering value)
        ("a", "x", "I", "v1"),
        ("a", "x", "U", "v2"),
        ("a", "y", "I", "v5"),
        ("a", "y", "U", "v9"),
        ("b", "x", "D", "v7"),
        ("b", "x", "I", "v1"),
        ("c", "y", "I", "v1"),
        ("c", "y", "U", "v5"),
        ("c", "y", "U", "v6"),
        ("d", "x", "I", "v9"),
    ]
    hr.compact(path)
    assert _snapshot(hudi_rs_read(path)) == want
