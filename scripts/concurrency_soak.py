"""The multi-process concurrency soak: several writer processes on one table, some killed.

``--writers`` processes (2..4) each upsert ``--rounds`` batches into one MERGE_ON_READ table
(bucket index, table version 8, metadata table on) under ``--mode occ`` (optimistic
concurrency control: the later of two commits on a file group fails, and is retried) or
``--mode nbcc`` (non-blocking concurrency control: all commit). Every batch takes keys from a
range all writers share and from a range of its writer's own. ``--kills`` times the driver
kill -9s a random writer and starts it again (it goes on with its next round).

``--engine ray``: each writer process is the driver of a ``HoodieStreamWriter`` (its own
coordinator, assigner and writer actors, and compactor actors running the compactions it
schedules) on one local Ray cluster the soak starts; a kill -9 of the driver takes its actors
with it. ``--services``: a further process compacts and cleans the table in a loop
(``hr.compact`` / ``hr.clean``, short lock turns beside the writers); ``--service-kills``
times it is killed -9 and started again. (Clustering, which the issue also asks beside NBCC
writers, does not run on the bucket index NBCC needs: Hudi refuses it there too.)

Each writer records what it sent per attempt, before sending it, to its own JSON-lines file
(``attempts-<writer>.jsonl`` beside the table): the rows, each instant the attempt started
(recorded as the instant starts, before any file of it is written), and the result. Afterwards
the driver waits for the heartbeats of instants killed writers left pending to expire, opens
the table once more (its recovery rolls them back) and checks:

* every completed delta commit on the timeline is an attempt's instant (or the seed's);
* the model built from the attempts whose instant completed -- per key the row with the
  largest ordering value (the ordering values are unique) -- is what hudi-rs reads; so under
  OCC each committed write is there whole and each conflicted or killed one is absent;
* an attempt that returned a commit has its instant completed; every rolled-back instant is
  a killed or conflicted attempt's, rolled back no earlier than its writer's death plus the
  heartbeat expiry (less one interval) -- a live write is never rolled back;
* ``hr.validate_metadata`` finds no difference between the metadata table and the table.

Prints a JSON report (``--json`` writes it to a file too); exits 1 when a check failed.

    python scripts/concurrency_soak.py --writers 3 --mode nbcc --rounds 20 --kills 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa

HEARTBEAT_MS = 500
HEARTBEAT_MISSES = 4  # 2 s: a busy machine's writer stalls for less
BUCKETS = 4


def options(mode: str) -> dict[str, str]:
    """The write options every process uses."""
    return {
        "hoodie.table.name": "soak",
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "hoodie.write.table.version": "8",
        "index.type": "BUCKET",
        "hoodie.bucket.index.num.buckets": str(BUCKETS),
        "hoodie.write.concurrency.mode": (
            "non_blocking_concurrency_control"
            if mode == "nbcc"
            else "optimistic_concurrency_control"
        ),
        "hoodie.write.num.retries.on.conflict.failures": "2",
        "hoodie.client.heartbeat.interval_in_ms": str(HEARTBEAT_MS),
        "hoodie.client.heartbeat.tolerable.misses": str(HEARTBEAT_MISSES),
        "hoodie.write.lock.heartbeat_interval_ms": "200",
        "hoodie.write.lock.expire_ms": "2000",
        "compaction.delta_commits": "6",
    }


#: Each writer's topology small enough for several on a two-core machine.
RAY_ACTORS = {
    **{f"ray.{r}.num_cpus": "0.1" for r in ("coordinator", "assigner", "writer", "compactor")},
    "write.tasks": "1",
    "compaction.tasks": "1",
}

SCHEMA = pa.schema(
    [("key", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("s", pa.string())]
)


def _partition(k: int) -> str:
    return f"p{k % 2}"


def _batch(writer: int, rnd: int, keys: int, writers: int, rng: random.Random) -> list[list]:
    """``[key, partition, ts, s]`` rows: a few keys of the shared first half, and of this
    writer's own slice of the second half. Ordering values are unique across writers."""
    shared = rng.sample(range(keys // 2), max(1, keys // 8))
    own_size = (keys - keys // 2) // writers
    own_start = keys // 2 + writer * own_size
    own = rng.sample(range(own_start, own_start + own_size), max(1, own_size // 3))
    ts = (time.time_ns() // 16) * 16 + writer
    return [[f"k{k:05d}", _partition(k), ts, f"w{writer}r{rnd}"] for k in sorted(shared + own)]


def _table(rows: list[list]) -> pa.Table:
    cols = list(zip(*rows, strict=True)) if rows else [[], [], [], []]
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for c, f in zip(cols, SCHEMA, strict=True)], schema=SCHEMA
    )


# -- a writer process ----------------------------------------------------------------------
def run_writer(
    path: str,
    mode: str,
    writer: int,
    rounds: int,
    keys: int,
    writers: int,
    engine: str = "local",
    ray_address: str | None = None,
) -> int:
    """Write this writer's remaining rounds, recording each attempt; 0 when done."""
    import hoodie_ray.job.client as client_mod
    from hoodie_ray.exceptions import HoodieError, HoodieWriteConflictError
    from hoodie_ray.job.client import HoodieWriteClient
    from hoodie_ray.job.coordinator import Coordinator

    log_path = Path(path).parent / f"attempts-{writer}.jsonl"
    done = 0
    if log_path.exists():
        done = 1 + max(
            (json.loads(line)["round"] for line in log_path.read_text().splitlines() if line),
            default=-1,
        )
    log = open(log_path, "a")  # noqa: SIM115 (kept open for the process's life)
    current = {"round": -1}

    def record(entry: dict[str, Any]) -> None:
        log.write(json.dumps({"writer": writer, "round": current["round"], **entry}) + "\n")
        log.flush()  # in the OS once written: a kill -9 after this loses nothing

    if engine == "ray":
        _run_stream_writer(path, mode, writer, rounds, keys, writers, ray_address, done, record)
        log.close()
        return 0

    class RecordingCoordinator(Coordinator):
        """Records each instant this writer starts, before any file of it is written."""

        def start_instant(self) -> str:
            instant = super().start_instant()
            record({"instant": instant})
            return instant

    client_mod.Coordinator = RecordingCoordinator  # type: ignore[misc]
    client = HoodieWriteClient(path, options(mode))
    rng = random.Random(writer * 1_000_003 + done)
    for rnd in range(done, rounds):
        current["round"] = rnd
        rows = _batch(writer, rnd, keys, writers, rng)
        record({"rows": rows})
        try:
            res = client.write(_table(rows))
        except HoodieWriteConflictError as e:
            record({"result": "conflict", "error": str(e)[:300]})
            continue
        except HoodieError as e:
            # its heartbeat stalled past the expiry: another writer took it for dead and
            # rolled its instant back, so its commit is refused
            record({"result": "failed", "error": f"{type(e).__name__}: {str(e)[:300]}"})
            client = HoodieWriteClient(path, options(mode))
            continue
        record({"result": "committed", "committed": res.instant})
    log.close()
    return 0


def _run_stream_writer(
    path: str,
    mode: str,
    writer: int,
    rounds: int,
    keys: int,
    writers: int,
    ray_address: str | None,
    done: int,
    record: Any,
) -> None:
    """The rounds as checkpoints of a Ray stream writer. An instant is recorded once the
    driver knows it (after ``write``, before ``checkpoint``): it cannot complete before, and
    an instant started but never recorded (killed in between) holds no rows of an attempt."""
    from hoodie_ray.exceptions import HoodieError, HoodieWriteConflictError
    from hoodie_ray.ray.stream import HoodieStreamWriter

    opts = {**options(mode), **RAY_ACTORS}

    def new_writer() -> HoodieStreamWriter:
        return HoodieStreamWriter(path, opts, ray_address=ray_address)

    w = new_writer()
    rng = random.Random(writer * 1_000_003 + done)
    for rnd in range(done, rounds):
        rows = _batch(writer, rnd, keys, writers, rng)
        record({"round": rnd, "rows": rows})
        try:
            w.write(_table(rows))
            started = w._instant
            record({"round": rnd, "instant": started})
            instant = w.checkpoint()
        except HoodieWriteConflictError as e:
            record({"round": rnd, "result": "conflict", "error": str(e)[:300]})
            continue
        except HoodieError as e:
            record({"round": rnd, "result": "failed", "error": f"{type(e).__name__}: {e}"[:300]})
            w.abort()
            w = new_writer()
            continue
        if instant != started:  # a lost conflict replayed into a new instant (OCC)
            record({"round": rnd, "instant": instant})
        record({"round": rnd, "result": "committed", "committed": instant})
    w.close()


def run_services(path: str, mode: str, stop: Path) -> int:
    """Compact and clean the table in a loop until ``stop`` exists (each call takes short
    lock turns beside the writers)."""
    import hoodie_ray as hr
    from hoodie_ray.exceptions import HoodieError

    opts = options(mode)
    while not stop.exists():
        try:
            hr.compact(path, opts)
            hr.clean(path, opts)
        except HoodieError as e:  # e.g. a lock turn it waited too long for: tried again
            print(f"services: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        time.sleep(0.2)
    return 0


# -- the driver ----------------------------------------------------------------------------
def _spawn(
    path: str, args: argparse.Namespace, writer: int, ray_address: str | None = None
) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        str(writer),
        "--path",
        path,
        "--mode",
        args.mode,
        "--rounds",
        str(args.rounds),
        "--keys",
        str(args.keys),
        "--writers",
        str(args.writers),
        "--engine",
        args.engine,
    ]
    if ray_address:
        cmd += ["--ray-address", ray_address]
    return _popen(cmd, Path(path).parent / f"stderr-{writer}.log")


def _popen(cmd: list[str], err: Path) -> subprocess.Popen[bytes]:
    """The process, its stderr appended to ``err`` (a file: a pipe nobody reads while it runs
    could fill up with Ray's forwarded logs and block it)."""
    with open(err, "ab") as f:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=f)
    p.soak_err = err  # type: ignore[attr-defined]
    return p


def _tail(p: subprocess.Popen[bytes]) -> str:
    """The last of what process ``p`` wrote to its stderr file."""
    err = getattr(p, "soak_err", None)
    return Path(err).read_text(errors="replace")[-2000:] if err and Path(err).exists() else ""


def _spawn_services(path: str, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, os.path.abspath(__file__), "--services-worker"]
    cmd += ["--path", path, "--mode", args.mode]
    return _popen(cmd, Path(path).parent / "stderr-services.log")


def _log_size(root: Path, writer: int) -> int:
    f = root / f"attempts-{writer}.jsonl"
    return f.stat().st_size if f.exists() else 0


def _mid_write(root: Path, writer: int, since: int) -> bool:
    """Is the writer process inside an attempt's instant: has it recorded something since it
    started (``since``: the size of its file then), last an instant it started?"""
    f = root / f"attempts-{writer}.jsonl"
    try:
        size = f.stat().st_size
        if size <= since:
            return False
        with open(f, "rb") as fh:
            fh.seek(max(0, size - 200))
            last = fh.read().splitlines()[-1:]
    except FileNotFoundError:
        return False
    return bool(last) and b'"instant"' in last[0]


def _epoch(instant: str) -> float:
    return (
        datetime.strptime(instant[:17], "%Y%m%d%H%M%S%f").replace(tzinfo=timezone.utc).timestamp()
    )


def drive(args: argparse.Namespace) -> dict[str, Any]:
    import hoodie_ray as hr
    from hoodie_ray.job.client import HoodieWriteClient

    root = Path(args.path or tempfile.mkdtemp(prefix="hoodie-soak-"))
    root.mkdir(parents=True, exist_ok=True)
    path = str(root / "table")
    opts = options(args.mode)
    rng = random.Random(args.seed)
    # the seed: every key once, then compacted (each bucket's group gets a base file; under
    # NBCC a group starts with log files only, which hudi-rs 0.5 does not list)
    seed_rows = [[f"k{k:05d}", _partition(k), 0, "seed"] for k in range(args.keys)]
    seed = HoodieWriteClient(path, opts).write(_table(seed_rows)).instant
    hr.compact(path, opts)

    address = None
    if args.engine == "ray":
        import ray

        ray.init(include_dashboard=False, log_to_driver=False)
        address = ray.get_runtime_context().gcs_address
    procs = {w: _spawn(path, args, w, address) for w in range(args.writers)}
    started = {w: 0 for w in procs}  # each writer's record file size when it was spawned
    kills: list[dict[str, Any]] = []
    errors: list[str] = []
    kills_left = args.kills
    next_kill = time.monotonic() + rng.uniform(0.2, 1.0)
    stop = root / "stop-services"
    services = _spawn_services(path, args) if args.services else None
    service_kills = 0
    next_service_kill = time.monotonic() + rng.uniform(1.0, 3.0)
    while procs:
        if services is not None and services.poll() is not None:
            errors.append(f"the services process exited {services.returncode}: {_tail(services)}")
            services = _spawn_services(path, args)
        if (
            services is not None
            and service_kills < args.service_kills
            and time.monotonic() >= next_service_kill
        ):
            os.kill(services.pid, signal.SIGKILL)
            services.wait()
            service_kills += 1
            services = _spawn_services(path, args)
            next_service_kill = time.monotonic() + rng.uniform(1.0, 3.0)
        for w, p in list(procs.items()):
            rc = p.poll()
            if rc is None:
                continue
            del procs[w]
            if rc != 0:
                errors.append(f"writer {w} exited {rc}: {_tail(p)}")
        busy = [w for w in sorted(procs) if _mid_write(root, w, started[w])]
        if kills_left and busy and time.monotonic() >= next_kill:
            w = rng.choice(busy)
            kills.append({"writer": w, "at": time.time()})  # dead from here on
            os.kill(procs[w].pid, signal.SIGKILL)
            procs[w].wait()
            kills_left -= 1
            started[w] = _log_size(root, w)
            procs[w] = _spawn(path, args, w, address)
            next_kill = time.monotonic() + rng.uniform(0.2, 1.0)
        time.sleep(0.05)
    if services is not None:
        stop.touch()
        try:
            rc = services.wait(timeout=120)
        except subprocess.TimeoutExpired:
            services.kill()
            rc = services.wait()
            errors.append("the services process did not stop within 120 s")
        if rc not in (0, -9):
            errors.append(f"the services process exited {rc}: {_tail(services)}")

    # the killed writers' pending instants: expired after interval x misses, then the next
    # writer's recovery (here, one more open of the table) rolls them back
    time.sleep(HEARTBEAT_MS * (HEARTBEAT_MISSES + 1) / 1000)
    from hoodie_ray.job.coordinator import Coordinator

    coord = Coordinator(path, opts)
    coord.open(None)
    coord.close()
    # a compaction a killed process left pending (its heartbeat expired) is run now
    while hr.compact(path, opts).instant is not None:
        pass
    report = check(root, path, seed, kills, args)
    report["service_kills"] = service_kills
    report["engine"] = args.engine
    report["errors"] = errors + report["errors"]
    report["ok"] = not report["errors"]
    return report


def _attempts(root: Path) -> dict[tuple[int, int], dict[str, Any]]:
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for f in sorted(root.glob("attempts-*.jsonl")):
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            e = json.loads(line)
            a = out.setdefault((e["writer"], e["round"]), {"instants": [], "result": None})
            if "rows" in e:
                a["rows"] = e["rows"]
            if "instant" in e:
                a["instants"].append(e["instant"])
            if "result" in e:
                a["result"] = e["result"]
                a["committed"] = e.get("committed")
    return out


def check(
    root: Path, path: str, seed: str | None, kills: list[dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    import hoodie_ray as hr
    from hoodie_ray.table import HoodieTable
    from hoodie_ray.timeline.instant import Action
    from hoodie_ray.timeline.plans import HoodieRollbackMetadata

    errors: list[str] = []
    table = HoodieTable.load(path)
    tl = table.active_timeline.reload()
    # completed instants, archived ones included (archival runs after commits)
    history: list[tuple[Any, bytes | None]] = [
        (a.instant, a.metadata) for a in table.archived_timeline.instants()
    ]
    history += [(i, None) for i in tl.instants if i.is_completed]
    completed = {i.timestamp for i, _ in history if i.action == Action.DELTA_COMMIT}
    pending = [i.timestamp for i in tl.instants if not i.is_completed]
    if pending:
        errors.append(f"instants still pending after recovery: {pending}")
    attempts = _attempts(root)
    owner = {i: k for k, a in attempts.items() for i in a["instants"]}
    for inst in sorted(completed - set(owner) - {seed}):
        errors.append(f"completed delta commit {inst} is no attempt's")
    committed, conflicted, failed, killed, killed_committed = [], [], [], [], []
    for k, a in sorted(attempts.items()):
        done = [i for i in a["instants"] if i in completed]
        if len(done) > 1:
            errors.append(f"attempt {k} completed twice: {done}")
        if a["result"] == "committed" and a.get("committed") not in completed:
            errors.append(f"attempt {k} returned commit {a.get('committed')}, not on the timeline")
        if a["result"] in ("conflict", "failed") and done:
            errors.append(f"attempt {k} failed ({a['result']}) but {done} completed")
        if done:
            committed.append(k)
            if a["result"] is None:
                killed_committed.append(k)
        elif a["result"] == "conflict":
            conflicted.append(k)
        elif a["result"] == "failed":
            failed.append(k)
        else:
            killed.append(k)
    if args.mode == "nbcc" and conflicted:
        errors.append(f"NBCC writes failed with conflicts: {conflicted}")
    # rollbacks: only killed or conflicted attempts' instants, a killed one only once its
    # heartbeat could have expired
    expiry = HEARTBEAT_MS * HEARTBEAT_MISSES / 1000
    rolled: list[str] = []
    for inst, details in history:
        if inst.action != Action.ROLLBACK:
            continue
        meta = HoodieRollbackMetadata.from_bytes(details or tl.read_details(inst))
        for target in meta.commits_rollback:
            rolled.append(target)
            k = owner.get(target)
            if k is None:
                continue  # a table service's instant
            if k in committed and target in completed:
                errors.append(f"instant {target} of attempt {k} completed and was rolled back")
            deaths = [x["at"] for x in kills if x["writer"] == k[0]]
            # a killed attempt's instant rolled back after its writer died (before: the writer
            # itself, after a lost conflict) must have waited for the heartbeat to expire
            if attempts[k]["result"] is None and deaths:
                died = min((d for d in deaths if d >= _epoch(target)), default=None)
                at = _epoch(inst.timestamp)
                # its last beat came at most an interval before the kill (a starved heartbeat
                # thread may beat later still: one interval more of slack)
                if died is not None and died <= at < died + expiry - 2 * HEARTBEAT_MS / 1000:
                    errors.append(
                        f"instant {target} rolled back at {inst.timestamp}, before its writer's "
                        "heartbeat expired"
                    )
    # the model: per key the committed row with the largest ordering value
    model: dict[str, tuple[int, str]] = {}
    for k in committed:
        for key, _p, ts, s in attempts[k]["rows"]:
            if key not in model or ts > model[key][0]:
                model[key] = (ts, s)
    for key in (f"k{k:05d}" for k in range(args.keys)):
        model.setdefault(key, (0, "seed"))
    from hudi import HudiTable

    batches = HudiTable(path).read()
    got_t = pa.Table.from_batches(batches) if batches else None
    got = (
        {r["key"]: (r["ts"], r["s"]) for r in got_t.select(["key", "ts", "s"]).to_pylist()}
        if got_t is not None
        else {}
    )
    wrong = sorted(k for k in set(model) | set(got) if model.get(k) != got.get(k))
    if wrong:
        errors.append(
            f"hudi-rs differs from the model on {len(wrong)} keys, e.g. "
            + ", ".join(f"{k}: read {got.get(k)}, model {model.get(k)}" for k in wrong[:3])
        )
    if got_t is not None and got_t.num_rows != len(got):
        errors.append(f"hudi-rs read {got_t.num_rows} rows for {len(got)} keys")
    diffs = hr.validate_metadata(path)
    if diffs:
        errors.append(f"metadata table differs: {[str(d) for d in diffs[:3]]}")
    return {
        "mode": args.mode,
        "writers": args.writers,
        "rounds": args.rounds,
        "path": path,
        "kills": len(kills),
        "attempts": len(attempts),
        "committed": len(committed),
        "conflicted": len(conflicted),
        "rolled_back_while_stalled": len(failed),
        "killed_before_commit": len(killed),
        "killed_after_commit": len(killed_committed),
        "rolled_back": len(rolled),
        "compactions": sum(1 for i, _ in history if i.action == Action.COMMIT),
        "archived": len(history) - sum(1 for i in tl.instants if i.is_completed),
        "keys": len(model),
        "errors": errors,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", help="a directory for the table (default: a new temporary one)")
    ap.add_argument("--writers", type=int, default=3, choices=[2, 3, 4])
    ap.add_argument("--mode", choices=["occ", "nbcc"], default="nbcc")
    ap.add_argument("--rounds", type=int, default=20, help="batches per writer")
    ap.add_argument("--kills", type=int, default=2, help="kill -9s of a random writer")
    ap.add_argument("--keys", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write the report here")
    ap.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="writers as single-process clients, or as Ray stream writers on one local cluster",
    )
    ap.add_argument(
        "--services", action="store_true", help="a process compacting and cleaning beside them"
    )
    ap.add_argument("--service-kills", type=int, default=1, help="kill -9s of that process")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--ray-address", help=argparse.SUPPRESS)
    ap.add_argument("--services-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.services_worker:
        return run_services(args.path, args.mode, Path(args.path).parent / "stop-services")
    if args.worker is not None:
        return run_writer(
            args.path,
            args.mode,
            args.worker,
            args.rounds,
            args.keys,
            args.writers,
            args.engine,
            args.ray_address,
        )
    report = drive(args)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
