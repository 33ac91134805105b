"""CRC-32C (Castagnoli), the checksum HBase writes after every ``bytesPerChecksum`` chunk of
every HFile block (``ChecksumType.CRC32C``, metadata-table spec 2.2).

:func:`crc32c_chunks` computes the CRCs of many independent chunks of one buffer at once: a
compiled kernel (``hfile/_jit.py``, slicing-by-8 over one chunk after another) where numba
runs, else its numpy twin, which walks all chunks together eight bytes per step (slicing-by-8:
eight table lookups per chunk and step, one numpy call over the chunks for each), so its Python
cost grows with the longest chunk (16 KiB: 2,048 steps), not with the number of bytes. Both
give the same CRCs. The compiled kernel runs only where numba is loaded already or the input
is large enough to pay for loading it (:data:`JIT_MIN_BYTES`).
"""

from __future__ import annotations

import sys

import numpy as np
import numpy.typing as npt

__all__ = ["JIT_MIN_BYTES", "crc32c", "crc32c_chunks"]

#: The reflected Castagnoli polynomial.
_POLY = 0x82F63B78
_MASK = 0xFFFFFFFF
#: Inputs of at least this many bytes load numba for the kernel where it is not loaded yet
#: (~0.35 CPU-s once per process; then ~1 ms per MiB), the numpy twin taking ~8 ms per MiB:
#: a loss of at most that once, then a gain for every large file the process writes.
JIT_MIN_BYTES = 8 << 20
_LE_U32 = np.dtype("<u4")


def _tables() -> np.ndarray:
    """The slicing-by-8 tables, ``(8, 256)`` uint32: row 0 the byte-wise CRC table, row ``k``
    the CRC of a byte followed by ``k`` zero bytes."""
    t = np.zeros((8, 256), dtype=np.uint32)
    c = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        c = np.where(c & 1, (c >> 1) ^ np.uint32(_POLY), c >> 1).astype(np.uint32)
    t[0] = c
    for k in range(1, 8):
        t[k] = t[0][t[k - 1] & 0xFF] ^ (t[k - 1] >> 8)
    return t


_TABLES = _tables()
#: byte ``j`` of an 8-byte word goes through table ``7 - j``: its index offset in the flat tables
_WORD_OFFSETS = (np.arange(7, -1, -1, dtype=np.intp) * 256)[None, :]
_FLAT = _TABLES.ravel()


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, continuing from ``crc`` (the CRC of the bytes before)."""
    buf = np.frombuffer(data, dtype=np.uint8) if len(data) else np.zeros(0, np.uint8)
    out = crc32c_chunks(
        buf, np.zeros(1, np.int64), np.array([len(buf)], np.int64), np.array([crc], np.uint32)
    )
    return int(out[0])


def crc32c_chunks(
    data: np.ndarray,
    starts: npt.ArrayLike,
    lens: npt.ArrayLike,
    crcs: npt.ArrayLike | None = None,
    *,
    compiled: bool | None = None,
) -> np.ndarray:
    """CRC-32C of each chunk ``data[starts[i] : starts[i] + lens[i]]`` (uint8 ``data``;
    chunks may overlap and come in any order), continuing from ``crcs[i]`` (0 by default):
    a uint32 array. ``compiled`` forces the kernel (True) or the numpy twin (False); by
    default the kernel runs where numba is loaded or the chunks hold :data:`JIT_MIN_BYTES`."""
    first = np.ascontiguousarray(starts, dtype=np.int64)
    sizes = np.ascontiguousarray(lens, dtype=np.int64)
    state = np.full(len(first), _MASK, dtype=_LE_U32)
    if crcs is not None:
        state ^= np.asarray(crcs, dtype=np.uint32).astype(_LE_U32)
    if not len(first):
        return state.astype(np.uint32)
    if compiled is None:
        compiled = _use_kernel(int(sizes.sum()))
    buf = np.ascontiguousarray(data, dtype=np.uint8)
    if compiled:
        from hoodie_ray.hfile import _jit

        out = state.astype(np.uint32)
        _jit.crc32c_chunks(buf, first, sizes, _TABLES, out)
        return out ^ np.uint32(_MASK)
    return (_numpy_chunks(buf, first, sizes, state) ^ np.uint32(_MASK)).astype(np.uint32)


def _use_kernel(total: int) -> bool:
    if "numba" not in sys.modules and total < JIT_MIN_BYTES:
        return False
    from hoodie_ray import jit

    return jit.enabled()


def _numpy_chunks(
    data: np.ndarray, starts: np.ndarray, lens: np.ndarray, state: np.ndarray
) -> np.ndarray:
    """The kernel's twin: chunks by decreasing length, so the chunks still going at word ``w``
    are a prefix; each step folds one 8-byte word of each into its register (slicing-by-8),
    then the last ``len % 8`` bytes go one at a time."""
    order = np.argsort(-lens, kind="stable")
    s, n_bytes = starts[order], lens[order]
    crc = state[order]
    words = n_bytes // 8
    # every 8-byte window of the data (8 zero bytes after it, so each start has one)
    padded = np.concatenate([data, np.zeros(8, np.uint8)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, 8)
    going = np.searchsorted(-words, -np.arange(int(words[0]) if len(words) else 0), side="left")
    for w, k in enumerate(going.tolist()):
        b = windows[s[:k] + 8 * w]  # (k, 8) bytes, a copy
        b[:, :4] ^= crc[:k].view(np.uint8).reshape(k, 4)  # the register, little-endian
        crc[:k] = np.bitwise_xor.reduce(_FLAT[b + _WORD_OFFSETS], axis=1)
    pos = s + 8 * words
    rest = n_bytes - 8 * words
    table = _TABLES[0]
    for j in range(7):
        m = np.flatnonzero(rest > j)
        if not len(m):
            break
        c = crc[m]
        crc[m] = table[(c ^ data[pos[m] + j]) & 0xFF] ^ (c >> 8)
    out = np.empty_like(crc)
    out[order] = crc
    return out
