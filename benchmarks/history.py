"""history: does a long-running writer's per-commit cost grow with the table's history?

A writer that runs for days makes tens of thousands of commits. The table it writes stays the
same size (upserts over a bounded key space, compaction and cleaning inline), so the cost of a
commit should stay the same too; only the history grows. This benchmark measures that:

* ``client``: N commits (default 10,000) of ``--rows`` rows (default 200) through ONE
  ``hr.HoodieWriteClient`` in this process (no Ray), default options: a non-partitioned MOR
  table, record key ``uuid``, precombine ``ts``, inline compaction and cleaning.
* ``stream``: M checkpoints (default 2,000) through ``hr.HoodieStreamWriter`` on a private local
  Ray with one writer and one bucket assigner; each ``w.write(batch); w.checkpoint()`` is timed.

Every commit upserts ``--rows`` distinct keys drawn at random from a key space of ``--keys``
(default 20,000): inserts at first, updates once the key space has filled, so the table's size
is bounded and only its history grows. Per window of ``--window`` commits (default 100) the run
records the mean, p50, p95 and max latency, the process CPU per commit, and samples the files
under ``.hoodie/`` except the archive (``.hoodie/archived/`` on table version 6,
``.hoodie/timeline/history/`` on version 8) and the archive's files.

Targets:

* ``growth_ratio`` = mean of the last full window / mean of the second window (commits 101-200
  by default; the first window pays one-time costs: numba compilation, actor warm-up) <= 1.2;
* the ``.hoodie/`` file count stays bounded: the last sample is at most 1.1x the largest sample
  of the first half of the run (archival keeps the active timeline between two bounds).

``--secondary-index COLUMN`` (client mode; the table needs a metadata table with the record
index: ``--option hoodie.write.table.version=8 --option
hoodie.metadata.record.index.enable=true``) builds a secondary index over ``COLUMN`` with
``hr.create_index`` after the first commit, outside the measurement; the client then keeps it
up to date in every later commit. ``driver`` changes on (almost) every update of a key
(``rider`` and ``seq`` never do, ``fare`` is a random float), so an index on it removes the old
entry and adds the new one for each updated row.

After the run the table is read back with ``hr.read`` and must hold exactly the keys written,
each at its latest ``ts``; with a secondary index, ``hr.validate_metadata`` must also find the
metadata table (the index included) equal to one rebuilt from the snapshot. Results are
printed as a table and written as JSON to
``benchmarks/results/history-<mode>-<UTC timestamp>.json``.

Usage::

    python -m benchmarks.history --mode client|stream|both [--commits N] [--checkpoints M]
        [--rows 200] [--keys 20000] [--window 100] [--path DIR] [--option k=v ...]
        [--secondary-index COLUMN] [--quick] [--json] [--check]

``--quick`` runs 600 commits / 300 checkpoints. ``--option`` adds or overrides Hudi options
(``--option hoodie.keep.max.commits=30``). ``--check`` exits 1 when a target is missed. Progress
(one line per window) goes to stderr.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.common import (
    add_option_argument,
    error_text,
    git_commit,
    machine_info,
    percentile,
    progress_log,
    text_table,
)

MODES = ("client", "stream")
DEFAULT_COMMITS = 10_000
DEFAULT_CHECKPOINTS = 2_000
QUICK_COMMITS = 600
QUICK_CHECKPOINTS = 300
DEFAULT_ROWS = 200
DEFAULT_KEYS = 20_000
DEFAULT_WINDOW = 100

#: Target of ``growth_ratio`` (last window's mean / second window's mean).
GROWTH_TARGET = 1.2
#: ``.hoodie/`` is bounded when its last sample is at most this times the first half's largest.
HOODIE_FILES_SLACK = 1.1

#: Folders under ``.hoodie/`` that hold the archived timeline (v6, v8), not counted as active.
ARCHIVE_DIRS = ("archived", "timeline/history")

#: The options every run uses; ``--option`` adds to or overrides them.
BASE_OPTIONS: dict[str, str] = {
    "hoodie.table.name": "history",
    "hoodie.datasource.write.recordkey.field": "uuid",
    "precombine.field": "ts",
}
#: The rows of every commit: the record key, the precombine field and a few payload columns.
SCHEMA = pa.schema(
    [
        ("uuid", pa.string()),
        ("ts", pa.int64()),
        ("rider", pa.string()),
        ("driver", pa.string()),
        ("fare", pa.float64()),
        ("seq", pa.int32()),
    ]
)
#: The small Ray topology of the stream mode.
STREAM_OPTIONS: dict[str, str] = {"write.tasks": "1", "write.bucket_assign.tasks": "1"}

_REPO = Path(__file__).resolve().parents[1]
_RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: Progress to stderr (stdout carries only the report).
log = progress_log("history")


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(float(v), nd)


# ---------------------------------------------------------------------------------------------
# Workload
# ---------------------------------------------------------------------------------------------


class Upserts:
    """Batches of ``rows`` distinct keys drawn from a fixed key space, ``ts`` always rising.

    Keeps the latest ``ts`` of every key, which is what the table must hold at the end.
    """

    def __init__(self, num_keys: int, rows: int, seed: int) -> None:
        if rows > num_keys:
            raise ValueError(f"--rows ({rows}) must not exceed --keys ({num_keys})")
        self.rows = rows
        self.rng = np.random.default_rng(seed)
        key_rng = np.random.default_rng(seed + 1)
        self.keys = pa.array(
            [str(uuid.UUID(bytes=key_rng.bytes(16), version=4)) for _ in range(num_keys)],
            pa.string(),
        )
        self.last_ts = np.full(num_keys, -1, dtype=np.int64)
        self.next_ts = 0

    def batch(self) -> tuple[pa.Table, int]:
        """The next batch, and how many of its keys are new to the table."""
        n = self.rows
        idx = self.rng.choice(len(self.keys), size=n, replace=False)
        ts = np.arange(self.next_ts, self.next_ts + n, dtype=np.int64)
        self.next_ts += n
        inserts = int((self.last_ts[idx] < 0).sum())
        self.last_ts[idx] = ts
        table = pa.table(
            {
                "uuid": self.keys.take(pa.array(idx)),
                "ts": ts,
                "rider": [f"rider-{i % 1000:03d}" for i in idx],
                # changes on (almost) every update of a key: a secondary index on it moves
                "driver": [f"driver-{(i + t) % 500:03d}" for i, t in zip(idx, ts, strict=True)],
                "fare": self.rng.uniform(5.0, 100.0, n),
                "seq": idx.astype(np.int32),
            },
            schema=SCHEMA,
        )
        return table, inserts

    @property
    def distinct_keys(self) -> int:
        return int((self.last_ts >= 0).sum())

    def expected(self) -> pa.Table:
        """(uuid, ts) of every key written, at its latest ts, sorted by uuid."""
        live = np.flatnonzero(self.last_ts >= 0)
        t = pa.table({"uuid": self.keys.take(pa.array(live)), "ts": self.last_ts[live]})
        return t.sort_by("uuid")


# ---------------------------------------------------------------------------------------------
# What is measured
# ---------------------------------------------------------------------------------------------


def hoodie_file_counts(table_path: str | Path) -> tuple[int, dict[str, int], int]:
    """(active files, active files by top-level entry, archive files) under ``.hoodie/``.

    Active: every file under ``.hoodie/`` except those under ``ARCHIVE_DIRS``; the breakdown
    keys are ``"."`` (files directly in ``.hoodie/``) and each subfolder (``timeline``,
    ``.aux``, ``.temp``...). Files that vanish while being listed are skipped.
    """
    root = Path(table_path) / ".hoodie"
    archive_roots = {os.path.normpath(root / d) for d in ARCHIVE_DIRS}
    by_top: dict[str, int] = {}
    archive = 0

    def walk(d: str, top: str, archived: bool) -> None:
        nonlocal archive
        try:
            entries = list(os.scandir(d))
        except (FileNotFoundError, NotADirectoryError):
            return
        for e in entries:
            try:
                is_dir = e.is_dir(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if is_dir:
                sub = os.path.normpath(e.path)
                walk(
                    e.path,
                    e.name if top == "." else top,
                    archived or sub in archive_roots,
                )
            elif archived:
                archive += 1
            else:
                by_top[top] = by_top.get(top, 0) + 1

    walk(str(root), ".", False)
    return sum(by_top.values()), dict(sorted(by_top.items())), archive


def data_file_count(table_path: str | Path) -> int:
    """Base and log files of the table (everything outside ``.hoodie/``)."""
    n = 0
    for dirpath, dirnames, filenames in os.walk(table_path):
        if os.path.normpath(dirpath) == os.path.normpath(table_path):
            dirnames[:] = [d for d in dirnames if d != ".hoodie"]
        n += sum(1 for f in filenames if not f.startswith(".hoodie_partition_metadata"))
    return n


@dataclass
class Window:
    """One window of commits: latencies and a sample of the table's files after it."""

    index: int
    first: int  # 1-based number of the window's first commit
    last: int
    mean_s: float
    p50_s: float
    p95_s: float
    max_s: float
    cpu_mean_s: float  # this process's CPU per commit (the whole cost in client mode)
    inserts: int
    hoodie_files: int
    hoodie_files_by_dir: dict[str, int]
    archive_files: int
    data_files: int
    elapsed_s: float  # since the first commit of the run

    def row(self) -> list[Any]:
        return [
            f"{self.first}-{self.last}",
            f"{self.mean_s * 1e3:.1f}",
            f"{self.p50_s * 1e3:.1f}",
            f"{self.p95_s * 1e3:.1f}",
            f"{self.max_s * 1e3:.1f}",
            f"{self.cpu_mean_s * 1e3:.1f}",
            self.inserts,
            self.hoodie_files,
            self.archive_files,
            self.data_files,
        ]


