"""File naming, file groups and slices, and the file-system view (pure Python)."""

from hoodie_ray.file_group.naming import (
    BaseFileName,
    LogFileName,
    base_file_name,
    is_base_file,
    is_log_file,
    log_file_name,
    make_write_token,
    new_file_id,
    parse_base_file_name,
    parse_log_file_name,
)
from hoodie_ray.file_group.view import FileGroup, FileSlice, FileSystemView

__all__ = [
    "BaseFileName",
    "FileGroup",
    "FileSlice",
    "FileSystemView",
    "LogFileName",
    "base_file_name",
    "is_base_file",
    "is_log_file",
    "log_file_name",
    "make_write_token",
    "new_file_id",
    "parse_base_file_name",
    "parse_log_file_name",
]
