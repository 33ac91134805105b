"""numba kernels of :mod:`hoodie_ray.avro.kernel` (imported only when they are used).

Module-level functions, so numba's on-disk cache finds them again in every process.
"""

# mypy: ignore-errors

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def varint(buf, p, e, max_bytes):
    # Returns (unsigned value, new position, ok).
    u = np.uint64(0)
    shift = np.uint64(0)
    k = 0
    while True:
        if p >= e:
            return u, p, False
        b = buf[p]
        p += 1
        u |= np.uint64(b & 0x7F) << shift
        k += 1
        if b < 0x80:
            return u, p, True
        if k == max_bytes:
            return u, p, False
        shift += np.uint64(7)


@numba.njit(cache=True, nogil=True)
def zigzag(u):
    return np.int64(u >> np.uint64(1)) ^ -np.int64(u & np.uint64(1))


@numba.njit(cache=True, nogil=True)
def walk_records(buf, starts, ends, kinds, null_b, value_b, vals, vpos, valid):
    n = starts.shape[0]
    nf = kinds.shape[0]
    for i in range(n):
        p = starts[i]
        e = ends[i]
        for j in range(nf):
            if null_b[j] >= 0:
                u, p, ok = varint(buf, p, e, 5)
                if not ok or u >= np.uint64(1 << 32):
                    return i
                br = zigzag(u)
                if br == null_b[j]:
                    valid[j, i] = False
                    vals[j, i] = 0
                    vpos[j, i] = p
                    continue
                if br != value_b[j]:
                    return i
                valid[j, i] = True
            k = kinds[j]
            vpos[j, i] = p
            if k == 2 or k == 3:  # int, long
                u, p, ok = varint(buf, p, e, 5 if k == 2 else 10)
                if not ok or (k == 2 and u >= np.uint64(1 << 32)):
                    return i
                vals[j, i] = zigzag(u)
            elif k == 6:  # string, bytes
                u, p, ok = varint(buf, p, e, 10)
                if not ok:
                    return i
                ln = zigzag(u)
                if ln < 0 or ln > e - p:
                    return i
                vpos[j, i] = p
                vals[j, i] = ln
                p += ln
            elif k == 1:  # boolean: the byte, compared with 1 by the caller
                if p + 1 > e:
                    return i
                vals[j, i] = buf[p]
                p += 1
            else:  # float, double: the raw little-endian bits (plans hold no plain null)
                w = 4 if k == 4 else 8
                if p + w > e:
                    return i
                bits = np.uint64(0)
                for b in range(w):
                    bits |= np.uint64(buf[p + b]) << np.uint64(8 * b)
                vals[j, i] = np.int64(bits)
                p += w
        if p != e:
            return i
    return -1


@numba.njit(cache=True, nogil=True)
def walk_prefixed(buf, start, count, starts):
    # Big-endian int32 length before each record; returns the end, or -1 when malformed.
    size = buf.shape[0]
    p = start
    for i in range(count):
        if p + 4 > size:
            return -1
        ln = (
            (np.int64(buf[p]) << 24)
            | (np.int64(buf[p + 1]) << 16)
            | (np.int64(buf[p + 2]) << 8)
            | np.int64(buf[p + 3])
        )
        if ln >= 1 << 31:  # negative as an int32
            return -1
        p += 4
        starts[i] = p
        p += ln
    if p > size:
        return -1
    return p


@numba.njit(cache=True, nogil=True)
def varint_size(u):
    if u < np.uint64(1 << 28):
        if u < np.uint64(1 << 14):
            return 1 if u < np.uint64(1 << 7) else 2
        return 3 if u < np.uint64(1 << 21) else 4
    if u >= np.uint64(1 << 56):
        return 9 if u < np.uint64(1 << 63) else 10
    if u < np.uint64(1 << 42):
        return 5 if u < np.uint64(1 << 35) else 6
    return 7 if u < np.uint64(1 << 49) else 8


@numba.njit(cache=True, nogil=True)
def put_varint(out, p, u):
    while u >= np.uint64(0x80):
        out[p] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        p += 1
    out[p] = np.uint8(u)
    return p + 1


@numba.njit(cache=True, nogil=True)
def zigzag_encode(v):
    return np.uint64((v << np.int64(1)) ^ (v >> np.int64(63)))


@numba.njit(cache=True, nogil=True)
def record_sizes(kinds, null_b, value_b, vals, valid, sizes):
    # Bytes of each record's datum (without a length prefix).
    n, nf = vals.shape
    for i in range(n):
        s = 0
        for j in range(nf):
            if null_b[j] >= 0:
                s += 1  # a branch index 0 or 1: one varint byte
                if not valid[i, j]:
                    continue
            k = kinds[j]
            if k == 2 or k == 3:
                s += varint_size(zigzag_encode(vals[i, j]))
            elif k == 6:
                s += varint_size(zigzag_encode(vals[i, j])) + vals[i, j]
            elif k == 1:
                s += 1
            elif k == 4:
                s += 4
            elif k == 5:
                s += 8
        sizes[i] = s


@numba.njit(cache=True, nogil=True)
def write_records(kinds, null_b, value_b, vals, valid, sstart, sdata, offsets, prefix, out):
    # Writes record i at out[offsets[i]:offsets[i+1]] (its big-endian length first when
    # ``prefix``); strings are the sdata bytes at sstart[i, j] of length vals[i, j].
    n, nf = vals.shape
    for i in range(n):
        p = offsets[i]
        if prefix:
            ln = offsets[i + 1] - p - 4
            out[p] = np.uint8((ln >> 24) & 0xFF)
            out[p + 1] = np.uint8((ln >> 16) & 0xFF)
            out[p + 2] = np.uint8((ln >> 8) & 0xFF)
            out[p + 3] = np.uint8(ln & 0xFF)
            p += 4
        for j in range(nf):
            if null_b[j] >= 0:
                if not valid[i, j]:
                    out[p] = np.uint8(2 * null_b[j])
                    p += 1
                    continue
                out[p] = np.uint8(2 * value_b[j])
                p += 1
            k = kinds[j]
            v = vals[i, j]
            if k == 2 or k == 3:
                p = put_varint(out, p, zigzag_encode(v))
            elif k == 6:
                p = put_varint(out, p, zigzag_encode(v))
                s = sstart[i, j]
                out[p : p + v] = sdata[s : s + v]
                p += v
            elif k == 1:
                out[p] = np.uint8(v)
                p += 1
            elif k == 4 or k == 5:
                w = 4 if k == 4 else 8
                u = np.uint64(v)
                for b in range(w):
                    out[p + b] = np.uint8((u >> np.uint64(8 * b)) & np.uint64(0xFF))
                p += w
