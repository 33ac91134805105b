"""Smoke test of the scan-width benchmark at a tiny size: tables of 2 and 4 base files, one
round, and a 2-file table on a local S3 server. It checks the report's structure, that the lean
cache holds less than the reader before's and the requests each reader makes, not how fast
anything is."""

from __future__ import annotations

from benchmarks.scan_files import main


def test_scan_files_reports_each_table_and_reader() -> None:
    res = main(["--files", "2,4", "--repeats", "1", "--s3", "2", "--json"])
    assert set(res["tables"]) == {2, 4}
    for row in res["tables"].values():
        for reader in ("lean", "before"):
            assert row[f"cpu_ms_per_file_warm_{reader}"] > 0
            assert row[f"cpu_ms_per_file_cold_{reader}"] > 0
        assert 0 < row["footer_cache_kb_lean"] < row["footer_cache_kb_before"]
    assert res["per_file_growth_lean"] > 0 and res["per_file_growth_before"] > 0
    s3 = res["s3"]
    assert s3["files"] == 2
    # a small base file: one HEAD and one GET a read, its footer kept (warm: the columns) or
    # not (cold: the whole file); before, a HEAD and three GETs (the footer's end, its start,
    # the columns) on every read
    for temp in ("warm", "cold"):
        assert (s3[f"{temp}_head_per_file_lean"], s3[f"{temp}_get_per_file_lean"]) == (1.0, 1.0)
        assert (s3[f"{temp}_head_per_file_before"], s3[f"{temp}_get_per_file_before"]) == (1.0, 3.0)
