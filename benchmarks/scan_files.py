"""A full snapshot read's cost per base file as the table grows in files (issue 40's footers).

Tables of 2,000-row base files (``--files``, default 150 and 600: ``benchmarks.lookup``'s rows,
one insert into a version 9 MOR table with the record index on), each read in full in one warm
process (no Ray), ``--repeats`` times after one warm-up, in two modes alternated per round:

* ``lean``: the reader as it is, its footer cache keeping each footer without the bloom
  filter (``reader.parquet_footer.lean_footer``).
* ``whole``: the same reader keeping each footer whole, pyarrow's parse, bloom filter and all
  (the reader before the lean footers: 64 MiB held ~150 of them).

Figures per table and mode: the median CPU milliseconds of a read per base file and the footer
cache's bytes after it; ``per_file_growth_<mode>`` is the widest table's CPU per file over the
narrowest's (1.0: a file costs the same however many the table has).

Usage: ``python -m benchmarks.scan_files [--files 150,600] [--repeats 5] [--json]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import hoodie_ray as hr
from benchmarks.common import machine_info, print_report, work_dir
from benchmarks.lookup import OPTIONS, make_rows
from hoodie_ray.reader import file_slice_reader
from hoodie_ray.reader.file_slice_reader import PARQUET_FOOTERS

ROWS_PER_FILE = 2_000
MODES = ("lean", "whole")


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@contextmanager
def _footers(mode: str) -> Iterator[None]:
    """The reader's footer cache in ``mode``, emptied before and after."""
    PARQUET_FOOTERS.clear()
    lean = file_slice_reader.local_lean_footer
    if mode == "whole":
        file_slice_reader.local_lean_footer = lambda path, size: None  # type: ignore[assignment]
    try:
        yield
    finally:
        file_slice_reader.local_lean_footer = lean  # type: ignore[assignment]
        PARQUET_FOOTERS.clear()


def run(widths: list[int], repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "shape": f"{ROWS_PER_FILE}-row base files, key/rider/ts/fare/note, v9 MOR, one insert",
        "machine": machine_info(),
        "tables": {},
    }
    with work_dir(None, "hr-scan-files-") as d:
        paths = {}
        for files in widths:
            n = files * ROWS_PER_FILE
            path = str(d / f"t{files}")
            opts = {**OPTIONS, "hoodie.parquet.max.file.size": str(max(1 << 16, 1024 * 2000))}
            hr.write(make_rows(n, 5_000), path, opts, engine="local")
            paths[files] = path
        cpu: dict[tuple[int, str], list[float]] = {(f, m): [] for f in widths for m in MODES}
        cached: dict[tuple[int, str], int] = {}
        for rnd in range(repeats + 1):
            for files in widths:
                for mode in MODES if rnd % 2 == 0 else MODES[::-1]:
                    with _footers(mode):
                        hr.read(paths[files])  # the footers' first parse, every round
                        c = _cpu_s()
                        got = hr.read(paths[files])
                        spent = _cpu_s() - c
                        cached[(files, mode)] = PARQUET_FOOTERS.nbytes
                    assert got.num_rows == files * ROWS_PER_FILE
                    if rnd:
                        cpu[(files, mode)].append(spent)
        for files in widths:
            row: dict[str, Any] = {}
            for mode in MODES:
                row[f"cpu_ms_per_file_{mode}"] = round(
                    statistics.median(cpu[(files, mode)]) * 1e3 / files, 3
                )
                row[f"footer_cache_kb_{mode}"] = round(cached[(files, mode)] / 1024, 1)
            row["whole_vs_lean"] = round(
                row["cpu_ms_per_file_whole"] / row["cpu_ms_per_file_lean"], 2
            )
            out["tables"][files] = row
        lo, hi = out["tables"][min(widths)], out["tables"][max(widths)]
        for mode in MODES:
            key = f"cpu_ms_per_file_{mode}"
            out[f"per_file_growth_{mode}"] = round(hi[key] / lo[key], 2)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", default="150,600")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(sorted(int(w) for w in args.files.split(",")), args.repeats)
    print_report(res, args.json, 100)
    return res


if __name__ == "__main__":
    main()
