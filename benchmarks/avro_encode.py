"""Avro data block encode/decode: hoodie_ray's column-wise codec vs the fastavro floor.

Rows of shape q1 (``benchmarks/mor-q1.md``: ``key``, ``ts``, ``name``, ``c0``..``c9``, plus the
five Hudi meta columns a log block carries), numpy with a fixed seed. Everything runs in this
process on the same rows; each figure is the best of ``--repeat`` runs.

Encode:
* ours: ``AvroDataBlock`` of the Arrow table -> ``serialize_block`` (the complete block bytes);
* floor: ``Table.to_pylist()`` + ``fastavro.writer`` of the same rows (an Avro container file);
* per-row floor: ``Table.to_pylist()`` + ``fastavro.schemaless_writer`` per row (Hudi's record
  framing, what a dict-based block writer does).

Decode:
* ours: the block's records decoded into an Arrow table (``LogReader`` + ``records``);
* floor: ``fastavro.reader`` of the container file into dicts (no Arrow table built).

Usage: ``python -m benchmarks.avro_encode [--rows N] [--repeat R] [--json]``.
"""

from __future__ import annotations

import argparse
import io
import json
import struct
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.common import TS_BASE, best_of, make_q1_table
from hoodie_ray.avro.schema import arrow_to_avro_schema, parse_avro_schema
from hoodie_ray.log_format import AvroDataBlock, LogReader, serialize_block

TARGET_RATIO = 3.0
INSTANT = "20250101000000000"
FILE_ID = "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"


def q1_with_meta(rows: int, seed: int = 42) -> pa.Table:
    """q1 rows with Hudi meta columns (commit time, seqno, record key, partition, file id)."""
    rng = np.random.default_rng(seed)
    keys = rng.permutation(rows).astype(np.int64)
    base = make_q1_table(keys, TS_BASE + np.arange(rows, dtype=np.int64), rng)
    seq = pc.binary_join_element_wise(
        pa.scalar(f"{INSTANT}_0_"), pc.cast(pa.array(np.arange(rows)), pa.string()), pa.scalar("")
    )
    meta = {
        "_hoodie_commit_time": pa.array(np.full(rows, INSTANT, dtype=object), pa.string()),
        "_hoodie_commit_seqno": seq,
        "_hoodie_record_key": pc.cast(base["key"], pa.string()),
        "_hoodie_partition_path": pa.array(np.full(rows, "", dtype=object), pa.string()),
        "_hoodie_file_name": pa.array(np.full(rows, FILE_ID, dtype=object), pa.string()),
    }
    return pa.table({**meta, **{c: base[c] for c in base.column_names}})


def run(rows: int, repeat: int) -> dict[str, Any]:
    """Measure; returns rows/s figures and ratios."""
    table = q1_with_meta(rows)
    schema = arrow_to_avro_schema(table.schema, "q1", with_meta=True)
    compiled = parse_avro_schema(schema)
    parsed = fastavro.parse_schema(schema)
    header = {0: INSTANT, 2: json.dumps(schema, separators=(",", ":"))}

    def ours_encode() -> bytes:
        block = AvroDataBlock(header, table)
        block._avro_type = compiled  # the writer compiles the schema once per file group
        return serialize_block(block)

    def floor_encode() -> bytes:
        bio = io.BytesIO()
        fastavro.writer(bio, parsed, table.to_pylist())
        return bio.getvalue()

    def floor_rows() -> bytes:
        out = []
        write = fastavro.schemaless_writer
        for rec in table.to_pylist():
            bio = io.BytesIO()
            write(bio, parsed, rec)
            datum = bio.getvalue()
            out.append(struct.pack(">i", len(datum)))
            out.append(datum)
        return b"".join(out)

    t_ours, block_bytes = best_of(repeat, ours_encode)
    t_floor, container = best_of(repeat, floor_encode)
    t_rows, _ = best_of(max(1, repeat // 2), floor_rows)

    def ours_decode() -> pa.Table:
        (blk,) = LogReader(block_bytes, "bench").blocks()
        return blk.records  # type: ignore[attr-defined]

    def floor_decode() -> list[dict[str, Any]]:
        return list(fastavro.reader(io.BytesIO(container)))  # type: ignore[arg-type]

    t_dec, decoded = best_of(repeat, ours_decode)
    t_fdec, _ = best_of(repeat, floor_decode)
    if not decoded.equals(table.cast(decoded.schema)):
        raise SystemExit("decoded records differ from the input")
    res = {
        "rows": rows,
        "bytes_per_row_block": round(len(block_bytes) / rows, 1),
        "encode_rows_per_s": rows / t_ours,
        "fastavro_writer_rows_per_s": rows / t_floor,
        "fastavro_schemaless_rows_per_s": rows / t_rows,
        "encode_ratio_vs_fastavro_writer": t_floor / t_ours,
        "encode_ratio_vs_fastavro_schemaless": t_rows / t_ours,
        "decode_rows_per_s": rows / t_dec,
        "fastavro_reader_rows_per_s": rows / t_fdec,
        "decode_ratio_vs_fastavro_reader": t_fdec / t_dec,
    }
    res["target_met"] = res["encode_ratio_vs_fastavro_writer"] >= TARGET_RATIO
    return res


def main() -> None:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object last")
    args = ap.parse_args()
    res = run(args.rows, args.repeat)
    print(
        f"q1 + meta columns, {res['rows']:,} rows, {res['bytes_per_row_block']} bytes/row in the block"
    )
    print(f"{'':34}{'rows/s':>12}{'ratio':>9}")
    print(f"{'encode  hoodie_ray (block bytes)':34}{res['encode_rows_per_s']:>12,.0f}")
    print(
        f"{'encode  fastavro.writer (floor)':34}{res['fastavro_writer_rows_per_s']:>12,.0f}"
        f"{res['encode_ratio_vs_fastavro_writer']:>8.1f}x"
    )
    print(
        f"{'encode  fastavro per row':34}{res['fastavro_schemaless_rows_per_s']:>12,.0f}"
        f"{res['encode_ratio_vs_fastavro_schemaless']:>8.1f}x"
    )
    print(f"{'decode  hoodie_ray (Arrow table)':34}{res['decode_rows_per_s']:>12,.0f}")
    print(
        f"{'decode  fastavro.reader (dicts)':34}{res['fastavro_reader_rows_per_s']:>12,.0f}"
        f"{res['decode_ratio_vs_fastavro_reader']:>8.1f}x"
    )
    print(
        f"target: encode >= {TARGET_RATIO}x the fastavro floor: {'met' if res['target_met'] else 'NOT met'}"
    )
    if args.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main()
