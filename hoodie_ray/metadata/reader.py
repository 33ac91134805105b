"""Reading the metadata table (Hudi's ``HoodieBackedTableMetadata``).

An MDT partition is read as Hudi reads it: the latest file slice of each of its file groups
(the MDT's own timeline and file-system view), the base HFile first, then the HFile data blocks
and delete blocks of its log files in order. Blocks and files of MDT delta commits whose data
instant has not completed on the data timeline are skipped (a failed data write's listing is
never seen), except the MDT's own instants: partition initialisations (``00000000000000xyz``)
and its compactions. Values are decoded with the writer schema the block or file carries.

``files`` records merge as ``HoodieMetadataPayload.combineFileSystemMetadata``: a tombstone
removes an entry (or is kept when there is none), otherwise the larger size wins. Every other
partition keeps the newest record of a key; a delete block removes keys.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_ray.config.table_config import (
    PROPERTIES_FILE,
    HoodieTableConfig,
    parse_java_properties,
)
from hoodie_ray.exceptions import HoodieCorruptedDataError, HoodieTableNotFoundError
from hoodie_ray.file_group.naming import parse_base_file_name, parse_log_file_name
from hoodie_ray.file_group.view import FileSlice, FileSystemView
from hoodie_ray.hfile import HFileReader
from hoodie_ray.log_format.blocks import (
    CommandBlock,
    DeleteBlock,
    HeaderMetadataType,
    HFileDataBlock,
)
from hoodie_ray.log_format.reader import read_log_file
from hoodie_ray.lru import SizedLru
from hoodie_ray.metadata.layout import (
    COLUMN_STATS,
    FILES,
    HFILE_EXTENSION,
    METADATA_TABLE_PATH,
    RECORD_INDEX,
    is_init_instant,
)
from hoodie_ray.metadata.records import (
    ALL_PARTITIONS_KEY,
    NON_PARTITIONED_NAME,
    FileListing,
    column_stats_key,
    decode_record_index,
    decode_value,
    is_deleted_record,
    key_to_file_group_index,
    key_to_file_group_indexes,
    partition_identifier,
)
from hoodie_ray.metadata.secondary_index import (
    SEPARATOR,
    escape_key_part,
    split_secondary_index_key,
)
from hoodie_ray.storage import FileInfo, Storage, join
from hoodie_ray.timeline.instant import Action
from hoodie_ray.timeline.timeline import ActiveTimeline

__all__ = [
    "MetadataListing",
    "MetadataTable",
    "load_metadata_config",
]


def partition_of_key(key: str) -> str:
    """The data partition of a ``files`` key (inverse of ``partition_identifier``)."""
    return "" if key == NON_PARTITIONED_NAME else key


#: Metadata-table files opened by record- and secondary-index lookups in this process (a
#: base HFile's reader, a log file's blocks), by the file's URI and its size in the listing:
#: metadata-table base files are never rewritten under their name, and a log file appended
#: to since is another key. 64 MiB of file bytes; a file over 16 MiB is never kept.
OPENED_FILES = SizedLru(64 << 20, max_entry=16 << 20)

#: The latest slices of metadata-table partitions that index lookups listed in this process,
#: by the partition's URI and the MDT timeline's state (:meth:`ActiveTimeline.state_key`): a
#: slice holds only files of instants that timeline shows committed, and those change only
#: with its instants (a delta commit or compaction completing, a rollback, a clean), so a
#: lookup on an unchanged MDT lists nothing. What a pending instant writes meanwhile (a
#: version 6 log file appended to) counts for no lookup until it completes: a new key.
#: 8 MiB, each slice and instant counted ~300 bytes.
MDT_SLICES = SizedLru(8 << 20, max_entry=2 << 20)
_MDT_SLICE_BYTES = 300


class _Empty:
    """The range of a column with no values: no comparison with it holds."""

    def __lt__(self, other: Any) -> bool:
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return 0


_EMPTY = _Empty()


def _unwrap(v: Any) -> Any:
    """The Python value of a stats wrapper (``(name, {"value": x})`` or ``{"value": x}``); a
    ``FloatWrapper``'s as ``numpy.float32`` (a filter on a column widened to double reads
    it as its values read: :meth:`~hoodie_ray.reader.filters.Filter.may_match`)."""
    single = False
    if isinstance(v, tuple) and len(v) == 2:
        single = str(v[0]).endswith("FloatWrapper")
        v = v[1]
    if isinstance(v, dict):
        v = v.get("value")
    return np.float32(v) if single and isinstance(v, float) else v


@dataclass(frozen=True)
class SliceColumns:
    """The live entries of one MDT file slice column-wise (:meth:`MetadataTable.slice_columns`):
    ``keys`` (``large_binary``, ascending by bytes, unique), each one's newest stored value
    (``values``, ``large_binary``) and the writer schema it was stored with
    (``schemas[schema_ids[i]]``)."""

    keys: pa.Array
    values: pa.Array
    schema_ids: np.ndarray
    schemas: list[str]

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def empty(cls) -> SliceColumns:
        none = pa.array([], pa.large_binary())
        return cls(none, none, np.zeros(0, dtype=np.int32), [])


_Sources = list[tuple[HFileReader | pa.Array, str]]


class _PreparedLookup:
    """Lookups in a hashed index partition, each file group's sources open: ``groups`` of
    (what is looked up in the group, its sources in the order they apply)."""

    def __init__(self, groups: list[tuple[list[Any], _Sources]]):
        self._groups = groups

    def _blocks_of(self, source: HFileReader, wanted: list[Any]) -> dict[int, int]:
        raise NotImplementedError

    @property
    def blocks(self) -> tuple[int, int]:
        """How many HFile data blocks the lookup reads, and their bytes on disk."""
        count = size = 0
        for wanted, sources in self._groups:
            for source, _ in sources:
                if isinstance(source, HFileReader):
                    found = self._blocks_of(source, wanted)
                    count += len(found)
                    size += sum(found.values())
        return count, size


class RecordIndexLookup(_PreparedLookup):
    """Record-index lookups of some keys, their file groups' sources open
    (:meth:`MetadataTable.record_index_lookup`)."""

    def _blocks_of(self, source: HFileReader, wanted: list[Any]) -> dict[int, int]:
        return source.blocks_for([k.encode() for k in wanted])

    def locations(self) -> dict[str, tuple[str, str]]:
        """``record key -> (data partition, file id)`` of the keys the index holds."""
        out: dict[str, tuple[str, str]] = {}
        for keys, sources in self._groups:
            raw = [k.encode() for k in keys]
            newest: dict[bytes, tuple[bytes, str] | None] = {}
            for source, schema in sources:
                if isinstance(source, HFileReader):
                    for k, v in source.get_many(raw).items():
                        newest[k] = (v, schema)
                elif len(source):  # Java's initialisation leaves an empty delete block a group
                    hit = pc.is_in(source, pa.array(keys, source.type))
                    for k in source.filter(hit).to_pylist():
                        newest[k.encode()] = None  # a delete
            for k, found in newest.items():
                if found is None:
                    continue
                out[k.decode()] = record_index_location(bytes(found[0]), found[1])
        return out


#: Decoded index values by (kind, stored bytes, writer schema): a record-index value names a
#: file group and an instant, a secondary-index one whether its entry is deleted, so a table
#: has few distinct ones, shared by many keys. 65,536 entries (each counted as one).
_DECODED_VALUES = SizedLru(1 << 16)


def _decoded(kind: str, value: bytes, schema: str, make: Callable[[dict[str, Any]], Any]) -> Any:
    """``make`` of the stored index ``value`` decoded with ``schema``, once per process."""
    hit = _DECODED_VALUES.get((kind, value, schema))
    if hit is None:
        hit = make(decode_value(value, schema))
        # the schema text (KBs) is read anew with every file: one copy kept, not one a key
        _DECODED_VALUES.put((kind, value, sys.intern(schema)), hit, 1)
    return hit


def record_index_location(value: bytes, schema: str) -> tuple[str, str]:
    """``(data partition, file id)`` of a stored record-index value written with ``schema``
    (decoded once per process)."""
    loc: tuple[str, str] = _decoded("location", value, schema, _location)
    return loc


def _location(record: dict[str, Any]) -> tuple[str, str]:
    part, fid, _ = decode_record_index(record)
    return part or "", fid


class SecondaryIndexLookup(_PreparedLookup):
    """Lookups of some values in a secondary index (their ``<value>$`` prefixes), their file
    groups' sources open (:meth:`MetadataTable.secondary_index_lookup`)."""

    def _blocks_of(self, source: HFileReader, wanted: list[Any]) -> dict[int, int]:
        return source.prefix_blocks_for(wanted)

    def record_keys(self) -> set[str]:
        """The record keys of the live entries of the values."""
        out: set[str] = set()
        for prefixes, sources in self._groups:
            sc = _newest_columns(sources, prefixes)
            for key, value, at in zip(
                sc.keys.to_pylist(), sc.values.to_pylist(), sc.schema_ids.tolist(), strict=True
            ):
                if not _is_deleted_value(value, sc.schemas[at]):
                    out.add(split_secondary_index_key(key.decode())[1])
        return out


