"""Hudi's record-key bloom filters (``org.apache.hudi.common.bloom``), column-wise.

Hudi vendors Hadoop's bloom filter (``org.apache.hadoop.util.bloom``). A filter is a bit vector of
``vectorSize`` bits; a key (the UTF-8 bytes of the record key) sets ``nbHash`` bits: hash ``i`` is
``Hash(key, seed)`` with the seed chained from hash ``i - 1`` (0 first), reduced to
``Math.abs(h % vectorSize)`` over Java ints. ``Hash`` is MurmurHash (Hadoop's variant, hash type
1, what Hudi always writes) or Jenkins' lookup3 ``hashlittle`` (type 0). Sizes follow Hudi's
``BloomFilterUtils``: ``vectorSize = ceil(n * (-ln(fpp) / ln(2)^2))``,
``nbHash = ceil(ln(2) * vectorSize / n)`` in doubles, for ``n = hoodie.index.bloom.num_entries``
and ``fpp = hoodie.index.bloom.fpp``.

Two types (``hoodie.bloom.index.filter.type``, :class:`BloomFilterSpec`):

* ``SIMPLE``: one vector; serialized as Hadoop's ``BloomFilter.write``:
  ``int32 -1 | int32 nbHash | byte hashType | int32 vectorSize`` then ``ceil(vectorSize / 8)``
  bytes, bit ``i`` in byte ``i // 8`` at ``1 << (i % 8)`` (big-endian ints, ``DataOutput``).
* ``DYNAMIC_V0`` (the default, ``HoodieDynamicBoundedBloomFilter`` over
  ``InternalDynamicBloomFilter``): rows of such vectors. Keys fill row 0 up to ``n`` keys, then
  a new row, until ``ceil(maxEntries / n)`` rows exist
  (``hoodie.bloom.index.filter.dynamic.max.entries``); past that, the next key goes to row 0 and
  the following ones round-robin over the rows (row ``(j - rows * n - 1) % rows`` for key
  ``j``). Serialized as the same 13-byte header, ``int32 n | int32 currentNbRecord | int32
  rows``, then each row as a ``SIMPLE`` filter. ``currentNbRecord`` counts the keys since the
  last row was added (never reset once every row exists).

``serializeToString`` is the Base64 text (``java.util.Base64``, padded) of those bytes; it is
what base-file footers (``org.apache.hudi.bloomfilter``) and the metadata table's
``bloom_filters`` records (its UTF-8 bytes) hold. Footers also carry
``hoodie_bloom_filter_type_code`` (only for the dynamic types, as Java writes it; a footer
without it holds a ``SIMPLE`` filter) and ``hoodie_min_record_key`` /
``hoodie_max_record_key``.

Keys are hashed column-wise over the Arrow buffers. A compiled kernel (``index/_bloom_jit.py``)
hashes 256 keys at a time, each step of a round vectorised over them, and sets each key's bits
as they come (~0.1 s per 1M 36-byte keys at Hudi's 30 hashes, ~3x its twin); it runs where
numba is loaded already or once the process has hashed :data:`JIT_MIN_KEYS` keys. Its numpy twin
(``_positions``, and ``HOODIE_RAY_NO_JIT=1``) takes the keys of one length as a matrix, in
chunks: MurmurHash mixes each 4-byte word of a key independently of the seed, so the mixed words
are computed once and each of the ``nbHash`` chained rounds costs two vector operations a word;
it builds the (keys x nbHash) positions of a chunk, then sets them. Both set the same bits.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieInputError, HoodieOptionError
from hoodie_ray.jit import read_only

if TYPE_CHECKING:
    from hoodie_ray.config.options import WriteConfig

__all__ = [
    "BLOOM_FILTER_FOOTER_KEY",
    "BLOOM_TYPE_CODE_FOOTER_KEY",
    "DYNAMIC_HEAD",
    "DYNAMIC_V0",
    "FILTER_HEAD",
    "FILTER_VERSION",
    "JENKINS_HASH",
    "JIT_MIN_KEYS",
    "LEGACY_BLOOM_FILTER_FOOTER_KEY",
    "MAX_RECORD_KEY_FOOTER_KEY",
    "MIN_RECORD_KEY_FOOTER_KEY",
    "MURMUR_HASH",
    "SIMPLE",
    "BloomFilter",
    "BloomFilterBuilder",
    "BloomFilterSpec",
    "decode_filter",
    "footer_bloom_filter",
    "key_buffers",
    "key_positions",
    "murmur2_rows",
    "murmur_positions",
    "record_key_footer",
    "set_bits",
]

#: Footer keys of Hudi base files (``HoodieAvroWriteSupport`` / ``HoodieBloomFilterWriteSupport``).
BLOOM_FILTER_FOOTER_KEY = "org.apache.hudi.bloomfilter"
BLOOM_TYPE_CODE_FOOTER_KEY = "hoodie_bloom_filter_type_code"
MIN_RECORD_KEY_FOOTER_KEY = "hoodie_min_record_key"
MAX_RECORD_KEY_FOOTER_KEY = "hoodie_max_record_key"
#: Hudi 0.x's footer key of the bloom filter (read, never written).
LEGACY_BLOOM_FILTER_FOOTER_KEY = "com.uber.hoodie.bloomfilter"

#: ``BloomFilterTypeCode`` names.
SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"
_TYPES = (SIMPLE, DYNAMIC_V0)
#: Hadoop's ``Hash`` types.
JENKINS_HASH = 0
MURMUR_HASH = 1

FILTER_VERSION = -1
FILTER_HEAD = struct.Struct(">iiBi")  # version, nbHash, hashType, vectorSize
DYNAMIC_HEAD = struct.Struct(">iii")  # nr, currentNbRecord, number of rows
_M = np.uint32(0x5BD1E995)
_MASK = 0xFFFFFFFF
#: Keys hashed per numpy step (bounds the (keys x hashes) position matrix).
_CHUNK = 1 << 15
#: Once a process has hashed this many keys with the numpy twin (its filters together), it
#: loads numba for the compiled kernel where it is not loaded yet (~0.33 CPU-s once per process,
#: the cached kernel included; then ~0.1 s per 1M keys against the twin's ~0.35-0.45 s at
#: Java's defaults): a process writing one small file never pays for it, one writing many pays
#: it once, after about as much time in the twin, and gains on every key after.
JIT_MIN_KEYS = 1 << 19
#: Keys this process hashed with the numpy twin by default (towards :data:`JIT_MIN_KEYS`).
_twin_keys = 0


@dataclass(frozen=True)
class BloomFilterSpec:
    """The parameters of Hudi's ``BloomFilterFactory.createBloomFilter`` (defaults: Hudi's)."""

    num_entries: int = 60000
    fpp: float = 0.000000001
    filter_type: str = DYNAMIC_V0
    max_entries: int = 100000
    hash_type: int = MURMUR_HASH

    def __post_init__(self) -> None:
        if self.num_entries <= 0 or self.max_entries <= 0:
            raise HoodieOptionError(
                "hoodie.index.bloom.num_entries and "
                "hoodie.bloom.index.filter.dynamic.max.entries must be positive"
            )
        if not 0 < self.fpp < 1:
            raise HoodieOptionError(f"hoodie.index.bloom.fpp must be within (0, 1), got {self.fpp}")
        if self.filter_type not in _TYPES:
            raise HoodieOptionError(
                f"hoodie.bloom.index.filter.type {self.filter_type!r} is not one of "
                f"{', '.join(_TYPES)}"
            )
        if self.hash_type not in (JENKINS_HASH, MURMUR_HASH):
            raise HoodieOptionError(f"bloom filter hash type {self.hash_type} (0 or 1)")

    @classmethod
    def of(cls, wc: WriteConfig) -> BloomFilterSpec | None:
        """The spec a writer's options ask for; None with
        ``hoodie.parquet.bloom.filter.enabled=false``."""
        if not wc.parquet_bloom_filter_enabled:
            return None
        return cls(
            num_entries=wc.bloom_num_entries,
            fpp=wc.bloom_fpp,
            filter_type=wc.bloom_filter_type,
            max_entries=wc.bloom_max_entries,
        )

    @property
    def vector_size(self) -> int:
        """Bits per vector (``BloomFilterUtils.getBitSize``, in Java's double arithmetic)."""
        return math.ceil(self.num_entries * (-math.log(self.fpp) / (math.log(2) * math.log(2))))

    @property
    def nb_hash(self) -> int:
        """Hash functions (``BloomFilterUtils.getNumHashes``)."""
        return math.ceil(math.log(2) * self.vector_size / self.num_entries)

    @property
    def max_rows(self) -> int:
        """Rows a ``DYNAMIC_V0`` filter grows to (1 for ``SIMPLE``)."""
        if self.filter_type == SIMPLE:
            return 1
        return max(1, -(-self.max_entries // self.num_entries))

    def builder(self) -> BloomFilterBuilder:
        """An empty filter of this spec to add keys to."""
        return BloomFilterBuilder(self)

    def build(self, keys: Any, *, compiled: bool | None = None) -> BloomFilter:
        """The filter of ``keys`` added in order (see :meth:`BloomFilterBuilder.add`)."""
        b = self.builder()
        b.add(keys, compiled=compiled)
        return b.build()


class BloomFilter:
    """A decoded bloom filter: its type, sizes and the bits of each row (one row for
    ``SIMPLE``)."""

    def __init__(
        self,
        filter_type: str,
        nb_hash: int,
        vector_size: int,
        hash_type: int,
        rows: np.ndarray,
        num_entries: int = 0,
        current: int = 0,
    ) -> None:
        self.filter_type = filter_type
        self.nb_hash = nb_hash
        self.vector_size = vector_size
        self.hash_type = hash_type
        self.rows = rows  # (n_rows, ceil(vector_size / 8)) uint8, little bit order
        self.num_entries = num_entries
        self.current = current

    # -- serialization -------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Java's ``DataOutput`` serialization (``write``)."""
        head = FILTER_HEAD.pack(FILTER_VERSION, self.nb_hash, self.hash_type, self.vector_size)
        if self.filter_type == SIMPLE:
            return head + self.rows[0].tobytes()
        parts = [head, DYNAMIC_HEAD.pack(self.num_entries, self.current, len(self.rows))]
        for row in self.rows:
            parts += (head, row.tobytes())
        return b"".join(parts)

    def serialize_to_string(self) -> str:
        """Java's ``serializeToString``: the Base64 text of :meth:`to_bytes`."""
        return base64.b64encode(self.to_bytes()).decode("ascii")

    @classmethod
    def from_serialized(cls, data: bytes | str, filter_type: str = DYNAMIC_V0) -> BloomFilter:
        """Decode a filter of type ``filter_type`` from its Base64 text (a footer value, an MDT
        record's bytes) or its binary form.

        Raises:
            HoodieCorruptedDataError: not a filter of that type (named).
        """
        if filter_type not in _TYPES:
            raise HoodieCorruptedDataError(f"bloom filter type code {filter_type!r} is unknown")
        raw = decode_filter(data)
        try:
            version, nb_hash, hash_type, vector_size = FILTER_HEAD.unpack_from(raw, 0)
        except struct.error:
            raise HoodieCorruptedDataError("bloom filter is truncated") from None
        if version != FILTER_VERSION or nb_hash <= 0 or vector_size <= 0:
            raise HoodieCorruptedDataError(f"bloom filter header is not Hadoop's ({version})")
        if hash_type not in (JENKINS_HASH, MURMUR_HASH):
            raise HoodieCorruptedDataError(f"bloom filter hash type {hash_type} is unknown")
        n_bytes = (vector_size + 7) // 8
        if filter_type == SIMPLE:
            if len(raw) != FILTER_HEAD.size + n_bytes:
                raise HoodieCorruptedDataError("SIMPLE bloom filter size does not match its header")
            rows = np.frombuffer(raw, np.uint8, n_bytes, FILTER_HEAD.size).reshape(1, n_bytes)
            return cls(SIMPLE, nb_hash, vector_size, hash_type, rows)
        try:
            nr, current, n_rows = DYNAMIC_HEAD.unpack_from(raw, FILTER_HEAD.size)
        except struct.error:
            raise HoodieCorruptedDataError("DYNAMIC_V0 bloom filter is truncated") from None
        row_size = FILTER_HEAD.size + n_bytes
        start = FILTER_HEAD.size + DYNAMIC_HEAD.size
        if n_rows < 1 or len(raw) != start + n_rows * row_size:
            raise HoodieCorruptedDataError("DYNAMIC_V0 bloom filter size does not match its header")
        table = np.frombuffer(raw, np.uint8, n_rows * row_size, start).reshape(n_rows, row_size)
        if not all(bytes(r[: FILTER_HEAD.size]) == raw[: FILTER_HEAD.size] for r in table):
            raise HoodieCorruptedDataError("DYNAMIC_V0 bloom filter rows differ in their sizes")
        rows = np.ascontiguousarray(table[:, FILTER_HEAD.size :])
        return cls(DYNAMIC_V0, nb_hash, vector_size, hash_type, rows, nr, current)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BloomFilter) and self.to_bytes() == other.to_bytes()

    def __hash__(self) -> int:
        return hash(self.to_bytes())

    # -- membership ----------------------------------------------------------------------------
    def might_contain(self, key: str | bytes) -> bool:
        """Whether ``key`` may have been added; False means it certainly was not."""
        raw = key.encode() if isinstance(key, str) else bytes(key)
        if not raw:
            raise HoodieInputError("bloom filter keys must not be empty")
        positions = key_positions(raw, self.nb_hash, self.vector_size, self.hash_type)
        byte, bit = positions >> 3, (1 << (positions & 7)).astype(np.uint8)
        return bool(((self.rows[:, byte] & bit) != 0).all(axis=1).any())

    def might_contain_many(self, keys: Any) -> np.ndarray:
        """:meth:`might_contain` of every key of a string column (bool array), column-wise."""
        data, starts, lens = key_buffers(keys)
        out = np.zeros(len(lens), dtype=bool)
        for lo in range(0, len(lens), _CHUNK):
            hi = min(lo + _CHUNK, len(lens))
            pos = _positions(
                data, starts[lo:hi], lens[lo:hi], self.nb_hash, self.vector_size, self.hash_type
            )
            byte, bit = pos >> 3, (1 << (pos & 7)).astype(np.uint8)
            for row in self.rows:
                out[lo:hi] |= ((row[byte] & bit) != 0).all(axis=1)
        return out


class BloomFilterBuilder:
    """A filter being filled, key batch by key batch, in the order Java adds them (a base
    file's rows in file order)."""

    def __init__(self, spec: BloomFilterSpec) -> None:
        self.spec = spec
        self._vector = spec.vector_size
        self._nb_hash = spec.nb_hash
        self._flags = np.zeros((1, self._vector), dtype=np.bool_)
        self.count = 0

    def add(self, keys: Any, *, compiled: bool | None = None) -> None:
        """Add a batch of keys: an Arrow string / binary array (or chunked array), or a
        sequence of ``str`` / ``bytes``. ``compiled`` forces the kernel (True) or its numpy twin
        (False), which set the same bits; by default the kernel runs where numba is loaded or
        once the process has hashed :data:`JIT_MIN_KEYS` keys.

        Raises:
            HoodieInputError: a null or empty key (named by its position in the batch).
        """
        data, starts, lens = key_buffers(keys)
        n = len(lens)
        if n == 0:
            return
        rows_of = self._rows_of(n)
        need = int(rows_of.max()) + 1
        if need > len(self._flags):
            grown = np.zeros((need, self._vector), dtype=np.bool_)
            grown[: len(self._flags)] = self._flags
            self._flags = grown
        set_bits(
            self._flags,
            data,
            starts,
            lens,
            rows_of if len(self._flags) > 1 else None,
            self._nb_hash,
            self.spec.hash_type,
            compiled=compiled,
        )
        self.count += n

    @property
    def hash_type(self) -> int:
        return self.spec.hash_type

    @property
    def nb_hash(self) -> int:
        return self._nb_hash

    @property
    def vector_size(self) -> int:
        return self._vector

    def _rows_of(self, n: int) -> np.ndarray:
        """The row each of the next ``n`` keys goes to (``InternalDynamicBloomFilter.add``)."""
        if self.spec.filter_type == SIMPLE:
            return np.zeros(n, dtype=np.int64)
        nr, rows = self.spec.num_entries, self.spec.max_rows
        j = np.arange(self.count, self.count + n, dtype=np.int64)
        filled = rows * nr
        out = np.where(j < filled, j // nr, 0)
        past = j > filled
        out[past] = (j[past] - filled - 1) % rows
        return out

    def build(self) -> BloomFilter:
        """The filter of the keys added so far."""
        spec = self.spec
        n_rows = len(self._flags)
        rows = np.packbits(self._flags, axis=1, bitorder="little")
        if spec.filter_type == SIMPLE:
            return BloomFilter(SIMPLE, self._nb_hash, self._vector, spec.hash_type, rows)
        if self.count:
            n_rows = max(n_rows, min(spec.max_rows, -(-self.count // spec.num_entries)))
        if n_rows > len(rows):
            rows = np.vstack([rows, np.zeros((n_rows - len(rows), rows.shape[1]), np.uint8)])
        current = self.count - (n_rows - 1) * spec.num_entries if self.count else 0
        return BloomFilter(
            DYNAMIC_V0,
            self._nb_hash,
            self._vector,
            spec.hash_type,
            rows,
            spec.num_entries,
            current,
        )


# -- footers ------------------------------------------------------------------------------------
def record_key_footer(
    keys: pa.Array | pa.ChunkedArray | None,
    spec: BloomFilterSpec | None,
    *,
    bloom: BloomFilter | None = None,
    min_key: str | None = None,
    max_key: str | None = None,
) -> dict[bytes, bytes]:
    """The footer entries Java's Parquet writers add for a base file holding record keys
    ``keys`` (in row order): the bloom filter (``spec``; none when None), its type code for the
    dynamic types, and the min / max record key. A streamed writer passes the ``bloom`` it
    built and the key range it tracked instead of ``keys``."""
    md: dict[bytes, bytes] = {}
    if keys is not None:
        if len(keys):
            mm = pc.min_max(keys)
            min_key, max_key = mm["min"].as_py(), mm["max"].as_py()
        if bloom is None and spec is not None:
            bloom = spec.build(keys)  # an empty file carries its (empty) filter too
    if min_key is not None and max_key is not None:
        md[MIN_RECORD_KEY_FOOTER_KEY.encode()] = str(min_key).encode()
        md[MAX_RECORD_KEY_FOOTER_KEY.encode()] = str(max_key).encode()
    if bloom is not None:
        md[BLOOM_FILTER_FOOTER_KEY.encode()] = bloom.serialize_to_string().encode()
        if "DYNAMIC" in bloom.filter_type:
            md[BLOOM_TYPE_CODE_FOOTER_KEY.encode()] = bloom.filter_type.encode()
    return md


def footer_bloom_filter(metadata: Mapping[bytes, bytes] | None) -> BloomFilter | None:
    """The bloom filter in a Parquet footer's key-value metadata (None without one), typed by
    ``hoodie_bloom_filter_type_code`` (``SIMPLE`` when absent, as Java reads it)."""
    if not metadata:
        return None
    text = metadata.get(BLOOM_FILTER_FOOTER_KEY.encode()) or metadata.get(
        LEGACY_BLOOM_FILTER_FOOTER_KEY.encode()
    )
    if text is None:
        return None
    code = metadata.get(BLOOM_TYPE_CODE_FOOTER_KEY.encode())
    return BloomFilter.from_serialized(text, code.decode() if code else SIMPLE)


# -- hashing ------------------------------------------------------------------------------------
def decode_filter(data: bytes | str) -> bytes:
    """A serialized filter's binary form (from Base64 text, or already binary)."""
    if isinstance(data, str):
        data = data.encode("ascii", "replace")
    raw = bytes(data)
    if raw[:4] == b"\xff\xff\xff\xff":
        return raw
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise HoodieCorruptedDataError("bloom filter is neither Base64 nor binary") from None


def key_buffers(keys: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(data, starts, lengths)`` of a key column over its Arrow buffers (no copy)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    elif not isinstance(keys, pa.Array):
        keys = pa.array(
            [k.encode() if isinstance(k, str) else k for k in keys], type=pa.large_binary()
        )
    t = keys.type
    if pa.types.is_dictionary(t):
        keys = keys.dictionary_decode()
        t = keys.type
    if not (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        raise HoodieInputError(f"bloom filter keys must be strings, got {t}")
    n = len(keys)
    if keys.null_count:
        at = int(np.flatnonzero(~np.asarray(pc.is_valid(keys)))[0])
        raise HoodieInputError(f"record key is null (row {at}): bloom filters hold no nulls")
    if n == 0:
        return np.zeros(1, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64)
    bufs = keys.buffers()
    dt = np.int64 if pa.types.is_large_string(t) or pa.types.is_large_binary(t) else np.int32
    offs = np.frombuffer(bufs[1], dtype=dt, count=keys.offset + n + 1)[keys.offset :]
    offs = offs.astype(np.int64)
    lens = np.diff(offs)
    if int(lens.min()) == 0:
        at = int(np.flatnonzero(lens == 0)[0])
        raise HoodieInputError(f"record key is empty (row {at}): bloom filters hold no empty keys")
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(1, np.uint8)
    return data, offs[:-1], lens


def set_bits(
    flags: np.ndarray,
    data: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    rows_of: np.ndarray | None,
    nb_hash: int,
    hash_type: int,
    *,
    compiled: bool | None = None,
) -> None:
    """Set the bits of keys ``data[starts[i] : starts[i] + lens[i]]`` (empty keys are hashed
    too; callers refuse them) in ``flags``, a C-contiguous ``(rows, vectorSize)`` bool array:
    key ``i`` in row ``rows_of[i]`` (row 0 when None). ``compiled`` forces the kernel (True)
    or the numpy twin (False); by default the kernel runs where numba is loaded or once this
    process has hashed :data:`JIT_MIN_KEYS` keys."""
    n = len(lens)
    if n == 0:
        return
    vector_size = flags.shape[1]
    if compiled is None:
        compiled = _use_kernel(n)
    if compiled:
        from hoodie_ray.index import _bloom_jit

        kernel = _bloom_jit.murmur_bits if hash_type == MURMUR_HASH else _bloom_jit.jenkins_bits
        rows = np.zeros(0, np.int64) if rows_of is None else np.ascontiguousarray(rows_of, np.int64)
        kernel(
            read_only(data),
            np.ascontiguousarray(starts, np.int64),
            np.ascontiguousarray(lens, np.int64),
            rows,
            nb_hash,
            vector_size,
            flags.reshape(-1).view(np.uint8),
        )
        return
    flat = flags.reshape(-1)
    for lo in range(0, n, _CHUNK):
        hi = min(lo + _CHUNK, n)
        pos = _positions(data, starts[lo:hi], lens[lo:hi], nb_hash, vector_size, hash_type)
        if rows_of is not None:
            pos += (rows_of[lo:hi] * vector_size)[:, None]
        flat[pos.ravel()] = True


def _use_kernel(n_keys: int) -> bool:
    global _twin_keys
    if "numba" not in sys.modules and _twin_keys + n_keys < JIT_MIN_KEYS:
        _twin_keys += n_keys
        return False
    from hoodie_ray import jit

    return jit.enabled()


def _positions(
    data: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    nb_hash: int,
    vector_size: int,
    hash_type: int,
) -> np.ndarray:
    """(keys, nbHash) bit positions, the keys of each length hashed together as a matrix."""
    n = len(lens)
    out = np.empty((n, nb_hash), dtype=np.int64)
    if n == 0:
        return out
    uniq = np.unique(lens)
    for length in uniq.tolist():
        idx = None if len(uniq) == 1 else np.flatnonzero(lens == length)
        s = starts if idx is None else starts[idx]
        if idx is None:  # one length: the keys lie back to back (Arrow offsets), no gather
            mat = data[int(s[0]) : int(s[0]) + n * length].reshape(n, length)
        else:
            mat = data[s[:, None] + np.arange(length, dtype=np.int64)]
        if hash_type == MURMUR_HASH:
            block = murmur_positions(mat, nb_hash, vector_size)
        else:
            block = np.empty((len(s), nb_hash), dtype=np.int64)
            seed = np.zeros(len(s), dtype=np.uint32)
            for h in range(nb_hash):
                seed = _jenkins(mat, seed)
                block[:, h] = _java_abs_mod(seed, vector_size)
        if idx is None:
            return block
        out[idx] = block
    return out


def _java_abs_mod(h: np.ndarray, vector_size: int) -> np.ndarray:
    """``Math.abs(h % vectorSize)`` over Java ints, ``h`` the uint32 bit patterns."""
    v = h.view(np.int32).astype(np.int64)
    np.abs(v, out=v)
    return np.remainder(v, vector_size, out=v)


def murmur_positions(mat: np.ndarray, nb_hash: int, vector_size: int) -> np.ndarray:
    """The ``nb_hash`` chained Hadoop ``MurmurHash.hash`` rounds of each row of ``mat`` (uint8,
    one key per row, seed 0 first) as bit positions. A word's mix (``k *= m; k ^= k >>> 24;
    k *= m``) does not depend on the seed: it is computed once for all rounds, as is the tail's
    contribution (its bytes sign-extended, as Java widens bytes)."""
    m, length = mat.shape
    n4 = length >> 2
    mixed = np.ascontiguousarray(mat[:, : 4 * n4]).view("<u4").T.copy()  # (n4, m)
    mixed *= _M
    mixed ^= mixed >> np.uint32(24)
    mixed *= _M
    left = length - 4 * n4
    tail = None
    if left:
        signed = mat[:, 4 * n4 :].view(np.int8).astype(np.int32).view(np.uint32)
        tail = np.zeros(m, dtype=np.uint32)
        if left >= 3:
            tail ^= signed[:, left - 3] << np.uint32(16)
        if left >= 2:
            tail ^= signed[:, left - 2] << np.uint32(8)
        tail ^= signed[:, left - 1]
    out = np.empty((nb_hash, m), dtype=np.int64)
    h = np.zeros(m, dtype=np.uint32)
    tmp = np.empty(m, dtype=np.uint32)
    n = np.uint32(length)
    for r in range(nb_hash):
        np.bitwise_xor(h, n, out=h)  # the previous round's hash is this round's seed
        for w in range(n4):
            np.multiply(h, _M, out=h)
            np.bitwise_xor(h, mixed[w], out=h)
        if tail is not None:
            np.bitwise_xor(h, tail, out=h)
            np.multiply(h, _M, out=h)
        np.right_shift(h, np.uint32(13), out=tmp)
        np.bitwise_xor(h, tmp, out=h)
        np.multiply(h, _M, out=h)
        np.right_shift(h, np.uint32(15), out=tmp)
        np.bitwise_xor(h, tmp, out=h)
        out[r] = _java_abs_mod(h, vector_size)
    return out.T


def murmur2_rows(mat: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """Hadoop's ``MurmurHash.hash`` of each row of ``mat`` (uint8, one key per row) with the
    given seeds, as uint32 bit patterns of the Java ints."""
    length = mat.shape[1]
    h = seed ^ np.uint32(length)
    n4 = length >> 2
    if n4:
        words = np.ascontiguousarray(mat[:, : 4 * n4]).view("<u4")
        for i in range(n4):
            k = words[:, i] * _M
            k ^= k >> np.uint32(24)
            k *= _M
            h = h * _M
            h ^= k
    left = length - 4 * n4
    if left:
        # h ^= data[len - 3] << 16; data[len - 2] << 8; data[len - 1], Java bytes sign-extended
        signed = mat[:, 4 * n4 :].view(np.int8).astype(np.int32).view(np.uint32)
        if left >= 3:
            h ^= signed[:, left - 3] << np.uint32(16)
        if left >= 2:
            h ^= signed[:, left - 2] << np.uint32(8)
        h ^= signed[:, left - 1]
        h = h * _M
    h ^= h >> np.uint32(13)
    h = h * _M
    h ^= h >> np.uint32(15)
    return h


def _rot(x: np.ndarray, k: int) -> np.ndarray:
    return (x << np.uint32(k)) | (x >> np.uint32(32 - k))


def _jenkins(mat: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """Hadoop's ``JenkinsHash.hash`` (lookup3 ``hashlittle``) of each row of ``mat`` with the
    given seeds, as uint32 bit patterns."""
    length = mat.shape[1]
    a = np.uint32((0xDEADBEEF + length) & _MASK) + seed
    b = a.copy()
    c = a.copy()
    m = mat.astype(np.uint32)

    def word(off: int, count: int) -> np.ndarray:
        w = np.zeros(len(mat), dtype=np.uint32)
        for i in range(count):
            w += m[:, off + i] << np.uint32(8 * i)
        return w

    off, rest = 0, length
    while rest > 12:
        a = a + word(off, 4)
        b = b + word(off + 4, 4)
        c = c + word(off + 8, 4)
        a = a - c
        a ^= _rot(c, 4)
        c = c + b
        b = b - a
        b ^= _rot(a, 6)
        a = a + c
        c = c - b
        c ^= _rot(b, 8)
        b = b + a
        a = a - c
        a ^= _rot(c, 16)
        c = c + b
        b = b - a
        b ^= _rot(a, 19)
        a = a + c
        c = c - b
        c ^= _rot(b, 4)
        b = b + a
        off += 12
        rest -= 12
    if rest == 0:
        return c
    a = a + word(off, min(rest, 4))
    if rest > 4:
        b = b + word(off + 4, min(rest - 4, 4))
    if rest > 8:
        c = c + word(off + 8, rest - 8)
    c ^= b
    c = c - _rot(b, 14)
    a ^= c
    a = a - _rot(c, 11)
    b ^= a
    b = b - _rot(a, 25)
    c ^= b
    c = c - _rot(b, 16)
    a ^= c
    a = a - _rot(c, 4)
    b ^= a
    b = b - _rot(a, 14)
    c ^= b
    c = c - _rot(b, 24)
    return c


def key_positions(key: bytes, nb_hash: int, vector_size: int, hash_type: int) -> np.ndarray:
    """The bit positions of one key (the matrix path over a single row)."""
    mat = np.frombuffer(key, np.uint8).reshape(1, -1)
    if hash_type == MURMUR_HASH:
        return murmur_positions(mat, nb_hash, vector_size)[0]
    out = np.empty(nb_hash, dtype=np.int64)
    seed = np.zeros(1, dtype=np.uint32)
    for h in range(nb_hash):
        seed = _jenkins(mat, seed)
        out[h] = _java_abs_mod(seed, vector_size)[0]
    return out


def java_hash(key: bytes, seed: int, hash_type: int = MURMUR_HASH) -> int:
    """Hadoop's ``Hash.hash(key, seed)`` of one key as a Java int (for tests and tools)."""
    mat = np.frombuffer(key, np.uint8).reshape(1, -1)
    s = np.array([seed & _MASK], dtype=np.uint32)
    h = murmur2_rows(mat, s) if hash_type == MURMUR_HASH else _jenkins(mat, s)
    return int(h.view(np.int32)[0])
