"""Torn files: what a crash leaves half-written, and files damaged or left over on storage.

Part 1, deterministic crash points (one writer subprocess each, ``--crash-at``): the writer
kills itself (SIGKILL) in the middle of one storage operation -- half a log block appended,
half a base file, a marker without its file, an instant file's temporary copy never renamed,
a compaction's carried-over log half-copied, a clean or a rollback half done, the table's
``hoodie.properties`` never created. Readers then see the committed state; the next writer
rolls back and goes on; a last clean run leaves no debris.

Part 2, damaged or stray files put on a table (no crash needed): truncated or empty instant
files, a truncated committed log file, stray temporary files, a marker folder with no instant,
a corrupt compaction plan, a truncated ``hoodie.properties``. Each reader and the next writer
must return the committed data, or fail with a clear error and change nothing.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from tests.reliability.common import (
    CRASH_OPTIONS,
    FULL,
    CrashLedger,
    Driver,
    ModelCache,
    assert_no_debris,
    assert_snapshots,
    batch_table,
    batch_writes,
    driver_args,
    hr_snapshot,
    pending_instants,
    rs_snapshot,
)
from tests.reliability.report import record

TORN_OPTIONS = {
    **CRASH_OPTIONS,
    "hoodie.write.lock.expire_ms": "800",
    "hoodie.write.lock.heartbeat_interval_ms": "150",
}


def crash(op: str, n: int = 1, fraction: float = 0.5, **where: str) -> dict:
    return {"op": op, "n": n, "fraction": fraction, **where}


# name -> steps: an int is a clean run of that many commits, a dict a crash point.
SCENARIOS: dict[str, list] = {
    "log block half-appended": [crash("append", 3, func="_append_to_log")],
    "new log file half-written": [crash("write_bytes", 2, glob="*.log.*", func="_append_to_log")],
    "new log file empty": [crash("write_bytes", 2, 0.0, glob="*.log.*", func="_append_to_log")],
    "marker without its file": [
        2,
        crash("write_bytes", 1, -1, glob="*.log.*", func="_append_to_log"),
    ],
    "base file half-written (first commit)": [
        crash("write_bytes", 2, 0.3, glob="*.parquet", func="_create")
    ],
    "inflight instant never renamed": [
        1,
        crash("write_atomic", 1, glob=".hoodie/*.deltacommit.inflight"),
    ],
    "completed instant never linked": [1, crash("create_new", 1, glob=".hoodie/*.deltacommit")],
    "compaction base file half-written": [crash("open_output", 2, func="execute_operation")],
    "compaction carry-over half-copied": [
        crash("open_output", 1, func="execute_operation"),
        crash("write_bytes", 1, func="_carry_over_logs"),
    ],
    "compaction commit never linked": [crash("create_new", 1, glob=".hoodie/*.commit")],
    "clean half done": [crash("delete", 1, 1.0, func="clean_table")],
    "markers left after a commit": [1, crash("delete_dir", 1, -1, func="commit")],
    "markers left after a rollback": [
        crash("append", 3, func="_append_to_log"),
        crash("delete_dir", 1, -1, func="_rollback_files"),
    ],
    "rollback half done": [
        crash("write_bytes", 2, glob="*.log.*", func="_append_to_log"),
        crash("delete", 1, 1.0, func="_rollback_files"),
    ],
    "rollback command block half-appended": [
        crash("append", 3, func="_append_to_log"),
        crash("append", 1, func="append_rollback_block"),
    ],
    "rollback instant never linked": [
        crash("append", 3, func="_append_to_log"),
        crash("create_new", 1, glob=".hoodie/*.rollback"),
    ],
    "table creation: hoodie.properties never linked": [
        crash("create_new", 1, glob=".hoodie/hoodie.properties")
    ],
    "partition metadata never linked": [
        crash("create_new", 2, glob="*/.hoodie_partition_metadata")
    ],
    "lock file never linked": [2, crash("create_new", 1, glob=".hoodie/.aux/*")],
    # archival (ARCHIVAL_OPTIONS: keep 5-7 commits; "v8" scenarios on table version 8)
    "archival: archive file half-written": [crash("create_new", 1, 0.5, glob=".hoodie/archived/*")],
    "archival: archived, no instant file deleted yet": [
        crash("delete", 1, 0.0, func="remove_archived")
    ],
    "archival: instant files half deleted": [crash("delete", 5, 1.0, func="remove_archived")],
    "archival v8: history file half-written": [
        crash("write_bytes", 1, 0.5, glob=".hoodie/timeline/history/*_0.parquet")
    ],
    "archival v8: manifest never linked": [
        crash("write_atomic", 2, glob=".hoodie/timeline/history/manifest_*")
    ],
    "archival v8: layer merge half-written": [
        crash("write_bytes", 1, 0.5, glob=".hoodie/timeline/history/*_1.parquet")
    ],
    "archival v8: instant files half deleted": [crash("delete", 3, 1.0, func="remove_archived")],
}
ARCHIVAL_OPTIONS = {
    "archive.min_commits": "5",
    "archive.max_commits": "7",
    "hoodie.timeline.compaction.batch.size": "3",
}
CI_SCENARIOS = (
    "rollback command block half-appended",  # its first crash is the half-appended log block
)  # (suite time: the compaction and archival scenarios run with the slow ones)


def _options(name: str) -> dict[str, str]:
    if not name.startswith("archival"):
        return TORN_OPTIONS
    version = "8" if name.startswith("archival v8") else "6"
    return {**TORN_OPTIONS, **ARCHIVAL_OPTIONS, "hoodie.write.table.version": version}


def run_scenario(tmp_path: Path, name: str, steps: list, seed: int) -> dict:
    path = tmp_path / "t"
    options = _options(name)
    ledger = CrashLedger(path, seed, parts=1)
    crashed_at = []
    for i, step in enumerate(steps):
        if isinstance(step, int):
            d = Driver(
                driver_args(path, "client", seed, ledger.next_index, options, count=step),
                tmp_path,
            )
            rc = d.wait(timeout=120)
            assert rc == 0, d.stderr_tail()
            ledger.after_clean_run(d, step, f"{name}: step {i}")
            continue
        d = Driver(
            driver_args(path, "client", seed, ledger.next_index, options, count=40, crash_at=step),
            tmp_path,
        )
        rc = d.wait(timeout=180)
        hit = [line for line in d.lines if line.startswith("CRASH ")]
        assert rc == -9 and hit, f"{name}: crash point {step} never reached:\n{d.stderr_tail()}"
        crashed_at.append(hit[0])
        ledger.after_kill(d, f"{name}: after crash {hit[0]}")
    d = Driver(driver_args(path, "client", seed, ledger.next_index, options, count=4), tmp_path)
    rc = d.wait(timeout=120)
    assert rc == 0, d.stderr_tail()
    ledger.after_clean_run(d, 4, f"{name}: the clean run after the crashes")
    assert_no_debris(path)
    return {"scenario": name, "crashes": crashed_at, "commits": len(ledger.reported)}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, id=n.replace(" ", "-"), marks=() if n in CI_SCENARIOS else pytest.mark.slow)
        for n in SCENARIOS
    ],
)
def test_crash_point_in_a_storage_operation(tmp_path, name):
    if name not in CI_SCENARIOS and not FULL:
        pytest.skip("HOODIE_RAY_FULL=1 runs every scenario")
    t0 = time.monotonic()
    figures = run_scenario(tmp_path, name, SCENARIOS[name], seed=500 + len(name))
    record("torn_crash_point", seconds=round(time.monotonic() - t0, 1), **figures)


# -- part 2: damaged and stray files ------------------------------------------------------------

DAMAGE_OPTIONS = {**CRASH_OPTIONS, "compaction.delta_commits": "50"}
SEED = 77


@pytest.fixture(scope="module")
def source_table(tmp_path_factory) -> Path:
    """A table of 4 delta commits (no compaction), copied by each test."""
    path = tmp_path_factory.mktemp("torn_src") / "t"
    for i in range(4):
        HoodieWriteClient(str(path), DAMAGE_OPTIONS).write(batch_table(batch_writes(SEED, i)[0]))
    return path


@pytest.fixture
def table(source_table, tmp_path) -> Path:
    dst = tmp_path / "t"
    shutil.copytree(source_table, dst)
    return dst


def _listing(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and ".aux" not in p.parts
    }


def _next_write(path: Path) -> None:
    HoodieWriteClient(str(path), DAMAGE_OPTIONS).write(batch_table(batch_writes(SEED, 4)[0]))


def _timeline_files(path: Path, suffix: str) -> list[Path]:
    return sorted(p for p in (path / ".hoodie").iterdir() if p.name.endswith(suffix))


MODEL = ModelCache(SEED)


def _fails_clearly_and_changes_nothing(path: Path, error: type[hr.HoodieError]) -> None:
    before = _listing(path)
    with pytest.raises(error):
        hr.read(str(path))
    with pytest.raises(error):
        _next_write(path)
    after = _listing(path)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    data_changed = [k for k in changed if not k.startswith(".hoodie/")]
    assert data_changed == [], f"a failed write changed data files: {data_changed}"


def test_truncated_completed_deltacommit_fails_clearly(table):
    f = _timeline_files(table, ".deltacommit")[-1]
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    _fails_clearly_and_changes_nothing(table, hr.HoodieCorruptedDataError)
    with pytest.raises(Exception, match="commit metadata"):
        rs_snapshot(table)


def test_empty_completed_deltacommit_reads_as_empty_metadata(table):
    """An empty completed instant is empty metadata (as Java reads it): the data stays."""
    _timeline_files(table, ".deltacommit")[-1].write_bytes(b"")
    assert hr_snapshot(table) == MODEL.rows(4)
    _next_write(table)
    assert hr_snapshot(table) == MODEL.rows(5)
    assert rs_snapshot(table) == MODEL.rows(5)


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_damaged_hoodie_properties_fails_clearly(table, damage):
    f = table / ".hoodie" / "hoodie.properties"
    f.write_bytes(b"" if damage == "empty" else f.read_bytes()[: f.stat().st_size // 3])
    _fails_clearly_and_changes_nothing(table, hr.HoodieCorruptedDataError)


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_damaged_compaction_plan_writer_fails_clearly(table, damage):
    from hoodie_ray.compaction.api import CompactionService

    inst = CompactionService.open(str(table), DAMAGE_OPTIONS).schedule(force=True)
    f = table / ".hoodie" / f"{inst}.compaction.requested"
    f.write_bytes(b"" if damage == "empty" else f.read_bytes()[: f.stat().st_size // 2])
    assert_snapshots(table, MODEL.rows(4), "readers beside a damaged pending plan")
    before = _listing(table)
    with pytest.raises(hr.HoodieCorruptedDataError, match="compaction.requested"):
        _next_write(table)
    after = _listing(table)
    assert {k: v for k, v in after.items() if not k.startswith(".hoodie/")} == {
        k: v for k, v in before.items() if not k.startswith(".hoodie/")
    }
    assert_snapshots(table, MODEL.rows(4), "after the failed write")


def test_empty_requested_and_inflight_files_are_rolled_back(table):
    """A pending instant whose files are empty (a crash right after creating them)."""
    from hoodie_ray.timeline.instant import new_instant_time

    ts = new_instant_time()
    (table / ".hoodie" / f"{ts}.deltacommit.requested").write_bytes(b"")
    (table / ".hoodie" / f"{ts}.deltacommit.inflight").write_bytes(b"")
    assert_snapshots(table, MODEL.rows(4), "beside an empty pending instant")
    _next_write(table)
    assert_snapshots(table, MODEL.rows(5), "after the next write")
    assert pending_instants(table) == []


def _ghost_marker_folder(table: Path, instant: str) -> int:
    """A marker folder of an instant the timeline does not have, naming committed files."""
    part = sorted(d for d in table.iterdir() if d.is_dir() and d.name != ".hoodie")[0]
    ghost = table / ".hoodie" / ".temp" / instant / part.name
    ghost.mkdir(parents=True)
    named = 0
    for f in part.iterdir():
        if f.is_file() and not f.name.startswith((".hoodie_partition", ".junk")):
            io = "APPEND" if ".log." in f.name else "CREATE"
            (ghost / f"{f.name}.marker.{io}").write_bytes(b"")
            named += 1
    return named


def test_stray_files_and_a_marker_folder_with_no_instant(table):
    """Temporary files in the timeline and partitions, a foreign file, and a marker folder of
    an instant that is not on the timeline naming *committed* files: readers skip them all;
    neither an explicit rollback of that instant nor the next writer may delete the committed
    files the markers name; the next writer removes the stale folder."""
    last = _timeline_files(table, ".deltacommit")[-1]
    (table / ".hoodie" / f".{last.name}.0123abcd.tmp").write_bytes(b'{"partial')
    (table / ".hoodie" / "99991231235959999.deltacommit.requested.tmp").write_bytes(b"")
    for d in sorted(d for d in table.iterdir() if d.is_dir() and d.name != ".hoodie"):
        (d / ".junk.0123.tmp").write_bytes(b"x" * 10)
        (d / "README.txt").write_bytes(b"not a hudi file")
    ghost = "20300101000000000"
    assert _ghost_marker_folder(table, ghost) > 0
    assert_snapshots(table, MODEL.rows(4), "beside stray files")
    hr.rollback(str(table), ghost)
    assert_snapshots(table, MODEL.rows(4), "after an explicit rollback of the ghost instant")
    _ghost_marker_folder(table, ghost)
    _next_write(table)
    assert_snapshots(table, MODEL.rows(5), "after the next write")
    assert not (table / ".hoodie" / ".temp" / ghost).exists(), "stale marker folder left"


def test_orphan_half_written_files_of_an_unknown_instant(table):
    """A half-written base file and a log file of an instant the timeline never had."""
    part = sorted(d for d in table.iterdir() if d.is_dir() and d.name != ".hoodie")[0]
    base = next(p for p in part.iterdir() if p.suffix == ".parquet")
    fid = base.name.split("_")[0]
    (part / f"{fid}_9-9-9_20300101000000000.parquet").write_bytes(base.read_bytes()[:300])
    (part / f"{fid}_9-9-9_20300101000000001.parquet").write_bytes(b"")
    (part / f".{fid}_20300101000000000.log.1_9-9-9").write_bytes(b"#HUDI#\x00\x00")
    assert_snapshots(table, MODEL.rows(4), "beside orphan files")
    _next_write(table)
    assert_snapshots(table, MODEL.rows(5), "after the next write")


def _keys_in_log(path: Path) -> set[str]:
    from hoodie_ray.log_format.blocks import DataBlock, DeleteBlock
    from hoodie_ray.log_format.reader import read_log_bytes

    keys: set[str] = set()
    for block in read_log_bytes(path.read_bytes()):
        if isinstance(block, DataBlock):
            keys.update(block.records.column("_hoodie_record_key").to_pylist())
        elif isinstance(block, DeleteBlock):
            keys.update(block.record_keys.to_pylist())
    return keys


def test_truncated_committed_log_file(table):
    """Storage lost the tail of a *committed* log file (not a crash: a crash only tears what
    is not committed yet). Readers skip the torn block as a corrupt block (Java's rule): every
    key the file never held reads exactly, none fails. The next writer does not append behind
    the torn block (it rolls a new log version), and what it writes reads back exactly."""
    logs = sorted(
        (p for p in table.rglob(".*.log.*") if ".hoodie" not in p.parts),
        key=lambda p: p.stat().st_size,
    )
    victim = logs[-1]
    touched = _keys_in_log(victim)
    size = victim.stat().st_size
    victim.write_bytes(victim.read_bytes()[: size - 40])
    want = [r for r in MODEL.rows(4) if r["key"] not in touched]
    for reader in (hr_snapshot, rs_snapshot):
        got = [r for r in reader(table) if r["key"] not in touched]
        assert got == want, f"{reader.__name__}: rows of keys outside the torn file changed"
    _next_write(table)
    assert victim.stat().st_size == size - 40, "the writer appended behind a torn block"
    rows5 = {r["key"]: r for r in MODEL.rows(5)}
    for reader in (hr_snapshot, rs_snapshot):
        got = {r["key"]: r for r in reader(table)}
        for k in set(rows5) | set(got):
            if k not in touched:
                assert got.get(k) == rows5.get(k), f"{reader.__name__}: key {k}"
