"""Session-scoped Ray and RayDP Spark fixtures (a pytest plugin: ``pytest_plugins``).

One Ray instance and at most one Spark session per test session: Ray starts in 2-5 s, a RayDP
Spark session in 7-35 s. Tests ask for ``ray_session`` / ``spark_session`` and never call
``ray.init`` / ``raydp.init_spark`` themselves; hoodie_ray's own ``ensure_ray`` and
``init_spark`` reuse what is running.

Nothing is imported from Ray or Spark until a fixture is used, so collecting tests stays cheap.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

RAY_NUM_CPUS = 2
"""CPUs of the embedded test Ray (the CI machine's size), whatever the host has."""

TIMINGS: dict[str, float] = {}
"""Wall seconds of fixture set-ups (``ray_init``, ``spark_init``), for tests and reports."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run ``spark`` tests last: the session's Spark executor then holds one of the 2 CPUs
    only at the end, not during every Ray test after the first Spark test."""
    items.sort(key=lambda item: item.get_closest_marker("spark") is not None)


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """A local Ray (``num_cpus=2``, namespace ``hoodie_ray``, with its dashboard) shared by the
    session; yields ``ray``.

    With ``RAY_ADDRESS`` set, the tests join that cluster instead. Ray is shut down at the end
    only when this fixture started it.
    """
    import ray

    from hoodie_ray.ray.runtime import ensure_ray

    started = not ray.is_initialized()
    if started and not os.environ.get("RAY_ADDRESS"):
        # metrics exported every 2 s, not Ray's 10: the metrics tests read them sooner
        os.environ.setdefault("RAY_metrics_report_interval_ms", "2000")
        # the suite starts a few hundred short-lived actors, each of which would load numba
        # and the key-index kernels at start (~1 CPU-s each, for a first batch these tests'
        # inputs are too small to need them): they load on first use instead. The warm-up
        # itself is tested in-process (tests/index).
        os.environ.setdefault("HOODIE_RAY_WARM_UP", "0")
    t0 = time.perf_counter()
    # the dashboard head (~1.5 s more at start) writes the session's Prometheus scrape config
    # and Grafana folders, which the dashboard tests use as a user's Prometheus would
    ensure_ray(num_cpus=RAY_NUM_CPUS, include_dashboard=True)
    TIMINGS["ray_init"] = time.perf_counter() - t0
    try:
        import ray.data

        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
    except Exception:  # quieter logs only; never fail a session on this
        pass
    yield ray
    if started:
        from hoodie_ray.spark import stop_spark

        stop_spark()
        ray.shutdown()


_JVM_OPTION_KEYS = (
    "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions",
    "spark.ray.raydp_app_master.extraJavaOptions",
)
#: Suite time: the tests' JVMs (Spark driver, executor, RayDP's app master) compile with C1
#: only and collect with the serial collector. Their work is small and short, so C2's
#: compilations on 2 cores cost more than they return: the two Spark test files took 99-108 s
#: before, 82-86 s after.
_TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"


@pytest.fixture(scope="session")
def spark_session(ray_session: Any) -> Iterator[Any]:
    """A RayDP Spark session on the session's Ray: 1 executor, 1 core, 1 GiB; stopped at the end.

    Skips (with what to install) when Java, raydp or pyspark is missing.
    """
    from hoodie_ray.exceptions import HoodieError
    from hoodie_ray.spark import check_java, init_spark, stop_spark

    try:
        import pyspark  # noqa: F401
        import raydp  # noqa: F401

        check_java()
    except (ImportError, HoodieError) as e:
        pytest.skip(f"Spark tests need Java 17, raydp and pyspark: {e}")
    t0 = time.perf_counter()
    spark = init_spark(
        app_name="hoodie_ray_tests",
        num_executors=1,
        executor_cores=1,
        executor_memory="1g",
        configs={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            **dict.fromkeys(_JVM_OPTION_KEYS, _TEST_JVM_OPTIONS),
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    TIMINGS["spark_init"] = time.perf_counter() - t0
    yield spark
    stop_spark()


def checkpoint_with_kill(writer: Any, handle: Any, when: str, rng: Any) -> Any:
    """``ray.kill`` an actor of ``writer`` (a HoodieStreamWriter) ``before`` its next checkpoint
    or ``during`` it (a timer fires 0-50 ms in), and return what ``checkpoint()`` returned."""
    import threading

    import ray

    if when == "before":
        ray.kill(handle, no_restart=True)
        return writer.checkpoint()
    timer = threading.Timer(rng.uniform(0.0, 0.05), lambda: ray.kill(handle, no_restart=True))
    timer.start()
    try:
        return writer.checkpoint()
    finally:
        timer.join()
