"""Soak: a long streaming run with asynchronous compaction; every actor's memory must stay flat
and nothing may be lost.

    python scripts/soak.py                     # 15 minutes (the acceptance run)
    python scripts/soak.py --minutes 3         # a short run
    python scripts/soak.py --minutes 15 --report soak.json

A HoodieStreamWriter (2 writers, 1 assigner, async compaction on 1 compactor actor, cleaning)
on an embedded local Ray commits a checkpoint of ``--rows`` upserts every ``--interval``
seconds: random keys out of ``--keys`` (so the key index fills up, then stays), late records,
``_hoodie_is_deleted`` deletes, strings of random length. A dict model of the table follows
every checkpoint; every ``--verify-every`` checkpoints hoodie_ray's reader must equal it, and
at the end hudi-rs too, with nothing left pending.

Every ``--sample`` seconds the resident memory (RSS) of the driver and of every actor process
(coordinator, assigner, writers, compactor) is sampled. An actor's memory is flat when its
RSS over the second half of the run grows by less than ``--max-growth`` percent (the first
half is warm-up: the key index, Arrow pools and caches fill). Exit status 0 when nothing was
lost and every actor stayed flat; the report (``--report``) has the samples and the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

PARTITIONS = tuple(f"p{i}" for i in range(8))


def batch(seed: int, idx: int, rows: int, keys: int, ts0: int) -> list[dict]:
    """Checkpoint ``idx``'s rows: upserts of random keys, late records, deletes.

    Even keys may be deleted (3%), odd keys may get late records (10%), never both: a late
    upsert older than a delete of its key loses to the delete's tombstone until a compaction
    drops the tombstone, then wins -- Hudi's event-time semantics depend on compaction timing
    there, and the dict model cannot follow that.
    """
    rng = random.Random(seed * 1_000_003 + idx)
    out = []
    for j in range(rows):
        k = rng.randrange(keys)
        ts = ts0 + idx * rows + j
        if k % 2 and rng.random() < 0.10:
            ts -= rng.randint(rows, 20 * rows)  # late: an older event arrives now
        out.append(
            {
                "key": f"k{k:07d}",
                "p": PARTITIONS[k % len(PARTITIONS)],
                "ts": ts,
                "v": rng.randint(-(10**12), 10**12),
                "s": "x" * rng.randint(0, 60),
                "_hoodie_is_deleted": k % 2 == 0 and rng.random() < 0.03,
            }
        )
    return out


def rss_mb(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return None


def actor_pids(writer: Any, table: str, compactors: int) -> dict[str, int]:
    import ray

    from hoodie_ray.ray.runtime import job_table

    pids = dict(writer.actor_pids())
    for i in range(compactors):
        try:
            name = f"{job_table(table, writer.path)}/compactor-{i}"
            a = ray.get_actor(name, namespace="hoodie_ray")
            pids[f"compactor-{i}"] = ray.get(a.pid.remote(), timeout=10)
        except Exception:
            pass  # created at the first compaction
    return pids


def trend(samples: list[tuple[float, float]]) -> dict[str, float]:
    """RSS figures of one process: start, middle, end, growth over the second half, slope."""
    if len(samples) < 4:
        return {"samples": len(samples)}
    t_end = samples[-1][0]
    half = [s for s in samples if s[0] >= t_end / 2] or samples
    first_q = [m for t, m in half if t <= t_end * 0.625] or [half[0][1]]
    last_q = [m for t, m in half if t >= t_end * 0.875] or [half[-1][1]]
    n = len(half)
    mt = sum(t for t, _ in half) / n
    mm = sum(m for _, m in half) / n
    var = sum((t - mt) ** 2 for t, _ in half) or 1.0
    slope = sum((t - mt) * (m - mm) for t, m in half) / var  # MB per second
    a, b = sum(first_q) / len(first_q), sum(last_q) / len(last_q)
    return {
        "samples": len(samples),
        "rss_start_mb": round(samples[0][1], 1),
        "rss_mid_mb": round(half[0][1], 1),
        "rss_end_mb": round(samples[-1][1], 1),
        "rss_max_mb": round(max(m for _, m in samples), 1),
        "second_half_growth_pct": round(100.0 * (b - a) / a, 2) if a else 0.0,
        "second_half_slope_mb_per_min": round(slope * 60, 3),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--minutes", type=float, default=15.0)
    p.add_argument("--rows", type=int, default=2000, help="upserts per checkpoint")
    p.add_argument("--keys", type=int, default=20000, help="distinct record keys")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between checkpoints")
    p.add_argument("--sample", type=float, default=5.0, help="seconds between memory samples")
    p.add_argument("--verify-every", type=int, default=30, help="checkpoints between checks")
    p.add_argument("--max-growth", type=float, default=10.0, help="percent, second half")
    p.add_argument("--path", default=None, help="table path (default: a new temporary dir)")
    p.add_argument("--report", default=None, help="write the JSON report here")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)

    import hoodie_ray as hr
    from hoodie_ray.ray.runtime import ensure_ray
    from tests.write.model import OPTIONS, TableModel, hudi_rs_snapshot, to_arrow

    path = args.path or str(Path(tempfile.mkdtemp(prefix="hoodie_ray_soak_")) / "t")
    options = {
        **OPTIONS,
        "hoodie.table.name": "soak",
        "write.tasks": "2",
        "write.bucket_assign.tasks": "1",
        "compaction.async.enabled": "true",
        "compaction.delta_commits": "5",
        "compaction.tasks": "1",
        "clean.retain_commits": "10",
    }
    ensure_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    import os

    model = TableModel()
    mem: dict[str, list[tuple[float, float]]] = {}
    pids_seen: dict[str, set[int]] = {}
    checks = 0
    t0 = time.monotonic()
    deadline = t0 + args.minutes * 60
    next_sample = t0
    idx = 0
    latencies: list[float] = []
    print(f"soak: {args.minutes} min on {path}", flush=True)
    w = hr.HoodieStreamWriter(path, options)
    try:
        while time.monotonic() < deadline:
            tick = time.monotonic()
            rows = batch(args.seed, idx, args.rows, args.keys, 10**9)
            half = len(rows) // 2
            for part in (rows[:half], rows[half:]):
                w.write(to_arrow(part, True))
                model.upsert(part)
            c0 = time.monotonic()
            assert w.checkpoint() is not None
            latencies.append(time.monotonic() - c0)
            idx += 1
            if idx % args.verify_every == 0:
                got = hr.read(path).select(["key", "p", "ts", "v", "s"]).sort_by("key")
                want = model.as_table()
                if got.cast(want.schema).to_pylist() != want.to_pylist():
                    raise SystemExit(f"checkpoint {idx}: hr.read differs from the model")
                checks += 1
            now = time.monotonic()
            if now >= next_sample:
                pids = actor_pids(w, "soak", 1)
                pids["driver"] = os.getpid()
                for role, pid in pids.items():
                    m = rss_mb(pid)
                    if m is not None:
                        mem.setdefault(role, []).append((now - t0, m))
                        pids_seen.setdefault(role, set()).add(pid)
                next_sample = now + args.sample
                print(
                    f"  {now - t0:6.0f}s checkpoint {idx:5d} rows {len(model.rows):6d} "
                    + " ".join(f"{r}={mem[r][-1][1]:.0f}MB" for r in sorted(mem)),
                    flush=True,
                )
            time.sleep(max(0.0, args.interval - (time.monotonic() - tick)))
        w.close()
    except BaseException:
        w.abort()
        raise
    elapsed = time.monotonic() - t0
    # Final checks: both readers, nothing pending.
    want = model.as_table()
    got_hr = hr.read(path).select(want.schema.names).sort_by("key").cast(want.schema)
    got_rs = hudi_rs_snapshot(path)
    tl = hr.HoodieTable.load(path).timeline
    pending = [str(i) for i in tl if i.state.value != "COMPLETED"]
    actions = [i.action for i in tl if i.state.value == "COMPLETED"]
    lost_hr = got_hr.to_pylist() != want.to_pylist()
    lost_rs = got_rs.to_pylist() != want.to_pylist()
    trends = {role: trend(s) for role, s in sorted(mem.items())}
    actors = {r: t for r, t in trends.items() if r != "driver"}
    flat = all(
        t.get("second_half_growth_pct", 0.0) < args.max_growth
        for t in actors.values()
        if t.get("samples", 0) >= 4
    )
    restarts = {r: len(ps) - 1 for r, ps in pids_seen.items() if len(ps) > 1}
    lat = sorted(latencies)
    report = {
        "minutes": round(elapsed / 60, 2),
        "checkpoints": idx,
        "rows_written": idx * args.rows,
        "rows_in_table": len(model.rows),
        "compactions": actions.count("commit"),
        "cleans": actions.count("clean"),
        "pending_at_end": pending,
        "model_checks_during_run": checks,
        "lost_or_wrong_hr": lost_hr,
        "lost_or_wrong_hudi_rs": lost_rs,
        "checkpoint_latency_s": {
            "p50": round(lat[len(lat) // 2], 3) if lat else None,
            "p99": round(lat[int(len(lat) * 0.99)], 3) if lat else None,
        },
        "actor_restarts": restarts,
        "memory": trends,
        "memory_flat": flat,
        "max_growth_pct_allowed": args.max_growth,
        "samples": {r: [(round(t, 1), round(m, 1)) for t, m in s] for r, s in mem.items()},
    }
    summary = {k: v for k, v in report.items() if k != "samples"}
    print(json.dumps(summary, indent=2), flush=True)
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2))
    ok = not (lost_hr or lost_rs or pending) and flat
    print("soak:", "OK" if ok else "FAILED", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
