"""Log blocks as the readers see them: kind, instants, and lazily decoded content.

:func:`scan_log_file` walks one log file's blocks (corrupt-aware) and yields
:class:`ScannedBlock` objects whose content is decoded only when the block passes the gates of
spec §6.4 (:func:`admitted_blocks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from hoodie_ray.storage import Storage
from hoodie_ray.table import HoodieTable

__all__ = [
    "CommitGate",
    "DeleteRecords",
    "InstantRange",
    "ScannedBlock",
    "admitted_blocks",
    "scan_log_file",
]

DATA = "data"
DELETE = "delete"
COMMAND = "command"
CORRUPT = "corrupt"
OTHER = "other"

ROLLBACK_COMMAND = "0"


@dataclass
class DeleteRecords:
    """The records of one delete block.

    ``ordering_kinds`` holds the class of each ordering value (``None`` for a null value;
    else ``boolean``, ``int``, ``long``, ``float``, ``double``, ``bytes``, ``string``,
    ``date``, ``decimal``, ``time``, ``timestamp``), ``ordering_values`` the values.
    """

    keys: pa.Array
    partition_paths: pa.Array
    ordering_kinds: list[str | None]
    ordering_values: list[Any]


@dataclass
class ScannedBlock:
    """One block of a log file, content not yet decoded.

    ``size``: its bytes in the file; ``columnar``: its columns decode one by one (Parquet), so
    reading some columns now and the others later decodes each once; ``joint``: the writer
    schema of a block that decodes together with the blocks after it of the same ``joint``
    (Avro: :func:`data_of_blocks`), else None.
    """

    kind: str
    file_name: str
    instant: str | None = None
    target_instant: str | None = None
    command_type: str | None = None
    size: int = 0
    columnar: bool = False
    #: a partial block (header ``IS_PARTIAL``, Spark's MERGE INTO partial updates): its records
    #: carry only the columns of its schema, and the others keep their older values
    partial: bool = False
    joint: str | None = None
    _load: Callable[..., Any] | None = field(default=None, repr=False)
    _block: Any = field(default=None, repr=False)

    @property
    def is_rollback(self) -> bool:
        return self.kind == COMMAND and (self.command_type or ROLLBACK_COMMAND) == ROLLBACK_COMMAND

    def data(self, columns: Sequence[str] | None = None) -> pa.Table:
        """The records of a data block (Arrow types as decoded; reconcile before use), only
        the top-level ``columns`` that the block has when given."""
        assert self.kind == DATA and self._load is not None
        return self._load(columns)

    def num_records(self) -> int:
        """A data block's record count (from its content's header, not decoded)."""
        assert self.kind == DATA and self._block is not None
        return int(self._block.num_records)

    def deletes(self) -> DeleteRecords:
        """The records of a delete block."""
        assert self.kind == DELETE and self._load is not None
        return self._load()


@dataclass(frozen=True)
class CommitGate:
    """Table version < 8: is a block's instant committed (spec §2.6, §6.4 gate 3)?

    Committed = a completed commit/deltacommit/replacecommit, or older than the first instant
    of the active timeline (archival boundary), and never a pending instant.
    """

    completed: frozenset[str]
    pending: frozenset[str]
    first_active: str | None

    def admits(self, ts: str) -> bool:
        if ts in self.pending:
            return False
        return ts in self.completed or (self.first_active is not None and ts < self.first_active)

    @classmethod
    def of_table(cls, table: HoodieTable) -> CommitGate | None:
        """The gate of ``table``'s current timeline; None for table version 8+ (no gate)."""
        if table.completion_time_slicing:
            return None
        tl = table.active_timeline
        return cls(
            completed=frozenset(i.timestamp for i in table.commits()),
            pending=frozenset(i.timestamp for i in tl.pending()),
            first_active=tl.earliest_active(),
        )


@dataclass(frozen=True)
class InstantRange:
    """Incremental range ``(start, end]``; with ``completion`` (table version >= 8) instants are
    placed by their completion time, as hudi-rs 0.5.0 does."""

    start: str | None
    end: str | None
    completion: dict[str, str] | None = None

    def position(self, ts: str) -> str | None:
        if self.completion is None:
            return ts
        return self.completion.get(ts)

    def contains(self, ts: str) -> bool:
        t = self.position(ts)
        if t is None:
            return False
        if self.start is not None and not t > self.start:
            return False
        return not (self.end is not None and t > self.end)

    def allowed(self, instants: Iterable[str]) -> list[str]:
        """Those of ``instants`` inside the range."""
        return [ts for ts in instants if self.contains(ts)]


