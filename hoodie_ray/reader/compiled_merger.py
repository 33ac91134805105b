"""The keyed log state of one file slice, folded by a compiled hash-table kernel.

:class:`CompiledLogRecordBuffer` gives the results of
:class:`~hoodie_ray.reader.merger.LogRecordBuffer` (the same rules, the same entries, the same
rows out) at a fraction of the cost: the rules are a fold over the records of each key in log
order, and a kernel walks each block once, record by record, through one open-addressing table
of the distinct keys (:mod:`hoodie_ray.reader._jit`) instead of hashing, probing, taking and
comparing whole columns per block. Decoded blocks stay as they are (*pieces*), as in the
column-wise buffer, with one state byte per record beside them; the table holds each key's
live record, its state and its ordering value.

It covers ordering fields whose values compare as int64 or float64 (integers but uint64,
booleans, dates, times, timestamps, durations, float32/64) and tables without one; the
column-wise buffer serves the rest, and every table when numba is unavailable or switched off
(``HOODIE_RAY_NO_JIT``). :func:`new_log_record_buffer` picks one (why two engines:
:mod:`hoodie_ray.reader.merger`). The rule is not restated here: the kernels compile
:func:`hoodie_ray.merge.wins_by_state` over the state bits of :mod:`hoodie_ray.merge`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.config.table_config import MergeMode
from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieError
from hoodie_ray.jit import read_only
from hoodie_ray.merge import (
    ALIVE,
    CONSUMED,
    DEFAULT,
    DELETE,
    FOREIGN,
    NAN_ORD,
    NULL_ORD,
    RESET,
)
from hoodie_ray.reader.merger import (
    RECORD_KEY,
    DeleteBlock,
    FileGroupRecordBuffer,
    LogRecordBuffer,
    _array,
    _as_string_keys,
    _bool_np,
)

__all__ = [
    "COMPILE_MIN_LOG_BYTES",
    "EMIT_ROWS",
    "CompiledLogRecordBuffer",
    "compiled_ordering_supported",
    "new_log_record_buffer",
    "ord_keys",
]

#: A slice with at least this many bytes of log data blocks loads numba for the compiled
#: buffer (0.3-0.5 CPU-s once per process, repaid after ~1M records); smaller slices use it
#: only when numba is loaded already.
COMPILE_MIN_LOG_BYTES = 128 * 1024 * 1024

# The slot layout (the kernels' constants, see reader/_jit.py).
_INLINE = 8
_REC_MASK = np.uint64(0xFFFFFFFF)
_MAX_RECORDS = 0xFFFFFFFF - 1
_MAX_KEY_BYTES = 0xFFFFFF
_MAX_LOAD = 0.6
#: A record held by its merge columns only counts this fraction of a row towards compaction.
_LIGHT = 8
_FLOAT_FLIP = np.int64(0x7FFFFFFFFFFFFFFF)

_kernels: Any = None  # the _jit module once loaded; False when unavailable


def _load_kernels() -> bool:
    global _kernels
    if _kernels is None:
        from hoodie_ray import jit

        _kernels = False
        if jit.enabled():
            try:
                from hoodie_ray.reader import _jit

                _smoke_test(_jit)
            except Exception:  # a numba that cannot build them: the column-wise buffer runs
                pass
            else:
                _kernels = _jit
    return bool(_kernels)


def _smoke_test(kernels: Any) -> None:
    """Run each kernel once on a tiny input (compiles or loads them; raises if one cannot)."""
    keys = _key_arrays(pa.array(["k"]), kernels)
    slots, state = np.zeros((16, 4), dtype=np.uint64), np.zeros(1, dtype=np.uint8)
    ords = read_only(np.zeros(1, dtype=np.int64))
    arena = np.zeros(1, dtype=np.uint8)
    kernels.fold(slots, arena, 0, *keys, 0, ords, state, True)
    keep = np.zeros(1, dtype=bool)
    kernels.merge_base(slots, arena, *keys, ords, state, state, True, keep)
    kernels.rehash(slots, np.zeros((32, 4), dtype=np.uint64))
    if not (state[0] & ALIVE) or keep[0]:
        raise RuntimeError("the compiled log merge kernels give wrong results")


def _ordering_kind(t: pa.DataType) -> str | None:
    """``"int"`` / ``"float"``: how values of ``t`` compare exactly as numbers; None otherwise."""
    if pa.types.is_signed_integer(t) or pa.types.is_boolean(t):
        return "int"
    if pa.types.is_unsigned_integer(t):
        return "int" if t.bit_width < 64 else None
    if pa.types.is_date(t) or pa.types.is_time(t):
        return "int"
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return "int"
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        return "float"
    return None


def compiled_ordering_supported(schema: pa.Schema, ordering_field: str | None) -> bool:
    """Whether :class:`CompiledLogRecordBuffer` can compare this table's ordering values."""
    if not ordering_field or ordering_field not in schema.names:
        return True
    return _ordering_kind(schema.field(ordering_field).type) is not None


