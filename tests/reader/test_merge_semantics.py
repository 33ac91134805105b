"""Merge rules, deletes and log-block gates on small built tables, checked against hudi-rs.

Each scenario builds a table with :mod:`tests.reader.builder` (exact control of every block) and
compares our snapshot, the time travel to and the incremental read of every completed commit
with hudi-rs. The scenarios avoid the two cases where hudi-rs 0.5.0 departs from the rules we
implement (``hoodie_ray.merge``, see ``test_merge_rules.py``): a delete whose ordering value
has another class than the field (hudi-rs compares ints and longs numerically; Java: the newer
wins), and a base record met by a log holding a default-ordered delete and then a record with a
lower ordering value (hudi-rs, as Java's reader: the base record; ours: the log record, as
folding the versions in order gives, pinned in ``tests/test_merge.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hoodie_ray.reader import read_table
from tests.conftest import hudi_rs_read
from tests.reader.builder import Commit, TableBuilder

SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
INT_SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int32()), ("v", pa.string())])
PART_SCHEMA = pa.schema(
    [("key", pa.string()), ("ts", pa.int64()), ("v", pa.string()), ("part", pa.string())]
)
DEL_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("ts", pa.int64()),
        ("v", pa.string()),
        ("_hoodie_is_deleted", pa.bool_()),
    ]
)


def rows(
    keys: list[str], ts: list[int | None], v: list[str], schema: pa.Schema = SCHEMA
) -> pa.Table:
    return pa.table({"key": keys, "ts": ts, "v": v}, schema=schema)


def view(t: pa.Table | None) -> list[tuple]:
    if t is None or t.num_rows == 0:
        return []
    cols = ["_hoodie_record_key", "ts", "v", "_hoodie_commit_time"]
    return sorted(tuple(r[c] for c in cols) for r in t.select(cols).to_pylist())


def check_against_hudi_rs(b: TableBuilder) -> None:
    root = str(b.root)
    assert view(read_table(root)) == view(hudi_rs_read(root))
    commits = b.timeline.reload().completed_commits()
    prev = None
    for inst in commits:
        pos = inst.completion_time or inst.timestamp
        opts = {"hoodie.read.query.type": "incremental", "hoodie.read.end.timestamp": pos}
        if prev is not None:
            opts["hoodie.read.start.timestamp"] = prev
        mine = read_table(root, query_type="incremental", begin=prev, end=pos)
        assert view(mine) == view(hudi_rs_read(root, **opts)), f"incremental ({prev}, {pos}]"
        tt = read_table(root, as_of=inst.timestamp)
        assert view(tt) == view(
            hudi_rs_read(root, **{"hoodie.read.as.of.timestamp": inst.timestamp})
        )
        prev = pos


# -- scenarios ------------------------------------------------------------------------------------


def _base_commit(b: TableBuilder, data: pa.Table) -> tuple[str, str]:
    """A completed commit of one base file of ``f1-0``; returns its instant and the file."""
    c = b.begin()
    base = c.base_file("", "f1-0", data)
    c.complete()
    return c.instant, base


def _log_commit(
    b: TableBuilder, base_instant: str, base: str, blocks: Callable[[Commit], list[bytes]]
) -> Commit:
    """A delta commit (left inflight) that appends ``blocks(commit)`` to ``f1-0``'s log."""
    c = b.begin()
    c.log_file("", "f1-0", blocks(c), base_instant=base_instant, base_file=base)
    return c


def s_event_time_updates_and_deletes(b: TableBuilder, fmt: str) -> None:
    t1, base = _base_commit(b, rows(["k1", "k2", "k3", "k4", "k6"], [100] * 5, list("abcde")))
    upd = rows(["k1", "k3", "k5"], [200, 50, 10], ["a2", "c2", "e2"])
    _log_commit(
        b,
        t1,
        base,
        lambda c: [
            c.data_block(upd, "", "f1-0", fmt),
            c.delete_block(["k2"], ""),  # IntWrapper(0): always wins
            c.delete_block(["k4", "k6"], "", [("LongWrapper", 99), ("LongWrapper", 100)]),
        ],
    ).complete()


