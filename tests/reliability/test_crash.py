"""Crash points: ``kill -9`` of a writer process at random moments, then a new writer goes on.

One subprocess per crash point (``tests/reliability/driver.py``): it opens the table (waiting
for the killed predecessor's lock to expire, rolling back what it left pending), then commits
deterministic batches in a loop, printing each completed commit. The test kills it with
SIGKILL at a random moment and checks, before anything else touches the table
(:meth:`CrashLedger.after_kill`):

* nothing lost: every commit the driver reported is on the timeline, in order;
* nothing half-written: at most one more commit completed (the one in flight at the kill, its
  ``DONE`` line lost with the process), and hoodie_ray's reader and hudi-rs both read exactly
  the model after the completed commits -- pending instants, half-written files and markers
  of the dead writer are invisible;

then starts the next subprocess, which must recover and continue. A last writer runs to a
clean close and the table is checked for debris (pending instants, markers, base files of
uncommitted instants).

Engines:

* ``client``: HoodieWriteClient, inline compaction and cleaning, no Ray: ~2-3 s a point.
* ``stream`` on a cluster: a HoodieStreamWriter with asynchronous compaction (compactor
  actors) in a driver that joins the test session's Ray -- the cluster outlives the killed
  driver, as a production cluster does, and the dead driver's actors are reaped by Ray.
* ``stream`` embedded (full run only): the driver starts its own Ray; ~15 s a point.

A killed Ray driver's actors outlive it for a few seconds and finish what they were doing (a
commit the driver asked for may complete after its death); the checks run once they are gone
(:func:`~tests.reliability.common.wait_quiescent`), and the figures report how long they lived.

``-m slow`` runs 2 + 1 points (the CI suite crashes writers in test_torn.py); ``HOODIE_RAY_FULL=1``
runs 40 + 8 + 4.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from tests.reliability.common import (
    CRASH_OPTIONS,
    FULL,
    CrashLedger,
    Driver,
    assert_no_debris,
    driver_args,
    wait_quiescent,
)
from tests.reliability.report import record

STREAM_OPTIONS = {
    **CRASH_OPTIONS,
    "compaction.async.enabled": "true",
    "compaction.tasks": "1",
    "write.tasks": "2",
    "write.bucket_assign.tasks": "1",
}

FINAL_COMMITS = 4
EXPIRE_S = int(CRASH_OPTIONS["hoodie.write.lock.expire_ms"]) / 1000


def crash_run(
    tmp_path: Path,
    *,
    engine: str,
    points: int,
    seed: int,
    options: dict[str, str],
    kill_window: tuple[float, float],
    startup_timeout: float,
    ray_address: str | None = None,
) -> dict:
    path = tmp_path / "t"
    rng = random.Random(seed)
    ledger = CrashLedger(path, seed, parts=2 if engine == "stream" else 1)
    t0 = time.monotonic()
    for point in range(points):
        d = Driver(
            driver_args(path, engine, seed, ledger.next_index, options, ray_address=ray_address),
            tmp_path,
        )
        try:
            # A third of the kills land early: during the lock wait, the rollback of what the
            # previous writer left, or the first commit; the others anywhere later.
            early = point > 0 and rng.random() < 0.33
            line = d.read_until("BEGIN" if early else "OPENED", startup_timeout)
            assert line is not None, f"driver died on its own:\n{d.stderr_tail()}"
            time.sleep(rng.uniform(0.0, 1.5) if early else rng.uniform(*kill_window))
            d.kill()
            rc = d.wait()
            if engine == "stream":
                ledger.zombie_windows.append(
                    wait_quiescent(d, path, EXPIRE_S, cluster=ray_address is not None)
                )
        finally:
            d.kill_group()
        assert rc == -9, f"driver exited with {rc} before the kill:\n{d.stderr_tail()}"
        ledger.after_kill(d, f"crash point {point}")

    # Writing goes on, to a clean close; then no debris may be left.
    d = Driver(
        driver_args(
            path,
            engine,
            seed,
            ledger.next_index,
            options,
            count=FINAL_COMMITS,
            ray_address=ray_address,
        ),
        tmp_path,
    )
    try:
        rc = d.wait(timeout=startup_timeout + 120)
    finally:
        d.kill_group()
    assert rc == 0, d.stderr_tail()
    ledger.after_clean_run(d, FINAL_COMMITS, "the final clean run")
    assert_no_debris(path)
    return {**ledger.figures(), "seconds": round(time.monotonic() - t0, 1)}


def _full_only(n: int, ci: int) -> None:
    if n > ci and not FULL:
        pytest.skip("HOODIE_RAY_FULL=1 runs the full count")


@pytest.mark.parametrize(
    "points",
    [
        # suite time: a writer process killed mid-write, then recovered by the next, runs in CI
        # in tests/reliability/test_torn.py (its CI crash point) and test_crash_operations.py
        pytest.param(2, id="ci", marks=pytest.mark.slow),
        pytest.param(40, id="full", marks=pytest.mark.slow),
    ],
)
def test_kill9_client_writer(tmp_path, points):
    _full_only(points, 2)
    figures = crash_run(
        tmp_path,
        engine="client",
        points=points,
        seed=1000 + points,
        options=CRASH_OPTIONS,
        kill_window=(0.0, 1.2),
        startup_timeout=60,
    )
    record("kill9_client_writer", **figures)


@pytest.mark.ray
@pytest.mark.slow  # suite time: test_kill9_stream_driver_embedded_ray kills the driver in CI
@pytest.mark.parametrize(
    "points", [pytest.param(1, id="ci"), pytest.param(8, id="full", marks=pytest.mark.slow)]
)
def test_kill9_stream_driver_on_a_cluster(ray_session, tmp_path, points):
    """The driver dies, the cluster lives on: Ray reaps the driver's actors (its coordinator
    stops heartbeating the lock), the next driver replaces stale named actors and recovers."""
    _full_only(points, 1)
    address = ray_session.get_runtime_context().gcs_address
    figures = crash_run(
        tmp_path,
        engine="stream",
        points=points,
        seed=2000 + points,
        options=STREAM_OPTIONS,
        kill_window=(0.0, 4.0),
        startup_timeout=120,
        ray_address=address,
    )
    record("kill9_stream_driver_cluster", **figures)


@pytest.mark.slow
def test_kill9_stream_driver_embedded_ray(tmp_path):
    """The driver owns its Ray: a kill -9 takes the whole local cluster down with it."""
    _full_only(4, 0)
    figures = crash_run(
        tmp_path,
        engine="stream",
        points=4,
        seed=3000,
        options=STREAM_OPTIONS,
        kill_window=(0.0, 4.0),
        startup_timeout=180,
    )
    record("kill9_stream_driver_embedded", **figures)
