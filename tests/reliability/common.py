"""Shared pieces of the reliability suite: deterministic batches, the model, table checks.

Every batch is a pure function of ``(seed, index)``, so a test can rebuild the model of a table
from nothing but the number of completed delta commits on its timeline -- which is what a
crash test needs: the driver process that wrote the batches is dead.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from tests.write.model import OPTIONS, SCHEMA, TableModel, Workload, hudi_rs_snapshot, to_arrow

FULL = os.environ.get("HOODIE_RAY_FULL", "") not in ("", "0")
"""``HOODIE_RAY_FULL=1`` runs the full counts (crash points, faults, fuzz examples)."""

REPO = Path(__file__).resolve().parents[2]

#: Options of the crash-test tables: small files (many file groups), frequent compaction and
#: cleaning, and a short lock expiry so the writer after a ``kill -9`` waits ~1-2 s, not 60.
CRASH_OPTIONS: dict[str, str] = {
    **OPTIONS,
    "hoodie.parquet.max.file.size": "8192",
    "hoodie.parquet.small.file.limit": "4096",
    "hoodie.copyonwrite.record.size.estimate": "200",
    "compaction.delta_commits": "3",
    "clean.retain_commits": "4",
    "hoodie.write.lock.expire_ms": "1500",
    "hoodie.write.lock.heartbeat_interval_ms": "250",
}

KEYS = [f"k{i:03d}" for i in range(80)]


def batch_writes(seed: int, idx: int, parts: int = 1) -> list[list[dict]]:
    """The rows of commit ``idx`` of run ``seed``, split into ``parts`` writes.

    Upserts with in-batch duplicates, late records, nulls, partition moves and
    ``_hoodie_is_deleted`` deletes (from :class:`~tests.write.model.Workload`), plus a few new
    keys. Event times grow with ``idx`` (late records excepted), as a stream's do.
    """
    wl = Workload(seed * 1_000_003 + idx, keys=len(KEYS))
    wl.keys = KEYS
    wl.ts = 1_000 + idx * 10_000
    if idx == 0:
        rows = wl.rows_for(KEYS[:50])
    else:
        rows = []
        while len(rows) < 25:
            kind, more = wl.next_commit()
            if kind == "upsert":
                rows += more
            elif kind == "insert":
                rows += [dict(r, key=f"n{idx:04d}{r['key']}") for r in more]
    if parts <= 1:
        return [rows]
    # Split by key: a key never spans two writes of one checkpoint. (Within one instant Hudi
    # folds a delete and a later-arriving but older upsert of a key by ordering value -- the
    # delete wins -- where the dict model, applying the writes one by one, would re-insert.)
    keys = sorted({r["key"] for r in rows})
    first = set(keys[: len(keys) // 2])
    return [[r for r in rows if r["key"] in first], [r for r in rows if r["key"] not in first]]


def batch_table(rows: list[dict]) -> pa.Table:
    return to_arrow(rows, True)


class ModelCache:
    """``model(n)``: the table after the first ``n`` commits of run ``seed`` (incremental)."""

    def __init__(self, seed: int, parts: int = 1) -> None:
        self.seed = seed
        self.parts = parts
        self._model = TableModel()
        self._n = 0
        self._states: dict[int, list[dict]] = {0: []}

    def rows(self, n: int) -> list[dict]:
        while self._n < n:
            for part in batch_writes(self.seed, self._n, self.parts):
                self._model.upsert(part)
            self._n += 1
            self._states[self._n] = self._model.as_table().to_pylist()
        return self._states[n]


# -- reading a table ----------------------------------------------------------------------------


def timeline(path: Path | str):
    from hoodie_ray.config.table_config import HoodieTableConfig
    from hoodie_ray.storage import LocalStorage
    from hoodie_ray.timeline.timeline import ActiveTimeline

    storage = LocalStorage(str(path))
    cfg = HoodieTableConfig.load(storage)
    return ActiveTimeline(storage, cfg.timeline_layout_version)


def completed_deltacommits(path: Path | str) -> list[str]:
    """Completed delta commits, archived ones included (oldest first, each once)."""
    if not (Path(path) / ".hoodie" / "hoodie.properties").exists():
        return []
    from hoodie_ray.table import HoodieTable

    archived = HoodieTable.load(str(path)).archived_timeline.instants()
    done = {a.instant_time for a in archived if a.action == "deltacommit"}
    done.update(i.timestamp for i in timeline(path).completed() if i.action == "deltacommit")
    return sorted(done)


def pending_instants(path: Path | str, actions: Iterable[str] | None = None) -> list[str]:
    if not (Path(path) / ".hoodie" / "hoodie.properties").exists():
        return []
    acts = set(actions) if actions is not None else None
    return [
        f"{i.timestamp}.{i.action}.{i.state.value}"
        for i in timeline(path).pending()
        if acts is None or i.action in acts
    ]


def hr_snapshot(path: Path | str) -> list[dict]:
    """The snapshot through hoodie_ray's own reader, in the model's shape."""
    import hoodie_ray as hr

    t = hr.read(str(path))
    if t.num_rows == 0:
        return []
    return t.select(SCHEMA.names).cast(SCHEMA).sort_by("key").to_pylist()


def rs_snapshot(path: Path | str) -> list[dict]:
    """The snapshot through hudi-rs (the oracle), in the model's shape."""
    return hudi_rs_snapshot(path).to_pylist()


