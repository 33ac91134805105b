"""A picture of hoodie_ray's Grafana dashboard, drawn from a real Prometheus while a stream
writer runs (for the README: Grafana itself is not installable where this was made).

Starts a local Ray (with its dashboard head, which writes the session's Prometheus scrape
config), Debian's ``prometheus`` on that config (scraping every second; the dashboard test's
``prometheus_server``), and one
``HoodieStreamWriter`` upserting ``--rows`` rows per checkpoint for ``--seconds`` (two writer
tasks, compaction every two commits). Then every panel of :data:`hoodie_ray.ray.dashboard.PANELS`
is queried over the run (``query_range``, the panel's own PromQL with ``$table`` and
``$__rate_interval`` filled in as Grafana fills them) and drawn, one plot per panel in the
dashboard's order, into ``--out`` (PNG). Needs matplotlib (``pip install matplotlib``; not a
dependency of hoodie_ray).

    python scripts/dashboard_snapshot.py [--seconds 90] [--out docs/dashboard.png]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def run_writer(path: Path, table: str, seconds: float, rows: int) -> None:
    import hoodie_ray as hr

    options = {
        "hoodie.table.name": table,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "precombine.field": "ts",
        "write.tasks": "2",
        "compaction.delta_commits": "2",
    }
    rng = np.random.default_rng(7)
    keys = 20 * rows
    end = time.monotonic() + seconds
    ts = 0
    with hr.HoodieStreamWriter(str(path), options) as w:
        while time.monotonic() < end:
            ids = rng.integers(0, keys, rows)
            ts += 1
            w.write(
                pa.table(
                    {
                        "id": pa.array(np.char.add("k", ids.astype(str))),
                        "p": pa.array(np.char.add("p", (ids % 4).astype(str))),
                        "ts": pa.array(np.full(rows, ts)),
                        "v": pa.array(rng.random(rows)),
                    }
                )
            )
            w.checkpoint()
            time.sleep(0.5)  # a stream's pace: checkpoints every second or so


def _legend(template: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{(\w+)\}\}", lambda m: labels.get(m.group(1), ""), template).strip()


def draw(prometheus: str, table: str, start: float, end: float, out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("needs matplotlib: pip install matplotlib") from None
    from hoodie_ray.ray.dashboard import PANELS

    cols = 3
    rows = (len(PANELS) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(15, 3.2 * rows), squeeze=False)
    fig.suptitle(f"hoodie_ray dashboard (table={table}), from Prometheus", fontsize=13)
    for ax, panel in zip(axes.flat, PANELS, strict=False):
        for expr, legend in panel.targets:
            q = expr.replace("$table", table).replace("$__rate_interval", "15s")
            params = urllib.parse.urlencode(
                {"query": q, "start": f"{start:.0f}", "end": f"{end:.0f}", "step": "2"}
            )
            doc = _get(f"{prometheus}/api/v1/query_range?{params}")
            for series in doc["data"]["result"]:
                t = np.array([float(v[0]) for v in series["values"]]) - start
                y = np.array([float(v[1]) for v in series["values"]])
                ax.plot(t, y, linewidth=1.2, label=_legend(legend, series["metric"]))
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel("seconds", fontsize=8)
        ax.set_ylabel(panel.unit, fontsize=8)
        ax.tick_params(labelsize=7)
        if ax.lines:
            ax.legend(fontsize=6, loc="upper left")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(PANELS) :]:
        ax.axis("off")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=72)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--out", default="docs/dashboard.png")
    args = ap.parse_args(argv)
    os.environ.setdefault("RAY_metrics_report_interval_ms", "2000")
    import ray

    from hoodie_ray.ray.runtime import ensure_ray
    from tests.ray.test_dashboard import prometheus_server  # the dashboard test's server

    ensure_ray(num_cpus=os.cpu_count(), include_dashboard=True, log_to_driver=False)
    work = Path(tempfile.mkdtemp(prefix="dashboard-snapshot-"))
    table = "trips"
    try:
        with prometheus_server(ray, work) as prometheus:
            if prometheus is None:
                raise SystemExit("needs Debian's prometheus and Ray's session scrape config")
            start = time.time()
            run_writer(work / table, table, args.seconds, args.rows)
            time.sleep(6)  # the last reports reach Prometheus
            draw(prometheus, table, start, time.time(), Path(args.out))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
