"""The driver's calls to the write topology's actors: what their failures mean and how the
calls of a failed checkpoint are collected.

A call fails because an actor died (:func:`is_actor_loss`: restart the topology and replay),
because a row or option was refused (the :class:`~hoodie_ray.exceptions.HoodieError` the task
error carries, raised as itself: :func:`unwrap`), or, under optimistic concurrency control,
because the commit lost a conflict (:class:`Conflicted`).
"""

from __future__ import annotations

import contextlib
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from hoodie_ray.exceptions import HoodieError, HoodieWriteConflictError


class TopologyLost(Exception):
    """An actor died: restart the topology and replay."""


class RoutedPartLost(Exception):
    """A routed part kept in the process that routed it (:meth:`RoutedParts.of
    <hoodie_ray.ray.actors.RoutedParts.of>`) is not there for its task: the task is not in
    that process any more (a topology restarted between the route and the assign). What an
    actor loss means: restart the topology and replay."""


class Conflicted(Exception):
    """OCC: the checkpoint's commit lost a conflict (its instant is rolled back): reload the
    topology from the table and replay, or raise ``error`` once the retries are spent."""

    def __init__(self, error: HoodieWriteConflictError) -> None:
        super().__init__(str(error))
        self.error = error


def unwrap(e: BaseException) -> BaseException:
    """The HoodieError a (possibly nested: writer -> assigner -> driver) task error carries."""
    cause = getattr(e, "cause", None) if isinstance(e, RayTaskError) else None
    if isinstance(cause, HoodieError):
        return cause
    if isinstance(cause, RayTaskError):
        inner = unwrap(cause)
        return inner if isinstance(inner, HoodieError) else e
    return e


def instant_name(instant: Any) -> str:
    """An instant the driver may hold as the reference it comes from (pipelined)."""
    return str(ray.get(instant)) if isinstance(instant, ray.ObjectRef) else str(instant)


def is_actor_loss(e: BaseException) -> bool:
    """An actor died, here or in a call an actor made (an assigner's call to a writer), or
    a routed part kept in a process is gone with it (:class:`RoutedPartLost`)."""
    if isinstance(e, (RayActorError, RoutedPartLost)):
        return True
    if isinstance(e, RayTaskError):
        return is_actor_loss(getattr(e, "cause", None) or Exception())
    return False


def drain(
    refs: list[Any], routed: list[tuple[Any, list[Any]]] | None = None, timeout: float = 60.0
) -> list[Any]:
    """Wait (``timeout`` in all) for the calls of a failed checkpoint and take their errors:
    Ray logs an error no one fetched as an "Unhandled error" when its reference goes.
    ``refs`` return small values (row counts); ``routed`` pairs a routed block's row count
    with its parts, which are fetched only where the count is an error (then they hold the
    same error; the parts of a block routed fine hold its rows, which stay where they are).
    The calls not done by then are returned."""
    routed = routed or []
    every = list(refs) + [count for count, _ in routed]
    if not every:
        return []
    ready, waiting = ray.wait(every, num_returns=len(every), timeout=timeout, fetch_local=False)
    failed = set()
    for ref in ready:
        try:
            ray.get(ref, timeout=5)
        except GetTimeoutError:
            continue
        except Exception:
            failed.add(ref)
    for count, parts in routed:
        if count in failed:  # the same task made the parts: ready, each the same error
            for part in parts:
                with contextlib.suppress(Exception):
                    ray.get(part, timeout=5)
    return list(waiting)
