"""``reconcile``: a batch brought to the read schema, its footer metadata dropped."""

from __future__ import annotations

import pyarrow as pa
import pytest

from hoodie_ray.exceptions import HoodieSchemaError
from hoodie_ray.reader.schema import reconcile

SCHEMA = pa.schema([("key", pa.string()), ("v", pa.int64())])


def test_a_matching_batch_loses_its_metadata_and_keeps_its_buffers():
    # a base file's footer metadata (Hudi's bloom filter among it) comes with every batch
    batch = pa.record_batch(
        [pa.array(["a", "b"]), pa.array([1, 2])],
        schema=SCHEMA.with_metadata({"org.apache.hudi.bloomfilter": "x" * 100_000}),
    )
    out = reconcile(batch, SCHEMA)
    assert out.schema.metadata is None and out.schema.equals(SCHEMA)
    assert out.column("key").chunk(0).buffers()[2].address == batch.column(0).buffers()[2].address
    assert reconcile(pa.Table.from_batches([batch]), SCHEMA).schema.metadata is None


def test_columns_are_ordered_cast_added_and_dropped():
    t = pa.table({"v": pa.array([1, 2], pa.int32()), "extra": ["x", "y"]})
    out = reconcile(t, SCHEMA)
    assert out.schema.equals(SCHEMA)
    assert out.column("key").null_count == 2 and out.column("v").to_pylist() == [1, 2]


def test_a_column_that_does_not_cast_names_itself():
    with pytest.raises(HoodieSchemaError, match="v"):
        reconcile(pa.table({"key": ["a"], "v": ["not a number"]}), SCHEMA)
