"""The planner's estimate of an index lookup against the scan it replaces (pure arithmetic)."""

from __future__ import annotations

import pytest

from hoodie_ray.reader.lookup_cost import (
    INDEX_BYTE_WEIGHT,
    SLICE_OPEN_BYTES,
    LookupCost,
    expected_file_groups,
)


def test_expected_file_groups_of_uniform_keys() -> None:
    assert expected_file_groups(0, 10) == 0 and expected_file_groups(5, 0) == 0
    assert expected_file_groups(1, 150) == pytest.approx(1.0)
    assert expected_file_groups(100, 150) == pytest.approx(150 * (1 - (149 / 150) ** 100))
    assert 73 < expected_file_groups(100, 150) < 74
    assert expected_file_groups(10_000, 150) == pytest.approx(150)


def test_the_cheaper_side_is_taken() -> None:
    sizes = [1 << 20] * 100
    scan = 100 * ((1 << 20) + SLICE_OPEN_BYTES)
    one = LookupCost.of("record_index", 1, (1, 100_000), sizes)
    assert one.scan_bytes == scan and one.file_groups == 100
    assert one.lookup_bytes == pytest.approx(INDEX_BYTE_WEIGHT * 100_000 + scan / 100)
    assert one.use_index and "the index is cheaper" in one.describe()
    many = LookupCost.of("record_index", 1000, (40, 4_000_000), sizes)
    assert not many.use_index and "the scan is cheaper" in many.describe()
    # an index that costs more than the whole scan loses whatever the keys
    big = LookupCost.of("secondary_index_x", 1, (200, scan), sizes)
    assert not big.use_index
    d = one.as_dict()
    assert d["use_index"] and d["index_blocks"] == 1 and d["why"] == one.describe()
    # nothing to scan: nothing to look up either
    assert not LookupCost.of("record_index", 3, (1, 10), []).use_index
