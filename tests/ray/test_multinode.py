"""A 2-node local Ray cluster places writers on both nodes and yields the same table."""

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
    nodes = json.loads(out.stdout.strip().splitlines()[-1])["nodes"]
    assert nodes["writer-0"] != nodes["writer-1"], f"writers share a node: {nodes}"
    t = hudi_rs_read(path)
    assert t.num_rows == 2000
    assert sorted(t.column("key").to_pylist()) == sorted(f"k{i}" for i in range(2000))
