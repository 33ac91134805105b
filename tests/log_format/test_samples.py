"""Every log file of the Java-written sample tables parses, decodes and agrees with references."""

from __future__ import annotations

import io

import pyarrow.parquet as pq
import pytest

from hoodie_ray.log_format import (
    AvroDataBlock,
    CommandBlock,
    CorruptBlock,
    DeleteBlock,
    HFileDataBlock,
    ParquetDataBlock,
    read_log_bytes,
    read_log_file,
    serialize_block,
)
from hoodie_ray.storage import LocalStorage
from tests.conftest import SAMPLE_TABLE_PARAMS
from tests.log_format.helpers import (
    fastavro_block_records,
    fastavro_delete_keys,
    log_files,
    merge_slice,
    properties,
)


@pytest.mark.shared
@pytest.mark.parametrize("name", SAMPLE_TABLE_PARAMS)
def test_every_log_file_parses_and_decodes(sample_table, name):
    root = sample_table(name)
    storage = LocalStorage(str(root))
    for path in log_files(root):
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
        blocks = read_log_file(storage, rel)
        assert blocks, rel
        assert blocks[0].offset == 0
        assert sum(b.size for b in blocks) == len(data)
        for b in blocks:
            assert not isinstance(b, CorruptBlock), (rel, b)
            # byte-exact re-serialization of what Java wrote
            assert serialize_block(b, table_version=9) == data[b.offset : b.offset + b.size]
            if isinstance(b, AvroDataBlock):
                ref = fastavro_block_records(bytes(b.content), b.schema_json)
                assert b.num_records == len(ref)
                assert b.records.to_pylist() == ref
                assert b.records.schema.equals(b.arrow_schema)
                # our encoder re-creates Java's bytes from the decoded records
                again = AvroDataBlock(b.header, b.records)
                assert serialize_block(again, table_version=9) == data[b.offset : b.offset + b.size]
            elif isinstance(b, ParquetDataBlock):
                ref_table = pq.read_table(io.BytesIO(bytes(b.content)))
                assert b.records.equals(ref_table)
                assert b.num_records == ref_table.num_rows
                # the same records as an Avro block decode to the same values
                as_avro = AvroDataBlock(b.header, b.records)
                (back,) = read_log_bytes(serialize_block(as_avro))
                assert back.records.to_pylist() == ref_table.to_pylist()
            elif isinstance(b, DeleteBlock):
                ref = fastavro_delete_keys(bytes(b.content))
                assert b.record_keys.to_pylist() == [r[0] for r in ref]
                assert b.partition_paths.to_pylist() == [r[1] for r in ref]
                assert b.ordering_values == [r[2] for r in ref]
                # Java's default ordering value: IntWrapper(0), the delete always wins
                assert b.is_default_ordering.all()
                rebuilt = DeleteBlock(b.header, b.record_keys, b.partition_paths)
                assert serialize_block(rebuilt, table_version=9) == serialize_block(
                    b, table_version=9
                )
            elif isinstance(b, CommandBlock):
                assert b.is_rollback and b.target_instant_time
            else:
                assert isinstance(b, HFileDataBlock)
                assert bytes(b.content[:8]) == b"DATABLK*"


def _mor_tables() -> list[str]:
    return [n for n in SAMPLE_TABLE_PARAMS if "_mor_" in n or n.startswith("<")]


@pytest.mark.shared
@pytest.mark.parametrize("name", _mor_tables())
def test_file_slices_agree_with_hudi_rs(sample_table, name):
    """Base file + our decoded blocks, merged per spec §6, equals hudi-rs' file slice read,
    for every file slice with log files at every completed instant."""
    from hudi import HudiFileGroupReader, HudiReadOptions, HudiTable

    root = sample_table(name)
    if properties(root).get("hoodie.populate.meta.fields") == "false":
        pytest.skip("no meta fields: nothing to key the merge by")
    table = HudiTable(str(root))
    reader = HudiFileGroupReader(str(root))
    from tests.log_format.helpers import completed_instants

    seen: set[tuple[str, tuple[str, ...]]] = set()
    for as_of in sorted(completed_instants(root)):
        opts = HudiReadOptions().with_as_of_timestamp(as_of)
        for s in table.get_file_slices(opts):
            if not s.has_log_files():
                continue
            key = (s.base_file_name, tuple(s.log_file_names))
            if key in seen:
                continue
            seen.add(key)
            got = reader.read_file_slice(s, opts)
            mine = merge_slice(
                root, s.base_file_relative_path() or None, s.log_files_relative_paths()
            )
            got_rows = {r["_hoodie_record_key"]: r for r in got.to_pylist()}
            mine_rows = {k: {c: v[c] for c in got.schema.names} for k, v in mine.items()}
            assert mine_rows == got_rows, (as_of, s.file_id)
