"""cluster.yaml: valid for the Ray cluster launcher, and secure by default. No network needed."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

CLUSTER_YAML = Path(__file__).resolve().parents[1] / "cluster.yaml"


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(CLUSTER_YAML.read_text())


def _commands(cfg: dict[str, Any]) -> list[str]:
    keys = (
        "initialization_commands",
        "setup_commands",
        "head_setup_commands",
        "worker_setup_commands",
        "head_start_ray_commands",
        "worker_start_ray_commands",
    )
    return [c for k in keys for c in cfg.get(k) or []]


def test_matches_the_autoscaler_schema(config: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import ray.autoscaler

    schema_path = os.path.join(os.path.dirname(ray.autoscaler.__file__), "ray-schema.json")
    with open(schema_path) as f:
        schema = json.load(f)
    jsonschema.validate(config, schema)


def test_validates_as_ray_up_would(config: dict[str, Any]) -> None:
    """Merged with the provider's defaults and checked, as ``ray up`` does (offline)."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    assert prepared["head_node_type"] in prepared["available_node_types"]
    # our commands replace the provider defaults (which bind the dashboard to 0.0.0.0)
    assert prepared["head_start_ray_commands"] == config["head_start_ray_commands"]


def test_installs_java_17_and_hoodie_ray(config: dict[str, Any]) -> None:
    setup = " ".join(config["setup_commands"])
    assert "apt-get install -y openjdk-17-jre-headless" in setup
    assert re.search(r"pip install .*hoodie-ray", setup)


def test_dashboard_and_ray_ports_stay_private(config: dict[str, Any]) -> None:
    text = CLUSTER_YAML.read_text()
    commands = _commands(config)
    head_start = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head_start
    assert not any("0.0.0.0" in c for c in commands)
    assert "ray dashboard cluster.yaml" in text  # the documented way in: SSH port forwarding
    # every node type uses the pre-made, cluster-internal security group, so the launcher
    # creates none (its own group would open SSH to 0.0.0.0/0)
    for name, node_type in config["available_node_types"].items():
        assert node_type["node_config"].get("SecurityGroupIds"), name
    rules = config["provider"].get("security_group", {}).get("IpPermissions", [])
    for rule in rules:
        for ip_range in rule.get("IpRanges", []):
            assert ip_range.get("CidrIp") != "0.0.0.0/0", rule


def test_token_authentication_stays_on(config: dict[str, Any]) -> None:
    commands = _commands(config)
    assert not any(re.search(r"RAY_AUTH_MODE=(disabled|off|none)", c) for c in commands)
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = [c for c in config[key] if "ray start" in c]
        assert start and all("RAY_AUTH_MODE=token" in c for c in start), key
    assert "~/.ray/auth_token" in config["file_mounts"]


def test_tables_on_shared_storage_is_documented() -> None:
    text = CLUSTER_YAML.read_text()
    assert "s3://" in text and "shared mount" in text
