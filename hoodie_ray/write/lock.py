"""The table lock: the interface every lock provider implements, and hoodie_ray's own lock.

:class:`TableLock` is what the coordinator and the maintenance entry points take: acquire (once,
or waiting up to a time), renew (the heartbeat, from a daemon thread), check (still ours?),
release. ``write/lock_providers.py`` picks one by ``hoodie.write.lock.provider``:
:class:`WriterLock` (the default, below) or one of the Hudi-compatible providers there.

hoodie_ray's own lock lives at ``.hoodie/.aux/hoodie_ray.writer.lock`` (``.aux`` is Hudi's auxiliary folder,
ignored by every reader). It is created put-if-absent; its owner rewrites it every heartbeat
interval from a daemon thread. A lock whose heartbeat is older than the expiry is stale (its
owner died) and is taken over. A second live writer gets :class:`HoodieCommitConflictError`.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from hoodie_ray.exceptions import HoodieCommitConflictError, HoodieIOError, HoodiePathError
from hoodie_ray.storage import Storage

LOCK_PATH = ".hoodie/.aux/hoodie_ray.writer.lock"
_MISSING = object()

# Writers of this process that hold a table's lock while idle (a warm hr.write topology): they
# give the table up when another writer of this process wants it (base URI -> release).
_idle_holders: dict[str, Callable[[], None]] = {}
_idle_lock = threading.Lock()


def register_idle_holder(base_uri: str, release: Callable[[], None]) -> None:
    """Say that this process holds ``base_uri``'s lock while idle; ``release`` gives it up."""
    with _idle_lock:
        _idle_holders[base_uri] = release


def unregister_idle_holder(base_uri: str, release: Callable[[], None]) -> None:
    """Forget ``release`` (a holder that is busy again, or gone)."""
    with _idle_lock:
        if _idle_holders.get(base_uri) is release:
            del _idle_holders[base_uri]


def release_idle_holder(base_uri: str) -> None:
    """Make this process's idle holder of ``base_uri``'s lock, if any, give it up now."""
    with _idle_lock:
        release = _idle_holders.pop(base_uri, None)
    if release is not None:
        release()


