"""Splitting batches between tasks: by assigner task (record key, or bucket) and by writer task
(file group). Column-wise: one stable argsort and one ``take`` per split at most."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from hoodie_ray.write.bucket_assigner import writer_of_groups
from hoodie_ray.write.buffer import file_group_codes


def split_by_writer(
    tagged: pa.Table, num_writers: int, plan: Mapping[tuple[str, str], int] | None = None
) -> list[pa.Table]:
    """Tagged rows, one table per writer task (:func:`writer_of_groups`: the checkpoint's
    writer plan, else a hash, so a file group lands on one writer: HUDI-4397), each with the
    rows of a file group together (arrival order kept within a group), so the writer's buffer
    needs no sort. One ``take`` at most."""
    n = tagged.num_rows
    if n == 0:
        return [tagged] * num_writers
    codes, groups = file_group_codes(tagged)
    per_group = writer_of_groups(groups, num_writers, plan)
    if len(groups) == 1:
        w = int(per_group[0])
        return [tagged if i == w else tagged.slice(0, 0) for i in range(num_writers)]
    # rows by (writer, file group); stable, so arrival order holds within a group
    order = np.argsort(per_group[codes] * len(groups) + codes, kind="stable")
    return _slices(
        tagged.take(pa.array(order)), np.bincount(per_group[codes], minlength=num_writers)
    )


def split_rows(table: pa.Table, targets: np.ndarray, n: int) -> list[pa.Table]:
    """Split a table into ``n`` tables by target index (order kept within each)."""
    if n == 1:
        return [table]
    order = np.argsort(targets, kind="stable")
    return _slices(table.take(pa.array(order)), np.bincount(targets, minlength=n))


def _slices(ordered: pa.Table, counts: np.ndarray) -> list[pa.Table]:
    """Consecutive slices of ``ordered`` of the given lengths."""
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    return [ordered.slice(int(s), int(c)) for s, c in zip(starts, counts, strict=True)]
