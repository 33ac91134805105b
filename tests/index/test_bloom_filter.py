"""Hudi's record-key bloom filters (index/bloom_filter.py): byte for byte what Java writes in
the footers of the shared sample tables, Hadoop's hashes and row layout, membership."""

from __future__ import annotations

import base64
import struct
from pathlib import Path

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
    SIMPLE,
    BloomFilter,
    BloomFilterSpec,
    footer_bloom_filter,
    java_hash,
    key_positions,
)
from tests.conftest import SAMPLE_TABLE_PARAMS, extract_sample_table


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
        built = BloomFilterSpec().build(keys)
        assert built.serialize_to_string().encode() == stored, f.name
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


def test_same_filter_as_the_hfile_bloom_meta_block() -> None:
    """The MDT base files' filter (hfile/bloom.py, verified against Java's HFiles) agrees."""
    keys = [f"key/{i}".encode() * (1 + i % 3) for i in range(25000)]
    mine = BloomFilterSpec(num_entries=10000, fpp=1e-9).build(keys)
    assert mine.serialize_to_string().encode() == build_bloom_filter(keys)


def test_bad_keys_and_filters_are_named() -> None:
    spec = BloomFilterSpec(num_entries=10, fpp=0.1)
    with pytest.raises(HoodieInputError, match="record key is null"):
        spec.build(pa.array(["a", None]))
    with pytest.raises(HoodieInputError, match="record key is empty"):
        spec.build(["a", ""])
    with pytest.raises(HoodieCorruptedDataError, match="neither Base64"):
        BloomFilter.from_serialized(b"not base64 !")
    good = spec.build(["a"]).to_bytes()
    with pytest.raises(HoodieCorruptedDataError, match="size does not match"):
        BloomFilter.from_serialized(good[:-1])
    with pytest.raises(HoodieOptionError, match="hoodie.index.bloom.fpp"):
        BloomFilterSpec(fpp=1.5)
    with pytest.raises(HoodieOptionError, match="hoodie.bloom.index.filter.type"):
        BloomFilterSpec(filter_type="DYNAMIC_V1")
