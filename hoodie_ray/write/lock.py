"""The table lock: the interface every lock provider implements, and hoodie_ray's own lock.

:class:`TableLock` is what the coordinator and the maintenance entry points take: acquire (once,
or waiting up to a time), renew (the heartbeat, from a daemon thread), check (still ours?),
release. ``write/lock_providers.py`` picks one by ``hoodie.write.lock.provider``:
:class:`WriterLock` (the default, below) or one of the Hudi-compatible providers there.

hoodie_ray's own lock lives at ``.hoodie/.aux/hoodie_ray.writer.lock`` (``.aux`` is Hudi's auxiliary folder,
ignored by every reader). It is created put-if-absent; its owner rewrites it every heartbeat
interval from a daemon thread. A lock whose heartbeat is older than the expiry is stale (its
owner died) and is taken over. It names the process that renews it and the job's driver
(:class:`ProcessId`): when both are gone from this host (a writer killed with ``kill -9``), the
next writer takes it over at once instead of waiting out the expiry. A second live writer gets
:class:`HoodieCommitConflictError`, saying when the lock expires.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass

from hoodie_ray.exceptions import HoodieCommitConflictError, HoodieIOError, HoodiePathError
from hoodie_ray.storage import Storage

LOCK_PATH = ".hoodie/.aux/hoodie_ray.writer.lock"
_MISSING = object()
#: How long a writer waits for a dead driver's actors to go (Ray reaps them in 2-5 s) before
#: it takes over their lock.
REAP_WAIT_S = 15.0

log = logging.getLogger("hoodie_ray")

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


def _machine() -> str:
    """This kernel boot and PID namespace: two processes with equal ``_machine()`` see the
    same PIDs (a host name alone does not tell containers apart)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:  # not Linux: no way to tell, the lock then waits for its expiry
        return ""


def _proc_start(pid: int) -> tuple[int, bool] | None:
    """``(start time in clock ticks since boot, zombie)`` of a process from
    ``/proc/<pid>/stat`` (fixed for the process's life, unlike a wall-clock start time, which
    moves when the clock is stepped); None when there is no such entry."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": state is field 3
    try:
        return int(fields[19]), fields[0] == b"Z"  # starttime is field 22
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class ProcessId:
    """A process, told apart from a later one with the same PID by its start time."""

    host: str
    machine: str  # _machine(): boot id and PID namespace; "" where unknown
    pid: int
    start: int  # clock ticks after boot (/proc/<pid>/stat); -1 where unknown

    @classmethod
    def current(cls) -> ProcessId:
        pid = os.getpid()
        known = _proc_start(pid)
        return cls(socket.gethostname(), _machine(), pid, known[0] if known else -1)

    @classmethod
    def parse(cls, raw: object) -> ProcessId | None:
        """From :meth:`to_json`'s form; None for anything else (a lock of an older writer)."""
        if not isinstance(raw, dict):
            return None
        try:
            p = cls(str(raw["host"]), str(raw["machine"]), int(raw["pid"]), int(raw["start"]))
        except (KeyError, TypeError, ValueError):
            return None
        return p if p.pid > 0 else None

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    def local(self) -> bool:
        """Whether this process can see it: same host, boot and PID namespace."""
        here = _machine()
        return (
            bool(here)
            and self.start >= 0
            and self.machine == here
            and self.host == socket.gethostname()
        )

    def gone(self) -> bool:
        """True when it certainly ended: a local process whose PID is free, a zombie, or now
        another process's."""
        if not self.local():
            return False
        known = _proc_start(self.pid)
        if known is None:
            # no /proc entry: gone, unless /proc hides other users' processes (hidepid)
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return True
            except OSError:  # EPERM: it exists
                return False
            return False
        start, zombie = known
        return zombie or start != self.start

    def __str__(self) -> str:
        return f"process {self.pid} on {self.host}"


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
        job: ProcessId | None = None,
    ) -> None:
        self.storage = storage
        self.heartbeat_s = heartbeat_ms / 1000.0
        self.expire_s = expire_ms / 1000.0
        # A write job passes its own id, so a restarted coordinator re-takes the job's lock.
        self.owner = owner or new_owner_id()
        self.process = ProcessId.current()  # the process that renews the lock
        self.job = job or self.process  # the job's driver (a Ray job's coordinator renews)
        self._init_thread()

    def _payload(self) -> bytes:
        return json.dumps(
            {
                "owner": self.owner,
                "heartbeat": time.time(),
                "process": self.process.to_json(),
                "job": self.job.to_json(),
            }
        ).encode()

    def _holder_gone(self, cur: dict, age: float) -> bool:
        """Whether the live-looking lock ``cur`` (heartbeat ``age`` seconds old) has no
        holder left: its renewing process and its job's driver both ended on this host. When
        only the driver ended (killed), Ray reaps the job's actors in seconds: wait for them
        (:data:`REAP_WAIT_S` at most, and never past the lock's expiry)."""
        process, job = ProcessId.parse(cur.get("process")), ProcessId.parse(cur.get("job"))
        if process is None or job is None or not process.local() or not job.gone():
            return False
        deadline = time.monotonic() + min(REAP_WAIT_S, max(0.0, self.expire_s - age))
        while not process.gone():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def _refusal(self, cur: dict, age: float) -> str:
        process = ProcessId.parse(cur.get("process"))
        where = f" ({process})" if process is not None else ""
        left = max(0.0, self.expire_s - age)
        return (
            f"table {self.storage.base_uri} is being written by {cur.get('owner')}{where}, "
            f"heartbeat {age:.0f}s ago; one writer per table. The lock expires in {left:.0f}s "
            f"unless its holder renews it (hoodie.write.lock.expire_ms="
            f"{self.expire_s * 1000:.0f}); a holder whose process is gone from this host is "
            "taken over at once"
        )

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
                if not self._holder_gone(cur, age):
                    raise HoodieCommitConflictError(self._refusal(cur, age))
                if self._load() != cur:
                    continue  # renewed, released or taken meanwhile: look again
                log.warning(
                    "hoodie_ray: taking over the writer lock of %s from %s: its processes are gone",
                    self.storage.base_uri,
                    cur.get("owner"),
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
