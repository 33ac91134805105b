"""Smoke tests of the in-process micro benchmarks at a tiny size: each runs and reports its
figures (no timing assertions), so a change of the package's internals cannot leave one broken."""

from __future__ import annotations

import json

import pytest

from benchmarks import assign_ordering, avro_encode


def test_assign_ordering_reports_both_variants(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--keys", "2000", "--rows", "500", "--batches", "2", "--repeat", "1", "--json"]
    assert assign_ordering.main(argv) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for variant in ("compared", "not_compared"):
        assert doc[f"{variant}_index_bytes_per_key"] > 0
        assert doc[f"{variant}_rows_routed"] > 0


def test_avro_encode_reports_its_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    res = avro_encode.run(2000, 1)
    assert res["rows"] == 2000 and res["encode_rows_per_s"] > 0
    assert res["bytes_per_row_block"] > 0
