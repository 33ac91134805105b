"""Ray runtime: start-up, actor sizing from cluster resources, placement checks.

The planner tests are pure (cluster figures passed in); the ``ray`` ones use the session's Ray
and the ``spark`` one places a topology next to the session's RayDP Spark executor.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from hoodie_ray.exceptions import HoodieError
from hoodie_ray.ray.runtime import (
    JVM_OPTIONS,
    NAMESPACE,
    ROLES,
    actor_resources,
    check_placeable,
    ensure_ray,
    plan_resources,
    role_counts,
    wait_ready,
)

GIB = 2**30
NO_COMPACTION = {"compaction.async.enabled": "false"}
STACK_MD_PACKAGES = (
    "java.lang",
    "java.lang.invoke",
    "java.lang.reflect",
    "java.io",
    "java.net",
    "java.nio",
    "java.util",
    "java.util.concurrent",
    "java.util.concurrent.atomic",
    "java.math",
    "java.text",
    "java.time",
    "sun.nio.ch",
    "sun.nio.cs",
    "sun.security.action",
    "sun.util.calendar",
    "jdk.internal.misc",
)


def _one_node(cpus: float, mem: float = 64 * GIB) -> dict[str, Any]:
    node = {"CPU": cpus, "memory": mem}
    return {"available": node, "nodes": [node]}


# -- pure planner ------------------------------------------------------------------------------


def test_jvm_options_open_every_package_of_the_recipe() -> None:
    expected = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in STACK_MD_PACKAGES]
    assert expected == JVM_OPTIONS


def test_role_counts_follow_the_options() -> None:
    assert role_counts({"write.tasks": "3"}) == {
        "coordinator": 1,
        "assigner": 3,
        "writer": 3,
        "compactor": 2,
    }
    assert role_counts({"write.tasks": "2", "write.bucket_assign.tasks": "1", **NO_COMPACTION}) == {
        "coordinator": 1,
        "assigner": 1,
        "writer": 2,
        "compactor": 0,
    }
    assert role_counts({"table.type": "COPY_ON_WRITE"})["compactor"] == 0


def test_big_cluster_gets_whole_cpus() -> None:
    plan = plan_resources(None, cpus_available=64)
    assert plan.mode == "whole"
    assert plan.for_role("writer") == {"num_cpus": 1.0}
    assert plan.for_role("assigner") == {"num_cpus": 1.0}
    assert plan.for_role("coordinator") == {"num_cpus": 0.5}
    check_placeable(plan, **_one_node(64))


def test_small_cluster_gets_fractions_that_leave_a_whole_cpu_for_tasks() -> None:
    plan = plan_resources(
        None, cpus_available=4
    )  # 1 coord + 2 assigners + 2 writers + 2 compactors
    assert plan.mode == "fractional"
    cpus = {r: plan.for_role(r)["num_cpus"] for r in ROLES}
    assert 0 < cpus["coordinator"] < cpus["writer"] < 1
    assert cpus["writer"] == cpus["assigner"] == cpus["compactor"]
    assert plan.total_cpus <= 3.0 + 1e-9  # one whole CPU stays free for Ray Data's tasks
    assert all(abs(c * 1e4 - round(c * 1e4)) < 1e-6 for c in cpus.values())  # Ray's precision
    check_placeable(plan, **_one_node(4))


def test_two_cpus_with_a_spark_executor_share_the_cores() -> None:
    # 2 CPUs, a RayDP executor holds 1: any CPU reserved by actors would leave less than the
    # one whole CPU ray.data.from_spark's tasks need, so actors reserve none.
    plan = plan_resources(NO_COMPACTION, cpus_available=1.0)
    assert plan.mode == "shared"
    assert all(plan.for_role(r)["num_cpus"] == 0 for r in ROLES)
    check_placeable(plan, **_one_node(1.0))
    # Less than a whole CPU left: no task can run anyway, so the actors take fractions of it.
    plan = plan_resources(NO_COMPACTION, cpus_available=0.5)
    assert plan.mode == "fractional"
    assert 0 < plan.total_cpus <= 0.5


def test_explicit_cpus_are_honoured_and_checked() -> None:
    opts = {"ray.writer.num_cpus": "1", **NO_COMPACTION}
    plan = plan_resources(opts, cpus_available=1.0)
    assert plan.for_role("writer") == {"num_cpus": 1.0}
    assert plan.for_role("assigner")["num_cpus"] == 0  # nothing left for the others
    with pytest.raises(HoodieError, match=r"2 writers x 1 CPU.*ray\.writer\.num_cpus"):
        check_placeable(plan, **_one_node(1.0))
    check_placeable(plan, **_one_node(2.0))


def test_actors_must_pack_onto_nodes_not_just_the_total() -> None:
    plan = plan_resources({"ray.writer.num_cpus": "1", **NO_COMPACTION}, cpus_available=2.0)
    nodes = [{"CPU": 1.5, "memory": 8 * GIB}, {"CPU": 0.5, "memory": 8 * GIB}]
    with pytest.raises(HoodieError, match="do not pack"):
        check_placeable(plan, available={"CPU": 2.0, "memory": 16 * GIB}, nodes=nodes)
    check_placeable(
        plan, roles=["coordinator"], available={"CPU": 2.0, "memory": 16 * GIB}, nodes=nodes
    )


def test_memory_is_checked() -> None:
    plan = plan_resources({"ray.writer.memory": str(4 * GIB), **NO_COMPACTION}, cpus_available=8)
    assert plan.for_role("writer")["memory"] == 4 * GIB
    with pytest.raises(HoodieError, match="GiB of Ray memory"):
        check_placeable(plan, **_one_node(8, mem=6 * GIB))


def test_unknown_role_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown actor role"):
        actor_resources("reader", None, plan=plan_resources(None, cpus_available=8))


# -- with Ray ----------------------------------------------------------------------------------


@pytest.mark.ray
def test_ensure_ray_reuses_the_session(ray_session: Any) -> None:
    ensure_ray()  # a second call starts nothing
    ensure_ray(num_cpus=64)
    assert ray_session.is_initialized()
    if ray_session.get_runtime_context().namespace != NAMESPACE:
        pytest.skip("joined an outside Ray (RAY_ADDRESS) started in another namespace")


@pytest.mark.ray
def test_unplaceable_role_fails_fast(ray_session: Any) -> None:
    t0 = time.perf_counter()
    with pytest.raises(
        HoodieError, match=r"cannot place the hoodie_ray actors \(2 writers x 512 CPU"
    ):
        actor_resources("writer", {"ray.writer.num_cpus": "512"})
    assert time.perf_counter() - t0 < 5


@pytest.mark.ray
def test_wait_ready_turns_a_queued_actor_into_an_error(ray_session: Any) -> None:
    ray = ray_session

    @ray.remote
    class Idle:
        pass

    actor = Idle.options(num_cpus=512).remote()  # never placeable: Ray queues it silently
    try:
        with pytest.raises(HoodieError, match="1 of 1 writers were not placed within 1s"):
            wait_ready([actor], timeout_s=1.0, what="writers")
    finally:
        ray.kill(actor)


@pytest.mark.ray
@pytest.mark.spark
@pytest.mark.slow  # suite time: placement checks without Spark run in CI (this module)
def test_topology_places_next_to_a_spark_executor(spark_session: Any, ray_session: Any) -> None:
    """1 coordinator + 2 assigners + 2 writers on the 2-CPU Ray while an executor holds a CPU,
    and Spark -> Ray conversion still runs beside them."""
    from hoodie_ray.spark import release_spark_df, spark_to_ray

    ray = ray_session

    @ray.remote
    class Member:
        def __init__(self, role: str) -> None:
            self.role = role

        def ping(self) -> str:
            return self.role

    plan = plan_resources(NO_COMPACTION)  # plan once, from the live cluster
    assert plan.counts == {"coordinator": 1, "assigner": 2, "writer": 2, "compactor": 0}
    check_placeable(plan)
    actors = [
        Member.options(**actor_resources(role, plan=plan)).remote(role)
        for role in ROLES
        for _ in range(plan.counts[role])
    ]
    try:
        wait_ready(actors, timeout_s=60, what="topology actors")
        assert sorted(ray.get([a.ping.remote() for a in actors], timeout=30)) == [
            "assigner",
            "assigner",
            "coordinator",
            "writer",
            "writer",
        ]
        # A whole CPU is still free, which ray.data.from_spark's metadata tasks need.
        time.sleep(0.5)  # available_resources lags actor creation slightly
        assert ray.available_resources().get("CPU", 0.0) >= 1.0
        df = spark_session.range(0, 1000).selectExpr("id", "cast(id as string) s")
        ds = spark_to_ray(df)
        assert ds.count() == 1000
        release_spark_df(df)
    finally:
        for a in actors:
            ray.kill(a)


def test_joining_a_running_local_cluster_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With RAY_ADDRESS unset Ray joins a cluster already running on the machine: the user is
    told which (faked here: ray.init only records that it joined)."""
    import types

    import ray
    from ray._private import worker

    from hoodie_ray.ray import runtime

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    for head, said in ((False, True), (True, False)):
        node = types.SimpleNamespace(head=head)
        monkeypatch.setattr(
            ray, "init", lambda *a, _n=node, **k: setattr(worker, "_global_node", _n)
        )
        monkeypatch.setattr(worker, "_global_node", None, raising=False)
        caplog.clear()
        with caplog.at_level("WARNING", logger="hoodie_ray"):
            runtime.ensure_ray()
        assert ("joined it" in caplog.text) is said, caplog.text


