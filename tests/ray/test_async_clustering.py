"""Asynchronous clustering beside a Ray stream writer (Flink's ``clustering.async.enabled`` in
append mode): the coordinator schedules a plan every ``clustering.delta_commits`` commits,
the compactor actors rewrite its groups while the stream goes on inserting, and the first
checkpoint after it finished commits its replacecommit. Read back with hudi-rs against the
model; the metadata table validates."""

from __future__ import annotations

import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieOptionError
from hoodie_ray.table import HoodieTable
from tests.ray.test_occ_stream import row
from tests.write.model import V8_MDT, TableModel, model_options, to_arrow

pytestmark = pytest.mark.ray

ASYNC = {
    "write.operation": "insert",
    "clustering.async.enabled": "true",
    "clustering.delta_commits": "2",
    "hoodie.parquet.small.file.limit": "0",  # every checkpoint opens new small groups
    "hoodie.clustering.plan.strategy.sort.columns": "ts,v",
    "hoodie.layout.optimize.strategy": "z-order",
    "write.tasks": "1",
}


def test_clustering_runs_beside_an_inserting_stream(ray_session, tmp_path):
    path, model = str(tmp_path / "t"), TableModel()
    opts = model_options(V8_MDT, ASYNC, table_type="MERGE_ON_READ", version="8")
    results = []
    with hr.HoodieStreamWriter(path, opts) as w:
        for c in range(5):
            rows = [row(f"k{c}-{i}", "ab"[i % 2], c * 10 + i, i) for i in range(8)]
            w.write(to_arrow(rows, True))
            assert w.checkpoint() is not None
            model.upsert(rows)
        results = list(w.results)
    table = HoodieTable.load(path)
    clusterings = [
        i
        for i in table.active_timeline.completed()
        if i.action == "replacecommit" and table.metadata(i).operation_type == "CLUSTER"
    ]
    assert clusterings, "no clustering committed"
    # the stream's later checkpoints were written and committed while it ran
    c = clusterings[0]
    beside = [
        i
        for i in table.active_timeline.completed()
        if i.action == "deltacommit" and c.timestamp < i.timestamp
        if (i.completion_time or "") < (c.completion_time or "")
    ]
    assert beside, "no checkpoint committed beside the clustering"
    assert results and all(r.instant for r in results)
    assert not [i for i in table.active_timeline.instants if not i.is_completed]
    model.assert_hudi_rs_reads(path, "clustered beside the stream")
    assert hr.validate_metadata(path) == []
    groups = {(s.partition_path, s.file_id) for s in table.view().latest_file_slices()}
    assert len(groups) < 5 * 2  # fewer groups than the checkpoints opened


@pytest.mark.parametrize(
    "extra, needs",
    [
        ({"write.operation": "upsert"}, "write.operation=insert"),
        ({"clustering.schedule.enabled": "false"}, "clustering.schedule.enabled"),
        ({"index.type": "BUCKET"}, "index.type=BUCKET"),
        ({"hoodie.write.concurrency.mode": "optimistic_concurrency_control"}, "single writer"),
    ],
)
def test_async_clustering_options_that_cannot_work_are_refused(extra, needs):
    with pytest.raises(HoodieOptionError, match=needs):
        hr.HoodieStreamWriter("/nonexistent/t", model_options(ASYNC, extra))


def test_inline_clustering_options_that_cannot_work_are_refused():
    from hoodie_ray.config.options import resolve_options

    inline = {"hoodie.clustering.inline": "true"}
    with pytest.raises(HoodieOptionError, match="index.type=BUCKET"):
        resolve_options({**inline, "index.type": "BUCKET"})
    # Flink's clustering.delta_commits is the async trigger, not the inline one
    with pytest.raises(HoodieOptionError, match="hoodie.clustering.inline.max.commits"):
        resolve_options({**inline, "clustering.delta_commits": "2"})
