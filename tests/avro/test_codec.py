"""Column-wise Avro binary codec (hoodie_ray.avro.codec) against fastavro, the reference."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import math
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from hoodie_ray.avro.codec import (
    decode_records,
    encode_binary,
    encode_records,
    unsigned_varint,
    zigzag_varint,
)
from hoodie_ray.avro.schema import arrow_to_avro_schema, avro_to_arrow_schema, parse_avro_schema
from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieInputError, HoodieSchemaError

STRINGS = ["", "a", "üñíçødé", "日本語テキスト", "emoji 😀🚀", "x" * 300, "nul\x00inside", "tab\t"]
INT64_EDGES = [0, -1, 1, 63, -64, 64, -65, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)]


def _valid(rng: np.random.Generator, n: int, p: float = 0.25) -> np.ndarray:
    return rng.random(n) > p


def _strings(rng: np.random.Generator, n: int) -> list[str]:
    out = []
    for i in range(n):
        if rng.random() < 0.5:
            out.append(STRINGS[i % len(STRINGS)])
        else:
            k = int(rng.integers(0, 20))
            out.append("".join(chr(int(c)) for c in rng.integers(32, 0x2FF, k)))
    return out


def random_table(seed: int, n: int = 200) -> pa.Table:
    """Many Avro-mappable types with nulls, unicode, empty strings, extreme ints, NaN floats."""
    rng = np.random.default_rng(seed)

    def masked(values: list[Any], typ: pa.DataType, p: float = 0.25) -> pa.Array:
        v = _valid(rng, n, p)
        return pa.array([x if ok else None for x, ok in zip(values, v, strict=True)], typ)

    i64 = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64, endpoint=True)
    i64[: len(INT64_EDGES)] = INT64_EDGES[: min(n, len(INT64_EDGES))]
    small = rng.integers(-200, 200, n)
    f64 = rng.normal(0, 1e6, n)
    f64[:5] = [math.nan, math.inf, -math.inf, -0.0, 5e-324][: min(n, 5)]
    f32 = rng.normal(0, 100, n).astype(np.float32)
    f32[:2] = [np.nan, -np.inf][: min(n, 2)]
    decs = [decimal.Decimal(int(x)).scaleb(-2) for x in rng.integers(-(10**10) + 1, 10**10, n)]
    big_decs = [
        decimal.Decimal(int(x) * 10**20).scaleb(-10) for x in rng.integers(-(10**17), 10**17, n)
    ]
    days = rng.integers(-30000, 60000, n)
    micros = rng.integers(-(2**52), 2**52, n)
    lists = [list(rng.integers(-(2**40), 2**40, int(rng.integers(0, 5)))) for _ in range(n)]
    cols: dict[str, pa.Array] = {
        "i8": pa.array(rng.integers(-128, 128, n), pa.int8()),
        "i16": masked(list(rng.integers(-(2**15), 2**15, n)), pa.int16()),
        "i32": masked([int(x) for x in rng.integers(-(2**31), 2**31, n)], pa.int32()),
        "i64": masked([int(x) for x in i64], pa.int64(), 0.1),
        "u16": pa.array(rng.integers(0, 2**16, n), pa.uint16()),
        "small": pa.array(small, pa.int64()),
        "f32": masked(f32.tolist(), pa.float32()),
        "f64": masked(f64.tolist(), pa.float64()),
        "flag": masked([bool(x) for x in rng.integers(0, 2, n)], pa.bool_()),
        "s": masked(_strings(rng, n), pa.string()),
        "s_nn": pa.array(_strings(rng, n), pa.string()),
        "ls": masked(_strings(rng, n), pa.large_string()),
        "bin": masked(
            [
                bytes(rng.integers(0, 256, int(rng.integers(0, 9))).astype(np.uint8))
                for _ in range(n)
            ],
            pa.binary(),
        ),
        "dec": masked(decs, pa.decimal128(12, 2)),
        "dec38": masked(big_decs, pa.decimal128(38, 10)),
        "day": masked([dt.date(1970, 1, 1) + dt.timedelta(days=int(d)) for d in days], pa.date32()),
        "ts": masked([int(x) for x in micros], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "ts_ms": masked([int(x) // 1000 for x in micros], pa.int64()).cast(
            pa.timestamp("ms", tz="UTC")
        ),
        "tm": masked([int(x) for x in rng.integers(0, 86_400_000_000, n)], pa.int64()).cast(
            pa.time64("us")
        ),
        "st": pa.array(
            [
                None
                if rng.random() < 0.2
                else {
                    "a": int(rng.integers(-5, 5)) if rng.random() > 0.2 else None,
                    "b": _strings(rng, 1)[0],
                }
                for _ in range(n)
            ],
            pa.struct([("a", pa.int64()), ("b", pa.string())]),
        ),
        "li": masked(lists, pa.list_(pa.int64())),
        "lst": pa.array(
            [
                None
                if rng.random() < 0.2
                else [
                    None
                    if rng.random() < 0.2
                    else {"x": _strings(rng, 1)[0], "y": float(rng.random())}
                    for _ in range(int(rng.integers(0, 4)))
                ]
                for _ in range(n)
            ],
            pa.list_(pa.struct([("x", pa.string()), ("y", pa.float64())])),
        ),
        "mp": pa.array(
            [
                None
                if rng.random() < 0.2
                else [
                    (
                        f"k{j}{_strings(rng, 1)[0]}",
                        None if rng.random() < 0.2 else float(rng.random()),
                    )
                    for j in range(int(rng.integers(0, 4)))
                ]
                for _ in range(n)
            ],
            pa.map_(pa.string(), pa.float64()),
        ),
        "ll": masked(
            [
                [_strings(rng, int(rng.integers(0, 3))) for _ in range(int(rng.integers(0, 3)))]
                for _ in range(n)
            ],
            pa.list_(pa.list_(pa.string())),
        ),
    }
    fields = [
        pa.field(k, v.type, nullable=(v.null_count > 0 or k in ("st", "lst", "mp")))
        for k, v in cols.items()
    ]
    return pa.Table.from_arrays(list(cols.values()), schema=pa.schema(fields))


def to_fastavro_value(v: Any, t: pa.DataType) -> Any:
    """A to_pylist value as fastavro's writer wants it (maps as dicts)."""
    if v is None:
        return None
    if pa.types.is_map(t):
        return {k: to_fastavro_value(x, t.item_type) for k, x in v}
    if pa.types.is_struct(t):
        return {f.name: to_fastavro_value(v[f.name], f.type) for f in t}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [to_fastavro_value(x, t.value_type) for x in v]
    return v


