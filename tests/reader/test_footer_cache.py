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
