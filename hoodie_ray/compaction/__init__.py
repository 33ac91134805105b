"""Compaction and cleaning: schedule, plan, execute, commit (Flink's compaction operators).

* Schedule (ScheduleCompactionActionExecutor): after commits, when ``compaction.schedule.enabled``
  and the trigger fires (``compaction.trigger.strategy``: num_commits, time_elapsed,
  num_and_time, num_or_time). The compaction instant is newer than every instant on the timeline,
  so no completed instant and no pending write is later than it.
* Plan (CompactionPlanOperator): one ``HoodieCompactionOperation`` per latest file slice with log
  files, written as the Avro ``HoodieCompactionPlan`` to ``<instant>.compaction.requested``.
* Execute (CompactOperator): the earliest requested plan first; requested -> inflight; each
  operation merges base and logs with the readers' rules into a new base file
  ``<fileId>_<token>_<instant>.parquet`` (streamed: bounded memory), keeping each record's
  ``_hoodie_commit_time`` and ``_hoodie_commit_seqno``.
* Commit (CompactionCommitSink): when every operation reported; ``<instant>.commit`` with
  ``compacted: true`` and operation type COMPACT. A failed compaction is rolled back to
  requested (its files deleted) and retried later.

Readers during an asynchronous compaction (table version 6): writers never append to a log file
a pending plan covers (they roll a new log version), and they keep naming logs by the committed
base instant. At the compaction's commit, which the coordinator runs between two checkpoints,
the log files written after the plan are copied into the new slice (named by the compaction
instant) *before* the completed instant is written. Until the commit, readers see the old slice
with every log; after it, the new base plus the copied logs: every committed row, always.
Version 8 needs no copy: a log attaches to the slice by its completion time.
"""

from __future__ import annotations

from hoodie_ray.compaction.api import clean, compact, run_compaction, schedule_compaction

__all__ = ["clean", "compact", "run_compaction", "schedule_compaction"]
