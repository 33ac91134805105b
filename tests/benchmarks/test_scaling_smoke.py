"""Smoke test of the scaling benchmark at a tiny size: every path, two writer counts, the
figures and the gate in its JSON (no timing assertions)."""

from __future__ import annotations

import json

import pytest

from benchmarks.scaling import main, parse_args

pytestmark = [pytest.mark.ray, pytest.mark.spark]


def test_parse_args_writer_lists_and_paths() -> None:
    args = parse_args(["--writers", "1,2,4,8,16", "--paths", "driver,dataset", "--peers", ""])
    assert args.writers == [1, 2, 4, 8, 16] and args.paths == ["driver", "dataset"]
    assert args.peers == []
    with pytest.raises(SystemExit):
        parse_args(["--paths", "flink"])
    assert (
        parse_args([]).warm_commits == 0 and parse_args(["--warm-commits", "2"]).warm_commits == 2
    )


@pytest.mark.slow  # 30 s (a Spark session's start included): run before a scaling run
def test_every_path(spark_session, tmp_path, capsys) -> None:
    rc = main(
        [
            "--keys", "600", "--commits", "2", "--writers", "1", "--spark-rows", "300",
            "--peers", "delta", "--warm-commits", "1", "--json", "--workdir", str(tmp_path),
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    doc = json.loads(out.strip().splitlines()[-1])
    assert rc == 0 and doc["gate"] == "pass"
    runs = {(r["path"], r["writers"]): r for r in doc["runs"]}
    assert set(runs) == {(p, 1) for p in ("driver", "dataset", "spark")}
    for r in runs.values():
        assert r["error"] is None and r["gate"] == "pass"
        assert 0 <= r["driver_cpu_share"] <= 1 and r["rows_per_s"] > 0
        assert 0 <= r["system_cpu_share"] <= 1
        assert r["rows_per_user_cpu_s"] >= r["rows_per_cpu_s"]
        roles = {"driver", "coordinator", "assigner", "writer", "assign-write", "other"}
        assert set(r["cpu_s"]) == roles
        assert r["cpu_s"]["assign-write"] > 0  # chained: the default topology
        assert all(c >= 0 for c in r["other_cpu_s"].values())
    assert runs[("spark", 1)]["spark_handoff_s"] >= 0
    # the first commit went through each topology before the timed section: the second is timed
    assert doc["workload"]["warm_commits"] == 1
    assert runs[("driver", 1)]["rows"] == runs[("dataset", 1)]["rows"] == 900  # of 1,800
    assert runs[("spark", 1)]["rows"] == 300  # of 600
    assert runs[("dataset", 1)]["speedup_vs_1"] == 1.0
    assert "dataset_vs_driver_cpu_w1" in doc["summary"]
    (delta,) = doc["peers"]
    assert delta["gate"] == "pass"


def test_render_shows_no_none() -> None:
    """A chained run has no assigner/writer CPU split: its share column says so."""
    from benchmarks.scaling import Results, render

    class Fixed(Results):
        def rows(self) -> list[dict]:
            common = {"path": "dataset", "writers": 2, "assigners": 2, "rows_per_s": 1000.0}
            return [
                {**common, "chained": True, "cpu_s": {"assign-write": 1.0}},
                {**common, "chained": False, "cpu_s": {"assigner": 1.0, "writer": 2.0}},
            ]

        def summary(self) -> dict:
            return {}

    text = render(Fixed(workload={}))
    assert "None" not in text and "(chained)" in text


def test_rounds_are_summarised_by_their_medians() -> None:
    """``--repeat``: the summary's ratio is of the widths' medians over the rounds, and each
    round's own ratio is listed beside it."""
    from benchmarks.scaling import Results

    class Fixed(Results):
        def rows(self) -> list[dict]:
            cpu = {(0, 1): 100.0, (0, 8): 60.0, (1, 8): 70.0, (1, 1): 110.0, (2, 1): 90.0}
            cpu[(2, 8)] = 80.0
            return [
                {"path": "driver", "writers": w, "chained": True, "repeat": r, "rows_per_cpu_s": v}
                for (r, w), v in cpu.items()
            ]

    summary = Fixed(workload={}).summary()
    assert summary["cpu_w8_vs_w1_driver"] == 0.7  # median 70 / median 100
    assert summary["cpu_w8_vs_w1_driver_each"] == [0.6, round(70 / 110, 3), round(80 / 90, 3)]
    assert parse_args(["--repeat", "3"]).repeat == 3
    with pytest.raises(SystemExit):
        parse_args(["--repeat", "0"])
