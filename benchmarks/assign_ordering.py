"""What comparing partition moves by event time costs the bucket assigner.

With the global index and event-time ordering, the assigner keeps each key's last ordering value
in its key index and compares a record that arrives in another partition with it (issue #21,
item 1). This measures that against the same assigner without the comparison (commit-time
ordering: the arrival always moves the key), in this process, on the same batches:

* an index bootstrapped with ``--keys`` keys (int64 ordering values), 4 partitions;
* ``--batches`` upsert batches of ``--rows`` rows over the key space: ``--moves`` of the rows name
  another partition than the stored one, a third of those are late (an older ordering value);
* figures: CPU seconds per batch (best of ``--repeat``), the index's bytes per key (key bytes,
  hashes, locations, ordering values), and the rows each run routed.

Usage: ``python -m benchmarks.assign_ordering [--keys N] [--rows R] [--batches B] [--json]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.common import print_report
from hoodie_ray.config.options import WriteConfig
from hoodie_ray.config.table_config import MergeMode
from hoodie_ray.meta import IS_DELETED, PARTITION_PATH, RECORD_KEY
from hoodie_ray.write.bucket_assigner import AssignerConfig, BucketAssigner, WriteProfile

PARTITIONS = ["p0", "p1", "p2", "p3"]


def _index_bytes(a: BucketAssigner) -> int:
    return a.index.nbytes()


def _batches(keys: int, rows: int, batches: int, moves: float, seed: int) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    out = []
    for b in range(batches):
        ids = rng.choice(keys, rows, replace=False)
        home = ids % len(PARTITIONS)
        move = rng.random(rows) < moves
        part = np.where(move, (home + 1 + rng.integers(0, 3, rows)) % len(PARTITIONS), home)
        late = move & (rng.random(rows) < 1 / 3)
        ts = np.where(late, 0, 1_000 + b)
        out.append(
            pa.table(
                {
                    RECORD_KEY: pa.array([f"key{i:09d}" for i in ids]),
                    PARTITION_PATH: pa.array(np.array(PARTITIONS)[part]),
                    "ts": pa.array(ts, pa.int64()),
                    IS_DELETED: pa.array(np.zeros(rows, dtype=bool)),
                }
            )
        )
    return out


def _assigner(keys: int, mode: MergeMode) -> BucketAssigner:
    cfg = AssignerConfig.of(WriteConfig(), ordering_field="ts", merge_mode=mode)
    a = BucketAssigner(cfg, WriteProfile(avg_record_size=100))
    entries = []
    all_ids = np.arange(keys)
    for p, part in enumerate(PARTITIONS):
        ids = all_ids[all_ids % len(PARTITIONS) == p]
        entries.append(
            (
                part,
                f"fg-{part}",
                pa.array([f"key{i:09d}" for i in ids]),
                pa.array(np.full(len(ids), 500), pa.int64()),
            )
        )
    a.bootstrap(entries)
    return a


def run(keys: int, rows: int, batches: int, moves: float, repeat: int) -> dict[str, Any]:
    data = _batches(keys, rows, batches, moves, seed=7)
    out: dict[str, Any] = {
        "benchmark": "assign_ordering",
        "keys": keys,
        "rows_per_batch": rows,
        "batches": batches,
        "moves": moves,
    }
    for name, mode in (
        ("compared", MergeMode.EVENT_TIME_ORDERING),
        ("not_compared", MergeMode.COMMIT_TIME_ORDERING),
    ):
        best = float("inf")
        routed = 0
        size = 0
        for _ in range(repeat):
            a = _assigner(keys, mode)
            t0 = time.process_time()
            routed = sum(a.assign_batch(b).num_rows for b in data)
            best = min(best, (time.process_time() - t0) / batches)
            size = _index_bytes(a)
        out[f"{name}_cpu_s_per_batch"] = round(best, 4)
        out[f"{name}_index_bytes_per_key"] = round(size / keys, 1)
        out[f"{name}_rows_routed"] = routed
    out["cpu_ratio"] = round(
        out["compared_cpu_s_per_batch"] / out["not_compared_cpu_s_per_batch"], 3
    )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--moves", type=float, default=0.1)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    res = run(args.keys, args.rows, args.batches, args.moves, args.repeat)
    print_report(res, args.json, 36)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
