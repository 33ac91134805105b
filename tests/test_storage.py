"""Storage writes a process may not make (permissions, an immutable or read-only folder) are a
:class:`HoodieIOError` naming the path and what was tried, with no temporary file left behind;
on Ray the same error, not a ``RayTaskError``.

We run as root here, and a folder's mode does not stop root: the faults are a ``PermissionError``
injected into the storage's write, and an immutable folder (``chattr +i``, which stops root
too; skipped where the file system or the container does not allow it).
"""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray import storage as storage_module
from hoodie_ray.exceptions import HoodieIOError, HoodiePathError
from hoodie_ray.storage import LocalStorage
from hoodie_ray.write.lock import LOCK_PATH
from tests.conftest import hudi_rs_read

OPTIONS = {
    "hoodie.table.name": "perm",
    "hoodie.datasource.write.recordkey.field": "id",
    "precombine.field": "ts",
    "write.tasks": "1",
}
AUX = ".hoodie/.aux"


def _rows(ids: list[str], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids)})


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _ids(path: Path) -> list[str]:
    return sorted(hudi_rs_read(path).column("id").to_pylist())


@contextlib.contextmanager
def immutable(folder: Path) -> Iterator[None]:
    """``folder`` immutable (no file created, deleted or renamed in it, root included)."""
    try:
        done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
    except OSError as e:
        pytest.skip(f"chattr is not available: {e}")
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not allowed here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_refused_write_is_a_hoodie_io_error_naming_the_path(tmp_path: Path, monkeypatch):
    storage = LocalStorage(str(tmp_path))
    real_open = open

    def refused(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file).endswith(".tmp"):
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(storage_module, "open", refused, raising=False)
    for call in (
        lambda: storage.write_atomic("a/x", b"1"),
        lambda: storage.create_new("a/y", b"1"),
    ):
        with pytest.raises(HoodieIOError, match=r"cannot (write|create) .*/a/[xy]: Permission"):
            call()
    assert _files(tmp_path) == {"a"}  # the folder it made; no temporary file
    # errors that are not "may not write here" keep their type (callers tell them apart)
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        storage.makedirs("f/g")


def test_a_lock_the_user_may_not_create_is_a_hoodie_io_error(tmp_path: Path, monkeypatch):
    """The first thing a writer writes is its lock: the error names it and the table."""
    path = tmp_path / "t"
    hr.write(_rows(["a"], 1), str(path), OPTIONS, engine="local")
    before = _files(path)
    real_open = open

    def refused(file: Any, *args: Any, **kwargs: Any) -> Any:
        if ".hoodie_ray.writer.lock." in str(file):
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(storage_module, "open", refused, raising=False)
    with pytest.raises(HoodieIOError) as info:
        hr.write(_rows(["b"], 2), str(path), OPTIONS, engine="local")
    message = str(info.value)
    assert f"writer lock of {path}" in message and str(path / LOCK_PATH) in message, message
    assert "Permission denied" in message
    assert _files(path) == before
    assert _ids(path) == ["a"]


