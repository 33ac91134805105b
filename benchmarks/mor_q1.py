"""mor-q1: Merge-On-Read upserts from Ray, measured as ratios against baselines in one run.

The benchmark is specified in ``../shared/bench/mor-q1.md``. One run generates the rows once
(:func:`benchmarks.common.generate_workload`), then feeds the same commits to:

1. the Parquet floor (``pq.write_table`` of each commit, split like the writers split it),
2. the Avro floor (``Table.to_pylist()`` + ``fastavro.writer``),
3. the compaction floor (pyarrow: read base, read updates, anti-join on key, concat, write),
4. peers: delta-rs merge, and Ray Data + pyiceberg upsert when pyiceberg is installed,
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

With ``--json`` the last line of stdout is one JSON object (keys in :data:`JSON_KEYS`, more
beside them); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import (
    BASE_FILE_RE,
    LOG_FILE_RE,
    VARIANTS,
    CpuMeter,
    GateResult,
    Measurement,
    Timer,
    Workload,
    avro_schema_for,
    check_gate,
    expected_snapshot,
    fmt_num,
    generate_workload,
    git_commit,
    iter_batches,
    lww_dedup,
    machine_info,
    percentile,
    ratio,
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
_T0 = time.perf_counter()


def log(msg: str) -> None:
    """Progress to stderr (stdout carries only the report)."""
    print(f"[mor-q1 {time.perf_counter() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def _err(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


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
) -> Measurement | None:
    """Diagnostic: the input and output work every compaction of these file slices must do,
    in pyarrow, with no merge at all.

    Measured: read every log file and decode every Parquet data block in it (every logged
    version: a merge-on-read log holds all of them), read the base files, and write the
    compacted rows again (read from the compaction's ``outputs`` beforehand) in as many files,
    snappy, with hoodie_ray's per-column dictionary choice. Its rows per CPU-second over the
    compaction floor's is the highest compaction efficiency a merge of this table could reach
    (None for logs that are not all Parquet).
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
                if not isinstance(blk, ParquetDataBlock) or blk.content is None:
                    return None
                decoded += pq.ParquetFile(pa.BufferReader(blk.content)).read().num_rows
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
        },
    )


def iceberg_upsert_peer(workload: Workload, outdir: Path) -> Measurement:
    """Ray Data ``write_iceberg(mode=UPSERT)`` into a pyiceberg SQL catalog on sqlite.

    The first commit is appended, every later one upserted on the key (copy-on-write).
    Measured with Ray workers. Needs pyiceberg (not installed on the project machine: this
    path has not been run there).
    """
    import ray
    from pyiceberg.catalog import load_catalog
    from ray.data import SaveMode

    key, order = workload.key_field, workload.precombine_field
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
    catalog.create_table(ident, schema=workload.schema)
    latencies: list[float] = []
    with CpuMeter(ray_workers=True) as meter:
        for i, commit in enumerate(workload.commits):
            t0 = time.perf_counter()
            ds = ray.data.from_arrow(lww_dedup(commit, key, order))
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
    return Measurement(
        "ray data + pyiceberg upsert",
        workload.num_rows,
        meter.usage,
        extra={
            "commit_p50_s": _r(percentile(latencies, 50)),
            "commit_max_s": _r(max(latencies, default=None)),
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
        log(f"{name} failed: {_err(e)}")
        traceback.print_exc(file=sys.stderr)
        return Measurement(name, rows, None, error=_err(e))
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
        return None, _err(e)
    return hr, None


def hoodie_options(
    workload: Workload,
    fmt: str,
    writers: int,
    table_name: str,
    table_version: int = 6,
    assigners: int = 1,
) -> dict[str, str]:
    """Writer options of mor-q1: ``assigners`` bucket assigners (1 in the benchmark; 0 = as many
    as writers, Flink's default), ``writers`` writers, compaction off, a new table of
    ``table_version`` (6 or 8)."""
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
        out = []
        if self.error:
            out.append(f"{self.label}: hoodie_ray did not complete ({self.error})")
        for what, g in (
            ("after ingest", self.gate_ingest),
            ("after compaction", self.gate_compacted),
        ):
            if g is not None and not g.passed:
                out.append(f"{self.label} {what}: {g.reason}")
        return out

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
        result = GateResult(False, f"hudi-rs cannot read the table: {_err(e)}", 0, 0)
    log(f"gate {when}: {result.reason}")
    return result


def _ingest_failed(run: Any, e: BaseException) -> None:
    run.error = f"ingest: {_err(e)}"
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
        hoodie_options(workload, fmt, writers, table_name, table_version, assigners),
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
        run.read_error = _err(e)
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
            )
        if instant is None:
            raise RuntimeError("hr.compact returned None on a table with log files")
        run.compaction = Measurement(
            "hr.compact", expected.num_rows, m.usage, extra={"instant": str(instant)}
        )
    except Exception as e:
        run.error = f"compaction: {_err(e)}"
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
        log(f"compaction I/O bound not measured: {_err(e)}")
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
        out = []
        if self.error:
            out.append(f"{self.label}: hoodie_ray did not complete ({self.error})")
        if self.gate_ingest is not None and not self.gate_ingest.passed:
            out.append(f"{self.label}: {self.gate_ingest.reason}")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": self.fmt,
            "error": self.error,
            "ingest": self.ingest.as_dict() if self.ingest else None,
            "commit_latency_s": _latency(self.commit_s),
            "gate_ingest": self.gate_ingest.reason if self.gate_ingest else None,
        }


