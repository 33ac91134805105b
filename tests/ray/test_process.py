"""Arrow's default pool in the processes of hoodie_ray's actors (``hoodie_ray.ray.process``)."""

from __future__ import annotations

import sys
from typing import Any

import pytest


def _probe(actor: Any) -> tuple[bool, str | None, str, str, int]:
    """Run inside the actor: a Parquet write (its column buffers come from Arrow's default
    pool, whatever pool the call is given), then what the process's pools hold."""
    import io
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from hoodie_ray.ray import process

    rows = pa.table({"k": [f"key-{i:06d}" for i in range(20_000)], "v": list(range(20_000))})
    pq.write_table(rows, io.BytesIO())
    return (
        process.pyarrow_loaded_first,
        process.chosen,
        os.environ.get(process.ARROW_POOL_ENV, ""),
        pa.default_memory_pool().backend_name,
        pa.mimalloc_memory_pool().max_memory(),
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="named on Linux only")
def test_own_actor_names_jemalloc_before_pyarrow_loads(ray_session: Any) -> None:
    import pyarrow as pa

    from hoodie_ray.ray.compactor import CompactorActor

    if "jemalloc" not in pa.supported_memory_backends():
        pytest.skip("this pyarrow has no jemalloc")
    actor = CompactorActor.options(num_cpus=0).remote()
    try:
        first, chosen, env_value, pool, mimalloc_bytes = ray_session.get(
            actor.__ray_call__.remote(_probe), timeout=120
        )
    finally:
        ray_session.kill(actor)
    if first:  # Ray gives an actor a worker that never ran a task; were it otherwise:
        pytest.skip("the actor's worker had loaded pyarrow before hoodie_ray")
    assert chosen == env_value == pool == "jemalloc"
    assert mimalloc_bytes == 0  # the Parquet writer's buffers too: nothing went to mimalloc


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="named on Linux only")
def test_coordinator_names_mimalloc(ray_session: Any, tmp_path: Any) -> None:
    """The coordinator's process: mimalloc, whose freed pages its metadata-table compactions
    reuse (jemalloc, as Arrow sets it up, gave them back to the kernel as they were freed)."""
    import pyarrow as pa

    from hoodie_ray.ray import process
    from hoodie_ray.ray.actors import CoordinatorActor

    if "mimalloc" not in pa.supported_memory_backends():
        pytest.skip("this pyarrow has no mimalloc")
    actor = CoordinatorActor.options(num_cpus=0).remote(
        str(tmp_path / "t"), None, None, "test-owner"
    )
    try:
        first, chosen, env_value, pool, _ = ray_session.get(
            actor.__ray_call__.remote(_probe), timeout=120
        )
    finally:
        ray_session.kill(actor)
    if first:
        pytest.skip("the actor's worker had loaded pyarrow before hoodie_ray")
    assert chosen == env_value == pool == process.COORDINATOR_ARROW_POOL


def test_pool_by_actor_class() -> None:
    from hoodie_ray.ray import process

    assert process.actor_arrow_pool("CoordinatorActor") == "mimalloc"
    for cls in ("AssignWriteActor", "TaskHostActor", "WriterActor", "CompactorActor"):
        assert process.actor_arrow_pool(cls) == process.ACTOR_ARROW_POOL == "jemalloc"


def test_other_processes_keep_their_pool(ray_session: Any) -> None:
    """The driver (Ray loaded, no actor) and any process with pyarrow loaded name nothing."""
    from hoodie_ray.ray import process

    assert process.own_actor_class() is None
    assert process.prefer_actor_arrow_pool() is None


def test_importing_hoodie_ray_after_ray_starts_no_ray() -> None:
    """A driver that imports ray, then hoodie_ray, and only then calls ``ray.init(address=...)``:
    the import must not start a local Ray (``ray.get_runtime_context()`` would)."""
    import subprocess

    code = "import ray\nimport hoodie_ray\nprint(ray.is_initialized())\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "False", out.stderr[-2000:]
