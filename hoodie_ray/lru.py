"""A process-wide cache of what was made from immutable bytes, bounded by size."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

__all__ = ["SizedLru"]


class SizedLru:
    """Values by key, least recently used out once their sizes (given with each value) pass
    ``max_bytes``; a value larger than ``max_entry`` (default ``max_bytes``) is never kept.
    Thread-safe; what is made on a miss is made outside the lock (two threads missing at
    once both make it, the first one put is kept)."""

    def __init__(self, max_bytes: int, max_entry: int | None = None) -> None:
        self.max_bytes = max_bytes
        self.max_entry = max_bytes if max_entry is None else max_entry
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The value kept for ``key`` (now the most recently used), or None."""
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: Hashable, value: Any, size: int) -> None:
        """Keep ``value`` (``size`` bytes) for ``key`` unless it is too large or kept already."""
        if size > self.max_entry:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped

    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        """The sizes of the values kept, summed."""
        return self._bytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
