"""Hard links and special files planted in a table (docs/SECURITY.md, issue #21 items 3 and 4).

* A file with more than one hard link is never appended to or rewritten in place: the bytes
  would also land in the other names of the file, which may be outside the table. A log writer
  meeting such a log file rolls a new log version instead; storage refuses the in-place write
  with HoodiePathError naming the path.
* Only regular files are opened. A named pipe (FIFO), a socket or a device is refused with
  HoodiePathError naming the path, promptly: opening a FIFO would block until someone opens the
  other end, so a reader would hang, and a writer would hang holding the table's lock.

Every call that could block runs in a thread bounded by a timeout: a regression fails the test
(the FIFOs are then opened from the test to release the blocked thread) instead of hanging it.
"""

from __future__ import annotations

import functools
import os
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodiePathError
from hoodie_ray.log_format import CommandBlock, LogWriter, read_log_file
from hoodie_ray.storage import LocalStorage
from hoodie_ray.write.lock import LOCK_PATH, WriterLock
from tests.conftest import hudi_rs_read
from tests.security import rows, write

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
needs_links = pytest.mark.skipif(not hasattr(os, "link"), reason="no hard links here")
needs_unix_sockets = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no AF_UNIX")

TIMEOUT = 20.0


def bounded(fn: Callable[[], Any], unblock: list[Path], timeout: float = TIMEOUT) -> Any:
    """``fn()``'s result or the exception it raised; fails the test if it is still running
    after ``timeout`` seconds (opening ``unblock`` from here releases a thread blocked on a
    FIFO, so the test ends instead of hanging)."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["result"] = fn()
        except BaseException as e:  # handed to the test thread
            out["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        for _ in range(20):
            for p in unblock:
                if p.exists() and stat.S_ISFIFO(p.lstat().st_mode):
                    fd = os.open(p, os.O_RDWR | os.O_NONBLOCK)
                    os.close(fd)
            t.join(0.25)
            if not t.is_alive():
                break
        pytest.fail(f"blocked for over {timeout:.0f}s on a special file")
    return out.get("error", out.get("result"))


def table_log(path: Path) -> Path:
    """The one log file of partition ``a`` of the table."""
    (log,) = [p for p in (path / "a").iterdir() if ".log." in p.name]
    return log


def snapshot(path: Path) -> dict[str, float]:
    t = hr.read(str(path))
    return dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))


def rs_snapshot(path: Path) -> dict[str, float]:
    t = hudi_rs_read(path)
    return dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))


@pytest.fixture
def two_commits(tmp_path: Path) -> Path:
    """A MOR table whose partition ``a`` has a base file and a log file."""
    path = tmp_path / "table"
    write(path, rows(["k1", "k2", "k3"], ["a", "a", "b"]))
    write(path, rows(["k1", "k3"], ["a", "b"], ts=2, v=10.0))
    assert snapshot(path) == {"k1": 10.0, "k2": 1.0, "k3": 11.0}
    return path


def _cmd(i: int) -> CommandBlock:
    return CommandBlock.rollback(f"2025010100000000{i}", "20250101000000000")


def _replace_by_link(inside: Path, outside: Path) -> None:
    """``inside`` becomes a hard link to ``outside`` (which gets ``inside``'s bytes)."""
    outside.write_bytes(inside.read_bytes())
    inside.unlink()
    os.link(outside, inside)


# -- item 3: hard links -------------------------------------------------------------------------


@needs_links
def test_log_file_hard_linked_outside_the_table_is_not_appended(two_commits: Path) -> None:
    """The reported case: an upsert into a file group whose log file is a hard link to a file
    outside the table. It must roll a new log version; the outside file is untouched."""
    log = table_log(two_commits)
    outside = two_commits.parent / "outside.log"
    _replace_by_link(log, outside)
    before = outside.read_bytes()

    write(two_commits, rows(["k1", "k2"], ["a", "a"], ts=3, v=20.0))

    assert outside.read_bytes() == before
    assert outside.stat().st_nlink == 2  # never replaced either: the link is still there
    logs = sorted(p.name for p in (two_commits / "a").iterdir() if ".log." in p.name)
    assert len(logs) == 2 and ".log.2_" in logs[1]
    want = {"k1": 20.0, "k2": 21.0, "k3": 11.0}
    assert snapshot(two_commits) == want
    assert rs_snapshot(two_commits) == want


@needs_links
def test_storage_never_writes_into_a_hard_linked_file(tmp_path: Path) -> None:
    base = tmp_path / "t"
    (base / "p").mkdir(parents=True)
    storage = LocalStorage(str(base))
    inside, outside = base / "p" / "f", tmp_path / "outside"
    inside.write_bytes(b"table bytes")
    _replace_by_link(inside, outside)

    for name, call in {
        "append": lambda: storage.append("p/f", b"x"),
        "write_bytes": lambda: storage.write_bytes("p/f", b"x"),
        "open_output": lambda: storage.open_output("p/f"),
    }.items():
        with pytest.raises(HoodiePathError, match="p/f") as e:
            call()
        assert "hard link" in str(e.value), name
    assert outside.read_bytes() == b"table bytes"
    assert not storage.appendable("p/f")
    # Reading is harmless, and so is replacing the name: write_atomic renames a new file over
    # it, create_new refuses an existing name, delete removes the name only.
    assert storage.read_bytes("p/f") == b"table bytes"
    assert storage.create_new("p/f", b"new") is False
    storage.write_atomic("p/f", b"replaced")
    assert inside.read_bytes() == b"replaced" and outside.read_bytes() == b"table bytes"
    assert outside.stat().st_nlink == 1
    storage.append("p/f", b"+")  # one link again: appendable
    assert inside.read_bytes() == b"replaced+"


def test_create_new_is_not_refused_for_its_own_transient_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """create_new links its temporary file to the name, then unlinks the temporary: the file
    has two links in between, and that must not trip the check."""
    storage = LocalStorage(str(tmp_path))
    seen: list[int] = []
    real_link = os.link

    def link(src: Any, dst: Any, *a: Any, **k: Any) -> None:
        real_link(src, dst, *a, **k)
        seen.append(os.stat(dst).st_nlink)

    monkeypatch.setattr(os, "link", link)
    assert storage.create_new("p/f", b"abc") is True
    assert seen == [2]
    assert storage.append("p/f", b"d") == 3
    storage.write_bytes("p/f", b"whole")
    assert (tmp_path / "p" / "f").read_bytes() == b"whole"


@needs_links
def test_log_writer_rolls_past_a_hard_linked_log(tmp_path: Path) -> None:
    base = tmp_path / "t"
    storage = LocalStorage(str(base))
    name = ".f1-0_20250101000000000.log.1_0-1-1"
    first = LogWriter(storage, "p", name).append_block(_cmd(1))
    assert first.version == 1
    outside = tmp_path / "outside.log"
    _replace_by_link(base / "p" / name, outside)
    before = outside.read_bytes()

    r = LogWriter(storage, "p", name).append_block(_cmd(2))

    assert (r.version, r.offset) == (2, 0)
    assert outside.read_bytes() == before
    assert [b.instant_time for b in read_log_file(storage, r.path)] == ["20250101000000002"]


# -- item 4: FIFOs, sockets, devices ------------------------------------------------------------


def _make_fifo(p: Path) -> Path:
    os.mkfifo(p)
    return p


@contextmanager
def _make_socket(p: Path) -> Iterator[Path]:
    """A listening Unix socket at ``p`` (bound through a short relative name: socket paths
    are limited to about 100 bytes)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cwd = os.getcwd()
    os.chdir(p.parent)
    try:
        s.bind(p.name)
        s.listen(1)
        yield p
    finally:
        os.chdir(cwd)
        s.close()


def _make_device(p: Path) -> Path:
    try:  # /dev/null's numbers: harmless if it ever were opened
        os.mknod(p, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except (PermissionError, AttributeError, OSError) as e:
        pytest.skip(f"cannot create a device node here: {e}")
    return p


STORAGE_CALLS: dict[str, Callable[[LocalStorage, str], Any]] = {
    "read_bytes": lambda s, rel: s.read_bytes(rel),
    "open_input": lambda s, rel: s.open_input(rel),
    "size": lambda s, rel: s.size(rel),
    "local_path": lambda s, rel: s.local_path(rel),
    "appendable": lambda s, rel: s.appendable(rel),
    "append": lambda s, rel: s.append(rel, b"x"),
    "write_bytes": lambda s, rel: s.write_bytes(rel, b"x"),
    "open_output": lambda s, rel: s.open_output(rel),
}


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_storage_refuses_special_files(tmp_path: Path, kind: str) -> None:
    base = tmp_path / "t"
    (base / "p").mkdir(parents=True)
    storage = LocalStorage(str(base))
    target = base / "p" / "f"
    with _special(kind, target):
        for name, call in STORAGE_CALLS.items():
            err = bounded(functools.partial(call, storage, "p/f"), [target])
            assert isinstance(err, HoodiePathError), (name, err)
            assert "p/f" in str(err) and "not a regular file" in str(err), (name, str(err))
        # Listing never opens entries; the entry is still what it was.
        assert bounded(lambda: storage.list_file_names("p"), [target]) == ["f"]
        assert [i.name for i in bounded(lambda: storage.list_dir("p"), [target])] == ["f"]
        assert storage.exists("p/f")
        assert not stat.S_ISREG(target.lstat().st_mode)


@contextmanager
def _special(kind: str, p: Path) -> Iterator[Path]:
    if kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no named pipes here")
        yield _make_fifo(p)
    elif kind == "socket":
        if not hasattr(socket, "AF_UNIX"):
            pytest.skip("no AF_UNIX sockets here")
        with _make_socket(p) as s:
            yield s
    else:
        yield _make_device(p)


def _writer_is_free(path: Path, v: float) -> None:
    """A later writer is not refused for a lock left behind, and the table reads right."""
    assert not (path / LOCK_PATH).exists()
    write(path, rows(["k2"], ["a"], ts=5, v=v))
    assert snapshot(path)["k2"] == v


@needs_fifo
@pytest.mark.parametrize("bootstrap", ["true", "false"])
def test_fifo_named_as_the_next_log_version(two_commits: Path, bootstrap: str) -> None:
    """With the index bootstrap the writer meets the FIFO while loading keys, before an instant
    starts; without it, in the middle of the write, when it picks the log file to append to."""
    log = table_log(two_commits)
    fifo = _make_fifo(log.with_name(log.name.replace(".log.1_", ".log.2_")))
    opts = {"index.bootstrap.enabled": bootstrap}

    err = bounded(lambda: hr.read(str(two_commits)), [fifo])
    assert isinstance(err, HoodiePathError) and fifo.name in str(err), err
    err = bounded(lambda: write(two_commits, rows(["k1"], ["a"], ts=4, v=40.0), **opts), [fifo])
    assert isinstance(err, HoodiePathError) and fifo.name in str(err), err
    assert not (two_commits / LOCK_PATH).exists()  # the failed writer released its lock

    fifo.unlink()
    assert snapshot(two_commits) == {"k1": 10.0, "k2": 1.0, "k3": 11.0}
    _writer_is_free(two_commits, 50.0)


@needs_fifo
def test_fifo_named_as_a_completed_deltacommit(two_commits: Path) -> None:
    hoodie = two_commits / ".hoodie"
    last = max(p.name for p in hoodie.iterdir() if p.name.endswith(".deltacommit"))
    fifo = _make_fifo(hoodie / f"{int(last.split('.')[0]) + 1}.deltacommit")

    err = bounded(lambda: hr.read(str(two_commits)), [fifo])
    assert isinstance(err, HoodiePathError) and fifo.name in str(err), err
    err = bounded(lambda: write(two_commits, rows(["k1"], ["a"], ts=4, v=40.0)), [fifo])
    assert isinstance(err, HoodiePathError) and fifo.name in str(err), err
    # Refused, not blocked: another writer is not locked out by the failed one.
    err = bounded(lambda: write(two_commits, rows(["k1"], ["a"], ts=4, v=40.0)), [fifo])
    assert isinstance(err, HoodiePathError), err
    assert not (two_commits / LOCK_PATH).exists()

    fifo.unlink()
    _writer_is_free(two_commits, 60.0)


@needs_fifo
def test_fifo_as_the_lock_file_is_a_stale_lock(tmp_path: Path) -> None:
    """A FIFO no writer made at the lock's path is garbage, as unreadable content is: it is
    removed (never opened) and the lock is taken."""
    (tmp_path / ".hoodie" / ".aux").mkdir(parents=True)
    storage = LocalStorage(str(tmp_path))
    fifo = _make_fifo(tmp_path / LOCK_PATH)
    lock = bounded(lambda: WriterLock(storage).acquire(), [fifo])
    assert isinstance(lock, WriterLock), lock
    assert stat.S_ISREG((tmp_path / LOCK_PATH).lstat().st_mode)
    lock.release()
    assert not (tmp_path / LOCK_PATH).exists()


def test_directory_is_still_an_io_error(tmp_path: Path) -> None:
    """Reading a directory keeps failing as a storage error (it is no special file)."""
    (tmp_path / "p" / "d").mkdir(parents=True)
    storage = LocalStorage(str(tmp_path))
    with pytest.raises(hr.HoodieIOError, match="p/d"):
        storage.read_bytes("p/d")
    assert storage.local_path("p/d").endswith("d")


def test_regular_files_work_as_before(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    storage.write_bytes("p/f", b"0123")
    assert storage.append("p/f", b"45") == 4
    assert storage.size("p/f") == 6 and storage.appendable("p/f") and storage.appendable("p/g")
    with storage.open_input("p/f") as f:
        f.seek(2)
        assert f.read() == b"2345"
    with storage.open_output("p/f") as out:
        out.write(b"ab")
    assert storage.read_bytes("p/f") == b"ab"
    with pytest.raises(hr.HoodieIOError, match="not found"):
        storage.read_bytes("p/missing")
