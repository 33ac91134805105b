"""Arrow <-> Avro schema mapping, in the style the Hudi Spark writer uses (spec §5).

Two directions:

* :func:`arrow_to_avro_schema` builds the Avro record schema Hudi writes into log-block SCHEMA
  headers and commit metadata: record ``<table>_record`` in namespace ``hoodie.<table>``,
  nullable columns as ``["null", T]`` with ``"default": null``, nested records named after their
  field with the enclosing record's full name as namespace, decimals as ``fixed`` named
  ``fixed`` in namespace ``<enclosing full name>.<field>``.
* :func:`avro_to_arrow_schema` maps any Avro record schema Hudi Java writes (unions in either
  order, ``fixed`` or ``bytes`` decimals, logical types, nested records, arrays, maps, enums)
  to an Arrow schema.

Both go through :class:`AvroType`, a compiled, reference-resolved tree that the column-wise
codec (:mod:`hoodie_ray.avro.codec`) also walks. Compilation is bounded: a schema nested deeper
than :data:`MAX_DEPTH` or with more than :data:`MAX_FIELDS` fields is refused before any work.

Type mapping (Arrow -> Avro):

============================  ==========================================================
Arrow                         Avro
============================  ==========================================================
int8, int16, int32, uint8/16  ``int``
int64, uint32                 ``long``
float16?, float32             ``float`` (float16 is refused)
float64                       ``double``
bool                          ``boolean``
string, large_string, view    ``string``
binary, large/fixed binary    ``bytes``
decimal128/256(p, s)          ``fixed`` (minimal size for p) + ``decimal`` logical type
date32, date64                ``int`` + ``date``
timestamp[ms]                 ``long`` + ``timestamp-millis``
timestamp[s|us|ns]            ``long`` + ``timestamp-micros`` (s scaled up; ns truncated
                              toward zero to microseconds by the encoder)
time32                        ``int`` + ``time-millis``
time64                        ``long`` + ``time-micros`` (ns truncated to microseconds)
struct                        ``record``
list, large_list, fixed list  ``array``
map<string, V>                ``map``
dictionary<_, V>              the mapping of V
null                          ``null``
============================  ==========================================================

Timestamps with or without a time zone both map to ``timestamp-*`` (UTC instants), like the
Spark writer; reading them back gives ``timestamp[unit, tz=UTC]``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from hoodie_ray.exceptions import HoodieSchemaError
from hoodie_ray.meta import META_FIELDS, OPERATION

#: Deepest type nesting accepted (records, arrays, maps, unions each count one level).
MAX_DEPTH = 64
#: Most record fields accepted in one schema (all records together).
MAX_FIELDS = 10_000
#: Most JSON objects and arrays (``{`` and ``[``, counted in the text before parsing) of a
#: schema: a few per field at most, so a huge hostile schema is refused before json.loads.
MAX_JSON_CONTAINERS = 8 * MAX_FIELDS + 1024

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
_NAMED_KINDS = frozenset(("record", "error", "enum", "fixed"))


# ---------------------------------------------------------------------------------------------
# Compiled schema tree
# ---------------------------------------------------------------------------------------------


@dataclass(eq=False)
class AvroField:
    """One field of an Avro record."""

    name: str
    type: AvroType
    has_default: bool = False
    default: Any = None


@dataclass(eq=False)
class AvroType:
    """A compiled Avro type with named references resolved.

    ``kind`` is an Avro type name (``null``, ``boolean``, ``int``, ``long``, ``float``,
    ``double``, ``bytes``, ``string``, ``fixed``, ``enum``, ``record``, ``array``, ``map`` or
    ``union``). ``logical`` holds a recognised logical type (``decimal``, ``date``,
    ``time-millis``, ``time-micros``, ``timestamp-millis``, ``timestamp-micros``,
    ``timestamp-nanos``, ``local-timestamp-*``, ``uuid``) or None. For a union, ``null_index``
    is the position of its ``null`` branch (-1 if none).
    """

    kind: str
    logical: str | None = None
    name: str | None = None
    size: int = 0
    precision: int = 0
    scale: int = 0
    symbols: tuple[str, ...] = ()
    fields: list[AvroField] = field(default_factory=list)
    items: AvroType | None = None
    values: AvroType | None = None
    branches: list[AvroType] = field(default_factory=list)
    null_index: int = -1
    #: Minimum encoded size in bytes of one value (bounds item counts in hostile input).
    min_size: int = 0

    @property
    def is_nullable_union(self) -> bool:
        """A two-branch union of ``null`` and one other type (either order)."""
        return self.kind == "union" and len(self.branches) == 2 and self.null_index >= 0

    @property
    def value_index(self) -> int:
        """For a nullable union: the branch index of the non-null type."""
        return 1 - self.null_index

    @property
    def value_type(self) -> AvroType:
        """For a nullable union: the non-null branch."""
        return self.branches[self.value_index]

    def fastavro_json(self) -> Any:
        """This type as self-contained JSON (each named type defined once, then referenced)."""
        return _self_contained_json(self, set())


def _self_contained_json(t: AvroType, defined: set[str]) -> Any:
    if t.kind in _PRIMITIVES and t.logical in (None, "uuid"):
        return t.kind  # uuid stays a plain string: readers get str, not uuid.UUID
    if t.kind == "union":
        return [_self_contained_json(b, defined) for b in t.branches]
    if t.name is not None:
        if t.name in defined:
            return t.name
        defined.add(t.name)
    out: dict[str, Any] = {"type": t.kind}
    if t.name is not None:
        out["name"] = t.name
    if t.kind == "record":
        out["fields"] = [
            {"name": f.name, "type": _self_contained_json(f.type, defined)} for f in t.fields
        ]
    elif t.kind == "enum":
        out["symbols"] = list(t.symbols)
    elif t.kind == "fixed":
        out["size"] = t.size
    elif t.kind == "array":
        assert t.items is not None
        out["items"] = _self_contained_json(t.items, defined)
    elif t.kind == "map":
        assert t.values is not None
        out["values"] = _self_contained_json(t.values, defined)
    if t.logical is not None:
        out["logicalType"] = t.logical
        if t.logical == "decimal":
            out["precision"] = t.precision
            out["scale"] = t.scale
    return out


def load_schema_json(schema: dict[str, Any] | str | list[Any]) -> Any:
    """Parse a schema given as JSON text (or return the already parsed object), bounded.

    Raises :class:`HoodieSchemaError` for invalid JSON, nesting beyond :data:`MAX_DEPTH` or
    more than :data:`MAX_FIELDS` fields, before any compilation work.
    """
    if isinstance(schema, str | bytes):
        braces = ("{", "[") if isinstance(schema, str) else (b"{", b"[")
        if schema.count(braces[0]) + schema.count(braces[1]) > MAX_JSON_CONTAINERS:
            raise HoodieSchemaError(
                f"Avro schema JSON has more than {MAX_JSON_CONTAINERS} objects and arrays"
            )
        try:
            obj = json.loads(schema)
        except (ValueError, RecursionError) as e:
            raise HoodieSchemaError(f"invalid Avro schema JSON: {e}") from None
    else:
        obj = schema
    _check_bounds(obj)
    return obj


def _check_bounds(obj: Any) -> None:
    """Iterative pre-scan: JSON nesting depth and number of record fields."""
    # Each Avro nesting level costs at most 4 JSON containers (record dict, fields list,
    # field dict, union list), so this catches a too-deep schema without recursion.
    max_json_depth = MAX_DEPTH * 4 + 4
    n_fields = 0
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_json_depth:
            raise HoodieSchemaError(f"Avro schema nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            fields = node.get("fields")
            if isinstance(fields, list):
                n_fields += len(fields)
                if n_fields > MAX_FIELDS:
                    raise HoodieSchemaError(f"Avro schema has more than {MAX_FIELDS} fields")
            for v in node.values():
                if isinstance(v, dict | list):
                    stack.append((v, depth + 1))
        elif isinstance(node, list):
            for v in node:
                if isinstance(v, dict | list):
                    stack.append((v, depth + 1))


def parse_avro_schema(schema: dict[str, Any] | str | list[Any]) -> AvroType:
    """Compile an Avro schema (JSON text or parsed JSON) into an :class:`AvroType` tree.

    Named types are resolved (a recursive type is refused), logical types recognised (an
    unknown or invalid logical type falls back to its underlying type, as Avro specifies).
    Raises :class:`HoodieSchemaError` naming the offending field.
    """
    return _Compiler().compile(load_schema_json(schema))


class _Compiler:
    def __init__(self) -> None:
        self.named: dict[str, AvroType] = {}
        self.in_progress: set[str] = set()
        self.n_fields = 0

    def compile(self, obj: Any) -> AvroType:
        return self._type(obj, None, 1, "<root>")

    def _fail(self, where: str, msg: str) -> HoodieSchemaError:
        return HoodieSchemaError(f"Avro schema, field {where!r}: {msg}")

    def _fullname(self, name: Any, namespace: Any, enclosing: str | None, where: str) -> str:
        if not isinstance(name, str) or not name:
            raise self._fail(where, f"named type without a valid name: {name!r}")
        if "." in name:
            full = name
        else:
            ns = namespace if isinstance(namespace, str) and namespace else enclosing
            full = f"{ns}.{name}" if ns else name
        for part in full.split("."):
            if not _NAME_RE.match(part):
                raise self._fail(where, f"invalid Avro name {full!r}")
        return full

    def _lookup(self, name: str, enclosing: str | None, where: str) -> AvroType:
        candidates = [name] if "." in name else ([f"{enclosing}.{name}"] if enclosing else [])
        candidates.append(name)
        for c in candidates:
            if c in self.in_progress:
                raise self._fail(where, f"recursive type {c!r} is not supported")
            if c in self.named:
                return self.named[c]
        raise self._fail(where, f"unknown type {name!r}")

    def _type(self, obj: Any, enclosing: str | None, depth: int, where: str) -> AvroType:
        if depth > MAX_DEPTH:
            raise HoodieSchemaError(f"Avro schema nested deeper than {MAX_DEPTH} levels")
        if isinstance(obj, str):
            if obj in _PRIMITIVES:
                return _primitive(obj)
            return self._lookup(obj, enclosing, where)
        if isinstance(obj, list):
            return self._union(obj, enclosing, depth, where)
        if not isinstance(obj, dict):
            raise self._fail(where, f"not a valid Avro type: {obj!r}")
        kind = obj.get("type")
        if isinstance(kind, dict | list):
            # {"type": {...}} wraps a type definition; logical annotations apply to the inner one
            return self._type(kind, enclosing, depth + 1, where)
        if not isinstance(kind, str):
            raise self._fail(where, f"type without a 'type' attribute: {obj!r}")
        if kind in _PRIMITIVES:
            t = _primitive(kind)
            logical = obj.get("logicalType")
            if logical is not None:
                t = _with_logical(t, obj, where)
            return t
        if kind in ("record", "error"):
            return self._record(obj, enclosing, depth, where)
        if kind == "enum":
            full = self._fullname(obj.get("name"), obj.get("namespace"), enclosing, where)
            symbols = obj.get("symbols")
            if (
                not isinstance(symbols, list)
                or not all(isinstance(s, str) and _NAME_RE.match(s) for s in symbols)
                or len(set(symbols)) != len(symbols)
            ):
                raise self._fail(where, f"enum {full!r} has invalid symbols")
            t = AvroType("enum", name=full, symbols=tuple(symbols), min_size=1)
            self._register(full, t, where)
            return t
        if kind == "fixed":
            full = self._fullname(obj.get("name"), obj.get("namespace"), enclosing, where)
            size = obj.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0 or size > 1 << 20:
                raise self._fail(where, f"fixed {full!r} has an invalid size {size!r}")
            t = AvroType("fixed", name=full, size=size, min_size=size)
            if obj.get("logicalType") is not None:
                t = _with_logical(t, obj, where)
            self._register(full, t, where)
            return t
        if kind == "array":
            items = self._type(obj.get("items"), enclosing, depth + 1, where + "[]")
            return AvroType("array", items=items, min_size=1)
        if kind == "map":
            values = self._type(obj.get("values"), enclosing, depth + 1, where + "{}")
            return AvroType("map", values=values, min_size=1)
        # a reference written as {"type": "SomeName"}
        return self._lookup(kind, enclosing, where)

    def _register(self, full: str, t: AvroType, where: str) -> None:
        if full in self.named or full in _PRIMITIVES:
            raise self._fail(where, f"named type {full!r} defined twice")
        self.named[full] = t

    def _record(
        self, obj: dict[str, Any], enclosing: str | None, depth: int, where: str
    ) -> AvroType:
        full = self._fullname(obj.get("name"), obj.get("namespace"), enclosing, where)
        fields = obj.get("fields")
        if not isinstance(fields, list):
            raise self._fail(where, f"record {full!r} has no field list")
        ns = full.rsplit(".", 1)[0] if "." in full else None
        t = AvroType("record", name=full)
        self.in_progress.add(full)
        seen: set[str] = set()
        out_fields: list[AvroField] = []
        for f in fields:
            if not isinstance(f, dict):
                raise self._fail(where, f"record {full!r} has a malformed field {f!r}")
            fname = f.get("name")
            fwhere = str(fname) if where == "<root>" else f"{where}.{fname}"
            if not isinstance(fname, str) or not _NAME_RE.match(fname):
                raise self._fail(fwhere, f"invalid field name {fname!r}")
            if fname in seen:
                raise self._fail(fwhere, "duplicate field name")
            seen.add(fname)
            self.n_fields += 1
            if self.n_fields > MAX_FIELDS:
                raise HoodieSchemaError(f"Avro schema has more than {MAX_FIELDS} fields")
            ftype = self._type(f.get("type"), ns, depth + 1, fwhere)
            out_fields.append(AvroField(fname, ftype, "default" in f, f.get("default")))
        self.in_progress.discard(full)
        t.fields = out_fields
        t.min_size = sum(f.type.min_size for f in out_fields)
        self._register(full, t, where)
        return t

    def _union(self, obj: list[Any], enclosing: str | None, depth: int, where: str) -> AvroType:
        if not obj:
            raise self._fail(where, "empty union")
        branches = [self._type(b, enclosing, depth + 1, where) for b in obj]
        if any(b.kind == "union" for b in branches):
            raise self._fail(where, "a union may not directly contain a union")
        null_index = next((i for i, b in enumerate(branches) if b.kind == "null"), -1)
        return AvroType("union", branches=branches, null_index=null_index, min_size=1)


def _primitive(kind: str) -> AvroType:
    size = {"null": 0, "boolean": 1, "float": 4, "double": 8}.get(kind, 1)
    return AvroType(kind, min_size=size)


def _with_logical(t: AvroType, obj: dict[str, Any], where: str) -> AvroType:
    logical = obj.get("logicalType")
    kind = t.kind
    if logical == "decimal" and kind in ("bytes", "fixed"):
        p, s = obj.get("precision"), obj.get("scale", 0)
        valid = (
            isinstance(p, int)
            and isinstance(s, int)
            and not isinstance(p, bool)
            and not isinstance(s, bool)
            and 0 < p <= 76
            and 0 <= s <= p
        )
        if kind == "fixed" and valid:
            valid = decimal_fixed_size(int(p)) <= t.size  # type: ignore[arg-type]
        if not valid or not isinstance(p, int) or not isinstance(s, int):
            raise HoodieSchemaError(
                f"Avro schema, field {where!r}: invalid decimal precision/scale {p!r}/{s!r}"
                + (f" for fixed size {t.size}" if kind == "fixed" else "")
            )
        t.logical, t.precision, t.scale = "decimal", int(p), int(s)
    elif (
        (logical == "date" and kind == "int")
        or (logical == "time-millis" and kind == "int")
        or (logical == "uuid" and kind == "string")
        or (
            kind == "long"
            and logical
            in (
                "time-micros",
                "timestamp-millis",
                "timestamp-micros",
                "timestamp-nanos",
                "local-timestamp-millis",
                "local-timestamp-micros",
                "local-timestamp-nanos",
            )
        )
    ):
        t.logical = logical
    # Any other logical type is ignored: Avro readers fall back to the underlying type.
    return t


# ---------------------------------------------------------------------------------------------
# Avro -> Arrow
# ---------------------------------------------------------------------------------------------


def avro_type_to_arrow(t: AvroType, where: str = "<root>") -> tuple[pa.DataType, bool]:
    """Arrow type and nullability of a compiled Avro type (unions with null are nullable)."""
    if t.kind == "union":
        non_null = [b for b in t.branches if b.kind != "null"]
        if not non_null:
            return pa.null(), True
        if len(non_null) > 1:
            raise HoodieSchemaError(
                f"Avro schema, field {where!r}: unions of several non-null types are not supported"
            )
        return avro_type_to_arrow(non_null[0], where)[0], t.null_index >= 0
    return _arrow_of(t, where), t.kind == "null"


def _arrow_of(t: AvroType, where: str) -> pa.DataType:
    k, lg = t.kind, t.logical
    if lg == "decimal":
        return (
            pa.decimal128(t.precision, t.scale)
            if t.precision <= 38
            else pa.decimal256(t.precision, t.scale)
        )
    if lg == "date":
        return pa.date32()
    if lg == "time-millis":
        return pa.time32("ms")
    if lg == "time-micros":
        return pa.time64("us")
    if lg is not None and lg.startswith(("timestamp-", "local-timestamp-")):
        unit = {"millis": "ms", "micros": "us", "nanos": "ns"}[lg.rsplit("-", 1)[1]]
        return pa.timestamp(unit, tz="UTC" if lg.startswith("timestamp-") else None)
    simple = {
        "null": pa.null(),
        "boolean": pa.bool_(),
        "int": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "bytes": pa.binary(),
        "string": pa.string(),
        "enum": pa.string(),
    }
    if k in simple:
        return simple[k]
    if k == "fixed":
        return pa.binary(t.size)
    if k == "record":
        return pa.struct(
            [pa.field(f.name, *avro_type_to_arrow(f.type, f"{where}.{f.name}")) for f in t.fields]
        )
    if k == "array":
        assert t.items is not None
        it, nullable = avro_type_to_arrow(t.items, where + "[]")
        return pa.list_(pa.field("element", it, nullable))
    if k == "map":
        assert t.values is not None
        vt, nullable = avro_type_to_arrow(t.values, where + "{}")
        return pa.map_(pa.string(), pa.field("value", vt, nullable))
    if k == "union":
        return avro_type_to_arrow(t, where)[0]
    raise HoodieSchemaError(f"Avro schema, field {where!r}: unsupported type {k!r}")


def avro_to_arrow_schema(avro: dict[str, Any] | str | AvroType) -> pa.Schema:
    """The Arrow schema of records written with Avro record schema ``avro``.

    Accepts JSON text, parsed JSON or a compiled :class:`AvroType`. Unions ``["null", T]`` and
    ``[T, "null"]`` become nullable columns; decimals (fixed or bytes) become decimal128 (or
    decimal256 beyond precision 38); enums become strings; ``timestamp-*`` become
    ``timestamp[unit, tz=UTC]``. Raises :class:`HoodieSchemaError` naming the field for
    unsupported unions or a non-record top-level schema.
    """
    t = avro if isinstance(avro, AvroType) else parse_avro_schema(avro)
    if t.kind != "record":
        raise HoodieSchemaError(f"Avro schema must be a record at the top level, got {t.kind!r}")
    return pa.schema([pa.field(f.name, *avro_type_to_arrow(f.type, f.name)) for f in t.fields])


# ---------------------------------------------------------------------------------------------
# Arrow -> Avro
# ---------------------------------------------------------------------------------------------


def decimal_fixed_size(precision: int) -> int:
    """Smallest byte count whose two's complement holds every ``precision``-digit unscaled value.

    The rule of Spark's and Hudi's schema converters: the smallest ``n`` with
    ``2**(8n - 1) >= 10**precision``.
    """
    n = 1
    limit = 10**precision
    while (1 << (8 * n - 1)) < limit:
        n += 1
    return n


def meta_avro_fields(with_operation: bool = False) -> list[dict[str, Any]]:
    """The five meta fields as Avro field JSON: ``["null","string"]``, doc "", default null;
    ``with_operation``: and ``_hoodie_operation`` sixth, as Java's
    ``HoodieAvroUtils.addMetadataFields(schema, withOperationField=true)`` places it."""
    names = [*META_FIELDS, OPERATION] if with_operation else META_FIELDS
    return [
        {"name": name, "type": ["null", "string"], "doc": "", "default": None} for name in names
    ]


def meta_arrow_fields() -> list[pa.Field]:
    """The five meta fields as nullable Arrow string fields."""
    return [pa.field(name, pa.string(), nullable=True) for name in META_FIELDS]


def add_meta_fields_avro(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of Avro record ``schema`` with the meta fields first (existing ones replaced)."""
    obj = dict(load_schema_json(schema))
    fields = [f for f in obj.get("fields", []) if f.get("name") not in META_FIELDS]
    obj["fields"] = meta_avro_fields() + fields
    return obj


