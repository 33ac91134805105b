"""Reading partial-update tables (Hudi 1.1's ``hoodie.table.partial.update.mode=IGNORE_DEFAULTS``,
0.x's ``PartialUpdateAvroPayload``): a null field keeps the older version's value, against
hudi-rs (version 9) and a model of Java's grouping (a slice's log folds, then meets its base).

The tables are written as Java's writers leave them (full-schema records whose missing fields
are null) and then given the table property, as a Java table has it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieUnsupportedError
from hoodie_ray.job.client import HoodieWriteClient
from tests.conftest import hudi_rs_read

Version = tuple[str, int, Any, Any, bool]  # key, ts, u, w, deleted

PROPS = {
    "9": "hoodie.table.partial.update.mode=IGNORE_DEFAULTS\n",
    "6": "hoodie.compaction.payload.class=org.apache.hudi.common.model.PartialUpdateAvroPayload\n",
}


def _write(path: str, version: str, commits: list[list[Version]]) -> None:
    opts = {
        "hoodie.table.name": "partial",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "table.type": "MERGE_ON_READ",
        "hoodie.write.table.version": version,
        "compaction.schedule.enabled": "false",
    }
    for rows in commits:
        HoodieWriteClient(path, opts).write(
            pa.table(
                {
                    "key": [r[0] for r in rows],
                    "p": ["x"] * len(rows),
                    "ts": pa.array([r[1] for r in rows], pa.int64()),
                    "u": pa.array([r[2] for r in rows], pa.int64()),
                    "w": pa.array([r[3] for r in rows], pa.string()),
                    "_hoodie_is_deleted": [r[4] for r in rows],
                }
            )
        )
    with open(Path(path) / ".hoodie" / "hoodie.properties", "a") as f:
        f.write(PROPS[version])


def _model(versions: list[Version]) -> tuple[int, Any, Any] | None:
    """Java's grouping: the first version is the base record, the rest fold in order, then
    the result meets the base (higher ordering value wins, its nulls filled; a delete leaves
    the higher-ordered side unchanged)."""

    def merge(old: tuple | None, new: tuple) -> tuple:
        if old is None:
            return new
        if old[4] or new[4]:
            return new if new[1] >= old[1] else old
        hi, lo = (new, old) if new[1] >= old[1] else (old, new)
        return (
            hi[0],
            hi[1],
            lo[2] if hi[2] is None else hi[2],
            lo[3] if hi[3] is None else hi[3],
            False,
        )

    base, log = versions[0], versions[1:]
    folded: tuple | None = None
    for v in log:
        folded = merge(folded, v)
    result = base if folded is None else (merge(base, folded) if not base[4] else folded)
    return None if result[4] else (result[1], result[2], result[3])


CASES = {
    "lower partial fills nothing": [("a", 5, 1, "a1", False), ("a", 2, None, "a2", False)],
    "null takes the base value": [("a", 1, 1, None, False), ("a", 2, None, "w2", False)],
    "higher base filled from lower": [("a", 5, None, "a1", False), ("a", 2, 7, "a2", False)],
    "two partial log records": [
        ("a", 1, 1, "a1", False),
        ("a", 2, None, "x", False),
        ("a", 3, None, None, False),
    ],
    "a record after a delete meets the base": [
        ("a", 1, 1, "a1", False),
        ("a", 3, None, None, True),
        ("a", 4, None, "z", False),
    ],
    "a lower delete loses": [("a", 1, 1, "a1", False), ("a", 0, None, None, True)],
    "out of order log records": [
        ("a", 1, 1, "a1", False),
        ("a", 3, None, "c", False),
        ("a", 2, 9, None, False),
    ],
    "a winning delete": [("a", 1, 1, "a1", False), ("a", 3, None, None, True)],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_partial_update_cases_read_as_hudi_rs(tmp_path: Path, case: str) -> None:
    path = str(tmp_path / "t")
    versions = CASES[case]
    _write(path, "9", [[v] for v in versions])
    want = _model(versions)
    got = {(r["key"]): (r["ts"], r["u"], r["w"]) for r in hr.read(path).to_pylist()}
    oracle = {(r["key"]): (r["ts"], r["u"], r["w"]) for r in hudi_rs_read(path).to_pylist()}
    assert got == oracle == ({"a": want} if want else {})


@pytest.mark.parametrize("version", ["9", "6"])
def test_partial_update_model(tmp_path: Path, version: str) -> None:
    """Random partial versions of 30 keys over 6 commits (one version of a key a commit,
    ordering values out of order, deletes in the last)."""
    path = str(tmp_path / "t")
    rng = np.random.default_rng(int(version))
    keys = [f"k{i:02d}" for i in range(30)]
    history: dict[str, list[Version]] = {k: [] for k in keys}
    commits = []
    for c in range(6):
        rows = []
        for k in keys if c == 0 else rng.choice(keys, 18, replace=False):
            ts = int(rng.integers(0, 10)) + (0 if c == 0 else c)
            u = None if c and rng.random() < 0.5 else int(rng.integers(0, 100))
            w = None if c and rng.random() < 0.5 else f"w{c}"
            deleted = bool(c == 5 and rng.random() < 0.2)  # last: a deleted key stays gone
            rows.append((str(k), ts, u, w, deleted))
            history[str(k)].append(rows[-1])
        commits.append(rows)
    _write(path, version, commits)
    want = {k: m for k in keys if (m := _model(history[k])) is not None}
    got = {r["key"]: (r["ts"], r["u"], r["w"]) for r in hr.read(path).to_pylist()}
    assert got == want
    if version == "9":
        oracle = {r["key"]: (r["ts"], r["u"], r["w"]) for r in hudi_rs_read(path).to_pylist()}
        assert oracle == want
    # a projection fills the same way, column by column
    part = hr.read(path, columns=["key", "w"]).to_pylist()
    assert {r["key"]: r["w"] for r in part} == {k: v[2] for k, v in want.items()}


MARKER = "__debezium_unavailable_value"


def test_fill_unavailable_reads_as_hudi_rs(tmp_path: Path) -> None:
    """``FILL_UNAVAILABLE`` (Debezium's Postgres payload on version 9): a string field equal to
    the marker keeps the older value; a null is a value."""
    path = str(tmp_path / "t")
    commits = [
        [("a", 1, 1, "a1", False), ("b", 1, 2, "b1", False), ("c", 5, 3, "c1", False)],
        [("a", 2, None, MARKER, False), ("b", 2, 7, None, False), ("c", 3, 9, MARKER, False)],
        [("c", 4, 8, "c4", False)],
    ]
    _write(path, "9", commits)  # (appends IGNORE_DEFAULTS: replaced below)
    props = Path(path) / ".hoodie" / "hoodie.properties"
    text = props.read_text().replace("IGNORE_DEFAULTS", "FILL_UNAVAILABLE")
    props.write_text(
        text + f"hoodie.record.merge.property.partial.update.unavailable.value={MARKER}\n"
    )
    want = {"a": (2, None, "a1"), "b": (2, 7, None), "c": (5, 3, "c1")}
    got = {r["key"]: (r["ts"], r["u"], r["w"]) for r in hr.read(path).to_pylist()}
    oracle = {r["key"]: (r["ts"], r["u"], r["w"]) for r in hudi_rs_read(path).to_pylist()}
    assert got == oracle == want


def test_an_unknown_partial_update_mode_is_refused_clearly(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _write(path, "9", [[("a", 1, 1, "a1", False)]])
    props = Path(path) / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("IGNORE_DEFAULTS", "KEEP_VALUES"))
    with pytest.raises(HoodieUnsupportedError, match="KEEP_VALUES is not supported"):
        hr.read(path)


def test_partial_log_blocks_keep_the_columns_they_lack(tmp_path: Path) -> None:
    """Log blocks with ``IS_PARTIAL`` (Spark's MERGE INTO partial updates, version 8+, on a
    table without a partial update mode; written here by ``write.partial.updates``): a column
    the block lacks keeps its older value, a null it carries is a value; a lower-ordered
    partial record loses to the base record entirely. hudi-rs reads the same."""
    path = str(tmp_path / "t")
    opts = {
        "hoodie.table.name": "merge_into",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "table.type": "MERGE_ON_READ",
        "hoodie.write.table.version": "8",
        "compaction.schedule.enabled": "false",
        "index.global.enabled": "false",
    }

    def write(keys: list[str], ts: list[int], u: list[Any] | None, w: list[Any]) -> None:
        cols = {"key": keys, "p": ["x"] * len(keys), "ts": pa.array(ts, pa.int64())}
        if u is not None:
            cols["u"] = pa.array(u, pa.int64())
        cols["w"] = pa.array(w, pa.string())
        partial = {"write.partial.updates": "true"} if u is None else {}
        HoodieWriteClient(path, {**opts, **partial}).write(pa.table(cols))

    write(["a", "b", "c", "d"], [5, 5, 5, 5], [1, 2, 3, 4], ["a1", "b1", "c1", "d1"])
    write(["a", "b", "c", "d"], [6, 6, 1, 6], None, ["a2", None, "c2", None])  # w only
    write(["b"], [7], [20], ["b3"])  # a full record after the partial one
    want = {"a": (6, 1, "a2"), "b": (7, 20, "b3"), "c": (5, 3, "c1"), "d": (6, 4, None)}
    assert {r["key"]: (r["ts"], r["u"], r["w"]) for r in hr.read(path).to_pylist()} == want
    oracle = {r["key"]: (r["ts"], r["u"], r["w"]) for r in hudi_rs_read(path).to_pylist()}
    assert oracle == want