def new_owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class TableLock:
    """One table's lock as one provider keeps it.

    Acquire with :meth:`acquire` (or ``with``), or :meth:`acquire_waiting`; released by
    :meth:`release`. While held, a daemon thread calls :meth:`renew` every
    :attr:`heartbeat_s` (when positive) until it returns False (the lock is no longer ours).
    A refused acquire raises :class:`HoodieCommitConflictError` naming the holder.
    """

    storage: Storage
    owner: str
    held: bool
    heartbeat_s: float = 0.0

    def _init_thread(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.held = False

    def _take(self) -> None:
        """One attempt to take the lock: return when ours, raise
        :class:`HoodieCommitConflictError` when another holder has it."""
        raise NotImplementedError

    def renew(self) -> bool:
        """Extend the lock (one heartbeat); False once it is no longer ours."""
        raise NotImplementedError

    def check(self) -> None:
        """Raise :class:`HoodieCommitConflictError` if the lock was lost."""
        raise NotImplementedError

    def _drop(self) -> None:
        """Give the lock up in storage, if it is still ours."""
        raise NotImplementedError

    def release_owned(self) -> bool:
        """Give up the lock :attr:`owner` holds without having taken it in this process (the
        job's driver, for its coordinator that is gone); True when a lock was released."""
        raise NotImplementedError

    def acquire(self) -> TableLock:
        """Take the lock or raise :class:`HoodieCommitConflictError` naming the holder."""
        if self.held:
            return self
        release_idle_holder(self.storage.base_uri)
        self._take()
        self.held = True
        self._stop.clear()
        if self.heartbeat_s > 0:
            self._thread = threading.Thread(
                target=self._beat, name="hoodie-ray-lock-heartbeat", daemon=True
            )
            self._thread.start()
        return self

    def acquire_waiting(self, wait_ms: int) -> TableLock:
        """:meth:`acquire`, retried while another holder has the lock, for up to ``wait_ms``
        (``hoodie.write.lock.wait_time_ms``); then the last refusal, saying how long it
        waited."""
        deadline = time.monotonic() + wait_ms / 1000.0
        delay = 0.005
        while True:
            try:
                return self.acquire()
            except HoodieCommitConflictError as e:
                if time.monotonic() >= deadline:
                    raise HoodieCommitConflictError(
                        f"{e} (waited hoodie.write.lock.wait_time_ms={wait_ms})"
                    ) from None
                time.sleep(delay)  # another writer's turn: wait for it
                delay = min(delay * 2, 0.1)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                if not self.renew():
                    self.held = False
                    return
            except Exception:  # a missed heartbeat is retried next interval
                continue

    def release(self) -> None:
        """Stop the heartbeat and give the lock up (only if it is still ours)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self.held:
            self._drop()
        self.held = False

    def __enter__(self) -> TableLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class WriterLock(TableLock):
    """hoodie_ray's own lock (the default provider): a JSON file with the owner and the time
    of its last heartbeat, stale after ``hoodie.write.lock.expire_ms``."""

    def __init__(
        self,
        storage: Storage,
        *,
        heartbeat_ms: int = 10000,
        expire_ms: int = 60000,
        owner: str | None = None,
    ) -> None:
        self.storage = storage
        self.heartbeat_s = heartbeat_ms / 1000.0
        self.expire_s = expire_ms / 1000.0
        # A write job passes its own id, so a restarted coordinator re-takes the job's lock.
        self.owner = owner or new_owner_id()
        self._init_thread()

    def _payload(self) -> bytes:
        return json.dumps({"owner": self.owner, "heartbeat": time.time()}).encode()

    def _read(self) -> dict | None:
        """The lock's content, or None when it is missing or unreadable."""
        cur = self._load()
        return cur if isinstance(cur, dict) else None

    def _load(self) -> dict | object | None:
        """The lock's content; ``_MISSING`` when there is no file to read (never there, or
        released meanwhile); None when a file is there but is no lock a writer made (garbage,
        or a FIFO, socket or device, which storage refuses to open)."""
        try:
            if self.storage.size(LOCK_PATH) > 64 * 1024:
                return None
            raw = self.storage.read_bytes(LOCK_PATH)
        except HoodiePathError:
            return None
        except HoodieIOError:
            return _MISSING
        try:
            cur = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        if not isinstance(cur, dict) or not isinstance(cur.get("heartbeat", 0), (int, float)):
            return None
        return cur

    def _take(self) -> None:
        for _ in range(3):
            try:
                created = self.storage.create_new(LOCK_PATH, self._payload())
            except HoodieIOError as e:  # e.g. a user who may not write the table's folder
                raise HoodieIOError(
                    f"cannot take the writer lock of {self.storage.base_uri}: {e}"
                ) from e
            if created:
                break
            cur = self._load()
            if cur is _MISSING:
                # Released between our create and our read: try to create it again. (Deleting
                # here would delete a lock another writer may have created meanwhile.)
                continue
            if not isinstance(cur, dict):
                # A file no writer made (garbage): stale, remove it and retry.
                self.storage.delete(LOCK_PATH)
                continue
            if cur.get("owner") == self.owner:
                break
            age = time.time() - float(cur.get("heartbeat", 0))
            if age <= self.expire_s:
                raise HoodieCommitConflictError(
                    f"table {self.storage.base_uri} is being written by {cur.get('owner')} "
                    f"(heartbeat {age:.0f}s ago); one writer per table"
                )
            self.storage.delete(LOCK_PATH)  # stale: its owner stopped heartbeating
        else:
            raise HoodieCommitConflictError(
                f"could not take the writer lock of {self.storage.base_uri}"
            )
        cur = self._read()
        if cur is None or cur.get("owner") != self.owner:
            raise HoodieCommitConflictError(
                f"table {self.storage.base_uri}: another writer took the lock concurrently"
            )

    def renew(self) -> bool:
        cur = self._load()
        gone = cur is _MISSING and not self.storage.exists(LOCK_PATH)
        if gone or (isinstance(cur, dict) and cur.get("owner") != self.owner):
            # released for us (release_owned: our job's driver saw us gone), or taken over:
            # never write a lock back that is not ours any more
            return False
        self.storage.write_atomic(LOCK_PATH, self._payload())
        return True

    def check(self) -> None:
        """Raise if the lock was lost (taken over after our heartbeat stalled)."""
        cur = self._read()
        if not self.held or cur is None or cur.get("owner") != self.owner:
            self.held = False
            raise HoodieCommitConflictError(f"lost the writer lock of {self.storage.base_uri}")

    def _drop(self) -> None:
        cur = self._read()
        if cur is not None and cur.get("owner") == self.owner:
            self.storage.delete(LOCK_PATH)

    def release_owned(self) -> bool:
        """Delete the lock file if :attr:`owner` holds it, without having taken it in this
        process: the job's driver releases the lock of its coordinator, a process that is gone
        (Ray was shut down), instead of leaving the table refused until the heartbeat expires.
        True when a lock was deleted."""
        cur = self._read()
        if cur is None or cur.get("owner") != self.owner:
            return False
        self.storage.delete(LOCK_PATH)
        self.held = False
        return True
