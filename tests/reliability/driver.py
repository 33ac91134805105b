"""A writer process for the crash tests: commits deterministic batches until it is killed.

    python -m tests.reliability.driver PATH --engine client|stream --seed S --start I
        [--count N] [--options JSON] [--pace SECONDS] [--crash-at JSON] [--ray-address ADDR]
    python -m tests.reliability.driver PATH --engine operation --operation cluster|
        insert_overwrite|restore [--input FILE] [--savepoint INSTANT] [--crash-at JSON]

It writes commit ``I``, ``I+1``, ... of run ``S`` (:func:`tests.reliability.common.batch_writes`)
and prints, flushed, one line per event:

* ``OPENED <seconds>``: the table was opened (lock taken, pending writes rolled back) after
  ``<seconds>`` of waiting for the lock of a killed predecessor;
* ``BEGIN <i>``: commit ``i`` is being written;
* ``DONE <i> <instant>``: commit ``i`` is on the timeline;
* ``CLOSED``: ``--count`` commits written and the writer closed cleanly;
* ``CRASH <op> <path>``: the ``--crash-at`` hook fired; the process kills itself (SIGKILL).

``--crash-at JSON`` is a deterministic crash point: at the ``n``-th call of the storage
operation ``op`` (``write_bytes``, ``append``, ``create_new``, ``write_atomic``, ``delete``,
``delete_dir``, ``open_output``) on a path matching ``glob``, with function ``func`` on the call
stack, the operation is done only in part (``fraction`` of the bytes; for ``create_new`` and
``write_atomic`` the temporary file is left half-written, as a crash there leaves it; deletes are
done when ``fraction >= 1``; a stream from ``open_output`` is written whole, then cut to
``fraction`` of its bytes when it is closed) and the process sends itself SIGKILL. ``op="any"``
counts every one of those operations together: ``n`` is then a step of the whole run, and
``n=0`` only counts them (``STEPS <count>`` at exit).

``client`` writes each commit with :class:`~hoodie_ray.job.client.HoodieWriteClient` (one
process, inline compaction); ``stream`` runs a :class:`hoodie_ray.HoodieStreamWriter` on an
embedded local Ray (or joins ``--ray-address``: a cluster that outlives the driver) with
asynchronous compaction, two writes per checkpoint. ``operation`` runs one table operation
(a clustering, an insert_overwrite, a restore) and prints ``DONE 0 <instant>``.

A writer that finds the lock of a killed writer waits for its heartbeat to expire
(``hoodie.write.lock.expire_ms``): it gets :class:`~hoodie_ray.HoodieCommitConflictError` until
then, and retries in a bounded loop.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

LOCK_WAIT_LIMIT_S = 60.0
HOOKED_OPS = (
    "write_bytes",
    "append",
    "create_new",
    "write_atomic",
    "delete",
    "delete_dir",
    "open_output",
)


def _say(*parts: Any) -> None:
    print(*parts, flush=True)


def _retry_conflicts(fn: Any) -> tuple[Any, float]:
    """Run ``fn`` until it stops raising HoodieCommitConflictError; (result, seconds waited)."""
    from hoodie_ray.exceptions import HoodieCommitConflictError

    t0 = time.monotonic()
    while True:
        try:
            return fn(), time.monotonic() - t0
        except HoodieCommitConflictError:
            if time.monotonic() - t0 > LOCK_WAIT_LIMIT_S:
                raise
            time.sleep(0.05)


def install_crash_hook(spec: dict[str, Any]) -> None:
    """Wrap LocalStorage operations so the ``n``-th matching call crashes the process: one
    operation (``op``), or ``op="any"``: every hooked operation, counted together (a crash at
    each step of a table operation). ``n=0`` crashes nowhere and prints ``STEPS <count>`` at
    exit (how many steps there are)."""
    import atexit
    import fnmatch
    import os
    import signal

    from hoodie_ray.storage import LocalStorage, payload_pieces

    op = spec["op"]
    if op != "any" and op not in HOOKED_OPS:
        raise SystemExit(f"unknown crash op {op}")
    glob = spec.get("glob", "*")
    func = spec.get("func")
    nth = int(spec.get("n", 1))
    fraction = float(spec.get("fraction", 0.5))
    calls = [0]
    if nth == 0:
        atexit.register(lambda: _say("STEPS", calls[0]))

    def on_stack(name: str) -> bool:
        f = sys._getframe(2)
        while f is not None:
            if f.f_code.co_name == name:
                return True
            f = f.f_back
        return False

    def partial(name: str, real: Any, self: LocalStorage, rel: str, args: tuple) -> None:
        if fraction < 0:
            return  # crash just before the operation
        path = self._abs(rel)
        if name in ("write_bytes", "append", "create_new", "write_atomic"):
            data = b"".join(payload_pieces(args[0]))  # bytes, or a log block's pieces
            part = data[: int(len(data) * fraction)]
            if name in ("create_new", "write_atomic"):
                path = self._temp_for(path)  # the rename / link never happens
            self._parent(path)
            with open(path, "ab" if name == "append" else "wb") as f:
                f.write(part)
                f.flush()
                os.fsync(f.fileno())
        elif fraction >= 1:
            real(self, rel, *args)

    class CutStream:
        """A stream whose close keeps ``fraction`` of the bytes written, then kills."""

        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def __enter__(self) -> CutStream:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()

        def close(self) -> None:
            f = self._inner
            f.flush()
            os.ftruncate(f.fileno(), int(f.tell() * max(fraction, 0.0)))
            os.fsync(f.fileno())
            os.kill(os.getpid(), signal.SIGKILL)

    def hook(name: str) -> None:
        real = getattr(LocalStorage, name)

        def hooked(self: LocalStorage, rel: str, *args: Any, **kw: Any) -> Any:
            if fnmatch.fnmatch(rel, glob) and (func is None or on_stack(func)):
                calls[0] += 1
                if calls[0] == nth:
                    _say("CRASH", name, rel)
                    if name == "open_output":
                        return CutStream(real(self, rel, *args, **kw))
                    partial(name, real, self, rel, args)
                    os.kill(os.getpid(), signal.SIGKILL)
            return real(self, rel, *args, **kw)

        setattr(LocalStorage, name, hooked)

    for name in HOOKED_OPS if op == "any" else (op,):
        hook(name)


def run_client(args: argparse.Namespace, options: dict[str, str]) -> None:
    from hoodie_ray.job.client import HoodieWriteClient
    from tests.reliability.common import batch_table, batch_writes

    idx = args.start
    first = True
    while args.count is None or idx < args.start + args.count:
        (rows,) = batch_writes(args.seed, idx, 1)
        table = batch_table(rows)
        _say("BEGIN", idx)
        result, waited = _retry_conflicts(
            lambda t=table: HoodieWriteClient(args.path, options).write(t)
        )
        if first:
            _say("OPENED", f"{waited:.3f}")
            first = False
        if result.instant is None:
            raise SystemExit(f"commit {idx} wrote nothing")
        _say("DONE", idx, result.instant)
        idx += 1
        if args.pace:
            time.sleep(args.pace)
    _say("CLOSED")


def run_stream(args: argparse.Namespace, options: dict[str, str]) -> None:
    import hoodie_ray as hr
    from hoodie_ray.ray.runtime import ensure_ray
    from tests.reliability.common import batch_table, batch_writes

    if args.ray_address:
        ensure_ray(args.ray_address, log_to_driver=False)  # a cluster that outlives the driver
    else:
        ensure_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    w = hr.HoodieStreamWriter(args.path, options)
    idx = args.start
    first = True
    while args.count is None or idx < args.start + args.count:
        parts = batch_writes(args.seed, idx, 2)
        _say("BEGIN", idx)
        for part in parts:
            if first:
                _, waited = _retry_conflicts(lambda p=part: w.write(batch_table(p)))
                _say("OPENED", f"{waited:.3f}")
                first = False
            else:
                w.write(batch_table(part))
        instant = w.checkpoint()
        if instant is None:
            raise SystemExit(f"commit {idx} wrote nothing")
        _say("DONE", idx, instant)
        idx += 1
        if args.pace:
            time.sleep(args.pace)
    w.close()
    _say("CLOSED")


def run_operation(args: argparse.Namespace, options: dict[str, str]) -> None:
    """One table operation (``--operation``): ``cluster``, ``insert_overwrite`` of the rows in
    ``--input`` (a Parquet file), or ``restore`` to savepoint ``--savepoint``."""
    import pyarrow.parquet as pq

    import hoodie_ray as hr
    from hoodie_ray.job.client import HoodieWriteClient

    _say("OPENED", "0")
    if args.operation == "cluster":
        res = hr.cluster(args.path, options)
        _say("DONE", 0, res.instant)
    elif args.operation == "insert_overwrite":
        table = pq.read_table(args.input)
        ops = {**options, "write.operation": "insert_overwrite"}
        result, _ = _retry_conflicts(lambda: HoodieWriteClient(args.path, ops).write(table))
        _say("DONE", 0, result.instant)
    elif args.operation == "restore":
        res = hr.restore(args.path, args.savepoint, options=options)
        _say("DONE", 0, res.instant)
    else:
        raise SystemExit(f"unknown operation {args.operation}")
    _say("CLOSED")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("path")
    p.add_argument("--engine", choices=("client", "stream", "operation"), default="client")
    p.add_argument("--operation", choices=("cluster", "insert_overwrite", "restore"))
    p.add_argument("--input", default=None)
    p.add_argument("--savepoint", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--count", type=int, default=None)
    p.add_argument("--options", default="{}")
    p.add_argument("--pace", type=float, default=0.0)
    p.add_argument("--crash-at", default=None)
    p.add_argument("--ray-address", default=None)
    args = p.parse_args(argv)
    options = json.loads(args.options)
    if args.crash_at:
        install_crash_hook(json.loads(args.crash_at))
    if args.engine == "client":
        run_client(args, options)
    elif args.engine == "operation":
        run_operation(args, options)
    else:
        run_stream(args, options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
