"""Smoke tests of the pypaimon ``write_ray`` peer (benchmarks/paimon_peer.py).

The peer runs pypaimon in its own venv as a child process with its own Ray. Making that venv is
a one-time download of about a minute and a run starts a second Ray node, so the end-to-end
test is marked slow; the fast tests check the parent side (inputs, expected figures, every
failure path comes back as a dict, never raised). No timing assertions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.paimon_peer import (
    PEER_NAME,
    VENV_ENV,
    _expected_from_files,
    ensure_paimon_venv,
    parse_args,
    run_paimon_peer,
    write_q1_commits,
)

RESULT_KEYS = {
    "name",
    "rows",
    "wall_s",
    "cpu_s",
    "rows_per_s",
    "rows_per_cpu_s",
    "commit_s",
    "final_rows",
    "gate",
    "error",
}


def _commits(tmp_path: Path) -> list[Path]:
    a = pa.table({"key": [1, 2, 3], "ts": [10, 11, 12], "name": ["a", "b", "c"]})
    b = pa.table({"key": [2, 4], "ts": [20, 5], "name": ["B", "d"]})
    paths = [tmp_path / "c0.parquet", tmp_path / "c1.parquet"]
    pq.write_table(a, paths[0])
    pq.write_table(b, paths[1])
    return paths


def test_expected_figures_are_last_writer_wins(tmp_path: Path) -> None:
    files = _commits(tmp_path)
    assert _expected_from_files(files, "key", "ts") == {
        "rows": 5,
        "keys": 4,
        "order_sum": 10 + 20 + 12 + 5,
    }


def test_args() -> None:
    a = parse_args(["--rows", "2000", "--commits", "2", "--writers", "1"])
    assert (a.rows, a.commits, a.writers, a.buckets, a.child) == (2000, 2, 1, None, None)


def test_q1_commit_files(tmp_path: Path) -> None:
    files = write_q1_commits(3000, 2, tmp_path)
    assert len(files) == 2
    t = pa.concat_tables([pq.read_table(f) for f in files])
    assert t.num_rows == 3000
    assert t.column_names[:3] == ["key", "ts", "name"]
    assert _expected_from_files(files, "key", "ts")["keys"] == 1000


def test_disabled_peer_is_reported_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VENV_ENV, "off")
    assert ensure_paimon_venv(tmp_path / "venvs") is None
    r = run_paimon_peer(_commits(tmp_path), tmp_path / "w", writers=1, buckets=1)
    assert set(r) >= RESULT_KEYS
    assert (r["name"], r["rows"], r["gate"]) == (PEER_NAME, 5, "fail")
    assert "venv unavailable" in r["error"]


def test_override_without_pypaimon_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the project's own python has Ray and pyarrow but not pypaimon
    monkeypatch.setenv(VENV_ENV, sys.executable)
    assert ensure_paimon_venv(tmp_path / "venvs") is None
    monkeypatch.setenv(VENV_ENV, str(tmp_path / "no" / "python"))
    assert ensure_paimon_venv(tmp_path / "venvs") is None


def test_child_failure_is_reported_not_raised(tmp_path: Path) -> None:
    # a python that cannot import pypaimon: the child reports the error as its result line
    r = run_paimon_peer(
        _commits(tmp_path), tmp_path / "w", writers=1, buckets=1, python=Path(sys.executable)
    )
    assert r["gate"] == "fail"
    assert "pypaimon" in r["error"]
    assert r["rows"] == 5


def test_bad_arguments_are_reported(tmp_path: Path) -> None:
    assert run_paimon_peer([], tmp_path, writers=1, buckets=1)["error"] == "no commit files"
    r = run_paimon_peer(_commits(tmp_path), tmp_path, writers=0, buckets=1)
    assert r["gate"] == "fail" and "writers" in r["error"]


@pytest.fixture
def paimon_python() -> Path:
    """The pypaimon venv's python (made on first use); skips where it cannot be made."""
    python = ensure_paimon_venv()
    if python is None:
        pytest.skip("the pypaimon venv cannot be made here (offline?); see the log")
    return python


@pytest.mark.slow
def test_peer_writes_and_reads_back(tmp_path: Path, paimon_python: Path) -> None:
    files = write_q1_commits(3000, 2, tmp_path / "input")
    r = run_paimon_peer(files, tmp_path / "peer", writers=1, buckets=2, timeout_s=600)
    assert r["error"] is None, r
    assert r["gate"] == "pass"
    assert r["rows"] == 3000
    assert r["final_rows"] == _expected_from_files(files, "key", "ts")["keys"]
    assert len(r["commit_s"]) == 2
    assert r["wall_s"] > 0 and r["cpu_s"] > 0


@pytest.mark.slow
def test_timeout_kills_the_child_and_its_ray(tmp_path: Path, paimon_python: Path) -> None:
    import psutil

    # six commits take well over 10 s (each starts Ray Data shuffle actors): killed mid-run,
    # with the child's Ray node up
    files = write_q1_commits(18_000, 6, tmp_path / "input")
    workdir = (tmp_path / "peer").resolve()
    r = run_paimon_peer(files, workdir, writers=1, buckets=1, timeout_s=10, python=paimon_python)
    assert r["gate"] == "fail" and "timed out" in r["error"]
    # the child and the Ray processes it started ran in workdir: none is left
    left = []
    for p in psutil.process_iter(["cwd"]):
        if p.info.get("cwd") == str(workdir):
            left.append(p)
    assert not left, left
