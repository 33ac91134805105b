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
from hoodie_ray.reader.file_slice_reader import ReadContext, SliceSpec, iter_file_slice
from hoodie_ray.reader.log_scan import CommitGate
from hoodie_ray.reader.merger import RECORD_KEY, DeleteMarker
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
    table_config, storage, timeline = table.table_config, table.storage, table.active_timeline
    if not table_config.populate_meta_fields:
        return
    slices = list(slices)
    if not slices:
        return
    schema = table.schema
    if schema is None or RECORD_KEY not in schema.names:
        return
    marker = DeleteMarker.from_props(dict(table_config.props))
    ordering = table_config.ordering_field
    needed = {RECORD_KEY}
    keep_ordering = False
    if ordering and ordering in schema.names:
        needed.add(ordering)
        keep_ordering = with_ordering
    needed.update(c for c in marker.columns() if c in schema.names)
    read_schema = pa.schema([f for f in schema if f.name in needed])
    last = timeline.last_completed()
    kwargs: dict[str, Any] = {}
    if batch_rows is not None:
        kwargs["batch_rows"] = int(batch_rows)
    ctx = ReadContext(
        base_uri=storage.base_uri,
        table_version=table_config.table_version,
        populate_meta_fields=True,
        ordering_field=ordering,
        merge_mode=table_config.merge_mode,
        read_schema=read_schema,
        output_columns=(RECORD_KEY, ordering) if keep_ordering and ordering else (RECORD_KEY,),
        end_instant=last.timestamp if last is not None else None,
        commit_gate=CommitGate.of_table(table),
        delete_marker=marker,
        **kwargs,
    )
    ord_type = schema.field(ordering).type if keep_ordering and ordering else None
    if (
        use_record_index
        and ord_type is None
        and table.uses_metadata_table
        and RECORD_INDEX in table.metadata_partitions
    ):
        # The record index knows every live key's file group: no data file is read.
        located = table.metadata_table.refresh().record_index_by_file_group()
        for s in slices:
            keys = located.get((s.partition_path, s.file_id))
            yield s.partition_path, s.file_id, pa.array(keys or [], pa.string()), None
        return
    for s in slices:
        spec = SliceSpec.of(s)
        tables = [t for t in iter_file_slice(ctx, spec, storage) if t.num_rows]
        if not tables:
            empty = None if ord_type is None else pa.array([], ord_type)
            yield spec.partition_path, spec.file_id, pa.array([], pa.string()), empty
            continue
        merged = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        keys = merged.column(RECORD_KEY).combine_chunks()
        ords = merged.column(1).combine_chunks() if ord_type is not None else None
        yield spec.partition_path, spec.file_id, keys, ords
