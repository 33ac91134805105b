"""Hudi's record-key bloom filters (index/bloom_filter.py): byte for byte what Java writes in
the footers of the shared sample tables, Hadoop's hashes and row layout, membership."""

from __future__ import annotations

import base64
import random
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieInputError, HoodieOptionError
from hoodie_ray.hfile import build_bloom_filter
from hoodie_ray.index.bloom_filter import (
    BLOOM_FILTER_FOOTER_KEY,
    BLOOM_TYPE_CODE_FOOTER_KEY,
    DYNAMIC_V0,
    JENKINS_HASH,
    MURMUR_HASH,
    SIMPLE,
    BloomFilter,
    BloomFilterSpec,
    footer_bloom_filter,
    java_hash,
    key_positions,
    set_bits,
)
from tests.conftest import SAMPLE_TABLE_PARAMS, extract_sample_table


def _paths() -> list[bool]:
    """The numpy twin always; the compiled kernel where numba imports."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return [False]
    return [False, True]


def _java_footer_files(root: Path) -> list[Path]:
    return [
        p
        for p in sorted(root.rglob("*.parquet"))
        if ".hoodie" not in p.parts
        and BLOOM_FILTER_FOOTER_KEY.encode() in (pq.read_metadata(p).metadata or {})
    ]


@pytest.mark.parametrize("name", SAMPLE_TABLE_PARAMS)
def test_java_footer_filters_are_rebuilt_byte_for_byte(tmp_path: Path, name: str) -> None:
    """Each Java base file's footer filter is decoded, rebuilt from the file's record keys (in
    row order, Hudi's default parameters) and re-serialized to the same Base64 text."""
    root = extract_sample_table(name, tmp_path)
    files = _java_footer_files(root)
    if not files:
        pytest.skip(f"{name}: no base file with a bloom filter in its footer")
    for f in files:
        md = pq.read_metadata(f).metadata
        keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0)
        stored = md[BLOOM_FILTER_FOOTER_KEY.encode()]
        assert md[BLOOM_TYPE_CODE_FOOTER_KEY.encode()] == DYNAMIC_V0.encode()
        for compiled in _paths():
            built = BloomFilterSpec().build(keys, compiled=compiled)
            assert built.serialize_to_string().encode() == stored, (f.name, compiled)
        decoded = footer_bloom_filter(md)
        assert decoded == built and decoded.to_bytes() == base64.b64decode(stored)
        assert (decoded.num_entries, decoded.nb_hash, decoded.vector_size) == (60000, 30, 2587966)
        assert decoded.might_contain_many(keys).all()
        assert all(decoded.might_contain(k) for k in keys.to_pylist())
        assert not any(decoded.might_contain(k + "#absent") for k in keys.to_pylist())


def test_no_false_negatives_and_about_the_configured_false_positive_rate() -> None:
    spec = BloomFilterSpec(num_entries=2000, fpp=0.01, filter_type=SIMPLE)
    keys = pa.array([f"key-{i:06d}" for i in range(2000)])
    others = pa.array([f"other-{i}" for i in range(20000)])
    f = spec.build(keys)
    assert f.might_contain_many(keys).all()
    rate = f.might_contain_many(others).mean()
    assert 0.004 < rate < 0.02, rate  # 1% at the sized number of keys
    dyn = BloomFilterSpec(num_entries=500, fpp=0.01, max_entries=2000).build(keys)
    assert len(dyn.rows) == 4 and dyn.might_contain_many(keys).all()
    assert 0.01 < dyn.might_contain_many(others).mean() < 0.08  # 4 rows of 1% each


def _java_dynamic_rows(n: int, nr: int, max_nr: int) -> tuple[list[int], int, int]:
    """InternalDynamicBloomFilter.add step by step: each key's row, currentNbRecord, rows."""
    rows, current, reached, cur_idx, out = 1, 0, False, 0, []
    for _ in range(n):
        if reached:
            row = cur_idx % rows
            cur_idx += 1
        elif current >= nr and rows * nr < max_nr:
            rows += 1
            current = 0
            row = rows - 1
        elif current >= nr:
            reached = True
            row = 0
        else:
            row = rows - 1
        out.append(row)
        current += 1
    return out, current, rows


