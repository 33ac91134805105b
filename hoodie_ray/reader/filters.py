"""Read filters ``(field, op, value)`` as hudi-rs takes them: parsing, partition pruning,
row-group pruning by Parquet statistics, and the row mask.

Operators: ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``IN``, ``NOT IN`` (case-insensitive).
Values may be Python values or strings (hudi-rs passes strings); they are cast to the column's
type. ``IN`` / ``NOT IN`` take a list/tuple/set, or a comma-separated string.
Filters combine with AND.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.exceptions import HoodieQueryError

__all__ = ["Filter", "parse_filters", "partition_values"]

_OPS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_SET_OPS = {"IN": "IN", "NOT IN": "NOT IN", "NOT_IN": "NOT IN"}
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class Filter:
    """One predicate ``field op value`` with its value cast to the column's Arrow type."""

    field: str
    op: str
    value: Any  # a pyarrow Scalar, or a pyarrow Array for IN / NOT IN

    # -- evaluation ----------------------------------------------------------------------------
    def mask(self, column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        """Boolean mask of the rows that satisfy the predicate (null compares as false)."""
        v = self.value
        if self.op == "IN":
            m = pc.is_in(column, value_set=v)
        elif self.op == "NOT IN":
            m = pc.invert(pc.is_in(column, value_set=v))
            m = pc.and_(m, pc.is_valid(column))
        else:
            fn = {
                "=": pc.equal,
                "!=": pc.not_equal,
                "<": pc.less,
                "<=": pc.less_equal,
                ">": pc.greater,
                ">=": pc.greater_equal,
            }[self.op]
            m = fn(column, v)
        return pc.fill_null(m, False) if m.null_count else m

    @property
    def matches_null(self) -> bool:
        """Whether a null satisfies this (``IN`` a list holding a null: :meth:`mask`)."""
        return self.op == "IN" and bool(self.value.null_count)

    def may_match(self, lo: Any, hi: Any) -> bool:
        """Can any value in ``[lo, hi]`` (Python values, either may be None) satisfy this? A
        filter that matches nulls may match anything: min and max say nothing of nulls."""
        if lo is None or hi is None or self.matches_null:
            return True
        if isinstance(lo, np.float32) or isinstance(hi, np.float32):
            lo, hi = self._float_bounds(lo), self._float_bounds(hi)
        try:
            if self.op in ("=", "IN"):
                vals = [self.value.as_py()] if self.op == "=" else self.value.to_pylist()
                return any(x is not None and lo <= x <= hi for x in vals)
            v = self.value.as_py() if self.op not in ("NOT IN",) else None
            if self.op == "<":
                return lo < v
            if self.op == "<=":
                return lo <= v
            if self.op == ">":
                return hi > v
            if self.op == ">=":
                return hi >= v
            if self.op == "!=":
                return not (lo == hi == v)
        except TypeError:
            return True
        return True

    def _float_bounds(self, v: Any) -> Any:
        """A float32 statistic (a file written before its column was widened to double, or
        a float column's) as the values it bounds read: through the float's shortest
        decimal against a double column, as :func:`~hoodie_ray.reader.schema._float_to_double`
        reads them (that conversion keeps the order, so bounds stay bounds); exact against a
        float column."""
        if not isinstance(v, np.float32):
            return v
        if self._value_type() == pa.float64():
            return float(str(v))
        return float(v)

    def _value_type(self) -> pa.DataType:
        v = self.value
        return v.type if isinstance(v, (pa.Scalar, pa.Array)) else pa.null()


def _cast_value(raw: Any, typ: pa.DataType, where: str) -> pa.Scalar:
    if pa.types.is_decimal(typ) and isinstance(raw, (int, float)) and not isinstance(raw, bool):
        raw = str(raw)  # as an int64 or double scalar, the cast would need 19+ digits
    try:
        if isinstance(raw, pa.Scalar):
            return raw.cast(typ)
        if isinstance(raw, str) and not (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
            if pa.types.is_boolean(typ):
                low = raw.strip().lower()
                if low not in ("true", "false"):
                    raise ValueError(raw)
                return pa.scalar(low == "true", typ)
            return pa.scalar(raw.strip(), pa.string()).cast(typ)
        return pa.scalar(raw).cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError) as e:
        raise HoodieQueryError(f"filter on {where!r}: value {raw!r} is not a {typ}: {e}") from None


def parse_filters(filters: Iterable[Sequence[Any]] | None, schema: pa.Schema) -> list[Filter]:
    """Validate filter tuples against ``schema`` and cast their values.

    Raises:
        HoodieQueryError: a malformed tuple, an unknown column or operator, a value that does
            not fit the column's type.
    """
    out: list[Filter] = []
    if filters is None:
        return out
    if isinstance(filters, tuple) and len(filters) == 3 and isinstance(filters[0], str):
        filters = [filters]  # a single (field, op, value) tuple
    for f in filters:
        if not isinstance(f, (tuple, list)) or len(f) != 3:
            raise HoodieQueryError(f"a filter is a (field, op, value) tuple, got {f!r}")
        name, op, raw = f
        if not isinstance(name, str) or name not in schema.names:
            raise HoodieQueryError(
                f"filter on unknown column {name!r}; columns: {', '.join(schema.names)}"
            )
        if not isinstance(op, str):
            raise HoodieQueryError(f"filter operator must be a string, got {op!r}")
        key = " ".join(op.strip().upper().split())
        typ = schema.field(name).type
        if key in _SET_OPS:
            if isinstance(raw, str):
                items: list[Any] = [x for x in (s.strip() for s in raw.split(",")) if x != ""]
            elif isinstance(raw, (list, tuple, set, frozenset, pa.Array)):
                items = list(raw.to_pylist() if isinstance(raw, pa.Array) else raw)
            else:
                items = [raw]
            if not items:
                raise HoodieQueryError(f"filter {name} {key}: empty value list")
            vals = [_cast_value(x, typ, name) for x in items]
            out.append(Filter(name, _SET_OPS[key], pa.array([v.as_py() for v in vals], typ)))
        elif key in _OPS:
            if raw is None:
                raise HoodieQueryError(f"filter {name} {op}: null value (use IN / NOT IN)")
            out.append(Filter(name, _OPS[key], _cast_value(raw, typ, name)))
        else:
            raise HoodieQueryError(
                f"unknown filter operator {op!r}; use =, !=, <, <=, >, >=, IN, NOT IN"
            )
    return out


def row_mask(filters: Sequence[Filter], table: pa.Table) -> pa.Array | pa.ChunkedArray | None:
    """AND of every filter over ``table`` (None when there is no filter)."""
    mask = None
    for f in filters:
        m = f.mask(table.column(f.field))
        mask = m if mask is None else pc.and_(mask, m)
    return mask


def apply_filters(filters: Sequence[Filter], table: pa.Table) -> pa.Table:
    """Rows of ``table`` satisfying every filter."""
    mask = row_mask(filters, table)
    if mask is None or table.num_rows == 0:
        return table
    return table.filter(mask)


# -- partition pruning --------------------------------------------------------------------------


def partition_values(
    partition_path: str, fields: Sequence[str], hive_style: bool, url_encoded: bool
) -> dict[str, str | None] | None:
    """The raw string value of each partition field in ``partition_path``, or None if the path
    does not split into exactly one segment per field."""
    if not fields:
        return None
    segs = partition_path.split("/") if partition_path else []
    if len(segs) != len(fields):
        return None
    out: dict[str, str | None] = {}
    for name, seg in zip(fields, segs, strict=False):
        if hive_style:
            if "=" not in seg:
                return None
            k, v = seg.split("=", 1)
            if k != name:
                return None
        else:
            v = seg
        if url_encoded:
            v = unquote(v)
        out[name] = None if v == HIVE_DEFAULT_PARTITION else v
    return out


def partition_may_match(
    filters: Sequence[Filter],
    partition_path: str,
    fields: Sequence[str],
    hive_style: bool,
    url_encoded: bool,
    schema: pa.Schema,
) -> bool:
    """False only when the partition's values prove that no row can satisfy the filters."""
    pf = [f for f in filters if f.field in fields]
    if not pf:
        return True
    values = partition_values(partition_path, fields, hive_style, url_encoded)
    if values is None:
        return True
    for f in pf:
        raw = values.get(f.field)
        typ = schema.field(f.field).type
        if raw is None:
            # Hudi's key generators write a null and an empty value alike to the default
            # partition, beside the value that is its name: its rows hold any of them
            text = pa.types.is_string(typ) or pa.types.is_large_string(typ)
            arr = pa.array([None, "", HIVE_DEFAULT_PARTITION], typ) if text else pa.nulls(1, typ)
        else:
            try:
                arr = pa.array([raw], pa.string()).cast(typ)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue  # e.g. a timestamp key generator's formatted path: cannot tell
        if not pc.any(f.mask(arr)).as_py():
            return False
    return True
