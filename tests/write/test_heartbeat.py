"""Instant heartbeats (write/heartbeat.py): Hudi's file, beat by modification time."""

from __future__ import annotations

import os

from hoodie_ray.storage import LocalStorage
from hoodie_ray.write.heartbeat import HeartbeatClient, heartbeat_path

INSTANT = "20250101000000000"


def test_heartbeat_file_lifecycle_and_expiry(tmp_path):
    storage = LocalStorage(str(tmp_path))
    now = [1_000_000.0]
    hb = HeartbeatClient(storage, interval_ms=1000, tolerable_misses=2, clock=lambda: now[0])
    path = tmp_path / ".hoodie" / ".heartbeat" / INSTANT
    assert heartbeat_path(INSTANT) == f".hoodie/.heartbeat/{INSTANT}"
    # no heartbeat file: Java reads it as a beat at time 0, expired
    assert hb.last_beat(INSTANT) == 0.0 and hb.is_expired(INSTANT)
    hb.start(INSTANT)
    assert path.is_file() and path.stat().st_size == 0  # an empty file, as Java writes it
    os.utime(path, (now[0] - 2.0, now[0] - 2.0))  # two intervals ago: interval x misses
    assert not hb.is_expired(INSTANT)
    os.utime(path, (now[0] - 2.5, now[0] - 2.5))
    assert hb.is_expired(INSTANT)
    hb.stop(INSTANT)
    assert not path.exists()
    hb.close()


def test_close_leaves_open_instants_beat_to_expire(tmp_path):
    storage = LocalStorage(str(tmp_path))
    hb = HeartbeatClient(storage, interval_ms=1000, tolerable_misses=2)
    hb.start(INSTANT)
    hb.close()
    assert (tmp_path / ".hoodie" / ".heartbeat" / INSTANT).is_file()
    assert not hb.is_expired(INSTANT)
