"""What a process that Ray started for one of hoodie_ray's actors sets before pyarrow loads.

Arrow's C++ code allocates from its *default* pool, which Arrow fixes the first time pyarrow
loads in a process, from ``ARROW_DEFAULT_MEMORY_POOL``; ``pyarrow.set_memory_pool`` later
changes only what pyarrow's Python calls allocate from. The Parquet writer's column buffers
(every Parquet log block and base file) come from the default pool whatever pool the call is
given, so switching the pool after pyarrow loaded
(:func:`~hoodie_ray.ray.runtime.set_actor_memory_pool`) left most of an actor's Arrow
memory on mimalloc, Arrow's default.

Measured (``perf`` over 6 commits of ``benchmarks.scaling --quick``, 8 chained tasks on 2
cores): the actors spent 0.36 of 3.4 CPU-s zeroing huge pages for mimalloc
(``mi_page_free_list_extend``: each actor, idle between calls, gives freed pages back and
faults them in again on the next call) and 0.9 CPU-s in the kernel in all; with jemalloc as
the default pool 0.5 CPU-s in the kernel and 2.8 CPU-s in all.

This module is imported by ``hoodie_ray/__init__.py`` before anything imports pyarrow. It
sets the variable only where all of these hold, so that no other process's pool changes:

- Linux (where it was measured, and where pyarrow's wheels carry jemalloc);
- pyarrow is not loaded yet and ``ARROW_DEFAULT_MEMORY_POOL`` is unset (a user's choice,
  for example in ``runtime_env``, wins);
- the process is running the creation of an actor whose class is hoodie_ray's (Ray gives
  an actor its own process, so nothing else runs in it).

The coordinator's process names mimalloc instead. Its large work is the metadata table's
compaction (every index key read, merged and written again in one call), whose buffers jemalloc,
as Arrow configures it, hands back to the kernel as they are freed and faults in again for the
next: the compaction of a 2.2M-key record index in a Ray actor took 1.42-1.45 CPU-s and 152-157K
minor page faults on jemalloc, 1.21-1.27 CPU-s and 5.5-7K faults on mimalloc (the coordinator
of ``mor_q1 --variant scale``: that commit 2.20-2.35 -> 1.93-2.09 CPU-s; its other commits
unchanged).

It never imports Ray: it looks for the module Ray's worker process has loaded already.
"""

from __future__ import annotations

import os
import sys

ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
"""Arrow's own variable naming its default memory pool; where set, hoodie_ray leaves it."""

ACTOR_ARROW_POOL = "jemalloc"
"""Arrow's default pool in the processes of hoodie_ray's actors (but the coordinator's)."""

COORDINATOR_ARROW_POOL = "mimalloc"
"""Arrow's default pool in the coordinator's process (see the module's docstring)."""

COORDINATOR_CLASS = "CoordinatorActor"
"""The class name of the coordinator's actor (:class:`hoodie_ray.ray.actors.CoordinatorActor`)."""

chosen: str | None = None
"""The pool this module named for this process before pyarrow loaded (None: it named none)."""

pyarrow_loaded_first = "pyarrow" in sys.modules
"""Whether pyarrow was loaded in this process before hoodie_ray (then its pool was fixed)."""


def own_actor_class() -> str | None:
    """The class name of the hoodie_ray actor this process is creating (or running), or None
    where it is not one of hoodie_ray's actors."""
    ray = sys.modules.get("ray")
    if ray is None:
        return None
    try:
        # ray.get_runtime_context() starts a local Ray where none is connected yet (a
        # driver that imports ray, then hoodie_ray, before ray.init): only a worker asks.
        if not ray.is_initialized():
            return None
        ctx = ray.get_runtime_context()
        if ctx.get_actor_id() is None:
            return None
        name = str(ctx.get_task_function_name() or "")  # module.Class.method
    except Exception:  # not a worker, or a Ray whose context lacks these: leave the pool
        return None
    if not name.startswith("hoodie_ray."):
        return None
    parts = name.split(".")
    return parts[-2] if len(parts) >= 3 else ""


def actor_arrow_pool(class_name: str) -> str:
    """Arrow's default pool for the process of a hoodie_ray actor of ``class_name``."""
    return COORDINATOR_ARROW_POOL if class_name == COORDINATOR_CLASS else ACTOR_ARROW_POOL


def prefer_actor_arrow_pool() -> str | None:
    """Name the actor's pool (:func:`actor_arrow_pool`) as Arrow's default pool where this
    module's rules allow it (see the module's docstring); the pool named, or None."""
    global chosen
    if (
        not sys.platform.startswith("linux")
        or "pyarrow" in sys.modules
        or os.environ.get(ARROW_POOL_ENV)
    ):
        return chosen
    cls = own_actor_class()
    if cls is not None:
        chosen = os.environ[ARROW_POOL_ENV] = actor_arrow_pool(cls)
    return chosen


prefer_actor_arrow_pool()
