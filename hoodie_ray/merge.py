"""Record merging: which version of a record key survives (spec §6.2), column-wise.

Event-time ordering (``EVENT_TIME_ORDERING``; DefaultHoodieRecordPayload, EventTimeAvroPayload):
a newer record replaces an older one when its ordering value is ``>=`` the older one's, or when
either is null. A delete with the default ordering value (none known) always wins; a delete with
a real ordering value loses to an older record whose ordering value is strictly greater.
Commit-time ordering (``COMMIT_TIME_ORDERING``; OverwriteWithLatestAvroPayload): the newer
record always wins, deletes always win.

These are the copy-on-write rules, kept apart from ``reader/merger.py`` on purpose: a delete
whose ordering value is an int 0 is compared like any other value here (Java's merge handle,
``combineAndGetUpdateValue``), while a log reader lets it win as the default ordering value
(Java's and hudi-rs's log scanners). Same input, two table types, two outcomes, as in Hudi.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.config.table_config import MergeMode
from hoodie_ray.meta import RECORD_KEY


def newer_wins(
    old_ord: pa.Array | None,
    new_ord: pa.Array | None,
    new_is_delete: np.ndarray,
    new_delete_is_default: np.ndarray,
    mode: MergeMode,
) -> np.ndarray:
    """For matched pairs (old, new): does the new version (record or delete) win?"""
    n = len(new_is_delete)
    if mode is MergeMode.COMMIT_TIME_ORDERING or old_ord is None or new_ord is None:
        return np.ones(n, dtype=bool)
    old_null = pc.is_null(old_ord).to_numpy(zero_copy_only=False)
    new_null = pc.is_null(new_ord).to_numpy(zero_copy_only=False)
    if old_ord.type != new_ord.type:
        try:
            new_ord = new_ord.cast(old_ord.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return np.ones(n, dtype=bool)  # incomparable classes: the later record wins
    ge = pc.fill_null(pc.greater_equal(new_ord, old_ord), True).to_numpy(zero_copy_only=False)
    wins = ge | old_null | new_null
    # A default-ordered delete always wins.
    return wins | (new_is_delete & new_delete_is_default)


def key_positions(
    keys: pa.Array | pa.ChunkedArray, lookup_in: pa.Array | pa.ChunkedArray
) -> np.ndarray:
    """Position of each key in ``lookup_in`` (which holds unique keys), or -1."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if isinstance(lookup_in, pa.ChunkedArray):
        lookup_in = lookup_in.combine_chunks()
    if len(lookup_in) == 0:
        return np.full(len(keys), -1, dtype=np.int64)
    idx = pc.index_in(keys, value_set=lookup_in)
    return pc.fill_null(idx, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def apply_updates(
    base: pa.Table,
    updates: pa.Table,
    *,
    is_delete: np.ndarray,
    delete_is_default: np.ndarray | None = None,
    ordering_field: str | None,
    mode: MergeMode,
) -> pa.Table:
    """Merge unique-keyed ``updates`` into unique-keyed ``base`` (both with ``_hoodie_record_key``).

    ``updates`` has the columns of ``base`` (same schema). Returns the surviving rows: base rows
    not replaced or deleted, then the winning update rows that are not deletes. Updates of keys
    not in ``base`` are inserts; deletes of such keys vanish.
    """
    if delete_is_default is None:
        delete_is_default = np.zeros(len(is_delete), dtype=bool)
    pos = key_positions(updates.column(RECORD_KEY), base.column(RECORD_KEY))
    matched = pos >= 0
    win = np.ones(len(pos), dtype=bool)
    if matched.any() and ordering_field is not None and mode is MergeMode.EVENT_TIME_ORDERING:
        midx = np.flatnonzero(matched)
        old_ord = pc.take(base.column(ordering_field), pa.array(pos[midx]))
        new_ord = pc.take(updates.column(ordering_field), pa.array(midx))
        win[midx] = newer_wins(
            old_ord.combine_chunks() if isinstance(old_ord, pa.ChunkedArray) else old_ord,
            new_ord.combine_chunks() if isinstance(new_ord, pa.ChunkedArray) else new_ord,
            is_delete[midx],
            delete_is_default[midx],
            mode,
        )
    drop_base = np.zeros(base.num_rows, dtype=bool)
    drop_base[pos[matched & win]] = True
    keep_updates = win & ~is_delete
    parts = []
    if base.num_rows:
        parts.append(base.filter(pa.array(~drop_base)) if drop_base.any() else base)
    if keep_updates.any():
        parts.append(updates.filter(pa.array(keep_updates)))
    if not parts:
        return base.slice(0, 0)
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def dedupe_last(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Mask keeping the last occurrence of each key."""
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    idx = pd.Index(np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object))
    return ~idx.duplicated(keep="last")
