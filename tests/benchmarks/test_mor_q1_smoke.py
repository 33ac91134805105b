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
    CpuUsage,
    GateResult,
    LastWriterWins,
    ProcessUsage,
    ScaleWorkload,
    check_gate,
    expected_snapshot,
    generate_workload,
    is_ray_worker_cmdline,
    lww_dedup,
    scale_sizes,
    split_rows,
    table_file_stats,
)
from benchmarks.mor_q1 import (
    JSON_KEYS,
    HoodieRun,
    Results,
    combine_usage,
    compaction_floor,
    hoodie_options,
    iceberg_upsert_peer,
    main,
    parse_args,
    render_report,
    role_peaks,
    run_baselines,
    run_scale_peer,
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
    assert 0 <= m.usage.system_cpu_s <= m.usage.total_cpu_s
    assert m.usage.user_cpu_s == m.usage.total_cpu_s - m.usage.system_cpu_s


def test_system_time_is_a_part_of_the_cpu_time() -> None:
    """The kernel's part of a process's CPU is counted apart (and never more than the whole)."""
    p = ProcessUsage(1, "ray::WriterActor", 1.0, 3.0, sys_start_s=0.5, sys_last_s=1.0)
    assert p.cpu_s == 2.0 and p.system_cpu_s == 0.5
    odd = ProcessUsage(2, "ray::WriterActor", 1.0, 1.2, sys_start_s=0.0, sys_last_s=1.0)
    assert odd.system_cpu_s == pytest.approx(0.2)  # psutil's ticks: capped at the whole
    u = CpuUsage(1.0, 0.5, 2.0, 0.0, 1, (p,), system_cpu_s=0.75)
    assert u.total_cpu_s == 2.5 and u.user_cpu_s == 1.75


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


def _run_main(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict, str]:
    """``main(argv)``: its exit code, its last stdout line (the JSON report) and its stdout."""
    rc = main(argv)
    out_text = capsys.readouterr().out
    return rc, json.loads(out_text.strip().splitlines()[-1]), out_text


def test_main_without_hoodie_prints_json_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = _run_main(
        capsys,
        [
            "--quick",
            "--scale",
            "0.002",
            "--skip-hoodie",
            "--skip-peers",
            "--json",
            "--workdir",
            str(tmp_path / "wd"),
        ],
    )
    assert rc == 1
    assert set(JSON_KEYS) <= set(out)
    assert out["gate"] == "fail" and out["K"] == 400 and out["N"] == 1200
    assert out["shape"] == "q1" and out["cores"] and out["date"]
    assert not (tmp_path / "wd").exists()


def test_args() -> None:
    a = parse_args(["--variant", "zipf", "--writers", "1"])
    assert isinstance(a, argparse.Namespace)
    assert a.variant == "zipf" and a.writers == 1 and a.formats == ["parquet", "avro"]
    assert a.options == {}
    ri = "hoodie.metadata.record.index.enable"
    a = parse_args(["--variant", "scale", "--option", f"{ri}=true", "--option", "write.tasks=4"])
    assert a.options == {ri: "true", "write.tasks": "4"}
    opts = hoodie_options(tiny_scale().as_workload(), "parquet", 2, "t", 8, 1, a.options)
    assert opts[ri] == "true" and opts["write.tasks"] == "4"  # added last: they override
    assert opts["hoodie.write.table.version"] == "8"
    with pytest.raises(SystemExit):
        parse_args(["--option", "novalue"])


@pytest.mark.ray
@pytest.mark.slow  # suite time: the scaling, history and micro smokes run the same writers
@pytest.mark.parametrize("table_version", [6, 8])
def test_end_to_end_tiny_hoodie_ray_ingest_passes_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ray_session, table_version: int
) -> None:
    """The whole benchmark at a tiny size against the real writer, on both table versions:
    single-process and Ray ingest (parquet log blocks), snapshot reads, compaction, and the
    hudi-rs gate. Checks correctness and the report's shape only, never a timing."""
    pytest.importorskip("hudi")
    rc, last, out_text = _run_main(
        capsys,
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
        ],
    )
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


