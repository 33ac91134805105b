"""numba kernels of :mod:`hoodie_ray.index.bloom_filter` (imported only when they are used): a
batch of keys hashed and its bits set in the filter's bit vector, with no (keys x hashes)
matrix. Their numpy twin is ``bloom_filter._positions``; both give the same bits.

Hadoop's MurmurHash: the ``nbHash`` rounds of one key form one dependency chain (round ``i``'s
hash is round ``i + 1``'s seed), so a key alone runs at the latency of its multiplies. The kernel
hashes ``LANES`` keys together instead: each step of a round is one loop over the lanes, which
LLVM vectorises, and a word's seed-independent mix is computed once per key for all rounds.
Keys of different lengths in one group take a masked step (a lane past its last word keeps its
hash). Java's ``Math.abs(h % vectorSize)`` is computed through a double reciprocal and one
correction (exact: both operands are below 2**31), a 64-bit division costing more than the
rest of a round. Jenkins' lookup3 (hash type 0, which Hudi never writes) runs key by key.

Module-level functions, so numba's on-disk cache finds them again in every process.
"""

# mypy: ignore-errors

import numba
import numpy as np

#: Keys hashed together (lanes of the vectorised rounds).
LANES = 256
_M = np.uint32(0x5BD1E995)


@numba.njit(cache=True, nogil=True, inline="always")
def _java_abs_mod(h, vs, inv):
    # Math.abs(h % vs) of the Java int whose bits are h (uint32), vs < 2**31.
    a = abs(np.int64(np.int32(h)))
    p = a - np.int64(np.float64(a) * inv) * vs
    p = p + vs if p < 0 else p
    return p - vs if p >= vs else p


@numba.njit(cache=True, nogil=True, error_model="numpy")
def murmur_bits(data, starts, lens, rows_of, nb_hash, vector_size, flags):
    # Key i is data[starts[i] : starts[i] + lens[i]]; its nb_hash chained murmur rounds (seed
    # 0 first) set flags[row * vector_size + position] (flags: the filter's (rows,
    # vector_size) bools as uint8, row = rows_of[i], or 0 when rows_of is empty).
    n = starts.shape[0]
    maxw = 1
    for i in range(n):
        maxw = max(maxw, lens[i] >> 2)
    mixed = np.zeros((maxw, LANES), np.uint32)  # each lane's words, mixed
    n4 = np.zeros(LANES, np.int64)
    length = np.zeros(LANES, np.uint32)
    tail = np.zeros(LANES, np.uint32)  # the sign-extended tail bytes, 0 without a tail
    tail_m = np.zeros(LANES, np.uint32)  # m with a tail, 1 without: one branch-free step
    h = np.zeros(LANES, np.uint32)
    pos = np.zeros((nb_hash, LANES), np.int64)
    vs = np.int64(vector_size)
    inv = 1.0 / np.float64(vs)
    one_row = rows_of.shape[0] == 0
    for b0 in range(0, n, LANES):
        m = min(LANES, n - b0)
        wmax = 0
        wmin = maxw
        for lane in range(LANES):
            s = 0
            ln = 0
            if lane < m:
                s = starts[b0 + lane]
                ln = lens[b0 + lane]
            q = ln >> 2
            n4[lane] = q
            length[lane] = np.uint32(ln)
            wmax = max(wmax, q)
            wmin = min(wmin, q)
            for w in range(q):
                p = s + 4 * w
                k = (
                    np.uint32(data[p])
                    | (np.uint32(data[p + 1]) << np.uint32(8))
                    | (np.uint32(data[p + 2]) << np.uint32(16))
                    | (np.uint32(data[p + 3]) << np.uint32(24))
                )
                k = np.uint32(k * _M)
                k ^= k >> np.uint32(24)
                mixed[w, lane] = np.uint32(k * _M)
            left = ln - 4 * q
            e = s + ln
            t = np.uint32(0)
            if left >= 3:
                t ^= np.uint32(np.int32(np.int8(data[e - 3]))) << np.uint32(16)
            if left >= 2:
                t ^= np.uint32(np.int32(np.int8(data[e - 2]))) << np.uint32(8)
            if left >= 1:
                t ^= np.uint32(np.int32(np.int8(data[e - 1])))
            tail[lane] = t
            tail_m[lane] = _M if left > 0 else np.uint32(1)
            h[lane] = 0
        for r in range(nb_hash):
            for lane in range(LANES):
                h[lane] ^= length[lane]  # the previous round's hash is this round's seed
            if wmin == wmax:
                for w in range(wmax):
                    for lane in range(LANES):
                        h[lane] = np.uint32(h[lane] * _M) ^ mixed[w, lane]
            else:
                for w in range(wmax):
                    for lane in range(LANES):
                        x = np.uint32(h[lane] * _M) ^ mixed[w, lane]
                        h[lane] = x if w < n4[lane] else h[lane]
            for lane in range(LANES):
                x = np.uint32((h[lane] ^ tail[lane]) * tail_m[lane])
                x ^= x >> np.uint32(13)
                x = np.uint32(x * _M)
                x ^= x >> np.uint32(15)
                h[lane] = x
                pos[r, lane] = _java_abs_mod(x, vs, inv)
        for lane in range(m):
            base = 0 if one_row else rows_of[b0 + lane] * vs
            for r in range(nb_hash):
                flags[base + pos[r, lane]] = 1


