"""Table operations killed at each step: a clustering, an insert_overwrite and a restore.

For each operation a table is prepared in this process (upserts of small files, version 8,
the metadata table on; a savepoint for the restore), and the number of storage steps the
operation takes is counted once (a driver run with ``--crash-at {"op": "any", "n": 0}``).
Then, for each chosen step, on a fresh copy of the table, a driver subprocess runs the
operation and kills itself (SIGKILL) in the middle of that step; the test checks:

* before any recovery, readers (hoodie_ray and hudi-rs) see the table either as it was or as
  the completed operation leaves it, never a mix (a clustering and an overwrite are atomic);
  a half-done restore is refused by writers, naming the restore to run again;
* recovery as a user does it: ``hr.cluster`` again (it rolls the dead clustering back and
  clusters), the next writer (it rolls the dead overwrite back), ``hr.restore`` again (it
  finishes the pending restore);
* nothing committed is lost: after recovery and a further write of new keys both readers
  read the model, nothing is pending, no marker or uncommitted base file is left, and the
  metadata table validates.

CI runs one step of the clustering (a seeded choice; the overwrite and the restore with
``-m slow``); ``HOODIE_RAY_FULL=1`` runs every step.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_ray as hr
from hoodie_ray.job.client import HoodieWriteClient
from tests.reliability.common import (
    CRASH_OPTIONS,
    FULL,
    Driver,
    assert_no_debris,
    assert_snapshots,
    batch_table,
    batch_writes,
    pending_instants,
    rs_snapshot,
)
from tests.reliability.driver import _retry_conflicts
from tests.write.model import SCHEMA, V8_MDT

OPTIONS = {
    **CRASH_OPTIONS,
    **V8_MDT,
    "hoodie.write.table.version": "8",
    "hoodie.parquet.small.file.limit": "0",  # every commit opens new groups: work to cluster
    "compaction.delta_commits": "50",
}
SEED = 41


def _rows(model: list[dict]) -> list[dict]:
    return sorted(model, key=lambda r: r["key"])


def _prepare(path: Path, operation: str) -> dict:
    """The table before the operation; what it must read as before and after it."""
    for i in range(4):
        HoodieWriteClient(str(path), OPTIONS).write(batch_table(batch_writes(SEED, i)[0]))
        if operation == "restore" and i == 1:
            savepoint = hr.savepoint(str(path))
            at_savepoint = rs_snapshot(path)
    before = rs_snapshot(path)
    case: dict = {"before": before}
    if operation == "cluster":
        case["after"] = before
    elif operation == "insert_overwrite":
        new = [
            {"key": f"o{i:02d}", "p": "p0", "ts": 50_000 + i, "v": i, "s": f"o{i}"}
            for i in range(5)
        ]
        pq.write_table(pa.Table.from_pylist(new, schema=SCHEMA), path.parent / "input.parquet")
        case["input"] = str(path.parent / "input.parquet")
        case["after"] = _rows([r for r in before if r["p"] != "p0"] + new)
    else:
        case["savepoint"] = savepoint
        case["after"] = at_savepoint
    return case


def _driver(path: Path, operation: str, case: dict, crash: dict, log_dir: Path) -> Driver:
    args = [str(path), "--engine", "operation", "--operation", operation]
    args += ["--options", json.dumps(OPTIONS), "--crash-at", json.dumps(crash)]
    if "input" in case:
        args += ["--input", case["input"]]
    if "savepoint" in case:
        args += ["--savepoint", case["savepoint"]]
    return Driver(args, log_dir)


def _recover(path: Path, operation: str, case: dict) -> None:
    if operation == "cluster":
        _retry_conflicts(lambda: hr.cluster(str(path), OPTIONS))
    elif operation == "restore":
        if pending_instants(path, ["restore"]):  # writers refuse a half-done restore
            with pytest.raises(hr.HoodieError, match="restore"):
                _retry_conflicts(
                    lambda: HoodieWriteClient(str(path), OPTIONS).write(
                        batch_table(batch_writes(SEED, 9)[0])
                    )
                )
        _retry_conflicts(lambda: hr.restore(str(path), case["savepoint"], options=OPTIONS))
    # an overwrite: the next writer's open rolls it back (below)


_PREPARED: dict[str, tuple[Path, dict, int]] = {}


def _prepared(operation: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, int]:
    """The operation's prepared table, its expectations and its number of steps (made once)."""
    if operation not in _PREPARED:
        root = tmp_path_factory.mktemp(f"ops_{operation}")
        path = root / "src" / "t"
        case = _prepare(path, operation)
        probe = root / "probe" / "t"
        shutil.copytree(path, probe)
        d = _driver(probe, operation, case, {"op": "any", "n": 0}, root)
        assert d.wait(timeout=120) == 0, d.stderr_tail()
        steps = [int(line.split()[1]) for line in d.lines if line.startswith("STEPS")]
        assert steps and steps[0] > 3, d.lines
        assert_snapshots(probe, case["after"], f"{operation} run whole")
        _PREPARED[operation] = (path, case, steps[0])
    return _PREPARED[operation]


def _steps(operation: str, total: int) -> list[int]:
    if FULL:
        return list(range(1, total + 1))
    return [random.Random(f"{SEED}-{operation}").randint(1, total)]


@pytest.mark.parametrize(
    "operation",
    [
        "cluster",
        pytest.param("insert_overwrite", marks=pytest.mark.slow),  # suite time
        pytest.param("restore", marks=pytest.mark.slow),
    ],
)
def test_an_operation_killed_at_a_step_is_recovered_and_loses_nothing(
    tmp_path_factory, tmp_path, operation
):
    src, case, total = _prepared(operation, tmp_path_factory)
    for step in _steps(operation, total):
        path = tmp_path / f"step{step}" / "t"
        shutil.copytree(src, path)
        d = _driver(path, operation, case, {"op": "any", "n": step}, tmp_path)
        rc = d.wait(timeout=120)
        what = f"{operation} killed at step {step} of {total}"
        assert rc == -9 and any(x.startswith("CRASH") for x in d.lines), (what, d.stderr_tail())
        if operation != "restore":
            got = rs_snapshot(path)
            assert got in (case["before"], case["after"]), f"{what}: a mix of before and after"
        _recover(path, operation, case)
        base = case["before"] if operation == "insert_overwrite" else case["after"]
        extra = [{"key": f"n{i}", "p": "p1", "ts": 90_000, "v": i, "s": "n"} for i in range(3)]
        more = pa.Table.from_pylist(extra, schema=SCHEMA)
        result, _ = _retry_conflicts(
            lambda p=path, t=more: HoodieWriteClient(str(p), OPTIONS).write(t)
        )
        assert result.instant is not None
        # an overwrite whose commit completed before the kill stays; otherwise it is gone
        done = rs_snapshot(path)
        want_kept = _rows(case["after"] + extra) if operation == "insert_overwrite" else None
        want = _rows(base + extra)
        if want_kept is not None and done == want_kept:
            want = want_kept
        assert_snapshots(path, want, what)
        assert pending_instants(path) == [], what
        assert_no_debris(path)
        assert hr.validate_metadata(str(path)) == [], what
        shutil.rmtree(path.parent, ignore_errors=True)
