"""Replace operations (Hudi's ``replacecommit``): which file groups a write replaces.

* ``insert_overwrite``: the input goes into new file groups (no index lookup, no small files);
  every other file group of each partition it writes is replaced;
* ``insert_overwrite_table``: the same, over every partition of the table (an empty input
  replaces them all: the table is truncated);
* ``delete_partition``: no data; every file group of the partitions named by
  ``hoodie.datasource.write.partitions.to.delete`` (``*`` a wildcard) or, without it, of those
  the input's rows fall in is replaced; refused while a pending compaction or clustering
  plan covers one of them (Java's ``DeletePartitionUtils``).

The replaced groups are read from the file-system view at commit time, under the lock, so a
group another writer added meanwhile is replaced too; the commit's
``partitionToReplaceFileIds`` lists each overwritten partition, with no ids where it held none
(as Java's ``getPartitionToReplacedFileIds``). Readers leave replaced groups out from the
replacecommit on; the cleaner deletes their files once the replacecommit is older than the
earliest commit it retains.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from hoodie_ray.config.options import lookup
from hoodie_ray.exceptions import HoodieOptionError, HoodieUnsupportedError
from hoodie_ray.file_group.view import FileSystemView
from hoodie_ray.job.conflict import plan_file_groups
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action
from hoodie_ray.timeline.metadata import HoodieWriteStat
from hoodie_ray.write.commit import is_write

#: Hudi's operation type of each replace operation (``WriteOperationType``).
REPLACE_OPERATION_TYPES = {
    "insert_overwrite": "INSERT_OVERWRITE",
    "insert_overwrite_table": "INSERT_OVERWRITE_TABLE",
    "delete_partition": "DELETE_PARTITION",
}

PARTITIONS_TO_DELETE = lookup("partitions.to.delete").key  # the option's canonical key


def parse_partitions(value: str | None) -> list[str]:
    """The partition paths (or patterns) of a comma-separated option value."""
    return [p.strip().strip("/") for p in (value or "").split(",") if p.strip().strip("/")]


def match_partitions(patterns: Sequence[str], partitions: Iterable[str]) -> list[str]:
    """The partitions ``patterns`` name, sorted: a pattern without ``*`` names its partition
    whether or not the table has it (nothing to replace there); one with ``*`` names every
    one of ``partitions`` it matches whole, ``*`` matching any run of characters, ``/``
    included (``2024/*`` matches ``2024/01/02``), as Java's ``resolvePartitionWildcards``.

    Raises:
        HoodieOptionError: no pattern given.
    """
    if not patterns:
        raise HoodieOptionError(
            f"write.operation=delete_partition needs the partitions to delete: set "
            f"{PARTITIONS_TO_DELETE} (comma-separated partition paths, * as a wildcard) or "
            "give rows of them"
        )
    known = sorted(set(partitions))
    out: set[str] = set()
    for pat in patterns:
        if "*" not in pat:
            out.add(pat)
            continue
        rx = re.compile(".*".join(re.escape(part) for part in pat.split("*")) + r"\Z", re.S)
        out.update(p for p in known if rx.match(p))
    return sorted(out)


def replaced_file_ids(
    view: FileSystemView,
    partitions: Iterable[str] | None,
    stats: Iterable[HoodieWriteStat] = (),
) -> dict[str, list[str]]:
    """``partitionToReplaceFileIds`` of a replace commit: every latest file group of
    ``partitions`` (None: of every partition) but those the commit's ``stats`` write, each
    partition listed even when it holds no group."""
    own = {(s.partition_path or "", s.file_id) for s in stats if s.file_id}
    wanted = None if partitions is None else sorted(set(partitions))
    out: dict[str, list[str]] = {p: [] for p in wanted or ()}
    if wanted is None or wanted:
        # every group with a committed file, its latest slice empty or not (a pending
        # compaction's new slice holds nothing yet)
        for fg in view.all_file_groups(wanted):
            if fg.file_group_id not in own and any(not s.is_empty for s in fg.slices.values()):
                out.setdefault(fg.partition_path, []).append(fg.file_id)
    return {p: sorted(set(ids)) for p, ids in sorted(out.items())}


def written_partitions(stats: Iterable[HoodieWriteStat]) -> list[str]:
    """The partitions a commit's stats write."""
    return sorted({s.partition_path or "" for s in stats if s.file_id})


def check_no_pending_services(table: HoodieTable, partitions: Sequence[str]) -> None:
    """Refuse a partition delete while a pending compaction, log compaction or clustering
    plan covers one of ``partitions`` (Java's ``DeletePartitionUtils``): the plan would write
    the deleted groups' slices back.

    Raises:
        HoodieUnsupportedError: naming the plans and what finishes them.
    """
    wanted = set(partitions)
    tl = table.active_timeline
    busy = []
    for inst in tl.pending():
        service = inst.action in (Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING) or (
            inst.action == Action.REPLACE_COMMIT and not is_write(tl, inst)
        )
        if service and any(p in wanted for p, _ in plan_file_groups(table, inst)):
            busy.append(f"{inst.timestamp} ({inst.action})")
    if busy:
        raise HoodieUnsupportedError(
            f"{table.base_uri}: cannot delete partitions {', '.join(sorted(wanted))}: pending "
            f"table services cover them: {', '.join(busy)}; run them first (hoodie-ray compact "
            f"{table.base_uri}) or drop their plans"
        )
