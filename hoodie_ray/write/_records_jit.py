"""numba kernel of :func:`hoodie_ray.write.records.precombine_plan` (imported only when it is
used): the rows of a batch grouped by record key and folded to the ones the precombine keeps,
in one pass over the rows."""

# mypy: ignore-errors

import numba
import numpy as np

from hoodie_ray.jit import drop_stale_kernels


@numba.njit(cache=True, nogil=True, inline="always")
def _same_key(data, starts, lens, a, b):
    n = lens[a]
    if lens[b] != n:
        return False
    sa = starts[a]
    sb = starts[b]
    j = 0
    while j < n and data[sa + j] == data[sb + j]:
        j += 1
    return j == n


@numba.njit(cache=True, nogil=True, inline="always")
def _at_least(new, old):
    # ascending order with NaN above every number (Arrow's sort): does ``new`` sort at or
    # after ``old``? (``x != x`` is NaN's test, and false for integers)
    if new != new:
        return True
    if old != old:
        return False
    return new >= old


@numba.njit(cache=True, nogil=True)
def fold_rows(data, starts, lens, hashes, ordered, vals, valid, barrier, keep):
    # Rows grouped by key (the key hashes in an open-addressing table, the bytes compared on a
    # hash match, so a collision never joins two keys). Per key, in row order: without an
    # ordering field the last row wins; with one, a barrier row (a delete with no ordering
    # value) drops the candidates before it, and the candidate that sorts last by (known,
    # value, position) wins, its key's last barrier kept before it. ``keep`` gets the rows
    # kept; returns (rows kept, whether one row a key).
    n = hashes.shape[0]
    size = 1
    while size < 2 * n:
        size *= 2
    mask = np.uint64(size - 1)
    slots = np.full(size, -1, np.int64)
    first = np.empty(n, np.int64)  # each group's first row (its key's bytes)
    best = np.empty(n, np.int64)
    last_barrier = np.empty(n, np.int64)
    ngroups = 0
    for i in range(n):
        h = hashes[i]
        s = h & mask
        while True:
            g = slots[s]
            if g < 0:
                g = ngroups
                ngroups += 1
                slots[s] = g
                first[g] = i
                best[g] = -1
                last_barrier[g] = -1
                break
            if hashes[first[g]] == h and _same_key(data, starts, lens, first[g], i):
                break
            s = (s + np.uint64(1)) & mask
        if not ordered:
            best[g] = i
        elif barrier[i]:
            last_barrier[g] = i
            best[g] = -1
        else:
            b = best[g]
            # the later row wins unless it sorts before: unknown below known, then by value
            if b < 0 or (
                valid[i] >= valid[b]
                and (valid[i] > valid[b] or not valid[i] or _at_least(vals[i], vals[b]))
            ):
                best[g] = i
    kept = 0
    unique = True
    for g in range(ngroups):
        b = best[g]
        lb = last_barrier[g]
        if b < 0:
            keep[lb] = True
            kept += 1
        else:
            keep[b] = True
            kept += 1
            if lb >= 0:
                keep[lb] = True
                kept += 1
                unique = False
    return kept, unique


drop_stale_kernels(fold_rows, [__file__])
