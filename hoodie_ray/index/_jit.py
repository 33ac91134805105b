"""numba kernels of :mod:`hoodie_ray.index` (imported only when they are used): the key hash
of :func:`hoodie_ray.index.hash_keys` and the open-addressing table of the key index."""

# mypy: ignore-errors

import numba
import numpy as np

from hoodie_ray.index import key_hash
from hoodie_ray.index.key_hash import FNV_PRIME
from hoodie_ray.jit import drop_stale_kernels

#: The key hash's finish (length fold + splitmix64) of one key: :func:`key_hash.finish_key_hash`
#: compiled, so the numpy path, these kernels and the reader's compiled merge share one rule.
finish_key_hash = numba.njit(cache=True, nogil=True, inline="always")(key_hash.finish_key_hash)


@numba.njit(cache=True, nogil=True)
def fnv_splitmix(data, starts, lens, offset, golden, out):
    # FNV-1a over each key's bytes from ``offset``, the length folded in with ``golden``,
    # then the splitmix64 finaliser.
    for i in range(starts.shape[0]):
        h = offset
        s = starts[i]
        for j in range(lens[i]):
            h ^= np.uint64(data[s + j])
            h *= FNV_PRIME
        out[i] = finish_key_hash(h, np.uint64(lens[i]) * golden)


@numba.njit(cache=True, nogil=True)
def table_build(hashes, table, dup):
    # Linear probing: each slot holds the position of a hash in ``hashes`` (-1 empty); a hash
    # met again is flagged in ``dup`` and not inserted. Returns the number of duplicates.
    mask = np.uint64(table.shape[0] - 1)
    n_dup = 0
    for i in range(hashes.shape[0]):
        h = hashes[i]
        s = h & mask
        while True:
            p = table[s]
            if p < 0:
                table[s] = i
                break
            if hashes[p] == h:
                dup[i] = True
                n_dup += 1
                break
            s = (s + np.uint64(1)) & mask
    return n_dup


@numba.njit(cache=True, nogil=True)
def table_find(table, hashes, probe, out):
    # Position of each probed hash in ``hashes`` via ``table``, or -1.
    mask = np.uint64(table.shape[0] - 1)
    for i in range(probe.shape[0]):
        h = probe[i]
        s = h & mask
        out[i] = -1
        while True:
            p = table[s]
            if p < 0:
                break
            if hashes[p] == h:
                out[i] = p
                break
            s = (s + np.uint64(1)) & mask


# The hash's finish and constants are compiled in from key_hash.py.
drop_stale_kernels(fnv_splitmix, [key_hash.__file__])
