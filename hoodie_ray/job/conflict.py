"""Optimistic concurrency control: which other instants a commit conflicts with.

Hudi's ``SimpleConcurrentFileWritesConflictResolutionStrategy``, checked at commit under the
table lock:

* the candidates are the write instants (commit, deltacommit, replacecommit; a compaction
  completes as a commit) that completed after this writer's instant was requested -- on
  table version 8+ those whose completion time is after its instant time, on version 6 those
  not completed when it started -- and the compaction, log compaction, clustering and replace
  plans still pending that were scheduled after it;
* a candidate conflicts when it touches a file group (partition, file id) this commit touches:
  a completed one through its write stats (and the groups a replacecommit replaced), a
  pending plan through the file groups it will rewrite.

A commit whose records all went to new file groups never conflicts: nobody else knows their
file ids. A compaction never conflicts (Hudi's ``resolveConflict``: it writes a new base file
and the logs written beside it stay in the file group): on table version 8+ a log joins the
slice its delta commit's completion time falls in, and on version 6 a compaction's commit
carries over only logs of completed writes, and a write whose logs a compaction that completed
meanwhile left in the superseded slice moves them into the new one as it commits
(:func:`hoodie_ray.write.commit.relocate_superseded_logs`). The rule (:func:`candidates`, :func:`find_conflicts`) is pure; :func:`conflicts_of`
reads what it needs from the table.

Non-blocking concurrency control (``writes_conflict=False``) keeps only replacecommits and
clustering plans as candidates: writers of one file group each append their own log files
and all commit. Java skips conflict resolution under NBCC except for bulk inserts (which the
coordinator checks in full, as Java); the replace / clustering check is kept so a write never
commits logs into a group replaced meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hoodie_ray.compaction.plan import read_plan
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat
from hoodie_ray.timeline.plans import read_avro_metadata

FileGroup = tuple[str, str]
"""(partition path, file id)."""

#: Completed actions whose write stats name the file groups they changed.
_COMPLETED_WRITES = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT})
#: Pending plans that will rewrite file groups (compaction, clustering, insert-overwrite).
_PENDING_PLANS = frozenset(
    {Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING, Action.REPLACE_COMMIT}
)

#: What still conflicts with a write under non-blocking concurrency control: file groups a
#: replacecommit replaced or a clustering / replace plan will rewrite (the writes' logs would
#: be left behind in a replaced group).
_REPLACING = frozenset({Action.REPLACE_COMMIT, Action.CLUSTERING})


@dataclass(frozen=True)
class TxnStart:
    """What a writer knew when its instant was requested (Hudi's transaction state)."""

    instant: str
    completed: frozenset[str]
    """Requested times of the instants completed at that moment."""


@dataclass(frozen=True)
class Conflict:
    """Another instant that changed, or plans to rewrite, file groups this commit touches."""

    instant: str
    action: str
    file_groups: tuple[FileGroup, ...]
    pending: bool = False

    def describe(self) -> str:
        return describe_conflicts([self])


def _listed(items: list[str], most: int) -> str:
    shown = ", ".join(items[:most])
    return shown if len(items) <= most else f"{shown} and {len(items) - most} more"


def describe_conflicts(conflicts: list[Conflict], most: int = 3) -> str:
    """The conflicts in a few words: instants that touched the same file groups named once
    with those groups (at most ``most`` instants and file groups listed, then how many more)."""
    by_groups: dict[tuple[FileGroup, ...], list[Conflict]] = {}
    for c in conflicts:
        by_groups.setdefault(tuple(sorted(c.file_groups)), []).append(c)
    parts = []
    for groups, cs in by_groups.items():
        kinds = sorted({f"{c.action}, {'pending plan' if c.pending else 'completed'}" for c in cs})
        names = _listed([c.instant for c in cs], most)
        fgs = _listed([f"{p or '<non-partitioned>'}/{f}" for p, f in groups], most)
        plural = "s" if len(groups) > 1 else ""
        parts.append(f"{names} ({'; '.join(kinds)}) on file group{plural} {fgs}")
    return "; ".join(parts)


def candidates(
    instants: Iterable[Instant],
    start: TxnStart,
    by_completion_time: bool,
    *,
    writes_conflict: bool = True,
) -> list[Instant]:
    """The instants a commit that started at ``start`` is checked against: writes completed
    after it started (by completion time on layout 2 timelines, else by what was completed at
    its start), and plans still pending that were scheduled after its instant.

    ``writes_conflict=False`` (non-blocking concurrency control): only replacecommits and
    clustering plans; other writes to the same file groups each add their own log files."""
    out = []
    for inst in instants:
        if inst.timestamp == start.instant:
            continue
        if not writes_conflict and inst.action not in _REPLACING:
            continue
        if inst.is_completed:
            if inst.action not in _COMPLETED_WRITES:
                continue
            if by_completion_time and inst.completion_time:
                after = inst.completion_time > start.instant
            else:
                after = inst.timestamp not in start.completed
            if after:
                out.append(inst)
        elif inst.action in _PENDING_PLANS and inst.timestamp > start.instant:
            out.append(inst)
    return out


def file_groups(stats: Iterable[HoodieWriteStat]) -> set[FileGroup]:
    """The file groups a commit's write stats touch."""
    return {(s.partition_path or "", s.file_id) for s in stats if s.file_id}


def metadata_file_groups(meta: HoodieCommitMetadata) -> set[FileGroup]:
    """The file groups a completed commit wrote, and those a replacecommit replaced."""
    out = file_groups(s for ss in meta.partition_to_write_stats.values() for s in ss)
    for part, fids in (meta.partition_to_replace_file_ids or {}).items():
        out.update((part or "", f) for f in fids)
    return out


def find_conflicts(
    own: set[FileGroup], others: Iterable[tuple[Instant, set[FileGroup]]]
) -> list[Conflict]:
    """Every candidate sharing a file group with ``own``, oldest first."""
    out = []
    for inst, groups in sorted(others, key=lambda x: x[0].timestamp):
        shared = own & groups
        if shared:
            out.append(
                Conflict(inst.timestamp, inst.action, tuple(sorted(shared)), not inst.is_completed)
            )
    return out


def plan_file_groups(table: HoodieTable, inst: Instant) -> set[FileGroup]:
    """The file groups a pending compaction or clustering / replace plan will rewrite."""
    tl = table.active_timeline
    if inst.action in (Action.COMPACTION, Action.LOG_COMPACTION):
        plan = read_plan(tl, inst)
        return {(op.partition_path or "", op.file_id) for op in plan.operations or []}
    requested = Instant(inst.timestamp, inst.action, State.REQUESTED)
    data = tl.read_details(requested)
    if not data:
        return set()  # an insert-overwrite's empty plan: it writes new file groups only
    _, record = read_avro_metadata(data, tl.file_name(requested))
    out: set[FileGroup] = set()
    clustering: Any = record.get("clusteringPlan") or {}
    groups = clustering.get("inputGroups") or [] if isinstance(clustering, dict) else []
    for group in groups:
        for sl in (group or {}).get("slices") or []:
            if isinstance(sl, dict) and sl.get("fileId"):
                out.add((str(sl.get("partitionPath") or ""), str(sl["fileId"])))
    return out


#: Operation types of completed compactions (a compaction completes as a ``commit``).
_COMPACTIONS = frozenset({"COMPACT", "LOG_COMPACT"})


def is_compaction(inst: Instant, meta: HoodieCommitMetadata | None = None) -> bool:
    """Is ``inst`` a compaction (a pending plan, or a commit whose metadata says COMPACT)?
    Compactions never conflict with writes."""
    if inst.action in (Action.COMPACTION, Action.LOG_COMPACTION):
        return True
    if meta is None:
        return False
    return bool(meta.compacted) or (meta.operation_type or "").upper() in _COMPACTIONS


def conflicts_of(
    table: HoodieTable,
    start: TxnStart,
    stats: Iterable[HoodieWriteStat],
    *,
    writes_conflict: bool = True,
    replaced: dict[str, list[str]] | None = None,
) -> list[Conflict]:
    """The conflicts of a commit of ``stats`` (and, a replace commit, of the file groups it
    ``replaced``) that started at ``start``, read from the table's timeline as it is now
    (call under the table lock, with the timeline reloaded).

    ``writes_conflict=False`` is non-blocking concurrency control: other writes to the same
    file groups (delta commits, each with its own log files) are no conflict; only a
    replacecommit or clustering on them is."""
    own = file_groups(stats)
    for part, ids in (replaced or {}).items():
        own |= {(part, f) for f in ids}
    if not own:
        return []
    tl = table.active_timeline
    others = []
    for inst in candidates(
        tl.instants, start, tl.layout_version >= 2, writes_conflict=writes_conflict
    ):
        if inst.is_completed:
            meta = table.metadata(inst)
            if not is_compaction(inst, meta):
                others.append((inst, metadata_file_groups(meta)))
        elif not is_compaction(inst):
            others.append((inst, plan_file_groups(table, inst)))
    return find_conflicts(own, others)
