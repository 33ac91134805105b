"""Blocks of the HOODIE_LOG format (spec §4): their enums, contents and byte framing.

A log file is a sequence of blocks, each framed as (all integers big-endian)::

    "#HUDI#" | blockLength i64 | version i32 (=1) | type i32 | header | contentLength i64
    | content | footer | reversePointer i64 (= blockLength + 6)

with ``blockLength`` counting the bytes after itself up to and including the reverse pointer,
and header/footer as ``count i32`` then ``(key ordinal i32, length i32, UTF-8 bytes)`` entries.

Block classes hold their header as a ``{HeaderMetadataType: str}`` dict. Blocks read from a file
keep their content bytes and decode them only when asked (``records``, ``record_keys``...), so a
reader that skips a block (rolled back, outside the query's instant range) never decodes it.
:func:`serialize_block` produces the exact on-disk bytes of a block.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import functools
import io
import struct
from collections.abc import Mapping, Sequence
from enum import IntEnum
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_ray.avro import codec
from hoodie_ray.avro.schema import AvroType, avro_to_arrow_schema, parse_avro_schema, schema_to_json
from hoodie_ray.exceptions import (
    HoodieCorruptedDataError,
    HoodieError,
    HoodieInputError,
    HoodieSchemaError,
    HoodieUnsupportedError,
)

#: Every block starts with these six bytes.
MAGIC = b"#HUDI#"
#: The only log format version written (0 is the pre-0.5 legacy layout without type/header).
LOG_FORMAT_VERSION = 1
#: Content version of Avro data blocks and delete blocks (the only one hudi-rs reads).
BLOCK_CONTENT_VERSION = 3


class BlockType(IntEnum):
    """``HoodieLogBlockType``: the block type ordinal written in every block."""

    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderMetadataType(IntEnum):
    """``HeaderMetadataType``: header/footer key ordinals."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


class CommandBlockType(IntEnum):
    """``HoodieCommandBlockTypeEnum``: the COMMAND_BLOCK_TYPE header value (as a decimal string)."""

    ROLLBACK = 0


Header = dict[HeaderMetadataType, str]

#: Header keys an older (table version 6, Hudi 0.14/0.15) Java reader understands.
V6_HEADER_KEYS = frozenset(
    (
        HeaderMetadataType.INSTANT_TIME,
        HeaderMetadataType.TARGET_INSTANT_TIME,
        HeaderMetadataType.SCHEMA,
        HeaderMetadataType.COMMAND_BLOCK_TYPE,
    )
)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ENCODE_CHUNK_ROWS = 65_536


def _normalize_header(header: Mapping[Any, str] | None, what: str) -> Header:
    out: Header = {}
    for k, v in (header or {}).items():
        try:
            key = HeaderMetadataType(int(k)) if not isinstance(k, str) else HeaderMetadataType[k]
        except (KeyError, ValueError):
            raise HoodieInputError(f"{what}: unknown log block header key {k!r}") from None
        if not isinstance(v, str):
            raise HoodieInputError(
                f"{what}: header {key.name} must be a string, got {type(v).__name__}"
            )
        out[key] = v
    return out


class LogBlock:
    """A block of a log file.

    Attributes:
        header: ``{HeaderMetadataType: str}``.
        footer: same shape (Java writes none).
        offset: byte offset of the block's magic in its file (None until read or written).
        size: bytes the block occupies in its file, magic to reverse pointer (None until then).
        source: the file it was read from (for error messages).
    """

    block_type: ClassVar[BlockType]

    def __init__(
        self,
        header: Mapping[Any, str] | None = None,
        footer: Mapping[Any, str] | None = None,
    ) -> None:
        self.header: Header = _normalize_header(header, type(self).__name__)
        self.footer: Header = _normalize_header(footer, type(self).__name__)
        self.offset: int | None = None
        self.size: int | None = None
        self.source: str = "<memory>"

    @property
    def instant_time(self) -> str | None:
        """The INSTANT_TIME header (the instant that wrote the block)."""
        return self.header.get(HeaderMetadataType.INSTANT_TIME)

    @property
    def is_partial(self) -> bool:
        """The IS_PARTIAL header says ``true`` (a partial update's block: its schema holds only
        the columns it updates; Java parses it with ``Boolean.parseBoolean``)."""
        return (self.header.get(HeaderMetadataType.IS_PARTIAL) or "").lower() == "true"

    def content_pieces(self) -> list[Any]:
        """The block's content bytes, as bytes-like pieces to be concatenated."""
        raise NotImplementedError

    def validate_header(self) -> None:
        """Raise :class:`HoodieInputError` if a header key this block type needs is missing."""
        for key in self._required_header:
            if key not in self.header:
                raise HoodieInputError(f"{type(self).__name__} needs a {key.name} header")

    _required_header: ClassVar[tuple[HeaderMetadataType, ...]] = (HeaderMetadataType.INSTANT_TIME,)

    def _where(self) -> str:
        return (
            self.source if self.offset is None else f"{self.source} (block at byte {self.offset})"
        )

    def __repr__(self) -> str:
        hdr = {
            k.name: (v if k != HeaderMetadataType.SCHEMA else f"<{len(v)} chars>")
            for k, v in self.header.items()
        }
        return f"{type(self).__name__}(offset={self.offset}, size={self.size}, header={hdr})"


# ---------------------------------------------------------------------------------------------
# Data blocks
# ---------------------------------------------------------------------------------------------


