"""What change data capture costs (issue 42), in one process: CDC on write and the CDC read.

1. **On write.** The same copy-on-write upserts (``--commits`` commits of ``--updates`` rows,
   half updates of random existing keys, half inserts, over a table of ``--rows`` rows in
   ``--partitions`` partitions, version 8, no metadata table) written with CDC off and with
   each supplemental logging mode (``hoodie.table.cdc.enabled``: ``.cdc`` log files beside
   every merged base file). Rows per CPU-second of the upsert commits; ``*_vs_off`` is a
   mode's rate over the rate with CDC off, the same run.
2. **On read.** Over the same range of commits of a merge-on-read table, of the CDC-off
   copy-on-write table (changes inferred from the file slices) and of the
   ``DATA_BEFORE_AFTER`` one (changes read from its ``.cdc`` files): the CDC query
   (``incremental_format="cdc"``, rows = changes) against the plain incremental query
   (``latest_state``, rows = records) of the same range, rows per CPU-second each;
   ``cdc_vs_incremental`` their ratio.

3. **Changelog mode** (``changelog.enabled``, merge-on-read): the same upserts with it and
   without it (``write_vs_off``), and its read (``incremental_format="changelog"``, every
   change unmerged) against the plain incremental query of the same range.

4. **Compaction** of a merge-on-read table written with the same commits, CDC off and on
   (``OP_KEY_ONLY``, ``DATA_BEFORE_AFTER``: the compaction logs its changes in ``.cdc`` files,
   as Hudi 1.1's does): rows of the compacted table per CPU-second of the compaction,
   ``vs_off`` each mode's over CDC off.

Every table is written fresh; a warm-up write and read come first (imports, the heap).

Usage::

    python -m benchmarks.cdc [--rows 200000] [--updates 40000] [--commits 5]
                             [--partitions 8] [--json]
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

MODES = ("OP_KEY_ONLY", "DATA_BEFORE", "DATA_BEFORE_AFTER")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _batch(keys: np.ndarray, partitions: int, ts: int, rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "key": pa.array([f"k{k:010d}" for k in keys]),
            "p": pa.array([f"p{k % partitions}" for k in keys]),
            "ts": pa.array(np.full(len(keys), ts, np.int64)),
            "v": pa.array(rng.normal(size=len(keys))),
            "s": pa.array(rng.choice(["alpha", "beta", "gamma", "delta"], len(keys))),
        }
    )


def write_table(
    path: Path,
    table_type: str,
    mode: str | None,
    args: argparse.Namespace,
    extra: dict[str, str] | None = None,
) -> tuple[float, int, list[str]]:
    """Write the table: CPU-s and rows of the upsert commits, and every commit's instant."""
    opts = {
        "hoodie.table.name": "cdc_bench",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "table.type": table_type,
        "hoodie.write.table.version": "8",
        "hoodie.metadata.enable": "false",
        "compaction.schedule.enabled": "false",
        "hoodie.clean.automatic": "false",
        **(extra or {}),
    }
    if mode is not None:
        opts["hoodie.table.cdc.enabled"] = "true"
        opts["hoodie.table.cdc.supplemental.logging.mode"] = mode
    rng = np.random.default_rng(42)
    client = HoodieWriteClient(str(path), opts)
    instants = [client.write(_batch(np.arange(args.rows), args.partitions, 0, rng)).instant]
    cpu = 0.0
    rows = 0
    next_key = args.rows
    for c in range(args.commits):
        half = args.updates // 2
        old = rng.choice(next_key, half, replace=False)
        new = np.arange(next_key, next_key + args.updates - half)
        next_key += len(new)
        batch = _batch(np.concatenate([old, new]), args.partitions, c + 1, rng)
        t0 = time.process_time()
        instants.append(client.write(batch).instant)
        cpu += time.process_time() - t0
        rows += batch.num_rows
    return cpu, rows, [i for i in instants if i]