@pytest.mark.parametrize("engine", ["local", pytest.param("ray", marks=pytest.mark.ray)])
def test_writing_a_table_whose_folder_refuses_root(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if engine == "ray":
        request.getfixturevalue("ray_session")
    path = tmp_path / "t"
    hr.write(_rows(["a"], 1), str(path), OPTIONS, engine="local")
    before = _files(path)
    with immutable(path / AUX), pytest.raises(HoodieIOError) as info:
        hr.write(_rows(["b"], 2), str(path), {**OPTIONS, "write.warm_idle_s": "0"}, engine=engine)
    assert type(info.value) is HoodieIOError  # itself, not wrapped in a RayTaskError
    assert f"cannot take the writer lock of {path}" in str(info.value), str(info.value)
    assert _files(path) == before
    assert _ids(path) == ["a"]
    hr.write(_rows(["b"], 2), str(path), OPTIONS, engine="local")  # nothing left to clean up
    assert _ids(path) == ["a", "b"]


def test_paths_are_resolved_through_links_only_where_a_component_is_one(tmp_path: Path) -> None:
    """``LocalStorage`` checks each component below the base with ``lstat``; a symbolic link
    among them is resolved: one leading inside the table is followed, one leading outside is
    refused, and what does not exist yet is a plain path."""
    from hoodie_ray.exceptions import HoodiePathError

    base = tmp_path / "t"
    (base / "p" / "q").mkdir(parents=True)
    (base / "p" / "q" / "f").write_bytes(b"x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_bytes(b"y")
    (base / "inner").symlink_to(base / "p", target_is_directory=True)
    (base / "outer").symlink_to(outside, target_is_directory=True)
    (base / "p" / "lf").symlink_to(outside / "f")
    s = LocalStorage(str(base))

    path, st = s.local_file("p/q/f")
    assert path == str(base / "p" / "q" / "f") and st is not None and st.st_size == 1
    assert s.read_bytes("inner/q/f") == b"x"  # a link that stays inside
    assert s.local_file("p/missing/f") == (str(base / "p" / "missing" / "f"), None)
    for rel in ("outer/f", "p/lf", "outer/new"):
        with pytest.raises(HoodiePathError, match="symbolic link"):
            s.local_path(rel)


def test_an_empty_file_is_created_once_and_never_through_a_link(tmp_path: Path) -> None:
    """Markers: an empty ``create_new`` is one exclusive create (no temporary file); a second
    call creates nothing, and a name linked outside the table is refused as before."""
    storage = LocalStorage(str(tmp_path / "t"))
    assert storage.create_new(".hoodie/.temp/1/p/f.marker.APPEND", b"") is True
    assert storage.create_new(".hoodie/.temp/1/p/f.marker.APPEND", b"") is False
    marker = tmp_path / "t" / ".hoodie/.temp/1/p/f.marker.APPEND"
    assert marker.read_bytes() == b"" and sorted(p.name for p in marker.parent.iterdir()) == [
        marker.name
    ]
    outside = tmp_path / "outside"
    (marker.parent / "g.marker.CREATE").symlink_to(outside)
    with pytest.raises(HoodiePathError, match="outside the table"):
        storage.create_new(".hoodie/.temp/1/p/g.marker.CREATE", b"")
    assert not outside.exists()


def test_only_object_stores_coalesce_parquet_reads(tmp_path: Path) -> None:
    """pyarrow's ``pre_buffer`` (a row group's column chunks fetched ahead, coalesced) saves
    requests on an object store; on a local file it is a thread hand-off per file for nothing
    (~0.1 ms, a fifth of reading a 2,000-row base file)."""
    assert LocalStorage(str(tmp_path)).coalesce_reads is False
    assert storage_module.ArrowStorage("mock://bucket/t").coalesce_reads is True


def test_large_payloads_reach_the_kernel_in_chunks(tmp_path: Path, monkeypatch) -> None:
    """Appends and writes hand the kernel at most ``WRITE_CHUNK_BYTES`` a call (a single
    multi-megabyte write is several times dearer on a VM that reports free pages), and the
    bytes land whole and in order, whatever the pieces' types."""
    monkeypatch.setattr(storage_module, "WRITE_CHUNK_BYTES", 1000)
    sizes: list[int] = []

    class Recording:
        """A file whose writes are recorded (what the buffered file hands on is no larger)."""

        def __init__(self, f: Any) -> None:
            self.f = f

        def write(self, b: Any) -> int:
            sizes.append(memoryview(b).nbytes)
            return self.f.write(b)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.f, name)

        def __enter__(self) -> Recording:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

    real_fdopen = storage_module.os.fdopen
    monkeypatch.setattr(
        storage_module.os, "fdopen", lambda *a, **k: Recording(real_fdopen(*a, **k))
    )
    big = bytes(range(256)) * 20  # 5,120 bytes
    pieces = [b"head", pa.py_buffer(big), memoryview(big)[:2500], bytearray(b"tail")]
    want = b"head" + big + big[:2500] + b"tail"
    st = LocalStorage(str(tmp_path))
    assert st.append("log", pieces) == 0
    assert max(sizes) == 1000 and len(sizes) == 1 + 6 + 3 + 1
    sizes.clear()
    assert st.append("log", [big]) == len(want)
    assert max(sizes) == 1000 and len(sizes) == 6
    assert (tmp_path / "log").read_bytes() == want + big
    sizes.clear()
    st.write_bytes("whole", pieces)
    assert max(sizes) == 1000 and len(sizes) == 11
    assert (tmp_path / "whole").read_bytes() == want
