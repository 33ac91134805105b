"""Small commits from a loop: the latency of a 10-row ``hr.write`` on Ray after the first call.

A user writing from a notebook or a loop calls ``hr.write`` many times with a few rows. The first
call on Ray pays Ray's and the topology's start-up; the later ones should pay only their own
work (the topology stays warm between calls, ``write.warm_idle_s``). This measures, in one run:

* ``ray``: ``--calls`` calls of ``hr.write(10 rows, engine="ray")`` to one table (a MOR table with
  the default options: inline compaction every 5 commits, cleaning, archival), timing each call;
* ``local``: the same calls with ``engine="local"`` (no Ray) to another table.

Figures: the first call, the median and p90 of the others, and ``ratio_to_local`` = median on
Ray / median locally. Goals (issue #22): median <= 0.3 s and ratio <= 3.

Usage: ``python -m benchmarks.small_commits [--calls N] [--rows R] [--json]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

import hoodie_ray as hr
from benchmarks.common import print_report

OPTIONS = {
    "hoodie.table.name": "small",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "precombine.field": "ts",
}


def _rows(i: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": [f"k{(i * n + j) % 500}" for j in range(n)],
            "city": ["sf", "la"] * (n // 2) + ["sf"] * (n % 2),
            "ts": [i] * n,
            "fare": [float(j) for j in range(n)],
        }
    )


def _calls(path: str, engine: str, calls: int, rows: int) -> list[float]:
    out = []
    for i in range(calls):
        t0 = time.perf_counter()
        hr.write(_rows(i, rows), path, OPTIONS, engine=engine)
        out.append(time.perf_counter() - t0)
    return out


def _summary(lat: list[float]) -> dict[str, float]:
    rest = sorted(lat[1:])
    return {
        "first_s": round(lat[0], 3),
        "median_s": round(statistics.median(rest), 4),
        "p90_s": round(rest[int(0.9 * (len(rest) - 1))], 4),
    }


def run(calls: int, rows: int, root: Path) -> dict[str, Any]:
    ray_lat = _calls(str(root / "ray"), "ray", calls, rows)
    local_lat = _calls(str(root / "local"), "local", calls, rows)
    from hoodie_ray.ray.stream import release_warm_writers

    release_warm_writers()
    out: dict[str, Any] = {"benchmark": "small_commits", "calls": calls, "rows_per_call": rows}
    out.update({f"ray_{k}": v for k, v in _summary(ray_lat).items()})
    out.update({f"local_{k}": v for k, v in _summary(local_lat).items()})
    out["ratio_to_local"] = round(out["ray_median_s"] / out["local_median_s"], 2)
    out["ray_rows"] = hr.read(str(root / "ray")).num_rows
    out["local_rows"] = hr.read(str(root / "local")).num_rows
    if out["ray_rows"] != out["local_rows"]:
        raise SystemExit(f"the two tables differ: {out['ray_rows']} vs {out['local_rows']} rows")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--rows", type=int, default=10)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="small_commits_"))
    try:
        res = run(args.calls, args.rows, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_report(res, args.json, 20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
