"""Spark interop through RayDP: the Java check, Spark <-> Ray <-> Arrow conversions.

One RayDP Spark session for the whole test session (the ``spark_session`` fixture of
``tests/fixtures_ray.py``); the environment checks need no Spark at all.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import stat
import subprocess
import sys
import textwrap
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hoodie_ray.exceptions import HoodieError, HoodieUnsupportedError

UTC = dt.timezone.utc


def _fake_java(tmp_path: Path, version_line: str) -> str:
    java = tmp_path / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return str(java)


# -- environment checks (no Spark) -------------------------------------------------------------


def test_java_versions(tmp_path: Path) -> None:
    from hoodie_ray.spark import check_java, java_version

    assert java_version(_fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')) == 17
    assert check_java(_fake_java(tmp_path, 'openjdk version "21" 2023-09-19')) == 21
    old = _fake_java(tmp_path, 'java version "1.8.0_292"')
    assert java_version(old) == 8
    with pytest.raises(HoodieError, match="openjdk-17-jre-headless"):
        check_java(old)


def test_missing_java_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from hoodie_ray.spark import check_java, init_spark

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(HoodieError, match=r"apt-get install -y openjdk-17-jre-headless"):
        check_java()
    with pytest.raises(HoodieError, match="Java"):
        init_spark()  # fails before touching Ray or Spark


def test_is_spark_dataframe_never_imports_pyspark() -> None:
    code = textwrap.dedent(
        """
        import sys
        import pyarrow as pa
        from hoodie_ray.spark import is_spark_dataframe
        assert not is_spark_dataframe(pa.table({"a": [1]}))
        assert not is_spark_dataframe(None)
        assert "pyspark" not in sys.modules, "pyspark was imported"
        assert "raydp" not in sys.modules, "raydp was imported"
        """
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr


def test_spark_compatible_arrow_types() -> None:
    from hoodie_ray.spark import to_spark_compatible

    t = pa.table(
        {
            "u8": pa.array([255], pa.uint8()),
            "u64": pa.array([2**64 - 1], pa.uint64()),
            "ls": pa.array(["x"], pa.large_string()),
            "ns": pa.array([1_000], pa.timestamp("ns")),
            "dic": pa.array(["p"]).dictionary_encode(),
        }
    )
    out = to_spark_compatible(t)
    assert out.schema.types == [
        pa.int16(),
        pa.decimal128(20, 0),
        pa.string(),
        pa.timestamp("us", tz="UTC"),
        pa.string(),
    ]
    assert out.column("u64")[0].as_py() == Decimal(2**64 - 1)
    with pytest.raises(HoodieUnsupportedError, match="'t'"):
        to_spark_compatible(pa.table({"t": pa.array([1], pa.time32("s"))}))


# -- with Spark --------------------------------------------------------------------------------


@pytest.mark.ray
def test_spark_executors_that_cannot_be_placed_fail_fast(ray_session: Any) -> None:
    from hoodie_ray.spark import _check_spark_resources

    with pytest.raises(HoodieError, match="cannot place 1 Spark executor"):
        _check_spark_resources(1, 512, 2**30)


ROWS = [
    (1, "a", 1.5, dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC), None),
    (None, None, None, None, None),
    (-(2**62), "ü", -0.25, dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC), "x"),
]


@pytest.mark.spark
def test_spark_dataframe_to_ray_to_arrow(spark_session: Any) -> None:
    from pyspark.sql.types import (
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    from hoodie_ray.spark import is_spark_dataframe, release_spark_df, spark_to_arrow, spark_to_ray

    schema = StructType(
        [
            StructField("i", LongType()),
            StructField("s", StringType()),
            StructField("d", DoubleType()),
            StructField("ts", TimestampType()),
            StructField("n", StringType()),
        ]
    )
    df = spark_session.createDataFrame(ROWS, schema)
    assert is_spark_dataframe(df)
    assert not is_spark_dataframe(df.toPandas())

    ds = spark_to_ray(df)
    got = pa.concat_tables(_get(ds.to_arrow_refs()))
    release_spark_df(df)
    assert got.schema.types == [
        pa.int64(),
        pa.string(),
        pa.float64(),
        pa.timestamp("us", tz="UTC"),
        pa.string(),
    ]
    expected = sorted(ROWS, key=_by_first)
    assert _rows(got) == expected
    assert _rows(spark_to_arrow(df)) == expected


def _get(refs: list[Any]) -> list[pa.Table]:
    import ray

    return ray.get(refs)


def _rows(t: pa.Table) -> list[tuple[Any, ...]]:
    out = []
    for r in t.to_pylist():
        out.append(
            tuple(
                v.astimezone(UTC) if isinstance(v, dt.datetime) and v.tzinfo else v
                for v in r.values()
            )
        )
    return sorted(out, key=_by_first)


def _by_first(row: tuple[Any, ...]) -> tuple[bool, int]:
    return (row[0] is None, row[0] or 0)


MIXED = pa.table(
    {
        "i": pa.array([1, None, 3], pa.int64()),
        "i32": pa.array([7, None, -1], pa.int32()),
        "s": pa.array(["a", None, "ü"]),
        "d": pa.array([1.5, None, float("nan")]),
        "ts": pa.array(
            [
                dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
                None,
                dt.datetime(1969, 12, 31, tzinfo=UTC),
            ],
            pa.timestamp("us", tz="UTC"),
        ),
        "naive": pa.array(
            [dt.datetime(2024, 1, 2), None, dt.datetime(2000, 1, 1)], pa.timestamp("us")
        ),
        "dec": pa.array([Decimal("1.23"), None, Decimal("-99999.99")], pa.decimal128(10, 2)),
        "day": pa.array([dt.date(2024, 1, 2), None, dt.date(1900, 1, 1)]),
        "b": pa.array([True, None, False]),
        "bin": pa.array([b"x", None, b"\x00"]),
        "lst": pa.array([[1, 2], None, []], pa.list_(pa.int64())),
        "st": pa.array([{"a": 1, "b": "x"}, None, {"a": None, "b": None}]),
    }
)


def _same(a: pa.Table, b: pa.Table) -> None:
    """Equal types and values, NaN equal to NaN (Table.equals says NaN != NaN)."""
    assert a.schema.types == b.schema.types
    assert a.column_names == b.column_names
    for ra, rb in zip(a.to_pylist(), b.to_pylist(), strict=True):
        for k in ra:
            va, vb = ra[k], rb[k]
            if isinstance(va, float) and math.isnan(va):
                assert isinstance(vb, float) and math.isnan(vb), k
            else:
                assert va == vb, (k, va, vb)


@pytest.mark.spark
def test_spark_partitions_are_fetched_by_one_actor(spark_session: Any) -> None:
    """Each partition of a DataFrame becomes one block with its rows and schema, fetched by
    this driver's one SparkFetcher (no worker per partition); each conversion is released on
    its own (a DataFrame in two checkpoints keeps the second's cache when the first commits)."""
    import ray

    from hoodie_ray.ray.inputs import (
        convert_spark,
        release_spark_frames,
        spark_fetcher,
        spark_items,
    )

    df = spark_session.range(0, 1000, numPartitions=1).repartition(3)
    persisted = spark_session.sparkContext._jsc.getPersistentRDDs().size()
    first = convert_spark(df)
    assert len(first.parts) == 3
    blocks = ray.get([b for b, _ in first.parts])
    metas = ray.get([m for _, m in first.parts])
    assert [m[0] for m in metas] == [b.num_rows for b in blocks]
    assert sorted(pa.concat_tables(blocks).column("id").to_pylist()) == list(range(1000))
    second = convert_spark(df)
    items = list(spark_items(second))
    assert sum(i.num_rows or 0 for _, i in items) == 1000
    assert {s for s, _ in items} == {pa.schema([pa.field("id", pa.int64(), nullable=False)])}
    assert spark_fetcher() is spark_fetcher()
    assert spark_session.sparkContext._jsc.getPersistentRDDs().size() == persisted + 2
    release_spark_frames([first])
    assert spark_session.sparkContext._jsc.getPersistentRDDs().size() == persisted + 1
    assert sum(t.num_rows for t in ray.get([i.ref for _, i in items])) == 1000
    release_spark_frames([second, second])  # idempotent
    assert spark_session.sparkContext._jsc.getPersistentRDDs().size() == persisted


@pytest.mark.spark  # (was unmarked: it started Spark mid-suite, ahead of the Ray tests after it)
def test_arrow_to_spark_round_trip_is_exact(spark_session: Any) -> None:
    from hoodie_ray.spark import arrow_to_spark, spark_to_arrow, to_spark_compatible

    sdf = arrow_to_spark(spark_session, MIXED)
    assert sdf.schema.simpleString() == (
        "struct<i:bigint,i32:int,s:string,d:double,ts:timestamp,naive:timestamp,"
        "dec:decimal(10,2),day:date,b:boolean,bin:binary,lst:array<bigint>,"
        "st:struct<a:bigint,b:string>>"
    )
    assert sdf.count() == 3
    back = spark_to_arrow(sdf).sort_by([("i32", "descending")])
    expected = to_spark_compatible(MIXED).sort_by([("i32", "descending")])
    _same(back, expected)  # NaN stays NaN, the null row stays null, int32 stays int32

    empty = arrow_to_spark(spark_session, MIXED.slice(0, 0))
    assert empty.count() == 0 and empty.columns == MIXED.column_names


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
@pytest.mark.spark
def test_ray_to_spark_is_distributed_but_lossy(spark_session: Any) -> None:
    import ray

    from hoodie_ray.spark import ray_to_spark

    t = MIXED.select(["i", "s", "d", "ts", "dec"])
    rows = ray_to_spark(spark_session, ray.data.from_arrow(t)).orderBy("s").collect()
    by_s = {r["s"]: r for r in rows}
    assert by_s["a"]["i"] == 1 and by_s["a"]["dec"] == Decimal("1.23")
    assert by_s["a"]["ts"] == dt.datetime(2024, 1, 2, 3, 4, 5, 123456)  # session zone UTC
    assert by_s["ü"]["d"] is None  # NaN came back as null (pandas in the Python workers)


@pytest.mark.spark
def test_session_is_shared_and_reported(spark_session: Any) -> None:
    from hoodie_ray.spark import init_spark
    from tests.fixtures_ray import TIMINGS

    assert init_spark() is spark_session  # never a second session
    n = 50_000  # (suite time)
    df = spark_session.range(0, n, numPartitions=2).selectExpr("id", "cast(id as string) s").cache()
    df.count()
    from hoodie_ray.spark import release_spark_df, spark_to_ray

    t0 = time.perf_counter()
    ds = spark_to_ray(df)
    assert ds.count() == n
    elapsed = time.perf_counter() - t0
    release_spark_df(df)
    df.unpersist()
    print(
        f"\nray init {TIMINGS.get('ray_init', 0):.1f}s, spark init "
        f"{TIMINGS.get('spark_init', 0):.1f}s, from_spark {n / elapsed:,.0f} rows/s"
    )
    assert TIMINGS.get("spark_init", 0) < 90