def fastavro_encode(table: pa.Table, schema: Any) -> tuple[bytes, np.ndarray]:
    parsed = fastavro.parse_schema(schema)
    out = []
    offsets = [0]
    for row in table.to_pylist():
        rec = {f.name: to_fastavro_value(row[f.name], f.type) for f in table.schema}
        bio = io.BytesIO()
        fastavro.schemaless_writer(bio, parsed, rec)
        out.append(bio.getvalue())
        offsets.append(offsets[-1] + len(out[-1]))
    return b"".join(out), np.array(offsets, dtype=np.int64)


def fastavro_decode(buf: bytes, offsets: np.ndarray, schema: Any) -> list[dict[str, Any]]:
    parsed = fastavro.parse_schema(schema)
    return [
        fastavro.schemaless_reader(io.BytesIO(buf[offsets[i] : offsets[i + 1]]), parsed, None)
        for i in range(len(offsets) - 1)
    ]


def norm(v: Any) -> Any:
    """Comparable form: NaN as a marker, maps as sorted item lists, tz-aware datetimes in UTC."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [norm(x) for x in v]
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc)
    return v


def arrow_rows(table: pa.Table) -> list[dict[str, Any]]:
    return [
        {f.name: norm(to_fastavro_value(row[f.name], f.type)) for f in table.schema}
        for row in table.to_pylist()
    ]


@pytest.mark.parametrize("seed", range(6))
def test_encode_matches_fastavro_bytes(seed):
    table = random_table(seed)
    schema = arrow_to_avro_schema(table.schema, "t", with_meta=False)
    buf, offsets = encode_records(table, schema)
    ref_buf, ref_offsets = fastavro_encode(table, schema)
    assert offsets.tolist() == ref_offsets.tolist()
    assert buf.tobytes() == ref_buf


@pytest.mark.parametrize("seed", range(6))
def test_decode_roundtrip_and_fastavro_agree(seed):
    table = random_table(seed + 100)
    schema = arrow_to_avro_schema(table.schema, "t", with_meta=False)
    buf, offsets = encode_records(table, schema)
    decoded = decode_records(buf, offsets, schema)
    assert decoded.schema.equals(avro_to_arrow_schema(schema))
    assert arrow_rows(decoded) == [norm(r) for r in fastavro_decode(buf.tobytes(), offsets, schema)]
    assert arrow_rows(decoded) == arrow_rows(table)
    # re-encoding the decoded table gives the same bytes
    buf2, _ = encode_records(decoded, schema)
    assert buf2.tobytes() == buf.tobytes()


@pytest.mark.parametrize("seed", range(3))
def test_decode_fastavro_written_java_style_unions(seed):
    """Unions written as [T, "null"] (Hudi's create.schema style), decimals as fixed."""
    table = random_table(seed + 200, 120)
    schema = arrow_to_avro_schema(table.schema, "t", with_meta=True)
    for f in schema["fields"]:
        if isinstance(f["type"], list):
            f["type"] = [f["type"][1], "null"]
            f.pop("default", None)
    table = table.select([f.name for f in table.schema])  # meta columns absent: written as null
    ref_buf, ref_offsets = fastavro_encode(
        pa.Table.from_arrays(
            [pa.nulls(table.num_rows, pa.string())] * 5 + list(table.columns),
            names=[f["name"] for f in schema["fields"]],
        ),
        schema,
    )
    decoded = decode_records(ref_buf, ref_offsets, schema)
    assert arrow_rows(
        decoded.drop_columns([f["name"] for f in schema["fields"][:5]])
    ) == arrow_rows(table)
    buf, offsets = encode_records(table, schema)
    assert buf.tobytes() == ref_buf and offsets.tolist() == ref_offsets.tolist()


def test_column_projection_and_length_prefix():
    table = random_table(7, 50)
    schema = arrow_to_avro_schema(table.schema, "t", with_meta=False)
    buf, offsets = encode_records(table, schema)
    sub = decode_records(buf, offsets, schema, columns=["s", "i64", "mp"])
    assert sub.column_names == ["s", "i64", "mp"]
    assert arrow_rows(sub) == arrow_rows(table.select(["s", "i64", "mp"]))
    framed = encode_binary(table, schema, length_prefix=True)
    for i, rec in enumerate(framed.to_pylist()):
        n = int.from_bytes(rec[:4], "big")
        assert rec[4:] == buf[offsets[i] : offsets[i + 1]].tobytes() and n == len(rec) - 4


def test_empty_table_and_all_null_columns():
    schema = pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.list_(pa.int32()))])
    avro = arrow_to_avro_schema(schema, "t", False)
    empty = schema.empty_table()
    buf, offsets = encode_records(empty, avro)
    assert len(buf) == 0 and offsets.tolist() == [0]
    assert decode_records(buf, offsets, avro).num_rows == 0
    nulls = pa.table(
        {
            "a": pa.nulls(3, pa.int64()),
            "b": pa.nulls(3, pa.string()),
            "c": pa.nulls(3, pa.list_(pa.int32())),
        }
    )
    buf, offsets = encode_records(nulls, avro)
    assert buf.tobytes() == b"\x00\x00\x00" * 3
    assert decode_records(buf, offsets, avro).to_pylist() == nulls.to_pylist()


