"""numba kernels of the write path (imported only when they are used): the rows of a batch
grouped by record key and folded to the ones :func:`hoodie_ray.write.records.precombine_plan`
keeps, in one pass over the rows; the ``_hoodie_commit_seqno`` strings of a block
(:func:`hoodie_ray.write.base_file.with_meta_columns`)."""

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


@numba.njit(cache=True, nogil=True)
def numbered_strings(prefix, start, n):
    # ``prefix`` followed by the decimal digits of start, start + 1, ... (non-negative): the
    # Arrow offsets (int32) and bytes of the ``n`` strings. The number is kept as a decimal
    # counter and incremented with carries (no division a digit).
    width = prefix.shape[0]
    digits = np.zeros(20, np.uint8)  # least significant first
    v = start
    ndig = 0
    while True:
        digits[ndig] = v % 10
        ndig += 1
        v //= 10
        if v == 0:
            break
    # string lengths: the digit count grows by one at each power of ten passed
    offsets = np.empty(n + 1, np.int32)
    offsets[0] = 0
    total = 0
    d = ndig
    nxt = 1
    for _ in range(d):
        nxt *= 10
    for i in range(n):
        if start + i == nxt:
            d += 1
            nxt *= 10
        total += width + d
        offsets[i + 1] = total
    data = np.empty(total, np.uint8)
    for i in range(n):
        at = offsets[i]
        for j in range(width):
            data[at + j] = prefix[j]
        at += width
        for k in range(ndig):
            data[at + k] = 48 + digits[ndig - 1 - k]
        k = 0  # the next number
        while True:
            if digits[k] == 9:
                digits[k] = 0
                k += 1
                if k == ndig:
                    digits[k] = 1
                    ndig += 1
                    break
            else:
                digits[k] += 1
                break
    return offsets, data


drop_stale_kernels(fold_rows, [__file__])
