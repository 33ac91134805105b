"""A plain dict model of a table, random workloads, and the shared builders of the model tests:
the write options of a model table (:func:`model_options`), one workload commit written and
applied to the model (:meth:`TableModel.write`), the hudi-rs comparison
(:meth:`TableModel.assert_hudi_rs_reads`), and random commits checked after each
(:func:`run_random_commits`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from hoodie_ray.job.client import HoodieWriteClient

SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("p", pa.string()),
        ("ts", pa.int64()),
        ("v", pa.int64()),
        ("s", pa.string()),
    ]
)
OPTIONS = {
    "hoodie.table.name": "model",
    "hoodie.datasource.write.recordkey.field": "key",
    "hoodie.datasource.write.partitionpath.field": "p",
    "precombine.field": "ts",
}
#: A version-6 metadata table: files and the record index (0.x keeps no statistics here).
V6_MDT = {
    "hoodie.metadata.enable": "true",
    "hoodie.metadata.record.index.enable": "true",
    "index.global.enabled": "true",
}
#: A version-8 metadata table with the record index and column / partition statistics.
V8_MDT = {
    **V6_MDT,
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.metadata.index.partition.stats.enable": "true",
}
#: Small files, so inserts spread over several file groups and small-file packing runs.
SMALL_FILES = {
    "hoodie.parquet.max.file.size": "4096",
    "hoodie.parquet.small.file.limit": "2048",
    "hoodie.copyonwrite.record.size.estimate": "200",
}


@dataclass
class TableModel:
    """key -> row; event-time upserts, partition moves and deletes as Hudi's Flink writer does."""

    rows: dict[str, dict] = field(default_factory=dict)

    def upsert(self, batch: list[dict]) -> None:
        # precombine within the batch: highest ts wins, ties the later row
        latest: dict[str, dict] = {}
        for r in batch:
            cur = latest.get(r["key"])
            if (
                cur is None
                or (r["ts"] is not None and (cur["ts"] is None or r["ts"] >= cur["ts"]))
                or r["ts"] is None
            ):
                latest[r["key"]] = r
        for k, r in latest.items():
            old = self.rows.get(k)
            deleted = r.get("_hoodie_is_deleted", False)
            if old is None:
                if not deleted:
                    self.rows[k] = _strip(r)
                continue
            moved = old["p"] != r["p"]
            newer = old["ts"] is None or r["ts"] is None or r["ts"] >= old["ts"]
            if moved and not deleted:
                # global index, event time: a newer record moves the key (delete in the old
                # partition, insert in the new one); an older one loses where it is
                if newer:
                    self.rows[k] = _strip(r)
                continue
            if newer:
                if deleted:
                    del self.rows[k]
                else:
                    self.rows[k] = _strip(r)

    def delete_keys(self, keys: list[str]) -> None:
        for k in keys:
            self.rows.pop(k, None)

    def overwrite(self, batch: list[dict], partitions: Sequence[str] | None) -> None:
        """insert_overwrite (``partitions``: those the batch writes) or, with None,
        insert_overwrite_table: the replaced partitions hold the batch's rows only."""
        gone = set(partitions) if partitions is not None else None
        self.rows = {k: r for k, r in self.rows.items() if gone is not None and r["p"] not in gone}
        for r in batch:
            self.rows[r["key"]] = _strip(r)

    def delete_partitions(self, partitions: Sequence[str]) -> None:
        self.rows = {k: r for k, r in self.rows.items() if r["p"] not in set(partitions)}

    def insert_new(self, batch: list[dict]) -> None:
        for r in batch:
            assert r["key"] not in self.rows
            self.rows[r["key"]] = _strip(r)

    def write(
        self,
        path: str | Path,
        options: Mapping[str, str],
        kind: str,
        rows: list[dict],
        client: HoodieWriteClient | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> Any:
        """Write one :class:`Workload` commit with a write client and apply it to the model;
        returns what the write returned. ``delete``: the rows' keys (``write.operation=delete``);
        ``insert``: ``write.operation=insert``; any other kind: an upsert (with the delete flag)
        through ``client``, or a new client when none is given."""
        if kind == "delete":
            ops = {**options, "write.operation": "delete"}
            res = HoodieWriteClient(str(path), ops, storage_options).write(keys_table(rows))
            self.delete_keys([r["key"] for r in rows])
        elif kind == "insert":
            ops = {**options, "write.operation": "insert"}
            res = HoodieWriteClient(str(path), ops, storage_options).write(to_arrow(rows, False))
            self.insert_new(rows)
        elif kind in ("insert_overwrite", "insert_overwrite_table"):
            ops = {**options, "write.operation": kind}
            res = HoodieWriteClient(str(path), ops, storage_options).write(to_arrow(rows, False))
            parts = sorted({r["p"] for r in rows}) if kind == "insert_overwrite" else None
            self.overwrite(rows, parts)
        elif kind == "delete_partition":
            parts = [r["p"] for r in rows]
            ops = {
                **options,
                "write.operation": kind,
                "hoodie.datasource.write.partitions.to.delete": ",".join(parts),
            }
            res = HoodieWriteClient(str(path), ops, storage_options).write(to_arrow([], False))
            self.delete_partitions(parts)
        else:
            if client is None:
                client = HoodieWriteClient(str(path), dict(options), storage_options)
            res = client.write(to_arrow(rows, True))
            self.upsert(rows)
        return res

    def assert_hudi_rs_reads(self, path: str | Path, what: object = None) -> None:
        """hudi-rs reads exactly the model (``what`` names the step in the failure)."""
        assert hudi_rs_snapshot(path).to_pylist() == self.as_table().to_pylist(), what

    def as_table(self) -> pa.Table:
        rows = sorted(self.rows.values(), key=lambda r: r["key"])
        return pa.Table.from_pylist(rows, schema=SCHEMA)


def _strip(r: dict) -> dict:
    return {k: r[k] for k in SCHEMA.names}


class Workload:
    """Random commits: upserts with duplicates, late records, nulls, moves, deletes, inserts."""

    def __init__(
        self, seed: int, keys: int = 60, partitions: tuple[str, ...] = ("a", "b", "c")
    ) -> None:
        self.rng = random.Random(seed)
        self.keys = [f"k{i:03d}" for i in range(keys)]
        self.partitions = partitions
        self.ts = 100
        self.fresh = 0

    def _row(self, key: str, late: bool = False) -> dict:
        rng = self.rng
        self.ts += rng.randint(1, 5)
        return {
            "key": key,
            "p": rng.choice(self.partitions),
            "ts": self.ts - rng.randint(50, 200) if late else self.ts,
            "v": None if rng.random() < 0.2 else rng.randint(-(10**12), 10**12),
            "s": None if rng.random() < 0.2 else rng.choice(["x", "héllo", "", "a,b", "日本"]),
        }

    def rows_for(self, keys: Sequence[str]) -> list[dict]:
        """A fresh row for each key (the upsert of a first commit)."""
        return [self._row(k) for k in keys]

    def upserts(self, n: int) -> list[dict]:
        """At least ``n`` rows: the upsert commits of this workload, concatenated."""
        rows: list[dict] = []
        while len(rows) < n:
            kind, more = self.next_commit()
            if kind == "upsert":
                rows += more
        return rows

    def replace_commit(self, model: TableModel) -> tuple[str, list[dict]]:
        """A random replace operation over ``model``'s table: an insert_overwrite of one or two
        partitions, an insert_overwrite_table, or a delete_partition (rows: one ``{"p": ...}``
        per partition). Overwrite rows take keys the partitions they replace hold, or fresh
        ones (never a key another partition keeps: an insert looks up no index)."""
        rng = self.rng
        kind = rng.choices(
            ["insert_overwrite", "insert_overwrite_table", "delete_partition"], weights=[5, 2, 2]
        )[0]
        if kind == "delete_partition":
            return kind, [{"p": p} for p in rng.sample(self.partitions, rng.randint(1, 2))]
        parts = (
            list(self.partitions)
            if kind == "insert_overwrite_table"
            else rng.sample(self.partitions, rng.randint(1, 2))
        )
        free = [k for k in self.keys if k not in model.rows or model.rows[k]["p"] in parts]
        rows = []
        for key in rng.sample(free, min(len(free), rng.randint(1, 12))):
            r = self._row(key)
            r["p"] = rng.choice(parts)
            rows.append(r)
        for _ in range(rng.randint(0, 3)):
            self.fresh += 1
            r = self._row(f"new{self.fresh:04d}")
            r["p"] = rng.choice(parts)
            rows.append(r)
        return kind, rows

    def next_commit(self) -> tuple[str, list[dict]]:
        rng = self.rng
        kind = rng.choices(["upsert", "delete", "insert"], weights=[7, 2, 1])[0]
        if kind == "insert":
            rows = []
            for _ in range(rng.randint(1, 8)):
                self.fresh += 1
                rows.append(self._row(f"new{self.fresh:04d}"))
            return "insert", rows
        if kind == "delete":
            return "delete", [{"key": k} for k in rng.sample(self.keys, rng.randint(1, 6))]
        rows = []
        for _ in range(rng.randint(1, 40)):
            key = rng.choice(self.keys)
            r = self._row(key, late=rng.random() < 0.15)
            if rng.random() < 0.1:
                r["_hoodie_is_deleted"] = True
            rows.append(r)
        # a duplicate key inside the batch
        rows.append(dict(rows[0], ts=rows[0]["ts"] + 1, v=7))
        return "upsert", rows


def upsert_commits(seed: int, n: int) -> list[list[dict]]:
    """``n`` commits of :class:`Workload` ``seed``: the first 30 keys, then upserts of at
    least 20 rows each (the shape the stream-writer tests checkpoint one by one)."""
    wl = Workload(seed=seed)
    out = [wl.rows_for(wl.keys[:30])]
    while len(out) < n:
        rows: list[dict] = []
        while len(rows) < 20:
            kind, more = wl.next_commit()
            if kind == "upsert":
                rows += more
        out.append(rows)
    return out


def to_arrow(rows: list[dict], with_delete_flag: bool) -> pa.Table:
    schema = SCHEMA
    if with_delete_flag:
        schema = schema.append(pa.field("_hoodie_is_deleted", pa.bool_()))
        rows = [dict(r, _hoodie_is_deleted=r.get("_hoodie_is_deleted", False)) for r in rows]
    return pa.Table.from_pylist(rows, schema=schema)


def keys_table(rows: list[dict]) -> pa.Table:
    """The record keys of ``rows``: the input of a ``write.operation=delete``."""
    return pa.table({"key": pa.array([r["key"] for r in rows], pa.string())})


def hudi_rs_snapshot(path) -> pa.Table:
    """The model columns of the table as hudi-rs reads it, sorted by key."""
    from tests.conftest import hudi_rs_read

    t = hudi_rs_read(path)
    if t.num_rows == 0:
        return SCHEMA.empty_table()
    return t.select(SCHEMA.names).sort_by("key").cast(SCHEMA)


def model_options(
    *extra: Mapping[str, str],
    table_type: str | None = None,
    version: str | None = None,
    small_files: bool = False,
) -> dict[str, str]:
    """The model table's write options: :data:`OPTIONS`, then the table type and version when
    given, :data:`SMALL_FILES` when asked, then each of ``extra`` in turn."""
    opts = dict(OPTIONS)
    if table_type is not None:
        opts["table.type"] = table_type
    if version is not None:
        opts["hoodie.write.table.version"] = version
    if small_files:
        opts.update(SMALL_FILES)
    for more in extra:
        opts.update(more)
    return opts


def run_random_commits(
    path: str | Path,
    options: Mapping[str, str],
    commits: int,
    seed: int,
    snapshot: Callable[[], pa.Table] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> TableModel:
    """Random commits (upserts with deletes and late records, deletes, inserts; the first an
    upsert of 30 keys), each by a new client; after each, ``snapshot()`` (hudi-rs by default)
    must read exactly the model. Returns the model."""
    model, wl = TableModel(), Workload(seed)
    for i in range(commits):
        kind, rows = wl.next_commit()
        if i == 0:
            kind, rows = "upsert", wl.rows_for(wl.keys[:30])
        res = model.write(path, options, kind, rows, storage_options=storage_options)
        got = snapshot() if snapshot is not None else hudi_rs_snapshot(path)
        assert got.to_pylist() == model.as_table().to_pylist(), (
            f"commit {i} ({kind}, instant {res.instant}) differs"
        )
    return model
