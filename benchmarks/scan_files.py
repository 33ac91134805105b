"""A full snapshot read's cost per base file as the table grows in files (the footer cache).

Tables of 2,000-row base files (``--files``, default 150 and 600: ``benchmarks.lookup``'s rows,
one insert into a version 9 MOR table with the record index on), each read in full in one warm
process (no Ray), ``--repeats`` times after one warm-up, in two modes alternated per round:

* ``lean``: the reader as it is, its footer cache keeping each footer without the bloom
  filter (``reader.parquet_footer.read_footer``).
* ``whole``: the reader before the lean footers: each footer kept whole, pyarrow's parse,
  bloom filter and all, sized by its Thrift bytes (64 MiB held ~150 of them).

Figures per table and mode: the median CPU milliseconds of a read per base file and the footer
cache's bytes after it; ``per_file_growth_<mode>`` is the widest table's CPU per file over the
narrowest's (1.0: a file costs the same however many the table has).

``--s3 N``: a table of N base files written to a local S3 server (moto, in this process) and
read ``--repeats`` times warm (the footers kept, by URI and size) and cold (the cache emptied
before the read, as a fresh process reads: a small file in one request): requests per base
file by method, from the server's request log, and the median wall time. Before footers were
kept for object stores, every read made the cold one's requests of then: a HEAD and three
GETs a small file (the footer's end, its start, the columns).

Usage: ``python -m benchmarks.scan_files [--files 150,600] [--repeats 5] [--s3 20] [--json]``.
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
from hoodie_ray.reader import file_slice_reader, parquet_footer
from hoodie_ray.reader.file_slice_reader import PARQUET_FOOTERS

ROWS_PER_FILE = 2_000
#: A first commit sizes its files by Hudi's record size estimate
#: (hoodie.copyonwrite.record.size.estimate, 1,024 bytes), not by the rows.
FILE_BYTES = 1024 * ROWS_PER_FILE
MODES = ("lean", "whole")


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@contextmanager
def _footers(mode: str) -> Iterator[None]:
    """The reader's footer cache in ``mode``, emptied before and after."""
    PARQUET_FOOTERS.clear()
    cuts, charge = parquet_footer._bloom_cuts, file_slice_reader.footer_charge
    if mode == "whole":
        parquet_footer._bloom_cuts = lambda footer: None
        file_slice_reader.footer_charge = lambda md: md.serialized_size
    try:
        yield
    finally:
        parquet_footer._bloom_cuts = cuts
        file_slice_reader.footer_charge = charge
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
            opts = {**OPTIONS, "hoodie.parquet.max.file.size": str(FILE_BYTES)}
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


def run_s3(files: int, repeats: int) -> dict[str, Any]:
    """Warm and cold reads of a ``files``-file table on a local S3 server (see the module)."""
    import logging
    import re
    import socket
    import time
    from collections import Counter

    import pyarrow.fs as pafs
    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    requests: Counter[str] = Counter()

    class _Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            m = re.search(r"(GET|HEAD) (\S+)", record.getMessage())
            if m and m.group(2).endswith(".parquet"):
                requests[m.group(1)] += 1

    log = logging.getLogger("werkzeug")
    handlers, level, propagate = log.handlers[:], log.level, log.propagate
    log.handlers[:], log.propagate = [_Count()], False
    log.setLevel(logging.INFO)
    options = {
        "access_key": "bench",
        "secret_key": "bench",
        "endpoint_override": f"http://127.0.0.1:{port}",
        "scheme": "http",
        "region": "us-east-1",
    }
    try:
        pafs.S3FileSystem(**options, allow_bucket_creation=True).create_dir("scan-files")
        path = "s3://scan-files/t"
        opts = {**OPTIONS, "hoodie.parquet.max.file.size": str(FILE_BYTES)}
        hr.write(
            make_rows(files * ROWS_PER_FILE, 5_000),
            path,
            opts,
            engine="local",
            storage_options=options,
        )
        out: dict[str, Any] = {"files": files}
        for mode in ("cold", "warm"):
            PARQUET_FOOTERS.clear()
            hr.read(path, storage_options=options)
            walls, counts = [], Counter[str]()
            for _ in range(repeats):
                if mode == "cold":
                    PARQUET_FOOTERS.clear()
                requests.clear()
                t = time.perf_counter()
                got = hr.read(path, storage_options=options)
                walls.append(time.perf_counter() - t)
                counts += requests
                assert got.num_rows == files * ROWS_PER_FILE
            out[f"{mode}_wall_ms"] = round(statistics.median(walls) * 1e3, 1)
            for method in ("HEAD", "GET"):
                out[f"{mode}_{method.lower()}_per_file"] = round(
                    counts[method] / repeats / files, 2
                )
        out["cold_vs_warm_wall"] = round(out["cold_wall_ms"] / out["warm_wall_ms"], 2)
        PARQUET_FOOTERS.clear()
        return out
    finally:
        log.handlers[:], log.propagate = handlers, propagate
        log.setLevel(level)
        server.stop()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", default="150,600")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--s3", type=int, default=0, metavar="FILES")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(sorted(int(w) for w in args.files.split(",")), args.repeats)
    if args.s3:
        res["s3"] = run_s3(args.s3, args.repeats)
    print_report(res, args.json, 100)
    return res


if __name__ == "__main__":
    main()