def s_delete_then_reinsert(b: TableBuilder, fmt: str) -> None:
    t1, base = _base_commit(b, rows(["k1", "k2", "k3"], [100, 100, 100], list("abc")))
    _log_commit(
        b,
        t1,
        base,
        lambda c: [
            c.delete_block(["k1", "k2"], ""),
            c.delete_block(["k3"], "", [("LongWrapper", 300)]),
        ],
    ).complete()
    # k1 ties the base record: a lower value is where hudi-rs departs (module doc)
    again = rows(["k1", "k2", "k3"], [100, 150, 200], ["a3", "b3", "c3"])
    _log_commit(b, t1, base, lambda c: [c.data_block(again, "", "f1-0", fmt)]).complete()


def s_duplicates_and_nulls(b: TableBuilder, fmt: str) -> None:
    t1, base = _base_commit(b, rows(["k1", "k2", "k3"], [100, None, 100], list("abc")))
    blk = rows(
        ["k1", "k1", "k2", "k3", "k3"], [150, 120, 1, None, 90], ["a1", "a2", "b2", "c2", "c3"]
    )
    _log_commit(b, t1, base, lambda c: [c.data_block(blk, "", "f1-0", fmt)]).complete()


def s_ties_and_multiple_versions(b: TableBuilder, fmt: str) -> None:
    t1, base = _base_commit(b, rows(["k1", "k2"], [100, 100], list("ab")))
    tie = rows(["k1"], [100], ["a2"])
    _log_commit(b, t1, base, lambda c: [c.data_block(tie, "", "f1-0", fmt)]).complete()
    two = rows(["k1", "k2"], [100, 99], ["a3", "b3"])
    _log_commit(b, t1, base, lambda c: [c.data_block(two, "", "f1-0", fmt)]).complete()


def s_uncommitted_and_rollback(b: TableBuilder, fmt: str) -> None:
    t1, base = _base_commit(b, rows(["k1", "k2"], [100, 100], list("ab")))
    bad = rows(["k1"], [500], ["bad"])
    # stays inflight: its block must be ignored
    _log_commit(b, t1, base, lambda c: [c.data_block(bad, "", "f1-0", fmt)])
    # a rolled-back deltacommit that *completed*: the rollback block wins
    rolled = rows(["k2"], [500], ["rolled-back"])
    rb = _log_commit(b, t1, base, lambda c: [c.data_block(rolled, "", "f1-0", fmt)])
    rb.complete()
    new = rows(["k3"], [1], ["c"])
    _log_commit(
        b, t1, base, lambda c: [c.rollback_block(rb.instant), c.data_block(new, "", "f1-0", fmt)]
    ).complete()


