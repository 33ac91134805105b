"""CDC reads (``incremental_format="cdc"``) against a model of the changes each commit made:
random upserts, ``_hoodie_is_deleted`` deletes and partition moves (global index), with
compactions between them, on table versions 6 and 8, MOR and COW, over every range of
commits; snapshot reads of the same tables still equal hudi-rs's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieQueryError
from hoodie_ray.reader import read_table
from hoodie_ray.table import HoodieTable
from tests.conftest import hudi_rs_read

Change = tuple[str, str, str, tuple | None, tuple | None]  # ts_ms, op, key, before, after
_IMAGE = ("key", "ts", "v", "p")  # the table keeps no _hoodie_is_deleted column


def _image(row: dict[str, Any] | None) -> tuple | None:
    return None if row is None else tuple(row[c] for c in _IMAGE)


def _write_model(
    path: str, version: str, table_type: str, seed: int, n_commits: int = 7, **extra: str
) -> list[tuple[str, list[Change]]]:
    """Write ``n_commits`` random commits; return each data commit's instant and its model
    changes."""
    from hoodie_ray.job.client import HoodieWriteClient

    opts = {
        "hoodie.table.name": "cdc",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "hoodie.write.table.version": version,
        "table.type": table_type,
        "index.global.enabled": "true",
        "compaction.delta_commits": "2",
        **extra,
    }
    rng = np.random.default_rng(seed)
    state: dict[str, dict[str, Any]] = {}
    out: list[tuple[str, list[Change]]] = []
    for c in range(n_commits):
        n = 40 if c == 0 else 25
        keys = [f"k{k:03d}" for k in rng.choice(80, n, replace=False)]
        deleted = (rng.random(n) < 0.2) & (c > 0)
        parts = [f"p{int(x)}" for x in rng.integers(0, 3, n)]
        batch = pa.table(
            {
                "key": keys,
                "ts": pa.array([c + 1] * n, pa.int64()),
                "v": [f"c{c}-{k}" for k in keys],
                "p": parts,
                "_hoodie_is_deleted": pa.array(deleted),
            }
        )
        result = HoodieWriteClient(path, opts).write(batch)
        changes: list[Change] = []
        ts = result.instant
        for row in batch.to_pylist():
            old = state.get(row["key"])
            if row["_hoodie_is_deleted"]:
                if old is not None:
                    changes.append((ts, "d", row["key"], _image(old), None))
                    del state[row["key"]]
                continue
            state[row["key"]] = row
            if old is None:
                changes.append((ts, "i", row["key"], None, _image(row)))
            elif old["p"] != row["p"]:  # a partition move: out of one file group, into another
                changes.append((ts, "d", row["key"], _image(old), None))
                changes.append((ts, "i", row["key"], None, _image(row)))
            else:
                changes.append((ts, "u", row["key"], _image(old), _image(row)))
        out.append((ts, changes))
    return out


def _as_changes(t: pa.Table) -> list[Change]:
    rows = []
    for r in t.to_pylist():
        img = r["after"] or r["before"]
        rows.append((r["ts_ms"], r["op"], img["key"], _image(r["before"]), _image(r["after"])))
    return rows


@pytest.mark.parametrize(
    ("version", "table_type", "cdc_files"),
    [
        ("6", "MERGE_ON_READ", False),
        ("8", "MERGE_ON_READ", False),
        ("6", "COPY_ON_WRITE", False),
        ("8", "COPY_ON_WRITE", True),
    ],
)
def test_cdc_read_equals_the_model_over_every_range(
    tmp_path: Path, version: str, table_type: str, cdc_files: bool
) -> None:
    """``cdc_files``: a table with ``hoodie.table.cdc.enabled`` (its merges write .cdc logs)."""
    path = str(tmp_path / "t")
    extra = {"hoodie.table.cdc.enabled": "true"} if cdc_files else {}
    seed = int(version) * 7 + len(table_type)
    # 5 commits (suite time: was 7): every range is read, the ranges grow as the square
    commits = _write_model(path, version, table_type, seed=seed, n_commits=5, **extra)
    tbl = HoodieTable.load(path)
    if table_type == "MERGE_ON_READ":
        ops = {(tbl.metadata(i).operation_type or "") for i in tbl.commits()}
        assert "COMPACT" in ops  # compactions lie between the data commits
    instants = [None] + [ts for ts, _ in commits]
    for i, begin in enumerate(instants):
        for end in instants[i + 1 :]:
            got = read_table(
                path, query_type="incremental", incremental_format="cdc", begin=begin, end=end
            )
            assert got.schema.names == ["op", "ts_ms", "before", "after"]
            want = [
                ch
                for ts, chs in commits
                if (begin is None or ts > begin) and ts <= end
                for ch in chs
            ]
            assert sorted(_as_changes(got)) == sorted(want), (begin, end)
            # commit order: the ts_ms column never goes back
            ts_col = got["ts_ms"].to_pylist()
            assert ts_col == sorted(ts_col)
    mine = read_table(path).select(list(_IMAGE)).sort_by("key")
    assert mine.equals(hudi_rs_read(path).select(list(_IMAGE)).sort_by("key"))


def test_cdc_json_images_and_refusals(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    # suite time: 2 commits (was the default 7): only the second one's changes are read
    commits = _write_model(path, "8", "MERGE_ON_READ", seed=3, n_commits=2)
    got = read_table(
        path,
        query_type="incremental",
        incremental_format="cdc",
        begin=commits[0][0],
        end=commits[1][0],
        cdc_image_format="json",
    )
    assert got.schema.field("before").type == pa.string()
    row = next(r for r in got.to_pylist() if r["op"] == "u")
    before, after = json.loads(row["before"]), json.loads(row["after"])
    assert list(after) == list(_IMAGE) and before["key"] == after["key"]
    with pytest.raises(HoodieQueryError, match="incremental_format"):
        read_table(path, query_type="incremental", incremental_format="changes")
    with pytest.raises(HoodieQueryError, match="not 'snapshot'"):
        read_table(path, incremental_format="cdc")
    with pytest.raises(HoodieQueryError, match="columns and filters"):
        read_table(path, query_type="incremental", incremental_format="cdc", columns=["key"])
    with pytest.raises(HoodieQueryError, match="image format"):
        read_table(path, query_type="incremental", incremental_format="cdc", cdc_image_format="x")


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_cdc_of_overwrites_and_partition_deletes(tmp_path: Path, table_type: str) -> None:
    """A replaced file group's records are deletes, the overwrite's new groups inserts (Java's
    REPLACE_COMMIT and BASE_FILE_INSERT cases): a key an overwrite rewrites is a delete and an
    insert, not an update."""
    from hoodie_ray.job.client import HoodieWriteClient

    path = str(tmp_path / "t")
    opts = {
        "hoodie.table.name": "ov",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "hoodie.write.table.version": "8",
        "table.type": table_type,
    }

    def rows(keys: list[str], ts: int) -> pa.Table:
        return pa.table(
            {
                "key": keys,
                "ts": pa.array([ts] * len(keys), pa.int64()),
                "v": [f"{k}@{ts}" for k in keys],
                "p": [f"p{int(k[1:]) % 3}" for k in keys],
            }
        )

    state: dict[str, dict[str, Any]] = {}
    commits: list[tuple[str, list[Change]]] = []

    def step(batch: pa.Table | None, operation: str, **extra: str) -> None:
        o = {**opts, "write.operation": operation, **extra}
        inst = HoodieWriteClient(path, o).write(batch).instant
        assert inst is not None
        changes: list[Change] = []
        if operation == "upsert":
            assert batch is not None
            for r in batch.to_pylist():
                old = state.get(r["key"])
                changes.append((inst, "u" if old else "i", r["key"], _image(old), _image(r)))
                state[r["key"]] = r
        else:
            assert operation in ("insert_overwrite", "delete_partition")
            if operation == "insert_overwrite":
                assert batch is not None
                parts = set(batch["p"].to_pylist())
            else:
                parts = set(extra["hoodie.datasource.write.partitions.to.delete"].split(","))
            for k in [k for k, r in state.items() if r["p"] in parts]:
                changes.append((inst, "d", k, _image(state.pop(k)), None))
            for r in batch.to_pylist() if batch is not None else []:
                changes.append((inst, "i", r["key"], None, _image(r)))
                state[r["key"]] = r
        commits.append((inst, changes))

    step(rows([f"k{i}" for i in range(30)], 1), "upsert")
    step(rows([f"k{i}" for i in range(0, 30, 4)], 2), "upsert")
    step(rows([f"k{i}" for i in range(0, 40, 3) if i % 3 == 0], 3), "insert_overwrite")
    step(None, "delete_partition", **{"hoodie.datasource.write.partitions.to.delete": "p1"})
    step(rows([f"k{i}" for i in range(1, 40, 5)], 4), "upsert")
    for i, (begin, _) in enumerate([(None, None), *commits]):
        for end, _ in commits[i:]:
            got = read_table(
                path, query_type="incremental", incremental_format="cdc", begin=begin, end=end
            )
            want = [
                ch
                for ts, chs in commits
                if (begin is None or ts > begin) and ts <= end
                for ch in chs
            ]
            assert sorted(_as_changes(got)) == sorted(want), (begin, end)
    mine = read_table(path).select(list(_IMAGE)).sort_by("key")
    assert mine.equals(hudi_rs_read(path).select(list(_IMAGE)).sort_by("key"))


def test_a_group_whose_first_writes_were_archived_and_cleaned_is_refused(tmp_path: Path) -> None:
    """The commit that created a file group archived, its slice before the commit read cleaned:
    the read says so (it must not take the commit's updates for inserts and lose its deletes)."""
    from hoodie_ray.job.client import HoodieWriteClient

    path = str(tmp_path / "t")
    opts = {
        "hoodie.table.name": "ac",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "table.type": "COPY_ON_WRITE",
        "hoodie.metadata.enable": "false",
        "hoodie.parquet.small.file.limit": "0",
        "clean.retain_commits": "1",
        "archive.min_commits": "2",
        "archive.max_commits": "3",
        "hoodie.archive.automatic": "false",
    }

    def write(keys: list[str], part: str, ts: int, deleted: list[bool] | None = None) -> None:
        n = len(keys)
        cols: dict[str, Any] = {"key": keys, "ts": [ts] * n, "v": [ts] * n, "p": [part] * n}
        if deleted is not None:
            cols["_hoodie_is_deleted"] = deleted
        HoodieWriteClient(path, opts).write(pa.table(cols))

    write(["a", "b", "c"], "p0", 1)
    for i in range(2, 7):
        write([f"x{i}"], "p1", i)
    assert hr.archive(path, opts).instants
    write(["a", "b"], "p0", 9, deleted=[False, True])
    first = HoodieTable.load(path).commits()[0].timestamp
    with pytest.raises(HoodieQueryError, match="cleaned"):
        read_table(path, query_type="incremental", incremental_format="cdc", begin=first)


@pytest.mark.parametrize(
    ("version", "table_type"),
    [
        ("8", "MERGE_ON_READ"),
        ("6", "COPY_ON_WRITE"),
        ("6", "MERGE_ON_READ"),
        ("8", "COPY_ON_WRITE"),
    ],
)
def test_cdc_of_partial_updates_equals_the_model(
    tmp_path: Path, version: str, table_type: str
) -> None:
    """Partial updates (a null keeps the stored value), some arriving late (a lower ordering
    value: they only fill what the winner lacks), a compaction, deletes: each commit's CDC rows
    are the changes of the model's snapshot, a filled-in record included."""
    from hoodie_ray.job.client import HoodieWriteClient
    from tests.write.test_partial_update import _Model, _options

    path = str(tmp_path / "t")
    opts = _options(version, table_type)
    opts["hoodie.table.name"] = "cdc"
    model = _Model(table_type == "MERGE_ON_READ")
    rng = np.random.default_rng(11)
    keys = [f"k{i:02d}" for i in range(16)]
    t = 0.0
    gone: set[str] = set()
    for c in range(6):
        rows = []
        for k in keys if c == 0 else rng.choice([k for k in keys if k not in gone], 10):
            t += 1
            ts = t if c == 0 or rng.random() < 0.6 else t - 20.5 + t / 1000  # late: lower
            u = None if c and rng.random() < 0.5 else int(rng.integers(0, 100))
            w = None if c and rng.random() < 0.5 else f"w{c}"
            rows.append((str(k), (ts, u, w, bool(c == 5 and rng.random() < 0.2))))
        gone |= {k for k, v in rows if v[3]}
        before = model.snapshot()
        result = HoodieWriteClient(path, opts).write(
            pa.table(
                {
                    "key": [k for k, _ in rows],
                    "p": ["x"] * len(rows),
                    "ts": pa.array([v[0] for _, v in rows], pa.float64()),
                    "u": pa.array([v[1] for _, v in rows], pa.int64()),
                    "w": pa.array([v[2] for _, v in rows], pa.string()),
                    "_hoodie_is_deleted": [v[3] for _, v in rows],
                }
            )
        )
        model.commit(rows)
        after = model.snapshot()
        want = set()
        for k in set(before) | set(after):
            if k not in before:
                want.add(("i", k, after[k]))
            elif k not in after:
                want.add(("d", k, None))
            elif before[k] != after[k]:
                want.add(("u", k, after[k]))
        got = read_table(
            path,
            query_type="incremental",
            incremental_format="cdc",
            begin=_before_instant(path, result.instant),
            end=result.instant,
        )
        seen = {
            (
                r["op"],
                r["after"]["key"] if r["after"] else r["before"]["key"],
                None
                if r["after"] is None
                else (r["after"]["ts"], r["after"]["u"], r["after"]["w"]),
            )
            for r in got.to_pylist()
        }
        assert seen == want, c
        if c == 3 and table_type == "MERGE_ON_READ":
            hr.compact(path)
            model.compact()


def _before_instant(path: str, instant: str) -> str | None:
    earlier = [i.timestamp for i in HoodieTable.load(path).commits() if i.timestamp < instant]
    return earlier[-1] if earlier else None
