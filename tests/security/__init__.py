"""Security tests (docs/SECURITY.md): hostile partition values, crafted tables, planted secrets.

Helpers shared by the modules of this package:

* :func:`write` -- one commit through :class:`HoodieWriteClient` (single process, no Ray).
* :func:`tree` -- every entry below a directory, symbolic links not followed, with sizes and
  content digests, to prove that nothing outside a table was created, changed or deleted.
* :class:`FileAudit` -- a Python audit hook recording every file-system call (open, delete,
  rename, listing, mkdir...) that reaches a forbidden directory, to prove nothing outside the
  table was even opened or listed.
* :class:`CodeAudit` -- the same hook recording imports of a module, any unpickling of a class,
  and compiled or exec'd source that names the module, to prove table content ran no code.
* :func:`bounded` -- runs a call, returns its outcome and the peak Python memory (tracemalloc)
  and RSS growth while it ran.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

OPTIONS: dict[str, str] = {
    "hoodie.table.name": "sec",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "precombine.field": "ts",
    "compaction.schedule.enabled": "false",
    "clean.async.enabled": "false",
}


def rows(ids: list[str], parts: list[Any], ts: int = 1, v: float = 0.0) -> pa.Table:
    """Input rows: record key ``id``, partition field ``p``, ordering field ``ts``, value ``v``."""
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "p": pa.array(parts, pa.string()),
            "ts": pa.array([ts] * n, pa.int64()),
            "v": pa.array([v + i for i in range(n)], pa.float64()),
        }
    )


def write(path: Path | str, table: pa.Table, **options: str) -> Any:
    """One commit of ``table`` to ``path`` (single process); returns the CommitResult."""
    from hoodie_ray.job.client import HoodieWriteClient

    return HoodieWriteClient(str(path), {**OPTIONS, **options}).write(table)


def tree(root: Path, skip: Path | None = None) -> dict[str, tuple[str, int, str]]:
    """Every entry below ``root`` (``skip`` excluded): relative path -> (kind, size, sha1).

    Symbolic links are listed as links (their target as the digest), never followed.
    """
    out: dict[str, tuple[str, int, str]] = {}
    skip_s = str(skip) if skip is not None else None
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if skip_s is not None and (dirpath == skip_s or dirpath.startswith(skip_s + os.sep)):
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if skip_s is not None and p == skip_s:
                continue
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", 0, os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir", 0, "")
            else:
                with open(p, "rb") as f:
                    data = f.read()
                out[rel] = ("file", len(data), hashlib.sha1(data).hexdigest())
    return out


# -- file-system audit ----------------------------------------------------------------------------

_FS_EVENTS = {
    "open",
    "os.remove",
    "os.rmdir",
    "os.rename",
    "os.link",
    "os.symlink",
    "os.truncate",
    "os.mkdir",
    "os.listdir",
    "os.scandir",
    "os.chmod",
    "os.chown",
    "os.utime",
    "shutil.rmtree",
    "shutil.copyfile",
    "shutil.move",
}
_active: list[Any] = []
_guard = threading.local()
_installed = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _active or getattr(_guard, "busy", False):
        return
    _guard.busy = True
    try:
        for auditor in list(_active):
            auditor.see(event, args)
    except Exception:  # an audit hook must never break the code under test
        pass
    finally:
        _guard.busy = False


class _Audit:
    def __enter__(self) -> Any:
        global _installed
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
        _active.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _active.remove(self)

    def see(self, event: str, args: tuple[Any, ...]) -> None:
        raise NotImplementedError


class FileAudit(_Audit):
    """Records Python-level file-system calls that reach any of ``forbidden`` (real paths).

    Covers ``open``, deletes, renames, links, listings, mkdir, chmod... of Python code; Arrow's
    C++ file opens are not audited (the crafted files hold rows the test looks for instead).
    """

    def __init__(self, *forbidden: Path) -> None:
        self.forbidden = [os.path.realpath(f) for f in forbidden]
        self.hits: list[tuple[str, str]] = []

    def see(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in _FS_EVENTS:
            return
        for a in args[:2]:
            if isinstance(a, (str, bytes, os.PathLike)):
                p = os.fsdecode(a)
                real = os.path.realpath(p)
                if any(real == f or real.startswith(f + os.sep) for f in self.forbidden):
                    self.hits.append((event, p))


class CodeAudit(_Audit):
    """Records imports of modules named ``name*``, any unpickling of a class, and compiling or
    exec-ing source that mentions ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.hits: list[tuple[str, str]] = []

    def see(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "import" and str(args[0]).startswith(self.name):
            self.hits.append((event, str(args[0])))
        elif event == "pickle.find_class":
            self.hits.append((event, f"{args[0]}.{args[1]}"))
        elif event in ("compile", "exec") and args:
            src = args[0]
            text = src.decode("latin-1") if isinstance(src, bytes) else src
            if isinstance(text, str) and self.name in text:
                self.hits.append((event, text[:80]))


# -- bounded memory ---------------------------------------------------------------------------------


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


@contextmanager
def _rss_sampler() -> Iterator[dict[str, int]]:
    out = {"base": _rss(), "peak": 0}
    out["peak"] = out["base"]
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            out["peak"] = max(out["peak"], _rss())
            stop.wait(0.002)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield out
    finally:
        stop.set()
        t.join()
        out["peak"] = max(out["peak"], _rss())


def bounded(fn: Callable[[], Any]) -> tuple[Any, BaseException | None, int, int, float]:
    """Run ``fn``: (result, exception, tracemalloc peak bytes, RSS growth bytes, seconds).

    Where this process runs Ray (the suite's session, started by an earlier test) nothing is
    traced (0) and the RSS bound stands alone: tracemalloc can crash in ``traceback_new`` when
    one of Ray's threads allocates without a Python frame (a CI run, 2026-11-29)."""
    result: Any = None
    error: BaseException | None = None
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        t0 = time.perf_counter()
        with _rss_sampler() as rss:
            try:
                result = fn()
            except Exception as e:
                error = e
        return result, error, 0, rss["peak"] - rss["base"], time.perf_counter() - t0
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with _rss_sampler() as rss:
            try:
                result = fn()
            except Exception as e:
                error = e
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, error, peak, rss["peak"] - rss["base"], time.perf_counter() - t0
