"""numba kernels of :mod:`hoodie_ray.hfile` (imported only when they are used): CRC-32C of many
chunks of one buffer (:mod:`~hoodie_ray.hfile.checksum`; its tables come in as an argument, so
no code of another file is compiled in), and the walk over a data block's KeyValues that
:meth:`~hoodie_ray.hfile.HFileReader.columns` splits column-wise, with the gather of their
bytes; the writer's assembly of KeyValues from a row column and a few distinct values."""

# mypy: ignore-errors

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def crc32c_chunks(data, starts, lens, tables, out):
    # Slicing-by-8 (``tables`` (8, 256): row k is a byte followed by k zero bytes), then one
    # table step per remaining byte; ``out`` holds each chunk's register on entry and on return.
    t0, t1, t2, t3 = tables[0], tables[1], tables[2], tables[3]
    t4, t5, t6, t7 = tables[4], tables[5], tables[6], tables[7]
    for i in range(starts.shape[0]):
        c = np.uint32(out[i])
        p = starts[i]
        end = p + lens[i]
        while p + 8 <= end:
            lo = c ^ (
                np.uint32(data[p])
                | (np.uint32(data[p + 1]) << np.uint32(8))
                | (np.uint32(data[p + 2]) << np.uint32(16))
                | (np.uint32(data[p + 3]) << np.uint32(24))
            )
            c = (
                t7[lo & np.uint32(0xFF)]
                ^ t6[(lo >> np.uint32(8)) & np.uint32(0xFF)]
                ^ t5[(lo >> np.uint32(16)) & np.uint32(0xFF)]
                ^ t4[lo >> np.uint32(24)]
                ^ t3[data[p + 4]]
                ^ t2[data[p + 5]]
                ^ t1[data[p + 6]]
                ^ t0[data[p + 7]]
            )
            p += 8
        while p < end:
            c = t0[(c ^ np.uint32(data[p])) & np.uint32(0xFF)] ^ (c >> np.uint32(8))
            p += 1
        out[i] = c


@numba.njit(cache=True, nogil=True)
def entry_spans(buf, extra, row_start, row_len, value_start, value_len):
    # Each KeyValue ``keyLength valueLength rowLength | row | key tail | value | extra bytes``
    # of a native-layout data block: where its row and value start and how long they are.
    # Returns the number of entries, or -1 - position of the first one that does not decode
    # (the numpy twin, reader._entry_spans, raises there).
    end = buf.shape[0]
    cap = row_start.shape[0]
    pos = 0
    n = 0
    while pos < end:
        if pos + 10 > end or n == cap:
            return -1 - pos
        key_len = (
            (np.int64(buf[pos]) << 24)
            | (np.int64(buf[pos + 1]) << 16)
            | (np.int64(buf[pos + 2]) << 8)
            | np.int64(buf[pos + 3])
        )
        v_len = (
            (np.int64(buf[pos + 4]) << 24)
            | (np.int64(buf[pos + 5]) << 16)
            | (np.int64(buf[pos + 6]) << 8)
            | np.int64(buf[pos + 7])
        )
        r_len = (np.int64(buf[pos + 8]) << 8) | np.int64(buf[pos + 9])
        if key_len < r_len + 2:
            return -1 - pos
        v_start = pos + 8 + key_len
        if v_start + v_len + extra > end:
            return -1 - pos
        row_start[n] = pos + 10
        row_len[n] = r_len
        value_start[n] = v_start
        value_len[n] = v_len
        pos = v_start + v_len + extra
        n += 1
    return n


@numba.njit(cache=True, nogil=True)
def gather(buf, starts, lens, offsets, out):
    # The bytes [starts[i], starts[i] + lens[i]) of ``buf`` one after the other into ``out``
    # from offsets[i] (the numpy twin: reader._gather).
    for i in range(starts.shape[0]):
        s = starts[i]
        o = offsets[i]
        n = lens[i]
        out[o : o + n] = buf[s : s + n]  # a slice is a memcpy: ~3x a byte loop at 70 bytes


@numba.njit(cache=True, nogil=True)
def key_values(rows, row_offsets, blob, blob_offsets, codes, key_overhead, extra, out_offsets, out):
    # Each entry's native KeyValue into ``out`` from out_offsets[i]: ``keyLength valueLength
    # rowLength`` (big-endian 4, 4, 2) | row i | blob piece codes[i] (key tail, value, MVCC
    # byte: what every entry of one value shares; ``extra`` bytes of it are not the value).
    # keyLength = rowLength + ``key_overhead``. Rows come from an Arrow binary column
    # (row_offsets: its n + 1 offsets, rebased to ``rows``). Returns -1 when the rows are
    # strictly ascending by unsigned bytes, else the first i whose row is not above row
    # i - 1 (its twin: the Arrow join and ordering check of writer._ArrowKeyValues.of).
    bad = -1
    for i in range(codes.shape[0]):
        r0 = row_offsets[i]
        r_len = row_offsets[i + 1] - r0
        c = codes[i]
        b0 = blob_offsets[c]
        b_len = blob_offsets[c + 1] - b0
        o = out_offsets[i]
        k_len = r_len + key_overhead
        v_len = b_len - extra
        out[o] = (k_len >> 24) & 0xFF
        out[o + 1] = (k_len >> 16) & 0xFF
        out[o + 2] = (k_len >> 8) & 0xFF
        out[o + 3] = k_len & 0xFF
        out[o + 4] = (v_len >> 24) & 0xFF
        out[o + 5] = (v_len >> 16) & 0xFF
        out[o + 6] = (v_len >> 8) & 0xFF
        out[o + 7] = v_len & 0xFF
        out[o + 8] = (r_len >> 8) & 0xFF
        out[o + 9] = r_len & 0xFF
        o += 10
        out[o : o + r_len] = rows[r0 : r0 + r_len]  # slices compile to memcpy, loops do not
        o += r_len
        out[o : o + b_len] = blob[b0 : b0 + b_len]
        if bad < 0 and i > 0:
            p0 = row_offsets[i - 1]
            p_len = r0 - p0
            m = min(p_len, r_len)
            cmp = 0
            for j in range(m):
                a = rows[p0 + j]
                b = rows[r0 + j]
                if a != b:
                    cmp = 1 if b > a else -1
                    break
            if cmp == 0:
                cmp = 1 if r_len > p_len else -1
            if cmp < 0:
                bad = i
    return bad
