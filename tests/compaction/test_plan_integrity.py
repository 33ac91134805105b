"""A pending compaction plan is checked against the file-system view before it runs.

Each test writes a MOR table (table versions 6 and 8), schedules a compaction without running
it, damages the plan's ``.compaction.requested`` (a valid Avro file whose operations no longer
describe file slices of the table), then runs the compaction. It must be refused with
:class:`HoodieCorruptedDataError` naming the operation, write nothing, leave the plan pending,
and both readers must still return the committed rows, each key once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.compaction.api import CompactionService
from hoodie_ray.job.client import HoodieWriteClient
from hoodie_ray.job.maintenance import schedule_compaction
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.plans import HoodieCompactionOperation, HoodieCompactionPlan
from tests.conftest import hudi_rs_read
from tests.write.model import OPTIONS, SMALL_FILES

KEYS = 120


def _options(version: str, **extra: str) -> dict[str, str]:
    return {
        **OPTIONS,
        **SMALL_FILES,  # several file groups per partition
        "hoodie.write.table.version": version,
        "compaction.schedule.enabled": "false",
        **extra,
    }


def _rows(ts: int, keys: range = range(KEYS)) -> pa.Table:
    return pa.table(
        {
            "key": [f"k{i:03d}" for i in keys],
            "p": ["a" if i % 2 else "b" for i in keys],
            "ts": pa.array([ts] * len(keys), pa.int64()),
            "v": pa.array([i * 1000 + ts for i in keys], pa.int64()),
            "s": ["x" * 30] * len(keys),
        }
    )


def _expected(ts_by_key: dict[int, int]) -> list[tuple[str, int]]:
    return sorted((f"k{i:03d}", i * 1000 + ts) for i, ts in ts_by_key.items())


def _pairs(t: pa.Table) -> list[tuple[str, int]]:
    return sorted(zip(t.column("key").to_pylist(), t.column("v").to_pylist(), strict=True))


class Scene:
    """A table with one pending compaction plan (not run yet)."""

    def __init__(self, path: Path, version: str) -> None:
        self.path = path
        self.version = version
        self.opts = _options(version)
        HoodieWriteClient(str(path), self.opts).write(_rows(1))
        HoodieWriteClient(str(path), self.opts).write(_rows(2))
        self.ts_by_key = dict.fromkeys(range(KEYS), 2)
        instant = schedule_compaction(str(path), self.opts, force=True)
        assert instant is not None
        self.instant = instant

    def plan_file(self) -> Path:
        t = hr.HoodieTable.load(str(self.path))
        req = Instant(self.instant, Action.COMPACTION, State.REQUESTED)
        return self.path / t.active_timeline.instant_path(req)

    def plan(self) -> HoodieCompactionPlan:
        return HoodieCompactionPlan.from_bytes(self.plan_file().read_bytes())

    def damage(self, fn: Callable[[list[HoodieCompactionOperation]], Any]) -> None:
        """Rewrite the plan with ``fn`` applied to its operations (sorted by partition, id)."""
        plan = self.plan()
        fn(plan.operations)
        self.plan_file().write_bytes(plan.to_bytes())

    def ops_of_one_partition(self) -> list[HoodieCompactionOperation]:
        ops = self.plan().operations
        part = max(
            {o.partition_path for o in ops}, key=lambda p: sum(o.partition_path == p for o in ops)
        )
        out = [o for o in ops if o.partition_path == part]
        assert len(out) >= 2, "the scene needs two file groups in one partition"
        return out

    def listing(self) -> dict[str, str]:
        """Every file of the table (timeline included) with a digest of its content."""
        return {
            str(f.relative_to(self.path)): hashlib.sha1(f.read_bytes()).hexdigest()
            for f in sorted(self.path.rglob("*"))
            if f.is_file()
        }

    def pending(self) -> list[tuple[str, str]]:
        t = hr.HoodieTable.load(str(self.path))
        return [(i.timestamp, i.state.value) for i in t.active_timeline.pending_compactions()]

    def assert_reads_committed(self) -> None:
        want = _expected(self.ts_by_key)
        assert _pairs(hudi_rs_read(self.path)) == want, "hudi-rs: duplicate or lost keys"
        assert _pairs(hr.read(str(self.path))) == want, "hoodie_ray.read: duplicate or lost keys"


@pytest.fixture(params=["6", "8"])
def scene(request: pytest.FixtureRequest, tmp_path: Path) -> Scene:
    return Scene(tmp_path / "t", request.param)


#: Suite time: for the damages a plan check finds in the plan's partitions, file ids, base
#: files and base instants alone (no log file named), version 6 runs under -m slow; version 8
#: runs in CI, and the version 6 plan, its log files and the v6 runs of the writer's refusal,
#: the later-writes run and the drops stay in CI.
V8_IN_CI = pytest.mark.parametrize(
    "scene", [pytest.param("6", marks=pytest.mark.slow), "8"], indirect=True
)


def _flip(s: str) -> str:
    """``s`` with one character changed (still a valid file id)."""
    return ("b" if s[0] != "b" else "c") + s[1:]


def _refused(scene: Scene, *words: str) -> None:
    """The compaction fails naming ``words`` and changes nothing."""
    before = scene.listing()
    pending = scene.pending()
    assert pending == [(scene.instant, "REQUESTED")]
    with pytest.raises(hr.HoodieCorruptedDataError) as err:
        hr.compact(str(scene.path), scene.opts)
    msg = str(err.value)
    for w in (scene.instant, *words):
        assert re.search(re.escape(w), msg), f"{w!r} not in {msg!r}"
    assert scene.listing() == before, "a refused plan wrote or deleted files"
    assert scene.pending() == pending
    scene.assert_reads_committed()


@V8_IN_CI
def test_changed_file_id_is_refused(scene: Scene) -> None:
    op = scene.ops_of_one_partition()[0]
    bad = _flip(op.file_id)

    def damage(ops: list[HoodieCompactionOperation]) -> None:
        next(o for o in ops if o.file_id == op.file_id).file_id = bad

    scene.damage(damage)
    _refused(scene, f"partition {op.partition_path!r}", bad, "no file group")


def _swap_base_files(
    scene: Scene,
) -> tuple[HoodieCompactionOperation, HoodieCompactionOperation]:
    """Damage the plan: two operations of one partition trade base files; returns the two."""
    a, b = scene.ops_of_one_partition()[:2]

    def damage(ops: list[HoodieCompactionOperation]) -> None:
        oa = next(o for o in ops if o.file_id == a.file_id)
        ob = next(o for o in ops if o.file_id == b.file_id)
        oa.data_file_path, ob.data_file_path = ob.data_file_path, oa.data_file_path

    scene.damage(damage)
    return a, b


@V8_IN_CI
def test_swapped_base_files_are_refused(scene: Scene) -> None:
    a, b = _swap_base_files(scene)
    _refused(
        scene, f"partition {a.partition_path!r}", a.file_id, "base file", str(b.data_file_path)
    )


def test_log_file_of_another_group_is_refused(scene: Scene) -> None:
    a, b = scene.ops_of_one_partition()[:2]

    def damage(ops: list[HoodieCompactionOperation]) -> None:
        oa = next(o for o in ops if o.file_id == a.file_id)
        oa.delta_file_paths = oa.delta_file_paths + list(b.delta_file_paths)

    scene.damage(damage)
    _refused(scene, a.file_id, "log file", b.delta_file_paths[0], b.file_id)


def test_missing_log_file_is_refused(scene: Scene) -> None:
    a = scene.ops_of_one_partition()[0]
    ghost = a.delta_file_paths[0].replace(".log.1_", ".log.7_")

    def damage(ops: list[HoodieCompactionOperation]) -> None:
        oa = next(o for o in ops if o.file_id == a.file_id)
        oa.delta_file_paths = [ghost]

    scene.damage(damage)
    _refused(scene, a.file_id, ghost, "not a log file of the slice")


@V8_IN_CI
def test_nonexistent_partition_is_refused(scene: Scene) -> None:
    a = scene.ops_of_one_partition()[0]

    def damage(ops: list[HoodieCompactionOperation]) -> None:
        next(o for o in ops if o.file_id == a.file_id).partition_path = "zz"

    scene.damage(damage)
    _refused(scene, "partition 'zz'", a.file_id, "no partition")


@V8_IN_CI
def test_other_partition_is_refused(scene: Scene) -> None:
    a = scene.ops_of_one_partition()[0]
    other = "a" if a.partition_path == "b" else "b"

    def damage(ops: list[HoodieCompactionOperation]) -> None:
        next(o for o in ops if o.file_id == a.file_id).partition_path = other

    scene.damage(damage)
    _refused(scene, f"partition {other!r}", a.file_id, "no file group")


@V8_IN_CI
def test_wrong_base_instant_is_refused(scene: Scene) -> None:
    a = scene.ops_of_one_partition()[0]
    t = hr.HoodieTable.load(str(scene.path))
    other = next(i.timestamp for i in t.timeline if i.timestamp != a.base_instant_time)

    def damage(ops: list[HoodieCompactionOperation]) -> None:
        next(o for o in ops if o.file_id == a.file_id).base_instant_time = other

    scene.damage(damage)
    _refused(scene, a.file_id, "base instant", other)


@V8_IN_CI
def test_operation_listed_twice_is_refused(scene: Scene) -> None:
    a = scene.ops_of_one_partition()[0]

    def damage(ops: list[HoodieCompactionOperation]) -> None:
        ops.append(next(o for o in ops if o.file_id == a.file_id))

    scene.damage(damage)
    _refused(scene, a.file_id, "more than once")


def test_writer_refuses_a_corrupt_plan_it_would_run(scene: Scene) -> None:
    """The inline path (a write that runs the pending plan after its commit) refuses too."""
    a, _ = _swap_base_files(scene)
    opts = {**scene.opts, "compaction.schedule.enabled": "true"}
    with pytest.raises(hr.HoodieCorruptedDataError, match=re.escape(a.file_id)):
        HoodieWriteClient(str(scene.path), opts).write(_rows(3, range(0, 10)))
    scene.ts_by_key.update(dict.fromkeys(range(10), 3))  # the write itself committed
    assert scene.pending() == [(scene.instant, "REQUESTED")]
    assert not [f for f in scene.listing() if scene.instant in f and f.endswith(".parquet")]
    scene.assert_reads_committed()


def test_valid_plan_with_later_writes_still_runs(scene: Scene) -> None:
    """Not a corruption: logs written after the plan was scheduled (v6: named by the base
    instant, carried over at commit; v8: named by their own delta commit) are no reason to
    refuse it, and the compaction keeps every row."""
    HoodieWriteClient(str(scene.path), scene.opts).write(_rows(3, range(0, KEYS, 3)))
    scene.ts_by_key.update(dict.fromkeys(range(0, KEYS, 3), 3))
    assert hr.compact(str(scene.path), scene.opts).instant == scene.instant
    assert scene.pending() == []
    scene.assert_reads_committed()
    HoodieWriteClient(str(scene.path), scene.opts).write(_rows(4, range(1, KEYS, 5)))
    scene.ts_by_key.update(dict.fromkeys(range(1, KEYS, 5), 4))
    assert hr.compact(str(scene.path), scene.opts).instant is not None
    scene.assert_reads_committed()


def test_compactions_show_lists_a_corrupt_plan_and_drop_removes_it(scene: Scene) -> None:
    """``CompactionService.drop``: the corrupt plan goes, the table reads as before, and the
    next compaction schedules and runs a fresh plan."""
    op = scene.ops_of_one_partition()[0]

    def damage(ops: list[HoodieCompactionOperation]) -> None:
        next(o for o in ops if o.file_id == op.file_id).file_id = _flip(op.file_id)

    scene.damage(damage)
    data_before = {k: v for k, v in scene.listing().items() if not k.startswith(".hoodie")}
    svc = CompactionService.open(str(scene.path), scene.opts)
    svc.drop(scene.instant)
    assert scene.pending() == []
    assert not scene.plan_file().exists()
    assert {k: v for k, v in scene.listing().items() if not k.startswith(".hoodie")} == data_before
    scene.assert_reads_committed()
    fresh = hr.compact(str(scene.path), scene.opts).instant
    assert fresh is not None and fresh != scene.instant
    scene.assert_reads_committed()


def test_drop_refuses_a_completed_or_unknown_compaction(scene: Scene) -> None:
    svc = CompactionService.open(str(scene.path), scene.opts)
    with pytest.raises(hr.HoodieCompactionError, match="no pending compaction"):
        svc.drop("20000101000000000")
    assert hr.compact(str(scene.path), scene.opts).instant == scene.instant
    with pytest.raises(hr.HoodieCompactionError, match="completed"):
        svc.drop(scene.instant)
    scene.assert_reads_committed()


def test_v8_log_missing_from_the_plan_is_refused(tmp_path: Path) -> None:
    """Table version 8: a log file completed before the plan but left out of it would stay
    in the superseded slice once the compaction commits: its records would be lost."""
    scene = Scene(tmp_path / "t", "8")
    a = scene.ops_of_one_partition()[0]

    def damage(ops: list[HoodieCompactionOperation]) -> None:
        next(o for o in ops if o.file_id == a.file_id).delta_file_paths = []

    scene.damage(damage)
    _refused(scene, a.file_id, a.delta_file_paths[0], "missing from it")


def test_v6_logs_named_by_the_pending_compaction_are_valid_and_block_a_drop(
    tmp_path: Path,
) -> None:
    """Table version 6: Java names the logs it writes after a plan by the compaction instant;
    they join the planned slice (no reason to refuse the plan), and dropping the plan would
    hide them from readers, so the drop is refused."""
    from hoodie_ray.compaction.verify import plan_problems

    scene = Scene(tmp_path / "t", "6")
    a = scene.ops_of_one_partition()[0]
    src = scene.path / a.partition_path / a.delta_file_paths[0]
    late = f".{a.file_id}_{scene.instant}.log.1_0-9-0"
    (src.parent / late).write_bytes(src.read_bytes())
    t = hr.HoodieTable.load(str(scene.path))
    view = t.view()
    slc = view.latest_file_slice(a.partition_path, a.file_id)
    assert slc is not None and late in slc.log_files
    assert plan_problems(view, scene.instant, scene.plan()) == []
    before = scene.listing()
    with pytest.raises(hr.HoodieCompactionError, match=re.escape(late)):
        CompactionService.open(str(scene.path), scene.opts).drop(scene.instant)
    assert scene.listing() == before
    assert scene.pending() == [(scene.instant, "REQUESTED")]


def test_drop_after_an_interrupted_run_deletes_its_base_files(scene: Scene) -> None:
    """An inflight plan (a run died after writing a base file) is dropped with its output."""
    from hoodie_ray.compaction.execute import execute_operation

    data_before = {k: v for k, v in scene.listing().items() if not k.startswith(".hoodie")}
    svc = CompactionService.open(str(scene.path), scene.opts)
    written = execute_operation(svc.tasks(scene.instant)[0]).path
    assert scene.pending() == [(scene.instant, "INFLIGHT")]
    assert written in scene.listing()
    assert svc.drop(scene.instant) == [written]
    assert scene.pending() == []
    assert {k: v for k, v in scene.listing().items() if not k.startswith(".hoodie")} == data_before
    assert not [f for f in scene.listing() if scene.instant in f]
    scene.assert_reads_committed()
