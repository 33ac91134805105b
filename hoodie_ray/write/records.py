"""Records as Arrow columns: normalisation, keys, ordering values, deletes and precombine.

A :class:`PreparedBatch` is the unit everything downstream works on: the user's data columns
(normalised to the types Hudi stores), plus ``_hoodie_record_key``, ``_hoodie_partition_path``
and a boolean ``_hoodie_is_deleted`` column. All of it is column-wise; no per-record Python.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray import jit
from hoodie_ray.codes import string_offsets
from hoodie_ray.exceptions import HoodieInputError, HoodieSchemaError
from hoodie_ray.index import group_keys, hash_keys, key_bytes, ordering_numbers
from hoodie_ray.keygen import KeyGenerator
from hoodie_ray.merge import default_ordering
from hoodie_ray.meta import IS_DELETED, META_PREFIX, OPERATION, PARTITION_PATH, RECORD_KEY
from hoodie_ray.reader.schema import reconcile
from hoodie_ray.write.schema_evolution import EvolutionPolicy, evolve_schema

#: Partial updates (``write.partial.updates``): a row's data columns its batch did not carry,
#: joined by NUL ("" for none); the writers keep the stored values of these.
ABSENT_COLUMNS = "_hoodie_absent_columns"

ROUTING_COLUMNS = (RECORD_KEY, PARTITION_PATH, IS_DELETED, OPERATION, ABSENT_COLUMNS)

#: ``_hoodie_operation`` values (Java ``HoodieOperation.getName``: ``I``, ``-U``, ``U``, ``D``),
#: and the spellings of Flink's row kinds accepted for them in an input column.
_OPERATION_SPELLINGS = {"I": "I", "+I": "I", "-U": "-U", "U": "U", "+U": "U", "D": "D", "-D": "D"}


def is_ray_dataset(obj: Any) -> bool:
    """True for a Ray Dataset (materialized or not), never importing Ray."""
    mod = sys.modules.get("ray.data")
    return mod is not None and isinstance(obj, mod.Dataset)


def is_spark_dataframe(obj: Any) -> bool:
    """True for a pyspark DataFrame (classic or Spark Connect), never importing pyspark."""
    for name in ("pyspark.sql.dataframe", "pyspark.sql.connect.dataframe"):
        mod = sys.modules.get(name)
        cls = getattr(mod, "DataFrame", None) if mod is not None else None
        if cls is not None and isinstance(obj, cls):
            return True
    return False


def is_pandas(obj: Any) -> bool:
    """True for a pandas DataFrame, never importing pandas."""
    mod = sys.modules.get("pandas")
    return mod is not None and isinstance(obj, mod.DataFrame)


#: What Arrow raises for a DataFrame it cannot convert (an object column of ints and strings)
_PANDAS_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError)


def pandas_schema(df: Any) -> pa.Schema:
    """The Arrow schema :func:`to_arrow` gives a pandas DataFrame, without converting it."""
    try:
        return pa.Schema.from_pandas(_dense(df), preserve_index=False)
    except _PANDAS_ERRORS as e:
        raise HoodieInputError(f"cannot convert the DataFrame to Arrow: {e}") from None


def _dense(df: Any) -> Any:
    """``df`` with its sparse columns made dense (Arrow has no sparse pandas conversion: a
    raw TypeError): a sparse column holds the same values as a dense one."""
    import pandas as pd

    sparse = [c for c, t in df.dtypes.items() if isinstance(t, pd.SparseDtype)]
    if not sparse:
        return df
    out = df.copy(deep=False)
    for c in sparse:
        out[c] = out[c].sparse.to_dense()
    return out


def dtypes_schema(names: Any, dtypes: Any) -> pa.Schema:
    """The Arrow schema of a pandas frame known only by its column names and dtypes (Ray
    Data's ``PandasBlockSchema``): what :func:`pandas_schema` gives for every dtype but
    ``object``, whose values decide their type: such a column gets type ``null`` (the only
    dtype that does), which :func:`normalise_schema` reads as "the table's type" (a string in
    a new table)."""
    import pandas as pd

    empty = pd.DataFrame({n: pd.Series([], dtype=t) for n, t in zip(names, dtypes, strict=True)})
    return pandas_schema(empty)


def to_arrow(data: Any) -> pa.Table:
    """Accept a pyarrow Table/RecordBatch or a pandas DataFrame; anything else is an error."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    try:
        import pandas as pd

        if isinstance(data, pd.DataFrame):
            try:
                return pa.Table.from_pandas(_dense(data), preserve_index=False)
            except _PANDAS_ERRORS as e:
                raise HoodieInputError(f"cannot convert the DataFrame to Arrow: {e}") from None
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    raise HoodieInputError(
        f"unsupported input type {type(data).__name__}: pass a pyarrow Table or RecordBatch, a "
        "pandas DataFrame, a Ray Dataset or a Spark DataFrame"
    )


def _normalise_type(t: pa.DataType, name: str, keep_null: bool = False) -> pa.DataType:
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_fixed_size_binary(t) and not pa.types.is_decimal(t):
        return pa.binary()  # stored as Avro bytes: the table's type is binary
    if pa.types.is_dictionary(t):
        return _normalise_type(t.value_type, name, keep_null)
    if pa.types.is_timestamp(t):
        # Avro timestamp-micros, stored as UTC-adjusted INT64 micros like Java writes.
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_null(t):
        # an all-null column: a string in a new table; the table's type in an existing one
        return t if keep_null else pa.string()
    if pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_list(t):
        return pa.list_(_normalise_field(t.value_field, name, keep_null))
    if pa.types.is_struct(t):
        if t.num_fields == 0:
            raise HoodieSchemaError(
                f"field {name} is a struct with no fields, which Parquet cannot store"
            )
        return pa.struct(
            [_normalise_field(t.field(i), name, keep_null) for i in range(t.num_fields)]
        )
    if pa.types.is_map(t):
        return pa.map_(
            _normalise_type(t.key_type, name), _normalise_field(t.item_field, name, keep_null)
        )
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_uint8(t) or pa.types.is_uint16(t) or pa.types.is_int8(t) or pa.types.is_int16(t):
        return pa.int32()  # Avro int
    if pa.types.is_uint32(t):
        return pa.int64()
    if (
        pa.types.is_uint64(t)
        or pa.types.is_time(t)
        or pa.types.is_duration(t)
        or pa.types.is_interval(t)
    ):
        raise HoodieSchemaError(f"field {name} has type {t}, which Hudi (Avro) cannot store")
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise HoodieSchemaError(f"field {name}: decimal precision {t.precision} > 38")
        if not 0 <= t.scale <= t.precision:
            raise HoodieSchemaError(
                f"field {name}: decimal scale {t.scale} is not within 0..{t.precision} (the "
                "precision), as Avro's decimal requires"
            )
        return pa.decimal128(t.precision, t.scale)
    return t


def _normalise_field(f: pa.Field, parent: str, keep_null: bool = False) -> pa.Field:
    return pa.field(f.name, _normalise_type(f.type, f"{parent}.{f.name}", keep_null), nullable=True)


def check_unique_names(names: list[str]) -> None:
    """Refuse an input with a column name twice (a Spark join's, say), naming it: Hudi's
    schema cannot hold it, and Ray cannot even carry such a table between processes."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise HoodieSchemaError(f"field {name} appears twice in the input schema")
        seen.add(name)


def normalise_schema(schema: pa.Schema, *, keep_null: bool = False) -> pa.Schema:
    """The schema Hudi stores for this input: every field nullable, Avro-representable types.

    ``keep_null``: all-null columns (type ``null``) keep that type (they take the table's type
    when written into an existing table) instead of becoming strings."""
    check_unique_names(schema.names)
    fields = []
    for f in schema:
        if f.name.startswith(META_PREFIX):
            # Meta columns of a table read back are recomputed, never trusted; the delete
            # flag is taken out before normalisation and is not stored.
            continue
        fields.append(pa.field(f.name, _normalise_type(f.type, f.name, keep_null), nullable=True))
    return pa.schema(fields)


def normalise_table(table: pa.Table, *, keep_null: bool = False) -> pa.Table:
    """Cast the input to :func:`normalise_schema` and drop incoming ``_hoodie_`` meta columns."""
    target = normalise_schema(table.schema, keep_null=keep_null)
    cols = []
    for f in target:
        col = table.column(f.name)
        if col.type != f.type:
            try:
                col = col.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise HoodieSchemaError(
                    f"field {f.name}: cannot convert {col.type} to {f.type}: {e}"
                ) from None
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=target)


def check_schema_compatible(batch_schema: pa.Schema, table_schema: pa.Schema) -> None:
    """The batch carries exactly the table's data columns with the same types (order may
    differ): what a write into a schema fixed for the whole write must bring.

    Raises:
        HoodieSchemaError: naming the first dropped, added or retyped column.
    """
    have = {f.name: f.type for f in batch_schema if f.name != IS_DELETED}
    want = {f.name: f.type for f in table_schema if not f.name.startswith(META_PREFIX)}
    for name, t in want.items():
        if name not in have:
            raise HoodieSchemaError(f"the batch drops column {name} of the table schema")
        if have[name] != t:
            raise HoodieSchemaError(f"column {name} changes type from {t} to {have[name]}")
    for name in have:
        if name not in want:
            raise HoodieSchemaError(
                f"the batch adds column {name}, which the table schema does not have"
            )


@dataclass(frozen=True)
class PreparedBatch:
    """Data columns (table schema order) + record key, partition path and delete flag."""

    table: pa.Table

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    @property
    def keys(self) -> pa.ChunkedArray:
        return self.table.column(RECORD_KEY)

    @property
    def partitions(self) -> pa.ChunkedArray:
        return self.table.column(PARTITION_PATH)

    @property
    def is_deleted(self) -> pa.ChunkedArray:
        return self.table.column(IS_DELETED)

    def data_columns(self) -> list[str]:
        return [n for n in self.table.column_names if n not in ROUTING_COLUMNS]

    @property
    def data_schema(self) -> pa.Schema:
        """The data columns' schema: the table schema this batch is written with."""
        return pa.schema([f for f in self.table.schema if f.name not in ROUTING_COLUMNS])


