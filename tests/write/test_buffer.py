"""The write buffer's splits (pure: no Ray)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from hoodie_ray.write.bucket_assigner import (
    BUCKET_TYPE,
    FILE_ID,
    FILE_ID_TYPE,
    INSERT_BUCKET,
    UPDATE_BUCKET,
    file_id_column,
)
from hoodie_ray.write.buffer import split_by_bucket, stable_order
from hoodie_ray.write.records import PARTITION_PATH


@pytest.mark.parametrize("bound", [2, 8, 256, 257, 65_536, 65_537, 1 << 40])
def test_stable_order_is_numpys_stable_argsort_at_every_width(bound: int) -> None:
    rng = np.random.default_rng(bound % 1000)
    for dtype in (np.int32, np.int64):
        values = rng.integers(0, bound, 5_000).astype(dtype)
        assert np.array_equal(stable_order(values, bound), np.argsort(values, kind="stable"))


def test_split_by_bucket_groups_rows_by_file_group_in_arrival_order() -> None:
    fids = ["b", "a", "b", "c", "a", "b"]
    t = pa.table(
        {
            "i": list(range(6)),
            FILE_ID: fids,
            PARTITION_PATH: [""] * 6,
            BUCKET_TYPE: [UPDATE_BUCKET if f != "c" else INSERT_BUCKET for f in fids],
        }
    )
    out = {bid: (ins, piece.column("i").to_pylist()) for bid, ins, piece in split_by_bucket(t)}
    assert out == {
        ("", "b"): (False, [0, 2, 5]),
        ("", "a"): (False, [1, 4]),
        ("", "c"): (True, [3]),
    }


def test_rows_tagged_in_several_batches_group_by_file_group_through_their_dictionaries() -> None:
    """The file-id tag is dictionary-encoded per batch over the groups it names: batches with
    other dictionaries, concatenated as a bucket drains them, still group by id."""
    names = pa.array(["g0", "g1", "g2"])
    first = file_id_column(np.array([2, 0, 2]), names)
    second = file_id_column(np.array([1, 2]), names)
    assert first.type == FILE_ID_TYPE
    assert first.dictionary.to_pylist() == ["g2", "g0"]  # only the groups it names, in order
    t = pa.concat_tables(
        [
            pa.table({"i": [0, 1, 2], FILE_ID: first, PARTITION_PATH: [""] * 3}),
            pa.table({"i": [3, 4], FILE_ID: second, PARTITION_PATH: [""] * 2}),
        ]
    )
    t = t.append_column(BUCKET_TYPE, pa.array([UPDATE_BUCKET] * 5))
    out = {bid: piece.column("i").to_pylist() for bid, _, piece in split_by_bucket(t)}
    assert out == {("", "g2"): [0, 2, 4], ("", "g0"): [1], ("", "g1"): [3]}
