"""The ``hoodie-ray`` CLI on tables the tests write (engine="local": no Ray, fast).

Each subcommand is run through :func:`hoodie_ray.cli.main` (the console script's function):
its text table is checked for the values that matter, its ``--output json`` is parsed as one
document and checked against the table (instants, file counts, partitions). Errors must be one
line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import hoodie_ray as hr
from hoodie_ray.cli import main
from hoodie_ray.cli.output import Column, display_path, human_size, instant_to_iso, render_table
from tests.conftest import without_ray_log_lines

OPTIONS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "precombine.field": "ts",
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``main(argv)``: (exit status, stdout, stderr)."""
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, without_ray_log_lines(err)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    rc, out, err = run(capsys, *argv, "--output", "json")
    assert rc == 0, err
    return json.loads(out)  # exactly one JSON document, nothing else on stdout


def _rows(ids: list[str], cities: list[str], ts: int, fare: float) -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "city": cities,
            "ts": [ts] * len(ids),
            "fare": [fare + i for i in range(len(ids))],
        }
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A MOR table of 3 partitions and 3 delta commits: inserts, upserts, a delete."""
    path = tmp_path_factory.mktemp("cli") / "trips"
    results = [
        hr.write(
            _rows(["a", "b", "c", "d", "e"], ["sf", "sf", "nyc", "la", "la"], 1, 10.0),
            str(path),
            OPTIONS,
            engine="local",
        ),
        hr.write(
            _rows(["a", "d", "f"], ["sf", "la", "nyc"], 2, 20.0), str(path), OPTIONS, engine="local"
        ),
        hr.write(
            pa.table({"id": ["b"]}),
            str(path),
            {**OPTIONS, "write.operation": "delete"},
            engine="local",
        ),
    ]
    return {"path": str(path), "results": results}


# -- timeline ------------------------------------------------------------------------------------


def test_timeline_table_and_json(table: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    path = table["path"]
    instants = [r.instant for r in table["results"]]
    doc = run_json(capsys, "timeline", path)
    assert doc["table"] == {"path": path, "name": "trips", "type": "MERGE_ON_READ", "version": 6}
    assert [i["instant"] for i in doc["instants"]] == instants
    assert {i["action"] for i in doc["instants"]} == {"deltacommit"}
    assert {i["state"] for i in doc["instants"]} == {"COMPLETED"}
    assert doc["instants"][0]["requested_at"] == instant_to_iso(instants[0])

    rc, out, err = run(capsys, "timeline", path)
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("trips (MERGE_ON_READ, table version 6)")
    assert lines[1].split() == ["instant", "action", "state", "requested", "at", "(UTC)"]
    body = [ln.split() for ln in lines[3:6]]
    assert [b[0] for b in body] == instants
    assert all(b[1:3] == ["deltacommit", "COMPLETED"] for b in body)
    assert lines[-1] == "3 instants, 0 pending"


# -- commits -------------------------------------------------------------------------------------


def test_commits_show_json(table: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    path, results = table["path"], table["results"]
    doc = run_json(capsys, "commits", "show", path)
    assert doc["total_commits"] == 3
    commits = doc["commits"]
    assert [c["instant"] for c in commits] == [r.instant for r in reversed(results)]  # newest first
    first, second, third = reversed(commits)
    assert (first["operation"], first["inserts"], first["updates"]) == ("UPSERT", 5, 0)
    assert first["partitions"] == ["la", "nyc", "sf"]
    assert first["files_added"] == 3 and first["files_updated"] == 0
    # a new key packed into an existing file group's log: the writer counts it as an update
    # today (see the report), so only the sum is pinned here
    assert second["inserts"] + second["updates"] == second["records_written"] == 3
    assert second["partitions"] == ["la", "nyc", "sf"]
    assert (third["operation"], third["deletes"], third["partitions"]) == ("DELETE", 1, ["sf"])
    for c, r in zip(reversed(commits), results, strict=True):
        assert c["inserts"] == r.num_inserts
        assert c["updates"] == r.num_updates
        assert c["deletes"] == r.num_deletes
        assert c["bytes_written"] > 0
        assert c["files_added"] + c["files_updated"] == r.num_files

    limited = run_json(capsys, "commits", "show", path, "--limit", "1")
    assert [c["instant"] for c in limited["commits"]] == [results[-1].instant]
    assert limited["total_commits"] == 3


def test_commits_show_table(table: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    path, results = table["path"], table["results"]
    rc, out, err = run(capsys, "commits", "show", path, "-n", "2")
    assert rc == 0 and err == ""
    lines = out.splitlines()
    header = lines[1]
    for col in ("instant", "operation", "partitions", "inserts", "updates", "deletes", "written"):
        assert col in header
    rows = lines[3:5]
    assert rows[0].split()[0] == results[2].instant
    assert rows[1].split()[0] == results[1].instant
    assert rows[0].split()[2] == "DELETE"
    t = hr.HoodieTable.load(path)
    from hoodie_ray.cli.info import commits_doc

    for row, c in zip(rows, commits_doc(t, 2), strict=True):
        assert f" {human_size(c['bytes_written'])} " in row  # sizes in human units
    assert lines[-1] == "2 of 3 commits"
    # numbers are right-aligned under their headers
    ins = header.index("inserts") + len("inserts")
    assert all(r[ins - 1] != " " for r in rows)


# -- fsview --------------------------------------------------------------------------------------


def test_fsview_json(table: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    path = table["path"]
    slices = hr.HoodieTable.load(path).latest_file_slices()
    doc = run_json(capsys, "fsview", path)
    got = doc["file_slices"]
    assert [(s["partition_path"], s["file_id"]) for s in got] == [
        (s.partition_path, s.file_id) for s in slices
    ]
    assert [s["log_files"] for s in got] == [s.log_files for s in slices]
    assert [s["base_file"] for s in got] == [s.base_file for s in slices]
    assert {s["partition_path"] for s in got} == {"la", "nyc", "sf"}
    files = Path(path)
    for s in got:
        base = files / s["partition_path"] / s["base_file"]
        assert s["base_file_bytes"] == base.stat().st_size
        assert s["log_bytes"] == sum(
            (files / s["partition_path"] / n).stat().st_size for n in s["log_files"]
        )
        assert s["total_bytes"] == s["base_file_bytes"] + s["log_bytes"]
    totals = doc["totals"]
    assert totals["file_slices"] == len(slices) == 3
    assert totals["partitions"] == 3
    assert totals["base_files"] == 3
    assert totals["log_files"] == sum(len(s.log_files) for s in slices) >= 2

    only = run_json(capsys, "fsview", path, "--partition", "la")
    assert only["partition"] == "la"
    assert [s["partition_path"] for s in only["file_slices"]] == ["la"]


def test_fsview_table(table: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    path = table["path"]
    slices = hr.HoodieTable.load(path).latest_file_slices()
    rc, out, err = run(capsys, "fsview", path)
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert "file id" in lines[1] and "base file" in lines[1] and "log size" in lines[1]
    for s, line in zip(slices, lines[3:6], strict=True):
        cells = line.split()
        assert cells[:3] == [s.partition_path, s.file_id, s.base_instant]
        assert cells[3:5] == human_size(s.base_file_size).split()  # e.g. "2.1 KB"
        assert cells[5] == str(len(s.log_files))
    assert lines[-1].startswith("3 file slices in 3 partitions: 3 base files")


def test_fsview_unknown_partition(
    table: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run(capsys, "fsview", table["path"], "-p", "paris")
    assert rc == 1 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("hoodie-ray: error: no partition 'paris'")


# -- compactions ---------------------------------------------------------------------------------


def test_compactions_show_empty(table: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "compactions", "show", table["path"])
    assert doc["compactions"] == [] and doc["pending"] == 0
    rc, out, _ = run(capsys, "compactions", "show", table["path"])
    assert rc == 0 and "no compactions on the active timeline" in out


def test_compactions_show_pending_plan(
    table: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A requested compaction (plan written as Java writes it) shows with its plan's size."""
    from hoodie_ray.timeline.instant import Action, Instant, State, new_instant_time
    from hoodie_ray.timeline.plans import HoodieCompactionOperation, HoodieCompactionPlan

    path = tmp_path / "copy"
    shutil.copytree(table["path"], path)
    t = hr.HoodieTable.load(str(path))
    slices = [s for s in t.latest_file_slices() if s.log_files]
    ops = [
        HoodieCompactionOperation(
            s.base_instant,
            list(s.log_files),
            s.base_file,
            s.file_id,
            s.partition_path,
            metrics={"TOTAL_LOG_FILES": float(len(s.log_files)), "TOTAL_LOG_FILES_SIZE": 100.0},
        )
        for s in slices
    ]
    ts = new_instant_time(t.timeline[-1].timestamp)
    t.active_timeline.create_requested(
        Instant(ts, Action.COMPACTION, State.REQUESTED), HoodieCompactionPlan(ops).to_bytes()
    )
    doc = run_json(capsys, "compactions", "show", str(path))
    assert doc["pending"] == 1
    (c,) = doc["compactions"]
    assert (c["instant"], c["state"], c["action"]) == (ts, "REQUESTED", "compaction")
    assert c["file_groups"] == len(slices) >= 2
    assert c["log_files"] == sum(len(s.log_files) for s in slices)
    assert c["log_bytes"] == 100 * len(slices)
    assert c["partitions"] == sorted({s.partition_path for s in slices})
    assert {o["file_id"] for o in c["operations"]} == {s.file_id for s in slices}

    rc, out, _ = run(capsys, "compactions", "show", str(path))
    assert rc == 0
    row = next(ln for ln in out.splitlines() if ln.startswith(ts))
    assert row.split()[:3] == [ts, "REQUESTED", str(len(slices))]
    assert out.splitlines()[-1] == "1 compactions, 1 pending"

    tl = run_json(capsys, "timeline", str(path))
    assert tl["instants"][-1]["action"] == "compaction"
    assert tl["instants"][-1]["state"] == "REQUESTED"