def prepare_batch(
    data: pa.Table,
    keygen: KeyGenerator,
    *,
    ordering_field: str | None,
    operation: str,
    data_schema: pa.Schema | None = None,
    evolution: EvolutionPolicy | None = None,
    changelog: bool = False,
    partial: bool = False,
) -> PreparedBatch:
    """Normalise a batch and compute its routing columns.

    ``data_schema``: the table's data schema (None for a new table: the batch decides it).
    The batch is written with the schema :func:`~hoodie_ray.write.schema_evolution
    .evolve_schema` derives from it and the batch's (``evolution``: what it may change; by
    default only what Hudi's write path allows, without nulls for missing columns): its data
    columns come out in that schema's order and types (:attr:`PreparedBatch.data_schema`),
    which differs from ``data_schema`` when the batch evolves the table schema.
    ``operation=delete`` marks every row deleted (only key, partition and ordering fields are
    needed, the other columns are nulls; a delete never changes the schema): a delete without
    an ordering value is default-ordered (commit-time: it replaces every older version). A
    boolean ``_hoodie_is_deleted`` column marks deletes in upserts. With ``changelog`` (Flink's
    changelog mode) an input ``_hoodie_operation`` column gives each row's operation
    (``I``, ``-U``, ``U``, ``D``, or Flink's ``+I``, ``+U``, ``-D``; ``D`` rows are deletes), kept
    as the ``_hoodie_operation`` routing column; without one the writer decides. With
    ``partial`` (``write.partial.updates``) the table's data columns the batch lacks are named
    in an :data:`ABSENT_COLUMNS` column (its rows update only the columns they have).

    Raises:
        HoodieInputError: a row of any other operation (a ``_hoodie_is_deleted`` row too) has
            a null ordering value, as Hudi's Spark and Flink writers refuse it ("The value of
            <field> can not be null"); nothing is written.
    """
    ops = _input_operations(data) if changelog and OPERATION in data.column_names else None
    is_deleted_col = None
    if IS_DELETED in data.column_names:
        raw = data.column(IS_DELETED)
        if not pa.types.is_boolean(raw.type):
            raise HoodieSchemaError(f"column {IS_DELETED} must be boolean, got {raw.type}")
        is_deleted_col = pc.fill_null(raw, False).combine_chunks()
    table = normalise_table(data, keep_null=data_schema is not None)
    n = table.num_rows
    if operation == "delete":
        deleted = pa.array(np.ones(n, dtype=bool))
        if data_schema is not None:
            table = _fill_missing(table, data_schema)
    else:
        deleted = (
            is_deleted_col if is_deleted_col is not None else pa.array(np.zeros(n, dtype=bool))
        )
        if data_schema is not None:
            data_schema = pa.schema([f for f in data_schema if not f.name.startswith(META_PREFIX)])
            target = evolve_schema(data_schema, table.schema, evolution or EvolutionPolicy())
            table = reconcile(table, target)
    check_ordering_field(table.schema, ordering_field)
    keys = keygen.record_keys(table)
    if ordering_field is not None and operation != "delete":
        _check_ordering_values(table.column(ordering_field), ordering_field, keys)
    parts = keygen.partition_paths(table)
    _check_partition_segments(parts)
    out = table.append_column(RECORD_KEY, keys).append_column(PARTITION_PATH, parts)
    if ops is not None:
        deleted = pc.or_(deleted, pc.fill_null(pc.equal(ops, "D"), False))
    out = out.append_column(IS_DELETED, deleted)
    if ops is not None:
        out = out.append_column(OPERATION, ops)
    if partial:
        given = set(data.column_names)
        absent = "\x00".join(f.name for f in table.schema if f.name not in given)
        out = out.append_column(ABSENT_COLUMNS, pa.repeat(pa.scalar(absent, pa.string()), n))
    return PreparedBatch(out)


