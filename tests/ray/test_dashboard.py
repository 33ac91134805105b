"""The Grafana dashboard: the package's JSON is the one :data:`PANELS` makes, it installs
beside Ray's own dashboards, and every panel's query returns data from a real Prometheus
server (Debian's ``prometheus``, which ``.ci/run`` installs) scraping the session's Ray with
the scrape config Ray writes, while a stream writer runs."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import hoodie_ray as hr
from hoodie_ray.ray.dashboard import (
    DASHBOARD_FILE,
    PANELS,
    dashboard,
    dashboard_json,
    install_dashboard,
)
from tests.ray.test_metrics import metrics_endpoints, readme_metrics_missing, scrape

POLL_TIMEOUT_S = 60.0


def test_package_json_is_the_panels() -> None:
    assert DASHBOARD_FILE.read_text() == dashboard_json(), (
        "regenerate it: python -m hoodie_ray.ray.dashboard --write"
    )
    doc = dashboard()
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    assert len(doc["panels"]) == len(PANELS) and all("$table" in e for e in exprs)


def _session_dir(ray: Any) -> Path:
    return Path(ray._private.worker.global_worker.node.get_session_dir_path())


@pytest.mark.ray
def test_install_beside_rays_dashboards(ray_session: Any) -> None:
    folder = _session_dir(ray_session) / "metrics" / "grafana" / "dashboards"
    if not folder.is_dir():
        pytest.skip("Ray wrote no Grafana dashboards folder (ray[default] is not installed)")
    path = install_dashboard()
    assert path.parent == folder and json.loads(path.read_text())["uid"] == "hoodie-ray"
    # Ray's provisioning config loads every file of that folder
    provisioning = (folder.parent / "provisioning" / "dashboards" / "default.yml").read_text()
    assert str(folder) in provisioning


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


@contextlib.contextmanager
def prometheus_server(ray: Any, tmp_path: Path) -> Iterator[str | None]:
    """A Prometheus server with Ray's session scrape config (every second instead of 10);
    its base URL, or None where Debian's prometheus or Ray's config is not there."""
    binary = shutil.which("prometheus")
    config = _session_dir(ray) / "metrics" / "prometheus" / "prometheus.yml"
    if binary is None or not config.is_file():
        yield None
        return
    text = config.read_text().replace("scrape_interval: 10s", "scrape_interval: 1s")
    (tmp_path / "prometheus.yml").write_text(text)
    url = f"http://127.0.0.1:{_free_port()}"
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address={url.removeprefix('http://')}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            assert proc.poll() is None, "prometheus exited"
            assert time.monotonic() < deadline, "prometheus not ready in 30 s"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.ray
def test_every_metric_and_panel_while_a_stream_writer_runs(
    ray_session: Any, tmp_path: Path
) -> None:
    """One stream writer (two checkpoints: the first schedules a compaction, the second runs
    it; then open and buffering), and a table of the same name clustered by Ray tasks: every
    metric the README lists is on Ray's endpoints with its roles, and every panel's query
    returns data from Prometheus (where installed)."""
    urls = metrics_endpoints(ray_session)
    if not urls:
        pytest.skip("Ray's metrics agent is not running (see test_record_counters_exported)")
    table = f"dash_{uuid.uuid4().hex[:8]}"
    options = {
        "hoodie.table.name": table,
        "hoodie.datasource.write.recordkey.field": "id",
        "precombine.field": "ts",
        "write.tasks": "2",
        "compaction.delta_commits": "1",
    }
    queries = [
        (p.title, expr.replace("$table", table).replace("$__rate_interval", "1m"))
        for p in PANELS
        for expr, _ in p.targets
    ]
    data = pa.table({"id": [f"k{j}" for j in range(500)], "ts": list(range(500))})
    # clustering groups counted: a table of the same name clustered by Ray tasks
    small = {**options, "hoodie.parquet.small.file.limit": "0"}
    for j in range(2):
        hr.write(data.slice(j, 1), str(tmp_path / "other" / table), small, engine="local")
    assert hr.cluster(str(tmp_path / "other" / table), small, engine="ray").instant
    with (
        prometheus_server(ray_session, tmp_path) as prometheus,
        hr.HoodieStreamWriter(str(tmp_path / table), options) as w,
    ):
        for _ in range(2):
            w.write(data)
            w.checkpoint()
        w.write(data)  # the writer is open and buffering while the metrics are read
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while True:
            missing = readme_metrics_missing(scrape(urls), table)
            empty = []
            for title, q in queries if prometheus else ():
                doc = _get(f"{prometheus}/api/v1/query?query={urllib.parse.quote(q)}")
                if doc["status"] != "success" or not doc["data"]["result"]:
                    empty.append(f"{title}: {q}")
            if (not missing and not empty) or time.monotonic() > deadline:
                break
            time.sleep(1.0)
    assert not missing, f"not exported with table={table}: {missing}"
    assert not empty, "panels with no data:\n" + "\n".join(empty)
    if prometheus is None:
        pytest.skip("metrics checked; the panels need Debian's prometheus (.ci/run installs it)")
