"""Spark DataFrame -> Hudi Merge-On-Read table -> Spark DataFrame, through RayDP (Spark on Ray).

Needs Java 17 (Debian/Ubuntu: ``sudo apt-get install -y openjdk-17-jre-headless``).

1. ``hr.init_spark()`` starts a RayDP Spark session on Ray (a local Ray, or ``RAY_ADDRESS``)
   with the JVM flags Java 17 needs;
2. a Spark DataFrame of trips is written with ``hr.write(df, path, options)``: its partitions go
   from the Spark executors to the Ray object store and through hoodie_ray's writer actors;
3. a second DataFrame upserts new fares for every 10th trip;
4. ``hr.read_spark(spark, path)`` reads the merged snapshot back as a Spark DataFrame, shown with
   Spark (``show()``, a ``groupBy``), and checked.

Usage::

    python examples/spark_to_hudi.py [--quick] [--rows N] [--path DIR]

Starting Ray and Spark takes ~20 s (Spark's driver JVM, RayDP's app master and an executor JVM);
the whole ``--quick`` run ~40 s on 2 cores. A healthy run prints, on stdout, the start-up line,
one line per write, the table as Spark shows it and ``ok: ...``; on stderr at most Ray's own
start-up notices (e.g. its token-authentication warning). ``ERROR`` or a traceback means a
failure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence

import hoodie_ray as hr

OPTIONS = {
    "hoodie.table.name": "spark_trips",
    "hoodie.datasource.write.recordkey.field": "uuid",
    "hoodie.datasource.write.partitionpath.field": "city",
    "precombine.field": "ts",
    "write.tasks": "1",
}

TRIPS_SQL = (
    "concat('trip-', lpad(cast(id as string), 7, '0')) as uuid",
    "element_at(array('san_francisco', 'sao_paulo', 'chennai'), cast(id % 3 + 1 as int)) as city",
    "cast({ts} as bigint) as ts",
    "round({fare}, 2) as fare",
)


def run(spark: object, path: str, rows: int) -> int:
    """Write, upsert, read back with Spark; 0 if the snapshot is as expected."""
    t0 = time.perf_counter()
    trips = spark.range(rows).selectExpr(  # type: ignore[attr-defined]
        *[c.format(ts=1, fare="(id % 97) + 3.5") for c in TRIPS_SQL]
    )
    res = hr.write(trips, path, OPTIONS)
    print(f"wrote {res.num_inserts} trips from Spark at instant {res.instant}")

    updates = spark.range(0, rows, 10).selectExpr(  # type: ignore[attr-defined]
        *[c.format(ts=2, fare="1000.0 + id") for c in TRIPS_SQL]
    )
    res = hr.write(updates, path, OPTIONS)
    print(f"upserted {res.num_writes} new fares from Spark at instant {res.instant}")

    df = hr.read_spark(spark, path)
    print("\nthe table, read back as a Spark DataFrame:")
    df.select("uuid", "city", "ts", "fare").orderBy("uuid").show(5)
    df.groupBy("city").count().orderBy("city").show()

    total = df.count()
    updated = df.filter("ts = 2").count()
    want_updated = len(range(0, rows, 10))
    bad = df.filter("(ts = 2 and fare < 1000) or (ts = 1 and fare >= 1000)").count()
    if total != rows or updated != want_updated or bad:
        print(
            f"UNEXPECTED: {total} rows (want {rows}), {updated} updated (want {want_updated}), "
            f"{bad} with the wrong fare",
            file=sys.stderr,
        )
        return 1
    print(f"ok: {total} trips, {updated} upserted ({time.perf_counter() - t0:.1f} s)")
    return 0


def quiet_ray_data() -> None:
    """No Ray Data progress logging: the example prints its own lines."""
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False


def main(argv: Sequence[str] | None = None) -> int:
    """Start Spark on Ray, run the example, stop Spark; 0 on success."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1,000 rows")
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--path", default=None, help="write here instead of a temporary directory")
    args = p.parse_args(argv)
    rows = args.rows or (1_000 if args.quick else 100_000)

    t0 = time.perf_counter()
    spark = hr.init_spark(
        app_name="hoodie_ray_spark_example",
        num_executors=1,
        executor_cores=1,
        executor_memory="1g",
        configs={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    quiet_ray_data()
    print(f"Spark {spark.version} on Ray up in {time.perf_counter() - t0:.1f} s")
    try:
        if args.path:
            return run(spark, args.path, rows)
        with tempfile.TemporaryDirectory(prefix="hoodie_ray_spark_") as tmp:
            return run(spark, f"{tmp}/spark_trips", rows)
    finally:
        from hoodie_ray.spark import stop_spark

        stop_spark()


if __name__ == "__main__":
    sys.exit(main())
