"""The reader's footers (``reader.parquet_footer``): a base file's footer kept without its bloom
filter reads the same rows and keeps every other key, for hoodie_ray's files and Java's; where
the cut is not certain to fall on the entry (a copy of it, bytes not written canonically), the
footer is kept whole."""

from __future__ import annotations

import os
import struct
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
from hoodie_ray.reader.parquet_footer import footer_charge, local_footer
from tests.conftest import SAMPLE_TABLE_PARAMS

BLOOM = BLOOM_FILTER_FOOTER_KEY.encode()
LEGACY = LEGACY_BLOOM_FILTER_FOOTER_KEY.encode()


def _base_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.parquet") if ".hoodie" not in p.parts)


def _footer(path: Path) -> pq.FileMetaData:
    md = local_footer(str(path), os.path.getsize(path))
    assert md is not None, path
    return md


def _assert_lean(path: Path) -> pq.FileMetaData:
    """``path``'s kept footer against pyarrow's whole one: the same rows and keys, the bloom
    filters' values emptied."""
    whole = pq.read_metadata(path)
    lean = _footer(path)
    expected = dict(whole.metadata or {})
    cut = [k for k in (BLOOM, LEGACY) if expected.get(k)]
    assert cut, path
    for key in cut:
        expected[key] = b""
    assert dict(lean.metadata or {}) == expected
    assert lean.num_rows == whole.num_rows and lean.num_row_groups == whole.num_row_groups
    assert lean.schema.equals(whole.schema)
    assert lean.serialized_size < whole.serialized_size
    assert pq.ParquetFile(path, metadata=lean).read().equals(pq.read_table(path))
    return lean


def _assert_whole(path: Path) -> None:
    kept = _footer(path)
    assert kept.metadata == pq.read_metadata(path).metadata
    assert pq.ParquetFile(path, metadata=kept).read().equals(pq.read_table(path))


def test_hoodie_ray_base_files_are_kept_without_their_bloom_filter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = pa.table({"key": [f"k{i:05d}" for i in range(3000)], "ts": list(range(3000))})
    path = tmp_path / "t"
    hr.write(
        rows,
        str(path),
        {"hoodie.datasource.write.recordkey.field": "key", "hoodie.table.name": "t"},
        engine="local",
    )
    (base,) = _base_files(path)
    whole = pq.read_metadata(base)
    assert footer_bloom_filter(whole.metadata) is not None  # the bloom index's read is whole
    lean = _assert_lean(base)
    assert lean.serialized_size < whole.serialized_size // 20

    # the reader's cache keeps the lean footer, sized by what it holds in memory
    PARQUET_FOOTERS.clear()
    assert hr.read(str(path)).sort_by("key").select(["key", "ts"]).equals(rows)
    st = os.stat(base)
    kept = PARQUET_FOOTERS.get((str(base), st.st_size, st.st_mtime_ns, st.st_ino))
    assert kept is not None and kept.metadata.metadata[BLOOM] == b""
    assert PARQUET_FOOTERS.nbytes == footer_charge(kept.metadata)
    assert footer_charge(lean) > lean.serialized_size + lean.num_columns * 512
    # read again through it: no footer is read
    from hoodie_ray.reader import file_slice_reader

    def no_footer_read(path: str, size: int) -> None:
        raise AssertionError("the kept footer was not used")

    monkeypatch.setattr(file_slice_reader, "local_footer", no_footer_read)
    assert hr.read(str(path)).sort_by("key").select(["key", "ts"]).equals(rows)
    PARQUET_FOOTERS.clear()


@pytest.mark.parametrize("name", SAMPLE_TABLE_PARAMS)
def test_java_base_files_read_the_same_through_lean_footers(
    name: str, shared_sample: Callable[[str], Path]
) -> None:
    for base in _base_files(shared_sample(name)):
        # a table without meta fields writes no bloom filter: its footers are kept whole
        if footer_bloom_filter(pq.read_metadata(base).metadata) is None:
            _assert_whole(base)
        else:
            _assert_lean(base)


def _file(tmp_path: Path, metadata: dict[bytes, bytes], values: list[bytes] | None = None) -> Path:
    path = tmp_path / f"f{len(list(tmp_path.iterdir()))}.parquet"
    table = pa.table({"s": pa.array(values or [b"a"], pa.binary())})
    # as Hudi's writers do: the entries in this order, no ARROW:schema
    with pq.ParquetWriter(path, table.schema, store_schema=False) as w:
        w.write_table(table)
        w.add_key_value_metadata(metadata)
    assert pq.read_metadata(path).metadata == metadata
    return path


def test_the_legacy_key_is_cut_alone_and_beside_the_current_one(tmp_path: Path) -> None:
    lean = _assert_lean(_file(tmp_path, {LEGACY: b"f" * 5000, b"other": b"x"}))
    assert lean.metadata[LEGACY] == b""
    lean = _assert_lean(_file(tmp_path, {BLOOM: b"f" * 5000, LEGACY: b"g" * 4000}))
    assert (lean.metadata[BLOOM], lean.metadata[LEGACY]) == (b"", b"")