def new_log_record_buffer(
    schema: pa.Schema,
    ordering_field: str | None,
    mode: MergeMode,
    *,
    log_bytes: int = 0,
    compiled: bool | None = None,
) -> LogRecordBuffer | CompiledLogRecordBuffer:
    """The log state for one file slice: compiled when it can be, else column-wise.

    Args:
        schema, ordering_field, mode: as for :class:`~hoodie_ray.reader.merger.LogRecordBuffer`.
        log_bytes: bytes of the slice's data blocks (decides whether loading numba pays).
        compiled: force a choice (tests; ``True`` still needs numba).
    """
    if compiled is None:
        compiled = compiled_ordering_supported(schema, ordering_field) and (
            "numba" in sys.modules or log_bytes >= COMPILE_MIN_LOG_BYTES
        )
    if compiled and compiled_ordering_supported(schema, ordering_field) and _load_kernels():
        return CompiledLogRecordBuffer(schema, ordering_field, mode)
    return LogRecordBuffer(schema, ordering_field, mode)


class _KeyArrays(NamedTuple):
    """Non-null string keys as the kernels take them (in the order of their arguments): their
    hashes and words (``_jit.key_hashes``), and views of the Arrow buffers (bytes, starts,
    lengths)."""

    hashes: np.ndarray
    words: np.ndarray
    data: np.ndarray
    starts: np.ndarray
    lens: np.ndarray


def _key_arrays(keys: pa.Array, kernels: Any = None) -> _KeyArrays:
    """The :class:`_KeyArrays` of ``keys``."""
    from hoodie_ray.index import key_bytes

    kernels = kernels or _kernels
    data, starts, lens = key_bytes(keys)
    data = read_only(np.frombuffer(b"\0", dtype=np.uint8) if data is None else data)
    hashes = np.empty(len(lens), dtype=np.uint64)
    words = np.empty(len(lens), dtype=np.uint64)
    kernels.key_hashes(data, starts, lens, hashes, words)
    return _KeyArrays(hashes, words, data, starts, lens)


def _next_pow2(n: int) -> int:
    return 1 << max(int(n - 1).bit_length(), 4)


