"""Every Ray Dataset constructor a user reaches for, through ``hr.write`` and the stream
writer: pandas-backed blocks (``from_pandas``, ``map_batches(batch_format="pandas")``), Arrow
blocks (``from_arrow``, ``from_items``, ``read_parquet``), numpy batches, and a Dataset whose
blocks are of both kinds; the table as hudi-rs reads it equals the model after each commit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_ray as hr
from tests.conftest import hudi_rs_read

pytestmark = pytest.mark.ray

OPTIONS = {
    "hoodie.table.name": "inputs",
    "hoodie.datasource.write.recordkey.field": "key",
    "hoodie.datasource.write.partitionpath.field": "p",
    "precombine.field": "ts",
}
N = 24  # rows a commit: half new keys, half updates of the last commit's new keys


def _frame(step: int) -> pd.DataFrame:
    """Commit ``step``'s rows: keys ``12 * step .. 12 * step + 23``, ``ts`` the step."""
    keys = np.arange(12 * step, 12 * step + N)
    return pd.DataFrame(
        {
            "key": [f"k{k:04d}" for k in keys],
            "ts": np.full(N, step, dtype=np.int64),
            "p": [f"p{k % 3}" for k in keys],
            "v": [f"v{step}-{k}" for k in keys],
            "amount": keys.astype(np.float64) / 4,
        }
    )


def _numpy_batch(batch: dict[str, np.ndarray], step: int) -> dict[str, np.ndarray]:
    df = _frame(step)
    keys = batch["data"]
    rows = df.set_index(df["key"].str[1:].astype(int)).loc[keys]
    return {c: rows[c].to_numpy() for c in df.columns}


def _pandas_batch(batch: pd.DataFrame, step: int) -> pd.DataFrame:
    df = _frame(step)
    return df[df["key"].str[1:].astype(int).isin(batch["id"])].reset_index(drop=True)


