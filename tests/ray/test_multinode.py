"""A 2-node local Ray cluster: the default topology's tasks on both nodes, each writing, and
the table right."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import hudi_rs_read

pytestmark = pytest.mark.ray


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
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
    tasks = json.loads(out.stdout.strip().splitlines()[-1])["tasks"]
    # the default topology: its two chained tasks on the two nodes, each writing rows
    assert tasks["task-0"]["node"] != tasks["task-1"]["node"], f"tasks share a node: {tasks}"
    assert all(t["rows"] > 0 for t in tasks.values()), tasks
    t = hudi_rs_read(path)
    assert t.num_rows == 2000
    assert sorted(t.column("key").to_pylist()) == sorted(f"k{i}" for i in range(2000))
