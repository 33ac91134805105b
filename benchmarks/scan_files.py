"""A full snapshot read's cost per base file as the table grows in files (the footer cache).

Tables of 2,000-row base files (``--files``, default 150 and 600: ``benchmarks.lookup``'s rows,
one insert into a version 9 MOR table with the record index on), each read in full in one warm
process (no Ray), ``--repeats`` times after one warm-up, in two readers alternated per round:

* ``lean``: the reader as it is, its footer cache keeping each footer without the bloom
  filter (``reader.parquet_footer.read_footer``), sized by what it holds in memory.
* ``before``: the reader before the lean footers, as that code did it: pyarrow's own open
  parses each footer whole, bloom filter and all, kept sized by its Thrift bytes (64 MiB held
  ~150 of them), and an object store's footers never kept.

Figures per table and reader: the median CPU milliseconds of a read per base file, warm (the
footers kept by the read before) and cold (the cache emptied first, as a fresh process
reads), and the footer cache's bytes after a warm read; ``per_file_growth_<reader>`` is the
widest table's warm CPU per file over the narrowest's (1.0: a file costs the same however
many the table has).

``--s3 N``: a table of N base files written to a local S3 server (moto, in this process) and
read ``--repeats`` times by each reader, warm and cold: requests per base file by method, from
the server's request log, and the median wall time.

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
from hoodie_ray.reader import file_slice_reader
from hoodie_ray.reader.file_slice_reader import PARQUET_FOOTERS

ROWS_PER_FILE = 2_000
#: A first commit sizes its files by Hudi's record size estimate
#: (hoodie.copyonwrite.record.size.estimate, 1,024 bytes), not by the rows.
FILE_BYTES = 1024 * ROWS_PER_FILE
READERS = ("lean", "before")


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@contextmanager
def _reader(name: str) -> Iterator[None]:
    """The reader ``name`` (see the module), its footer cache emptied before and after."""
    PARQUET_FOOTERS.clear()
    saved = (
        file_slice_reader.local_footer,
        file_slice_reader.read_footer,
        file_slice_reader.footer_charge,
        file_slice_reader.WHOLE_READ_MAX_BYTES,
        PARQUET_FOOTERS.get,
    )
    if name == "before":
        file_slice_reader.local_footer = lambda path, size: None
        file_slice_reader.read_footer = lambda read_at, size: None
        file_slice_reader.footer_charge = lambda md: md.serialized_size
        file_slice_reader.WHOLE_READ_MAX_BYTES = -1
        get = PARQUET_FOOTERS.get
        # an object store's footers were never kept: their keys are (uri, size) pairs
        PARQUET_FOOTERS.get = lambda key: None if len(key) == 2 else get(key)  # type: ignore[method-assign]
    try:
        yield
    finally:
        (
            file_slice_reader.local_footer,
            file_slice_reader.read_footer,
            file_slice_reader.footer_charge,
            file_slice_reader.WHOLE_READ_MAX_BYTES,
            PARQUET_FOOTERS.get,  # type: ignore[method-assign]
        ) = saved
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
        keys = [(f, r, t) for f in widths for r in READERS for t in ("warm", "cold")]
        cpu: dict[tuple[int, str, str], list[float]] = {k: [] for k in keys}
        cached: dict[tuple[int, str], int] = {}
        for rnd in range(repeats + 1):
            for files in widths:
                for name in READERS if rnd % 2 == 0 else READERS[::-1]:
                    with _reader(name):
                        for temp in ("cold", "warm"):
                            if temp == "cold":
                                PARQUET_FOOTERS.clear()
                            c = _cpu_s()
                            got = hr.read(paths[files])
                            spent = _cpu_s() - c
                            assert got.num_rows == files * ROWS_PER_FILE
                            if rnd:
                                cpu[(files, name, temp)].append(spent)
                        cached[(files, name)] = PARQUET_FOOTERS.nbytes
        for files in widths:
            row: dict[str, Any] = {}
            for name in READERS:
                for temp in ("warm", "cold"):
                    row[f"cpu_ms_per_file_{temp}_{name}"] = round(
                        statistics.median(cpu[(files, name, temp)]) * 1e3 / files, 3
                    )
                row[f"footer_cache_kb_{name}"] = round(cached[(files, name)] / 1024, 1)
            for temp in ("warm", "cold"):
                row[f"{temp}_before_vs_lean"] = round(
                    row[f"cpu_ms_per_file_{temp}_before"] / row[f"cpu_ms_per_file_{temp}_lean"], 2
                )
            out["tables"][files] = row
        lo, hi = out["tables"][min(widths)], out["tables"][max(widths)]
        for name in READERS:
            key = f"cpu_ms_per_file_warm_{name}"
            out[f"per_file_growth_{name}"] = round(hi[key] / lo[key], 2)
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
        for name in READERS:
            with _reader(name):
                hr.read(path, storage_options=options)
                for temp in ("cold", "warm"):
                    walls, counts = [], Counter[str]()
                    for _ in range(repeats):
                        if temp == "cold":
                            PARQUET_FOOTERS.clear()
                        requests.clear()
                        t = time.perf_counter()
                        got = hr.read(path, storage_options=options)
                        walls.append(time.perf_counter() - t)
                        counts += requests
                        assert got.num_rows == files * ROWS_PER_FILE
                    out[f"{temp}_wall_ms_{name}"] = round(statistics.median(walls) * 1e3, 1)
                    for method in ("HEAD", "GET"):
                        out[f"{temp}_{method.lower()}_per_file_{name}"] = round(
                            counts[method] / repeats / files, 2
                        )
        for temp in ("warm", "cold"):
            out[f"{temp}_wall_before_vs_lean"] = round(
                out[f"{temp}_wall_ms_before"] / out[f"{temp}_wall_ms_lean"], 2
            )
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