@pytest.mark.ray
@pytest.mark.slow  # suite time: a benchmark peer, not hoodie_ray; run with the benchmarks
@pytest.mark.skipif(
    importlib.util.find_spec("pyiceberg") is None,
    reason="the iceberg peer needs pyiceberg: pip install -e '.[bench]' (CI has only .[dev])",
)
def test_iceberg_upsert_peer_tiny(tmp_path: Path, ray_session) -> None:
    """The Ray Data + pyiceberg peer at a tiny size (300 keys x 3 commits): first commit
    appended, the others upserted; the Iceberg table read back equals the last-writer-wins
    dedup of the input. Correctness only, never a timing. Skipped before the session's Ray
    starts when pyiceberg is absent."""
    from pyiceberg.catalog import load_catalog

    w = tiny()
    m = iceberg_upsert_peer(w, tmp_path, blocks=2)
    assert m.ok, m.error
    assert m.rows == 3 * TINY_KEYS
    assert m.extra["final_rows"] == TINY_KEYS
    assert len(m.extra["commit_s"]) == 3
    assert m.usage is not None and m.usage.total_cpu_s > 0
    warehouse = tmp_path / "iceberg"
    catalog = load_catalog(
        "mor_q1",
        type="sql",
        uri=f"sqlite:///{warehouse / 'catalog.db'}",
        warehouse=f"file://{warehouse}",
    )
    table = catalog.load_table("bench.mor_q1")
    g = check_gate(table.scan().to_arrow(), expected_snapshot(w))
    assert g.passed, g.reason


# -- the scale variant (issue 23) -------------------------------------------------------------


def tiny_scale(bulk: int = 60, rows: int = 9) -> ScaleWorkload:
    return ScaleWorkload(bulk, rows, num_upserts=4, seed=5, chunk_rows=25)


def test_scale_workload_commits() -> None:
    sw = tiny_scale()
    assert scale_sizes(quick=False) == (20_000_000, 2_000_000, 1_000_000)
    assert scale_sizes(quick=True) == (2_000_000, 200_000, 100_000)
    assert scale_sizes(quick=False, scale=0.01) == (200_000, 20_000, 10_000)
    chunks = list(sw.bulk())
    assert [c.num_rows for c in chunks] == [25, 25, 10] and sw.num_chunks == 3
    bulk = pa.concat_tables(chunks)
    assert sorted(bulk["key"].to_pylist()) == list(range(60))
    seen = set(range(60))
    ts_all = [bulk["ts"].to_numpy()]
    for j in range(sw.num_upserts):
        c = sw.upsert(j)
        keys = c["key"].to_pylist()
        assert c.schema == sw.schema and len(keys) == 9 == len(set(keys))
        updates = [k for k in keys if k < sw.keys_before(j)]
        assert len(updates) == 6 and set(updates) <= seen  # 2/3 updates of written keys
        assert sorted(set(keys) - seen) == list(range(sw.keys_before(j), sw.keys_before(j) + 3))
        seen.update(keys)
        ts_all.append(c["ts"].to_numpy())
    assert len(seen) == sw.num_keys == 72
    assert (np.diff(np.concatenate(ts_all)) == 1).all()  # one ts per record, in commit order
    # each commit from its own seed: made alone, in any order, it is the same
    assert tiny_scale().upsert(2).equals(sw.upsert(2))
    assert not sw.upsert(2).equals(sw.upsert(3))
    # the peers' view: bulk load + upserts, made when indexed, sizes known without making any
    view = sw.as_workload()
    assert (view.num_rows, view.num_keys, len(view.commits)) == (60 + 36, 72, 5)
    assert view.schema == sw.schema and view.operation == "upsert"
    assert [c.num_rows for c in view.commits] == [60, 9, 9, 9, 9]
    assert view.commits[-1].equals(sw.upsert(3))
    with pytest.raises(ValueError, match="commit by commit"):
        generate_workload("scale")


def test_last_writer_wins_gate_agrees_with_check_gate() -> None:
    sw = tiny_scale()
    commits = [*sw.bulk(), *(sw.upsert(j) for j in range(sw.num_upserts))]
    lw = LastWriterWins(sw.num_keys)
    for c in commits:
        lw.add(c)
    exp = lww_dedup(pa.concat_tables(commits))
    assert lw.num_keys == exp.num_rows == sw.num_keys
    assert lw.columns == exp.column_names
    snap = hudi_like(exp)  # meta columns, rows reversed, name as large_string
    assert check_gate(snap, exp).passed
    got = lw.check(snap.to_batches(max_chunksize=7))
    assert got.passed, got.reason

    def breaks(t: pa.Table) -> str:
        g = lw.check([t])
        assert not g.passed and not check_gate(t, exp).passed
        return g.reason

    c0 = exp["c0"].to_numpy().copy()
    c0[5] += 1
    assert "other columns differ" in breaks(exp.set_column(3, "c0", pa.array(c0)))
    names = exp["name"].to_pylist()
    names[4] = names[4] + "x"
    assert "other columns differ" in breaks(exp.set_column(2, "name", pa.array(names)))
    assert "1 keys missing" in breaks(exp.slice(1))
    assert "more than once" in breaks(pa.concat_tables([exp, exp.slice(3, 1)]))
    old = lww_dedup(pa.concat_tables(commits[:3]))  # the bulk load only: every update lost
    assert "an older record won" in breaks(pa.concat_tables([old, exp.slice(60)]))
    assert "unexpected keys" in breaks(
        pa.concat_tables([exp, exp.slice(0, 1).set_column(0, "key", pa.array([999]))])
    )