def test_occ_is_refused_by_the_datasink_naming_the_option(tmp_path):
    """HoodieDatasink cannot replay a conflicted commit (its input comes from Ray Data's write
    tasks): it refuses optimistic concurrency control before Ray or the table is touched.
    hr.write and HoodieStreamWriter write under OCC (tests/ray/test_occ_stream.py)."""
    from hoodie_ray.exceptions import HoodieOptionError
    from hoodie_ray.ray.datasink import HoodieDatasink

    opts = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "k",
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    }
    with pytest.raises(HoodieOptionError, match="hoodie.write.concurrency.mode"):
        HoodieDatasink(str(tmp_path / "t"), opts)
    assert not (tmp_path / "t").exists()


# --- Arrow's memory pool in the actors' processes ------------------------------------------

_POOL_PROBE = """
import os, pyarrow as pa
from hoodie_ray.ray.process import ARROW_POOL_ENV
from hoodie_ray.ray.runtime import set_actor_memory_pool
seen = [set_actor_memory_pool(None), pa.default_memory_pool().backend_name]
os.environ[ARROW_POOL_ENV] = "system"  # Arrow's own variable: the unset option leaves the pool
seen.append(set_actor_memory_pool(None))
seen.append(set_actor_memory_pool("system"))  # an explicit choice wins over it
seen.append(pa.default_memory_pool().backend_name)
print(*seen)
"""


