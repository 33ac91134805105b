"""Live record keys per file group, to load a writer's key index (Flink's index bootstrap).

For each latest file slice, the keys of the merged view (base keys not deleted by the logs, plus
keys inserted in the logs) are read with the fewest columns possible: ``_hoodie_record_key``, the
ordering field, and the delete-marker columns when the table has them. :func:`bootstrap_entries`
gives the keys; :func:`bootstrap_entries_with_ordering` also each key's ordering value (what a
global index compares when a record arrives in another partition).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from hoodie_ray.metadata.layout import RECORD_INDEX
from hoodie_ray.reader.file_slice_reader import (
    ReadContext,
    SliceSpec,
    iter_file_slice,
    merge_columns,
)
from hoodie_ray.reader.merger import RECORD_KEY
from hoodie_ray.storage import Storage
from hoodie_ray.table import HoodieTable

__all__ = ["bootstrap_entries", "bootstrap_entries_with_ordering"]


def bootstrap_entries(
    table: HoodieTable,
    slices: Iterable[Any],
    *,
    batch_rows: int | None = None,
    use_record_index: bool = True,
) -> Iterator[tuple[str, str, pa.Array]]:
    """``(partition path, file id, live record keys)`` of each file slice in ``slices`` (see
    :func:`bootstrap_entries_with_ordering`)."""
    for part, fid, keys, _ in bootstrap_entries_with_ordering(
        table,
        slices,
        batch_rows=batch_rows,
        with_ordering=False,
        use_record_index=use_record_index,
    ):
        yield part, fid, keys


def bootstrap_entries_with_ordering(
    table: HoodieTable,
    slices: Iterable[Any],
    *,
    batch_rows: int | None = None,
    with_ordering: bool = True,
    use_record_index: bool = True,
) -> Iterator[tuple[str, str, pa.Array, pa.Array | None]]:
    """``(partition path, file id, live record keys, their ordering values or None)`` of each
    file slice in ``slices``.

    Args:
        table: the table, its timeline loaded (gives the commit gate and the query instant).
        slices: the latest file slices (objects with ``partition_path``, ``file_id``,
            ``base_instant``, ``base_file`` and ``log_files``).
        batch_rows: rows per base-file batch (default: the reader's).
        with_ordering: read the ordering values too (None when the table has no ordering
            field, or when False).
        use_record_index: take the keys from the metadata table's record index when the table
            keeps one and no ordering values are wanted (no data file is read); False reads
            the files (what the validator compares the index with).

    Keys come out as one ``pa.Array`` of strings per file slice (empty arrays included), in the
    order of ``slices``. Tables without meta fields have no record keys to read: nothing is
    yielded for them.
    """
    slices = list(slices)
    read_schema = _bootstrap_schema(table) if slices else None
    if read_schema is None:
        return
    ordering = table.table_config.ordering_field
    keep_ordering = with_ordering and ordering is not None and ordering in read_schema.names
    if use_record_index and not keep_ordering and _keeps_record_index(table):
        yield from _record_index_entries(table, slices)
        return
    last = table.active_timeline.last_completed()
    ctx = ReadContext.of_table(
        table,
        read_schema,
        (RECORD_KEY, ordering) if keep_ordering and ordering else (RECORD_KEY,),
        end_instant=last.timestamp if last is not None else None,
        batch_rows=batch_rows,
    )
    ord_type = read_schema.field(ordering).type if keep_ordering and ordering else None
    for s in slices:
        yield _live_entries(ctx, SliceSpec.of(s), table.storage, ord_type)


def _bootstrap_schema(table: HoodieTable) -> pa.Schema | None:
    """The columns the merged view's keys need (:func:`merge_columns`); None when the table
    has no record keys to read (no meta fields, or no schema yet)."""
    schema = table.schema
    if not table.table_config.populate_meta_fields:
        return None
    if schema is None or RECORD_KEY not in schema.names:
        return None
    needed = merge_columns(table, schema)
    return pa.schema([f for f in schema if f.name in needed])


def _keeps_record_index(table: HoodieTable) -> bool:
    return table.uses_metadata_table and RECORD_INDEX in table.metadata_partitions


def _record_index_entries(
    table: HoodieTable, slices: list[Any]
) -> Iterator[tuple[str, str, pa.Array, pa.Array | None]]:
    """The record index knows every live key's file group: no data file is read."""
    located = table.metadata_table.refresh().record_index_key_arrays()
    none = pa.array([], pa.string())
    for s in slices:
        keys = located.get((s.partition_path, s.file_id))
        yield s.partition_path, s.file_id, none if keys is None else keys.cast(pa.string()), None


def _live_entries(
    ctx: ReadContext, spec: SliceSpec, storage: Storage, ord_type: pa.DataType | None
) -> tuple[str, str, pa.Array, pa.Array | None]:
    """The live keys of one slice's merged view (and their ordering values, with
    ``ord_type``)."""
    tables = [t for t in iter_file_slice(ctx, spec, storage) if t.num_rows]
    if not tables:
        empty = None if ord_type is None else pa.array([], ord_type)
        return spec.partition_path, spec.file_id, pa.array([], pa.string()), empty
    merged = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    keys = merged.column(RECORD_KEY).combine_chunks()
    ords = merged.column(1).combine_chunks() if ord_type is not None else None
    return spec.partition_path, spec.file_id, keys, ords
