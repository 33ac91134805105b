"""Live record keys per file group, to load a writer's key index (Flink's index bootstrap).

For each latest file slice, the keys of the merged view (base keys not deleted by the logs, plus
keys inserted in the logs) are read with the fewest columns possible: ``_hoodie_record_key``, the
ordering field, and the delete-marker columns when the table has them. :func:`bootstrap_entries`
gives the keys; :func:`bootstrap_entries_with_ordering` also each key's ordering value (what a
global index compares when a record arrives in another partition).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
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

__all__ = ["bootstrap_entries", "bootstrap_entries_with_ordering", "live_entries_of_chunk"]

#: Maps a function over argument tuples, yielding the results in order (``hr.create_index``
#: with ``engine="ray"`` passes Ray tasks).
MapChunks = Callable[[Callable[..., Any], list[tuple[Any, ...]]], Iterable[Any]]
Entry = tuple[str, str, pa.Array, pa.Array | None]


def bootstrap_entries(
    table: HoodieTable,
    slices: Iterable[Any],
    *,
    batch_rows: int | None = None,
    use_record_index: bool = True,
    map_chunks: MapChunks | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> Iterator[tuple[str, str, pa.Array]]:
    """``(partition path, file id, live record keys)`` of each file slice in ``slices`` (see
    :func:`bootstrap_entries_with_ordering`)."""
    for part, fid, keys, _ in bootstrap_entries_with_ordering(
        table,
        slices,
        batch_rows=batch_rows,
        with_ordering=False,
        use_record_index=use_record_index,
        map_chunks=map_chunks,
        on_progress=on_progress,
    ):
        yield part, fid, keys


def bootstrap_entries_with_ordering(
    table: HoodieTable,
    slices: Iterable[Any],
    *,
    batch_rows: int | None = None,
    with_ordering: bool = True,
    use_record_index: bool = True,
    map_chunks: MapChunks | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> Iterator[Entry]:
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
        map_chunks: spreads the reading of the files, about four chunks of slices a CPU
            (see :data:`MapChunks`); None reads them here, a slice at a time.
        on_progress: ``on_progress(done, total)`` as slices are read (for progress bars).

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
    specs = [SliceSpec.of(s) for s in slices]
    if map_chunks is None:
        for i, spec in enumerate(specs):
            yield _live_entries(ctx, spec, table.storage, ord_type)
            if on_progress is not None:
                on_progress(i + 1, len(specs))
        return
    per = max(1, -(-len(specs) // (4 * (os.cpu_count() or 1))))
    chunks = [specs[i : i + per] for i in range(0, len(specs), per)]
    done = 0
    results = map_chunks(live_entries_of_chunk, [(ctx, c, ord_type) for c in chunks])
    for chunk, entries in zip(chunks, results, strict=True):
        yield from entries
        done += len(chunk)
        if on_progress is not None:
            on_progress(done, len(specs))


def live_entries_of_chunk(
    ctx: ReadContext, specs: list[SliceSpec], ord_type: pa.DataType | None
) -> list[Entry]:
    """The entries of :func:`bootstrap_entries_with_ordering` for ``specs``, read through
    ``ctx``'s storage (what one task of a spread read runs)."""
    storage = ctx.storage()
    return [_live_entries(ctx, spec, storage, ord_type) for spec in specs]


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


def _record_index_entries(table: HoodieTable, slices: list[Any]) -> Iterator[Entry]:
    """The record index knows every live key's file group: no data file is read."""
    located = table.metadata_table.refresh().record_index_key_arrays()
    none = pa.array([], pa.string())
    for s in slices:
        keys = located.get((s.partition_path, s.file_id))
        yield s.partition_path, s.file_id, none if keys is None else keys.cast(pa.string()), None


def _live_entries(
    ctx: ReadContext, spec: SliceSpec, storage: Storage, ord_type: pa.DataType | None
) -> Entry:
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
