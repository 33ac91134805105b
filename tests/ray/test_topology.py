"""A writer's actors (``hoodie_ray.ray.topology``): their names."""

from __future__ import annotations

from hoodie_ray.config.options import resolve_options
from hoodie_ray.ray.topology import actor_name, assigner_role

BASE = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "k"}
OCC = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.cleaner.policy.failed.writes": "LAZY",
}


def test_roles_name_chained_and_apart_tasks() -> None:
    chained = resolve_options({**BASE, "write.tasks": "2"})
    apart = resolve_options({**BASE, "write.tasks": "2", "pipeline.operator-chaining": "false"})
    assert [assigner_role(chained, i) for i in range(2)] == ["assign-write-0", "assign-write-1"]
    assert [assigner_role(apart, i) for i in range(2)] == ["assigner-0", "assigner-1"]


def test_several_writers_of_one_table_name_their_actors_apart() -> None:
    """One writer: ``<table>/<role>``; under OCC each job's topology has its own names."""
    single = resolve_options(BASE)
    occ = resolve_options({**BASE, **OCC})
    assert actor_name(single, "host:1234:job-a", "t", "coordinator") == "t/coordinator"
    a = actor_name(occ, "host:1234:job-a", "t", "coordinator")
    b = actor_name(occ, "host:1234:job-b", "t", "coordinator")
    assert a == "t/job-a/coordinator" and b == "t/job-b/coordinator"
