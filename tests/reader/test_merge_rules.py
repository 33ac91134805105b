"""The merge rules of spec §6.2 on the column-wise log buffer, case by case.

The rules are :mod:`hoodie_ray.merge`'s. Two of them are not hudi-rs 0.5.0's: a delete whose
ordering value is of another class than the field's wins as "newer" (Java's rule; hudi-rs
compares an ``IntWrapper`` with a long field numerically), and a log that holds a
default-ordered delete followed by a record wins over the base record (the *reset* that keeps
the merge the same however versions are grouped; Java and hudi-rs compare that record with the
base record's ordering value). A null ordering value compares lowest, as in hudi-rs.

Every case runs on both buffers: the column-wise one and the compiled one.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from hoodie_ray.config.table_config import MergeMode
from hoodie_ray.reader.compiled_merger import CompiledLogRecordBuffer, new_log_record_buffer
from hoodie_ray.reader.file_slice_reader import delete_ordering_values
from hoodie_ray.reader.merger import RECORD_KEY, DeleteMarker, LogRecordBuffer, ordering_class

SCHEMA = pa.schema([(RECORD_KEY, pa.string()), ("ts", pa.int64()), ("v", pa.string())])
EVENT = MergeMode.EVENT_TIME_ORDERING
COMMIT = MergeMode.COMMIT_TIME_ORDERING


Buffer = LogRecordBuffer | CompiledLogRecordBuffer
_compiled = {"on": False}


@pytest.fixture(autouse=True, params=["column-wise", "compiled"])
def _implementation(request: pytest.FixtureRequest) -> None:
    _compiled["on"] = request.param == "compiled"
    if _compiled["on"] and not isinstance(
        new_log_record_buffer(SCHEMA, "ts", EVENT, compiled=True), CompiledLogRecordBuffer
    ):
        pytest.skip("numba is not available")


def new_buffer(schema: pa.Schema, ordering_field: str | None, mode: MergeMode) -> Buffer:
    """The buffer under test."""
    return new_log_record_buffer(schema, ordering_field, mode, compiled=_compiled["on"])


def recs(keys: list[str], ts: list[int | None], v: list[str]) -> pa.Table:
    return pa.table({RECORD_KEY: keys, "ts": ts, "v": v}, schema=SCHEMA)


def deletes(buf: Buffer, keys: list[str], kinds: list[str | None], vals: list) -> None:
    ordering, default, foreign = delete_ordering_values(kinds, vals, pa.int64())
    buf.add_delete_block(pa.array(keys), None, ordering, default, foreign)


def result(buf: Buffer, base: pa.Table | None = None) -> dict[str, tuple]:
    out = []
    if base is not None:
        out.append(buf.merge_base(base))
    out.append(buf.remaining())
    t = pa.concat_tables(out)
    return {r[RECORD_KEY]: (r["ts"], r["v"]) for r in t.to_pylist()}


def test_event_time_newer_wins_on_ties_and_greater_values() -> None:
    buf = new_buffer(SCHEMA, "ts", EVENT)
    buf.add_data_block(recs(["a", "b", "c"], [10, 10, 10], ["a1", "b1", "c1"]))
    buf.add_data_block(recs(["a", "b", "c"], [10, 11, 9], ["a2", "b2", "c2"]))
    assert result(buf) == {"a": (10, "a2"), "b": (11, "b2"), "c": (10, "c1")}


def test_null_ordering_compares_lowest() -> None:
    buf = new_buffer(SCHEMA, "ts", EVENT)
    buf.add_data_block(recs(["a", "b", "c"], [10, None, None], ["a1", "b1", "c1"]))
    buf.add_data_block(recs(["a", "b", "c"], [None, 5, None], ["a2", "b2", "c2"]))
    assert result(buf) == {"a": (10, "a1"), "b": (5, "b2"), "c": (None, "c2")}
    # against the base record too: a null in the log loses, a null in the base loses
    buf = new_buffer(SCHEMA, "ts", EVENT)
    buf.add_data_block(recs(["a", "b"], [None, -5], ["log", "log"]))
    base = recs(["a", "b"], [100, None], ["base", "base"])
    assert result(buf, base) == {"a": (100, "base"), "b": (-5, "log")}


def test_a_reset_log_wins_over_the_base_record() -> None:
    """Base a@100, then a default-ordered delete and a@5 in the log: the delete removed a@100
    and a@5 came after it, as folding the three versions one by one gives (Java and hudi-rs
    return a@100 here, and a@5 once a compaction ran between the delete and the record)."""
    for delete_block in (True, False):
        buf = new_buffer(SCHEMA, "ts", EVENT)
        if delete_block:
            deletes(buf, ["a"], [None], [None])
        else:
            buf.add_data_block(recs(["a"], [None], ["d"]), is_delete=np.ones(1, dtype=bool))
        buf.add_data_block(recs(["a"], [5], ["later"]))
        buf.add_data_block(recs(["a"], [3], ["older"]))  # still ordered after the delete
        assert result(buf, recs(["a"], [100], ["base"])) == {"a": (5, "later")}


def test_log_record_loses_to_greater_base_record() -> None:
    buf = new_buffer(SCHEMA, "ts", EVENT)
    buf.add_data_block(recs(["a", "b", "new"], [50, 200, 1], ["a-log", "b-log", "n"]))
    base = recs(["a", "b", "c"], [100, 100, 100], ["a-base", "b-base", "c-base"])
    assert result(buf, base) == {
        "a": (100, "a-base"),
        "b": (200, "b-log"),
        "c": (100, "c-base"),
        "new": (1, "n"),
    }


def test_default_delete_always_wins_and_a_later_record_replaces_it() -> None:
    buf = new_buffer(SCHEMA, "ts", EVENT)
    buf.add_data_block(recs(["a", "b"], [500, 500], ["a1", "b1"]))
    deletes(buf, ["a", "b"], ["int", None], [0, None])  # IntWrapper(0) and null: default
    assert result(buf, recs(["a", "b"], [900, 900], ["x", "y"])) == {}
    buf = new_buffer(SCHEMA, "ts", EVENT)
    deletes(buf, ["a"], ["int"], [0])
    buf.add_data_block(recs(["a"], [1], ["again"]))
    # the record replaced the delete, then competes with the base record on ordering
    assert result(buf, recs(["a"], [0], ["base"])) == {"a": (1, "again")}


def test_real_ordered_delete_loses_only_to_strictly_greater() -> None:
    buf = new_buffer(SCHEMA, "ts", EVENT)
    deletes(buf, ["a", "b", "c"], ["long", "long", "long"], [99, 100, 101])
    base = recs(["a", "b", "c"], [100, 100, 100], ["a", "b", "c"])
    assert result(buf, base) == {"a": (100, "a")}
    buf = new_buffer(SCHEMA, "ts", EVENT)
    buf.add_data_block(recs(["a"], [300], ["a1"]))
    deletes(buf, ["a"], ["long"], [200])
    assert result(buf) == {"a": (300, "a1")}


def test_delete_of_other_class_wins_as_newer_java_rule() -> None:
    buf = new_buffer(SCHEMA, "ts", EVENT)
    deletes(buf, ["a"], ["string"], ["zzz"])
    assert result(buf, recs(["a"], [100], ["base"])) == {}
    buf = new_buffer(SCHEMA, "ts", EVENT)
    deletes(buf, ["a"], ["int"], [5])  # IntWrapper(5) on a long field: another class
    assert result(buf, recs(["a"], [100], ["base"])) == {}


def test_a_delete_after_a_default_delete_keeps_its_reset() -> None:
    buf = new_buffer(SCHEMA, "ts", EVENT)
    deletes(buf, ["a"], ["int"], [0])
    deletes(buf, ["a"], ["long"], [1])  # replaces the default delete, stays ahead of the base
    assert result(buf, recs(["a"], [100], ["base"])) == {}
    # and orders what follows: a record below its value loses to it (Java's delete-block
    # special case kept the default delete here, which no grouping of the versions keeps)
    buf.add_data_block(recs(["a"], [0], ["lower"]))
    assert result(buf, recs(["a"], [100], ["base"])) == {}


def test_commit_time_latest_always_wins() -> None:
    buf = new_buffer(SCHEMA, "ts", COMMIT)
    buf.add_data_block(recs(["a", "b"], [500, 500], ["a1", "b1"]))
    buf.add_data_block(recs(["a"], [1], ["a2"]))
    deletes(buf, ["b"], ["long"], [1])
    assert result(buf, recs(["a", "b", "c"], [999, 999, 999], ["x", "y", "z"])) == {
        "a": (1, "a2"),
        "c": (999, "z"),
    }


def test_duplicates_inside_one_block_apply_in_order() -> None:
    buf = new_buffer(SCHEMA, "ts", EVENT)
    buf.add_data_block(recs(["a", "a", "a", "b", "b"], [5, 3, 5, 1, 2], ["1", "2", "3", "4", "5"]))
    assert result(buf) == {"a": (5, "3"), "b": (2, "5")}
    buf = new_buffer(SCHEMA, "ts", COMMIT)
    buf.add_data_block(recs(["a", "a"], [5, 3], ["1", "2"]))
    assert result(buf) == {"a": (3, "2")}


def test_is_deleted_records_are_deletes_with_their_ordering() -> None:
    schema = SCHEMA.append(pa.field("_hoodie_is_deleted", pa.bool_()))
    buf = new_buffer(schema, "ts", EVENT)
    t = pa.table(
        {
            RECORD_KEY: ["a", "b", "c"],
            "ts": [50, 150, None],
            "v": ["x"] * 3,
            "_hoodie_is_deleted": [True, True, True],
        },
        schema=schema,
    )
    buf.add_data_block(t, DeleteMarker().mask(t))
    base = pa.table(
        {
            RECORD_KEY: ["a", "b", "c"],
            "ts": [100] * 3,
            "v": ["base"] * 3,
            "_hoodie_is_deleted": [False] * 3,
        },
        schema=schema,
    )
    out = pa.concat_tables([buf.merge_base(base), buf.remaining()])
    # a: the delete (50) loses to the base (100); b: wins; c: null ordering = default delete
    assert out.column(RECORD_KEY).to_pylist() == ["a"]


def test_custom_delete_marker() -> None:
    m = DeleteMarker.from_props(
        {
            "hoodie.record.merge.property.hoodie.payload.delete.field": "Op",
            "hoodie.record.merge.property.hoodie.payload.delete.marker": "D",
        }
    )
    t = pa.table({"Op": ["I", "D", None], "_hoodie_operation": ["I", "U", "D"]})
    assert m.mask(t).tolist() == [False, True, True]


@pytest.mark.parametrize(
    ("typ", "cls"),
    [
        (pa.int32(), "int"),
        (pa.int16(), "int"),
        (pa.int64(), "long"),
        (pa.float64(), "double"),
        (pa.string(), "string"),
        (pa.timestamp("us", tz="UTC"), "timestamp"),
        (pa.date32(), "date"),
        (pa.decimal128(10, 2), "decimal"),
    ],
)
def test_ordering_class(typ: pa.DataType, cls: str) -> None:
    assert ordering_class(typ) == cls


def test_delete_ordering_values_conversion() -> None:
    arr, default, foreign = delete_ordering_values(
        [None, "int", "long", "int", "string"], [None, 0, 7, 3, "x"], pa.int64()
    )
    assert arr.to_pylist() == [None, None, 7, None, None]
    assert default.tolist() == [True, True, False, False, False]
    assert foreign.tolist() == [False, False, False, True, True]
    ts, _, f = delete_ordering_values(
        ["long", "timestamp"], [1_000_000, None], pa.timestamp("us", tz="UTC")
    )
    assert ts.cast(pa.int64()).to_pylist() == [1_000_000, None] and not f.any()


def test_large_state_uses_hash_index() -> None:
    n = 50_000
    keys = [f"k{i:06d}" for i in range(n)]
    buf = new_buffer(SCHEMA, "ts", EVENT)
    buf.add_data_block(recs(keys, list(range(n)), ["log"] * n))
    base = recs([*keys[::2], "zz"], [10**9] * (n // 2) + [0], ["base"] * (n // 2 + 1))
    kept = buf.merge_base(base)
    assert kept.num_rows == n // 2 + 1  # every base record has the greater ordering value
    assert buf.remaining().num_rows == n // 2
    assert np.all(np.asarray(kept.column("v").to_pylist()) == "base")
