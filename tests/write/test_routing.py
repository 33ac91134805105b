"""The splits by task and the writer outbox (pure: no Ray)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from hoodie_ray.write.routing import (
    MIN_OUTBOX_ROWS,
    WriterOutbox,
    outbox_rows,
    split_rows,
)


def test_split_rows_keeps_order_within_each_target() -> None:
    t = pa.table({"i": list(range(10))})
    parts = split_rows(t, np.array([1, 0, 1, 2, 0, 1, 2, 2, 0, 1]), 3)
    assert [p.column("i").to_pylist() for p in parts] == [[1, 4, 8], [0, 2, 5, 9], [3, 6, 7]]


def test_outbox_sends_a_writer_its_rows_once_it_holds_enough_and_all_at_a_drain() -> None:
    box = WriterOutbox(3, min_rows=5)

    def part(start: int, n: int) -> pa.Table:
        return pa.table({"i": list(range(start, start + n))})

    empty = part(0, 0)
    assert box.add([part(0, 3), empty, part(100, 6)]) == [(2, [part(100, 6)])]
    due = box.add([part(3, 2), part(200, 1), empty])
    assert [(j, [t.column("i").to_pylist() for t in ts]) for j, ts in due] == [
        (0, [[0, 1, 2], [3, 4]])  # arrival order kept
    ]
    assert box.held_rows == 1
    assert [(j, [t.num_rows for t in ts]) for j, ts in box.drain()] == [(1, [1])]
    assert box.held_rows == 0 and box.drain() == []


def test_outbox_size_shrinks_with_width_down_to_a_floor() -> None:
    assert outbox_rows(100_000, 2) == 50_000
    assert outbox_rows(100_000, 64) == MIN_OUTBOX_ROWS
