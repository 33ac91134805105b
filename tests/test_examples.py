"""The examples run as a user runs them: each one's ``--quick`` mode in its own process.

Each example starts (or, with ``RAY_ADDRESS``, joins) its own Ray, so each pays Ray's start-up
(a few seconds); the Spark one also starts a RayDP Spark session (tens of seconds). Every
example checks what it read back and exits non-zero when it is wrong.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TIMEOUT_S = 300


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python examples/<name> --quick``; fails the test with its output when it fails."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--quick", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=EXAMPLES.parent,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    took = time.perf_counter() - t0
    assert proc.returncode == 0, (
        f"{name} exited {proc.returncode} after {took:.1f} s\n--- stdout\n{proc.stdout[-4000:]}"
        f"\n--- stderr\n{proc.stderr[-4000:]}"
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    return proc


@pytest.mark.ray
def test_quickstart() -> None:
    out = run_example("quickstart.py").stdout
    assert "1. inserted 8 trips" in out
    assert "snapshot of " in out and ": 7 rows" in out
    assert "ok: the snapshot is what the commits left" in out
    printed = out[out.index("snapshot of ") :]
    for uuid in ("t1", "t3", "t4", "t6", "t7", "t8", "t9"):
        assert f" {uuid} " in printed
    assert " t2 " not in printed and " t5 " not in printed  # deleted


@pytest.mark.ray
def test_streaming_upsert() -> None:
    out = run_example("streaming_upsert.py").stdout
    assert out.count("checkpoint ") >= 4
    assert "ok: the snapshot equals the stream's last-writer-wins result" in out


@pytest.mark.ray
def test_cluster_job() -> None:
    out = run_example("cluster_job.py").stdout
    assert "running on " in out
    assert "ok: 20,000 events, 4,000 upserted" in out


@pytest.mark.spark
def test_spark_to_hudi() -> None:
    from hoodie_ray.exceptions import HoodieError
    from hoodie_ray.spark import check_java

    try:
        import pyspark  # noqa: F401
        import raydp  # noqa: F401

        check_java()
    except (ImportError, HoodieError) as e:
        pytest.skip(f"the Spark example needs Java 17, raydp and pyspark: {e}")
    proc = run_example("spark_to_hudi.py")
    out = proc.stdout
    assert "wrote 1000 trips from Spark" in out
    assert "ok: 1000 trips, 100 upserted" in out
    # A healthy run prints only what matters: no log4j "ERROR StatusConsoleListener" from the
    # Spark driver JVM, no Ray C++ INFO lines from RayDP's JVMs, no Ray Data "will hang"
    # warning, no pyspark sql_ctx deprecation warning from RayDP.
    printed = (proc.stdout + proc.stderr).splitlines()
    noise = [
        line
        for line in printed
        if "ERROR" in line
        or "Traceback" in line
        or "will hang" in line
        or "sql_ctx" in line
        or "GcsClient" in line
    ]
    assert not noise, "\n".join(noise)