def assert_snapshots(path: Path | str, want: list[dict], what: str) -> None:
    """Both readers see exactly ``want`` (a path with no table yet: hr.read says so)."""
    if not (Path(path) / ".hoodie" / "hoodie.properties").exists():
        import hoodie_ray as hr

        assert want == [], f"{what}: the table is gone"
        try:
            hr.read(str(path))
        except hr.HoodieTableNotFoundError:
            return
        raise AssertionError(f"{what}: hr.read of a path without a table did not fail clearly")
    got_rs = rs_snapshot(path)
    assert got_rs == want, f"{what}: hudi-rs {_diff(got_rs, want)}"
    got_hr = hr_snapshot(path)
    assert got_hr == want, f"{what}: hr.read {_diff(got_hr, want)}"


def _diff(got: list[dict], want: list[dict]) -> str:
    g = {r["key"]: r for r in got}
    w = {r["key"]: r for r in want}
    bad = sorted(k for k in set(g) | set(w) if g.get(k) != w.get(k))
    lines = [f"sees {len(got)} rows, the model {len(want)}; {len(bad)} keys differ"]
    lines += [f"  {k}: read {g.get(k)} model {w.get(k)}" for k in bad[:3]]
    return "\n".join(lines)


def data_files(path: Path | str) -> list[Path]:
    root = Path(path)
    return [
        p for p in root.rglob("*") if p.is_file() and ".hoodie" not in p.relative_to(root).parts[:1]
    ]


def assert_no_debris(path: Path | str) -> None:
    """After a clean close: nothing pending (writes, compactions, cleans, rollbacks), no
    markers, every base file belongs to a completed instant."""
    from hoodie_ray.file_group.naming import parse_base_file_name

    root = Path(path)
    pend = pending_instants(root)
    assert pend == [], f"pending instants left: {pend}"
    temp = root / ".hoodie" / ".temp"
    left = [p for p in temp.rglob("*") if p.is_file()] if temp.exists() else []
    assert left == [], f"markers left: {left[:5]}"
    tl = timeline(root)
    for f in data_files(root):
        b = parse_base_file_name(f.name)
        if b is not None:
            # committed: completed, or archived (older than the first active commit)
            assert tl.is_committed(b.instant), f"base file of an uncommitted instant: {f}"


# -- subprocess drivers -------------------------------------------------------------------------


def driver_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("RAY_ADDRESS", None)  # a crash-test driver owns its Ray (or uses none)
    return env


