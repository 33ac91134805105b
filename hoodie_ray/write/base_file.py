"""Base files: Parquet written from Arrow with the five meta columns first (spec §5).

Like Java's writer: every column optional, the Avro schema in the footer
(``parquet.avro.schema``, ``writer.model.name=avro``), the min/max record keys and Hudi's
record-key bloom filter with its type code (``index/bloom_filter.py``; the writer's
``hoodie.index.bloom.*`` options, none with ``hoodie.parquet.bloom.filter.enabled=false``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_ray import jit
from hoodie_ray.index.bloom_filter import BloomFilterSpec, record_key_footer
from hoodie_ray.log_format.blocks import dictionary_columns
from hoodie_ray.lru import SizedLru
from hoodie_ray.meta import META_FIELDS, OPERATION, PARTITION_PATH, RECORD_KEY
from hoodie_ray.storage import Storage


def meta_schema(data_schema: pa.Schema, with_operation: bool = False) -> pa.Schema:
    """The stored schema: meta fields (nullable strings; ``_hoodie_operation`` sixth with
    ``with_operation``) then the data fields."""
    # every block of a writer's flush asks for the same one: kept, checked with metadata
    key = (data_schema, with_operation)
    hit = _META_SCHEMAS.get(key)
    if hit is not None and hit[0].equals(data_schema, check_metadata=True):
        return hit[1]
    names = [*META_FIELDS, OPERATION] if with_operation else META_FIELDS
    out = pa.schema([pa.field(n, pa.string()) for n in names] + list(data_schema))
    _META_SCHEMAS.put(key, (data_schema, out), 1)
    return out


#: (data schema, with operation) -> (that data schema, the stored schema); 64 entries.
_META_SCHEMAS = SizedLru(64)


def constant_strings(value: str, n: int) -> pa.Array:
    """A string array of ``n`` copies of ``value`` (built in C, no Python objects)."""
    return pa.repeat(pa.scalar(value, pa.string()), n)


def commit_seqnos(prefix: str, start: int, n: int) -> pa.Array:
    """``_hoodie_commit_seqno`` of ``n`` rows: ``prefix`` and the numbers from ``start``
    (a compiled kernel where numba is loaded: ~2.4 ms per 100K rows against ~5.8 ms by
    Arrow's cast and join)."""
    raw = prefix.encode()
    # the kernel writes int32 offsets: only where the strings' bytes surely fit them
    fits = n * (len(raw) + len(str(start + n))) < 2**31
    if n and start >= 0 and fits and jit.loaded():
        from hoodie_ray.write import _records_jit

        prefix_bytes = jit.read_only(np.frombuffer(raw, dtype=np.uint8))
        offsets, data = _records_jit.numbered_strings(prefix_bytes, start, n)
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))
    seq = pc.cast(pa.array(np.arange(start, start + n, dtype=np.int64)), pa.string())
    return pc.binary_join_element_wise(prefix, seq, "")


def with_meta_columns(
    rows: pa.Table,
    data_schema: pa.Schema,
    *,
    instant: str,
    task_id: int,
    file_name: str,
    seq_start: int = 0,
    operation: pa.Array | None = None,
) -> pa.Table:
    """Rows (data + routing columns) as stored: meta columns first, then ``data_schema``.

    ``_hoodie_commit_seqno`` is ``<instant>_<task>_<n>`` numbered from ``seq_start``;
    ``operation`` (changelog mode): each row's ``_hoodie_operation``, the sixth meta column.
    """
    n = rows.num_rows
    cols: list[Any] = [
        constant_strings(instant, n),
        commit_seqnos(f"{instant}_{task_id}_", seq_start, n),
        rows.column(RECORD_KEY),
        rows.column(PARTITION_PATH),
        constant_strings(file_name, n),
    ]
    if operation is not None:
        cols.append(operation)
    for f in data_schema:
        cols.append(rows.column(f.name))
    return pa.Table.from_arrays(cols, schema=meta_schema(data_schema, operation is not None))


def parquet_bytes(
    table: pa.Table,
    *,
    avro_schema: Mapping[str, Any] | None,
    codec: str = "snappy",
    extra_metadata: Mapping[str, str] | None = None,
    bloom: BloomFilterSpec | None = None,
) -> bytes:
    """Encode a table as one Parquet file, with Java-like footer metadata: the record keys'
    range and, with a ``bloom`` spec, their bloom filter (keys added in row order)."""
    md: dict[bytes, bytes] = {}
    if avro_schema is not None:
        md[b"parquet.avro.schema"] = json.dumps(avro_schema, separators=(",", ":")).encode()
        md[b"writer.model.name"] = b"avro"
    if RECORD_KEY in table.column_names:
        md.update(record_key_footer(table.column(RECORD_KEY), bloom))
    for k, v in (extra_metadata or {}).items():
        md[k.encode()] = v.encode()
    table = table.replace_schema_metadata(None)
    buf = io.BytesIO()
    # The footer's key-value metadata is added to the writer: without the Arrow schema
    # (store_schema=False, as Java writes none) pyarrow drops the schema's own metadata.
    with pq.ParquetWriter(
        buf,
        table.schema,
        compression=None if codec in ("none", "uncompressed") else codec,
        # Dictionary encoding only pays for columns whose values repeat (sampled per column).
        use_dictionary=dictionary_columns(table),
        write_statistics=True,
        store_schema=False,
    ) as w:
        w.write_table(table)
        w.add_key_value_metadata(md)
    return buf.getvalue()


def write_base_file(
    storage: Storage,
    rel_path: str,
    table: pa.Table,
    *,
    avro_schema: Mapping[str, Any] | None,
    codec: str = "snappy",
    bloom: BloomFilterSpec | None = None,
) -> int:
    """Write a base file (whole, then visible) and return its size in bytes; ``bloom``: the
    footer's bloom filter (none when None)."""
    data = parquet_bytes(table, avro_schema=avro_schema, codec=codec, bloom=bloom)
    storage.write_bytes(rel_path, data)
    return len(data)


def read_base_file(storage: Storage, rel_path: str, columns: list[str] | None = None) -> pa.Table:
    """Read a base file (whole) from storage."""
    with storage.open_input(rel_path) as f:
        return pq.read_table(f, columns=columns, pre_buffer=storage.coalesce_reads)