def add_meta_fields_arrow(schema: pa.Schema) -> pa.Schema:
    """A copy of ``schema`` with the five meta string fields first (existing ones replaced)."""
    rest = [f for f in schema if f.name not in META_FIELDS]
    return pa.schema(meta_arrow_fields() + rest, metadata=schema.metadata)


def strip_meta_fields_arrow(schema: pa.Schema) -> pa.Schema:
    """A copy of ``schema`` without the meta fields."""
    return pa.schema([f for f in schema if f.name not in META_FIELDS], metadata=schema.metadata)


def avro_record_name(table_name: str) -> tuple[str, str]:
    """``(record name, namespace)`` of a table's Avro schema: ``<t>_record``, ``hoodie.<t>``.

    Like Java's ``HoodieAvroUtils.sanitizeName``, characters an Avro name cannot hold become
    ``_`` (``my-table`` -> ``my_table_record``), and a leading digit gets a ``_`` prefix.
    """
    if not isinstance(table_name, str) or not table_name:
        raise HoodieSchemaError(f"table name {table_name!r} must be a non-empty string")
    name = re.sub(r"[^A-Za-z0-9_]", "_", table_name)
    if not re.match(r"[A-Za-z_]", name[0]):
        name = "_" + name
    return f"{name}_record", f"hoodie.{name}"


