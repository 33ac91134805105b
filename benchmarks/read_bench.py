"""Read benchmark: merge-on-read snapshot and read-optimized reads, as ratios in one run.

Builds a q1-shaped MOR table (``key`` int64, ``ts`` int64, ``name`` string, ``c0``..``c9``
int64; see ``../shared/bench/mor-q1.md``): one bulk insert of ``--keys`` records, then
``--commits`` upserts of ``--update-frac`` x keys each (random existing keys, later ``ts``),
written by ``HoodieWriteClient`` (engine local, compaction off) -- or, if the writer cannot
run, by the reader tests' table builder (Parquet base files, Parquet log blocks, JSON commits).

Then, after a correctness gate (our snapshot equals hudi-rs's: same keys, same values):

* snapshot: ``hr.read(path)`` rows/s vs hudi-rs ``HudiTable(path).read()`` (target >= 0.5x);
* read_optimized: ``hr.read(path, query_type="read_optimized")`` vs ``pyarrow.parquet``
  reading the same base files (target >= 0.8x).

Each figure is the best of ``--repeat`` runs (wall time; the machine is shared and noisy).

Usage::

    python -m benchmarks.read_bench [--keys 1000000] [--commits 3] [--update-frac 0.3]
                                    [--block-format parquet|avro] [--max-file-bytes N]
                                    [--repeat 3] [--json]

Many small log blocks (a streaming writer's): ``--keys 100000 --commits 20
--update-frac 0.05 --max-file-bytes 2048000`` gives 50 file groups of 20 blocks of ~100 rows.
                                    [--profile] [--keep DIR]
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
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.common import best_of, make_q1_table

SEED = 20250101
TS_BASE = 1_700_000_000_000


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- building the table ---------------------------------------------------------------------------


def commits(keys: int, n_commits: int, frac: float) -> list[pa.Table]:
    """The bulk insert, then the upserts (each a random subset of the keys, unique)."""
    rng = np.random.default_rng(SEED)
    out = [make_q1_table(np.arange(keys, dtype=np.int64), np.full(keys, TS_BASE), rng)]
    for i in range(n_commits):
        upd = np.sort(rng.choice(keys, size=int(keys * frac), replace=False)).astype(np.int64)
        out.append(make_q1_table(upd, np.full(len(upd), TS_BASE + 1 + i), rng))
    return out


def build_with_writer(
    path: Path, data: list[pa.Table], block_format: str, max_file_bytes: int = 0
) -> None:
    from hoodie_ray.job.client import HoodieWriteClient

    opts = {
        "hoodie.table.name": "q1",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.logfile.data.block.format": block_format,
        "compaction.schedule.enabled": "false",
        "compaction.async.enabled": "false",
    }
    if max_file_bytes:
        opts["hoodie.parquet.max.file.size"] = str(max_file_bytes)
    for t in data:
        HoodieWriteClient(str(path), opts).write(t)


def build_with_builder(path: Path, data: list[pa.Table], block_format: str) -> None:
    from tests.reader.builder import TableBuilder

    b = TableBuilder(path, data[0].schema, name="q1", key="key", ordering="ts")
    c = b.begin()
    n_files = max(1, data[0].num_rows // 500_000)
    bounds = np.linspace(0, data[0].num_rows, n_files + 1).astype(int)
    bases = []
    for i in range(n_files):
        part = data[0].slice(bounds[i], bounds[i + 1] - bounds[i])
        fid = f"{i:08d}-0000-0000-0000-000000000000-0"
        bases.append((fid, c.base_file("", fid, part), part.column("key")))
    c.complete()
    for t in data[1:]:
        c = b.begin()
        for fid, base, keys in bases:
            sel = t.filter(pc.is_in(t.column("key"), value_set=keys))
            blk = c.data_block(sel, "", fid, fmt=block_format)
            c.log_file(
                "",
                fid,
                [blk],
                base_instant=b.timeline.completed_commits()[0].timestamp,
                base_file=base,
            )
        c.complete()


# -- measuring ------------------------------------------------------------------------------------


def hudi_rs_snapshot(path: str) -> pa.Table:
    from hudi import HudiTable

    batches = HudiTable(path).read()
    return pa.Table.from_batches(batches)


def base_files(path: str) -> list[str]:
    from hoodie_ray.reader import plan_file_slices

    plan = plan_file_slices(path, query_type="read_optimized")
    return [str(Path(path) / s.partition_path / s.base_file) for s in plan.slices if s.base_file]


def pyarrow_base_read(files: list[str]) -> pa.Table:
    return pa.concat_tables([pq.read_table(f) for f in files])


def gate(mine: pa.Table, theirs: pa.Table) -> str | None:
    """None when both snapshots hold the same rows (compared after sorting by key)."""
    if mine.num_rows != theirs.num_rows:
        return f"row counts differ: {mine.num_rows} vs hudi-rs {theirs.num_rows}"
    cols = ["key", "ts", "name", *[f"c{i}" for i in range(10)], "_hoodie_record_key"]
    a = mine.select(cols).sort_by("key")
    b = theirs.select(cols).sort_by("key")
    for c in cols:
        if not a.column(c).equals(b.column(c).cast(a.schema.field(c).type)):
            return f"column {c} differs"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--commits", type=int, default=3)
    ap.add_argument("--update-frac", type=float, default=0.3)
    ap.add_argument("--block-format", choices=["parquet", "avro"], default="parquet")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--max-file-bytes",
        type=int,
        default=0,
        help="the writer's hoodie.parquet.max.file.size: more, smaller file groups, so each "
        "upsert leaves a small log block in each (a streaming writer's checkpoints)",
    )
    ap.add_argument("--builder", action="store_true", help="use the test builder, not the writer")
    ap.add_argument("--profile", action="store_true", help="pyinstrument profile of our snapshot")
    ap.add_argument("--keep", type=Path, help="build the table here and keep it")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import hoodie_ray as hr
    from hoodie_ray.reader import read_table

    tmp = None
    if args.keep:
        path = args.keep
        shutil.rmtree(path, ignore_errors=True)
    else:
        tmp = tempfile.mkdtemp(prefix="hr-read-bench-")
        path = Path(tmp) / "q1"
    try:
        data = commits(args.keys, args.commits, args.update_frac)
        t0 = time.perf_counter()
        writer = "HoodieWriteClient"
        if args.builder:
            writer = "test builder"
            build_with_builder(path, data, args.block_format)
        else:
            try:
                build_with_writer(path, data, args.block_format, args.max_file_bytes)
            except Exception as e:  # the writer is optional here: fall back to the builder
                log(f"writer failed ({type(e).__name__}: {e}); using the test builder")
                shutil.rmtree(path, ignore_errors=True)
                writer = "test builder"
                build_with_builder(path, data, args.block_format)
        log(f"table built by {writer} in {time.perf_counter() - t0:.1f}s at {path}")
        spath = str(path)

        mine = read_table(spath)
        theirs = hudi_rs_snapshot(spath)
        problem = gate(mine, theirs)
        result: dict[str, Any] = {
            "gate": "pass" if problem is None else "fail",
            "writer": writer,
            "keys": args.keys,
            "commits": args.commits,
            "update_frac": args.update_frac,
            "block_format": args.block_format,
            "max_file_bytes": args.max_file_bytes,
            "rows": mine.num_rows,
        }
        if problem is not None:
            log(f"GATE FAILED: {problem}")
            print(json.dumps(result))
            return 1
        del mine, theirs

        snap_s, snap = best_of(args.repeat, lambda: hr.read(spath))
        hudi_s, _ = best_of(args.repeat, lambda: hudi_rs_snapshot(spath))
        files = base_files(spath)
        ro_s, ro = best_of(args.repeat, lambda: hr.read(spath, query_type="read_optimized"))
        pa_s, pa_t = best_of(args.repeat, lambda: pyarrow_base_read(files))
        assert ro.num_rows == pa_t.num_rows
        rows = snap.num_rows
        result.update(
            {
                "snapshot_rows_per_s": rows / snap_s,
                "hudi_rs_rows_per_s": rows / hudi_s,
                "read_vs_hudi_rs": hudi_s / snap_s,
                "read_optimized_rows_per_s": ro.num_rows / ro_s,
                "pyarrow_rows_per_s": ro.num_rows / pa_s,
                "read_optimized_vs_pyarrow": pa_s / ro_s,
                "base_files": len(files),
                "base_rows": ro.num_rows,
            }
        )
        if args.profile:
            from pyinstrument import Profiler

            prof = Profiler(interval=0.0005)
            prof.start()
            hr.read(spath)
            prof.stop()
            log(prof.output_text(unicode=False, color=False, show_all=False))

        lines = [
            f"rows (snapshot)        {rows:>12,}",
            f"snapshot  hoodie_ray   {result['snapshot_rows_per_s']:>12,.0f} rows/s",
            f"snapshot  hudi-rs      {result['hudi_rs_rows_per_s']:>12,.0f} rows/s"
            f"   ratio {result['read_vs_hudi_rs']:.2f} (target >= 0.5)",
            f"read-opt  hoodie_ray   {result['read_optimized_rows_per_s']:>12,.0f} rows/s",
            f"read-opt  pyarrow      {result['pyarrow_rows_per_s']:>12,.0f} rows/s"
            f"   ratio {result['read_optimized_vs_pyarrow']:.2f} (target >= 0.8)",
        ]
        print("\n".join(lines))
        if args.json:
            print(
                json.dumps(
                    {k: (round(v, 3) if isinstance(v, float) else v) for k, v in result.items()}
                )
            )
        return 0
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
