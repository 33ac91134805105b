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


def test_every_metric_the_readme_lists_is_exported_with_its_tags(
    ray_session: Any, tmp_path: Any
) -> None:
    urls = metrics_endpoints(ray_session)
    if not urls:
        pytest.skip("Ray's metrics agent is not running (see test_record_counters_exported)")
    listed = readme_metrics()
    assert len(listed) >= 9, listed
    table = f"readme_{uuid.uuid4().hex[:8]}"
    options = {
        "hoodie.table.name": table,
        "hoodie.datasource.write.recordkey.field": "id",
        "precombine.field": "ts",
        "write.tasks": "1",
        "compaction.delta_commits": "1",
    }
    data = pa.table({"id": [f"k{i}" for i in range(500)], "ts": list(range(500))})
    missing: list[str] = []
    with hr.HoodieStreamWriter(str(tmp_path / table), options) as w:
        w.write(data)
        w.checkpoint()
        w.write(data)  # the writer is open and buffering while the endpoint is read
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while True:
            samples = [s for s in scrape(urls) if s[1].get("table") == table]
            missing = []
            for name, kind, roles in listed:
                names = (
                    {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
                    if kind.startswith("histogram")
                    else {name}
                )
                for role in roles:
                    if not any(
                        n in names and labels.get("role") == role for n, labels, _ in samples
                    ):
                        missing.append(f"{name}{{role={role}}}")
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert not missing, f"not exported with table={table}: {missing}"
