"""Bucket assignment: which file group each record goes to (Flink BucketAssignFunction).

One :class:`BucketAssigner` per assigner task. It holds the key index for the keys routed to it
(``hash(record key) % write.bucket_assign.tasks``), and owns the small file groups and new file
ids whose ``crc32(file id) % tasks`` equals its task id, so two tasks never write one file group.

Tags are two columns appended to the batch: ``_hoodie_file_id`` and ``_hoodie_bucket_type``
(``I`` = a new file group whose base file this checkpoint creates, ``U`` = an existing group).

With the global index and event-time ordering a record that arrives in another partition than
its stored copy is first compared with it (Hudi's ``mergeForPartitionUpdatesIfNeeded``): only a
record whose ordering value is ``>=`` the stored one's (or where either is unknown) moves the
key; an older one is dropped, as the merge would drop it. For that the key index keeps each
key's last ordering value (8 bytes a key for numeric, temporal and decimal ordering fields; a
Python string per key for string ordering fields).
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.codes import encode_strings, factorize_ints
from hoodie_ray.config.options import WriteConfig
from hoodie_ray.config.table_config import MergeMode
from hoodie_ray.index import (
    KeyIndex,
    Location,
    bucket_file_id_prefix,
    bucket_ids,
    fingerprint_keys,
    group_keys,
    hash_keys,
    ordering_at_least,
    ordering_nulls,
    ordering_numbers,
    unknown_ordering,
)
from hoodie_ray.meta import IS_DELETED, PARTITION_PATH, RECORD_KEY
from hoodie_ray.write.records import by_partition_and_key, precombine_plan

FILE_ID = "_hoodie_file_id"
IS_NEW = "_hoodie_is_new"  # a key the index did not hold: counted as an insert
BUCKET_TYPE = "_hoodie_bucket_type"
INSERT_BUCKET = "I"
UPDATE_BUCKET = "U"
LOG_TO_PARQUET_RATIO = 0.35  # hoodie.logfile.to.parquet.compression.ratio
_BUCKET_TYPES = pa.array([UPDATE_BUCKET, INSERT_BUCKET], pa.string())  # by is-insert code


def file_id_task(file_id: str, num_tasks: int) -> int:
    """The assigner task that owns a file group."""
    return zlib.crc32(file_id.encode()) % num_tasks


def new_file_id_for_task(task_id: int, num_tasks: int) -> str:
    """A fresh ``<uuid>-0`` file id owned by ``task_id``."""
    while True:
        fid = f"{uuid.uuid4()}-0"
        if file_id_task(fid, num_tasks) == task_id:
            return fid


#: The fixed part of a bucket's file id under non-blocking concurrency control (Java's
#: ``BucketIdentifier`` constant suffix).
NBCC_FILE_ID_SUFFIX = "-0000-0000-0000-000000000000"


def nbcc_bucket_file_id(bucket: int) -> str:
    """The file id of ``bucket`` under non-blocking concurrency control,
    ``<bucket:08d>-0000-0000-0000-000000000000-0`` (Java's ``newBucketFileIdForNBCC``): every
    writer that creates the bucket's file group names it alike, so concurrent first writes of
    a bucket land in one file group."""
    return f"{bucket_file_id_prefix(bucket)}{NBCC_FILE_ID_SUFFIX}-0"


def _partition_tasks(parts: Sequence[str], num_tasks: int) -> np.ndarray:
    """A stable hash of each partition path, modulo ``num_tasks`` (one value per partition,
    not per row)."""
    h = pd.util.hash_array(np.asarray(list(parts), dtype=object), categorize=False)
    return (h % np.uint64(num_tasks)).astype(np.int64)


def _bucket_of(file_id: str) -> int:
    """The bucket number a bucket-index file id starts with (``%08d-...``)."""
    try:
        return int(file_id[:8])
    except ValueError:
        return zlib.crc32(file_id.encode())


def home_writers(
    groups: Sequence[tuple[str, str]], num_writers: int, bucket_index: bool = False
) -> np.ndarray:
    """The home writer task of each file group ``(partition, file id)``: the task number of
    the assigner that owns it when assigners and writers are as many (the default), so an
    assigner's rows reach one writer (Flink's bucket assigner and write tasks line up the
    same way: an assigner fills only the file groups of its own write task).

    An assigner owns the file ids whose ``crc32 % tasks`` is its task id
    (:func:`file_id_task`: the ids it creates and the small files it fills); with the bucket
    index it owns the buckets :func:`record_tasks` routes to it.
    """
    if num_writers <= 1 or not groups:
        return np.zeros(len(groups), dtype=np.int64)
    if not bucket_index:
        return np.asarray([file_id_task(f, num_writers) for _, f in groups], dtype=np.int64)
    parts = sorted({p for p, _ in groups})
    ptask = dict(zip(parts, _partition_tasks(parts, num_writers).tolist(), strict=True))
    return np.asarray([(ptask[p] + _bucket_of(f)) % num_writers for p, f in groups], dtype=np.int64)


def writer_of_groups(
    groups: Sequence[tuple[str, str]],
    num_writers: int,
    plan: Mapping[tuple[str, str], int] | None = None,
    bucket_index: bool = False,
) -> np.ndarray:
    """The writer task of each file group ``(partition, file id)``: the checkpoint's writer
    plan (:func:`plan_writers`) where it names the group, else its home writer
    (:func:`home_writers`); every assigner of a checkpoint holds the same plan, so a file
    group always lands on one writer whichever assigner routes it (HUDI-4397)."""
    out = home_writers(groups, num_writers, bucket_index)
    if plan and num_writers > 1:
        for i, g in enumerate(groups):
            w = plan.get(g)
            if w is not None and 0 <= w < num_writers:
                out[i] = w
    return out


#: The home split is kept while its busiest writer's load is within this factor of the mean.
HOME_LOAD_SLACK = 1.1


def plan_writers(
    loads: Mapping[tuple[str, str], float], num_writers: int, bucket_index: bool = False
) -> dict[tuple[str, str], int]:
    """The writer plan of a checkpoint: empty (every group goes to its home writer,
    :func:`home_writers`) while the home split is balanced, within :data:`HOME_LOAD_SLACK`
    of the mean; else a writer for each file group with a known load, packed longest first
    onto the writer with the least load so far (LPT: within 4/3 of the best split), ties by
    group name so every process computes the same plan.

    A table this topology wrote is balanced at home: each assigner fills its own file
    groups with the keys hashed to it. One written elsewhere (a bulk insert, another
    parallelism, another engine) may not be: with few file groups the oldest collect most
    updates and loads differ several-fold. The plan balances those at the price of every
    assigner sending to every writer (more, smaller calls)."""
    if num_writers <= 1 or not loads:
        return {}
    groups = sorted(loads)
    home = home_writers(groups, num_writers, bucket_index)
    at_home = np.zeros(num_writers)
    np.add.at(at_home, home, np.asarray([loads[g] for g in groups], dtype=np.float64))
    mean = at_home.sum() / num_writers
    if mean <= 0 or at_home.max() <= HOME_LOAD_SLACK * mean:
        return {}
    totals = [0.0] * num_writers
    plan: dict[tuple[str, str], int] = {}
    for g, load in sorted(loads.items(), key=lambda kv: (-kv[1], kv[0])):
        w = min(range(num_writers), key=lambda i: (totals[i], i))
        plan[g] = w
        totals[w] += load
    return plan


def key_task(keys: pa.Array | pa.ChunkedArray, num_tasks: int) -> np.ndarray:
    """The assigner task of each record key (stable across processes): the high half of
    :func:`~hoodie_ray.index.hash_keys`, computed from the Arrow buffers (no object per row).
    The high half, because the key index places a key by the low bits of the same hash."""
    if num_tasks == 1:
        return np.zeros(len(keys), dtype=np.int32)
    return ((hash_keys(keys) >> np.uint64(32)) % np.uint64(num_tasks)).astype(np.int32)


def record_tasks(
    batch: pa.Table,
    num_tasks: int,
    wc: WriteConfig,
    key_fields: Sequence[str] | None = None,
) -> np.ndarray:
    """The assigner task of each prepared record: :func:`key_task` of its key; with the bucket
    index, of its ``(partition, bucket)``, so that one task makes each bucket's file group
    (Flink keys the bucket stream write by bucket likewise). ``key_fields``: the record key
    fields the bucket hashes (the table's; None: the options')."""
    keys = batch.column(RECORD_KEY)
    if num_tasks == 1 or wc.index_type != "BUCKET":
        return key_task(keys, num_tasks)
    parts = batch.column(PARTITION_PATH)
    penc = encode_strings(parts)
    ptask = _partition_tasks(penc.dictionary.to_pylist(), num_tasks)
    codes = penc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    fields = wc.record_key_fields if key_fields is None else key_fields
    buckets = bucket_ids(keys, wc.bucket_num, fields)
    return ((ptask[codes] + buckets) % num_tasks).astype(np.int32)


@dataclass
class SmallFile:
    """A file group that can take more inserts."""

    file_id: str
    size_bytes: int
    is_new: bool = False  # created in the current checkpoint (no committed base yet)


@dataclass
class WriteProfile:
    """What the assigner knows about the table when a checkpoint starts."""

    avg_record_size: int
    small_files: dict[str, list[SmallFile]] = field(default_factory=dict)
    # file group -> writer task for this checkpoint (the same in every assigner)
    writer_plan: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass(frozen=True)
class AssignerConfig:
    """What one bucket-assign task needs from the job's resolved options (defaults live in
    the options registry only: build with :meth:`of`)."""

    task_id: int
    num_tasks: int
    small_file_limit: int
    max_file_size: int
    index_type: str
    global_index: bool
    bucket_num: int
    append_mode: bool  # insert operation: no index lookups
    ordering_field: str | None
    index_bootstrap: bool  # load the key index from the table at start
    merge_mode: MergeMode  # the table's: event time compares ordering values
    num_writers: int = 1  # writer tasks new file groups are spread over
    partitioned: bool = True  # the table has partition fields (keys can move)
    record_index: bool = False  # the table keeps (or is to keep) a record index
    fixed_bucket_ids: bool = False  # NBCC: one file id per bucket, whatever writer creates it
    overwrite: bool = False  # replace operations: every checkpoint writes new file groups only
    unfolded: bool = False  # changelog mode, partial updates: every row of a key goes on
    record_key_fields: tuple[str, ...] = ()  # the bucket index hashes these fields' values

    @property
    def compares_moves(self) -> bool:
        """A key arriving in another partition is compared with its stored copy first (global
        index, event-time ordering on an ordering field), so the index keeps each key's
        ordering value. Not on a non-partitioned table, where no key can move, unless a
        record index must not drop a key for a delete that loses to its stored copy."""
        return (
            self.global_index
            and self.index_type != "BUCKET"
            and not self.append_mode
            and self.ordering_field is not None
            and self.merge_mode is MergeMode.EVENT_TIME_ORDERING
            and (self.partitioned or self.record_index)
        )

    @classmethod
    def of(
        cls,
        wc: WriteConfig,
        task_id: int = 0,
        num_tasks: int = 1,
        ordering_field: str | None = None,
        merge_mode: MergeMode = MergeMode.EVENT_TIME_ORDERING,
        **overrides: Any,
    ) -> AssignerConfig:
        """The config of task ``task_id`` of ``num_tasks`` from resolved write options."""
        values: dict[str, Any] = dict(
            task_id=task_id,
            num_tasks=num_tasks,
            small_file_limit=wc.small_file_limit,
            max_file_size=wc.parquet_max_file_size,
            index_type=wc.index_type,
            global_index=wc.keys_global,
            bucket_num=wc.bucket_num,
            append_mode=wc.inserts_only or wc.operation == "bulk_insert",
            ordering_field=ordering_field,
            index_bootstrap=wc.index_bootstrap,
            merge_mode=merge_mode,
            num_writers=wc.write_tasks,
            fixed_bucket_ids=wc.nbcc,
            overwrite=wc.replaces,
            unfolded=wc.changelog_enabled,
            record_key_fields=tuple(wc.record_key_fields),
        )
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class _Probe:
    """A batch's keys looked up in the key index (one array per batch, no object per row)."""

    parts: pa.Array
    deleted: np.ndarray
    pcode: np.ndarray  # partition code per row, into pdict
    pdict: list[str]
    ikeys: pa.Array  # the index's keys (partition + record key with a non-global index)
    hashes: np.ndarray
    fps: np.ndarray  # their fingerprints (fingerprint_keys)
    seg_of: np.ndarray
    pos_of: np.ndarray
    found: np.ndarray
    safe_ids: np.ndarray  # location id of each found row (0 for the others)


