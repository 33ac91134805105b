"""Schema evolution on write: the table schema a batch is written with, as Hudi decides it.

Hudi's default write path (``HoodieSchemaUtils.deduceWriterSchema`` without
``hoodie.datasource.write.reconcile.schema``) first *canonicalises* the batch's schema against
the table's (``AvroSchemaEvolutionUtils.reconcileSchemaRequirements``: a batch column whose
type the table's type can hold is cast to the table's type, ``SchemaChangeUtils
.shouldPromoteType``), then checks that the result is a valid evolution
(``AvroSchemaUtils.checkValidEvolution``): no column of the table missing (unless
``hoodie.write.set.null.for.missing.columns`` fills it with nulls) and the table's data readable
with the new schema (Avro schema resolution, ``AvroSchemaCompatibility``: ``int -> long ->
float -> double``, new fields need a default). So:

* a new column, or a new field of a nested struct, is added to the table schema (after the
  table's fields: nullable, default null);
* a batch type the table's type can hold (``int`` into a ``long`` column, ``float`` into
  ``double``, integers, dates and bytes into ``string``, strings into ``bytes``, a narrower
  decimal into a wider one) is written in the table's type;
* a batch type that can read the table's data widens the table's column (``int -> long ->
  float -> double``); files written before keep their type and readers cast them;
* anything else is refused with a :class:`HoodieSchemaError` naming the column and both types.

Stricter than Hudi, on purpose: the type of a record key, partition or ordering field never
changes (record keys and partition paths are strings made from the values, and delete blocks
keep ordering values with their writer's type); logical types (dates, timestamps, decimals)
are never changed in the table (the Avro resolution check Hudi applies ignores them: it would
let a long batch turn a date column into a long); floats and decimals are not written into a
string column (Java formats them with ``String.valueOf``); a non-null column is never dropped
(Hudi makes it nullable with ``hoodie.write.set.null.for.missing.columns``); a new column that
only differs in case from one of the table's is refused.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import pyarrow as pa

from hoodie_ray.config.options import WriteConfig
from hoodie_ray.exceptions import HoodieSchemaError

__all__ = ["EvolutionPolicy", "evolve_schema", "is_numeric_promotion"]

_SET_NULL = "hoodie.write.set.null.for.missing.columns"
_AUTO_EVOLUTION = "hoodie.datasource.write.schema.allow.auto.evolution"


@dataclass(frozen=True)
class EvolutionPolicy:
    """What a write may do to the table schema."""

    allow_evolution: bool = True
    """Add columns and widen types (``hoodie.datasource.write.schema.allow.auto.evolution``)."""
    set_null_for_missing: bool = False
    """Write nulls for nullable columns the batch lacks
    (``hoodie.write.set.null.for.missing.columns``)."""
    fixed_fields: frozenset[str] = frozenset()
    """Top-level fields whose type may not change (record key, partition, ordering fields)."""

    @classmethod
    def of(cls, wc: WriteConfig, fixed_fields: Collection[str] = ()) -> EvolutionPolicy:
        return cls(
            allow_evolution=wc.schema_auto_evolution,
            set_null_for_missing=wc.set_null_for_missing_columns,
            fixed_fields=frozenset(fixed_fields),
        )


# -- type rules --------------------------------------------------------------------------------

_AVRO_INT = (pa.int8(), pa.int16(), pa.int32())


def _numeric_rank(t: pa.DataType) -> int:
    """Avro's numeric promotion order (int < long < float < double), -1 for other types."""
    if t in _AVRO_INT:
        return 0
    if t == pa.int64():
        return 1
    if t == pa.float32():
        return 2
    if t == pa.float64():
        return 3
    return -1


def is_numeric_promotion(src: pa.DataType, dst: pa.DataType) -> bool:
    """``src -> dst`` is one of Avro's numeric promotions (``int -> long -> float -> double``,
    Arrow's int8/int16 counting as Avro ``int``)."""
    a, b = _numeric_rank(src), _numeric_rank(dst)
    return a >= 0 and b >= 0 and a <= b


def _decimal_holds(dst: pa.DataType, src: pa.DataType) -> bool:
    """Every value of decimal ``src`` fits decimal ``dst`` exactly (Hudi's
    ``isDecimalUpdateAllowInternalBase``: as many integer digits and at least the scale)."""
    return bool(dst.scale >= src.scale and dst.precision - dst.scale >= src.precision - src.scale)


def _table_holds(table: pa.DataType, batch: pa.DataType) -> bool:
    """A batch value of type ``batch`` is written as the table's ``table`` type (Hudi's
    canonicalisation, ``SchemaChangeUtils.shouldPromoteType(batch, table)``)."""
    if is_numeric_promotion(batch, table):
        return True
    if pa.types.is_string(table):
        # int, long, date and bytes -> string. Hudi also writes floats and decimals into a
        # string column, formatted by Java (String.valueOf, BigDecimal.toString): not here.
        return pa.types.is_integer(batch) or pa.types.is_date(batch) or pa.types.is_binary(batch)
    if pa.types.is_decimal(table):
        if pa.types.is_decimal(batch):
            return _decimal_holds(table, batch)
        return pa.types.is_integer(batch) or pa.types.is_string(batch)
    if pa.types.is_binary(table):
        return pa.types.is_string(batch)
    if pa.types.is_fixed_size_binary(table) and not pa.types.is_decimal(table):
        # an Avro fixed column (Flink's BINARY(n)); inputs arrive as binary: each value's
        # width is checked as it is cast
        return pa.types.is_binary(batch)
    if pa.types.is_date(table):
        return pa.types.is_string(batch)
    return False


