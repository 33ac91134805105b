"""Splitting batches between tasks: by assigner task (record key, or bucket) and by writer task
(file group). Column-wise: one stable argsort and one ``take`` per split at most."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from hoodie_ray.write.bucket_assigner import writer_of_groups
from hoodie_ray.write.buffer import file_group_codes, stable_order


def split_by_writer(
    tagged: pa.Table,
    num_writers: int,
    plan: Mapping[tuple[str, str], int] | None = None,
    bucket_index: bool = False,
) -> list[pa.Table]:
    """Tagged rows, one table per writer task (:func:`writer_of_groups`: the checkpoint's
    writer plan, else the group's home writer, so a file group lands on one writer:
    HUDI-4397), each with the
    rows of a file group together (arrival order kept within a group), so the writer's buffer
    needs no sort. One ``take`` at most."""
    n = tagged.num_rows
    if n == 0:
        return [tagged] * num_writers
    if num_writers == 1:
        # nothing to route: the writer's buffer splits the rows by file group itself, in one
        # pass (sorting them here first cost a take of every column on top of it)
        return [tagged]
    codes, groups = file_group_codes(tagged)
    per_group = writer_of_groups(groups, num_writers, plan, bucket_index)
    if len(groups) == 1:
        w = int(per_group[0])
        return [tagged if i == w else tagged.slice(0, 0) for i in range(num_writers)]
    # rows by (writer, file group); stable, so arrival order holds within a group
    order = stable_order(per_group[codes] * len(groups) + codes, num_writers * len(groups))
    return _slices(
        tagged.take(pa.array(order)), np.bincount(per_group[codes], minlength=num_writers)
    )


def split_rows(table: pa.Table, targets: np.ndarray, n: int) -> list[pa.Table]:
    """Split a table into ``n`` tables by target index (order kept within each)."""
    if n == 1:
        return [table]
    order = stable_order(targets, n)
    return _slices(table.take(pa.array(order)), np.bincount(targets, minlength=n))


def _slices(ordered: pa.Table, counts: np.ndarray) -> list[pa.Table]:
    """Consecutive slices of ``ordered`` of the given lengths."""
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    return [ordered.slice(int(s), int(c)) for s, c in zip(starts, counts, strict=True)]


class WriterOutbox:
    """Tagged rows an assigner task holds for each writer task until there are enough to send.

    Every input block is split over ``num_writers`` writers (and, before that, over the
    assigners): sent as they come, the parts shrink as the topology widens, and fixed per-call
    costs (an object, a remote call, a buffer append) come to dominate. The outbox sends a
    writer its rows once it holds ``min_rows`` of them, and everything at a checkpoint
    (:meth:`drain`). Arrival order is kept per writer.
    """

    def __init__(self, num_writers: int, min_rows: int) -> None:
        self.min_rows = max(1, min_rows)
        self._tables: list[list[pa.Table]] = [[] for _ in range(num_writers)]
        self._rows = [0] * num_writers

    def add(self, parts: list[pa.Table]) -> list[tuple[int, list[pa.Table]]]:
        """Hold one split (a table per writer); the (writer, tables) now due to be sent."""
        due = []
        for j, part in enumerate(parts):
            if part.num_rows == 0:
                continue
            self._tables[j].append(part)
            self._rows[j] += part.num_rows
            if self._rows[j] >= self.min_rows:
                due.append((j, self._take(j)))
        return due

    def drain(self) -> list[tuple[int, list[pa.Table]]]:
        """Everything held, by writer (a checkpoint)."""
        return [(j, self._take(j)) for j in range(len(self._rows)) if self._rows[j]]

    @property
    def held_rows(self) -> int:
        return sum(self._rows)

    def _take(self, j: int) -> list[pa.Table]:
        tables, self._tables[j], self._rows[j] = self._tables[j], [], 0
        return tables


#: The fewest rows an assigner sends a writer at once (before a checkpoint drains it).
MIN_OUTBOX_ROWS = 4096


def outbox_rows(batch_rows: int, num_writers: int) -> int:
    """Rows an assigner holds per writer before sending: an input batch's share of one writer,
    at least :data:`MIN_OUTBOX_ROWS`, so parts stay large however wide the topology."""
    return max(MIN_OUTBOX_ROWS, batch_rows // max(1, num_writers))


#: Rows a router takes at least in one call: a round of input smaller than ``k`` times this is
#: routed by fewer than ``k`` tasks (:func:`cut_shares`).
MIN_ROUTE_ROWS = 16_384
#: Rows per assigner below which the driver keeps collecting input before it routes a round
#: (:func:`round_rows`).
MIN_PART_ROWS = 16_384

#: One input piece as the driver keeps it: its ``[start, stop)`` rows in its block (None: all
#: of the block) and its row count (None: unknown, as Ray Data may leave it).
InputPiece = tuple[tuple[int, int] | None, int | None]
#: A share of a round: ``(i, rows)``, the ``[start, stop)`` rows of input piece i (None: all).
Share = list[tuple[int, tuple[int, int] | None]]


def round_rows(batch_rows: int, num_assigners: int) -> int:
    """Input rows the driver collects before it routes them as one round: a round costs one
    route call per router and one assign call per assigner, however many blocks it holds, so
    the calls follow the rows, not the blocks; each assigner's call carries at least
    :data:`MIN_PART_ROWS` rows of a full round."""
    return max(batch_rows, num_assigners * MIN_PART_ROWS)


def cut_shares(pieces: list[InputPiece], k: int) -> list[Share]:
    """Cut a round of input pieces, in order, into at most ``k`` contiguous shares of about
    equal rows (one per router: a large block is routed by several tasks at once, many small
    ones by one), never fewer rows a share than :data:`MIN_ROUTE_ROWS` where the round has
    more. A piece of unknown size stays whole, in the share it starts."""
    total = sum(n or 0 for _, n in pieces)
    k = max(1, min(k, total // MIN_ROUTE_ROWS))
    target = -(-total // k) if total else 0
    shares: list[Share] = [[]]
    fill = 0
    for i, (rows, n) in enumerate(pieces):
        if n is None:
            shares[-1].append((i, rows))
            continue
        start = rows[0] if rows is not None else 0
        left = n
        while left > 0:
            if fill >= target and len(shares) < k:
                shares.append([])
                fill = 0
            take = left if len(shares) == k else min(left, target - fill)
            whole = take == n
            shares[-1].append((i, rows if whole else (start, start + take)))
            start += take
            left -= take
            fill += take
    return [s for s in shares if s]