def test_missing_nullable_column_written_as_null_and_errors():
    avro = arrow_to_avro_schema(
        pa.schema([pa.field("a", pa.int64(), nullable=False), ("b", pa.string())]), "t", False
    )
    buf, offsets = encode_records(pa.table({"a": [1, 2]}), avro)
    assert decode_records(buf, offsets, avro)["b"].null_count == 2
    with pytest.raises(HoodieSchemaError, match="'a'"):
        encode_records(pa.table({"b": ["x"]}), avro)
    with pytest.raises(HoodieSchemaError, match="zzz"):
        encode_records(pa.table({"a": [1], "zzz": [1]}), avro)
    with pytest.raises(HoodieInputError, match="'a'"):
        encode_records(pa.table({"a": pa.array([1, None], pa.int64())}), avro)
    int_schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}
    with pytest.raises(HoodieInputError, match="'a'"):
        encode_records(pa.table({"a": pa.array([2**40], pa.int64())}), int_schema)


def test_conversions_timestamps_dates_enums_fixed_bytes_decimal():
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "ns", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "sec", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "d64", "type": {"type": "int", "logicalType": "date"}},
            {"name": "en", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
            {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 3}},
            {
                "name": "bd",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4},
            },
        ],
    }
    table = pa.table(
        {
            "ns": pa.array([1_500, -1_500, 0], pa.timestamp("ns")),
            "sec": pa.array([1, -2, 0], pa.timestamp("s")),
            "d64": pa.array([86_400_000, 0, -86_400_000], pa.date64()),
            "en": pa.array(["C", "A", "B"]),
            "fx": pa.array([b"abc", b"\x00\x00\x00", b"\xff\xfe\xfd"], pa.binary(3)),
            "bd": pa.array(
                [decimal.Decimal("0"), decimal.Decimal("-1.5"), decimal.Decimal("12345678.9999")],
                pa.decimal128(20, 4),
            ),
        }
    )
    buf, offsets = encode_records(table, schema)
    rows = fastavro_decode(buf.tobytes(), offsets, schema)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    # nanoseconds are floored to microseconds
    assert [r["ns"] for r in rows] == [
        epoch + dt.timedelta(microseconds=1),
        epoch - dt.timedelta(microseconds=2),
        epoch,
    ]
    assert [r["sec"] for r in rows] == [
        epoch + dt.timedelta(seconds=1),
        epoch - dt.timedelta(seconds=2),
        epoch,
    ]
    assert [r["d64"] for r in rows] == [
        dt.date(1970, 1, 2),
        dt.date(1970, 1, 1),
        dt.date(1969, 12, 31),
    ]
    assert [r["en"] for r in rows] == ["C", "A", "B"]
    assert [r["bd"] for r in rows] == [
        decimal.Decimal("0.0000"),
        decimal.Decimal("-1.5000"),
        decimal.Decimal("12345678.9999"),
    ]
    back = decode_records(buf, offsets, schema)
    assert back["en"].to_pylist() == ["C", "A", "B"]
    assert back["fx"].to_pylist() == [b"abc", b"\x00\x00\x00", b"\xff\xfe\xfd"]
    assert back["bd"].type == pa.decimal128(20, 4) and back["bd"].to_pylist()[1] == decimal.Decimal(
        "-1.5000"
    )
    with pytest.raises(HoodieInputError, match="enum"):
        encode_records(table.set_column(3, "en", pa.array(["A", "Z", "B"])), schema)