def test_compact_then_show(
    table: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "copy"
    shutil.copytree(table["path"], path)
    try:
        import hoodie_ray.compaction  # noqa: F401
    except ImportError:
        rc, out, err = run(capsys, "compact", str(path))
        assert rc == 1 and out == "" and err.count("\n") == 1
        assert err.startswith("hoodie-ray: error: compaction is not available")
        return
    doc = run_json(capsys, "compact", str(path))
    instant = doc["instant"]
    assert instant is not None
    comps = run_json(capsys, "compactions", "show", str(path))
    (c,) = comps["compactions"]
    assert (c["instant"], c["state"]) == (instant, "COMPLETED")
    assert c["file_groups"] >= 2 and c["records_written"] > 0
    fs = run_json(capsys, "fsview", str(path))
    assert fs["totals"]["log_files"] == 0  # every slice with logs was compacted
    assert hr.read(str(path)).num_rows == 5


def test_table_services_with_dry_run(
    table: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compact``, ``clean`` and ``archive`` with ``--dry-run`` say what would be done and
    change nothing; without it they do it and say what they did (text and JSON)."""
    path = tmp_path / "copy"
    shutil.copytree(table["path"], path)
    timeline = run_json(capsys, "timeline", str(path))

    dry = run_json(capsys, "compact", str(path), "--dry-run")
    assert dry["dry_run"] and dry["scheduled"] and dry["instant"] is None
    slices = {(s["partition_path"], s["file_id"]) for s in dry["slices"]}
    assert slices and all(s["log_files"] for s in dry["slices"])
    rc, out, err = run(capsys, "compact", str(path), "--dry-run")
    assert rc == 0 and err == ""
    assert out.startswith("dry run: a new compaction plan would be scheduled and run: ")
    assert "file id" in out and "log files" in out
    assert run_json(capsys, "timeline", str(path)) == timeline  # nothing written

    done = run_json(capsys, "compact", str(path))
    assert done["instant"] and not done["dry_run"]
    assert {(s["partition_path"], s["file_id"]) for s in done["slices"]} == slices
    hr.write(_rows(["a", "c"], ["sf", "nyc"], 3, 30.0), str(path), OPTIONS, engine="local")

    opt = ["--option", "clean.retain_commits=1"]
    doc = run_json(capsys, "clean", str(path), "--dry-run", *opt)
    assert doc["dry_run"] and doc["instant"] is None and doc["num_files"] > 0
    before = {p.name for p in path.rglob("*") if p.is_file()}
    assert all(n in before for names in doc["files"].values() for n in names)
    rc, out, err = run(capsys, "clean", str(path), "--dry-run", *opt)
    assert rc == 0 and out.startswith(f"dry run: {doc['num_files']} files in ")
    assert {p.name for p in path.rglob("*") if p.is_file()} == before
    rc, out, err = run(capsys, "clean", str(path), *opt)
    assert rc == 0 and out.startswith("clean ") and "deleted" in out, out
    after = {p.name for p in path.rglob("*") if p.is_file()}
    assert not after & {n for names in doc["files"].values() for n in names}
    rc, out, err = run(capsys, "clean", str(path), *opt)
    assert out.startswith("nothing to clean (commits from ")
    assert hr.read(str(path)).num_rows == 5

    keep = ["--option", "archive.min_commits=2", "--option", "archive.max_commits=3", *opt]
    doc = run_json(capsys, "archive", str(path), "--dry-run", *keep)
    assert doc["dry_run"] and doc["instants"]
    rc, out, err = run(capsys, "archive", str(path), *keep)
    assert rc == 0 and out.startswith(f"{len(doc['instants'])} instants archived: "), out
    active = {i["instant"] for i in run_json(capsys, "timeline", str(path))["instants"]}
    assert not active & {i["instant"] for i in doc["instants"]}
    assert run_json(capsys, "archive", str(path), *keep)["instants"] == []
    assert hr.read(str(path)).num_rows == 5
    # nothing to archive says why: too few commits for hoodie.keep.max.commits (50)
    rc, out, err = run(capsys, "archive", str(path), "--dry-run")
    assert rc == 0 and out.startswith("nothing to archive: "), out
    assert "archival starts past hoodie.keep.max.commits=50" in out


# -- compact / upgrade when the library lacks them -----------------------------------------------


def test_compact_missing_module_is_one_line(
    table: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "hoodie_ray.api", None)  # import fails
    rc, out, err = run(capsys, "compact", table["path"])
    assert rc == 1 and out == ""
    assert err == (
        "hoodie-ray: error: compaction is not available in this version of hoodie_ray "
        "(hoodie_ray.api is missing)\n"
    )


def test_upgrade_missing_and_present(
    table: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "hoodie_ray.upgrade_table", None)
    rc, _, err = run(capsys, "upgrade", table["path"])
    assert rc == 1 and err.count("\n") == 1
    assert "table upgrade is not available" in err

    calls: list[tuple[str, dict[str, Any]]] = []

    def fake_upgrade(path: str, to_version: int | None = None) -> str:
        calls.append((path, {"to_version": to_version}))
        return "ok"

    monkeypatch.setitem(
        sys.modules, "hoodie_ray.upgrade_table", types.SimpleNamespace(upgrade=fake_upgrade)
    )
    doc = run_json(capsys, "upgrade", table["path"], "--to", "8")
    assert calls == [(table["path"], {"to_version": 8})]
    assert doc == {
        "table": {"path": table["path"], "name": "trips", "type": "MERGE_ON_READ", "version": 6},
        "from_version": 6,
        "to_version": 6,
        "result": "ok",
    }


def test_upgrade_to_version_8(
    table: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        import hoodie_ray.upgrade_table  # noqa: F401
    except ImportError:
        pytest.skip("hoodie_ray.upgrade_table is not in this build")
    path = tmp_path / "copy"
    shutil.copytree(table["path"], path)
    doc = run_json(capsys, "upgrade", path, "--to", "8")
    assert (doc["from_version"], doc["to_version"], doc["table"]["version"]) == (6, 8, 8)
    tl = run_json(capsys, "timeline", path)
    assert [i["instant"] for i in tl["instants"]] == [r.instant for r in table["results"]]
    assert all(i["completion_time"] for i in tl["instants"])  # layout 2: completion times
    rc, out, _ = run(capsys, "timeline", path)
    assert rc == 0 and "completed" in out.splitlines()[1]
    rc, out, _ = run(capsys, "upgrade", path)
    assert rc == 0 and out.strip() == "table version 8: nothing to upgrade"
    commits = run_json(capsys, "commits", "show", path)
    assert [c["instant"] for c in commits["commits"]] == [
        r.instant for r in reversed(table["results"])
    ]


# -- write ---------------------------------------------------------------------------------------


def _read(path: str) -> pa.Table:
    try:
        return hr.read(path)
    except (ImportError, AttributeError):  # the reader not there yet: the oracle
        from tests.conftest import hudi_rs_read

        return hudi_rs_read(path)


def test_write_parquet_then_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(_rows([f"k{i}" for i in range(300)], ["sf", "la", "nyc"] * 100, 1, 1.0), src)
    path = tmp_path / "t"
    opts = [a for k, v in OPTIONS.items() for a in ("--option", f"{k}={v}")]
    doc = run_json(capsys, "write", path, "--input", src, *opts, "--engine", "local")
    assert doc["rows"] == 300 and doc["inserts"] == 300 and doc["updates"] == 0
    assert doc["table"] == {
        "path": str(path),
        "name": "trips",
        "type": "MERGE_ON_READ",
        "version": 6,
    }
    assert doc["engine"] == "local" and doc["files"] == 3
    t = hr.HoodieTable.load(str(path))
    assert [i.timestamp for i in t.timeline] == [doc["instant"]]

    csv = tmp_path / "up.csv"
    pacsv.write_csv(_rows(["k0", "k1", "new"], ["sf", "la", "sf"], 5, 99.0), csv)
    rc, out, err = run(capsys, "write", path, "-i", csv, "--engine", "local", "--no-progress")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("committed ") and str(path) in lines[0]
    fields = {ln.split()[0]: ln.split()[1] for ln in lines[1:]}
    assert int(fields["inserts"]) + int(fields["updates"]) == 3 and fields["deletes"] == "0"
    snap = _read(str(path))
    assert snap.num_rows == 301
    fares = dict(zip(snap.column("id").to_pylist(), snap.column("fare").to_pylist(), strict=True))
    assert fares["k0"] == 99.0 and fares["new"] == 101.0


def test_write_evolves_the_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A CSV with a new column evolves the table schema; one without a column writes nulls
    with hoodie.write.set.null.for.missing.columns; an incompatible type is one error line."""
    path = tmp_path / "t"
    opts = [a for k, v in OPTIONS.items() for a in ("--option", f"{k}={v}")]
    src = tmp_path / "in.parquet"
    pq.write_table(_rows(["a", "b"], ["sf", "la"], 1, 1.0), src)
    assert run(capsys, "write", path, "-i", src, *opts, "--engine", "local")[0] == 0
    up = tmp_path / "up.csv"
    pacsv.write_csv(_rows(["a"], ["sf"], 2, 5.0).append_column("tier", pa.array(["gold"])), up)
    rc, _, err = run(capsys, "write", path, "-i", up, "--engine", "local", "--no-progress")
    assert rc == 0, err
    less = tmp_path / "less.csv"
    pacsv.write_csv(_rows(["b"], ["la"], 3, 7.0).drop_columns(["fare"]), less)
    set_null = ("--option", "hoodie.write.set.null.for.missing.columns=true")
    rc, _, err = run(capsys, "write", path, "-i", less, *set_null, "--engine", "local")
    assert rc == 0, err
    got = {r["id"]: r for r in _read(str(path)).to_pylist()}
    assert (got["a"]["fare"], got["a"]["tier"]) == (5.0, "gold")
    assert (got["b"]["fare"], got["b"]["tier"], got["b"]["ts"]) == (None, None, 3)
    bad = tmp_path / "bad.parquet"
    pq.write_table(_rows(["c"], ["sf"], 4, 1.0).set_column(3, "fare", pa.array(["x"])), bad)
    rc, out, err = run(capsys, "write", path, "-i", bad, "--engine", "local")
    assert rc == 1 and out == "" and err.count("\n") == 1, err
    assert "column fare" in err and "double" in err and "string" in err


def test_write_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(_rows(["a"], ["sf"], 1, 1.0), src)
    bad_ext = tmp_path / "in.json"
    bad_ext.write_text("{}")
    garbage = tmp_path / "bad.parquet"
    garbage.write_bytes(b"not parquet at all")
    cases = [
        (["--input", tmp_path / "missing.parquet"], "input file not found"),
        (["--input", "/dev/null"], "/dev/null is not a regular file"),
        (["--input", tmp_path], "is a directory"),
        (["--input", bad_ext], "use a .parquet or .csv file"),
        (["--input", garbage], "cannot read input"),
        (["--input", src, "--option", "oops"], "--option must be KEY=VALUE"),
        (["--input", src, "--option", "hoodie.tabel.name=x"], "hoodie.tabel.name"),
        (["--input", src, "--engine", "local"], "hoodie.table.name"),  # first write: required
    ]
    for args, want in cases:
        rc, out, err = run(capsys, "write", tmp_path / "t", *args)
        assert rc == 1, (args, err)
        assert out == ""
        assert err.count("\n") == 1 and err.startswith("hoodie-ray: error: "), err
        assert want in err, err
        assert "Traceback" not in err


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["commits", "show"],
        ["compactions", "show"],
        ["fsview"],
        ["timeline"],
        ["compact"],
        ["clean"],
        ["archive"],
        ["upgrade"],
    ],
)
@pytest.mark.parametrize("output", ["table", "json"])
def test_bad_path_is_one_line(
    argv: list[str], output: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no_table_here"
    rc, out, err = run(capsys, *argv, missing, "--output", output)
    assert rc == 1
    assert out == ""
    assert err.count("\n") == 1, err
    if output == "json":
        err = json.loads(err)["error"]["message"]
    else:
        assert err.startswith("hoodie-ray: error: ")
    if argv[0] not in ("compact", "upgrade"):  # those may first say they are not available
        assert "not a Hudi table" in err and str(missing) in err


def test_console_script_bad_path(tmp_path: Path) -> None:
    """The installed entry point: exit status 1, one line on stderr, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "hoodie_ray.cli", "timeline", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("hoodie-ray: error: not a Hudi table")


def test_usage_error_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, "timeline")
    assert rc == 2 and "Missing argument 'PATH'" in err
    rc, _, err = run(capsys, "timeline", "x", "--output", "xml")
    assert rc == 2 and "xml" in err


def test_malformed_storage_option_is_not_echoed(
    table: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run(capsys, "timeline", table["path"], "--storage-option", "hunter2")
    assert rc == 1 and out == "" and err.count("\n") == 1
    assert "hunter2" not in err and "--storage-option must be KEY=VALUE" in err


def test_storage_options_env_must_be_json(
    table: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOODIE_RAY_STORAGE_OPTIONS", "secret_key=hunter2")
    rc, _, err = run(capsys, "timeline", table["path"])
    assert rc == 1 and err.count("\n") == 1 and "hunter2" not in err
    assert "HOODIE_RAY_STORAGE_OPTIONS is not valid JSON" in err


# -- bench ---------------------------------------------------------------------------------------


def test_bench_json_is_one_document(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[list[str]] = []

    def fake_main(argv: list[str]) -> int:
        seen.append(list(argv))
        print("mor-q1 report\n| figure | value |")
        if "--json" in argv:
            print(json.dumps({"gate": "pass", "rows_per_cpu_s_parquet": 123.0}))
        return 0

    monkeypatch.setitem(sys.modules, "benchmarks.mor_q1", types.SimpleNamespace(main=fake_main))
    rc, out, err = run(capsys, "bench", "mor-q1", "--quick", "--output", "json")
    assert rc == 0
    assert json.loads(out) == {"gate": "pass", "rows_per_cpu_s_parquet": 123.0}
    assert "mor-q1 report" in err  # the readable report goes to stderr
    assert seen == [["--quick", "--json"]]

    rc, out, _ = run(capsys, "bench", "mor-q1", "--quick", "--json", "--skip-peers")
    assert rc == 0 and seen[-1] == ["--quick", "--skip-peers", "--json"]
    assert out.splitlines()[0] == "mor-q1 report"


def test_bench_not_importable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hoodie_ray.cli import commands

    monkeypatch.setitem(sys.modules, "benchmarks.mor_q1", None)
    monkeypatch.setattr(commands.Path, "is_file", lambda self: False)
    rc, out, err = run(capsys, "bench", "mor-q1", "--quick")
    assert rc == 1 and out == "" and err.count("\n") == 1
    assert "the benchmarks are not importable" in err


# -- formatting ----------------------------------------------------------------------------------


def test_human_size_and_paths() -> None:
    assert human_size(0) == "0 B"
    assert human_size(1023) == "1023 B"
    assert human_size(1536) == "1.5 KB"
    assert human_size(5 * 1024**2) == "5.0 MB"
    assert human_size(3 * 1024**3 + 1) == "3.0 GB"
    assert human_size(None) == "-"
    assert display_path("s3://AKIA:s3cr3t@bucket/t") == "s3://bucket/t"
    assert display_path("/data/t") == "/data/t"
    assert instant_to_iso("20250102030405678") == "2025-01-02 03:04:05.678"
    assert instant_to_iso("nope") is None


def test_render_table_aligns() -> None:
    text = render_table(
        [Column("a", "name"), Column("n", "count", str, ">")],
        [{"a": "x", "n": 5}, {"a": "longer", "n": 12345}],
    )
    assert text.splitlines() == [
        "name    count",
        "------  -----",
        "x           5",
        "longer  12345",
    ]


@pytest.mark.ray
def test_write_engine_ray(
    ray_session: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--engine ray`` (the default) through the session's Ray: one commit, read back."""
    src = tmp_path / "in.parquet"
    pq.write_table(_rows([f"k{i}" for i in range(1000)], ["sf", "la"] * 500, 1, 1.0), src)
    path = tmp_path / "t"
    opts = [a for k, v in OPTIONS.items() for a in ("--option", f"{k}={v}")]
    doc = run_json(capsys, "write", path, "--input", src, *opts, "--option", "write.tasks=1")
    assert doc["engine"] == "ray" and doc["rows"] == 1000 and doc["inserts"] == 1000
    t = hr.HoodieTable.load(str(path))
    assert [i.timestamp for i in t.timeline] == [doc["instant"]]
    assert _read(str(path)).num_rows == 1000


@pytest.mark.parametrize("version", ["6", "8"])
def test_timeline_and_commits_show_archived(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    path = str(tmp_path / "t")
    opts = {
        **OPTIONS,
        "hoodie.write.table.version": version,
        "archive.min_commits": "3",
        "archive.max_commits": "4",
        "clean.retain_commits": "2",
    }
    written = [
        hr.write(_rows([f"id{i}"], ["sf"], i, 1.0), path, options=opts, engine="local").instant
        for i in range(8)
    ]
    active = run_json(capsys, "timeline", path)["instants"]
    assert all(not i["archived"] for i in active)
    both = run_json(capsys, "timeline", path, "--archived")["instants"]
    archived = [i for i in both if i["archived"]]
    assert archived and both[len(archived) :] == active
    assert [i["instant"] for i in archived] == sorted(i["instant"] for i in archived)
    doc = run_json(capsys, "commits", "show", path, "--archived", "-n", "0")
    shown = [c["instant"] for c in doc["commits"]]
    deltas = [w for w in written if w in shown]
    assert deltas == written and doc["total_commits"] == len(shown)
    limited = run_json(capsys, "commits", "show", path, "--archived", "-n", "3")
    assert len(limited["commits"]) == 3 and limited["total_commits"] == len(shown)
    old = [c for c in doc["commits"] if c["archived"]]
    assert old and all(c["records_written"] >= 1 for c in old if c["action"] == "deltacommit")
    rc, out, err = run(capsys, "timeline", path, "--archived")
    assert rc == 0 and err == "" and "archived" in out.splitlines()[1]


def test_json_errors_counts_and_compaction_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # -o json: an error is one JSON document on stderr, exit status 1
    rc, out, err = run(capsys, "timeline", str(tmp_path / "none"), "-o", "json")
    assert rc == 1 and out == ""
    doc = json.loads(err)
    assert doc["error"]["type"] == "HoodieTableNotFoundError"
    assert "not a Hudi table" in doc["error"]["message"]
    rc, out, err = run(capsys, "timeline", "--output=json")  # a usage mistake
    assert rc == 2 and json.loads(err)["error"]["message"]
    # one of each: no "1 file slices in 1 partitions", no "(0 rows/s)" for two rows
    path = str(tmp_path / "t")
    opts = {**OPTIONS, "compaction.schedule.enabled": "false"}
    src = tmp_path / "in.parquet"
    pq.write_table(_rows(["a", "b"], ["sf", "sf"], 1, 2.0), src)
    args = [f"--option={k}={v}" for k, v in opts.items()]
    rc, out, err = run(capsys, "write", path, "--input", str(src), "--engine", "local", *args)
    assert rc == 0, err
    assert "rows/s" not in out
    rc, out, err = run(capsys, "fsview", path)
    assert "1 file slice in 1 partition: 1 base file, 0 log files" in out
    for i in range(3):
        hr.write(_rows(["a"], ["sf"], 2 + i, 3.0), path, options=opts, engine="local")
    rc, out, err = run(capsys, "compact", path, "--engine", "local")
    assert rc == 0, err
    assert "1 file group in 1 partition, 2 records written" in out, out
    doc = run_json(capsys, "compact", path, "--engine", "local")
    assert doc["instant"] is None


def test_compactions_drop_a_corrupt_plan(
    table: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pending plan whose file id names no file group: ``compactions show`` lists it,
    ``compact`` refuses it in one line, ``compactions drop`` removes it under the writer lock,
    and the next ``compact`` schedules and runs a fresh plan."""
    from hoodie_ray.compaction.api import CompactionService
    from hoodie_ray.timeline.instant import Action, Instant, State
    from hoodie_ray.timeline.plans import HoodieCompactionPlan

    path = tmp_path / "copy"
    shutil.copytree(table["path"], path)
    instant = CompactionService.open(str(path)).schedule(force=True)
    assert instant is not None
    t = hr.HoodieTable.load(str(path))
    plan_file = path / t.active_timeline.instant_path(
        Instant(instant, Action.COMPACTION, State.REQUESTED)
    )
    plan = HoodieCompactionPlan.from_bytes(plan_file.read_bytes())
    bad = ("b" if plan.operations[0].file_id[0] != "b" else "c") + plan.operations[0].file_id[1:]
    plan.operations[0].file_id = bad
    plan_file.write_bytes(plan.to_bytes())

    doc = run_json(capsys, "compactions", "show", str(path))
    assert doc["pending"] == 1
    (c,) = doc["compactions"]
    assert c["instant"] == instant and bad in {o["file_id"] for o in c["operations"]}

    rc, out, err = run(capsys, "compact", str(path))
    assert rc == 1 and out == "" and err.count("\n") == 1
    assert "corrupt compaction plan" in err and bad in err and instant in err

    rc, out, err = run(capsys, "compactions", "drop", str(path), "20000101000000000")
    assert rc == 1 and err.startswith("hoodie-ray: error: no pending compaction")

    doc = run_json(capsys, "compactions", "drop", str(path), instant)
    assert doc["instant"] == instant and doc["deleted_files"] == []
    assert not plan_file.exists()
    assert run_json(capsys, "compactions", "show", str(path))["pending"] == 0
    assert hr.read(str(path)).num_rows == 5

    fresh = run_json(capsys, "compact", str(path))["instant"]
    assert fresh is not None and fresh != instant
    assert hr.read(str(path)).num_rows == 5
    rc, out, _ = run(capsys, "compactions", "drop", str(path), fresh)
    assert rc == 1


def test_write_reports_the_compaction_it_set_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "t")
    opts = {**OPTIONS, "compaction.delta_commits": "2"}
    args = [f"--option={k}={v}" for k, v in opts.items()]
    docs = []
    for i in range(3):
        src = tmp_path / f"in{i}.parquet"
        pq.write_table(_rows(["a", "b"], ["sf", "la"], i, 1.0), src)
        docs.append(
            run_json(capsys, "write", path, "--input", str(src), "--engine", "local", *args)
        )
    compacted = [c for d in docs for c in d["table_services"]["compacted"]]
    assert len(compacted) == 1
    src = tmp_path / "in3.parquet"
    pq.write_table(_rows(["a"], ["sf"], 9, 1.0), src)
    rc, out, _err = run(capsys, "write", path, "--input", str(src), "--engine", "local", *args)
    assert rc == 0 and "table services" in out and "compaction" in out, out


def test_table_services_beside_a_write_in_flight_under_occ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """compact / clean / archive with --option hoodie.write.concurrency.mode=occ run beside
    a live writer's open instant (short lock turns); single-writer compact schedules nothing
    while a write is in flight."""
    from hoodie_ray.job.coordinator import Coordinator

    path = str(tmp_path / "t")
    occ = {**OPTIONS, "hoodie.write.concurrency.mode": "optimistic_concurrency_control"}
    hr.write(_rows(["a", "b"], ["x", "y"], 1, 1.0), path, occ, engine="local")
    hr.write(_rows(["a", "b"], ["x", "y"], 2, 2.0), path, occ, engine="local")  # logs
    coord = Coordinator(path, occ)
    coord.open(None)
    live = coord.start_instant()  # a writer in flight (its heartbeat beats)
    try:
        assert run_json(capsys, "compact", path)["instant"] is None
        flag = ("--option", "hoodie.write.concurrency.mode=optimistic_concurrency_control")
        doc = run_json(capsys, "compact", path, *flag)
        assert doc["instant"] is not None and len(doc["slices"]) == 2
        assert run_json(capsys, "clean", path, *flag)["rolled_back"] == []
        assert run_json(capsys, "archive", path, *flag)["instants"] == []
        timeline = run_json(capsys, "timeline", path)["instants"]
        assert [i["instant"] for i in timeline if i["state"] != "COMPLETED"] == [live]
    finally:
        coord.rollback(live)
        coord.close()
    from tests.conftest import hudi_rs_read

    assert sorted(hr.read(path).column("fare").to_pylist()) == [2.0, 3.0]
    assert sorted(hudi_rs_read(path).column("fare").to_pylist()) == [2.0, 3.0]


# -- explain -------------------------------------------------------------------------------------


def test_explain_prints_the_record_index_lookup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.reader.test_record_index_lookup import RI, write_lookup_table

    path = str(tmp_path / "t")
    write_lookup_table(path, RI)
    doc = run_json(capsys, "explain", path, "-f", "key", "in", "k070,k119,absent")
    total = len(hr.HoodieTable.load(path).latest_file_slices())
    assert doc["pruned_by"] == ["record_index"]
    assert doc["record_index"] == {"keys": 3, "found": 2}
    assert doc["file_groups_total"] == total
    assert 1 <= doc["file_groups_planned"] == len(doc["file_groups"]) <= 2 < total
    rc, out, err = run(capsys, "explain", path, "--filter", "key", "=", "k070")
    assert rc == 0 and err == ""
    assert f"file groups: 1 planned of {total}" in out
    assert "pruned_by: record_index" in out
    assert "record_index: 1 key(s) looked up, 1 found" in out
    assert "planner: record_index: " in out and "the index is cheaper" in out
    rc, out, _ = run(capsys, "explain", path, "-f", "v", ">", "0")
    assert rc == 0 and f"file groups: {total} planned of {total}" in out
    assert "record_index not used: no = / IN filter on record key field(s) key" in out


def test_metadata_create_index_and_drop_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`metadata create-index` builds a secondary index (listed in the table's metadata
    partitions) and the record index; a bad column is a clear error; `drop-index` removes
    it."""
    from tests.conftest import extract_sample_table

    root = str(extract_sample_table("sample_mor_avro_v9_txns_complex_meta", tmp_path / "j"))
    doc = run_json(capsys, "metadata", "create-index", root, "currency_idx", "currency")
    assert doc["index"] == "secondary_index_currency_idx" and doc["kind"] == "secondary"
    props = hr.HoodieTable.load(root).table_config.props
    assert "secondary_index_currency_idx" in props["hoodie.table.metadata.partitions"]
    rc, _, err = run(capsys, "metadata", "create-index", root, "x_idx", "nope")
    assert rc != 0 and "nope" in err
    before = Path(root, ".hoodie", "hoodie.properties").read_bytes()
    for argv in (["drop-index", root, "no_such_idx"], ["drop", root, "--partition", "record_idx"]):
        rc, _, err = run(capsys, "metadata", *argv)  # a typo drops nothing and says so
        assert rc != 0 and "has no partition" in err and "Traceback" not in err
    assert Path(root, ".hoodie", "hoodie.properties").read_bytes() == before
    doc = run_json(capsys, "metadata", "drop-index", root, "currency_idx")
    assert "secondary_index_currency_idx" not in doc["partitions"]
    # on a terminal the build shows its progress on stderr: file slices done of total
    monkeypatch.setattr("hoodie_ray.cli.commands._isatty", lambda stream: True)
    monkeypatch.setattr("click._termui_impl.isatty", lambda stream: True)
    rc, out, err = run(capsys, "metadata", "create-index", root, "currency_idx", "currency")
    assert rc == 0 and out.startswith("index secondary_index_currency_idx built")
    assert "indexing file slices" in err and "5/5  100%" in err and "/s" in err
    # the record index, dropped and built again
    run_json(capsys, "metadata", "drop", root, "--partition", "record_index")
    argv = ["metadata", "create-index", root, "record_index"]
    rc, _, err = run(capsys, *argv, "txn_id", "--kind", "record_index")
    assert rc != 0 and "txn_id,account_id" in err
    rc, out, err = run(capsys, *argv, "txn_id,account_id", "--kind", "record_index")
    assert rc == 0 and out.startswith("index record_index built") and "5/5  100%" in err


def test_help_is_plain_text_and_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """Every command's --help without reST markup (double backticks, roles); defaults shown."""
    from hoodie_ray.cli.commands import cli

    def commands(group: Any, prefix: list[str]) -> list[list[str]]:
        out = []
        for name, cmd in group.commands.items():
            out.append([*prefix, name])
            if hasattr(cmd, "commands"):
                out += commands(cmd, [*prefix, name])
        return out

    for argv in commands(cli, []):
        rc, out, _ = run(capsys, *argv, "--help")
        assert rc == 0, argv
        assert "``" not in out and ":func:" not in out and ":class:" not in out, argv
    rc, out, _ = run(capsys, "compact", "--help")
    assert "(local, the default)" in " ".join(out.split())


def test_savepoint_create_show_restore_delete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """savepoint create / show, a write after it, restore back to it, savepoint delete."""
    path = str(tmp_path / "t")
    first = hr.write(_rows(["a", "b"], ["sf", "la"], 1, 10.0), path, OPTIONS, engine="local")
    doc = run_json(capsys, "savepoint", "create", path, "--comment", "before", "--user", "alice")
    assert doc["instant"] == first.instant
    rc, out, _ = run(capsys, "savepoint", "show", path)
    assert rc == 0 and first.instant in out and "before" in out and "alice" in out
    at = run_json(capsys, "savepoint", "show", path)["savepoints"][0]["savepointed_at"]
    assert str(at) in out
    hr.write(_rows(["a"], ["sf"], 2, 99.0), path, OPTIONS, engine="local")
    rc, out, _ = run(capsys, "restore", path, first.instant)
    assert rc == 0 and f"back to savepoint {first.instant}, 1 instant rolled back" in out
    assert sorted(_read(path).column("fare").to_pylist()) == [10.0, 11.0]
    rc, out, _ = run(capsys, "savepoint", "delete", path, first.instant)
    assert rc == 0 and "deleted" in out
    assert run_json(capsys, "savepoint", "show", path)["savepoints"] == []
    rc, _, err = run(capsys, "restore", path, first.instant)
    assert rc != 0 and "no savepoint at" in err and "Traceback" not in err


def test_cluster_dry_run_then_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "t")
    opts = {**OPTIONS, "hoodie.parquet.small.file.limit": "0"}
    for i in range(3):
        hr.write(_rows([f"k{i}"], ["sf"], i, 1.0), path, opts, engine="local")
    rc, out, _ = run(capsys, "cluster", path, "--dry-run")
    assert rc == 0 and "dry run: 3 file slices in 1 group would be rewritten" in out
    # the file ids, under their header (the column's key and title were swapped: all "-")
    file_ids = {s.file_id for s in hr.HoodieTable.load(path).latest_file_slices()}
    assert "file id" in out and all(f in out for f in file_ids)
    # on a terminal the run shows its progress on stderr: groups done of total
    monkeypatch.setattr("hoodie_ray.cli.commands._isatty", lambda stream: True)
    monkeypatch.setattr("click._termui_impl.isatty", lambda stream: True)
    rc, out, err = run(capsys, "cluster", path)
    assert rc == 0 and "rewritten into 1 file" in out
    assert "clustering groups" in err and "1/1  100%" in err
    rc, out, _ = run(capsys, "cluster", path)
    assert rc == 0 and "nothing to cluster" in out
    assert sorted(_read(path).column("id").to_pylist()) == ["k0", "k1", "k2"]


def test_changes_prints_the_cdc_query(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "t")
    opts = {
        "hoodie.table.name": "ch",
        "hoodie.datasource.write.recordkey.field": "key",
        "precombine.field": "ts",
    }
    client = hr.HoodieWriteClient(path, opts)
    first = client.write(pa.table({"key": ["a", "b"], "ts": [1, 1], "v": ["x", "y"]}))
    client.write(
        pa.table(
            {"key": ["a", "b"], "ts": [2, 2], "v": ["z", "y"], "_hoodie_is_deleted": [False, True]}
        ),
    )
    doc = run_json(capsys, "changes", path, "--begin", first.instant)
    assert doc["total_changes"] == 2
    assert [(c["op"], (c["after"] or c["before"])["key"]) for c in doc["changes"]] == [
        ("u", "a"),
        ("d", "b"),
    ]
    assert doc["changes"][0]["before"] == {"key": "a", "ts": 1, "v": "x"}
    rc, out, err = run(capsys, "changes", path, "-n", "1")
    assert rc == 0 and err == "" and "1 of 4 changes" in out and '{"key": "a"' in out


def test_python_dash_m_hoodie_ray_is_the_cli() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "hoodie_ray", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "Usage: hoodie-ray" in done.stdout, done.stderr
