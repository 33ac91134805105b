"""Smoke test of the scan-width benchmark at a tiny size: tables of 2 and 4 base files, one
round. It checks the report's structure and that the lean cache holds less than the whole one,
not how fast anything is."""

from __future__ import annotations

from benchmarks.scan_files import main


def test_scan_files_reports_each_table_and_mode() -> None:
    res = main(["--files", "2,4", "--repeats", "1", "--json"])
    assert set(res["tables"]) == {2, 4}
    for row in res["tables"].values():
        assert row["cpu_ms_per_file_lean"] > 0 and row["cpu_ms_per_file_whole"] > 0
        assert 0 < row["footer_cache_kb_lean"] < row["footer_cache_kb_whole"]
    assert res["per_file_growth_lean"] > 0 and res["per_file_growth_whole"] > 0
