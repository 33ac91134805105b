"""What partial updates cost (issue 42), in one process: write and read of a partial-update
table against the same commits on a plain event-time table.

A 200K-row insert (``--rows``) in 8 partitions, then ``--commits`` upsert commits of
``--updates`` rows (updates of random existing keys, half of each row's two value columns null:
the partial records), merge-on-read, version 9, no metadata table; the same commits into a table
with ``hoodie.table.partial.update.mode=IGNORE_DEFAULTS`` and into one without (where a null
overwrites). Rows per CPU-second of the upsert commits and of a snapshot read (the logs merged
into their base files), ``*_vs_plain`` the partial table's rate over the plain one's, the same
run. ``columns``: the same commits into a plain table with ``write.partial.updates``, each
commit carrying one of the two value columns (Spark MERGE INTO's partial updates: ``IS_PARTIAL``
log blocks of that column), ``columns_*_vs_plain`` its rates over the plain table's. The
snapshot values are checked against hudi-rs on both partial tables.

Usage::

    python -m benchmarks.partial_update [--rows 200000] [--updates 40000] [--commits 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient


def _batch(keys: np.ndarray, ts: int, rng: np.random.Generator, partial: bool) -> pa.Table:
    n = len(keys)
    a = rng.random(n)
    b = rng.integers(0, 1_000_000, n)
    a_null = rng.random(n) < 0.5 if partial else np.zeros(n, dtype=bool)
    b_null = ~a_null if partial else np.zeros(n, dtype=bool)
    return pa.table(
        {
            "key": pa.array(keys.astype(str)),
            "p": pa.array((keys % 8).astype(str)),
            "ts": pa.array(np.full(n, ts, dtype=np.int64)),
            "a": pa.array(a, mask=a_null),
            "b": pa.array(b, mask=b_null),
        }
    )


def run(path: Path, mode: str, args: argparse.Namespace) -> dict[str, float]:
    """``mode``: ``plain``, ``partial`` (the table's partial update mode), ``columns``
    (``write.partial.updates``, one value column a commit)."""
    partial = mode == "partial"
    opts = {
        "hoodie.table.name": "partial_bench",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "table.type": "MERGE_ON_READ",
        "hoodie.write.table.version": "9",
        "hoodie.metadata.enable": "false",
        "compaction.schedule.enabled": "false",
        "hoodie.clean.automatic": "false",
    }
    if partial:
        opts["hoodie.table.partial.update.mode"] = "IGNORE_DEFAULTS"
    if mode == "columns":
        opts["write.partial.updates"] = "true"
        opts["index.global.enabled"] = "false"
    rng = np.random.default_rng(3)
    client = HoodieWriteClient(str(path), opts)
    client.write(_batch(np.arange(args.rows), 0, rng, False))
    cpu = 0.0
    rows = 0
    for c in range(args.commits):
        keys = rng.choice(args.rows, args.updates, replace=False)
        batch = _batch(keys, c + 1, rng, mode != "columns")
        if mode == "columns":
            batch = batch.drop_columns(["a" if c % 2 else "b"])
        t0 = time.process_time()
        client.write(batch)
        cpu += time.process_time() - t0
        rows += batch.num_rows
    t0 = time.process_time()
    snap = hr.read(str(path))
    read_cpu = time.process_time() - t0
    return {
        "write_rows_per_cpu_s": rows / cpu,
        "read_rows_per_cpu_s": snap.num_rows / read_cpu,
        "null_values_read": snap.column("a").null_count + snap.column("b").null_count,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--updates", type=int, default=40_000)
    ap.add_argument("--commits", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="partial-bench-"))
    try:
        warm = argparse.Namespace(**{**vars(args), "rows": 5000, "updates": 1000, "commits": 2})
        run(work / "warm", "partial", warm)
        run(work / "warm_columns", "columns", warm)
        plain = run(work / "plain", "plain", args)
        partial = run(work / "partial", "partial", args)
        columns = run(work / "columns", "columns", args)
        from hudi import HudiTable

        checked = True
        for name in ("partial", "columns"):
            oracle = pa.Table.from_batches(HudiTable(str(work / name)).read())
            mine = hr.read(str(work / name), columns=["key", "a", "b"]).sort_by("key")
            checked &= oracle.select(["key", "a", "b"]).sort_by("key").equals(mine)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "shape": {
            "rows": args.rows,
            "upsert_commits": args.commits,
            "rows_per_upsert": args.updates,
            "columns": "key string, p string, ts int64, a double, b int64 (half null each)",
            "table_version": 9,
            "table_type": "MERGE_ON_READ",
        },
        "plain": {k: round(v) for k, v in plain.items()},
        "partial": {k: round(v) for k, v in partial.items()},
        "write_vs_plain": round(partial["write_rows_per_cpu_s"] / plain["write_rows_per_cpu_s"], 3),
        "read_vs_plain": round(partial["read_rows_per_cpu_s"] / plain["read_rows_per_cpu_s"], 3),
        "columns": {k: round(v) for k, v in columns.items()},
        "columns_write_vs_plain": round(
            columns["write_rows_per_cpu_s"] / plain["write_rows_per_cpu_s"], 3
        ),
        "columns_read_vs_plain": round(
            columns["read_rows_per_cpu_s"] / plain["read_rows_per_cpu_s"], 3
        ),
        "hudi_rs_agrees": checked,
    }
    out = json.dumps(result, indent=2)
    print(out, file=sys.stdout if args.json else sys.stderr)
    return result


if __name__ == "__main__":
    main()
