"""Fixtures of the timeline tests: Java-written sample tables unpacked once per session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_TABLES, extract_sample_table


def read_props(root: Path) -> dict[str, str]:
    """``hoodie.properties`` as a dict (enough for version, layout and partition fields)."""
    out: dict[str, str] = {}
    for line in (root / ".hoodie" / "hoodie.properties").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


@pytest.fixture(scope="session")
def shared_sample(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Read-only sample tables, unpacked once per session: ``shared_sample(name) -> root``."""
    cache: dict[str, Path] = {}

    def _get(name: str) -> Path:
        if not SAMPLE_TABLES:
            pytest.skip("../shared/tables is absent (a fresh clone has no ../shared)")
        if name not in cache:
            cache[name] = extract_sample_table(name, tmp_path_factory.mktemp(name))
        return cache[name]

    return _get
