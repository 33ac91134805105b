"""Smoke test of the history harness at a tiny size: client mode, 150 commits of 50 rows.

No Ray and no timing assertions: it checks the report's structure and that the table the run
wrote reads back with one row per distinct key written, not how fast anything is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.history import (
    WINDOW_HEADERS,
    Upserts,
    hoodie_file_counts,
    main,
    parse_args,
)

COMMITS, ROWS, KEYS, WINDOW = 60, 50, 2_000, 20  # (suite time: was 150 commits, windows of 50)


def test_args() -> None:
    a = parse_args(["--quick", "--option", "hoodie.keep.max.commits=30", "--option", "a=b=c"])
    assert (a.commits, a.checkpoints, a.rows, a.keys, a.window) == (600, 300, 200, 20_000, 100)
    assert a.options == {"hoodie.keep.max.commits": "30", "a": "b=c"}
    assert parse_args(["--commits", "7"]).commits == 7
    with pytest.raises(SystemExit):
        parse_args(["--rows", "10", "--keys", "5"])
    with pytest.raises(SystemExit):
        parse_args(["--option", "novalue"])


def test_upserts_are_distinct_keys_with_rising_ts() -> None:
    u = Upserts(100, 40, seed=1)
    seen: set[str] = set()
    last_ts = -1
    for _ in range(5):
        batch, inserts = u.batch()
        keys = batch["uuid"].to_pylist()
        assert len(set(keys)) == 40
        assert inserts == len(set(keys) - seen)
        seen.update(keys)
        assert min(batch["ts"].to_pylist()) > last_ts
        last_ts = max(batch["ts"].to_pylist())
    assert u.distinct_keys == len(seen)
    assert sorted(u.expected()["uuid"].to_pylist()) == sorted(seen)


def test_hoodie_file_counts_skip_the_archive(tmp_path: Path) -> None:
    h = tmp_path / ".hoodie"
    for f in ("1.deltacommit", "archived/.commits_.archive.1_1-0-1", "timeline/2.commit"):
        (h / f).parent.mkdir(parents=True, exist_ok=True)
        (h / f).write_text("x")
    (h / "timeline" / "history").mkdir()
    (h / "timeline" / "history" / "a.parquet").write_text("x")
    (h / ".aux").mkdir()
    assert hoodie_file_counts(tmp_path) == (2, {".": 1, "timeline": 1}, 2)


def test_client_run_report_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import hoodie_ray as hr

    results = tmp_path / "results"
    rc = main(
        [
            "--mode",
            "client",
            "--commits",
            str(COMMITS),
            "--rows",
            str(ROWS),
            "--keys",
            str(KEYS),
            "--window",
            str(WINDOW),
            "--path",
            str(tmp_path / "tables"),
            "--results-dir",
            str(results),
            "--json",
        ]
    )
    out_text = capsys.readouterr().out
    assert rc == 0, out_text
    out = json.loads(out_text.strip().splitlines()[-1])
    (saved,) = results.glob("history-client-*.json")
    assert json.loads(saved.read_text())["windows"] == out["windows"]
    assert all(h in out_text for h in WINDOW_HEADERS)

    assert out["mode"] == "client" and out["error"] is None
    assert out["commits_done"] == COMMITS and len(out["commit_latencies_s"]) == COMMITS
    assert [(w["first"], w["last"]) for w in out["windows"]] == [(1, 20), (21, 40), (41, 60)]
    for w in out["windows"]:
        assert w["mean_s"] > 0 and w["max_s"] >= w["p95_s"] >= w["p50_s"] > 0
        assert w["hoodie_files"] > 0 and w["archive_files"] >= 0 and w["data_files"] > 0
        assert sum(w["hoodie_files_by_dir"].values()) == w["hoodie_files"]
    assert isinstance(out["growth_ratio"], float) and out["growth_ratio"] > 0
    assert set(out["targets"]) == {"growth_ratio_le_target", "hoodie_files_bounded", "read_back"}
    assert out["hoodie_files_last"] == out["windows"][-1]["hoodie_files"]
    assert sum(w["inserts"] for w in out["windows"]) == out["distinct_keys"]

    assert out["read_check"] == "ok"
    snapshot = hr.read(out["path"])
    assert snapshot.num_rows == out["distinct_keys"] == out["rows_read"]
    assert len(set(snapshot["uuid"].to_pylist())) == out["distinct_keys"]


def test_secondary_index_run_keeps_the_index(tmp_path: Path) -> None:
    """``--secondary-index driver``: the index is built after commit 1 and kept by every later
    commit; ``driver`` changes on updates, so entries move. The index read back from the
    metadata table equals one made from the hudi-rs snapshot."""
    import hoodie_ray as hr
    from hoodie_ray.metadata.secondary_index import secondary_index_key
    from hoodie_ray.table import HoodieTable
    from tests.conftest import hudi_rs_read

    assert parse_args(["--secondary-index", "driver"]).secondary_index == "driver"
    for bad in (["--secondary-index", "uuid"], ["--mode", "stream", "--secondary-index", "fare"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
    u = Upserts(10, 10, seed=1)
    first, second = u.batch()[0], u.batch()[0]
    drivers = dict(zip(first["uuid"].to_pylist(), first["driver"].to_pylist(), strict=True))
    moved = zip(second["uuid"].to_pylist(), second["driver"].to_pylist(), strict=True)
    assert all(drivers[k] != d for k, d in moved)

    options = ["hoodie.write.table.version=8", "hoodie.metadata.record.index.enable=true"]
    rc = main(
        ["--commits", "12", "--rows", "30", "--keys", "60", "--window", "6"]
        + [a for o in options for a in ("--option", o)]
        + ["--secondary-index", "driver", "--path", str(tmp_path), "--no-save", "--json"]
    )
    assert rc == 0
    path = tmp_path / "history_client"
    snap = hudi_rs_read(path)
    assert snap.num_rows == len(set(snap["uuid"].to_pylist())) == 60
    table = HoodieTable.load(str(path))
    entries = set(table.metadata_table.records("secondary_index_driver_idx"))
    rows = zip(snap["driver"].to_pylist(), snap["uuid"].to_pylist(), strict=True)
    assert entries == {secondary_index_key(d, k) for d, k in rows}
    assert hr.validate_metadata(str(path)) == []
