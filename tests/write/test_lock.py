"""The writer lock: one holder, stale takeover, and the release/re-acquire race."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

import pytest

from hoodie_ray.exceptions import HoodieCommitConflictError
from hoodie_ray.storage import LocalStorage
from hoodie_ray.write.lock import LOCK_PATH, REAP_WAIT_S, ProcessId, WriterLock, _proc_start


@pytest.fixture
def storage(tmp_path):
    (tmp_path / ".hoodie" / ".aux").mkdir(parents=True)
    return LocalStorage(str(tmp_path))


def test_second_live_writer_is_refused_and_a_released_lock_is_free(storage):
    a = WriterLock(storage).acquire()
    with pytest.raises(HoodieCommitConflictError, match="being written by"):
        WriterLock(storage).acquire()
    a.release()
    b = WriterLock(storage).acquire()
    b.check()
    b.release()
    assert not storage.exists(LOCK_PATH)


def test_stale_lock_is_taken_over_and_its_owner_is_fenced(storage):
    a = WriterLock(storage, heartbeat_ms=60_000, expire_ms=50).acquire()
    storage.write_atomic(LOCK_PATH, b'{"owner": "%s", "heartbeat": 0}' % a.owner.encode())
    b = WriterLock(storage, expire_ms=50).acquire()
    with pytest.raises(HoodieCommitConflictError, match="lost the writer lock"):
        a.check()
    b.check()
    a.release()  # must not remove b's lock
    b.check()
    b.release()


def test_garbage_lock_file_is_replaced(storage):
    storage.write_atomic(LOCK_PATH, b"not json")
    a = WriterLock(storage).acquire()
    a.check()
    a.release()


def test_lock_released_and_retaken_while_another_writer_looks(storage, monkeypatch):
    """B fails to create the lock (A holds it); A releases before B reads it and takes it
    again before B acts. B must not delete A's new lock: it is refused, A keeps the table.
    (Before the fix B deleted the lock it had found missing, and both writers held it.)"""
    a = WriterLock(storage).acquire()
    b = WriterLock(storage)
    real_load = WriterLock._load
    retaken: list[WriterLock] = []

    def load_racing(self):
        if self is b and not retaken:
            a.release()
            cur = real_load(self)  # the file is gone at the moment B reads it
            retaken.append(WriterLock(storage).acquire())
            return cur
        return real_load(self)

    monkeypatch.setattr(WriterLock, "_load", load_racing)
    with pytest.raises(HoodieCommitConflictError, match="being written by"):
        b.acquire()
    assert retaken and retaken[0].held
    retaken[0].check()
    retaken[0].release()


def test_release_owned_frees_a_dead_owners_lock_and_its_heartbeat_does_not_write_it_back(storage):
    """A job's driver releases the lock of its coordinator (gone with Ray): a heartbeat that
    still beats finds the lock gone and stops, instead of writing it back."""
    a = WriterLock(storage, heartbeat_ms=10).acquire()
    assert not WriterLock(storage, owner="someone else").release_owned()
    assert WriterLock(storage, owner=a.owner).release_owned()
    assert a._thread is not None
    a._thread.join(timeout=30)
    assert not a._thread.is_alive() and not a.held
    assert not storage.exists(LOCK_PATH)
    b = WriterLock(storage).acquire()
    with pytest.raises(HoodieCommitConflictError, match="lost the writer lock"):
        a.check()
    b.release()
    a.release()


_HOLD = """
import sys, time
from hoodie_ray.storage import LocalStorage
from hoodie_ray.write.lock import WriterLock
WriterLock(LocalStorage(sys.argv[1])).acquire()
print("held", flush=True)
time.sleep(600)
"""


def _holder(storage: LocalStorage) -> subprocess.Popen:
    """Another process that takes the table's lock (heartbeating) and keeps it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, storage.base_uri], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_lock_of_a_writer_killed_on_this_host_is_taken_over_at_once(storage):
    holder = _holder(storage)
    with pytest.raises(HoodieCommitConflictError) as e:
        WriterLock(storage).acquire()
    # the refusal names the holder's process and says when the lock expires
    assert f"process {holder.pid} on " in str(e.value)
    assert re.search(r"expires in \d+s .*hoodie\.write\.lock\.expire_ms=60000", str(e.value))
    holder.kill()  # kill -9: no release, the heartbeat is seconds old
    holder.wait()
    lock = WriterLock(storage).acquire()  # no wait for the 60 s expiry
    lock.check()
    lock.release()


def _dead_driver_lock(storage: LocalStorage) -> tuple[WriterLock, subprocess.Popen]:
    """A lock as a Ray job's coordinator holds it once its driver was killed: the driver is
    gone, the renewing process (a sleeper here) still runs, the heartbeat fresh."""
    driver = subprocess.Popen([sys.executable, "-c", "pass"])
    driver.wait()
    here = ProcessId.current()
    job = ProcessId(here.host, here.machine, driver.pid, 1)  # gone (or its PID reused)
    renewer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    held = WriterLock(storage, job=job)
    started = _proc_start(renewer.pid)
    assert started is not None
    held.process = ProcessId(here.host, here.machine, renewer.pid, started[0])
    held.acquire()
    held._stop.set()  # the heartbeat thread stops, the file stays: as if the renewer held it
    return held, renewer


def test_dead_driver_waits_for_its_renewing_process_then_takes_over(storage):
    """A Ray job's driver killed: its coordinator (the process that renews the lock) lives on
    for the seconds Ray takes to reap it; the next writer waits for it, then takes over."""
    _, renewer = _dead_driver_lock(storage)
    threading.Timer(0.3, renewer.kill).start()  # a zombie until waited for: gone too
    t0 = time.monotonic()
    lock = WriterLock(storage).acquire()
    assert 0.2 < time.monotonic() - t0 < REAP_WAIT_S
    renewer.wait()
    lock.release()


def test_a_lock_taken_while_waiting_for_the_reap_is_not_deleted(storage):
    """The dead job's lock released, and taken by a live writer, while the next writer waits
    for the reap: that writer reads the lock again and is refused, the live one keeps it."""
    held, renewer = _dead_driver_lock(storage)
    live = WriterLock(storage)

    def release_and_take() -> None:
        held._drop()
        live.acquire()
        renewer.kill()

    threading.Timer(0.3, release_and_take).start()
    with pytest.raises(HoodieCommitConflictError, match="being written by"):
        WriterLock(storage).acquire()
    renewer.wait()
    live.check()
    live.release()


def test_holder_on_another_host_is_left_to_its_expiry(storage):
    a = WriterLock(storage).acquire()
    a.process = a.job = ProcessId("elsewhere", "other-boot/1", 1, 1)
    assert a.renew()
    with pytest.raises(HoodieCommitConflictError, match=r"process 1 on elsewhere.*expires in"):
        WriterLock(storage).acquire()
    a.release()
