"""One process-wide pool of worker threads, kept between calls.

A query reads its file slices on a few threads (pyarrow releases the GIL while it decodes);
an HFile's GZ data blocks are deflated on them (zlib releases it too).
Starting and joining a fresh ``ThreadPoolExecutor`` for every read cost ~0.5 ms of CPU, and
its new threads read slower than kept ones (the lookup table's full scan took 117 ms with a
fresh pool, 93 ms with a kept one). The pool is made on first use, made again in a forked child (the parent's
threads do not exist there), and never used from one of its own threads: a read started
inside a pooled task runs on its caller's thread instead of waiting for a busy pool.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["MAX_READ_THREADS", "kept_pool", "map_in_pool"]

#: the most threads one process reads with, whatever its CPU count
MAX_READ_THREADS = 8

_T = TypeVar("_T")
_R = TypeVar("_R")

_lock = threading.Lock()
#: each kept pool by name, with the process that made it
_pools: dict[str, tuple[int, ThreadPoolExecutor]] = {}
_local = threading.local()


def kept_pool(
    name: str, workers: int, initializer: Callable[[], None] | None = None
) -> ThreadPoolExecutor:
    """The process's pool ``name`` (its threads named after it): made on first use, and
    again in a forked child, where the parent's threads do not exist."""
    with _lock:
        kept = _pools.get(name)
        if kept is None or kept[0] != os.getpid():
            ex = ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix=name, initializer=initializer
            )
            kept = _pools[name] = (os.getpid(), ex)
        return kept[1]


def _shared() -> ThreadPoolExecutor:
    return kept_pool("hoodie-pool", min(os.cpu_count() or 1, MAX_READ_THREADS), _mark)


def _mark() -> None:
    _local.pooled = True


def map_in_pool(fn: Callable[[_T], _R], items: Iterable[_T]) -> list[_R]:
    """``[fn(x) for x in items]``, run on the shared pool's threads (results in order; every
    item is taken from ``items`` before the first result is waited for); on the
    caller's thread where the caller is one of them."""
    if getattr(_local, "pooled", False):
        return [fn(x) for x in items]
    return list(_shared().map(fn, items))
