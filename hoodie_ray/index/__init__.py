"""Record-key indexes: the key index of the bucket assigners, and the bucket index.

:class:`KeyIndex` maps record keys to locations (partition path, file id) with vectorised
lookups. Keys are never turned into Python objects: each key's bytes are hashed to 64 bits
column-wise (numpy over the Arrow buffers, or a numba kernel), the hashes sit in frozen
segments with an open-addressing table over them (numba; a ``pandas.Index`` where numba is
off), and every hit is verified against a second, independent 64-bit hash of the key (its
fingerprint): a wrong location would need two keys equal in 128 hash bits. The key bytes are
not kept, which holds an index at ~20-30 bytes per key. A batch of 100K keys costs one table
probe per key in compiled code.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.index.key_hash import FNV_OFFSET, FNV_PRIME, GOLDEN, finish_key_hash
from hoodie_ray.jit import read_only
from hoodie_ray.keygen import EMPTY_RECORDKEY_PLACEHOLDER, NULL_RECORDKEY_PLACEHOLDER


@dataclass(frozen=True)
class Location:
    partition_path: str
    file_id: str


def _as_large_string(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Keys as one ``large_string`` array (offsets never overflow, one type to compare)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    if not pa.types.is_large_string(keys.type):
        keys = keys.cast(pa.large_string())
    return keys


# the fingerprint: the same hash from another offset basis and length multiplier
_FP_OFFSET = np.uint64(0x84222325CBF29CE4)
_FP_GOLDEN = np.uint64(0xD6E8FEB86659FD93)


def hash_keys(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """64-bit hashes of string keys (FNV-1a over the bytes, then a splitmix64 finaliser);
    see :func:`_fnv_hash`. Deterministic across processes; nulls hash like empty strings."""
    return _fnv_hash(keys, FNV_OFFSET, GOLDEN)


def fingerprint_keys(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A second 64-bit hash of string keys, independent of :func:`hash_keys` (another FNV
    offset basis and length multiplier, so the finaliser decorrelates them): what the key
    index keeps of a key to verify a hit."""
    return _fnv_hash(keys, _FP_OFFSET, _FP_GOLDEN)


def _fnv_hash(keys: pa.Array | pa.ChunkedArray, offset: np.uint64, golden: np.uint64) -> np.ndarray:
    """64-bit hashes of string keys (FNV-1a over the bytes, then a splitmix64 finaliser).

    Column-wise: one numpy step per byte position, over the keys at least that long, so the
    cost is proportional to the total key bytes; a compiled kernel (``index/_jit.py``) gives
    the same hashes about 4x faster in processes that have loaded numba for the Avro codec.
    Deterministic across processes.
    Nulls hash like empty strings.
    """
    data, starts, lens = key_bytes(keys)
    n = len(lens)
    if n >= _JIT_MIN_KEYS and _jit_loaded():
        from hoodie_ray.index import _jit

        out = np.empty(n, dtype=np.uint64)
        _jit.fnv_splitmix(
            read_only(data if data is not None else np.zeros(1, np.uint8)),
            starts,
            lens,
            offset,
            golden,
            out,
        )
        return out
    h = np.full(n, offset, dtype=np.uint64)
    if n == 0:
        return h
    maxlen = int(lens.max()) if data is not None else 0
    with np.errstate(over="ignore"):
        if maxlen and int(lens.min()) == maxlen:
            for j in range(maxlen):
                h ^= data[starts + j]  # type: ignore[index]
                h *= FNV_PRIME
        elif maxlen:
            # rows by decreasing length: at byte j the rows still going are a prefix
            # (a 16-bit sort key makes numpy's stable sort a radix sort)
            sort_key = maxlen - lens
            if maxlen < 1 << 16:
                sort_key = sort_key.astype(np.uint16)
            order = np.argsort(sort_key, kind="stable")
            sorted_lens = lens[order]
            neg = -sorted_lens
            s_starts = starts[order]
            hs = h[order]
            for j in range(maxlen):
                k = int(np.searchsorted(neg, -j, side="left"))  # rows with len > j
                if k == n:
                    hs ^= data[s_starts + j]  # type: ignore[index]
                    hs *= FNV_PRIME
                else:
                    part = hs[:k]
                    part ^= data[s_starts[:k] + j]  # type: ignore[index]
                    part *= FNV_PRIME
            h[order] = hs
        finish_key_hash(h, lens.astype(np.uint64) * golden)
    return h


#: Fewer keys than this are hashed by numpy (a compiled call has a fixed cost).
_JIT_MIN_KEYS = 64


