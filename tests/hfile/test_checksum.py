"""CRC-32C of HFile blocks (hoodie_ray/hfile/checksum.py): the compiled kernel and its numpy
twin against known vectors, a plain byte-wise reference and each other."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from hoodie_ray import jit
from hoodie_ray.hfile import checksum
from hoodie_ray.hfile.checksum import crc32c, crc32c_chunks

#: CRC-32C test vectors: the common check value and RFC 3720's (iSCSI, B.4).
VECTORS = [
    (b"", 0),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


def _reference(data: bytes, crc: int = 0) -> int:
    """Bit-wise CRC-32C straight from the polynomial (no tables), continuing from ``crc``."""
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def _paths() -> list[bool]:
    """The numpy twin always; the kernel where numba imports."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return [False]
    return [False, True]


@pytest.mark.parametrize("compiled", _paths(), ids=lambda c: "kernel" if c else "numpy")
def test_known_vectors(compiled: bool) -> None:
    data = b"".join(d for d, _ in VECTORS)
    lens = np.array([len(d) for d, _ in VECTORS])
    starts = np.cumsum(lens) - lens
    got = crc32c_chunks(np.frombuffer(data, np.uint8), starts, lens, compiled=compiled)
    assert got.dtype == np.uint32
    assert got.tolist() == [v for _, v in VECTORS]
    # continuing from the CRC of the bytes before
    first = crc32c_chunks(np.frombuffer(b"1234", np.uint8), [0], [4], compiled=compiled)
    rest = crc32c_chunks(np.frombuffer(b"56789", np.uint8), [0], [5], first, compiled=compiled)
    assert rest.tolist() == [0xE3069283]


def test_crc32c_of_one_buffer() -> None:
    for data, value in VECTORS:
        assert crc32c(data) == value
        assert crc32c(memoryview(data)) == value
    assert crc32c(b"56789", crc32c(b"1234")) == 0xE3069283


@pytest.mark.parametrize("compiled", _paths(), ids=lambda c: "kernel" if c else "numpy")
def test_random_chunks_match_the_reference(compiled: bool) -> None:
    """Chunks of every length 0-40 (all tail lengths of the 8-byte steps), longer ones, some
    overlapping, in no order, with random starting CRCs."""
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, 5000, dtype=np.uint8)
    lens = np.concatenate([np.arange(41), rng.integers(0, 1500, 40)])
    starts = rng.integers(0, len(data) - lens + 1)
    init = rng.integers(0, 1 << 32, len(lens), dtype=np.uint32)
    init[::3] = 0
    got = crc32c_chunks(data, starts, lens, init, compiled=compiled)
    want = [
        _reference(data[s : s + n].tobytes(), c)
        for s, n, c in zip(starts.tolist(), lens.tolist(), init.tolist(), strict=True)
    ]
    assert got.tolist() == want


def test_kernel_and_twin_agree_on_block_sized_chunks() -> None:
    """HBase's layout: 16 KiB chunks back to back, a short last one per block."""
    if len(_paths()) < 2:
        pytest.skip("numba is not installed: no compiled kernel to compare")
    rng = np.random.default_rng(11)
    data = rng.integers(0, 256, 100_003, dtype=np.uint8)
    starts = np.arange(0, len(data), 16384)
    lens = np.minimum(16384, len(data) - starts)
    a = crc32c_chunks(data, starts, lens, compiled=False)
    b = crc32c_chunks(data, starts, lens, compiled=True)
    assert a.tolist() == b.tolist()
    assert a[-1] == _reference(data[starts[-1] :].tobytes())


def test_no_chunks_and_the_default_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert crc32c_chunks(np.zeros(0, np.uint8), [], []).tolist() == []
    # small inputs stay on the numpy twin in a process without numba loaded
    monkeypatch.setattr(checksum, "sys", SimpleNamespace(modules={}))
    assert not checksum._use_kernel(checksum.JIT_MIN_BYTES - 1)
    monkeypatch.setenv("HOODIE_RAY_NO_JIT", "1")
    monkeypatch.setattr(jit, "_enabled", None)
    assert not checksum._use_kernel(checksum.JIT_MIN_BYTES)
