"""Where a new table may be created: never at a file or under one, and not among other files
unless asked (a non-Hudi directory is more often a wrong path than a new table)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.exceptions import HoodiePathError, HoodieTableNotFoundError

OPTIONS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "precombine.field": "ts",
}
ROWS = pa.table({"id": ["a", "b"], "ts": [1, 2]})


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_a_directory_of_other_files_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "data.parquet").write_bytes(b"not ours")
    before = _tree(d)
    with pytest.raises(
        HoodieTableNotFoundError, match=r"data\.parquet.*write\.allow_non_empty_dir"
    ):
        hr.write(ROWS, str(d), OPTIONS, engine="local")
    assert _tree(d) == before and not (d / ".hoodie").exists()
    hr.write(ROWS, str(d), {**OPTIONS, "write.allow_non_empty_dir": "true"}, engine="local")
    assert hr.read(str(d)).num_rows == 2
    # the table exists now: later writes need no option
    hr.write(ROWS, str(d), OPTIONS, engine="local")


@pytest.mark.parametrize("where", ["file", "file/sub"])
def test_a_path_at_or_under_a_file_is_a_path_error(tmp_path: Path, where: str) -> None:
    (tmp_path / "file").write_bytes(b"x")
    path = str(tmp_path / where)
    with pytest.raises(HoodiePathError, match="not a directory"):
        hr.write(ROWS, path, OPTIONS, engine="local")
    with pytest.raises(HoodiePathError, match="not a directory"):
        hr.HoodieWriteClient(path, OPTIONS).write(ROWS)
    assert (tmp_path / "file").read_bytes() == b"x"


def test_an_empty_or_missing_directory_becomes_a_table(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    hr.write(ROWS, str(tmp_path / "empty"), OPTIONS, engine="local")
    hr.write(ROWS, str(tmp_path / "new" / "deeper"), OPTIONS, engine="local")
    assert hr.read(str(tmp_path / "new" / "deeper")).num_rows == 2


def test_reading_a_file_is_a_path_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(HoodiePathError, match="is a file, not a table directory"):
        hr.read(str(tmp_path / "file"))
    with pytest.raises(HoodiePathError):
        hr.HoodieTable.load(str(tmp_path / "file"))
    with pytest.raises(HoodieTableNotFoundError):
        hr.read(str(tmp_path / "missing"))


@pytest.mark.parametrize(
    "bad",
    [
        pa.table({"id": ["a", None], "ts": [1, 2]}),
        pa.table(
            {
                "id": ["a"],
                "ts": [1],
                "d": pa.array([1], pa.decimal128(5, 0)).cast(pa.decimal128(5, -2), safe=False),
            }
        ),
    ],
    ids=["null-key", "negative-scale"],
)
def test_a_refused_first_write_leaves_no_table_with_its_metadata_table(
    tmp_path: Path, bad: pa.Table
) -> None:
    """With the metadata table on (made with the table), a refused first write leaves the
    path as it was, so the next write makes the table its own way."""
    d = tmp_path / "t"
    opts = {**OPTIONS, "hoodie.write.table.version": "8", "hoodie.metadata.enable": "true"}
    with pytest.raises(hr.HoodieError):
        hr.write(bad, str(d), opts, engine="local")
    assert not (d / ".hoodie").exists()
    hr.write(ROWS, str(d), opts, engine="local")
    assert hr.read(str(d)).num_rows == 2 and hr.validate_metadata(str(d)) == []


def test_fixed_size_binary_is_written_again_as_the_first_write_took_it(tmp_path: Path) -> None:
    from tests.conftest import hudi_rs_read

    d = str(tmp_path / "t")
    for ts in (1, 2):
        rows = pa.table(
            {"id": ["a", "b"], "ts": [ts, ts], "h": pa.array([b"abcd", None], pa.binary(4))}
        )
        hr.write(rows, d, OPTIONS, engine="local")
    got = hudi_rs_read(d).sort_by("id")
    assert got["h"].to_pylist() == [b"abcd", None] and got["ts"].to_pylist() == [2, 2]


def test_occ_writers_never_remove_a_table_another_writer_opened(tmp_path: Path) -> None:
    """Optimistic concurrency control: a writer refused by a table another writer just
    created (metadata table and all, no instant yet) leaves it. A writer whose job fails
    after creating the table removes it (its refused first write leaves no table): another
    writer that opened it meanwhile is refused at its next instant, writing nothing, and
    makes the table again when it writes again."""
    from hoodie_ray.config.options import resolve_options
    from hoodie_ray.job.coordinator import Coordinator

    d = str(tmp_path / "t")
    opts = {
        **OPTIONS,
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.write.table.version": "8",
        "hoodie.metadata.enable": "true",
    }
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64())])
    creator = Coordinator(d, resolve_options(opts), None)
    creator.open(schema)
    other = Coordinator(
        d, resolve_options({**opts, "hoodie.datasource.write.recordkey.field": "ts"}), None
    )
    with pytest.raises(hr.HoodieOptionError, match="record key"):
        other.open(schema)
    other.close(discard_unborn=True)
    writer = Coordinator(d, resolve_options(opts), None)
    writer.open(schema)
    creator.close(discard_unborn=True)  # its job failed after the turn that created the table
    assert not (Path(d) / ".hoodie" / "hoodie.properties").exists()
    with pytest.raises(hr.HoodieTableNotFoundError, match="removed since this write opened it"):
        writer.start_instant()
    # made again by a third writer, as another table (its own record key): still refused
    third = Coordinator(
        d, resolve_options({**opts, "hoodie.datasource.write.recordkey.field": "ts"}), None
    )
    third.open(schema)
    with pytest.raises(hr.HoodieTableNotFoundError, match="removed since this write opened it"):
        writer.start_instant()
    writer.close()
    instant = third.start_instant()
    third.commit(instant, [])
    third.close()
    assert [i.timestamp for i in hr.HoodieTable.load(d).commits()] == [instant]


@pytest.mark.parametrize(
    "keygen",
    [
        {
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
        },
        {"hoodie.datasource.write.keygenerator.type": "COMPLEX"},
    ],
    ids=["class", "type"],
)
def test_a_key_generator_other_than_the_tables_is_refused(tmp_path: Path, keygen: dict) -> None:
    """As Java refuses it: the table's key generator makes its keys and partition paths (the
    option was ignored before). The same generator by its Avro class name is the same."""
    from tests.write.test_commit_failures import snapshot_files

    d = str(tmp_path / "t")
    opts = {**OPTIONS, "hoodie.datasource.write.partitionpath.field": "p"}
    rows = pa.table({"id": ["a"], "ts": [1], "p": ["x"]})
    hr.write(rows, d, opts, engine="local")
    before = snapshot_files(tmp_path / "t")
    with pytest.raises(hr.HoodieOptionError, match="key generator .* != table's SIMPLE"):
        hr.write(rows, d, {**opts, **keygen}, engine="local")
    assert snapshot_files(tmp_path / "t") == before
    same = {
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.SimpleAvroKeyGenerator"
    }
    hr.write(rows, d, {**opts, **same}, engine="local")
