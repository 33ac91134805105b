"""numba kernel of :mod:`hoodie_ray.hfile.checksum` (imported only when it is used): CRC-32C
of many chunks of one buffer. Its tables come in as an argument, so no code of another file is
compiled in."""

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