def _input_operations(data: pa.Table) -> pa.Array:
    """An input ``_hoodie_operation`` column in Java's spellings (nulls: the writer decides).

    Raises:
        HoodieInputError: naming the first value that is no operation.
    """
    col = data.column(OPERATION)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        raise HoodieSchemaError(f"column {OPERATION} must be a string, got {col.type}")
    col = pc.utf8_upper(pc.utf8_trim_whitespace(col.cast(pa.string()).combine_chunks()))
    spellings = pa.array(list(_OPERATION_SPELLINGS))
    at = pc.index_in(col, value_set=spellings)
    bad = pc.and_(pc.is_null(at), pc.is_valid(col))
    if pc.any(bad).as_py():
        first = pc.index(bad, True).as_py()
        raise HoodieInputError(
            f"column {OPERATION}: {col[first].as_py()!r} (row {first}) is no operation; use "
            + ", ".join(_OPERATION_SPELLINGS)
        )
    return pa.array(list(_OPERATION_SPELLINGS.values()), pa.string()).take(at)


def _check_ordering_values(
    col: pa.ChunkedArray | pa.Array, field: str, keys: pa.ChunkedArray | pa.Array
) -> None:
    """Refuse null ordering values (module :mod:`hoodie_ray.merge`: the rule they would meet)."""
    nulls = col.null_count
    if not nulls:
        return
    first = pc.index(pc.is_null(col), True).as_py()
    raise HoodieInputError(
        f"the ordering (precombine) field {field} is null in {nulls} row(s) (the first: record "
        f"key {keys[first].as_py()!r}); every record needs an ordering value, as in Hudi's "
        "writers; a delete without one is written with write.operation=delete"
    )