@pytest.mark.parametrize("n", [0, 1, 9, 10, 30, 31, 32, 77])
def test_dynamic_rows_fill_then_round_robin_as_java_adds(n: int) -> None:
    spec = BloomFilterSpec(num_entries=10, fpp=0.01, max_entries=25)
    keys = [f"k{i}" for i in range(n)]
    b = spec.builder()
    for lo in range(0, n, 7):  # uneven batches: the row of a key depends on keys before it
        b.add(pa.array(keys[lo : lo + 7]))
    f = b.build()
    want_rows, current, rows = _java_dynamic_rows(n, 10, 25)
    assert (len(f.rows), f.current, f.num_entries) == (rows, current, 10)
    for key, row in zip(keys, want_rows, strict=True):
        alone = BloomFilterSpec(num_entries=10, fpp=0.01, filter_type=SIMPLE).build([key])
        assert (f.rows[row] & alone.rows[0] == alone.rows[0]).all(), (key, row)
    raw = f.to_bytes()
    assert struct.unpack_from(">iiBi", raw) == (-1, f.nb_hash, 1, 96)
    assert struct.unpack_from(">iii", raw, 13) == (10, current, rows)
    assert len(raw) == 25 + rows * (13 + 12)


def test_simple_filter_is_hadoops_bloom_filter_alone() -> None:
    f = BloomFilterSpec(num_entries=100, fpp=0.001, filter_type=SIMPLE).build(["a", "b"])
    raw = f.to_bytes()
    assert struct.unpack_from(">iiBi", raw) == (-1, 10, 1, 1438)
    assert len(raw) == 13 + 180
    assert BloomFilter.from_serialized(f.serialize_to_string(), SIMPLE) == f
    # a footer without a type code holds a SIMPLE filter (Java writes none for it)
    md = {BLOOM_FILTER_FOOTER_KEY.encode(): f.serialize_to_string().encode()}
    assert footer_bloom_filter(md) == f and footer_bloom_filter({}) is None


def test_hashes_are_hadoops() -> None:
    # lookup3.c's published hashlittle values
    assert java_hash(b"Four score and seven years ago", 0, JENKINS_HASH) & 0xFFFFFFFF == 0x17770551
    assert java_hash(b"Four score and seven years ago", 1, JENKINS_HASH) & 0xFFFFFFFF == 0xCD628161
    keys = [bytes(range(i, i + n)) + b"\xff\x80" * (n % 3) for i in range(5) for n in range(1, 30)]
    for hash_type in (0, 1):
        for key in keys:
            seed, want = 0, []
            for _ in range(9):  # chained seeds, Math.abs(h % vectorSize)
                seed = java_hash(key, seed, hash_type)
                want.append(abs(seed) % 1009)
            assert key_positions(key, 9, 1009, hash_type).tolist() == want
    jenkins = BloomFilterSpec(num_entries=50, fpp=0.01, filter_type=SIMPLE, hash_type=0)
    f = jenkins.build(keys)
    assert f.to_bytes()[8] == 0 and f.might_contain_many(pa.array(keys, pa.binary())).all()