class Driver:
    """A ``tests/reliability/driver.py`` subprocess and the lines it printed."""

    def __init__(self, args: list[str], log_dir: Path) -> None:
        self.log_path = log_dir / f"driver-{time.monotonic_ns()}.log"
        self._err = open(self.log_path, "wb")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.driver", *args],
            stdout=subprocess.PIPE,
            stderr=self._err,
            cwd=str(REPO),
            env=driver_env(),
            start_new_session=True,
            text=True,
            bufsize=1,
        )
        self.lines: list[str] = []

    def read_until(self, prefix: str, timeout: float) -> str | None:
        """Read stdout lines until one starts with ``prefix`` (None at EOF)."""
        import selectors

        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {prefix!r} line in {timeout}s; log {self.log_path}")
                if not sel.select(left):
                    continue
                line = self.proc.stdout.readline()
                if not line:
                    return None
                line = line.rstrip("\n")
                self.lines.append(line)
                if line.startswith(prefix):
                    return line
        finally:
            sel.close()

    def kill(self) -> None:
        """``kill -9`` of the driver process alone (its Ray, if any, sees its owner die)."""
        import signal

        try:
            os.kill(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def drain(self) -> None:
        """Collect the remaining stdout after the process ended."""
        assert self.proc.stdout is not None
        rest = self.proc.stdout.read()
        self.lines += [line for line in rest.splitlines() if line]

    def wait(self, timeout: float = 120) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        finally:
            self._err.close()
        self.drain()
        return rc

    def kill_group(self) -> None:
        """Clean-up: whatever the driver started (its embedded Ray) goes too."""
        import signal

        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def actor_processes(self) -> list[int]:
        """Ray worker processes of the driver's own embedded Ray that still run (its agents
        excepted): the actors of a killed driver live on for a few seconds."""
        import psutil

        out = []
        for p in psutil.process_iter(["pid", "cmdline"]):
            try:
                if os.getsid(p.info["pid"]) != self.proc.pid:
                    continue
            except (ProcessLookupError, PermissionError):
                continue
            cmd = " ".join(p.info["cmdline"] or [])
            if cmd.startswith("ray::") and "Agent" not in cmd:
                out.append(p.info["pid"])
        return out

    def done(self) -> list[tuple[int, str]]:
        """``(index, instant)`` of every commit the driver reported completed."""
        out = []
        for line in self.lines:
            if line.startswith("DONE "):
                _, idx, instant = line.split()
                out.append((int(idx), instant))
        return out

    def figures(self, key: str) -> list[float]:
        return [float(line.split()[1]) for line in self.lines if line.startswith(key + " ")]

    def stderr_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def lock_holder_alive(path: Path | str, expire_s: float) -> bool:
    """Does the table's writer lock still have a fresh heartbeat?"""
    import json

    f = Path(path) / ".hoodie" / ".aux" / "hoodie_ray.writer.lock"
    try:
        beat = float(json.loads(f.read_text())["heartbeat"])
    except (OSError, ValueError, KeyError):
        return False
    return time.time() - beat <= expire_s


def wait_quiescent(
    d: Driver, path: Path, expire_s: float, table: str = "model", cluster: bool = False
) -> float:
    """After ``kill -9`` of a driver, wait until nothing of it can still change the table.

    A killed Ray driver's actors live on for seconds (until Ray reaps them) and finish what
    they were executing -- a commit the driver had asked for can complete after the driver
    died. The state to check is the one they leave. Waits until the lock's heartbeat is
    stale (the coordinator is gone) and, on a cluster, no actor of the table is alive; with
    an embedded Ray, no actor process of the driver's session runs. Returns the seconds
    waited.
    """
    t0 = time.monotonic()
    deadline = t0 + 60
    while time.monotonic() < deadline:
        busy = lock_holder_alive(path, expire_s)
        if cluster:
            import ray

            names = ray.util.list_named_actors(all_namespaces=True)
            busy = busy or any(a["name"].startswith(table + "/") for a in names)
        else:
            busy = busy or bool(d.actor_processes())
        if not busy:
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError("the killed driver's actors did not stop within 60 s")


# -- after a kill -------------------------------------------------------------------------------


class CrashLedger:
    """The commits of a run of killed writers, and the checks after each kill.

    ``reported``: instants of the commits the drivers printed (``DONE``), plus commits found
    completed whose ``DONE`` line died with the process.
    """

    def __init__(self, path: Path, seed: int, parts: int) -> None:
        self.path = path
        self.seed = seed
        self.model = ModelCache(seed, parts)
        self.reported: list[str] = []
        self.unreported = 0
        self.phases: dict[str, int] = {}
        self.lock_waits: list[float] = []
        self.zombie_windows: list[float] = []
        self.points = 0

    @property
    def next_index(self) -> int:
        return len(self.reported)

    def phase(self) -> str:
        """What the killed writer was doing, from what it left pending."""
        pend = pending_instants(self.path)
        if not pend:
            return "between commits"
        return " + ".join(sorted({p.split(".", 1)[1] for p in pend}))

    def after_kill(self, d: Driver, what: str) -> None:
        """Nothing lost, nothing half-written: checked before any writer touches the table
        (after the killed driver's actors, if any, are gone: :func:`wait_quiescent`)."""
        start = self.next_index
        self.lock_waits += d.figures("OPENED")
        done = d.done()
        assert [i for i, _ in done] == list(range(start, start + len(done))), (what, done)
        self.reported += [inst for _, inst in done]
        ph = self.phase()
        self.phases[ph] = self.phases.get(ph, 0) + 1
        commits = completed_deltacommits(self.path)
        assert commits[: len(self.reported)] == self.reported, (
            f"{what}: a reported commit is missing from the timeline"
        )
        extra = len(commits) - len(self.reported)
        assert extra in (0, 1), f"{what}: {extra} completed commits nobody reported beginning"
        if extra:
            assert f"BEGIN {len(self.reported)}" in d.lines, f"{what}: a commit never begun"
            self.reported.append(commits[-1])
            self.unreported += 1
        assert_snapshots(self.path, self.model.rows(len(commits)), what)
        self.points += 1

    def after_clean_run(self, d: Driver, count: int, what: str) -> None:
        start = self.next_index
        self.lock_waits += d.figures("OPENED")
        done = d.done()
        assert [i for i, _ in done] == list(range(start, start + count)), (what, done)
        self.reported += [inst for _, inst in done]
        commits = completed_deltacommits(self.path)
        assert commits == self.reported, f"{what}: timeline differs from the reported commits"
        assert_snapshots(self.path, self.model.rows(len(commits)), what)

    def figures(self) -> dict:
        n = len(self.reported)
        return {
            "crash_points": self.points,
            "phases": dict(sorted(self.phases.items())),
            "commits": n,
            "committed_but_unreported": self.unreported,
            "lock_wait_max_s": round(max(self.lock_waits, default=0.0), 3),
            "actors_outlived_driver_max_s": round(max(self.zombie_windows, default=0.0), 3),
            "rows": len(self.model.rows(n)),
            "lost": 0,
        }


def driver_args(
    path: Path,
    engine: str,
    seed: int,
    start: int,
    options: dict[str, str],
    *,
    count: int | None = None,
    crash_at: dict | None = None,
    ray_address: str | None = None,
) -> list[str]:
    import json

    args = [str(path), "--engine", engine, "--seed", str(seed), "--start", str(start)]
    args += ["--options", json.dumps(options)]
    if count is not None:
        args += ["--count", str(count)]
    if crash_at is not None:
        args += ["--crash-at", json.dumps(crash_at)]
    if ray_address is not None:
        args += ["--ray-address", ray_address]
    return args


def vanished_file_error(e: BaseException) -> bool:
    """A read that failed because a file it planned to read was deleted meanwhile: a clean
    removed a slice older than ``clean.retain_commits`` commits (a query must finish within
    the retention, as in Hudi), or a rollback removed an uncommitted file."""
    text = str(e).lower()
    return "not found" in text or "no such file" in text


def vanished_kind(e: BaseException) -> str:
    """Which kind of file vanished under a reader: ``log file`` (an uncommitted instant's
    file deleted by its rollback) or ``base file`` (a slice deleted by a clean)."""
    text = str(e)
    return "log file" if ".log." in text else "base file" if ".parquet" in text else "other"
