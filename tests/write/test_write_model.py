"""The write core's model test: random commits, hudi-rs reads exactly the model after each."""

from __future__ import annotations

import zlib

import pytest

from tests.write.model import model_options, run_random_commits


@pytest.mark.parametrize(
    "table_type",
    ["MERGE_ON_READ", pytest.param("COPY_ON_WRITE", marks=pytest.mark.slow)],  # suite time
)
# suite time: parquet blocks slow; MOR tables of parquet blocks read as hudi-rs does in CI in
# tests/reader/test_writer_roundtrip.py and tests/write/test_schema_evolution.py
@pytest.mark.parametrize("block_format", ["avro", pytest.param("parquet", marks=pytest.mark.slow)])
def test_model_random_commits(tmp_path, table_type, block_format):
    if table_type == "COPY_ON_WRITE" and block_format == "parquet":
        pytest.skip("log block format does not apply to COPY_ON_WRITE")
    opts = model_options(
        {"hoodie.logfile.data.block.format": block_format}, table_type=table_type, small_files=True
    )
    seed = zlib.crc32((table_type + block_format).encode()) % 1000  # the same every run
    # 14 commits (suite time: was 22): compactions every 5 delta commits still run twice
    run_random_commits(tmp_path / "t", opts, commits=14, seed=seed)


@pytest.mark.parametrize(
    "table_type", ["MERGE_ON_READ", pytest.param("COPY_ON_WRITE", marks=pytest.mark.slow)]
)
def test_model_random_commits_table_version_8(tmp_path, table_type):
    opts = model_options(
        {"compaction.delta_commits": "4"}, table_type=table_type, version="8", small_files=True
    )
    # 12 commits (suite time: was 20): compactions every 4 delta commits still run (three)
    run_random_commits(tmp_path / "t", opts, commits=12, seed=8)
    from hoodie_ray.config.table_config import HoodieTableConfig
    from hoodie_ray.storage import LocalStorage

    cfg = HoodieTableConfig.load(LocalStorage(str(tmp_path / "t")))
    assert (cfg.table_version, cfg.timeline_layout_version) == (8, 2)
    assert any(
        (tmp_path / "t" / ".hoodie" / "timeline").glob(
            "*_*.deltacommit" if table_type == "MERGE_ON_READ" else "*_*.commit"
        )
    )
