"""Ray Datasets of each block kind into one warm ``hr.write`` topology: what a pandas block
costs against an Arrow one (issue 39: ``ray.data.from_pandas`` blocks carry a pandas schema;
an ``object`` column's Arrow type is asked of one block by a small task).

Rows: ``key`` (string), ``ts`` (int64), ``name`` (short string), 8 float64 columns; each
write upserts ``--rows`` rows (half new keys) as ``--blocks`` blocks, ``--writes`` times per
kind, kinds interleaved so that the table's growth falls on every kind alike:

* ``arrow``: ``ray.data.from_arrow`` (Arrow blocks, the baseline);
* ``pandas_object``: ``ray.data.from_pandas`` with strings as ``object`` columns (the probe);
* ``pandas_arrow_strings``: ``from_pandas`` with ``string[pyarrow]`` columns (dtypes say all).

Figures: median seconds of a write and rows/s per kind, and each kind's rate as a ratio to
``arrow``'s. Usage: ``python -m benchmarks.dataset_inputs [--rows N] [--blocks B] [--json]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

import hoodie_ray as hr
from benchmarks.common import print_report

OPTIONS = {
    "hoodie.table.name": "inputs",
    "hoodie.datasource.write.recordkey.field": "key",
    "precombine.field": "ts",
}
KINDS = ("arrow", "pandas_object", "pandas_arrow_strings")


def _frame(step: int, rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(step)
    keys = np.arange(step * rows // 2, step * rows // 2 + rows)
    df = pd.DataFrame(
        {
            "key": [f"key-{k:010d}" for k in keys],
            "ts": np.full(rows, step, dtype=np.int64),
            "name": [f"n{k % 997}" for k in keys],
        }
    )
    for i in range(8):
        df[f"f{i}"] = rng.random(rows)
    return df


def _dataset(ray: Any, kind: str, df: pd.DataFrame, blocks: int) -> Any:
    parts = np.array_split(np.arange(len(df)), blocks)
    frames = [df.iloc[p].reset_index(drop=True) for p in parts]
    if kind == "arrow":
        return ray.data.from_arrow([pa.Table.from_pandas(f, preserve_index=False) for f in frames])
    if kind == "pandas_arrow_strings":
        frames = [f.astype({"key": "string[pyarrow]", "name": "string[pyarrow]"}) for f in frames]
    return ray.data.from_pandas(frames)


def run(rows: int, blocks: int, writes: int, root: Path) -> dict[str, Any]:
    import ray

    from hoodie_ray.ray.runtime import ensure_ray

    ensure_ray()
    path = str(root / "t")
    hr.write(_dataset(ray, "arrow", _frame(0, rows), blocks), path, OPTIONS)  # warm up
    seconds: dict[str, list[float]] = {k: [] for k in KINDS}
    step = 1
    for _ in range(writes):
        for kind in KINDS:
            ds = _dataset(ray, kind, _frame(step, rows), blocks).materialize()
            t0 = time.perf_counter()
            hr.write(ds, path, OPTIONS)
            seconds[kind].append(time.perf_counter() - t0)
            step += 1
    out: dict[str, Any] = {"rows": rows, "blocks": blocks, "writes": writes, "kinds": {}}
    base = rows / statistics.median(seconds["arrow"])
    for kind in KINDS:
        med = statistics.median(seconds[kind])
        out["kinds"][kind] = {
            "median_s": round(med, 4),
            "rows_per_s": round(rows / med),
            "rate_vs_arrow": round(rows / med / base, 3),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.dataset_inputs")
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--writes", type=int, default=5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="hoodie-ray-inputs-"))
    try:
        result = run(args.rows, args.blocks, args.writes, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_report({"benchmark": "dataset_inputs", **result}, args.json, 10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
