from __future__ import annotations

import pyarrow as pa
import pytest

from hoodie_ray.exceptions import HoodieInputError, HoodieSchemaError
from hoodie_ray.keygen import choose_key_generator
from hoodie_ray.write.records import (
    IS_DELETED,
    MAX_PARTITION_SEGMENT_BYTES,
    RECORD_KEY,
    _check_partition_segments,
    check_schema_compatible,
    normalise_schema,
    precombine,
    prepare_batch,
    to_arrow,
)


def test_precombine_highest_ordering_wins_ties_later():
    t = pa.table(
        {
            RECORD_KEY: ["a", "a", "b", "a", "b", "c"],
            "ts": [1, 3, 5, 3, None, None],
            "v": [1, 2, 3, 4, 5, 6],
        }
    )
    out = precombine(t, "ts").to_pydict()
    # b: a null ordering value compares lowest (hoodie_ray.merge)
    assert dict(zip(out[RECORD_KEY], out["v"], strict=True)) == {"a": 4, "b": 3, "c": 6}


def test_null_ordering_values_are_refused_but_in_deletes():
    t = pa.table({"id": ["a", "b", "c"], "ts": [1, None, None], IS_DELETED: [False, False, True]})
    kg = choose_key_generator(t.schema, ["id"], [])
    for op in ("upsert", "insert", "bulk_insert"):
        with pytest.raises(HoodieInputError, match=r"field ts is null in 2 row.*key 'b'"):
            prepare_batch(t, kg, ordering_field="ts", operation=op)
    pb = prepare_batch(t, kg, ordering_field="ts", operation="delete")
    assert pb.table.column("ts").to_pylist() == [1, None, None]


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


def test_sparse_and_extension_pandas_columns():
    """A sparse pandas column converts as its dense values (it was a raw TypeError); an
    extension type Avro cannot hold (a pandas period) is refused naming the field and the
    storage type to cast it to."""
    import pandas as pd

    from hoodie_ray.avro.schema import arrow_to_avro_schema

    df = pd.DataFrame({"k": ["a", "b", "c"], 3: pd.arrays.SparseArray([0, 5, 0])})
    t = to_arrow(df)
    assert t.column("3").to_pylist() == [0, 5, 0] and t.column_names == ["k", "3"]
    periods = pd.DataFrame({"p": pd.period_range("2024-01", periods=2, freq="M")})
    with pytest.raises(HoodieSchemaError, match="field 'p'.*storage type int64"):
        arrow_to_avro_schema(normalise_schema(to_arrow(periods).schema), "t")


def test_types_avro_cannot_hold_are_refused_by_name_and_fixed_binary_is_binary():
    """A decimal scale outside 0..precision and a struct with no fields are refused naming
    the field (before any table is made); fixed-size binary is stored as Avro bytes, so its
    table type is binary, the type every later batch of it is read as."""
    with pytest.raises(HoodieSchemaError, match=r"field d: decimal scale -2 is not within 0\.\.5"):
        normalise_schema(pa.schema([("d", pa.decimal128(5, -2))]))
    with pytest.raises(HoodieSchemaError, match="field s.e is a struct with no fields"):
        normalise_schema(pa.schema([("s", pa.struct([("e", pa.struct([]))]))]))
    s = normalise_schema(pa.schema([("h", pa.binary(4)), ("d", pa.decimal64(10, 2))]))
    assert s.field("h").type == pa.binary() and s.field("d").type == pa.decimal128(10, 2)


def test_precombine_is_the_sequential_fold():
    import random

    from tests.test_merge import fold_versions

    rng = random.Random(0)
    for _ in range(200):
        rows = [
            {
                RECORD_KEY: rng.choice("abc"),
                "ts": rng.choice([None, 1, 2, 3]),
                "v": i,
                IS_DELETED: rng.random() < 0.3,
            }
            for i in range(rng.randint(1, 12))
        ]
        t = pa.Table.from_pylist(rows)
        out = precombine(t, "ts").to_pylist()
        by_key: dict[str, list[dict]] = {}
        for r in out:
            by_key.setdefault(r[RECORD_KEY], []).append(r)
        for k in {r[RECORD_KEY] for r in rows}:
            mine = [r for r in rows if r[RECORD_KEY] == k]
            # what the precombine keeps stands for its input, whatever came before it
            for before in ([], [{"ts": 9, "v": -1, IS_DELETED: False}]):
                assert fold_versions(before + by_key[k]) == fold_versions(before + mine)


def test_compiled_precombine_keeps_what_the_numpy_path_keeps(monkeypatch):
    import random

    import numpy as np

    from hoodie_ray import jit
    from hoodie_ray.write import records

    if not jit.enabled():
        pytest.skip("numba is not importable here (HOODIE_RAY_NO_JIT or missing)")
    rng = random.Random(7)
    types = [pa.int64(), pa.int32(), pa.float64(), pa.timestamp("us"), pa.bool_(), None]
    for case in range(300):
        n = rng.randint(2, 40)
        otype = rng.choice(types)
        values: list = [1, 2, 3, None] if otype != pa.float64() else [1.0, 2.5, float("nan"), None]
        if otype == pa.bool_():
            values = [True, False, None]
        cols = {
            RECORD_KEY: [rng.choice(["a", "b", "cc", "", "dd", "é"]) for _ in range(n)],
            "v": list(range(n)),
        }
        if rng.random() < 0.7:
            cols[IS_DELETED] = [rng.random() < 0.3 for _ in range(n)]
        if otype is not None:
            cols["o"] = pa.array([rng.choice(values) for _ in range(n)], otype)
        t = pa.table(cols)
        field = "o" if otype is not None else None
        hashes = None
        if case % 3 == 0:  # every key in one hash: the kernel must tell keys apart by bytes
            hashes = np.zeros(n, dtype=np.uint64)
        compiled = records._fold_compiled(t, field, hashes)
        assert compiled is not None
        with monkeypatch.context() as m:
            m.setattr(records, "_fold_compiled", lambda *a: None)
            plain = records.precombine_plan(t, field)
        assert compiled[1] == plain[1], case
        if plain[0] is None or compiled[0] is None:
            kept = np.arange(n)
            assert (kept if compiled[0] is None else compiled[0]).tolist() == (
                kept if plain[0] is None else plain[0]
            ).tolist(), case
        else:
            assert compiled[0].tolist() == plain[0].tolist(), case
    # ordering values Arrow compares (strings) are left to the numpy path
    s = pa.table({RECORD_KEY: ["a", "a"], "o": ["x", "y"]})
    assert records._fold_compiled(s, "o", None) is None


def test_a_partition_path_segment_over_the_file_system_limit_is_refused():
    limit = MAX_PARTITION_SEGMENT_BYTES
    fine = ["", "a" * limit, "/".join(["b" * limit] * 3), None]
    _check_partition_segments(pa.array(fine))  # long paths of short segments pass
    _check_partition_segments(pa.chunked_array([pa.array(fine[:2]), pa.array(fine[2:])]))
    too_long = pa.array(["x", "ok/" + "c" * (limit + 1) + "/ok"])
    with pytest.raises(HoodieInputError, match=f"{limit + 1} bytes long"):
        _check_partition_segments(too_long)
    with pytest.raises(HoodieInputError):
        _check_partition_segments(too_long.slice(1, 1))
    _check_partition_segments(too_long.slice(0, 1))
