"""Key generators: record keys and partition paths exactly as Java's, computed column-wise.

* ``SIMPLE``: key = ``String.valueOf(field)``; partition = one field.
* ``COMPLEX``: key = ``f1:v1,f2:v2`` (null -> ``__null__``, empty -> ``__empty__``);
  partition = fields joined by ``/``.
* ``NON_PARTITION``: partition ``""``; key as SIMPLE (one field) or COMPLEX (several).
* ``TIMESTAMP``: partition = the field's time value formatted with an output date format.

Partition values: null or empty -> ``__HIVE_DEFAULT_PARTITION__``; hive style -> ``field=value``;
URL encoding escapes the characters Hive escapes. Without URL encoding, a value that would make an
unsafe path (``/``, ``\\``, ``=``, control characters, ``.`` or ``..``) is refused; ``..`` is refused
always (Java does the same), because URL encoding does not escape ``.``. Without hive style, a
value starting with ``.`` is refused too: it would name a hidden directory (readers skip it) or
``.hoodie`` itself. See docs/SECURITY.md.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.codes import encode_strings, string_offsets
from hoodie_ray.exceptions import HoodieInputError, HoodieOptionError, HoodieSchemaError

DEFAULT_PARTITION_PATH = "__HIVE_DEFAULT_PARTITION__"
NULL_RECORDKEY_PLACEHOLDER = "__null__"
EMPTY_RECORDKEY_PLACEHOLDER = "__empty__"

# Hive's FileUtils.escapePathName set (what Hudi's PartitionPathEncodeUtils escapes).
_ESCAPED_CHARS = [chr(c) for c in range(0, 0x20)] + list("\"#'*/:=?\\\x7f{[]^")
_UNSAFE_RAW = re.compile(r"[/\\=\x00-\x1f\x7f]")


def _field_type(schema: pa.Schema, name: str) -> pa.DataType:
    idx = schema.get_field_index(name)
    if idx < 0:
        raise HoodieSchemaError(f"Field {name} does not exist in the input schema")
    return schema.field(idx).type


def _java_double_str(v: float, is_float32: bool) -> str:
    """Java's ``Double.toString`` / ``Float.toString`` of one value (shortest round-trip digits)."""
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0.0:
        return "-0.0" if np.signbit(v) else "0.0"
    x = np.float32(v) if is_float32 else np.float64(v)
    if 1e-3 <= abs(v) < 1e7:
        s = np.format_float_positional(x, unique=True, trim="-")
        return s if "." in s else s + ".0"
    mant, exp = np.format_float_scientific(x, unique=True, trim="-").split("e")
    return f"{mant if '.' in mant else mant + '.0'}E{int(exp)}"


def stringify_column(arr: pa.ChunkedArray | pa.Array, name: str) -> pa.Array:
    """The column as Java's ``String.valueOf`` of its Avro value would print it (nulls kept)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return arr.cast(pa.string())
    if pa.types.is_dictionary(t):
        return stringify_column(arr.cast(t.value_type), name)
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return arr.cast(pa.string())
    if pa.types.is_floating(t):
        is32 = pa.types.is_float32(t) or pa.types.is_float16(t)
        enc = pc.dictionary_encode(arr)
        uniq = enc.dictionary.to_numpy(zero_copy_only=False)
        strs = pa.array([_java_double_str(float(u), is32) for u in uniq], pa.string())
        return pc.take(strs, enc.indices)
    if pa.types.is_date(t):
        return arr.cast(pa.date32()).cast(pa.string())
    if pa.types.is_timestamp(t):
        # Avro timestamp-micros: Java prints the long value.
        return arr.cast(pa.timestamp("us", tz=t.tz)).cast(pa.int64()).cast(pa.string())
    if pa.types.is_decimal(t):
        return arr.cast(pa.string())
    raise HoodieSchemaError(f"field {name} of type {t} cannot be a record key or partition field")


def _none_null_or_empty(keys: pa.Array) -> bool:
    """No key is null or empty, seen from a string array's offsets (no compute pass)."""
    if keys.null_count or not pa.types.is_string(keys.type):
        return False
    offs = string_offsets(keys)
    return not bool((offs[1:] == offs[:-1]).any())


def _escape_path_values(values: pa.Array) -> pa.Array:
    if (
        pc.any(pc.match_substring_regex(values, r"[\x00-\x1f\"#%'*/:=?\\\x7f{\[\]^]")).as_py()
        is not True
    ):
        return values
    out = pc.replace_substring(values, "%", "%25")
    for ch in _ESCAPED_CHARS:
        out = pc.replace_substring(out, ch, f"%{ord(ch):02X}")
    return out