def _is_deleted_value(value: bytes, schema: str) -> bool:
    """Whether a stored secondary-index value marks its entry deleted (decoded once per
    process)."""
    return bool(_decoded("deleted", value, schema, is_deleted_record))


def _newest_columns(
    sources: Iterable[tuple[HFileReader | pa.Array, str]], wanted: list[bytes] | None
) -> SliceColumns:
    """The newest live entry of each key of an MDT slice's ``sources`` (in the order they
    apply), of every key or of those starting with one of ``wanted``, column-wise."""
    keys: list[pa.Array] = []
    values: list[pa.Array] = []
    schema_of: list[np.ndarray] = []
    schemas: list[str] = []
    for source, schema in sources:
        if isinstance(source, HFileReader):
            k, v = source.columns() if wanted is None else source.prefix_columns(wanted)
            if schema not in schemas:
                schemas.append(schema)
            at = schemas.index(schema)
        elif not len(source):
            continue  # the empty delete block Java's initialisation leaves in each group
        else:
            k = source.cast(pa.large_binary())
            if wanted is not None:
                k = k.filter(_starts_with_any(k, wanted))
            v = pa.nulls(len(k), pa.large_binary())  # a delete
            at = -1
        if not len(k):
            continue  # an empty block: one HFile left alone needs no sort
        keys.append(k)
        values.append(v)
        schema_of.append(np.full(len(k), at, dtype=np.int32))
    if not keys:
        return SliceColumns.empty()
    all_keys = pa.concat_arrays(keys) if len(keys) > 1 else keys[0]
    all_values = pa.concat_arrays(values) if len(values) > 1 else values[0]
    schema_ids = np.concatenate(schema_of)
    # a single HFile is sorted and unique already
    newest = newest_of_each_key(all_keys) if len(keys) > 1 else None
    if newest is not None:
        idx = pa.array(newest)
        all_keys, all_values = all_keys.take(idx), all_values.take(idx)
        schema_ids = schema_ids[newest]
    live = schema_ids >= 0
    if not live.all():
        idx = pa.array(np.flatnonzero(live))
        all_keys, all_values = all_keys.take(idx), all_values.take(idx)
        schema_ids = schema_ids[live]
    return SliceColumns(all_keys, all_values, schema_ids, schemas)


