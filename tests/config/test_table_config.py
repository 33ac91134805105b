from __future__ import annotations

import zlib

import pytest

from hoodie_ray.config.table_config import (
    HoodieTableConfig,
    MergeMode,
    format_java_properties,
    new_table_props,
    parse_java_properties,
    table_checksum,
)
from hoodie_ray.exceptions import (
    HoodieCorruptedDataError,
    HoodieTableNotFoundError,
    HoodieUnsupportedError,
)
from hoodie_ray.storage import LocalStorage
from tests.conftest import SAMPLE_TABLE_PARAMS


def test_java_properties_round_trip_with_escapes():
    props = {
        "hoodie.table.create.schema": '{"type":"record","name":"a=b","fields":[]}',
        "k with space": " leading space, tab\t, newline\n, unicode é \U0001f600, # and !",
    }
    text = format_java_properties(props)
    assert '\\:"record"' in text and "a\\=b" in text
    assert parse_java_properties(text) == props


def test_parse_java_continuations_and_separators():
    text = "#c\n! also comment\na:1\nb = 2\nc 3\nd=long\\\n   value\n"
    assert parse_java_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "longvalue"}


def test_checksum_matches_java_sample():
    assert (
        table_checksum({"hoodie.database.name": "default", "hoodie.table.name": "v6_trips_8i1u"})
        == "3843273058"
    )
    assert table_checksum({"hoodie.table.name": "t"}) == str(zlib.crc32(b".t"))


@pytest.mark.parametrize("name", SAMPLE_TABLE_PARAMS)
def test_every_sample_table_config_loads(sample_table, name):
    root = sample_table(name)
    cfg = HoodieTableConfig.load(LocalStorage(str(root)))
    assert cfg.table_version in (6, 8, 9)
    assert cfg.name
    assert cfg.merge_mode in (MergeMode.EVENT_TIME_ORDERING, MergeMode.COMMIT_TIME_ORDERING)


def test_new_v6_props_are_valid_and_readable_by_hudi_rs(tmp_path):
    props = new_table_props(
        table_name="t1",
        table_type="MERGE_ON_READ",
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_field="ts",
        keygen_type="SIMPLE",
        hive_style=False,
        url_encode=False,
    )
    st = LocalStorage(str(tmp_path))
    HoodieTableConfig(props).save(st)
    cfg = HoodieTableConfig.load(st)
    assert cfg.table_version == 6 and cfg.timeline_layout_version == 1
    assert cfg.merge_mode is MergeMode.EVENT_TIME_ORDERING
    assert cfg.props["hoodie.table.checksum"] == table_checksum(props)
    text = (tmp_path / ".hoodie" / "hoodie.properties").read_text()
    assert text.strip().splitlines()[-1].startswith("hoodie.table.checksum=")


def test_missing_and_malformed_properties(tmp_path):
    st = LocalStorage(str(tmp_path))
    with pytest.raises(HoodieTableNotFoundError):
        HoodieTableConfig.load(st)
    (tmp_path / ".hoodie").mkdir()
    (tmp_path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=t\n")
    with pytest.raises(HoodieCorruptedDataError, match="hoodie.properties"):
        HoodieTableConfig.load(st)
    (tmp_path / ".hoodie" / "hoodie.properties").write_text(
        "hoodie.table.name=t\nhoodie.table.version=5\nhoodie.table.type=MERGE_ON_READ\n"
    )
    with pytest.raises(HoodieUnsupportedError, match="version 5"):
        HoodieTableConfig.load(st)
    (tmp_path / ".hoodie" / "hoodie.properties").write_text(
        "hoodie.table.name=t\nhoodie.table.version=6\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.checksum=1\n"
    )
    with pytest.raises(HoodieCorruptedDataError, match="checksum"):
        HoodieTableConfig.load(st)


def test_unknown_payload_class_is_refused_not_loaded():
    cfg = HoodieTableConfig(
        {"hoodie.table.version": "6", "hoodie.compaction.payload.class": "os.system"}
    )
    with pytest.raises(HoodieUnsupportedError, match="payload class"):
        _ = cfg.merge_mode


def test_unsupported_write_version():
    with pytest.raises(HoodieUnsupportedError):
        new_table_props(
            table_name="t",
            table_type="MERGE_ON_READ",
            record_key_fields=["id"],
            partition_fields=[],
            ordering_field=None,
            keygen_type="NON_PARTITION",
            hive_style=False,
            url_encode=False,
            table_version=7,
        )
