"""Spark DataFrame (RayDP) -> hr.write -> hr.read / hr.read_spark gives back the rows."""

from __future__ import annotations

import pytest

import hoodie_ray as hr
from tests.conftest import hudi_rs_read

pytestmark = pytest.mark.spark


def test_spark_dataframe_round_trip(spark_session, tmp_path):
    path = str(tmp_path / "t")
    rows = [
        (f"k{i}", i % 3, i * 10, f"name {i}" if i % 4 else None, float(i) / 3) for i in range(300)
    ]
    df = spark_session.createDataFrame(
        rows, "key string, p int, ts long, name string, score double"
    )
    options = {
        "hoodie.table.name": "sparky",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
    }
    res = hr.write(df, path, options)
    assert res.instant is not None and res.num_inserts == 300
    got = hr.read(path, columns=["key", "p", "ts", "name", "score"]).sort_by("key").to_pylist()
    want = sorted(
        ({"key": k, "p": p, "ts": t, "name": n, "score": s} for k, p, t, n, s in rows),
        key=lambda r: r["key"],
    )
    assert [dict(r, p=int(r["p"])) for r in got] == want
    assert hudi_rs_read(path).num_rows == 300
    sdf = hr.read_spark(spark_session, path, columns=["key", "ts"])
    assert sdf.count() == 300
    assert sorted(r["key"] for r in sdf.collect())[:2] == ["k0", "k1"]

    # a DataFrame with a new column (and score as a float where the table has a double):
    # the table schema evolves, the other rows read it as null
    df2 = spark_session.createDataFrame(
        [("k1", 1, 99, "renamed", 2.5, "gold"), ("k300", 0, 99, None, None, "new")],
        "key string, p int, ts long, name string, score float, tier string",
    )
    res2 = hr.write(df2, path, options)
    assert res2.num_inserts == 1 and res2.num_updates == 1
    cols = ["key", "ts", "name", "score", "tier"]
    got = {r["key"]: r for r in hr.read(path, columns=cols).to_pylist()}
    assert len(got) == 301 and got["k0"]["tier"] is None
    assert got["k1"] == {"key": "k1", "ts": 99, "name": "renamed", "score": 2.5, "tier": "gold"}
    assert got["k300"]["tier"] == "new"
    assert hudi_rs_read(path).column("tier").null_count == 299
    tiers = hr.read_spark(spark_session, path, columns=["key", "tier"]).collect()
    assert sorted(r["tier"] for r in tiers if r["tier"]) == ["gold", "new"]


def test_read_spark_reads_slices_in_spark_tasks_exactly(spark_session, tmp_path):
    """hr.read_spark hands Spark the file slices, not the rows: its Python workers merge them
    (mapInArrow), and the values come back exactly (NaN, timestamps, decimals, nulls)."""
    import datetime as dt
    import decimal

    import pyarrow as pa

    path = str(tmp_path / "t")
    n = 40
    table = pa.table(
        {
            "key": [f"k{i:02d}" for i in range(n)],
            "p": [f"p{i % 4}" for i in range(n)],
            "ts": pa.array(range(n), pa.int64()),
            "x": [
                float("nan") if i % 7 == 0 else (None if i % 5 == 0 else i / 3) for i in range(n)
            ],
            "at": pa.array(
                [
                    dt.datetime(2026, 1, 1, 12, 0, i, 123456, tzinfo=dt.timezone.utc)
                    for i in range(n)
                ],
                pa.timestamp("us", "UTC"),
            ),
            "d": pa.array([decimal.Decimal(f"{i}.25") for i in range(n)], pa.decimal128(10, 2)),
        }
    )
    opts = {
        "hoodie.table.name": "exact",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "table.type": "MERGE_ON_READ",
    }
    hr.write(table, path, opts, engine="local")
    hr.write(
        table.slice(0, 10).set_column(2, "ts", pa.array(range(100, 110), pa.int64())),
        path,
        opts,
        engine="local",
    )
    sdf = hr.read_spark(
        spark_session, path, distributed=True, columns=["key", "ts", "x", "at", "d"]
    )
    plan = sdf._jdf.queryExecution().executedPlan().toString()
    assert "MapInArrow" in plan or "PythonMapInArrow" in plan, plan
    got = sorted((tuple(r) for r in sdf.collect()), key=lambda r: r[0])
    want = hr.read(path, columns=["key", "ts", "x", "at", "d"]).sort_by("key").to_pylist()
    assert len(got) == n
    for g, w in zip(got, want, strict=True):
        assert g[0] == w["key"] and g[1] == w["ts"] and g[4] == w["d"]
        assert (
            (g[2] is None and w["x"] is None)
            or (g[2] != g[2] and w["x"] != w["x"])
            or (g[2] == w["x"])
        )
        assert g[3].replace(tzinfo=None) == w["at"].replace(tzinfo=None)  # a UTC session
    assert hr.read_spark(spark_session, path, query_type="incremental", begin="0").count() == n
    small = hr.read_spark(spark_session, path, columns=["key"])  # read in the driver
    assert "MapInArrow" not in small._jdf.queryExecution().executedPlan().toString()
    assert small.count() == n


