"""Record merging: which version of a record key survives (spec §6.2), column-wise.

THE ordering rule, defined here once and used by every place where two versions of a key meet:
the write-time precombine (``write/records.py``), the copy-on-write merge
(:func:`apply_updates`), the log readers (``reader/merger.py`` column-wise through
:func:`keep_newer`; ``reader/_jit.py`` compiles :func:`wins_by_state` and
:func:`at_least_by_state`, the rule over a version's state bits, into its kernels) and so
compaction, which reads through them.

Event-time ordering (``EVENT_TIME_ORDERING``; DefaultHoodieRecordPayload, EventTimeAvroPayload):

* A newer version (record or delete) replaces an older one when its ordering value is ``>=``
  the older one's (ties: the newer wins), or when the two values are of different classes.
* **A null ordering value compares lowest**: below every value, two nulls tie (so the newer
  wins). A record with a null ordering value therefore never replaces one with a value, and
  any valued record replaces it. This is hudi-rs 0.5's rule; Hudi 1.x's readers turn a null
  into the default ordering value ``Integer 0`` (``OrderingValues.create``), which compares
  as 0 against an int field and throws ``ClassCastException`` against any other class. Hudi
  1.x's writers never store such a record when they precombine (upserts): Spark's and
  Flink's record creation refuse it (``HoodieAvroUtils.getNestedFieldVal``: "The value of
  <field> can not be null"), and so does ours (``write/records.py``, ``prepare_batch``).
* **A delete with the default ordering value** (null, or Java's ``Integer 0`` on an int field
  where a log holds it: a delete that knows no ordering value, as a ``delete`` operation
  writes) is commit-time ordered: it replaces whatever came before it, and whatever comes
  after it replaces it (Java ``isCommitTimeOrderingDelete``). A delete with a real ordering
  value is ordered like a record (it loses to an older record whose value is greater).
* So that the result is the same however the versions are grouped before they meet (a log
  folded before it meets its base file, a batch precombined before it is written, a slice
  compacted between two writes), a merged version remembers that a default-ordered delete
  came before it in its group (*reset*): it then replaces every older version, whatever their
  ordering values. Java and hudi-rs do not: with a base record at 100 and a log holding a
  default delete and then a record at 5, they return the base record (the log's fold forgets
  the delete), though folding the same three versions one by one, or compacting after the
  delete, gives the record at 5, as this rule does everywhere.

With these rules the merge is a fold by an associative operation (the newest of the highest
ordering values after the last default-ordered delete, or that delete), so the versions of a
key give one result whatever the order in which their groups meet.

Commit-time ordering (``COMMIT_TIME_ORDERING``; OverwriteWithLatestAvroPayload): the newer
version always wins, deletes always win.

Partial updates (``hoodie.table.partial.update.mode=IGNORE_DEFAULTS``, 0.x's
``PartialUpdateAvroPayload``) are :func:`partial_merge`: the winner by the same ordering, its
nulls filled from the other version, in Java's grouping (not associative: a log folds before it
meets its base, as Java's and hudi-rs's readers do it).

The copy-on-write merge compares a delete's int 0 like any other value (Java's merge handle,
``combineAndGetUpdateValue``), while a log reader lets it win as the default ordering value
(Java's and hudi-rs's log scanners): same input, two table types, two outcomes, as in Hudi.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.config.table_config import MergeMode
from hoodie_ray.meta import IS_DELETED, META_FIELDS_WITH_OPERATION, RECORD_KEY


def _np_bool(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool)


def default_ordering(table: pa.Table, ordering_field: str | None, int32: bool) -> np.ndarray:
    """Rows whose ordering value is the default one: null, or an int 0 for an int field
    (``int32``: Java's ``Integer 0``, as log readers take it); every row when there is no
    ordering field. A *delete* with the default ordering value is commit-time ordered."""
    if ordering_field is None:
        return np.ones(table.num_rows, dtype=bool)
    col = table.column(ordering_field)
    out = _np_bool(pc.is_null(col))
    if int32:
        out |= _np_bool(pc.fill_null(pc.equal(col, 0), False))
    return out


def ordering_class(t: pa.DataType) -> str:
    """The Java class family an ordering value of Arrow type ``t`` has (Avro primitive).

    Two ordering values are compared only when their classes match (Java
    ``OrderingValues.isSameClass``); otherwise the newer record wins. A delete's default
    ordering value is Java's ``Integer 0`` only for an ``"int"`` field.
    """
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "int" if t.bit_width < 32 or t == pa.int32() else "long"
    if pa.types.is_float32(t) or pa.types.is_float16(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "bytes"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_time(t):
        return "time"
    if pa.types.is_timestamp(t):
        return "timestamp"
    return str(t)


def compares_ordering(mode: MergeMode, ordering_field: str | None) -> bool:
    """Whether versions are compared by their ordering values (event time with an ordering
    field); otherwise the newer version always wins."""
    return mode is not MergeMode.COMMIT_TIME_ORDERING and ordering_field is not None


# -- THE rule over a version's state bits ---------------------------------------------------------
# A merger keeps one byte of flags per version: the column-wise buffer builds them for the pairs
# it compares, the compiled one (reader/_jit.py) keeps them per record and compiles the two
# functions below with numba (``njit(inline="always")``). Both functions use only ``&``, ``|``
# and comparisons, so they run on Python ints, numpy arrays and inside numba alike. numba's
# disk cache tracks reader/_jit.py only: jit.drop_stale_kernels drops its cached kernels when
# this file changes.

ALIVE = 1  #: the compiled buffer's bookkeeping: the record is its key's current entry
DELETE = 2  #: a delete
DEFAULT = 4  #: its ordering value is the default one (a delete so marked is commit-time ordered)
FOREIGN = 8  #: its ordering value has another class than the field's
NULL_ORD = 16  #: its ordering value is null
CONSUMED = 32  #: the compiled buffer's bookkeeping: the record lost to its base record
NAN_ORD = 64  #: its ordering value is NaN
RESET = 128  #: a default-ordered delete, or a version that followed one in its group
DEFAULT_DELETE = DELETE | DEFAULT


def at_least_by_state(ge: np.ndarray, old_state: np.ndarray, new_state: np.ndarray) -> np.ndarray:
    """``new >= old`` with nulls lowest (two nulls tie: true), NaN never: ``ge`` is the two
    values' own comparison, whatever it says where either is null or NaN."""
    valued = ((old_state | new_state) & (NULL_ORD | NAN_ORD)) == 0
    return ((old_state & NULL_ORD) != 0) | (valued & ge)


def wins_by_state(old_state: np.ndarray, new_state: np.ndarray, at_least: np.ndarray) -> np.ndarray:
    """Event-time ordering: does the newer version win over the older one? (module doc).

    It does when either ordering value is of another class, when the older one is a
    default-ordered delete, when the newer one carries a reset, or when ``at_least`` (its
    ordering value is ``>=`` the older one's, :func:`at_least_by_state`).
    """
    return (
        (((old_state | new_state) & FOREIGN) != 0)
        | ((old_state & DEFAULT_DELETE) == DEFAULT_DELETE)
        | ((new_state & RESET) != 0)
        | at_least
    )


def ordering_at_least(new_ord: pa.Array, old_ord: pa.Array) -> np.ndarray:
    """``new >= old`` with nulls lowest (two nulls tie: true). Values Arrow cannot compare
    (e.g. NaN) give false, as Arrow's ``greater_equal`` does."""
    if old_ord.type != new_ord.type:
        try:
            new_ord = new_ord.cast(old_ord.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return np.ones(len(new_ord), dtype=bool)  # incomparable classes: the newer wins
    ge = _np_bool(pc.fill_null(pc.greater_equal(new_ord, old_ord), False))
    return at_least_by_state(ge, _null_bits(old_ord), _null_bits(new_ord))


def _null_bits(ords: pa.Array) -> np.ndarray:
    return _np_bool(pc.is_null(ords)).astype(np.uint8) * np.uint8(NULL_ORD)


def keep_newer(
    old_ord: pa.Array | None,
    new_ord: pa.Array | None,
    *,
    old_default: np.ndarray,
    new_reset: np.ndarray,
    foreign: np.ndarray | None = None,
    mode: MergeMode,
) -> np.ndarray:
    """For matched pairs (older, newer): does the newer version win? THE rule (module doc),
    column-wise (:func:`wins_by_state` on the pairs' bits).

    ``old_default``: the older version is a default-ordered delete. ``new_reset``: the newer
    version is a default-ordered delete or follows one in its group. ``foreign``: either
    ordering value is of another class than the field's (the newer wins). ``old_ord`` /
    ``new_ord`` None: no ordering field (the newer wins).
    """
    n = len(new_reset)
    if mode is MergeMode.COMMIT_TIME_ORDERING or old_ord is None or new_ord is None:
        return np.ones(n, dtype=bool)
    old_state = old_default.astype(np.uint8) * np.uint8(DEFAULT_DELETE)
    if foreign is not None:
        old_state |= foreign.astype(np.uint8) * np.uint8(FOREIGN)
    new_state = new_reset.astype(np.uint8) * np.uint8(RESET)
    return wins_by_state(old_state, new_state, ordering_at_least(new_ord, old_ord))


def newer_wins(
    old_ord: pa.Array | None,
    new_ord: pa.Array | None,
    new_is_delete: np.ndarray,
    new_delete_is_default: np.ndarray,
    mode: MergeMode,
    new_reset: np.ndarray | None = None,
) -> np.ndarray:
    """For matched pairs (old record, new version): does the new version win? (The old side
    is a stored record, never a delete; ``new_reset`` as in :func:`keep_newer`.)"""
    reset = new_is_delete & new_delete_is_default
    if new_reset is not None:
        reset = reset | new_reset
    return keep_newer(
        old_ord,
        new_ord,
        old_default=np.zeros(len(reset), dtype=bool),
        new_reset=reset,
        mode=mode,
    )


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
    reset: np.ndarray | None = None,
    ordering_field: str | None,
    mode: MergeMode,
) -> pa.Table:
    """Merge precombined ``updates`` into unique-keyed ``base`` (both with
    ``_hoodie_record_key``).

    ``updates`` has the columns of ``base`` (same schema), one row per key, or two where the
    precombine kept a default-ordered delete before the version that followed it (the later
    row then has ``reset``). ``delete_is_default``: deletes with the default ordering value
    (by default those whose ordering value is null). Returns the surviving rows: base rows not
    replaced or deleted, then the winning update rows that are not deletes. Updates of keys
    not in ``base`` are inserts; deletes of such keys vanish.
    """
    n = len(is_delete)
    if delete_is_default is None:
        delete_is_default = np.zeros(n, dtype=bool)
        if ordering_field is not None and ordering_field in updates.column_names:
            delete_is_default = is_delete & default_ordering(updates, ordering_field, False)
    if reset is None:
        reset = np.zeros(n, dtype=bool)
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
            new_reset=reset[midx],
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


# -- partial updates -------------------------------------------------------------------------------


def partial_merge(
    versions: pa.Table,
    *,
    is_delete: np.ndarray,
    is_base: np.ndarray,
    ordering_field: str | None,
    mode: MergeMode,
    default_delete: np.ndarray | None = None,
    present: Mapping[str, np.ndarray] | None = None,
    counted: np.ndarray | None = None,
) -> tuple[pa.Table, np.ndarray]:
    """Partial updates: the versions of each key folded into one row where a null field
    takes the value of the next version down; ``(rows, deleted)``, one row per key (a
    deleted key's row is its winning delete).

    The rule of Hudi 1.1's ``hoodie.table.partial.update.mode=IGNORE_DEFAULTS``
    (``PartialUpdateHandler``, ``EventTimePartialRecordMerger``) and of 0.x's
    ``PartialUpdateAvroPayload``, grouped as Java's and hudi-rs's readers group it: a key's log
    versions (``is_base`` false, in arrival order) fold first, then the result meets the base
    record (``is_base``; at most one a key). Two records merge into the one with the higher
    ordering value (ties: the newer), its nulls filled from the other; a delete against a
    record leaves the higher-ordered of the two unchanged (a record after a winning delete
    starts afresh: nothing before the delete fills it); a delete with the default ordering
    value (``default_delete``: no ordering value) always wins. Without an ordering field, or
    in commit-time ``mode``, the newer version is always the higher one. Meta columns come whole from the winning version.
    ``present`` (partial log blocks, header ``IS_PARTIAL``): per column, the rows that carry it
    (a null among them is a value); where given it replaces "not null" as what a version has
    (Spark's ``mergePartialRecords``: a field the newer record's schema has comes from it).
    ``counted``: a boolean array of ``versions``' rows set where the row's values take part in
    its key's fold (not before a delete that restarts it, not of a deleted key; base rows are
    left as they are). Column-wise: no per-record Python.
    """
    n = versions.num_rows
    if n == 0:
        return versions, np.zeros(0, dtype=bool)
    is_delete = np.asarray(is_delete, dtype=bool)
    is_base = np.asarray(is_base, dtype=bool)
    from hoodie_ray.index import group_keys  # (index imports this module)

    gid, ngroups = group_keys(versions.column(RECORD_KEY))
    if ngroups == n:  # one version a key: nothing to fold
        if counted is not None:
            counted[~is_base] = ~is_delete[~is_base]
        return versions, is_delete
    if default_delete is None:
        default_delete = np.zeros(n, dtype=bool)
    if compares_ordering(mode, ordering_field) and ordering_field in versions.column_names:
        col = versions.column(ordering_field)
        rank = pc.rank(col, sort_keys="ascending", tiebreaker="dense")
        nulls = _np_bool(pc.is_null(col))  # lowest: 0, below every value's rank
        rank = np.where(nulls, 0, rank.to_numpy(zero_copy_only=False).astype(np.int64))
        default_delete = default_delete | (is_delete & nulls)
    else:
        rank = np.ones(n, dtype=np.int64)
    rank = np.where(default_delete, 0, rank)  # it wins by being forced, then anything beats it
    order = np.lexsort((np.arange(n), ~is_base, gid))  # by key: the base first, then the log
    g, rk, dl, bs, dd = (
        gid[order],
        rank[order],
        is_delete[order],
        is_base[order],
        default_delete[order],
    )
    pos = np.arange(n)
    # the log's last default-ordered delete starts its fold afresh
    restart = np.full(ngroups, -1, dtype=np.int64)
    np.maximum.at(restart, g[dd & ~bs], pos[dd & ~bs])
    alive = ~bs & (pos >= restart[g])
    a = np.flatnonzero(alive)
    ag, ark, adl = g[a], rk[a], dl[a]
    big = int(rk.max()) + 2
    val = ag * big + ark
    running = np.maximum.accumulate(val)
    first = np.ones(len(a), dtype=bool)
    first[1:] = ag[1:] != ag[:-1]
    before = np.empty(len(a), dtype=np.int64)
    before[1:] = running[:-1]
    wins = first | (val >= before)
    last_win = np.full(ngroups, -1, dtype=np.int64)
    np.maximum.at(last_win, ag[wins], np.flatnonzero(wins))
    has_log = last_win >= 0
    log_deleted = np.zeros(ngroups, dtype=bool)
    log_deleted[has_log] = adl[last_win[has_log]]
    last_del = np.full(ngroups, -1, dtype=np.int64)
    np.maximum.at(last_del, ag[wins & adl], np.flatnonzero(wins & adl))
    idx = np.arange(len(a))
    # the fold starts afresh at the first winner after the last winning delete: nothing
    # before it fills what follows
    fresh = wins & (idx > last_del[ag])
    start = np.full(ngroups, len(a), dtype=np.int64)
    np.minimum.at(start, ag[fresh], idx[fresh])
    counts = ~adl & (idx >= start[ag]) & ~log_deleted[ag]
    if counted is not None:
        counted[order[~bs]] = False
        counted[order[a[counts]]] = True
    # the base record meets the log's result (its ordering value: its last winner's)
    base_at = np.full(ngroups, -1, dtype=np.int64)
    base_at[g[bs]] = pos[bs]
    has_base = base_at >= 0
    w_pos = np.where(has_log, a[np.maximum(last_win, 0)], -1)  # sorted position of the winner
    w_rank = np.where(has_log, rk[np.maximum(w_pos, 0)], -1)
    b_rank = np.where(has_base, rk[np.maximum(base_at, 0)], -1)
    w_forced = has_log & dd[np.maximum(w_pos, 0)]
    deleted = has_log & log_deleted & (~has_base | w_forced | (w_rank >= b_rank))
    log_rules = has_log & ~log_deleted & (~has_base | (w_rank >= b_rank))
    top = np.where(deleted | log_rules, w_pos, base_at)  # whose meta columns the row keeps
    keys = np.flatnonzero(top >= 0)
    cols = []
    whole = set(META_COLUMNS_WHOLE)
    for name in versions.column_names:
        column = versions.column(name)
        if name in whole:
            cols.append(column.take(pa.array(order[top[keys]])))
            continue
        has = present.get(name) if present is not None else None
        valid = (np.asarray(has, dtype=bool) if has is not None else _np_bool(pc.is_valid(column)))[
            order
        ]
        # in the log's fold a value is set by the first record that has one, and replaced
        # only by a later winner that has one
        va = counts & valid[a]
        last_set = np.full(ngroups, -1, dtype=np.int64)
        np.maximum.at(last_set, ag[va & wins], idx[va & wins])
        first_set = np.full(ngroups, len(a), dtype=np.int64)
        np.minimum.at(first_set, ag[va], idx[va])
        from_log = np.where(last_set >= 0, last_set, first_set)
        log_at = np.where(from_log < len(a), a[np.minimum(from_log, len(a) - 1)], -1)
        base_has = has_base & valid[np.maximum(base_at, 0)]
        use_log = np.where(log_rules, log_at >= 0, ~base_has & (log_at >= 0))
        use_log &= has_log & ~log_deleted
        best = np.where(deleted, top, np.where(use_log, log_at, np.where(base_has, base_at, top)))
        cols.append(column.take(pa.array(order[best[keys]])))
    out = pa.Table.from_arrays(cols, schema=versions.schema)
    return out, deleted[keys]


def unavailable_presence(versions: pa.Table, marker: str) -> dict[str, np.ndarray]:
    """``FILL_UNAVAILABLE`` (``PartialUpdateHandler.reconcileMarkerValues``): per top-level
    string or bytes column, the versions that hold a value (anything but ``marker``, bytes
    compared as its UTF-8: a null is a value), for :func:`partial_merge`'s ``present``; other
    columns always do."""
    out = {}
    for f in versions.schema:
        t = f.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            value = pa.scalar(marker, t)
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            value = pa.scalar(marker.encode(), t)
        else:
            value = None
        if value is not None:
            marked = pc.fill_null(pc.equal(versions.column(f.name), value), False)
            out[f.name] = ~_np_bool(marked)
        else:
            out[f.name] = np.ones(versions.num_rows, dtype=bool)
    return out


#: Columns a partial merge takes whole from the winning version (never filled).
META_COLUMNS_WHOLE = (*META_FIELDS_WITH_OPERATION, IS_DELETED)
