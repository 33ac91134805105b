"""benchmarks/cdc.py at a tiny size: every section runs and reports its ratios."""

from __future__ import annotations

import pytest

from benchmarks.cdc import main


@pytest.mark.slow  # suite time: fifteen small tables
def test_cdc_benchmark_runs_tiny() -> None:
    result = main(["--rows", "2000", "--updates", "400", "--commits", "2", "--partitions", "2"])
    assert result["write"]["DATA_BEFORE_AFTER"]["cdc_bytes"] > 0
    assert result["read"]["mor"]["cdc_rows"] > 0
    assert result["compaction"]["off"]["cdc_bytes"] == 0
    assert result["compaction"]["DATA_BEFORE_AFTER"]["cdc_bytes"] > 0
    assert result["compaction"]["OP_KEY_ONLY"]["vs_off"] > 0