def _cached_rdds(spark) -> int:
    return int(spark.sparkContext._jsc.getPersistentRDDs().size())


@pytest.mark.slow  # suite time: the Spark round trip runs in CI
def test_spark_dataframes_through_one_stream_release_their_caches(spark_session, tmp_path):
    """A Spark DataFrame per checkpoint into one live topology: the actors live on, each
    DataFrame's RayDP cache is released once committed, zero rows write no instant."""
    from tests.write.model import OPTIONS, TableModel, Workload, to_arrow

    path = tmp_path / "t"
    wl, model = Workload(seed=31), TableModel()
    cached = _cached_rdds(spark_session)
    with hr.HoodieStreamWriter(str(path), {**OPTIONS, "hoodie.table.name": "sparkstream"}) as w:
        pids = None
        for i in range(3):
            rows = wl.rows_for(wl.keys[10 * i : 10 * i + 25])
            w.write(spark_session.createDataFrame(to_arrow(rows, False).to_pandas()))
            assert w.checkpoint() is not None
            model.upsert(rows)
            assert _cached_rdds(spark_session) == cached, f"checkpoint {i}"
            pids = pids or w.actor_pids()
            assert w.actor_pids() == pids
            model.assert_hudi_rs_reads(path)
        empty = spark_session.createDataFrame(to_arrow(rows, False).to_pandas()).limit(0)
        w.write(empty)
        assert w.checkpoint() is None
    # hr.write of a DataFrame releases its cache too
    rows = wl.rows_for(wl.keys[:5])
    df = spark_session.createDataFrame(to_arrow(rows, False).to_pandas())
    hr.write(df, str(path), {**OPTIONS, "hoodie.table.name": "sparkstream"})
    assert _cached_rdds(spark_session) == cached


# suite time: test_spark_dataframe_round_trip writes DataFrames in CI; a refused row raised as
# itself with no instant: tests/ray/test_dataset_stream.py (refused row) and
# tests/ray/test_dataset_inputs.py (object column refused by name)
@pytest.mark.slow
def test_a_refused_spark_row_is_the_hoodie_error_itself(spark_session, tmp_path):
    path = str(tmp_path / "t")
    options = {
        "hoodie.table.name": "sparkbad",
        "hoodie.datasource.write.recordkey.field": "key",
        "precombine.field": "ts",
    }
    hr.write(spark_session.createDataFrame([("a", 1)], "key string, ts long"), path, options)
    instants = len(hr.HoodieTable.load(path).timeline)
    bad = spark_session.createDataFrame([("b", 2), (None, 3)], "key string, ts long")
    with pytest.raises(hr.HoodieInputError, match="key") as e:
        hr.write(bad, path, options)
    assert type(e.value).__module__ == "hoodie_ray.exceptions" and "Traceback" not in str(e.value)
    assert len(hr.HoodieTable.load(path).timeline) == instants  # no instant, not even a rollback
    assert hudi_rs_read(path).num_rows == 1


def test_spark_edge_inputs(spark_session, tmp_path):
    """What a Spark user's pipeline hands over besides rows: an empty DataFrame into an
    ``insert_overwrite_table`` truncates the table (as empty Arrow does); one of no partitions
    at all (an empty RDD's) converts on the local path; a join's repeated column name and a
    DataFrame whose Spark job fails are our own errors, naming the column or the cause, with
    the table unchanged."""
    from hoodie_ray.spark import spark_to_arrow

    path = str(tmp_path / "t")
    options = {
        "hoodie.table.name": "sparkedge",
        "hoodie.datasource.write.recordkey.field": "key",
        "precombine.field": "ts",
    }
    src = spark_session.range(20).selectExpr("concat('k', id) as key", "id as ts")
    hr.write(src, path, options)
    a = src.selectExpr("key", "ts", "ts as v")
    b = src.selectExpr("key as k2", "ts as v")
    joined = a.join(b, a.key == b.k2).drop("k2")
    assert joined.columns.count("v") == 2
    with pytest.raises(hr.HoodieSchemaError, match="field v appears twice"):
        hr.write(joined, path, options)
    failing = src.selectExpr("key", "if(ts = 7, raise_error('boom77'), ts) as ts")
    with pytest.raises(hr.HoodieInputError, match="boom77") as e:
        hr.write(failing, path, options)
    assert "Traceback" not in str(e.value)
    assert hudi_rs_read(path).num_rows == 20  # unchanged

    no_parts = spark_session.createDataFrame(spark_session.sparkContext.emptyRDD(), src.schema)
    assert spark_to_arrow(no_parts).schema.names == ["key", "ts"]
    iot = {**options, "write.operation": "insert_overwrite_table"}
    res = hr.write(src.filter("ts < 0"), path, iot)
    assert res.instant is not None
    assert hudi_rs_read(path).num_rows == 0 and hr.read(path).num_rows == 0
