"""The compiled walks (hoodie_ray/avro/kernel.py) against the numpy decoder beside them: the same
tables from the same bytes, the same errors from bad bytes."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from hoodie_ray.avro import codec, kernel
from hoodie_ray.avro.codec import decode_records, encode_binary, encode_records
from hoodie_ray.avro.schema import arrow_to_avro_schema, parse_avro_schema
from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieInputError, HoodieSchemaError
from tests.avro.test_codec import arrow_rows, fastavro_encode, random_table

pytestmark = pytest.mark.skipif(not kernel.available(), reason="numba is not installed here")

#: The columns of random_table a flat plan covers (nested and decimal columns excluded).
FLAT = [
    "i8",
    "i16",
    "i32",
    "i64",
    "u16",
    "small",
    "f32",
    "f64",
    "flag",
    "s",
    "s_nn",
    "ls",
    "bin",
    "day",
    "ts",
    "ts_ms",
    "tm",
]


#: What a decode may raise, and what an encode may raise.
DECODE_ERRORS: tuple[type[Exception], ...] = (HoodieCorruptedDataError,)
ENCODE_ERRORS: tuple[type[Exception], ...] = (HoodieInputError, HoodieSchemaError)


def outcome(fn: Callable[[], Any], errors: tuple[type[Exception], ...]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except errors as e:
        return "error", f"{type(e).__name__}: {e}"


def both_paths(
    monkeypatch: pytest.MonkeyPatch,
    fn: Callable[[], Any],
    errors: tuple[type[Exception], ...] = DECODE_ERRORS,
) -> tuple[Any, Any]:
    """``fn`` with the compiled kernels (for any record count), then with the numpy path only."""
    with monkeypatch.context() as m:
        m.setattr(codec, "_JIT_MIN_RECORDS", 0)
        compiled = outcome(fn, errors)
    with monkeypatch.context() as m:
        m.setattr(kernel, "available", lambda: False)
        plain = outcome(fn, errors)
    return compiled, plain


def same(compiled: tuple[str, Any], plain: tuple[str, Any]) -> None:
    assert compiled[0] == plain[0], (compiled, plain)
    if compiled[0] == "ok":
        assert compiled[1].schema == plain[1].schema
        assert arrow_rows(compiled[1]) == arrow_rows(plain[1])
    else:
        assert compiled[1] == plain[1]


def test_flat_plans_cover_flat_records_only():
    table = random_table(0, 10)
    flat = parse_avro_schema(arrow_to_avro_schema(table.select(FLAT).schema, "t", with_meta=True))
    plan = kernel.flat_plan(flat)
    assert plan is not None and len(plan.kinds) == len(FLAT) + 5
    assert (
        kernel.flat_plan(parse_avro_schema(arrow_to_avro_schema(table.schema, "t", False))) is None
    )

    def rec(t: Any) -> Any:
        return parse_avro_schema(
            {"type": "record", "name": "r", "fields": [{"name": "f", "type": t}]}
        )

    assert kernel.flat_plan(rec("null")) is None
    assert kernel.flat_plan(rec(["null", "long", "string"])) is None
    assert kernel.flat_plan(rec(["long", "string"])) is None
    assert (
        kernel.flat_plan(rec({"type": "bytes", "logicalType": "decimal", "precision": 5})) is None
    )
    assert kernel.flat_plan(rec({"type": "array", "items": "long"})) is None
    p = kernel.flat_plan(rec(["string", "null"]))
    assert p is not None and int(p.null_branch[0]) == 1 and int(p.value_branch[0]) == 0


@pytest.mark.parametrize("seed", range(5))
def test_compiled_walk_decodes_what_the_numpy_path_decodes(seed, monkeypatch):
    table = random_table(seed, 400).select(FLAT)
    schema = parse_avro_schema(arrow_to_avro_schema(table.schema, "t", with_meta=False))
    buf, offsets = encode_records(table, schema)
    compiled, plain = both_paths(monkeypatch, lambda: decode_records(buf, offsets, schema))
    same(compiled, plain)
    assert arrow_rows(compiled[1]) == arrow_rows(table)
    cols = ["s", "f64", "flag"]
    compiled, plain = both_paths(
        monkeypatch, lambda: decode_records(buf, offsets, schema, columns=cols)
    )
    same(compiled, plain)
    assert compiled[1].column_names == cols


def test_java_style_unions_and_extreme_values(monkeypatch):
    """Unions with null second, as Java writers also emit, fastavro-encoded; int/long edges."""
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "a", "type": ["long", "null"]},
            {"name": "b", "type": ["string", "null"]},
            {"name": "c", "type": "int"},
            {"name": "d", "type": ["null", "double"]},
            {"name": "e", "type": "float"},
            {"name": "f", "type": "boolean"},
            {"name": "g", "type": "bytes"},
        ],
    }
    rng = np.random.default_rng(3)
    n = 300
    longs = [2**63 - 1, -(2**63), 0, -1, 1, 2**31, -(2**31) - 1]
    ints = [2**31 - 1, -(2**31), 0, -1]
    rows = [
        {
            "a": None if i % 5 == 0 else longs[i % len(longs)],
            "b": None if i % 3 == 0 else "é" * (i % 7),
            "c": ints[i % len(ints)],
            "d": None if i % 4 == 0 else float(rng.normal()) * (-1) ** i,
            "e": float(np.float32(rng.normal())),
            "f": bool(i % 2),
            "g": bytes(rng.integers(0, 256, i % 9).astype(np.uint8)),
        }
        for i in range(n)
    ]
    parsed = fastavro.parse_schema(schema)
    pieces, offsets = [], [0]
    for r in rows:
        bio = io.BytesIO()
        fastavro.schemaless_writer(bio, parsed, r)
        pieces.append(bio.getvalue())
        offsets.append(offsets[-1] + len(pieces[-1]))
    buf = b"".join(pieces)
    compiled, plain = both_paths(monkeypatch, lambda: decode_records(buf, offsets, schema))
    same(compiled, plain)
    got = compiled[1].to_pylist()
    assert [g["a"] for g in got] == [r["a"] for r in rows]
    assert [g["c"] for g in got] == [r["c"] for r in rows]
    assert [g["g"] for g in got] == [r["g"] for r in rows]


@pytest.mark.parametrize("seed", range(4))
def test_bad_bytes_fail_alike_on_both_paths(seed, monkeypatch):
    """Mutated and truncated records: both paths decode the same table or raise the same
    error (the compiled walk hands a fault to the numpy path, which names it)."""
    table = random_table(seed + 40, 120).select(FLAT)
    schema = parse_avro_schema(arrow_to_avro_schema(table.schema, "t", with_meta=False))
    buf, offsets = encode_records(table, schema)
    rng = np.random.default_rng(seed)
    errors = 0
    for trial in range(40):
        mutated = buf.copy()
        idx = rng.integers(0, len(mutated), 1 + trial % 5)
        mutated[idx] = rng.integers(0, 256, len(idx))
        offs = offsets.copy()
        if trial % 7 == 3:  # a record cut short
            offs[-1] -= 1
        compiled, plain = both_paths(
            monkeypatch, lambda m=mutated, o=offs: decode_records(m, o, schema, source="f.log")
        )
        same(compiled, plain)
        errors += compiled[0] == "error"
    assert errors  # the mutations did hit faults


def _prefixed(records: list[bytes]) -> bytes:
    return struct.pack(">ii", 3, len(records)) + b"".join(
        struct.pack(">i", len(r)) + r for r in records
    )


def test_length_prefixed_walk_matches_and_faults_alike(monkeypatch):
    rng = np.random.default_rng(9)
    records = [
        bytes(rng.integers(0, 256, int(rng.integers(0, 40))).astype(np.uint8)) for _ in range(200)
    ]
    content = _prefixed(records)

    def walk(data: bytes, count: int) -> Any:
        return codec.length_prefixed_spans(data, 8, count, "blk")

    compiled, plain = both_paths(monkeypatch, lambda: walk(content, 200))
    assert compiled[0] == plain[0] == "ok"
    for a, b in zip(compiled[1][:2], plain[1][:2], strict=True):
        assert np.array_equal(a, b)
    assert compiled[1][2] == plain[1][2] == len(content)
    negative = bytearray(content)
    negative[8 + 4 + len(records[0]) : 8 + 8 + len(records[0])] = struct.pack(">i", -5)
    for data, count in ((content[:-3], 200), (bytes(negative), 200), (content, 201)):
        compiled, plain = both_paths(monkeypatch, lambda d=data, c=count: walk(d, c))
        assert compiled[0] == plain[0] == "error"
        assert compiled[1] == plain[1]


def test_avro_block_of_hudi_layout_rows(monkeypatch):
    """A q1-shaped block (meta columns first, as hoodie_ray and Java write them) round-trips
    through encode_binary and both decoders alike."""
    n = 1000
    rng = np.random.default_rng(1)
    keys = np.arange(n, dtype=np.int64)
    table = pa.table(
        {
            "_hoodie_commit_time": pa.array(["20240601000000000"] * n),
            "_hoodie_commit_seqno": pa.array([f"20240601000000000_0_{i}" for i in range(n)]),
            "_hoodie_record_key": pa.array([str(k) for k in keys]),
            "_hoodie_partition_path": pa.array([""] * n),
            "_hoodie_file_name": pa.array(["f-0_0-1-0_20240601000000000.parquet"] * n),
            "key": keys,
            "ts": rng.integers(0, 2**40, n),
            "name": pa.array([f"item_{k % 1000003}" for k in keys]),
            **{f"c{j}": rng.integers(-(2**63), 2**63 - 1, n, endpoint=True) for j in range(10)},
        }
    )
    avro = arrow_to_avro_schema(
        table.drop_columns([c for c in table.column_names if c.startswith("_hoodie")]).schema,
        "q1",
        with_meta=True,
    )
    encoded = encode_binary(table, avro, length_prefix=False)
    data, offsets = codec.binary_to_numpy(encoded)
    compiled, plain = both_paths(monkeypatch, lambda: decode_records(data, offsets, avro))
    same(compiled, plain)
    assert arrow_rows(compiled[1]) == arrow_rows(table.cast(compiled[1].schema))


def test_fastavro_written_records_decode_on_the_compiled_path(monkeypatch):
    table = random_table(77, 300).select(FLAT)
    avro = arrow_to_avro_schema(table.schema, "t", with_meta=False)
    buf, offsets = fastavro_encode(table, avro)
    compiled, plain = both_paths(monkeypatch, lambda: decode_records(buf, offsets, avro))
    same(compiled, plain)
    assert arrow_rows(compiled[1]) == arrow_rows(table)


# -- encoding ---------------------------------------------------------------------------------


def same_bytes(compiled: tuple[str, Any], plain: tuple[str, Any]) -> None:
    assert compiled[0] == plain[0], (compiled, plain)
    if compiled[0] == "ok":
        assert compiled[1].type == plain[1].type
        assert compiled[1].to_pylist() == plain[1].to_pylist()
    else:
        assert compiled[1] == plain[1]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("length_prefix", [False, True])
def test_compiled_encoder_writes_the_numpy_encoders_bytes(seed, length_prefix, monkeypatch):
    table = random_table(seed, 300).select(FLAT)
    avro = arrow_to_avro_schema(table.schema, "t", with_meta=False)
    for t in (table, table.slice(37, 200), pa.concat_tables([table.slice(0, 10), table.slice(10)])):
        compiled, plain = both_paths(
            monkeypatch,
            lambda t=t: encode_binary(t, avro, length_prefix=length_prefix),
            ENCODE_ERRORS,
        )
        same_bytes(compiled, plain)
    # and fastavro reads what it wrote
    buf, offsets = encode_records(table, avro)
    parsed = fastavro.parse_schema(avro)
    first = fastavro.schemaless_reader(
        io.BytesIO(bytes(buf[offsets[0] : offsets[1]])), parsed, None
    )
    assert set(first) == set(FLAT)


def test_compiled_encoder_conversions_missing_columns_and_dictionaries(monkeypatch):
    n = 200
    rng = np.random.default_rng(5)
    avro = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
            {"name": "d", "type": {"type": "int", "logicalType": "date"}},
            {"name": "small", "type": "int"},
            {"name": "cat", "type": ["null", "string"]},
            {"name": "absent", "type": ["null", "double"]},
            {"name": "raw", "type": "bytes"},
            {"name": "flag", "type": ["boolean", "null"]},
        ],
    }
    micros = rng.integers(-(2**50), 2**50, n)
    table = pa.table(
        {
            "ts": pa.array(micros, pa.int64()).cast(pa.timestamp("us")),
            "d": pa.array(rng.integers(-1000, 1000, n), pa.int32()).cast(pa.date32()),
            "small": pa.array(rng.integers(-100, 100, n), pa.int8()),
            "cat": pa.array(
                [None if i % 4 == 0 else f"c{i % 3}" for i in range(n)]
            ).dictionary_encode(),
            "raw": pa.array([f"é{i}" for i in range(n)], pa.large_string()),
            "flag": pa.array([None if i % 5 == 0 else i % 2 == 0 for i in range(n)]),
        }
    )
    compiled, plain = both_paths(
        monkeypatch, lambda: encode_binary(table, avro, length_prefix=True), ENCODE_ERRORS
    )
    same_bytes(compiled, plain)
    assert compiled[0] == "ok"


@pytest.mark.parametrize(
    ("column", "field_type"),
    [
        (pa.array([1, None] * 50, pa.int64()), "long"),  # null in a non-nullable field
        (pa.array([2**40] * 100, pa.int64()), "int"),  # overflows int
        (pa.array([[1]] * 100), "string"),  # not writable as a string
        (pa.array(["x"] * 100), "long"),  # not writable as a long
    ],
)
def test_compiled_encoder_refuses_what_the_numpy_encoder_refuses(column, field_type, monkeypatch):
    avro = {"type": "record", "name": "r", "fields": [{"name": "a", "type": field_type}]}
    table = pa.table({"a": column})
    compiled, plain = both_paths(monkeypatch, lambda: encode_binary(table, avro), ENCODE_ERRORS)
    assert compiled[0] == plain[0] == "error"
    assert compiled[1] == plain[1]


def test_tables_written_through_the_kernels_read_back_with_hudi_rs(tmp_path, monkeypatch):
    """Avro log blocks large enough for the compiled encoder (upserts with nulls, late records,
    in-batch duplicates and _hoodie_is_deleted deletes): hudi-rs reads exactly the model after
    every commit, and hoodie_ray's reader (the compiled decoder) reads the same."""
    import hoodie_ray as hr
    from tests.write.model import OPTIONS, TableModel, Workload, hudi_rs_snapshot

    calls = {"encode": 0, "decode": 0}
    real_encode, real_walk = kernel.encode_flat_records, kernel.walk_flat_records

    def encode(*a: Any, **k: Any) -> Any:
        calls["encode"] += 1
        return real_encode(*a, **k)

    def walk(*a: Any, **k: Any) -> Any:
        calls["decode"] += 1
        return real_walk(*a, **k)

    monkeypatch.setattr(kernel, "encode_flat_records", encode)
    monkeypatch.setattr(kernel, "walk_flat_records", walk)
    path = tmp_path / "t"
    options = {**OPTIONS, "hoodie.logfile.data.block.format": "avro"}
    wl = Workload(11, keys=600, partitions=("a", "b"))
    model = TableModel()
    for i in range(4):
        rows = []
        for key in wl.rng.sample(wl.keys, 400):
            r = wl._row(key, late=wl.rng.random() < 0.15)
            if i and wl.rng.random() < 0.1:
                r["_hoodie_is_deleted"] = True
            rows.append(r)
        rows.append(dict(rows[0], ts=rows[0]["ts"] + 1, v=7))
        model.write(path, options, "upsert", rows)
        want = model.as_table().to_pylist()
        assert hudi_rs_snapshot(path).to_pylist() == want, f"commit {i}"
        got = hr.read(str(path), columns=list(model.as_table().column_names))
        key = lambda r: r["key"]  # noqa: E731
        assert sorted(got.to_pylist(), key=key) == sorted(want, key=key), f"commit {i}"
    assert calls["encode"] and calls["decode"]
