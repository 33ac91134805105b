"""Arrow <-> Avro schema mapping (hoodie_ray.avro.schema) against Java-written schemas."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie_ray.avro.schema import (
    MAX_DEPTH,
    MAX_FIELDS,
    META_FIELDS,
    add_meta_fields_arrow,
    add_meta_fields_avro,
    arrow_to_avro_schema,
    avro_to_arrow_schema,
    decimal_fixed_size,
    parse_avro_schema,
    schema_to_json,
    strip_meta_fields_arrow,
)
from hoodie_ray.exceptions import HoodieSchemaError
from tests.conftest import SAMPLE_TABLE_PARAMS
from tests.log_format.helpers import properties


def _commit_schemas(root: Path) -> list[str]:
    out = []
    for p in [*root.glob(".hoodie/*commit"), *root.glob(".hoodie/timeline/*commit")]:
        try:
            meta = json.loads(p.read_text())
        except (UnicodeDecodeError, ValueError):
            continue  # v8+ completed instants are Avro files
        schema = (meta.get("extraMetadata") or {}).get("schema")
        if schema:
            out.append(schema)
    return out


@pytest.mark.shared
@pytest.mark.parametrize("name", SAMPLE_TABLE_PARAMS)
def test_java_table_schemas_parse(sample_table, name):
    root = sample_table(name)
    schemas = [properties(root).get("hoodie.table.create.schema"), *_commit_schemas(root)]
    schemas = [s for s in schemas if s]
    assert schemas
    for s in schemas:
        arrow = avro_to_arrow_schema(s)
        assert len(arrow) == len(json.loads(s)["fields"])
        # the compiled type re-emits JSON fastavro accepts
        fastavro.parse_schema(parse_avro_schema(s).fastavro_json())


def _sample_parquet_block(root: Path) -> tuple[str, pa.Schema]:
    log = next(root.glob(".*.log.*"))
    data = log.read_bytes()
    i = data.find(b'{"type"')
    (n,) = struct.unpack(">i", data[i - 4 : i])
    header_schema = data[i : i + n].decode()
    j = data.find(b"PAR1")
    (clen,) = struct.unpack(">q", data[j - 8 : j])
    return header_schema, pq.read_schema(io.BytesIO(data[j : j + clen]))


@pytest.mark.shared
def test_arrow_to_avro_reproduces_java_schema_header(sample_table):
    """The Spark writer's SCHEMA header, rebuilt byte for byte from the block's Arrow schema."""
    root = sample_table("sample_mor_parquet_v6_nonpartitioned")
    header_schema, arrow = _sample_parquet_block(root)
    ours = schema_to_json(arrow_to_avro_schema(arrow, "v6_nonpartitioned", with_meta=True))
    assert ours == header_schema
    assert avro_to_arrow_schema(header_schema).equals(arrow.remove_metadata())


@pytest.mark.shared
def test_create_schema_with_trailing_null_unions(sample_table):
    root = sample_table("sample_mor_avro_v9_txns_nonpart_nometa")
    arrow = avro_to_arrow_schema(properties(root)["hoodie.table.create.schema"])
    assert arrow.field("amount").type == pa.decimal128(15, 2)
    assert arrow.field("fee_amount").type == pa.decimal128(10, 2)
    assert arrow.field("txn_datetime").type == pa.timestamp("us", tz="UTC")
    assert arrow.field("txn_date").type == pa.date32()
    assert all(f.nullable for f in arrow)


def test_naming_rules():
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("price", pa.decimal128(10, 2)),
            pa.field("s", pa.struct([("inner", pa.struct([("d", pa.decimal128(38, 0))]))])),
            pa.field("l", pa.list_(pa.struct([("x", pa.int32())]))),
            pa.field("m", pa.map_(pa.string(), pa.float64())),
        ]
    )
    avro = arrow_to_avro_schema(schema, "tbl", with_meta=True)
    assert avro["name"] == "tbl_record" and avro["namespace"] == "hoodie.tbl"
    fields = {f["name"]: f for f in avro["fields"]}
    assert tuple(f["name"] for f in avro["fields"][:5]) == META_FIELDS
    assert fields["_hoodie_commit_time"] == {
        "name": "_hoodie_commit_time",
        "type": ["null", "string"],
        "doc": "",
        "default": None,
    }
    assert fields["id"] == {"name": "id", "type": "long"}
    price = fields["price"]["type"][1]
    assert price == {
        "type": "fixed",
        "name": "fixed",
        "namespace": "hoodie.tbl.tbl_record.price",
        "size": 5,
        "logicalType": "decimal",
        "precision": 10,
        "scale": 2,
    }
    s = fields["s"]["type"][1]
    assert (s["name"], s["namespace"]) == ("s", "hoodie.tbl.tbl_record")
    inner = s["fields"][0]["type"][1]
    assert (inner["name"], inner["namespace"]) == ("inner", "hoodie.tbl.tbl_record.s")
    assert inner["fields"][0]["type"][1]["namespace"] == "hoodie.tbl.tbl_record.s.inner.d"
    assert inner["fields"][0]["type"][1]["size"] == 16
    items = fields["l"]["type"][1]["items"]
    assert items[0] == "null" and items[1]["name"] == "l"
    assert fields["m"]["type"][1] == {"type": "map", "values": ["null", "double"]}
    # the result compiles, and maps back
    back = avro_to_arrow_schema(avro)
    assert back.field("price").type == pa.decimal128(10, 2)
    assert back.field("id").nullable is False


@pytest.mark.parametrize(
    ("arrow", "avro"),
    [
        (pa.int8(), "int"),
        (pa.int16(), "int"),
        (pa.uint16(), "int"),
        (pa.int32(), "int"),
        (pa.uint32(), "long"),
        (pa.int64(), "long"),
        (pa.float32(), "float"),
        (pa.float64(), "double"),
        (pa.bool_(), "boolean"),
        (pa.string(), "string"),
        (pa.large_string(), "string"),
        (pa.binary(), "bytes"),
        (pa.binary(4), "bytes"),
        (pa.date32(), {"type": "int", "logicalType": "date"}),
        (pa.timestamp("us", tz="UTC"), {"type": "long", "logicalType": "timestamp-micros"}),
        (pa.timestamp("ns"), {"type": "long", "logicalType": "timestamp-micros"}),
        (pa.timestamp("ms"), {"type": "long", "logicalType": "timestamp-millis"}),
        (pa.time64("us"), {"type": "long", "logicalType": "time-micros"}),
        (pa.time32("ms"), {"type": "int", "logicalType": "time-millis"}),
        (pa.dictionary(pa.int32(), pa.string()), "string"),
    ],
)
def test_primitive_mapping(arrow, avro):
    out = arrow_to_avro_schema(pa.schema([pa.field("c", arrow, nullable=False)]), "t", False)
    assert out["fields"][0]["type"] == avro


@pytest.mark.parametrize(
    "typ",
    [
        pa.uint64(),
        pa.float16(),
        pa.duration("s"),
        pa.month_day_nano_interval(),
        pa.map_(pa.int32(), pa.int32()),
    ],
)
def test_unsupported_types_name_the_field(typ):
    with pytest.raises(HoodieSchemaError, match="bad_col"):
        arrow_to_avro_schema(
            pa.schema([pa.field("ok", pa.int32()), pa.field("bad_col", typ)]), "t", False
        )


def test_nested_unsupported_names_the_path():
    s = pa.schema([pa.field("outer", pa.struct([pa.field("m", pa.map_(pa.int64(), pa.string()))]))])
    with pytest.raises(HoodieSchemaError, match=r"outer\.m"):
        arrow_to_avro_schema(s, "t", False)


def test_invalid_names_refused():
    with pytest.raises(HoodieSchemaError, match="my col"):
        arrow_to_avro_schema(pa.schema([("my col", pa.int32())]), "t", False)
    # table names are sanitised like Java's HoodieAvroUtils.sanitizeName, not refused
    sanitised = arrow_to_avro_schema(pa.schema([("a", pa.int32())]), "my-table", False)
    assert (sanitised["name"], sanitised["namespace"]) == ("my_table_record", "hoodie.my_table")
    assert arrow_to_avro_schema(pa.schema([("a", pa.int32())]), "1t", False)["name"] == "_1t_record"


def test_decimal_fixed_size_matches_java_rule():
    expected = {1: 1, 2: 1, 3: 2, 4: 2, 9: 4, 10: 5, 15: 7, 18: 8, 19: 9, 38: 16}
    for p, n in expected.items():
        assert decimal_fixed_size(p) == n


def test_meta_helpers():
    s = pa.schema([("a", pa.int32()), ("_hoodie_record_key", pa.string())])
    with_meta = add_meta_fields_arrow(s)
    assert with_meta.names == [*META_FIELDS, "a"]
    assert strip_meta_fields_arrow(with_meta).names == ["a"]
    avro = add_meta_fields_avro(
        {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}
    )
    assert [f["name"] for f in avro["fields"]] == [*META_FIELDS, "a"]


def test_avro_to_arrow_variants():
    schema = {
        "type": "record",
        "name": "r",
        "namespace": "ns",
        "fields": [
            {"name": "a", "type": ["null", "int"]},
            {"name": "b", "type": ["string", "null"]},
            {"name": "c", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
            {
                "name": "d",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 3},
            },
            {"name": "e", "type": {"type": "fixed", "name": "F", "size": 3}},
            {"name": "f", "type": "F"},
            {"name": "g", "type": {"type": "array", "items": "ns.E"}},
            {"name": "h", "type": {"type": "map", "values": ["null", "long"]}},
            {"name": "i", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
            {"name": "j", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "k", "type": {"type": "int", "logicalType": "unknown-logical"}},
        ],
    }
    arrow = avro_to_arrow_schema(json.dumps(schema))
    assert arrow.field("a").nullable and arrow.field("a").type == pa.int32()
    assert arrow.field("b").nullable and arrow.field("b").type == pa.string()
    assert not arrow.field("c").nullable and arrow.field("c").type == pa.string()
    assert arrow.field("d").type == pa.decimal256(40, 3)
    assert arrow.field("e").type == pa.binary(3) and arrow.field("f").type == pa.binary(3)
    assert arrow.field("g").type == pa.list_(pa.field("element", pa.string(), nullable=False))
    assert arrow.field("h").type.item_type == pa.int64()
    assert arrow.field("i").type == pa.timestamp("ms")
    assert arrow.field("j").type == pa.string()
    assert arrow.field("k").type == pa.int32()


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        (
            '{"type": "record", "name": "r", "fields": [{"name": "a", "type": "Nope"}]}',
            "unknown type",
        ),
        (
            '{"type": "record", "name": "r", "fields": [{"name": "a", "type": ["int", "string"]}]}',
            None,
        ),
        ('{"type": "record", "name": "r", "fields": [{"name": "a", "type": "r"}]}', "recursive"),
        (
            '{"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "int"}]}',
            "duplicate",
        ),
        ("not json", "invalid Avro schema JSON"),
        ('{"type": "fixed", "name": "f", "size": -1}', "invalid size"),
        (
            '{"type": "record", "name": "r", "fields": [{"name": "d", "type": {"type": "fixed", "name": "f", "size": 2, "logicalType": "decimal", "precision": 10}}]}',
            "decimal",
        ),
    ],
)
def test_bad_avro_schemas(schema, match):
    with pytest.raises(HoodieSchemaError, match=match):
        avro_to_arrow_schema(schema)


def test_bounds_refused_before_work():
    deep: object = "int"
    for i in range(MAX_DEPTH + 5):
        deep = {"type": "record", "name": f"r{i}", "fields": [{"name": "f", "type": deep}]}
    with pytest.raises(HoodieSchemaError, match="deeper"):
        parse_avro_schema(deep)  # type: ignore[arg-type]
    very_deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(HoodieSchemaError):
        parse_avro_schema(very_deep)
    wide = {
        "type": "record",
        "name": "w",
        "fields": [{"name": f"f{i}", "type": "int"} for i in range(MAX_FIELDS + 1)],
    }
    with pytest.raises(HoodieSchemaError, match="more than"):
        parse_avro_schema(wide)
    with pytest.raises(HoodieSchemaError, match="more than"):
        arrow_to_avro_schema(
            pa.schema([(f"f{i}", pa.int8()) for i in range(MAX_FIELDS + 1)]), "t", False
        )
