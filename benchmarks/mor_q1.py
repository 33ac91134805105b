"""mor-q1: Merge-On-Read upserts from Ray, measured as ratios against baselines in one run.

The benchmark is specified in ``../shared/bench/mor-q1.md``. One run generates the rows once
(:func:`benchmarks.common.generate_workload`), then feeds the same commits to:

1. the Parquet floor (``pq.write_table`` of each commit, split like the writers split it),
2. the Avro floor (``Table.to_pylist()`` + ``fastavro.writer``),
3. the compaction floor (pyarrow: read base, read updates, anti-join on key, concat, write),
4. peers: delta-rs merge, and Ray Data + pyiceberg upsert when pyiceberg is installed
   (``pip install -e ".[bench]"``),
5. hoodie_ray: ``HoodieStreamWriter`` with each log block format (avro, parquet), one commit
   per ``checkpoint()``, compaction off; then ``hr.compact`` and snapshot reads with
   ``hr.read`` and hudi-rs; and the same ingest with one writer for the scaling figure.

The correctness gate comes first: the hudi-rs snapshot of every table written (after ingest and
after compaction) must equal the last-writer-wins dedup of the input by (key, max ts). A run
whose tables fail the gate prints no figures and exits 1. When hoodie_ray could not run (not
built yet, or it raised), the baselines are still measured and printed, hoodie_ray is reported
as unavailable, the gate is ``fail`` and the exit code is 1.

Usage::

    python -m benchmarks.mor_q1 --quick [--json] [--variant base|partitioned|zipf|s20|append]
                                [--writers 1|2] [--skip-peers]
    python -m benchmarks.mor_q1 --variant scale [--quick] [--json] [--skip-peers]

The scale variant (issue 23, :func:`run_scale`) is a run of its own: a 20M-key table and a
2M-key one take the same upsert commits, made one at a time; it reports how the upsert cost,
the key index and its bootstrap scale, against delta-rs (and pyiceberg) fed the same commits.

With ``--json`` the last line of stdout is one JSON object (keys in :data:`JSON_KEYS`, more
beside them); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import importlib
import importlib.util
import json
import logging
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import (
    BASE_FILE_RE,
    LOG_FILE_RE,
    VARIANTS,
    CpuMeter,
    CpuUsage,
    GateResult,
    LastWriterWins,
    Measurement,
    ProcessUsage,
    ScaleWorkload,
    Timer,
    Workload,
    add_option_argument,
    avro_schema_for,
    check_gate,
    error_text,
    expected_snapshot,
    fmt_num,
    generate_workload,
    git_commit,
    iter_batches,
    lww_dedup,
    machine_info,
    percentile,
    progress_log,
    ratio,
    scale_sizes,
    split_rows,
    table_file_stats,
    text_table,
    timeline_commit_latencies,
    wait_for_ray_idle,
)

#: Keys the JSON object always has (None where not measured), from mor-q1.md.
JSON_KEYS = (
    "gate",
    "rows_per_cpu_s_parquet",
    "rows_per_cpu_s_avro",
    "efficiency_parquet",
    "efficiency_avro_vs_fastavro",
    "speedup_vs_delta_merge",
    "speedup_vs_iceberg_upsert",
    "commit_latency_p95_s",
    "scaling_efficiency",
    "compaction_efficiency",
    "read_vs_hudi_rs",
    "peak_rss_mb_writer",
)

#: Figures beside the required ones, printed in the report's key figures too.
EXTRA_FIGURES = (
    "efficiency_parquet_vs_plain_floor",
    "compaction_efficiency_vs_plain_floor",
    "compaction_efficiency_bound",
    "efficiency_parquet_vs_hudi_layout_floor",
    "client_rows_per_cpu_s_parquet",
    "client_efficiency_parquet",
    "client_rows_per_cpu_s_avro",
    "client_efficiency_avro_vs_fastavro",
    "assigner_cpu_share",
    "writer_balance",
    "topology_efficiency",
    "compaction_vs_io_bound",
    "compaction_vs_io_bound_avro",
)

#: What each key figure means, as the report prints it (the JSON keeps the keys).
FIGURE_LABELS: dict[str, str] = {
    "rows_per_cpu_s_parquet": "Ray topology, Parquet log blocks: rows per CPU-second",
    "rows_per_cpu_s_avro": "Ray topology, Avro log blocks: rows per CPU-second",
    "efficiency_parquet": "Ray topology vs writing the rows as Parquet (Parquet blocks)",
    "efficiency_avro_vs_fastavro": "Ray topology vs encoding the rows with fastavro (Avro blocks)",
    "speedup_vs_delta_merge": "ingest speed vs delta-rs merge of the same commits",
    "speedup_vs_iceberg_upsert": "ingest speed vs pyiceberg upsert of the same commits",
    "commit_latency_p95_s": "commit latency, 95th percentile (s)",
    "scaling_efficiency": "2 writers vs 1: speed-up per writer",
    "compaction_efficiency": "compaction vs writing its output as Parquet",
    "read_vs_hudi_rs": "snapshot read speed vs hudi-rs",
    "peak_rss_mb_writer": "largest writer actor memory (MB)",
    "efficiency_parquet_vs_plain_floor": "Ray topology vs Parquet without dictionary encoding",
    "compaction_efficiency_vs_plain_floor": "compaction vs Parquet without dictionary encoding",
    "compaction_efficiency_bound": "compaction vs the I/O any compaction must do",
    "efficiency_parquet_vs_hudi_layout_floor": "Ray topology vs writing Hudi's file layout",
    "client_rows_per_cpu_s_parquet": "single-process client, Parquet blocks: rows per CPU-s",
    "client_efficiency_parquet": "single-process client vs writing the rows as Parquet",
    "client_rows_per_cpu_s_avro": "single-process client, Avro blocks: rows per CPU-second",
    "client_efficiency_avro_vs_fastavro": "single-process client vs fastavro (Avro blocks)",
    "assigner_cpu_share": "bucket assigners' CPU / writers' CPU (Parquet blocks)",
    "writer_balance": "least-loaded writer's CPU / most-loaded writer's",
    "topology_efficiency": "Ray topology vs the single-process client, rows per CPU-s",
    "compaction_vs_io_bound": "compaction vs its I/O bound, rows per CPU-s (Parquet blocks)",
    "compaction_vs_io_bound_avro": "compaction vs its I/O bound, rows per CPU-s (Avro blocks)",
}

#: Log block formats, in the order they run; the first is the one the single-valued
#: figures (speedups, latency, compaction, reads) are taken from.
LOG_FORMATS = ("parquet", "avro")

#: pq.write_table settings of the Parquet and compaction floors as mor-q1.md defines them:
#: ``pq.write_table`` with the writers' codec, pyarrow's defaults otherwise (the stack notes'
#: per-core figure, 1.6M q1 rows/s, is this call).
FLOOR_PARQUET: dict[str, Any] = {"compression": "snappy"}

#: A stricter floor reported beside it: the same call without dictionary encoding, the cheapest
#: way pyarrow writes q1's random int64 columns (about 4x faster than the defaults on them).
PLAIN_FLOOR_PARQUET: dict[str, Any] = {"compression": "snappy", "use_dictionary": False}

#: Largest batch handed to ``HoodieStreamWriter.write``.
DEFAULT_BATCH_ROWS = 100_000

_REPO = Path(__file__).resolve().parents[1]
#: Progress to stderr (stdout carries only the report).
log = progress_log("mor-q1")


# ---------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------


def _floor_parts(workload: Workload, files: int) -> list[list[pa.Table]]:
    """Each commit cut the way the writers cut it: ``files`` slices, or one per partition."""
    return [split_rows(c, files, by=workload.partition_field) for c in workload.commits]


def parquet_floor(
    workload: Workload, outdir: Path, files: int, *, plain: bool = False
) -> Measurement:
    """``pq.write_table`` (snappy) of every commit, in ``files`` files per commit.

    The floor of mor-q1.md: :data:`FLOOR_PARQUET`, pyarrow's defaults but the codec. ``plain``
    measures the stricter :data:`PLAIN_FLOOR_PARQUET` instead (no dictionary encoding: on q1's
    random int64 columns the defaults' dictionary attempt makes the write about 4x slower),
    reported beside it.
    """
    outdir.mkdir(parents=True, exist_ok=True)
    parts = _floor_parts(workload, files)
    kwargs = PLAIN_FLOOR_PARQUET if plain else FLOOR_PARQUET
    pq.write_table(workload.commits[0].slice(0, 1000), outdir / "warm-up.parquet", **kwargs)
    (outdir / "warm-up.parquet").unlink()
    with CpuMeter() as meter:
        for i, commit_parts in enumerate(parts):
            for j, part in enumerate(commit_parts):
                pq.write_table(part, outdir / f"c{i:03d}_{j:03d}.parquet", **kwargs)
    written = sum(p.stat().st_size for p in outdir.iterdir())
    files_written = sum(len(p) for p in parts)
    return Measurement(
        "parquet floor (plain encoding)" if plain else "parquet floor",
        workload.num_rows,
        meter.usage,
        extra={"files": files_written, "bytes": written, **kwargs},
    )


def hudi_layout_rows(part: pa.Table, key: str, instant: str, file_name: str) -> pa.Table:
    """``part`` as a Hudi base file or Parquet log block stores it: the five meta columns
    (commit time, sequence number, record key, partition path, file name) before the data."""
    import numpy as np
    import pyarrow.compute as pc

    n = part.num_rows
    seq = pc.cast(pa.array(np.arange(n, dtype=np.int64)), pa.string())
    meta = {
        "_hoodie_commit_time": pa.repeat(pa.scalar(instant, pa.string()), n),
        "_hoodie_commit_seqno": pc.binary_join_element_wise(f"{instant}_0_", seq, ""),
        "_hoodie_record_key": pc.cast(part[key], pa.string()),
        "_hoodie_partition_path": pa.repeat(pa.scalar("", pa.string()), n),
        "_hoodie_file_name": pa.repeat(pa.scalar(file_name, pa.string()), n),
    }
    return pa.Table.from_arrays([*meta.values(), *part.columns], names=[*meta, *part.column_names])


def parquet_floor_hudi_layout(workload: Workload, outdir: Path, files: int) -> Measurement:
    """Diagnostic floor: ``pq.write_table`` of the same rows laid out as hoodie_ray stores them
    (meta columns first, built before the measurement; per-column dictionary choice as
    hoodie_ray makes it). The gap between this and the Parquet floor is the cost of the Hudi
    format itself; the gap between hoodie_ray and this is the cost of upserting."""
    outdir.mkdir(parents=True, exist_ok=True)
    try:
        from hoodie_ray.log_format.blocks import dictionary_columns
    except ImportError:  # pragma: no cover - an older hoodie_ray

        def dictionary_columns(t: pa.Table) -> list[str]:  # type: ignore[misc]
            return ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name"]

    instant = "20240601000000000"
    parts = [
        [
            hudi_layout_rows(p, workload.key_field, instant, f"{j:08d}-0000-0000-0000-0-0")
            for j, p in enumerate(commit_parts)
        ]
        for commit_parts in _floor_parts(workload, files)
    ]
    codec = FLOOR_PARQUET["compression"]
    with CpuMeter() as meter:
        for i, commit_parts in enumerate(parts):
            for j, part in enumerate(commit_parts):
                pq.write_table(
                    part,
                    outdir / f"c{i:03d}_{j:03d}.parquet",
                    compression=codec,
                    use_dictionary=dictionary_columns(part),
                )
    written = sum(p.stat().st_size for p in outdir.iterdir())
    return Measurement(
        "parquet floor (Hudi layout)",
        workload.num_rows,
        meter.usage,
        extra={"files": sum(len(p) for p in parts), "bytes": written, "compression": codec},
    )


def avro_floor(workload: Workload, outdir: Path, files: int) -> Measurement:
    """``Table.to_pylist()`` + ``fastavro.writer`` (no codec, as Hudi's Avro log blocks).

    The schema is Hudi's rendering of the rows: every nullable column a ``["null", T]`` union
    (:func:`benchmarks.common.avro_schema_for`); no validation pass.
    """
    import fastavro

    outdir.mkdir(parents=True, exist_ok=True)
    parts = _floor_parts(workload, files)
    schema = fastavro.parse_schema(avro_schema_for(workload.schema))
    with CpuMeter() as meter:
        for i, commit_parts in enumerate(parts):
            for j, part in enumerate(commit_parts):
                with open(outdir / f"c{i:03d}_{j:03d}.avro", "wb") as f:
                    fastavro.writer(f, schema, part.to_pylist(), codec="null")
    written = sum(p.stat().st_size for p in outdir.iterdir())
    return Measurement(
        "avro floor",
        workload.num_rows,
        meter.usage,
        extra={"files": sum(len(p) for p in parts), "bytes": written, "codec": "null"},
    )


def compaction_floor(
    workload: Workload, outdir: Path, files: int, *, plain: bool = False
) -> Measurement:
    """Pure pyarrow compaction of the whole table: base + updates into new base files.

    Prepared outside the measurement: the base (dedup of the first commit) and the updates
    (dedup of all later commits) as Parquet, ``files`` files each. Measured: read both, anti-join
    the base on the key against the updates, concatenate with the updates, write ``files``
    files. Rows = output rows (the table's rows, K), the same count hr.compact is charged with.
    The output is written with :data:`FLOOR_PARQUET` (``plain``: :data:`PLAIN_FLOOR_PARQUET`).
    """
    out_kwargs = PLAIN_FLOOR_PARQUET if plain else FLOOR_PARQUET
    key, order = workload.key_field, workload.precombine_field
    base_dir, upd_dir, out_dir = outdir / "base", outdir / "updates", outdir / "out"
    for d in (base_dir, upd_dir, out_dir):
        d.mkdir(parents=True, exist_ok=True)
    base = lww_dedup(workload.commits[0], key, order)
    rest = workload.commits[1:]
    updates = lww_dedup(pa.concat_tables(rest), key, order) if rest else base.slice(0, 0)
    for d, t in ((base_dir, base), (upd_dir, updates)):
        for j, part in enumerate(split_rows(t, files)):
            pq.write_table(part, d / f"part-{j:03d}.parquet", **PLAIN_FLOOR_PARQUET)
    base_rows, update_rows = base.num_rows, updates.num_rows
    # Untimed warm-up of the same steps on a sliver (first-call costs of the join and the
    # thread pools are large next to a --quick run).
    warm = base.slice(0, 1000)
    warm.join(updates.slice(0, 1000).select([key]), keys=key, join_type="left anti")
    pq.write_table(warm, outdir / "warm-up.parquet", **out_kwargs)
    del base, updates, warm
    with CpuMeter() as meter:
        b = pq.read_table(base_dir)
        u = pq.read_table(upd_dir)
        kept = b.join(u.select([key]), keys=key, join_type="left anti")
        merged = pa.concat_tables([kept.select(u.column_names), u])
        for j, part in enumerate(split_rows(merged, files)):
            pq.write_table(part, out_dir / f"part-{j:03d}.parquet", **out_kwargs)
    return Measurement(
        "compaction floor (plain encoding)" if plain else "compaction floor",
        merged.num_rows,
        meter.usage,
        extra={"base_rows": base_rows, "update_rows": update_rows, "files": files},
    )


def _table_data_files(path: Path) -> dict[Path, tuple[str, str]]:
    """Base and log files of a table directory: path -> (kind, file id)."""
    out: dict[Path, tuple[str, str]] = {}
    for p in path.rglob("*"):
        if ".hoodie" in p.relative_to(path).parts or not p.is_file():
            continue
        if m := LOG_FILE_RE.match(p.name):
            out[p] = ("log", m["fid"])
        elif m := BASE_FILE_RE.match(p.name):
            out[p] = ("base", m["fid"])
    return out


def compaction_io_bound(
    slice_files: Sequence[Path], outputs: Sequence[Path], workdir: Path
) -> Measurement:
    """Diagnostic: the input and output work every compaction of these file slices must do,
    in pyarrow, with no merge at all.

    Measured: read every log file and decode every Parquet data block in it (every logged
    version: a merge-on-read log holds all of them), read the base files, and write the
    compacted rows again (read from the compaction's ``outputs`` beforehand) in as many files,
    snappy, with hoodie_ray's per-column dictionary choice. Its rows per CPU-second over the
    compaction floor's is the highest compaction efficiency a merge of this table could reach.
    Avro data blocks are decoded by hoodie_ray's codec.
    """
    from hoodie_ray.log_format import DataBlock, LogReader, ParquetDataBlock
    from hoodie_ray.log_format.blocks import dictionary_columns

    rows_out = [pq.read_table(p) for p in outputs]
    logs = [p for p in slice_files if LOG_FILE_RE.match(p.name)]
    bases = [p for p in slice_files if not LOG_FILE_RE.match(p.name)]
    workdir.mkdir(parents=True, exist_ok=True)
    decoded = 0
    with CpuMeter() as meter:
        for p in logs:
            for blk in LogReader(p.read_bytes(), str(p)).blocks():
                if not isinstance(blk, DataBlock):
                    continue
                if isinstance(blk, ParquetDataBlock) and blk.content is not None:
                    decoded += pq.ParquetFile(pa.BufferReader(blk.content)).read().num_rows
                else:  # Avro blocks: hoodie_ray's decoder (the fastest there is here)
                    decoded += blk.read().num_rows
        for p in bases:
            decoded += pq.read_table(p).num_rows
        for j, t in enumerate(rows_out):
            pq.write_table(
                t,
                workdir / f"out-{j:03d}.parquet",
                compression="snappy",
                use_dictionary=dictionary_columns(t),
            )
    shutil.rmtree(workdir, ignore_errors=True)
    return Measurement(
        "compaction I/O bound (decode all versions + write, no merge)",
        sum(t.num_rows for t in rows_out),
        meter.usage,
        extra={"records_decoded": decoded, "log_files": len(logs), "base_files": len(bases)},
    )


def delta_merge_peer(workload: Workload, outdir: Path) -> Measurement:
    """delta-rs fed the same commits: ``write_deltalake`` first, then one merge per commit.

    Each commit is first deduplicated by (key, max ts) inside the measurement (a Delta merge
    refuses several source rows for one target row; the Hudi writer precombines likewise).
    The append variant appends instead of merging. Rows = all input records (N).
    """
    from deltalake import DeltaTable, write_deltalake

    key, order, part = workload.key_field, workload.precombine_field, workload.partition_field
    path = str(outdir / "delta")
    predicate = f"t.{key} = s.{key}" + (f" AND t.{part} = s.{part}" if part else "")
    latencies: list[float] = []
    dt: DeltaTable | None = None
    with CpuMeter() as meter:
        for i, commit in enumerate(workload.commits):
            t0 = time.perf_counter()
            if workload.operation == "insert":
                write_deltalake(path, commit, mode="append", partition_by=part)
            else:
                src = lww_dedup(commit, key, order)
                if i == 0:
                    write_deltalake(path, src, partition_by=part)
                    dt = DeltaTable(path)
                else:
                    assert dt is not None
                    (
                        dt.merge(src, predicate, source_alias="s", target_alias="t")
                        .when_matched_update_all()
                        .when_not_matched_insert_all()
                        .execute()
                    )
            latencies.append(time.perf_counter() - t0)
    final_rows = DeltaTable(path).to_pyarrow_dataset().count_rows()
    return Measurement(
        "delta-rs append" if workload.operation == "insert" else "delta-rs merge",
        workload.num_rows,
        meter.usage,
        extra={
            "final_rows": final_rows,
            "commit_p50_s": _r(percentile(latencies, 50)),
            "commit_max_s": _r(max(latencies, default=None)),
            "commit_s": [_r(s) for s in latencies],
        },
    )


def iceberg_upsert_peer(workload: Workload, outdir: Path, blocks: int = 2) -> Measurement:
    """Ray Data ``Dataset.write_iceberg`` into a pyiceberg SQL catalog on sqlite (a file).

    The first commit is appended (``SaveMode.APPEND``), every later one upserted on the key
    with ``mode=SaveMode.UPSERT, upsert_kwargs={"join_cols": [key]}`` (the append variant
    appends every commit). In Ray 2.60 that upsert is Ray's own copy-on-write merge, not
    pyiceberg's ``Table.upsert``: Ray tasks write the batch as new data files, the driver
    plans the files whose key range overlaps the batch's, one Ray task per such file rewrites
    the rows whose key is not in the batch, and one Iceberg overwrite snapshot swaps them.

    Each commit is deduplicated by (key, max ts) inside the measurement (Ray's upsert would
    keep every source row of a key) and handed to Ray Data as ``blocks`` blocks, so that the
    writes run as that many tasks (the Hudi writers' count). The variant ``partitioned`` gets
    an identity partition on its partition column. Rows = all input records (N); CPU = this
    process and every Ray worker process. Needs pyiceberg (``pip install -e ".[bench]"``).

    The table is checked afterwards, outside the measurement: it must hold one row per
    distinct key of the input, else this raises (a wrong table has no speed worth reporting).
    """
    import pyarrow.compute as pc
    import ray
    from pyiceberg.catalog import load_catalog
    from ray.data import SaveMode

    key, order, part = workload.key_field, workload.precombine_field, workload.partition_field
    warehouse = outdir / "iceberg"
    warehouse.mkdir(parents=True, exist_ok=True)
    catalog_kwargs = {
        "name": "mor_q1",
        "type": "sql",
        "uri": f"sqlite:///{warehouse / 'catalog.db'}",
        "warehouse": f"file://{warehouse}",
    }
    catalog = load_catalog(**catalog_kwargs)
    catalog.create_namespace("bench")
    ident = "bench.mor_q1"
    table = catalog.create_table(ident, schema=workload.schema)
    if part:
        with table.update_spec() as spec:
            spec.add_identity(part)
    # Not timed, like the Hudi writers' start-up: Ray Data's first execution and the workers'
    # pyiceberg imports, on a scratch table (an append and an upsert of a few rows).
    catalog.create_table("bench.warmup", schema=workload.schema)
    sample = ray.data.from_arrow(split_rows(workload.commits[0].slice(0, 4), max(blocks, 1)))
    sample.write_iceberg("bench.warmup", catalog_kwargs=catalog_kwargs, mode=SaveMode.APPEND)
    sample.write_iceberg(
        "bench.warmup",
        catalog_kwargs=catalog_kwargs,
        mode=SaveMode.UPSERT,
        upsert_kwargs={"join_cols": [key]},
    )
    settle_s = wait_for_ray_idle()
    latencies: list[float] = []
    with CpuMeter(ray_workers=True) as meter:
        for i, commit in enumerate(workload.commits):
            t0 = time.perf_counter()
            rows = commit if workload.operation == "insert" else lww_dedup(commit, key, order)
            ds = ray.data.from_arrow(split_rows(rows, max(blocks, 1)))
            if i == 0 or workload.operation == "insert":
                ds.write_iceberg(ident, catalog_kwargs=catalog_kwargs, mode=SaveMode.APPEND)
            else:
                ds.write_iceberg(
                    ident,
                    catalog_kwargs=catalog_kwargs,
                    mode=SaveMode.UPSERT,
                    upsert_kwargs={"join_cols": [key]},
                )
            latencies.append(time.perf_counter() - t0)
    keys = catalog.load_table(ident).scan(selected_fields=(key,)).to_arrow()[key]
    final_rows, final_keys = len(keys), pc.count_distinct(keys).as_py()
    if final_rows != workload.num_keys or final_keys != workload.num_keys:
        raise RuntimeError(
            f"iceberg table has {final_rows} rows over {final_keys} keys; "
            f"expected one row per key, {workload.num_keys}"
        )
    return Measurement(
        "ray data + pyiceberg upsert",
        workload.num_rows,
        meter.usage,
        extra={
            "final_rows": final_rows,
            "blocks": max(blocks, 1),
            "settle_s": _r(settle_s),
            "commit_p50_s": _r(percentile(latencies, 50)),
            "commit_p95_s": _r(percentile(latencies, 95)),
            "commit_max_s": _r(max(latencies, default=None)),
            "commit_s": [_r(s) for s in latencies],
        },
    )


def _measure(name: str, rows: int, fn: Any, *args: Any, repeats: int = 1) -> Measurement:
    """Run one baseline ``repeats`` times and keep the run of median CPU time; an exception
    becomes the measurement's error, not the run's end."""
    log(f"{name} ...")
    runs: list[Measurement] = []
    try:
        for _ in range(max(repeats, 1)):
            runs.append(fn(*args))
    except Exception as e:
        log(f"{name} failed: {error_text(e)}")
        traceback.print_exc(file=sys.stderr)
        return Measurement(name, rows, None, error=error_text(e))
    runs.sort(key=lambda r: r.usage.total_cpu_s if r.usage else 0.0)
    m = runs[len(runs) // 2]
    if len(runs) > 1:
        m.extra["repeats"] = len(runs)
        m.extra["cpu_s_each"] = [_r(r.usage.total_cpu_s) if r.usage else None for r in runs]
    log(f"{name}: {fmt_num(m.rows_per_s)} rows/s, {fmt_num(m.rows_per_cpu_s)} rows/CPU-s")
    return m


# ---------------------------------------------------------------------------------------------
# hoodie_ray
# ---------------------------------------------------------------------------------------------


def load_hoodie() -> tuple[ModuleType | None, str | None]:
    """``import hoodie_ray`` and check the names the benchmark calls; (module, None) or
    (None, why not)."""
    try:
        hr = importlib.import_module("hoodie_ray")
        for name in ("HoodieStreamWriter", "compact", "read"):
            getattr(hr, name)
    except Exception as e:
        return None, error_text(e)
    return hr, None


def hoodie_options(
    workload: Workload,
    fmt: str,
    writers: int,
    table_name: str,
    table_version: int = 6,
    assigners: int = 1,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Writer options of mor-q1: ``assigners`` bucket assigners (1 in the benchmark; 0 = as many
    as writers, Flink's default), ``writers`` writers, compaction off, a new table of
    ``table_version`` (6 or 8); ``extra`` (``--option k=v``) added last, overriding."""
    opts = {
        "hoodie.table.name": table_name,
        "hoodie.write.table.version": str(table_version),
        "hoodie.datasource.write.recordkey.field": workload.key_field,
        "precombine.field": workload.precombine_field,
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
        "hoodie.datasource.write.operation": workload.operation,
        "write.tasks": str(writers),
        "write.bucket_assign.tasks": str(assigners or writers),
        "hoodie.logfile.data.block.format": fmt,
        "compaction.schedule.enabled": "false",
        "compaction.async.enabled": "false",
    }
    if workload.partition_field:
        opts["hoodie.datasource.write.partitionpath.field"] = workload.partition_field
    opts.update(extra or {})
    return opts


def hudi_rs_snapshot(path: str | Path) -> pa.Table:
    """Snapshot of a table read by hudi-rs (the independent oracle)."""
    from hudi import HudiTable

    t = HudiTable(str(path))
    batches = t.read()
    if not batches:
        return t.get_schema_with_meta_fields().empty_table()
    return pa.Table.from_batches(batches)


def _actor_class(title: str) -> str:
    """``ray::StreamWriter.write`` -> ``StreamWriter``."""
    return title.removeprefix("ray::").split(".", 1)[0]


def _gate_failures(
    label: str, error: str | None, gates: Iterable[tuple[str, GateResult | None]]
) -> list[str]:
    """A run's gate failures: it did not complete, or a gate (``(what, result)``) failed."""
    out = [f"{label}: hoodie_ray did not complete ({error})"] if error else []
    out += [f"{label}{what}: {g.reason}" for what, g in gates if g is not None and not g.passed]
    return out


@dataclass
class HoodieRun:
    """Everything measured on one hoodie_ray table (one log format, one writer count)."""

    fmt: str
    writers: int
    path: str
    options: dict[str, str] = field(default_factory=dict)
    ingest: Measurement | None = None
    startup_s: float | None = None
    settle_s: float | None = None
    close_s: float | None = None
    instants: list[str] = field(default_factory=list)
    commit_s: list[float] = field(default_factory=list)
    checkpoint_s: list[float] = field(default_factory=list)
    timeline_s: list[float] = field(default_factory=list)
    files: dict[str, Any] = field(default_factory=dict)
    files_compacted: dict[str, Any] = field(default_factory=dict)
    gate_ingest: GateResult | None = None
    gate_compacted: GateResult | None = None
    read_hr: Measurement | None = None
    read_check: GateResult | None = None
    read_hudi_rs: Measurement | None = None
    compaction: Measurement | None = None
    compaction_bound: Measurement | None = None
    error: str | None = None
    read_error: str | None = None
    actor_pids: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``parquet x2``."""
        return f"{self.fmt} x{self.writers}"

    def gate_failures(self) -> list[str]:
        """Why this run fails the gate (empty when it passes)."""
        gates = ((" after ingest", self.gate_ingest), (" after compaction", self.gate_compacted))
        return _gate_failures(self.label, self.error, gates)

    def peak_rss_mb_writer(self) -> float | None:
        """Largest peak RSS of the writer actors (all workers if none is named like one)."""
        if self.ingest is None or self.ingest.usage is None:
            return None
        procs = self.ingest.usage.processes
        writer_pids = {pid for role, pid in self.actor_pids.items() if role.startswith("writer")}
        writers = [p for p in procs if p.pid in writer_pids] or [
            p for p in procs if "writ" in _actor_class(p.title).lower()
        ]
        pool = writers or [p for p in procs if p.cpu_s > 0]
        return max((p.peak_rss_mb for p in pool), default=None)

    def role_cpu_s(self, prefix: str) -> list[float]:
        """CPU-seconds of each actor whose role starts with ``prefix`` during the ingest
        (``writer``, ``assigner``), in role order."""
        if self.ingest is None or self.ingest.usage is None:
            return []
        by_pid = {p.pid: p.cpu_s for p in self.ingest.usage.processes}
        roles = sorted(r for r in self.actor_pids if r.startswith(prefix))
        return [by_pid[self.actor_pids[r]] for r in roles if self.actor_pids[r] in by_pid]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready figures of the run."""
        procs = self.ingest.usage.processes if self.ingest and self.ingest.usage else ()
        return {
            "format": self.fmt,
            "writers": self.writers,
            "error": self.error,
            "ingest": self.ingest.as_dict() if self.ingest else None,
            "startup_s": _r(self.startup_s),
            "settle_s": _r(self.settle_s),
            "close_s": _r(self.close_s),
            "commits": len(self.instants),
            "commit_latency_s": _latency(self.commit_s),
            "checkpoint_latency_s": _latency(self.checkpoint_s),
            "timeline_latency_s": _latency(self.timeline_s),
            "files": self.files,
            "files_compacted": self.files_compacted,
            "gate_ingest": self.gate_ingest.reason if self.gate_ingest else None,
            "gate_compacted": self.gate_compacted.reason if self.gate_compacted else None,
            "compaction": self.compaction.as_dict() if self.compaction else None,
            "compaction_bound": self.compaction_bound.as_dict() if self.compaction_bound else None,
            "read_hr": self.read_hr.as_dict() if self.read_hr else None,
            "read_check": self.read_check.reason if self.read_check else None,
            "read_hudi_rs": self.read_hudi_rs.as_dict() if self.read_hudi_rs else None,
            "read_error": self.read_error,
            "peak_rss_mb_writer": _r(self.peak_rss_mb_writer(), 1),
            "actor_pids": self.actor_pids,
            "actors": [
                {
                    "title": p.title,
                    "cpu_s": _r(p.cpu_s),
                    "peak_rss_mb": _r(p.peak_rss_mb, 1),
                    "exited": p.exited,
                }
                for p in procs
                if p.cpu_s > 0 or p.title != "ray::IDLE"
            ],
        }


def _share(run: HoodieRun | None, part: str, whole: str) -> float | None:
    """CPU-s of the ``part`` actors / CPU-s of the ``whole`` actors of a run's ingest."""
    if run is None:
        return None
    den = sum(run.role_cpu_s(whole))
    return sum(run.role_cpu_s(part)) / den if den > 0 else None


def _balance(run: HoodieRun | None) -> float | None:
    """Least-loaded writer's CPU-s / most-loaded writer's (None with fewer than 2 writers)."""
    cpu = run.role_cpu_s("writer") if run else []
    if len(cpu) < 2 or max(cpu) <= 0:
        return None
    return min(cpu) / max(cpu)


def _vs_bound(run: HoodieRun | None) -> float | None:
    """Compaction rows per CPU-s / the compaction I/O bound's, same run and format."""
    if run is None or run.compaction is None or run.compaction_bound is None:
        return None
    return ratio(run.compaction.rows_per_cpu_s, run.compaction_bound.rows_per_cpu_s)


def _gate(path: Path, expected: pa.Table, workload: Workload, when: str) -> GateResult:
    """The correctness gate: hudi-rs reads the table as the last-writer-wins dedup."""
    try:
        result = check_gate(hudi_rs_snapshot(path), expected, workload.key_field)
    except Exception as e:
        result = GateResult(False, f"hudi-rs cannot read the table: {error_text(e)}", 0, 0)
    log(f"gate {when}: {result.reason}")
    return result


def _ingest_failed(run: Any, e: BaseException) -> None:
    run.error = f"ingest: {error_text(e)}"
    log(f"hoodie_ray {run.label} failed: {run.error}")
    traceback.print_exc(file=sys.stderr)


def _ingest_measured(label: str, workload: Workload, usage: Any) -> Measurement:
    m = Measurement(f"hoodie_ray {label}", workload.num_rows, usage)
    log(
        f"hoodie_ray {label}: {fmt_num(m.rows_per_s)} rows/s, {fmt_num(m.rows_per_cpu_s)} rows/CPU-s"
    )
    return m


def run_hoodie(
    hr: ModuleType,
    workload: Workload,
    expected: pa.Table,
    path: Path,
    fmt: str,
    writers: int,
    batch_rows: int,
    *,
    full: bool,
    table_version: int = 6,
    assigners: int = 1,
    extra_options: Mapping[str, str] | None = None,
) -> HoodieRun:
    """Ingest every commit through ``hr.HoodieStreamWriter``; gate; with ``full`` also reads
    and compaction.

    The ingest measurement (wall and CPU) covers the commits only: from the first ``write`` to
    the last ``checkpoint()`` returning. Writer start-up (``__enter__``, then waiting until the
    Ray workers are idle) and shutdown (``__exit__``) are timed apart (``startup_s``,
    ``settle_s``, ``close_s``).

    Calls, in order::

        with hr.HoodieStreamWriter(path, options) as w:     # options: hoodie_options(...)
            w.start(schema)                                   # actors up, not timed
            for each commit:
                w.write(batch)                                # pa.Table, <= batch_rows rows
                instant = w.checkpoint()                      # one commit; must not be None
        hudi.HudiTable(path).read()                           # gate after ingest
        hr.read(path)                                         # snapshot, timed (full only)
        hr.compact(path, options=..., engine="local")         # timed (full only)
        hudi.HudiTable(path).read()                           # gate after compaction
    """
    table_name = f"mor_q1_{workload.variant}_{fmt}_w{writers}"
    run = HoodieRun(
        fmt,
        writers,
        str(path),
        hoodie_options(workload, fmt, writers, table_name, table_version, assigners, extra_options),
    )
    log(f"hoodie_ray {run.label}: ingest of {len(workload.commits)} commits ...")
    meter = CpuMeter(ray_workers=True)
    try:
        t0 = time.perf_counter()
        with hr.HoodieStreamWriter(str(path), run.options) as w:
            # The writer starts its actors lazily, at the first write; start them now so actor
            # process start-up (seconds) is timed apart, not charged to the first commit.
            if hasattr(w, "start"):
                w.start(workload.schema)
            run.startup_s = time.perf_counter() - t0
            run.settle_s = wait_for_ray_idle()
            if hasattr(w, "actor_pids"):
                run.actor_pids = dict(w.actor_pids())
            with meter:
                for commit in workload.commits:
                    c0 = time.perf_counter()
                    for batch in iter_batches(commit, batch_rows):
                        w.write(batch)
                    c1 = time.perf_counter()
                    instant = w.checkpoint()
                    c2 = time.perf_counter()
                    if instant is None:
                        raise RuntimeError("checkpoint() returned None after a non-empty commit")
                    run.instants.append(str(instant))
                    run.commit_s.append(c2 - c0)
                    run.checkpoint_s.append(c2 - c1)
            t1 = time.perf_counter()
        run.close_s = time.perf_counter() - t1
    except Exception as e:
        _ingest_failed(run, e)
        return run
    run.ingest = _ingest_measured(run.label, workload, meter.usage)
    run.files = table_file_stats(path)
    run.files["write_amplification"] = round(run.files["bytes"] / workload.arrow_bytes, 3)
    run.timeline_s = timeline_commit_latencies(path)

    run.gate_ingest = _gate(path, expected, workload, f"after ingest ({run.label})")
    if not full or not run.gate_ingest.passed:
        return run

    # Reads, on the table with its logs (hudi-rs has read it once above: caches are warm).
    try:
        with CpuMeter(ray_workers=True) as m:
            snap = hr.read(str(path))
        run.read_hr = Measurement("hr.read", snap.num_rows, m.usage)
        run.read_check = check_gate(snap, expected, workload.key_field)
        del snap
    except Exception as e:
        run.read_error = error_text(e)
        log(f"hr.read failed: {run.read_error}")
    with CpuMeter() as m:
        snap = hudi_rs_snapshot(path)
    run.read_hudi_rs = Measurement("hudi-rs read", snap.num_rows, m.usage)
    del snap

    log(f"hoodie_ray {run.label}: compaction ...")
    before = _table_data_files(path)
    wait_for_ray_idle()
    try:
        with CpuMeter(ray_workers=True) as m:
            instant = hr.compact(
                str(path), options={"compaction.tasks": str(writers)}, engine="local"
            ).instant
        if instant is None:
            raise RuntimeError("hr.compact returned None on a table with log files")
        run.compaction = Measurement(
            "hr.compact", expected.num_rows, m.usage, extra={"instant": str(instant)}
        )
    except Exception as e:
        run.error = f"compaction: {error_text(e)}"
        log(f"hoodie_ray {run.label} compaction failed: {run.error}")
        traceback.print_exc(file=sys.stderr)
        return run
    run.files_compacted = table_file_stats(path)
    run.gate_compacted = _gate(path, expected, workload, f"after compaction ({run.label})")
    after = _table_data_files(path)
    outputs = [p for p in after if p not in before]
    fids = {after[p][1] for p in outputs}
    slice_files = [p for p, (_, fid) in before.items() if fid in fids]
    try:
        run.compaction_bound = compaction_io_bound(
            slice_files, outputs, path.parent / f"{path.name}_bound"
        )
    except Exception as e:  # a diagnostic: report, never fail the run
        log(f"compaction I/O bound not measured: {error_text(e)}")
    return run


@dataclass
class ClientRun:
    """The single-process write path (``hr.HoodieWriteClient``, no Ray) on the same commits."""

    fmt: str
    path: str
    ingest: Measurement | None = None
    commit_s: list[float] = field(default_factory=list)
    gate_ingest: GateResult | None = None
    error: str | None = None

    @property
    def label(self) -> str:
        return f"{self.fmt} (single process)"

    def gate_failures(self) -> list[str]:
        """Why this run fails the gate (empty when it passes)."""
        return _gate_failures(self.label, self.error, (("", self.gate_ingest),))

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": self.fmt,
            "error": self.error,
            "ingest": self.ingest.as_dict() if self.ingest else None,
            "commit_latency_s": _latency(self.commit_s),
            "gate_ingest": self.gate_ingest.reason if self.gate_ingest else None,
        }


#: Rows of each of the first two commits the client's untimed warm-up writes.
WARMUP_ROWS = 20_000


def run_client(
    hr: ModuleType,
    workload: Workload,
    expected: pa.Table,
    path: Path,
    fmt: str,
    table_version: int = 6,
    extra_options: Mapping[str, str] | None = None,
) -> ClientRun:
    """Ingest every commit with one ``hr.HoodieWriteClient(path, options)``, one ``write(commit)``
    per commit, in this process, measured as one section; then the gate (hudi-rs).

    Each call opens the table (lock, timeline, file slices), assigns, writes and commits; the
    client keeps its key index between calls (``hr.write(..., engine="local")`` makes a new
    client per call, so it bootstraps the index from the table every time).

    An untimed warm-up first writes the first rows of two commits to a scratch table: the
    process's imports and compiled kernels load there, as a Ray topology's actors load theirs
    at their start, outside its measured ingest. Without it the client's figure carried ~2.4
    CPU-s of a fresh process's warm-up (630K against 841K-1,036K rows per CPU-s warm).
    """
    run = ClientRun(fmt, str(path))
    options = hoodie_options(
        workload,
        fmt,
        1,
        f"mor_q1_{workload.variant}_{fmt}_client",
        table_version,
        extra=extra_options,
    )
    warm = path.parent / f"{path.name}_warmup"
    with contextlib.suppress(Exception):  # a failure shows in the measured ingest instead
        client = hr.HoodieWriteClient(str(warm), options)
        for commit in workload.commits[:2]:
            client.write(commit.slice(0, WARMUP_ROWS))
    shutil.rmtree(warm, ignore_errors=True)
    log(f"hoodie_ray {run.label}: ingest of {len(workload.commits)} commits ...")
    try:
        with CpuMeter() as meter:
            client = hr.HoodieWriteClient(str(path), options)
            for commit in workload.commits:
                c0 = time.perf_counter()
                client.write(commit)
                run.commit_s.append(time.perf_counter() - c0)
    except Exception as e:
        _ingest_failed(run, e)
        return run
    run.ingest = _ingest_measured(run.label, workload, meter.usage)
    run.gate_ingest = _gate(path, expected, workload, f"after ingest ({run.label})")
    return run


# ---------------------------------------------------------------------------------------------
# Figures and the report
# ---------------------------------------------------------------------------------------------


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(float(v), nd)


def _latency(values: Sequence[float]) -> dict[str, float | None]:
    return {
        "p50": _r(percentile(values, 50)),
        "p95": _r(percentile(values, 95)),
        "max": _r(max(values, default=None)),
    }


def _provenance(machine: dict[str, Any], hoodie_error: str | None) -> dict[str, Any]:
    """Where and on what a report was measured, and whether hoodie_ray ran."""
    return {
        "machine": {k: v for k, v in machine.items() if k != "date"},
        "cores": machine.get("cores"),
        "cpu_model": machine.get("cpu_model"),
        "date": machine.get("date"),
        "commit": git_commit(_REPO),
        "hoodie_ray": "unavailable" if hoodie_error else "ran",
        "hoodie_ray_error": hoodie_error,
    }


@dataclass
class Results:
    """Everything one run measured."""

    args: argparse.Namespace
    workload: Workload
    machine: dict[str, Any]
    generate_s: float
    baselines: dict[str, Measurement] = field(default_factory=dict)
    iceberg_status: str | None = None
    hoodie_error: str | None = None
    runs: list[HoodieRun] = field(default_factory=list)
    scaling_run: HoodieRun | None = None
    client_runs: list[ClientRun] = field(default_factory=list)
    # --efficiency-rounds: (client, topology) rows per CPU-s of each extra round, Parquet blocks
    efficiency_rounds: list[tuple[float | None, float | None]] = field(default_factory=list)
    ray_init_s: float | None = None

    def gate(self) -> tuple[bool, str, bool]:
        """(passed, reason, figures_trusted). Figures are withheld only when hoodie_ray ran
        and wrote a wrong table; when it could not run, the baselines are still shown."""
        if self.hoodie_error:
            return False, f"hoodie_ray unavailable ({self.hoodie_error})", True
        runs = [*self.runs, *([self.scaling_run] if self.scaling_run else [])]
        if not runs:
            return False, "hoodie_ray did not run", True
        failures = [f for r in runs for f in r.gate_failures()]
        failures += [f for c in self.client_runs for f in c.gate_failures()]
        wrong: list[Any] = [
            r
            for r in runs
            if any(g is not None and not g.passed for g in (r.gate_ingest, r.gate_compacted))
        ]
        wrong += [c for c in self.client_runs if c.gate_ingest and not c.gate_ingest.passed]
        if failures:
            return False, "; ".join(failures), not wrong
        return (
            True,
            "every hoodie_ray table read back by hudi-rs equals the last-writer-wins dedup",
            True,
        )

    def run_for(self, fmt: str) -> HoodieRun | None:
        """The main run of a log format, if it completed its ingest."""
        for r in self.runs:
            if r.fmt == fmt and r.ingest is not None:
                return r
        return None

    def figures(self) -> dict[str, Any]:
        """The mor-q1 key figures (None where not measured)."""
        pq_floor = self.baselines.get("parquet")
        avro_floor_m = self.baselines.get("avro")
        comp_floor = self.baselines.get("compaction")
        plain_floor = self.baselines.get("parquet_plain")
        comp_plain = self.baselines.get("compaction_plain")
        delta = self.baselines.get("delta")
        iceberg = self.baselines.get("iceberg")
        rp, ra = self.run_for("parquet"), self.run_for("avro")
        primary = rp or ra

        def cpu_rate(r: HoodieRun | None) -> float | None:
            return r.ingest.rows_per_cpu_s if r and r.ingest else None

        def wall_rate(r: HoodieRun | None) -> float | None:
            return r.ingest.rows_per_s if r and r.ingest else None

        def base_rate(m: Measurement | None, cpu: bool = True) -> float | None:
            if m is None:
                return None
            return m.rows_per_cpu_s if cpu else m.rows_per_s

        scaling = None
        if self.scaling_run is not None and self.scaling_run.ingest is not None and primary:
            one = wall_rate(self.scaling_run)
            scaling = ratio(wall_rate(primary), 2 * one if one else None)
        read_ratio = None
        if (
            primary
            and primary.read_hr
            and primary.read_hudi_rs
            and primary.read_check is not None
            and primary.read_check.passed
        ):
            read_ratio = ratio(primary.read_hr.rows_per_s, primary.read_hudi_rs.rows_per_s)
        comp_eff = None
        if primary and primary.compaction:
            comp_eff = ratio(primary.compaction.rows_per_cpu_s, base_rate(comp_floor))
        peaks = [p for r in self.runs if (p := r.peak_rss_mb_writer()) is not None]
        clients = {c.fmt: c.ingest.rows_per_cpu_s for c in self.client_runs if c.ingest}
        hudi_floor = self.baselines.get("parquet_hudi_layout")
        return {
            "rows_per_cpu_s_parquet": _r(cpu_rate(rp), 0),
            "rows_per_cpu_s_avro": _r(cpu_rate(ra), 0),
            "efficiency_parquet": _r(ratio(cpu_rate(rp), base_rate(pq_floor))),
            "efficiency_avro_vs_fastavro": _r(ratio(cpu_rate(ra), base_rate(avro_floor_m))),
            "speedup_vs_delta_merge": _r(ratio(wall_rate(primary), base_rate(delta, cpu=False))),
            "speedup_vs_iceberg_upsert": _r(
                ratio(wall_rate(primary), base_rate(iceberg, cpu=False))
            ),
            "commit_latency_p95_s": _r(percentile(primary.commit_s, 95)) if primary else None,
            "scaling_efficiency": _r(scaling),
            "compaction_efficiency": _r(comp_eff),
            "read_vs_hudi_rs": _r(read_ratio),
            "peak_rss_mb_writer": _r(max(peaks), 1) if peaks else None,
            # beside the required keys
            "rows_per_s_parquet": _r(wall_rate(rp), 0),
            "rows_per_s_avro": _r(wall_rate(ra), 0),
            "efficiency_parquet_vs_plain_floor": _r(ratio(cpu_rate(rp), base_rate(plain_floor))),
            "compaction_efficiency_vs_plain_floor": _r(
                ratio(primary.compaction.rows_per_cpu_s, base_rate(comp_plain))
                if primary and primary.compaction
                else None
            ),
            "efficiency_avro_vs_parquet_floor": _r(ratio(cpu_rate(ra), base_rate(pq_floor))),
            "speedup_vs_delta_merge_avro": _r(ratio(wall_rate(ra), base_rate(delta, cpu=False))),
            "efficiency_parquet_vs_hudi_layout_floor": _r(
                ratio(cpu_rate(rp), base_rate(hudi_floor))
            ),
            "compaction_efficiency_bound": _r(
                ratio(primary.compaction_bound.rows_per_cpu_s, base_rate(comp_floor))
                if primary and primary.compaction_bound
                else None
            ),
            "client_rows_per_cpu_s_parquet": _r(clients.get("parquet"), 0),
            "client_rows_per_cpu_s_avro": _r(clients.get("avro"), 0),
            "client_efficiency_parquet": _r(ratio(clients.get("parquet"), base_rate(pq_floor))),
            "client_efficiency_parquet_vs_plain_floor": _r(
                ratio(clients.get("parquet"), base_rate(plain_floor))
            ),
            "client_efficiency_avro_vs_fastavro": _r(
                ratio(clients.get("avro"), base_rate(avro_floor_m))
            ),
            "figures_from_format": primary.fmt if primary else None,
            # speed at scale (issue #23): where the topology's CPU goes
            "assigner_cpu_share": _r(_share(rp, "assigner", "writer")),
            "writer_balance": _r(_balance(rp)),
            "topology_efficiency": _r(ratio(cpu_rate(rp), clients.get("parquet"))),
            **self._efficiency_rounds(),
            "compaction_vs_io_bound": _r(_vs_bound(rp)),
            "compaction_vs_io_bound_avro": _r(_vs_bound(ra)),
        }

    def _efficiency_rounds(self) -> dict[str, Any]:
        """``--efficiency-rounds``: each round's topology / client ratio (the main run's
        first), and the ratio of the medians of every measurement of each."""
        if not self.efficiency_rounds:
            return {}
        rp = self.run_for("parquet")
        main_client = next(
            (c.ingest.rows_per_cpu_s for c in self.client_runs if c.ingest and c.fmt == "parquet"),
            None,
        )
        main_topology = rp.ingest.rows_per_cpu_s if rp and rp.ingest else None
        pairs = [(main_client, main_topology), *self.efficiency_rounds]
        clients = [c for c, _ in pairs if c]
        topologies = [t for _, t in pairs if t]
        return {
            "topology_efficiency_each": [_r(ratio(t, c)) for c, t in pairs],
            "topology_efficiency_median": _r(
                ratio(
                    statistics.median(topologies) if topologies else None,
                    statistics.median(clients) if clients else None,
                )
            ),
        }

    def to_json(self) -> dict[str, Any]:
        """The machine-readable result (figures null when the gate withholds them)."""
        passed, reason, trusted = self.gate()
        w = self.workload
        out: dict[str, Any] = {"gate": "pass" if passed else "fail", "gate_reason": reason}
        figs = self.figures() if trusted else {}
        for k in JSON_KEYS[1:]:
            out[k] = figs.get(k)
        for k, v in figs.items():
            out.setdefault(k, v)
        out.update(
            {
                "benchmark": "mor-q1",
                "variant": w.variant,
                "shape": w.shape,
                "columns": len(w.schema),
                "bytes_per_row": round(w.bytes_per_row, 1),
                "K": w.num_keys,
                "N": w.num_rows,
                "commits": len(w.commits),
                "quick": bool(self.args.quick),
                "scale": self.args.scale,
                "seed": self.args.seed,
                "writers": self.args.writers,
                "table_version": getattr(self.args, "table_version", 6),
                "assigners": getattr(self.args, "assigners", 1),
                "options": getattr(self.args, "options", {}),
                **_provenance(self.machine, self.hoodie_error),
                "iceberg_upsert": self.iceberg_status,
                "ray_init_s": _r(self.ray_init_s),
                "generate_s": _r(self.generate_s),
            }
        )
        if trusted:
            out["baselines"] = {k: m.as_dict() for k, m in self.baselines.items()}
            out["hoodie_runs"] = [r.as_dict() for r in self.runs]
            if self.scaling_run is not None:
                out["scaling_run"] = self.scaling_run.as_dict()
            out["client_runs"] = [c.as_dict() for c in self.client_runs]
            if self.efficiency_rounds:
                out["efficiency_rounds"] = [
                    {"client_rows_per_cpu_s": c, "topology_rows_per_cpu_s": t}
                    for c, t in self.efficiency_rounds
                ]
        return out


def render_report(res: Results) -> str:
    """The human-readable report (stdout)."""
    w, m = res.workload, res.machine
    passed, reason, trusted = res.gate()
    lines = [
        f"mor-q1  variant={w.variant}  shape={w.shape} ({len(w.schema)} columns, "
        f"{w.bytes_per_row:.1f} B/row)  K={w.num_keys:,}  N={w.num_rows:,} in "
        f"{len(w.commits)} commits{'  [--quick]' if res.args.quick else ''}"
        f"{f'  scale={res.args.scale}' if res.args.scale != 1.0 else ''}"
        f"  table version {getattr(res.args, 'table_version', 6)}",
        f"machine: {m['cores']} cores ({m['cpu_model']}), {m['memory_gb']} GB; python "
        f"{m['python']}; {m['date']}; commit {git_commit(_REPO)}",
        f"data: {w.description}; generated in {res.generate_s:.1f} s (seed {res.args.seed})",
        "",
        f"correctness gate: {'PASS' if passed else 'FAIL'} - {reason}",
    ]
    if not trusted:
        lines.append("figures withheld: a table hoodie_ray wrote is wrong")
        return "\n".join(lines)

    rows = []
    for key in (
        "parquet",
        "parquet_plain",
        "parquet_hudi_layout",
        "avro",
        "compaction",
        "compaction_plain",
        "delta",
        "iceberg",
    ):
        b = res.baselines.get(key)
        if b is None:
            if key == "iceberg":
                rows.append(
                    [
                        "ray data + pyiceberg upsert",
                        "-",
                        "-",
                        "-",
                        "-",
                        "-",
                        res.iceberg_status or "-",
                    ]
                )
            continue
        u = b.usage
        note = b.error or ", ".join(
            f"{k}={v}"
            for k, v in b.extra.items()
            if k in ("files", "use_dictionary", "final_rows", "base_rows", "update_rows")
        )
        rows.append(
            [
                b.name,
                fmt_num(b.rows),
                fmt_num(u.wall_s, 2) if u else "-",
                fmt_num(u.total_cpu_s, 2) if u else "-",
                fmt_num(b.rows_per_s),
                fmt_num(b.rows_per_cpu_s),
                note,
            ]
        )
    lines += [
        "",
        "baselines (same rows, same commits; CPU = driver process + Ray workers where Ray is used)",
        text_table(["baseline", "rows", "wall s", "CPU s", "rows/s", "rows/CPU-s", "notes"], rows),
    ]

    if res.hoodie_error:
        lines += ["", f"hoodie_ray: unavailable ({res.hoodie_error})"]
        return "\n".join(lines)

    figs = res.figures()
    pq_floor = res.baselines.get("parquet")
    avro_floor_m = res.baselines.get("avro")
    ing_rows = []
    for r in [*res.runs, *([res.scaling_run] if res.scaling_run else [])]:
        if r.ingest is None:
            ing_rows.append([r.label, r.error or "-", *["-"] * 10])
            continue
        u = r.ingest.usage
        floor = pq_floor if r.fmt == "parquet" else avro_floor_m
        lat = _latency(r.commit_s)
        ing_rows.append(
            [
                r.label,
                fmt_num(u.wall_s, 2) if u else "-",
                fmt_num(u.total_cpu_s, 2) if u else "-",
                fmt_num(r.ingest.rows_per_s),
                fmt_num(r.ingest.rows_per_cpu_s),
                fmt_num(ratio(r.ingest.rows_per_cpu_s, floor.rows_per_cpu_s if floor else None), 3),
                fmt_num(lat["p50"], 2),
                fmt_num(lat["p95"], 2),
                fmt_num(lat["max"], 2),
                fmt_num(r.files.get("write_amplification"), 2),
                f"{r.files.get('file_groups', '-')}/{r.files.get('log_files_per_group', '-')}"
                f"/{r.files.get('log_blocks_per_group', '-')}",
                fmt_num(r.peak_rss_mb_writer(), 0),
            ]
        )
    lines += [
        "",
        "hoodie_ray ingest (commit latency = first write -> checkpoint() returned; efficiency "
        "vs the floor of the same format)",
        text_table(
            [
                "format x writers",
                "wall s",
                "CPU s",
                "rows/s",
                "rows/CPU-s",
                "efficiency",
                "p50 s",
                "p95 s",
                "max s",
                "write amp",
                "groups/logs/blocks",
                "writer RSS MB",
            ],
            ing_rows,
        ),
    ]
    if res.client_runs:
        cl_rows = []
        for c in res.client_runs:
            if c.ingest is None or c.ingest.usage is None:
                cl_rows.append([c.label, c.error or "-", "-", "-", "-", "-", "-"])
                continue
            floor = pq_floor if c.fmt == "parquet" else avro_floor_m
            lat = _latency(c.commit_s)
            cl_rows.append(
                [
                    c.label,
                    fmt_num(c.ingest.usage.wall_s, 2),
                    fmt_num(c.ingest.usage.total_cpu_s, 2),
                    fmt_num(c.ingest.rows_per_s),
                    fmt_num(c.ingest.rows_per_cpu_s),
                    fmt_num(
                        ratio(c.ingest.rows_per_cpu_s, floor.rows_per_cpu_s if floor else None), 3
                    ),
                    fmt_num(lat["p95"], 2),
                ]
            )
        lines += [
            "",
            "hoodie_ray single process (HoodieWriteClient, one write() per commit, no Ray)",
            text_table(
                ["format", "wall s", "CPU s", "rows/s", "rows/CPU-s", "efficiency", "p95 s"],
                cl_rows,
            ),
        ]
    comp_floor = res.baselines.get("compaction")
    other_rows = []
    for r in res.runs:
        for what, cm in (("hr.compact", r.compaction), ("I/O bound", r.compaction_bound)):
            if cm is None:
                continue
            other_rows.append(
                [
                    f"{what} ({r.label})",
                    fmt_num(cm.rows_per_s),
                    fmt_num(cm.rows_per_cpu_s),
                    fmt_num(
                        ratio(cm.rows_per_cpu_s, comp_floor.rows_per_cpu_s if comp_floor else None),
                        3,
                    )
                    + " of floor",
                ]
            )
        if r.read_hr is not None and r.read_hudi_rs is not None:
            ok = r.read_check is not None and r.read_check.passed
            other_rows.append(
                [
                    f"hr.read ({r.label})",
                    fmt_num(r.read_hr.rows_per_s),
                    fmt_num(r.read_hr.rows_per_cpu_s),
                    (
                        fmt_num(ratio(r.read_hr.rows_per_s, r.read_hudi_rs.rows_per_s), 3)
                        + " of hudi-rs"
                    )
                    if ok
                    else f"WRONG: {r.read_check.reason if r.read_check else '-'}",
                ]
            )
            other_rows.append(
                [
                    f"hudi-rs read ({r.label})",
                    fmt_num(r.read_hudi_rs.rows_per_s),
                    fmt_num(r.read_hudi_rs.rows_per_cpu_s),
                    "",
                ]
            )
        elif r.read_error:
            other_rows.append([f"hr.read ({r.label})", "-", "-", r.read_error])
    if other_rows:
        lines += [
            "",
            "compaction (rows = table rows after compaction) and snapshot reads (table with logs)",
            text_table(["operation", "rows/s", "rows/CPU-s", "ratio"], other_rows),
        ]
    lines += ["", "key figures"]
    lines += [
        f"  {FIGURE_LABELS.get(k, k):62s} {'-' if figs.get(k) is None else figs[k]}"
        for k in (*JSON_KEYS[1:], *EXTRA_FIGURES)
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The scale variant (issue 23): upserts into a 20M-key table, against a 2M-key one
# ---------------------------------------------------------------------------------------------

#: The scale variant's key figures and what the report calls them (goals from issue 23).
SCALE_FIGURES: dict[str, str] = {
    "scale_rate_ratio": "upsert rows/CPU-s, big table / reference table (goal >= 0.8)",
    "index_bytes_per_key": "key index bytes per key, upsert job after its commits (goal <= 32)",
    "bootstrap_s": "restarted job: start until its key index is loaded (s)",
    "index_load_s": "restarted job: the assigner's index load alone (s)",
    "speedup_vs_delta_merge_scale": "upsert speed vs delta-rs merge, same commits (goal >= 5)",
    "speedup_vs_iceberg_upsert": "upsert speed vs Ray Data + pyiceberg upsert, same commits",
    "upsert_rows_per_cpu_s": "big table: upsert rows per CPU-second",
    "upsert_rows_per_cpu_s_reference": "reference table: upsert rows per CPU-second",
    "upsert_rows_per_s": "big table: upsert rows per second (wall)",
    "upsert_rows_per_s_reference": "reference table: upsert rows per second (wall)",
    "commit_latency_p95_s": "big table: upsert commit latency, 95th percentile (s)",
    "bootstrap_after_bulk_s": "upsert job on the bulk-loaded table: start until index loaded (s)",
    "index_bytes_per_key_bootstrapped": "key index bytes per key, restarted job",
    "peak_rss_mb_writer": "big table, upsert job: largest writer actor memory (MB)",
    "peak_rss_mb_assigner": "big table, upsert job: largest assigner actor memory (MB)",
    "peak_machine_memory_gb": "machine memory in use, peak over the run (GB)",
}

#: Log block format of the scale variant's tables.
SCALE_FORMAT = "parquet"
#: Records of the restarted job's check commit, as a share of an upsert commit's.
RESTART_CHECK_SHARE = 0.01
#: Time limit of the pyiceberg peer at scale (``--peer-timeout``); delta-rs gets
#: :data:`DELTA_TIMEOUT_FACTOR` times as long.
SCALE_PEER_TIMEOUT_S = 600.0
DELTA_TIMEOUT_FACTOR = 6


def hudi_rs_batches(path: str | Path, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """The snapshot of a table as hudi-rs streams it, batch by batch, only ``columns``."""
    from hudi import HudiReadOptions, HudiTable

    yield from HudiTable(str(path)).read_stream(HudiReadOptions(projection=list(columns)))


def combine_usage(usages: Sequence[CpuUsage]) -> CpuUsage:
    """Several measured sections as one: times added up, each process's CPU added up and its
    peak RSS the largest seen."""
    procs: dict[int, ProcessUsage] = {}
    for u in usages:
        for p in u.processes:
            q = procs.get(p.pid)
            if q is None:
                procs[p.pid] = ProcessUsage(
                    p.pid, p.title, 0.0, p.cpu_s, p.peak_rss_bytes, p.exited
                )
                continue
            q.cpu_last_s += p.cpu_s
            q.peak_rss_bytes = max(q.peak_rss_bytes, p.peak_rss_bytes)
            q.exited = p.exited
            if p.title != "ray::IDLE":
                q.title = p.title
    return CpuUsage(
        wall_s=sum(u.wall_s for u in usages),
        driver_cpu_s=sum(u.driver_cpu_s for u in usages),
        workers_cpu_s=sum(u.workers_cpu_s for u in usages),
        sampler_cpu_s=sum(u.sampler_cpu_s for u in usages),
        samples=sum(u.samples for u in usages),
        processes=tuple(procs.values()),
    )


def role_peaks(usage: CpuUsage | None, pids: dict[str, int]) -> dict[str, float]:
    """Peak RSS (MB) of each actor role (``writer-0``...) that ``usage`` watched."""
    if usage is None:
        return {}
    by_pid = {p.pid: p for p in usage.processes}
    return {
        r: round(by_pid[pid].peak_rss_mb, 1) for r, pid in sorted(pids.items()) if pid in by_pid
    }


class MemoryWatch:
    """Peak memory in use on the machine (total - available, so the object store's shared
    memory counts) over a ``with`` block, sampled every ``poll_s`` seconds."""

    def __init__(self, poll_s: float = 0.5) -> None:
        self.poll_s = poll_s
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-watch", daemon=True)

    def _sample(self) -> None:
        vm = psutil.virtual_memory()
        self.peak_bytes = max(self.peak_bytes, vm.total - vm.available)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._sample()

    def __enter__(self) -> MemoryWatch:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def peak_gb(self) -> float:
        return self.peak_bytes / 2**30


@dataclass
class ScaleTable:
    """One table of the scale variant: a bulk load (an ``insert`` job), the upsert commits
    (an ``upsert`` job, which bootstraps its key index from the bulk-loaded table), and, for
    the big table, a restarted upsert job with one check commit; then the gate."""

    label: str
    workload: ScaleWorkload
    path: str
    bulk: Measurement | None = None
    bulk_start: CpuUsage | None = None
    bulk_actor_pids: dict[str, int] = field(default_factory=dict)
    bootstrap_after_bulk: Measurement | None = None
    settle_s: float | None = None
    upserts: Measurement | None = None
    commit_s: list[float] = field(default_factory=list)
    commit_cpu_s: list[float] = field(default_factory=list)  # driver + Ray workers
    actor_pids: dict[str, int] = field(default_factory=dict)
    index: list[dict[str, int]] = field(default_factory=list)
    restart: Measurement | None = None
    restart_actor_pids: dict[str, int] = field(default_factory=dict)
    restart_index: list[dict[str, int]] = field(default_factory=list)
    restart_commit_s: float | None = None
    restart_check_rows: int | None = None
    #: CPU of closing the upsert job's writer (table services beside the writes finishing),
    #: counted in ``upserts``
    upsert_close_cpu_s: float | None = None
    files: dict[str, Any] = field(default_factory=dict)
    gate: GateResult | None = None
    expected_s: float | None = None
    gate_s: float | None = None
    error: str | None = None

    def gate_failures(self) -> list[str]:
        """Why this table fails the gate (empty when it passes)."""
        out = []
        if self.error:
            out.append(f"{self.label} table: hoodie_ray did not complete ({self.error})")
        if self.gate is not None and not self.gate.passed:
            out.append(f"{self.label} table: {self.gate.reason}")
        return out

    @staticmethod
    def index_load_s(stats: list[dict[str, int]]) -> float | None:
        """The slowest assigner's key index bootstrap (s), when hoodie_ray tells."""
        ms = [s["bootstrap_ms"] for s in stats if "bootstrap_ms" in s]
        return max(ms) / 1000 if ms else None

    @staticmethod
    def bytes_per_key(stats: list[dict[str, int]]) -> float | None:
        """Index bytes / keys over all assigner tasks."""
        keys = sum(s.get("keys", 0) for s in stats)
        return sum(s.get("bytes", 0) for s in stats) / keys if keys else None

    def peaks(self, job: str) -> dict[str, float]:
        """Peak RSS (MB) by actor role of one job: ``bulk``, ``upsert`` or ``restart``."""
        if job == "bulk":
            usages = [m.usage for m in (self.bulk,) if m and m.usage]
            if self.bulk_start is not None:
                usages.append(self.bulk_start)
            return role_peaks(combine_usage(usages) if usages else None, self.bulk_actor_pids)
        if job == "upsert":
            usages = [m.usage for m in (self.bootstrap_after_bulk, self.upserts) if m and m.usage]
            return role_peaks(combine_usage(usages) if usages else None, self.actor_pids)
        return role_peaks(self.restart.usage if self.restart else None, self.restart_actor_pids)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready figures of the table."""
        sw = self.workload

        def m(x: Measurement | None) -> dict[str, Any] | None:
            return x.as_dict() if x else None

        return {
            "label": self.label,
            "error": self.error,
            "bulk_keys": sw.bulk_keys,
            "keys_after": sw.num_keys,
            "upsert_commits": sw.num_upserts,
            "upsert_rows": sw.upsert_rows,
            "bulk": m(self.bulk),
            "bulk_start_s": _r(self.bulk_start.wall_s) if self.bulk_start else None,
            "bootstrap_after_bulk": m(self.bootstrap_after_bulk),
            "settle_s": _r(self.settle_s),
            "upserts": m(self.upserts),
            "commit_s": [_r(s) for s in self.commit_s],
            "commit_cpu_s": [_r(s) for s in self.commit_cpu_s],
            "commit_latency_s": _latency(self.commit_s),
            "index": self.index,
            "index_bytes_per_key": _r(self.bytes_per_key(self.index), 1),
            "restart": m(self.restart),
            "restart_index": self.restart_index,
            "restart_index_bytes_per_key": _r(self.bytes_per_key(self.restart_index), 1),
            "restart_check_rows": self.restart_check_rows,
            "restart_commit_s": _r(self.restart_commit_s),
            "upsert_close_cpu_s": _r(self.upsert_close_cpu_s),
            "files": self.files,
            "gate": self.gate.reason if self.gate else None,
            "expected_s": _r(self.expected_s),
            "gate_s": _r(self.gate_s),
            "actor_pids": {
                "bulk": self.bulk_actor_pids,
                "upsert": self.actor_pids,
                "restart": self.restart_actor_pids,
            },
            "peak_rss_mb": {job: self.peaks(job) for job in ("bulk", "upsert", "restart")},
        }


def _start_job(
    hr: ModuleType, path: str, options: dict[str, str], schema: pa.Schema
) -> tuple[Any, CpuUsage | None, dict[str, int]]:
    """A new ``HoodieStreamWriter`` with its actors up, measured from its creation until every
    actor is constructed (the assigners load their key index from the table in their
    constructor). Returns (writer, usage, actor pids)."""
    w = hr.HoodieStreamWriter(path, options)
    try:
        with CpuMeter(ray_workers=True) as meter:
            w.start(schema)
            pids = dict(w.actor_pids())
    except BaseException:
        w.abort()
        raise
    return w, meter.usage, pids


def _index_stats(w: Any) -> list[dict[str, int]]:
    """The writer's key index sizes per assigner (empty when hoodie_ray does not tell)."""
    return list(w.index_stats()) if hasattr(w, "index_stats") else []


def _scale_bulk(hr: ModuleType, run: ScaleTable, options: dict[str, str], batch_rows: int) -> None:
    sw = run.workload
    log(f"scale {run.label}: bulk insert of {sw.bulk_keys:,} keys ({sw.num_chunks} chunks) ...")
    w, run.bulk_start, run.bulk_actor_pids = _start_job(hr, run.path, options, sw.schema)
    with w:
        wait_for_ray_idle()
        with CpuMeter(ray_workers=True) as meter:
            for chunk in sw.bulk():
                for batch in iter_batches(chunk, batch_rows):
                    w.write(batch)
            if w.checkpoint() is None:
                raise RuntimeError("checkpoint() returned None after the bulk insert")
    run.bulk = Measurement("bulk insert (incl. making the rows)", sw.bulk_keys, meter.usage)
    log(f"scale {run.label}: bulk insert {fmt_num(run.bulk.rows_per_s)} rows/s")


def _scale_upserts(
    hr: ModuleType,
    run: ScaleTable,
    options: dict[str, str],
    batch_rows: int,
    expect: LastWriterWins,
) -> None:
    sw = run.workload
    log(f"scale {run.label}: upsert job start (key index bootstrap) ...")
    w, usage, run.actor_pids = _start_job(hr, run.path, options, sw.schema)
    run.bootstrap_after_bulk = Measurement(
        "upsert job start (key index bootstrap)", sw.bulk_keys, usage
    )
    usages: list[CpuUsage] = []
    # made and added to the expectation before the first: what runs beside the writes
    # between two commits (a metadata-table compaction) is then inside a measured window
    commits = [sw.upsert(j) for j in range(sw.num_upserts)]
    for commit in commits:
        expect.add(commit)
    with w:
        run.settle_s = wait_for_ray_idle()
        for j, commit in enumerate(commits):
            with CpuMeter(ray_workers=True) as meter:
                for batch in iter_batches(commit, batch_rows):
                    w.write(batch)
                instant = w.checkpoint()
            if instant is None or meter.usage is None:
                raise RuntimeError("checkpoint() returned None after a non-empty commit")
            usages.append(meter.usage)
            run.commit_s.append(meter.usage.wall_s)
            run.commit_cpu_s.append(meter.usage.total_cpu_s)
            log(f"scale {run.label}: upsert {j + 1}/{sw.num_upserts} in {meter.usage.wall_s:.1f} s")
        run.index = _index_stats(w)
        # what still runs beside the writes (a metadata-table compaction with
        # hoodie.metadata.compact.async) finishes as the writer closes: the upserts' CPU
        with CpuMeter(ray_workers=True) as meter:
            w.close()
        if meter.usage is not None:
            usages.append(meter.usage)
            run.upsert_close_cpu_s = meter.usage.total_cpu_s
    run.upserts = Measurement("upsert commits", sw.upsert_records, combine_usage(usages))


def _scale_restart(
    hr: ModuleType,
    run: ScaleTable,
    options: dict[str, str],
    batch_rows: int,
    expect: LastWriterWins,
) -> None:
    sw = run.workload
    check = sw.upsert(sw.num_upserts, max(round(sw.upsert_rows * RESTART_CHECK_SHARE), 3))
    expect.add(check)
    log(f"scale {run.label}: restarted job start (key index bootstrap) ...")
    w, usage, run.restart_actor_pids = _start_job(hr, run.path, options, sw.schema)
    with w:
        run.restart_index = _index_stats(w)
        loaded = sum(s["keys"] for s in run.restart_index) if run.restart_index else sw.num_keys
        run.restart = Measurement("restarted job start (key index bootstrap)", loaded, usage)
        c0 = time.perf_counter()
        for batch in iter_batches(check, batch_rows):
            w.write(batch)
        if w.checkpoint() is None:
            raise RuntimeError("checkpoint() returned None after the check commit")
        run.restart_commit_s = time.perf_counter() - c0
        run.restart_check_rows = check.num_rows
    log(f"scale {run.label}: restart bootstrap {usage.wall_s if usage else 0:.1f} s")


def run_scale_table(
    hr: ModuleType,
    sw: ScaleWorkload,
    path: Path,
    args: argparse.Namespace,
    label: str,
    *,
    restart: bool,
) -> ScaleTable:
    """One scale table through the Ray topology (``hr.HoodieStreamWriter``, Parquet log blocks,
    ``args.writers`` writers, compaction off), then the gate: the hudi-rs snapshot, streamed
    batch by batch, against :class:`benchmarks.common.LastWriterWins` of every record written.

    Jobs, in order: a bulk ``insert`` job (one commit, written ``args.batch_rows`` rows per
    ``write()`` as the rows are made, chunk by chunk); an ``upsert`` job, its start (index
    bootstrap from the bulk-loaded table) measured apart, then one commit per upsert commit,
    each measured alone (rows made outside the measurement) and summed; with ``restart``, a
    new upsert job on the table (start measured: ``bootstrap_s``) and one small check commit.
    """
    run = ScaleTable(label, sw, str(path))
    name = f"mor_q1_scale_{label}"
    opts = hoodie_options(
        sw.as_workload(),
        SCALE_FORMAT,
        args.writers,
        name,
        args.table_version,
        args.assigners,
        args.options,
    )
    bulk_opts = {**opts, "hoodie.datasource.write.operation": "insert"}
    check_keys = max(round(sw.upsert_rows * RESTART_CHECK_SHARE), 3) if restart else 0
    expect = LastWriterWins(sw.num_keys + check_keys, sw.key_field, sw.precombine_field)
    try:
        _scale_bulk(hr, run, bulk_opts, args.batch_rows)
        with Timer() as t:
            for chunk in sw.bulk():  # made again: the bulk measurement keeps only the writes
                expect.add(chunk)
        run.expected_s = t.seconds
        _scale_upserts(hr, run, opts, args.batch_rows, expect)
        if restart:
            _scale_restart(hr, run, opts, args.batch_rows, expect)
    except Exception as e:
        _ingest_failed(run, e)
        return run
    run.files = table_file_stats(path)
    log(f"scale {label}: gate ({expect.num_keys:,} keys) ...")
    with Timer() as t:
        try:
            run.gate = expect.check(hudi_rs_batches(path, expect.columns))
        except Exception as e:
            run.gate = GateResult(False, f"hudi-rs cannot read the table: {error_text(e)}", 0, 0)
    run.gate_s = t.seconds
    log(f"gate ({label} table): {run.gate.reason}")
    return run


def _scale_peer_child(
    peer: str, sizes: dict[str, Any], outdir: str, ray_address: str | None, blocks: int, conn: Any
) -> None:
    """Body of a peer's child process: the peer on the scale commits; sends a Measurement (its
    extra with the child's peak RSS) or an error string."""
    import resource

    try:
        sw = ScaleWorkload(**sizes)
        if peer == "iceberg":
            import ray

            ray.init(address=ray_address, logging_level=logging.WARNING)
            m = iceberg_upsert_peer(sw.as_workload(), Path(outdir), blocks)
        else:
            m = delta_merge_peer(sw.as_workload(), Path(outdir))
        m.extra["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        conn.send(m)
    except BaseException as e:
        traceback.print_exc(file=sys.stderr)
        conn.send(error_text(e))
    finally:
        conn.close()


def run_scale_peer(
    peer: str,
    sw: ScaleWorkload,
    outdir: Path,
    timeout_s: float,
    *,
    ray_address: str | None = None,
    blocks: int = 2,
) -> Measurement:
    """A peer (``delta``: :func:`delta_merge_peer`, ``iceberg``: :func:`iceberg_upsert_peer`)
    fed the scale commits -- the bulk load as its first commit, then the upsert commits -- in a
    child process (its memory goes when it ends), stopped after ``timeout_s`` seconds.

    Returns the peer's measurement (over all its commits) with ``bulk_s``, ``upsert_wall_s``
    and ``upsert_rows_per_s`` (upsert records / the summed wall time of its upsert commits)
    added to ``extra``; or one whose ``error`` says why there is none.
    """
    label = "delta-rs merge" if peer == "delta" else "ray data + pyiceberg upsert"
    log(f"scale peer {label} (child process, time limit {timeout_s:.0f} s) ...")
    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_scale_peer_child,
        args=(peer, dataclasses.asdict(sw), str(outdir), ray_address, blocks, send),
        name=f"mor-q1-{peer}",
    )
    got: Measurement | str
    t0 = time.perf_counter()
    proc.start()
    send.close()
    try:
        if recv.poll(timeout_s):
            got = recv.recv()
        else:
            got = f"stopped after the time limit of {timeout_s:.0f} s"
    except EOFError:
        got = "its process ended without a result"
    finally:
        proc.join(timeout=0 if isinstance(got, str) else 60)
        if proc.is_alive():
            proc.kill()
            proc.join()
        recv.close()
    if isinstance(got, str):
        log(f"scale peer {label}: {got}")
        return Measurement(label, sw.upsert_records, None, error=got)
    commit_s = got.extra.get("commit_s")
    if got.ok and isinstance(commit_s, list) and len(commit_s) == 1 + sw.num_upserts:
        upsert_wall = float(sum(commit_s[1:]))
        got.extra["bulk_s"] = commit_s[0]
        got.extra["upsert_wall_s"] = _r(upsert_wall)
        got.extra["upsert_rows_per_s"] = (
            _r(sw.upsert_records / upsert_wall, 0) if upsert_wall > 0 else None
        )
    got.extra["process_s"] = _r(time.perf_counter() - t0)
    log(f"scale peer {label}: {fmt_num(got.extra.get('upsert_rows_per_s'))} upsert rows/s")
    return got


def _peer_rate(m: Measurement | None) -> float | None:
    v = m.extra.get("upsert_rows_per_s") if m is not None and m.ok else None
    return float(v) if v is not None else None


@dataclass
class ScaleResults:
    """Everything one run of the scale variant measured."""

    args: argparse.Namespace
    big: ScaleWorkload
    reference: ScaleWorkload
    machine: dict[str, Any]
    hoodie_error: str | None = None
    tables: dict[str, ScaleTable] = field(default_factory=dict)
    peers: dict[str, Measurement] = field(default_factory=dict)
    peer_status: dict[str, str] = field(default_factory=dict)
    ray_init_s: float | None = None
    wall_s: float | None = None
    peak_machine_memory_gb: float | None = None
    peak_rss_mb_driver: float | None = None

    def gate(self) -> tuple[bool, str, bool]:
        """(passed, reason, figures_trusted), as :meth:`Results.gate`."""
        if self.hoodie_error:
            return False, f"hoodie_ray unavailable ({self.hoodie_error})", True
        if set(self.tables) != {"big", "reference"}:
            return False, "hoodie_ray did not run", True
        failures = [f for t in self.tables.values() for f in t.gate_failures()]
        wrong = [t for t in self.tables.values() if t.gate is not None and not t.gate.passed]
        if failures:
            return False, "; ".join(failures), not wrong
        return True, "both tables, read back by hudi-rs, equal the last-writer-wins dedup", True

    def figures(self) -> dict[str, Any]:
        """The scale variant's figures (None where not measured)."""
        big, ref = self.tables.get("big"), self.tables.get("reference")

        def cpu_rate(t: ScaleTable | None) -> float | None:
            return t.upserts.rows_per_cpu_s if t and t.upserts else None

        def wall_rate(t: ScaleTable | None) -> float | None:
            return t.upserts.rows_per_s if t and t.upserts else None

        upsert_peaks = big.peaks("upsert") if big else {}

        def largest(prefix: str) -> float | None:
            vals = [v for r, v in upsert_peaks.items() if r.startswith(prefix)]
            return max(vals) if vals else None

        restart = big.restart if big else None
        boot = big.bootstrap_after_bulk if big else None
        return {
            "scale_rate_ratio": _r(ratio(cpu_rate(big), cpu_rate(ref))),
            "index_bytes_per_key": _r(ScaleTable.bytes_per_key(big.index) if big else None, 1),
            "bootstrap_s": _r(restart.usage.wall_s if restart and restart.usage else None, 2),
            "index_load_s": _r(ScaleTable.index_load_s(big.restart_index) if big else None),
            "index_load_after_bulk_s": _r(ScaleTable.index_load_s(big.index) if big else None),
            "speedup_vs_delta_merge_scale": _r(
                ratio(wall_rate(big), _peer_rate(self.peers.get("delta")))
            ),
            "speedup_vs_iceberg_upsert": _r(
                ratio(wall_rate(big), _peer_rate(self.peers.get("iceberg")))
            ),
            "peak_rss_mb_actors": upsert_peaks or None,
            "upsert_rows_per_cpu_s": _r(cpu_rate(big), 0),
            "upsert_rows_per_cpu_s_reference": _r(cpu_rate(ref), 0),
            "upsert_rows_per_s": _r(wall_rate(big), 0),
            "upsert_rows_per_s_reference": _r(wall_rate(ref), 0),
            "commit_latency_p95_s": _r(percentile(big.commit_s, 95)) if big else None,
            "commit_latency_p95_s_reference": _r(percentile(ref.commit_s, 95)) if ref else None,
            "bootstrap_after_bulk_s": _r(boot.usage.wall_s if boot and boot.usage else None, 2),
            "bootstrap_keys": restart.rows if restart else None,
            "bootstrap_keys_per_s": _r(restart.rows_per_s, 0) if restart else None,
            "index_keys": sum(s.get("keys", 0) for s in big.index) if big else None,
            "index_bytes": sum(s.get("bytes", 0) for s in big.index) if big else None,
            "index_bytes_per_key_bootstrapped": _r(
                ScaleTable.bytes_per_key(big.restart_index) if big else None, 1
            ),
            "index_bytes_per_key_reference": _r(
                ScaleTable.bytes_per_key(ref.index) if ref else None, 1
            ),
            "peak_rss_mb_writer": largest("writer"),
            "peak_rss_mb_assigner": largest("assigner"),
            "peak_rss_mb_actors_bulk": (big.peaks("bulk") or None) if big else None,
            "peak_rss_mb_actors_restart": (big.peaks("restart") or None) if big else None,
            "peak_rss_mb_actors_reference": (ref.peaks("upsert") or None) if ref else None,
            "peak_rss_mb_driver": _r(self.peak_rss_mb_driver, 1),
            "peak_machine_memory_gb": _r(self.peak_machine_memory_gb, 2),
            "bulk_rows_per_s": _r(big.bulk.rows_per_s, 0) if big and big.bulk else None,
            "delta_upsert_rows_per_s": _peer_rate(self.peers.get("delta")),
            "iceberg_upsert_rows_per_s": _peer_rate(self.peers.get("iceberg")),
        }

    def to_json(self) -> dict[str, Any]:
        """The machine-readable result (figures null when the gate withholds them)."""
        passed, reason, trusted = self.gate()
        out: dict[str, Any] = {"gate": "pass" if passed else "fail", "gate_reason": reason}
        figs = self.figures() if trusted else {}
        for k in JSON_KEYS[1:]:  # mor-q1's keys; most are the base variant's figures
            out[k] = figs.get(k)
        for k in SCALE_FIGURES:
            out[k] = figs.get(k)
        for k, v in figs.items():
            out.setdefault(k, v)
        big, ref = self.big, self.reference
        out.update(
            {
                "benchmark": "mor-q1",
                "variant": "scale",
                "shape": "q1",
                "columns": len(big.schema),
                "K": big.bulk_keys,
                "K_final": big.num_keys,
                "K_reference": ref.bulk_keys,
                "upsert_commits": big.num_upserts,
                "upsert_rows": big.upsert_rows,
                "N": big.upsert_records,
                "quick": bool(self.args.quick),
                "scale": self.args.scale,
                "seed": self.args.seed,
                "writers": self.args.writers,
                "table_version": self.args.table_version,
                "assigners": self.args.assigners,
                "options": self.args.options,
                "log_block_format": SCALE_FORMAT,
                "bulk_operation": "insert",
                **_provenance(self.machine, self.hoodie_error),
                "delta_merge": self.peer_status.get("delta"),
                "iceberg_upsert": self.peer_status.get("iceberg"),
                "ray_init_s": _r(self.ray_init_s),
                "wall_s": _r(self.wall_s, 1),
            }
        )
        if trusted:
            out["tables"] = {k: t.as_dict() for k, t in self.tables.items()}
            out["peers"] = {k: m.as_dict() for k, m in self.peers.items()}
        return out


def render_scale_report(res: ScaleResults) -> str:
    """The scale variant's human-readable report (stdout)."""
    big, ref, m = res.big, res.reference, res.machine
    passed, reason, trusted = res.gate()
    lines = [
        f"mor-q1  variant=scale  shape=q1 ({len(big.schema)} columns)  big table: "
        f"{big.bulk_keys:,} keys bulk-loaded, then {big.num_upserts} upsert commits of "
        f"{big.upsert_rows:,}; reference table: {ref.bulk_keys:,} keys, the same commits"
        f"{'  [--quick]' if res.args.quick else ''}"
        f"{f'  scale={res.args.scale}' if res.args.scale != 1.0 else ''}",
        f"hoodie_ray: table version {res.args.table_version}, {res.args.writers} writers, "
        f"{res.args.assigners} assigner(s), {SCALE_FORMAT} log blocks, bulk load with "
        "operation=insert, compaction off"
        + "".join(f", {k}={v}" for k, v in res.args.options.items()),
        f"machine: {m['cores']} cores ({m['cpu_model']}), {m['memory_gb']} GB; python "
        f"{m['python']}; {m['date']}; commit {git_commit(_REPO)}",
        f"data: {big.description}",
        "",
        f"correctness gate: {'PASS' if passed else 'FAIL'} - {reason}",
    ]
    if not trusted:
        lines.append("figures withheld: a table hoodie_ray wrote is wrong")
        return "\n".join(lines)
    if res.hoodie_error:
        lines += ["", f"hoodie_ray: unavailable ({res.hoodie_error})"]
    figs = res.figures()
    rows = []
    for t in res.tables.values():
        u = t.upserts.usage if t.upserts else None
        if u is None or t.upserts is None:
            rows.append([t.label, t.error or "-", *["-"] * 10])
            continue
        lat = _latency(t.commit_s)
        rows.append(
            [
                t.label,
                fmt_num(t.workload.bulk_keys),
                fmt_num(t.workload.num_keys),
                fmt_num(u.wall_s, 2),
                fmt_num(u.total_cpu_s, 2),
                fmt_num(t.upserts.rows_per_s),
                fmt_num(t.upserts.rows_per_cpu_s),
                fmt_num(lat["p50"], 2),
                fmt_num(lat["p95"], 2),
                fmt_num(lat["max"], 2),
                f"{t.files.get('file_groups', '-')}/{t.files.get('log_files', '-')}",
                fmt_num(ScaleTable.bytes_per_key(t.index), 1),
            ]
        )
    lines += [
        "",
        f"upsert commits ({big.num_upserts} x {big.upsert_rows:,} records; each measured from "
        "its first write to checkpoint() returning, the rows made beforehand)",
        text_table(
            [
                "table",
                "keys before",
                "keys after",
                "wall s",
                "CPU s",
                "rows/s",
                "rows/CPU-s",
                "p50 s",
                "p95 s",
                "max s",
                "groups/logs",
                "index B/key",
            ],
            rows,
        ),
    ]
    jobs = []
    for t in res.tables.values():
        b, boot = t.bulk, t.bootstrap_after_bulk
        jobs.append(
            [
                f"{t.label}: bulk insert job",
                fmt_num(t.bulk_start.wall_s, 2) if t.bulk_start else "-",
                "",
                fmt_num(b.usage.wall_s, 2) if b and b.usage else "-",
                fmt_num(b.rows_per_s) if b else "-",
                fmt_num(b.rows_per_cpu_s) if b else "-",
            ]
        )
        jobs.append(
            [
                f"{t.label}: upsert job ({t.workload.bulk_keys:,} keys to load)",
                fmt_num(boot.usage.wall_s, 2) if boot and boot.usage else "-",
                fmt_num(ScaleTable.index_load_s(t.index), 2),
                "",
                "",
                "",
            ]
        )
        if t.restart is not None and t.restart.usage is not None:
            jobs.append(
                [
                    f"{t.label}: restarted job ({t.restart.rows:,} keys to load)",
                    fmt_num(t.restart.usage.wall_s, 2),
                    fmt_num(ScaleTable.index_load_s(t.restart_index), 2),
                    fmt_num(t.restart_commit_s, 2),
                    "",
                    "",
                ]
            )
    check_rows = res.tables["big"].restart_check_rows if "big" in res.tables else None
    lines += [
        "",
        "jobs (start: a new writer until every actor is up; index load: the assigner "
        "building its key index from the table, part of the start; "
        "the bulk insert's time includes making the rows; the restarted job's commit: a check "
        f"commit of {fmt_num(check_rows)} records)",
        text_table(["job", "start s", "index load s", "commit s", "rows/s", "rows/CPU-s"], jobs),
    ]
    peak_rows = []
    if "big" in res.tables:
        t = res.tables["big"]
        by_job = {job: t.peaks(job) for job in ("bulk", "upsert", "restart")}
        roles = sorted({r for p in by_job.values() for r in p})
        peak_rows = [
            [r, *(fmt_num(by_job[job].get(r), 0) for job in ("bulk", "upsert", "restart"))]
            for r in roles
        ]
    lines += [
        "",
        "actor memory, big table (peak RSS, MB)",
        text_table(["actor", "bulk job", "upsert job", "restarted job"], peak_rows),
        f"driver peak RSS {fmt_num(res.peak_rss_mb_driver, 0)} MB; machine memory in use, "
        f"peak {fmt_num(res.peak_machine_memory_gb, 1)} GB",
    ]
    peer_rows = []
    for key, label in (("delta", "delta-rs merge"), ("iceberg", "ray data + pyiceberg upsert")):
        p = res.peers.get(key)
        if p is None:
            peer_rows.append([label, res.peer_status.get(key, "-"), "-", "-", "-", "-"])
            continue
        peer_rows.append(
            [
                label,
                p.error or "ran",
                fmt_num(p.extra.get("bulk_s"), 2),
                fmt_num(p.extra.get("upsert_wall_s"), 2),
                fmt_num(p.extra.get("upsert_rows_per_s")),
                fmt_num(p.extra.get("peak_rss_mb"), 0),
            ]
        )
    lines += [
        "",
        "peers, big table's commits (in a child process; wall of the upsert commits only)",
        text_table(["peer", "status", "bulk s", "upserts s", "rows/s", "peak RSS MB"], peer_rows),
        "",
        "key figures",
    ]
    for k, label in SCALE_FIGURES.items():
        v = figs.get(k)
        shown = fmt_num(v) if isinstance(v, float) and v >= 1000 else v
        lines.append(f"  {label:70s} {'-' if v is None else shown}")
    peaks = figs.get("peak_rss_mb_actors") or {}
    lines.append(
        f"  {'peak RSS by actor, upsert job (MB)':70s} "
        + (", ".join(f"{r} {v:,.0f}" for r, v in peaks.items()) or "-")
    )
    return "\n".join(lines)


def run_scale(args: argparse.Namespace, workdir: Path) -> int:
    """The scale variant (issue 23): 0 when the gate passes, 1 otherwise.

    Sizes from :func:`benchmarks.common.scale_sizes`: the big table is bulk-loaded with 20M
    keys (``--quick``: 2M; ``--scale`` multiplies), then takes 8 upsert commits of 1M records
    (100K; scaled alike); the reference table the same upsert commits' shape after a bulk load
    of 2M keys (200K). Every commit is made when it is written. Then the peers, fed the big
    table's commits (unless ``--skip-peers``): delta-rs merge, and Ray Data + pyiceberg upsert
    when pyiceberg is installed, each in a child process with a time limit.
    """
    t_run = time.perf_counter()
    machine = machine_info()
    keys, ref_keys, rows = scale_sizes(quick=args.quick, scale=args.scale)
    big = ScaleWorkload(keys, rows, seed=args.seed)
    ref = ScaleWorkload(ref_keys, rows, seed=args.seed)
    res = ScaleResults(args, big, ref, machine)
    log(f"scale variant: {keys:,} keys (reference {ref_keys:,}), {big.num_upserts} x {rows:,}")
    hr, res.hoodie_error = (None, "skipped (--skip-hoodie)") if args.skip_hoodie else load_hoodie()
    if res.hoodie_error:
        log(f"hoodie_ray: unavailable ({res.hoodie_error})")
    timeout = args.peer_timeout if args.peer_timeout is not None else SCALE_PEER_TIMEOUT_S
    peers: list[tuple[str, float]] = []
    if args.skip_peers:
        res.peer_status = {"delta": "skipped (--skip-peers)", "iceberg": "skipped (--skip-peers)"}
    else:
        for peer, module, limit in (
            ("delta", "deltalake", timeout * DELTA_TIMEOUT_FACTOR),
            ("iceberg", "pyiceberg", timeout),
        ):
            if importlib.util.find_spec(module) is None:
                res.peer_status[peer] = "not installed"
            else:
                peers.append((peer, limit))
    with MemoryWatch() as mem:
        ray_started = False
        try:
            import ray

            log("ray.init ...")
            res.ray_init_s, ray_started = _init_ray()
            if hr is not None:
                for label, sw, restart in (("big", big, True), ("reference", ref, False)):
                    path = workdir / f"hudi_scale_{label}"
                    res.tables[label] = run_scale_table(hr, sw, path, args, label, restart=restart)
                    if not args.keep:
                        shutil.rmtree(path, ignore_errors=True)
            address = ray.get_runtime_context().gcs_address if ray.is_initialized() else None
            for peer, limit in peers:
                outdir = workdir / f"scale_{peer}"
                outdir.mkdir(parents=True, exist_ok=True)
                m = run_scale_peer(
                    peer, big, outdir, limit, ray_address=address, blocks=args.writers
                )
                res.peers[peer] = m
                res.peer_status[peer] = m.error or "ran"
                shutil.rmtree(outdir, ignore_errors=True)
        finally:
            if ray_started:
                import ray

                ray.shutdown()
    import resource

    res.peak_machine_memory_gb = mem.peak_gb
    res.peak_rss_mb_driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res.wall_s = time.perf_counter() - t_run
    passed, _reason, _trusted = res.gate()
    sys.stderr.flush()
    print(render_scale_report(res), flush=True)
    if args.json:
        print(json.dumps(res.to_json(), default=str), flush=True)
    return 0 if passed else 1


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options (the hidden ones are for development and tests)."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.mor_q1",
        description="mor-q1: Hudi MOR upserts from Ray, as ratios against same-run baselines.",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="K=200K, N=600K, 6 commits (scale: 2M keys, 8 x 100K upserts, vs 200K keys)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument(
        "--variant",
        choices=VARIANTS,
        default="base",
        help="row shape and commits (mor-q1.md); scale (issue 23): bulk-load 20M keys, then "
        "8 upsert commits of 1M records (2/3 updates, 1/3 inserts) against the same on 2M keys, "
        "Parquet log blocks; reports scale_rate_ratio, index_bytes_per_key, bootstrap_s, "
        "speedup_vs_delta_merge_scale, peak_rss_mb_actors",
    )
    p.add_argument("--writers", type=int, choices=(1, 2), default=2, help="write.tasks")
    p.add_argument("--skip-peers", action="store_true", help="skip delta-rs and pyiceberg")
    p.add_argument(
        "--table-version",
        type=int,
        choices=(6, 8),
        default=6,
        help="hoodie.write.table.version of the tables hoodie_ray writes",
    )
    add_option_argument(
        p,
        "a Hudi option for every table hoodie_ray writes (repeatable), added last, e.g. "
        "hoodie.metadata.record.index.enable=true (with --table-version 8)",
    )
    hidden = argparse.SUPPRESS
    p.add_argument("--scale", type=float, default=1.0, help=hidden)
    p.add_argument(
        "--assigners",
        type=int,
        default=1,
        help="write.bucket_assign.tasks (mor-q1.md: 1; 0 = as many as writers, Flink's default)",
    )
    p.add_argument("--seed", type=int, default=20240601, help=hidden)
    p.add_argument("--workdir", type=Path, default=None, help=hidden)
    p.add_argument("--keep", action="store_true", help=hidden)
    p.add_argument("--floor-files", type=int, default=None, help=hidden)
    p.add_argument("--floor-repeats", type=int, default=3, help=hidden)
    p.add_argument("--batch-rows", type=int, default=DEFAULT_BATCH_ROWS, help=hidden)
    p.add_argument("--formats", default=",".join(LOG_FORMATS), help=hidden)
    p.add_argument("--no-scaling", action="store_true", help=hidden)
    p.add_argument(
        "--efficiency-rounds",
        type=int,
        default=0,
        help="the client and the topology (Parquet) again N times, alternating, for "
        "topology_efficiency_median and _each (base variants)",
    )
    p.add_argument("--skip-hoodie", action="store_true", help=hidden)
    p.add_argument("--no-client", action="store_true", help=hidden)
    p.add_argument("--no-full", action="store_true", help=hidden)
    p.add_argument("--peer-timeout", type=float, default=None, help=hidden)
    args = p.parse_args(argv)
    args.formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in args.formats if f not in LOG_FORMATS]
    if bad:
        p.error(f"--formats: unknown {bad}; expected {LOG_FORMATS}")
    if args.batch_rows < 1 or args.batch_rows > DEFAULT_BATCH_ROWS:
        p.error(f"--batch-rows must be in 1..{DEFAULT_BATCH_ROWS}")
    args.options = dict(args.option)
    return args


def _topology_run(
    hr: Any,
    workload: Workload,
    expected: pa.Table,
    path: Path,
    fmt: str,
    writers: int,
    args: argparse.Namespace,
    *,
    full: bool = False,
) -> HoodieRun:
    """:func:`run_hoodie` with this run's arguments (batch rows, table version, assigners,
    ``--option``s); ``full``: compaction and reads after the ingest too."""
    return run_hoodie(
        hr,
        workload,
        expected,
        path,
        fmt,
        writers,
        args.batch_rows,
        full=full,
        table_version=args.table_version,
        assigners=args.assigners,
        extra_options=args.options,
    )


def _efficiency_rounds(
    hr: Any,
    res: Results,
    workload: Workload,
    expected: pa.Table,
    workdir: Path,
    args: argparse.Namespace,
) -> None:
    """``--efficiency-rounds N``: the client and the topology (Parquet blocks, ingest only)
    again, N times, in alternating order, so that ``topology_efficiency`` is also read from
    runs seconds apart rather than minutes (the main run's client runs before the floors'
    Ray start, its topology after)."""
    for r in range(args.efficiency_rounds):
        got: dict[str, float | None] = {}
        for kind in ("client", "topology") if r % 2 == 0 else ("topology", "client"):
            path = workdir / f"hudi_efficiency_{kind}_{r}"
            if kind == "client":
                c = run_client(
                    hr, workload, expected, path, "parquet", args.table_version, args.options
                )
                got[kind] = c.ingest.rows_per_cpu_s if c.ingest else None
            else:
                t = _topology_run(hr, workload, expected, path, "parquet", args.writers, args)
                got[kind] = t.ingest.rows_per_cpu_s if t.ingest else None
            shutil.rmtree(path, ignore_errors=True)
        res.efficiency_rounds.append((got["client"], got["topology"]))


def run_baselines(
    workload: Workload, workdir: Path, *, files: int, skip_peers: bool, repeats: int = 3
) -> dict[str, Measurement]:
    """The in-process baselines (no Ray): Parquet, Avro and compaction floors, delta-rs.

    The short floors (Parquet, compaction) run ``repeats`` times, keeping the median; the Avro
    floor and delta-rs, long enough to be stable, run once.
    """
    rows, keys = workload.num_rows, workload.num_keys
    short = (  # key, label, function, work folder, rows charged
        ("parquet", "parquet floor", parquet_floor, "pq", rows),
        (
            "parquet_plain",
            "parquet floor (plain encoding)",
            functools.partial(parquet_floor, plain=True),
            "pqd",
            rows,
        ),
        (
            "parquet_hudi_layout",
            "parquet floor (Hudi layout)",
            parquet_floor_hudi_layout,
            "pqh",
            rows,
        ),
        ("compaction", "compaction floor", compaction_floor, "comp", keys),
        (
            "compaction_plain",
            "compaction floor (plain encoding)",
            functools.partial(compaction_floor, plain=True),
            "compd",
            keys,
        ),
    )
    out = {
        key: _measure(label, n, fn, workload, workdir / d, files, repeats=repeats)
        for key, label, fn, d, n in short
    }
    out["avro"] = _measure("avro floor", rows, avro_floor, workload, workdir / "avro", files)
    for d in ("pq", "pqd", "pqh", "avro", "comp", "compd"):
        shutil.rmtree(workdir / d, ignore_errors=True)
    if not skip_peers:
        out["delta"] = _measure(
            "delta-rs merge", workload.num_rows, delta_merge_peer, workload, workdir / "delta"
        )
        shutil.rmtree(workdir / "delta", ignore_errors=True)
    return out


def _init_ray() -> tuple[float, bool]:
    """Start a private local Ray node (``RAY_ADDRESS`` selects an existing cluster instead).

    A private node keeps other Ray instances on a shared machine out of the CPU accounting:
    its raylet is a child of this process (:func:`benchmarks.common.find_local_raylets`).
    A Ray already initialised in this process (a test session's) is reused. Returns (seconds,
    whether this call started Ray, so that only then the run shuts it down).
    """
    import ray

    t0 = time.perf_counter()
    started = False
    if not ray.is_initialized():
        ray.init(
            address=os.environ.get("RAY_ADDRESS") or "local",
            include_dashboard=False,
            logging_level=logging.WARNING,
        )
        started = True
    return time.perf_counter() - t0, started


def main(argv: Sequence[str] | None = None) -> int:
    """Run mor-q1; 0 when the gate passes, 1 otherwise."""
    args = parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mor_q1_"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        return _main(args, workdir)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def _main(args: argparse.Namespace, workdir: Path) -> int:
    if args.variant == "scale":
        return run_scale(args, workdir)
    machine = machine_info()
    log(f"generating variant {args.variant} (quick={args.quick}, scale={args.scale}) ...")
    with Timer() as t:
        workload = generate_workload(
            args.variant, quick=args.quick, scale=args.scale, seed=args.seed
        )
        expected = expected_snapshot(workload)
    log(f"{workload.num_rows:,} rows, {workload.num_keys:,} keys, in {t.seconds:.1f} s")
    res = Results(args, workload, machine, t.seconds)

    hr, res.hoodie_error = (None, "skipped (--skip-hoodie)") if args.skip_hoodie else load_hoodie()
    if res.hoodie_error:
        log(f"hoodie_ray: unavailable ({res.hoodie_error})")

    files = args.floor_files or args.writers
    res.baselines = run_baselines(
        workload, workdir, files=files, skip_peers=args.skip_peers, repeats=args.floor_repeats
    )

    iceberg_wanted = not args.skip_peers
    iceberg_installed = importlib.util.find_spec("pyiceberg") is not None
    if not iceberg_wanted:
        res.iceberg_status = "skipped (--skip-peers)"
    elif not iceberg_installed:
        res.iceberg_status = "not installed"

    if hr is not None and not args.no_client:
        for fmt in args.formats:
            path = workdir / f"hudi_client_{fmt}"
            res.client_runs.append(
                run_client(hr, workload, expected, path, fmt, args.table_version, args.options)
            )
            if not args.keep:
                shutil.rmtree(path, ignore_errors=True)

    ray_needed = hr is not None or (iceberg_wanted and iceberg_installed)
    ray_started = False
    if ray_needed:
        log("ray.init ...")
        res.ray_init_s, ray_started = _init_ray()
    try:
        if iceberg_wanted and iceberg_installed:
            m = _measure(
                "ray data + pyiceberg upsert",
                workload.num_rows,
                iceberg_upsert_peer,
                workload,
                workdir / "iceberg",
                files,
            )
            res.baselines["iceberg"] = m
            res.iceberg_status = m.error or "ran"
            shutil.rmtree(workdir / "iceberg", ignore_errors=True)
        if hr is not None:
            for fmt in args.formats:
                path = workdir / f"hudi_{fmt}_w{args.writers}"
                run = _topology_run(
                    hr, workload, expected, path, fmt, args.writers, args, full=not args.no_full
                )
                res.runs.append(run)
                if not args.keep:
                    shutil.rmtree(path, ignore_errors=True)
            primary = next((r for r in res.runs if r.ingest is not None), None)
            if args.writers == 2 and not args.no_scaling and primary is not None:
                path = workdir / f"hudi_{primary.fmt}_w1"
                res.scaling_run = _topology_run(hr, workload, expected, path, primary.fmt, 1, args)
                if not args.keep:
                    shutil.rmtree(path, ignore_errors=True)
            if "parquet" in args.formats and not args.no_client:
                _efficiency_rounds(hr, res, workload, expected, workdir, args)
    finally:
        if ray_started:
            import ray

            ray.shutdown()

    passed, _reason, _trusted = res.gate()
    sys.stderr.flush()
    print(render_report(res), flush=True)
    if args.json:
        print(json.dumps(res.to_json(), default=str), flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
