"""Smoke test of the scan-width benchmark at a tiny size: tables of 2 and 4 base files, one
round, and a 2-file table on a local S3 server. It checks the report's structure, that the lean
cache holds less than the whole one and the requests a read makes, not how fast anything is."""

from __future__ import annotations

from benchmarks.scan_files import main


def test_scan_files_reports_each_table_and_mode() -> None:
    res = main(["--files", "2,4", "--repeats", "1", "--s3", "2", "--json"])
    assert set(res["tables"]) == {2, 4}
    for row in res["tables"].values():
        assert row["cpu_ms_per_file_lean"] > 0 and row["cpu_ms_per_file_whole"] > 0
        assert 0 < row["footer_cache_kb_lean"] < row["footer_cache_kb_whole"]
    assert res["per_file_growth_lean"] > 0 and res["per_file_growth_whole"] > 0
    s3 = res["s3"]
    assert s3["files"] == 2
    # a small base file: one HEAD and one GET a read, its footer kept (warm: the columns) or
    # not (cold: the whole file)
    assert (s3["warm_head_per_file"], s3["warm_get_per_file"]) == (1.0, 1.0)
    assert (s3["cold_head_per_file"], s3["cold_get_per_file"]) == (1.0, 1.0)