def test_actor_memory_pool_defaults_to_jemalloc_and_honours_option_and_env() -> None:
    """In a new process (the pool is the process's: never switched in the test process)."""
    import os
    import subprocess
    import sys

    import pyarrow as pa

    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run(
        [sys.executable, "-c", _POOL_PROBE], capture_output=True, text=True, env=env, check=True
    )
    default, active, with_env, chosen, active_after = out.stdout.split()
    assert default == active
    if "jemalloc" in pa.supported_memory_backends():
        assert default == "jemalloc"
    assert with_env == default  # left as it was
    assert chosen == active_after == "system"


def test_actor_memory_pool_option_refuses_unknown_pools() -> None:
    from hoodie_ray.config.options import resolve_options
    from hoodie_ray.exceptions import HoodieOptionError

    assert resolve_options({"ray.arrow.memory_pool": "MIMALLOC"}).arrow_memory_pool == "mimalloc"
    with pytest.raises(HoodieOptionError, match="ray.arrow.memory_pool"):
        resolve_options({"ray.arrow.memory_pool": "tcmalloc"})


def test_a_table_path_spelled_two_ways_is_one_job(tmp_path: Any, monkeypatch: Any) -> None:
    """The actors' table tag (job_table) is one for every spelling of one table's path (so
    a second writer of it is still "another job"), and two for two tables of one name."""
    from hoodie_ray.ray.runtime import job_table

    table = tmp_path / "db" / "trips"
    table.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "db")
    monkeypatch.chdir(tmp_path)
    spellings = [
        str(table),
        f"{table}/",
        "db/trips",
        f"file://{table}",
        str(tmp_path / "link/trips"),
    ]
    assert len({job_table("trips", p) for p in spellings}) == 1
    assert job_table("trips", str(table)).startswith("trips@")
    assert job_table("trips", str(tmp_path / "other" / "trips")) != job_table("trips", str(table))
    s3 = {job_table("t", p) for p in ("s3://b/x/t", "S3://b/x/t/", "s3://b//x/t")}
    assert len(s3) == 1 and job_table("t", "s3://b/y/t") not in s3
