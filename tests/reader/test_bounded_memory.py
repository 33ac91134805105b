"""A slice with a largish base file is merged in bounded memory: the base file is streamed in
record batches, only the log records are held whole."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa

from hoodie_ray.reader import plan_file_slices
from hoodie_ray.reader.file_slice_reader import iter_file_slice
from tests.reader.builder import TableBuilder

N = 300_000
SCHEMA = pa.schema(
    [("key", pa.string()), ("ts", pa.int64()), ("v", pa.string())]
    + [(f"c{i}", pa.int64()) for i in range(6)]
)


def make_rows(keys: np.ndarray, ts: int, tag: str) -> pa.Table:
    n = len(keys)
    cols = {
        "key": pa.array([f"key-{k:08d}" for k in keys]),
        "ts": pa.array(np.full(n, ts, dtype=np.int64)),
        "v": pa.array([f"{tag}-{k:08d}-padding-padding" for k in keys]),
    }
    rng = np.random.default_rng(0)
    for i in range(6):
        cols[f"c{i}"] = pa.array(rng.integers(0, 1 << 40, n))
    return pa.table(cols, schema=SCHEMA)


def test_base_file_is_streamed(tmp_path: Path) -> None:
    b = TableBuilder(tmp_path / "t", SCHEMA)
    c1 = b.begin()
    base_rows = make_rows(np.arange(N), 1, "base")
    base_bytes = base_rows.nbytes
    base = c1.base_file("", "f1-0", base_rows, row_group_size=10_000)
    c1.complete()
    del base_rows
    c2 = b.begin()
    upd = np.arange(0, N, 300)  # 1000 updates
    blocks = [
        c2.data_block(make_rows(upd, 2, "upd"), "", "f1-0", fmt="parquet"),
        c2.delete_block([f"key-{k:08d}" for k in range(1, 2001, 2)], ""),
    ]
    c2.log_file("", "f1-0", blocks, base_instant=c1.instant, base_file=base)
    c2.complete()

    # Measured in a fresh process: tracemalloc in a process where Ray's threads run (the
    # session's Ray, started by an earlier test) can crash in tracemalloc's traceback_new
    # when one of them allocates without a Python frame (CI, 2026-11-29).
    out = subprocess.run(
        [sys.executable, "-c", f"from {__name__} import measure; measure({str(b.root)!r})"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    rows, updated, py_peak, arrow_peak = json.loads(out.stdout.strip().splitlines()[-1])
    assert rows == N - 1000  # 1000 deletes (odd keys), updates of even keys only
    assert updated == len(upd)
    # Peak memory well below the size of the base data (~31 MB in Arrow): bounded by one row
    # group being decoded (Python objects: by the log records), not by the file.
    assert py_peak < base_bytes / 8, (py_peak, base_bytes)
    assert arrow_peak < base_bytes / 4, (arrow_peak, base_bytes)


def measure(root: str) -> None:
    """Merge the table's one slice, printing JSON ``[rows, updated rows, Python peak bytes,
    Arrow peak bytes]`` (run in a process of its own)."""
    plan = plan_file_slices(root, batch_rows=4_096)
    (slc,) = plan.slices
    # the merge kernels load (or compile) on first use: not while tracing
    for t in iter_file_slice(plan.context, slc):
        del t
        break
    gc.collect()
    arrow_before = pa.total_allocated_bytes()
    arrow_peak = 0
    rows = updated = 0
    tracemalloc.start()
    try:
        for t in iter_file_slice(plan.context, slc):
            rows += t.num_rows
            updated += int(np.sum(np.asarray(t.column("ts")) == 2))
            arrow_peak = max(arrow_peak, pa.total_allocated_bytes() - arrow_before)
            del t
        _cur, py_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(json.dumps([rows, updated, py_peak, arrow_peak]))
