"""The write buffer's splits (pure: no Ray)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from hoodie_ray.write.bucket_assigner import BUCKET_TYPE, FILE_ID, INSERT_BUCKET, UPDATE_BUCKET
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
