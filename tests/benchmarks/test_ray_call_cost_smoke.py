"""Smoke test of the Ray call-cost benchmark at a tiny size: the report's structure (every
variant, the per-argument differences), not how fast anything is."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import ray_call_cost

pytestmark = pytest.mark.ray


def test_each_variant_is_measured(ray_session: Any) -> None:
    for nested in (False, True):
        out = ray_call_cost.measure(calls=20, kib=4, nested=nested)
        assert sorted(out, key=int) == [str(n) for n in ray_call_cost.ARGS]
        assert all(v["actor_us"] >= 0 and v["wall_us"] > 0 for v in out.values())
        assert all("actor_us_per_arg" in out[str(n)] for n in ray_call_cost.ARGS[1:])
