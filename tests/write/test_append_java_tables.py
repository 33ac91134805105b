"""Appending to copies of the Java-written tables: hudi-rs must still read the model."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hoodie_ray as hr
from hoodie_ray.config.table_config import HoodieTableConfig, MergeMode
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.meta import META_FIELDS
from hoodie_ray.storage import LocalStorage
from tests.conftest import SAMPLE_TABLE_PARAMS, hudi_rs_read


def _data(t: pa.Table) -> pa.Table:
    return t.drop_columns([c for c in META_FIELDS if c in t.column_names])


def _bump(col: pa.ChunkedArray) -> pa.Array:
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return pc.add(pc.fill_null(col, 0), pa.scalar(1, t)).combine_chunks()
    if pa.types.is_string(t):
        return pc.binary_join_element_wise(pc.fill_null(col, ""), "_upd", "").combine_chunks()
    return col.combine_chunks()


@pytest.mark.parametrize("name", SAMPLE_TABLE_PARAMS)
def test_append_to_java_table(sample_table, name):
    root = sample_table(name)
    cfg = HoodieTableConfig.load(LocalStorage(str(root)))
    before = hudi_rs_read(root)
    if not cfg.populate_meta_fields:
        with pytest.raises(hr.HoodieUnsupportedError, match="meta fields"):
            HoodieWriteClient(str(root)).write(_data(before))
        return
    if before.num_rows == 0:
        pytest.skip("empty table: nothing to update")
    keys = cfg.record_key_fields
    parts = cfg.partition_fields
    ordering = cfg.ordering_field
    data = _data(before)
    # update the first two rows (a changed value; a higher ordering value) ...
    upd = data.slice(0, 2)
    fixed = set(keys) | set(parts) | ({ordering} if ordering else set())
    changeable = [
        f.name
        for f in upd.schema
        if f.name not in fixed
        and (
            pa.types.is_integer(f.type)
            or pa.types.is_floating(f.type)
            or pa.types.is_string(f.type)
        )
    ]
    assert changeable, "no column to change"
    col = changeable[0]
    upd = upd.set_column(upd.schema.get_field_index(col), col, _bump(upd.column(col)))
    if ordering and cfg.merge_mode is MergeMode.EVENT_TIME_ORDERING:
        upd = upd.set_column(
            upd.schema.get_field_index(ordering), ordering, _bump(upd.column(ordering))
        )
    # ... and insert a copy of the last row under a new key
    ins = data.slice(data.num_rows - 1, 1)
    kcol = keys[0]
    kt = ins.schema.field(kcol).type
    newkey = pa.array(["new-key-1"]) if pa.types.is_string(kt) else pa.array([987654], kt)
    ins = ins.set_column(ins.schema.get_field_index(kcol), kcol, newkey)
    batch = pa.concat_tables([upd, ins])
    res = HoodieWriteClient(str(root)).write(batch)
    assert res.instant is not None
    after = hudi_rs_read(root)
    assert after.num_rows == before.num_rows + 1
    got = after.sort_by("_hoodie_record_key")
    changed = got.filter(pc.equal(got.column("_hoodie_commit_time"), res.instant))
    assert changed.num_rows == 3
    assert sorted(changed.column(col).to_pylist(), key=str) == sorted(
        upd.column(col).to_pylist() + ins.column(col).to_pylist(), key=str
    )
    # untouched rows are exactly as before
    untouched_before = before.filter(
        pc.invert(
            pc.is_in(before.column("_hoodie_record_key"), changed.column("_hoodie_record_key"))
        )
    )
    untouched_after = got.filter(pc.not_equal(got.column("_hoodie_commit_time"), res.instant))
    if not cfg.is_mor:
        # a copy-on-write merge rewrites the base file: carried-over rows get its new name
        untouched_after = untouched_after.drop_columns(["_hoodie_file_name"])
        untouched_before = untouched_before.drop_columns(["_hoodie_file_name"])
    assert (
        untouched_after.sort_by("_hoodie_record_key").to_pylist()
        == untouched_before.sort_by("_hoodie_record_key").to_pylist()
    )
    # and a second write still works (appends to the log files written just now)
    HoodieWriteClient(str(root)).write(upd)
    assert hudi_rs_read(root).num_rows == before.num_rows + 1
    if cfg.props.get("hoodie.table.metadata.partitions"):
        # a metadata table Java wrote (indexes included) is kept in step with both writes
        assert hr.validate_metadata(str(root)) == []
