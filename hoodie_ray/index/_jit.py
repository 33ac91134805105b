"""numba kernel of :func:`hoodie_ray.index.hash_keys` (imported only when it is used)."""

# mypy: ignore-errors

import numba
import numpy as np

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, nogil=True)
def fnv_splitmix(data, starts, lens, out):
    # FNV-1a over each key's bytes, the length folded in, then the splitmix64 finaliser.
    for i in range(starts.shape[0]):
        h = _FNV_OFFSET
        s = starts[i]
        for j in range(lens[i]):
            h ^= np.uint64(data[s + j])
            h *= _FNV_PRIME
        h ^= np.uint64(lens[i]) * _GOLDEN
        h ^= h >> np.uint64(30)
        h *= _MIX1
        h ^= h >> np.uint64(27)
        h *= _MIX2
        h ^= h >> np.uint64(31)
        out[i] = h