def check_ordering_field(schema: pa.Schema, ordering_field: str | None) -> None:
    """The batch (of ``schema``, normalised) carries an orderable ordering field.

    Raises:
        HoodieSchemaError: naming the field, when it is missing or of a type without order.
    """
    if ordering_field is None:
        return
    if ordering_field not in schema.names:
        raise HoodieSchemaError(
            f"ordering (precombine) field {ordering_field} is missing from the batch"
        )
    t = schema.field(ordering_field).type
    if pa.types.is_nested(t) or pa.types.is_binary(t):
        raise HoodieSchemaError(f"ordering field {ordering_field} of type {t} cannot be ordered")


MAX_PARTITION_SEGMENT_BYTES = 255
"""A directory name's limit on local file systems and HDFS (object stores allow more)."""


def _check_partition_segments(parts: pa.Array | pa.ChunkedArray) -> None:
    """A partition path segment no file system can create fails here, before any write
    (else the writer dies half-way with a raw ``OSError: File name too long``)."""
    if len(parts) == 0:
        return
    arr = parts.combine_chunks() if isinstance(parts, pa.ChunkedArray) else parts
    # no whole path longer than a segment may be: nothing to split (a table without
    # partitions, most tables' paths), seen from the offsets
    longest_path = int(np.diff(string_offsets(arr)).max()) if pa.types.is_string(arr.type) else None
    if longest_path is not None and longest_path <= MAX_PARTITION_SEGMENT_BYTES:
        return
    segments = pc.list_flatten(pc.split_pattern(parts, "/"))
    longest = pc.max(pc.binary_length(segments)).as_py()
    if longest is not None and longest > MAX_PARTITION_SEGMENT_BYTES:
        raise HoodieInputError(
            f"a partition path segment is {longest} bytes long; directory names are limited "
            f"to {MAX_PARTITION_SEGMENT_BYTES} bytes"
        )


