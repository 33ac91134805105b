"""Compaction against its I/O bound (issue 23, ``compaction_vs_io_bound``), in one process.

Writes mor-q1 tables in this process (``HoodieWriteClient``, mor-q1's writer options: one table
per log block format, compaction off; the full workload makes 4 file groups of up to 11
blocks, as the 2-writer Ray run does), then for each repeat and format, on a fresh copy of
the table:

1. ``hr.compact(path, engine="local")``, CPU-seconds measured;
2. the I/O bound of the same file slices: read every log file, decode every data block (all
   logged versions; Parquet blocks with pyarrow as ``benchmarks.mor_q1.compaction_io_bound``
   does, Avro blocks with hoodie_ray's decoder, there being no other), read the base files,
   write the compacted rows again with hoodie_ray's encoding choice; no merge.

``compaction_vs_io_bound`` = compaction rows per CPU-second / the bound's, both over the
compacted rows (the table's keys). The first compaction of each format is a warm-up on the
``--quick`` table (imports, numba, the process heap) and is not reported. After the first
measured compaction a gate compares ``hr.read`` with the last-writer-wins dedup of the input.

Usage::

    python -m benchmarks.compaction_bound [--quick] [--reps 3] [--formats parquet,avro]
                                          [--table-version 6|8] [--workdir DIR] [--json]

Profile one compaction with py-spy (tables kept in ``--workdir`` are reused)::

    python -m benchmarks.compaction_bound --workdir /tmp/cb --reps 0        # build only
    py-spy record -o prof.txt --format raw -r 250 --native -- \\
        python -m benchmarks.compaction_bound --workdir /tmp/cb --reps 1 --formats parquet
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import (
    BASE_FILE_RE,
    LOG_FILE_RE,
    CpuMeter,
    Workload,
    check_gate,
    expected_snapshot,
    generate_workload,
    work_dir,
)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def build_table(path: Path, workload: Workload, fmt: str, table_version: int) -> None:
    """Write every commit of ``workload`` with one ``HoodieWriteClient`` and mor-q1's writer
    options for 2 writers (compaction off)."""
    import hoodie_ray as hr
    from benchmarks.mor_q1 import hoodie_options

    shutil.rmtree(path, ignore_errors=True)
    options = hoodie_options(workload, fmt, 2, f"compaction_bound_{fmt}", table_version)
    client = hr.HoodieWriteClient(str(path), options)
    for commit in workload.commits:
        client.write(commit)


def data_files(path: Path) -> dict[Path, str]:
    """Base and log files of a table: path -> file id."""
    out: dict[Path, str] = {}
    for p in path.rglob("*"):
        if ".hoodie" in p.relative_to(path).parts or not p.is_file():
            continue
        m = LOG_FILE_RE.match(p.name) or BASE_FILE_RE.match(p.name)
        if m:
            out[p] = m["fid"]
    return out


def io_bound(slice_files: list[Path], outputs: list[Path], workdir: Path) -> tuple[float, int]:
    """CPU-seconds of the compaction's input and output work without a merge, and the records
    decoded (mor-q1's :func:`~benchmarks.mor_q1.compaction_io_bound`)."""
    from benchmarks.mor_q1 import compaction_io_bound

    m = compaction_io_bound(slice_files, outputs, workdir)
    assert m.usage is not None
    return m.usage.total_cpu_s, int(m.extra["records_decoded"])


@dataclass
class Rep:
    """One compaction and its bound, on the same file slices."""

    fmt: str
    rows: int
    compact_cpu_s: float
    bound_cpu_s: float
    records_decoded: int
    file_groups: int

    @property
    def ratio(self) -> float:
        return self.bound_cpu_s / self.compact_cpu_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": self.fmt,
            "rows": self.rows,
            "compact_cpu_s": round(self.compact_cpu_s, 3),
            "bound_cpu_s": round(self.bound_cpu_s, 3),
            "compact_rows_per_cpu_s": round(self.rows / self.compact_cpu_s),
            "bound_rows_per_cpu_s": round(self.rows / self.bound_cpu_s),
            "compaction_vs_io_bound": round(self.ratio, 3),
            "records_decoded": self.records_decoded,
            "file_groups": self.file_groups,
        }