def _jit_loaded() -> bool:
    # Only in a process that has loaded numba already (for the Avro codec): loading it costs
    # ~140 MB of resident memory, too much for a 4x faster hash alone (a few % of ingest).
    from hoodie_ray import jit

    return jit.loaded()


def key_bytes(
    keys: pa.Array | pa.ChunkedArray,
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """``(data, starts, lengths)`` of string keys over their Arrow buffers (no copy of the
    bytes; a null key has length 0; ``data`` is None when no key has a byte)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
        keys = _as_large_string(keys)
    n = len(keys)
    if n == 0:
        return None, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    bufs = keys.buffers()
    dt = np.int64 if pa.types.is_large_string(keys.type) else np.int32
    offs = np.frombuffer(bufs[1], dtype=dt, count=keys.offset + n + 1)[keys.offset :]
    offs = offs.astype(np.int64)
    lens = np.diff(offs)
    if keys.null_count:
        lens = np.where(np.asarray(pc.is_valid(keys)), lens, 0)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else None
    return data, offs[:-1], lens


def group_keys(
    keys: pa.Array | pa.ChunkedArray, *, hashes: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """``(group id of each key, number of groups)``: equal keys share an id (ids are dense,
    in no particular order).

    Hashes the key bytes (:func:`hash_keys`) and factorizes the 64-bit hashes, then checks that
    every key equals its group's first key; on a hash collision it falls back to Arrow's exact
    dictionary encoding. About twice as fast as ``dictionary_encode`` on 500K string keys.
    ``hashes``: :func:`hash_keys` of ``keys`` when the caller has them already.
    """
    arr = _as_large_string(keys)
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    codes, uniq = pd.factorize(hash_keys(arr) if hashes is None else hashes)
    codes = codes.astype(np.int64, copy=False)
    ngroups = len(uniq)
    if ngroups < n:
        first = np.empty(ngroups, dtype=np.int64)
        first[codes[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
        rep = first[codes]
        differs = np.flatnonzero(rep != np.arange(n))
        if len(differs):
            same = pc.equal(arr.take(pa.array(differs)), arr.take(pa.array(rep[differs])))
            if not pc.all(same).as_py():  # a hash collision: group by the exact bytes
                enc = pc.dictionary_encode(arr)
                idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
                return idx, len(enc.dictionary)
    return codes, ngroups


#: "No ordering value known" in an index's ordering store (int64 stores; float64 ones use NaN).
ORDERING_NULL_INT = np.iinfo(np.int64).min


def ordering_numbers(values: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """Ordering values as numpy values that compare like them: int64 for integers, booleans,
    dates, times, timestamps and durations (exact), float64 for floating point and decimals,
    objects (``str`` / ``bytes``, None for null) for strings and binaries; nulls as
    :data:`ORDERING_NULL_INT` / NaN in the numeric stores. None for other types (nested): the
    index then keeps no ordering values."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.cast(t.value_type)
        t = arr.type
    if (
        pa.types.is_signed_integer(t)
        or pa.types.is_boolean(t)
        or (pa.types.is_unsigned_integer(t) and t.bit_width < 64)
        or pa.types.is_temporal(t)
    ):
        if pa.types.is_date64(t) or pa.types.is_date32(t) or pa.types.is_time(t):
            arr = arr.view(pa.int64() if t.bit_width == 64 else pa.int32())
        elif pa.types.is_timestamp(t) or pa.types.is_duration(t):
            arr = arr.view(pa.int64())
        if arr.type == pa.int64() and not arr.null_count:
            return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)  # no copy
        ints = pc.fill_null(arr.cast(pa.int64()), ORDERING_NULL_INT)
        return np.asarray(ints.to_numpy(zero_copy_only=False), dtype=np.int64)
    if pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_unsigned_integer(t):
        floats = arr.cast(pa.float64(), safe=False)
        return np.asarray(floats.to_numpy(zero_copy_only=False), dtype=np.float64)
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        # Python objects, built in C by Arrow; only tables ordered by a string field pay this
        return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)
    return None


def ordering_nulls(values: np.ndarray) -> np.ndarray:
    """Which entries of an ordering store (or of :func:`ordering_numbers`) are unknown."""
    if values.dtype == np.float64:
        return np.isnan(values)
    if values.dtype.kind == "O":
        return np.asarray(pd.isna(values), dtype=bool)
    return values == ORDERING_NULL_INT


