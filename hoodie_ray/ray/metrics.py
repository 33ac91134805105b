"""Ray metrics of the write topology (``ray.util.metrics``), tagged by table and role only.

Ray prefixes every name with ``ray_`` when it exports them (Prometheus endpoint of each node,
the dashboard's Metrics view). Metric objects are created lazily, once per process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_TAGS = ("table", "role")
_metrics: dict[str, Any] = {}


def _get(kind: str, name: str, doc: str, **kw: Any) -> Any:
    m = _metrics.get(name)
    if m is None:
        from ray.util import metrics as rm

        cls = {"counter": rm.Counter, "gauge": rm.Gauge, "histogram": rm.Histogram}[kind]
        m = _metrics[name] = cls(name, description=doc, tag_keys=_TAGS, **kw)
    return m


def _safe(fn: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:  # metrics must never fail a write
            return

    return wrapper


@_safe
def count_records(table: str, role: str, records_in: int, records_out: int) -> None:
    tags = {"table": table, "role": role}
    if records_in:
        _get("counter", "hoodie_ray_records_in", "Records received").inc(records_in, tags)
    if records_out:
        _get("counter", "hoodie_ray_records_out", "Records emitted").inc(records_out, tags)


@_safe
def gauge_buffered(table: str, task_id: int, nbytes: int) -> None:
    _get("gauge", "hoodie_ray_buffered_bytes", "Bytes buffered in a writer").set(
        nbytes, {"table": table, "role": "writer"}
    )


@_safe
def gauge_index_size(table: str, task_id: int, keys: int) -> None:
    _get("gauge", "hoodie_ray_index_size", "Keys in an assigner's index").set(
        keys, {"table": table, "role": "assigner"}
    )


@_safe
def record_flush(table: str, task_id: int, stats: Iterable[Any]) -> None:
    stats = list(stats)
    tags = {"table": table, "role": "writer"}
    if stats:
        _get("counter", "hoodie_ray_flushes", "Files written by a flush").inc(len(stats), tags)
    nbytes = sum(int(getattr(s, "total_write_bytes", 0) or 0) for s in stats)
    nrec = sum(
        int(getattr(s, "num_writes", 0) or 0) + int(getattr(s, "num_deletes", 0) or 0)
        for s in stats
    )
    if nbytes:
        _get("counter", "hoodie_ray_bytes_written", "Bytes written to storage").inc(nbytes, tags)
    if nrec:
        _get("counter", "hoodie_ray_records_out", "Records emitted").inc(nrec, tags)


@_safe
def record_commit(table: str, latency_s: float) -> None:
    tags = {"table": table, "role": "coordinator"}
    _get("counter", "hoodie_ray_commits", "Commits completed").inc(1, tags)
    _get(
        "histogram",
        "hoodie_ray_commit_latency_s",
        "Instant requested -> completed, seconds",
        boundaries=[0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
    ).observe(latency_s, tags)


@_safe
def gauge_pending_compactions(table: str, n: int) -> None:
    _get("gauge", "hoodie_ray_pending_compactions", "Compactions scheduled, not yet committed").set(
        n, {"table": table, "role": "coordinator"}
    )
