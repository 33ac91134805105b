"""Clustering (Hudi's ``clustering`` table service): small file slices rewritten into fewer,
larger base files, optionally sorted, committed as a ``replacecommit`` that replaces them.

* Plan (Java's size-based plan strategy): per partition, the latest slices whose base file is
  under ``hoodie.clustering.plan.strategy.small.file.limit`` (a slice without one counts as
  ``hoodie.parquet.max.file.size``), of file groups no pending compaction or clustering
  covers, largest first, packed into groups of at most ``...max.bytes.per.group``; a group is
  worth rewriting when it merges two or more slices, or sorts one; at most
  ``...max.num.groups`` groups. Each group writes ``ceil(bytes / ...target.file.max.bytes)``
  new file groups.
* Scheduled as Java writes it: ``T.clustering.requested`` (table versions 8+) or
  ``T.replacecommit.requested`` (6) holding ``HoodieRequestedReplaceMetadata`` (operation
  ``CLUSTER``, the plan); an empty inflight file when it runs.
* Executed per group (a task: :func:`execute_group`, picklable, so Ray can run it): the
  group's slices merged (:mod:`~hoodie_ray.reader.file_slice_reader`), ordered by
  ``hoodie.clustering.plan.strategy.sort.columns`` when given (linear, z-order or hilbert:
  :mod:`~hoodie_ray.compaction.layout`), cut into the new files; the
  rows keep their meta columns (``preserveHoodieMetadata``), the file name excepted.
* Committed as a ``replacecommit`` (operation ``CLUSTER``) whose ``partitionToReplaceFileIds``
  are the input groups; the metadata table follows as for any replace (the record index
  points the keys at their new groups). A clustering that died is rolled back before the
  next one is planned.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from hoodie_ray.compaction.execute import (
    _as_written,
    _KeyFooter,
    _write_parquet_stream,
    compaction_context,
)
from hoodie_ray.compaction.layout import check_layout_columns, layout_order
from hoodie_ray.compaction.plan import read_plan
from hoodie_ray.config.options import WriteConfig
from hoodie_ray.config.table_config import BUCKET_NUM_PROPERTY
from hoodie_ray.exceptions import HoodieTimelineError, HoodieUnsupportedError
from hoodie_ray.file_group.naming import base_file_name
from hoodie_ray.file_group.view import FileSlice
from hoodie_ray.index.bloom_filter import BloomFilterSpec
from hoodie_ray.meta import RECORD_KEY
from hoodie_ray.reader.file_slice_reader import ReadContext, SliceSpec, iter_file_slice
from hoodie_ray.storage import join
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.metadata import HoodieWriteStat
from hoodie_ray.timeline.plans import (
    HoodieClusteringGroup,
    HoodieClusteringPlan,
    HoodieSliceInfo,
)
from hoodie_ray.write.base_file import constant_strings

_MB = 1024 * 1024


def clustering_action(table: HoodieTable) -> str:
    """The pending action of a clustering: ``clustering`` on timeline layout 2, else
    ``replacecommit``."""
    return Action.CLUSTERING if table.layout_version >= 2 else Action.REPLACE_COMMIT


def read_clustering_plan(table: HoodieTable, inst: Instant) -> HoodieClusteringPlan:
    """The plan of clustering ``inst`` (pending, or its completed replacecommit: on layout 2
    the plan is in ``T.clustering.requested``, as Java looks for it first)."""
    tl = table.active_timeline
    actions = [inst.action]
    if inst.action == Action.REPLACE_COMMIT and table.layout_version >= 2:
        actions.insert(0, Action.CLUSTERING)
    for action in actions:
        req = Instant(inst.timestamp, action, State.REQUESTED)
        if table.storage.exists(tl.instant_path(req)):
            return HoodieClusteringPlan.from_bytes(tl.read_details(req), tl.file_name(req))
    raise HoodieTimelineError(f"{table.base_uri}: no clustering plan for {inst.timestamp}")


def clustering_file_groups(table: HoodieTable) -> dict[tuple[str, str], str]:
    """``(partition, file id)`` -> the pending clustering that rewrites it."""
    out: dict[tuple[str, str], str] = {}
    for inst in table.pending_clusterings():
        for g in read_clustering_plan(table, inst).file_groups():
            out[g] = inst.timestamp
    return out


def _busy_groups(table: HoodieTable) -> set[tuple[str, str]]:
    """File groups a pending compaction or clustering plan covers."""
    out: set[tuple[str, str]] = set()
    tl = table.active_timeline
    for inst in tl.pending_compactions():
        plan = read_plan(tl, inst)
        out |= {(op.partition_path or "", op.file_id) for op in plan.operations or []}
    return out | set(clustering_file_groups(table))


def sort_columns(wc: WriteConfig) -> tuple[str, ...]:
    """The configured sort columns (``hoodie.clustering.plan.strategy.sort.columns``)."""
    return tuple(c.strip() for c in (wc.clustering_sort_columns or "").split(",") if c.strip())


def plan_clustering(table: HoodieTable, wc: WriteConfig) -> HoodieClusteringPlan | None:
    """The clustering plan of the table as it is (see the module's description), or None.

    Raises:
        HoodieUnsupportedError: a table of the simple bucket index, whose file groups are
            fixed per bucket (Hudi refuses to cluster it too).
    """
    if wc.index_type == "BUCKET" or BUCKET_NUM_PROPERTY in table.table_config.props:
        raise HoodieUnsupportedError(
            f"{table.base_uri}: clustering is not supported with the bucket index (a key's "
            "file group is fixed by its bucket), as Hudi refuses it for the simple bucket index"
        )
    sort = sort_columns(wc)
    storage = table.storage
    busy = _busy_groups(table)
    by_part: dict[str, list[tuple[int, FileSlice]]] = {}
    sizes: dict[str, dict[str, int]] = {}
    for s in table.view().latest_file_slices():
        if (s.partition_path, s.file_id) in busy:
            continue
        d = sizes.get(s.partition_path)
        if d is None:
            d = sizes[s.partition_path] = {
                i.name: i.size for i in storage.list_dir(s.partition_path)
            }
        size = d.get(s.base_file, 0) if s.base_file else wc.parquet_max_file_size
        if size < wc.clustering_small_file_limit:
            by_part.setdefault(s.partition_path, []).append((size, s))
    groups: list[HoodieClusteringGroup] = []
    for part in sorted(by_part):
        members = sorted(by_part[part], key=lambda e: (-e[0], e[1].file_id))
        current: list[tuple[int, FileSlice]] = []
        total = 0
        packed: list[list[tuple[int, FileSlice]]] = []
        for size, s in members:
            if current and total + size > wc.clustering_max_bytes_per_group:
                packed.append(current)
                current, total = [], 0
            current.append((size, s))
            total += size
        if current:
            packed.append(current)
        for g in packed:
            if len(g) < 2 and not sort:
                continue  # one slice rewritten unsorted gains nothing
            groups.append(_group(g, wc, table))
    groups = groups[: wc.clustering_max_num_groups]
    if not groups:
        return None
    return HoodieClusteringPlan(groups, sort, layout=wc.layout_optimize_strategy if sort else None)


def _group(
    members: list[tuple[int, FileSlice]], wc: WriteConfig, table: HoodieTable
) -> HoodieClusteringGroup:
    storage = table.storage
    total = sum(size for size, _ in members)
    log_bytes = 0
    log_files = 0
    for _, s in members:
        for n in s.log_files:
            log_files += 1
            rel = join(s.partition_path, n)
            log_bytes += storage.size(rel) if storage.exists(rel) else 0
    read_mb = float((total + log_bytes) // _MB)
    metrics = {
        "TOTAL_IO_READ_MB": read_mb,
        "TOTAL_IO_WRITE_MB": float(total // _MB),
        "TOTAL_IO_MB": read_mb + float(total // _MB),
        "TOTAL_LOG_FILES_SIZE": float(log_bytes),
        "TOTAL_LOG_FILES": float(log_files),
    }
    slices = [
        HoodieSliceInfo(s.partition_path, s.file_id, s.base_file, tuple(s.log_files))
        for _, s in members
    ]
    outputs = max(1, math.ceil(total / wc.clustering_target_file_max_bytes))
    return HoodieClusteringGroup(slices, outputs, metrics)


@dataclass(frozen=True)
class ClusteringTask:
    """One group's rewrite (picklable, so a Ray task can run it)."""

    context: ReadContext  # end instant = the clustering instant
    instant: str
    group: HoodieClusteringGroup
    slices: tuple[SliceSpec, ...]
    task_id: int
    avro_schema_json: str
    output_schema: pa.Schema
    sort_columns: tuple[str, ...] = ()
    codec: str = "snappy"
    bloom: BloomFilterSpec | None = None
    layout: str = "linear"  # the row order over the sort columns (compaction.layout)
    table: str = ""  # the table's name (the metrics' tag)


def clustering_tasks(
    table: HoodieTable, instant: str, plan: HoodieClusteringPlan, wc: WriteConfig
) -> list[ClusteringTask]:
    """One task per group of ``plan``, its slices as the table's view holds them."""
    ctx, avro_json, output = compaction_context(table, instant)
    wanted = plan.file_groups()
    latest = {
        (s.partition_path, s.file_id): s
        for s in table.view().latest_file_slices(partitions=sorted({p for p, _ in wanted}))
        if (s.partition_path, s.file_id) in wanted
    }
    missing = sorted(wanted - set(latest))
    if missing:
        raise HoodieUnsupportedError(
            f"{table.base_uri}: clustering {instant} plans file groups the table no longer "
            f"holds: {', '.join(f'{p}/{f}' for p, f in missing[:5])}"
        )
    for col in plan.sort_columns:
        if col not in output.names:
            raise HoodieUnsupportedError(
                f"{table.base_uri}: clustering sort column {col!r} is not a column of the table"
            )
    return [
        ClusteringTask(
            ctx,
            instant,
            g,
            tuple(SliceSpec.of(latest[(s.partition_path, s.file_id)]) for s in g.slices),
            i,
            avro_json,
            output,
            plan.sort_columns,
            wc.parquet_codec,
            BloomFilterSpec.of(wc),
            plan.layout or wc.layout_optimize_strategy,
            table.name,
        )
        for i, g in enumerate(plan.groups)
    ]


def execute_group(task: ClusteringTask) -> list[HoodieWriteStat]:
    """Merge the group's slices, sort them by the sort columns (if any), and write them into
    the group's new base files; their write stats (with the keys each holds, for the record
    index)."""
    ctx = task.context
    storage = ctx.storage()
    tables = [t for s in task.slices for t in iter_file_slice(ctx, s, storage) if t.num_rows]
    if not tables:
        return []
    rows = pa.concat_tables(tables, promote_options="permissive")
    if task.sort_columns:
        rows = rows.take(layout_order(rows, task.sort_columns, task.layout))
    part = task.slices[0].partition_path
    n = rows.num_rows
    outputs = max(1, min(task.group.num_output_groups, n))
    per = math.ceil(n / outputs)
    md = {
        b"parquet.avro.schema": task.avro_schema_json.encode(),
        b"writer.model.name": b"avro",
    }
    schema = task.output_schema.with_metadata(md)
    compression = None if task.codec in ("none", "uncompressed") else task.codec
    stats = []
    for k in range(outputs):
        chunk = rows.slice(k * per, per)
        if not chunk.num_rows:
            continue
        fid = f"{uuid.uuid4()}-0"
        name = base_file_name(fid, f"{task.task_id}-{k}-0", task.instant)
        rel = join(part, name)
        keys = _KeyFooter(task.bloom)
        unit = constant_strings(name, max(1, min(chunk.num_rows, 1 << 16)))
        with storage.open_output(rel) as out:
            written = _write_parquet_stream(
                out,
                schema,
                [keys.observe(_as_written(chunk, schema, unit))],
                compression,
                keys.footer,
            )
            size = out.tell()
        st = HoodieWriteStat(
            file_id=fid,
            path=rel,
            prev_commit="null",
            num_writes=written,
            num_inserts=written,
            total_write_bytes=size,
            partition_path=part,
            file_size_in_bytes=size,
        )
        st.record_key_ops = [(chunk.column(RECORD_KEY).combine_chunks(), True)]
        stats.append(st)
    return stats


#: Runs clustering tasks: ``(execute_group, tasks) -> each task's stats``, in order.
ClusteringExecutor = Callable[
    [Callable[[ClusteringTask], list[HoodieWriteStat]], list[ClusteringTask]],
    Iterable[list[HoodieWriteStat]],
]
"""Runs ``fn`` over the tasks; their results in task order, each as it is ready."""


def local_clustering_executor(
    fn: Callable[[ClusteringTask], list[HoodieWriteStat]], tasks: list[ClusteringTask]
) -> Iterator[list[HoodieWriteStat]]:
    """One task after another in this process."""
    return (fn(t) for t in tasks)


def cluster_table(
    table: HoodieTable,
    wc: WriteConfig,
    executor: ClusteringExecutor | None = None,
    dry_run: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[str | None, HoodieClusteringPlan | None, list[HoodieWriteStat]]:
    """Roll back a clustering that died, plan one, and (unless ``dry_run``) schedule, execute
    and commit it: ``(instant, plan, stats)``; no plan: ``(None, None, [])``. Call under the
    table lock (a single writer's, for the whole run). ``on_progress(done, total)``: after
    each group is rewritten."""
    from hoodie_ray.write.commit import CommitProtocol

    protocol = CommitProtocol(table)
    if not dry_run:
        for inst in table.pending_clusterings():
            protocol.rollback(inst.timestamp)
    if dry_run:
        plan = plan_clustering(table.refresh(), wc)
        if plan is not None and plan.sort_columns:
            _check_sort_columns(table, plan, wc)  # what the run would refuse
        return None, plan, []
    started = start_clustering(table, wc)
    if started is None:
        return None, None, []
    instant, plan = started
    try:
        tasks = clustering_tasks(table, instant, plan, wc)
        run = executor or local_clustering_executor
        stats = []
        for done, group in enumerate(run(execute_group, tasks), 1):
            stats.extend(group)
            if on_progress is not None:
                on_progress(done, len(tasks))
        commit_clustering(table, instant, plan, stats)
    except BaseException:
        try:
            protocol.rollback(instant)
        except Exception:
            pass  # left pending: the next clustering rolls it back
        raise
    return instant, plan, stats


def start_clustering(
    table: HoodieTable, wc: WriteConfig
) -> tuple[str, HoodieClusteringPlan] | None:
    """Plan a clustering of the table as it is and schedule it (requested, then inflight):
    ``(instant, plan)``, or None when nothing is worth clustering."""
    from hoodie_ray.write.commit import CommitProtocol

    plan = plan_clustering(table.refresh(), wc)
    if plan is None:
        return None
    if plan.sort_columns:
        _check_sort_columns(table, plan, wc)
    instant = CommitProtocol(table).start(clustering_action(table), plan.to_bytes(table.base_uri))
    return instant, plan


def _check_sort_columns(table: HoodieTable, plan: HoodieClusteringPlan, wc: WriteConfig) -> None:
    """The plan's sort columns are the table's, of types its layout orders (refused before
    anything is scheduled, not in the tasks)."""
    from hoodie_ray.avro.schema import avro_to_arrow_schema

    schema_json = table.latest_commit_schema_json()
    if schema_json is None:
        return  # no schema yet: the tasks check against the files' own
    try:
        check_layout_columns(
            avro_to_arrow_schema(schema_json),
            plan.sort_columns,
            plan.layout or wc.layout_optimize_strategy,
        )
    except HoodieUnsupportedError as e:
        raise HoodieUnsupportedError(f"{table.base_uri}: {e}") from None


def commit_clustering(
    table: HoodieTable, instant: str, plan: HoodieClusteringPlan, stats: list[HoodieWriteStat]
) -> None:
    """Commit the executed clustering ``instant``: a replacecommit (operation ``CLUSTER``)
    replacing the plan's input file groups with the files ``stats`` wrote."""
    from hoodie_ray.write.commit import CommitProtocol

    replaced: dict[str, list[str]] = {}
    for g in plan.groups:
        for sl in g.slices:
            replaced.setdefault(sl.partition_path, []).append(sl.file_id)
    schema = table.latest_commit_schema_json()
    if schema is None:
        raise HoodieUnsupportedError(f"{table.base_uri}: no schema in any commit to cluster")
    CommitProtocol(table.refresh()).commit(
        instant,
        stats,
        schema_json=schema,
        operation_type="CLUSTER",
        action=Action.REPLACE_COMMIT,
        replaced={p: sorted(ids) for p, ids in replaced.items()},
    )


def clustering_due(table: HoodieTable, wc: WriteConfig, max_commits: int | None = None) -> bool:
    """A clustering's trigger: ``max_commits`` (default ``hoodie.clustering.inline.max.commits``)
    commits completed since the last replacecommit (or since the start)."""
    commits = table.active_timeline.completed_commits()
    since = 0
    for inst in reversed(commits):
        if inst.action == Action.REPLACE_COMMIT:
            break
        since += 1
    return since >= (wc.clustering_inline_max_commits if max_commits is None else max_commits)


__all__ = [
    "ClusteringExecutor",
    "ClusteringTask",
    "cluster_table",
    "clustering_action",
    "clustering_due",
    "clustering_file_groups",
    "clustering_tasks",
    "commit_clustering",
    "execute_group",
    "local_clustering_executor",
    "plan_clustering",
    "read_clustering_plan",
    "start_clustering",
]
