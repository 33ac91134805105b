"""The ``bloom_filters`` partition's records of each data action (Hudi's
``HoodieTableMetadataUtil.convertMetadataToBloomFilterRecords``), from the base files' footers.

Kept apart from :mod:`writer` (which only hands its actions here) so the records stay a pure
function of the action and the files it wrote: a commit's base files each give their footer's
filter (log files none), a clean's deleted base files each a tombstone, and an initialisation
every committed base file the ``files`` partition lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from hoodie_ray.file_group.naming import parse_base_file_name
from hoodie_ray.metadata.bloom_filters import (
    bloom_filter_record,
    bloom_filter_tombstone,
    file_bloom_filter,
)
from hoodie_ray.storage import Storage
from hoodie_ray.table import HoodieTable

__all__ = ["clean_bloom_records", "commit_bloom_records", "initial_bloom_records"]

Records = dict[str, dict[str, Any]]


def _file_record(
    storage: Storage, partition: str, name: str, instant: str
) -> tuple[str, dict[str, Any]] | None:
    found = file_bloom_filter(storage, partition, name)
    if found is None:
        return None  # Java logs and skips a base file without a filter
    filter_type, text = found
    return bloom_filter_record(partition, name, instant, filter_type, text)


def commit_bloom_records(
    storage: Storage, instant: str, written: Iterable[tuple[str, str]]
) -> Records:
    """One record per base file ``(partition, name)`` a commit at ``instant`` wrote."""
    out: Records = {}
    for part, name in sorted(set(written)):
        if parse_base_file_name(name) is None:
            continue  # delta writes do not change the base files' filters
        kr = _file_record(storage, part, name, instant)
        if kr is not None:
            out[kr[0]] = kr[1]
    return out


def clean_bloom_records(instant: str, deleted: Mapping[str, Iterable[str]]) -> Records:
    """A tombstone per base file a clean at ``instant`` deleted."""
    out: Records = {}
    for part, names in deleted.items():
        for name in names:
            if parse_base_file_name(name) is not None:
                k, r = bloom_filter_tombstone(part, name, instant)
                out[k] = r
    return out


def initial_bloom_records(
    table: HoodieTable,
    listing: Mapping[str, Iterable[str]],
    on_progress: Callable[[int, int], None] | None = None,
    stamp: str | None = None,
) -> Records:
    """Records of every committed base file of ``listing`` (partition -> file names), each
    stamped with the instant that wrote it (or with ``stamp``: 0.x stamps them all with the
    initialisation's instant); ``on_progress(done, total)`` after each footer."""
    tl = table.active_timeline
    files = []
    for part, names in sorted(listing.items()):
        for name in sorted(names):
            b = parse_base_file_name(name)
            if b is not None and tl.is_committed(b.instant):
                files.append((part, name, b.instant))
    out: Records = {}
    for done, (part, name, instant) in enumerate(files, start=1):
        kr = _file_record(table.storage, part, name, stamp or instant)
        if kr is not None:
            out[kr[0]] = kr[1]
        if on_progress is not None:
            on_progress(done, len(files))
    return out
