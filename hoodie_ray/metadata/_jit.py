"""numba kernel of :mod:`hoodie_ray.metadata.records` (imported only when it is used): Java's
``String.hashCode`` of many keys, which places metadata-table keys in their file groups."""

# mypy: ignore-errors

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def java_string_hashes(units, offsets, out):
    # h = 31*h + unit over each key's UTF-16 code units (or ASCII bytes), wrapping at 32 bits
    # (the numpy twin: records._hash_units).
    for i in range(out.shape[0]):
        h = np.uint32(0)
        for j in range(offsets[i], offsets[i + 1]):
            h = h * np.uint32(31) + np.uint32(units[j])
        out[i] = h
