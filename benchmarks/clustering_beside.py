"""A stream writer with and without asynchronous clustering beside it (issue 41), on Ray.

One ``HoodieStreamWriter`` inserts ``--checkpoints`` checkpoints of ``--rows`` rows
(``write.operation=insert``, Flink's append mode; version 8 MOR; every checkpoint opens new
small file groups: ``hoodie.parquet.small.file.limit=0``), on a fresh table each run:

* ``plain``: no table services but the defaults;
* ``beside``: ``clustering.async.enabled=true`` every ``--delta-commits`` commits (sorted by
  ``--sort`` with ``--layout``), the compactor actors rewriting groups while the stream writes.

Reported per run: the writer's rows/s over its checkpoints (wall, the actors started
beforehand), CPU-s of the driver and every Ray worker (benchmarks.common.CpuMeter), the
clusterings committed and the file groups left. ``writer_ratio`` = beside rows/s / plain
rows/s (the cost the writer pays for clustering on the same cores); ``groups_ratio`` = file
groups left beside / plain (what it bought). Runs alternate plain/beside ``--reps`` times.

Usage::

    python -m benchmarks.clustering_beside [--checkpoints 48] [--rows 20000] [--reps 2]
        [--delta-commits 4] [--sort ts,v] [--layout z-order] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import hoodie_ray as hr
from benchmarks.common import CpuMeter
from hoodie_ray.table import HoodieTable


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def options(beside: bool, args: argparse.Namespace) -> dict[str, str]:
    opts = {
        "hoodie.table.name": "clustering_beside",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "table.type": "MERGE_ON_READ",
        "hoodie.write.table.version": "8",
        "write.operation": "insert",
        "hoodie.parquet.small.file.limit": "0",
        "write.tasks": str(args.tasks),
        "write.bucket_assign.tasks": str(args.tasks),
        "compaction.tasks": str(args.tasks),
    }
    if beside:
        opts |= {
            "clustering.async.enabled": "true",
            "clustering.delta_commits": str(args.delta_commits),
            "hoodie.clustering.plan.strategy.sort.columns": args.sort,
            "hoodie.layout.optimize.strategy": args.layout,
        }
    return opts


def batches(args: argparse.Namespace) -> list[pa.Table]:
    rng = np.random.default_rng(41)
    out = []
    for c in range(args.checkpoints):
        n = args.rows
        keys = pa.array([f"k{c:04d}-{i:07d}" for i in range(n)])
        out.append(
            pa.table(
                {
                    "key": keys,
                    "p": pa.array(np.char.add("p", (np.arange(n) % 4).astype(str))),
                    "ts": pa.array(rng.integers(0, 1 << 40, n)),
                    "v": pa.array(rng.random(n)),
                    "s": pa.array(np.char.add("s", rng.integers(0, 1000, n).astype(str))),
                }
            )
        )
    return out


def run(beside: bool, data: list[pa.Table], args: argparse.Namespace, root: Path) -> dict:
    path = root / ("beside" if beside else "plain")
    shutil.rmtree(path, ignore_errors=True)
    w = hr.HoodieStreamWriter(str(path), options(beside, args))
    w.start(data[0].schema)
    rows = 0
    with CpuMeter(ray_workers=True) as meter:
        t0 = time.perf_counter()
        for t in data:
            w.write(t)
            w.checkpoint()
            rows += t.num_rows
        wall = time.perf_counter() - t0
        w.close()  # a clustering still running is waited for and committed here
        total = time.perf_counter() - t0
    table = HoodieTable.load(str(path))
    clusterings = [
        i
        for i in table.active_timeline.completed()
        if i.action == "replacecommit" and table.metadata(i).operation_type == "CLUSTER"
    ]
    groups = len(table.view().latest_file_slices())
    shutil.rmtree(path, ignore_errors=True)
    return {
        "beside": beside,
        "rows": rows,
        "writer_s": round(wall, 3),
        "writer_rows_per_s": round(rows / wall),
        "with_close_s": round(total, 3),
        "cpu_s": round(meter.usage.total_cpu_s, 3),
        "clusterings": len(clusterings),
        "file_groups": groups,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoints", type=int, default=48)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--tasks", type=int, default=1)
    ap.add_argument("--delta-commits", type=int, default=4)
    ap.add_argument("--sort", default="ts,v")
    ap.add_argument("--layout", default="z-order", choices=["linear", "z-order", "hilbert"])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    import ray

    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)
    data = batches(args)
    root = Path(tempfile.mkdtemp(prefix="clustering_beside_"))
    runs: list[dict] = []
    try:
        run(False, data[:2], args, root)  # warm-up: imports, worker processes
        for _ in range(args.reps):
            for beside in (False, True):
                r = run(beside, data, args, root)
                log(json.dumps(r))
                runs.append(r)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    plain = [r for r in runs if not r["beside"]]
    bes = [r for r in runs if r["beside"]]
    report = {
        "shape": f"{args.checkpoints} checkpoints x {args.rows} rows "
        "(key string, p string (4), ts int64, v double, s string), inserts, MOR v8",
        "cpus": ray.cluster_resources().get("CPU"),
        "tasks": args.tasks,
        "clustering": f"every {args.delta_commits} commits, {args.layout} on {args.sort}",
        "runs": runs,
        "writer_ratio": round(
            statistics.median(r["writer_rows_per_s"] for r in bes)
            / statistics.median(r["writer_rows_per_s"] for r in plain),
            3,
        ),
        "cpu_ratio": round(
            statistics.median(r["cpu_s"] for r in bes)
            / statistics.median(r["cpu_s"] for r in plain),
            3,
        ),
        "groups_ratio": round(
            statistics.median(r["file_groups"] for r in bes)
            / statistics.median(r["file_groups"] for r in plain),
            3,
        ),
    }
    print(json.dumps(report, indent=None if args.json else 2))
    return report


if __name__ == "__main__":
    main()
