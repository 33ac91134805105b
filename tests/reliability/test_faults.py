"""Actor faults under load: every role killed -- coordinator, assigners, writers, compactors --
while a stream with asynchronous compaction runs and readers poll the table.

Each checkpoint writes two batches; a fault is injected before the checkpoint, during it (a
timer), or, for a compactor, while its compaction runs between checkpoints. After every
checkpoint both readers see exactly the model (nothing lost, nothing twice), and a reader
thread polling hudi-rs the whole time only ever sees committed states.

An actor lost just as a checkpoint's instant begins (between the coordinator's start and the
actors') must not leave that instant pending.

CI: 2 faults (a compactor, the coordinator) + a writer lost as an instant begins;
``HOODIE_RAY_FULL=1``: 24, every role 4 times, + an assigner lost as an instant begins.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

import hoodie_ray as hr
from hoodie_ray.ray.runtime import job_table
from tests.fixtures_ray import checkpoint_with_kill
from tests.reliability.common import (
    CRASH_OPTIONS,
    FULL,
    ModelCache,
    assert_no_debris,
    assert_snapshots,
    batch_table,
    batch_writes,
    pending_instants,
    rs_snapshot,
    vanished_file_error,
    vanished_kind,
)
from tests.reliability.report import record

pytestmark = pytest.mark.ray

FAULT_OPTIONS = {
    **CRASH_OPTIONS,
    "compaction.async.enabled": "true",
    "compaction.delta_commits": "2",
    "compaction.tasks": "1",
    "write.tasks": "2",
    "write.bucket_assign.tasks": "2",
}
ROLES = ("compactor-0", "coordinator", "writer-0", "assigner-1", "writer-1", "assigner-0")


class Poller:
    """A reader thread: every state it sees must be one a checkpoint committed."""

    def __init__(self, path) -> None:
        self.path = path
        self.seen: dict[tuple, int] = {}
        self.reads = 0
        self.vanished: dict[str, int] = {}  # reads that failed on a file deleted meanwhile
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                rows = rs_snapshot(self.path)
            except Exception as e:
                if not self.reads:  # the table does not exist yet
                    time.sleep(0.05)
                    continue
                if vanished_file_error(e):
                    kind = vanished_kind(e)
                    self.vanished[kind] = self.vanished.get(kind, 0) + 1
                else:
                    self.errors.append(f"{type(e).__name__}: {e}")
                time.sleep(0.05)
                continue
            self.reads += 1
            key = tuple(tuple(sorted(r.items())) for r in rows)
            self.seen[key] = self.seen.get(key, 0) + 1
            time.sleep(0.02)  # leave the writers some CPU

    def start(self) -> Poller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def check(self, states: list[list[dict]]) -> None:
        allowed = {tuple(tuple(sorted(r.items())) for r in s) for s in states}
        bad = [k for k in self.seen if k not in allowed]
        assert not bad, f"a reader saw {len(bad)} state(s) no checkpoint committed"
        assert not self.errors, self.errors[0]


def _kill_when_alive(ray, name: str, timeout: float, hit: list[bool]) -> None:
    """Kill the named actor as soon as it exists (a compactor lives only while it runs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            handle = ray.get_actor(name, namespace="hoodie_ray")
        except ValueError:
            time.sleep(0.01)
            continue
        ray.kill(handle, no_restart=True)
        hit.append(True)
        return
    hit.append(False)


@pytest.mark.parametrize(
    "faults",
    [
        pytest.param(2, id="ci", marks=pytest.mark.slow),  # suite time: see the instant-begins test
        pytest.param(24, id="full", marks=pytest.mark.slow),
    ],
)
def test_actor_faults_under_load_with_async_compaction(ray_session, tmp_path, faults):
    if faults > 2 and not FULL:
        pytest.skip("HOODIE_RAY_FULL=1 runs the full count")
    ray = ray_session
    path = tmp_path / "t"
    seed = 4000 + faults
    rng = random.Random(seed)
    model = ModelCache(seed, parts=2)
    states: list[list[dict]] = [[]]
    injected: list[tuple[int, str, str]] = []
    missed = 0
    poller = Poller(path).start()
    t0 = time.monotonic()
    table = job_table(FAULT_OPTIONS["hoodie.table.name"], str(path))
    with hr.HoodieStreamWriter(str(path), FAULT_OPTIONS) as w:
        i = 0
        while len(injected) < faults:
            for part in batch_writes(seed, i, 2):
                w.write(batch_table(part))
            states.append(model.rows(i + 1))
            role = ROLES[len(injected) % len(ROLES)]
            if role.startswith("compactor"):
                # The compaction scheduled at the last commit runs now, beside the writes.
                hit: list[bool] = []
                killer = threading.Thread(
                    target=_kill_when_alive,
                    args=(ray, f"{table}/{role}", 5.0, hit),
                    daemon=True,
                )
                killer.start()
                w.checkpoint()
                killer.join()
                when = "compaction"
                if not hit[0]:  # no compaction started at this checkpoint: try the next one
                    missed += 1
                    i += 1
                    assert_snapshots(path, states[-1], f"checkpoint {i - 1}")
                    continue
            else:
                handle = w.actors[role]
                when = rng.choice(["before", "during"])
                checkpoint_with_kill(w, handle, when, rng)
            injected.append((i, role, when))
            i += 1
            assert_snapshots(path, states[-1], f"checkpoint {i - 1} after killing {role} ({when})")
        # A few clean checkpoints: compaction catches up, pending plans finish.
        for _ in range(3):
            for part in batch_writes(seed, i, 2):
                w.write(batch_table(part))
            states.append(model.rows(i + 1))
            w.checkpoint()
            i += 1
    poller.stop()
    assert_snapshots(path, states[-1], "after close")
    poller.check(states)
    assert_no_debris(path)
    by_role: dict[str, int] = {}
    for _, role, _ in injected:
        by_role[role.rstrip("-0123456789")] = by_role.get(role.rstrip("-0123456789"), 0) + 1
    record(
        "actor_faults_under_load",
        faults_injected=len(injected),
        compactor_waits_without_compaction=missed,
        by_role=by_role,
        checkpoints=i,
        reader_polls=poller.reads,
        reads_failed_on_a_deleted_file=poller.vanished,
        distinct_states_seen=len(poller.seen),
        lost=0,
        seconds=round(time.monotonic() - t0, 1),
    )


@pytest.mark.parametrize("role", ["writer-0", pytest.param("assigner-0", marks=pytest.mark.slow)])
def test_actor_lost_as_an_instant_begins(ray_session, tmp_path, role):
    """An actor dies between checkpoints: the next write begins an instant on the coordinator,
    then fails on the dead actor. Recovery must roll that instant back -- a pending write left
    behind is debris, and blocks every later compaction of this writer (a pending write stops
    compaction scheduling)."""
    ray = ray_session
    path = tmp_path / "t"
    seed = 4100
    model = ModelCache(seed, parts=2)
    # suite time: one writer and one assigner, unchained (was 2 writers): the kill still hits
    # an unchained writer between checkpoints; each topology start is 2 actors, not 3
    opts = {
        **FAULT_OPTIONS,
        "write.tasks": "1",
        "write.bucket_assign.tasks": "1",
        "pipeline.operator-chaining": "false",
    }
    with hr.HoodieStreamWriter(str(path), opts) as w:
        assert not w.chained
        for i in range(4):
            if i == 1:
                ray.kill(w.actors[role], no_restart=True)
            for part in batch_writes(seed, i, 2):
                w.write(batch_table(part))
            w.checkpoint()
            assert pending_instants(path, ("deltacommit",)) == [], f"checkpoint {i}"
    assert_snapshots(path, model.rows(4), "after close")
    assert_no_debris(path)
