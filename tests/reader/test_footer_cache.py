"""Base-file footers kept per process (``file_slice_reader.PARQUET_FOOTERS``): a file read
again is not parsed again, and a file rewritten under its name is read as it now is."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_ray.reader import plan_file_slices
from hoodie_ray.reader.file_slice_reader import PARQUET_FOOTERS, read_file_slice
from tests.reader.builder import TableBuilder

SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64())])


def _rows(n: int, tag: str) -> pa.Table:
    return pa.table({"key": [f"{tag}{i:04d}" for i in range(n)], "ts": [1] * n}, schema=SCHEMA)


def test_a_footer_is_parsed_once_and_a_rewritten_file_is_read_anew(tmp_path: Path) -> None:
    b = TableBuilder(tmp_path / "t", SCHEMA)
    c = b.begin()
    name = c.base_file("", "f1-0", _rows(100, "a"))
    c.complete()
    path = str(tmp_path / "t" / name)
    PARQUET_FOOTERS.clear()

    plan = plan_file_slices(str(tmp_path / "t"))
    (slc,) = plan.slices
    first = read_file_slice(plan.context, slc)
    assert first.column("key").to_pylist() == [f"a{i:04d}" for i in range(100)]
    st = os.stat(path)
    kept = PARQUET_FOOTERS.get((path, st.st_size, st.st_mtime_ns, st.st_ino))
    assert kept.metadata.num_rows == 100
    # read again: the kept footer serves it, nothing new is kept
    assert read_file_slice(plan.context, slc).equals(first)
    assert len(PARQUET_FOOTERS) == 1
    assert PARQUET_FOOTERS.get((path, st.st_size, st.st_mtime_ns, st.st_ino)) is kept

    # the same name, other bytes (a repair by hand, a restore of an old copy): read as it is now
    pq.write_table(pq.read_table(path).slice(10), path)
    again = read_file_slice(plan.context, slc)
    assert again.column("key").to_pylist() == [f"a{i:04d}" for i in range(10, 100)]
    assert len(PARQUET_FOOTERS) == 2
    PARQUET_FOOTERS.clear()


def test_arrow_threads_decode_only_row_groups_worth_their_hand_offs(tmp_path: Path) -> None:
    from hoodie_ray.reader.file_slice_reader import THREADED_DECODE_MIN_CELLS, BaseFooter

    rows = THREADED_DECODE_MIN_CELLS // 4
    # few distinct values: dictionary pages, so the values, not the bytes, decide
    wide = pa.table(
        {f"c{i}": pa.array([j % 100 for j in range(rows)], pa.int8()) for i in range(8)}
    )
    pq.write_table(wide, tmp_path / "wide.parquet", row_group_size=rows // 2)
    footer = BaseFooter(pq.ParquetFile(tmp_path / "wide.parquet").metadata)
    rows_0, bytes_0 = footer.group_size(0)
    assert rows_0 == rows // 2 and bytes_0 > 0
    cols = [f"c{i}" for i in range(8)]
    # a small base file (a streaming writer's), or few of a wide file's columns: one thread
    assert not footer.worth_threads([0], cols[:1])
    assert not footer.worth_threads([0], cols[:4])
    assert not footer.worth_threads([0], ["not_in_the_file"] * 8)
    # enough values in the row groups read: Arrow's threads
    assert footer.worth_threads([0, 1], cols[:4])
    assert footer.worth_threads([0], cols)

    # a struct counts by its Parquet leaves: one top-level column of eight
    nested = pa.table(
        {
            "k": pa.array(range(rows // 2)),
            "s": pa.StructArray.from_arrays(
                [wide.column(c).combine_chunks().slice(0, rows // 2) for c in cols], names=cols
            ),
        }
    )
    pq.write_table(nested, tmp_path / "nested.parquet")
    footer = BaseFooter(pq.ParquetFile(tmp_path / "nested.parquet").metadata)
    assert footer.worth_threads([0], ["s"]) and not footer.worth_threads([0], ["k"])

    # few rows, many bytes (long strings): the bytes decide
    long = pa.table({"s": ["x" * 8192] * 1024})
    pq.write_table(long, tmp_path / "long.parquet", compression="none", use_dictionary=False)
    footer = BaseFooter(pq.ParquetFile(tmp_path / "long.parquet").metadata)
    assert footer.worth_threads([0], ["s"])
