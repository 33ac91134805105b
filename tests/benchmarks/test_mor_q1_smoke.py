"""Smoke tests of the mor-q1 harness at tiny sizes: data, baselines, gate, report.

No Ray, no hoodie_ray, no timing assertions: these check that the harness computes the right
things, not how fast anything is.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from benchmarks.common import (
    PARTITIONS,
    CpuMeter,
    GateResult,
    check_gate,
    expected_snapshot,
    generate_workload,
    is_ray_worker_cmdline,
    lww_dedup,
    split_rows,
    table_file_stats,
)
from benchmarks.mor_q1 import (
    JSON_KEYS,
    HoodieRun,
    Results,
    compaction_floor,
    main,
    parse_args,
    render_report,
    run_baselines,
)

TINY_KEYS = 300


def tiny(variant: str = "base", seed: int = 7):
    return generate_workload(variant, num_keys=TINY_KEYS, num_commits=3, seed=seed)


def test_base_workload_shape_and_key_counts() -> None:
    w = tiny()
    assert w.shape == "q1"
    assert w.schema.names == ["key", "ts", "name", *[f"c{i}" for i in range(10)]]
    assert len(w.commits) == 3
    assert w.num_rows == 3 * TINY_KEYS
    allrows = pa.concat_tables(w.commits)
    keys, counts = np.unique(allrows["key"].to_numpy(), return_counts=True)
    assert keys.tolist() == list(range(TINY_KEYS))
    assert (counts == 3).all()
    ts = allrows["ts"].to_numpy()
    assert (np.diff(ts) > 0).all()
    names = allrows["name"].to_pylist()
    assert names == [f"item_{k % 1_000_003}" for k in allrows["key"].to_pylist()]
    # shuffled, not sorted
    assert not (np.diff(allrows["key"].to_numpy()) >= 0).all()


def test_workload_is_deterministic() -> None:
    a, b, c = tiny(seed=1), tiny(seed=1), tiny(seed=2)
    assert all(x.equals(y) for x, y in zip(a.commits, b.commits, strict=True))
    assert not a.commits[0].equals(c.commits[0])


def test_variants() -> None:
    p = tiny("partitioned")
    allp = pa.concat_tables(p.commits)
    assert p.partition_field == "p"
    assert (allp["p"].to_numpy() == allp["key"].to_numpy() % PARTITIONS).all()

    z = generate_workload("zipf", num_keys=1000, num_commits=4, seed=3)
    bulk = z.commits[0]["key"].to_numpy()
    assert sorted(bulk.tolist()) == list(range(1000))
    seen = set(bulk.tolist())
    for c in z.commits[1:]:
        keys = c["key"].to_numpy()
        updates = [k for k in keys.tolist() if k in seen]
        assert len(updates) == round(len(keys) * 0.25)
        seen.update(keys.tolist())
    assert z.num_keys == len(seen)

    s = tiny("s20")
    assert s.shape == "s20"
    assert s.schema.names == ["key", "ts", *[f"s{i}" for i in range(20)]]
    s0 = s.commits[0]["s0"].to_pylist()
    assert all(len(v) == 10 and set(v) <= set("0123456789abcdef") for v in s0)

    a = tiny("append")
    keys = pa.concat_tables(a.commits)["key"].to_numpy()
    assert len(np.unique(keys)) == len(keys) == a.num_keys
    assert a.operation == "insert"


def test_lww_dedup() -> None:
    t = pa.table({"key": [2, 1, 2, 1, 3], "ts": [1, 2, 5, 4, 3], "v": ["a", "b", "c", "d", "e"]})
    out = lww_dedup(t)
    assert out.to_pydict() == {"key": [1, 2, 3], "ts": [4, 5, 3], "v": ["d", "c", "e"]}
    assert lww_dedup(t, order=None).to_pydict()["v"] == ["d", "c", "e"]


def test_split_rows() -> None:
    t = pa.table({"k": list(range(10)), "p": [i % 3 for i in range(10)]})
    parts = split_rows(t, 3)
    assert [x.num_rows for x in parts] == [3, 3, 4]
    by = split_rows(t, 0, by="p")
    assert sorted(set(x["p"].to_pylist()[0] for x in by)) == [0, 1, 2]
    assert sum(x.num_rows for x in by) == 10


EXPECTED = pa.table(
    {
        "key": pa.array([1, 2, 3], pa.int64()),
        "ts": pa.array([10, 20, 30], pa.int64()),
        "name": ["item_1", "item_2", "item_3"],
        "c0": pa.array([7, 8, 9], pa.int64()),
    }
)


def hudi_like(t: pa.Table) -> pa.Table:
    """What a hudi-rs snapshot looks like: meta columns first, rows in any order."""
    out = t.take(pa.array(np.arange(t.num_rows)[::-1]))
    out = out.add_column(0, "_hoodie_record_key", pc.cast(out["key"], pa.string()))
    out = out.add_column(0, "_hoodie_commit_time", pa.array(["001"] * out.num_rows))
    return out.set_column(
        out.schema.get_field_index("name"), "name", pc.cast(out["name"], pa.large_string())
    )


def test_gate_passes_on_equal_snapshot() -> None:
    g = check_gate(hudi_like(EXPECTED), EXPECTED)
    assert g.passed, g.reason


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda t: t.set_column(3, "c0", pa.array([7, 8, 0], pa.int64())), "'c0'"),
        (lambda t: t.slice(0, 2), "missing"),
        (lambda t: pa.concat_tables([t, t.slice(0, 1)]), "more than once"),
        (lambda t: t.drop_columns(["ts"]), "lacks columns"),
        (lambda t: t.set_column(1, "ts", pa.array([10, 20, 29], pa.int64())), "'ts'"),
    ],
)
def test_gate_fails(mutate, needle: str) -> None:
    g = check_gate(hudi_like(mutate(EXPECTED)), EXPECTED)
    assert not g.passed
    assert needle in g.reason


def test_expected_snapshot_matches_dedup_by_max_ts() -> None:
    w = tiny()
    exp = expected_snapshot(w)
    assert exp.num_rows == TINY_KEYS
    allrows = pa.concat_tables(w.commits)
    last_ts = {}
    for k, ts in zip(allrows["key"].to_pylist(), allrows["ts"].to_pylist(), strict=True):
        last_ts[k] = max(ts, last_ts.get(k, ts))
    assert dict(zip(exp["key"].to_pylist(), exp["ts"].to_pylist(), strict=True)) == last_ts


def test_compaction_floor_writes_the_expected_table(tmp_path: Path) -> None:
    w = tiny()
    m = compaction_floor(w, tmp_path, 2)
    assert m.ok and m.rows == TINY_KEYS
    out = pq.read_table(tmp_path / "out")
    g = check_gate(out, expected_snapshot(w))
    assert g.passed, g.reason


def test_baselines_run(tmp_path: Path) -> None:
    w = tiny()
    skip_peers = importlib.util.find_spec("deltalake") is None
    b = run_baselines(w, tmp_path, files=2, skip_peers=skip_peers)
    for name in ("parquet", "avro", "compaction", *(() if skip_peers else ("delta",))):
        assert b[name].ok, (name, b[name].error)
        assert b[name].usage is not None and b[name].usage.workers_cpu_s == 0
    assert b["parquet"].extra["files"] == 6
    if not skip_peers:
        assert b["delta"].extra["final_rows"] == TINY_KEYS


def test_cpu_meter_without_ray() -> None:
    with CpuMeter() as m:
        sum(range(1000))
    assert m.usage is not None
    assert m.usage.processes == () and m.usage.workers_cpu_s == 0


def test_ray_worker_cmdline() -> None:
    assert is_ray_worker_cmdline(["ray::IDLE"])
    assert is_ray_worker_cmdline(["ray::StreamWriter.write   "])
    assert is_ray_worker_cmdline(["/usr/bin/python", "/x/ray/_private/workers/default_worker.py"])
    assert is_ray_worker_cmdline(
        ["java", "-cp", "x.jar", "io.ray.runtime.runner.worker.DefaultWorker"]
    )
    assert not is_ray_worker_cmdline(["ray::DashboardAgent"])
    assert not is_ray_worker_cmdline(["/x/raylet", "--raylet_socket_name=/tmp"])
    assert not is_ray_worker_cmdline([])


def test_table_file_stats(tmp_path: Path) -> None:
    (tmp_path / ".hoodie").mkdir()
    (tmp_path / ".hoodie" / "hoodie.properties").write_text("x=1\n")
    (tmp_path / "fg1-0_0-1-1_001.parquet").write_bytes(b"PAR1")
    (tmp_path / ".fg1-0_001.log.1_0-1-1").write_bytes(b"#HUDI#aaaa#HUDI#bb")
    (tmp_path / ".fg2-0_002.log.1_0-1-1").write_bytes(b"#HUDI#")
    s = table_file_stats(tmp_path)
    assert (s["file_groups"], s["base_files"], s["log_files"], s["log_blocks"]) == (2, 1, 2, 3)


def _results(tmp_path: Path, **kw) -> Results:
    args = parse_args(["--quick", "--skip-peers"])
    w = tiny()
    b = run_baselines(w, tmp_path, files=2, skip_peers=True)
    return Results(
        args,
        w,
        {"cores": 2, "cpu_model": "x", "memory_gb": 1, "python": "3", "date": "d"},
        0.0,
        baselines=b,
        **kw,
    )


def test_report_when_hoodie_is_unavailable(tmp_path: Path) -> None:
    res = _results(tmp_path, hoodie_error="ImportError: no HoodieStreamWriter")
    out = res.to_json()
    assert out["gate"] == "fail"
    assert set(JSON_KEYS) <= set(out)
    assert out["rows_per_cpu_s_parquet"] is None
    assert out["baselines"]["parquet"]["rows_per_cpu_s"] is not None
    text = render_report(res)
    assert "hoodie_ray: unavailable (ImportError: no HoodieStreamWriter)" in text
    assert "parquet floor" in text


def test_report_withholds_figures_of_a_wrong_table(tmp_path: Path) -> None:
    run = HoodieRun("parquet", 2, str(tmp_path / "t"))
    run.gate_ingest = GateResult(False, "1 keys missing", 3, 2)
    res = _results(tmp_path, runs=[run])
    out = res.to_json()
    assert out["gate"] == "fail" and "1 keys missing" in out["gate_reason"]
    assert all(out[k] is None for k in JSON_KEYS[1:])
    assert "baselines" not in out
    text = render_report(res)
    assert "figures withheld" in text and "parquet floor" not in text


def test_main_without_hoodie_prints_json_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "--quick",
            "--scale",
            "0.002",
            "--skip-hoodie",
            "--skip-peers",
            "--json",
            "--workdir",
            str(tmp_path / "wd"),
        ]
    )
    assert rc == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    out = json.loads(last)
    assert set(JSON_KEYS) <= set(out)
    assert out["gate"] == "fail" and out["K"] == 400 and out["N"] == 1200
    assert out["shape"] == "q1" and out["cores"] and out["date"]
    assert not (tmp_path / "wd").exists()


def test_args() -> None:
    a = parse_args(["--variant", "zipf", "--writers", "1"])
    assert isinstance(a, argparse.Namespace)
    assert a.variant == "zipf" and a.writers == 1 and a.formats == ["parquet", "avro"]


@pytest.mark.ray
@pytest.mark.parametrize("table_version", [6, 8])
def test_end_to_end_tiny_hoodie_ray_ingest_passes_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ray_session, table_version: int
) -> None:
    """The whole benchmark at a tiny size against the real writer, on both table versions:
    single-process and Ray ingest (parquet log blocks), snapshot reads, compaction, and the
    hudi-rs gate. Checks correctness and the report's shape only, never a timing."""
    pytest.importorskip("hudi")
    rc = main(
        [
            "--quick",
            "--scale",
            "0.002",  # K = 400 keys, N = 1,200 records in 6 commits
            "--skip-peers",
            "--json",
            "--formats",
            "parquet",
            "--no-scaling",
            "--floor-repeats",
            "1",
            "--batch-rows",
            "100",
            "--table-version",
            str(table_version),
            "--keep",
            "--workdir",
            str(tmp_path / "wd"),
        ]
    )
    out_text = capsys.readouterr().out
    last = json.loads(out_text.strip().splitlines()[-1])
    assert rc == 0, last.get("gate_reason")
    assert last["gate"] == "pass", last["gate_reason"]
    assert last["hoodie_ray"] == "ran" and last["N"] == 1200
    assert last["table_version"] == table_version
    tables = sorted((tmp_path / "wd").glob("hudi_*/.hoodie/hoodie.properties"))
    assert len(tables) == 2  # the single-process and the Ray table
    for props in tables:
        assert f"hoodie.table.version={table_version}\n" in props.read_text()
    (run,) = last["hoodie_runs"]
    assert run["commits"] == 6
    assert (
        run["gate_ingest"] == run["gate_compacted"] == "snapshot equals the last-writer-wins dedup"
    )
    assert run["read_check"] == "snapshot equals the last-writer-wins dedup"
    assert {c["format"] for c in last["client_runs"]} == {"parquet"}
    for k in ("rows_per_cpu_s_parquet", "efficiency_parquet", "client_efficiency_parquet"):
        assert isinstance(last[k], float) and last[k] > 0, k
    assert "hoodie_ray ingest" in out_text and "single process" in out_text
    import ray

    assert ray.is_initialized()  # the session's Ray is reused, not shut down