def test_decimal_bytes_minimal_encoding_like_java():
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {
                "name": "d",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0},
            }
        ],
    }
    vals = [0, 1, -1, 127, 128, -128, -129, 255, 256, 10**37, -(10**37)]
    table = pa.table({"d": pa.array([decimal.Decimal(v) for v in vals], pa.decimal128(38, 0))})
    buf, offsets = encode_records(table, schema)
    for i, v in enumerate(vals):
        rec = buf[offsets[i] : offsets[i + 1]].tobytes()
        n = (v.bit_length() + 8) // 8 if v >= 0 else ((-v - 1).bit_length() + 8) // 8
        assert rec[1:] == v.to_bytes(n, "big", signed=True)
    assert decode_records(buf, offsets, schema)["d"].to_pylist() == [
        decimal.Decimal(v) for v in vals
    ]


def test_long_arrays_use_the_fallback_and_agree():
    items = list(range(-3000, 3000))
    table = pa.table(
        {
            "l": pa.array([[1, 2], items, [], None, [5]], pa.list_(pa.int64())),
            "m": pa.array(
                [[("a", 1)], [(str(i), i) for i in range(5000)], [], [], None],
                pa.map_(pa.string(), pa.int64()),
            ),
        }
    )
    schema = arrow_to_avro_schema(table.schema, "t", False)
    buf, offsets = encode_records(table, schema)
    ref, _ = fastavro_encode(table, schema)
    assert buf.tobytes() == ref
    assert arrow_rows(decode_records(buf, offsets, schema)) == arrow_rows(table)


def test_fastavro_written_multi_block_arrays_decode():
    """Arrays/maps written in several blocks (negative counts with byte sizes) decode."""
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "l", "type": {"type": "array", "items": "string"}},
            {"name": "n", "type": "int"},
        ],
    }
    # two blocks: count -2 with byte size, then count 1, then end
    rec = b"\x03" + b"\x08" + b"\x02a\x02b" + b"\x02" + b"\x02c" + b"\x00" + b"\x54"
    buf = rec + rec
    out = decode_records(buf, [0, len(rec), 2 * len(rec)], schema)
    assert out.to_pylist() == [{"l": ["a", "b", "c"], "n": 42}] * 2


# -- hostile input ------------------------------------------------------------------------------

LONG_SCHEMA = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}
STR_SCHEMA = {"type": "record", "name": "r", "fields": [{"name": "s", "type": ["null", "string"]}]}
ARR_SCHEMA = {
    "type": "record",
    "name": "r",
    "fields": [{"name": "l", "type": {"type": "array", "items": "long"}}],
}
NULL_ARR_SCHEMA = {
    "type": "record",
    "name": "r",
    "fields": [{"name": "l", "type": {"type": "array", "items": "null"}}],
}


