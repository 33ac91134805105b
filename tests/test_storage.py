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
from hoodie_ray.exceptions import HoodieIOError
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