def arrow_to_avro_schema(
    schema: pa.Schema, table_name: str, with_meta: bool = True, with_operation: bool = False
) -> dict[str, Any]:
    """The Avro record schema (parsed JSON) of Arrow ``schema`` for table ``table_name``.

    With ``with_meta`` the five meta fields come first (meta fields already in ``schema`` are
    moved there); ``with_operation`` (changelog mode) puts ``_hoodie_operation`` after them,
    or first without them (a table schema that names it, see :mod:`hoodie_ray.write.records`). Raises :class:`HoodieSchemaError` naming the field for a type Avro cannot
    hold, a map with non-string keys, an invalid or duplicate field name.
    """
    if len(schema) > MAX_FIELDS:
        raise HoodieSchemaError(f"schema has more than {MAX_FIELDS} fields")
    name, namespace = avro_record_name(table_name)
    fields: list[pa.Field] = list(schema)
    out: list[dict[str, Any]] = []
    if with_meta:
        for f in fields:
            if f.name in META_FIELDS and not _is_string_type(f.type):
                raise HoodieSchemaError(f"meta field {f.name!r} must be a string, got {f.type}")
        fields = [f for f in fields if f.name not in META_FIELDS and f.name != OPERATION]
        out.extend(meta_avro_fields(with_operation))
    elif with_operation:
        fields = [f for f in fields if f.name != OPERATION]
        out.extend(meta_avro_fields(True)[len(META_FIELDS) :])
    full = f"{namespace}.{name}"
    counter = [len(out)]
    out.extend(_fields_json(fields, full, 1, "", counter))
    return {"type": "record", "name": name, "namespace": namespace, "fields": out}


