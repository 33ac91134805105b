"""A 2-node local Ray cluster places writers on both nodes (an explicitly sized topology, and
the default chained one) and yields the same table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import hudi_rs_read

pytestmark = pytest.mark.ray


def test_two_node_cluster(tmp_path):
    path = tmp_path / "t"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("two_node_job.py")), str(path)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    nodes, tasks = report["nodes"], report["tasks"]
    assert nodes["writer-0"] != nodes["writer-1"], f"writers share a node: {nodes}"
    # the default topology: its two chained tasks on the two nodes, each writing rows
    assert tasks["task-0"]["node"] != tasks["task-1"]["node"], f"tasks share a node: {tasks}"
    assert all(t["rows"] > 0 for t in tasks.values()), tasks
    for table in (path, tmp_path / "t_default"):
        t = hudi_rs_read(table)
        assert t.num_rows == 2000
        assert sorted(t.column("key").to_pylist()) == sorted(f"k{i}" for i in range(2000))
