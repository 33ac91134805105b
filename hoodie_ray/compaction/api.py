"""Scheduling, running and committing compactions; cleaning old file slices."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hoodie_ray.compaction.clean import clean_table
from hoodie_ray.compaction.clustering import clustering_file_groups
from hoodie_ray.compaction.execute import (
    CompactionTask,
    compaction_cdc,
    compaction_context,
    execute_operation,
)
from hoodie_ray.compaction.plan import (
    build_plan,
    last_compaction,
    pending_file_groups,
    read_plan,
    trigger_fires,
)
from hoodie_ray.compaction.verify import verify_plan
from hoodie_ray.config.options import WriteConfig, resolve_options
from hoodie_ray.config.table_config import HoodieTableConfig
from hoodie_ray.exceptions import HoodieCompactionError, HoodieError
from hoodie_ray.file_group.naming import (
    LogFileName,
    log_file_name,
    parse_base_file_name,
    parse_log_file_name,
)
from hoodie_ray.index.bloom_filter import BloomFilterSpec
from hoodie_ray.metadata_writer.writer import metadata_writer
from hoodie_ray.storage import FileInfo, Storage, join
from hoodie_ray.table import HoodieTable
from hoodie_ray.timeline.instant import Action, Instant, State
from hoodie_ray.timeline.metadata import HoodieCommitMetadata, HoodieWriteStat
from hoodie_ray.timeline.plans import HoodieCleanMetadata, HoodieCompactionPlan
from hoodie_ray.timeline.timeline import ActiveTimeline
from hoodie_ray.write.commit import pending_write_files
from hoodie_ray.write.logs import is_copy_of

#: Runs a list of tasks and returns their write stats (raises if any failed).
Executor = Callable[[list[CompactionTask]], list[HoodieWriteStat]]


def local_executor(tasks: list[CompactionTask]) -> list[HoodieWriteStat]:
    """Run the operations one after another in this process."""
    return [execute_operation(t) for t in tasks]


class CompactionService:
    """Compaction and cleaning of one table (held by the coordinator, or used offline).

    It decides nothing about when: the job layer calls :meth:`schedule`, :meth:`run` and
    :meth:`clean`, and hands in the executor that runs the operations (in this process, or
    on Ray from above).
    """

    def __init__(self, table: HoodieTable, wc: WriteConfig) -> None:
        self.table = table
        self.wc = wc

    @classmethod
    def open(cls, path: str, options: Any = None, storage_options: Any = None) -> CompactionService:
        return cls(HoodieTable.load(path, storage_options), resolve_options(options))

    @property
    def path(self) -> str:
        return self.table.path

    @property
    def storage(self) -> Storage:
        return self.table.storage

    @property
    def table_config(self) -> HoodieTableConfig:
        return self.table.table_config

    @property
    def timeline(self) -> ActiveTimeline:
        return self.table.active_timeline

    # -- schedule ------------------------------------------------------------------------------
    def plan(self, force: bool = False, beside_writes: bool = False) -> HoodieCompactionPlan | None:
        """The plan :meth:`schedule` would write now (nothing is written), or None: not a MOR
        table, the trigger does not fire (unless ``force``), a write is in flight (unless
        ``beside_writes``), or no file slice outside a pending plan has log files.

        ``beside_writes`` (several writers, under the table lock): the plan covers completed
        writes only, so writes in flight go on beside it. On table version 8+ the view holds
        only logs of completed delta commits; on version 6, whose logs are named by their
        slice, the logs of writes in flight (found by their markers) are left out, and the
        compaction's commit carries them over once they completed."""
        if not self.table_config.is_mor:
            return None
        self.timeline.reload()
        if not force and not trigger_fires(self.timeline, self.wc):
            return None
        if not beside_writes and any(
            i.action in (Action.COMMIT, Action.DELTA_COMMIT)
            for i in self.timeline.pending_commits()
        ):
            return None  # a write is in flight: schedule after it
        slices = self.table.view().latest_file_slices()
        if beside_writes and not self.table.completion_time_slicing:
            in_flight = pending_write_files(self.table)  # after the listing: see its doc
            slices = [
                dataclasses.replace(
                    s, log_files=[n for n in s.log_files if (s.partition_path, n) not in in_flight]
                )
                for s in slices
            ]
        # groups a pending clustering rewrites are left out, as Java's planner leaves them
        busy = pending_file_groups(self.timeline) | set(clustering_file_groups(self.table))
        plan = build_plan(self.storage, slices, busy)
        return plan if plan.operations else None

    def schedule(self, force: bool = False, beside_writes: bool = False) -> str | None:
        """Write a compaction plan if the trigger fires (or ``force``); its instant, or None
        (``beside_writes``: see :meth:`plan`)."""
        plan = self.plan(force, beside_writes)
        if plan is None:
            return None
        from hoodie_ray.timeline.instant import new_instant_time

        last = max(
            [i.timestamp for i in self.timeline.instants]
            + [self.timeline.max_completion_time() or ""]
        )
        instant = new_instant_time(last or None)
        self.timeline.create_requested(
            Instant(instant, Action.COMPACTION, State.REQUESTED), plan.to_bytes()
        )
        return instant

    def read_plan(self, instant: str) -> HoodieCompactionPlan:
        """The plan of the compaction ``instant`` (pending or completed)."""
        self.timeline.reload()
        inst = self.timeline.get(instant, Action.COMPACTION)
        if inst is None:
            raise HoodieCompactionError(f"no compaction {instant} on {self.path}")
        return read_plan(self.timeline, inst)

    def pending(self) -> list[str]:
        self.timeline.reload()
        return [i.timestamp for i in self.timeline.pending_compactions()]

    # -- execute and commit --------------------------------------------------------------------
    def tasks(self, instant: str) -> list[CompactionTask]:
        """Check the plan, move it to inflight and return one task per operation.

        Raises:
            HoodieCorruptedDataError: an operation is not a file slice of the table (nothing
                was written, the plan stays as it was).
        """
        return self._start(*self._checked_plan(instant))

    def _checked_plan(self, instant: str) -> tuple[Instant, HoodieCompactionPlan]:
        """The pending plan ``instant``, verified against the current file-system view."""
        self.timeline.reload()
        inst = self.timeline.get(instant, Action.COMPACTION)
        if inst is None or inst.is_completed:
            raise HoodieCompactionError(f"no pending compaction {instant} on {self.path}")
        plan = read_plan(self.timeline, inst)
        verify_plan(self.table.view(), instant, plan)
        return inst, plan

    def _start(self, inst: Instant, plan: HoodieCompactionPlan) -> list[CompactionTask]:
        instant = inst.timestamp
        if inst.state is State.REQUESTED:
            self.timeline.transition_to_inflight(
                Instant(instant, Action.COMPACTION, State.REQUESTED)
            )
        ctx, avro_json, output_schema = compaction_context(self.table, instant)
        cdc = compaction_cdc(self.table, output_schema, avro_json)
        return [
            CompactionTask(
                ctx,
                instant,
                op,
                i,
                avro_json,
                self.wc.parquet_codec,
                output_schema,
                BloomFilterSpec.of(self.wc),
                cdc,
            )
            for i, op in enumerate(plan.operations or [])
        ]

    def commit(self, instant: str, stats: list[HoodieWriteStat]) -> HoodieCommitMetadata:
        """Carry post-plan logs over (v6), then write ``<instant>.commit`` atomically."""
        self.timeline.reload()
        inst = self.timeline.get(instant, Action.COMPACTION)
        if inst is None or inst.is_completed:
            # another process ran it too (its heartbeat had expired): its commit stands
            raise HoodieCompactionError(f"compaction {instant} is not pending on {self.path}")
        plan = read_plan(self.timeline, inst)
        carried = {} if self.table.completion_time_slicing else self._carry_over_logs(instant, plan)
        by_part: dict[str, list[HoodieWriteStat]] = {}
        for st in stats:
            by_part.setdefault(st.partition_path or "", []).append(st)
        schema = self.table.latest_commit_schema_json()
        meta = HoodieCommitMetadata(
            partition_to_write_stats=by_part,
            compacted=True,
            extra_metadata={"schema": schema} if schema else {},
            operation_type="COMPACT",
        )
        content = self.table.commit_metadata_bytes(meta)
        mdt = metadata_writer(self.table)
        mdt.update_commit(instant, meta, also_listed=carried)
        self.timeline.complete(Instant(instant, Action.COMPACTION, State.INFLIGHT), content)
        mdt.run_table_services()
        return meta

    def _carried_over(self, part: str, instant: str, infos: list[FileInfo]) -> list[str]:
        """The logs named by ``instant`` in ``part`` that :meth:`_carry_over_logs` copied from
        a log of the same file group and write token in an older slice
        (:func:`~hoodie_ray.write.logs.is_copy_of`: appended to since, or cut short by a
        crash)."""
        older: dict[tuple[str, str], list[FileInfo]] = {}
        named: list[tuple[FileInfo, LogFileName]] = []
        for info in infos:
            lf = parse_log_file_name(info.name)
            if lf is None or lf.is_cdc:
                continue
            if lf.instant == instant:
                named.append((info, lf))
            else:
                older.setdefault((lf.file_id, lf.write_token or "0-0-0"), []).append(info)
        copies = []
        for info, lf in named:
            sources = older.get((lf.file_id, lf.write_token or "0-0-0"), [])
            if sources:
                data = self.storage.read_bytes(join(part, info.name))
                if any(
                    is_copy_of(data, self.storage.read_bytes(join(part, src.name)))
                    for src in sources
                ):
                    copies.append(info.name)
        return copies

    def _carry_over_logs(
        self, instant: str, plan: HoodieCompactionPlan
    ) -> dict[str, dict[str, int]]:
        """Copy the log files written after the plan into the new slice (named by
        ``instant``); the copies (partition -> name -> size), for the metadata table's
        ``files`` listing."""
        copies: dict[str, dict[str, int]] = {}
        view = self.table.view()
        slices = {(s.partition_path, s.file_id): s for s in view.latest_file_slices()}
        # logs of writes still in flight (several writers) stay: a write whose logs end up in
        # the superseded slice moves them over itself as it commits (relocate_superseded_logs)
        in_flight = pending_write_files(self.table)
        for op in plan.operations or []:
            part = op.partition_path or ""
            s = slices.get((part, op.file_id))
            if s is None:
                continue
            planned = set(op.delta_file_paths or [])
            version = 0
            for name in s.log_files:
                if name in planned or (part, name) in in_flight:
                    continue
                lf = parse_log_file_name(name)
                if lf is None or lf.instant != (op.base_instant_time or lf.instant):
                    continue
                version += 1
                dst = log_file_name(op.file_id, instant, version, lf.write_token or "0-0-0")
                data = self.storage.read_bytes(join(part, name))
                self.storage.write_bytes(join(part, dst), data)
                copies.setdefault(part, {})[dst] = len(data)
        return copies

    def rollback_inflight(self, instant: str) -> None:
        """Undo a failed execution: delete what it wrote (its base files, and on version 6 the
        logs it carried over), back to requested.

        Other log files named by ``instant`` stay: on a version-6 table Java's writers name the
        logs they write after the plan so (they open the slice the compaction starts).
        """
        self.timeline.reload()
        inst = self.timeline.get(instant, Action.COMPACTION)
        if inst is None or inst.state is State.COMPLETED:
            return
        plan = read_plan(self.timeline, inst)
        for part in {op.partition_path or "" for op in plan.operations or []}:
            infos = self.storage.list_dir(part)
            for info in infos:
                if _written_by(info.name, instant):
                    self.storage.delete(join(part, info.name))
            for name in self._carried_over(part, instant, infos):
                self.storage.delete(join(part, name))
        metadata_writer(self.table).rollback_instant(instant)
        if inst.state is State.INFLIGHT:
            inflight = Instant(instant, Action.COMPACTION, State.INFLIGHT)
            self.storage.delete(self.timeline.instant_path(inflight))
        self.timeline.reload()

    def unwind_logs(self, instant: str) -> dict[str, str]:
        """Before the completed compaction ``instant`` is rolled back (a restore past it): the
        data logs named by it that it did not write itself go back to the slice before it. A
        copy it carried over (version 6: the logs written after its plan) is deleted, its
        source being there still; a log a write that completed after it moved into its slice
        (:func:`~hoodie_ray.write.commit.relocate_superseded_logs`) is moved back, named after
        the older slice's logs, so that write's rows stay readable when it is kept. Returns
        where each moved log went."""
        self.timeline.reload()
        inst = self.timeline.get(instant, Action.COMPACTION)
        moved: dict[str, str] = {}
        if inst is None or not inst.is_completed:
            return moved
        # each compacted group's slice before it (the stats' prevCommit: an upgraded table
        # keeps no plans of completed compactions)
        bases = {
            (part, st.file_id): st.prev_commit
            for part, st in self.table.metadata(inst).iter_write_stats()
            if st.file_id and (st.prev_commit or "").isdigit()
        }
        for part in sorted({p for p, _ in bases}):
            infos = self.storage.list_dir(part)
            copies = set(self._carried_over(part, instant, infos))
            names = [i.name for i in infos]
            for info in infos:
                lf = parse_log_file_name(info.name)
                if lf is None or lf.is_cdc or lf.instant != instant:
                    continue
                src = join(part, info.name)
                if info.name in copies:
                    self.storage.delete(src)
                    continue
                base = bases.get((part, lf.file_id))
                if base is None:
                    continue  # a group the plan did not touch
                token = lf.write_token or "0-0-0"
                versions = [
                    o.version
                    for o in map(parse_log_file_name, names)
                    if o is not None
                    and not o.is_cdc
                    and o.file_id == lf.file_id
                    and o.instant == base
                ]
                dst = log_file_name(lf.file_id, base, max(versions, default=0) + 1, token)
                self.storage.write_bytes(join(part, dst), self.storage.read_bytes(src))
                self.storage.delete(src)
                names.append(dst)
                moved[src] = join(part, dst)
        return moved

    def run(self, instant: str, executor: Executor = local_executor) -> HoodieCommitMetadata:
        """Execute and commit one compaction; roll it back to requested if anything fails.

        A plan that fails :func:`~hoodie_ray.compaction.verify.verify_plan` is refused before
        anything is written or rolled back.
        """
        inst, plan = self._checked_plan(instant)
        try:
            stats = executor(self._start(inst, plan))
            return self.commit(instant, stats)
        except BaseException as e:
            self.rollback_inflight(instant)
            if isinstance(e, HoodieError):
                raise
            raise HoodieCompactionError(f"compaction {instant} of {self.path} failed: {e}") from e

    # -- drop ----------------------------------------------------------------------------------
    def drop(self, instant: str) -> list[str]:
        """Delete the pending compaction plan ``instant`` (requested or inflight).

        Call it holding the writer lock (:func:`hoodie_ray.job.maintenance.drop_compaction` takes it). The plan is not read,
        so an unreadable or corrupt plan can be dropped too. Base (and ``.cdc``) files named by ``instant``
        (left by an interrupted run; never committed) are deleted first, then the inflight and
        requested files, so a crash part way leaves the plan pending. Returns the deleted data
        files (paths relative to the table).

        Raises:
            HoodieCompactionError: ``instant`` is not a pending compaction (unknown, or already
                completed), or log files are named by it: table version 6 writers (Java's) put
                updates that arrive after the plan into such files, and without the plan
                readers would drop them. Run the compaction instead.
        """
        self.timeline.reload()
        inst = self.timeline.get(instant, Action.COMPACTION)
        if inst is not None and inst.is_completed:
            raise HoodieCompactionError(
                f"compaction {instant} of {self.path} is completed; only a pending plan can be "
                "dropped"
            )
        if inst is None or inst.action != Action.COMPACTION:
            raise HoodieCompactionError(f"no pending compaction {instant} on {self.path}")
        view = self.table.storage_view()  # files of an interrupted run are in no listing
        bases: list[str] = []
        logs: list[str] = []
        for part in view.list_partitions():
            for info in view.list_files(part):
                lf = parse_log_file_name(info.name)
                if _written_by(info.name, instant):
                    bases.append(join(part, info.name))
                elif lf is not None and lf.instant == instant:
                    logs.append(join(part, info.name))
        if logs:
            shown = ", ".join(logs[:3]) + (", ..." if len(logs) > 3 else "")
            raise HoodieCompactionError(
                f"cannot drop compaction {instant} of {self.path}: {len(logs)} log files are "
                f"named by it ({shown}) and may hold records written after it was scheduled; "
                "run the compaction instead"
            )
        for rel in bases:
            self.storage.delete(rel)
        metadata_writer(self.table).rollback_instant(instant)  # a crash may have left one
        self.timeline.delete_pending(inst)
        self.timeline.reload()
        return bases

    # -- clean ---------------------------------------------------------------------------------
    def clean(self) -> HoodieCleanMetadata | None:
        """Delete file slices older than the last ``clean.retain_commits`` commits need; what
        was deleted (None: nothing)."""
        return clean_table(self.table, self.wc.clean_retain_commits)


def _written_by(name: str, instant: str) -> bool:
    """Is ``name`` a file the compaction ``instant`` writes: a base file, or the ``.cdc`` log
    file of a CDC table's compacted group (never a data log: on version 6 Java's writers name
    the logs they write after the plan by it)?"""
    b = parse_base_file_name(name)
    if b is not None:
        return b.instant == instant
    lf = parse_log_file_name(name)
    return lf is not None and lf.is_cdc and lf.instant == instant


def compaction_summary(timeline: ActiveTimeline) -> dict[str, Any]:
    """Pending and last completed compaction instants (for the CLI and metrics)."""
    last = last_compaction(timeline)
    return {
        "pending": [i.timestamp for i in timeline.pending_compactions()],
        "last_completed": last.timestamp if last else None,
    }