def admitted_blocks(
    blocks: Sequence[ScannedBlock],
    *,
    end_instant: str | None,
    commit_gate: CommitGate | None,
    instant_range: InstantRange | None,
) -> list[ScannedBlock]:
    """Data and delete blocks that survive the gates of spec §6.4, in processing order.

    Gates, in order: corrupt blocks skipped; data/delete blocks newer than the query's end
    instant skipped; (table version < 8) blocks of uncommitted instants skipped; the incremental
    instant range; then rollback command blocks remove every block of their target instant, in
    any scanned file (targets are collected first). Blocks are grouped by instant in the order
    the instants are first seen (Java ``scanInternalV2``), keeping file order within an instant.
    """
    kept: list[ScannedBlock] = []
    targets: set[str] = set()
    for b in blocks:
        if b.kind == CORRUPT or b.instant is None:
            continue
        if b.kind == COMMAND:
            if b.is_rollback and b.target_instant:
                targets.add(b.target_instant)
            continue
        if b.kind not in (DATA, DELETE):
            continue
        if end_instant is not None and b.instant > end_instant:
            continue
        if commit_gate is not None and not commit_gate.admits(b.instant):
            continue
        if instant_range is not None and not instant_range.contains(b.instant):
            continue
        kept.append(b)
    kept = [b for b in kept if b.instant not in targets]
    order: dict[str, int] = {}
    for b in kept:
        order.setdefault(b.instant or "", len(order))
    return sorted(kept, key=lambda b: order[b.instant or ""])  # stable: file order kept


# -- reading log files --------------------------------------------------------------------------

#: Delete-block ``orderingVal`` union branch -> value class (``DeleteBlock.ordering_kinds``).
_KIND_BY_BRANCH: dict[int, str | None] = {
    0: None,
    1: "boolean",
    2: "int",
    3: "long",
    4: "float",
    5: "double",
    6: "bytes",
    7: "string",
    8: "date",
    9: "decimal",
    10: "time",
    11: "timestamp",
}


def scan_log_file(storage: Storage, rel_path: str) -> Iterator[ScannedBlock]:
    """The blocks of one log file, in file order (content decoded lazily)."""
    from hoodie_ray.log_format import (
        AvroDataBlock,
        CDCDataBlock,
        CommandBlock,
        CorruptBlock,
        DataBlock,
        DeleteBlock,
        HeaderMetadataType,
        HFileDataBlock,
        LogReader,
        ParquetDataBlock,
    )

    name = rel_path.rsplit("/", 1)[-1]
    for blk in LogReader.from_storage(storage, rel_path):
        if isinstance(blk, CorruptBlock):
            yield ScannedBlock(CORRUPT, name)
        elif isinstance(blk, CommandBlock):
            yield ScannedBlock(
                COMMAND,
                name,
                instant=blk.instant_time,
                target_instant=blk.target_instant_time,
                command_type=None if blk.command_type is None else str(int(blk.command_type)),
            )
        elif isinstance(blk, DeleteBlock):
            yield ScannedBlock(DELETE, name, instant=blk.instant_time, _load=_delete_loader(blk))
        elif isinstance(blk, DataBlock) and not isinstance(blk, (CDCDataBlock, HFileDataBlock)):
            yield ScannedBlock(
                DATA,
                name,
                instant=blk.instant_time,
                size=blk.size or 0,
                columnar=isinstance(blk, ParquetDataBlock),
                partial=blk.is_partial,
                # the header as it is: a block without one fails only if it is admitted
                joint=blk.header.get(HeaderMetadataType.SCHEMA)
                if isinstance(blk, AvroDataBlock)
                else None,
                _load=_data_loader(blk),
                _block=blk,
            )
        else:
            yield ScannedBlock(OTHER, name, instant=blk.instant_time)


def data_of_blocks(blocks: Sequence[ScannedBlock], columns: Sequence[str]) -> pa.Table:
    """The records of consecutive data blocks of one ``joint`` (their Arrow types as decoded;
    reconcile before use), the top-level ``columns`` they have, decoded as one."""
    from hoodie_ray.log_format.blocks import decode_avro_blocks

    if len(blocks) == 1:
        return blocks[0].data(columns)
    assert all(b.joint is not None and b.joint == blocks[0].joint for b in blocks)
    return decode_avro_blocks([b._block for b in blocks], _present(blocks[0]._block, columns))


def _present(blk: Any, columns: Sequence[str]) -> list[str]:
    """The ``columns`` a data block's schema has."""
    names = set(blk.arrow_schema.names)
    return [c for c in columns if c in names]


def _data_loader(blk: Any) -> Callable[[Sequence[str] | None], pa.Table]:
    def load(columns: Sequence[str] | None = None) -> pa.Table:
        return blk.read(None if columns is None else _present(blk, columns))

    return load


def _delete_loader(blk: Any) -> Callable[[], DeleteRecords]:
    def load() -> DeleteRecords:
        kinds = [_KIND_BY_BRANCH.get(int(k)) for k in blk.ordering_kinds.tolist()]
        return DeleteRecords(
            keys=blk.record_keys,
            partition_paths=blk.partition_paths,
            ordering_kinds=kinds,
            ordering_values=list(blk.ordering_values),
        )

    return load
