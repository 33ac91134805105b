"""Record-key indexes: the key index of the bucket assigners, and the bucket index.

:class:`KeyIndex` maps record keys to locations (partition path, file id) with vectorised
lookups: a frozen ``pandas.Index`` (a C hash table) for the bulk of the keys plus a small delta
that is merged in when it grows, so a batch of 100K keys costs one hash probe per key in C.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Location:
    partition_path: str
    file_id: str


class KeyIndex:
    """record key -> location id; locations are interned ``(partition, file id)`` pairs.

    Keys live in a few immutable hash segments (``pandas.Index``); a location change or a
    delete rewrites the segment's location array in place (-1 is a tombstone), new keys form a
    new segment, and segments are merged when there are too many. Every operation is vectorised.
    """

    MAX_SEGMENTS = 6

    def __init__(self) -> None:
        self._segments: list[tuple[pd.Index, np.ndarray]] = []
        self.locations: list[Location] = []
        self._loc_ids: dict[Location, int] = {}
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return int(sum((locs >= 0).sum() for _, locs in self._segments))

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

    def _probe(self, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(location id or -1, segment number or -1, position in segment) of each key."""
        n = len(arr)
        out = np.full(n, -1, dtype=np.int32)
        seg_of = np.full(n, -1, dtype=np.int32)
        pos_of = np.full(n, -1, dtype=np.int64)
        # Newest segment first: a key appears in at most one live segment.
        for si in range(len(self._segments) - 1, -1, -1):
            keys, locs = self._segments[si]
            todo = np.flatnonzero(seg_of < 0)
            if not len(todo):
                break
            pos = keys.get_indexer(arr[todo])
            hit = pos >= 0
            if hit.any():
                rows, p = todo[hit], pos[hit]
                seg_of[rows], pos_of[rows] = si, p
                out[rows] = locs[p]
        return out, seg_of, pos_of

    def lookup(self, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Location id of each key, or -1 when the key is not indexed (or deleted)."""
        return self._probe(_to_object(keys))[0]

    def put(self, keys: pa.Array | pa.ChunkedArray, loc_ids: np.ndarray) -> None:
        """Set the location of keys (``-1`` removes them). Later duplicates win."""
        arr = _to_object(keys)
        if not len(arr):
            return
        loc_ids = np.asarray(loc_ids, dtype=np.int32)
        # Keep the last occurrence of each key.
        rev_keys = pd.Index(arr[::-1])
        if not rev_keys.is_unique:
            first = ~rev_keys.duplicated(keep="first")
            arr = arr[::-1][first][::-1]
            loc_ids = loc_ids[::-1][first][::-1]
        _, seg_of, pos_of = self._probe(arr)
        for si in np.unique(seg_of[seg_of >= 0]):
            sel = seg_of == si
            self._segments[si][1][pos_of[sel]] = loc_ids[sel]
        new = (seg_of < 0) & (loc_ids >= 0)
        if new.any():
            self._segments.append((pd.Index(arr[new], dtype=object), loc_ids[new].copy()))
            if len(self._segments) > self.MAX_SEGMENTS:
                self._merge()

    def remove(self, keys: pa.Array | pa.ChunkedArray) -> None:
        self.put(keys, np.full(len(keys), -1, dtype=np.int32))

    def _merge(self) -> None:
        keys = [k[locs >= 0] for k, locs in self._segments]
        locs = [x[x >= 0] for _, x in self._segments]
        merged = keys[0].append(keys[1:]) if len(keys) > 1 else keys[0]
        self._segments = [(merged, np.concatenate(locs))]

    def items(self) -> tuple[pd.Index, np.ndarray]:
        """All (key, location id) pairs currently indexed."""
        if len(self._segments) != 1:
            if not self._segments:
                return pd.Index([], dtype=object), np.empty(0, dtype=np.int32)
            self._merge()
        keys, locs = self._segments[0]
        live = locs >= 0
        return keys[live], locs[live]

    def remove_file_group(self, partition_path: str, file_id: str) -> None:
        """Forget every key of one file group (after a rollback removed the group)."""
        lid = self._loc_ids.get(Location(partition_path, file_id))
        if lid is None:
            return
        for _, locs in self._segments:
            locs[locs == lid] = -1


def _to_object(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    return np.asarray(keys.to_numpy(zero_copy_only=False), dtype=object)


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
        for i in np.flatnonzero(non_ascii):
            s = values[int(i)].as_py()
            h = 0
            for unit in np.frombuffer(s.encode("utf-16-be"), dtype=">u2"):
                h = (31 * h + int(unit)) & 0xFFFFFFFF
            result[i] = np.uint32(h).view(np.int32)
    return result


def bucket_ids(keys: pa.Array | pa.ChunkedArray, num_buckets: int) -> np.ndarray:
    """Hudi's BucketIdentifier: ``(List(key).hashCode() & Integer.MAX_VALUE) % numBuckets``.

    A one-element ``java.util.List`` hashes to ``31 + key.hashCode()``.
    """
    h = java_string_hash(keys).astype(np.int64)
    list_hash = (31 + h) & 0xFFFFFFFF
    return ((list_hash & 0x7FFFFFFF) % num_buckets).astype(np.int32)


def bucket_file_id_prefix(bucket: int) -> str:
    """File ids of the bucket index start with the zero-padded bucket number."""
    return f"{bucket:08d}"
