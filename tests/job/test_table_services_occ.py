"""The table services as their own job beside live writers (optimistic concurrency control).

A writer with ``hoodie.table.services.enabled=false`` runs no service; ``hr.compact``,
``hr.clean`` and ``hr.archive`` run from another process while it keeps delta-committing,
taking the table lock only in short turns. Every table is read back with hudi-rs and compared
with the model; a table with a metadata table must validate clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import hoodie_ray as hr
from hoodie_ray.cli import main
from hoodie_ray.compaction.api import CompactionService
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.job.coordinator import Coordinator, TableServices
from hoodie_ray.storage import LocalStorage
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action
from hoodie_ray.write.heartbeat import HeartbeatClient
from tests.write.model import TableModel, model_options, to_arrow

OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control"}
NO_SERVICES = {"hoodie.table.services.enabled": "false"}
#: What the services keep: small, so that a short run cleans and archives.
KEEP = {
    "clean.retain_commits": "2",
    "hoodie.keep.min.commits": "4",
    "hoodie.keep.max.commits": "6",
    "compaction.delta_commits": "1",
    "hoodie.metadata.compact.max.delta.commits": "3",
}

# A writer process: one HoodieWriteClient, one commit per batch, each instant printed (and
# flushed) as it commits. Each even batch waits for a line on stdin: the test's services
# after an even count of commits run between commits whatever the machine's load; those after
# an odd count overlap the writer's next (odd) commit, which goes on at once.
_WRITER = """
import json, sys
import pyarrow as pa
from hoodie_ray.job.client import HoodieWriteClient

path, options, batches = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
client = HoodieWriteClient(path, options)
for b, rows in enumerate(batches):
    if b % 2 == 0:
        sys.stdin.readline()
    print(client.write(pa.Table.from_pylist(rows)).instant, flush=True)
