"""The HBase-dialect HFile writer (hoodie_ray/hfile/writer.py's HBASE dialect): Hudi 0.x's MDT files.

Byte-level checks against real HBase-written HFiles, which live in hudi-rs's test data (Apache
License 2.0): its ``crates/core/tests/data/hfile/hudi_1_0_hbase_*.hfile`` (written by Hudi's
``HoodieAvroHFileWriter`` through HBase 2.4.9 / 2.4.13) and the metadata table of
``crates/test/data/quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip`` (the same HBase writer
Hudi 0.x uses for its MDT). They are taken from, in order: a hudi-rs checkout named by
``HOODIE_RAY_HUDI_RS``, ``../shared/hudi-rs``, or the tool library's git mirror of hudi-rs
(``../.mirror/apache+hudi-rs/repo``, whose files this module unpacks into the temporary
directory); they skip without any of them. The other tests need nothing.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import struct
import subprocess
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hoodie_ray.exceptions import HoodieInputError, HoodieUnsupportedError
from hoodie_ray.hfile import HFileReader, checksum
from hoodie_ray.hfile import writer as hfile_writer
from hoodie_ray.hfile._format import I64, WRITER_FILE_INFO_KEYS, proto_fields
from hoodie_ray.hfile.checksum import crc32c
from hoodie_ray.hfile.writer import (
    _midpoint_row,
    write_hbase_hfile,
    write_hbase_hfile_arrays,
    write_hfile_arrays,
)
from hoodie_ray.log_format import HFileDataBlock, LogReader

_PROJECT = Path(__file__).resolve().parents[2]
_HFILE_DATA = "crates/core/tests/data/hfile"
_V8_ZIP = "crates/test/data/quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip"


def _from_git_mirror(repo: Path) -> Path | None:
    """The two test-data paths of a bare git mirror of hudi-rs, unpacked once per commit."""
    try:
        head = subprocess.run(
            ["git", "--git-dir", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            check=True,
            text=True,
        ).stdout.strip()
        dest = Path(tempfile.gettempdir()) / f"hoodie_ray_hudi_rs_{head[:12]}"
        if not (dest / _V8_ZIP).is_file():
            tar = subprocess.run(
                ["git", "--git-dir", str(repo), "archive", head, _HFILE_DATA, _V8_ZIP],
                capture_output=True,
                check=True,
            ).stdout
            part = Path(tempfile.mkdtemp(prefix=dest.name, dir=dest.parent))
            with tarfile.open(fileobj=io.BytesIO(tar)) as t:
                t.extractall(part, filter="data")
            if dest.exists():  # another test process unpacked it meanwhile
                shutil.rmtree(part)
            else:
                os.replace(part, dest)
        return dest
    except (OSError, subprocess.CalledProcessError, tarfile.TarError):
        return None


def _hudi_rs_root() -> Path:
    if "HOODIE_RAY_HUDI_RS" in os.environ:
        return Path(os.environ["HOODIE_RAY_HUDI_RS"])
    checkout = _PROJECT / ".." / "shared" / "hudi-rs"
    mirror = _PROJECT / ".." / ".mirror" / "apache+hudi-rs" / "repo"
    if not checkout.is_dir() and mirror.is_dir():
        return _from_git_mirror(mirror) or checkout
    return checkout


HUDI_RS = _hudi_rs_root()
HFILE_DIR = HUDI_RS / _HFILE_DATA
V8_SAMPLE = HUDI_RS / _V8_ZIP
HEADER = struct.Struct(">8siiqBii")


def _blocks(data: bytes) -> list[tuple[int, bytes, int, int, int, int, int, int]]:
    out = []
    off = 0
    while off < len(data) - 4096:
        fields = HEADER.unpack_from(data, off)
        out.append((off, *fields))
        off += 33 + fields[1]
    assert off == len(data) - 4096
    return out


def _trailer(data: bytes) -> dict[int, int | bytes]:
    t = data[-4096:]
    n = t[8]  # < 128 for every trailer here
    return dict(proto_fields(t[9 : 9 + n]))


def _rewrite(data: bytes, block_size: int, arrays: bool = False) -> bytes:
    """The file re-written from its entries, as pairs or (``arrays``) as Arrow columns."""
    r = HFileReader(data)
    t = _trailer(data)
    items = list(r.items())
    if arrays:
        rows = pa.array([k for k, _ in items], pa.binary())
        values = pa.array([v for _, v in items], pa.binary())
        return write_hbase_hfile_arrays(rows, values, **_rewrite_options(r, t, block_size))
    return write_hbase_hfile(items, **_rewrite_options(r, t, block_size))


def _rewrite_options(r: HFileReader, t: dict[int, int | bytes], block_size: int) -> dict[str, Any]:
    return dict(
        file_info={k: v for k, v in r.file_info.items() if k not in WRITER_FILE_INFO_KEYS},
        meta_blocks={n: r.meta_block(n) or b"" for n in r.meta_block_names},
        compression={1: "gz", 2: "none"}[int(t[12])],  # type: ignore[call-overload]
        block_size=block_size,
        create_time_ms=I64.unpack(r.file_info[b"hfile.CREATE_TIME_TS"])[0],
        comparator=t[11],
        allow_empty=True,
    )


def _entries(n: int, width: int = 9) -> list[tuple[bytes, bytes]]:
    return [(f"key-{i:0{width}d}".encode(), f"value-{i}".encode() * 3) for i in range(n)]


def _kernel_paths() -> list[bool]:
    """The checksums' numpy twin always; the compiled kernel where numba imports."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return [False]
    return [False, True]


