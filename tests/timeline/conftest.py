"""Helpers of the timeline tests (the sample tables come from the ``shared_sample`` fixture of
tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path


def read_props(root: Path) -> dict[str, str]:
    """``hoodie.properties`` as a dict (enough for version, layout and partition fields)."""
    out: dict[str, str] = {}
    for line in (root / ".hoodie" / "hoodie.properties").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out
