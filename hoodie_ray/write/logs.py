"""Log blocks as the writer produces them: data blocks, delete blocks, rollback blocks."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.avro.schema import schema_to_json
from hoodie_ray.config.table_config import HoodieTableConfig
from hoodie_ray.file_group.naming import parse_log_file_name
from hoodie_ray.log_format import (
    MAGIC,
    AvroDataBlock,
    CommandBlock,
    CorruptBlock,
    DeleteBlock,
    HeaderMetadataType,
    ParquetDataBlock,
    read_log_file,
    serialize_block,
    serialize_block_pieces,
)
from hoodie_ray.meta import META_PREFIX, PARTITION_PATH, RECORD_KEY
from hoodie_ray.storage import FileInfo, Storage, join
from hoodie_ray.write.context import WriteContext


def data_block(
    ctx: WriteContext, instant: str, stored: pa.Table, columns: list[str] | None = None
) -> list[Any]:
    """A data block of ``stored`` rows (meta columns first), in the configured block format:
    its bytes as pieces to write in order (:func:`serialize_block_pieces`, never joined).

    ``columns``: a partial update's data columns (the others are left out of the block and its
    schema, header ``IS_PARTIAL=true``: Java's ``HoodieAppendHandle`` with a partial schema, the
    meta fields then the columns in table order, the record's name and namespace kept)."""
    header = {
        HeaderMetadataType.INSTANT_TIME: instant,
        HeaderMetadataType.SCHEMA: _schema_json(ctx),
    }
    if columns is not None:
        keep = set(columns)
        names = [n for n in stored.column_names if n.startswith(META_PREFIX) or n in keep]
        stored = stored.select(names)
        partial = dict(ctx.avro_schema)
        partial["fields"] = [f for f in ctx.avro_schema["fields"] if f["name"] in set(names)]
        header[HeaderMetadataType.SCHEMA] = schema_to_json(partial)
        header[HeaderMetadataType.IS_PARTIAL] = "true"
    block: AvroDataBlock | ParquetDataBlock
    if ctx.write_config.log_block_format == "parquet":
        codec = ctx.write_config.parquet_codec
        block = ParquetDataBlock(
            header, stored, compression="none" if codec == "uncompressed" else codec
        )
    else:
        block = AvroDataBlock(header, stored)
    return serialize_block_pieces(block, table_version=ctx.table_version)


def delete_blocks(ctx: WriteContext, instant: str, deletes: pa.Table) -> list[bytes]:
    """Delete blocks for the deleted rows: their ordering values when known, else the default.

    Readers refuse a delete block that mixes the default ``IntWrapper(0)`` with typed ordering
    values, so default-ordered and value-ordered deletes go into separate blocks.
    """
    field = ctx.ordering_field
    ordering = None
    if field is not None and field in deletes.column_names:
        col = deletes.column(field)
        ordering = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if pa.types.is_timestamp(ordering.type):
            ordering = pc.cast(ordering, pa.int64())
    header = {
        HeaderMetadataType.INSTANT_TIME: instant,
        HeaderMetadataType.SCHEMA: _schema_json(ctx),
    }
    keys = deletes.column(RECORD_KEY).combine_chunks()
    parts = deletes.column(PARTITION_PATH).combine_chunks()
    groups: list[tuple[pa.Array | None, pa.Array | None]] = []
    if ordering is None or ordering.null_count == len(ordering):
        groups.append((None, None))
    elif ordering.null_count == 0:
        groups.append((None, ordering))
    else:
        valid = pc.is_valid(ordering)
        groups.append((pc.invert(valid), None))
        groups.append((valid, pc.filter(ordering, valid)))
    out = []
    for mask, values in groups:
        k = keys if mask is None else pc.filter(keys, mask)
        p = parts if mask is None else pc.filter(parts, mask)
        block = DeleteBlock(header, record_keys=k, partition_paths=p, ordering_values=values)
        out.append(serialize_block(block, table_version=ctx.table_version))
    return out


def _schema_json(ctx: WriteContext) -> str:
    cached = getattr(ctx, "_schema_json_cache", None)
    if cached is None:
        cached = schema_to_json(ctx.avro_schema)
        object.__setattr__(ctx, "_schema_json_cache", cached)
    return cached


def rollback_scan(storage: Storage, rel_path: str, target: str) -> tuple[bool, bool]:
    """One pass over a log file for the rollback of ``target``: (does it hold a block not
    written by ``target``, so it must not be deleted; does it already hold a rollback command
    block for ``target``)."""
    other = rolled_back = False
    for block in read_log_file(storage, rel_path):
        if isinstance(block, CorruptBlock):
            continue
        if block.instant_time != target:
            other = True
        if (
            isinstance(block, CommandBlock)
            and block.is_rollback
            and block.target_instant_time == target
        ):
            rolled_back = True
    return other, rolled_back


def holds_blocks_of(storage: Storage, rel_path: str, target: str) -> bool:
    """Does the log file hold a block written by ``target``?"""
    return any(
        not isinstance(b, CorruptBlock) and b.instant_time == target
        for b in read_log_file(storage, rel_path)
    )


def is_copy_of(copy: bytes, source: bytes) -> bool:
    """Is ``copy`` a copy of the log ``source`` (a compaction carried it into its slice)?
    Either the start of it (a copy cut short), or a log that begins with its first block: the
    copy may have grown since (a later write appended to the new slice's latest log) as the
    source may have (a rollback block). A block holds its writer's instant, so no other log
    begins with the same bytes."""
    if source.startswith(copy):
        return True
    head = len(MAGIC) + 8
    if len(source) < head or source[: len(MAGIC)] != MAGIC:
        return False
    end = head + int.from_bytes(source[len(MAGIC) : head], "big", signed=True)
    return head < end <= len(source) and copy.startswith(source[:end])


def carried_copies(
    storage: Storage, rel_path: str, listing: dict[str, list[FileInfo]] | None = None
) -> list[str]:
    """Version 6: the copies a compaction's commit made of log file ``rel_path`` when it
    carried the logs written after its plan into its new slice: logs of the same file group
    and write token named by a later base instant (:func:`is_copy_of`). ``listing``: the
    partitions' listings kept between calls (one listing a partition for a rollback's logs)."""
    part, _, name = rel_path.rpartition("/")
    src = parse_log_file_name(name)
    if src is None or src.is_cdc:
        return []
    if listing is None:
        listing = {}
    if part not in listing:
        listing[part] = storage.list_dir(part)
    data: bytes | None = None
    out = []
    for info in listing[part]:
        lf = parse_log_file_name(info.name)
        if (
            lf is None
            or lf.is_cdc
            or lf.file_id != src.file_id
            or (lf.write_token or "0-0-0") != (src.write_token or "0-0-0")
            or lf.instant <= src.instant
        ):
            continue
        copy = join(part, info.name) if part else info.name
        if not storage.exists(copy):
            continue  # undone since the listing
        if data is None:
            data = storage.read_bytes(rel_path)
        if is_copy_of(storage.read_bytes(copy), data):
            out.append(copy)
    return out


def append_rollback_block(
    storage: Storage,
    rel_path: str,
    table_config: HoodieTableConfig,
    rollback_instant: str,
    target: str,
) -> None:
    """Append a rollback command block that voids every block of ``target`` in the file slice."""
    block = CommandBlock.rollback(rollback_instant, target)
    storage.append(rel_path, serialize_block(block, table_version=table_config.table_version))
