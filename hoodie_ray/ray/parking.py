"""Warm topologies: the write topology of the last ``hr.write`` call of this process, kept.

hr.write on Ray starts a topology (coordinator, assigners, writers: seconds of actor start-up)
for one commit. A process that writes small commits in a loop would pay that every call, so
the topology of the last call is kept ("parked"), with the table's writer lock, for
``write.warm_idle_s`` seconds: the next call from this process to the same table with the
same options is one checkpoint of it (upserts and deletes share one: the topology switches
its ``write.operation`` for that commit). At most one topology is parked per process. It is
stopped when it idles out, when the process exits, when ray.shutdown() is called (hooked: a
script that ends with it, as Ray's docs teach, must not leave the lock for its heartbeat to
expire; a Ray gone before the topology stopped has its lock deleted by this driver, which
knows the owner id), when a call with other options or to another table comes, when this
process starts any other topology, and when any other writer of this process takes the
table's lock (every table lock asks it to). Another process is refused by the lock while it
is parked, as while a call runs. Under optimistic concurrency control a parked topology holds
no lock (its coordinator takes it only for its turns): other writers commit meanwhile, and the
next call's checkpoint reloads the key index it then finds stale.
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import ray

from hoodie_ray.config.options import SWITCHABLE_OPERATIONS, without_option
from hoodie_ray.write.lock import register_idle_holder, unregister_idle_holder

log = logging.getLogger("hoodie_ray")


class ParkedWriter(Protocol):
    """What the cache needs of a parked writer (a :class:`~hoodie_ray.ray.stream.HoodieStreamWriter`)."""

    @property
    def closed(self) -> bool: ...

    def close(self) -> None: ...

    def abandon(self) -> None: ...


@dataclass
class Parked:
    """The parked topology of ``uri``: its writer, the options ``key`` it was started with
    and the Ray ``session`` (job id) its actors live in."""

    writer: ParkedWriter
    uri: str
    key: str
    session: str
    timer: threading.Timer | None = None
    release: Callable[[], None] | None = None  # registered with the writer lock's idle holders

    def disarm(self) -> None:
        """Stop the idle timer and the lock's claim on it (it is busy, or being stopped)."""
        if self.timer is not None:
            self.timer.cancel()
        if self.release is not None:
            unregister_idle_holder(self.uri, self.release)


_parked: dict[str, Parked] = {}
_parked_lock = threading.Lock()
_atexit_registered = False


def session() -> str:
    """The Ray job this process is connected to ('' when none)."""
    try:
        return str(ray.get_runtime_context().get_job_id())
    except Exception:
        return ""


def stop_parked(p: Parked) -> None:
    """Stop a parked topology taken out of the cache (closed, or abandoned where Ray has gone
    away under it: its actors are gone, its lock is released by this driver)."""
    p.disarm()
    if not ray.is_initialized() or session() != p.session:
        p.writer.abandon()
        return
    try:
        p.writer.close()
    except Exception as e:  # nothing is open: a failure here loses no data
        log.warning("stopping the idle write topology of %s failed: %s", p.uri, e)


def unpark(uri: str | None = None) -> Parked | None:
    """Take the parked topology out of the cache: the one of ``uri`` (None: any)."""
    with _parked_lock:
        for key in list(_parked):
            if uri is None or key == uri:
                return _parked.pop(key)
    return None


def release_warm_writers() -> None:
    """Stop the write topology this process keeps warm between ``hr.write`` calls, if any
    (it also stops by itself after ``write.warm_idle_s`` seconds, and at exit)."""
    while (p := unpark()) is not None:
        stop_parked(p)


def _expire(p: Parked) -> None:
    with _parked_lock:
        if _parked.get(p.uri) is not p:
            return  # in use again, or stopped already
        del _parked[p.uri]
    stop_parked(p)


def _hook_ray_shutdown() -> None:
    """Make ``ray.shutdown()`` stop the parked topology first (it closes cleanly and releases
    the table's lock), instead of taking its actors down with the lock left behind."""
    original = ray.shutdown
    if getattr(original, "_hoodie_ray_hook", False):
        return

    @functools.wraps(original)
    def shutdown(*args: Any, **kwargs: Any) -> Any:
        release_warm_writers()
        return original(*args, **kwargs)

    shutdown._hoodie_ray_hook = True  # type: ignore[attr-defined]
    ray.shutdown = shutdown


def park(p: Parked, idle_s: float, occ: bool) -> None:
    """Keep ``p`` for ``idle_s`` seconds (the one parked topology of this process); unless
    ``occ`` (whose parked topology holds no lock), another writer's lock asks for it."""
    global _atexit_registered
    release_warm_writers()  # at most one parked topology per process
    with _parked_lock:
        _parked[p.uri] = p
        if not _atexit_registered:
            atexit.register(release_warm_writers)
            _hook_ray_shutdown()
            _atexit_registered = True
    p.timer = threading.Timer(idle_s, _expire, args=(p,))
    p.timer.daemon = True
    p.timer.start()

    if not occ:  # under OCC a parked topology holds no lock: nothing to give up
        p.release = functools.partial(_expire, p)  # what the timer does, asked for by a lock
        register_idle_holder(p.uri, p.release)


def options_key(
    options: dict[str, Any] | None,
    operation: str,
    storage_options: dict[str, Any] | None,
    address: str | None,
) -> str:
    """What a parked topology is reused for: the same options, storage and Ray address; the
    write operation (``operation``, resolved from ``options``) aside where it is one a
    topology switches to (:data:`~hoodie_ray.config.options.SWITCHABLE_OPERATIONS`)."""
    options = options or {}
    if operation in SWITCHABLE_OPERATIONS:
        options = without_option(options, "operation")
    return json.dumps([options, storage_options or {}, address], sort_keys=True, default=str)