# -- the merge -----------------------------------------------------------------------------------


class _Merge:
    def __init__(self, policy: EvolutionPolicy) -> None:
        self.policy = policy

    def fields(
        self, table: list[pa.Field], batch: list[pa.Field], where: str, top: bool
    ) -> list[pa.Field]:
        """The table's fields (merged with the batch's), then the batch's new ones."""
        have = {f.name: f for f in batch}
        out = []
        for tf in table:
            path = where + tf.name
            bf = have.get(tf.name)
            if bf is None:
                if top and tf.name in self.policy.fixed_fields:
                    raise HoodieSchemaError(
                        f"the batch lacks column {path} ({tf.type}): record key, partition "
                        "and ordering fields must be in every batch"
                    )
                self._missing(tf, path)
                out.append(tf)
                continue
            t = self.type(tf.type, bf.type, path)
            if t != tf.type and top and tf.name in self.policy.fixed_fields:
                raise HoodieSchemaError(
                    f"column {path}: the batch has type {bf.type} where the table has "
                    f"{tf.type}; the type of a record key, partition or ordering field "
                    "cannot change"
                )
            out.append(tf if t == tf.type else pa.field(tf.name, t, tf.nullable, tf.metadata))
        known = {f.name for f in table}
        folded = {f.name.lower(): f.name for f in table}
        for bf in batch:
            if bf.name in known:
                continue
            if bf.name.lower() in folded:
                raise HoodieSchemaError(
                    f"the batch adds column {where + bf.name}, which differs from the table's "
                    f"column {where + folded[bf.name.lower()]} only in case (Spark and hudi-rs "
                    "resolve column names ignoring case)"
                )
            if not self.policy.allow_evolution:
                raise HoodieSchemaError(
                    f"the batch adds column {where + bf.name} ({bf.type}), which the table "
                    f"schema does not have, and {_AUTO_EVOLUTION}=false keeps the table "
                    "schema fixed"
                )
            out.append(pa.field(bf.name, _concrete(bf.type), True))
        return out

    def _missing(self, tf: pa.Field, path: str) -> None:
        if not tf.nullable:
            raise HoodieSchemaError(
                f"the batch lacks column {path} ({tf.type}), which the table schema declares "
                "non-null: a non-null column cannot be dropped"
            )
        if not self.policy.set_null_for_missing:
            raise HoodieSchemaError(
                f"the batch lacks column {path} ({tf.type}) of the table schema; set "
                f"{_SET_NULL}=true to write nulls for it (Hudi's default refuses the batch)"
            )

    def type(self, table: pa.DataType, batch: pa.DataType, where: str) -> pa.DataType:
        if table == batch or pa.types.is_null(batch):
            return table
        if pa.types.is_struct(table) and pa.types.is_struct(batch):
            fields = self.fields(
                [table.field(i) for i in range(table.num_fields)],
                [batch.field(i) for i in range(batch.num_fields)],
                where + ".",
                top=False,
            )
            return pa.struct(fields)
        if pa.types.is_list(table) and pa.types.is_list(batch):
            item = self.type(table.value_type, batch.value_type, where + ".element")
            return pa.list_(table.value_field.with_type(item))
        if pa.types.is_map(table) and pa.types.is_map(batch):
            if table.key_type != batch.key_type:
                self._refuse(table, batch, where)
            item = self.type(table.item_type, batch.item_type, where + ".value")
            return pa.map_(table.key_type, table.item_field.with_type(item))
        if _table_holds(table, batch):
            return table
        if is_numeric_promotion(table, batch):
            if not self.policy.allow_evolution:
                raise HoodieSchemaError(
                    f"column {where}: the batch has type {batch} where the table has {table}; "
                    f"{_AUTO_EVOLUTION}=false keeps the table schema fixed"
                )
            return batch
        self._refuse(table, batch, where)
        raise AssertionError  # pragma: no cover

    @staticmethod
    def _refuse(table: pa.DataType, batch: pa.DataType, where: str) -> None:
        raise HoodieSchemaError(
            f"column {where}: the batch has type {batch} where the table has {table}, and "
            f"neither holds the other (Hudi widens int -> long -> float -> double only, and "
            "writes a narrower batch type in the table's type)"
        )


def _concrete(t: pa.DataType) -> pa.DataType:
    """A new column's type: values of no type (all null) are stored as strings, as in a new
    table."""
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_concrete(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_concrete(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, t.item_field.with_type(_concrete(t.item_type)))
    return t


def evolve_schema(table: pa.Schema, batch: pa.Schema, policy: EvolutionPolicy) -> pa.Schema:
    """The data schema a batch of ``batch`` schema is written with into a table whose data
    schema is ``table`` (both without meta columns; ``batch`` normalised by
    :func:`~hoodie_ray.write.records.normalise_schema`, all-null columns of type ``null``).

    Returns ``table`` itself when the batch needs no change to it.

    Raises:
        HoodieSchemaError: the batch cannot be written into the table: a type neither holds,
            a missing column (non-null, or without ``set_null_for_missing``), a type change of
            a fixed field, or any change with ``allow_evolution`` off. Names the column and
            both types.
    """
    merged = pa.schema(_Merge(policy).fields(list(table), list(batch), "", top=True))
    return table if merged.equals(table) else merged
