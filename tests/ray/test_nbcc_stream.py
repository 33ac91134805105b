"""Non-blocking concurrency control on the Ray path: several HoodieStreamWriters (and a
HoodieDatasink) on one MERGE_ON_READ bucket-index table, each committing every checkpoint.

Writers' checkpoints interleave on shared buckets; compaction is scheduled beside them. Every
table is compared with the model (per key the largest ordering value among the committed
writes) through hoodie_ray's reader and, once compacted, hudi-rs (0.5 lists no log-only file
group on table version 8, and under NBCC a bucket's group starts with logs only).
"""

from __future__ import annotations

import os

import pytest

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action
from hoodie_ray.write.heartbeat import heartbeat_path
from tests.job.test_nbcc import NBCC, _single_writer_logs
from tests.ray.test_occ_stream import row
from tests.write.model import TableModel, model_options, to_arrow

pytestmark = pytest.mark.ray

#: Two topologies in the test session's small Ray cluster.
SMALL = {f"ray.{r}.num_cpus": "0.1" for r in ("coordinator", "assigner", "writer", "compactor")}


def _opts(*extra: dict) -> dict:
    return model_options(NBCC, SMALL, {"write.tasks": "1"}, *extra, version="8")


def _seeded(tmp_path, opts: dict) -> tuple[str, TableModel]:
    """Keys a0..a5 in partition a, compacted: every bucket's group has a base file."""
    path, model = str(tmp_path / "t"), TableModel()
    model.write(path, opts, "upsert", [row(f"a{i}", "a", 1, i) for i in range(6)])
    hr.compact(path, opts)
    return path, model


def _instants(path: str, action: str | None = None) -> list:
    tl = HoodieTable.load(path).active_timeline.reload()
    return [i for i in tl.instants if action is None or i.action == action]


def _assert_reads(path: str, model: TableModel, what: str) -> None:
    got = hr.read(path).select(["key", "p", "ts", "v", "s"]).sort_by("key")
    assert got.to_pylist() == model.as_table().to_pylist(), what


def test_stream_writers_commit_every_checkpoint_and_a_dead_one_is_rolled_back(
    ray_session, tmp_path
):
    """Writers a and b checkpoint on the same buckets, both instants open at once, with
    compaction scheduled beside them: every checkpoint commits. Then a dies with its instant
    open (its actors gone, its heartbeat stopped) while b goes on committing; once a's heartbeat
    has expired the next writer to open rolls a's instant back."""
    import ray

    opts = _opts({"compaction.delta_commits": "2"})  # scheduled by the writers, run on Ray
    path, model = _seeded(tmp_path, opts)
    instants: list[str] = []
    with hr.HoodieStreamWriter(path, opts) as b:
        a = hr.HoodieStreamWriter(path, opts)
        for rnd in range(2):
            # a's ordering values win on even keys, b's on odd ones, whatever the completion
            # order; a also opens a new bucket group (logs only)
            a_rows = [row(f"a{k}", "a", 10 * rnd + 2 - k % 2, 100 + rnd) for k in range(6)]
            a_rows.append(row(f"n{rnd}", "b", 1, rnd))
            b_rows = [row(f"a{k}", "a", 10 * rnd + 1 + k % 2, 200 + rnd) for k in range(1, 6)]
            a.write(to_arrow(a_rows, True))
            b.write(to_arrow(b_rows, True))
            assert a._instant is not None and b._instant is not None
            first = b.checkpoint()  # requested last, completed first
            instants += [a.checkpoint(), first]
            for batch in (a_rows, b_rows):
                model.upsert(batch)
            _assert_reads(path, model, f"round {rnd}")
        assert None not in instants
        completed = {i.timestamp for i in _instants(path, Action.DELTA_COMMIT) if i.is_completed}
        assert set(instants) <= completed  # no conflict, no retry
        assert not _instants(path, Action.ROLLBACK)
        _single_writer_logs(path, "a")

        # a dies in its checkpoint's background flush and commit
        a.write(to_arrow([row("a1", "a", 50, 1), row("z1", "z", 50, 1)], True))
        b_rows = [row("a1", "a", 30, 2), row("a2", "a", 30, 2)]
        b.write(to_arrow(b_rows, True))
        dead = a._instant
        a.checkpoint(wait=False)
        for actor in a.actors.values():
            ray.kill(actor, no_restart=True)
        a._closed = True  # the driver is gone too: nothing of it runs again
        assert b.checkpoint() is not None
        model.upsert(b_rows)
        assert dead in {i.timestamp for i in _instants(path) if not i.is_completed}
        # a's heartbeats expire: its open instant's and those of compactions it was running
        # beside the writes (they heartbeat too, so that no one else runs them meanwhile)
        started = {r.services.compaction_started for r in a.results}
        for instant in {dead} | (started - {None}):
            beat = os.path.join(path, heartbeat_path(instant))
            if os.path.exists(beat):
                os.utime(beat, (1_000_000.0, 1_000_000.0))
        more = [row("a2", "a", 50, 4)]
        # the next writer to open (a single-process one here) rolls the dead instant back
        assert HoodieWriteClient(path, opts).write(to_arrow(more, True)).instant is not None
        model.upsert(more)
        b.write(to_arrow([row("a4", "a", 60, 5)], True))
        assert b.checkpoint() is not None
        model.upsert([row("a4", "a", 60, 5)])
    assert [i for i in _instants(path, Action.COMMIT) if i.is_completed]  # compacted beside
    rolled = [i for i in _instants(path, Action.ROLLBACK) if i.is_completed]
    assert len(rolled) == 1
    assert [i for i in _instants(path) if not i.is_completed] == []
    _assert_reads(path, model, "the dead writer's rows are gone")
    hr.compact(path, opts)
    model.assert_hudi_rs_reads(path, "compacted")
    assert hr.validate_metadata(path) == []


@pytest.mark.slow  # suite time (a third topology); the stream writers' test covers NBCC on Ray
def test_a_datasink_commits_beside_an_open_stream_instant(ray_session, tmp_path):
    import ray

    opts = _opts()
    path, model = _seeded(tmp_path, opts)
    with hr.HoodieStreamWriter(path, opts) as w:
        rows = [row("a1", "a", 30, 2), row("a2", "a", 30, 2)]
        w.write(to_arrow(rows, True))  # its instant is open
        sink_rows = [row("a2", "a", 40, 3), row("c1", "c", 40, 3)]
        ray.data.from_arrow(to_arrow(sink_rows, True)).write_datasink(hr.HoodieDatasink(path, opts))
        assert w.checkpoint() is not None
        for batch in (rows, sink_rows):
            model.upsert(batch)
    assert not _instants(path, Action.ROLLBACK)
    _assert_reads(path, model, "the stream's and the datasink's commits")
    hr.compact(path, opts)
    model.assert_hudi_rs_reads(path, "compacted")
