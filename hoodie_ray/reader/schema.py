"""The table schema readers use, and reconciling file/block schemas to it.

The table schema is the latest completed commit's ``extraMetadata.schema`` (Avro, without meta
fields) with the five meta fields prepended (spec §2.4; hudi-rs ``schema/resolver.rs``).
Fallbacks, in order: the schema of a base file the latest commit wrote, then
``hoodie.table.create.schema``.

Files of older commits (the table schema evolves on write: columns and struct fields added,
``int -> long -> float -> double`` widened, see :mod:`hoodie_ray.write.schema_evolution`), and
log blocks whose Avro decoder picks other Arrow types, are cast to this schema column by column
(:func:`reconcile`): missing columns and struct fields become nulls, extra columns are dropped,
widened numbers are cast (a long read as a float rounds, as Avro's resolution does), nested
structs, lists and maps are reconciled inside.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.exceptions import HoodieSchemaError

__all__ = ["nullable_schema", "reconcile"]


def nullable_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every top-level field nullable (and no schema metadata)."""
    return pa.schema([f.with_nullable(True) for f in schema])


# -- reconciliation -----------------------------------------------------------------------------


def _cast_array(arr: pa.Array, target: pa.DataType, where: str) -> pa.Array:
    if arr.type == target:
        return arr
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), target)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
        if arr.type == target:
            return arr
    if pa.types.is_struct(target) and pa.types.is_struct(arr.type):
        return _cast_struct(arr, target, where)
    if arr.type == pa.float32() and target == pa.float64():
        return _float_to_double(arr)
    if pa.types.is_list(target) and pa.types.is_list(arr.type):
        offsets, lo, hi = _rebased_offsets(arr)
        values = _cast_array(arr.values.slice(lo, hi - lo), target.value_type, f"{where}.element")
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=_mask(arr))
    if pa.types.is_map(target) and pa.types.is_map(arr.type):
        offsets, lo, hi = _rebased_offsets(arr)
        keys = _cast_array(arr.keys.slice(lo, hi - lo), target.key_type, f"{where}.key")
        items = _cast_array(arr.items.slice(lo, hi - lo), target.item_type, f"{where}.value")
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=_mask(arr))
    try:
        if pa.types.is_integer(arr.type) and pa.types.is_decimal(target):
            # Arrow asks the target to hold every value of the integer type; Hudi asks each
            # value to fit: through a decimal that holds them all, then checked per value
            wide = (
                pa.decimal128(38, target.scale)
                if target.scale <= 18
                else pa.decimal256(76, target.scale)
            )
            return arr.cast(wide).cast(target)
        return arr.cast(target, safe=False) if _unchecked_ok(arr.type, target) else arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise HoodieSchemaError(
            f"column {where!r}: cannot read {arr.type} as the table's type {target}: {e}"
        ) from None


def _rebased_offsets(arr: pa.ListArray) -> tuple[pa.Array, int, int]:
    """A list array's offsets starting at 0 (its child is sliced to match): a sliced array's
    offsets point into its whole child, which ``from_arrays`` with a null mask refuses."""
    offsets = arr.offsets
    lo, hi = offsets[0].as_py(), offsets[-1].as_py()
    return (pc.subtract(offsets, lo) if lo else offsets), lo, hi


def _mask(arr: pa.Array) -> pa.Array | None:
    return arr.is_null() if arr.null_count else None


def _float_to_double(arr: pa.Array) -> pa.Array:
    """A float read as a double the way Java's readers do (``HoodieAvroUtils
    .rewritePrimaryType``: ``Double.valueOf(String.valueOf(f))``; hudi-rs
    ``schema/batch_evolution.rs`` too): through the float's shortest decimal, so 0.1f reads
    as 0.1, not 0.10000000149011612."""
    return arr.cast(pa.string()).cast(pa.float64())


_NUMERIC_RANK = {
    pa.int8(): 0,
    pa.int16(): 0,
    pa.int32(): 0,
    pa.int64(): 1,
    pa.float32(): 2,
    pa.float64(): 3,
}


def _unchecked_ok(src: pa.DataType, dst: pa.DataType) -> bool:
    """Casts that are right by construction but that pyarrow's checked cast may refuse: a
    timestamp's time zone, and Avro's numeric promotions (``int -> long -> float ->
    double``: a long read as a float rounds, as Java's reader does)."""
    if pa.types.is_timestamp(src) and pa.types.is_timestamp(dst):
        return bool(src.unit == dst.unit)
    a, b = _NUMERIC_RANK.get(src), _NUMERIC_RANK.get(dst)
    return a is not None and b is not None and a <= b


def _cast_struct(arr: pa.Array, target: pa.StructType, where: str) -> pa.Array:
    src: pa.StructType = arr.type
    names = [src.field(i).name for i in range(src.num_fields)]
    children = []
    for i in range(target.num_fields):
        f = target.field(i)
        if f.name in names:
            child = pc.struct_field(arr, [names.index(f.name)])
            children.append(_cast_array(child, f.type, f"{where}.{f.name}"))
        else:
            children.append(pa.nulls(len(arr), f.type))
    mask = arr.is_null() if arr.null_count else None
    return pa.StructArray.from_arrays(
        children, fields=[target.field(i) for i in range(target.num_fields)], mask=mask
    )


def reconcile(table: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly the fields of ``schema``, in order, cast to their types.

    Columns missing from ``table`` become all-null columns; columns not in ``schema`` are
    dropped. Raises :class:`HoodieSchemaError` when a column cannot be cast.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if table.schema.equals(schema, check_metadata=False) and table.schema.names == schema.names:
        # dropped unread: a Hudi base file's footer metadata can hold its bloom filter (~430 KB
        # at 60,000 entries, where the reader kept the footer whole), which reading
        # ``.metadata`` would copy into Python each batch
        return table.replace_schema_metadata(None)
    n = table.num_rows
    names = table.schema.names
    cols: list[pa.ChunkedArray | pa.Array] = []
    for f in schema:
        if f.name not in names:
            cols.append(pa.nulls(n, f.type))
            continue
        col = table.column(f.name)
        if col.type == f.type:
            cols.append(col)
        else:
            chunks = [_cast_array(c, f.type, f.name) for c in col.chunks]
            cols.append(pa.chunked_array(chunks, type=f.type))
    return pa.Table.from_arrays(cols, schema=schema)
