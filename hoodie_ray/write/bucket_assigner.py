"""Bucket assignment: which file group each record goes to (Flink BucketAssignFunction).

One :class:`BucketAssigner` per assigner task. It holds the key index for the keys routed to it
(``hash(record key) % write.bucket_assign.tasks``), and owns the small file groups and new file
ids whose ``crc32(file id) % tasks`` equals its task id, so two tasks never write one file group.

Tags are two columns appended to the batch: ``_hoodie_file_id`` and ``_hoodie_bucket_type``
(``I`` = a new file group whose base file this checkpoint creates, ``U`` = an existing group).
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.index import KeyIndex, Location, bucket_file_id_prefix, bucket_ids
from hoodie_ray.write.records import IS_DELETED, PARTITION_PATH, RECORD_KEY

FILE_ID = "_hoodie_file_id"
BUCKET_TYPE = "_hoodie_bucket_type"
INSERT_BUCKET = "I"
UPDATE_BUCKET = "U"
LOG_TO_PARQUET_RATIO = 0.35  # hoodie.logfile.to.parquet.compression.ratio


def file_id_task(file_id: str, num_tasks: int) -> int:
    """The assigner task that owns a file group."""
    return zlib.crc32(file_id.encode()) % num_tasks


def new_file_id_for_task(task_id: int, num_tasks: int) -> str:
    """A fresh ``<uuid>-0`` file id owned by ``task_id``."""
    while True:
        fid = f"{uuid.uuid4()}-0"
        if file_id_task(fid, num_tasks) == task_id:
            return fid


def key_task(keys: pa.Array | pa.ChunkedArray, num_tasks: int) -> np.ndarray:
    """The assigner task of each record key (stable across processes)."""
    if num_tasks == 1:
        return np.zeros(len(keys), dtype=np.int32)
    import pandas as pd

    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    h = pd.util.hash_array(
        np.asarray(keys.to_numpy(zero_copy_only=False), dtype=object), categorize=False
    )
    return (h % np.uint64(num_tasks)).astype(np.int32)


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


@dataclass(frozen=True)
class AssignerConfig:
    task_id: int = 0
    num_tasks: int = 1
    small_file_limit: int = 104857600
    max_file_size: int = 125829120
    index_type: str = "FLINK_STATE"
    global_index: bool = True
    bucket_num: int = 4
    append_mode: bool = False  # insert operation: no index lookups
    ordering_field: str | None = None


class BucketAssigner:
    """Tags records with their file group; holds the key index state of one task."""

    def __init__(self, config: AssignerConfig, profile: WriteProfile | None = None) -> None:
        self.config = config
        self.index = KeyIndex()
        self.profile = profile or WriteProfile(avg_record_size=1024)
        self._small: dict[str, list[SmallFile]] = {}
        self._capacity: dict[tuple[str, str], int] = {}
        self._bucket_file_ids: dict[tuple[str, int], str] = {}
        self.reset_profile(self.profile)

    # -- state ---------------------------------------------------------------------------------
    def reset_profile(self, profile: WriteProfile) -> None:
        """Start of a checkpoint: refresh small files and capacities from the committed table."""
        self.profile = profile
        cfg = self.config
        avg = max(1, profile.avg_record_size)
        self._small = {}
        self._capacity = {}
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

    def bootstrap(self, entries: Iterable[tuple[str, str, pa.Array]]) -> None:
        """Load the key index: ``(partition path, file id, record keys)`` per file group.

        Only keys routed to this task are kept.
        """
        for part, fid, keys in entries:
            if len(keys) == 0:
                continue
            if self.config.num_tasks > 1:
                mask = key_task(keys, self.config.num_tasks) == self.config.task_id
                keys = pc.filter(keys, pa.array(mask))
            lid = self.index.location_id(part, fid)
            self.index.put(self._index_keys(keys, part), np.full(len(keys), lid, dtype=np.int32))

    def _index_keys(
        self, keys: pa.Array | pa.ChunkedArray, parts: pa.Array | pa.ChunkedArray | str
    ) -> pa.Array:
        if self.config.global_index:
            return keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        # A non-global index keys by (partition, record key).
        return pc.binary_join_element_wise(parts, keys, "\x00")

    # -- assignment ----------------------------------------------------------------------------
    def assign(self, batch: pa.Table) -> pa.Table:
        """Tag a batch of prepared records (routing columns present) with file id and bucket type.

        With the global index, a key whose partition changed yields a delete row for its old
        location and an insert into the new partition. Deletes of unknown keys are dropped.
        """
        if batch.num_rows == 0:
            return batch.append_column(FILE_ID, pa.array([], pa.string())).append_column(
                BUCKET_TYPE, pa.array([], pa.string())
            )
        if self.config.index_type == "BUCKET":
            return self._assign_bucket(batch)
        if self.config.append_mode:
            fids, types = self._assign_new(batch.column(PARTITION_PATH), None)
            return batch.append_column(FILE_ID, fids).append_column(BUCKET_TYPE, types)

        keys = batch.column(RECORD_KEY).combine_chunks()
        parts = batch.column(PARTITION_PATH).combine_chunks()
        deleted = batch.column(IS_DELETED).combine_chunks().to_numpy(zero_copy_only=False)
        parts_np = np.asarray(parts.to_numpy(zero_copy_only=False), dtype=object)
        ikeys = self._index_keys(keys, parts)
        loc_ids = self.index.lookup(ikeys)
        loc_parts, loc_fids = self.index.location_arrays()
        n = batch.num_rows

        found = loc_ids >= 0
        safe_ids = np.where(found, loc_ids, 0)
        old_part = loc_parts[safe_ids] if len(loc_parts) else np.full(n, "", dtype=object)
        old_fid = loc_fids[safe_ids] if len(loc_fids) else np.full(n, "", dtype=object)
        moved = found & (old_part != parts_np) if self.config.global_index else np.zeros(n, bool)

        file_ids = old_fid.astype(object).copy()
        file_ids[~found] = None
        btypes = np.full(n, UPDATE_BUCKET, dtype=object)
        stay = found & ~moved
        if stay.any():
            new_loc = self._new_location_mask(len(loc_parts))
            btypes[stay & new_loc[safe_ids]] = INSERT_BUCKET

        # New keys (unknown, or moved to another partition) that are not deletes get a group.
        new_rows = (~found | moved) & ~deleted
        if new_rows.any():
            idx = pa.array(np.flatnonzero(new_rows))
            fids, types = self._assign_new(pc.take(parts, idx), pc.take(ikeys, idx))
            file_ids[new_rows] = fids.to_numpy(zero_copy_only=False)
            btypes[new_rows] = types.to_numpy(zero_copy_only=False)

        # Index: inserted keys point at their group. Deleted keys keep their location: an
        # event-time delete may lose to a newer stored record, and a later upsert of a deleted
        # key is correct in its old group anyway.
        if new_rows.any():
            lids = self.index.location_ids(parts_np[new_rows], file_ids[new_rows])
            self.index.put(pc.filter(ikeys, pa.array(new_rows)), lids)

        # A delete that names a new partition deletes the row where it is.
        parts_out = np.where(moved & deleted, old_part, parts_np)
        out = batch.set_column(
            batch.schema.get_field_index(PARTITION_PATH),
            PARTITION_PATH,
            pa.array(parts_out, pa.string()),
        )
        out = out.append_column(FILE_ID, pa.array(file_ids, pa.string()))
        out = out.append_column(BUCKET_TYPE, pa.array(btypes, pa.string()))
        out = out.filter(pa.array(~(~found & deleted)))  # deletes of keys nobody has
        move_ins = moved & ~deleted
        if not move_ins.any():
            return out
        # The old copy of a key that moved partition is deleted where it was.
        mask = pa.array(move_ins)
        extra = batch.filter(mask)
        extra = extra.set_column(
            extra.schema.get_field_index(PARTITION_PATH),
            PARTITION_PATH,
            pa.array(old_part[move_ins], pa.string()),
        )
        extra = extra.set_column(
            extra.schema.get_field_index(IS_DELETED),
            IS_DELETED,
            pa.array(np.ones(extra.num_rows, dtype=bool)),
        )
        if self.config.ordering_field and self.config.ordering_field in extra.column_names:
            # Like Flink's empty-payload delete: default ordering, so it always wins.
            oi = extra.schema.get_field_index(self.config.ordering_field)
            extra = extra.set_column(
                oi,
                self.config.ordering_field,
                pa.nulls(extra.num_rows, extra.schema.field(oi).type),
            )
        extra = extra.append_column(FILE_ID, pa.array(old_fid[move_ins], pa.string()))
        extra = extra.append_column(
            BUCKET_TYPE, pa.array(np.full(extra.num_rows, UPDATE_BUCKET), pa.string())
        )
        return pa.concat_tables([extra, out])

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

    def _assign_new(self, parts: pa.Array, keys: pa.Array | None) -> tuple[pa.Array, pa.Array]:
        """Place new records: small file groups of this task first, then new file groups.

        Duplicate keys among them land in one group (assignment is per distinct key).
        """
        n = len(parts)
        out_fid = np.empty(n, dtype=object)
        out_type = np.empty(n, dtype=object)
        if keys is not None:
            # one slot per distinct (key) so duplicates share a group
            enc = pc.dictionary_encode(keys)
            ind = enc.indices.to_numpy(zero_copy_only=False)
            _, first = np.unique(ind, return_index=True)
            rep_rows = np.sort(first)
            row_to_rep = ind
        else:
            rep_rows = np.arange(n)
            row_to_rep = None
        parts_np = np.asarray(parts.to_numpy(zero_copy_only=False), dtype=object)
        rep_parts = parts_np[rep_rows]
        rep_fid = np.empty(len(rep_rows), dtype=object)
        rep_type = np.empty(len(rep_rows), dtype=object)
        for part in dict.fromkeys(rep_parts.tolist()):
            sel = np.flatnonzero(rep_parts == part)
            fids, types = self._fill_partition(part, len(sel))
            rep_fid[sel] = fids
            rep_type[sel] = types
        if row_to_rep is None:
            out_fid[:], out_type[:] = rep_fid, rep_type
        else:
            # map each row to its distinct key's representative
            rep_of_dict = np.empty(int(ind.max()) + 1 if n else 0, dtype=np.int64)
            rep_of_dict[ind[rep_rows]] = np.arange(len(rep_rows))
            r = rep_of_dict[row_to_rep]
            out_fid[:], out_type[:] = rep_fid[r], rep_type[r]
        return pa.array(out_fid.tolist(), pa.string()), pa.array(out_type.tolist(), pa.string())

    def _fill_partition(self, part: str, count: int) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.config
        avg = max(1, self.profile.avg_record_size)
        per_bucket = max(1, cfg.max_file_size // avg)
        fids = np.empty(count, dtype=object)
        types = np.empty(count, dtype=object)
        done = 0
        for f in self._small.setdefault(part, []):
            if done >= count:
                break
            cap = self._capacity.get((part, f.file_id), 0)
            if cap <= 0:
                continue
            take = min(cap, count - done)
            fids[done : done + take] = f.file_id
            types[done : done + take] = INSERT_BUCKET if f.is_new else UPDATE_BUCKET
            self._capacity[(part, f.file_id)] = cap - take
            done += take
        while done < count:
            fid = new_file_id_for_task(cfg.task_id, cfg.num_tasks)
            take = min(per_bucket, count - done)
            fids[done : done + take] = fid
            types[done : done + take] = INSERT_BUCKET
            self._small[part].append(SmallFile(fid, 0, is_new=True))
            self._capacity[(part, fid)] = per_bucket - take
            done += take
        return fids, types

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
        parts = np.asarray(batch.column(PARTITION_PATH).to_numpy(), dtype=object)
        b = bucket_ids(keys, self.config.bucket_num)
        fids = np.empty(len(b), dtype=object)
        types = np.empty(len(b), dtype=object)
        for part, bucket in {(p, int(x)) for p, x in zip(parts.tolist(), b.tolist(), strict=True)}:
            sel = (parts == part) & (b == bucket)
            fid = self._bucket_file_ids.get((part, bucket))
            if fid is None:
                fid = f"{bucket_file_id_prefix(bucket)}{str(uuid.uuid4())[8:]}-0"
                self._bucket_file_ids[(part, bucket)] = fid
                self._small.setdefault(part, []).append(SmallFile(fid, 0, is_new=True))
            is_new = (part, fid) in self._new_groups()
            fids[sel] = fid
            types[sel] = INSERT_BUCKET if is_new else UPDATE_BUCKET
        return batch.append_column(FILE_ID, pa.array(fids.tolist(), pa.string())).append_column(
            BUCKET_TYPE, pa.array(types.tolist(), pa.string())
        )

    def checkpoint_done(self) -> None:
        """After a commit: groups created in it are no longer new."""
        for files in self._small.values():
            for f in files:
                f.is_new = False