def run_client(
    hr: ModuleType,
    workload: Workload,
    expected: pa.Table,
    path: Path,
    fmt: str,
    table_version: int = 6,
) -> ClientRun:
    """Ingest every commit with one ``hr.HoodieWriteClient(path, options)``, one ``write(commit)``
    per commit, in this process, measured as one section; then the gate (hudi-rs).

    Each call opens the table (lock, timeline, file slices), assigns, writes and commits; the
    client keeps its key index between calls (``hr.write(..., engine="local")`` makes a new
    client per call, so it bootstraps the index from the table every time).
    """
    run = ClientRun(fmt, str(path))
    options = hoodie_options(
        workload, fmt, 1, f"mor_q1_{workload.variant}_{fmt}_client", table_version
    )
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
            "compaction_vs_io_bound": _r(_vs_bound(rp)),
            "compaction_vs_io_bound_avro": _r(_vs_bound(ra)),
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
                "machine": {k: v for k, v in self.machine.items() if k != "date"},
                "cores": self.machine.get("cores"),
                "cpu_model": self.machine.get("cpu_model"),
                "date": self.machine.get("date"),
                "commit": git_commit(_REPO),
                "hoodie_ray": "unavailable" if self.hoodie_error else "ran",
                "hoodie_ray_error": self.hoodie_error,
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
# Main
# ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options (the hidden ones are for development and tests)."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.mor_q1",
        description="mor-q1: Hudi MOR upserts from Ray, as ratios against same-run baselines.",
    )
    p.add_argument("--quick", action="store_true", help="K=200K, N=600K, 6 commits")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--variant", choices=VARIANTS, default="base")
    p.add_argument("--writers", type=int, choices=(1, 2), default=2, help="write.tasks")
    p.add_argument("--skip-peers", action="store_true", help="skip delta-rs and pyiceberg")
    p.add_argument(
        "--table-version",
        type=int,
        choices=(6, 8),
        default=6,
        help="hoodie.write.table.version of the tables hoodie_ray writes",
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
    p.add_argument("--skip-hoodie", action="store_true", help=hidden)
    p.add_argument("--no-client", action="store_true", help=hidden)
    p.add_argument("--no-full", action="store_true", help=hidden)
    args = p.parse_args(argv)
    args.formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in args.formats if f not in LOG_FORMATS]
    if bad:
        p.error(f"--formats: unknown {bad}; expected {LOG_FORMATS}")
    if args.batch_rows < 1 or args.batch_rows > DEFAULT_BATCH_ROWS:
        p.error(f"--batch-rows must be in 1..{DEFAULT_BATCH_ROWS}")
    return args


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
                run_client(hr, workload, expected, path, fmt, args.table_version)
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
            )
            res.baselines["iceberg"] = m
            res.iceberg_status = m.error or "ran"
            shutil.rmtree(workdir / "iceberg", ignore_errors=True)
        if hr is not None:
            for fmt in args.formats:
                path = workdir / f"hudi_{fmt}_w{args.writers}"
                run = run_hoodie(
                    hr,
                    workload,
                    expected,
                    path,
                    fmt,
                    args.writers,
                    args.batch_rows,
                    full=not args.no_full,
                    table_version=args.table_version,
                    assigners=args.assigners,
                )
                res.runs.append(run)
                if not args.keep:
                    shutil.rmtree(path, ignore_errors=True)
            primary = next((r for r in res.runs if r.ingest is not None), None)
            if args.writers == 2 and not args.no_scaling and primary is not None:
                path = workdir / f"hudi_{primary.fmt}_w1"
                res.scaling_run = run_hoodie(
                    hr,
                    workload,
                    expected,
                    path,
                    primary.fmt,
                    1,
                    args.batch_rows,
                    full=False,
                    table_version=args.table_version,
                    assigners=args.assigners,
                )
                if not args.keep:
                    shutil.rmtree(path, ignore_errors=True)
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
