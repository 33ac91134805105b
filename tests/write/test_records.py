from __future__ import annotations

import pyarrow as pa
import pytest

from hoodie_ray.exceptions import HoodieInputError, HoodieSchemaError
from hoodie_ray.keygen import choose_key_generator
from hoodie_ray.write.records import (
    IS_DELETED,
    RECORD_KEY,
    check_schema_compatible,
    normalise_schema,
    precombine,
    prepare_batch,
    to_arrow,
)


def test_precombine_highest_ordering_wins_ties_later():
    t = pa.table(
        {
            "id": ["a", "a", "b", "a", "b", "c"],
            "ts": [1, 3, 5, 3, None, None],
            "v": [1, 2, 3, 4, 5, 6],
        }
    )
    kg = choose_key_generator(t.schema, ["id"], [])
    pb = prepare_batch(t, kg, ordering_field="ts", operation="upsert")
    out = precombine(pb.table, "ts").to_pydict()
    # b: a null ordering value on the newer row lets it win (Hudi's merge rule)
    assert dict(zip(out["id"], out["v"], strict=True)) == {"a": 4, "b": 5, "c": 6}


def test_precombine_commit_time():
    t = pa.table({"id": ["a", "a", "b"], "v": [1, 2, 3]})
    kg = choose_key_generator(t.schema, ["id"], [])
    out = precombine(
        prepare_batch(t, kg, ordering_field=None, operation="upsert").table, None
    ).to_pydict()
    assert dict(zip(out["id"], out["v"], strict=True)) == {"a": 2, "b": 3}


def test_is_deleted_column_and_delete_operation():
    t = pa.table({"id": [1, 2], "ts": [1, 1], IS_DELETED: [True, None]})
    kg = choose_key_generator(t.schema, ["id"], [])
    pb = prepare_batch(t, kg, ordering_field="ts", operation="upsert")
    assert pb.is_deleted.to_pylist() == [True, False]
    assert IS_DELETED not in pb.data_columns()
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("name", pa.string())])
    pd_ = prepare_batch(
        pa.table({"id": [1]}), kg, ordering_field=None, operation="delete", data_schema=schema
    )
    assert pd_.is_deleted.to_pylist() == [True]
    assert pd_.table.column("name").to_pylist() == [None]


def test_schema_changes_are_errors():
    base = normalise_schema(pa.schema([("id", pa.int64()), ("v", pa.string())]))
    with pytest.raises(HoodieSchemaError, match="drops column v"):
        check_schema_compatible(pa.schema([("id", pa.int64())]), base)
    with pytest.raises(HoodieSchemaError, match="column v changes type"):
        check_schema_compatible(pa.schema([("id", pa.int64()), ("v", pa.int32())]), base)
    with pytest.raises(HoodieSchemaError, match="adds column w"):
        check_schema_compatible(
            pa.schema([("id", pa.int64()), ("v", pa.string()), ("w", pa.int8())]), base
        )


def test_missing_ordering_field():
    t = pa.table({"id": [1]})
    kg = choose_key_generator(t.schema, ["id"], [])
    with pytest.raises(HoodieSchemaError, match="ordering .* field ts"):
        prepare_batch(t, kg, ordering_field="ts", operation="upsert")


def test_normalisation_and_inputs():
    import pandas as pd

    df = pd.DataFrame(
        {"id": [1, 2], "s": ["a", "b"], "t": pd.to_datetime(["2024-01-01", "2024-01-02"])}
    )
    t = to_arrow(df)
    s = normalise_schema(t.schema)
    assert s.field("t").type == pa.timestamp("us", tz="UTC")
    with pytest.raises(HoodieInputError, match="unsupported input type"):
        to_arrow([1, 2])
    with pytest.raises(HoodieSchemaError, match="field u"):
        normalise_schema(pa.schema([("u", pa.uint64())]))
    assert (
        RECORD_KEY
        not in normalise_schema(pa.schema([(RECORD_KEY, pa.string()), ("x", pa.int8())])).names
    )


def test_precombine_is_the_sequential_fold():
    import random

    def fold(rows):
        cur = {}
        for r in rows:
            c = cur.get(r["id"])
            if c is None or r["ts"] is None or c["ts"] is None or r["ts"] >= c["ts"]:
                cur[r["id"]] = r
        return cur

    rng = random.Random(0)
    for _ in range(200):
        rows = [
            {"id": rng.choice("abc"), "ts": rng.choice([None, 1, 2, 3]), "v": i}
            for i in range(rng.randint(1, 12))
        ]
        t = pa.Table.from_pylist(rows)
        kg = choose_key_generator(t.schema, ["id"], [])
        out = precombine(
            prepare_batch(t, kg, ordering_field="ts", operation="upsert").table, "ts"
        ).to_pylist()
        assert {r["id"]: r["v"] for r in out} == {k: r["v"] for k, r in fold(rows).items()}
