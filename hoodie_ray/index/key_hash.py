"""The key hash's constants and its finish, shared by the numpy path (:mod:`hoodie_ray.index`)
and the compiled kernels (``index/_jit.py``, ``reader/_jit.py``); no numba here."""

from __future__ import annotations

from typing import Any

import numpy as np

#: FNV-1a's 64-bit offset basis and prime.
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
#: The multiplier that folds a key's length into its hash.
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def finish_key_hash(h: Any, length_term: Any) -> Any:
    """The end of the key hash: ``length_term`` (the key's length times the golden multiplier)
    folded into its FNV-1a hash ``h``, then the splitmix64 finaliser.

    Over uint64 arrays in the numpy path (in place; the caller ignores overflow), and compiled,
    over one key, in the kernels (``_jit.finish_key_hash``: this function, inlined).
    """
    h ^= length_term
    h ^= h >> np.uint64(30)
    h *= _MIX1
    h ^= h >> np.uint64(27)
    h *= _MIX2
    h ^= h >> np.uint64(31)
    return h
