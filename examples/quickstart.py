"""Quickstart: write a small Merge-On-Read table with upserts and deletes on local Ray, read it back.

Run from a checkout::

    pip install -e . && python examples/quickstart.py

What it does, in a temporary directory on the local filesystem:

1. inserts 8 trips (``hr.write``: one delta commit through the Ray actors; a local Ray starts
   by itself, or the cluster of ``RAY_ADDRESS`` is joined);
2. upserts: new fares for 3 trips, one late record (older ``ts``: ignored, the newer fare
   stays) and one new trip;
3. deletes 2 trips, one with ``write.operation=delete`` and one with the Hudi convention, a
   ``_hoodie_is_deleted = true`` column in an upsert;
4. reads the merged snapshot back (``hr.read``: base files merged with log files), prints it,
   and checks it holds exactly what the commits left.

``--quick`` is accepted (the example is already quick). Exit status 0 when the table read back
is the expected one.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence

import pyarrow as pa

import hoodie_ray as hr

OPTIONS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "uuid",
    "hoodie.datasource.write.partitionpath.field": "city",
    "precombine.field": "ts",
    # a small example needs no more than one writer and one bucket assigner
    "write.tasks": "1",
}


def trips(rows: list[tuple[str, str, int, str, float]]) -> pa.Table:
    """A batch of trips: (uuid, city, ts, rider, fare)."""
    uuid, city, ts, rider, fare = (list(c) for c in zip(*rows, strict=True))
    return pa.table(
        {
            "uuid": pa.array(uuid, pa.string()),
            "city": pa.array(city, pa.string()),
            "ts": pa.array(ts, pa.int64()),
            "rider": pa.array(rider, pa.string()),
            "fare": pa.array(fare, pa.float64()),
        }
    )


def expected_table() -> dict[str, tuple[str, int, str, float]]:
    """uuid -> (city, ts, rider, fare) after the three steps (t2 and t5 deleted)."""
    return {
        "t1": ("san_francisco", 2, "rider-A", 21.5),
        "t3": ("sao_paulo", 1, "rider-C", 34.1),
        "t4": ("chennai", 2, "rider-D", 17.0),
        "t6": ("san_francisco", 1, "rider-F", 43.4),
        "t7": ("chennai", 1, "rider-G", 93.5),
        "t8": ("chennai", 1, "rider-H", 33.9),
        "t9": ("sao_paulo", 2, "rider-I", 12.0),
    }


def run(path: str) -> int:
    """The three commits and the read-back on ``path``; 0 if the snapshot is as expected."""
    t0 = time.perf_counter()
    first = hr.write(
        trips(
            [
                ("t1", "san_francisco", 1, "rider-A", 19.1),
                ("t2", "san_francisco", 1, "rider-B", 27.7),
                ("t3", "sao_paulo", 1, "rider-C", 34.1),
                ("t4", "chennai", 1, "rider-D", 17.9),
                ("t5", "sao_paulo", 1, "rider-E", 25.2),
                ("t6", "san_francisco", 1, "rider-F", 43.4),
                ("t7", "chennai", 1, "rider-G", 93.5),
                ("t8", "chennai", 1, "rider-H", 33.9),
            ]
        ),
        path,
        OPTIONS,
    )
    print(f"1. inserted {first.num_inserts} trips at instant {first.instant}")

    second = hr.write(
        trips(
            [
                ("t1", "san_francisco", 2, "rider-A", 21.5),  # new fare
                ("t4", "chennai", 2, "rider-D", 17.0),  # new fare
                ("t6", "san_francisco", 0, "rider-F", 1.0),  # late record: older ts, ignored
                ("t9", "sao_paulo", 2, "rider-I", 12.0),  # a new trip
            ]
        ),
        path,
        OPTIONS,
    )
    print(
        f"2. upserted {second.num_writes} records at instant {second.instant} "
        "(a late update of t6 lost to the newer record)"
    )

    third = hr.write(pa.table({"uuid": ["t2"]}), path, {**OPTIONS, "write.operation": "delete"})
    flagged = trips([("t5", "sao_paulo", 3, "rider-E", 25.2)]).append_column(
        "_hoodie_is_deleted", pa.array([True])
    )
    fourth = hr.write(flagged, path, OPTIONS)
    print(
        f"3. deleted t2 (write.operation=delete, instant {third.instant}) and t5 "
        f"(_hoodie_is_deleted, instant {fourth.instant})"
    )

    snapshot = hr.read(path).sort_by([("city", "ascending"), ("uuid", "ascending")])
    table = hr.HoodieTable.load(path)
    print(
        f"\nsnapshot of {path}: {snapshot.num_rows} rows, "
        f"{len(table.timeline)} instants, {len(table.latest_file_slices())} file groups"
    )
    shown = snapshot.select(["_hoodie_commit_time", "uuid", "city", "ts", "rider", "fare"])
    print(shown.to_pandas().to_string(index=False))

    got = {r["uuid"]: (r["city"], r["ts"], r["rider"], r["fare"]) for r in snapshot.to_pylist()}
    want = expected_table()
    if got != want:
        print(f"\nUNEXPECTED snapshot:\n  got  {got}\n  want {want}", file=sys.stderr)
        return 1
    print(f"\nok: the snapshot is what the commits left ({time.perf_counter() - t0:.1f} s)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the quickstart in a temporary directory; 0 on success."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="accepted; the example is quick")
    p.add_argument("--path", default=None, help="write here instead of a temporary directory")
    args = p.parse_args(argv)
    if args.path:
        return run(args.path)
    with tempfile.TemporaryDirectory(prefix="hoodie_ray_quickstart_") as tmp:
        return run(f"{tmp}/trips")


if __name__ == "__main__":
    sys.exit(main())
