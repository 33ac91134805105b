"""Readers: the merge-on-read view of a Hudi table, pure Python over pyarrow.

* :func:`read_table` (``hr.read``): snapshot, time travel, read-optimized and incremental
  queries into a ``pyarrow.Table``;
* :func:`plan_file_slices` / :func:`read_file_slice`: the same query split into independent,
  picklable per-slice reads (for the Ray datasource);
* :func:`~hoodie_ray.reader.index_bootstrap.bootstrap_entries`: live record keys per file group,
  to load a writer's key index.
"""

from __future__ import annotations

from hoodie_ray.reader.file_slice_reader import (
    ReadContext,
    SliceSpec,
    iter_file_slice,
    read_file_slice,
)
from hoodie_ray.reader.query import ReadPlan, plan_file_slices, read, read_table

__all__ = [
    "ReadContext",
    "ReadPlan",
    "SliceSpec",
    "iter_file_slice",
    "plan_file_slices",
    "read",
    "read_file_slice",
    "read_table",
]
