"""The Grafana dashboard of hoodie_ray's metrics, installed the way Ray's own dashboards are.

Ray writes its Grafana dashboards and a provisioning config that loads every JSON file of
``<session>/metrics/grafana/dashboards`` into Grafana's "Ray" folder (``grafana-server
--config <session>/metrics/grafana/grafana.ini``). :func:`install_dashboard` puts
``hoodie_ray_grafana_dashboard.json`` there, beside Ray's; it is also in the package
(:data:`DASHBOARD_FILE`) for a Grafana provisioned another way (import it in the UI).

The panels are defined once, here (:data:`PANELS`): the JSON file is generated from them
(``python -m hoodie_ray.ray.dashboard --write``) and a test checks that every panel's query
returns data from a real Prometheus server while a stream writer runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoodie_ray.exceptions import HoodieOptionError

DASHBOARD_UID = "hoodie-ray"
DASHBOARD_FILE = Path(__file__).with_name("hoodie_ray_grafana_dashboard.json")
"""The dashboard JSON shipped in the package."""

_SEL = 'table=~"$table"'
_RATE = "$__rate_interval"


@dataclass(frozen=True)
class Panel:
    """One time-series panel: its title, unit (Grafana's), and PromQL targets
    ``(expression, legend)``; ``$table`` and ``$__rate_interval`` are Grafana variables."""

    title: str
    unit: str
    targets: tuple[tuple[str, str], ...]
    description: str = ""


def _rate(metric: str, by: str, extra: str = "") -> str:
    sel = _SEL + (f", {extra}" if extra else "")
    return f"sum by ({by}) (rate(ray_hoodie_ray_{metric}_total{{{sel}}}[{_RATE}]))"


def _quantile(q: float, metric: str, by: str) -> str:
    return (
        f"histogram_quantile({q}, sum by (le, {by}) "
        f"(rate(ray_hoodie_ray_{metric}_bucket{{{_SEL}}}[{_RATE}])))"
    )


PANELS: tuple[Panel, ...] = (
    Panel(
        "Rows in per second, by actor",
        "rowsps",
        ((_rate("records_in", "table, role, actor"), "{{table}} {{actor}}"),),
        "Records each assigner and writer received.",
    ),
    Panel(
        "Rows written per second, by writer",
        "rowsps",
        ((_rate("records_out", "table, actor", 'role="writer"'), "{{table}} {{actor}}"),),
        "Records the writers wrote to log and base files.",
    ),
    Panel(
        "Bytes written per second",
        "Bps",
        ((_rate("bytes_written", "table, role, actor"), "{{table}} {{actor}}"),),
        "Writers' flushes and compactors' base files.",
    ),
    Panel(
        "Commits per minute",
        "short",
        ((f"60 * {_rate('commits', 'table')}", "{{table}}"),),
    ),
    Panel(
        "Commit latency (instant requested to completed)",
        "s",
        (
            (_quantile(0.5, "commit_latency_s", "table"), "p50 {{table}}"),
            (_quantile(0.95, "commit_latency_s", "table"), "p95 {{table}}"),
        ),
    ),
    Panel(
        "Checkpoint phases (p50)",
        "s",
        ((_quantile(0.5, "checkpoint_phase_s", "table, phase"), "{{table}} {{phase}}"),),
        "Where a checkpoint's time goes: begin, input, align, flush, commit.",
    ),
    Panel(
        "Writer buffers",
        "bytes",
        ((f"sum by (table, actor) (ray_hoodie_ray_buffered_bytes{{{_SEL}}})", "{{actor}}"),),
        "Bytes each writer holds until its next flush.",
    ),
    Panel(
        "Key index size",
        "short",
        ((f"sum by (table, actor) (ray_hoodie_ray_index_size{{{_SEL}}})", "{{actor}}"),),
        "Record keys in each bucket assigner's index.",
    ),
    Panel(
        "Compaction and clustering",
        "short",
        (
            (
                f"max by (table) (ray_hoodie_ray_pending_compactions{{{_SEL}}})",
                "pending compactions {{table}}",
            ),
            (
                f"60 * {_rate('compacted_slices', 'table')}",
                "file slices compacted / min {{table}}",
            ),
            (
                f"max by (table) (ray_hoodie_ray_pending_clusterings{{{_SEL}}})",
                "pending clusterings {{table}}",
            ),
            (
                f"60 * {_rate('clustered_groups', 'table')}",
                "groups clustered / min {{table}}",
            ),
        ),
        "Compaction and clustering plans scheduled and not committed, and the progress of "
        "the compactors and clustering tasks.",
    ),
)


def dashboard() -> dict[str, Any]:
    """The Grafana dashboard (JSON model) of :data:`PANELS`."""
    panels = []
    for i, p in enumerate(PANELS):
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": p.title,
                "description": p.description,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                "targets": [
                    {
                        "datasource": {"type": "prometheus", "uid": "${datasource}"},
                        "expr": expr,
                        "legendFormat": legend,
                        "refId": chr(ord("A") + j),
                    }
                    for j, (expr, legend) in enumerate(p.targets)
                ],
            }
        )
    return {
        "uid": DASHBOARD_UID,
        "title": "hoodie_ray",
        "tags": ["hoodie_ray", "hudi", "ray"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "10s",
        "time": {"from": "now-30m", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "hide": 0,
                },
                {
                    "name": "table",
                    "label": "table",
                    "type": "query",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": "label_values(ray_hoodie_ray_records_in_total, table)",
                    "definition": "label_values(ray_hoodie_ray_records_in_total, table)",
                    "refresh": 2,
                    "includeAll": True,
                    "multi": True,
                    "allValue": ".+",
                    "current": {"text": "All", "value": "$__all"},
                },
            ]
        },
        "panels": panels,
    }


def dashboard_json() -> str:
    """:func:`dashboard` as the package's JSON file holds it."""
    return json.dumps(dashboard(), indent=2) + "\n"


def ray_dashboards_dir(session_dir: str | Path | None = None) -> Path:
    """The folder of Ray's Grafana dashboards in a Ray session (the running one's, else the
    latest on this machine: ``/tmp/ray/session_latest``)."""
    if session_dir is None:
        session_dir = _running_session_dir() or "/tmp/ray/session_latest"
    folder = Path(session_dir) / "metrics" / "grafana" / "dashboards"
    if not folder.is_dir():
        raise HoodieOptionError(
            f"no Ray Grafana dashboards folder at {folder}: start Ray first (with "
            "ray[default], whose metrics agent writes it), or give the session folder"
        )
    return folder


def _running_session_dir() -> str | None:
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    try:
        return str(ray._private.worker.global_worker.node.get_session_dir_path())
    except Exception:
        return None


def install_dashboard(session_dir: str | Path | None = None) -> Path:
    """Write the dashboard beside Ray's own in the session's Grafana dashboards folder (the
    folder Ray's Grafana provisioning loads); the file written. Idempotent."""
    target = ray_dashboards_dir(session_dir) / "hoodie_ray_grafana_dashboard.json"
    target.write_text(dashboard_json())
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hoodie_ray.ray.dashboard")
    parser.add_argument("--write", action="store_true", help="regenerate the package's JSON")
    args = parser.parse_args(argv)
    if args.write:
        DASHBOARD_FILE.write_text(dashboard_json())
    else:
        sys.stdout.write(dashboard_json())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
