"""The ``bloomFilter`` META block of MDT base files: Hudi's ``DYNAMIC_V0`` bloom filter.

Hudi's ``HoodieDynamicBoundedBloomFilter`` (a copy of Hadoop's ``DynamicBloomFilter`` whose number
of rows is bounded) is a list of standard bloom filters ("rows") of ``vectorSize`` bits each. A key
(its UTF-8 bytes) sets ``nbHash`` bits of one row: hash ``i`` is ``MurmurHash2(key, seed)`` with the
seed chained from hash ``i - 1`` (0 first), reduced to ``abs(h % vectorSize)`` with Java's signed
arithmetic. Keys fill row 0 up to ``nr`` keys, then a new row, up to ``ceil(maxNr / nr)`` rows;
past that they go round-robin over the rows. A key might be present if any row has all its bits.

Serialized (``DataOutput``, big-endian), then Base64-encoded, and stored as that ASCII text in
the META block (file info ``bloomFilterTypeCode`` = ``DYNAMIC_V0``):
``int32 -1 (version) | int32 nbHash | byte hashType (1 = murmur) | int32 vectorSize`` (the
filter), ``int32 nr | int32 currentNbRecord | int32 rows``, then per row the same 13-byte filter
header followed by ``ceil(vectorSize / 8)`` bytes, bit ``i`` in byte ``i // 8`` at ``1 << (i % 8)``.
The sizes follow ``BloomFilterUtils``: ``vectorSize = ceil(-n * ln(fpp) / ln(2)^2)``,
``nbHash = ceil(vectorSize / n * ln(2))``; the v9 sample's MDT base files use n = 10000 and
fpp = 1e-9 (431328 bits, 30 hashes).
"""

from __future__ import annotations

import base64
import functools
import math
import struct
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieInputError, HoodieUnsupportedError
from hoodie_ray.index.bloom_filter import (
    DYNAMIC_HEAD,
    FILTER_HEAD,
    FILTER_VERSION,
    MURMUR_HASH,
    decode_filter,
    key_buffers,
    key_positions,
    set_bits,
)

__all__ = [
    "BLOOM_FILTER_META_BLOCK",
    "BLOOM_FILTER_TYPE_CODE",
    "bloom_might_contain",
    "build_bloom_filter",
]

#: Name of the META block and the file info value that types it.
BLOOM_FILTER_META_BLOCK = "bloomFilter"
BLOOM_FILTER_TYPE_CODE = b"DYNAMIC_V0"


def build_bloom_filter(
    keys: Sequence[bytes] | pa.Array,
    *,
    num_entries: int = 10000,
    fpp: float = 1e-9,
    max_entries: int = 100000,
) -> bytes:
    """The ``bloomFilter`` META block content (Base64 text as bytes) of a bloom filter holding
    ``keys`` added in the given order, as Hudi's ``HoodieDynamicBoundedBloomFilter`` with
    ``num_entries`` keys per row, false-positive rate ``fpp`` and at most ``max_entries`` keys
    before rows are reused (defaults: the v9 sample's row size; ``max_entries`` is Hudi's
    default ``hoodie.bloom.index.filter.dynamic.max.entries``)."""
    if num_entries <= 0 or not 0 < fpp < 1 or max_entries <= 0:
        raise HoodieInputError("bloom filter sizes must be positive and fpp within (0, 1)")
    vector_size = math.ceil(-num_entries * math.log(fpp) / (math.log(2) ** 2))
    nb_hash = math.ceil(vector_size / num_entries * math.log(2))
    n = len(keys)
    max_rows = max(1, -(-max_entries // num_entries))
    # row of each key, as InternalDynamicBloomFilter.add assigns them
    j = np.arange(n, dtype=np.int64)
    filled = max_rows * num_entries
    rows_of = np.where(j < filled, j // num_entries, 0)
    past = j > filled
    rows_of[past] = (j[past] - filled - 1) % max_rows
    n_rows = max(1, min(max_rows, -(-n // num_entries)))
    current = n - (n_rows - 1) * num_entries if n else 0
    bits = np.zeros((n_rows, vector_size), dtype=bool)
    if n:
        data, starts, lens = key_buffers(keys)
        set_bits(bits, data, starts, lens, rows_of if n_rows > 1 else None, nb_hash, MURMUR_HASH)
    head = FILTER_HEAD.pack(FILTER_VERSION, nb_hash, MURMUR_HASH, vector_size)
    parts = [head, DYNAMIC_HEAD.pack(num_entries, current, n_rows)]
    for row in bits:
        parts += (head, np.packbits(row, bitorder="little").tobytes())
    return base64.b64encode(b"".join(parts))


def bloom_might_contain(serialized: bytes, key: bytes) -> bool:
    """Whether the ``DYNAMIC_V0`` bloom filter ``serialized`` (the META block content, Base64
    text, or the decoded binary) might hold ``key``; False means it certainly does not. The
    last few filters asked about are kept decoded."""
    if not key:
        raise HoodieInputError("bloom filter keys must not be empty")
    nb_hash, vector_size, rows = _parsed(bytes(serialized))
    tests = [(p >> 3, 1 << (p & 7)) for p in _positions_of(bytes(key), nb_hash, vector_size)]
    return any(all(row[i] & bit for i, bit in tests) for row in rows)


@functools.lru_cache(maxsize=8)
def _parsed(serialized: bytes) -> tuple[int, int, tuple[bytes, ...]]:
    """(nbHash, vectorSize, bit bytes of each row) of a serialized filter."""
    raw = decode_filter(serialized)
    try:
        version, nb_hash, hash_type, vector_size = FILTER_HEAD.unpack_from(raw, 0)
        _nr, _current, n_rows = DYNAMIC_HEAD.unpack_from(raw, FILTER_HEAD.size)
    except struct.error:
        raise HoodieCorruptedDataError("bloom filter is truncated") from None
    if version != FILTER_VERSION or nb_hash <= 0 or vector_size <= 0 or n_rows < 0:
        raise HoodieCorruptedDataError(
            f"bloom filter header is not a DYNAMIC_V0 filter ({version})"
        )
    if hash_type != MURMUR_HASH:
        raise HoodieUnsupportedError(f"bloom filter hash type {hash_type} (only murmur, 1)")
    n_bytes = (vector_size + 7) // 8
    row_size = FILTER_HEAD.size + n_bytes
    start = FILTER_HEAD.size + DYNAMIC_HEAD.size
    if len(raw) != start + n_rows * row_size:
        raise HoodieCorruptedDataError("bloom filter size does not match its header")
    at = start + FILTER_HEAD.size
    rows = tuple(raw[at + r * row_size : at + r * row_size + n_bytes] for r in range(n_rows))
    return nb_hash, vector_size, rows


def _positions_of(key: bytes, nb_hash: int, vector_size: int) -> list[int]:
    """The bit positions of one key (the bits :func:`build_bloom_filter` sets for it)."""
    return key_positions(key, nb_hash, vector_size, MURMUR_HASH).tolist()