@dataclass(frozen=True)
class TimestampFormat:
    """TimestampBasedKeyGenerator settings."""

    output_format: str
    timestamp_type: str | None = None  # None: from the Arrow type
    input_format: str | None = None  # one or several Java patterns, comma-separated
    # the output's; None as Java's null output zone: a DATE_STRING value prints in the zone
    # it was read in (input_timezone, else its own offset, else UTC), any other value in UTC
    timezone: str | None = None
    scalar_unit: str = "DAYS"
    input_timezone: str | None = None  # of DATE_STRING values without an offset (None: UTC)


_JAVA_TOKENS = [
    ("yyyy", "%Y"),
    ("yy", "%y"),
    ("MM", "%m"),
    ("dd", "%d"),
    ("HH", "%H"),
    ("mm", "%M"),
    ("ss", "%S"),
    ("SSS", "%3f"),
]


def java_date_format_to_strftime(fmt: str) -> str:
    """Translate a Java ``SimpleDateFormat`` pattern (common tokens) to ``strftime``."""
    out, i = [], 0
    while i < len(fmt):
        if fmt[i] == "'":
            j = fmt.find("'", i + 1)
            if j < 0:
                raise HoodieOptionError(f"unterminated quote in date format {fmt!r}")
            out.append(fmt[i + 1 : j].replace("%", "%%") or "'")
            i = j + 1
            continue
        for tok, rep in _JAVA_TOKENS:
            if fmt.startswith(tok, i):
                out.append(rep)
                i += len(tok)
                break
        else:
            if fmt[i].isalpha():
                raise HoodieOptionError(f"date format token {fmt[i]!r} in {fmt!r} is not supported")
            out.append("%%" if fmt[i] == "%" else fmt[i])
            i += 1
    return "".join(out)


_SCALAR_UNIT_US = {
    "DAYS": 86400 * 10**6,
    "HOURS": 3600 * 10**6,
    "MINUTES": 60 * 10**6,
    "SECONDS": 10**6,
    "MILLISECONDS": 1000,
    "MICROSECONDS": 1,
}


def _parse_java_dates(
    values: pa.Array, java_formats: str, name: str, timezone: str | None = None
) -> tuple[pa.Array, pa.Array]:
    """Parse strings with Java date patterns into epoch micros, column-wise: each value by the
    first of the comma-separated patterns it matches (Java's list of input formats). A value
    without an offset is a wall-clock time in ``timezone`` (UTC by default), as Java's
    ``hoodie.keygen.timebased.timezone`` / ``input.timezone`` read it.

    Returns the micros and, beside them, the offset in micros each value carried (null where
    it carried none): Java prints a value in that offset when no zone is configured."""
    formats = [f.strip() for f in java_formats.split(",") if f.strip()]
    out = pa.nulls(len(values), pa.int64())
    offsets = pa.nulls(len(values), pa.int64())
    for fmt in formats:
        parsed, offset = _parse_java_date(values, fmt, timezone, name)
        taken = pc.and_(pc.is_null(out), pc.is_valid(parsed))
        out = pc.coalesce(out, parsed)
        if offset is not None:
            offsets = pc.if_else(taken, offset, offsets)
    missed = pc.and_(pc.is_valid(values), pc.is_null(out))
    if pc.any(missed).as_py():
        bad = values.filter(missed)[0].as_py()
        raise HoodieInputError(
            f"field {name}: value {bad!r} does not match the input date format "
            f"{java_formats!r} (hoodie.keygen.timebased.input.dateformat)"
        )
    return out, offsets


