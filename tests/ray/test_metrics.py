"""The write topology's Ray metrics, read back from Ray's Prometheus endpoint.

``hoodie_ray/ray/metrics.py`` records counters through ``ray.util.metrics``; each node's
metrics agent exports them (prefixed ``ray_``) at ``http://<node>:<MetricsExportPort>/metrics``.
The agent is part of ``ray[default]``: with the minimal ``ray`` wheel the raylet logs
"Metrics agent not available" and ``ray.nodes()`` reports ``MetricsExportPort`` -1; the test
then skips, saying so. Workers report every few seconds, so the endpoint is polled (bounded).
"""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pyarrow as pa
import pytest

import hoodie_ray as hr

pytestmark = pytest.mark.ray

POLL_TIMEOUT_S = 25.0
_SAMPLE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$"
)
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Samples of a Prometheus text exposition: ``(name, labels, value)``."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line.strip())
        if m is None:
            continue
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        labels = dict(_LABEL.findall(m.group("labels") or ""))
        out.append((m.group("name"), labels, value))
    return out


def metrics_endpoints(ray: Any) -> list[str]:
    """``http://host:port/metrics`` of every alive node that exports metrics."""
    urls = []
    for n in ray.nodes():
        port = int(n.get("MetricsExportPort") or -1)
        if n.get("Alive") and port > 0:
            urls.append(f"http://{n['NodeManagerAddress']}:{port}/metrics")
    return urls


def scrape(urls: list[str]) -> list[tuple[str, dict[str, str], float]]:
    samples = []
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                samples += parse_prometheus(r.read().decode("utf-8", "replace"))
        except (urllib.error.URLError, OSError):
            continue  # a node's agent may be restarting: the poll tries again
    return samples


def counter(samples: list[tuple[str, dict[str, str], float]], name: str, **tags: str) -> float:
    """Sum of a counter (``ray_<name>`` or ``ray_<name>_total``) over samples with ``tags``."""
    names = {f"ray_{name}", f"ray_{name}_total"}
    return sum(
        v
        for n, labels, v in samples
        if n in names and all(labels.get(k) == val for k, val in tags.items())
    )


def test_parse_prometheus() -> None:
    text = (
        "# HELP ray_hoodie_ray_records_in Records received\n"
        "# TYPE ray_hoodie_ray_records_in counter\n"
        'ray_hoodie_ray_records_in_total{Component="core_worker",role="writer",table="t"} 42.0\n'
        'ray_x{a="q\\"uote"} 1e3 1700000000\n'
        "plain 7\n"
    )
    s = parse_prometheus(text)
    assert s[0] == (
        "ray_hoodie_ray_records_in_total",
        {"Component": "core_worker", "role": "writer", "table": "t"},
        42.0,
    )
    assert s[1][2] == 1000.0 and s[2] == ("plain", {}, 7.0)
    assert counter(s, "hoodie_ray_records_in", table="t", role="writer") == 42.0