# -- against real HBase-written files -------------------------------------------------------------
def _hudi_rs_hfiles() -> list[Path]:
    return sorted(HFILE_DIR.glob("hudi_1_0_hbase_*.hfile")) if HFILE_DIR.is_dir() else []


@pytest.mark.parametrize("arrays", [False, True], ids=["pairs", "arrays"])
@pytest.mark.parametrize("path", _hudi_rs_hfiles() or [None], ids=lambda p: p.name if p else "none")
def test_rewriting_hbase_written_hfiles_reproduces_them(
    path: Path | None, arrays: bool, java_deflate: None
) -> None:
    """Each single-level HFile of hudi-rs's HFile test data comes out byte for byte from its
    entries, file info, meta blocks and block size (GZ and NONE, 16 KB - 512 KB blocks, fake
    first keys in the index), given as pairs or as Arrow columns; multi-level ones are refused,
    files with repeated keys rejected."""
    if path is None:
        pytest.skip(f"no hudi-rs test data at {HUDI_RS} (set HOODIE_RAY_HUDI_RS)")
    data = path.read_bytes()
    m = re.search(r"_(\d+)KB_", path.name)
    block_size = int(m.group(1)) * 1024 if m else 1 << 20
    levels = _trailer(data)[8]
    if "non_unique" in path.name:
        with pytest.raises(HoodieInputError, match="strictly ascending"):
            _rewrite(data, block_size, arrays)
    elif levels != 1:
        with pytest.raises(HoodieUnsupportedError, match="multi-level"):
            _rewrite(data, block_size, arrays)
    else:
        assert _rewrite(data, block_size, arrays) == data


@pytest.fixture(scope="module")
def v8_mdt_hfiles(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, bytes]]:
    """Every HFile of the v8 sample's MDT (HBase dialect): base files, then log-block HFiles."""
    if not V8_SAMPLE.is_file():
        pytest.skip(f"no hudi-rs test data at {HUDI_RS} (set HOODIE_RAY_HUDI_RS)")
    dest = tmp_path_factory.mktemp("v8_mdt")
    with zipfile.ZipFile(V8_SAMPLE) as z:
        z.extractall(
            dest, [n for n in z.namelist() if "/.hoodie/metadata/" in n and "MACOSX" not in n]
        )
    mdt = next(dest.rglob(".hoodie/metadata"))
    out = [(str(p.relative_to(mdt)), p.read_bytes()) for p in sorted(mdt.rglob("*.hfile"))]
    for p in sorted(mdt.rglob(".*.log.*")):
        for i, block in enumerate(LogReader(p.read_bytes(), str(p))):
            if isinstance(block, HFileDataBlock):
                out.append((f"{p.relative_to(mdt)}#{i}", bytes(block.content)))
    return out


@pytest.mark.parametrize("kernel", _kernel_paths(), ids=lambda k: "kernel" if k else "numpy")
def test_rewriting_the_v8_sample_mdt_hfiles_reproduces_them(
    v8_mdt_hfiles: list[tuple[str, bytes]],
    kernel: bool,
    monkeypatch: pytest.MonkeyPatch,
    java_deflate: None,
) -> None:
    """Every MDT HFile Java wrote through HBase (base files with their bloom filter meta block,
    log-block HFiles with only the schema) is re-written byte for byte (1 MiB blocks), from
    pairs and from Arrow columns, with the checksums of the compiled kernel and of its numpy
    twin."""
    monkeypatch.setattr(checksum, "_use_kernel", lambda total: kernel)
    assert sum(n.endswith(".hfile") for n, _ in v8_mdt_hfiles) >= 20
    assert any("#" in n for n, _ in v8_mdt_hfiles)
    for name, data in v8_mdt_hfiles:
        assert _rewrite(data, 1 << 20) == data, name
        assert _rewrite(data, 1 << 20, arrays=True) == data, name


# -- the layout, without samples -------------------------------------------------------------------
def test_crc32c_vector() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    assert crc32c(b"56789", crc32c(b"1234")) == 0xE3069283