def _starts_with_any(keys: pa.Array, prefixes: list[bytes]) -> pa.Array:
    """Mask of ``keys`` that start with one of ``prefixes``."""
    mask = pa.array(np.zeros(len(keys), dtype=bool))
    for p in prefixes:
        mask = pc.or_(mask, pc.starts_with(keys, pattern=p))
    return mask


def newest_of_each_key(keys: pa.Array) -> np.ndarray:
    """Positions of the last copy of each of ``keys`` (string or binary), in ascending order
    of the keys' bytes: a stable Arrow sort, then the last of each run of equal keys."""
    n = len(keys)
    order = pc.sort_indices(keys).to_numpy()  # stable: the copies of a key stay in order
    if n > 1:
        ks = keys.take(pa.array(order))
        same = pc.equal(ks.slice(1), ks.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        if same.any():
            return order[np.append(~same, True)]
    return order


def load_metadata_config(storage: Storage) -> HoodieTableConfig:
    """The MDT's ``hoodie.properties`` (HFile base files: not a data-table config)."""
    if not storage.exists(PROPERTIES_FILE):
        raise HoodieTableNotFoundError(f"no metadata table at {storage.base_uri}")
    props = parse_java_properties(storage.read_bytes(PROPERTIES_FILE).decode("utf-8", "replace"))
    return HoodieTableConfig(props)


class MetadataTable:
    """The metadata table of one data table, read side.

    Args:
        data_storage: storage rooted at the data table's base path.
        data_timeline: the data table's loaded active timeline (decides which MDT delta
            commits count).
    """

    def __init__(self, data_storage: Storage, data_timeline: ActiveTimeline) -> None:
        self.data_storage = data_storage
        self.data_timeline = data_timeline
        self.storage = data_storage.sub(METADATA_TABLE_PATH)
        self._config: HoodieTableConfig | None = None
        self._timeline: ActiveTimeline | None = None
        self._files: dict[str, FileListing] | None = None
        self._files_at: tuple[Any, ...] | None = None
        self._files_slice: tuple[str | None, tuple[str, ...]] | None = None

    # -- the MDT as a table -------------------------------------------------------------------
    def exists(self) -> bool:
        return self.storage.exists(PROPERTIES_FILE)

    @property
    def config(self) -> HoodieTableConfig:
        if self._config is None:
            self._config = load_metadata_config(self.storage)
        return self._config

    @property
    def timeline(self) -> ActiveTimeline:
        if self._timeline is None:
            self._timeline = ActiveTimeline.of_table(self.storage, self.config).load()
        return self._timeline

    def refresh(self) -> MetadataTable:
        """Pick up new MDT instants (the merged ``files`` listing is kept while neither
        timeline changed)."""
        self.timeline.reload()
        return self

    def view(self) -> FileSystemView:
        """The MDT's file-system view (its partitions are the MDT partition folders)."""
        return FileSystemView(
            self.storage,
            self.timeline,
            self.config.table_version,
            ["partition"],
            base_file_extensions=(HFILE_EXTENSION,),
        )

    def file_slices(self, partition: str, cached: bool = False) -> list[FileSlice]:
        """The latest slice of every file group of MDT partition ``partition``. ``cached``:
        through :data:`MDT_SLICES`, for the MDT timeline's state (point lookups, which list
        the same partitions query after query)."""
        if not cached:
            return self.view().latest_file_slices(partitions=[partition])
        key = (
            type(self.storage).__name__,
            self.storage.uri(partition),
            self.config.table_version,
            self.timeline.state_key(),
        )
        kept: tuple[FileSlice, ...] | None = MDT_SLICES.get(key)
        if kept is None:
            kept = tuple(self.view().latest_file_slices(partitions=[partition]))
            MDT_SLICES.put(key, kept, _MDT_SLICE_BYTES * (len(kept) + len(key[-1])))
        return list(kept)

    def valid_instant(self, ts: str) -> bool:
        """True if MDT data written at ``ts`` counts: its data instant completed (or was
        archived), or ``ts`` is one of the MDT's own instants (an initialisation, or an
        instant the data timeline never had: MDT compactions, cleans)."""
        if is_init_instant(ts):
            return True
        dt = self.data_timeline
        if dt.is_committed(ts) or dt.completion_time(ts) is not None:
            return True
        done = dt.get(ts)  # layout 1 (no completion times): a completed clean or rollback
        if done is not None and done.is_completed:
            return True
        if dt.contains(ts):
            return False  # pending on the data timeline
        inst = self.timeline.get(ts)
        return inst is not None and inst.action != Action.DELTA_COMMIT

    # -- records ------------------------------------------------------------------------------
    def _slice_sources(
        self, fs: FileSlice, cached: bool = False
    ) -> Iterator[tuple[HFileReader | pa.Array, str]]:
        """What one MDT file slice is merged from, in the order it applies: ``(HFile, schema
        json)`` for its base file and each valid HFile data block, ``(deleted keys, "")`` for
        each valid delete block. ``cached``: files opened through the process's cache
        (:data:`OPENED_FILES`; point lookups, which open the same files query after query)."""
        if fs.base_file:
            rel = join(fs.partition_path, fs.base_file)
            reader = self._opened(rel, fs, cached, self._open_hfile)
            yield reader, reader.file_info.get(b"schema", b"").decode()
        for name in fs.log_files:
            log = parse_log_file_name(name)
            if log is None or not self.valid_instant(log.instant):
                continue
            rel = join(fs.partition_path, name)
            blocks = self._opened(rel, fs, cached, self._open_log)
            rolled_back = {
                b.header.get(HeaderMetadataType.TARGET_INSTANT_TIME)
                for b, _ in blocks
                if isinstance(b, CommandBlock)
            }
            for entry in blocks:
                b = entry[0]
                ts = b.instant_time
                if ts is None or ts in rolled_back or not self.valid_instant(ts):
                    continue
                if isinstance(b, HFileDataBlock):
                    reader = entry[1]
                    if reader is None:  # made once a block counts, kept with a kept file
                        reader = entry[1] = HFileReader(
                            b.content, f"{self.storage.uri(rel)}@{b.offset}"
                        )
                    schema = b.header.get(HeaderMetadataType.SCHEMA, "")
                    if not schema:
                        schema = reader.file_info.get(b"schema", b"").decode()
                    yield reader, schema
                elif isinstance(b, DeleteBlock):
                    yield b.record_keys, ""

    def _opened(self, rel: str, fs: FileSlice, cached: bool, open_: Callable[[str], Any]) -> Any:
        """``open_(rel)``, through :data:`OPENED_FILES` where ``cached`` and the listing gave
        the file's size (the key: a log file appended to since is another entry)."""
        size = fs.file_sizes.get(rel.rsplit("/", 1)[-1]) if cached else None
        if size is None:
            return open_(rel)
        key = (self.storage.uri(rel), size)
        hit = OPENED_FILES.get(key)
        if hit is None:
            hit = open_(rel)
            OPENED_FILES.put(key, hit, size)
        return hit

    def _open_hfile(self, rel: str) -> HFileReader:
        return HFileReader(self.storage.read_bytes(rel), self.storage.uri(rel))

    def _open_log(self, rel: str) -> list[list[Any]]:
        """The blocks of a log file, each with a slot for its HFile reader."""
        return [[b, None] for b in read_log_file(self.storage, rel)]

    def _slice_records(
        self, fs: FileSlice, keys: set[str] | None
    ) -> Iterator[tuple[str, bytes | None, str]]:
        """(key, value or None for a delete, schema json) in the order they apply."""
        for source, schema in self._slice_sources(fs):
            if isinstance(source, HFileReader):
                if keys is None:
                    items: Iterable[tuple[bytes, bytes]] = source.items()
                else:
                    items = source.get_many(k.encode() for k in keys).items()
                for k, v in items:
                    yield k.decode(), v, schema
            else:
                for k in source.to_pylist():
                    if keys is None or k in keys:
                        yield k, None, ""

    def slice_columns(self, fs: FileSlice, prefixes: Iterable[bytes] | None = None) -> SliceColumns:
        """:meth:`slice_records` column-wise: the newest value of every live key of one MDT
        file slice (or of the keys starting with one of ``prefixes``: only the HFile blocks
        that may hold them are read), sorted by key bytes, with no Python object per key (each
        HFile split into Arrow columns, the newest copy of each key kept by a stable Arrow
        sort)."""
        wanted = None if prefixes is None else sorted(set(prefixes))
        return _newest_columns(self._slice_sources(fs), wanted)

    def raw_records(
        self, partition: str, keys: Iterable[str] | None = None
    ) -> dict[str, tuple[bytes, str]]:
        """Newest (value, schema json) of every live key of an MDT partition (or of ``keys``)."""
        wanted = None if keys is None else set(keys)
        out: dict[str, tuple[bytes, str]] = {}
        for fs in self.file_slices(partition):
            out.update(self.slice_records(fs, wanted))
        return out

    def slice_records(
        self, fs: FileSlice, keys: set[str] | None = None
    ) -> dict[str, tuple[bytes, str]]:
        """Newest (value, schema json) of every live key of one MDT file slice."""
        out: dict[str, tuple[bytes, str]] = {}
        for k, v, schema in self._slice_records(fs, keys):
            if v is None:
                out.pop(k, None)
            else:
                out[k] = (v, schema)
        return out

    def merged_files(self, fs: FileSlice) -> dict[str, FileListing]:
        """The ``files`` records of one MDT file slice, merged per key."""
        maps: dict[str, FileListing] = {}
        self._merge_files(maps, fs)
        return maps

    def records(self, partition: str, keys: Iterable[str] | None = None) -> dict[str, dict]:
        """Newest decoded record of every live key (types other than ``files``)."""
        return {k: decode_value(v, s) for k, (v, s) in self.raw_records(partition, keys).items()}

    def record_index_by_file_group(self) -> dict[tuple[str, str], list[str]]:
        """``(data partition, file id) -> record keys`` from the ``record_index`` partition
        (:meth:`record_index_key_arrays` as Python lists)."""
        return {g: keys.to_pylist() for g, keys in self.record_index_key_arrays().items()}

    def record_index_key_arrays(self) -> dict[tuple[str, str], pa.Array]:
        """``(data partition, file id) -> record keys`` (``large_string``, in key order) from
        the ``record_index`` partition, column-wise: each slice merged by
        :meth:`slice_columns`, each distinct stored value decoded once (the keys of a file
        group share theirs), the keys grouped by an Arrow take, no Python object per key."""
        parts: dict[tuple[str, str], list[pa.Array]] = {}
        for fs in self.file_slices(RECORD_INDEX):
            sc = self.slice_columns(fs)
            if not len(sc):
                continue
            codes = pc.dictionary_encode(sc.values)
            n_schemas = max(len(sc.schemas), 1)
            # one group per distinct (stored value, writer schema)
            combo = codes.indices.to_numpy(zero_copy_only=False).astype(np.int64) * n_schemas
            combo += sc.schema_ids
            distinct, inverse = np.unique(combo, return_inverse=True)
            order = np.argsort(inverse, kind="stable")
            bounds = np.searchsorted(inverse[order], np.arange(len(distinct) + 1))
            keys = sc.keys.cast(pa.large_string())
            raw_values = codes.dictionary.to_pylist()
            for j, c in enumerate(distinct.tolist()):
                value, schema = bytes(raw_values[c // n_schemas]), sc.schemas[c % n_schemas]
                loc = record_index_location(value, schema)
                taken = keys.take(pa.array(order[bounds[j] : bounds[j + 1]]))
                parts.setdefault(loc, []).append(taken)
        return {
            g: arrs[0] if len(arrs) == 1 else pa.concat_arrays(arrs) for g, arrs in parts.items()
        }

    def record_index_locations(self, keys: Iterable[str]) -> dict[str, tuple[str, str]]:
        """``record key -> (data partition, file id)`` of those of ``keys`` the record index
        holds. Only the record-index file groups the keys hash to are read, and in each only
        the HFile data blocks the block index names for them (plus the group's log blocks);
        keys that are not indexed are absent."""
        return self.record_index_lookup(keys).locations()

    def record_index_lookup(self, keys: Iterable[str]) -> RecordIndexLookup:
        """A lookup of ``keys`` in the record index, prepared: the files of the record-index
        file groups the keys hash to are opened (their block indexes read), so that what the
        lookup will read is known (:attr:`RecordIndexLookup.blocks`) before it runs
        (:meth:`RecordIndexLookup.locations`)."""
        wanted = sorted(set(keys))
        slices = self.file_slices(RECORD_INDEX, cached=True)
        if not wanted or not slices:
            return RecordIndexLookup([])
        by_index = self._groups_by_index(RECORD_INDEX, slices)
        n = len(slices)
        groups = key_to_file_group_indexes(wanted, n) if n > 1 else [0] * len(wanted)
        keys_of: dict[int, list[str]] = {}
        for k, g in zip(wanted, groups, strict=True):
            keys_of.setdefault(int(g), []).append(k)
        return RecordIndexLookup(
            [
                (ks, list(self._slice_sources(by_index[g], cached=True)))
                for g, ks in sorted(keys_of.items())
            ]
        )

    def _groups_by_index(self, partition: str, slices: list[FileSlice]) -> dict[int, FileSlice]:
        """The file slices of a hashed index partition (record or secondary index) by their
        file-group number (``...-NNNN-0``), checked to be ``0..n-1``."""
        by_index: dict[int, FileSlice] = {}
        for fs in slices:
            try:
                by_index[int(fs.file_id.rsplit("-", 2)[-2])] = fs
            except ValueError:
                raise HoodieCorruptedDataError(
                    f"{self.storage.uri(partition)}: file group {fs.file_id} is not an "
                    "index file group id"
                ) from None
        n = len(slices)
        if sorted(by_index) != list(range(n)):
            raise HoodieCorruptedDataError(
                f"{self.storage.uri(partition)}: file groups {sorted(by_index)} are not 0..{n - 1}"
            )
        return by_index

    def secondary_index_record_keys(self, partition: str, values: Iterable[str | None]) -> set[str]:
        """The record keys whose live entry in secondary index ``partition`` has one of
        ``values`` (as Java strings them: :func:`~hoodie_ray.metadata.secondary_index.
        java_strings`). Only the file groups the values hash to are read (Java places every
        entry of a value in the group of its ``<escaped value>$`` prefix)."""
        return self.secondary_index_lookup(partition, values).record_keys()

    def secondary_index_lookup(
        self, partition: str, values: Iterable[str | None]
    ) -> SecondaryIndexLookup:
        """:meth:`secondary_index_record_keys` prepared, as :meth:`record_index_lookup`: the
        files of the index file groups the values hash to are opened."""
        prefixes = sorted({escape_key_part(v) + SEPARATOR for v in values})
        slices = self.file_slices(partition, cached=True)
        if not prefixes or not slices:
            return SecondaryIndexLookup([])
        by_index = self._groups_by_index(partition, slices)
        n = len(slices)
        of_group: dict[int, list[bytes]] = {}
        for p in prefixes:
            g = key_to_file_group_index(p, n) if n > 1 else 0
            of_group.setdefault(g, []).append(p.encode())
        return SecondaryIndexLookup(
            [
                (ps, list(self._slice_sources(by_index[g], cached=True)))
                for g, ps in sorted(of_group.items())
            ]
        )

    def column_ranges(
        self, wanted: Iterable[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], tuple[Any, Any]]:
        """``(partition, file, column) -> (min, max)`` (Python values, None when unknown) from
        ``column_stats``, for the triples it has statistics of (tombstones left out); a file
        whose column holds no value gets an empty range that matches nothing."""
        keys = {column_stats_key(c, p, n): (p, n, c) for p, n, c in wanted}
        out: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        for k, r in self.records(COLUMN_STATS, keys).items():
            cs = r.get("ColumnStatsMetadata")
            if not isinstance(cs, dict) or cs.get("isDeleted"):
                continue
            if cs.get("valueCount") == 0 or (
                cs.get("valueCount") is not None and cs.get("valueCount") == cs.get("nullCount")
            ):
                out[keys[k]] = (_EMPTY, _EMPTY)
                continue
            out[keys[k]] = (_unwrap(cs.get("minValue")), _unwrap(cs.get("maxValue")))
        return out

    def _files_maps(self) -> dict[str, FileListing]:
        """The merged ``files`` partition. Kept between calls; when only new log files joined
        the slice (a delta commit per data commit) and every log read before was valid, only
        the new ones are merged in."""
        at = (_state(self.timeline), _state(self.data_timeline))
        if self._files is not None and self._files_at == at:
            return self._files
        slices = self.file_slices(FILES)
        fs = slices[0] if len(slices) == 1 else None
        done = self._files_slice
        maps: dict[str, FileListing] | None = None
        if (
            fs is not None
            and done is not None
            and self._files is not None
            and done[0] == fs.base_file
            and tuple(fs.log_files[: len(done[1])]) == done[1]
            and all(self._log_valid(n) for n in done[1])
        ):
            maps = self._files
            todo = FileSlice(
                fs.partition_path,
                fs.file_id,
                fs.base_instant,
                None,
                list(fs.log_files[len(done[1]) :]),
            )
            self._merge_files(maps, todo)
        if maps is None:
            maps = {}
            for one in slices:
                self._merge_files(maps, one)
        if fs is not None and all(self._log_valid(n) for n in fs.log_files):
            self._files_slice = (fs.base_file, tuple(fs.log_files))
        else:
            self._files_slice = None
        self._files, self._files_at = maps, at
        return maps

    def _log_valid(self, name: str) -> bool:
        log = parse_log_file_name(name)
        return log is not None and self.valid_instant(log.instant)

    def _merge_files(self, maps: dict[str, FileListing], fs: FileSlice) -> None:
        for k, v, schema in self._slice_records(fs, None):
            if v is None:
                maps.pop(k, None)
                continue
            rec = decode_value(v, schema)
            maps.setdefault(k, FileListing()).apply(rec.get("filesystemMetadata"))

    def all_partitions(self) -> list[str]:
        """Data partitions the ``files`` partition lists, sorted (``""`` if non-partitioned)."""
        m = self._files_maps().get(ALL_PARTITIONS_KEY)
        return sorted(partition_of_key(p) for p in (m.live() if m else {}))

    def partition_files(self, partition: str) -> dict[str, int]:
        """File name -> size of one data partition, as the ``files`` partition lists it."""
        m = self._files_maps().get(partition_identifier(partition))
        return m.live() if m else {}

    def files_listing(self) -> dict[str, dict[str, int]]:
        """Data partition -> (file name -> size), every partition."""
        maps = self._files_maps()
        return {partition_of_key(k): m.live() for k, m in maps.items() if k != ALL_PARTITIONS_KEY}


def _state(tl: ActiveTimeline) -> tuple[Any, ...]:
    """What identifies a timeline's state cheaply: its size, newest instants and latest
    completion (an older instant completing changes that)."""
    last = tl.instants[-3:]
    return (
        len(tl.instants),
        tl.max_completion_time(),
        tuple((i.timestamp, i.action, i.state) for i in last),
    )


def list_data_files(view: FileSystemView) -> dict[str, dict[str, int]]:
    """Data partition -> (base and log file name -> size) as ``view`` lists them (a storage
    view: what the ``files`` partition is built from, and checked against); a partition
    without data files is kept, the non-partitioned table's ``""`` only when it has some."""
    out: dict[str, dict[str, int]] = {}
    for part in view.list_partitions():
        files = {
            i.name: i.size
            for i in view.list_files(part)
            if parse_base_file_name(i.name) is not None or parse_log_file_name(i.name) is not None
        }
        if files or part:
            out[part] = files
    return out


class MetadataListing:
    """A file-system view's listing through the MDT's ``files`` partition."""

    def __init__(self, mdt: MetadataTable) -> None:
        self.mdt = mdt

    def list_partitions(self) -> list[str]:
        return self.mdt.all_partitions()

    def list_files(self, partition: str) -> list[FileInfo]:
        return [
            FileInfo(name, size, False)
            for name, size in sorted(self.mdt.partition_files(partition).items())
        ]
