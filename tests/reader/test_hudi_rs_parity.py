"""Every Java-written sample table read by us and by hudi-rs (the oracle) gives the same rows.

For each table of ``../shared/tables``: the snapshot, the read-optimized view, and -- at each
completed instant -- the time travel and the incremental read since the previous instant.

Normalisation: rows are compared as Python values after sorting by record key; column names and
Arrow types must be equal (hudi-rs declares the meta columns ``not null``, we declare every
column nullable, so nullability is not compared).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from hoodie_ray.config.table_config import HoodieTableConfig
from hoodie_ray.reader import read_table
from hoodie_ray.storage import open_storage
from tests.conftest import SAMPLE_TABLE_PARAMS, hudi_rs_read

pytestmark = pytest.mark.shared


def sort_key(root: Path, t: pa.Table) -> list[str]:
    if "_hoodie_record_key" in t.schema.names:
        return ["_hoodie_record_key"]
    cfg = HoodieTableConfig.load(open_storage(str(root)))
    return [f for f in cfg.record_key_fields if f in t.schema.names] or t.schema.names[:1]


def assert_same(root: Path, mine: pa.Table, theirs: pa.Table, what: str) -> None:
    if theirs.num_rows == 0 and mine.num_rows == 0:
        return
    assert mine.schema.names == theirs.schema.names, what
    for f in mine.schema:
        assert f.type == theirs.schema.field(f.name).type, f"{what}: column {f.name}"
    keys = sort_key(root, mine)
    a = mine.sort_by([(k, "ascending") for k in keys]).to_pylist()
    b = theirs.sort_by([(k, "ascending") for k in keys]).to_pylist()
    assert a == b, what


def completed_instants(root: Path) -> list[tuple[str, str]]:
    """(requested time, position) of completed commits; position = completion time in v8+."""
    from hoodie_ray.timeline.timeline import ActiveTimeline

    cfg = HoodieTableConfig.load(open_storage(str(root)))
    tl = ActiveTimeline(open_storage(str(root)), cfg.timeline_layout_version)
    return [(i.timestamp, i.completion_time or i.timestamp) for i in tl.completed_commits()]


@pytest.mark.parametrize("name", SAMPLE_TABLE_PARAMS)
def test_snapshot_and_read_optimized(shared_sample, name: str) -> None:
    root = shared_sample(name)
    assert_same(root, read_table(str(root)), hudi_rs_read(root), "snapshot")
    ro = hudi_rs_read(root, **{"hoodie.read.use.read_optimized.mode": "true"})
    assert_same(root, read_table(str(root), query_type="read_optimized"), ro, "read_optimized")


@pytest.mark.parametrize("name", SAMPLE_TABLE_PARAMS)
def test_time_travel_and_incremental_at_each_instant(shared_sample, name: str) -> None:
    root = shared_sample(name)
    prev: str | None = None
    for ts, _pos in completed_instants(root):
        tt = hudi_rs_read(root, **{"hoodie.read.as.of.timestamp": ts})
        assert_same(root, read_table(str(root), as_of=ts), tt, f"as_of {ts}")
        opts = {"hoodie.read.query.type": "incremental", "hoodie.read.end.timestamp": ts}
        if prev is not None:
            opts["hoodie.read.start.timestamp"] = prev
        inc = hudi_rs_read(root, **opts)
        mine = read_table(str(root), query_type="incremental", begin=prev, end=ts)
        assert_same(root, mine, inc, f"incremental ({prev}, {ts}]")
        prev = ts


@pytest.mark.parametrize("name", SAMPLE_TABLE_PARAMS)
def test_incremental_by_completion_time_and_open_ranges(shared_sample, name: str) -> None:
    root = shared_sample(name)
    insts = completed_instants(root)
    if not insts:
        return
    # Open end: everything after the first instant; open start: everything up to the last.
    first, last = insts[0][1], insts[-1][1]
    cases = [
        ({"hoodie.read.start.timestamp": first}, {"begin": first}),
        ({"hoodie.read.end.timestamp": last}, {"end": last}),
        ({"hoodie.read.start.timestamp": "0"}, {"begin": "0"}),
    ]
    for hopts, mine_args in cases:
        theirs = hudi_rs_read(root, **{"hoodie.read.query.type": "incremental", **hopts})
        mine = read_table(str(root), query_type="incremental", **mine_args)
        assert_same(root, mine, theirs, f"incremental {mine_args}")