@pytest.mark.parametrize(
    ("schema", "record", "match"),
    [
        (LONG_SCHEMA, b"\xff" * 11, "longer than 10"),
        (LONG_SCHEMA, b"\xff\xff", "past the end"),
        (STR_SCHEMA, b"\x02\x10abc", "beyond the end"),
        (STR_SCHEMA, b"\x02\x01", "negative"),
        (STR_SCHEMA, b"\x04", "union branch out of range"),
        (STR_SCHEMA, b"\x03", "union branch out of range"),
        (STR_SCHEMA, b"\x00\x00", "does not account"),
        (STR_SCHEMA, b"\x02\x04\xff\xfe", "UTF-8"),
        (ARR_SCHEMA, b"\xfe\xff\xff\xff\x0f", "item count"),
        (NULL_ARR_SCHEMA, b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f", "item count"),
        (ARR_SCHEMA, b"\x01\x01", "negative block size"),
    ],
)
def test_hostile_records_raise_corrupted_data(schema, record, match):
    with pytest.raises(HoodieCorruptedDataError, match=match) as e:
        decode_records(record, [0, len(record)], schema, source="some/file.log")
    assert "some/file.log" in str(e.value)


def test_bad_offsets_refused():
    with pytest.raises(HoodieCorruptedDataError):
        decode_records(b"\x00\x00", [0, 5], LONG_SCHEMA)
    with pytest.raises(HoodieCorruptedDataError):
        decode_records(b"\x00\x00", [1, 0], LONG_SCHEMA)


@pytest.mark.parametrize("seed", range(4))
def test_random_garbage_never_crashes(seed):
    """Random bytes under a rich schema: decodes or raises HoodieCorruptedDataError, nothing else."""
    table = random_table(seed + 300, 30)
    schema = parse_avro_schema(arrow_to_avro_schema(table.schema, "t", False))
    buf, offsets = encode_records(table, schema)
    rng = np.random.default_rng(seed)
    for trial in range(60):
        mutated = buf.copy()
        if trial % 2:
            idx = rng.integers(0, len(mutated), 1 + trial % 7)
            mutated[idx] = rng.integers(0, 256, len(idx))
        else:
            mutated = rng.integers(0, 256, len(buf), dtype=np.uint8)
        try:
            decode_records(mutated, offsets, schema)
        except HoodieCorruptedDataError:
            pass


def test_sliced_chunked_and_record_batch_inputs():
    table = random_table(11, 300)
    schema = arrow_to_avro_schema(table.schema, "t", with_meta=False)
    chunked = pa.concat_tables([table.slice(0, 50), table.slice(50, 80), table.slice(130)])
    for sub in (
        table.slice(37, 100),
        chunked,
        table.slice(299),
        table.to_batches()[0].slice(3, 40),
    ):
        buf, offsets = encode_records(sub, schema)
        ref, ref_offsets = fastavro_encode(
            pa.Table.from_batches([sub]) if isinstance(sub, pa.RecordBatch) else sub, schema
        )
        assert buf.tobytes() == ref and offsets.tolist() == ref_offsets.tolist()
        expected = arrow_rows(
            pa.Table.from_batches([sub]) if isinstance(sub, pa.RecordBatch) else sub
        )
        assert arrow_rows(decode_records(buf, offsets, schema)) == expected
        # a window of the records (offsets not starting at 0)
        if len(offsets) > 20:
            assert arrow_rows(decode_records(buf, offsets[5:20], schema)) == expected[5:19]


def test_plain_null_fields_decode_as_null_columns():
    """A field of Avro type ``null`` (not a union) holds no bytes: a column of nulls, as long
    as the others, at top level and inside a nested record."""
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "a", "type": "null"},
            {"name": "b", "type": "long"},
            {
                "name": "c",
                "type": {"type": "record", "name": "c", "fields": [{"name": "z", "type": "null"}]},
            },
        ],
    }
    table = pa.table(
        {
            "a": pa.nulls(3),
            "b": [1, 2, 3],
            "c": pa.array([{"z": None}] * 3, pa.struct([("z", pa.null())])),
        }
    )
    buf, offsets = encode_records(table, schema)
    got = decode_records(buf, offsets, schema)
    assert got.num_rows == 3
    assert got.column("a").null_count == 3 and got.column("b").to_pylist() == [1, 2, 3]
    assert got.column("c").to_pylist() == [{"z": None}] * 3
    assert fastavro_decode(bytes(buf), offsets, schema) == [
        {"a": None, "b": i, "c": {"z": None}} for i in (1, 2, 3)
    ]


def test_scalar_varints_match_fastavro_longs() -> None:
    """One long as fastavro writes it; the unsigned varint is the same bytes before zigzag."""
    for v in INT64_EDGES:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, "long", v)
        assert zigzag_varint(v) == buf.getvalue()
    assert unsigned_varint(0) == b"\x00"
    assert unsigned_varint(300) == b"\xac\x02"
    assert unsigned_varint(2**64 - 1) == b"\xff" * 9 + b"\x01"
