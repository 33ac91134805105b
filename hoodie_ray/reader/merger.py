"""The keyed log-record state of one file slice, folded block by block, column-wise.

Merge rules: :mod:`hoodie_ray.merge` (spec §6.2; Java ``BufferedRecordMergerFactory`` /
hudi-rs ``record_merger.rs``), the one definition every merger uses. In short:
``COMMIT_TIME_ORDERING``: the later version always wins (over the base record too).
``EVENT_TIME_ORDERING``: a newer version wins when its ordering value is ``>=`` the older
one's (nulls lowest, ties: the newer) or of another class; a delete with the default ordering
value (null, or Java ``Integer 0``) is commit-time ordered (it wins, and the next version
replaces it), and a log state that holds such a delete, or a version that followed one, wins
over the base record whatever its ordering value (*reset*), so folding the log first gives
what folding every version in order gives.

Log records are merged into one keyed state (:class:`LogRecordBuffer`); the base file is then
streamed batch by batch through :meth:`LogRecordBuffer.merge_base`, and
:meth:`LogRecordBuffer.remaining` yields the log records no base record consumed (updates that
won, and inserts). Every step is a vectorised numpy/pyarrow operation over whole blocks: no
per-record Python loop.

Two engines, one rule. :class:`~hoodie_ray.reader.compiled_merger.CompiledLogRecordBuffer`
folds the same state through a compiled hash table, several times faster; this column-wise
buffer stays for what the compiled one cannot take: ordering values that do not compare as
int64 / float64 (strings, decimals, binary, uint64), processes where numba is unavailable or
switched off (``HOODIE_RAY_NO_JIT``, :mod:`hoodie_ray.jit`), and small slices read by a process
that has not loaded numba (loading it costs ~0.15-0.5 CPU-s and ~140 MB; see
:func:`~hoodie_ray.reader.compiled_merger.new_log_record_buffer`). What the two share is
defined once: the rule and the state bits in :mod:`hoodie_ray.merge` (``wins_by_state``, which
the compiled kernels compile; ``default_ordering``; ``ordering_class``;
``compares_ordering``), and the settings in :class:`FileGroupRecordBuffer`.
``tests/reader/test_merge_engines.py`` runs both on the same inputs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.config.table_config import MergeMode
from hoodie_ray.exceptions import HoodieCorruptedDataError
from hoodie_ray.merge import compares_ordering, default_ordering, keep_newer, ordering_class

__all__ = [
    "COMMIT_TIME",
    "IS_DELETED",
    "OPERATION",
    "PARTITION_PATH",
    "RECORD_KEY",
    "DeleteBlock",
    "DeleteMarker",
    "FileGroupRecordBuffer",
    "KeyLookup",
    "LogRecordBuffer",
    "default_ordering",
    "ordering_class",
]

from hoodie_ray.meta import (  # noqa: F401 (re-exported for the readers)
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    IS_DELETED,
    OPERATION,
    PARTITION_PATH,
    RECORD_KEY,
)


class DeleteMarker:
    """How a data record says it is a delete (spec §6.3).

    ``_hoodie_is_deleted = true``, ``_hoodie_operation`` ``D`` (or ``-U``), or a custom marker column
    (``hoodie.payload.delete.field`` / ``hoodie.payload.delete.marker``, also under the
    ``hoodie.record.merge.property.`` prefix).
    """

    def __init__(self, custom: tuple[str, str] | None = None) -> None:
        self.custom = custom

    @classmethod
    def from_props(cls, props: dict[str, str] | None) -> DeleteMarker:
        props = props or {}

        def get(k: str) -> str | None:
            return props.get(f"hoodie.record.merge.property.{k}") or props.get(k) or None

        key, marker = get("hoodie.payload.delete.field"), get("hoodie.payload.delete.marker")
        return cls((key, marker) if key and marker else None)

    def columns(self) -> list[str]:
        """Columns the detection reads (when present in the schema)."""
        cols = [IS_DELETED, OPERATION]
        if self.custom:
            cols.append(self.custom[0])
        return cols

    def mask(self, table: pa.Table) -> np.ndarray:
        """Delete flags of the rows of ``table``."""
        n = table.num_rows
        out = np.zeros(n, dtype=bool)
        names = table.schema.names
        if IS_DELETED in names:
            col = table.column(IS_DELETED)
            if pa.types.is_boolean(col.type):
                out |= _bool_np(pc.fill_null(col, False))
        if OPERATION in names:
            col = table.column(OPERATION)
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                # DELETE, and UPDATE_BEFORE of a CDC pair (Java HoodieOperation.isDeleteRecord)
                is_del = pc.is_in(col, value_set=pa.array(["D", "-U"], col.type))
                out |= _bool_np(pc.fill_null(is_del, False))
        if self.custom and self.custom[0] in names:
            col = table.column(self.custom[0])
            try:
                eq = pc.equal(pc.cast(col, pa.string()), self.custom[1])
                out |= _bool_np(pc.fill_null(eq, False))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        return out


def _bool_np(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool)


def _array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)
        return col.combine_chunks()
    return col


def _as_string_keys(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    arr = _array(keys)
    if not pa.types.is_string(arr.type):
        arr = arr.cast(pa.string())
    return arr


class KeyLookup:
    """Positions of record keys in a fixed set of unique keys (-1 when absent).

    Each probe hashes the smaller side with ``pyarrow.compute.index_in`` and probes the other,
    so one call costs about ``len(keys) + len(probe)``; callers keep probes large (base batches
    about as long as the log state) to amortise it.
    """

    def __init__(self, keys: pa.Array | pa.ChunkedArray) -> None:
        self.keys = _as_string_keys(keys)

    def __len__(self) -> int:
        return len(self.keys)

    def positions(self, probe: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Position in ``keys`` of each probe key. With duplicate probe keys only the first
        occurrence is guaranteed a match."""
        probe = _as_string_keys(probe)
        n = len(probe)
        if len(self.keys) == 0 or n == 0:
            return np.full(n, -1, dtype=np.int64)
        if len(self.keys) <= n:
            idx = pc.index_in(probe, value_set=self.keys)
            return np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        # Hash the (smaller) probe and look every key up in it, then invert.
        rev = pc.index_in(self.keys, value_set=probe)
        rev_np = np.asarray(pc.fill_null(rev, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        hit = np.flatnonzero(rev_np >= 0)
        out = np.full(n, -1, dtype=np.int64)
        out[rev_np[hit]] = hit
        return out


def occurrence_rank(keys: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """For keys with duplicates: the 0-based occurrence number of each row; else ``None``."""
    arr = _array(keys)
    enc = pc.dictionary_encode(arr)
    if len(enc.dictionary) == len(arr):
        return None
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    return pd.Series(codes).groupby(codes).cumcount().to_numpy()


class DeleteBlock(NamedTuple):
    """The deletes of one delete block (:meth:`FileGroupRecordBuffer.add_delete_block`)."""

    keys: pa.Array
    partition_paths: pa.Array | None
    ordering: pa.Array | None
    default: np.ndarray
    foreign: np.ndarray


class FileGroupRecordBuffer:
    """What both log buffers (this module's column-wise one and
    :class:`~hoodie_ray.reader.compiled_merger.CompiledLogRecordBuffer`) share: the reader
    schema, the merge mode, the ordering field as the reader schema holds it, and the inputs of
    :mod:`hoodie_ray.merge`'s rule derived from them (Java's ``FileGroupRecordBuffer``).

    Args:
        schema: the reader schema (record key, ordering field and every column to output).
        ordering_field: the table's ordering (precombine) field, or None.
        mode: the table's merge mode.
    """

    def __init__(self, schema: pa.Schema, ordering_field: str | None, mode: MergeMode) -> None:
        if RECORD_KEY not in schema.names:
            raise ValueError("the reader schema needs _hoodie_record_key")
        self.schema = schema
        self.mode = mode
        self.ordering_field = (
            ordering_field if ordering_field and ordering_field in schema.names else None
        )
        #: the type of the ordering values; None without an ordering field
        self._ord_type = (
            schema.field(self.ordering_field).type if self.ordering_field is not None else None
        )
        #: a default ordering value is Java's ``Integer 0`` too
        self._ord_int32 = self._ord_type is not None and ordering_class(self._ord_type) == "int"
        #: versions are compared by ordering value (else the newer always wins)
        self._compares = compares_ordering(mode, self.ordering_field)
        self.num_log_records = 0

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def is_empty(self) -> bool:
        """No live entry (no key has a version in the logs)."""
        return len(self) == 0

    def add_delete_block(
        self,
        keys: pa.Array,
        partition_paths: pa.Array | None,
        ordering: pa.Array | None,
        default: np.ndarray,
        foreign: np.ndarray,
    ) -> None:
        """Fold the deletes of one delete block, in order.

        Args:
            keys: record keys.
            partition_paths: partition paths (or None).
            ordering: ordering values already cast to the ordering field's type (null where
                ``default`` or ``foreign``), or None when the table has no ordering field.
            default: deletes with the default ordering value (null or ``IntWrapper(0)``).
            foreign: deletes whose ordering value has another class than the field's.
        """
        if len(keys):
            self._add_deletes(DeleteBlock(keys, partition_paths, ordering, default, foreign))

    def _add_deletes(self, block: DeleteBlock) -> None:
        raise NotImplementedError

    def _default_deletes(self, table: pa.Table, is_delete: np.ndarray) -> np.ndarray:
        """The deletes of ``table`` whose ordering value is the default one (commit-time
        ordered: :func:`hoodie_ray.merge.default_ordering`)."""
        if not is_delete.any():
            return np.zeros(len(is_delete), dtype=bool)
        return is_delete & default_ordering(table, self.ordering_field, self._ord_int32)


class LogRecordBuffer(FileGroupRecordBuffer):
    """The merged log records of one file slice, keyed by ``_hoodie_record_key``.

    Args:
        schema: the reader schema (record key, ordering field and every column to output).
        ordering_field: the table's ordering (precombine) field, or None.
        mode: the table's merge mode.

    Each entry carries four flags beside its columns: ``is_delete``, ``default_delete`` (a
    delete whose ordering value is the default: it always wins), ``foreign`` (an ordering
    value of another class than the field's, stored as null in the ordering column) and
    ``reset`` (a default-ordered delete, or a version that followed one: it wins over the
    base record).

    Layout: every folded block stays as it was decoded (a *piece*); records are numbered in
    fold order and a liveness flag says which ones are current entries. A hash index (record
    key -> record number, :class:`hoodie_ray.index.KeyIndex`) finds a block's keys among the
    entries, so folding a block costs about the block's size, not the state's: nothing is
    copied until the state is read. When the superseded records outnumber the live ones the
    pieces are compacted, so memory stays within twice the live entries plus one block.
    """

    def __init__(self, schema: pa.Schema, ordering_field: str | None, mode: MergeMode) -> None:
        super().__init__(schema, ordering_field, mode)
        from hoodie_ray.index import KeyIndex

        self._pieces: list[pa.Table] = []
        self._n = 0  # records in the pieces (live or superseded)
        self._alive = np.zeros(0, dtype=bool)
        self._is_delete = np.zeros(0, dtype=bool)
        self._default = np.zeros(0, dtype=bool)
        self._foreign = np.zeros(0, dtype=bool)
        self._reset = np.zeros(0, dtype=bool)
        self._index = KeyIndex()
        self._n_alive = 0
        # Materialised state (live entries in record order), built by freeze()/remaining().
        self._table: pa.Table | None = None
        self._flags: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._position: np.ndarray | None = None  # record number -> row of _table
        self._consumed: np.ndarray | None = None

    def __len__(self) -> int:
        return self._n_alive

    # -- folding log blocks --------------------------------------------------------------------
    def add_data_block(self, table: pa.Table, is_delete: np.ndarray | None = None) -> None:
        """Fold the records of one data block (``table`` in the reader schema), in order.

        ``is_delete`` marks records that are deletes (``_hoodie_is_deleted`` and friends).
        """
        n = table.num_rows
        if n == 0:
            return
        is_delete = np.zeros(n, dtype=bool) if is_delete is None else is_delete
        default = self._default_deletes(table, is_delete)
        self._fold(table, is_delete, default, np.zeros(n, dtype=bool))

    def _add_deletes(self, block: DeleteBlock) -> None:
        keys, ordering, n = block.keys, block.ordering, len(block.keys)
        cols = []
        for f in self.schema:
            if f.name == RECORD_KEY:
                cols.append(_as_string_keys(keys).cast(f.type))
            elif f.name == PARTITION_PATH and block.partition_paths is not None:
                cols.append(_array(block.partition_paths).cast(f.type))
            elif f.name == self.ordering_field and ordering is not None:
                cols.append(_array(ordering).cast(f.type))
            else:
                cols.append(pa.nulls(n, f.type))
        table = pa.Table.from_arrays(cols, schema=self.schema)
        self._fold(table, np.ones(n, dtype=bool), block.default.copy(), block.foreign.copy())

    def _fold(
        self,
        table: pa.Table,
        is_delete: np.ndarray,
        default: np.ndarray,
        foreign: np.ndarray,
    ) -> None:
        if table.column(RECORD_KEY).null_count:
            raise HoodieCorruptedDataError("a log block holds records without a record key")
        self._table = self._flags = self._position = self._consumed = None
        self.num_log_records += table.num_rows
        from hoodie_ray.index import group_keys, hash_keys

        keys = _as_string_keys(table.column(RECORD_KEY))
        hashes = hash_keys(keys)
        if pd.Index(hashes).is_unique:  # distinct hashes: distinct keys
            self._merge_unique(table, is_delete, default, foreign, hashes)
            return
        gid, ngroups = group_keys(keys)
        if ngroups == table.num_rows:
            self._merge_unique(table, is_delete, default, foreign, hashes)
            return
        # Duplicate keys inside one block: apply them occurrence by occurrence, so each round
        # holds unique keys and the later duplicate is merged after the earlier one. The rows
        # are ordered by round once (stable: arrival order within a round), each round a slice.
        rank = pd.Series(gid).groupby(gid).cumcount().to_numpy()
        order = np.argsort(rank, kind="stable")
        by_round = table.take(pa.array(order))
        start = 0
        for n in np.bincount(rank).tolist():
            sel = order[start : start + n]
            self._merge_unique(
                by_round.slice(start, n),
                is_delete[sel],
                default[sel],
                foreign[sel],
                hashes[sel],
            )
            start += n

    def _merge_unique(
        self,
        new: pa.Table,
        is_delete: np.ndarray,
        default: np.ndarray,
        foreign: np.ndarray,
        hashes: np.ndarray,
    ) -> None:
        """Fold records with distinct keys (``hashes``: their :func:`hash_keys`)."""
        self._table = self._flags = self._position = self._consumed = None
        n = new.num_rows
        keys = _as_string_keys(new.column(RECORD_KEY))
        ids = np.arange(self._n, self._n + n, dtype=np.int64)
        take_new = np.ones(n, dtype=bool)
        # a default-ordered delete, or a version that replaces an entry holding a reset
        reset = is_delete & default
        probed: tuple[np.ndarray, np.ndarray] | None = None
        if self._n_alive:
            loc, seg_of, pos_of = self._index.probe(keys, hashes=hashes)
            probed = (seg_of, pos_of)
            pos = loc.astype(np.int64)
            matched = pos >= 0
            if matched.any():
                midx = np.flatnonzero(matched)
                spos = pos[midx]
                wins = self._keep_newer(
                    old_ord=self._ord_take_records(spos),
                    new_ord=self._ord_take(new, midx),
                    old_default=self._is_delete[spos] & self._default[spos],
                    new_reset=reset[midx],
                    foreign=self._foreign[spos] | foreign[midx],
                )
                self._alive[spos[wins]] = False
                reset[midx[wins]] |= self._reset[spos[wins]]
                take_new[midx[~wins]] = False
        self._pieces.append(new)
        self._n += n
        self._alive = np.concatenate([self._alive, take_new])
        self._is_delete = np.concatenate([self._is_delete, is_delete])
        self._default = np.concatenate([self._default, default])
        self._foreign = np.concatenate([self._foreign, foreign])
        self._reset = np.concatenate([self._reset, reset])
        if take_new.all():
            self._index.put(keys, ids.astype(np.int32), hashes=hashes, unique=True, probed=probed)
        elif take_new.any():
            self._index.put(
                keys.filter(pa.array(take_new)),
                ids[take_new].astype(np.int32),
                hashes=hashes[take_new],
                unique=True,
                probed=None if probed is None else (probed[0][take_new], probed[1][take_new]),
            )
        self._n_alive = int(self._alive.sum())
        if self._n > 2 * self._n_alive + 1024:
            self._compact()

    def _compact(self) -> None:
        """Drop superseded records: one piece of the live entries, record numbers remapped.

        The piece is the materialised state too, until the next fold."""
        alive = self._alive
        mapping = np.cumsum(alive, dtype=np.int64) - 1
        self._index.remap_locations(mapping.astype(np.int32))
        table = self._materialise()
        self._pieces = [table] if table.num_rows else []
        self._is_delete = self._is_delete[alive]
        self._default = self._default[alive]
        self._foreign = self._foreign[alive]
        self._reset = self._reset[alive]
        self._n = int(alive.sum())
        self._alive = np.ones(self._n, dtype=bool)

    def _concat_pieces(self) -> pa.Table:
        if not self._pieces:
            return self.schema.empty_table()
        return pa.concat_tables(self._pieces) if len(self._pieces) > 1 else self._pieces[0]

    def _ord_take(self, table: pa.Table, idx: np.ndarray) -> pa.Array | None:
        if self.ordering_field is None or not self._compares:
            return None
        return _array(table.column(self.ordering_field).take(pa.array(idx)))

    def _ord_take_records(self, records: np.ndarray) -> pa.Array | None:
        """Ordering values of records (by record number, across pieces)."""
        if self.ordering_field is None or not self._compares:
            return None
        col = pa.chunked_array(
            [c for p in self._pieces for c in p.column(self.ordering_field).chunks],
            type=self.schema.field(self.ordering_field).type,
        )
        return _array(col.take(pa.array(records)))

    def _keep_newer(
        self,
        *,
        old_ord: pa.Array | None,
        new_ord: pa.Array | None,
        old_default: np.ndarray,
        new_reset: np.ndarray,
        foreign: np.ndarray,
    ) -> np.ndarray:
        """Does the newer of each matched pair win (:func:`hoodie_ray.merge.keep_newer`)?"""
        return keep_newer(
            old_ord,
            new_ord,
            old_default=old_default,
            new_reset=new_reset,
            foreign=foreign,
            mode=self.mode,
        )

    # -- merging the base file -----------------------------------------------------------------
    def _materialise(self) -> pa.Table:
        """The live entries in record order (built once until the next fold)."""
        if self._table is None:
            alive = self._alive
            table = self._concat_pieces()
            if not alive.all():
                table = table.filter(pa.array(alive))
            self._table = table
            self._flags = (
                self._is_delete[alive],
                self._default[alive],
                self._foreign[alive],
                self._reset[alive],
            )
        return self._table

    def freeze(self) -> None:
        """Build the key lookup used by :meth:`merge_base` (called once, after the last block)."""
        if self._consumed is None:
            self._materialise()
            self._position = np.cumsum(self._alive, dtype=np.int64) - 1
            self._consumed = np.zeros(self._n_alive, dtype=bool)

    def merge_base(self, batch: pa.Table) -> pa.Table:
        """Merge one batch of base records (reader schema); return the base rows that survive.

        Log records that win stay in the buffer and come out of :meth:`remaining`; log records
        that lose to their base record are marked consumed.
        """
        if self.is_empty or batch.num_rows == 0:
            return batch
        self.freeze()
        assert self._table is not None and self._flags is not None
        assert self._position is not None and self._consumed is not None
        records = self._index.lookup(_as_string_keys(batch.column(RECORD_KEY)))
        matched = records >= 0
        if not matched.any():
            return batch
        midx = np.flatnonzero(matched)
        spos = self._position[records[midx]]
        _, _, foreign, reset = self._flags
        log_wins = self._keep_newer(
            old_ord=self._ord_take(batch, midx),
            new_ord=self._ord_take(self._table, spos),
            old_default=np.zeros(len(midx), dtype=bool),
            new_reset=reset[spos],
            foreign=foreign[spos],
        )
        self._consumed[spos[~log_wins]] = True
        keep = ~matched
        keep[midx[~log_wins]] = True
        return batch.filter(pa.array(keep))

    def remaining(self) -> pa.Table:
        """Log records to emit after the base file: winners that are not deletes."""
        table = self._materialise()
        if self.is_empty:
            return table
        assert self._flags is not None
        emit = ~self._flags[0]
        if self._consumed is not None:
            emit &= ~self._consumed
        if emit.all():
            return table
        return table.filter(pa.array(emit))

    def remaining_batches(self) -> Iterator[pa.Table]:
        """:meth:`remaining`, as an iterator (one table)."""
        table = self.remaining()
        if table.num_rows:
            yield table

    def live_keys(self) -> pa.Array:
        """Record keys of the non-delete entries (for a log-only file group)."""
        return _array(self.remaining().column(RECORD_KEY))
