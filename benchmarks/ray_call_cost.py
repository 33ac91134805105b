"""What a Ray actor call costs on this machine, by its object arguments (issue 38).

    python -m benchmarks.ray_call_cost [--calls 200] [--kib 512] [--json]

A chained task's calls take object references: an assign call one routed object from every
router, a finish call one barrier object from every task. Their count per task and
checkpoint grows with the width, so what Ray charges per call and per object argument is
part of the CPU a row costs at 16 tasks. Measured here, no hoodie_ray code: one actor, and
``--calls`` calls of a method that reads the size of each argument, given 0, 1, 4, 8 and
16 references to objects of ``--kib`` KiB each (Arrow buffers, put once, fetched from the
object store by the actor: its process is not theirs), and the same references nested in a
list argument (``nested``: Ray does not resolve them; the actor fetches them in one
``ray.get``). Figures per variant: CPU
microseconds a call in the actor's process and in the driver (psutil, user + system, the
kernel's part beside it), and per object argument the difference from the call without.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import psutil
import pyarrow as pa
import ray

ARGS = (0, 1, 4, 8, 16)


@ray.remote(num_cpus=0)
class _Sink:
    """The callee: touches each argument's size, as an assign call reads its part."""

    def pid(self) -> int:
        return os.getpid()

    def take(self, *objs: Any) -> int:
        return sum(o.size for o in objs)

    def fetch(self, refs: list[Any]) -> int:
        """The same objects passed nested (Ray does not resolve them): fetched here at once."""
        return sum(o.size for o in ray.get(refs)) if refs else 0


def _cpu(p: psutil.Process) -> tuple[float, float]:
    t = p.cpu_times()
    return t.user + t.system, t.system


def measure(calls: int, kib: int, nested: bool = False) -> dict[str, Any]:
    """CPU a call, by the number of object arguments (see the module docstring)."""
    sink = _Sink.remote()  # type: ignore[attr-defined]
    actor = psutil.Process(ray.get(sink.pid.remote()))
    me = psutil.Process()
    objs = [ray.put(pa.py_buffer(os.urandom(kib << 10))) for _ in range(max(ARGS))]
    out: dict[str, Any] = {}

    def call(refs: list[Any]) -> Any:
        return sink.fetch.remote(refs) if nested else sink.take.remote(*refs)

    for n in ARGS:
        refs = objs[:n]
        ray.get([call(refs) for _ in range(20)])  # warm
        a0, as0 = _cpu(actor)
        d0, ds0 = _cpu(me)
        w0 = time.perf_counter()
        for _ in range(calls // 10):
            ray.get([call(refs) for _ in range(10)])
        wall = time.perf_counter() - w0
        a1, as1 = _cpu(actor)
        d1, ds1 = _cpu(me)
        out[str(n)] = {
            "actor_us": round(1e6 * (a1 - a0) / calls, 1),
            "actor_sys_us": round(1e6 * (as1 - as0) / calls, 1),
            "driver_us": round(1e6 * (d1 - d0) / calls, 1),
            "driver_sys_us": round(1e6 * (ds1 - ds0) / calls, 1),
            "wall_us": round(1e6 * wall / calls, 1),
        }
    base = out["0"]
    for n in ARGS[1:]:
        v = out[str(n)]
        v["actor_us_per_arg"] = round((v["actor_us"] - base["actor_us"]) / n, 1)
        v["driver_us_per_arg"] = round((v["driver_us"] - base["driver_us"]) / n, 1)
    ray.kill(sink)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--kib", type=int, default=512)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    started = not ray.is_initialized()
    if started:
        ray.init(include_dashboard=False, log_to_driver=False)
    try:
        res = {
            "benchmark": "ray_call_cost",
            "calls": args.calls,
            "kib": args.kib,
            "cores": os.cpu_count(),
            "by_object_args": measure(args.calls, args.kib),
            # the references inside a list: the actor fetches them itself, in one get
            "nested": measure(args.calls, args.kib, nested=True),
        }
    finally:
        if started:
            ray.shutdown()
    if args.json:
        print(json.dumps(res))
    else:
        for how in ("by_object_args", "nested"):
            for n, v in res[how].items():
                print(f"{how} {n:>3}: " + ", ".join(f"{k} {x}" for k, x in v.items()))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