def _fill_missing(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Deletes may carry only key columns: the table schema's columns, nulls where absent."""
    return reconcile(table, pa.schema([f for f in schema if not f.name.startswith(META_PREFIX)]))


def precombine(
    table: pa.Table,
    ordering_field: str | None,
    *,
    key_hashes: np.ndarray | None = None,
    by_partition: bool = False,
) -> pa.Table:
    """Fold the rows of each record key in arrival order by the merge rule
    (:mod:`hoodie_ray.merge`), keeping what stands for the fold.

    Event time: the winner is the row with the highest ordering value (nulls lowest; ties:
    the later) after the key's last default-ordered delete (a delete whose ordering value is
    null), or that delete itself when nothing follows it. When something follows it, the
    delete is kept too, just before the winner, so that what is written replaces every older
    version of the key, as the delete did (:func:`precombine_reset` marks such winners).
    Without an ordering field the last row wins. Vectorised, no per-row Python.

    ``key_hashes``: :func:`hoodie_ray.index.hash_keys` of the record keys, when the caller
    has them (they are not computed twice). ``by_partition``: one row per record key in each
    partition (a non-global index: :func:`by_partition_and_key`).
    """
    if by_partition:
        rows = precombine_rows(by_partition_and_key(table), ordering_field)
    else:
        rows = precombine_rows(table, ordering_field, key_hashes=key_hashes)
    return table if rows is None else _keep_rows(table, rows)


def by_partition_and_key(table: pa.Table) -> pa.Table:
    """``table`` with its record key column made partition path + record key: what the
    fold keys by under a non-global index (and the bucket index), where one record key may
    live in several partitions, as Spark's dedup by ``HoodieKey`` and Flink's buffers by
    bucket keep one row of a key in each partition."""
    if PARTITION_PATH not in table.column_names:
        return table
    keys = pc.binary_join_element_wise(
        table.column(PARTITION_PATH), table.column(RECORD_KEY), "\x00"
    )
    return table.set_column(table.schema.get_field_index(RECORD_KEY), RECORD_KEY, keys)


def precombine_rows(
    table: pa.Table, ordering_field: str | None, *, key_hashes: np.ndarray | None = None
) -> np.ndarray | None:
    """The rows :func:`precombine` keeps (ascending positions), or None when it keeps all."""
    return precombine_plan(table, ordering_field, key_hashes=key_hashes)[0]


def precombine_plan(
    table: pa.Table, ordering_field: str | None, *, key_hashes: np.ndarray | None = None
) -> tuple[np.ndarray | None, bool]:
    """``(rows, unique)``: :func:`precombine_rows`, and whether they hold one row per key
    (false when a default-ordered delete is kept before the version that followed it). The
    key is the record key column's value (:func:`by_partition_and_key` for a non-global
    index)."""
    n = table.num_rows
    if n <= 1:
        return None, True
    compiled = _fold_compiled(table, ordering_field, key_hashes)
    if compiled is not None:
        return compiled
    gid, ngroups = group_keys(table.column(RECORD_KEY), hashes=key_hashes)
    if ngroups == n:
        return None, True
    # Keys with a single row keep it; only the rows of repeated keys need the fold.
    counts = np.bincount(gid, minlength=ngroups)
    single = counts[gid] == 1
    winner = np.full(ngroups, -1, dtype=np.int64)
    winner[gid[single]] = np.flatnonzero(single)
    rows = np.flatnonzero(~single)  # positions of the rows of repeated keys, ascending
    g = gid[rows]
    if ordering_field is None:
        np.maximum.at(winner, g, rows)
        return np.sort(winner), True
    ordv = table.column(ordering_field)
    ord_rows = ordv.take(pa.array(rows))
    barrier = default_ordering(pa.table({"o": ord_rows}), "o", False)
    if IS_DELETED in table.column_names:
        deleted = pc.fill_null(table.column(IS_DELETED).take(pa.array(rows)), False)
        barrier &= np.asarray(deleted.to_numpy(zero_copy_only=False), dtype=bool)
    else:
        barrier[:] = False
    last_barrier = np.full(ngroups, -1, dtype=np.int64)
    if barrier.any():
        np.maximum.at(last_barrier, g[barrier], rows[barrier])
    winner[g] = last_barrier[g]  # groups with no candidate keep their last barrier
    after = rows > last_barrier[g]  # candidates: rows after the key's last barrier
    cand = rows[after]
    keep_barrier = np.zeros(0, dtype=np.int64)
    if len(cand):
        gc = g[after]
        o = pc.take(ordv, pa.array(cand))
        # nulls lowest: "known" sorts them first, whatever the null placement of "o"
        helper = pa.table({"g": pa.array(gc), "known": pc.is_valid(o), "o": o, "pos": cand})
        keys = [("g", "ascending"), ("known", "ascending"), ("o", "ascending")]
        order = pc.sort_indices(helper, sort_keys=[*keys, ("pos", "ascending")]).to_numpy()
        g_sorted = gc[order]
        is_last = np.ones(len(order), dtype=bool)
        is_last[:-1] = g_sorted[:-1] != g_sorted[1:]
        won = g_sorted[is_last]
        lb = last_barrier[won]
        keep_barrier = lb[lb >= 0]  # a barrier followed by a winner: both stay
        winner[won] = cand[order][is_last]
    out = np.sort(np.concatenate([winner, keep_barrier]))
    return out, len(keep_barrier) == 0


def _fold_compiled(
    table: pa.Table, ordering_field: str | None, key_hashes: np.ndarray | None
) -> tuple[np.ndarray | None, bool] | None:
    """:func:`precombine_plan` by its compiled kernel (``write/_records_jit.py``: the keys
    grouped and folded in one pass, ~10x cheaper on a small flush), where numba is loaded
    and the ordering values compare exactly as int64 or float64; None elsewhere (the numpy
    path runs)."""
    if not jit.loaded():
        return None
    n = table.num_rows
    ordered = ordering_field is not None
    if ordered:
        assert ordering_field is not None
        col = table.column(ordering_field)
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        t = arr.type.value_type if pa.types.is_dictionary(arr.type) else arr.type
        exact_int = (
            pa.types.is_signed_integer(t)
            or pa.types.is_boolean(t)
            or (pa.types.is_unsigned_integer(t) and t.bit_width < 64)
            or pa.types.is_temporal(t)
        )
        if not (exact_int or pa.types.is_floating(t)):
            return None  # strings, decimals, uint64: compared by Arrow
        vals = ordering_numbers(arr)
        assert vals is not None
        valid = (
            np.ones(n, dtype=bool)
            if arr.null_count == 0
            else np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        )
        barrier = np.zeros(n, dtype=bool)
        if IS_DELETED in table.column_names and arr.null_count:
            deleted = pc.fill_null(table.column(IS_DELETED), False).to_numpy()
            barrier = ~valid & np.asarray(deleted, dtype=bool)
    else:
        vals, valid, barrier = np.zeros(n, np.int64), np.ones(n, bool), np.zeros(n, bool)
    from hoodie_ray.write import _records_jit

    keys = table.column(RECORD_KEY)
    data, starts, lens = key_bytes(keys)
    hashes = hash_keys(keys) if key_hashes is None else key_hashes
    keep = np.zeros(n, dtype=bool)
    kept, unique = _records_jit.fold_rows(
        jit.read_only(data if data is not None else np.zeros(1, np.uint8)),
        jit.read_only(starts),
        jit.read_only(lens),
        jit.read_only(hashes),
        ordered,
        jit.read_only(vals),
        jit.read_only(valid),
        jit.read_only(barrier),
        keep,
    )
    return (None if kept == n else np.flatnonzero(keep)), bool(unique)


def warm_up() -> None:
    """:func:`hoodie_ray.index.warm_up`, then the write path's kernels loaded (the
    precombine's two versions, int64 and float64 ordering values; the commit seqnos'), so an
    actor pays the loads at start."""
    from hoodie_ray.index import warm_up as warm_up_index

    warm_up_index()
    if not jit.loaded():
        return
    keys = pa.array(["a", "b", "a"])
    for values in (pa.array([1, 2, 3], pa.int64()), pa.array([1.0, 2.0, 3.0])):
        precombine_plan(pa.table({RECORD_KEY: keys, "o": values}), "o")
    from hoodie_ray.write.base_file import commit_seqnos

    commit_seqnos("warm_0_", 0, 2)


def precombine_reset(table: pa.Table) -> np.ndarray:
    """For :func:`precombine`'s output: the rows that follow a kept default-ordered delete of
    their key (they replace every older version of it)."""
    keys = table.column(RECORD_KEY)
    if len(keys) <= 1:
        return np.zeros(len(keys), dtype=bool)
    gid, ngroups = group_keys(keys)
    if ngroups == len(keys):
        return np.zeros(len(keys), dtype=bool)
    first = np.full(ngroups, len(keys), dtype=np.int64)
    np.minimum.at(first, gid, np.arange(len(keys)))
    return np.arange(len(keys)) > first[gid]


def _keep_rows(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table`` reduced to ``rows`` (distinct positions), in table order (one boolean filter,
    cheaper than a take)."""
    mask = np.zeros(table.num_rows, dtype=bool)
    mask[rows] = True
    return table.filter(pa.array(mask))


def has_duplicate_keys(table: pa.Table) -> bool:
    keys = table.column(RECORD_KEY)
    return bool(pc.count_distinct(keys).as_py() != len(keys))


# -- partial updates ---------------------------------------------------------------------------

#: Per data column, the rows that carry it (partial updates: ``write.partial.updates``).
Presence = dict[str, np.ndarray]


def partial_presence(rows: pa.Table, names: Sequence[str]) -> Presence | None:
    """Which of the data columns ``names`` each row carries (:data:`ABSENT_COLUMNS`); None
    when every row carries all of them."""
    if ABSENT_COLUMNS not in rows.column_names:
        return None
    col = pc.fill_null(rows.column(ABSENT_COLUMNS), "")
    enc = pc.dictionary_encode(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    sets = [set(v.split("\x00")) if v else set() for v in enc.dictionary.to_pylist()]
    if not any(sets):
        return None
    idx = enc.indices.to_numpy(zero_copy_only=False)
    return {name: ~np.array([name in s for s in sets], dtype=bool)[idx] for name in names}


def folded_presence(
    rows: pa.Table, present: Presence, folded: pa.Table, counted: np.ndarray
) -> Presence:
    """The columns each row of ``folded`` (one a key, from ``rows``) has: those the rows of
    its key that the fold counted (``counted``: none before a delete that restarted it) had."""
    keys = rows.column(RECORD_KEY)
    gid, ngroups = group_keys(keys)
    # each folded key's first row in ``rows`` (every folded key is there: no nulls)
    first = pc.index_in(folded.column(RECORD_KEY), value_set=keys.combine_chunks())
    of = gid[first.to_numpy(zero_copy_only=False)]
    out = {}
    for name, has in present.items():
        anyone = np.zeros(ngroups, dtype=bool)
        np.logical_or.at(anyone, gid, has & counted)
        out[name] = anyone[of]
    return out


def column_sets(
    rows: pa.Table, present: Presence | None
) -> list[tuple[pa.Table, list[str] | None]]:
    """``rows`` split by the set of data columns they carry: ``(rows, columns)`` with
    ``columns`` None for rows that carry every column."""
    if present is None or not present:
        return [(rows, None)]
    names = list(present)
    matrix = np.column_stack([present[n] for n in names])

    def columns(sig: np.ndarray) -> list[str] | None:
        return None if sig.all() else [n for n, h in zip(names, sig, strict=True) if h]

    if not len(matrix) or (matrix == matrix[0]).all():  # one set (a flush of one batch)
        return [(rows, columns(matrix[0]) if len(matrix) else None)]
    packed = np.ascontiguousarray(np.packbits(matrix, axis=1))
    sig_ids = packed.view(np.dtype((np.void, packed.shape[1]))).ravel()
    _, first, inverse = np.unique(sig_ids, return_index=True, return_inverse=True)
    return [
        (rows.filter(pa.array(inverse.reshape(-1) == j)), columns(matrix[at]))
        for j, at in enumerate(first)
    ]
