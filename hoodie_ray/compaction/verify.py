"""Checking a compaction plan against the table before it runs.

A plan operation names a partition, a file id, a base instant, a base file and log files
separately. Executed as written, an operation whose parts do not form one file slice writes a
base file for a file group that does not exist, or merges one group's records into another:
readers then see duplicate keys, or lose records. :func:`verify_plan` checks every operation
against the current file-system view, once per plan, before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from hoodie_ray.exceptions import HoodieCorruptedDataError
from hoodie_ray.file_group.naming import parse_base_file_name, parse_log_file_name
from hoodie_ray.file_group.view import FileGroup, FileSlice, FileSystemView
from hoodie_ray.timeline.plans import HoodieCompactionOperation, HoodieCompactionPlan

__all__ = ["PlanProblem", "plan_problems", "verify_plan"]

#: How many problems the error message spells out (the rest are counted).
_SHOWN = 3


@dataclass(frozen=True)
class PlanProblem:
    """Why one operation of a plan is not a file slice of the table."""

    index: int
    partition_path: str
    file_id: str
    reason: str

    def __str__(self) -> str:
        return (
            f"operation {self.index} (partition {self.partition_path!r}, "
            f"file id {self.file_id!r}): {self.reason}"
        )


def verify_plan(view: FileSystemView, instant: str, plan: HoodieCompactionPlan) -> None:
    """Refuse ``plan`` (the compaction ``instant``) unless every operation is a file slice of
    ``view``.

    Raises:
        HoodieCorruptedDataError: naming the first operations that fail, each with its
            partition, file id and what does not match.
    """
    problems = plan_problems(view, instant, plan)
    if not problems:
        return
    shown = "; ".join(str(p) for p in problems[:_SHOWN])
    more = len(problems) - _SHOWN
    tail = f"; and {more} more" if more > 0 else ""
    raise HoodieCorruptedDataError(
        f"corrupt compaction plan {instant}: {shown}{tail}. The plan was not run and nothing "
        f"was written; drop it with `hoodie-ray compactions drop <path> {instant}`"
    )


def plan_problems(
    view: FileSystemView, instant: str, plan: HoodieCompactionPlan
) -> list[PlanProblem]:
    """Every operation of ``plan`` that does not match the file slices of ``view``.

    An operation must name a partition of the table, a file group of that partition, the
    group's latest slice by its base instant, that slice's base file (or none), and only log
    files of that slice, each once; no file group may appear twice. With completion-time
    slicing (table version 8+), it must also name every log file of the slice completed before
    ``instant``: those would otherwise stay behind in the superseded slice, unread.

    The view may hold more log files in the slice than the plan: written after the plan was
    scheduled (table version 6 names them by the base instant, or Java by the compaction
    instant; version 8 by their own delta commit). Those stay out of the compaction.
    """
    groups: dict[str, dict[str, FileGroup] | None] = {}
    seen: set[tuple[str, str]] = set()
    out: list[PlanProblem] = []
    for i, op in enumerate(plan.operations or []):
        part = op.partition_path or ""
        if part not in groups:
            groups[part] = _groups_of(view, part)
        reason = _operation_problem(view, instant, op, groups[part], seen)
        if reason is not None:
            out.append(PlanProblem(i, part, op.file_id, reason))
    return out


def _groups_of(view: FileSystemView, partition: str) -> dict[str, FileGroup] | None:
    """The file groups of ``partition`` by id (replaced ones too); None: no such partition."""
    if not view.list_files(partition, include_dirs=True):
        return None
    fgs = view.all_file_groups([partition], include_replaced=True)
    return {fg.file_id: fg for fg in fgs}


def _operation_problem(
    view: FileSystemView,
    instant: str,
    op: HoodieCompactionOperation,
    groups: dict[str, FileGroup] | None,
    seen: set[tuple[str, str]],
) -> str | None:
    part = op.partition_path or ""
    if groups is None:
        return f"no partition {part!r} in the table"
    if (part, op.file_id) in seen:
        return "the file group is in the plan more than once"
    seen.add((part, op.file_id))
    fg = groups.get(op.file_id)
    if fg is None:
        return f"no file group {op.file_id!r} in partition {part!r}"
    latest = fg.latest_slice()
    slc = fg.slices.get(op.base_instant_time)
    if slc is None:
        return (
            f"base instant {op.base_instant_time!r} is no file slice of the file group "
            f"(its slices: {', '.join(sorted(fg.slices)) or 'none'})"
        )
    if latest is not None and slc.base_instant != latest.base_instant:
        return (
            f"base instant {op.base_instant_time!r} is not the file group's latest slice "
            f"({latest.base_instant})"
        )
    base = _base_file_problem(op, slc)
    if base is not None:
        return base
    return _log_files_problem(view, instant, op, slc)


def _base_file_problem(op: HoodieCompactionOperation, slc: FileSlice) -> str | None:
    if op.data_file_path == slc.base_file:
        return None
    if op.data_file_path is None:
        return f"no base file in the plan, but the slice's base file is {slc.base_file!r}"
    parsed = parse_base_file_name(op.data_file_path)
    if parsed is not None and parsed.file_id != op.file_id:
        why = f"it belongs to file group {parsed.file_id!r}"
    elif slc.base_file is None:
        why = "the slice has no base file"
    else:
        why = f"the slice's base file is {slc.base_file!r}"
    return f"base file {op.data_file_path!r} is not the slice's base file ({why})"


def _log_files_problem(
    view: FileSystemView, instant: str, op: HoodieCompactionOperation, slc: FileSlice
) -> str | None:
    in_slice = set(slc.log_files)
    planned: set[str] = set()
    for name in op.delta_file_paths or []:
        if name in planned:
            return f"log file {name!r} is in the operation more than once"
        planned.add(name)
        if name in in_slice:
            continue
        parsed = parse_log_file_name(name)
        if parsed is None:
            why = "not a log file name"
        elif parsed.file_id != op.file_id:
            why = f"it belongs to file group {parsed.file_id!r}"
        elif not any(i.name == name for i in view.list_files(slc.partition_path)):
            why = "no such file"
        else:
            why = "not committed, or in another slice"
        return f"log file {name!r} is not a log file of the slice ({why})"
    if view.uses_completion_time:
        tl = view.timeline
        for name in slc.log_files:
            if name in planned:
                continue
            parsed = parse_log_file_name(name)
            if parsed is None:
                continue
            done = tl.completion_time(parsed.instant) or parsed.instant
            if done < instant:
                return (
                    f"log file {name!r} of the slice, completed before the plan, is missing "
                    "from it (its records would be lost)"
                )
    return None
