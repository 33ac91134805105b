"""Whether the compiled (numba) kernels may run: numba importable, ``HOODIE_RAY_NO_JIT`` unset.

The kernels (``avro/_jit.py``, ``index/_jit.py``) are sequential byte walks that numpy cannot
express column-wise; every one has a numpy twin that gives the same result, used when numba is
missing, when ``HOODIE_RAY_NO_JIT=1`` (for debugging and comparison) and for inputs a kernel
does not cover. numba compiles a kernel on its first call and caches the machine code on disk
(``__pycache__``), so later processes only load it.
"""

from __future__ import annotations

import os

__all__ = ["enabled"]

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