@pytest.mark.slow  # the per-actor counters are read in test_gauges_report_live_values_...
def test_record_counters_exported(ray_session: Any, tmp_path: Any) -> None:
    urls = metrics_endpoints(ray_session)
    if not urls:
        pytest.skip(
            "Ray's metrics agent is not running (ray.nodes() MetricsExportPort is -1): it needs "
            "ray[default] (aiohttp, grpcio, opencensus, opentelemetry-*, prometheus_client); "
            "with only ray[data] the raylet logs 'Metrics agent not available'"
        )
    table = f"metrics_{uuid.uuid4().hex[:8]}"
    n = 2_000
    data = pa.table(
        {
            "id": [f"k{i}" for i in range(n)],
            "p": ["a", "b"] * (n // 2),
            "ts": list(range(n)),
        }
    )
    options = {
        "hoodie.table.name": table,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "write.tasks": "1",
    }
    res = hr.write(data, str(tmp_path / table), options)  # engine="ray"
    assert res.num_inserts == n

    deadline = time.monotonic() + POLL_TIMEOUT_S
    seen: dict[str, float] = {}
    while True:
        samples = scrape(urls)
        seen = {
            "assigner_in": counter(samples, "hoodie_ray_records_in", table=table, role="assigner"),
            "assigner_out": counter(
                samples, "hoodie_ray_records_out", table=table, role="assigner"
            ),
            "writer_in": counter(samples, "hoodie_ray_records_in", table=table, role="writer"),
            "writer_out": counter(samples, "hoodie_ray_records_out", table=table, role="writer"),
        }
        if all(v >= n for v in seen.values()):
            break
        if time.monotonic() > deadline:
            ours = sorted({name for name, labels, _ in samples if labels.get("table") == table})
            pytest.fail(
                f"record counters of table {table} not all >= {n} after {POLL_TIMEOUT_S:.0f} s: "
                f"{seen}; series with this table seen: {ours or 'none'}"
            )
        time.sleep(0.5)
    assert seen["writer_in"] == n
    assert seen["assigner_in"] == n


def readme_metrics() -> list[tuple[str, str, list[str]]]:
    """(exported name, kind, roles) of every metric the README's table lists."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = text.split("<!-- metrics -->", 1)[1].split("<!-- /metrics -->", 1)[0]
    out = []
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`ray_"):
            continue
        out.append((cells[0].strip("`"), cells[1], [r.strip() for r in cells[2].split(",")]))
    return out


def readme_metrics_missing(
    samples: list[tuple[str, dict[str, str], float]], table: str
) -> list[str]:
    """``name{role=...}`` of each metric and role the README's table lists that ``samples``
    hold no series of for ``table`` (tests/ray/test_dashboard.py runs the stream writer)."""
    listed = readme_metrics()
    assert len(listed) >= 9, listed
    ours = [s for s in samples if s[1].get("table") == table]
    missing = []
    for name, kind, roles in listed:
        names = (
            {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
            if kind.startswith("histogram")
            else {name}
        )
        for role in roles:
            if not any(n in names and labels.get("role") == role for n, labels, _ in ours):
                missing.append(f"{name}{{role={role}}}")
    return missing


def gauge(samples: list[tuple[str, dict[str, str], float]], name: str, **tags: str) -> float | None:
    """The value of gauge ``ray_<name>`` in the one series with ``tags``; None when absent."""
    values = [
        v
        for n, labels, v in samples
        if n == f"ray_{name}" and all(labels.get(k) == val for k, val in tags.items())
    ]
    assert len(values) <= 1, f"{len(values)} series of {name} with {tags}"
    return values[0] if values else None


@pytest.mark.slow  # suite time: the CI suite keeps a lighter test of the same path
def test_gauges_report_live_values_and_every_series_names_its_actor(
    ray_session: Any, tmp_path: Any
) -> None:
    """The index-size gauge is each assigner's key count after the writes (not the 0 it read
    when the assigner started on an empty table), and every series says which actor it is
    (``assigner-1``, ``writer-0``), beyond Ray's WorkerId."""
    urls = metrics_endpoints(ray_session)
    if not urls:
        pytest.skip("Ray's metrics agent is not running (see test_record_counters_exported)")
    table = f"gauges_{uuid.uuid4().hex[:8]}"
    n = 1_000
    options = {
        "hoodie.table.name": table,
        "hoodie.datasource.write.recordkey.field": "id",
        "precombine.field": "ts",
        "write.tasks": "1",
        "write.bucket_assign.tasks": "2",
    }
    data = pa.table({"id": [f"k{i}" for i in range(n)], "ts": list(range(n))})
    path = str(tmp_path / table)
    with hr.HoodieStreamWriter(path, options) as w:
        w.write(data)
        w.checkpoint()
        keys = [s["keys"] for s in w.index_stats()]
        assert sum(keys) == n and all(keys), keys  # both assigners hold keys
        want = {f"assigner-{i}": float(k) for i, k in enumerate(keys)}
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while True:
            samples = [s for s in scrape(urls) if s[1].get("table") == table]
            seen = {
                actor: gauge(samples, "hoodie_ray_index_size", actor=actor, role="assigner")
                for actor in want
            }
            records_in = {
                actor: counter(samples, "hoodie_ray_records_in", actor=actor)
                for actor in (*want, "writer-0")
            }
            buffered = gauge(samples, "hoodie_ray_buffered_bytes", actor="writer-0")
            commits = counter(samples, "hoodie_ray_commits", actor="coordinator")
            done = (
                seen == want
                and records_in == {**{a: float(k) for a, k in want.items()}, "writer-0": n}
                and buffered == 0.0  # flushed by the checkpoint
                and commits == 1
            )
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert seen == want, f"index_size by actor {seen}, index_stats {want}"
        assert records_in["writer-0"] == n and buffered == 0.0 and commits == 1
        untagged = sorted({name for name, labels, _ in samples if not labels.get("actor")})
        assert not untagged, f"series of table {table} without an actor tag: {untagged}"
    assert sorted(hr.read(path).column("id").to_pylist()) == sorted(data.column("id").to_pylist())


def test_gauges_are_set_again_until_the_process_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray drops a gauge's series that was not set within two report intervals (a value set
    once is gone after ~30 s): each process sets its gauges' last values again, from a daemon
    thread, every half report interval."""
    from hoodie_ray.ray import metrics

    sets: list[tuple[float, dict[str, str]]] = []

    class Gauge:
        def set(self, value: float, tags: dict[str, str]) -> None:
            sets.append((value, tags))

    monkeypatch.setattr(metrics, "_metrics", {"hoodie_ray_index_size": Gauge()})
    monkeypatch.setattr(metrics, "_live", {})
    metrics.gauge_index_size("t", 1, 10)
    metrics.gauge_index_size("t", 1, 12)  # the same series: its last value is kept
    metrics.gauge_index_size("t", 0, 5)
    assert metrics._refresher is not None and metrics._refresher.daemon
    assert metrics._refresher.is_alive()
    sets.clear()
    metrics.refresh_gauges()
    assert sorted(sets, key=lambda s: s[1]["actor"]) == [
        (5, {"table": "t", "role": "assigner", "actor": "assigner-0"}),
        (12, {"table": "t", "role": "assigner", "actor": "assigner-1"}),
    ]
    assert 0.5 <= metrics.refresh_interval_s() <= metrics.DEFAULT_REPORT_INTERVAL_S
