"""Copy-on-write merge rules against the log reader's, both checked with hudi-rs."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from tests.conftest import hudi_rs_read

SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("ts", pa.int32()),
        ("v", pa.int64()),
        ("_hoodie_is_deleted", pa.bool_()),
    ]
)


@pytest.mark.parametrize(
    ("table_type", "survivors"),
    [("MERGE_ON_READ", ["b"]), ("COPY_ON_WRITE", ["a", "b"])],
)
def test_delete_with_int_zero_ordering_value(tmp_path, table_type, survivors):
    """A delete whose int ordering value is 0 wins in a log (the default ordering value of
    Java's and hudi-rs's log scanners) but is compared like any value by a copy-on-write
    merge (Java's payload rule); a delete with an older non-zero value loses in both."""
    path = str(tmp_path / "t")
    opts = {
        "hoodie.table.name": "z",
        "hoodie.datasource.write.recordkey.field": "key",
        "precombine.field": "ts",
        "table.type": table_type,
        "compaction.schedule.enabled": "false",
    }
    client = HoodieWriteClient(path, opts)
    client.write(
        pa.table(
            {"key": ["a", "b"], "ts": [5, 5], "v": [1, 2], "_hoodie_is_deleted": [False, False]},
            schema=SCHEMA,
        )
    )
    client.write(
        pa.table(
            {"key": ["a", "b"], "ts": [0, 3], "v": [9, 9], "_hoodie_is_deleted": [True, True]},
            schema=SCHEMA,
        )
    )
    ours = sorted(hr.read(path).column("key").to_pylist())
    theirs = sorted(hudi_rs_read(path).column("key").to_pylist())
    assert ours == theirs == survivors
