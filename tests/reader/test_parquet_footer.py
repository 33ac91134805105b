"""The reader's lean footers (``reader.parquet_footer``): a base file's footer parsed without its
bloom filter reads the same rows and keeps every other key, for hoodie_ray's files and Java's;
anything not of a key-value entry's exact shape is left to pyarrow's whole parse."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_ray as hr
from hoodie_ray.index.bloom_filter import (
    BLOOM_FILTER_FOOTER_KEY,
    LEGACY_BLOOM_FILTER_FOOTER_KEY,
    footer_bloom_filter,
)
from hoodie_ray.reader.file_slice_reader import PARQUET_FOOTERS
from hoodie_ray.reader.parquet_footer import local_lean_footer
from tests.conftest import SAMPLE_TABLE_PARAMS

BLOOM = BLOOM_FILTER_FOOTER_KEY.encode()


def _base_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.parquet") if ".hoodie" not in p.parts)


def _assert_lean(path: Path) -> pq.FileMetaData:
    """``path``'s lean footer against pyarrow's whole one: the same rows and keys, the bloom
    filter's value emptied."""
    full = pq.read_metadata(path)
    lean = local_lean_footer(str(path), os.path.getsize(path))
    assert lean is not None, path
    expected = dict(full.metadata or {})
    for key in (BLOOM, LEGACY_BLOOM_FILTER_FOOTER_KEY.encode()):
        if key in expected:
            expected[key] = b""
    assert dict(lean.metadata or {}) == expected
    assert lean.num_rows == full.num_rows and lean.num_row_groups == full.num_row_groups
    assert lean.schema.equals(full.schema)
    assert pq.ParquetFile(path, metadata=lean).read().equals(pq.read_table(path))
    return lean


def test_hoodie_ray_base_files_are_kept_without_their_bloom_filter(tmp_path: Path) -> None:
    rows = pa.table({"key": [f"k{i:05d}" for i in range(3000)], "ts": list(range(3000))})
    path = tmp_path / "t"
    hr.write(
        rows,
        str(path),
        {"hoodie.datasource.write.recordkey.field": "key", "hoodie.table.name": "t"},
        engine="local",
    )
    (base,) = _base_files(path)
    full = pq.read_metadata(base)
    assert footer_bloom_filter(full.metadata) is not None  # the bloom index's read is whole
    lean = _assert_lean(base)
    assert lean.serialized_size < full.serialized_size // 20

    # the reader's cache keeps the lean footer, and the table reads the same
    PARQUET_FOOTERS.clear()
    assert hr.read(str(path)).sort_by("key").select(["key", "ts"]).equals(rows)
    st = os.stat(base)
    kept = PARQUET_FOOTERS.get((str(base), st.st_size, st.st_mtime_ns, st.st_ino))
    assert kept is not None and kept.metadata.metadata[BLOOM] == b""
    assert PARQUET_FOOTERS.nbytes == lean.serialized_size
    PARQUET_FOOTERS.clear()


@pytest.mark.parametrize("name", SAMPLE_TABLE_PARAMS)
def test_java_base_files_read_the_same_through_lean_footers(
    name: str, shared_sample: Callable[[str], Path]
) -> None:
    files = _base_files(shared_sample(name))
    for base in files:
        _assert_lean(base)


def _file(tmp_path: Path, values: list[bytes], metadata: dict[bytes, bytes] | None) -> Path:
    path = tmp_path / "f.parquet"
    table = pa.table({"s": pa.array(values, pa.binary())})
    pq.write_table(table.replace_schema_metadata(metadata), path)
    return path


def test_a_key_value_entry_in_a_column_statistic_is_never_cut(tmp_path: Path) -> None:
    """A string value with the bytes of the key-value entry, its statistics in the footer: the
    cut is made on the real entry, or on none."""
    entry = b"\x18\x1b" + BLOOM + b"\x18\x02ab"
    values = [entry, b"\x00" + entry]
    # no bloom filter in the footer: the statistic's bytes are left alone
    path = _file(tmp_path, values, {b"other": b"x"})
    lean = local_lean_footer(str(path), os.path.getsize(path))
    assert lean is None or lean.metadata == pq.read_metadata(path).metadata
    if lean is not None:
        assert pq.ParquetFile(path, metadata=lean).read().equals(pq.read_table(path))
    # with one: the real entry is cut
    _assert_lean(_file(tmp_path, values, {BLOOM: b"f" * 5000, b"other": b"x"}))

    # the entry's bytes at the end of another key's value, where a cut would fit the shape:
    # the parse disagrees, and pyarrow's whole parse is left to the reader
    for metadata in ({b"zz": entry}, {BLOOM: b"f" * 5000, b"zz": entry}):
        path = _file(tmp_path, [b"a"], metadata)
        assert local_lean_footer(str(path), os.path.getsize(path)) is None


def test_files_without_a_plain_footer_are_left_to_pyarrow(tmp_path: Path) -> None:
    short = tmp_path / "short.parquet"
    short.write_bytes(b"PAR1")
    assert local_lean_footer(str(short), 4) is None
    good = _file(tmp_path, [b"a"], None)
    data = good.read_bytes()
    for name, body in {
        "no_magic": data[:-4] + b"PARE",
        "too_long": data[:-8] + (len(data)).to_bytes(4, "little") + b"PAR1",
        "garbled": data[: -8 - 40] + b"\xff" * 40 + data[-8:],
    }.items():
        bad = tmp_path / f"{name}.parquet"
        bad.write_bytes(body)
        assert local_lean_footer(str(bad), len(body)) is None, name