def test_midpoint_rows_as_hbase() -> None:
    assert _midpoint_row(b"key-234-x", b"key-235-x") == b"key-235"  # +1 would equal right's byte
    assert _midpoint_row(b"key-469-x", b"key-470-x") == b"key-47"
    assert _midpoint_row(b"key-1", b"key-5") == b"key-2"  # a shorter row between them
    assert _midpoint_row(b"ab", b"abc") == b"abc"  # left is a prefix of right
    assert _midpoint_row(b"a\xf0", b"a\xff") == b"a\xf1"


def test_blocks_checksums_and_chain() -> None:
    """Blocks end once their cells reach the block size, carry CRC32C checksums of header +
    payload, and point back to the previous block of their type; the index keys after the
    first are "first on row" keys (type 255)."""
    kvs = _entries(300)
    data = write_hbase_hfile(kvs, meta_blocks={"bloomFilter": b"x" * 100}, block_size=2048)
    blocks = _blocks(data)
    data_blocks = [b for b in blocks if b[1] == b"DATABLK*"]
    assert len(data_blocks) > 3
    cell = len(kvs[0][0]) + len(kvs[0][1]) + 21
    for off, magic, odsw, usz, prev, ck, bpc, ddsh in blocks:
        assert (ck, bpc) == (2, 16384)
        assert data[off + ddsh : off + 33 + odsw] == crc32c(data[off : off + ddsh]).to_bytes(
            4, "big"
        )
        same = [b for b in blocks if b[1] == magic and b[0] < off]
        assert prev == (same[-1][0] if same else -1)
        if magic == b"DATABLK*" and off != data_blocks[-1][0]:
            assert usz >= 2048 and usz - cell < 2048
    r = HFileReader(data)
    assert list(r.items()) == kvs
    for k, v in kvs[::37]:
        assert r.get(k) == v
    root = zlib.decompress(data[blocks[-3][0] + 33 : blocks[-3][0] + blocks[-3][7]], 47)
    assert root.endswith(b"\xff")  # the last entry's key is a first-on-row key
    t = _trailer(data)
    assert t[8] == 1 and t[5] == len(data_blocks) and t[7] == 300 and t[3] == len(root)
    assert data[-4:] == b"\x03\x00\x00\x03"
    info = r.file_info
    assert list(info) == sorted(info)
    assert (
        info[b"hfile.LASTKEY"]
        == struct.pack(">H", 13) + kvs[-1][0] + b"\x00" + b"\x7f" + b"\xff" * 7 + b"\x04"
    )
    assert info[b"hfile.CREATE_TIME_TS"] == bytes(8)


def test_empty_file_and_refusals() -> None:
    data = write_hbase_hfile([], file_info={b"schema": b"{}"}, allow_empty=True)
    t = _trailer(data)
    assert t[7] == 0 and t[9] == t[10] == (1 << 64) - 1 and t[5] == 0
    assert list(HFileReader(data).items()) == []
    with pytest.raises(HoodieInputError, match="at least one entry"):
        write_hbase_hfile([])
    with pytest.raises(HoodieInputError, match="set by the writer"):
        write_hbase_hfile(_entries(1), file_info={b"hfile.LASTKEY": b""})
    with pytest.raises(HoodieUnsupportedError, match="multi-level"):
        write_hbase_hfile(_entries(4000, 200), block_size=64, compression="none")