def _parse_java_date(
    values: pa.Array, java_format: str, timezone: str | None, name: str = "?"
) -> tuple[pa.Array, pa.Array | None]:
    """Epoch micros of the values that match one Java date pattern (null where not), and the
    offsets in micros they carried where the pattern has one (else None).

    Arrow's ``strptime`` has no fractional seconds, so ``.SSS`` is cut out of the values and
    added back; ``Z``/``X`` (an offset, or a literal ``Z`` for UTC) parse as ``%z``.
    """
    fmt = java_format
    has_fraction = ".SSS" in fmt
    fmt = fmt.replace(".SSS", "")
    has_zone = fmt.endswith("Z") or fmt.endswith("X") or fmt.endswith("XXX")
    if has_zone:
        fmt = fmt.rstrip("ZX")
    strf = java_date_format_to_strftime(fmt) + ("%z" if has_zone else "")
    body = values
    frac_us = None
    if has_fraction:
        frac = pc.extract_regex(values, r"\.(?P<f>[0-9]{1,6})")
        digits = pc.struct_field(frac, "f")
        padded = pc.utf8_rpad(digits, 6, "0")
        frac_us = pc.fill_null(pc.cast(padded, pa.int64(), safe=False), 0)
        body = pc.replace_substring_regex(values, r"\.[0-9]+", "", max_replacements=1)
    if has_zone:
        body = pc.replace_substring_regex(body, "Z$", "+0000")
        body = pc.replace_substring_regex(body, r"([+-][0-9]{2}):([0-9]{2})$", r"\1\2")
    parsed = pc.strptime(body, format=strf, unit="us", error_is_null=True)
    if not has_zone and timezone and timezone.upper() not in ("UTC", "GMT"):
        local = parsed
        parsed = pc.assume_timezone(
            local, timezone=timezone, ambiguous="earliest", nonexistent="earliest"
        )
        # A wall-clock time the zone skips (a DST gap) is no instant: Joda's parser throws
        # (IllegalInstantException), so Java's write fails; the two readings differ there only
        later = pc.assume_timezone(
            local, timezone=timezone, ambiguous="earliest", nonexistent="latest"
        )
        gap = pc.not_equal(parsed, later)
        if pc.any(gap).as_py():
            bad = values.filter(gap)[0].as_py()
            raise HoodieInputError(
                f"field {name}: value {bad!r} is a time that does not exist in {timezone} "
                "(a daylight-saving gap; hoodie.keygen.timebased.input.timezone)"
            )
    micros = parsed.cast(pa.int64())
    if frac_us is not None:
        micros = pc.add(micros, frac_us)
    return micros, (_offset_micros(body, micros) if has_zone else None)


def _offset_micros(body: pa.Array, micros: pa.Array) -> pa.Array:
    """The ``+HHMM`` / ``-HHMM`` each parsed value ends with, in micros (null where unparsed)."""
    parts = pc.extract_regex(body, r"(?P<sign>[+-])(?P<h>[0-9]{2})(?P<m>[0-9]{2})$")
    hours = pc.cast(pc.struct_field(parts, "h"), pa.int64())
    minutes = pc.cast(pc.struct_field(parts, "m"), pa.int64())
    size = pc.multiply(pc.add(pc.multiply(hours, 60), minutes), 60 * 10**6)
    negative = pc.equal(pc.struct_field(parts, "sign"), "-")
    signed = pc.if_else(negative, pc.negate(size), size)
    return pc.if_else(pc.is_valid(micros), signed, pa.scalar(None, pa.int64()))


def _format_timestamps(arr: pa.Array, name: str, ts: TimestampFormat) -> pa.Array:
    t = arr.type
    kind = ts.timestamp_type
    zone = ts.timezone  # None: UTC, Java's JVM default zone here
    if pa.types.is_timestamp(t):
        micros = arr.cast(pa.timestamp("us", tz=t.tz)).cast(pa.int64())
    elif pa.types.is_date(t):
        micros = pc.multiply(arr.cast(pa.date32()).cast(pa.int32()).cast(pa.int64()), 86400 * 10**6)
    elif pa.types.is_integer(t):
        unit = {
            "UNIX_TIMESTAMP": 10**6,
            "EPOCHMILLISECONDS": 1000,
            "EPOCHMICROSECONDS": 1,
            "SCALAR": _SCALAR_UNIT_US[ts.scalar_unit],
        }.get(kind or "EPOCHMILLISECONDS")
        if unit is None:
            raise HoodieOptionError(f"timestamp type {kind} does not apply to integer field {name}")
        micros = pc.multiply(arr.cast(pa.int64()), unit)
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        if not ts.input_format:
            raise HoodieOptionError(
                f"option hoodie.keygen.timebased.input.dateformat is required for string field {name}"
            )
        micros, offsets = _parse_java_dates(
            arr.cast(pa.string()), ts.input_format, name, ts.input_timezone
        )
        # Java prints a string in the zone it was read in where no output zone is set
        zone = ts.timezone or ts.input_timezone
        if zone is None:  # the offset it carried, else UTC: its wall clock there
            micros = pc.add(micros, pc.fill_null(offsets, 0))
    else:
        raise HoodieSchemaError(f"field {name} of type {t} cannot be a timestamp partition field")
    stamps = micros.cast(pa.timestamp("us", tz=zone or "UTC"))
    return pc.strftime(stamps, format=java_date_format_to_strftime(ts.output_format))


