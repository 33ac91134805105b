"""What the cleaner kept, checked before a read that needs older file slices.

A clean keeps the file slices of the commits from its ``earliestCommitToRetain`` on (and the
files a savepoint holds). A read as of an older instant -- time travel, an incremental read,
a CDC range -- may find a slice gone, or an older slice a savepoint kept standing where the
cleaned one was: a read that would give missing or stale rows raises :class:`HoodieQueryError`
instead (Java: ``validateTimestampAsOf`` for time travel; "Found deleted files in commit" for
incremental reads).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from hoodie_ray.exceptions import HoodieQueryError
from hoodie_ray.reader.file_slice_reader import SliceSpec
from hoodie_ray.reader.log_scan import InstantRange
from hoodie_ray.table import HoodieTable


def check_retained(tbl: HoodieTable, instant: str, what: str) -> None:
    """Refuse a read as of ``instant`` older than the commits the last clean retained (Java's
    ``validateTimestampAsOf``): the slices it needs may be gone, or replaced by older ones a
    savepoint kept. A savepointed instant stays readable. ``what`` begins the message."""
    retained = tbl.earliest_retained_commit()
    instant = requested_time(tbl, instant)
    if retained is None or instant >= retained or instant in tbl.savepointed_commits():
        return
    raise HoodieQueryError(
        f"{what} {instant} is not possible: the last clean kept the file slices of the commits "
        f"from {retained} on (hoodie.cleaner.commits.retained; a savepoint keeps an instant "
        "readable)"
    )


def requested_time(tbl: HoodieTable, ts: str) -> str:
    """``ts``, or on a table placing instants by completion time, the requested time of the
    instant that completed at ``ts`` (cleans and savepoints name requested times)."""
    if tbl.completion_time_slicing:
        for requested, completed in tbl.completion_map().items():
            if completed == ts:
                return requested
    return ts


def stale_slice(tbl: HoodieTable, at: str, slices: Iterable[SliceSpec]) -> str | None:
    """Why one of ``slices`` (read as of ``at``) is not the slice of the latest base file its
    group had by then (:meth:`HoodieTable.base_writes`): that slice was cleaned and an older
    one (a savepoint's) stands in its place; None when each is."""
    bases = tbl.base_writes()
    for s in slices:
        latest = _latest_base(bases.get((s.partition_path, s.file_id), ()), at)
        if latest is not None and _older(s, latest):
            return (
                f"the slice of file group {s.file_id} (partition {s.partition_path!r}) with "
                f"the base file written at {latest} was cleaned"
            )
    return None


def _latest_base(times: Sequence[str], at: str) -> str | None:
    """The latest of a group's base-file instants (ascending) at or before ``at``."""
    i = bisect.bisect_right(times, at)
    return times[i - 1] if i else None


def _older(s: SliceSpec | None, base: str) -> bool:
    """Whether ``s`` (None: no slice) is not the slice of the base file written at ``base``
    or a later one."""
    return s is None or s.base_file is None or (s.base_instant or "") < base


def check_not_cleaned(tbl: HoodieTable, query_instant: str, slices: list[SliceSpec]) -> None:
    """Time travel: every file group with a base file written at or before the query instant
    (and not replaced by then) must still have its slice at that instant, the one of the
    latest base file written by then; otherwise the cleaner removed it (and the view fell back
    to an older slice a savepoint kept, or to none)."""
    present = {(s.partition_path, s.file_id): s for s in slices}
    replaced: set[tuple[str, str]] = set()
    for inst in tbl.commits():
        if inst.timestamp > query_instant:
            break
        for part, ids in tbl.metadata(inst).replaced_file_ids().items():
            replaced.update((part, i) for i in ids)
    missing: list[tuple[tuple[str, str], str]] = []
    for key, times in tbl.base_writes().items():
        latest = _latest_base(times, query_instant)
        if latest is not None and key not in replaced and _older(present.get(key), latest):
            missing.append((key, latest))
    if missing:
        missing.sort()
        (part, fid), at = missing[0]
        raise HoodieQueryError(
            f"time travel to {query_instant} is not possible: the file slices of "
            f"{len(missing)} file group(s) as of that instant were cleaned "
            f"(e.g. file group {fid} in partition {part!r}, written at {at})"
        )


def check_files_kept(tbl: HoodieTable, slices: list[SliceSpec], rng: InstantRange) -> None:
    """After a clean, the files an incremental read's slices name must still be listed: a
    slice the range's write stats name may have been cleaned since (Java refuses such a
    read: "Found deleted files in commit")."""
    if not slices or not tbl.cleaned():
        return
    parts = sorted({s.partition_path for s in slices})
    listed: set[tuple[str, str]] = set()
    for fg in tbl.view().all_file_groups(parts, include_replaced=True):
        for fs in fg.slices.values():
            if fs.base_file:
                listed.add((fg.partition_path, fs.base_file))
            listed.update((fg.partition_path, n) for n in fs.log_files)
    for spec in slices:
        for name in ([spec.base_file] if spec.base_file else []) + list(spec.log_files):
            if (spec.partition_path, name) not in listed:
                raise HoodieQueryError(
                    f"an incremental read of ({rng.start}, {rng.end}] is not possible: file "
                    f"{name} (partition {spec.partition_path!r}) was cleaned; read a later "
                    "range, or keep more commits (hoodie.cleaner.commits.retained)"
                )
