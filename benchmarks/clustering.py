"""Clustering against a plain read + sort + write of the same files (issue 41), in one process.

Builds a table of many small file groups (``--commits`` insert commits of ``--rows`` rows over
``--partitions`` partitions, ``hoodie.parquet.small.file.limit=0``: each commit opens new
groups; version 8, no metadata table, so the clustering's own work is what is measured),
then for each repeat, on a fresh copy:

1. ``hr.cluster(path, engine="local")`` (sorted by ``--sort`` when given), CPU-seconds;
2. the baseline on the same base files: per partition ``pyarrow.parquet.read_table`` of the
   group's files, ``Table.sort_by`` the same columns, one ``pyarrow.parquet.write_table``.

``clustering_vs_plain`` = clustering rows per CPU-second / the baseline's (goal >= 0.7). The
first clustering is a warm-up (imports, the process heap) and is not reported.

Usage::

    python -m benchmarks.clustering [--commits 40] [--rows 5000] [--partitions 4]
                                    [--sort ts] [--layout linear|z-order|hilbert]
                                    [--reps 3] [--json]
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
import pyarrow.parquet as pq

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.table import HoodieTable


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def build(path: Path, commits: int, rows: int, partitions: int) -> dict[str, str]:
    opts = {
        "hoodie.table.name": "clustering_bench",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "table.type": "MERGE_ON_READ",
        "hoodie.write.table.version": "8",
        "hoodie.metadata.enable": "false",
        "hoodie.parquet.small.file.limit": "0",
        "write.operation": "insert",
        "compaction.schedule.enabled": "false",
        "hoodie.clean.automatic": "false",
    }
    rng = np.random.default_rng(41)
    client = HoodieWriteClient(str(path), opts)
    for c in range(commits):
        keys = np.arange(c * rows, (c + 1) * rows)
        client.write(
            pa.table(
                {
                    "key": pa.array([f"k{k:010d}" for k in keys]),
                    "p": pa.array([f"p{k % partitions}" for k in keys]),
                    "ts": pa.array(rng.integers(0, 10**9, rows)),
                    "v": pa.array(rng.normal(size=rows)),
                    "s": pa.array(rng.choice(["alpha", "beta", "gamma", "delta"], rows)),
                }
            )
        )
    return opts


def baseline(path: Path, sort: list[str]) -> tuple[float, int]:
    """CPU-seconds and rows of read + sort + write of every partition's latest base files."""
    slices = HoodieTable.load(str(path)).view().latest_file_slices()
    by_part: dict[str, list[Path]] = {}
    for s in slices:
        assert s.base_file is not None
        by_part.setdefault(s.partition_path, []).append(path / s.partition_path / s.base_file)
    out = Path(tempfile.mkdtemp(prefix="plain-"))
    t0 = time.process_time()
    rows = 0
    for part, files in sorted(by_part.items()):
        t = pa.concat_tables([pq.read_table(f) for f in files])
        if sort:
            t = t.sort_by([(c, "ascending") for c in sort])
        pq.write_table(t, out / f"{part}.parquet", compression="snappy")
        rows += t.num_rows
    cpu = time.process_time() - t0
    shutil.rmtree(out, ignore_errors=True)
    return cpu, rows


def clustered(
    path: Path, opts: dict[str, str], sort: list[str], layout: str = "linear"
) -> tuple[float, int]:
    extra = {"hoodie.clustering.plan.strategy.sort.columns": ",".join(sort)} if sort else {}
    extra["hoodie.layout.optimize.strategy"] = layout
    rows = sum(pq.read_metadata(f).num_rows for f in path.rglob("*.parquet"))
    t0 = time.process_time()
    res = hr.cluster(str(path), {**opts, **extra})
    cpu = time.process_time() - t0
    assert res.instant is not None
    return cpu, rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commits", type=int, default=40)
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--sort", default="ts")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--layout",
        default="linear",
        choices=["linear", "z-order", "hilbert"],
        help="the clustering's order (the baseline sorts linearly either way)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sort = [c for c in args.sort.split(",") if c]
    work = Path(tempfile.mkdtemp(prefix="clustering-bench-"))
    src = work / "src"
    log(f"building {args.commits} commits x {args.rows} rows over {args.partitions} partitions")
    opts = build(src, args.commits, args.rows, args.partitions)
    groups = len(HoodieTable.load(str(src)).view().latest_file_slices())
    ratios, ours, plain = [], [], []
    for rep in range(args.reps + 1):
        copy = work / f"rep{rep}"
        shutil.copytree(src, copy)
        cpu_c, rows = clustered(copy, opts, sort, args.layout)
        cpu_b, rows_b = baseline(src, sort)
        assert rows_b == rows, (rows_b, rows)
        if rep == 0:
            continue  # warm-up
        ours.append(rows / cpu_c)
        plain.append(rows / cpu_b)
        ratios.append((rows / cpu_c) / (rows / cpu_b))
        log(
            f"rep {rep}: clustering {rows / cpu_c:,.0f} rows/CPU-s, plain {rows / cpu_b:,.0f}, "
            f"ratio {ratios[-1]:.2f}"
        )
        shutil.rmtree(copy, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    result = {
        "shape": {
            "commits": args.commits,
            "rows_per_commit": args.rows,
            "partitions": args.partitions,
            "file_groups": groups,
            "sort": sort,
            "layout": args.layout,
            "columns": "key string, p string, ts int64, v double, s string",
        },
        "clustering_rows_per_cpu_s": statistics.median(ours) if ours else None,
        "plain_rows_per_cpu_s": statistics.median(plain) if plain else None,
        "clustering_vs_plain": statistics.median(ratios) if ratios else None,
        "goal": 0.7,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        log(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
