"""Constants and small codecs shared by the HFile reader and writer (metadata-table spec section 2).

Integers in HFiles are big-endian. Two variable-length integer encodings occur: protobuf base-128
varints (trailer and file-info length prefixes, protobuf messages) and Hadoop ``WritableUtils``
VLongs (key lengths in root index entries, MVCC versions after each key-value).
"""

from __future__ import annotations

import struct
import sys
import zlib
from collections.abc import Callable, Iterator
from enum import Enum, IntEnum
from types import ModuleType

from hoodie_ray.avro.codec import unsigned_varint


# -- block types and their magics (spec 2.1) -----------------------------------------------------
class HFileBlockType(bytes, Enum):
    """The kinds of HFile block, each its 8-byte magic (members are those bytes)."""

    DATA = b"DATABLK*"
    ENCODED_DATA = b"DATABLKE"
    META = b"METABLKc"
    ROOT_INDEX = b"IDXROOT2"
    LEAF_INDEX = b"IDXLEAF2"
    INTERMEDIATE_INDEX = b"IDXINTE2"
    FILE_INFO = b"FILEINF2"
    TRAILER = b'TRABLK"$'


# -- block header (spec 2.2) ---------------------------------------------------------------------
#: magic, onDiskSizeWithoutHeader, uncompressedSizeWithoutHeader, prevBlockOffset, checksumType,
#: bytesPerChecksum, onDiskDataSizeWithHeader
BLOCK_HEADER = struct.Struct(">8siiqBii")
HEADER_SIZE = BLOCK_HEADER.size  # 33
BYTES_PER_CHECKSUM = 16384
CHECKSUM_SIZE = 4
CHECKSUM_NULL = 0

# -- trailer (spec 2.7) --------------------------------------------------------------------------
TRAILER_SIZE = 4096
MAJOR_VERSION = 3
COMPARATOR_CLASS_NAME = b"org.apache.hudi.io.storage.HoodieHBaseKVComparator"


class TrailerField(IntEnum):
    """The field numbers of HBase's ``TrailerProto``."""

    FILE_INFO_OFFSET = 1
    LOAD_ON_OPEN_OFFSET = 2
    UNCOMPRESSED_DATA_INDEX_SIZE = 3
    TOTAL_UNCOMPRESSED_BYTES = 4
    DATA_INDEX_COUNT = 5
    META_INDEX_COUNT = 6
    ENTRY_COUNT = 7
    NUM_DATA_INDEX_LEVELS = 8
    FIRST_DATA_BLOCK_OFFSET = 9
    LAST_DATA_BLOCK_OFFSET = 10
    COMPARATOR_CLASS_NAME = 11
    COMPRESSION_CODEC = 12
    ENCRYPTION_KEY = 13


# -- compression codecs (trailer ids) ------------------------------------------------------------
CODEC_GZ = 1
CODEC_NONE = 2
CODEC_NAMES = {0: "LZO", 1: "GZ", 2: "NONE", 3: "SNAPPY", 4: "LZ4", 5: "BZIP2", 6: "ZSTD"}

# -- key-values (spec 2.3) -----------------------------------------------------------------------
#: keyLength, valueLength, rowLength
KV_HEAD = struct.Struct(">IIH")
#: familyLength 0, timestamp Long.MAX_VALUE, key type 4 (Put)
KEY_TAIL = b"\x00" + struct.pack(">q", 0x7FFFFFFFFFFFFFFF) + b"\x04"
#: keyLength - rowLength for a key with no family and no qualifier
KEY_OVERHEAD = 2 + len(KEY_TAIL)  # 12

# -- file info keys (spec 2.6) -------------------------------------------------------------------
PBUF_MAGIC = b"PBUF"
FI_MAX_MEMSTORE_TS = b"MAX_MEMSTORE_TS_KEY"
FI_KEY_VALUE_VERSION = b"KEY_VALUE_VERSION"
FI_LAST_KEY = b"hfile.LASTKEY"
FI_AVG_KEY_LEN = b"hfile.AVG_KEY_LEN"
FI_AVG_VALUE_LEN = b"hfile.AVG_VALUE_LEN"
FI_CREATE_TIME = b"hfile.CREATE_TIME_TS"
FI_MAX_TAGS_LEN = b"hfile.MAX_TAGS_LEN"
WRITER_FILE_INFO_KEYS = (
    FI_MAX_MEMSTORE_TS,
    FI_KEY_VALUE_VERSION,
    FI_LAST_KEY,
    FI_AVG_KEY_LEN,
    FI_AVG_VALUE_LEN,
    FI_CREATE_TIME,
)
#: KEY_VALUE_VERSION value meaning "every key-value ends with an MVCC VLong"
KEY_VALUE_VERSION_WITH_MVCC = 1

I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
U16 = struct.Struct(">H")
OFFSET_SIZE = struct.Struct(">qi")

#: A gzip member header as Java's GZIPOutputStream writes it (no name, mtime 0, OS 0).
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"
#: zlib level of Java's GZ payloads (``Deflater``'s default): :data:`JAVA_DEFLATE` writes HFiles
#: byte for byte as Java does (what tests/hfile compare).
GZIP_LEVEL = 6
#: ISA-L's level of :data:`FAST_DEFLATE`: on record-index KeyValues it deflates ~12x faster than
#: zlib at level 6, for slightly fewer bytes (908 vs 72 MB/s, ratio 0.135 vs 0.138, 2026-11-30).
ISAL_LEVEL = 1


def _isal() -> ModuleType | None:
    try:
        from isal import isal_zlib
    except ImportError:  # an install without the wheel: zlib, Java's bytes
        return None
    return isal_zlib


_ISAL = _isal()
#: zlib's API for inflating and checksums: ISA-L's where installed (inflates ~2x faster).
_ZLIB: ModuleType = _ISAL if _ISAL is not None else zlib