def test_a_copy_of_the_entry_elsewhere_keeps_the_footer_whole(tmp_path: Path) -> None:
    """The entry's bytes in a column's statistics or in another key's value: the cut could
    fall on either, so none is made."""
    value = b"f" * 300
    entry = b"\x18\x1b" + BLOOM + b"\x18" + bytes([0xAC, 0x02]) + value + b"\x00"
    # in a column's min / max statistics
    _assert_whole(_file(tmp_path, {BLOOM: value}, [entry, b"\x00" + entry]))
    # at the end of another key's value (before or after the entry)
    _assert_whole(_file(tmp_path, {b"aa": entry, BLOOM: value}))
    _assert_whole(_file(tmp_path, {BLOOM: value, b"zz": entry}))
    # the entry's bytes without a bloom filter in the footer: nothing to cut
    _assert_whole(_file(tmp_path, {b"zz": entry}, [entry]))
    # an empty filter: nothing to cut either
    _assert_whole(_file(tmp_path, {BLOOM: b""}))


def test_a_footer_not_written_canonically_is_kept_whole(tmp_path: Path) -> None:
    """Another entry's key length as a two-byte varint after the cut: pyarrow reads it, but it
    is not the writers' canonical tail, so the cut is not trusted."""
    path = _file(tmp_path, {BLOOM: b"f" * 300, b"other": b"x"})
    data = path.read_bytes()
    (n,) = struct.unpack("<I", data[-8:-4])
    footer = data[-8 - n : -8]
    assert footer.count(b"\x18\x05other") == 1
    footer = footer.replace(b"\x18\x05other", b"\x18\x85\x00other")
    path.write_bytes(data[: -8 - n] + footer + struct.pack("<I", len(footer)) + b"PAR1")
    assert pq.read_metadata(path).metadata[b"other"] == b"x"
    _assert_whole(path)


def test_a_created_by_that_is_not_utf8_keeps_the_footer_whole(tmp_path: Path) -> None:
    path = _file(tmp_path, {BLOOM: b"f" * 300})
    data = path.read_bytes()
    created = pq.read_metadata(path).created_by.encode()
    assert data.count(created) == 1
    path.write_bytes(data.replace(created, b"\xff" * len(created)))
    _assert_whole(path)


def test_a_footer_declaring_encryption_is_kept_whole(tmp_path: Path) -> None:
    """Field 8 (``encryption_algorithm``, as plaintext-footer encryption writes it) after the
    column orders: not a footer's usual end, so parsed whole. Serializing such a parse again
    crashes pyarrow 26, so the check runs in a child process."""
    import subprocess
    import sys

    path = _file(tmp_path, {BLOOM: b"f" * 5000, b"other": b"x"})
    data = path.read_bytes()
    (n,) = struct.unpack("<I", data[-8:-4])
    footer = data[-8 - n : -8]
    assert footer.endswith(b"\x1c\x00\x00\x00")  # the last column order, the struct's stop
    footer = footer[:-1] + b"\x1c\x1c\x00\x00\x00"  # AES_GCM_V1 {}, then the stop
    path.write_bytes(data[: -8 - n] + footer + struct.pack("<I", len(footer)) + b"PAR1")
    assert len(pq.read_metadata(path).metadata[BLOOM]) == 5000
    code = (
        "import os, sys, pyarrow.parquet as pq\n"
        "from hoodie_ray.reader.parquet_footer import local_footer\n"
        "p = sys.argv[1]\n"
        "md = local_footer(p, os.path.getsize(p))\n"
        "assert md is not None and md.metadata == pq.read_metadata(p).metadata\n"
    )
    run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]


def test_files_without_a_plain_footer_are_left_to_pyarrow(tmp_path: Path) -> None:
    short = tmp_path / "short.parquet"
    short.write_bytes(b"PAR1")
    assert local_footer(str(short), 4) is None
    good = _file(tmp_path, {BLOOM: b"f" * 100})
    data = good.read_bytes()
    (n,) = struct.unpack("<I", data[-8:-4])
    for name, body in {
        "no_magic": data[:-4] + b"PARE",
        "too_long": data[:-8] + len(data).to_bytes(4, "little") + b"PAR1",
        "garbled": data[: -8 - n] + b"\xff" * n + data[-8:],
    }.items():
        bad = tmp_path / f"{name}.parquet"
        bad.write_bytes(body)
        assert local_footer(str(bad), len(body)) is None, name


def test_a_footer_longer_than_the_first_read_is_read_in_two(tmp_path: Path) -> None:
    from hoodie_ray.reader.parquet_footer import TAIL_BYTES

    for size in (TAIL_BYTES - 200, TAIL_BYTES - 20, TAIL_BYTES + 20, 3 * TAIL_BYTES):
        _assert_lean(_file(tmp_path, {BLOOM: b"f" * size}))
