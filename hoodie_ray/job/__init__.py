"""The job layer: Flink's job level, between the public surface and the operators.

* :mod:`~hoodie_ray.job.setup`: table setup (create, check options, fix the write context);
* :mod:`~hoodie_ray.job.coordinator`: the coordinator's decisions (instants, commits, when to
  compact, clean and archive), without Ray;
* :mod:`~hoodie_ray.job.client`: the single-process client (:class:`HoodieWriteClient`);
* :mod:`~hoodie_ray.job.archival`: when and how far to archive the timeline;
* :mod:`~hoodie_ray.job.maintenance`: compaction and cleaning run on their own.

The operators it drives live in :mod:`hoodie_ray.write` and :mod:`hoodie_ray.compaction`; the
Ray actors in :mod:`hoodie_ray.ray` each hold one object from here or there and forward calls.
"""