def _raw_deflater(module: ModuleType, level: int) -> Callable[[bytes], bytes]:
    def deflate(payload: bytes) -> bytes:
        comp = module.compressobj(level, module.DEFLATED, -15)
        return bytes(comp.compress(payload) + comp.flush())

    return deflate


#: Raw deflate as Java's ``Deflater`` writes it.
JAVA_DEFLATE = _raw_deflater(zlib, GZIP_LEVEL)
#: Raw deflate as fast as this install can: ISA-L where the ``isal`` wheel is installed (every
#: reader inflates it, a deflate stream is a deflate stream), else :data:`JAVA_DEFLATE`.
FAST_DEFLATE = _raw_deflater(_ISAL, ISAL_LEVEL) if _ISAL is not None else JAVA_DEFLATE
#: What :func:`gzip_compress` deflates with (tests comparing with Java's bytes set
#: :data:`JAVA_DEFLATE`).
deflate = FAST_DEFLATE


#: Files of at least this many entries are split (read) or assembled (written) by the compiled
#: kernels even in a process that has not loaded numba yet: the plain code costs ~1 us an
#: entry, loading numba ~0.2-0.5 CPU-s once (an MDT compaction of a record index this large
#: reads and writes ten such files or more); smaller files only where numba is loaded already.
KERNEL_MIN_ENTRIES = 1 << 17


def use_kernel(entries: int) -> bool:
    """Whether a file of ``entries`` entries is read or written by the compiled kernels."""
    if "numba" not in sys.modules and entries < KERNEL_MIN_ENTRIES:
        return False
    from hoodie_ray import jit

    return jit.enabled()


class FormatError(Exception):
    """Internal: bytes that do not decode (the reader turns it into HoodieCorruptedDataError)."""


def checksum_bytes(on_disk_data_size_with_header: int) -> int:
    """Checksum bytes after a block: 4 per started ``BYTES_PER_CHECKSUM`` chunk."""
    chunks = -(-on_disk_data_size_with_header // BYTES_PER_CHECKSUM)
    return CHECKSUM_SIZE * chunks


def gzip_compress(payload: bytes) -> bytes:
    """One gzip member holding ``payload`` (header bytes as Java writes them), deflated with
    :data:`deflate`."""
    tail = struct.pack("<II", _ZLIB.crc32(payload), len(payload) & 0xFFFFFFFF)
    return b"".join((GZIP_HEADER, deflate(payload), tail))


def gzip_decompress(data: bytes | memoryview, size: int) -> bytes:
    """Inflate one gzip (or zlib) stream expected to hold exactly ``size`` bytes."""
    try:
        d = _ZLIB.decompressobj(47)
        out = d.decompress(data, size + 1)
    except (zlib.error, _ZLIB.error) as e:
        raise FormatError(f"gzip payload does not inflate: {e}") from None
    if len(out) != size or not d.eof:
        raise FormatError(f"gzip payload inflates to a size other than the header's {size}")
    return bytes(out)


# -- protobuf varints ----------------------------------------------------------------------------
def encode_varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer."""
    if value < 0:
        raise ValueError("varint of a negative number")
    return unsigned_varint(value)


def decode_varint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of the varint at ``pos``; never reads at or past ``end``."""
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise FormatError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise FormatError("varint longer than 10 bytes")


def proto_fields(buf: bytes | memoryview) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of a protobuf message: ints for varint fields,
    bytes for length-delimited ones; fixed32/fixed64 fields come back as ints too."""
    pos = 0
    end = len(buf)
    while pos < end:
        tag, pos = decode_varint(buf, pos, end)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = decode_varint(buf, pos, end)
            yield field, value
        elif wire == 2:
            n, pos = decode_varint(buf, pos, end)
            if pos + n > end:
                raise FormatError("length-delimited protobuf field overruns its message")
            yield field, bytes(buf[pos : pos + n])
            pos += n
        elif wire == 1 or wire == 5:
            width = 8 if wire == 1 else 4
            if pos + width > end:
                raise FormatError("truncated fixed-width protobuf field")
            yield field, int.from_bytes(buf[pos : pos + width], "little")
            pos += width
        else:
            raise FormatError(f"protobuf wire type {wire} is not supported")


def proto_varint_field(field: int, value: int) -> bytes:
    """A varint field; a negative value is written as protobuf writes an int64 (two's complement
    in 64 bits, ten bytes), as Java does for ``firstDataBlockOffset`` -1."""
    return encode_varint(field << 3) + encode_varint(value & 0xFFFFFFFFFFFFFFFF)


def proto_bytes_field(field: int, value: bytes) -> bytes:
    return b"".join((encode_varint((field << 3) | 2), encode_varint(len(value)), value))


# -- Hadoop VLongs (WritableUtils) ---------------------------------------------------------------
def encode_vlong(value: int) -> bytes:
    """Hadoop ``WritableUtils.writeVLong``: -112..127 in one byte, else a length byte (giving
    sign and byte count) followed by the big-endian magnitude bytes."""
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    first = -112
    if value < 0:
        value = ~value
        first = -120
    n = (value.bit_length() + 7) // 8
    return struct.pack(">b", first - n) + value.to_bytes(n, "big")


def decode_vlong(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of the Hadoop VLong at ``pos``; never reads at or past ``end``."""
    if pos >= end:
        raise FormatError("truncated VLong")
    first = buf[pos]
    if first >= 0x80:
        first -= 0x100
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    n = -(first + 120) if negative else -(first + 112)
    if pos + 1 + n > end:
        raise FormatError("truncated VLong")
    value = int.from_bytes(buf[pos + 1 : pos + 1 + n], "big")
    return (~value if negative else value), pos + 1 + n