def ordering_at_least(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """Event time's rule (``merge.newer_wins``): the new value wins when it is ``>=`` the old
    one, or when either is unknown (or the two cannot be compared)."""
    unknown = ordering_nulls(new) | ordering_nulls(old)
    if new.dtype.kind == "O" or old.dtype.kind == "O":
        out = unknown.copy()
        known = np.flatnonzero(~unknown)
        if len(known):
            try:
                out[known] = np.asarray(new[known] >= old[known], dtype=bool)
            except TypeError:  # values of different classes: the arrival wins
                out[known] = True
        return out
    if new.dtype != old.dtype:
        new, old = _as_float_ordering(new), _as_float_ordering(old)
    with np.errstate(invalid="ignore"):
        return unknown | (new >= old)


def unknown_ordering(n: int, dtype: np.dtype) -> np.ndarray:
    """``n`` unknown ordering values of a store of ``dtype``."""
    if dtype == np.float64:
        return np.full(n, np.nan, dtype=np.float64)
    if dtype.kind == "O":
        return np.full(n, None, dtype=object)
    return np.full(n, ORDERING_NULL_INT, dtype=np.int64)


def _as_float_ordering(values: np.ndarray) -> np.ndarray:
    if values.dtype == np.float64:
        return values
    out = values.astype(np.float64)
    out[values == ORDERING_NULL_INT] = np.nan
    return out


def _as_object_ordering(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "O":
        return values
    out = values.astype(object)
    out[ordering_nulls(values)] = None
    return out


#: Largest share of a table's slots in use (a table has a power-of-two number of slots).
_TABLE_LOAD = 0.7


class _HashTable:
    """Positions of distinct 64-bit hashes: an open-addressing table of int32 slots (numba,
    4-11 bytes per hash) where numba is loaded (:func:`warm_up`), else a ``pandas.Index``
    (about 30 bytes per hash)."""

    def __init__(self, hashes: np.ndarray, slots: np.ndarray | None) -> None:
        self.hashes = hashes
        self._slots = slots
        self._pd: pd.Index | None = None if slots is not None else pd.Index(hashes)

    @classmethod
    def build(cls, hashes: np.ndarray) -> tuple[_HashTable, np.ndarray | None]:
        """A table over the first occurrence of each hash, and the mask of the later
        occurrences left out (None when every hash is distinct)."""
        n = len(hashes)
        if _jit_loaded():
            from hoodie_ray.index import _jit

            cap = 1 << max(3, int(np.ceil(np.log2(max(n, 1) / _TABLE_LOAD))))
            slots = np.full(cap, -1, dtype=np.int32)
            dup = np.zeros(n, dtype=bool)
            if _jit.table_build(hashes, slots, dup) == 0:
                return cls(hashes, slots), None
            return cls.build(hashes[~dup])[0], dup
        idx = pd.Index(hashes)
        if idx.is_unique:
            return cls(hashes, None), None
        dup = np.asarray(idx.duplicated(keep="first"))
        return cls(hashes[~dup], None), dup

    def find(self, probe: np.ndarray) -> np.ndarray:
        """Position of each probed hash, -1 where absent."""
        if self._slots is None:
            assert self._pd is not None
            return self._pd.get_indexer(probe)
        from hoodie_ray.index import _jit

        out = np.empty(len(probe), dtype=np.int64)
        _jit.table_find(self._slots, self.hashes, probe, out)
        return out

    @property
    def nbytes(self) -> int:
        """The hashes and the table over them."""
        if self._slots is None:
            assert self._pd is not None
            return int(self._pd.memory_usage())
        return self.hashes.nbytes + self._slots.nbytes


_warmed = False
#: ``0``: actors skip :func:`warm_up` (numba then loads where an input first needs a kernel).
WARM_UP_ENV = "HOODIE_RAY_WARM_UP"


def warm_up() -> None:
    """Load numba and the compiled kernels of the key index now (a few hundred ms), so that
    this process's indexes use the compact compiled tables and an actor pays the load at
    start, not in its first batch. Elsewhere an index uses them only where numba is loaded
    already (it costs ~140 MB resident)."""
    from hoodie_ray import jit

    global _warmed
    if os.environ.get(WARM_UP_ENV, "1") == "0":
        return  # kernels load on first use where an input is large enough for them
    if _warmed or not jit.enabled():  # imports numba unless it is switched off or missing
        return
    _warmed = True
    idx = KeyIndex()
    keys = pa.array([f"warm{i}" for i in range(2 * _JIT_MIN_KEYS)])
    idx.put(keys, np.zeros(len(keys), dtype=np.int32))
    idx.lookup(keys)
    # the bloom filter kernel of the base files a writer creates (~80 ms to load from cache)
    from hoodie_ray.index.bloom_filter import MURMUR_HASH, set_bits

    one = np.frombuffer(b"warm", dtype=np.uint8)
    starts, lens = np.zeros(1, np.int64), np.full(1, 4, np.int64)
    set_bits(np.zeros((1, 64), dtype=bool), one, starts, lens, None, 3, MURMUR_HASH, compiled=True)


@dataclass
class _Segment:
    """Distinct keys with unique hashes: their hash table, fingerprints and location ids
    (aligned), and each key's last ordering value when the index keeps them."""

    table: _HashTable  # over the uint64 hashes, unique
    fps: np.ndarray  # uint64 fingerprints (fingerprint_keys)
    locs: np.ndarray  # int32; -1 = tombstone
    ords: np.ndarray | None = None  # int64 or float64 (see ordering_numbers)


class KeyIndex:
    """record key -> location id; locations are interned ``(partition, file id)`` pairs.

    Keys live in a few immutable hash segments; a location change or a delete rewrites the
    segment's location array in place (-1 is a tombstone), new keys form a new segment, and
    segments are merged when there are too many. A key is in at most one segment. Every
    operation is vectorised; a lookup hit counts only when the stored fingerprint equals the
    probe's (two keys with one hash live in different segments).
    """

    MAX_SEGMENTS = 8
    TIER = 4

    def __init__(self) -> None:
        self._segments: list[_Segment] = []
        # dtype of the ordering store once a put brought ordering values (None: not kept)
        self._ord_dtype: np.dtype | None = None
        self.locations: list[Location] = []
        self._loc_ids: dict[Location, int] = {}
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._columns: tuple[pa.Array, pa.Array] | None = None

    def __len__(self) -> int:
        return int(sum((s.locs >= 0).sum() for s in self._segments))

    def nbytes(self) -> int:
        """Memory the per-key state holds, in bytes: each segment's hashes with the table over
        them, fingerprints, location ids and ordering values (strings counted with their
        Python objects). Tombstoned keys count until a merge drops them; the interned
        locations (one per file group) do not count."""
        total = 0
        for s in self._segments:
            total += s.table.nbytes + s.fps.nbytes + s.locs.nbytes
            if s.ords is not None:
                if s.ords.dtype.kind == "O":
                    total += int(pd.Series(s.ords, copy=False).memory_usage(index=False, deep=True))
                else:
                    total += s.ords.nbytes
        return total

    def location_id(self, partition_path: str, file_id: str) -> int:
        loc = Location(partition_path, file_id)
        lid = self._loc_ids.get(loc)
        if lid is None:
            lid = len(self.locations)
            self.locations.append(loc)
            self._loc_ids[loc] = lid
        return lid

    def location_ids(self, partitions: np.ndarray, file_ids: np.ndarray) -> np.ndarray:
        """Location ids of many (partition, file id) pairs; one dict probe per distinct pair."""
        pairs = pc.binary_join_element_wise(
            pa.array(partitions, pa.string()), pa.array(file_ids, pa.string()), "\x00"
        )
        enc = pc.dictionary_encode(pairs)
        ids = np.array(
            [self.location_id(*pair.split("\x00", 1)) for pair in enc.dictionary.to_pylist()],
            dtype=np.int32,
        )
        return ids[enc.indices.to_numpy(zero_copy_only=False)]

    def location_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(partition paths, file ids)`` as object arrays indexed by location id."""
        n = len(self.locations)
        if self._arrays is None or len(self._arrays[0]) != n:
            self._arrays = (
                np.array([loc.partition_path for loc in self.locations], dtype=object),
                np.array([loc.file_id for loc in self.locations], dtype=object),
            )
        return self._arrays

    def location_columns(self) -> tuple[pa.Array, pa.Array]:
        """``(partition paths, file ids)`` as Arrow string arrays indexed by location id."""
        n = len(self.locations)
        if self._columns is None or len(self._columns[0]) != n:
            self._columns = (
                pa.array([loc.partition_path for loc in self.locations], pa.string()),
                pa.array([loc.file_id for loc in self.locations], pa.string()),
            )
        return self._columns

    def _probe(
        self, fps: np.ndarray, hashes: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(location id or -1, segment number or -1, position in segment) of each key, given
        its hash and fingerprint."""
        n = len(hashes)
        out = np.full(n, -1, dtype=np.int32)
        seg_of = np.full(n, -1, dtype=np.int32)
        pos_of = np.full(n, -1, dtype=np.int64)
        todo: np.ndarray | None = None  # None: every row
        for si in range(len(self._segments) - 1, -1, -1):
            seg = self._segments[si]
            if todo is None:
                pos = seg.table.find(hashes)
                hit = np.flatnonzero(pos >= 0)
                rows, p = hit, pos[hit]
            else:
                if not len(todo):
                    break
                pos = seg.table.find(hashes[todo])
                hit = np.flatnonzero(pos >= 0)
                rows, p = todo[hit], pos[hit]
            if len(rows):
                same_np = seg.fps[p] == fps[rows]
                if not same_np.all():  # a hash collision: not this key
                    rows, p = rows[same_np], p[same_np]
                seg_of[rows], pos_of[rows] = si, p
                out[rows] = seg.locs[p]
            todo = np.flatnonzero(seg_of < 0)
        return out, seg_of, pos_of

    def lookup(
        self, keys: pa.Array | pa.ChunkedArray, *, hashes: np.ndarray | None = None
    ) -> np.ndarray:
        """Location id of each key, or -1 when the key is not indexed (or deleted).

        ``hashes``: :func:`hash_keys` of ``keys`` when the caller has them already.
        """
        return self.probe(keys, hashes=hashes)[0]

    def probe(
        self,
        keys: pa.Array | pa.ChunkedArray,
        *,
        hashes: np.ndarray | None = None,
        fingerprints: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`lookup` plus where each key sits: ``(location id or -1, segment or -1,
        position in segment)``. The last two can be handed to :meth:`put` (``probed=``) for
        the same keys, as long as the index is not changed in between. ``hashes`` /
        ``fingerprints``: :func:`hash_keys` / :func:`fingerprint_keys` of ``keys`` when the
        caller has them already."""
        arr = _as_large_string(keys)
        n = len(arr)
        if not self._segments:
            return (
                np.full(n, -1, dtype=np.int32),
                np.full(n, -1, dtype=np.int32),
                np.full(n, -1, dtype=np.int64),
            )
        fps = fingerprint_keys(arr) if fingerprints is None else fingerprints
        return self._probe(fps, hash_keys(arr) if hashes is None else hashes)

    @property
    def keeps_ordering(self) -> bool:
        """True once ordering values were put: every key then has one (or 'unknown')."""
        return self._ord_dtype is not None

    def _ordering_store(self, ords: np.ndarray | None, n: int) -> np.ndarray | None:
        """``ords`` in the store's dtype (starting or widening the store as needed)."""
        if ords is None:
            return None if self._ord_dtype is None else unknown_ordering(n, self._ord_dtype)
        if self._ord_dtype is None:
            self._ord_dtype = ords.dtype
            for s in self._segments:
                s.ords = unknown_ordering(len(s.locs), ords.dtype)
        elif ords.dtype != self._ord_dtype:
            # integers met floats (a widened column): floats from now on; anything else
            # (never for one column type) falls back to objects
            numeric = ords.dtype.kind != "O" and self._ord_dtype.kind != "O"
            widen = _as_float_ordering if numeric else _as_object_ordering
            self._ord_dtype = np.dtype(np.float64) if numeric else np.dtype(object)
            for s in self._segments:
                if s.ords is not None:
                    s.ords = widen(s.ords)
            ords = widen(ords)
        return ords

    def ordering_at(self, seg_of: np.ndarray, pos_of: np.ndarray) -> np.ndarray:
        """The stored ordering value of each probed key (``(segment, position)`` from
        :meth:`probe`); unknown where the key is not indexed or the index keeps none."""
        dtype = self._ord_dtype if self._ord_dtype is not None else np.dtype(np.int64)
        out = unknown_ordering(len(seg_of), dtype)
        if self._ord_dtype is None:
            return out
        for si in np.unique(seg_of[seg_of >= 0]):
            sel = seg_of == si
            ords = self._segments[si].ords
            if ords is not None:
                out[sel] = ords[pos_of[sel]]
        return out

    def set_ordering(self, seg_of: np.ndarray, pos_of: np.ndarray, values: np.ndarray) -> None:
        """Overwrite the ordering values of probed keys in place (``seg_of < 0`` rows are
        skipped); the locations stay."""
        values = self._ordering_store(values, len(values))  # type: ignore[assignment]
        for si in np.unique(seg_of[seg_of >= 0]):
            sel = seg_of == si
            ords = self._segments[si].ords
            if ords is not None:
                ords[pos_of[sel]] = values[sel]

    def put(
        self,
        keys: pa.Array | pa.ChunkedArray,
        loc_ids: np.ndarray,
        *,
        hashes: np.ndarray | None = None,
        unique: bool = False,
        probed: tuple[np.ndarray, np.ndarray] | None = None,
        ords: np.ndarray | None = None,
        fingerprints: np.ndarray | None = None,
    ) -> None:
        """Set the location of keys (``-1`` removes them). Later duplicates win.

        ``hashes`` / ``fingerprints``: :func:`hash_keys` / :func:`fingerprint_keys` of
        ``keys`` when the caller has them already;
        ``unique``: the caller guarantees the keys are distinct; ``probed``: ``(segment,
        position)`` of each key from :meth:`probe` (the index unchanged since); ``ords``: the
        keys' ordering values (:func:`ordering_numbers`) to keep with them.
        """
        arr = _as_large_string(keys)
        if not len(arr):
            return
        loc_ids = np.asarray(loc_ids, dtype=np.int32)
        ords = self._ordering_store(ords, len(arr))
        hashes = hash_keys(arr) if hashes is None else hashes
        fps = fingerprint_keys(arr) if fingerprints is None else fingerprints
        if not unique and _HashTable.build(hashes)[1] is not None:
            # Keep the last occurrence of each key (group_keys tells keys sharing a hash
            # apart; the scatter keeps each group's last row)
            gid, ngroups = group_keys(arr, hashes=hashes)
            last = np.empty(ngroups, dtype=np.int64)
            last[gid] = np.arange(len(arr), dtype=np.int64)
            keep = np.sort(last)
            hashes, fps, loc_ids = hashes[keep], fps[keep], loc_ids[keep]
            if ords is not None:
                ords = ords[keep]
            if probed is not None:
                probed = (probed[0][keep], probed[1][keep])
        if self._segments:
            if probed is not None:
                seg_of, pos_of = probed
            else:
                _, seg_of, pos_of = self._probe(fps, hashes)
            found = seg_of >= 0
            for si in np.unique(seg_of[found]):
                sel = seg_of == si
                seg = self._segments[si]
                seg.locs[pos_of[sel]] = loc_ids[sel]
                if ords is not None and seg.ords is not None:
                    seg.ords[pos_of[sel]] = ords[sel]
            new = ~found & (loc_ids >= 0)
        else:
            new = loc_ids >= 0
        if new.any():
            if new.all():
                self._add(hashes, fps, loc_ids.copy(), None if ords is None else ords.copy())
            else:
                self._add(hashes[new], fps[new], loc_ids[new], None if ords is None else ords[new])
            self._compact_segments()

    def _add(
        self, hashes: np.ndarray, fps: np.ndarray, locs: np.ndarray, ords: np.ndarray | None
    ) -> None:
        """Append segments for distinct new keys (keys sharing a hash go to separate ones)."""
        while len(hashes):
            table, dup = _HashTable.build(hashes)
            if dup is None:
                self._segments.append(_Segment(table, fps, locs, ords))
                return
            first = ~dup
            self._segments.append(
                _Segment(table, fps[first], locs[first], None if ords is None else ords[first])
            )
            hashes, fps, locs = hashes[dup], fps[dup], locs[dup]
            ords = None if ords is None else ords[dup]

    def _compact_segments(self) -> None:
        """Size-tiered merging: the newest segment is merged into the one before it while that
        one is at most :data:`TIER` times larger, so sizes grow geometrically and every key is
        rehashed O(log n) times in all (merging everything every few batches would rehash the
        whole index each time); past :data:`MAX_SEGMENTS` everything is merged."""
        while len(self._segments) > 1:
            last, prev = self._segments[-1], self._segments[-2]
            if len(prev.locs) > self.TIER * len(last.locs):
                break
            before = len(self._segments)
            self._merge(2)
            if len(self._segments) >= before:  # keys sharing a hash stay apart: stop
                break
        if len(self._segments) > self.MAX_SEGMENTS:
            self._merge()

    def remove(self, keys: pa.Array | pa.ChunkedArray) -> None:
        self.put(keys, np.full(len(keys), -1, dtype=np.int32))

    def _merge(self, tail: int | None = None) -> None:
        """Merge the newest ``tail`` segments (all by default) into one, dropping tombstones."""
        k = len(self._segments) if tail is None else min(tail, len(self._segments))
        merging = self._segments[len(self._segments) - k :]
        hashes, fps, locs, ords = [], [], [], []
        for s in merging:
            live = s.locs >= 0
            if live.all():
                hashes.append(s.table.hashes)
                fps.append(s.fps)
                locs.append(s.locs)
                if s.ords is not None:
                    ords.append(s.ords)
            elif live.any():
                hashes.append(s.table.hashes[live])
                fps.append(s.fps[live])
                locs.append(s.locs[live])
                if s.ords is not None:
                    ords.append(s.ords[live])
        self._segments = self._segments[: len(self._segments) - k]
        if hashes:
            self._add(
                np.concatenate(hashes),
                np.concatenate(fps),
                np.concatenate(locs),
                np.concatenate(ords) if self._ord_dtype is not None else None,
            )

    def remap_locations(self, mapping: np.ndarray) -> None:
        """Replace every live location id ``l`` by ``mapping[l]`` (for callers that use the
        ids as row numbers and renumber their rows)."""
        for s in self._segments:
            live = s.locs >= 0
            s.locs[live] = mapping[s.locs[live]]

    def remove_file_group(self, partition_path: str, file_id: str) -> None:
        """Forget every key of one file group (after a rollback removed the group)."""
        lid = self._loc_ids.get(Location(partition_path, file_id))
        if lid is None:
            return
        for s in self._segments:
            s.locs[s.locs == lid] = -1


# -- bucket index -----------------------------------------------------------------------------

_POW31 = None


def java_string_hash(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Java ``String.hashCode`` of every string (int32), vectorised for ASCII strings."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = values.cast(pa.string())
    n = len(values)
    if n == 0:
        return np.empty(0, dtype=np.int32)
    offsets = np.frombuffer(
        values.buffers()[1], dtype=np.int32, count=n + 1, offset=values.offset * 4
    )
    data = values.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    start, end = int(offsets[0]), int(offsets[-1])
    chars = raw[start:end].astype(np.uint64)
    lengths = np.diff(offsets).astype(np.int64)
    out = np.zeros(n, dtype=np.uint64)
    if len(chars):
        # weight of each byte: 31^(distance to the end of its string) mod 2^32
        row = np.repeat(np.arange(n), lengths)
        pos_in_row = np.arange(len(chars)) - np.repeat(offsets[:-1] - start, lengths)
        dist = np.repeat(lengths, lengths) - 1 - pos_in_row
        maxlen = int(lengths.max())
        pw = np.ones(maxlen, dtype=np.uint64)
        for i in range(1, maxlen):
            pw[i] = (pw[i - 1] * np.uint64(31)) & np.uint64(0xFFFFFFFF)
        terms = (chars * pw[dist]) & np.uint64(0xFFFFFFFF)
        np.add.at(out, row, terms)
        out &= np.uint64(0xFFFFFFFF)
    result = out.astype(np.uint32).view(np.int32).copy()
    non_ascii = pc.invert(pc.string_is_ascii(values)).to_numpy(zero_copy_only=False)
    if non_ascii.any():
        for i in np.flatnonzero(non_ascii).tolist():
            s = values[i].as_py()
            h = 0
            for unit in np.frombuffer(s.encode("utf-16-be"), dtype=">u2"):
                h = (31 * h + int(unit)) & 0xFFFFFFFF
            result[i] = np.uint32(h).view(np.int32)
    return result


def bucket_ids(
    keys: pa.Array | pa.ChunkedArray,
    num_buckets: int,
    key_fields: Sequence[str] | None = None,
) -> np.ndarray:
    """Hudi's BucketIdentifier: ``(hashKeys.hashCode() & Integer.MAX_VALUE) % numBuckets``.

    ``hashKeys`` is ``KeyGenUtils.extractRecordKeysByFields(key, key_fields)`` (Hudi 1.x): a
    key without both ``,`` and ``:`` is the one value; otherwise the key is read as
    ``field:value`` pairs, and the values of the pairs whose field is one of ``key_fields``
    (every pair where ``key_fields`` is empty or None) are the list, in key order, ``__null__``
    as a null and ``__empty__`` as an empty string (both hash 0); no such pair: the key itself.
    A value runs from its field's first ``:`` to the last ``,`` before the first ``:`` that
    follows a ``,`` (so values may hold ``,`` and ``:``), else to the end of the key. A
    ``java.util.List`` hashes to ``31^n + sum(h_i * 31^(n-1-i))``, mod 2^32.

    Keys whose ``,``-separated pieces all hold a ``:`` (every key of the complex key
    generator whose values hold no ``,``) are read column-wise; others one by one
    (:func:`_hash_key_values`).
    """
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    keys = keys.cast(pa.string())
    fields = [f for f in key_fields or () if f]
    list_hash = (31 + java_string_hash(keys).astype(np.int64)) & 0xFFFFFFFF
    complex_key = pc.and_(pc.match_substring(keys, ","), pc.match_substring(keys, ":"))
    rows = np.flatnonzero(complex_key.fill_null(False).to_numpy(zero_copy_only=False))
    if len(rows):
        ckeys = keys.take(pa.array(rows))
        parts = pc.split_pattern(ckeys, ",")
        counts = pc.list_value_length(parts).to_numpy(zero_copy_only=False).astype(np.int64)
        row_of = np.repeat(np.arange(len(rows)), counts)
        pieces = pc.list_flatten(parts)
        no_colon = pc.invert(pc.match_substring(pieces, ":")).to_numpy(zero_copy_only=False)
        slow = np.bincount(row_of[no_colon], minlength=len(rows)) > 0
        fast_piece = ~slow[row_of]
        pairs = pc.split_pattern(pieces.filter(pa.array(fast_piece)), ":", max_splits=1)
        values = pc.list_element(pairs, 1)
        if fields:
            keep = pc.is_in(pc.list_element(pairs, 0), value_set=pa.array(fields))
            keep_np = keep.to_numpy(zero_copy_only=False)
            values = values.filter(keep)
        else:
            keep_np = np.ones(len(values), dtype=bool)
        kept = np.bincount(row_of[fast_piece][keep_np], minlength=len(rows))
        hit = kept > 0  # no pair of a key field: the key itself, as hashed above
        list_hash[rows[hit]] = _list_hashes(values, kept[hit])
        if slow.any():
            slow_rows = rows[slow]
            list_hash[slow_rows] = _hash_key_values(keys.take(pa.array(slow_rows)), fields)
    return ((list_hash & 0x7FFFFFFF) % num_buckets).astype(np.int32)


def _hash_key_values(keys: pa.Array, fields: list[str]) -> np.ndarray:
    """``List.hashCode`` of each key's ``extractRecordKeysByFields`` (see :func:`bucket_ids`),
    read one key at a time: the keys whose values hold a ``,``, and keys of other shapes."""
    flat: list[str | None] = []
    counts = np.zeros(len(keys), dtype=np.int64)
    for i, key in enumerate(keys.to_pylist()):
        values = _key_values(key or "", fields)
        counts[i] = len(values)
        flat.extend(values)
    out = (31 + java_string_hash(keys).astype(np.int64)) & 0xFFFFFFFF
    hit = counts > 0
    out[hit] = _list_hashes(pa.array(flat, pa.string()), counts[hit])
    return out


def _key_values(key: str, fields: list[str]) -> list[str | None]:
    """The values of ``key``'s ``field:value`` pairs whose field is in ``fields`` (all where
    empty), as ``KeyGenUtils.extractRecordKeysByFields`` reads them (see :func:`bucket_ids`).
    Where Java's scan past a skipped field finds no further pair (the key's last field, not in
    ``fields``, holding a second ``:``) Java never returns; here the scan ends."""
    values: list[str | None] = []
    pos, end = 0, len(key)
    while pos < end:
        colon = key.find(":", pos)
        if colon < 0:  # not reached: a pair always follows the ',' a value ends at
            break
        comma = key.find(",", colon + 1)
        next_colon = key.find(":", comma + 1) if comma >= 0 else -1
        stop = key.rfind(",", 0, next_colon) if next_colon >= 0 else end
        if not fields or key[pos:colon] in fields:
            value = key[colon + 1 : stop]
            if value == NULL_RECORDKEY_PLACEHOLDER:
                values.append(None)
            else:
                values.append("" if value == EMPTY_RECORDKEY_PLACEHOLDER else value)
        pos = stop + 1
    return values


def _list_hashes(values: pa.Array, counts: np.ndarray) -> np.ndarray:
    """``List.hashCode`` of consecutive runs of ``values`` (``counts[i]`` values each, every
    count > 0), as uint32 in an int64 array. A null, ``__null__`` and ``__empty__`` hash 0
    (Java's null and empty string)."""
    placeholder = pc.is_in(
        values, value_set=pa.array([NULL_RECORDKEY_PLACEHOLDER, EMPTY_RECORDKEY_PLACEHOLDER])
    )
    zero = pc.or_kleene(placeholder, pc.is_null(values)).to_numpy(zero_copy_only=False)
    h = java_string_hash(values.fill_null("")).astype(np.uint32).astype(np.uint64)
    h[zero] = 0
    # the i-th of n values weighs 31^(n-1-i); the list adds 31^n
    n = np.repeat(counts, counts)
    i = np.arange(len(h)) - np.repeat(np.cumsum(counts) - counts, counts)
    top = int(counts.max()) + 1 if len(counts) else 1
    pw = np.ones(top, dtype=np.uint64)
    for j in range(1, top):
        pw[j] = (pw[j - 1] * np.uint64(31)) & np.uint64(0xFFFFFFFF)
    terms = (h * pw[n - 1 - i]) & np.uint64(0xFFFFFFFF)
    out = pw[counts].copy()
    np.add.at(out, np.repeat(np.arange(len(counts)), counts), terms)
    return (out & np.uint64(0xFFFFFFFF)).astype(np.int64)


def bucket_file_id_prefix(bucket: int) -> str:
    """File ids of the bucket index start with the zero-padded bucket number."""
    return f"{bucket:08d}"