#: The header keys of a block of records: the instant that wrote it and its writer schema.
_RECORDS_HEADER: tuple[HeaderMetadataType, ...] = (
    HeaderMetadataType.INSTANT_TIME,
    HeaderMetadataType.SCHEMA,
)


class DataBlock(LogBlock):
    """A block of records (Avro or Parquet content). SCHEMA is the writer schema with meta fields.

    Build one for writing with ``records`` (an Arrow table with the meta columns), or get one
    from :class:`~hoodie_ray.log_format.reader.LogReader` holding its content bytes; ``records``
    then decodes them on first access.
    """

    _required_header = _RECORDS_HEADER

    def __init__(
        self,
        header: Mapping[Any, str] | None = None,
        records: pa.Table | None = None,
        *,
        content: bytes | memoryview | None = None,
        footer: Mapping[Any, str] | None = None,
    ) -> None:
        super().__init__(header, footer)
        if (records is None) == (content is None):
            raise HoodieInputError(f"{type(self).__name__} needs exactly one of records or content")
        self._records = records
        self._content = content
        self._avro_type: AvroType | None = None

    @classmethod
    def from_records(
        cls,
        records: pa.Table,
        instant_time: str,
        schema: dict[str, Any] | str,
        extra_header: Mapping[Any, str] | None = None,
    ) -> DataBlock:
        """A block of ``records`` written by ``instant_time`` with Avro ``schema`` (meta fields
        included), as compact JSON in the SCHEMA header."""
        header: dict[Any, str] = dict(extra_header or {})
        header[HeaderMetadataType.INSTANT_TIME] = instant_time
        header[HeaderMetadataType.SCHEMA] = (
            schema if isinstance(schema, str) else schema_to_json(schema)
        )
        return cls(header, records)

    @property
    def schema_json(self) -> str:
        """The SCHEMA header (Avro JSON text)."""
        s = self.header.get(HeaderMetadataType.SCHEMA)
        if s is None:
            raise HoodieCorruptedDataError(f"data block without a SCHEMA header in {self._where()}")
        return s

    @property
    def avro_schema(self) -> AvroType:
        """The compiled SCHEMA header (shared by the blocks with the same header: read only)."""
        if self._avro_type is None:
            self._avro_type = _compiled_schema(self.schema_json)
        return self._avro_type

    @property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema the SCHEMA header maps to."""
        return _arrow_schema(self.schema_json)

    @property
    def records(self) -> pa.Table:
        """All records of the block (decoded once, then cached)."""
        if self._records is None:
            self._records = self.read()
        return self._records

    @property
    def is_decoded(self) -> bool:
        """Whether the records are in memory (given, or decoded already)."""
        return self._records is not None

    @property
    def content(self) -> bytes | memoryview | None:
        """The raw content bytes, for a block read from a file."""
        return self._content

    def read(self, columns: Sequence[str] | None = None) -> pa.Table:
        """Decode the records, optionally only the top-level ``columns``."""
        if columns is not None:
            names = (
                self._records.column_names if self._records is not None else self.arrow_schema.names
            )
            unknown = [c for c in columns if c not in names]
            if unknown:
                raise HoodieSchemaError(
                    f"columns {unknown} are not in the block's schema ({self._where()})"
                )
        if self._records is not None:
            return self._records if columns is None else self._records.select(list(columns))
        assert self._content is not None
        return self._decode(self._content, columns)

    @property
    def num_records(self) -> int:
        """Number of records (read from the content without decoding the records)."""
        if self._records is not None:
            return self._records.num_rows
        assert self._content is not None
        return self._count(self._content)

    def _decode(self, content: bytes | memoryview, columns: Sequence[str] | None) -> pa.Table:
        raise NotImplementedError

    def _count(self, content: bytes | memoryview) -> int:
        raise NotImplementedError


# A table's blocks repeat one SCHEMA header; compiling it costs ~3 ms (q1 with meta fields).
@functools.lru_cache(maxsize=64)
def _compiled_schema(schema_json: str) -> AvroType:
    return parse_avro_schema(schema_json)


@functools.lru_cache(maxsize=64)
def _arrow_schema(schema_json: str) -> pa.Schema:
    return avro_to_arrow_schema(_compiled_schema(schema_json))


def _read_i32(buf: bytes | memoryview, pos: int, where: str) -> int:
    if pos + 4 > len(buf):
        raise HoodieCorruptedDataError(f"truncated block content in {where}")
    return int(_I32.unpack_from(buf, pos)[0])


class AvroDataBlock(DataBlock):
    """Avro data block (type 3): version 3, record count, then length-prefixed Avro records."""

    block_type = BlockType.AVRO_DATA

    def content_pieces(self) -> list[Any]:
        if self._content is not None:
            return [self._content]
        assert self._records is not None
        n = self._records.num_rows
        if n > 2**31 - 1:
            raise HoodieInputError("an Avro data block holds at most 2^31 - 1 records")
        pieces: list[Any] = [struct.pack(">ii", BLOCK_CONTENT_VERSION, n)]
        # Encoding in slices bounds the temporary matrices (and is a little faster in cache).
        for start in range(0, n, _ENCODE_CHUNK_ROWS):
            part = self._records.slice(start, _ENCODE_CHUNK_ROWS)
            arr = codec.encode_binary(part, self.avro_schema, length_prefix=True)
            pieces.append(codec.binary_to_numpy(arr)[0])
        return pieces

    def _check_version(self, content: bytes | memoryview) -> int:
        where = self._where()
        version = _read_i32(content, 0, where)
        if version != BLOCK_CONTENT_VERSION:
            raise HoodieUnsupportedError(
                f"Avro data block content version {version} in {where} is not supported "
                f"(only {BLOCK_CONTENT_VERSION})"
            )
        count = _read_i32(content, 4, where)
        if count < 0 or count > (len(content) - 8) // 4:
            raise HoodieCorruptedDataError(
                f"Avro data block in {where}: invalid record count {count}"
            )
        return count

    def _count(self, content: bytes | memoryview) -> int:
        return self._check_version(content)

    def _spans(self, content: bytes | memoryview) -> tuple[np.ndarray, np.ndarray]:
        """Where each record of the content starts and ends."""
        where = self._where()
        count = self._check_version(content)
        starts, ends, stop = codec.length_prefixed_spans(content, 8, count, where)
        if stop != len(content):
            raise HoodieCorruptedDataError(
                f"Avro data block in {where}: {len(content) - stop} bytes after the last record"
            )
        return starts, ends

    def _decode(self, content: bytes | memoryview, columns: Sequence[str] | None) -> pa.Table:
        starts, ends = self._spans(content)
        return codec.decode_spans(
            content, starts, ends, self.avro_schema, columns=columns, source=self._where()
        )


def decode_avro_blocks(
    blocks: Sequence[AvroDataBlock], columns: Sequence[str] | None = None
) -> pa.Table:
    """The records of several Avro data blocks read from files, in order, decoded as one
    (the per-column work of a decode paid once, not once a block: a streaming writer leaves
    many blocks of a few hundred records). The blocks must share one writer schema.

    Raises what decoding the faulty block alone raises (naming it) for data that does not
    decode."""
    if len(blocks) == 1:
        return blocks[0].read(columns)
    first = blocks[0]
    if any(b.schema_json != first.schema_json for b in blocks):
        raise ValueError("decode_avro_blocks: the blocks have different writer schemas")
    contents = [b.content for b in blocks]
    if any(c is None or b.is_decoded for b, c in zip(blocks, contents, strict=True)):
        return pa.concat_tables([b.read(columns) for b in blocks], promote_options="permissive")
    starts, ends = [], []
    offset = 0
    try:
        for b, c in zip(blocks, contents, strict=True):
            assert c is not None
            s, e = b._spans(c)
            starts.append(s + offset)
            ends.append(e + offset)
            offset += len(c)
        return codec.decode_spans(
            b"".join(contents),  # type: ignore[arg-type]
            np.concatenate(starts),
            np.concatenate(ends),
            first.avro_schema,
            columns=columns,
            source=first._where(),
        )
    except HoodieError:
        # the faulty block names itself when decoded alone
        return pa.concat_tables([b.read(columns) for b in blocks], promote_options="permissive")


class CDCDataBlock(AvroDataBlock):
    """CDC data block (type 6): Avro records of change data, same content layout."""

    block_type = BlockType.CDC_DATA


class ParquetDataBlock(DataBlock):
    """Parquet data block (type 5): the content is a complete Parquet file of the records.

    ``compression`` defaults to gzip, the codec Java 0.x wrote into the sample blocks
    (``hoodie.parquet.compression.codec``).
    """

    block_type = BlockType.PARQUET_DATA

    def __init__(
        self,
        header: Mapping[Any, str] | None = None,
        records: pa.Table | None = None,
        *,
        content: bytes | memoryview | None = None,
        footer: Mapping[Any, str] | None = None,
        compression: str = "gzip",
    ) -> None:
        super().__init__(header, records, content=content, footer=footer)
        self.compression = compression
        # the content's parsed footer, kept once read: a block decoded in two passes (the
        # merge columns, then the others) parses it once
        self._footer_md: pq.FileMetaData | None = None

    def content_pieces(self) -> list[Any]:
        if self._content is not None:
            return [self._content]
        assert self._records is not None
        table = coerce_to_avro_schema(self._records, self.arrow_schema)
        meta = dict(table.schema.metadata or {})
        meta[b"parquet.avro.schema"] = self.schema_json.encode()
        meta[b"writer.model.name"] = b"avro"
        table = table.replace_schema_metadata(meta)
        sink = io.BytesIO()
        pq.write_table(
            table,
            sink,
            compression=self.compression,
            use_dictionary=dictionary_columns(table),
            # a block is read whole (no reader prunes a log block's pages by their min/max;
            # a log file's column stats come from its records): ~20% of the block's CPU
            write_statistics=False,
        )
        return [sink.getbuffer()]

    def _parquet(self, content: bytes | memoryview) -> pq.ParquetFile:
        try:
            pf = pq.ParquetFile(
                pa.BufferReader(content), metadata=self._footer_md, pre_buffer=False
            )  # pre-buffering an in-memory file only adds a thread hand-off
            self._footer_md = pf.metadata
            return pf
        except Exception as e:  # damaged footers raise Arrow, OS, Unicode and Value errors
            raise HoodieCorruptedDataError(
                f"Parquet data block in {self._where()} does not read: {e}"
            ) from None

    def _count(self, content: bytes | memoryview) -> int:
        pf = self._parquet(content)
        try:
            return int(pf.metadata.num_rows)
        except Exception as e:  # see _parquet
            raise HoodieCorruptedDataError(
                f"Parquet data block in {self._where()} does not read: {e}"
            ) from None

    def _decode(self, content: bytes | memoryview, columns: Sequence[str] | None) -> pa.Table:
        pf = self._parquet(content)
        try:
            return pf.read(
                columns=list(columns) if columns is not None else None,
                # Arrow's threads decode the columns of a large block at once; for a small
                # one the hand-off costs more than the decoding (~0.1 ms of ~0.35 at 100 rows)
                use_threads=memoryview(content).nbytes >= THREADED_DECODE_MIN_BYTES,
            )
        except Exception as e:  # damaged pages raise Arrow, OS, Unicode and Value errors
            raise HoodieCorruptedDataError(
                f"Parquet data block in {self._where()} does not read: {e}"
            ) from None


#: A Parquet data block at least this large is decoded on Arrow's threads.
THREADED_DECODE_MIN_BYTES = 4 << 20

#: Rows sampled per column to decide on dictionary encoding.
DICTIONARY_SAMPLE_ROWS = 1024
#: Blocks of one schema that reuse a sampled choice before it is sampled again.
DICTIONARY_CHOICE_REUSE = 16
#: schema -> (the choice, blocks left to reuse it for, rows it was made on)
_dictionary_choices: dict[pa.Schema, tuple[list[str], int, int]] = {}


def dictionary_columns(table: pa.Table, sample_rows: int = DICTIONARY_SAMPLE_ROWS) -> list[str]:
    """The flat columns worth dictionary-encoding in Parquet: those whose values repeat.

    Dictionary encoding pays for low-cardinality columns (the meta columns that hold one value
    per file, enums, categories) and costs 3-4x the write time on unique-ish ones (keys, sequence
    numbers, random numbers), so each column is judged on an evenly spaced sample: at most half
    of the sampled values distinct. Nested columns are written plain. The choice changes only
    the encoding; every Parquet reader decodes both. Sampling costs ~0.15 ms a column whatever
    the block's size, so a process reuses a choice for the next
    :data:`DICTIONARY_CHOICE_REUSE` blocks of one schema (a writer flushes many blocks): a
    choice made on a full sample for blocks of any size, one made on a smaller block (all its
    rows sampled) for blocks up to twice its size (many file groups a commit make small blocks,
    and sampling each cost ~1 ms of a 500-row block's ~5 ms).
    """
    n = table.num_rows
    if n == 0:
        return []
    cached = _dictionary_choices.get(table.schema)
    if cached is not None and cached[1] > 0 and (cached[2] >= sample_rows or n <= 2 * cached[2]):
        _dictionary_choices[table.schema] = (cached[0], cached[1] - 1, cached[2])
        return list(cached[0])
    sampled = min(n, sample_rows)
    if n > sample_rows:
        table = table.take(pa.array(np.linspace(0, n - 1, sample_rows).astype(np.int64)))
    out = []
    for f, col in zip(table.schema, table.columns, strict=True):
        if pa.types.is_nested(f.type) or pa.types.is_null(f.type):
            continue
        if pa.types.is_dictionary(f.type):
            out.append(f.name)
            continue
        distinct = pc.count_distinct(col, mode="all").as_py()
        if 2 * distinct <= len(col):
            out.append(f.name)
    if len(_dictionary_choices) >= 64:
        _dictionary_choices.clear()
    _dictionary_choices[table.schema] = (out, DICTIONARY_CHOICE_REUSE, sampled)
    return out


def coerce_to_avro_schema(table: pa.Table, avro_schema: AvroType | pa.Schema) -> pa.Table:
    """``table`` with its columns in the schema's order and cast to the Arrow types the Avro
    schema maps to (int8 -> int32, timestamp[ns] -> timestamp[us, UTC], ...; given as an Arrow
    schema: that mapping done already); absent nullable fields become all-null columns.
    Raises :class:`HoodieSchemaError` naming the column."""
    target = (
        avro_schema if isinstance(avro_schema, pa.Schema) else avro_to_arrow_schema(avro_schema)
    )
    at = {name: i for i, name in enumerate(table.schema.names)}
    extra = [c for c in at if target.get_field_index(c) < 0]
    if extra:
        raise HoodieSchemaError(f"columns {extra} are not in the block's Avro schema")
    cols = []
    for f in target:
        i = at.get(f.name)
        if i is None:
            if not f.nullable:
                raise HoodieSchemaError(f"column {f.name!r} is missing and not nullable")
            cols.append(pa.nulls(table.num_rows, f.type))
            continue
        col = table.column(i)
        if col.type != f.type:
            unsafe = pa.types.is_temporal(col.type) and pa.types.is_temporal(f.type)
            try:
                col = pc.cast(col, f.type, safe=not unsafe)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise HoodieSchemaError(
                    f"column {f.name!r}: cannot convert {col.type} to {f.type}: {e}"
                ) from None
        if not f.nullable and col.null_count:
            raise HoodieInputError(f"column {f.name!r} is not nullable but has nulls")
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=target)


class HFileDataBlock(LogBlock):
    """HFile data block (type 4, metadata table only): content kept as raw bytes."""

    block_type = BlockType.HFILE_DATA
    _required_header = _RECORDS_HEADER

    def __init__(
        self,
        header: Mapping[Any, str] | None = None,
        *,
        content: bytes | memoryview = b"",
        footer: Mapping[Any, str] | None = None,
    ) -> None:
        super().__init__(header, footer)
        self.content = content

    def content_pieces(self) -> list[Any]:
        return [self.content]

    @property
    def records(self) -> pa.Table:
        """HFile contents are not decoded by this library."""
        raise HoodieUnsupportedError(f"HFile data blocks cannot be decoded ({self._where()})")


# ---------------------------------------------------------------------------------------------
# Delete block
# ---------------------------------------------------------------------------------------------

#: Branches of the ``orderingVal`` union of ``HoodieDeleteRecord`` (spec §4.5), by position.
ORDERING_WRAPPERS: tuple[tuple[str, Any], ...] = (
    ("null", None),
    ("BooleanWrapper", "boolean"),
    ("IntWrapper", "int"),
    ("LongWrapper", "long"),
    ("FloatWrapper", "float"),
    ("DoubleWrapper", "double"),
    ("BytesWrapper", "bytes"),
    ("StringWrapper", "string"),
    ("DateWrapper", {"type": "int", "logicalType": "date"}),
    ("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}),
    ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
    ("TimestampMicrosWrapper", {"type": "long", "logicalType": "timestamp-micros"}),
)
_WRAPPER_NS = "org.apache.hudi.avro.model"
_DECIMAL_SCALE = 15


def delete_record_list_schema(with_logical_types: bool = True) -> dict[str, Any]:
    """The Avro schema of ``HoodieDeleteRecordList`` (content version 3)."""
    branches: list[Any] = ["null"]
    for name, typ in ORDERING_WRAPPERS[1:]:
        if not with_logical_types and isinstance(typ, dict):
            typ = typ["type"]
        branches.append(
            {
                "type": "record",
                "name": name,
                "namespace": _WRAPPER_NS,
                "fields": [{"name": "value", "type": typ}],
            }
        )
    return {
        "type": "record",
        "name": "HoodieDeleteRecordList",
        "namespace": _WRAPPER_NS,
        "fields": [
            {
                "name": "deleteRecordList",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieDeleteRecord",
                        "namespace": _WRAPPER_NS,
                        "fields": [
                            {"name": "recordKey", "type": ["null", "string"], "default": None},
                            {"name": "partitionPath", "type": ["null", "string"], "default": None},
                            {"name": "orderingVal", "type": branches, "default": None},
                        ],
                    },
                },
            }
        ],
    }


_PARSED_DELETE_SCHEMA: Any = None
_WRAPPER_INDEX = {f"{_WRAPPER_NS}.{name}": i for i, (name, _) in enumerate(ORDERING_WRAPPERS)}


def _wrapper_for(t: pa.DataType) -> tuple[int, dict[str, Any] | str, pa.DataType]:
    """(union branch, Avro value type, Arrow type to cast to) for ordering values of type ``t``."""
    if pa.types.is_boolean(t):
        return 1, "boolean", pa.bool_()
    if t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        return 2, "int", pa.int32()
    if t in (pa.int64(), pa.uint32(), pa.uint64()):
        return 3, "long", pa.int64()
    if t in (pa.float16(), pa.float32()):
        return 4, "float", pa.float32()
    if t == pa.float64():
        return 5, "double", pa.float64()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return 6, "bytes", pa.binary()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return 7, "string", pa.string()
    if pa.types.is_date(t):
        return 8, {"type": "int", "logicalType": "date"}, pa.date32()
    if pa.types.is_decimal(t):
        return (
            9,
            {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
            pa.decimal128(30, 15),
        )
    if pa.types.is_time(t):
        return 10, {"type": "long", "logicalType": "time-micros"}, pa.time64("us")
    if pa.types.is_timestamp(t):
        return 11, {"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", tz="UTC")
    raise HoodieInputError(f"ordering values of Arrow type {t} cannot go into a delete block")


class DeleteBlock(LogBlock):
    """Delete block (type 1): record keys to delete, with partition paths and ordering values.

    ``ordering_values`` is None (every delete gets Java's default ``IntWrapper(0)``: the delete
    always wins) or one value per key as an Arrow array or a sequence (Python ints become
    ``LongWrapper``; pass an Arrow ``int32`` array for ``IntWrapper``). A null ordering value is
    written as the default ``IntWrapper(0)``. The wrapper must match the Java class of the
    table's ordering field (``LongWrapper`` for an Avro ``long`` field) to compare with records.
    """

    block_type = BlockType.DELETE

    def __init__(
        self,
        header: Mapping[Any, str] | None = None,
        record_keys: pa.Array | Sequence[str] | None = None,
        partition_paths: pa.Array | Sequence[str | None] | str | None = None,
        ordering_values: pa.Array | Sequence[Any] | None = None,
        *,
        content: bytes | memoryview | None = None,
        footer: Mapping[Any, str] | None = None,
    ) -> None:
        super().__init__(header, footer)
        self._content = content
        self._keys: pa.Array | None = None
        self._paths: pa.Array | None = None
        self._ordering: pa.Array | None = None
        self._ordering_py: list[Any] | None = None
        self._ordering_kind: np.ndarray | None = None
        if content is None:
            keys = _to_string_array(record_keys if record_keys is not None else [], "record_keys")
            if keys.null_count:
                raise HoodieInputError("delete block record keys may not be null")
            n = len(keys)
            if isinstance(partition_paths, str) or partition_paths is None:
                paths = pa.repeat(pa.scalar(partition_paths, pa.string()), n)
            else:
                paths = _to_string_array(partition_paths, "partition_paths")
            if len(paths) != n:
                raise HoodieInputError(
                    "delete block: partition_paths and record_keys differ in length"
                )
            self._keys, self._paths = keys, paths
            if ordering_values is not None:
                ov = ordering_values
                if isinstance(ov, pa.ChunkedArray):
                    ov = ov.combine_chunks()
                if not isinstance(ov, pa.Array):
                    try:
                        ov = pa.array(list(ov))
                    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
                        raise HoodieInputError(f"delete block ordering values: {e}") from None
                if len(ov) != n:
                    raise HoodieInputError(
                        "delete block: ordering_values and record_keys differ in length"
                    )
                if pa.types.is_null(ov.type):
                    ov = None
                self._ordering = ov

    # -- accessors --------------------------------------------------------------------------
    @property
    def content(self) -> bytes | memoryview | None:
        """The raw content bytes, for a block read from a file."""
        return self._content

    def _decoded(self) -> None:
        if self._keys is not None:
            return
        assert self._content is not None
        self._decode_content(self._content)

    @property
    def record_keys(self) -> pa.Array:
        """Record keys (string array)."""
        self._decoded()
        assert self._keys is not None
        return self._keys

    @property
    def partition_paths(self) -> pa.Array:
        """Partition paths (string array, null where Java wrote none)."""
        self._decoded()
        assert self._paths is not None
        return self._paths

    @property
    def num_records(self) -> int:
        """Number of deleted keys."""
        return len(self.record_keys)

    @property
    def ordering_kinds(self) -> np.ndarray:
        """Per key, the ``orderingVal`` union branch (int8; 0 null, 2 IntWrapper, 3 LongWrapper...)."""
        self._decoded()
        if self._ordering_kind is None:
            n = len(self.record_keys)
            if self._ordering is None:
                self._ordering_kind = np.full(n, 2, dtype=np.int8)
            else:
                branch = _wrapper_for(self._ordering.type)[0]
                valid = np.asarray(pc.is_valid(self._ordering))
                self._ordering_kind = np.where(valid, branch, 2).astype(np.int8)
        return self._ordering_kind

    @property
    def ordering_values(self) -> list[Any]:
        """Per key, the ordering value as a Python value (``0`` for the default IntWrapper(0),
        None for a null orderingVal; dates, decimals (scale 15), ``datetime.time`` and UTC
        datetimes for the logical wrappers)."""
        self._decoded()
        if self._ordering_py is None:
            n = len(self.record_keys)
            if self._ordering is None:
                self._ordering_py = [0] * n
            else:
                vals = self._ordering.to_pylist()
                self._ordering_py = [0 if v is None else v for v in vals]
        return self._ordering_py

    @property
    def is_default_ordering(self) -> np.ndarray:
        """Per key: True where the ordering value is Java's default (null or IntWrapper(0)),
        meaning the delete wins regardless of the ordering field."""
        kinds = self.ordering_kinds
        zero = np.array([v == 0 for v in self.ordering_values], dtype=bool)
        return (kinds == 0) | ((kinds == 2) & zero)

    def ordering_array(self, type: pa.DataType | None = None) -> pa.Array:
        """Ordering values as one Arrow array (default ones null), cast to ``type`` if given.

        Raises :class:`HoodieInputError` if the keys carry ordering values of several classes
        and no ``type`` is given.
        """
        default = self.is_default_ordering
        kinds = self.ordering_kinds
        real = sorted(set(kinds[~default].tolist()))
        vals = [
            None if d else v for d, v in zip(default.tolist(), self.ordering_values, strict=True)
        ]
        if not real:
            arr = pa.nulls(len(vals), type or pa.null())
            return arr
        if len(real) > 1 and type is None:
            raise HoodieInputError(
                f"delete block in {self._where()} mixes ordering value classes {real}"
            )
        arrow_types = {
            1: pa.bool_(),
            2: pa.int32(),
            3: pa.int64(),
            4: pa.float32(),
            5: pa.float64(),
            6: pa.binary(),
            7: pa.string(),
            8: pa.date32(),
            9: pa.decimal128(30, 15),
            10: pa.time64("us"),
            11: pa.timestamp("us", tz="UTC"),
        }
        arr = pa.array(vals, type=arrow_types[real[0]]) if len(real) == 1 else pa.array(vals)
        return arr if type is None else arr.cast(type)

    def to_table(self) -> pa.Table:
        """``record_key``, ``partition_path`` columns of the deletes."""
        return pa.table({"record_key": self.record_keys, "partition_path": self.partition_paths})

    # -- content ----------------------------------------------------------------------------
    def _decode_content(self, content: bytes | memoryview) -> None:
        import fastavro

        global _PARSED_DELETE_SCHEMA
        where = self._where()
        version = _read_i32(content, 0, where)
        if version != BLOCK_CONTENT_VERSION:
            raise HoodieUnsupportedError(
                f"delete block content version {version} in {where} is not supported "
                "(1 and 2 are Kryo-serialized legacy blocks; only 3 is read)"
            )
        length = _read_i32(content, 4, where)
        if length < 0 or 8 + length > len(content):
            raise HoodieCorruptedDataError(
                f"delete block in {where}: invalid payload length {length}"
            )
        if _PARSED_DELETE_SCHEMA is None:
            _PARSED_DELETE_SCHEMA = fastavro.parse_schema(delete_record_list_schema(False))
        fo = io.BytesIO(memoryview(content)[8 : 8 + length])
        datum: Any
        try:
            datum = fastavro.schemaless_reader(
                fo, _PARSED_DELETE_SCHEMA, None, return_record_name=True
            )
        except Exception as e:  # fastavro raises many types on garbage
            raise HoodieCorruptedDataError(
                f"delete block in {where} does not decode: {type(e).__name__}: {e}"
            ) from None
        if fo.tell() != length:
            raise HoodieCorruptedDataError(
                f"delete block in {where}: {length - fo.tell()} bytes after the record list"
            )
        items: list[dict[str, Any]] = datum["deleteRecordList"]
        keys: list[str | None] = []
        paths: list[str | None] = []
        kinds: list[int] = []
        values: list[Any] = []
        for it in items:
            keys.append(it["recordKey"])
            paths.append(it["partitionPath"])
            ov = it["orderingVal"]
            if ov is None:
                kinds.append(0)
                values.append(None)
            else:
                name, rec = ov
                k = _WRAPPER_INDEX[name]
                kinds.append(k)
                values.append(_from_wrapper(k, rec["value"]))
        self._keys = pa.array(keys, pa.string())
        self._paths = pa.array(paths, pa.string())
        self._ordering_kind = np.array(kinds, dtype=np.int8)
        self._ordering_py = values

    def content_pieces(self) -> list[Any]:
        if self._content is not None:
            return [self._content]
        datum = self._encode_datum()
        return [struct.pack(">ii", BLOCK_CONTENT_VERSION, len(datum)), datum]

    def _encode_datum(self) -> bytes:
        keys, paths = self.record_keys, self.partition_paths
        n = len(keys)
        if n == 0:
            return b"\x00"
        nullable_string = parse_avro_schema(["null", "string"])
        enc = codec._Encoder()
        parts = enc.encode(nullable_string, keys, "recordKey")
        parts += enc.encode(nullable_string, paths, "partitionPath")
        parts += self._ordering_parts(enc, n)
        items = codec._assemble(parts, n)
        data, _ = codec.binary_to_numpy(items)
        return b"".join([codec.zigzag_varint(n), data.tobytes(), b"\x00"])

    def _ordering_parts(self, enc: Any, n: int) -> list[Any]:
        ov = self._ordering
        default = codec._Mat(np.broadcast_to(np.array([4, 0], dtype=np.uint8), (n, 2)))
        if ov is None or ov.null_count == n:
            return [default]
        branch, avro_t, _ = _wrapper_for(ov.type)
        vt = parse_avro_schema({"type": avro_t} if isinstance(avro_t, str) else avro_t)
        valid = np.asarray(pc.is_valid(ov))
        if valid.all():
            parts = enc.encode(vt, ov, "orderingVal")
        else:
            sub = ov.filter(pa.array(valid))
            parts = codec._expand_parts(enc.encode(vt, sub, "orderingVal"), valid)
        prefix = np.zeros((n, 2), dtype=np.uint8)
        prefix[:, 0] = np.where(valid, branch * 2, 4)
        lens = np.where(valid, 1, 2).astype(np.int64)
        return [codec._Mat(prefix, lens), *parts]


def _to_string_array(values: Any, what: str) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        try:
            values = pa.array(list(values), pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise HoodieInputError(f"delete block {what}: {e}") from None
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        try:
            values = values.cast(pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise HoodieInputError(f"delete block {what} must be strings: {e}") from None
    return values


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _from_wrapper(kind: int, raw: Any) -> Any:
    """A Python value from a wrapper's raw Avro value (logical types applied here)."""
    if kind == 8:
        return _dt.date(1970, 1, 1) + _dt.timedelta(days=raw)
    if kind == 9:
        unscaled = int.from_bytes(raw, "big", signed=True) if raw else 0
        return _decimal.Decimal(unscaled).scaleb(-_DECIMAL_SCALE)
    if kind == 10:
        micros = int(raw)
        return (_dt.datetime(1970, 1, 1) + _dt.timedelta(microseconds=micros)).time()
    if kind == 11:
        return _EPOCH + _dt.timedelta(microseconds=int(raw))
    return raw


# ---------------------------------------------------------------------------------------------
# Command block
# ---------------------------------------------------------------------------------------------


class CommandBlock(LogBlock):
    """Command block (type 0): a rollback of TARGET_INSTANT_TIME's blocks; no content."""

    block_type = BlockType.COMMAND
    _required_header = (
        HeaderMetadataType.INSTANT_TIME,
        HeaderMetadataType.TARGET_INSTANT_TIME,
        HeaderMetadataType.COMMAND_BLOCK_TYPE,
    )

    @classmethod
    def rollback(cls, instant_time: str, target_instant_time: str) -> CommandBlock:
        """A rollback block written by rollback instant ``instant_time`` for ``target_instant_time``."""
        return cls(
            {
                HeaderMetadataType.INSTANT_TIME: instant_time,
                HeaderMetadataType.COMMAND_BLOCK_TYPE: str(int(CommandBlockType.ROLLBACK)),
                HeaderMetadataType.TARGET_INSTANT_TIME: target_instant_time,
            }
        )

    @property
    def target_instant_time(self) -> str | None:
        """The instant whose blocks are rolled back."""
        return self.header.get(HeaderMetadataType.TARGET_INSTANT_TIME)

    @property
    def command_type(self) -> CommandBlockType | None:
        """The command (ROLLBACK), or None if the header holds an unknown value."""
        v = self.header.get(HeaderMetadataType.COMMAND_BLOCK_TYPE)
        try:
            return CommandBlockType(int(v)) if v is not None else None
        except ValueError:
            return None

    @property
    def is_rollback(self) -> bool:
        """Whether this is a rollback command."""
        return self.command_type is CommandBlockType.ROLLBACK

    def content_pieces(self) -> list[Any]:
        return []


# ---------------------------------------------------------------------------------------------
# Corrupt block (read side only)
# ---------------------------------------------------------------------------------------------


class CorruptBlock(LogBlock):
    """A region of a log file that is not a valid block (partial write or damage).

    ``offset`` is where the bad block starts (its magic, or the first unparsable byte) and
    ``size`` runs to the next ``#HUDI#`` or the end of the file; ``content`` holds the bytes after
    the magic, as Java's corrupt block does. ``reason`` says what check failed. Readers skip it.
    """

    block_type = BlockType.CORRUPT

    def __init__(self, content: bytes | memoryview, reason: str) -> None:
        super().__init__()
        self.content = content
        self.reason = reason

    def content_pieces(self) -> list[Any]:
        raise HoodieInputError("corrupt blocks are never written")

    def __repr__(self) -> str:
        return f"CorruptBlock(offset={self.offset}, size={self.size}, reason={self.reason!r})"


# ---------------------------------------------------------------------------------------------
# Framing
# ---------------------------------------------------------------------------------------------


def _encode_kv(entries: Header, what: str) -> bytes:
    out = [_I32.pack(len(entries))]
    for key in entries:  # insertion order: blocks read from a file re-serialize identically
        value = entries[key].encode("utf-8")
        if len(value) > 2**31 - 1:
            raise HoodieInputError(f"{what} {key.name} value is too long")
        out.append(struct.pack(">ii", int(key), len(value)))
        out.append(value)
    return b"".join(out)


def serialize_block(block: LogBlock, *, table_version: int = 6) -> bytes:
    """The exact bytes of ``block`` as framed in a log file (spec §4.1).

    For table versions below 8 only header keys 0-3 are allowed (Java 0.14/0.15 readers fail
    on later ordinals); for versions 8+ keys 0-8. Raises :class:`HoodieInputError` for a
    missing required header and :class:`HoodieUnsupportedError` for a disallowed one.
    """
    return b"".join(serialize_block_pieces(block, table_version=table_version))


def serialize_block_pieces(block: LogBlock, *, table_version: int = 6) -> list[Any]:
    """:func:`serialize_block` as the pieces it joins, in order (the framing, the content,
    the footer): a writer appends them one after another and never copies a block's content
    into a fresh buffer (~1 ms a MB of cold pages)."""
    if isinstance(block, CorruptBlock):
        raise HoodieInputError("corrupt blocks are never written")
    block.validate_header()
    for hdr in (block.header, block.footer):
        for key in hdr:
            if table_version < 8 and key not in V6_HEADER_KEYS:
                raise HoodieUnsupportedError(
                    f"log block header {key.name} cannot be written for table version "
                    f"{table_version} (only INSTANT_TIME, TARGET_INSTANT_TIME, SCHEMA, "
                    "COMMAND_BLOCK_TYPE)"
                )
    header = _encode_kv(block.header, "header")
    footer = _encode_kv(block.footer, "footer")
    pieces = block.content_pieces()
    content_len = sum(memoryview(p).nbytes for p in pieces)
    block_length = 4 + 4 + len(header) + 8 + content_len + len(footer) + 8
    head = b"".join(
        [
            MAGIC,
            _I64.pack(block_length),
            struct.pack(">ii", LOG_FORMAT_VERSION, int(block.block_type)),
            header,
            _I64.pack(content_len),
        ]
    )
    return [head, *pieces, footer + _I64.pack(block_length + len(MAGIC))]


#: Block class for each type ordinal (CORRUPT is never on disk as such).
BLOCK_CLASSES: dict[BlockType, type[LogBlock]] = {
    BlockType.COMMAND: CommandBlock,
    BlockType.DELETE: DeleteBlock,
    BlockType.AVRO_DATA: AvroDataBlock,
    BlockType.HFILE_DATA: HFileDataBlock,
    BlockType.PARQUET_DATA: ParquetDataBlock,
    BlockType.CDC_DATA: CDCDataBlock,
}


def make_block(
    block_type: BlockType, header: Header, footer: Header, content: bytes | memoryview
) -> LogBlock:
    """A block of ``block_type`` around content bytes read from a file (decoded lazily)."""
    if block_type in (BlockType.AVRO_DATA, BlockType.CDC_DATA, BlockType.PARQUET_DATA):
        cls = BLOCK_CLASSES[block_type]
        return cls(header, content=content, footer=footer)  # type: ignore[call-arg]
    if block_type == BlockType.DELETE:
        return DeleteBlock(header, content=content, footer=footer)
    if block_type == BlockType.HFILE_DATA:
        return HFileDataBlock(header, content=content, footer=footer)
    if block_type == BlockType.COMMAND:
        return CommandBlock(header, footer)
    raise HoodieCorruptedDataError(f"block type {block_type!r} cannot be read")
