"""Fixtures of the HFile tests."""

from __future__ import annotations

import pytest

from hoodie_ray.hfile import _format


@pytest.fixture
def java_deflate(monkeypatch: pytest.MonkeyPatch) -> None:
    """GZ blocks deflated as Java deflates them (zlib, level 6), for byte-for-byte comparisons
    with Java-written HFiles (the writer's default is the fastest deflate installed)."""
    monkeypatch.setattr(_format, "deflate", _format.JAVA_DEFLATE)
