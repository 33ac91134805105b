"""Streaming upserts: one delta commit per checkpoint, with asynchronous compaction.

``hr.HoodieStreamWriter`` is Flink's checkpoint model on Ray: ``write()`` sends batches to the
bucket-assigner and writer actors, ``checkpoint()`` commits everything written since the last
one as a delta commit. With ``compaction.async.enabled=true`` and
``compaction.delta_commits=2``, a compaction is scheduled every 2 delta commits and runs beside
the writers, merging log files into new base files.

Each checkpoint upserts a batch of sensor readings (some keys new, most updated, a few late
records that must lose to newer ones, a few deletes through ``_hoodie_is_deleted``). At the end
the snapshot is read back (``hr.read``) and compared with what the stream should have left.

Usage::

    python examples/streaming_upsert.py [--quick] [--checkpoints N] [--path DIR]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Sequence

import pyarrow as pa

import hoodie_ray as hr

OPTIONS = {
    "hoodie.table.name": "readings",
    "hoodie.datasource.write.recordkey.field": "sensor_id",
    "hoodie.datasource.write.partitionpath.field": "region",
    "precombine.field": "event_ts",
    "compaction.async.enabled": "true",
    "compaction.delta_commits": "2",
    "write.tasks": "1",
}
REGIONS = ("eu", "us", "apac")


def make_batch(rng: random.Random, keys: int, rows: int, clock: int) -> tuple[pa.Table, list[dict]]:
    """A batch of readings with a ``_hoodie_is_deleted`` flag; also returned as dicts."""
    out = []
    for i in range(rows):
        k = rng.randrange(keys)
        late = rng.random() < 0.1
        out.append(
            {
                "sensor_id": f"s{k:05d}",
                "region": REGIONS[k % len(REGIONS)],  # a sensor stays in its region
                "event_ts": clock + i - (10_000 if late else 0),
                "value": round(rng.uniform(-40, 60), 2),
                "_hoodie_is_deleted": rng.random() < 0.03,
            }
        )
    schema = pa.schema(
        [
            ("sensor_id", pa.string()),
            ("region", pa.string()),
            ("event_ts", pa.int64()),
            ("value", pa.float64()),
            ("_hoodie_is_deleted", pa.bool_()),
        ]
    )
    return pa.Table.from_pylist(out, schema=schema), out


def apply(model: dict[str, dict], batch: list[dict]) -> None:
    """Event-time upsert of one checkpoint: the highest ``event_ts`` wins, ties the later row."""
    latest: dict[str, dict] = {}
    for r in batch:
        cur = latest.get(r["sensor_id"])
        if cur is None or r["event_ts"] >= cur["event_ts"]:
            latest[r["sensor_id"]] = r
    for k, r in latest.items():
        old = model.get(k)
        if old is not None and r["event_ts"] < old["event_ts"]:
            continue  # late: the stored record is newer
        if r["_hoodie_is_deleted"]:
            model.pop(k, None)
        else:
            model[k] = r


def run(path: str, checkpoints: int, keys: int, rows: int) -> int:
    """Stream ``checkpoints`` batches into ``path``, then read back and check; 0 on success."""
    rng = random.Random(7)
    model: dict[str, dict] = {}
    t0 = time.perf_counter()
    with hr.HoodieStreamWriter(path, OPTIONS) as w:
        for n in range(checkpoints):
            batch, as_dicts = make_batch(rng, keys, rows, clock=(n + 1) * 100_000)
            half = batch.num_rows // 2
            w.write(batch.slice(0, half))  # several writes per checkpoint are fine
            w.write(batch.slice(half))
            apply(model, as_dicts)
            instant = w.checkpoint()
            print(f"checkpoint {n + 1}: delta commit {instant} ({batch.num_rows} records)")
    elapsed = time.perf_counter() - t0

    table = hr.HoodieTable.load(path)
    actions: dict[str, int] = {}
    for inst in table.timeline:
        key = f"{inst.action} ({inst.state.value.lower()})"
        actions[key] = actions.get(key, 0) + 1
    print(
        f"\ntimeline after {elapsed:.1f} s: " + ", ".join(f"{n} x {a}" for a, n in actions.items())
    )
    compactions = [i for i in table.timeline if i.action in ("compaction", "commit")]
    if compactions:
        print(f"compactions: {', '.join(f'{i.timestamp} {i.state.value}' for i in compactions)}")
    else:
        print("no compaction on the timeline (async compaction not available in this build)")

    snapshot = hr.read(path, columns=["sensor_id", "region", "event_ts", "value"])
    got = {r["sensor_id"]: r for r in snapshot.to_pylist()}
    want = {
        k: {c: r[c] for c in ("sensor_id", "region", "event_ts", "value")} for k, r in model.items()
    }
    print(f"snapshot: {snapshot.num_rows} sensors")
    print(snapshot.sort_by("sensor_id").slice(0, 5).to_pandas().to_string(index=False))
    if got != want:
        missing = sorted(set(want) - set(got))[:5]
        extra = sorted(set(got) - set(want))[:5]
        wrong = sorted(k for k in set(got) & set(want) if got[k] != want[k])[:5]
        print(
            f"UNEXPECTED snapshot: missing {missing}, extra {extra}, different {wrong}",
            file=sys.stderr,
        )
        return 1
    print("ok: the snapshot equals the stream's last-writer-wins result")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run in a temporary directory (or ``--path``)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="4 checkpoints of 500 records")
    p.add_argument("--checkpoints", type=int, default=None)
    p.add_argument("--path", default=None, help="write here instead of a temporary directory")
    args = p.parse_args(argv)
    checkpoints = args.checkpoints or (4 if args.quick else 8)
    keys, rows = (300, 500) if args.quick else (5_000, 20_000)
    if args.path:
        return run(args.path, checkpoints, keys, rows)
    with tempfile.TemporaryDirectory(prefix="hoodie_ray_stream_") as tmp:
        return run(f"{tmp}/readings", checkpoints, keys, rows)


if __name__ == "__main__":
    sys.exit(main())