@dataclass(frozen=True)
class KeyGenerator:
    """Computes ``_hoodie_record_key`` and ``_hoodie_partition_path`` for a batch."""

    keygen_type: str  # SIMPLE | COMPLEX | NON_PARTITION | TIMESTAMP
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    hive_style: bool = False
    url_encode: bool = False
    timestamp: TimestampFormat | None = None

    def __post_init__(self) -> None:
        if not self.record_key_fields:
            raise HoodieOptionError(
                "option hoodie.datasource.write.recordkey.field is required (no record key field)"
            )
        if self.keygen_type == "TIMESTAMP" and self.timestamp is None:
            raise HoodieOptionError(
                "TimestampBasedKeyGenerator needs hoodie.keygen.timebased.output.dateformat "
                "(or write.partition.format)"
            )

    # -- validation ----------------------------------------------------------------------------
    def validate_schema(self, schema: pa.Schema) -> None:
        """Every key and partition field exists and has a supported type."""
        for name in (*self.record_key_fields, *self.partition_fields):
            t = _field_type(schema, name)
            if pa.types.is_nested(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
                raise HoodieSchemaError(
                    f"field {name} of type {t} cannot be a key or partition field"
                )

    # -- record keys ---------------------------------------------------------------------------
    @property
    def complex_key(self) -> bool:
        """Whether keys are ``f1:v1,f2:v2`` (a null field ``__null__``), not the one field's
        value."""
        return self.keygen_type == "COMPLEX" or len(self.record_key_fields) > 1

    def record_keys(self, table: pa.Table) -> pa.Array:
        """The record key of every row; a null or empty key is a :class:`HoodieInputError`."""
        if not self.complex_key:
            name = self.record_key_fields[0]
            _field_type(table.schema, name)
            keys = stringify_column(table.column(name), name)
            if _none_null_or_empty(keys):
                return keys
            bad = pc.or_kleene(pc.is_null(keys), pc.equal(pc.utf8_length(keys), 0))
            nbad = pc.sum(bad.cast(pa.int64())).as_py() or 0
            if nbad:
                first = pc.index(bad, True).as_py()
                raise HoodieInputError(
                    f"record key field {name} is null or empty in {nbad} row(s) (first at row {first})"
                )
            return keys
        parts = []
        all_missing = None
        for name in self.record_key_fields:
            _field_type(table.schema, name)
            vals = stringify_column(table.column(name), name)
            is_null = pc.is_null(vals)
            is_empty = pc.fill_null(pc.equal(pc.utf8_length(vals), 0), False)
            missing = pc.or_(is_null, is_empty)
            all_missing = missing if all_missing is None else pc.and_(all_missing, missing)
            shown = pc.if_else(
                is_null,
                NULL_RECORDKEY_PLACEHOLDER,
                pc.if_else(is_empty, EMPTY_RECORDKEY_PLACEHOLDER, vals),
            )
            parts.append(pc.binary_join_element_wise(f"{name}:", shown, ""))
        assert all_missing is not None
        nbad = pc.sum(all_missing.cast(pa.int64())).as_py() or 0
        if nbad:
            raise HoodieInputError(
                f"record key fields {','.join(self.record_key_fields)} are all null or empty "
                f"in {nbad} row(s)"
            )
        return pc.binary_join_element_wise(*parts, ",")

    # -- partition paths -----------------------------------------------------------------------
    def partition_paths(self, table: pa.Table) -> pa.Array:
        """The partition path of every row (``""`` for non-partitioned tables)."""
        n = table.num_rows
        if self.keygen_type == "NON_PARTITION" or not self.partition_fields:
            return pa.repeat(pa.scalar("", pa.string()), n)
        segments = []
        for name in self.partition_fields:
            _field_type(table.schema, name)
            col = table.column(name).combine_chunks()
            if self.keygen_type == "TIMESTAMP":
                assert self.timestamp is not None
                vals = _format_timestamps(col, name, self.timestamp)
            else:
                vals = stringify_column(col, name)
            # A partition field has few values: each distinct value is made a path segment
            # once (the checks and escapes are several passes each), then spread to the rows.
            enc = encode_strings(vals)
            values = enc.dictionary
            indices = enc.indices
            if indices.null_count:
                # a null value takes the default partition, as an empty one does
                indices = pc.fill_null(indices, len(values))
                values = pa.concat_arrays([values, pa.array([""], pa.string())])
            segments.append(self._segments(values, name).take(indices))
        if len(segments) == 1:
            return segments[0]
        return pc.binary_join_element_wise(*segments, "/")

    def _segments(self, vals: pa.Array, name: str) -> pa.Array:
        """The path segment of each of partition field ``name``'s values (strings, no nulls).

        Raises:
            HoodieInputError: a value no safe directory name can stand for.
        """
        empty = pc.equal(pc.utf8_length(vals), 0)
        vals = pc.if_else(empty, DEFAULT_PARTITION_PATH, vals)
        vals = _escape_path_values(vals) if self.url_encode else vals
        # Formatted timestamps may hold '/' by design (the output format); values may not.
        self._check_safe(vals, name, formatted=self.keygen_type == "TIMESTAMP")
        if self.hive_style:
            vals = pc.binary_join_element_wise(f"{name}=", vals, "")
        return vals

    def _check_safe(self, vals: pa.Array, name: str, formatted: bool = False) -> None:
        traversal = pc.or_(pc.equal(vals, ".."), pc.equal(vals, "."))
        if formatted:
            traversal = pc.or_(traversal, pc.match_substring_regex(vals, r"(^|/)\.\.?(/|$)"))
        if not self.hive_style:
            # The value is a directory name: one starting with '.' is hidden (readers skip it)
            # or reserved (``.hoodie``, the table's metadata folder).
            hidden = r"(^|/)\." if formatted else r"^\."
            traversal = pc.or_(traversal, pc.match_substring_regex(vals, hidden))
        unsafe = (
            traversal
            if self.url_encode or formatted
            else pc.or_(traversal, pc.match_substring_regex(vals, _UNSAFE_RAW.pattern))
        )
        if pc.any(unsafe).as_py():
            bad = vals[pc.index(unsafe, True).as_py()].as_py()
            if bad in (".", "..") or (not self.hive_style and bad.startswith(".")):
                why = (
                    "'.' and '..' are never allowed as partition values, and without hive style "
                    "partitioning a value may not start with '.' (a hidden directory; .hoodie is "
                    "the table's metadata folder)"
                )
            else:
                why = (
                    "it is not a safe partition directory name (contains '/', '\\', '=' or a control "
                    "character); set hoodie.datasource.write.partitionpath.urlencode=true to "
                    "encode such values"
                )
            raise HoodieInputError(f"partition field {name} has the value {bad!r}: {why}")

    def partition_values_of(self, partition_path: str) -> dict[str, str]:
        """Split a partition path into field -> raw string value (best effort, for pruning)."""
        if not partition_path:
            return {}
        segs = partition_path.split("/")
        out = {}
        for name, seg in zip(self.partition_fields, segs, strict=False):
            if self.hive_style and seg.startswith(f"{name}="):
                seg = seg[len(name) + 1 :]
            out[name] = seg
        return out

    @property
    def keygen_class(self) -> str:
        from hoodie_ray.config.table_config import KEYGEN_CLASSES

        return KEYGEN_CLASSES[self.keygen_type]


def choose_key_generator(
    schema: pa.Schema,
    record_key_fields: list[str],
    partition_fields: list[str],
    *,
    hive_style: bool = False,
    url_encode: bool = False,
    keygen_type: str | None = None,
    timestamp: TimestampFormat | None = None,
) -> KeyGenerator:
    """Pick the key generator as Hudi's Flink table factory does (see module docstring)."""
    for name in (*record_key_fields, *partition_fields):
        _field_type(schema, name)
    if keygen_type is None:
        if not partition_fields:
            keygen_type = "NON_PARTITION"
        elif len(record_key_fields) > 1 or len(partition_fields) > 1:
            keygen_type = "COMPLEX"
        elif timestamp is not None:
            keygen_type = "TIMESTAMP"
        else:
            keygen_type = "SIMPLE"
    if keygen_type == "SIMPLE" and (len(record_key_fields) > 1 or len(partition_fields) > 1):
        raise HoodieOptionError(
            "SimpleKeyGenerator takes one record key field and one partition field; "
            "use ComplexKeyGenerator"
        )
    if keygen_type == "NON_PARTITION" and partition_fields:
        raise HoodieOptionError("NonpartitionedKeyGenerator with partition fields given")
    if keygen_type == "TIMESTAMP" and len(partition_fields) != 1:
        raise HoodieOptionError("TimestampBasedKeyGenerator needs exactly one partition field")
    kg = KeyGenerator(
        keygen_type,
        tuple(record_key_fields),
        tuple(partition_fields),
        hive_style,
        url_encode,
        timestamp if keygen_type == "TIMESTAMP" else None,
    )
    kg.validate_schema(schema)
    return kg


def now_utc() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)
