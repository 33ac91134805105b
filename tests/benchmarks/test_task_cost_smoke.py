"""Smoke test of the in-process task-cost benchmark at a tiny size: each width over its own
table and over a table another width seeded (``--seed-tasks``). It checks that the replay
writes the right table (hudi-rs reads the last-writer-wins dedup of the commits, every width,
seeded or not) and the report's structure, not how fast anything is."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pytest

from benchmarks import task_cost
from benchmarks.common import Workload, expected_snapshot, generate_workload
from tests.conftest import hudi_rs_read

ROWS = 3_000


@pytest.fixture(scope="module")
def workload() -> Workload:
    wl = generate_workload("base", quick=True)
    return dataclasses.replace(wl, commits=tuple(c.slice(0, ROWS) for c in wl.commits[:3]))


def _model(table: pa.Table, columns: list[str]) -> pa.Table:
    return table.select(columns).sort_by("key")


@pytest.mark.parametrize(("tasks", "seed_tasks"), [(1, 0), (3, 0), (1, 3), (3, 3)])
def test_the_replay_writes_the_table_hudi_rs_reads(
    workload: Workload, tmp_path: Path, tasks: int, seed_tasks: int
) -> None:
    timer = task_cost.StageTimer()
    run = task_cost.replay(workload, tasks, 2, tmp_path, timer, seed_tasks)
    assert run["tasks"] == tasks and run["rows"] == 2 * ROWS
    want = expected_snapshot(workload)
    got = hudi_rs_read(tmp_path / f"t{tasks}")
    assert _model(got, want.column_names).equals(_model(want, want.column_names))
    groups = set(got["_hoodie_file_name"].to_pylist())
    file_groups = {name.split("_")[0].lstrip(".") for name in groups}
    # the first commit's inserts: one file group a task of the width that wrote them
    assert len(file_groups) == (seed_tasks or tasks)


def test_the_report_names_the_seed(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--tasks", "1,2", "--rows", "2000", "--repeat", "1", "--seed-tasks", "2", "--json"]
    assert task_cost.main(args) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    res = json.loads(line)
    assert res["workload"]["seed_tasks"] == 2
    assert [r["tasks"] for r in res["runs"]] == [1, 2]
    assert all(r["rows_per_cpu_s"] > 0 for r in res["runs"])