def ord_keys(values: pa.Array | pa.ChunkedArray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Ordering values (``kind`` of :func:`_ordering_kind`) as int64 keys that compare like
    them, and their state bits: ``NULL_ORD`` for nulls, ``NAN_ORD`` for NaNs (NaN compares as
    false either way, as Arrow's ``greater_equal`` does; the key of either is 0)."""
    arr = _array(values)
    t = arr.type
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        arr = arr.view(pa.int32())
    elif pa.types.is_temporal(t):
        arr = arr.view(pa.int64())
    target = pa.float64() if kind == "float" else pa.int64()
    if arr.type != target:
        arr = arr.cast(target)
    bits = np.zeros(len(arr), dtype=np.uint8)
    if arr.null_count:
        bits[_bool_np(arr.is_null())] = NULL_ORD
        arr = pc.fill_null(arr, pa.scalar(0, target))
    values_np = np.asarray(arr.to_numpy(zero_copy_only=False))
    if kind != "float":
        keys = values_np.astype(np.int64, copy=False)
    else:
        nan = np.isnan(values_np)
        bits[nan] |= NAN_ORD
        # -0.0 == 0.0; then IEEE-754 bits order like the values once negative ones are flipped
        f = np.where(nan | (values_np == 0.0), 0.0, values_np).view(np.int64)
        keys = np.where(f < 0, f ^ _FLOAT_FLIP, f)
    return read_only(keys), bits


#: Rows gathered before :meth:`CompiledLogRecordBuffer.remaining_batches` yields them.
EMIT_ROWS = 1 << 20


@dataclass
class _Piece:
    """The records ``first ..`` of one block.

    ``table``: their columns (all of the reader schema, or only some when ``rest`` loads the
    others); None for a delete block (never output). ``rows``: the row of each record in the
    block as decoded, once superseded ones were dropped (None: row i is record ``first + i``).
    ``rest``: loads the block's other columns, every row of it (read once, at output time).
    """

    first: int
    table: pa.Table | None
    rows: np.ndarray | None = None
    rest: Callable[[], pa.Table] | None = None


class CompiledLogRecordBuffer(FileGroupRecordBuffer):
    """The merged log records of one file slice, keyed by ``_hoodie_record_key``; the API and
    the results of :class:`~hoodie_ray.reader.merger.LogRecordBuffer`.

    Args:
        schema: the reader schema (record key, ordering field and every column to output).
        ordering_field: the table's ordering (precombine) field, or None.
        mode: the table's merge mode.

    Records are numbered in fold order, each with a state byte (alive, delete, default delete,
    foreign ordering class, null or NaN ordering value, consumed by a base record); the key
    table holds each distinct key's live record with its state and ordering value. Blocks stay
    as decoded; when superseded records outnumber live ones, the blocks that are mostly
    superseded are cut down to their live records, so memory stays within twice the live
    entries plus one block. A block can also come with only the columns the merge needs (key,
    ordering value, delete markers) and a loader of the others, called once when the winners
    are output: Parquet blocks decode column by column, so each column is still decoded once,
    and only the winners of each block are kept. The records of such a block, and of delete
    blocks, count an eighth of a record towards that bound (a few bytes each, not a row).
    Call :meth:`merge_base` after the last block.
    """

    def __init__(self, schema: pa.Schema, ordering_field: str | None, mode: MergeMode) -> None:
        super().__init__(schema, ordering_field, mode)
        if not _load_kernels():
            raise RuntimeError("the compiled log buffer needs numba")
        self._ord_kind = "int"
        if self._ord_type is not None:
            kind = _ordering_kind(self._ord_type)
            if kind is None:
                raise ValueError(f"ordering values of type {self._ord_type} are not supported")
            self._ord_kind = kind
        self._pieces: list[_Piece] = []
        self._n = 0  # records numbered (live or superseded)
        self._rows = 0  # of those, records held with every column (the rest: a few bytes)
        self._state = np.zeros(1024, dtype=np.uint8)
        self._slots = np.zeros((16, 4), dtype=np.uint64)
        self._keys = 0  # distinct keys in the table = live entries
        self._arena = np.zeros(1024, dtype=np.uint8)
        self._arena_used = 0

    def __len__(self) -> int:
        return self._keys

    # -- folding log blocks --------------------------------------------------------------------
    def add_data_block(
        self,
        table: pa.Table,
        is_delete: np.ndarray | None = None,
        *,
        rest: Callable[[], pa.Table] | None = None,
    ) -> None:
        """Fold the records of one data block (``table`` in the reader schema), in order.

        ``is_delete`` marks records that are deletes (``_hoodie_is_deleted`` and friends).
        ``rest``: ``table`` holds only some of the reader schema's columns (the record key and
        the ordering field among them), and ``rest()`` returns the others for every row of
        the block, in the block's order.
        """
        n = table.num_rows
        if n == 0:
            return
        ords: np.ndarray | None = None
        state = np.zeros(n, dtype=np.uint8)
        if self._compares:
            ords, state = ord_keys(table.column(self.ordering_field), self._ord_kind)
        if is_delete is not None and is_delete.any():
            state[is_delete] |= DELETE
            state[self._default_deletes(table, is_delete)] |= DEFAULT | RESET
        self._fold(table.column(RECORD_KEY), _Piece(self._n, table, rest=rest), state, ords)

    def _add_deletes(self, block: DeleteBlock) -> None:
        # a delete's columns are never output: its partition path is not kept
        ordering, n = block.ordering, len(block.keys)
        ords: np.ndarray | None = None
        state = np.zeros(n, dtype=np.uint8)
        if self._compares:
            assert self._ord_type is not None
            if ordering is None:
                ords = read_only(np.zeros(n, dtype=np.int64))
                state = np.full(n, NULL_ORD, dtype=np.uint8)
            else:
                ords, state = ord_keys(_array(ordering).cast(self._ord_type), self._ord_kind)
        state |= DELETE
        state[block.default] |= DEFAULT | RESET
        state[block.foreign] |= FOREIGN
        self._fold(block.keys, _Piece(self._n, None), state, ords)

    def _fold(
        self,
        keys: pa.Array | pa.ChunkedArray,
        piece: _Piece,
        state: np.ndarray,
        ords: np.ndarray | None,
    ) -> None:
        arr = _as_string_keys(keys)
        if arr.null_count:
            raise HoodieCorruptedDataError("a log block holds records without a record key")
        n = len(arr)
        if self._n + n > _MAX_RECORDS:
            raise HoodieError(f"a file slice with more than {_MAX_RECORDS} log records")
        keys = _key_arrays(arr)
        if int(keys.lens.max()) > _MAX_KEY_BYTES:
            raise HoodieError(f"a record key longer than {_MAX_KEY_BYTES} bytes")
        first = self._n
        self._reserve_records(first + n)
        self._state[first : first + n] = state
        self._reserve_keys(self._keys + n, int(keys.lens[keys.lens > _INLINE].sum()))
        added, self._arena_used = _kernels.fold(
            self._slots,
            self._arena,
            self._arena_used,
            *keys,
            first,
            ords if ords is not None else _NO_ORDERING,
            self._state,
            self._compares,
        )
        self._keys += int(added)
        self._n += n
        if piece.table is not None and piece.rest is None:
            self._rows += n
        self._pieces.append(piece)
        self.num_log_records += n
        if self._rows + (self._n - self._rows) // _LIGHT > 2 * self._keys + 1024:
            self._compact()

    def _reserve_records(self, n: int) -> None:
        if n > len(self._state):
            state = np.zeros(max(n, 2 * len(self._state)), dtype=np.uint8)
            state[: self._n] = self._state[: self._n]
            self._state = state

    def _reserve_keys(self, keys: int, long_key_bytes: int) -> None:
        """Room for ``keys`` distinct keys within the table's load limit, and for the bytes of
        the keys longer than a slot holds."""
        if keys > _MAX_LOAD * len(self._slots):
            new = np.zeros((_next_pow2(int(keys / _MAX_LOAD) + 1), 4), dtype=np.uint64)
            _kernels.rehash(self._slots, new)
            self._slots = new
        need = self._arena_used + long_key_bytes
        if need > len(self._arena):
            arena = np.zeros(max(need, 2 * len(self._arena)), dtype=np.uint8)
            arena[: self._arena_used] = self._arena[: self._arena_used]
            self._arena = arena

    def _piece_ranges(self) -> Iterator[tuple[int, _Piece]]:
        """``(end record, piece)`` of each piece."""
        for i, piece in enumerate(self._pieces):
            nxt = self._pieces[i + 1].first if i + 1 < len(self._pieces) else self._n
            yield nxt, piece

    def _compact(self) -> None:
        """Cut the pieces whose records are mostly superseded down to their live records, and
        renumber the records."""
        alive = (self._state[: self._n] & ALIVE) != 0
        keep = np.ones(self._n, dtype=bool)
        pieces: list[_Piece] = []
        next_first = rows = 0
        for end, piece in list(self._piece_ranges()):
            first = piece.first
            live = alive[first:end]
            n_live = int(live.sum())
            size = end - first
            if size - n_live > n_live:
                keep[first:end] = live
                size = n_live
                if n_live and piece.table is not None:
                    idx = np.flatnonzero(live)
                    piece.table = piece.table.take(pa.array(idx))
                    if piece.rest is not None:
                        piece.rows = idx if piece.rows is None else piece.rows[idx]
            if size:
                piece.first = next_first
                pieces.append(piece)
                next_first += size
                if piece.table is not None and piece.rest is None:
                    rows += size
        self._rows = rows
        mapping = np.cumsum(keep, dtype=np.uint64)  # record number + 1 after renumbering
        meta = self._slots[:, 1]
        used = np.flatnonzero(meta)
        old = meta[used]
        rec = (old & _REC_MASK).astype(np.int64) - 1
        meta[used] = (old & ~_REC_MASK) | mapping[rec]
        self._state[:next_first] = self._state[: self._n][keep]
        self._n = next_first
        self._pieces = pieces

    # -- merging the base file -----------------------------------------------------------------
    def merge_base(self, batch: pa.Table) -> pa.Table:
        """Merge one batch of base records (reader schema); return the base rows that survive.

        Log records that win stay in the buffer and come out of :meth:`remaining`; log records
        that lose to their base record are marked consumed.
        """
        if self.is_empty or batch.num_rows == 0:
            return batch
        keys = _key_arrays(_as_string_keys(batch.column(RECORD_KEY)))
        base_ord, base_state = _NO_ORDERING, _NO_STATE
        if self._compares:
            base_ord, base_state = ord_keys(batch.column(self.ordering_field), self._ord_kind)
        keep = np.empty(batch.num_rows, dtype=bool)
        _kernels.merge_base(
            self._slots, self._arena, *keys, base_ord, base_state, self._state, self._compares, keep
        )
        if keep.all():
            return batch
        return batch.take(pa.array(np.flatnonzero(keep)))

    def remaining(self) -> pa.Table:
        """Log records to emit after the base file: winners that are not deletes, in log
        order (a chunk per block at least)."""
        parts = list(self.remaining_batches())
        if not parts:
            return self.schema.empty_table()
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def remaining_batches(self, max_rows: int = EMIT_ROWS) -> Iterator[pa.Table]:
        """:meth:`remaining` in tables of about ``max_rows`` rows or more (a block's winners
        are never split), each block's other columns loaded only for its turn."""
        state = self._state[: self._n]
        emit = (state & (ALIVE | DELETE | CONSUMED)) == ALIVE
        parts: list[pa.Table] = []
        rows = 0
        for end, piece in self._piece_ranges():
            if piece.table is None:
                continue
            sel = emit[piece.first : end]
            if not sel.any():
                continue
            part = self._winners(piece, sel)
            parts.append(part)
            rows += part.num_rows
            if rows >= max_rows:
                yield pa.concat_tables(parts) if len(parts) > 1 else parts[0]
                parts, rows = [], 0
        if parts:
            yield pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _winners(self, piece: _Piece, sel: np.ndarray) -> pa.Table:
        """The rows of ``piece`` selected by ``sel`` (one flag per record), all columns."""
        assert piece.table is not None
        idx = None if sel.all() else np.flatnonzero(sel)
        head = piece.table if idx is None else piece.table.take(pa.array(idx))
        if piece.rest is None:
            return head
        rows = idx if piece.rows is None else (piece.rows if idx is None else piece.rows[idx])
        rest = piece.rest()
        if rows is not None:
            rest = rest.take(pa.array(rows))
        cols = [
            head.column(f.name) if f.name in head.schema.names else rest.column(f.name)
            for f in self.schema
        ]
        return pa.Table.from_arrays(cols, schema=self.schema)

    def live_keys(self) -> pa.Array:
        """Record keys of the non-delete entries (for a log-only file group)."""
        emit = (self._state[: self._n] & (ALIVE | DELETE | CONSUMED)) == ALIVE
        keys = [
            _array(piece.table.column(RECORD_KEY)).filter(pa.array(emit[piece.first : end]))
            for end, piece in self._piece_ranges()
            if piece.table is not None
        ]
        if not keys:
            return pa.array([], self.schema.field(RECORD_KEY).type)
        return pa.concat_arrays(keys) if len(keys) > 1 else keys[0]


_NO_ORDERING = read_only(np.zeros(1, dtype=np.int64))
_NO_STATE = np.zeros(1, dtype=np.uint8)