# -- column-wise entries ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("n", "block_size", "compression"),
    [(1, 1 << 20, "gz"), (300, 2048, "gz"), (300, 2048, "none"), (2000, 16384, "gz")],
)
def test_arrays_write_the_bytes_of_pairs(n: int, block_size: int, compression: str) -> None:
    """Arrow columns (binary, string, chunked) give the pairs' bytes: block cuts, midpoint
    index keys, checksums, file info, meta blocks."""
    kvs = _entries(n)
    opts: dict[str, Any] = dict(
        file_info={b"schema": b"{}"},
        meta_blocks={"bloomFilter": b"b" * 50},
        block_size=block_size,
        compression=compression,
    )
    want = write_hbase_hfile(kvs, **opts)
    rows = pa.array([k for k, _ in kvs], pa.binary())
    values = pa.array([v for _, v in kvs], pa.large_binary())
    assert write_hbase_hfile_arrays(rows, values, **opts) == want
    as_text = pa.array([k.decode() for k, _ in kvs], pa.string())
    chunked = pa.chunked_array([values.slice(0, n // 2), values.slice(n // 2)])
    assert write_hbase_hfile_arrays(as_text, chunked, **opts) == want
    assert list(HFileReader(want).items()) == kvs


def test_arrays_empty_file_and_refusals() -> None:
    empty = pa.array([], pa.binary())
    assert write_hbase_hfile_arrays(empty, empty, allow_empty=True) == write_hbase_hfile(
        [], allow_empty=True
    )
    with pytest.raises(HoodieInputError, match="at least one entry"):
        write_hbase_hfile_arrays(empty, empty)
    rows = pa.array([b"a", b"c", b"b"])
    values = pa.array([b"1", b"2", b"3"])
    with pytest.raises(HoodieInputError, match=r"key 2 b'b' sorts before the key before it b'c'"):
        write_hbase_hfile_arrays(rows, values)
    with pytest.raises(HoodieInputError, match="differ in length: 3 keys, 2 values"):
        write_hbase_hfile_arrays(pa.array([b"a", b"b", b"c"]), values.slice(0, 2))
    with pytest.raises(HoodieInputError, match="values may not be null"):
        write_hbase_hfile_arrays(pa.array([b"a"]), pa.array([None], pa.binary()))
    with pytest.raises(HoodieInputError, match="row keys must be an Arrow string or binary"):
        write_hbase_hfile_arrays(pa.array([1]), pa.array([b"x"]))
    with pytest.raises(HoodieUnsupportedError, match="multi-level"):
        kvs = _entries(4000, 200)
        write_hbase_hfile_arrays(
            pa.array([k for k, _ in kvs]),
            pa.array([v for _, v in kvs]),
            block_size=64,
            compression="none",
        )


@pytest.mark.parametrize("compiled", _kernel_paths())
def test_dictionary_values_write_the_bytes_of_plain_ones(
    monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    """Values dictionary-encoded (an index's few distinct values, assembled by the compiled
    kernel where it runs) give the bytes of the same values as a plain column, in both
    dialects; keys out of order or repeated are refused alike, naming the key."""
    monkeypatch.setattr(hfile_writer, "_use_kernel", lambda entries: compiled)
    kvs = _entries(3000)
    rows = pa.array([k for k, _ in kvs], pa.binary())
    distinct = pa.array([b"", b"v" * 300, b"\x00\xff" * 7], pa.binary())
    codes = pa.array([(i * 7) % 3 for i in range(3000)], pa.int32())
    coded = pa.DictionaryArray.from_arrays(codes, distinct)
    plain = coded.dictionary_decode()
    opts: dict[str, Any] = dict(file_info={b"schema": b"{}"}, block_size=4096, create_time_ms=0)
    for write in (write_hbase_hfile_arrays, write_hfile_arrays):
        want = write(rows, plain, **opts)
        assert write(rows, coded, **opts) == want
        assert write(rows.slice(1000), coded.slice(1000), **opts) == write(
            rows.slice(1000), plain.slice(1000), **opts
        )
        assert write(rows, pa.chunked_array([coded.slice(0, 5), coded.slice(5)]), **opts) == want
    assert list(HFileReader(write_hfile_arrays(rows, coded)).items()) == [
        (k, v.as_py()) for k, v in zip(rows.to_pylist(), plain, strict=True)
    ]
    three = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), distinct)
    with pytest.raises(HoodieInputError, match=r"key 2 b'b' sorts before the key before it b'c'"):
        write_hfile_arrays(pa.array([b"a", b"c", b"b"]), three)
    with pytest.raises(HoodieInputError, match=r"key 1 b'ab' repeats the key before it"):
        write_hfile_arrays(pa.array([b"ab", b"ab", b"b"]), three)
    with pytest.raises(HoodieInputError, match=r"key 2 b'a' sorts before"):
        write_hfile_arrays(pa.array([b"a", b"a\x01", b"a"]), three)
    with pytest.raises(HoodieInputError, match="values may not be null"):
        nulls = pa.DictionaryArray.from_arrays(pa.array([0, None, 0], pa.int32()), distinct)
        write_hfile_arrays(pa.array([b"a", b"b", b"c"]), nulls)


def test_checksum_paths_write_the_same_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of several 16 KiB checksum chunks per block: the same bytes whichever CRC path
    runs, each chunk's checksum right."""
    kvs = _entries(3000)
    files = []
    for kernel in _kernel_paths():
        monkeypatch.setattr(checksum, "_use_kernel", lambda total, k=kernel: k)
        files.append(write_hbase_hfile(kvs, compression="none", block_size=40_000))
    assert files.count(files[0]) == len(files)
    data = files[0]
    for off, _, odsw, _, _, _, bpc, ddsh in _blocks(data):
        sums = data[off + ddsh : off + 33 + odsw]
        chunks = [data[off + i : off + min(i + bpc, ddsh)] for i in range(0, ddsh, bpc)]
        assert sums == b"".join(crc32c(c).to_bytes(4, "big") for c in chunks)
    assert any(ddsh > 16384 for *_, ddsh in _blocks(data))
