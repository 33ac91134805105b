"""Whether the compiled (numba) kernels may run: numba importable, ``HOODIE_RAY_NO_JIT`` unset.

The kernels (``avro/_jit.py``, ``index/_jit.py``, ``index/_bloom_jit.py``, ``hfile/_jit.py``)
are sequential byte walks that numpy cannot express column-wise, or fuse what numpy can only do
in passes over large temporaries; every one has a numpy twin that gives the same result, used
when numba is missing, when ``HOODIE_RAY_NO_JIT=1`` (for debugging and comparison) and for
inputs a kernel does not cover. numba compiles a kernel on its first call and caches the machine code on disk
(``__pycache__``), so later processes only load it.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["drop_stale_kernels", "enabled", "loaded", "read_only"]

_enabled: bool | None = None


def enabled() -> bool:
    """True when numba can be imported and ``HOODIE_RAY_NO_JIT`` is not set."""
    global _enabled
    if _enabled is None:
        if os.environ.get("HOODIE_RAY_NO_JIT", "") not in ("", "0"):
            _enabled = False
        else:
            try:
                import numba  # noqa: F401
            except Exception:  # missing or unusable: the numpy twins run
                _enabled = False
            else:
                _enabled = True
    return _enabled


def loaded() -> bool:
    """True when this process has imported numba already (and :func:`enabled`): a kernel that
    pays for itself only where numba's ~140 MB resident are spent anyway (the actors load it
    at start, ``warm_up``) runs there, its numpy twin elsewhere."""
    return "numba" in sys.modules and enabled()


def drop_stale_kernels(kernel: Any, sources: Sequence[str]) -> None:
    """Drop the disk-cached kernels of ``kernel``'s module when a file they compile code from
    changed since they were cached.

    numba validates a cached kernel by its own file's time stamp only, so a kernel that inlines
    a function of another file (``merge.py``'s merge rule, ``index/key_hash.py``'s hash) would
    go on running the old machine code after that file changed, and the compiled and numpy
    paths would disagree. A digest of ``sources`` is kept beside the module's cache files; when
    it differs, the module's cache files go and numba compiles afresh. Call it at the end of
    the module, before any kernel runs. Never raises: a cache it cannot read or write is left
    to numba.
    """
    try:
        cache_dir = Path(kernel._cache._cache_path)
        module = Path(kernel.py_func.__code__.co_filename).stem
        digest = hashlib.sha256(b"".join(Path(s).read_bytes() for s in sources)).hexdigest()
        stamp = cache_dir / f"{module}.sources"
        if stamp.is_file() and stamp.read_text() == digest:
            return
        for cached in cache_dir.glob(f"{module}.*.nb[ic]"):
            cached.unlink(missing_ok=True)
        stamp.write_text(digest)
    except (AttributeError, OSError):
        return


def read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a``, as views of immutable Arrow buffers are (an array Ray
    deserialised from its object store, say): a kernel then sees one array type whatever
    the bytes came from, so numba loads one version of it per process, which :func:`warm_up
    <hoodie_ray.index.warm_up>` loads at an actor's start (another version costs 5-15 ms to
    load from numba's cache on its first call, in every process, ~0.4 s where it compiles)."""
    v = a.view()
    v.setflags(write=False)
    return v
