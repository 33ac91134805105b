from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieInputError
from hoodie_ray.file_group.naming import (
    PARTITION_METAFILE,
    BaseFileName,
    HoodiePartitionMetadata,
    LogFileName,
    base_file_name,
    is_base_file,
    is_log_file,
    log_file_name,
    make_write_token,
    new_file_id,
    parse_base_file_name,
    parse_log_file_name,
    partition_metadata_bytes,
    read_partition_metadata,
    write_partition_metadata,
)
from hoodie_ray.storage import LocalStorage
from tests.conftest import SAMPLE_TABLE_PARAMS

T = "20250331030642808"


def test_file_id_and_write_token() -> None:
    fid = new_file_id()
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}-0", fid)
    assert new_file_id() != fid
    assert make_write_token(0, 13, 60) == "0-13-60"
    for bad in ((-1, 0, 0), (0, "1", 0), (True, 0, 0)):
        with pytest.raises(HoodieInputError):
            make_write_token(*bad)  # type: ignore[arg-type]


def test_base_file_names() -> None:
    fid = "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"
    name = base_file_name(fid, "0-13-60", T)
    assert name == f"{fid}_0-13-60_{T}.parquet"
    assert parse_base_file_name(name) == BaseFileName(fid, "0-13-60", T, ".parquet")
    assert parse_base_file_name(name).name == name
    assert base_file_name(fid, "1-2-3", T, ".lance").endswith(".lance")
    for bad in (("f_x", "0-1-2", T), ("f", "0-1", T), ("f", "0-1-2", "2025x")):
        with pytest.raises(HoodieInputError):
            base_file_name(*bad)
    assert is_base_file(name) and not is_log_file(name)


def test_log_file_names() -> None:
    fid = "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"
    name = log_file_name(fid, T, 1, "0-26-85")
    assert name == f".{fid}_{T}.log.1_0-26-85"
    lf = parse_log_file_name(name)
    assert lf == LogFileName(fid, T, 1, "0-26-85")
    assert lf.name == name and not lf.is_cdc and lf.sort_key() == (T, 1, "0-26-85")
    cdc = parse_log_file_name(name + ".cdc")
    assert cdc is not None and cdc.is_cdc and cdc.name == name + ".cdc"
    legacy = parse_log_file_name(f".{fid}_{T}.log.3")
    assert legacy is not None and legacy.write_token == "" and legacy.version == 3
    archive = parse_log_file_name(".commits_.archive.1_1-0-1")
    assert archive is None or archive.extension == "archive"
    assert is_log_file(name) and not is_base_file(name)
    with pytest.raises(HoodieInputError):
        log_file_name(fid, T, 0, "0-1-2")


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".hoodie_partition_metadata",
        "x.parquet",
        "a_b.parquet",
        "a_b_c_d.parquet",
        "a_0-1-2_2025x.parquet",
        ".a_1.log",
        ".a_1.log.x_0-1-2",
        "a_1.log.1_0-1-2",
        ".a_b.log.1_0-1-2",
        ".a_1.txt.1_0-1-2",
        ".a_1.log.1_0-1-2.tmp",
        "part-0000.snappy.parquet",
        "dir/a_0-1-2_1.parquet",
        "_SUCCESS",
    ],
)
def test_unparsable_names_give_none(name: str) -> None:
    assert parse_base_file_name(name) is None or name.count("_") == 2
    assert parse_log_file_name(name) is None
    assert not is_log_file(name)


@pytest.mark.parametrize("table", SAMPLE_TABLE_PARAMS)
def test_every_sample_data_file_parses(table: str, shared_sample) -> None:
    root = shared_sample(table)
    for path in root.rglob("*"):
        if ".hoodie" in path.relative_to(root).parts or not path.is_file():
            continue
        name = path.name
        if name == PARTITION_METAFILE:
            continue
        b, lf = parse_base_file_name(name), parse_log_file_name(name)
        assert (b is None) != (lf is None), name
        assert (b or lf).name == name


def test_partition_metadata_format() -> None:
    data = partition_metadata_bytes(
        T, 2, now=dt.datetime(2025, 7, 13, 1, 5, 36, tzinfo=dt.timezone.utc)
    )
    assert data == (
        b"#partition metadata\n#Sun Jul 13 01:05:36 UTC 2025\n"
        b"commitTime=20250331030642808\npartitionDepth=2\n"
    )


def test_partition_metadata_write_and_read(tmp_path: Path) -> None:
    st = LocalStorage(str(tmp_path))
    assert write_partition_metadata(st, "a=1/b=2", T)
    assert not write_partition_metadata(st, "a=1/b=2", "20990101000000000")  # never overwritten
    assert read_partition_metadata(st, "a=1/b=2") == HoodiePartitionMetadata(T, 2)
    assert write_partition_metadata(st, "", T)
    assert read_partition_metadata(st, "") == HoodiePartitionMetadata(T, 0)
    assert read_partition_metadata(st, "nope") is None
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / PARTITION_METAFILE).write_text("#x\nfoo=bar\n")
    with pytest.raises(HoodieCorruptedDataError):
        read_partition_metadata(st, "bad")


@pytest.mark.parametrize("table", SAMPLE_TABLE_PARAMS)
def test_sample_partition_metadata_reads(table: str, shared_sample) -> None:
    root = shared_sample(table)
    st = LocalStorage(str(root))
    for path in root.rglob(PARTITION_METAFILE):
        rel = path.parent.relative_to(root).as_posix()
        rel = "" if rel == "." else rel
        if rel.startswith(".hoodie"):
            continue  # the metadata table's own partitions
        meta = read_partition_metadata(st, rel)
        assert meta is not None and meta.partition_depth == (len(rel.split("/")) if rel else 0)
