"""The streaming read (``hr.read_stream``): every commit once, in order, resumable from a
position, across compactions; a consumer killed with ``kill -9`` and resumed from its saved
position misses no commit and sees none twice; archived and cleaned commits are refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodieQueryError
from hoodie_ray.table import HoodieTable

ROOT = Path(__file__).resolve().parents[2]


def _opts(version: str, **extra: str) -> dict[str, str]:
    return {
        "hoodie.table.name": "s",
        "hoodie.datasource.write.recordkey.field": "key",
        "precombine.field": "ts",
        "hoodie.write.table.version": version,
        "compaction.delta_commits": "3",
        **extra,
    }


def _commit(path: str, opts: dict[str, str], c: int) -> str:
    keys = [f"k{(c * 7 + i) % 40:02d}" for i in range(10)]
    batch = pa.table({"key": keys, "ts": pa.array([c] * 10, pa.int64()), "v": [c] * 10})
    result = hr.HoodieWriteClient(path, opts).write(batch)
    assert result.instant is not None
    return result.instant


@pytest.mark.parametrize("version", ["6", "8"])
def test_every_commit_once_in_order_and_resumable(tmp_path: Path, version: str) -> None:
    path = str(tmp_path / "t")
    opts = _opts(version)
    written = [_commit(path, opts, c) for c in range(4)]
    stream = hr.read_stream(path, start="earliest")
    batches = list(stream)
    assert [b.instant for b in batches] == written  # compactions move on, yield nothing
    for c, b in enumerate(batches):
        assert set(b.table["v"].to_pylist()) == {c} and b.table.num_rows == 10
    # resumed after the second commit: the rest, and the commits written since
    written += [_commit(path, opts, c) for c in range(4, 7)]
    rest = list(hr.read_stream(path, after=batches[1].position))
    assert [b.instant for b in rest] == written[2:]
    # the default start: the latest commit, then what follows
    assert [b.instant for b in hr.read_stream(path)] == written[-1:]
    # start is inclusive
    assert [b.instant for b in hr.read_stream(path, start=written[5])] == written[5:]
    cdc = list(hr.read_stream(path, start=written[1], incremental_format="cdc"))
    assert [b.instant for b in cdc] == written[1:]
    ops = {op for b in cdc for op in b.table["op"].to_pylist()}
    assert ops <= {"i", "u"} and "u" in ops


def test_polling_follows_new_commits(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    opts = _opts("8")
    first = _commit(path, opts, 0)
    reader = hr.read_stream(path, start="earliest", poll_interval_s=0.01)
    seen = []
    for batch in reader:
        seen.append(batch.instant)
        if len(seen) < 3:
            _commit(path, opts, len(seen))  # written while the reader follows
        else:
            reader.close()
    assert seen[0] == first and len(seen) == 3 and seen == sorted(seen)


_CONSUMER = textwrap.dedent(
    """
    import json, os, sys
    import hoodie_ray as hr
    path, state = sys.argv[1], sys.argv[2]
    after = None
    if os.path.exists(state):
        after = json.load(open(state))["position"]
    kw = {"after": after} if after else {"start": "earliest"}
    for b in hr.read_stream(path, **kw):
        with open(state + ".out", "a") as out:  # the output and the position, in one step
            out.write(json.dumps({"instant": b.instant, "rows": b.table.num_rows}) + "\\n")
        tmp = state + ".tmp"
        json.dump({"position": b.position}, open(tmp, "w"))
        os.replace(tmp, state)
        print(b.instant, flush=True)
        if os.environ.get("STOP_AFTER") and b.instant == os.environ["STOP_AFTER"]:
            os.kill(os.getpid(), 9)
    """
)


def test_a_consumer_killed_and_resumed_sees_every_commit_once(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    opts = _opts("8")
    written = [_commit(path, opts, c) for c in range(6)]
    script = tmp_path / "consumer.py"
    script.write_text(_CONSUMER)
    state = str(tmp_path / "state.json")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STOP_AFTER": written[2]}
    run = subprocess.run(
        [sys.executable, str(script), path, state], env=env, capture_output=True, text=True
    )
    assert run.returncode == -signal.SIGKILL, run.stderr
    written += [_commit(path, opts, c) for c in range(6, 8)]
    env.pop("STOP_AFTER")
    run = subprocess.run(
        [sys.executable, str(script), path, state], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    lines = [json.loads(x) for x in Path(state + ".out").read_text().splitlines()]
    assert [x["instant"] for x in lines] == written
    assert all(x["rows"] == 10 for x in lines)


def test_cleaned_and_archived_commits_are_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    opts = _opts(
        "8",
        **{
            "table.type": "COPY_ON_WRITE",
            "hoodie.cleaner.commits.retained": "1",
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
        },
    )
    written = [_commit(path, opts, c) for c in range(8)]
    hr.clean(path, opts)
    tbl = HoodieTable.load(path)
    with pytest.raises(HoodieQueryError, match="cleaned"):
        list(hr.read_stream(path, start=tbl.commits()[0].timestamp))
    hr.archive(path, opts)
    with pytest.raises(hr.HoodieTimelineError, match="archived"):
        hr.read_stream(path, after=written[0])


def test_a_live_stream_refuses_commits_archived_between_polls(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    opts = _opts(
        "6",
        **{
            "table.type": "COPY_ON_WRITE",
            "clean.retain_commits": "1",
            "archive.min_commits": "2",
            "archive.max_commits": "3",
            "hoodie.archive.automatic": "false",
        },
    )
    _commit(path, opts, 0)
    reader = hr.read_stream(path, start="earliest")
    assert len(list(reader.poll())) == 1
    for c in range(1, 8):
        _commit(path, opts, c)
    assert hr.archive(path, opts).instants
    with pytest.raises(hr.HoodieTimelineError, match="archived"):
        list(reader.poll())


def test_a_pending_compaction_plan_does_not_hold_a_version_6_stream_back(tmp_path: Path) -> None:
    from hoodie_ray.job.maintenance import schedule_compaction

    path = str(tmp_path / "t")
    opts = _opts("6", **{"compaction.delta_commits": "100", "compaction.schedule.enabled": "false"})
    written = [_commit(path, opts, 0), _commit(path, opts, 1)]
    assert schedule_compaction(path, opts, force=True)
    written += [_commit(path, opts, 2), _commit(path, opts, 3)]
    assert [b.instant for b in hr.read_stream(path, start="earliest")] == written


def test_a_pending_clustering_plan_does_not_hold_a_version_6_stream_back(tmp_path: Path) -> None:
    """On version 6 a clustering's plan is a pending replacecommit: like a compaction plan it
    yields no batch, so the commits after it are read while it waits (scheduled by one job,
    run by another, it may wait for hours)."""
    from hoodie_ray.compaction.clustering import start_clustering
    from hoodie_ray.config.options import resolve_options

    path = str(tmp_path / "t")
    opts = _opts(
        "6", **{"compaction.schedule.enabled": "false", "hoodie.parquet.small.file.limit": "0"}
    )
    written = [_commit(path, opts, 0), _commit(path, opts, 1)]
    started = start_clustering(HoodieTable.load(path), resolve_options(opts))
    assert started is not None
    for c in (2, 3):  # new keys: new file groups, none the plan rewrites
        rows = pa.table({"key": [f"n{c}-{i}" for i in range(5)], "ts": [c] * 5, "v": [c] * 5})
        written.append(hr.HoodieWriteClient(path, opts).write(rows).instant)
    assert [i.timestamp for i in HoodieTable.load(path).pending_clusterings()] == [started[0]]
    assert [b.instant for b in hr.read_stream(path, start="earliest")] == written


def test_a_stream_from_the_earliest_commit_refuses_when_commits_were_archived(
    tmp_path: Path,
) -> None:
    """Archival took the first commits: a stream from the earliest commit is refused, also
    when the earliest active commit is a compaction (which yields no batch, so the archived
    commits' keys were skipped without a word)."""
    path = str(tmp_path / "t")
    opts = _opts(
        "8",
        **{
            "clean.retain_commits": "2",
            "hoodie.keep.min.commits": "3",
            "hoodie.keep.max.commits": "4",
        },
    )
    for c in range(40):
        rows = pa.table({"key": [f"k{c}"], "ts": pa.array([c], pa.int64()), "v": [c]})
        hr.HoodieWriteClient(path, opts).write(rows)
        commits = HoodieTable.load(path).commits()
        if commits[0].action == "commit" and HoodieTable.load(path).has_archived_instants():
            break
    else:
        pytest.fail("no compaction ever headed the active timeline")
    with pytest.raises(hr.HoodieTimelineError, match="from its earliest commit would skip"):
        list(hr.read_stream(path, start="earliest"))


def test_a_resumed_stream_refuses_a_write_that_completed_after_its_position_and_was_archived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version 8 positions are completion times. A write requested before a compaction and
    completed after a consumer's position, then archived (its request time is older than the
    active timeline's first instant), would be skipped by the resumed stream: it is refused."""
    from hoodie_ray.job.coordinator import Coordinator

    path = str(tmp_path / "t")
    opts = {
        **_opts("8"),
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.table.services.enabled": "false",
        "hoodie.metadata.enable": "false",
        "clean.retain_commits": "1",
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
    }

    def write(key: str, part: str, ts: int) -> str:
        rows = pa.table({"key": [key], "p": [part], "ts": [ts], "v": [ts]})
        instant = hr.HoodieWriteClient(path, opts).write(rows).instant
        assert instant is not None
        return instant

    write("a0", "a", 1)
    write("a1", "a", 2)
    seen: dict[str, str] = {}
    real = Coordinator.commit

    def commit(self, instant, stats, partitions=None):  # type: ignore[no-untyped-def]
        if not seen:  # the write is requested; a compaction, another write and a reader
            seen["compaction"] = hr.compact(path, opts).instant or ""
            write("b0", "b", 4)
            seen["position"] = list(hr.read_stream(path, start="earliest"))[-1].position
        return real(self, instant, stats, partitions)

    monkeypatch.setattr(Coordinator, "commit", commit)
    straddled = write("w", "a", 3)
    monkeypatch.setattr(Coordinator, "commit", real)
    for i in range(2):
        write(f"c{i}", "c", 10 + i)
    hr.archive(path, opts)
    assert straddled not in {i.timestamp for i in HoodieTable.load(path).active_timeline.instants}
    with pytest.raises(hr.HoodieTimelineError, match="would skip commits that were archived"):
        list(hr.read_stream(path, after=seen["position"]))