"""


def row(key: str, p: str, ts: int, v: int) -> dict:
    return {"key": key, "p": p, "ts": ts, "v": v, "s": f"{key}@{ts}"}


def batch(b: int) -> list[dict]:
    """Batch ``b``: updates of six of the seeded keys (a rotating window, both partitions) and
    one new key; ``ts`` grows with ``b``, so the event-time model needs no tie rule."""
    keys = [(b + i) % 8 for i in range(6)]
    rows = [row(f"k{k}", f"p{k % 2}", b + 2, b) for k in keys]
    return [*rows, row(f"n{b}", f"p{b % 2}", b + 2, b)]


def _instants(path: str) -> list:
    return list(HoodieTable.from_storage(LocalStorage(path)).active_timeline.reload().instants)


def _archived(path: str) -> list:
    table = HoodieTable.from_storage(LocalStorage(path))
    return table.archived_timeline.instants()


@pytest.mark.parametrize("version", ["8", pytest.param("6", marks=pytest.mark.slow)])  # suite time
def test_services_in_their_own_process_beside_a_delta_committing_writer(tmp_path, version):
    """20 delta commits by a writer process whose services are off, while this process
    compacts, cleans and archives between and during them: every commit lands (compaction
    never conflicts), hudi-rs reads the model, nothing is left pending, the metadata table
    (version 8) validates clean."""
    path, model = str(tmp_path / "t"), TableModel()
    base = model_options(OCC, KEEP, version=version)
    seed = [row(f"k{k}", f"p{k % 2}", 1, 0) for k in range(8)]
    model.write(path, base, "upsert", seed)
    writer_opts = {**base, **NO_SERVICES}
    batches = [batch(b) for b in range(20)]
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, path, json.dumps(writer_opts), json.dumps(batches)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    committed: list[str] = []
    compacted: list[str] = []
    cleaned = archived = 0
    try:
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        for line in proc.stdout:  # one line per commit
            committed.append(line.strip())
            n = len(committed)
            if n % 2 == 0:
                res = hr.compact(path, base)
                compacted += [res.instant] if res.instant else []
            if n % 3 == 0:
                cleaned += hr.clean(path, base).num_files
            if n % 4 == 0:
                archived += len(hr.archive(path, base).instants)
            if n % 2 == 0 and n < len(batches):
                proc.stdin.write("go\n")
                proc.stdin.flush()
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert len(committed) == 20 and len(set(committed)) == 20
    # the services ran while the writer was writing: compactions between its commits
    assert any(committed[0] < c < committed[-1] for c in compacted), (compacted, committed)
    # and again once it is done: whatever is left
    hr.compact(path, base)
    cleaned += hr.clean(path, base).num_files
    archived += len(hr.archive(path, base).instants)
    for b in batches:
        model.upsert(b)
    model.assert_hudi_rs_reads(path)
    timeline = _instants(path)
    assert not [i for i in timeline if not i.is_completed], timeline
    assert not [i for i in timeline if i.action == Action.ROLLBACK]
    assert cleaned > 0 and archived > 0
    assert not os.listdir(tmp_path / "t" / ".hoodie" / ".heartbeat")
    assert hr.validate_metadata(path) == []
    if version == "8":
        assert HoodieTable.from_storage(LocalStorage(path)).uses_metadata_table
        assert main(["metadata", "validate", path]) == 0  # `hoodie-ray metadata validate`


@pytest.mark.parametrize("occ", [True, False], ids=["occ", "single_writer"])
def test_a_writer_with_table_services_disabled_runs_none(tmp_path, occ):
    """With ``hoodie.table.services.enabled=false`` a writer schedules no compaction, runs no
    pending one, cleans and archives nothing, however far past the triggers; with the
    services on, the same writes do all of it."""
    path = str(tmp_path / "off")
    opts = model_options(OCC if occ else {}, KEEP, NO_SERVICES)
    client = HoodieWriteClient(path, opts)
    model = TableModel()
    model.write(path, opts, "upsert", [row(f"k{k}", f"p{k % 2}", 1, 0) for k in range(8)])
    res = client.write(to_arrow(batch(0), True))
    model.upsert(batch(0))
    # a plan left pending (by a service process that died): the writer leaves it too
    plan = CompactionService.open(path, opts).schedule(True, beside_writes=occ)
    assert plan is not None
    for b in range(1, 10):
        res = client.write(to_arrow(batch(b), True))
        assert res.services == TableServices()
        model.upsert(batch(b))
    actions = [i.action for i in _instants(path)]
    assert set(actions) == {Action.DELTA_COMMIT, Action.COMPACTION}
    assert [i.timestamp for i in _instants(path) if not i.is_completed] == [plan]
    assert not _archived(path)
    model.assert_hudi_rs_reads(path)

    # the same writes with the services on: the pending plan runs, then cleans and archival
    on = str(tmp_path / "on")
    opts_on = {k: v for k, v in opts.items() if k not in NO_SERVICES}
    model_on = TableModel()
    model_on.write(on, opts_on, "upsert", [row(f"k{k}", f"p{k % 2}", 1, 0) for k in range(8)])
    client_on = HoodieWriteClient(on, opts_on)
    for b in range(10):
        client_on.write(to_arrow(batch(b), True))
        model_on.upsert(batch(b))
    actions = {i.action for i in _instants(on)}
    assert Action.CLEAN in actions and Action.COMMIT in actions
    assert _archived(on)
    model_on.assert_hudi_rs_reads(on)


@pytest.mark.parametrize("version", ["8", "6"])
def test_clean_beside_writers_keeps_a_live_write_rolls_back_an_expired_one(tmp_path, version):
    """hr.clean under OCC rolls back a pending write whose heartbeat expired (Hudi's LAZY
    policy) and keeps the live one, and deletes no file of a slice the live write reads."""
    path, model = str(tmp_path / "t"), TableModel()
    opts = model_options(OCC, KEEP, NO_SERVICES, version=version)
    model.write(path, opts, "upsert", [row(f"k{k}", f"p{k % 2}", 1, 0) for k in range(8)])
    for b in range(4):
        model.write(path, opts, "upsert", batch(b))
        if b % 2:
            hr.compact(path, opts)  # two slices after the seed's in every file group

    def open_instant() -> tuple[Coordinator, str]:
        coord = Coordinator(path, opts)
        coord.open(None)
        return coord, coord.start_instant()

    live_coord, live = open_instant()
    dead_coord, dead = open_instant()
    assert dead_coord.heartbeats is not None
    dead_coord.heartbeats.close()
    live_slices = {(s.partition_path, s.file_id): s for s in live_coord.latest_slices()}
    for b in range(4, 8):  # more commits and a compaction, so that old slices are cleanable
        model.write(path, opts, "upsert", batch(b))
    hr.compact(path, opts)
    hb = tmp_path / "t" / ".hoodie" / ".heartbeat" / dead
    os.utime(hb, (1_000_000.0, 1_000_000.0))  # its writer died: the heartbeat expired
    res = hr.clean(path, opts)
    assert res.rolled_back == (dead,)
    assert res.num_files > 0  # slices older than the live write's were cleaned
    pending = [i.timestamp for i in _instants(path) if not i.is_completed]
    assert pending == [live]
    # every file of the slices the live write started from is still there
    for s in live_slices.values():
        for name in ([s.base_file] if s.base_file else []) + s.log_files:
            assert (tmp_path / "t" / s.partition_path / name).exists(), name
    live_coord.rollback(live)
    live_coord.close()
    model.assert_hudi_rs_reads(path)
    assert hr.validate_metadata(path) == []


def test_a_compaction_another_process_runs_is_left_to_it(tmp_path):
    """A pending plan whose instant heartbeats (a service process runs it) is run neither by
    a writer's inline services nor by another hr.compact."""
    path, model = str(tmp_path / "t"), TableModel()
    opts = model_options(OCC, {"compaction.delta_commits": "1"})
    model.write(path, opts, "upsert", [row(f"k{k}", f"p{k % 2}", 1, 0) for k in range(8)])
    model.write(path, {**opts, **NO_SERVICES}, "upsert", batch(0))
    plan = CompactionService.open(path, opts).schedule(True, beside_writes=True)
    assert plan is not None
    beat = HeartbeatClient(LocalStorage(path), 60000, 2)
    beat.start(plan)
    try:
        model.write(path, opts, "upsert", batch(1))  # services on: the plan is left alone
        assert hr.compact(path, opts).instant != plan
        assert plan in [i.timestamp for i in _instants(path) if not i.is_completed]
    finally:
        beat.stop(plan)
        beat.close()
    assert hr.compact(path, opts).instant == plan  # its runner is gone: this one runs it
    model.assert_hudi_rs_reads(path)
    assert hr.validate_metadata(path) == []