def _is_string_type(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or t == pa.string_view())


def _fields_json(
    fields: list[pa.Field], record_full: str, depth: int, prefix: str, counter: list[int]
) -> list[dict[str, Any]]:
    if depth > MAX_DEPTH:
        raise HoodieSchemaError(f"schema nested deeper than {MAX_DEPTH} levels")
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for f in fields:
        where = prefix + f.name
        if not _NAME_RE.match(f.name):
            raise HoodieSchemaError(
                f"field {where!r}: not a valid Avro name "
                "(letters, digits and underscores, not starting with a digit)"
            )
        if f.name in seen:
            raise HoodieSchemaError(f"field {where!r}: duplicate field name")
        seen.add(f.name)
        counter[0] += 1
        if counter[0] > MAX_FIELDS:
            raise HoodieSchemaError(f"schema has more than {MAX_FIELDS} fields")
        t = _type_json(f.type, f.name, record_full, depth + 1, where, counter)
        if f.name in META_FIELDS and _is_string_type(f.type) and not prefix:
            out.append({"name": f.name, "type": ["null", "string"], "doc": "", "default": None})
        elif f.nullable and t != "null":
            out.append({"name": f.name, "type": ["null", t], "default": None})
        else:
            out.append({"name": f.name, "type": t})
    return out


