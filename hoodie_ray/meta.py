"""The meta fields: the one definition of every ``_hoodie_*`` column name.

Hudi's ``HoodieRecord.HoodieMetadataField`` (hudi-rs's ``MetaField``): the five stored meta
columns, in the order they lead every file's schema, and the other reserved column names the
write and read paths use.
"""

from __future__ import annotations

from enum import Enum

__all__ = [
    "COMMIT_SEQNO",
    "COMMIT_TIME",
    "FILE_NAME",
    "IS_DELETED",
    "META_FIELDS",
    "META_FIELDS_WITH_OPERATION",
    "META_PREFIX",
    "OPERATION",
    "PARTITION_PATH",
    "RECORD_KEY",
    "MetaField",
]


class MetaField(str, Enum):
    """The stored meta columns, in file order."""

    COMMIT_TIME = "_hoodie_commit_time"
    COMMIT_SEQNO = "_hoodie_commit_seqno"
    RECORD_KEY = "_hoodie_record_key"
    PARTITION_PATH = "_hoodie_partition_path"
    FILE_NAME = "_hoodie_file_name"


#: The stored meta column names, in file order.
META_FIELDS: tuple[str, ...] = tuple(f.value for f in MetaField)

COMMIT_TIME = MetaField.COMMIT_TIME.value
COMMIT_SEQNO = MetaField.COMMIT_SEQNO.value
RECORD_KEY = MetaField.RECORD_KEY.value
PARTITION_PATH = MetaField.PARTITION_PATH.value
FILE_NAME = MetaField.FILE_NAME.value

#: Every reserved column starts with this.
META_PREFIX = "_hoodie_"
#: The delete marker column of upserts (Hudi's ``HoodieRecord.HOODIE_IS_DELETED_FIELD``).
IS_DELETED = "_hoodie_is_deleted"
#: The change-log operation column (CDC / Flink changelog mode).
OPERATION = "_hoodie_operation"
#: Every meta column a file may hold (Java ``HOODIE_META_COLUMNS_WITH_OPERATION``): what is not
#: a data column.
META_FIELDS_WITH_OPERATION: frozenset[str] = frozenset((*META_FIELDS, OPERATION))