def read_range(path: Path, begin: str, end: str, fmt: str) -> tuple[float, int]:
    """CPU-s and rows of a read of the commits requested in (begin, end]: the CDC query takes
    requested times, the other incremental queries of version 8 completion times."""
    if fmt != "cdc":
        done = {i.timestamp: i.completion_time for i in hr.HoodieTable.load(str(path)).commits()}
        begin, end = done[begin] or begin, done[end] or end
    t0 = time.process_time()
    t = hr.read(str(path), query_type="incremental", incremental_format=fmt, begin=begin, end=end)
    return time.process_time() - t0, t.num_rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--updates", type=int, default=40_000)
    ap.add_argument("--commits", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="cdc-bench-"))
    try:
        warm = argparse.Namespace(**{**vars(args), "rows": 5000, "updates": 1000, "commits": 2})
        _, _, inst = write_table(work / "warm", "COPY_ON_WRITE", "DATA_BEFORE_AFTER", warm)
        read_range(work / "warm", inst[0], inst[-1], "cdc")
        write: dict[str, Any] = {}
        written: dict[str, list[str]] = {}
        for mode in (None, *MODES):
            name = mode or "off"
            cpu, rows, instants = write_table(work / f"cow-{name}", "COPY_ON_WRITE", mode, args)
            written[name] = instants
            cdc_bytes = sum(f.stat().st_size for f in (work / f"cow-{name}").rglob(".*.cdc"))
            write[name] = {"rows_per_cpu_s": round(rows / cpu), "cdc_bytes": cdc_bytes}
            log(f"write, CDC {name}: {rows / cpu:,.0f} rows/CPU-s, .cdc bytes {cdc_bytes:,}")
        off = write["off"]["rows_per_cpu_s"]
        for mode in MODES:
            write[mode]["vs_off"] = round(write[mode]["rows_per_cpu_s"] / off, 3)
        read: dict[str, Any] = {}
        for name in ("mor", "cow", "cow_cdc_files"):
            if name == "cow":
                path, instants = work / "cow-off", written["off"]
            elif name == "cow_cdc_files":  # the changes read from the .cdc files (AS_IS)
                path, instants = work / "cow-DATA_BEFORE_AFTER", written["DATA_BEFORE_AFTER"]
            else:
                path = work / "read-mor"
                instants = write_table(path, "MERGE_ON_READ", None, args)[2]
            begin, end = instants[0], instants[-1]
            cpu_c, rows_c = read_range(path, begin, end, "cdc")
            cpu_i, rows_i = read_range(path, begin, end, "latest_state")
            read[name] = {
                "cdc_rows": rows_c,
                "cdc_rows_per_cpu_s": round(rows_c / cpu_c),
                "incremental_rows": rows_i,
                "incremental_rows_per_cpu_s": round(rows_i / cpu_i),
                "cdc_vs_incremental": round((rows_c / cpu_c) / (rows_i / cpu_i), 3),
            }
            log(f"read {name}: {read[name]}")
        # Flink's changelog mode on merge-on-read: the same upserts written with it, and its
        # read (every change unmerged) against the plain incremental query
        on = {"changelog.enabled": "true"}
        cpu_off, rows_off, _ = write_table(work / "mor-plain", "MERGE_ON_READ", None, args)
        cpu_on, rows_on, instants = write_table(work / "mor-cl", "MERGE_ON_READ", None, args, on)
        cpu_c, rows_c = read_range(work / "mor-cl", instants[0], instants[-1], "changelog")
        cpu_i, rows_i = read_range(work / "mor-cl", instants[0], instants[-1], "latest_state")
        changelog = {
            "write_rows_per_cpu_s": round(rows_on / cpu_on),
            "write_vs_off": round((rows_on / cpu_on) / (rows_off / cpu_off), 3),
            "read_rows": rows_c,
            "read_rows_per_cpu_s": round(rows_c / cpu_c),
            "read_vs_incremental": round((rows_c / cpu_c) / (rows_i / cpu_i), 3),
        }
        log(f"changelog: {changelog}")
        compaction: dict[str, Any] = {}
        for mode in (None, "OP_KEY_ONLY", "DATA_BEFORE_AFTER"):
            name = mode or "off"
            path = work / f"mor-compact-{name}"
            write_table(path, "MERGE_ON_READ", mode, args)
            t0 = time.process_time()
            done = hr.compact(str(path)).instant
            cpu = time.process_time() - t0
            assert done is not None
            rows = hr.read(str(path), columns=["key"]).num_rows
            cdc_bytes = sum(f.stat().st_size for f in path.rglob(".*.cdc"))
            compaction[name] = {"rows_per_cpu_s": round(rows / cpu), "cdc_bytes": cdc_bytes}
        for mode in ("OP_KEY_ONLY", "DATA_BEFORE_AFTER"):
            compaction[mode]["vs_off"] = round(
                compaction[mode]["rows_per_cpu_s"] / compaction["off"]["rows_per_cpu_s"], 3
            )
        log(f"compaction: {compaction}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "shape": {
            "rows": args.rows,
            "upsert_commits": args.commits,
            "rows_per_upsert": args.updates,
            "updates_share": 0.5,
            "partitions": args.partitions,
            "columns": "key string, p string, ts int64, v double, s string",
            "table_version": 8,
        },
        "write": write,
        "read": read,
        "changelog": changelog,
        "compaction": compaction,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        log(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
