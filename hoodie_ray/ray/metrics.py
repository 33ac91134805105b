"""Ray metrics of the write topology (``ray.util.metrics``), tagged by table, role and actor.

Ray prefixes every name with ``ray_`` when it exports them (Prometheus endpoint of each node,
the dashboard's Metrics view). Metric objects are created lazily, once per process. Every
series carries ``table``, ``role`` (``coordinator``, ``assigner``, ``writer``) and ``actor``:
the actor's name within its table's topology (``coordinator``, ``assigner-1``, ``writer-0``),
as the dashboard's Actors view names it (``<table>/writer-0``).

Gauges: Ray exports a gauge's value only for a while after it was set (the metrics agent drops
a series that was not set again within two report intervals; measured: a value set once is gone
from the endpoint after ~30 s), so a gauge that is set once and then stays true (an idle warm
topology's index size) would vanish. Each process keeps the last value of its gauges and a
daemon thread sets them again every half report interval, for as long as the actor lives.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

_TAGS = ("table", "role", "actor")
_metrics: dict[str, Any] = {}

# gauge series of this process -> (gauge, last value, tags), set again by the refresher
_live: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[Any, float, dict[str, str]]] = {}
_live_lock = threading.Lock()
_refresher: threading.Thread | None = None
DEFAULT_REPORT_INTERVAL_S = 10.0
"""Ray's ``metrics_report_interval_ms`` default, used where Ray's config cannot be read."""


def _get(kind: str, name: str, doc: str, tag_keys: tuple[str, ...] = _TAGS, **kw: Any) -> Any:
    m = _metrics.get(name)
    if m is None:
        from ray.util import metrics as rm

        cls = {"counter": rm.Counter, "gauge": rm.Gauge, "histogram": rm.Histogram}[kind]
        m = _metrics[name] = cls(name, description=doc, tag_keys=tag_keys, **kw)
    return m


#: The role part of a chained task's actor name (assigner i and writer i in one actor).
CHAINED_ACTOR = "assign-write"


def tags(table: str, role: str, task_id: int | None = None) -> dict[str, str]:
    """The tags of a series: ``actor`` is ``<role>-<task_id>``, or the role for the one
    coordinator of a topology. A chained task's assigner and writer series (``assigner-<i>``,
    ``writer-<i>``) both come from its actor ``<table>/assign-write-<i>``."""
    actor = role if task_id is None else f"{role}-{task_id}"
    return {"table": table, "role": role, "actor": actor}


def _safe(fn: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:  # metrics must never fail a write
            return

    return wrapper


def refresh_interval_s() -> float:
    """How often the gauges of this process are set again: half Ray's report interval."""
    try:
        import ray

        ms = float(ray._config.metrics_report_interval_ms())
    except Exception:
        ms = DEFAULT_REPORT_INTERVAL_S * 1000
    return max(ms, 1000.0) / 2000.0


def _set_gauge(name: str, doc: str, value: float, series: dict[str, str]) -> None:
    global _refresher
    gauge = _get("gauge", name, doc)
    gauge.set(value, series)
    with _live_lock:
        _live[(name, tuple(sorted(series.items())))] = (gauge, value, series)
        if _refresher is None:
            _refresher = threading.Thread(
                target=_refresh_forever, name="hoodie-ray-metrics-refresh", daemon=True
            )
            _refresher.start()


def _refresh_forever() -> None:
    wait = threading.Event().wait
    interval = refresh_interval_s()
    while not wait(interval):
        refresh_gauges()


def refresh_gauges() -> None:
    """Set every gauge of this process to its last value again (the refresher's step)."""
    with _live_lock:
        live = list(_live.values())
    for gauge, value, series in live:
        try:
            gauge.set(value, series)
        except Exception:  # metrics must never fail a write
            continue


@_safe
def count_records(
    table: str, role: str, records_in: int, records_out: int, task_id: int | None = None
) -> None:
    series = tags(table, role, task_id)
    if records_in:
        _get("counter", "hoodie_ray_records_in", "Records received").inc(records_in, series)
    if records_out:
        _get("counter", "hoodie_ray_records_out", "Records emitted").inc(records_out, series)