@pytest.mark.parametrize("version", ["8", "6"])
def test_clean_keeps_the_slice_a_live_write_started_from(tmp_path, version):
    """A compaction requested before a write started and committed while it is in flight:
    a clean retaining from that compaction on still keeps the slice the write started from
    (it read it, and on version 6 its log is there until its commit moves it)."""
    path, model = str(tmp_path / "t"), TableModel()
    opts = model_options(OCC, KEEP, NO_SERVICES, version=version)
    model.write(path, opts, "upsert", [row(f"k{k}", f"p{k % 2}", 1, 0) for k in range(8)])
    model.write(path, opts, "upsert", batch(0))
    plan = CompactionService.open(path, opts).schedule(True, beside_writes=True)
    assert plan is not None
    started_from = HoodieTable.from_storage(LocalStorage(path)).latest_file_slices()
    kept = {
        f"{s.partition_path}/{n}"
        for s in started_from
        for n in ([s.base_file] if s.base_file else []) + s.log_files
    }
    real_commit = Coordinator.commit
    cleaned: list = []

    def commit(self, instant, stats):  # type: ignore[no-untyped-def]
        if not cleaned:
            assert hr.compact(path, opts).instant == plan
            cleaned.append(hr.clean(path, {**opts, "clean.retain_commits": "1"}))
            missing = {f for f in kept if not (tmp_path / "t" / f).exists()}
            assert not missing, missing
        return real_commit(self, instant, stats)

    rows = [row("k0", "p0", 5, 50), row("k1", "p1", 5, 51)]
    Coordinator.commit = commit  # type: ignore[method-assign]
    try:
        HoodieWriteClient(path, opts).write(to_arrow(rows, True))
    finally:
        Coordinator.commit = real_commit  # type: ignore[method-assign]
    assert cleaned and cleaned[0].earliest_commit_to_retain == plan
    model.upsert(rows)
    model.assert_hudi_rs_reads(path)
    assert hr.validate_metadata(path) == []
    # once the write completed, the next clean takes the old slices
    assert hr.clean(path, {**opts, "clean.retain_commits": "1"}).num_files > 0
    model.assert_hudi_rs_reads(path)