_ROW = "_hoodie_row"  # a row's position in its batch (changelog routing)


def _bucket_types(is_insert: np.ndarray) -> pa.Array:
    return _BUCKET_TYPES.take(pa.array(is_insert.astype(np.int8)))


def file_id_column(codes: np.ndarray, file_ids: pa.Array) -> pa.DictionaryArray:
    """The file-id tag of rows whose file group is ``file_ids[code]``: dictionary-encoded over
    the groups the rows name, in order of first appearance, so that tagged rows carry an int32
    per row, not a 40-byte id (taken, split and sent between tasks as often as the rows are),
    and the writers group them by the codes without hashing strings."""
    idx, used = factorize_ints(np.asarray(codes))
    return pa.DictionaryArray.from_arrays(
        pa.array(idx.astype(np.int32, copy=False)), file_ids.take(pa.array(used))
    )


#: The file-id tag of no row.
_NO_FILE_IDS = pa.DictionaryArray.from_arrays(pa.array([], pa.int32()), pa.array([], pa.string()))
#: The file-id tag's type (:func:`file_id_column`).
FILE_ID_TYPE = _NO_FILE_IDS.type


def _with_tags(batch: pa.Table, fids: pa.Array, types: pa.Array, is_new: np.ndarray) -> pa.Table:
    """The batch with its tag columns appended: file id, bucket type, is-new key."""
    return (
        batch.append_column(FILE_ID, fids)
        .append_column(BUCKET_TYPE, types)
        .append_column(IS_NEW, pa.array(is_new))
    )


