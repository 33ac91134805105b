"""What a driver decides from an input's schema alone equals what the assigners' preparation
of its rows gives (input_data_schema vs prepare_input), and refusals come from the schema."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.config.options import resolve_options
from hoodie_ray.job.client import input_data_schema, prepare_input, route_input
from hoodie_ray.job.coordinator import Coordinator

OPTIONS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "k",
    "hoodie.datasource.write.partitionpath.field": "p",
    "precombine.field": "ts",
}


def _setup(path, first: pa.Table, options=OPTIONS):
    wc = resolve_options(options)
    coord = Coordinator(str(path), wc)
    try:
        return coord.open(first.schema), wc
    finally:
        coord.close()


BASE = pa.table({"k": ["a", "b"], "p": ["x", "y"], "ts": [1, 2], "v": pa.array([1, 2], pa.int32())})


@pytest.mark.parametrize(
    "batch",
    [
        BASE,
        BASE.append_column("extra", pa.array(["e", None])),  # a new column
        BASE.set_column(3, "v", pa.array([1, 2], pa.int64())),  # widened
        BASE.drop_columns(["v"]),  # missing: nulls
        BASE.append_column("n", pa.nulls(2)),  # all-null column
    ],
    ids=["same", "added", "widened", "missing", "null-typed"],
)
def test_schema_alone_gives_what_the_rows_give(tmp_path, batch) -> None:
    hr.write(BASE, str(tmp_path / "t"), OPTIONS, engine="local")
    setup, wc = _setup(tmp_path / "t", BASE)
    fixed = dataclasses.replace(setup, schema_fixed=True)
    want = prepare_input(fixed, batch, wc).data_schema
    assert input_data_schema(fixed, batch.schema, wc, decides=False).equals(want)


def test_a_new_tables_first_batch_decides(tmp_path) -> None:
    setup, wc = _setup(tmp_path / "new", BASE)
    assert not setup.schema_fixed
    want = prepare_input(setup, BASE, wc).data_schema
    assert input_data_schema(setup, BASE.schema, wc, decides=True).equals(want)


def test_refusals_come_from_the_schema(tmp_path) -> None:
    hr.write(BASE, str(tmp_path / "t"), OPTIONS, engine="local")
    setup, wc = _setup(tmp_path / "t", BASE)
    with pytest.raises(hr.HoodieSchemaError, match=r"\bv\b"):
        input_data_schema(setup, BASE.set_column(3, "v", pa.array(["1", "2"])).schema, wc,
                          decides=False)  # fmt: skip
    with pytest.raises(hr.HoodieSchemaError, match="ts"):
        input_data_schema(setup, BASE.drop_columns(["ts"]).schema, wc, decides=False)


def test_route_input_splits_prepared_rows_by_assigner(tmp_path) -> None:
    hr.write(BASE, str(tmp_path / "t"), OPTIONS, engine="local")
    setup, _wc = _setup(tmp_path / "t", BASE)
    big = pa.table({"k": [f"k{i}" for i in range(50)], "p": ["x"] * 50, "ts": list(range(50)),
                    "v": pa.array(range(50), pa.int32())})  # fmt: skip
    parts = route_input(setup, big, 3, rows=(10, 40))
    assert sum(p.num_rows for p in parts) == 30
    keys = sorted(k for p in parts for k in p.column("_hoodie_record_key").to_pylist())
    assert keys == sorted(f"k{i}" for i in range(10, 40))
    # one key always goes to one assigner
    again = route_input(setup, big, 3, rows=(10, 40))
    assert [p.column("k").to_pylist() for p in parts] == [p.column("k").to_pylist() for p in again]