def test_scale_usage_helpers() -> None:
    def usage(wall: float, procs: tuple[ProcessUsage, ...]) -> CpuUsage:
        return CpuUsage(wall, 1.0, sum(p.cpu_s for p in procs), 0.0, 1, procs)

    a = usage(2.0, (ProcessUsage(10, "ray::WriterActor", 0.0, 1.5, 100 * 2**20),))
    b = usage(3.0, (ProcessUsage(10, "ray::IDLE", 1.0, 2.0, 300 * 2**20),))
    both = combine_usage([a, b])
    assert (both.wall_s, both.driver_cpu_s, both.workers_cpu_s) == (5.0, 2.0, 2.5)
    (p,) = both.processes
    assert (p.cpu_s, p.peak_rss_mb, p.title) == (2.5, 300.0, "ray::WriterActor")
    assert role_peaks(both, {"writer-0": 10, "writer-1": 11}) == {"writer-0": 300.0}
    assert role_peaks(None, {"writer-0": 10}) == {}
    args = parse_args(["--variant", "scale", "--quick", "--peer-timeout", "5"])
    assert args.variant == "scale" and args.peer_timeout == 5.0


def test_scale_peer_time_limit(tmp_path: Path) -> None:
    """A peer that outlives its time limit is stopped and reported, never waited for."""
    m = run_scale_peer("delta", tiny_scale(), tmp_path, 0.0)
    assert not m.ok and "time limit" in (m.error or "")


@pytest.mark.skipif(importlib.util.find_spec("deltalake") is None, reason="needs deltalake")
def test_scale_peer_delta_in_child_process(tmp_path: Path) -> None:
    sw = tiny_scale()
    m = run_scale_peer("delta", sw, tmp_path, 120.0)
    assert m.ok, m.error
    assert m.extra["final_rows"] == sw.num_keys
    assert len(m.extra["commit_s"]) == 1 + sw.num_upserts
    assert m.extra["upsert_rows_per_s"] > 0 and m.extra["peak_rss_mb"] > 0


class _ClientWriter:
    """``HoodieStreamWriter``'s surface over the single-process ``hr.HoodieWriteClient`` (one
    commit per checkpoint): the scale harness end to end without the five Ray topologies a
    real run starts (seconds each). No actors: no pids, and the index is bootstrapped at the
    first write instead of at start."""

    def __init__(self, path: str, options: dict[str, str]) -> None:
        import hoodie_ray as hr

        self.client = hr.HoodieWriteClient(path, options)
        self.rows: list[pa.Table] = []

    def __enter__(self) -> _ClientWriter:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.checkpoint()

    def close(self) -> None:
        self.checkpoint()

    def start(self, schema: pa.Schema) -> None:
        pass

    def actor_pids(self) -> dict[str, int]:
        return {}

    def write(self, batch: pa.Table) -> None:
        self.rows.append(batch)

    def checkpoint(self) -> str | None:
        if not self.rows:
            return None
        table, self.rows = pa.concat_tables(self.rows), []
        return self.client.write(table).instant

    def index_stats(self) -> list[dict[str, int]]:
        a = self.client._assigner
        return [] if a is None else [{"keys": len(a.index), "bytes": a.index.nbytes()}]

    def abort(self) -> None:
        self.rows = []