@_safe
def gauge_buffered(table: str, task_id: int, nbytes: int) -> None:
    _set_gauge(
        "hoodie_ray_buffered_bytes",
        "Bytes buffered in a writer",
        nbytes,
        tags(table, "writer", task_id),
    )


@_safe
def gauge_index_size(table: str, task_id: int, keys: int) -> None:
    _set_gauge(
        "hoodie_ray_index_size",
        "Keys in an assigner's index",
        keys,
        tags(table, "assigner", task_id),
    )


@_safe
def record_flush(table: str, task_id: int, stats: Iterable[Any]) -> None:
    stats = list(stats)
    series = tags(table, "writer", task_id)
    if stats:
        _get("counter", "hoodie_ray_flushes", "Files written by a flush").inc(len(stats), series)
    nbytes = sum(int(getattr(s, "total_write_bytes", 0) or 0) for s in stats)
    nrec = sum(
        int(getattr(s, "num_writes", 0) or 0) + int(getattr(s, "num_deletes", 0) or 0)
        for s in stats
    )
    if nbytes:
        _get("counter", "hoodie_ray_bytes_written", "Bytes written to storage").inc(nbytes, series)
    if nrec:
        _get("counter", "hoodie_ray_records_out", "Records emitted").inc(nrec, series)


@_safe
def record_commit(table: str, latency_s: float) -> None:
    series = tags(table, "coordinator")
    _get("counter", "hoodie_ray_commits", "Commits completed").inc(1, series)
    _get(
        "histogram",
        "hoodie_ray_commit_latency_s",
        "Instant requested -> completed, seconds",
        boundaries=LATENCY_BOUNDARIES,
    ).observe(latency_s, series)


#: Seconds buckets of the latency histograms (a commit; a checkpoint's phase).
LATENCY_BOUNDARIES = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60]


@_safe
def record_checkpoint_phases(table: str, phases: dict[str, float]) -> None:
    """One checkpoint's seconds per phase (``HoodieStreamWriter.checkpoint_phases``), as the
    driver timed them; recorded by the coordinator, tagged ``phase`` besides the usual tags."""
    hist = _get(
        "histogram",
        "hoodie_ray_checkpoint_phase_s",
        "Seconds a checkpoint spent in one phase (begin, input, align, flush, commit)",
        tag_keys=(*_TAGS, "phase"),
        boundaries=LATENCY_BOUNDARIES,
    )
    series = tags(table, "coordinator")
    for phase, seconds in phases.items():
        hist.observe(max(0.0, float(seconds)), {**series, "phase": phase})


@_safe
def count_compacted(table: str, task_id: int, slices: int, nbytes: int) -> None:
    series = tags(table, "compactor", task_id)
    _get("counter", "hoodie_ray_compacted_slices", "File slices compacted").inc(slices, series)
    if nbytes:
        _get("counter", "hoodie_ray_bytes_written", "Bytes written to storage").inc(nbytes, series)


@_safe
def count_clustered(table: str, task_id: int, groups: int, nbytes: int) -> None:
    """Clustering groups rewritten (a compactor actor's async clustering, or a Ray task of
    ``hr.cluster(engine="ray")``), and the bytes of their new base files."""
    series = tags(table, "compactor", task_id)
    _get("counter", "hoodie_ray_clustered_groups", "Clustering groups rewritten").inc(
        groups, series
    )
    if nbytes:
        _get("counter", "hoodie_ray_bytes_written", "Bytes written to storage").inc(nbytes, series)


@_safe
def gauge_pending_clusterings(table: str, n: int) -> None:
    _set_gauge(
        "hoodie_ray_pending_clusterings",
        "Clusterings scheduled, not yet committed",
        n,
        tags(table, "coordinator"),
    )


@_safe
def gauge_pending_compactions(table: str, n: int) -> None:
    _set_gauge(
        "hoodie_ray_pending_compactions",
        "Compactions scheduled, not yet committed",
        n,
        tags(table, "coordinator"),
    )