WINDOW_HEADERS = (
    "commits",
    "mean ms",
    "p50 ms",
    "p95 ms",
    "max ms",
    "cpu ms",
    "inserts",
    ".hoodie files",
    "archive files",
    "data files",
)


@dataclass
class RunResult:
    """Everything one mode measured."""

    mode: str
    path: str
    commits: int
    rows: int
    keys: int
    window: int
    options: dict[str, str]
    startup_s: float | None = None
    close_s: float | None = None
    total_s: float | None = None
    windows: list[Window] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    distinct_keys: int | None = None
    rows_read: int | None = None
    read_check: str | None = None
    read_s: float | None = None
    secondary_index: str | None = None  # the indexed column
    secondary_index_s: float | None = None  # hr.create_index after the first commit
    metadata_check: str | None = None  # hr.validate_metadata after the run (with an index)
    error: str | None = None

    def full_windows(self) -> list[Window]:
        return [w for w in self.windows if w.last - w.first + 1 == self.window]

    def growth_ratio(self) -> float | None:
        """Mean of the last full window / mean of the second (the first pays warm-up)."""
        full = self.full_windows()
        if len(full) < 2 or full[1].mean_s <= 0:
            return None
        return full[-1].mean_s / full[1].mean_s

    def hoodie_files_bound(self) -> tuple[int | None, int | None, bool | None]:
        """(largest sample of the first half, last sample, whether the last is within bound)."""
        samples = [w.hoodie_files for w in self.windows]
        if len(samples) < 2:
            return None, (samples[-1] if samples else None), None
        first_half = max(samples[: max(1, len(samples) // 2)])
        last = samples[-1]
        return first_half, last, last <= first_half * HOODIE_FILES_SLACK

    def targets(self) -> dict[str, bool | None]:
        g = self.growth_ratio()
        _, _, bounded = self.hoodie_files_bound()
        out = {
            "growth_ratio_le_target": None if g is None else g <= GROWTH_TARGET,
            "hoodie_files_bounded": bounded,
            "read_back": None if self.read_check is None else self.read_check == "ok",
        }
        if self.secondary_index:
            out["metadata_valid"] = (
                None if self.metadata_check is None else self.metadata_check == "ok"
            )
        return out

    def target_met(self) -> bool:
        return self.error is None and all(v is True for v in self.targets().values())

    def window_mean_at(self, commit: int) -> float | None:
        """Mean latency of the window that ends at (or contains) commit number ``commit``."""
        for w in self.windows:
            if w.first <= commit <= w.last:
                return w.mean_s
        return None

    def to_json(self) -> dict[str, Any]:
        first_half, last, _bounded = self.hoodie_files_bound()
        lat = self.latencies_s
        return {
            "benchmark": "history",
            "mode": self.mode,
            "path": self.path,
            "commits": self.commits,
            "commits_done": len(lat),
            "rows_per_commit": self.rows,
            "keys": self.keys,
            "window": self.window,
            "options": self.options,
            "error": self.error,
            "growth_ratio": _r(self.growth_ratio()),
            "growth_target": GROWTH_TARGET,
            "targets": self.targets(),
            "target_met": self.target_met(),
            "hoodie_files_first_half_max": first_half,
            "hoodie_files_last": last,
            "archive_files_last": self.windows[-1].archive_files if self.windows else None,
            "latency_s": {
                "mean": _r(statistics.fmean(lat), 4) if lat else None,
                "p50": _r(percentile(lat, 50), 4),
                "p95": _r(percentile(lat, 95), 4),
                "max": _r(max(lat, default=None), 4),
            },
            "startup_s": _r(self.startup_s),
            "close_s": _r(self.close_s),
            "total_s": _r(self.total_s),
            "distinct_keys": self.distinct_keys,
            "rows_read": self.rows_read,
            "read_check": self.read_check,
            "read_s": _r(self.read_s),
            "secondary_index": self.secondary_index,
            "secondary_index_s": _r(self.secondary_index_s),
            "metadata_check": self.metadata_check,
            "windows": [
                {k: (_r(v, 5) if isinstance(v, float) else v) for k, v in asdict(w).items()}
                for w in self.windows
            ],
            "commit_latencies_s": [round(x, 5) for x in lat],
        }


def _window(
    index: int,
    first: int,
    lat: Sequence[float],
    cpu: Sequence[float],
    inserts: int,
    table_path: str,
    elapsed_s: float,
) -> Window:
    active, by_dir, archive = hoodie_file_counts(table_path)
    return Window(
        index=index,
        first=first,
        last=first + len(lat) - 1,
        mean_s=statistics.fmean(lat),
        p50_s=float(np.percentile(lat, 50)),
        p95_s=float(np.percentile(lat, 95)),
        max_s=max(lat),
        cpu_mean_s=statistics.fmean(cpu),
        inserts=inserts,
        hoodie_files=active,
        hoodie_files_by_dir=by_dir,
        archive_files=archive,
        data_files=data_file_count(table_path),
        elapsed_s=elapsed_s,
    )


def _measure_commits(
    run: RunResult,
    upserts: Upserts,
    commit: Callable[[pa.Table], Any],
    after_first: Callable[[], Any] | None = None,
) -> None:
    """Call ``commit(batch)`` ``run.commits`` times, timed one by one, sampling per window;
    ``after_first()`` runs once after the first commit, outside the measurement."""
    lat: list[float] = []
    cpu: list[float] = []
    inserts = 0
    start = time.perf_counter()
    for i in range(1, run.commits + 1):
        batch, new = upserts.batch()
        c0, p0 = time.perf_counter(), time.process_time()
        commit(batch)
        lat.append(time.perf_counter() - c0)
        cpu.append(time.process_time() - p0)
        inserts += new
        if i == 1 and after_first is not None:
            after_first()
        if len(lat) == run.window or i == run.commits:
            w = _window(
                len(run.windows) + 1,
                i - len(lat) + 1,
                lat,
                cpu,
                inserts,
                run.path,
                time.perf_counter() - start,
            )
            run.windows.append(w)
            run.latencies_s.extend(lat)
            log(
                f"{run.mode}: commits {w.first}-{w.last}: mean {w.mean_s * 1e3:.1f} ms, "
                f"p95 {w.p95_s * 1e3:.1f} ms, .hoodie {w.hoodie_files} files, "
                f"archive {w.archive_files}"
            )
            lat, cpu, inserts = [], [], 0
    run.total_s = time.perf_counter() - start
    run.distinct_keys = upserts.distinct_keys


def _read_back(run: RunResult, upserts: Upserts, hr: Any) -> None:
    """The snapshot must hold every key written once, at its latest ts."""
    t0 = time.perf_counter()
    snap = hr.read(run.path, columns=["uuid", "ts"])
    run.read_s = time.perf_counter() - t0
    run.rows_read = snap.num_rows
    expected = upserts.expected()
    got = pa.table(
        {"uuid": pc.cast(snap["uuid"], pa.string()), "ts": pc.cast(snap["ts"], pa.int64())}
    ).sort_by("uuid")
    if got.num_rows != expected.num_rows:
        run.read_check = f"{got.num_rows} rows read, {expected.num_rows} distinct keys written"
    elif not got["uuid"].equals(expected["uuid"]):
        run.read_check = "keys read differ from the keys written"
    elif not got["ts"].equals(expected["ts"]):
        bad = pc.sum(pc.not_equal(got["ts"], expected["ts"])).as_py()
        run.read_check = f"{bad} keys not at their latest ts"
    else:
        run.read_check = "ok"


def run_client(args: argparse.Namespace, path: Path, options: dict[str, str]) -> RunResult:
    """N commits through one ``hr.HoodieWriteClient`` in this process."""
    import hoodie_ray as hr

    run = RunResult("client", str(path), args.commits, args.rows, args.keys, args.window, options)
    upserts = Upserts(args.keys, args.rows, args.seed)
    log(f"client: {args.commits:,} commits of {args.rows} rows into {path} ...")
    run.secondary_index = args.secondary_index
    try:
        t0 = time.perf_counter()
        client = hr.HoodieWriteClient(str(path), options)
        run.startup_s = time.perf_counter() - t0

        def create_index() -> None:
            t0 = time.perf_counter()
            hr.create_index(str(path), f"{args.secondary_index}_idx", args.secondary_index)
            run.secondary_index_s = time.perf_counter() - t0
            log(f"client: index on {args.secondary_index} in {run.secondary_index_s:.2f} s")

        _measure_commits(run, upserts, client.write, create_index if args.secondary_index else None)
        _read_back(run, upserts, hr)
        if args.secondary_index:
            diffs = hr.validate_metadata(str(path))
            run.metadata_check = "ok" if not diffs else f"{len(diffs)} differences: {diffs[:3]}"
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        run.error = error_text(e)
        run.distinct_keys = upserts.distinct_keys
    return run


def _init_ray() -> bool:
    """Start a private local Ray (``RAY_ADDRESS`` joins one instead) unless one is running.
    Returns whether this call started it (then the run shuts it down)."""
    import ray

    if ray.is_initialized():
        return False
    ray.init(
        address=os.environ.get("RAY_ADDRESS") or "local",
        include_dashboard=False,
        logging_level=logging.WARNING,
    )
    return True


def run_stream(args: argparse.Namespace, path: Path, options: dict[str, str]) -> RunResult:
    """M checkpoints through ``hr.HoodieStreamWriter``: 1 writer, 1 assigner, local Ray."""
    import hoodie_ray as hr

    opts = {**BASE_OPTIONS, **STREAM_OPTIONS, **options}
    run = RunResult("stream", str(path), args.checkpoints, args.rows, args.keys, args.window, opts)
    upserts = Upserts(args.keys, args.rows, args.seed)
    log(f"stream: {args.checkpoints:,} checkpoints of {args.rows} rows into {path} ...")
    started = False
    try:
        started = _init_ray()
        writer = hr.HoodieStreamWriter(str(path), opts)
        t0 = time.perf_counter()
        writer.start(SCHEMA)  # actor start-up, outside the first checkpoint
        run.startup_s = time.perf_counter() - t0
        try:

            def commit(batch: pa.Table) -> None:
                writer.write(batch)
                writer.checkpoint()

            _measure_commits(run, upserts, commit)
        except BaseException:
            writer.abort()
            raise
        t0 = time.perf_counter()
        writer.close()
        run.close_s = time.perf_counter() - t0
        _read_back(run, upserts, hr)
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        run.error = error_text(e)
        run.distinct_keys = upserts.distinct_keys
    finally:
        if started:
            import ray

            ray.shutdown()
    return run


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def render_report(run: RunResult) -> str:
    """The per-window table and the verdict."""
    lines = [
        f"history, mode {run.mode}: {len(run.latencies_s):,} of {run.commits:,} commits of "
        f"{run.rows} rows, {run.keys:,} keys, windows of {run.window}",
        f"table {run.path}",
    ]
    if run.windows:
        lines += ["", text_table(WINDOW_HEADERS, [w.row() for w in run.windows]), ""]
    g = run.growth_ratio()
    first_half, last, bounded = run.hoodie_files_bound()
    verdict = "-" if g is None else ("ok" if g <= GROWTH_TARGET else "MISSED")
    lines.append(
        f"growth_ratio (last window / commits {run.window + 1}-{2 * run.window}): "
        f"{'-' if g is None else f'{g:.2f}'} (target <= {GROWTH_TARGET}: {verdict})"
    )
    lines.append(
        f".hoodie files (excluding the archive): first half max {first_half}, last {last}: "
        f"{'-' if bounded is None else ('bounded' if bounded else 'GROWING')}; "
        f"archive files: {run.windows[-1].archive_files if run.windows else '-'}"
    )
    startup = "-" if run.startup_s is None else f"{run.startup_s:.2f} s"
    lines.append(
        f"startup {startup}, total {'-' if run.total_s is None else f'{run.total_s:.1f} s'}"
    )
    lines.append(
        f"read back: {run.read_check or '-'} ({run.rows_read} rows, "
        f"{run.distinct_keys} distinct keys written"
        f"{'' if run.read_s is None else f', read in {run.read_s:.2f} s'})"
    )
    if run.secondary_index:
        created = "-" if run.secondary_index_s is None else f"{run.secondary_index_s:.2f} s"
        lines.append(
            f"secondary index on {run.secondary_index} (created after commit 1 in {created}); "
            f"metadata table against the snapshot: {run.metadata_check or '-'}"
        )
    if run.error:
        lines.append(f"ERROR: {run.error}")
    return "\n".join(lines)


def save_json(out: dict[str, Any], results_dir: Path, mode: str, stamp: str) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"history-{mode}-{stamp}.json"
    path.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return path


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.history",
        description="Per-commit cost of a long-running writer as its history grows.",
    )
    p.add_argument("--mode", choices=(*MODES, "both"), default="client")
    p.add_argument("--commits", type=int, default=None, help=f"client mode ({DEFAULT_COMMITS})")
    p.add_argument(
        "--checkpoints", type=int, default=None, help=f"stream mode ({DEFAULT_CHECKPOINTS})"
    )
    p.add_argument("--rows", type=int, default=DEFAULT_ROWS, help="rows per commit")
    p.add_argument("--keys", type=int, default=DEFAULT_KEYS, help="size of the key space")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="commits per window")
    p.add_argument(
        "--path",
        type=Path,
        default=None,
        help="folder for the tables (<path>/history_<mode>, kept); default a temporary one",
    )
    add_option_argument(
        p,
        "a Hudi option (repeatable), e.g. hoodie.keep.max.commits=30",
    )
    p.add_argument(
        "--secondary-index",
        default=None,
        metavar="COLUMN",
        help="client mode: hr.create_index on COLUMN after the first commit (needs the "
        "metadata table with hoodie.metadata.record.index.enable=true); e.g. driver",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_COMMITS} commits / {QUICK_CHECKPOINTS} checkpoints",
    )
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--results-dir", type=Path, default=_RESULTS_DIR, help="where the JSON goes")
    p.add_argument("--no-save", action="store_true", help="write no JSON file")
    p.add_argument("--json", action="store_true", help="print the JSON as the last stdout line")
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    p.add_argument("--keep", action="store_true", help="keep the temporary tables")
    args = p.parse_args(argv)
    if args.commits is None:
        args.commits = QUICK_COMMITS if args.quick else DEFAULT_COMMITS
    if args.checkpoints is None:
        args.checkpoints = QUICK_CHECKPOINTS if args.quick else DEFAULT_CHECKPOINTS
    for name in ("commits", "checkpoints", "rows", "keys", "window"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.rows > args.keys:
        p.error("--rows must not exceed --keys")
    if args.secondary_index is not None:
        if args.mode != "client":
            p.error("--secondary-index runs in client mode only")
        if args.secondary_index not in SCHEMA.names or args.secondary_index in ("uuid", "ts"):
            payload = [n for n in SCHEMA.names if n not in ("uuid", "ts")]
            p.error(f"--secondary-index: one of {', '.join(payload)}")
    args.options = dict(args.option)
    return args


def _table_path(base: Path, mode: str) -> Path:
    """``<base>/history_<mode>``, emptied first when it is a table an earlier run left."""
    path = base / f"history_{mode}"
    if path.exists():
        if not (path / ".hoodie" / "hoodie.properties").is_file() and any(path.iterdir()):
            raise SystemExit(f"{path} exists and is not a Hudi table; refusing to overwrite it")
        shutil.rmtree(path)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Run the modes asked for; 1 when one failed (or missed a target, with ``--check``)."""
    args = parse_args(argv)
    options = {**BASE_OPTIONS, **args.options}
    base = args.path or Path(tempfile.mkdtemp(prefix="history_"))
    base.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    machine = machine_info()
    commit = git_commit(_REPO)
    outputs: dict[str, dict[str, Any]] = {}
    rc = 0
    try:
        for mode in MODES if args.mode == "both" else (args.mode,):
            path = _table_path(base, mode)
            run = (run_client if mode == "client" else run_stream)(args, path, options)
            print(render_report(run), flush=True)
            out = run.to_json()
            out.update(git_commit=commit, machine=machine, timestamp=stamp)
            if not args.no_save:
                saved = save_json(out, args.results_dir, mode, stamp)
                out["json_path"] = str(saved)
                print(f"JSON: {saved}", flush=True)
            outputs[mode] = out
            failed = run.error or run.read_check != "ok" or run.metadata_check not in (None, "ok")
            if failed or (args.check and not run.target_met()):
                rc = 1
    finally:
        if args.path is None and not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        last: Any = outputs.get(args.mode, outputs)
        print(json.dumps(last, default=str), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
