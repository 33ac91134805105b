"""benchmarks/partial_update.py at a tiny size: it runs, reports both tables, and hudi-rs
reads the partial-update table as hoodie_ray does."""

from __future__ import annotations

from benchmarks.partial_update import main


def test_partial_update_benchmark_runs_tiny() -> None:
    result = main(["--rows", "2000", "--updates", "400", "--commits", "2"])
    assert result["hudi_rs_agrees"]
    assert (
        result["partial"]["write_rows_per_cpu_s"] > 0 and result["plain"]["read_rows_per_cpu_s"] > 0
    )
    # a null overwrites on the plain table; on the partial one it keeps the stored value
    assert result["partial"]["null_values_read"] == 0 < result["plain"]["null_values_read"]
    # write.partial.updates: a commit that lacks a column keeps its values (no null read)
    assert result["columns"]["null_values_read"] == 0 < result["columns"]["write_rows_per_cpu_s"]