def _random_keys(rnd: random.Random, n: int) -> list[bytes]:
    """Keys of 0-40 bytes: empty, ASCII, arbitrary bytes (>= 0x80: Java's sign-extended tail
    bytes) and non-ASCII UTF-8, of one length in runs (the kernel's uniform groups) and mixed."""
    words = ["é", "☃", "𝄞", "ß", "日本", "key"]
    out: list[bytes] = []
    while len(out) < n:
        kind = rnd.randrange(4)
        if kind == 0:
            out.append(b"" if rnd.random() < 0.2 else bytes(rnd.randrange(256) for _ in range(40)))
        elif kind == 1:
            out.append("".join(rnd.choices(words, k=rnd.randrange(1, 8))).encode())
        elif kind == 2:
            out.append(bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 41))))
        else:  # a run of one length, longer than a kernel group
            length = rnd.randrange(0, 41)
            out += [bytes(rnd.randrange(256) for _ in range(length)) for _ in range(300)]
    out = out[: n - 3]
    for at in (0, n // 2, len(out) + 2):  # empty keys first, inside, last
        out.insert(at, b"")
    return out


@pytest.mark.skipif(_paths() == [False], reason="numba is not installed: no kernel to compare")
@pytest.mark.parametrize("hash_type", [MURMUR_HASH, JENKINS_HASH])
@pytest.mark.parametrize("filter_type", [SIMPLE, DYNAMIC_V0])
def test_kernel_and_numpy_twin_set_the_same_bits(hash_type: int, filter_type: str) -> None:
    """The compiled kernel (index/_bloom_jit.py) and its numpy twin set the same bits for the
    same keys, empty and non-ASCII ones included, in one row or several; both match each key's
    scalar positions."""
    rnd = random.Random(hash_type * 10 + len(filter_type))
    keys = _random_keys(rnd, 2000)
    assert b"" in keys and any(k and max(k) >= 0x80 for k in keys)
    spec = BloomFilterSpec(
        num_entries=400, fpp=0.001, filter_type=filter_type, max_entries=1200, hash_type=hash_type
    )
    # the keys back to back, as Arrow holds them (key_buffers refuses empty keys)
    data = np.frombuffer(b"".join(keys) + b"\0", np.uint8)
    lens = np.array([len(k) for k in keys], np.int64)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    rows_of = spec.builder()._rows_of(len(keys)) if filter_type == DYNAMIC_V0 else None
    n_rows = spec.max_rows
    got = {}
    for compiled in (False, True):
        flags = np.zeros((n_rows, spec.vector_size), dtype=np.bool_)
        set_bits(flags, data, starts, lens, rows_of, spec.nb_hash, hash_type, compiled=compiled)
        got[compiled] = flags
    assert (got[False] == got[True]).all() and got[True].any()
    for i in [i for i, k in enumerate(keys) if not k] + list(range(1, len(keys), 23)):
        row = 0 if rows_of is None else int(rows_of[i])
        assert got[True][
            row, key_positions(keys[i], spec.nb_hash, spec.vector_size, hash_type)
        ].all()
    # and through the builder, in uneven batches (the rows depend on the keys before them)
    non_empty = [k for k in keys if k]
    built = {}
    for compiled in (False, True):
        b = spec.builder()
        for lo in range(0, len(non_empty), 777):
            b.add(non_empty[lo : lo + 777], compiled=compiled)
        built[compiled] = b.build()
    assert built[True].to_bytes() == built[False].to_bytes()
    assert built[True].might_contain_many(pa.array(non_empty, pa.binary())).all()
    # a sliced Arrow array (its offsets start past 0) gives the filter of its keys
    sliced = pa.array([b"x"] * 5 + non_empty, pa.binary())[5:]
    assert spec.build(sliced, compiled=True).to_bytes() == built[False].to_bytes()


def test_the_kernel_is_loaded_once_the_process_has_hashed_enough_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where numba is not loaded yet, the twin runs until this process has hashed
    JIT_MIN_KEYS keys (all its filters together); then numba is loaded, unless switched off."""
    import sys

    from hoodie_ray import jit
    from hoodie_ray.index import bloom_filter as bf

    enabled = jit.enabled()  # decided (and numba imported, if at all) before numba is hidden
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    monkeypatch.setattr(bf, "JIT_MIN_KEYS", 100)
    monkeypatch.setattr(bf, "_twin_keys", 0)
    assert not bf._use_kernel(60) and not bf._use_kernel(39)
    assert bf._twin_keys == 99
    assert bf._use_kernel(1) == enabled


def test_same_filter_as_the_hfile_bloom_meta_block() -> None:
    """The MDT base files' filter (hfile/bloom.py, verified against Java's HFiles) agrees."""
    keys = [f"key/{i}".encode() * (1 + i % 3) for i in range(25000)]
    mine = BloomFilterSpec(num_entries=10000, fpp=1e-9).build(keys)
    assert mine.serialize_to_string().encode() == build_bloom_filter(keys)


def test_bad_keys_and_filters_are_named() -> None:
    spec = BloomFilterSpec(num_entries=10, fpp=0.1)
    with pytest.raises(HoodieInputError, match="record key is null"):
        spec.build(pa.array(["a", None]))
    for compiled in _paths():
        with pytest.raises(HoodieInputError, match="record key is empty"):
            spec.build(["a", ""], compiled=compiled)
    with pytest.raises(HoodieCorruptedDataError, match="neither Base64"):
        BloomFilter.from_serialized(b"not base64 !")
    good = spec.build(["a"]).to_bytes()
    with pytest.raises(HoodieCorruptedDataError, match="size does not match"):
        BloomFilter.from_serialized(good[:-1])
    with pytest.raises(HoodieOptionError, match="hoodie.index.bloom.fpp"):
        BloomFilterSpec(fpp=1.5)
    with pytest.raises(HoodieOptionError, match="hoodie.bloom.index.filter.type"):
        BloomFilterSpec(filter_type="DYNAMIC_V1")
