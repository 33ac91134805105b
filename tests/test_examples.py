"""The examples, each in its ``--quick`` mode. Every example checks what it read back and
returns (exits) non-zero when it is wrong.

The quickstart runs as a user runs it, in its own process, joining the session's Ray through
``RAY_ADDRESS`` as a script on a cluster does (a Ray of its own cost ~20 s of the suite on 2
cores; every other example test here shares the session's Ray too). The others run in this
process on the session's Ray (``ensure_ray`` and ``init_spark`` reuse what runs, as they do in a
user's notebook): a process of their own would pay Ray's start-up again, and the Spark one a
RayDP session (tens of seconds). The Spark example, in this process and in its own (with its
check that the JVMs print nothing alarming), runs under ``-m slow``: the suite's Spark tests
cover its writes.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TIMEOUT_S = 300


def run_example(
    name: str, *args: str, ray_address: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python examples/<name> --quick`` (on the Ray at ``ray_address`` if given); fails the
    test with its output when it fails."""
    env = dict(os.environ)
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
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


def load_example(name: str) -> ModuleType:
    """``examples/<name>`` imported as a module (its ``main`` and ``run`` callable in-process)."""
    spec = importlib.util.spec_from_file_location(f"example_{Path(name).stem}", EXAMPLES / name)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.ray
def test_quickstart(ray_session: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """In this process (the session's Ray); as a script of its own with -m slow."""
    from hoodie_ray.ray import stream

    try:
        assert load_example("quickstart.py").main(["--quick"]) == 0
    finally:
        stream.release_warm_writers()
    _check_quickstart(capsys.readouterr().out)


@pytest.mark.slow  # suite time: test_quickstart runs the same in-process
@pytest.mark.ray
def test_quickstart_as_a_script(ray_session: Any) -> None:
    out = run_example(
        "quickstart.py", ray_address=ray_session.get_runtime_context().gcs_address
    ).stdout
    _check_quickstart(out)


def _check_quickstart(out: str) -> None:
    assert "1. inserted 8 trips" in out
    assert "snapshot of " in out and ": 7 rows" in out
    assert "ok: the snapshot is what the commits left" in out
    printed = out[out.index("snapshot of ") :]
    for uuid in ("t1", "t3", "t4", "t6", "t7", "t8", "t9"):
        assert f" {uuid} " in printed
    assert " t2 " not in printed and " t5 " not in printed  # deleted


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
@pytest.mark.ray
def test_streaming_upsert(ray_session: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert load_example("streaming_upsert.py").main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert out.count("checkpoint ") >= 4
    assert "ok: the snapshot equals the stream's last-writer-wins result" in out


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
@pytest.mark.ray
def test_cluster_job(ray_session: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert load_example("cluster_job.py").main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "running on " in out
    assert "ok: 20,000 events, 4,000 upserted" in out


@pytest.mark.slow  # ~30 s of Spark on 2 cores; tests/test_spark_write.py covers the same writes
@pytest.mark.spark
def test_spark_to_hudi(
    spark_session: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_example("spark_to_hudi.py")
    assert example.run(spark_session, str(tmp_path / "spark_trips"), 1000) == 0
    out = capsys.readouterr().out
    assert "wrote 1000 trips from Spark" in out
    assert "ok: 1000 trips, 100 upserted" in out


@pytest.mark.slow
@pytest.mark.spark
def test_spark_to_hudi_process() -> None:
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
