"""The splits by task and the writer outbox (pure: no Ray)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from hoodie_ray.write.routing import (
    MIN_OUTBOX_ROWS,
    MIN_PART_ROWS,
    MIN_ROUTE_ROWS,
    WriterOutbox,
    cut_shares,
    outbox_rows,
    round_rows,
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


def test_a_round_of_one_large_block_is_cut_between_every_router() -> None:
    shares = cut_shares([(None, 100_000)], 4)
    assert [s[0][1] for s in shares] == [(0, 25_000), (25_000, 50_000), (50_000, 75_000),
                                          (75_000, 100_000)]  # fmt: skip
    # a slice of a block is cut within its own rows
    assert cut_shares([((10, 40_010), 40_000)], 2) == [[(0, (10, 20_010))], [(0, (20_010, 40_010))]]


def test_many_small_blocks_go_whole_to_few_routers_in_order() -> None:
    shares = cut_shares([(None, 1_500)] * 64, 8)
    # 96K rows: as many routers as take >= MIN_ROUTE_ROWS each; the blocks in order, each
    # whole or cut between two neighbouring shares
    assert len(shares) == 96_000 // MIN_ROUTE_ROWS
    flat = [p for s in shares for p in s]
    assert [i for i, _ in flat] == sorted(i for i, _ in flat)
    assert {i for i, _ in flat} == set(range(64)) and len(flat) < 64 + len(shares)
    assert sum((r[1] - r[0]) if r else 1_500 for _, r in flat) == 96_000
    assert cut_shares([(None, 10), (None, None), (None, 5)], 4) == [
        [(0, None), (1, None), (2, None)]
    ]


def test_a_round_grows_with_the_assigners() -> None:
    assert round_rows(65_536, 1) == 65_536
    assert round_rows(65_536, 16) == 16 * MIN_PART_ROWS
