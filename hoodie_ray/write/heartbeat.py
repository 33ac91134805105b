"""Instant heartbeats, as Hudi's ``HoodieHeartbeatClient`` writes them.

A writer that opens an instant under the lazy failed-writes policy (always under optimistic
concurrency control) keeps an empty file ``.hoodie/.heartbeat/<instant>`` and rewrites it
every ``hoodie.client.heartbeat.interval_in_ms``: the file's modification time is the beat.
When the instant completes or is rolled back the file is deleted. Another writer takes the
instant for failed (and may roll it back) once its last beat is older than interval x
``hoodie.client.heartbeat.tolerable.misses`` -- Java's ``isHeartbeatExpired`` -- or when it
has no heartbeat file at all (Java reads a missing file as a beat at time 0).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from hoodie_ray.storage import Storage, join

HEARTBEAT_DIR = ".hoodie/.heartbeat"


def heartbeat_path(instant: str) -> str:
    """Where ``instant``'s heartbeat lives (Hudi's ``getHeartbeatFolderPath`` + instant)."""
    return join(HEARTBEAT_DIR, instant)


class HeartbeatClient:
    """The heartbeats of one writer's instants: one daemon thread beats every started one."""

    def __init__(
        self,
        storage: Storage,
        interval_ms: int,
        tolerable_misses: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.storage = storage
        self.interval_s = interval_ms / 1000.0
        self.max_age_s = interval_ms * tolerable_misses / 1000.0
        self.clock = clock
        self._instants: set[str] = set()
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- this writer's instants ----------------------------------------------------------------
    def start(self, instant: str) -> None:
        """Write the first beat now (so the instant is never seen without one), then beat it
        every interval until :meth:`stop`."""
        self._touch(instant)
        with self._guard:
            self._instants.add(instant)
            if self._thread is None:
                self._stop.clear()
                self._thread = threading.Thread(
                    target=self._run, name="hoodie-ray-instant-heartbeat", daemon=True
                )
                self._thread.start()

    def stop(self, instant: str) -> None:
        """Stop beating ``instant`` and delete its heartbeat file (it completed or was rolled
        back)."""
        with self._guard:
            self._instants.discard(instant)
        self.storage.delete(heartbeat_path(instant))

    def close(self) -> None:
        """Stop the thread; heartbeat files of instants still open stay and expire (as Java's
        ``close``: the next writer rolls such an instant back once its heartbeat expired)."""
        with self._guard:
            self._instants.clear()
            thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(timeout=5)

    def _touch(self, instant: str) -> None:
        self.storage.write_bytes(heartbeat_path(instant), b"")

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._guard:
                instants = sorted(self._instants)
            for instant in instants:
                try:
                    with self._guard:
                        if instant not in self._instants:
                            continue  # stopped meanwhile: never write a deleted beat back
                        self._touch(instant)
                except Exception:  # a missed beat is retried next interval
                    continue

    # -- anyone's instants ---------------------------------------------------------------------
    def last_beat(self, instant: str) -> float:
        """The time of ``instant``'s last beat; 0 when it has no heartbeat file."""
        t = self.storage.modified_time(heartbeat_path(instant))
        return 0.0 if t is None else t

    def is_expired(self, instant: str) -> bool:
        """Has ``instant``'s writer stopped beating for longer than the tolerated misses?"""
        return self.clock() - self.last_beat(instant) > self.max_age_s