def _set_column(batch: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return batch.set_column(batch.schema.get_field_index(name), name, values)


class BucketAssigner:
    """Tags records with their file group; holds the key index state of one task."""

    #: Drop a key from the index once its delete wins for certain (the job sets it when the
    #: table keeps a record index: a later record of the key must count as an insert).
    forget_deleted_keys: bool = False

    def __init__(self, config: AssignerConfig, profile: WriteProfile | None = None) -> None:
        self.config = config
        self.index = KeyIndex()
        self.profile = profile or WriteProfile(avg_record_size=1024)
        self._small: dict[str, list[SmallFile]] = {}
        self._capacity: dict[tuple[str, str], int] = {}
        self._bucket_file_ids: dict[tuple[str, int], str] = {}
        self._next_writer = config.task_id  # assigners start their turns apart
        self.reset_profile(self.profile)

    # -- state ---------------------------------------------------------------------------------
    def reset_profile(self, profile: WriteProfile) -> None:
        """Start of a checkpoint: refresh small files and capacities from the committed table."""
        self.profile = profile
        cfg = self.config
        avg = max(1, profile.avg_record_size)
        self._small = {}
        self._capacity = {}
        if cfg.overwrite:
            # an overwrite's groups are new in each checkpoint: the replacecommit replaces
            # every other group of the partitions it writes, the last checkpoint's too
            self._bucket_file_ids.clear()
            return
        for part, files in profile.small_files.items():
            mine = [
                f
                for f in files
                if file_id_task(f.file_id, cfg.num_tasks) == cfg.task_id
                and f.size_bytes < cfg.small_file_limit
            ]
            mine.sort(key=lambda f: f.file_id)
            self._small[part] = mine
            for f in mine:
                self._capacity[(part, f.file_id)] = max(
                    0, (cfg.max_file_size - f.size_bytes) // avg
                )

    def bootstrap(self, entries: Iterable[tuple[Any, ...]]) -> None:
        """Load the key index: ``(partition path, file id, record keys[, ordering values])``
        per file group (the ordering values are kept when :attr:`AssignerConfig.compares_moves`).

        Only keys routed to this task are kept.
        """
        for part, fid, keys, *rest in entries:
            if len(keys) == 0:
                continue
            ords = rest[0] if rest and self.config.compares_moves else None
            if self.config.num_tasks > 1:
                mask = pa.array(key_task(keys, self.config.num_tasks) == self.config.task_id)
                keys = pc.filter(keys, mask)
                ords = pc.filter(ords, mask) if ords is not None else None
            lid = self.index.location_id(part, fid)
            self.index.put(
                self._index_keys(keys, part),
                np.full(len(keys), lid, dtype=np.int32),
                ords=ordering_numbers(ords) if ords is not None else None,
            )

    def bootstrap_without_ordering(
        self,
        entries: Iterable[tuple[str, str, pa.Array]],
        ordering_type: pa.DataType,
        loader: Callable[[str, str], tuple[pa.Array, pa.Array]],
    ) -> None:
        """Load the key index from keys and locations only (the metadata table's record index),
        when moves compare ordering values: those are read per file group, from ``loader``
        (``(partition, file id) -> (keys, ordering values)`` of its live records), the first
        time a record arrives for one of its keys in another partition, or a delete -- as
        Java's record index reads the old location of a key that changes partition."""
        dtype = ordering_numbers(pa.array([], ordering_type))
        if dtype is None:  # the index keeps no ordering values for this type
            self.bootstrap(entries)
            return
        self._ordering_loader = loader
        self._ordering_loaded: set[int] = set()
        for part, fid, keys in entries:
            if len(keys):
                self.bootstrap([(part, fid, keys, pa.nulls(len(keys), ordering_type))])

    def _load_orderings(
        self,
        need: np.ndarray,
        loc_ids: np.ndarray,
        seg_of: np.ndarray,
        pos_of: np.ndarray,
        stored: np.ndarray,
    ) -> np.ndarray:
        """``stored`` with the unknown ordering values of the ``need`` rows read from their
        file groups (each group once per job: later records set the values in memory)."""
        loader = getattr(self, "_ordering_loader", None)
        if loader is None:
            return stored
        missing = need & ordering_nulls(stored)
        lids = [int(x) for x in np.unique(loc_ids[missing]) if int(x) not in self._ordering_loaded]
        if not lids:
            return stored
        parts, fids = self.index.location_arrays()
        for lid in lids:
            self._ordering_loaded.add(lid)
            keys, ords = loader(str(parts[lid]), str(fids[lid]))
            if not len(keys):
                continue
            part = str(parts[lid])
            ikeys = self._index_keys(keys, pa.repeat(pa.scalar(part), len(keys)))
            ids, seg, pos = self.index.probe(ikeys)
            values = ordering_numbers(ords)
            if values is None:
                continue
            now = self.index.ordering_at(seg, pos)
            # only where still unknown and the key still lives in this group
            take = (ids == lid) & ordering_nulls(now)
            self.index.set_ordering(np.where(take, seg, -1), pos, np.where(take, values, now))
        return self.index.ordering_at(seg_of, pos_of)

    def _index_keys(
        self, keys: pa.Array | pa.ChunkedArray, parts: pa.Array | pa.ChunkedArray | str
    ) -> pa.Array:
        if self.config.global_index:
            return keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        # A non-global index keys by (partition, record key).
        return pc.binary_join_element_wise(parts, keys, "\x00")

    # -- assignment ----------------------------------------------------------------------------
    def assign_batch(self, batch: pa.Table) -> pa.Table:
        """Tag a batch as it arrives at the task: one row per key first (unless appending),
        so a key never reaches two file groups, then :meth:`assign`. The key hashes serve the
        precombine and the index lookup."""
        hashes = None
        if not self.config.append_mode:
            hashes = hash_keys(batch.column(RECORD_KEY))
            if self.config.unfolded:
                return self._assign_changes(batch, hashes)
            if self._routes_repeats(batch):
                return self.assign(batch, key_hashes=hashes)
            rows, unique = self._fold_plan(batch, hashes)
            if rows is not None:  # a few repeated keys: a filter copies less than a take
                keep = np.zeros(batch.num_rows, dtype=bool)
                keep[rows] = True
                batch, hashes = batch.filter(pa.array(keep)), hashes[rows]
            if not unique:
                return self.assign(batch, key_hashes=hashes)
        return self.assign(batch, key_hashes=hashes, unique_keys=hashes is not None)

    def _fold_plan(self, batch: pa.Table, hashes: np.ndarray) -> tuple[np.ndarray | None, bool]:
        """:func:`precombine_plan` of the batch by record key, or with a non-global index by
        partition and record key (a key may live in several partitions there)."""
        if self.config.global_index:
            return precombine_plan(batch, self.config.ordering_field, key_hashes=hashes)
        return precombine_plan(by_partition_and_key(batch), self.config.ordering_field)

    def _assign_changes(self, batch: pa.Table, hashes: np.ndarray) -> pa.Table:
        """Changelog mode and partial updates (the writer folds them, or keeps them all): every
        row goes on, in arrival order. The rows that stand for the
        fold of each key (:func:`precombine_plan`) are assigned as usual, so the index and
        every placement rule see what they see without changelog; each other row of a key
        follows the key's last such row (its file group, bucket type, new-key flag and
        partition), and is dropped with it (a delete of a key nobody has)."""
        rows, unique = self._fold_plan(batch, hashes)
        if rows is None:
            return self.assign(batch, key_hashes=hashes, unique_keys=True)
        n = batch.num_rows
        if self.config.global_index:
            gid, ngroups = group_keys(batch.column(RECORD_KEY), hashes=hashes)
        else:
            gid, ngroups = group_keys(by_partition_and_key(batch).column(RECORD_KEY))
        last = np.full(ngroups, -1, dtype=np.int64)  # each key's last folded row
        np.maximum.at(last, gid[rows], rows)
        folded = batch.take(pa.array(rows)).append_column(_ROW, pa.array(rows))
        tagged = self.assign(folded, key_hashes=hashes[rows], unique_keys=unique)
        pos = tagged.column(_ROW).to_numpy()
        # a moved key's delete of its old copy comes first and shares its row: the later wins
        _, first_from_end = np.unique(pos[::-1], return_index=True)
        latest = len(pos) - 1 - first_from_end
        at = np.full(n, -1, dtype=np.int64)
        at[pos[latest]] = latest
        real = np.zeros(len(pos), dtype=bool)
        real[latest] = True
        source = at[last[gid]]
        keep = source >= 0
        src = pa.array(source[keep])
        out = batch.filter(pa.array(keep)) if not keep.all() else batch
        out = _set_column(out, PARTITION_PATH, tagged.column(PARTITION_PATH).take(src))
        out = _with_tags(
            out,
            tagged.column(FILE_ID).take(src),
            tagged.column(BUCKET_TYPE).take(src),
            tagged.column(IS_NEW).to_numpy(zero_copy_only=False)[source[keep]],
        )
        old_copies = tagged.filter(pa.array(~real)).drop_columns([_ROW])
        return pa.concat_tables([old_copies, out]) if old_copies.num_rows else out

    def _routes_repeats(self, batch: pa.Table) -> bool:
        """Can the rows of one key go on unfolded? The writers precombine each flush anyway,
        and repeated rows of a key all reach its one group (a found key's, or the group its
        first new row gets) as long as no key can move partition, no row is a delete (an
        unknown key's delete is dropped here, which only the folded winner may decide) and
        nothing compares ordering values or keeps a record index."""
        cfg = self.config
        if cfg.partitioned or cfg.compares_moves or self.forget_deleted_keys:
            return False
        deleted = batch.column(IS_DELETED)
        return not (deleted.null_count < len(deleted) and pc.any(deleted).as_py())

    def assign(
        self,
        batch: pa.Table,
        *,
        key_hashes: np.ndarray | None = None,
        unique_keys: bool = False,
    ) -> pa.Table:
        """Tag a batch of prepared records (routing columns present) with file id and bucket type.

        With the global index, a key whose partition changed yields a delete row for its old
        location and an insert into the new partition. Deletes of unknown keys are dropped.
        With :attr:`forget_deleted_keys` (the table keeps a record index), a key whose delete
        wins for certain leaves the index once its delete row is routed: its next record is
        a new key, counted as one (``IS_NEW``), so the record index gets it back.
        ``unique_keys``: the caller made the batch one row per key (the index skips its check).
        """
        self._won_deletes: pa.Array | None = None
        self._unique_keys = unique_keys
        out = self._assign(batch, key_hashes=key_hashes)
        if self._won_deletes is not None and len(self._won_deletes):
            self.index.remove(self._won_deletes)
        self._won_deletes = None
        return out

    def _assign(self, batch: pa.Table, *, key_hashes: np.ndarray | None = None) -> pa.Table:
        if batch.num_rows == 0:
            return _with_tags(
                batch, _NO_FILE_IDS, pa.array([], pa.string()), np.zeros(0, dtype=bool)
            )
        if self.config.index_type == "BUCKET":
            out = self._assign_bucket(batch)
            return out.append_column(IS_NEW, pa.array(np.zeros(out.num_rows, dtype=bool)))
        if self.config.append_mode:
            fids, types = self._assign_new(batch.column(PARTITION_PATH))
            return _with_tags(batch, fids, types, np.ones(batch.num_rows, dtype=bool))
        return self._assign_upsert(batch, key_hashes)

    def _assign_upsert(self, batch: pa.Table, key_hashes: np.ndarray | None) -> pa.Table:
        """Hudi's tagLocation, then the placement of new records: found keys keep their file
        group; with the global index a key arriving in another partition moves there (after
        ``mergeForPartitionUpdatesIfNeeded`` when moves compare ordering values) and leaves a
        delete of its old copy; new keys fill small file groups, then new ones."""
        probe = self._tag_location(batch, key_hashes)
        moved = self._partition_moves(probe)
        older = np.zeros(batch.num_rows, dtype=bool)
        ords = self._ordering_of(batch)
        if ords is not None:
            moved, older = self._merge_for_partition_updates(batch, probe, ords, moved)
        elif self.forget_deleted_keys and self._deletes_win():
            self._won_deletes = probe.ikeys.filter(pa.array(probe.found & probe.deleted))
        row_lid, is_insert, new_rows = self._locate(probe, moved, ords)
        loc_parts, loc_fids = self.index.location_columns()
        # deletes of keys nobody has are dropped, and records older than their moved key's
        keep = ~(~probe.found & probe.deleted) & ~older
        kept: np.ndarray | slice = slice(None) if keep.all() else keep  # a view when all stay
        out = batch if isinstance(kept, slice) else batch.filter(pa.array(keep))
        k_lid = row_lid[kept]
        moved_del = (moved & probe.deleted)[kept]
        if moved_del.any():
            # A delete that names a new partition deletes the row where it is.
            kept_parts = (
                probe.parts if isinstance(kept, slice) else probe.parts.filter(pa.array(keep))
            )
            new_parts = pc.if_else(
                pa.array(moved_del), loc_parts.take(pa.array(k_lid)), kept_parts.cast(pa.string())
            )
            out = _set_column(out, PARTITION_PATH, new_parts)
        fids = file_id_column(k_lid, loc_fids)
        out = _with_tags(out, fids, _bucket_types(is_insert[kept]), new_rows[kept])
        move_ins = moved & ~probe.deleted
        if not move_ins.any():
            return out
        old_lids = pa.array(probe.safe_ids[move_ins])
        old_copies = self._old_copy_deletes(batch.filter(pa.array(move_ins)))
        old_copies = _set_column(old_copies, PARTITION_PATH, loc_parts.take(old_lids))
        old_copies = _with_tags(
            old_copies,
            file_id_column(probe.safe_ids[move_ins], loc_fids),
            pa.repeat(pa.scalar(UPDATE_BUCKET, pa.string()), old_copies.num_rows),
            np.zeros(old_copies.num_rows, dtype=bool),
        )
        return pa.concat_tables([old_copies, out])

    def _tag_location(self, batch: pa.Table, key_hashes: np.ndarray | None) -> _Probe:
        """Look the batch's keys up in the key index (Hudi's tagLocation)."""
        keys = batch.column(RECORD_KEY).combine_chunks()
        parts = batch.column(PARTITION_PATH).combine_chunks()
        deleted = batch.column(IS_DELETED).combine_chunks().to_numpy(zero_copy_only=False)
        # Partitions as codes into the batch's few distinct values: no Python object per row.
        penc = encode_strings(parts)
        ikeys = self._index_keys(keys, parts)
        # ``key_hashes`` (hash_keys of the record keys) are the index's hashes with the global
        # index only; a non-global index keys by partition + record key.
        hashes = (
            hash_keys(ikeys) if key_hashes is None or not self.config.global_index else key_hashes
        )
        fps = fingerprint_keys(ikeys)  # once: the probe's, and the new keys' in put
        loc_ids, seg_of, pos_of = self.index.probe(ikeys, hashes=hashes, fingerprints=fps)
        found = loc_ids >= 0
        return _Probe(
            parts=parts,
            deleted=deleted,
            pcode=penc.indices.to_numpy(zero_copy_only=False).astype(np.int64),
            pdict=penc.dictionary.to_pylist(),
            ikeys=ikeys,
            hashes=hashes,
            fps=fps,
            seg_of=seg_of,
            pos_of=pos_of,
            found=found,
            safe_ids=np.where(found, loc_ids, 0).astype(np.int64),
        )

    def _partition_moves(self, probe: _Probe) -> np.ndarray:
        """Rows whose key the global index holds in another partition."""
        n_loc = len(self.index.locations)
        if not (self.config.global_index and n_loc and probe.found.any()):
            return np.zeros(len(probe.found), dtype=bool)
        code_of = {p: i for i, p in enumerate(probe.pdict)}
        loc_parts, _ = self.index.location_arrays()
        loc_pcode = np.array([code_of.get(p, -1) for p in loc_parts.tolist()], np.int64)
        return probe.found & (loc_pcode[probe.safe_ids] != probe.pcode)

    def _merge_for_partition_updates(
        self, batch: pa.Table, probe: _Probe, ords: np.ndarray, moved: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Compare each found key's record with its stored copy: an older record moves
        nothing (it is dropped, as the merge would drop it); the index keeps the winner's
        ordering value. Returns (moved, older)."""
        found, deleted, seg_of, pos_of = probe.found, probe.deleted, probe.seg_of, probe.pos_of
        stored = self.index.ordering_at(seg_of, pos_of)
        # every known key: a plain update must not set a value below the stored one's
        stored = self._load_orderings(found, probe.safe_ids, seg_of, pos_of, stored)
        newer = ordering_at_least(ords, stored)
        # A delete older than the stored copy loses the merge: a no-op, dropped here so
        # that nothing downstream (the record index) counts the key as deleted. Except an
        # int ordering value of 0: a log reader takes it for Java's default and lets the
        # delete win (merge.py); a copy-on-write merge decides those itself.
        field = self.config.ordering_field
        int_zero = np.zeros(len(ords), dtype=bool)
        if field and pa.types.is_int32(batch.schema.field(field).type):
            int_zero = np.asarray(ords == 0, dtype=bool)
        older = (moved & ~deleted & ~newer) | (found & deleted & ~newer & ~int_zero)
        if self.forget_deleted_keys:
            self._won_deletes = probe.ikeys.filter(pa.array(found & deleted & newer))
        # a winning delete leaves no ordering value: the next record of the key is an
        # insert, whatever its ordering value (the stored copy is gone)
        kept_ord = np.where(deleted, unknown_ordering(len(ords), ords.dtype), ords)
        self.index.set_ordering(
            np.where(found & ~older, seg_of, -1), pos_of, np.where(newer, kept_ord, stored)
        )
        return moved & ~older, older

    def _deletes_win(self) -> bool:
        """A delete always wins its merge (no ordering field, or commit-time ordering)."""
        cfg = self.config
        return cfg.ordering_field is None or cfg.merge_mode is MergeMode.COMMIT_TIME_ORDERING

    def _locate(
        self, probe: _Probe, moved: np.ndarray, ords: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each row's file group location id and whether it is an insert bucket, placing new
        keys (unknown, or moved to another partition) that are not deletes, which the index
        then holds. Returns (location ids, is insert, new rows)."""
        row_lid = probe.safe_ids.copy()  # found rows' locations for now
        is_insert = np.zeros(len(row_lid), dtype=bool)
        stay = probe.found & ~moved
        if stay.any():
            new_loc = self._new_location_mask(len(self.index.locations))
            is_insert[stay & new_loc[probe.safe_ids]] = True
        new_rows = (~probe.found | moved) & ~probe.deleted
        if not new_rows.any():
            return row_lid, is_insert, new_rows
        idx = np.flatnonzero(new_rows)
        idx_arr = pa.array(idx)
        # the new keys grouped once: their placement and the index's put both need it
        grouping = (
            None
            if self._unique_keys
            else group_keys(probe.ikeys.take(idx_arr), hashes=probe.hashes[idx])
        )
        fid_list, fcode, ins = self._assign_new_codes(probe.parts.take(idx_arr), grouping)
        # Index: inserted keys point at their group. Deleted keys keep their location: an
        # event-time delete may lose to a newer stored record, and a later upsert of a
        # deleted key is correct in its old group anyway.
        new_lids = self._intern_locations(probe.pdict, probe.pcode[idx], fid_list, fcode)
        row_lid[idx] = new_lids
        is_insert[idx] = ins
        put = idx
        if grouping is not None and grouping[1] < len(idx):
            # each key's last row (the index's put keeps later duplicates' ordering values)
            last = np.empty(grouping[1], dtype=np.int64)
            last[grouping[0]] = np.arange(len(idx), dtype=np.int64)
            keep = np.sort(last)
            put, new_lids = idx[keep], new_lids[keep]
        self.index.put(
            probe.ikeys.take(pa.array(put)) if len(put) < len(new_rows) else probe.ikeys,
            new_lids,
            hashes=probe.hashes[put],
            unique=True,
            probed=(probe.seg_of[put], probe.pos_of[put]),
            ords=ords[put] if ords is not None else None,
            fingerprints=probe.fps[put],
        )
        return row_lid, is_insert, new_rows

    def _old_copy_deletes(self, moved: pa.Table) -> pa.Table:
        """The records of keys that moved partition as deletes of their old copies (the
        caller points them at the old location)."""
        moved = _set_column(moved, IS_DELETED, pa.array(np.ones(moved.num_rows, dtype=bool)))
        field = self.config.ordering_field
        if field and field in moved.column_names:
            # Like Flink's empty-payload delete: default ordering, so it always wins.
            ftype = moved.schema.field(field).type
            moved = _set_column(moved, field, pa.nulls(moved.num_rows, ftype))
        return moved

    def _ordering_of(self, batch: pa.Table) -> np.ndarray | None:
        """The batch's ordering values as index numbers, when moves are compared."""
        field = self.config.ordering_field
        if not self.config.compares_moves or field is None or field not in batch.column_names:
            return None
        return ordering_numbers(batch.column(field))

    def _intern_locations(
        self, pdict: list[str], pcodes: np.ndarray, fid_list: list[str], fcodes: np.ndarray
    ) -> np.ndarray:
        """Location ids of rows given as (partition code, file id code); one dict probe per
        distinct pair, interned in order of first appearance."""
        if not len(pcodes):
            return np.empty(0, dtype=np.int32)
        combo = pcodes.astype(np.int64) * max(len(fid_list), 1) + fcodes.astype(np.int64)
        uniq, first, inv = np.unique(combo, return_index=True, return_inverse=True)
        ids = np.empty(len(uniq), dtype=np.int32)
        nf = max(len(fid_list), 1)
        for u in np.argsort(first, kind="stable").tolist():
            c = int(uniq[u])
            ids[u] = self.index.location_id(pdict[c // nf], fid_list[c % nf])
        return ids[inv.reshape(-1)]

    def _new_location_mask(self, n: int) -> np.ndarray:
        """Per location id: is it a file group created in this checkpoint?"""
        mask = np.zeros(max(n, 1), dtype=bool)
        for part, fid in self._new_groups():
            lid = self.index._loc_ids.get(Location(part, fid))
            if lid is not None and lid < n:
                mask[lid] = True
        return mask

    def _new_groups(self) -> set[tuple[str, str]]:
        return {(p, f.file_id) for p, fs in self._small.items() for f in fs if f.is_new}

    def _assign_new(self, parts: pa.Array) -> tuple[pa.Array, pa.Array]:
        """Place new records (appends: every row its own): small file groups of this task
        first, then new file groups."""
        fid_list, fcode, ins = self._assign_new_codes(parts)
        return file_id_column(fcode, pa.array(fid_list, pa.string())), _bucket_types(ins)

    def _assign_new_codes(
        self, parts: pa.Array, grouping: tuple[np.ndarray, int] | None = None
    ) -> tuple[list[str], np.ndarray, np.ndarray]:
        """:meth:`_assign_new` as codes: (file ids, file id code per row, is-insert per row).
        ``grouping``: the rows' keys by :func:`group_keys` (rows of one key share a group);
        None: every row is a key of its own."""
        if isinstance(parts, pa.ChunkedArray):
            parts = parts.combine_chunks()
        n = len(parts)
        if grouping is not None:
            # one slot per distinct (key) so duplicates share a group: each key's first row
            ind, ngroups = grouping
            first = np.full(ngroups, n, dtype=np.int64)
            first[ind[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
            rep_rows = np.sort(first)
        else:
            ind = None
            rep_rows = np.arange(n)
        penc = encode_strings(parts)
        pcode = penc.indices.to_numpy(zero_copy_only=False)
        pdict = penc.dictionary.to_pylist()
        rep_pc = pcode[rep_rows]
        rep_fcode = np.empty(len(rep_rows), dtype=np.int32)
        rep_ins = np.empty(len(rep_rows), dtype=bool)
        fid_list: list[str] = []
        if len(rep_rows):
            uniq, first_at = np.unique(rep_pc, return_index=True)
            for code in uniq[np.argsort(first_at, kind="stable")].tolist():
                sel = np.flatnonzero(rep_pc == code)
                done = 0
                for fid, is_ins, cnt in self._fill_partition(pdict[code], len(sel)):
                    rows = sel[done : done + cnt]
                    rep_fcode[rows] = len(fid_list)
                    rep_ins[rows] = is_ins
                    fid_list.append(fid)
                    done += cnt
        if ind is None:
            return fid_list, rep_fcode, rep_ins
        # map each row to its distinct key's representative
        rep_of_dict = np.empty(int(ind.max()) + 1 if n else 0, dtype=np.int64)
        rep_of_dict[ind[rep_rows]] = np.arange(len(rep_rows))
        r = rep_of_dict[ind]
        return fid_list, rep_fcode[r], rep_ins[r]

    def _fill_partition(self, part: str, count: int) -> list[tuple[str, bool, int]]:
        """Runs ``(file id, is insert bucket, records)`` placing ``count`` new records."""
        cfg = self.config
        avg = max(1, self.profile.avg_record_size)
        per_bucket = max(1, cfg.max_file_size // avg)
        runs: list[tuple[str, bool, int]] = []
        done = 0
        small = self._small.setdefault(part, [])
        if cfg.num_writers > 1 and len(small) > 1 and count > 1:
            # Each writer's small files take an even share first: packing every insert into
            # the first small file would hand one writer all inserts and, as its group grows,
            # most updates too (the writer plan cannot split one file group).
            nw = cfg.num_writers
            owners = writer_of_groups(
                [(part, f.file_id) for f in small], nw, self.profile.writer_plan
            ).tolist()
            quota = [count // nw + (1 if w < count % nw else 0) for w in range(nw)]
            for f, w in zip(small, owners, strict=True):
                cap = self._capacity.get((part, f.file_id), 0)
                take = min(cap, quota[w])
                if take > 0:
                    runs.append((f.file_id, f.is_new, take))
                    self._capacity[(part, f.file_id)] = cap - take
                    quota[w] -= take
                    done += take
        for f in small:
            if done >= count:
                break
            cap = self._capacity.get((part, f.file_id), 0)
            if cap <= 0:
                continue
            take = min(cap, count - done)
            runs.append((f.file_id, f.is_new, take))
            self._capacity[(part, f.file_id)] = cap - take
            done += take
        while done < count:
            fid = self._new_file_id(part)
            take = min(per_bucket, count - done)
            runs.append((fid, True, take))
            self._small[part].append(SmallFile(fid, 0, is_new=True))
            self._capacity[(part, fid)] = per_bucket - take
            done += take
        return runs

    def _new_file_id(self, part: str) -> str:
        """A new file id this task owns. With as many writers as assigners its home writer
        is this task's own (:func:`home_writers`); else the id is drawn so that its home
        writer is the next one in turn: new file groups spread evenly over the writers
        whatever the ids (a hash of a few ids can put them all on one writer)."""
        cfg = self.config
        if cfg.num_writers <= 1 or cfg.num_writers == cfg.num_tasks:
            return new_file_id_for_task(cfg.task_id, cfg.num_tasks)
        target = self._next_writer % cfg.num_writers
        self._next_writer += 1
        for _ in range(64 * cfg.num_writers):
            fid = new_file_id_for_task(cfg.task_id, cfg.num_tasks)
            if int(writer_of_groups([(part, fid)], cfg.num_writers)[0]) == target:
                return fid
        return fid

    # -- bucket index --------------------------------------------------------------------------
    def set_bucket_file_ids(self, existing: Iterable[tuple[str, str]]) -> None:
        """Known file groups of a bucket-index table: ``(partition, file id)``."""
        for part, fid in existing:
            try:
                b = int(fid[:8])
            except ValueError:
                continue
            self._bucket_file_ids[(part, b)] = fid

    def _assign_bucket(self, batch: pa.Table) -> pa.Table:
        keys = batch.column(RECORD_KEY)
        parts = batch.column(PARTITION_PATH)
        penc = encode_strings(parts)
        pcode = penc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        pdict = penc.dictionary.to_pylist()
        b = bucket_ids(keys, self.config.bucket_num, self.config.record_key_fields)
        b = b.astype(np.int64)
        combo = pcode * self.config.bucket_num + b
        uniq, inv = np.unique(combo, return_inverse=True)
        fid_list: list[str] = []
        ins = np.empty(len(uniq), dtype=bool)
        new_groups = self._new_groups()
        for u, c in enumerate(uniq.tolist()):
            part, bucket = pdict[c // self.config.bucket_num], c % self.config.bucket_num
            fid = self._bucket_file_ids.get((part, bucket))
            if fid is None:
                fid = (
                    nbcc_bucket_file_id(bucket)
                    if self.config.fixed_bucket_ids
                    else f"{bucket_file_id_prefix(bucket)}{str(uuid.uuid4())[8:]}-0"
                )
                self._bucket_file_ids[(part, bucket)] = fid
                self._small.setdefault(part, []).append(SmallFile(fid, 0, is_new=True))
                new_groups.add((part, fid))
            fid_list.append(fid)
            ins[u] = (part, fid) in new_groups
        inv = inv.reshape(-1)
        fids = file_id_column(inv, pa.array(fid_list, pa.string()))
        types = _bucket_types(ins[inv])
        return batch.append_column(FILE_ID, fids).append_column(BUCKET_TYPE, types)

    def checkpoint_done(self) -> None:
        """After a commit: groups created in it are no longer new."""
        for files in self._small.values():
            for f in files:
                f.is_new = False