def s_corrupt_trailing_block(b: TableBuilder, fmt: str) -> None:
    c1 = b.begin()
    base = c1.base_file("", "f1-0", rows(["k1", "k2"], [100, 100], list("ab")))
    c1.complete()
    c2 = b.begin()
    good = c2.data_block(rows(["k1"], [200], ["a2"]), "", "f1-0", fmt)
    bad = c2.data_block(rows(["k2"], [200], ["b2"]), "", "f1-0", fmt)
    c2.log_file("", "f1-0", [good, bad[: len(bad) // 2]], base_instant=c1.instant, base_file=base)
    c2.complete()


def prows(keys: list[str], ts: list[int], part: str) -> pa.Table:
    n = len(keys)
    return pa.table({"key": keys, "ts": ts, "v": ["x"] * n, "part": [part] * n}, schema=PART_SCHEMA)


def s_log_only_group_and_partitions(b: TableBuilder, fmt: str) -> None:
    c1 = b.begin()
    base = c1.base_file("p1", "f1-0", prows(["k1", "k2"], [100, 100], "p1"))
    c1.log_file("p2", "f2-0", [c1.data_block(prows(["k8", "k9"], [1, 2], "p2"), "p2", "f2-0", fmt)])
    c1.complete()
    c2 = b.begin()
    c2.log_file(
        "p1",
        "f1-0",
        [c2.data_block(prows(["k1"], [200], "p1"), "p1", "f1-0", fmt)],
        base_instant=c1.instant,
        base_file=base,
    )
    c2.log_file("p2", "f2-0", [c2.delete_block(["k8"], "p2")], base_instant=c1.instant)
    c2.complete()


def s_is_deleted_column(b: TableBuilder, fmt: str) -> None:
    data = pa.table(
        {
            "key": ["k1", "k2", "k3"],
            "ts": [100, 100, 100],
            "v": list("abc"),
            "_hoodie_is_deleted": [False, False, False],
        },
        schema=DEL_SCHEMA,
    )
    t1, base = _base_commit(b, data)
    upd = pa.table(
        {
            "key": ["k1", "k2", "k3"],
            "ts": [200, 50, None],
            "v": ["a2", "b2", "c2"],
            "_hoodie_is_deleted": [True, True, True],
        },
        schema=DEL_SCHEMA,
    )
    _log_commit(b, t1, base, lambda c: [c.data_block(upd, "", "f1-0", fmt)]).complete()


def s_int_ordering_field(b: TableBuilder, fmt: str) -> None:
    t1, base = _base_commit(b, rows(["k1", "k2", "k3"], [10, 10, 10], list("abc"), INT_SCHEMA))
    orderings = [("IntWrapper", 5), ("IntWrapper", 20), None]
    _log_commit(
        b, t1, base, lambda c: [c.delete_block(["k1", "k2", "k3"], "", orderings)]
    ).complete()


SCENARIOS: dict[str, Callable[[TableBuilder, str], None]] = {
    "event_time_updates_and_deletes": s_event_time_updates_and_deletes,
    "delete_then_reinsert": s_delete_then_reinsert,
    "duplicates_and_nulls": s_duplicates_and_nulls,
    "ties_and_multiple_versions": s_ties_and_multiple_versions,
    "uncommitted_and_rollback": s_uncommitted_and_rollback,
    "corrupt_trailing_block": s_corrupt_trailing_block,
    "log_only_group_and_partitions": s_log_only_group_and_partitions,
    "is_deleted_column": s_is_deleted_column,
    "int_ordering_field": s_int_ordering_field,
}


def scenario_builder(root: Path, name: str, **kw: Any) -> TableBuilder:
    """A table builder for the scenario ``name``: its schema, partitioned where it needs."""
    schema = {
        "is_deleted_column": DEL_SCHEMA,
        "int_ordering_field": INT_SCHEMA,
        "log_only_group_and_partitions": PART_SCHEMA,
    }.get(name, SCHEMA)
    part = "part" if name == "log_only_group_and_partitions" else None
    return TableBuilder(root, schema, partition_field=part, **kw)


@pytest.mark.parametrize("mode", ["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_matches_hudi_rs_v6(tmp_path: Path, name: str, mode: str) -> None:
    b = scenario_builder(tmp_path / "t", name, version=6, merge_mode=mode)
    SCENARIOS[name](b, "avro")
    check_against_hudi_rs(b)


@pytest.mark.parametrize(
    "name",
    [
        "event_time_updates_and_deletes",
        "delete_then_reinsert",
        "duplicates_and_nulls",
        "ties_and_multiple_versions",
    ],
)
def test_scenario_matches_hudi_rs_v8_parquet_blocks(tmp_path: Path, name: str) -> None:
    b = TableBuilder(tmp_path / "t", SCHEMA, version=8)
    SCENARIOS[name](b, "parquet")
    check_against_hudi_rs(b)