def _type_json(
    t: pa.DataType, field_name: str, namespace: str, depth: int, where: str, counter: list[int]
) -> Any:
    """Avro JSON of Arrow type ``t`` of field ``field_name`` inside record ``namespace``."""
    if depth > MAX_DEPTH:
        raise HoodieSchemaError(f"schema nested deeper than {MAX_DEPTH} levels")
    if pa.types.is_dictionary(t):
        return _type_json(t.value_type, field_name, namespace, depth, where, counter)
    primitive = _primitive_json(t)
    if primitive is not None:
        return primitive
    if pa.types.is_decimal(t) and t.bit_width in (128, 256):
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{field_name}",
            "size": decimal_fixed_size(t.precision),
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if pa.types.is_struct(t):
        full = f"{namespace}.{field_name}"
        return {
            "type": "record",
            "name": field_name,
            "namespace": namespace,
            "fields": _fields_json(list(t), full, depth, where + ".", counter),
        }
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        items = _element_json(t.value_field, field_name, namespace, depth, where + "[]", counter)
        return {"type": "array", "items": items}
    if pa.types.is_map(t):
        if not _is_string_type(t.key_type):
            raise HoodieSchemaError(
                f"field {where!r}: Avro maps need string keys, got {t.key_type}"
            )
        values = _element_json(t.item_field, field_name, namespace, depth, where + "{}", counter)
        return {"type": "map", "values": values}
    hint = ""
    if isinstance(t, pa.ExtensionType):
        # pandas periods and intervals, Ray's tensors: their storage type is what Avro can hold
        hint = f" (an extension type: cast the column to its storage type {t.storage_type} or "
        hint += "to a plain type first)"
    raise HoodieSchemaError(f"field {where!r}: Arrow type {t} has no Avro mapping{hint}")


def _primitive_json(t: pa.DataType) -> str | dict[str, str] | None:
    """Avro JSON of a primitive Arrow type (logical types included but decimals), else None."""
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "boolean"
    if t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        return "int"
    if t in (pa.int64(), pa.uint32()):
        return "long"
    if t == pa.float32():
        return "float"
    if t == pa.float64():
        return "double"
    if _is_string_type(t):
        return "string"
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or t == pa.binary_view()
    ):
        return "bytes"
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        logical = "timestamp-millis" if t.unit == "ms" else "timestamp-micros"
        return {"type": "long", "logicalType": logical}
    if pa.types.is_time32(t):
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_time64(t):
        return {"type": "long", "logicalType": "time-micros"}
    return None


def _element_json(
    vf: pa.Field, field_name: str, namespace: str, depth: int, where: str, counter: list[int]
) -> Any:
    """Avro JSON of an array's items or a map's values: a union with null when nullable."""
    inner = _type_json(vf.type, field_name, namespace, depth + 1, where, counter)
    return ["null", inner] if vf.nullable and inner != "null" else inner


def schema_to_json(schema: dict[str, Any]) -> str:
    """Compact JSON text of a schema, as Java writes it into SCHEMA headers and commits."""
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
