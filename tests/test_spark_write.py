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
    res = hr.write(
        df,
        path,
        {
            "hoodie.table.name": "sparky",
            "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.partitionpath.field": "p",
            "precombine.field": "ts",
        },
    )
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
