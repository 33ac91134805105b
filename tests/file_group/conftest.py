"""Fixtures of the file-group tests (shared with the timeline tests)."""

from __future__ import annotations

from tests.timeline.conftest import read_props, shared_sample

__all__ = ["read_props", "shared_sample"]