def test_scale_variant_end_to_end_without_actors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--variant scale`` at a tiny size, its jobs run by the single-process client: bulk
    insert, upserts, restart, the streaming hudi-rs gate on both tables, figures, report and
    JSON. (The Ray path: the slow test below; ``index_stats``: tests/ray.)"""
    pytest.importorskip("hudi")
    import types

    import benchmarks.mor_q1 as mor_q1

    fake = types.ModuleType("client_writer")
    fake.HoodieStreamWriter = _ClientWriter  # type: ignore[attr-defined]
    monkeypatch.setattr(mor_q1, "load_hoodie", lambda: (fake, None))
    monkeypatch.setattr(mor_q1, "_init_ray", lambda: (0.0, False))
    monkeypatch.setattr(mor_q1, "wait_for_ray_idle", lambda: 0.0)  # no Ray workers of ours
    argv = ["--variant", "scale", "--scale", "0.0001", "--skip-peers", "--json"]
    rc, last, out_text = _run_main(
        capsys, [*argv, "--batch-rows", "500", "--workdir", str(tmp_path / "wd")]
    )
    assert rc == 0, last.get("gate_reason")
    assert last["gate"] == "pass" and last["variant"] == "scale"
    assert (last["K"], last["K_reference"], last["N"], last["K_final"]) == (2000, 200, 800, 2264)
    for k in ("scale_rate_ratio", "index_bytes_per_key", "upsert_rows_per_cpu_s"):
        assert isinstance(last[k], float) and last[k] > 0, k
    assert isinstance(last["bootstrap_s"], float)  # no actors here: about 0
    assert last["speedup_vs_delta_merge_scale"] is None and last["delta_merge"].startswith("skip")
    big, ref = last["tables"]["big"], last["tables"]["reference"]
    assert big["index"][0]["keys"] == 2264 and ref["index"][0]["keys"] == 464
    assert len(big["commit_cpu_s"]) == len(big["commit_s"]) == 8
    # the upserts: every commit, and the close (what ran beside the writes finishing)
    upserts_cpu = sum(big["commit_cpu_s"]) + big["upsert_close_cpu_s"]
    assert abs(upserts_cpu - big["upserts"]["cpu_s"]) < 0.01
    assert last["options"] == {}
    assert big["restart_check_rows"] == 3 and ref["restart"] is None
    assert (
        big["gate"]
        == ref["gate"]
        == "snapshot equals the last-writer-wins dedup " + ("(per-key ts and row fingerprints)")
    )
    assert "key figures" in out_text and "restarted job" in out_text
    assert not (tmp_path / "wd").exists()

    # a writer that loses a record: the gate fails and the figures are withheld
    def lossy(self: _ClientWriter) -> str | None:
        self.rows = [t.slice(1) for t in self.rows]
        return _ClientWriter.checkpoint(self)

    monkeypatch.setattr(fake, "HoodieStreamWriter", type("Lossy", (_ClientWriter,), {}))
    monkeypatch.setattr(fake.HoodieStreamWriter, "checkpoint", lossy)
    rc, last, _ = _run_main(capsys, [*argv, "--workdir", str(tmp_path / "wd2")])
    assert rc == 1 and last["gate"] == "fail" and last["scale_rate_ratio"] is None
    assert "keys missing" in last["gate_reason"] and "tables" not in last


@pytest.mark.ray
@pytest.mark.slow
def test_end_to_end_tiny_scale_variant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ray_session
) -> None:
    """The scale variant at a tiny size against the real writer (five Ray topologies, about
    25 s: slow): bulk insert job, upsert job, restarted job, both tables through the streaming
    hudi-rs gate; the figures exist (their values are not checked)."""
    pytest.importorskip("hudi")
    rc, last, out_text = _run_main(
        capsys,
        [
            "--variant",
            "scale",
            "--scale",
            "0.0001",  # 2,000 keys, 8 x 100 upserts; reference table 200 keys
            "--skip-peers",
            "--json",
            "--batch-rows",
            "500",
            "--workdir",
            str(tmp_path / "wd"),
        ],
    )
    assert rc == 0, last.get("gate_reason")
    assert last["gate"] == "pass" and last["variant"] == "scale"
    assert (last["K"], last["K_reference"], last["N"]) == (2000, 200, 800)
    for k in ("scale_rate_ratio", "index_bytes_per_key", "bootstrap_s", "upsert_rows_per_cpu_s"):
        assert isinstance(last[k], float) and last[k] > 0, k
    assert last["speedup_vs_delta_merge_scale"] is None and last["delta_merge"].startswith("skip")
    assert set(last["peak_rss_mb_actors"]) == {"coordinator", "assigner-0", "writer-0", "writer-1"}
    big = last["tables"]["big"]
    assert big["restart"]["rows"] == big["keys_after"] == last["K_final"]
    assert big["restart_check_rows"] == 3
    assert last["tables"]["reference"]["restart"] is None
    assert "key figures" in out_text and "restarted job" in out_text
    assert not (tmp_path / "wd").exists()


def test_efficiency_rounds_give_each_ratio_and_the_ratio_of_medians(tmp_path: Path) -> None:
    """``--efficiency-rounds``: the main run's ratio first, then each round's; the summary is
    the topology's median over the client's."""
    from types import SimpleNamespace as NS

    client = NS(fmt="parquet", ingest=NS(rows_per_cpu_s=100.0))
    res = _results(tmp_path, client_runs=[client], efficiency_rounds=[(110.0, 80.0), (90.0, 90.0)])
    res.run_for = lambda fmt: NS(ingest=NS(rows_per_cpu_s=70.0))  # type: ignore[method-assign]
    got = res._efficiency_rounds()
    assert got["topology_efficiency_each"] == [0.7, round(80 / 110, 3), 1.0]
    assert got["topology_efficiency_median"] == 0.8
    assert parse_args(["--efficiency-rounds", "3"]).efficiency_rounds == 3
    assert _results(tmp_path)._efficiency_rounds() == {}
