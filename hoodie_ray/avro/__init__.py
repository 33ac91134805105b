"""Avro for Hudi: Arrow <-> Avro schema mapping and column-wise binary encoding."""

from __future__ import annotations

from hoodie_ray.avro.codec import decode_records, decode_spans, encode_binary, encode_records
from hoodie_ray.avro.schema import (
    META_FIELDS,
    AvroField,
    AvroType,
    add_meta_fields_arrow,
    add_meta_fields_avro,
    arrow_to_avro_schema,
    avro_to_arrow_schema,
    decimal_fixed_size,
    meta_arrow_fields,
    meta_avro_fields,
    parse_avro_schema,
    schema_to_json,
    strip_meta_fields_arrow,
)

__all__ = [
    "META_FIELDS",
    "AvroField",
    "AvroType",
    "add_meta_fields_arrow",
    "add_meta_fields_avro",
    "arrow_to_avro_schema",
    "avro_to_arrow_schema",
    "decimal_fixed_size",
    "decode_records",
    "decode_spans",
    "encode_binary",
    "encode_records",
    "meta_arrow_fields",
    "meta_avro_fields",
    "parse_avro_schema",
    "schema_to_json",
    "strip_meta_fields_arrow",
]