@numba.njit(cache=True, nogil=True, inline="always")
def _rot(x, k):
    return np.uint32((x << np.uint32(k)) | (x >> np.uint32(32 - k)))


@numba.njit(cache=True, nogil=True, inline="always")
def _word(data, p, count):
    # Up to four bytes from data[p] as a little-endian word.
    w = np.uint32(0)
    for i in range(count):
        w |= np.uint32(data[p + i]) << np.uint32(8 * i)
    return w


@numba.njit(cache=True, nogil=True)
def _jenkins(data, s, ln, seed):
    # Hadoop's JenkinsHash.hash (lookup3 hashlittle) of data[s : s + ln] with seed (uint32).
    a = np.uint32(np.uint32((0xDEADBEEF + ln) & 0xFFFFFFFF) + seed)
    b = a
    c = a
    off = s
    rest = ln
    while rest > 12:
        a = np.uint32(a + _word(data, off, 4))
        b = np.uint32(b + _word(data, off + 4, 4))
        c = np.uint32(c + _word(data, off + 8, 4))
        a = np.uint32(a - c)
        a ^= _rot(c, 4)
        c = np.uint32(c + b)
        b = np.uint32(b - a)
        b ^= _rot(a, 6)
        a = np.uint32(a + c)
        c = np.uint32(c - b)
        c ^= _rot(b, 8)
        b = np.uint32(b + a)
        a = np.uint32(a - c)
        a ^= _rot(c, 16)
        c = np.uint32(c + b)
        b = np.uint32(b - a)
        b ^= _rot(a, 19)
        a = np.uint32(a + c)
        c = np.uint32(c - b)
        c ^= _rot(b, 4)
        b = np.uint32(b + a)
        off += 12
        rest -= 12
    if rest == 0:
        return c
    a = np.uint32(a + _word(data, off, min(rest, 4)))
    if rest > 4:
        b = np.uint32(b + _word(data, off + 4, min(rest - 4, 4)))
    if rest > 8:
        c = np.uint32(c + _word(data, off + 8, rest - 8))
    c ^= b
    c = np.uint32(c - _rot(b, 14))
    a ^= c
    a = np.uint32(a - _rot(c, 11))
    b ^= a
    b = np.uint32(b - _rot(a, 25))
    c ^= b
    c = np.uint32(c - _rot(b, 16))
    a ^= c
    a = np.uint32(a - _rot(c, 4))
    b ^= a
    b = np.uint32(b - _rot(a, 14))
    c ^= b
    c = np.uint32(c - _rot(b, 24))
    return c


@numba.njit(cache=True, nogil=True, error_model="numpy")
def jenkins_bits(data, starts, lens, rows_of, nb_hash, vector_size, flags):
    # murmur_bits with Jenkins' hash, key by key.
    vs = np.int64(vector_size)
    inv = 1.0 / np.float64(vs)
    one_row = rows_of.shape[0] == 0
    for i in range(starts.shape[0]):
        base = 0 if one_row else rows_of[i] * vs
        h = np.uint32(0)
        for _ in range(nb_hash):
            h = _jenkins(data, starts[i], lens[i], h)
            flags[base + _java_abs_mod(h, vs, inv)] = 1
