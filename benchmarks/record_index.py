"""The metadata table's record index at scale: building it, keeping it, and point lookups.

Three measurements, in one process (``--only`` picks some), and two more on request:

* ``init``: ``MetadataWriter.initialize_record_index`` over ``--init-keys`` keys (default
  1M, 2M, 4M), 20,000 keys per data file group (ids ``<uuid>-0``) in 30 partitions, keys
  ``key-<10 digits>-<8 hex>`` (25 bytes); the data table is a one-row table, only the record
  index is built (what ``hoodie.metadata.record.index.enable=true`` does on a table that had
  none, after the keys were read).
* ``commit``: the per-commit cost of keeping the record index: a MOR v8 table of
  ``--commit-base`` rows, then ``--commits`` upserts of ``--commit-rows`` rows (half new keys,
  half updates) through ``HoodieWriteClient`` (one process, no Ray), with the record index
  on and off; the median commit of each.
* ``lookup``: a ``--lookup-keys``-row table with the record index (4 MiB base files, so
  several file groups per partition); ``hr.read`` with
  ``key = k`` (one key) and ``key IN`` 100 keys, against the same filters planned without
  the record index (every file group read, rows filtered) and the unfiltered full scan.

* ``hbase`` (only when named): one record-index base HFile of a version 6 table (HBase
  dialect, CRC-32C checksums) of ``--hbase-keys`` UUID keys, written column-wise; the bloom
  filter and the CRC-32C (kernel and numpy twin) alone beside it.

* ``upkeep`` (only when named): what keeping the record index costs as the table grows:
  ``--upkeep-commits`` upserts of ``--upkeep-rows`` rows (2/3 updates, 1/3 new keys) through
  one ``HoodieWriteClient`` on tables of each of ``--upkeep-keys`` keys, MDT compactions
  included, under Java's MDT compaction schedule (the default) and with index file groups
  left until their logs hold 0.2 of their base (``min.log.ratio``); per
  commit CPU, rows per CPU-s, the ratio of the largest table's rate to the smallest's, then
  a point lookup and a key-index load on what the commits left.

* ``build`` (only when named): the record index of a table written without one, built from
  its files by ``hr.create_index(kind="record_index")``: a MOR v8 table of ``--build-keys``
  rows (``--build-files`` base files of ~equal size, one insert, no metadata indexes), then
  the build here (``engine="local"``) and as Ray tasks (``engine="ray"``, Ray started and
  warm before), each against the insert's own time; CPU of this process and every Ray
  worker.

* ``compact`` (only when named): one MDT compaction of a record index of ``--compact-keys``
  keys (the ``init`` keys, then one upsert of 20,000 new rows -- fewer below 1M keys -- so
  every record-index file group has a log file): wall and CPU seconds of ``MetadataWriter.compact``, the median of
  ``--repeats`` (at most 3) runs, each on a fresh copy of the table.

Rows (``commit`` / ``lookup``): ``key`` (string, 14 bytes), ``p`` (one of 8 partitions),
``ts`` (int64), ``v`` (float64), ``s`` (string, ~24 bytes).

Usage: ``python -m benchmarks.record_index [--only init,commit,lookup,hbase,build,compact,upkeep]
[--init-keys 1e6,2e6] [--hbase-keys 1e6] [--compact-keys 1.5e6] [--upkeep-keys 2e5,2e6]
[--build-keys 2e6] [--build-files 32] [--json]``.
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import hoodie_ray as hr
from benchmarks.common import print_report

OPTIONS = {
    "hoodie.table.name": "ri",
    "hoodie.datasource.write.recordkey.field": "key",
    "hoodie.datasource.write.partitionpath.field": "p",
    "precombine.field": "ts",
    "hoodie.write.table.version": "8",
    "table.type": "MERGE_ON_READ",
}
RI_ON = {"hoodie.metadata.record.index.enable": "true"}
KEYS_PER_FILE_GROUP = 20_000
#: the lookup table's file size: several file groups per partition at 2M rows
LOOKUP_FILES = {"hoodie.parquet.max.file.size": str(4 << 20)}


def _rows(ids: np.ndarray, ts: int) -> pa.Table:
    keys = pa.array([f"k{i:013d}" for i in ids.tolist()], pa.string())
    n = len(ids)
    return pa.table(
        {
            "key": keys,
            "p": pa.array([f"p{i % 8}" for i in ids.tolist()], pa.string()),
            "ts": pa.array(np.full(n, ts, dtype=np.int64)),
            "v": pa.array(ids.astype(np.float64) * 0.5),
            "s": pa.array([f"value-{i:018d}" for i in ids.tolist()], pa.string()),
        }
    )


@contextmanager
def _tmp() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="bench-ri-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


# -- build -----------------------------------------------------------------------------------------
def _noop() -> int:
    return 0


def bench_build(n: int, files: int) -> dict[str, Any]:
    from benchmarks.common import CpuMeter
    from hoodie_ray.job.client import HoodieWriteClient
    from hoodie_ray.metadata.layout import RECORD_INDEX
    from hoodie_ray.ray.compactor import ray_task_map

    rows = _rows(np.random.default_rng(3).permutation(n), 1)
    # a first write sizes files by Hudi's record-size estimate for a table with no commits
    estimate = 1024  # hoodie.copyonwrite.record.size.estimate
    opts = {**OPTIONS, "hoodie.parquet.max.file.size": str(-(-n // files) * estimate)}
    out: dict[str, Any] = {"keys": n}
    with _tmp() as d:
        path = str(d / "t")
        with CpuMeter() as m:
            HoodieWriteClient(path, opts).write(rows)
        assert m.usage is not None
        out["write_s"] = round(m.usage.wall_s, 2)
        out["files"] = sum(1 for _ in (d / "t").rglob("*.parquet"))
        list(ray_task_map(_noop, [() for _ in range(4)]))  # Ray up and its workers warm
        for engine in ("local", "ray"):
            if engine == "ray":
                hr.drop_metadata(path, partition=RECORD_INDEX)
            with CpuMeter(ray_workers=engine == "ray") as m:
                hr.create_index(path, RECORD_INDEX, "key", kind=RECORD_INDEX, engine=engine)
            u = m.usage
            assert u is not None
            out[engine] = {
                "seconds": round(u.wall_s, 2),
                "cpu_s": round(u.total_cpu_s, 2),
                "keys_per_s": round(n / u.wall_s),
                "keys_per_cpu_s": round(n / u.total_cpu_s),
                "vs_write": round(u.wall_s / out["write_s"], 3),
            }
    return out


# -- init ----------------------------------------------------------------------------------------
def _init_entries(n: int, seed: int = 1) -> list[tuple[str, str, str, pa.Array]]:
    rng = random.Random(seed)
    out = []
    for g in range(-(-n // KEYS_PER_FILE_GROUP)):
        m = min(KEYS_PER_FILE_GROUP, n - g * KEYS_PER_FILE_GROUP)
        fid = f"{uuid.UUID(int=rng.getrandbits(128))}-0"
        salt = np.frombuffer(rng.randbytes(4 * m), dtype=np.uint32)
        keys = pa.array(
            [f"key-{g * KEYS_PER_FILE_GROUP + j:010d}-{s:08x}" for j, s in enumerate(salt.tolist())]
        )
        out.append((f"part={g % 30:02d}", fid, "20260101000000000", keys))
    return out


def bench_init(sizes: list[int]) -> list[dict[str, Any]]:
    from hoodie_ray.job.client import HoodieWriteClient
    from hoodie_ray.metadata.layout import RECORD_INDEX
    from hoodie_ray.metadata_writer.writer import MetadataWriter
    from hoodie_ray.table import HoodieTable

    out = []
    with _tmp() as d:
        path = str(d / "t")
        HoodieWriteClient(path, OPTIONS).write(_rows(np.arange(1), 1))
        for n in sizes:
            entries = _init_entries(n)
            w = MetadataWriter(HoodieTable.load(path))
            if RECORD_INDEX in w.partitions:
                w.drop_partition(RECORD_INDEX)
            cpu = time.process_time()
            secs, _ = _timed(lambda w=w, e=entries: w.initialize_record_index(e))
            cpu = time.process_time() - cpu
            files = list((d / "t/.hoodie/metadata/record_index").glob("*.hfile"))
            out.append(
                {
                    "keys": n,
                    "seconds": round(secs, 2),
                    "keys_per_s": round(n / secs),
                    "cpu_s": round(cpu, 2),
                    "keys_per_cpu_s": round(n / cpu),
                    "file_groups": len(files),
                    "hfile_bytes": sum(f.stat().st_size for f in files),
                }
            )
            del entries
    return out


# -- a version 6 record-index HFile ---------------------------------------------------------------
def bench_hbase_hfile(n: int, repeats: int) -> dict[str, Any]:
    """One base HFile of a version 6 table's record index (HBase dialect, CRC-32C checksums),
    ``n`` UUID keys (36 bytes) in 50 file groups (values 48-50 bytes), written by the v6 MDT
    writer's column-wise path (``V6MetadataWriter._hfile_columns``: bloom filter included);
    the median of ``repeats``, then the bloom filter alone and the file's CRC-32C (every 16 KiB)
    by the compiled kernel and by its numpy twin."""
    from hoodie_ray import jit
    from hoodie_ray.hfile import build_bloom_filter
    from hoodie_ray.hfile.checksum import crc32c_chunks
    from hoodie_ray.job.client import HoodieWriteClient
    from hoodie_ray.metadata import records as rec
    from hoodie_ray.metadata_writer.writer import metadata_writer
    from hoodie_ray.table import HoodieTable

    rng = random.Random(1)
    keys = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(n)]
    groups = 50
    per = -(-n // groups)
    located = [
        (
            f"p{g:02d}",
            f"{uuid.UUID(int=rng.getrandbits(128))}-0",
            1_700_000_000_000,
            keys[a : a + per],
        )
        for g, a in enumerate(range(0, n, per))
    ]
    cols = rec.RecordIndexColumns.of_locations(located, 6).sorted_unique()
    del keys, located
    with _tmp() as d:
        path = str(d / "t")
        opts = {**OPTIONS, "hoodie.write.table.version": "6", "hoodie.metadata.enable": "true"}
        HoodieWriteClient(path, opts).write(_rows(np.arange(1), 1))
        w = metadata_writer(HoodieTable.load(path))
        runs = [_timed(lambda: w._hfile_columns(cols, base=True)) for _ in range(repeats)]
    data = runs[-1][1]
    rows = cols.keys.cast(pa.large_binary())
    bloom_s, _ = _timed(lambda: build_bloom_filter(rows))
    buf = np.frombuffer(data, dtype=np.uint8)
    starts = np.arange(0, len(buf), 16384)
    lens = np.minimum(16384, len(buf) - starts)
    numpy_s, twin = _timed(lambda: crc32c_chunks(buf, starts, lens, compiled=False))
    out = {
        "keys": n,
        "hfile_bytes": len(data),
        "seconds": round(statistics.median(t for t, _ in runs), 2),
        "seconds_each": [round(t, 2) for t, _ in runs],
        "bloom_filter_s": round(bloom_s, 2),
        "crc32c_numpy_s": round(numpy_s, 3),
    }
    if jit.enabled():
        crc32c_chunks(buf[:16], [0], [16], compiled=True)  # loads the kernel
        kernel_s, crcs = _timed(lambda: crc32c_chunks(buf, starts, lens, compiled=True))
        assert (crcs == twin).all()
        out["crc32c_kernel_s"] = round(kernel_s, 3)
    return out


# -- the MDT compaction of the record index -------------------------------------------------------
def bench_compact(n: int, repeats: int) -> dict[str, Any]:
    """One MDT compaction (``MetadataWriter.compact``) of a record index of ``n`` keys whose
    every file group has one log file (an upsert of up to 20,000 new rows after the index was
    built from ``n`` keys, as ``init`` builds it); each run on a fresh copy of the table."""
    from hoodie_ray.job.client import HoodieWriteClient
    from hoodie_ray.metadata.layout import RECORD_INDEX
    from hoodie_ray.metadata_writer.writer import MetadataWriter
    from hoodie_ray.table import HoodieTable

    opts = {**OPTIONS, **RI_ON, "hoodie.metadata.compact.max.delta.commits": "100"}
    with _tmp() as d:
        pristine = d / "pristine"
        HoodieWriteClient(str(pristine), opts).write(_rows(np.arange(1), 1))
        w = MetadataWriter(HoodieTable.load(str(pristine)))
        w.drop_partition(RECORD_INDEX)
        w.initialize_record_index(_init_entries(n))
        new = max(1, min(20_000, n // 50))
        HoodieWriteClient(str(pristine), opts).write(_rows(np.arange(1, new + 1), 2))
        walls, cpus = [], []
        for r in range(repeats):
            path = d / f"run{r}"
            shutil.copytree(pristine, path)
            w = MetadataWriter(HoodieTable.load(str(path)))
            gc.collect()
            t, c = time.perf_counter(), time.process_time()
            assert w.compact() is not None
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
            shutil.rmtree(path)
        groups = len(list((pristine / ".hoodie/metadata/record_index").glob("*.hfile")))
    return {
        "keys": n + new,
        "file_groups": groups,
        "seconds": round(statistics.median(walls), 2),
        "cpu_s": round(statistics.median(cpus), 2),
        "seconds_each": [round(t, 2) for t in walls],
        "cpu_s_each": [round(t, 2) for t in cpus],
        "us_per_key_cpu": round(statistics.median(cpus) / (n + new) * 1e6, 2),
    }


# -- per-commit cost -----------------------------------------------------------------------------
def bench_commit(base: int, commits: int, rows: int) -> dict[str, Any]:
    from hoodie_ray.job.client import HoodieWriteClient

    out: dict[str, Any] = {"base_rows": base, "commits": commits, "rows_per_commit": rows}
    for label, extra in (("record_index_off", {}), ("record_index_on", RI_ON)):
        with _tmp() as d:
            path = str(d / "t")
            client = HoodieWriteClient(path, {**OPTIONS, **extra})
            client.write(_rows(np.arange(base), 1))
            rng = np.random.default_rng(3)
            times = []
            top = base
            for c in range(commits):
                upd = rng.choice(top, rows // 2, replace=False)
                new = np.arange(top, top + rows - rows // 2)
                top += len(new)
                secs, _ = _timed(
                    lambda u=upd, n=new, c=c, w=client: w.write(
                        _rows(np.concatenate([u, n]), c + 2)
                    )
                )
                times.append(secs)
            out[label] = {
                "median_s": round(statistics.median(times), 3),
                "min_s": round(min(times), 3),
            }
    on, off = out["record_index_on"]["median_s"], out["record_index_off"]["median_s"]
    out["extra_s_per_commit"] = round(on - off, 3)
    return out


# -- upkeep as the table grows -------------------------------------------------------------------
#: Java's schedule, the default (every index file group with logs rewritten at each MDT
#: compaction), against leaving index file groups whose logs are small against their bases.
UPKEEP_SCHEDULES = {
    "java": {},
    "deferred": {"hoodie.metadata.compact.index.min.log.ratio": "0.2"},
}


def _upkeep_run(
    keys: int, commits: int, rows: int, extra: dict[str, str], repeats: int
) -> dict[str, Any]:
    """Per-commit CPU of ``commits`` upserts (2/3 updates, 1/3 new keys) through one
    ``HoodieWriteClient`` on a ``keys``-row table with the record index, then a point lookup
    by key (median of ``repeats``) and the index load of a fresh writer."""
    from hoodie_ray.job.client import HoodieWriteClient
    from hoodie_ray.metadata.layout import RECORD_INDEX
    from hoodie_ray.metadata_writer.writer import MetadataWriter
    from hoodie_ray.table import HoodieTable

    opts = {**OPTIONS, **RI_ON, "compaction.schedule.enabled": "false", **extra}
    with _tmp() as d:
        path = str(d / "t")
        rng = np.random.default_rng(5)
        bulk = {**opts, "hoodie.datasource.write.operation": "bulk_insert"}
        HoodieWriteClient(path, bulk).write(_rows(rng.permutation(keys), 1))
        top = keys
        batches = []
        for c in range(commits):
            upd = rng.choice(top, rows * 2 // 3, replace=False)
            new = np.arange(top, top + rows - len(upd))
            top += len(new)
            batches.append(_rows(rng.permutation(np.concatenate([upd, new])), c + 2))
        client = HoodieWriteClient(path, opts)
        client.write(batches[0])  # loads the key index: not a commit's upkeep
        cpu = []
        for b in batches[1:]:
            gc.collect()
            t = time.process_time()
            client.write(b)
            cpu.append(time.process_time() - t)
        mdt = MetadataWriter(HoodieTable.load(path)).reader()
        ri = mdt.file_slices(RECORD_INDEX)
        key = f"k{int(rng.integers(keys)):013d}"
        looks = []
        for _ in range(repeats):
            secs, got = _timed(lambda: hr.read(path, filters=[("key", "=", key)]))
            assert got.num_rows == 1
            looks.append(secs)
        t = time.process_time()
        loaded = mdt.record_index_key_arrays()
        load_cpu = time.process_time() - t
        assert sum(len(v) for v in loaded.values()) == top
    return {
        "keys": keys,
        "commit_cpu_s": [round(x, 3) for x in cpu],
        "rows_per_cpu_s": round(rows * len(cpu) / sum(cpu)),
        "max_commit_cpu_s": round(max(cpu), 3),
        "record_index_log_files": sum(len(fs.log_files) for fs in ri),
        "point_lookup_s": round(statistics.median(looks), 4),
        "index_load_cpu_s": round(load_cpu, 3),
    }


def bench_upkeep(sizes: list[int], commits: int, rows: int, repeats: int) -> dict[str, Any]:
    """The record index's upkeep as the table grows: rows per CPU-s of the same upserts on
    each table size, under Java's MDT compaction schedule and the deferred one; ``scale_ratio``
    is the largest table's rate over the smallest's (issue 40's ``scale_rate_ratio``, one
    process, no Ray)."""
    out: dict[str, Any] = {"sizes": sizes, "commits": commits, "rows_per_commit": rows}
    for label, extra in UPKEEP_SCHEDULES.items():
        runs = [_upkeep_run(n, commits, rows, extra, repeats) for n in sizes]
        out[label] = {
            "runs": runs,
            "scale_ratio": round(runs[-1]["rows_per_cpu_s"] / runs[0]["rows_per_cpu_s"], 3),
        }
    return out


# -- point lookups -------------------------------------------------------------------------------
def bench_lookup(n: int, repeats: int = 5) -> dict[str, Any]:
    from hoodie_ray.job.client import HoodieWriteClient
    from hoodie_ray.reader import query

    out: dict[str, Any] = {"rows": n}
    with _tmp() as d:
        path = str(d / "t")
        client = HoodieWriteClient(path, {**OPTIONS, **RI_ON, **LOOKUP_FILES})
        step = 500_000
        secs_write = 0.0
        for lo in range(0, n, step):
            s, _ = _timed(lambda lo=lo: client.write(_rows(np.arange(lo, min(n, lo + step)), 1)))
            secs_write += s
        # a second commit of updates, so slices have log files as a MOR table's do
        s, _ = _timed(lambda: client.write(_rows(np.arange(0, n, 97), 2)))
        out["write_s"] = round(secs_write + s, 1)
        rng = random.Random(5)
        one = f"k{rng.randrange(n):013d}"
        hundred = [f"k{rng.randrange(n):013d}" for _ in range(100)]
        cases = {"eq_1_key": [("key", "=", one)], "in_100_keys": [("key", "IN", hundred)]}
        plan = query.plan_file_slices(path, filters=cases["eq_1_key"])
        out["file_groups_total"] = plan.stats["file_groups_total"]
        for name, filters in cases.items():
            plan = query.plan_file_slices(path, filters=filters)
            times = [_timed(lambda f=filters: hr.read(path, filters=f))[0] for _ in range(repeats)]
            rows = hr.read(path, filters=filters).num_rows
            real = query._prune_by_record_index
            query._prune_by_record_index = lambda tbl, slices, *a: slices  # type: ignore[assignment]
            try:
                scan = [
                    _timed(lambda f=filters: hr.read(path, filters=f))[0]
                    for _ in range(min(2, repeats))
                ]
                scan_rows = hr.read(path, filters=filters).num_rows
            finally:
                query._prune_by_record_index = real  # type: ignore[assignment]
            assert rows == scan_rows, (name, rows, scan_rows)
            out[name] = {
                "rows": rows,
                "file_groups_planned": plan.stats["file_groups_planned"],
                "lookup_median_s": round(statistics.median(times), 3),
                "filtered_scan_s": round(min(scan), 3),
                "speedup": round(min(scan) / statistics.median(times), 1),
            }
        full, t = _timed(lambda: hr.read(path))
        out["full_scan_s"] = round(full, 2)
        out["full_scan_rows"] = t.num_rows
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="init,commit,lookup")
    ap.add_argument("--init-keys", default="1e6,2e6,4e6")
    ap.add_argument("--commit-base", type=float, default=200_000)
    ap.add_argument("--commits", type=int, default=8)
    ap.add_argument("--commit-rows", type=float, default=20_000)
    ap.add_argument("--lookup-keys", type=float, default=2_000_000)
    ap.add_argument("--hbase-keys", type=float, default=1_000_000)
    ap.add_argument("--compact-keys", type=float, default=1_500_000)
    ap.add_argument("--build-keys", type=float, default=2_000_000)
    ap.add_argument("--build-files", type=int, default=32)
    ap.add_argument("--upkeep-keys", default="2e5,2e6")
    ap.add_argument("--upkeep-commits", type=int, default=21)
    ap.add_argument("--upkeep-rows", type=float, default=100_000)
    ap.add_argument("--repeats", type=int, default=5, help="timed reads of each lookup")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    report: dict[str, Any] = {"benchmark": "record_index"}
    if "init" in only:
        report["init"] = bench_init([int(float(x)) for x in args.init_keys.split(",")])
    if "commit" in only:
        report["commit"] = bench_commit(int(args.commit_base), args.commits, int(args.commit_rows))
    if "lookup" in only:
        report["lookup"] = bench_lookup(int(args.lookup_keys), args.repeats)
    if "hbase" in only:
        report["hbase"] = bench_hbase_hfile(int(args.hbase_keys), min(args.repeats, 3))
    if "build" in only:
        report["build"] = bench_build(int(args.build_keys), args.build_files)
    if "compact" in only:
        report["compact"] = bench_compact(int(args.compact_keys), min(args.repeats, 3))
    if "upkeep" in only:
        sizes = [int(float(x)) for x in args.upkeep_keys.split(",")]
        report["upkeep"] = bench_upkeep(
            sizes, args.upkeep_commits, int(args.upkeep_rows), args.repeats
        )
    print_report(report, args.json, 8)
    return report


if __name__ == "__main__":
    main()