def _constructors(tmp: Path) -> dict[str, Callable[[Any, int], Any]]:
    """name -> (ray, step) -> a Dataset of commit ``step``'s rows, made that way."""

    def parquet(ray: Any, step: int) -> Any:
        folder = tmp / f"in-{step}"
        folder.mkdir()
        t = pa.Table.from_pandas(_frame(step), preserve_index=False)
        pq.write_table(t.slice(0, 10), folder / "a.parquet")
        pq.write_table(t.slice(10), folder / "b.parquet")
        return ray.data.read_parquet(str(folder))

    def mixed(ray: Any, step: int) -> Any:
        df = _frame(step)
        arrow = pa.Table.from_pandas(df.iloc[N // 2 :], preserve_index=False)
        return ray.data.from_pandas(df.iloc[: N // 2].reset_index(drop=True)).union(
            ray.data.from_arrow(arrow)
        )

    def range_pandas(ray: Any, step: int) -> Any:
        lo = 12 * step
        return (
            ray.data.range(N, override_num_blocks=3)
            .map_batches(lambda b: {"id": b["id"] + lo})
            .map_batches(_pandas_batch, batch_format="pandas", fn_kwargs={"step": step})
        )

    return {
        "from_pandas": lambda ray, step: ray.data.from_pandas(
            [_frame(step).iloc[:10], _frame(step).iloc[10:].reset_index(drop=True)]
        ),
        "from_arrow": lambda ray, step: ray.data.from_arrow(
            pa.Table.from_pandas(_frame(step), preserve_index=False)
        ),
        "from_items": lambda ray, step: ray.data.from_items(_frame(step).to_dict("records")),
        "from_numpy": lambda ray, step: ray.data.from_numpy(
            np.arange(12 * step, 12 * step + N)
        ).map_batches(_numpy_batch, batch_format="numpy", fn_kwargs={"step": step}),
        "read_parquet": parquet,
        "range_map_batches_pandas": range_pandas,
        "pandas_and_arrow_blocks": mixed,
    }


class _Model:
    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}

    def upsert(self, step: int) -> None:
        for r in _frame(step).to_dict("records"):
            self.rows[r["key"]] = r

    def check(self, path: Path, what: str) -> None:
        t = hudi_rs_read(path)
        got = t.select(["key", "ts", "p", "v", "amount"]).sort_by("key").to_pylist()
        assert got == [self.rows[k] for k in sorted(self.rows)], what


#: hr.write runs the stream writer's path (every constructor is written through it below):
#: the kinds whose blocks differ most, a new table from pandas and Arrow blocks first (each
#: hr.write of a Dataset costs ~2 s of the suite here)
HR_WRITE_KINDS = ("pandas_and_arrow_blocks", "range_map_batches_pandas", "read_parquet")


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
def test_dataset_constructors_through_hr_write(ray_session, tmp_path):
    """A new table from a Dataset of pandas and Arrow blocks (pandas blocks used to fail the
    coordinator's open), then upserts into it from Datasets of other kinds."""
    ray = ray_session
    path = tmp_path / "t"
    model = _Model()
    makers = _constructors(tmp_path)
    for step, name in enumerate(HR_WRITE_KINDS):
        make = makers[name]
        assert hr.write(make(ray, step), str(path), OPTIONS).instant is not None, name
        model.upsert(step)
        model.check(path, name)


#: the kinds the CI suite's stream-writer test writes (each Dataset's execution costs ~1.5 s
#: of the suite here): pandas blocks first (a new table), pandas batches of a chain of
#: ``map_batches``, a Dataset of both block kinds; ``-m slow`` writes every kind
STREAM_KINDS = ("from_pandas", "range_map_batches_pandas", "pandas_and_arrow_blocks")


@pytest.mark.parametrize(
    "kinds",
    [STREAM_KINDS, pytest.param(None, marks=pytest.mark.slow)],  # suite time
    ids=["pandas-kinds", "every-kind"],
)
def test_every_dataset_constructor_through_the_stream_writer(ray_session, tmp_path, kinds):
    """A new table from a ``from_pandas`` Dataset, then one checkpoint of a Dataset of every
    kind (the later ones update the keys of the earlier ones: precombine picks the last)."""
    ray = ray_session
    path = tmp_path / "t"
    model = _Model()
    opts = {**OPTIONS, "write.tasks": "2", "write.bucket_assign.tasks": "2"}
    makers = [(k, m) for k, m in _constructors(tmp_path).items() if kinds is None or k in kinds]
    with hr.HoodieStreamWriter(str(path), opts) as w:
        w.write(makers[0][1](ray, 0))
        assert w.checkpoint() is not None
        model.upsert(0)
        model.check(path, makers[0][0])
        for step, (_, make) in enumerate(makers[1:], start=1):
            w.write(make(ray, step))
            model.upsert(step)
        assert w.checkpoint() is not None
        model.check(path, "every kind in one checkpoint")


def test_object_column_of_mixed_values_is_refused_by_name(ray_session, tmp_path):
    """A pandas block whose object column holds ints and strings: the input error, raised as
    itself, before the table exists."""
    ray = ray_session
    df = _frame(0).astype({"v": object})
    df.loc[3, "v"] = 7
    with pytest.raises(hr.HoodieInputError, match="v"):
        hr.write(ray.data.from_pandas(df), str(tmp_path / "t"), OPTIONS)
    assert not (tmp_path / "t" / ".hoodie" / "hoodie.properties").exists()


def test_empty_dataset_overwrites_and_repeated_names_on_the_ray_engine(ray_session, tmp_path):
    """An empty Dataset into an ``insert_overwrite_table`` truncates the table, as empty Arrow
    does (its emptiness shows only as it is read); an Arrow table with a column name twice is
    the schema error naming it (Ray cannot carry such a table: it failed as a ``KeyError``)."""
    ray = ray_session
    path = str(tmp_path / "t")
    rows = pa.table({"key": [f"k{i}" for i in range(6)], "p": ["a", "b"] * 3, "ts": [1] * 6})
    opts = OPTIONS
    hr.write(rows, path, opts)
    twice = rows.append_column("ts", rows["ts"])
    with pytest.raises(hr.HoodieSchemaError, match="field ts appears twice"):
        hr.write(twice, path, opts)
    iot = {**opts, "write.operation": "insert_overwrite_table"}
    assert hr.write(ray.data.from_arrow(rows.slice(0, 0)), path, iot).instant is not None
    assert hudi_rs_read(path).num_rows == 0


def test_a_key_in_two_partitions_of_one_dataset_without_the_global_index(ray_session, tmp_path):
    """The tasks' fold (``BucketAssigner.assign_batch``) keeps a record key's row in each
    partition where the index is not global, as the single-process fold does
    (tests/write/test_partition_moves.py): one of them was dropped."""
    path = str(tmp_path / "t")
    opts = {**OPTIONS, "index.global.enabled": "false", "write.tasks": "1"}
    rows = pa.table({"key": ["k1", "k1", "k2"], "p": ["a", "b", "a"], "ts": [1, 2, 1]})
    hr.write(ray_session.data.from_arrow([rows]), path, opts)
    got = hudi_rs_read(path)
    assert sorted(zip(got["key"].to_pylist(), got["p"].to_pylist(), strict=True)) == [
        ("k1", "a"),
        ("k1", "b"),
        ("k2", "a"),
    ]


def test_blocks_whose_schemas_ray_data_reports_as_the_first_ones(ray_session, tmp_path):
    """Ray Data gives every block of a Dataset the first block's schema where they differ.
    ``hr.write`` asks the blocks themselves where that matters: a pandas block with a NaN
    (int64 in the first frame, float64 in the second) was refused as a type change, and a
    first block whose column is all null made it a string column (the numbers of later
    blocks stored as text); the same rows as one table write a double and an int64 column."""
    ray = ray_session
    keyed = {**OPTIONS, "hoodie.datasource.write.partitionpath.field": ""}
    first = pd.DataFrame({"key": ["a", "b"], "ts": [1, 1], "qty": [1, 2]})
    later = pd.DataFrame({"key": ["c", "d"], "ts": [1, 1], "qty": [3, np.nan]})
    path = str(tmp_path / "nan")
    hr.write(ray.data.from_pandas([first, later]), path, keyed)
    got = hudi_rs_read(path).sort_by("key")
    assert got.schema.field("qty").type == pa.float64()
    assert got["qty"].to_pylist()[:3] == [1.0, 2.0, 3.0]

    items = [{"key": f"k{i}", "ts": 1, "score": None if i < 3 else i} for i in range(6)]
    path = str(tmp_path / "nulls")
    hr.write(ray.data.from_items(items, override_num_blocks=2), path, keyed)
    got = hudi_rs_read(path).sort_by("key")
    assert got.schema.field("score").type == pa.int64()
    assert got["score"].to_pylist() == [None, None, None, 3, 4, 5]


def test_a_stream_writer_takes_each_dataset_block_in_its_own_schema(ray_session, tmp_path):
    """``HoodieStreamWriter.write(ds)`` as ``hr.write`` does: a later pandas block's NaN
    (a double column, int64 in the first frame) and extra column were refused as schema
    changes (Ray Data's bundle gives the first frame's schema; each block's metadata keeps
    its own); a new table's first block with an all-null column made it a string column (the
    later blocks' numbers stored as text); a ``map_batches`` block whose schema Ray Data
    reports as the first one's (an int column that is double in it) failed the checkpoint."""
    ray = ray_session
    keyed = {**OPTIONS, "hoodie.datasource.write.partitionpath.field": "", "write.tasks": "2"}
    first = pd.DataFrame({"key": ["a", "b"], "ts": [1, 1], "qty": [1, 2]})
    later = pd.DataFrame({"key": ["c", "d"], "ts": [1, 1], "qty": [3, np.nan]})
    wider = pd.DataFrame({"key": ["e"], "ts": [1], "qty": [5], "extra": ["x"]})
    path = str(tmp_path / "frames")
    with hr.HoodieStreamWriter(path, keyed) as w:
        w.write(ray.data.from_pandas([first, later]))
        w.checkpoint()
        w.write(ray.data.from_pandas([first, wider]))
    got = hudi_rs_read(path).sort_by("key")
    assert got.schema.field("qty").type == pa.float64()
    assert got["qty"].to_pylist() == [1.0, 2.0, 3.0, None, 5.0]
    assert got["extra"].to_pylist() == [None, None, None, None, "x"]

    items = [{"key": f"k{i}", "ts": 1, "score": None if i < 3 else i} for i in range(6)]
    parts = [
        pa.table({"key": ["m0", "m1"], "ts": [2, 2], "score": [7, 8]}),
        pa.table({"key": ["m2", "m3"], "ts": [2, 2], "score": [9.5, None]}),
    ]
    path = str(tmp_path / "nulls")
    # inserts: a block the replay sent twice would show as two rows of its keys
    with hr.HoodieStreamWriter(path, {**keyed, "write.operation": "insert"}) as w:
        w.write(ray.data.from_items(items, override_num_blocks=2))
        w.checkpoint()
        assert hudi_rs_read(path).schema.field("score").type == pa.int64()
        w.write(ray.data.from_arrow(parts).map_batches(lambda b: b, batch_format="pyarrow"))
    got = hudi_rs_read(path).sort_by("key")
    assert got.schema.field("score").type == pa.float64()
    assert got["key"].to_pylist() == [f"k{i}" for i in range(6)] + ["m0", "m1", "m2", "m3"]
    assert got["score"].to_pylist() == [None, None, None, 3.0, 4.0, 5.0, 7.0, 8.0, 9.5, None]


def test_datasets_on_the_single_process_engine(ray_session, tmp_path):
    """``engine="local"`` takes a Dataset's blocks as the Ray engine does: an empty one writes
    nothing (it was "the batch lacks column key"), a pandas block of mixed values is the
    input error naming the column (a raw ArrowConversionError), blocks of different schemas
    are unified."""
    ray = ray_session
    path = str(tmp_path / "t")
    empty = ray.data.from_pandas([_frame(0).iloc[:0]])
    assert hr.write(empty, path, OPTIONS, engine="local").instant is None
    mixed = _frame(0).astype({"v": object})
    mixed.loc[3, "v"] = 7
    with pytest.raises(hr.HoodieInputError, match="v"):
        hr.write(ray.data.from_pandas([_frame(0), mixed]), path, OPTIONS, engine="local")
    wider = _frame(1).assign(extra=np.arange(N, dtype=np.int64))
    hr.write(ray.data.from_pandas([_frame(0), wider]), path, OPTIONS, engine="local")
    got = hudi_rs_read(path).sort_by("key")
    assert got.num_rows == hr.read(path).num_rows == 36
    assert got["extra"].to_pylist()[:12] == [None] * 12


def test_a_table_of_many_chunks_is_put_joined(ray_session: Any) -> None:
    """Small batches held together: put as one chunk a column (Ray serialises chunk by chunk);
    a table of few chunks, or one Arrow cannot join, is put as it is."""
    import ray

    from hoodie_ray.ray.inputs import PUT_MAX_CHUNKS, put_table

    batches = [pa.table({"k": [f"k{i}", f"k{i + 1}"], "v": [i, i + 1]}) for i in range(0, 10, 2)]
    many = pa.concat_tables(batches)
    item = put_table(many)
    got = ray.get(item.ref)
    assert item.num_rows == 10 and got.equals(many)
    assert [c.num_chunks for c in got.columns] == [1, 1]
    few = pa.concat_tables(batches[:PUT_MAX_CHUNKS])
    assert [c.num_chunks for c in ray.get(put_table(few).ref).columns] == [2, 2]
