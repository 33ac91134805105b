"""A plain dict model of a table, and random workloads, for model tests against hudi-rs."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pyarrow as pa

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

    def insert_new(self, batch: list[dict]) -> None:
        for r in batch:
            assert r["key"] not in self.rows
            self.rows[r["key"]] = _strip(r)

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
    from tests.conftest import hudi_rs_read

    t = hudi_rs_read(path)
    if t.num_rows == 0:
        return SCHEMA.empty_table()
    return t.select(SCHEMA.names).sort_by("key").cast(SCHEMA)