def measure(
    table: Path, workdir: Path, fmt: str, expected: pa.Table | None = None, key: str = "key"
) -> Rep:
    """Compact a copy of ``table``, then measure the I/O bound of the slices it compacted."""
    import hoodie_ray as hr

    copy = workdir / f"copy_{table.name}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(table, copy)
    before = data_files(copy)
    with CpuMeter() as meter:
        instant = hr.compact(str(copy), engine="local").instant
    if instant is None:
        raise RuntimeError(f"nothing to compact in {table}")
    assert meter.usage is not None
    after = data_files(copy)
    outputs = [p for p in after if p not in before]
    groups = {after[p] for p in outputs}
    slices = [p for p, fid in before.items() if fid in groups]
    bound_s, decoded = io_bound(slices, outputs, workdir / "bound")
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in outputs)
    if expected is not None:
        gate = check_gate(hr.read(str(copy)), expected, key)
        if not gate.passed:
            raise RuntimeError(f"compacted {fmt} table differs from the input: {gate.reason}")
    shutil.rmtree(copy, ignore_errors=True)
    return Rep(fmt, rows, meter.usage.total_cpu_s, bound_s, decoded, len(groups))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="200K keys, 600K records")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--formats", default="parquet,avro")
    ap.add_argument("--table-version", type=int, default=6, choices=[6, 8])
    ap.add_argument("--workdir", type=Path, help="keep (and reuse) the tables here")
    ap.add_argument("--json", action="store_true", help="one JSON object as the last line")
    args = ap.parse_args(argv)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]

    with work_dir(args.workdir, "hr-compaction-bound-") as workdir:
        workload = generate_workload("base", quick=args.quick)
        expected = expected_snapshot(workload)
        warm = generate_workload("base", quick=True, num_keys=20_000)
        tables: dict[str, Path] = {}
        for fmt in formats:
            size = "quick" if args.quick else "full"
            tables[fmt] = workdir / f"{fmt}_{size}_v{args.table_version}"
            if not (tables[fmt] / ".hoodie").is_dir():
                log(f"writing the {fmt} table ({workload.num_rows} records) ...")
                build_table(tables[fmt], workload, fmt, args.table_version)
            warm_table = workdir / f"{fmt}_warm_v{args.table_version}"
            if not (warm_table / ".hoodie").is_dir():
                build_table(warm_table, warm, fmt, args.table_version)
            measure(warm_table, workdir, fmt)
        reps: list[Rep] = []
        for r in range(args.reps):
            for fmt in formats:
                rep = measure(tables[fmt], workdir, fmt, expected if r == 0 else None)
                reps.append(rep)
                log(
                    f"{fmt} rep {r}: compaction {rep.compact_cpu_s:.2f} CPU-s "
                    f"({rep.rows / rep.compact_cpu_s:,.0f} rows/CPU-s), I/O bound "
                    f"{rep.bound_cpu_s:.2f} CPU-s ({rep.rows / rep.bound_cpu_s:,.0f}), "
                    f"ratio {rep.ratio:.3f}"
                )
        summary: dict[str, Any] = {
            "shape": workload.shape,
            "K": workload.num_keys,
            "N": workload.num_rows,
            "table_version": args.table_version,
            "reps": [r.as_dict() for r in reps],
        }
        for fmt in formats:
            ratios = [r.ratio for r in reps if r.fmt == fmt]
            if ratios:
                key = "compaction_vs_io_bound" + ("" if fmt == "parquet" else f"_{fmt}")
                summary[key] = round(statistics.median(ratios), 3)
                log(f"{fmt}: median compaction_vs_io_bound {summary[key]} over {len(ratios)}")
        if args.json:
            print(json.dumps(summary))
        return 0


if __name__ == "__main__":
    sys.exit(main())
