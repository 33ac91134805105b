"""The HOODIE_LOG format: log blocks, their framing, reading and appending (spec §4)."""

from __future__ import annotations

from hoodie_ray.log_format.blocks import (
    BLOCK_CONTENT_VERSION,
    LOG_FORMAT_VERSION,
    MAGIC,
    AvroDataBlock,
    BlockType,
    CDCDataBlock,
    CommandBlock,
    CommandBlockType,
    CorruptBlock,
    DataBlock,
    DeleteBlock,
    HeaderMetadataType,
    HFileDataBlock,
    LogBlock,
    ParquetDataBlock,
    serialize_block,
    serialize_block_pieces,
)
from hoodie_ray.log_format.reader import LogReader, read_log_bytes, read_log_file
from hoodie_ray.log_format.writer import (
    DEFAULT_MAX_LOG_FILE_SIZE,
    LogAppendResult,
    LogWriter,
    log_version_of,
    replace_version,
)

__all__ = [
    "BLOCK_CONTENT_VERSION",
    "DEFAULT_MAX_LOG_FILE_SIZE",
    "LOG_FORMAT_VERSION",
    "MAGIC",
    "AvroDataBlock",
    "BlockType",
    "CDCDataBlock",
    "CommandBlock",
    "CommandBlockType",
    "CorruptBlock",
    "DataBlock",
    "DeleteBlock",
    "HFileDataBlock",
    "HeaderMetadataType",
    "LogAppendResult",
    "LogBlock",
    "LogReader",
    "LogWriter",
    "ParquetDataBlock",
    "log_version_of",
    "read_log_bytes",
    "read_log_file",
    "replace_version",
    "serialize_block",
    "serialize_block_pieces",
]
